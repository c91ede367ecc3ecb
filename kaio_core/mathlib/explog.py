"""exp, exp2, expm1, log, log2, log10, log1p and pow in f64, written with :class:`F64`.

exp: n = rint(x / ln2), r = x - n ln2 as a double-double (ln2 in two parts, the first product
exact by fma), e^r - 1 by its Taylor polynomial (degree 13, |r| <= 0.35) evaluated with fma,
result 2^n (1 + (e^r - 1)) scaled by exact exponent arithmetic (subnormal results rounded once).

log: x = 2^k m with m in [sqrt(1/2), sqrt(2)) from the bits (subnormals pre-scaled by 2^54),
f = m - 1 (exact), log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)) with s = f / (2 + f) and
R(z) = sum 2 z^j / (2j + 1) (the atanh series), kept as a double-double so log2/log10/pow can
multiply it by a double-double constant without losing bits.

pow(x, y) = exp(y log|x|) with log|x| and the product as double-doubles, then the C99 Annex F
special cases by selects.
"""
from __future__ import annotations

import struct
from fractions import Fraction
from functools import lru_cache

from .constants import dd, exact, factorial_inv, round_bits, split

LN2 = dd("ln2")
LN2_42 = split(exact("ln2"), 42, 2)          # k * LN2_42[0] is exact for |k| < 2^11
INV_LN2 = float(exact("log2e"))
EXPM1_COEFFS = [float(factorial_inv(k)) for k in range(2, 14)]      # 1/2!, ..., 1/13!
ATANH_COEFFS = [float(Fraction(2, 2 * j + 1)) for j in range(1, 12)]  # 2/3, 2/5, ...
TWO_THIRDS = split(Fraction(2, 3), 53, 2)


# --- exp core ---------------------------------------------------------------------------------
def reduce_exp(m, xh, xl=None):
    """n (f64 integer), rh, rl with xh + xl = n ln2 + rh + rl, |rh| <= ~0.35."""
    n = m.rint(m.mul(xh, INV_LN2))
    nn = m.neg(n)
    a = m.fma(nn, LN2[0], xh)                  # exact: |x - n LN2[0]| < 1, a multiple of 2^-53
    bh = m.mul(nn, LN2[1])
    bl = m.fma(nn, LN2[1], m.neg(bh))
    s, e = m.two_sum(a, bh)
    tail = m.add(e, bl)
    if xl is not None:
        tail = m.add(tail, xl)
    rh, rl = m.two_sum(s, tail)
    return n, rh, rl


def expm1_reduced(m, rh, rl):
    """e^(rh + rl) - 1 = rh + t (t returned): Taylor polynomial in rh plus the rl correction."""
    z = m.mul(rh, rh)
    p = m.horner(rh, EXPM1_COEFFS)                       # (e^r - 1 - r) / r^2
    corr = m.fma(rl, rh, rl)                             # rl e^rh ~ rl (1 + rh)
    return m.fma(z, p, corr)


def _clamp(m, x, lo, hi):
    return m.min(m.max(x, lo), hi)


def exp_dd(m, xh, xl=None, shift=0):
    """2^shift * e^(xh + xl) for finite or infinite xh (NaN not handled)."""
    xc = _clamp(m, xh, -1600.0, 1600.0)
    if xl is not None:
        xl = m.sel(m.lt(m.abs(xh), 1600.0), xl, 0.0)
    n, rh, rl = reduce_exp(m, xc, xl)
    t = expm1_reduced(m, rh, rl)
    y = m.add(1.0, m.add(rh, t))
    k = m.to_int(n)
    if shift:
        k = m.iop("add", k, shift)
    return m.scale(y, k)


def exp(m, x):
    return m.sel(m.isnan(x), x, exp_dd(m, x))


LN2_F32 = split(exact("ln2"), 24, 2)
EXPM1_COEFFS_F32 = [float(factorial_inv(k)) for k in range(2, 8)]    # 1/2!, ..., 1/7!
EXPM1_CUBIC_F32 = [float(factorial_inv(k)) for k in range(3, 9)]     # 1/3!, ..., 1/8!


