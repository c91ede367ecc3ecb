"""Payne-Hanek reduction by pi/2 for large f64 arguments (|x| >= 2^30), in IR.

x = M 2^E with M a 53-bit integer. x 2/pi = sum_j M c_j 2^(E - 24 (j + 1)) with c_j the 24-bit
chunks of 2/pi (:func:`kaio.mathlib.constants.two_over_pi_chunks`). Terms that are multiples of 4
cannot change the quadrant or the fraction and are skipped: the first kept chunk is j0 =
max(0, floor((E - 26) / 24) + 1), picked with a chain of selects. Eight chunks follow; each
product M c_j is split exactly (fma) into two doubles, each reduced modulo 4 and split into an
integer part (summed exactly) and a fraction in (-1, 1) (summed as a double-double). The result
n + f is rounded to the nearest integer n (exactly), and r = f pi/2 as a double-double.

Accuracy: the fraction is known to about 2^-100 absolute, so r keeps full f64 precision unless
x lies within ~2^-47 relative of a multiple of pi/2 (only a handful of f64 values are that close;
f32 arguments never are). The work sits in an ``if`` taken only by lanes with large arguments.
"""
from __future__ import annotations

from .. import dtypes as dt
from .constants import exact, split, two_over_pi_chunks

CHUNKS = two_over_pi_chunks(48, 24)
K = 8
J0_MAX = 40          # E <= 971 (largest finite f64) gives j0 <= 40; j0 + K <= 48
PIO2 = split(exact("pi_2"), 53, 2)


def _mod4_parts(m, v):
    """(integer part in -3..3, fraction in (-1, 1)) of v modulo 4 (remainder with the sign of
    v, so every step is exact: a negative v below 4 in magnitude is kept as is)."""
    v4 = m.sub(v, m.mul(m.trunc(m.mul(v, 0.25)), 4.0))
    i = m.trunc(v4)
    return i, m.sub(v4, i)


def payne_hanek(m, x):
    """(quadrant i64 0..3, rh, rl) for finite |x| >= 2^30."""
    ix = m.bits(m.abs(x))
    e = m.iop("sub", m.iop("shr", ix, 52), 1075)
    mant = m.to_float(m.iop("or", m.iop("and", ix, (1 << 52) - 1), 1 << 52))
    j0 = m.iop("add", m.iop("div", m.iop("sub", e, 26), 24), 1)
    j0 = m.b.select(m.b.cmp("ge", e, m.ic(26)), j0, m.ic(0))
    conds = [m.b.cmp("ge", j0, m.ic(j)) for j in range(1, J0_MAX + 1)]
    ints = None
    sh = sl = None
    for i in range(K):
        c = m.pick(conds, [float(CHUNKS[j + i]) for j in range(J0_MAX + 1)])
        w = m.iop("sub", e, m.iop("add", m.iop("mul", j0, 24), 24 * i + 24))
        scale = m.pow2(w)
        p, pe = m.two_prod(mant, c)
        for v in (m.mul(p, scale), m.mul(pe, scale)):
            iv, fv = _mod4_parts(m, v)
            ints = iv if ints is None else m.add(ints, iv)
            if sh is None:
                sh, sl = fv, m.c(0.0)
            else:
                s, err = m.two_sum(sh, fv)
                sh, sl = s, m.add(sl, err)
    # round to the nearest integer: sh - rint(sh) is exact (Sterbenz), the rest is in [-1/2, 1/2]
    sh, sl = m.fast_two_sum(sh, sl)
    i2 = m.rint(sh)
    ints = m.add(ints, i2)
    fh, fl = m.fast_two_sum(m.sub(sh, i2), sl)
    rh, re = m.two_prod(fh, PIO2[0])
    rl = m.add(re, m.fma(fh, PIO2[1], m.mul(fl, PIO2[0])))
    rh, rl = m.fast_two_sum(rh, rl)
    q = m.to_int(m.sub(ints, m.mul(m.floor(m.mul(ints, 0.25)), 4.0)))
    # the reduction was of |x|: for x < 0 negate the residue and the quadrant (mod 4)
    neg = m.lt(x, 0.0)
    q = m.b.select(neg, m.iop("and", m.iop("sub", 4, q), 3), q)
    return q, m.sel(neg, m.neg(rh), rh), m.sel(neg, m.neg(rl), rl)


def reduce_any(m, x, reduce_cw, limit):
    """Cody-Waite for |x| < limit, Payne-Hanek (in an ``if``) for finite |x| >= limit."""
    n, rh, rl = reduce_cw(m, x)
    q = m.to_int(m.sub(n, m.mul(m.floor(m.mul(n, 0.25)), 4.0)))
    a = m.abs(x)
    big = m.and_(m.ge(a, limit), m.lt(a, float("inf")))
    b = m.b
    with b.if_(big, [dt.i64, dt.f64, dt.f64]) as (then, other, res):
        with m.scoped(then):
            b.yield_(*payne_hanek(m, x))
        with m.scoped(other):
            b.yield_(q, rh, rl)
    return res
