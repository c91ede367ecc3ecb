"""fmod (C ``fmod``, the IR's float ``rem``): x - trunc(x / y) y, computed exactly.

No target has an exact float remainder instruction (LLVM's ``frem`` is expanded by the nvptx
and AMDGPU backends as ``x - trunc(x / y) * y`` with a rounded quotient, wrong whenever x / y
rounds across an integer: fmod(1, 0.1), fmod(max, 0.1)...), so every backend runs this loop.

|x| is reduced by t = |y| 2^k, the largest such multiple with t <= |x| (k >= 0 from the
exponents, then one doubling): then t <= |x| < 2t, so |x| - t is exact (Sterbenz) and smaller
than t, i.e. each step lowers the exponent of |x| by at least one. The loop ends when
|x| < |y|: what is left is |x| mod |y|, exactly, and takes x's sign. At most ~2100 steps (f64
max / smallest subnormal), ~280 in f32; each step is ~25 integer and float operations.

Written with :class:`~kaio.mathlib.ctx.F64` in the argument's own format (f32 or f64): every
operation is exact, so no wider type is needed.
"""
from __future__ import annotations


def _exponent(m, v):
    """floor(log2 v) + bias for finite v > 0 (subnormals counted by their leading bit), as an
    integer of the bits' type."""
    sub = m.lt(v, 2.0 ** (1 - m.bias))
    lifted = m.sel(sub, m.mul(v, 2.0 ** (m.mant + 1)), v)     # exact: a normal number
    e = m.iop("shr", m.bits(lifted), m.mant)
    return m.iop("sub", e, m.sel(sub, m.ic(m.mant + 1), m.ic(0)))


def _times_pow2(m, v, k):
    """v 2^k for 0 <= k <= 3 bias, in three factors 2^j (0 <= j <= bias: normal numbers), for a
    product that is finite: then every partial product is exact too (k reaches ~2100 in f64)."""
    for _ in range(2):
        step = m.b.binary("min", k, m.ic(m.bias))
        v = m.mul(v, m.pow2(step))
        k = m.iop("sub", k, step)
    return m.mul(v, m.pow2(k))


def fmod(m, x, y):
    """fmod(x, y) of two values of ``m``'s float type (see the module docstring)."""
    b = m.b
    ax, ay = m.abs(x), m.abs(y)
    special = m.or_(m.or_(m.isnan(x), m.isnan(y)), m.or_(m.isinf(x), m.eq(ay, 0.0)))
    ax = m.sel(special, 0.0, ax)                  # the loop does not run; NaN is chosen below
    ay = m.sel(special, 1.0, ay)
    ey = _exponent(m, ay)
    op, before, after = b.while_([ax])
    with m.scoped(before):
        cur = before.args[0]
        b.condition(m.ge(cur, ay), cur)
    with m.scoped(after):
        cur = after.args[0]
        k = m.iop("sub", m.iop("sub", _exponent(m, cur), ey), 1)
        t = _times_pow2(m, ay, b.binary("max", k, m.ic(0)))     # exact: t <= cur
        t2 = m.mul(t, 2.0)
        t = m.sel(m.le(t2, cur), t2, t)
        b.yield_(m.sub(cur, t))
    return m.sel(special, float("nan"), m.copysign(op.results[0], x))