def exp_f32(m, x):
    """Native f32 exp (``m`` an f32 context): n = rint(x / ln2), r = rh + rl = x - n ln2 with
    ln2 in two f32 parts (rh exact by fma), e^r = (1 + rh) + (rh^2 P(rh) + rl (1 + rh)) with 1 + rh
    exact by two-sum, P the Taylor polynomial to degree 7, scaled by 2^n in two exact steps.
    No f64 arithmetic; within 0.86 ulp (2^20 points measured)."""
    xc = _clamp(m, x, -110.0, 110.0)
    n = m.rint(m.mul(xc, INV_LN2))
    nn = m.neg(n)
    rh = m.fma(nn, LN2_F32[0], xc)                       # exact
    rl = m.mul(nn, LN2_F32[1])                            # r = rh + rl
    rest = m.fma(m.mul(rh, rh), m.horner(rh, EXPM1_COEFFS_F32), m.fma(rl, rh, rl))
    s, e = m.two_sum(m.c(1.0), rh)                        # 1 + rh exactly: one rounding left
    y = m.scale(m.add(s, m.add(e, rest)), m.to_int(n))
    return m.sel(m.isnan(x), x, y)


def expm1_parts_f32(m, x):
    """Native f32 expm1 core for finite x in [-18, 100]: (hi, lo, k) with expm1(x) ~ 2^k (hi + lo).
    n = rint(x / ln2), r = rh + rl = x - n ln2 (rh exact: for n != 0, |x| > 1/3 and rh is a
    multiple of 2^-25 below 1/2), e^x - 1 = 2^n ((1 - 2^-n) + rh + rh^2/2 + rh^3 Q(rh) + rl e^rh)
    with Q the Taylor polynomial to degree 7 of e^r; 1 - 2^-n, its sum with rh and then with
    rh^2/2 (a two-product, halved) are kept exactly by two-sums, so only the small terms round."""
    n = m.rint(m.mul(x, INV_LN2))
    nn = m.neg(n)
    rh = m.fma(nn, LN2_F32[0], x)                        # exact
    rl = m.mul(nn, LN2_F32[1])
    s, se = m.two_prod(rh, rh)
    h, he = m.mul(s, 0.5), m.mul(se, 0.5)                # rh^2 / 2 = h + he
    cubic = m.mul(m.mul(rh, s), m.horner(rh, EXPM1_CUBIC_F32))
    k = m.to_int(n)
    kc = m.b.binary("max", m.b.binary("min", k, m.ic(60)), m.ic(-30))
    c, ce = m.two_sum(m.c(1.0), m.neg(m.pow2(m.iop("sub", m.ic(0), kc))))
    u, e = m.two_sum(c, rh)
    w, e2 = m.two_sum(u, h)
    lo = m.add(m.add(m.add(e, e2), m.add(ce, he)), m.add(cubic, m.fma(rl, rh, rl)))
    return w, lo, k


def expm1_f32(m, x):
    """Native f32 expm1 (``m`` an f32 context): :func:`expm1_parts_f32` rounded once and scaled
    by 2^n in two exact steps; -1 below -18, x itself for |x| < 2^-25 (signed zeros kept)."""
    u, lo, k = expm1_parts_f32(m, _clamp(m, x, -18.0, 100.0))
    r = m.scale(m.add(u, lo), k)
    r = m.sel(m.lt(x, -18.0), -1.0, r)
    r = m.sel(m.lt(m.abs(x), 2.0 ** -25), x, r)
    return m.sel(m.isnan(x), x, r)


def exp2(m, x):
    xc = _clamp(m, x, -1600.0, 1600.0)
    n = m.rint(xc)
    f = m.sub(xc, n)                                     # exact, |f| <= 1/2
    rh, re = m.two_prod(f, LN2[0])
    rl = m.fma(f, LN2[1], re)
    rh, rl = m.fast_two_sum(rh, rl)
    t = expm1_reduced(m, rh, rl)
    y = m.add(1.0, m.add(rh, t))
    return m.sel(m.isnan(x), x, m.scale(y, m.to_int(n)))


def expm1(m, x):
    xc = _clamp(m, x, -50.0, 1600.0)
    n, rh, rl = reduce_exp(m, xc)
    t = expm1_reduced(m, rh, rl)
    k = m.to_int(n)
    kc = m.b.binary("max", m.b.binary("min", k, m.ic(60)), m.ic(-60))
    c = m.sub(1.0, m.pow2(m.iop("sub", m.ic(0), kc)))    # 1 - 2^-n, exact for |n| <= 53
    u, e = m.two_sum(c, rh)
    big = m.scale(m.add(u, m.add(e, t)), k)              # 2^n (1 - 2^-n + e^r - 1)
    small = m.add(rh, t)                                 # n = 0: e^r - 1 directly
    r = m.sel(m.eq(n, 0.0), small, big)
    r = m.sel(m.lt(x, -40.0), -1.0, r)
    r = m.sel(m.lt(m.abs(x), 2.0 ** -54), x, r)          # tiny (and +-0): expm1(x) rounds to x
    return m.sel(m.isnan(x), x, r)


