"""sinh, cosh, tanh and erf in f64, written with :class:`F64`.

sinh/cosh: for |x| < 1 their Taylor series (x + x^3 S(x^2), 1 + x^2 C(x^2), fma); above,
E = e^|x| / 2 from the exp core (the halving folded into the exponent, so cosh does not overflow
before its true threshold) and E -+ 1/(4E). tanh(x) = u / (u + 2) with u = expm1(2|x|) (the denominator as a
double-double and the division remainder folded back), 1 for |x| > 22, sign restored.

erf: |x| < 1 by its Taylor series x (2/sqrt(pi)) sum (-1)^n x^2n / (n! (2n + 1)) with the
leading constant as a double-double; 1 <= |x| < 6 by Taylor expansions around the centres
1.25, 1.75, ..., 5.75 (half-width 1/4; the coefficients are exact rationals times e^-c^2
computed at import, the constant term a double-double), picked with selects; 1 beyond 6.

Native f32 tanh and erf (``tanh_f32``, ``erf_f32``; no f64 arithmetic) are at the end.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from . import explog
from .constants import dd, dec_erf, dec_exp, exact, factorial_inv, split

SINH_COEFFS = [float(factorial_inv(2 * k + 1)) for k in range(1, 11)]     # 1/3!, 1/5!, ...
COSH_COEFFS = [float(factorial_inv(2 * k)) for k in range(1, 12)]         # 1/2!, 1/4!, ...
TWO_SQRTPI = dd("2_sqrtpi")
ERF0_COEFFS = [float(Fraction((-1) ** n, 2 * n + 1) * factorial_inv(n) * exact("2_sqrtpi"))
               for n in range(1, 21)]
ERF_CENTRES = [Fraction(5, 4) + Fraction(k, 2) for k in range(10)]
ERF_DEGREE = 26


@lru_cache(maxsize=None)
def erf_taylor(c: Fraction, degree: int = ERF_DEGREE):
    """Taylor coefficients of erf around ``c``: (a0 hi, a0 lo), [a1, ..., a_degree]."""
    # e^{-(c+h)^2} = e^{-c^2} sum b_n h^n with (n+1) b_{n+1} = -2c b_n - 2 b_{n-1}
    b = [Fraction(1), -2 * c]
    while len(b) < degree:
        n = len(b) - 1
        b.append((-2 * c * b[n] - 2 * b[n - 1]) / (n + 1))
    k = exact("2_sqrtpi") * dec_exp(-c * c)
    coeffs = [float(k * b[n] / (n + 1)) for n in range(degree)]
    return split(dec_erf(c), 53, 2), coeffs


def _exp_half(m, a):
    """e^a / 2 for a >= 0 (finite or inf)."""
    return explog.exp_dd(m, a, shift=-1)


def sinh(m, x):
    a = m.abs(x)
    z = m.mul(x, x)
    small = m.fma(m.mul(x, z), m.horner(z, SINH_COEFFS), x)
    e = _exp_half(m, a)
    big = m.copysign(m.sub(e, m.div(0.25, e)), x)
    r = m.sel(m.lt(a, 1.0), small, big)
    return m.sel(m.isnan(x), x, r)


def cosh(m, x):
    a = m.abs(x)
    z = m.mul(x, x)
    small = m.fma(z, m.horner(z, COSH_COEFFS), 1.0)
    e = _exp_half(m, a)
    big = m.add(e, m.div(0.25, e))
    r = m.sel(m.lt(a, 1.0), small, big)
    return m.sel(m.isnan(x), x, r)


def tanh(m, x):
    a = m.abs(x)
    u = explog.expm1(m, m.min(m.mul(a, 2.0), 60.0))
    d, de = m.fast_two_sum(m.max(u, 2.0), m.min(u, 2.0))   # d + de = u + 2 exactly
    q = m.div(u, d)
    rem = m.fma(m.neg(q), de, m.fma(m.neg(q), d, u))         # u - q (d + de), nearly exact
    r = m.add(q, m.div(rem, d))
    r = m.sel(m.gt(a, 22.0), 1.0, r)
    r = m.copysign(r, x)
    return m.sel(m.isnan(x), x, r)


def erf(m, x):
    a = m.abs(x)
    z = m.mul(x, x)
    tail = m.fma(a, TWO_SQRTPI[1], m.mul(m.mul(a, z), m.horner(z, ERF0_COEFFS)))
    small = m.fma(a, TWO_SQRTPI[0], tail)
    idx = m.floor(m.mul(m.sub(a, 1.0), 2.0))
    conds = [m.ge(idx, float(i)) for i in range(1, len(ERF_CENTRES))]
    tables = [erf_taylor(c) for c in ERF_CENTRES]
    centre = m.pick(conds, [float(c) for c in ERF_CENTRES])
    h = m.sub(a, centre)
    coeffs = [m.pick(conds, [t[1][n] for t in tables]) for n in range(ERF_DEGREE)]
    acc = coeffs[-1]
    for cn in reversed(coeffs[:-1]):
        acc = m.fma(acc, h, cn)
    a0_lo = m.pick(conds, [t[0][1] for t in tables])
    a0_hi = m.pick(conds, [t[0][0] for t in tables])
    mid = m.add(a0_hi, m.fma(acc, h, a0_lo))
    r = m.sel(m.lt(a, 1.0), small, mid)
    r = m.sel(m.ge(a, 6.0), 1.0, r)
    r = m.copysign(r, x)
    return m.sel(m.isnan(x), x, r)


# --- native f32 (``m`` an f32 context; no f64 arithmetic) ---------------------------------------
def _tanh_taylor(n: int):
    """The first ``n`` odd Taylor coefficients t1, t3, ... of tanh (exact rationals), from
    tanh' = 1 - tanh^2."""
    t = [Fraction(0)] * (2 * n + 2)
    for k in range(2 * n + 1):
        t[k + 1] = ((1 if k == 0 else 0) - sum(t[i] * t[k - i] for i in range(k + 1))) / (k + 1)
    return [t[2 * j + 1] for j in range(n)]


