"""sin, cos, tan in f64, written with :class:`F64`.

Reduction: n = rint(x 2/pi), r = x - n pi/2 as a double-double, with pi/2 in three parts
(P1 + P2 + P3, each the rounded remainder of the previous). fma(-n, P1, x) is exact (the
result is below 1 and a multiple of 2^-53), n P2 is split exactly with fma, so r is accurate
to about n 2^-160 + 2^-106 |r|: full precision for |x| < 2^30. Above that the reduction is
done by Payne-Hanek (:mod:`kaio.mathlib.payne_hanek`), on the lanes that need it only.

Kernels on [-pi/4, pi/4]: Taylor polynomials of sin (degree 19) and cos (degree 20) with fma
and the low part of r folded in; tan = sin / cos (or -cos / sin in odd quadrants).

Native f32 (:func:`native_f32`): the same code in f32 (pi/2 in three f32 parts, sin to degree 9,
cos to degree 10) for |x| < 2^17; larger arguments run the f64 code in an ``if``.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from .. import dtypes as dt
from . import payne_hanek
from .constants import exact, factorial_inv, round_bits
from .ctx import F64

TWO_OVER_PI = float(exact("2_pi"))
CW_LIMIT = 2.0 ** 30
F32_LIMIT = 2.0 ** 17     # native f32 Cody-Waite range; larger f32 arguments take the f64 path
TINY = 2.0 ** -27


@lru_cache(maxsize=None)
def trig_consts(dtype) -> dict:
    """pi/2 in three parts of the dtype's precision, and the Taylor coefficients:
    sin(r) = r + r^3 S(r^2) (S: -1/3!, 1/5!, ...), cos(r) = 1 - r^2/2 + r^4 C(r^2) (C: 1/4!, ...)."""
    p = 53 if dtype is dt.f64 else 24
    rest, parts = exact("pi_2"), []
    for _ in range(3):
        parts.append(round_bits(rest, p))
        rest -= Fraction(parts[-1])
    ns, nc = (9, 11) if p == 53 else (4, 6)
    return {"pio2": parts,
            "sin": [float((-1) ** k * factorial_inv(2 * k + 1)) for k in range(1, ns + 1)],
            "cos": [float((-1) ** k * factorial_inv(2 * k)) for k in range(2, nc)]}


def reduce_cw(m, x):
    """(n as a float, rh, rl): Cody-Waite reduction by pi/2 (f64: accurate for |x| < CW_LIMIT)."""
    p1, p2, p3 = trig_consts(m.F)["pio2"]
    n = m.rint(m.mul(x, TWO_OVER_PI))
    nn = m.neg(n)
    a = m.fma(nn, p1, x)
    bh = m.mul(nn, p2)
    bl = m.fma(nn, p2, m.neg(bh))
    s, e = m.two_sum(a, bh)
    tail = m.add(m.add(e, bl), m.mul(nn, p3))
    rh, rl = m.two_sum(s, tail)
    return n, rh, rl


def reduce(m, x):
    """(quadrant as an integer in 0..3, rh, rl) for finite x. f64: Payne-Hanek above CW_LIMIT;
    f32: Cody-Waite only (the callers route |x| >= F32_LIMIT to the f64 code)."""
    if m.F is not dt.f64:
        n, rh, rl = reduce_cw(m, x)
        return m.to_int(m.sub(n, m.mul(m.floor(m.mul(n, 0.25)), 4.0))), rh, rl
    return payne_hanek.reduce_any(m, x, reduce_cw, CW_LIMIT)


def sin_kernel(m, rh, rl, z):
    return m.add(rh, m.fma(m.mul(rh, z), m.horner(z, trig_consts(m.F)["sin"]), rl))


def cos_kernel(m, rh, rl, z):
    ze = m.fma(rh, rh, m.neg(z))
    hz = m.mul(z, 0.5)
    w = m.sub(1.0, hz)
    tail = m.sub(m.sub(1.0, w), hz)
    tail = m.sub(tail, m.fma(ze, 0.5, m.mul(rh, rl)))
    tail = m.fma(m.mul(z, z), m.horner(z, trig_consts(m.F)["cos"]), tail)
    return m.add(w, tail)


def _sincos(m, x):
    q, rh, rl = reduce(m, x)
    z = m.mul(rh, rh)
    return q, sin_kernel(m, rh, rl, z), cos_kernel(m, rh, rl, z)


def _quadrant(m, q, v0, v1, v2, v3):
    c1 = m.b.cmp("eq", q, m.ic(1))
    c2 = m.b.cmp("eq", q, m.ic(2))
    c3 = m.b.cmp("eq", q, m.ic(3))
    return m.sel(c3, v3, m.sel(c2, v2, m.sel(c1, v1, v0)))


def _finish(m, x, r, tiny_value):
    r = m.sel(m.lt(m.abs(x), TINY), tiny_value, r)
    return m.sel(m.isinf(x), float("nan"), m.sel(m.isnan(x), x, r))


def sin(m, x):
    q, s, c = _sincos(m, x)
    return _finish(m, x, _quadrant(m, q, s, c, m.neg(s), m.neg(c)), x)


def cos(m, x):
    q, s, c = _sincos(m, x)
    return _finish(m, x, _quadrant(m, q, c, m.neg(s), m.neg(c), s), m.c(1.0))


def tan(m, x):
    q, s, c = _sincos(m, x)
    odd = m.b.cmp("eq", m.iop("and", q, 1), m.ic(1))
    r = m.sel(odd, m.div(m.neg(c), s), m.div(s, c))
    return _finish(m, x, r, x)


def native_f32(fn):
    """An f32 implementation of sin/cos/tan: the f32 code for |x| < F32_LIMIT, and the f64 code
    (exact Payne-Hanek reduction, rounded once to f32) in an ``if`` for larger finite |x|."""
    f64_impl = {"sin": sin, "cos": cos, "tan": tan}[fn]

    def impl(m, x):
        r = f64_impl(m, x)
        a = m.abs(x)
        big = m.and_(m.ge(a, F32_LIMIT), m.lt(a, float("inf")))
        b = m.b
        with b.if_(big, [m.F]) as (then, other, res):
            with m.scoped(then):
                m64 = F64(b)
                b.yield_(b.cast(f64_impl(m64, b.cast(x, dt.f64)), m.F))
            with m.scoped(other):
                b.yield_(r)
        return res[0]
    return impl
