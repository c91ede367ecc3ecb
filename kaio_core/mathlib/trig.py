"""sin, cos, tan in f64, written with :class:`F64`.

Reduction: n = rint(x 2/pi), r = x - n pi/2 as a double-double, with pi/2 in three parts
(P1 + P2 + P3, each the rounded remainder of the previous). fma(-n, P1, x) is exact (the
result is below 1 and a multiple of 2^-53), n P2 is split exactly with fma, so r is accurate
to about n 2^-160 + 2^-106 |r|: full precision for |x| < 2^30. Above that the reduction is
done by Payne-Hanek (:mod:`kaio.mathlib.payne_hanek`), on the lanes that need it only.

Kernels on [-pi/4, pi/4]: Taylor polynomials of sin (degree 19) and cos (degree 20) with fma
and the low part of r folded in; tan = sin / cos (or -cos / sin in odd quadrants).
"""
from __future__ import annotations

from .constants import exact, factorial_inv, split

P1, P2, P3 = split(exact("pi_2"), 53, 3)
TWO_OVER_PI = float(exact("2_pi"))
#: sin(r) = r + r^3 S(r^2): S coefficients -1/3!, 1/5!, ...
SIN_COEFFS = [float((-1) ** k * factorial_inv(2 * k + 1)) for k in range(1, 10)]
#: cos(r) = 1 - r^2/2 + r^4 C(r^2): C coefficients 1/4!, -1/6!, ...
COS_COEFFS = [float((-1) ** k * factorial_inv(2 * k)) for k in range(2, 11)]
CW_LIMIT = 2.0 ** 30
TINY = 2.0 ** -27


def reduce_cw(m, x):
    """(n as f64, rh, rl): Cody-Waite reduction by pi/2 (accurate for |x| < CW_LIMIT)."""
    n = m.rint(m.mul(x, TWO_OVER_PI))
    nn = m.neg(n)
    a = m.fma(nn, P1, x)
    bh = m.mul(nn, P2)
    bl = m.fma(nn, P2, m.neg(bh))
    s, e = m.two_sum(a, bh)
    tail = m.add(m.add(e, bl), m.mul(nn, P3))
    rh, rl = m.two_sum(s, tail)
    return n, rh, rl


def reduce(m, x):
    """(quadrant as i64 in 0..3, rh, rl) for finite x; Payne-Hanek above CW_LIMIT."""
    from . import payne_hanek
    return payne_hanek.reduce_any(m, x, reduce_cw, CW_LIMIT)


def sin_kernel(m, rh, rl, z):
    return m.add(rh, m.fma(m.mul(rh, z), m.horner(z, SIN_COEFFS), rl))


def cos_kernel(m, rh, rl, z):
    ze = m.fma(rh, rh, m.neg(z))
    hz = m.mul(z, 0.5)
    w = m.sub(1.0, hz)
    tail = m.sub(m.sub(1.0, w), hz)
    tail = m.sub(tail, m.fma(ze, 0.5, m.mul(rh, rl)))
    tail = m.fma(m.mul(z, z), m.horner(z, COS_COEFFS), tail)
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
