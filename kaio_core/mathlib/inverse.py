"""atan, atan2, asin, acos in f64, written with :class:`F64`.

Core: atan(t) for t in [0, 1] given as t + tl (tl the exact remainder of the division that
produced t). With c = k/4 (k = rint(4t)), atan(t) = atan(c) + atan(u), u = (t - c) / (1 + t c),
|u| <= 1/8; atan(c) is a double-double constant, atan(u) the odd Taylor series (degree 19,
fma). atan2 reduces by |y| <= |x| (else pi/2 - ...), mirrors for x < 0 (pi - ...) and takes the
sign of y, with the C99 special cases (zeros, infinities) handled by selects; atan, asin
(atan2(x, sqrt(1 - x^2))) and acos (atan2(sqrt(1 - x^2), x)) reuse it.
"""
from __future__ import annotations

from fractions import Fraction

from .constants import dd, dec_atan, split

ATAN_TABLE = [(0.0, 0.0)] + [split(dec_atan(Fraction(k, 4)), 53, 2) for k in range(1, 5)]
ATAN_COEFFS = [float(Fraction((-1) ** j, 2 * j + 1)) for j in range(1, 11)]   # -1/3, 1/5, ...
PI = dd("pi")
PI_2 = dd("pi_2")


def atan_unit(m, t, tl):
    """(hi, lo) of atan(t + tl) for t in [0, 1] (t = 0 gives 0)."""
    k = m.rint(m.mul(t, 4.0))
    conds = [m.ge(k, float(j)) for j in range(1, 5)]
    c = m.mul(k, 0.25)
    den = m.fma(t, c, 1.0)
    u = m.div(m.sub(t, c), den)
    rem = m.fma(m.neg(u), den, m.sub(t, c))             # exact remainder of the division
    fac = m.div(m.fma(c, c, 1.0), m.mul(den, den))       # du/dt, for the tl correction
    ul = m.fma(tl, fac, m.div(rem, den))
    z = m.mul(u, u)
    at = m.add(u, m.fma(m.mul(u, z), m.horner(z, ATAN_COEFFS), ul))
    hi = m.pick(conds, [h for h, _ in ATAN_TABLE[:5]])
    lo = m.pick(conds, [lo for _, lo in ATAN_TABLE[:5]])
    return hi, m.add(lo, at)


def _sub_dd(m, ch, cl, hi, lo):
    """(ch + cl) - (hi + lo) rounded once more."""
    s, e = m.two_sum(ch, m.neg(hi))
    return m.add(s, m.add(e, m.sub(cl, lo)))


def atan2(m, y, x):
    a, b = m.abs(y), m.abs(x)
    swap = m.gt(a, b)
    num = m.sel(swap, b, a)
    den = m.sel(swap, a, b)
    t = m.div(num, den)
    tl = m.div(m.fma(m.neg(t), den, num), den)
    both_inf = m.and_(m.isinf(a), m.isinf(b))
    both_zero = m.and_(m.eq(a, 0.0), m.eq(b, 0.0))
    tl = m.sel(m.lt(den, float("inf")), tl, 0.0)
    t = m.sel(both_inf, 1.0, m.sel(both_zero, 0.0, t))
    tl = m.sel(m.or_(both_inf, both_zero), 0.0, tl)
    hi, lo = atan_unit(m, t, tl)
    # swapped: pi/2 - atan; then x < 0 (sign bit): pi - that
    s_hi, s_lo = m.fast_two_sum(hi, lo)
    sw_hi, sw_lo = m.two_sum(PI_2[0], m.neg(s_hi))
    sw_lo = m.add(sw_lo, m.sub(PI_2[1], s_lo))
    r_hi = m.sel(swap, sw_hi, s_hi)
    r_lo = m.sel(swap, sw_lo, s_lo)
    r = m.add(r_hi, r_lo)
    r = m.sel(m.signbit(x), _sub_dd(m, PI[0], PI[1], r_hi, r_lo), r)
    r = m.copysign(r, y)
    return m.sel(m.or_(m.isnan(x), m.isnan(y)), float("nan"), r)


def atan(m, x):
    a = m.abs(x)
    big = m.gt(a, 1.0)
    inv = m.div(1.0, a)
    t = m.sel(big, inv, a)
    tl = m.sel(big, m.div(m.fma(m.neg(inv), a, 1.0), a), 0.0)
    tl = m.sel(m.lt(a, float("inf")), tl, 0.0)
    hi, lo = atan_unit(m, t, tl)
    s_hi, s_lo = m.fast_two_sum(hi, lo)
    r = m.sel(big, _sub_dd(m, PI_2[0], PI_2[1], s_hi, s_lo), m.add(s_hi, s_lo))
    return m.sel(m.isnan(x), x, m.copysign(r, x))


def asin(m, x):
    s = m.sqrt(m.fma(m.neg(x), x, 1.0))
    r = atan2(m, x, s)
    return m.sel(m.gt(m.abs(x), 1.0), float("nan"), r)


def acos(m, x):
    s = m.sqrt(m.fma(m.neg(x), x, 1.0))
    r = atan2(m, s, x)
    return m.sel(m.gt(m.abs(x), 1.0), float("nan"), r)