# --- log core (generic: f64, or native f32 with an f32 context) ----------------------------------
@lru_cache(maxsize=None)
def log_consts(dtype) -> dict:
    """Per-precision constants of the log family: double-word constants whose parts are
    representable in ``dtype`` ("short" heads leave room for an exact product by k)."""
    p = 53 if dtype.bits == 64 else 24
    kbits = 11 if dtype.bits == 64 else 9      # bits of the largest |k|

    def dw(v, head=p):
        h = round_bits(v, head)
        return h, round_bits(v - Fraction(h), p)
    half = struct.unpack("<q" if p == 53 else "<i",
                         struct.pack("<d" if p == 53 else "<f", 0.7071067811865476))[0]
    return {"ln2": dw(exact("ln2"), p - kbits), "log10_2": dw(exact("log10_2"), p - kbits),
            "log2e": dw(exact("log2e")), "log10e": dw(exact("log10e")), "sqrt_half_bits": half,
            "atanh": ATANH_COEFFS if p == 53 else ATANH_COEFFS[:5]}


def decompose(m, x):
    """(k, m) as floats with x = 2^k m, m in [sqrt(1/2), sqrt(2)); x positive finite."""
    sub = m.lt(x, 2.0 ** (1 - m.bias))
    xs = m.sel(sub, m.mul(x, 2.0 ** (m.mant + 2)), x)
    ix = m.bits(xs)
    k = m.iop("shr", m.iop("sub", ix, log_consts(m.F)["sqrt_half_bits"]), m.mant)
    mant = m.from_bits(m.iop("sub", ix, m.iop("shl", k, m.mant)))
    k = m.iop("sub", k, m.b.select(sub, m.ic(m.mant + 2), m.ic(0)))
    return m.to_float(k), mant


def log1p_dd(m, f):
    """(hi, lo): log(1 + f) for |f| <= ~0.42, hi + lo accurate to ~2^-(p+7) relative."""
    s = m.div(f, m.add(2.0, f))
    z = m.mul(s, s)
    r = m.mul(z, m.horner(z, log_consts(m.F)["atanh"]))
    fsq, fsq_e = m.two_prod(f, f)
    hfsq, hfsq_e = m.mul(fsq, 0.5), m.mul(fsq_e, 0.5)
    hi = m.sub(f, hfsq)
    lo = m.sub(m.sub(m.sub(f, hi), hfsq), hfsq_e)
    lo = m.fma(s, m.add(hfsq, r), lo)
    return hi, lo


def log_parts(m, x):
    """(k, hi, lo) with log(x) = k ln2 + hi + lo, for x positive finite."""
    k, mant = decompose(m, x)
    hi, lo = log1p_dd(m, m.sub(mant, 1.0))
    return k, hi, lo


def _log_specials(m, x, r, at_zero=float("-inf")):
    r = m.sel(m.eq(x, 0.0), at_zero, r)
    r = m.sel(m.eq(x, float("inf")), x, r)
    r = m.sel(m.lt(x, 0.0), float("nan"), r)
    return m.sel(m.isnan(x), x, r)


def _k_plus(m, k, c42, hi, lo):
    """k c + hi + lo with c = c42[0] + c42[1] (c42[0] short, so k c42[0] is exact)."""
    s, e = m.two_sum(m.mul(k, c42[0]), hi)
    return m.add(s, m.add(e, m.fma(k, c42[1], lo)))


def _dd_scale(m, k, hi, lo, c):
    """k + (hi + lo) * (c[0] + c[1]) for a double-double constant c."""
    p, pe = m.two_prod(hi, c[0])
    tail = m.add(pe, m.fma(hi, c[1], m.mul(lo, c[0])))
    s, e = m.two_sum(k, p)
    return m.add(s, m.add(e, tail))


def log(m, x):
    k, hi, lo = log_parts(m, x)
    return _log_specials(m, x, _k_plus(m, k, log_consts(m.F)["ln2"], hi, lo))


def log2(m, x):
    k, hi, lo = log_parts(m, x)
    return _log_specials(m, x, _dd_scale(m, k, hi, lo, log_consts(m.F)["log2e"]))


def log10(m, x):
    c = log_consts(m.F)
    k, hi, lo = log_parts(m, x)
    hi10, lo10 = _dd_mul(m, hi, lo, c["log10e"])
    return _log_specials(m, x, _k_plus(m, k, c["log10_2"], hi10, lo10))


def _dd_mul(m, hi, lo, c):
    p, pe = m.two_prod(hi, c[0])
    return p, m.add(pe, m.fma(hi, c[1], m.mul(lo, c[0])))