TANH_F32_COEFFS = [float(c) for c in _tanh_taylor(11)[1:]]      # t3, t5, ..., t21
TANH_F32_SMALL = 0.5
#: native f32 erf (scripts/fit_erf_f32.py derives these f32 constants and measures the result):
#: erf(x) = x + x p(x^2) below ERF_F32_SPLIT; above, 1 - e^q(|x| - ERF_F32_SPLIT)
ERF_F32_SPLIT = 0.75
ERF_F32_ONE = 3.92                                                      # erfc(3.92) < 2^-25
ERF_F32_P = [float.fromhex(h) for h in (
    "0x1.06eba8p-3", "-0x1.81273ap-2", "0x1.ce2ac8p-4", "-0x1.b7a892p-6", "0x1.4f2c7ap-8",
    "-0x1.61de68p-11")]
ERF_F32_Q = [float.fromhex(h) for h in (
    "-0x1.3deb04p+0", "-0x1.1ce96ep+1", "-0x1.9d9e5ap-1", "-0x1.b18796p-5", "0x1.a2d6dap-7",
    "-0x1.3d61cap-9", "0x1.3f864ap-12", "-0x1.2c06e8p-16")]
ERF_F32_Q0_LO = float.fromhex("0x1.7b9828p-25")            # q's constant term beyond its f32 value
ERF_F32_EXPM1 = [float.fromhex(h) for h in (
    "0x1p+0", "0x1p-1", "0x1.555406p-3", "0x1.55543cp-5", "0x1.126ed6p-7", "0x1.6dc7b8p-10")]
LN2_F32 = explog.LN2_F32


def tanh_f32(m, x):
    """Native f32 tanh: |x| < 1/2 by its Taylor series x + x^3 T(x^2) (degree 21); above,
    u / (u + 2) with u = expm1(2|x|) kept unrounded as 2^k (hi + lo) from the f32 expm1 core,
    the denominator as a two-sum and the division remainder folded back; 1 beyond 10."""
    a = m.abs(x)
    z = m.mul(a, a)
    small = m.fma(m.mul(a, z), m.horner(z, TANH_F32_COEFFS), a)
    y = m.min(m.max(m.mul(a, 2.0), 2.0 * TANH_F32_SMALL), 40.0)
    hi, lo, k = explog.expm1_parts_f32(m, y)
    hi, lo = m.two_sum(hi, lo)                       # renormalise (lo holds e^r - 1 - r)
    p2 = m.pow2(k)                                   # k <= 58: exact scaling
    uh, ul = m.mul(hi, p2), m.mul(lo, p2)
    d, de = m.two_sum(uh, m.c(2.0))
    de = m.add(de, ul)
    q = m.div(uh, d)
    rem = m.fma(m.neg(q), de, m.add(m.fma(m.neg(q), d, uh), ul))
    big = m.add(q, m.div(rem, d))
    r = m.sel(m.lt(a, TANH_F32_SMALL), small, big)
    r = m.sel(m.gt(a, 10.0), 1.0, r)
    r = m.copysign(r, x)
    return m.sel(m.isnan(x), x, r)


def erf_f32(m, x):
    """Native f32 erf, about 40 f32 operations without division (docs/mathlib.md): for
    |x| < 3/4, x + x p(x^2) (one fma: the leading x is exact, only the small p carries error);
    from 3/4, 1 - e^q with q(t) ~ log erfc(3/4 + t), whose exponential is reduced as
    q = n ln2 + r (the reduction folded into q's last Horner step, q's constant in two parts) so
    1 - 2^n (exact) - 2^n r P(r) rounds once; 1 from 3.92 on. Within 0.8 ulp."""
    a = m.abs(x)
    z = m.mul(a, a)
    small = m.fma(a, m.fma(z, m.horner(z, ERF_F32_P[1:]), ERF_F32_P[0]), a)
    # t clamped so lanes that take another branch keep n (and 2^n) in range
    t = m.sub(m.min(a, ERF_F32_ONE), ERF_F32_SPLIT)                  # exact
    acc = m.horner(t, ERF_F32_Q[1:])
    q = m.fma(t, acc, ERF_F32_Q[0])
    n = m.rint(m.mul(q, explog.INV_LN2))
    d = m.add(m.fma(n, -LN2_F32[0], ERF_F32_Q[0]), ERF_F32_Q0_LO)  # rounded once; small where e^q matters
    r = m.fma(n, -LN2_F32[1], m.fma(t, acc, d))                       # q - n ln2
    s = m.pow2(m.to_int(n))                                           # n in [-26, 0]
    big = m.fma(m.neg(m.mul(s, r)), m.horner(r, ERF_F32_EXPM1), m.sub(1.0, s))
    r = m.sel(m.lt(a, ERF_F32_SPLIT), small, big)
    r = m.sel(m.ge(a, ERF_F32_ONE), 1.0, r)
    r = m.copysign(r, x)
    return m.sel(m.isnan(x), x, r)