def log1p(m, x):
    u, err = m.two_sum(1.0, x)                           # u + err = 1 + x exactly
    k, mant = decompose(m, m.max(u, 2.0 ** -1000))
    k0 = m.eq(k, 0.0)
    f = m.sel(k0, x, m.sub(mant, 1.0))
    corr = m.sel(k0, 0.0, m.div(err, u))                # log(1 + x) = log(u) + log(1 + err/u)
    hi, lo = log1p_dd(m, f)
    r = _k_plus(m, k, LN2_42, hi, m.add(lo, corr))
    r = m.sel(m.lt(m.abs(x), 2.0 ** -54), x, r)
    r = m.sel(m.eq(x, -1.0), float("-inf"), r)
    r = m.sel(m.eq(x, float("inf")), x, r)
    r = m.sel(m.lt(x, -1.0), float("nan"), r)
    return m.sel(m.isnan(x), x, r)


def log1p_dd_accurate(m, f):
    """(hi, lo): log(1 + f) for |f| <= ~0.42 to about 2^-66 relative, for pow: 2 atanh(s) with
    s = f / (2 + f) as a double-double and the s^3 term as a double-double too."""
    dh, dl = m.fast_two_sum(2.0, f)
    sh = m.div(f, dh)
    sl = m.div(m.fma(m.neg(sh), dl, m.fma(m.neg(sh), dh, f)), dh)
    p1, e1 = m.two_prod(sh, sh)
    p2 = m.mul(p1, sh)
    e2 = m.fma(p1, sh, m.neg(p2))
    e2 = m.fma(e1, sh, e2)
    e2 = m.fma(m.mul(p1, 3.0), sl, e2)                  # s^3 = p2 + e2
    c3h = m.mul(p2, TWO_THIRDS[0])
    c3l = m.fma(p2, TWO_THIRDS[0], m.neg(c3h))
    c3l = m.fma(p2, TWO_THIRDS[1], m.fma(e2, TWO_THIRDS[0], c3l))
    rest = m.mul(m.mul(p2, p1), m.horner(p1, ATANH_COEFFS[1:]))   # 2 s^5 / 5 + ...
    hi, e = m.two_sum(m.mul(sh, 2.0), c3h)
    lo = m.add(m.add(e, m.mul(sl, 2.0)), m.add(c3l, rest))
    return hi, lo


# --- pow ----------------------------------------------------------------------------------------
def is_odd_int(m, y):
    h = m.mul(y, 0.5)
    return m.and_(m.eq(m.trunc(y), y), m.cmp("ne", m.trunc(h), h))


def pow(m, x, y):
    a = m.abs(x)
    k, mant = decompose(m, a)
    hi, lo = log1p_dd_accurate(m, m.sub(mant, 1.0))
    s, e = m.two_sum(m.mul(k, LN2_42[0]), hi)
    lh, ll = m.fast_two_sum(s, m.add(e, m.fma(k, LN2_42[1], lo)))
    th = m.mul(y, lh)
    tl = m.fma(y, ll, m.fma(y, lh, m.neg(th)))
    fin = m.lt(m.abs(th), float("inf"))
    r = exp_dd(m, th, m.sel(fin, tl, 0.0))
    odd = is_odd_int(m, y)
    yint = m.eq(m.trunc(y), y)
    xneg = m.lt(x, 0.0)
    r = m.sel(m.and_(xneg, odd), m.neg(r), r)
    r = m.sel(m.and_(xneg, m.not_(yint)), float("nan"), r)
    # x = +-0 and x = +-inf: magnitude 0 or inf, sign of x when y is an odd integer
    ypos = m.gt(y, 0.0)
    zero_mag = m.sel(ypos, 0.0, float("inf"))
    inf_mag = m.sel(ypos, float("inf"), 0.0)
    special = m.sel(m.eq(a, 0.0), zero_mag, inf_mag)
    special = m.sel(odd, m.copysign(special, x), special)
    r = m.sel(m.or_(m.eq(a, 0.0), m.eq(a, float("inf"))), special, r)
    r = m.sel(m.or_(m.isnan(x), m.isnan(y)), float("nan"), r)
    # y = +-inf: |x| = 1 gives 1, else 0 or inf
    yinf = m.eq(m.abs(y), float("inf"))
    big = m.sel(m.eq(m.lt(a, 1.0), m.lt(y, 0.0)), float("inf"), 0.0)
    r = m.sel(m.and_(yinf, m.not_(m.isnan(x))), m.sel(m.eq(a, 1.0), 1.0, big), r)
    r = m.sel(m.eq(x, 1.0), 1.0, r)
    return m.sel(m.eq(y, 0.0), 1.0, r)
