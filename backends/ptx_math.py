"""Math functions -> PTX.

Exact / correctly rounded functions are native instructions: ``sqrt.rn``, ``cvt.rmi/rpi/rzi/rni``
for floor/ceil/trunc/rint, sign-bit operations for copysign, ``testp`` for isnan/isinf/isfinite.

``fast`` (per call or kernel-wide fast_math) uses the hardware approximations on f32
(``ex2.approx``, ``lg2.approx``, ``sin/cos.approx``, ``tanh.approx``, ``rsqrt.approx``,
``sqrt.approx``) with the needed scaling (exp(x) = ex2(x*log2 e)); f16/bf16 compute in f32.

Otherwise transcendentals are evaluated in f64 (range reduction + Taylor/odd series with
``.rn`` operations) and rounded once to the argument's dtype. Accuracy (documented in
docs/backends.md): for f32/f16/bf16 arguments the f64 result is within ~1e-15 relative, so the
returned value is the correctly rounded one except in rare double-rounding ties (<= 1 ulp);
for f64 arguments exp/log/sin/cos/atan are within a few ulp, pow/erf/asin/acos within ~100
ulp; sin/cos/tan reduce with a three-part pi/2 (accurate for |x| < 2**30); fmod is exact
except for subnormal f64 divisors. A portable IR math library is meant to replace this.
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from . import ptx_ops
from .ptx_emit import Emitter, f32_hex

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
LN2_HI = 6.93147180369123816490e-01   # fdlibm split: LN2_HI has trailing zero bits
LN2_LO = 1.90821492927058770002e-10
PIO2 = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)


class _D:
    """Tiny f64 expression helper over an emitter (every op rounds to nearest even)."""

    def __init__(self, em: Emitter):
        self.em = em

    def c(self, x: float) -> str:
        return self.em.fconst(x, "fd")

    def _op(self, text: str, *args: str) -> str:
        d = self.em.tmp("fd")
        self.em.ins(f"{text} {d}, {', '.join(args)}")
        return d

    def add(self, a, b): return self._op("add.rn.f64", a, b)
    def sub(self, a, b): return self._op("sub.rn.f64", a, b)
    def mul(self, a, b): return self._op("mul.rn.f64", a, b)
    def div(self, a, b): return self._op("div.rn.f64", a, b)
    def fma(self, a, b, c): return self._op("fma.rn.f64", a, b, c)
    def neg(self, a): return self._op("neg.f64", a)
    def abs(self, a): return self._op("abs.f64", a)
    def sqrt(self, a): return self._op("sqrt.rn.f64", a)
    def rint(self, a): return self._op("cvt.rni.f64.f64", a)
    def min(self, a, b): return self._op("min.f64", a, b)
    def max(self, a, b): return self._op("max.f64", a, b)

    def copysign(self, mag, sign):
        return self._op("copysign.f64", sign, mag)   # PTX copysign takes the sign source first

    def setp(self, cmp: str, a, b) -> str:
        p = self.em.tmp("p")
        self.em.ins(f"setp.{cmp}.f64 {p}, {a}, {b}")
        return p

    def test(self, kind: str, a) -> str:
        p = self.em.tmp("p")
        self.em.ins(f"testp.{kind}.f64 {p}, {a}")
        return p

    def sel(self, p, a, b):
        return self._op("selp.f64", a, b, p)

    def horner(self, x, coeffs):
        """sum(coeffs[i] * x**i) by Horner's rule with fma."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def ldexp_bits(self, a, n_s32: str):
        """a * 2**n for an i32 register n, by adding n to the exponent field (a normal, result
        normal)."""
        em = self.em
        w, bits = em.tmp("rd"), em.tmp("rd")
        em.ins(f"mov.b64 {bits}, {a}")
        em.ins(f"cvt.s64.s32 {w}, {n_s32}")
        em.ins(f"shl.b64 {w}, {w}, 52")
        em.ins(f"add.s64 {bits}, {bits}, {w}")
        d = em.tmp("fd")
        em.ins(f"mov.b64 {d}, {bits}")
        return d

    def pow2(self, n_s32: str):
        """2**n as f64 for |n| <= 1022."""
        return self.ldexp_bits(self.c(1.0), n_s32)

    def to_s32(self, a) -> str:
        r = self.em.tmp("r")
        self.em.ins(f"cvt.rzi.s32.f64 {r}, {a}")
        return r


# --- accurate kernels in f64 -------------------------------------------------------------------
def _exp(D: _D, x):
    xc = D.max(D.min(x, D.c(710.0)), D.c(-746.0))           # keeps 2**n in range (NaN -> 710)
    n = D.rint(D.mul(xc, D.c(LOG2E)))
    r = D.fma(D.neg(n), D.c(LN2_HI), xc)
    r = D.fma(D.neg(n), D.c(LN2_LO), r)
    p = D.horner(r, [1.0 / math.factorial(k) for k in range(15)])
    ni = D.to_s32(n)
    h, rest = D.em.tmp("r"), D.em.tmp("r")
    D.em.ins(f"shr.s32 {h}, {ni}, 1")
    D.em.ins(f"sub.s32 {rest}, {ni}, {h}")
    res = D.mul(D.mul(p, D.pow2(h)), D.pow2(rest))
    return D.sel(D.test("notanumber", x), x, res)


def _exp2(D: _D, x):
    xc = D.max(D.min(x, D.c(1025.0)), D.c(-1077.0))
    n = D.rint(xc)
    r = D.mul(D.sub(xc, n), D.c(LN2))
    p = D.horner(r, [1.0 / math.factorial(k) for k in range(15)])
    ni = D.to_s32(n)
    h, rest = D.em.tmp("r"), D.em.tmp("r")
    D.em.ins(f"shr.s32 {h}, {ni}, 1")
    D.em.ins(f"sub.s32 {rest}, {ni}, {h}")
    res = D.mul(D.mul(p, D.pow2(h)), D.pow2(rest))
    return D.sel(D.test("notanumber", x), x, res)


def _log(D: _D, x):
    em = D.em
    sub = D.setp("lt", x, D.c(2.0 ** -1022))
    xs = D.sel(sub, D.mul(x, D.c(2.0 ** 54)), x)              # lift subnormals into range
    bits, hi, e, mb = em.tmp("rd"), em.tmp("r"), em.tmp("r"), em.tmp("rd")
    em.ins(f"mov.b64 {bits}, {xs}")
    em.ins(f"shr.u64 {mb}, {bits}, 52")
    em.ins(f"cvt.u32.u64 {hi}, {mb}")
    em.ins(f"and.b32 {hi}, {hi}, 0x7FF")
    em.ins(f"sub.s32 {e}, {hi}, 1023")
    em.ins(f"@{sub} sub.s32 {e}, {e}, 54")
    em.ins(f"and.b64 {mb}, {bits}, 0x000FFFFFFFFFFFFF")
    em.ins(f"or.b64 {mb}, {mb}, 0x3FF0000000000000")
    m = em.tmp("fd")
    em.ins(f"mov.b64 {m}, {mb}")                               # m in [1, 2)
    big = D.setp("gt", m, D.c(math.sqrt(2.0)))
    m = D.sel(big, D.mul(m, D.c(0.5)), m)
    em.ins(f"@{big} add.s32 {e}, {e}, 1")
    f = D.sub(m, D.c(1.0))
    s = D.div(f, D.add(f, D.c(2.0)))
    s2 = D.mul(s, s)
    tail = D.horner(s2, [2.0 / (2 * k + 1) for k in range(1, 13)])   # 2/3, 2/5, ...
    logm = D.fma(D.mul(s, s2), tail, D.add(s, s))
    ef = em.tmp("fd")
    em.ins(f"cvt.rn.f64.s32 {ef}, {e}")
    res = D.fma(ef, D.c(LN2_HI), D.fma(ef, D.c(LN2_LO), logm))
    res = D.sel(D.setp("eq", x, D.c(0.0)), D.c(-math.inf), res)
    res = D.sel(D.setp("eq", x, D.c(math.inf)), x, res)
    res = D.sel(D.setp("ltu", x, D.c(0.0)), D.c(math.nan), res)      # negative or NaN
    return res


def _two_over_pi_words(nbits: int = 1280) -> list[int]:
    """Binary digits of 2/pi after the point, as 64-bit words (exact integer arithmetic)."""
    one = 1 << (nbits + 84)

    def atan_inv(n):           # Machin: pi = 16 atan(1/5) - 4 atan(1/239)
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k, sign = k + 2, -sign
        return total
    pi = (16 * atan_inv(5) - 4 * atan_inv(239)) >> 20
    frac = (2 << (2 * nbits + 64)) // pi
    return [(frac >> (nbits - 64 * (i + 1))) & (2 ** 64 - 1) for i in range(nbits // 64)]


_TABLE = "kaio_two_over_pi"


def _table_decl() -> str:
    words = [0] + _two_over_pi_words()          # a leading zero word lets the window start early
    return (f".const .align 8 .b64 {_TABLE}[{len(words)}] = {{"
            + ", ".join("0x%016X" % w for w in words) + "};")


def _reduce_pio2(D: _D, x):
    """(r, q): x = q*pi/2 + r with |r| <= pi/4, q an i32 register (mod 4 is what matters).

    |x| < pi/4: r = x. |x| < 2**30: Cody-Waite with a three-part pi/2. Larger: Payne-Hanek,
    multiplying the 53-bit mantissa by a 128-bit window of 2/pi's bits in integer arithmetic.
    """
    em = D.em
    k = D.rint(D.mul(x, D.c(2.0 / math.pi)))
    nk = D.neg(k)
    r = D.fma(nk, D.c(PIO2[0]), x)
    r = D.fma(nk, D.c(PIO2[1]), r)
    r = D.fma(nk, D.c(PIO2[2]), r)
    kd = em.tmp("rd")
    em.ins(f"cvt.rzi.s64.f64 {kd}, {k}")
    q = em.tmp("r")
    em.ins(f"cvt.u32.u64 {q}, {kd}")
    ax = D.abs(x)
    small = D.setp("lt", ax, D.c(math.pi / 4))
    em.ins(f"@{small} mov.f64 {r}, {x}")               # keeps -0.0 and full accuracy
    em.ins(f"@{small} mov.u32 {q}, 0")
    big = D.setp("ge", ax, D.c(2.0 ** 30))
    big_ok = em.tmp("p")
    em.ins(f"testp.finite.f64 {big_ok}, {x}")
    em.ins(f"and.pred {big}, {big}, {big_ok}")
    done = em.label("reduced")
    em.bra(done, big, negate=True)
    _payne_hanek(D, x, r, q)
    em.place(done)
    em.ins(f"and.b32 {q}, {q}, 3")
    return r, q


def _payne_hanek(D: _D, x, r, q):
    """Write the reduction of a large finite x into registers r (f64) and q (i32)."""
    em = D.em
    if _table_decl() not in em.module_decls:
        em.module_decls.append(_table_decl())
    R = lambda: em.tmp("rd")  # noqa: E731
    bits, m, e64, o, j = R(), R(), R(), R(), R()
    b, nb = em.tmp("r"), em.tmp("r")
    em.ins(f"mov.b64 {bits}, {x}")
    em.ins(f"and.b64 {m}, {bits}, 0x000FFFFFFFFFFFFF")
    em.ins(f"or.b64 {m}, {m}, 0x0010000000000000")     # 53-bit integer mantissa M
    em.ins(f"shr.u64 {e64}, {bits}, 52")
    em.ins(f"and.b64 {e64}, {e64}, 0x7FF")
    # |x| = M * 2**(E-1075); the window of 2/pi starts at bit E-1075-2, +64 for the zero word
    em.ins(f"add.s64 {o}, {e64}, {-1075 - 2 + 64}")
    em.ins(f"shr.u64 {j}, {o}, 6")
    em.ins(f"cvt.u32.u64 {b}, {o}")
    em.ins(f"and.b32 {b}, {b}, 63")
    em.ins(f"sub.s32 {nb}, 64, {b}")
    base = em.tmp("rd")
    em.ins(f"mov.u64 {base}, {_TABLE}")
    em.ins(f"mad.lo.s64 {base}, {j}, 8, {base}")
    t0, t1, t2 = R(), R(), R()
    for i, t in enumerate((t0, t1, t2)):
        em.ins(f"ld.const.u64 {t}, [{base}+{8 * i}]")
    whi, wlo, tmp = R(), R(), R()
    em.ins(f"shl.b64 {whi}, {t0}, {b}")
    em.ins(f"shr.b64 {tmp}, {t1}, {nb}")                # amount 64 gives 0: PTX clamps shifts
    em.ins(f"or.b64 {whi}, {whi}, {tmp}")
    em.ins(f"shl.b64 {wlo}, {t1}, {b}")
    em.ins(f"shr.b64 {tmp}, {t2}, {nb}")
    em.ins(f"or.b64 {wlo}, {wlo}, {tmp}")
    lo1, hi1, lo2, p1 = R(), R(), R(), R()
    em.ins(f"mul.lo.u64 {lo1}, {m}, {wlo}")
    em.ins(f"mul.hi.u64 {hi1}, {m}, {wlo}")
    em.ins(f"mul.lo.u64 {lo2}, {m}, {whi}")
    em.ins(f"add.u64 {p1}, {lo2}, {hi1}")               # bits 64..127 of M*W (carry not needed)
    # x*2/pi = M*W / 2**126: quadrant = bits 126..127, fraction = the bits below
    qq, f, top = R(), R(), R()
    em.ins(f"shr.u64 {qq}, {p1}, 62")
    em.ins(f"shl.b64 {f}, {p1}, 2")
    em.ins(f"shr.u64 {top}, {lo1}, 62")
    em.ins(f"or.b64 {f}, {f}, {top}")                   # 64-bit fraction in units of 2**-64
    up = em.tmp("p")
    em.ins(f"setp.lt.s64 {up}, {f}, 0")                 # fraction >= 1/2: next quadrant
    em.ins(f"@{up} add.u64 {qq}, {qq}, 1")
    ff = em.tmp("fd")
    em.ins(f"cvt.rn.f64.s64 {ff}, {f}")                 # signed: fraction - 1 when it rounded up
    em.ins(f"mul.rn.f64 {r}, {ff}, {D.c(math.pi / 2 * 2.0 ** -64)}")
    em.ins(f"cvt.u32.u64 {q}, {qq}")
    neg = em.tmp("p")
    em.ins(f"setp.lt.s64 {neg}, {bits}, 0")
    em.ins(f"@{neg} neg.f64 {r}, {r}")
    em.ins(f"@{neg} neg.s32 {q}, {q}")


def _sin_poly(D, r):
    r2 = D.mul(r, r)
    p = D.horner(r2, [(-1) ** k / math.factorial(2 * k + 1) for k in range(1, 10)])
    return D.fma(D.mul(r, r2), p, r)


def _cos_poly(D, r):
    r2 = D.mul(r, r)
    p = D.horner(r2, [(-1) ** k / math.factorial(2 * k) for k in range(1, 11)])
    return D.fma(r2, p, D.c(1.0))


def _quadrant(D, q, vals):
    """vals[q] for q in 0..3."""
    em = D.em
    out = vals[0]
    for i in (1, 2, 3):
        p = em.tmp("p")
        em.ins(f"setp.eq.u32 {p}, {q}, {i}")
        out = D.sel(p, vals[i], out)
    return out


def _sin(D, x):
    r, q = _reduce_pio2(D, x)
    s, c = _sin_poly(D, r), _cos_poly(D, r)
    res = _quadrant(D, q, [s, c, D.neg(s), D.neg(c)])
    return D.sel(D.setp("eq", x, D.c(0.0)), x, res)          # sin(-0) = -0


def _cos(D, x):
    r, q = _reduce_pio2(D, x)
    s, c = _sin_poly(D, r), _cos_poly(D, r)
    return _quadrant(D, q, [c, D.neg(s), D.neg(c), s])


def _tan(D, x):
    r, q = _reduce_pio2(D, x)
    s, c = _sin_poly(D, r), _cos_poly(D, r)
    odd = D.em.tmp("r")
    D.em.ins(f"and.b32 {odd}, {q}, 1")
    p = D.em.tmp("p")
    D.em.ins(f"setp.ne.u32 {p}, {odd}, 0")
    res = D.sel(p, D.neg(D.div(c, s)), D.div(s, c))
    return D.sel(D.setp("eq", x, D.c(0.0)), x, res)


def _atan_pos(D, t):
    """atan(t) for t >= 0 (t may be inf or NaN)."""
    inv = D.setp("gt", t, D.c(1.0))
    u = D.sel(inv, D.div(D.c(1.0), t), t)
    big = D.setp("gt", u, D.c(0.2679491924311227))          # tan(pi/12)
    s3 = D.c(math.sqrt(3.0))
    v = D.sel(big, D.div(D.fma(u, s3, D.c(-1.0)), D.add(u, s3)), u)
    v2 = D.mul(v, v)
    p = D.horner(v2, [(-1) ** k / (2 * k + 1) for k in range(1, 17)])
    a = D.fma(D.mul(v, v2), p, v)
    a = D.sel(big, D.add(a, D.c(math.pi / 6)), a)
    return D.sel(inv, D.sub(D.c(math.pi / 2), a), a)


def _atan(D, x):
    return D.copysign(_atan_pos(D, D.abs(x)), x)


def _atan2(D, y, x):
    em = D.em
    ax, ay = D.abs(x), D.abs(y)
    t = D.div(ay, ax)
    both0 = em.tmp("p")
    em.ins(f"setp.eq.and.f64 {both0}, {ax}, {D.c(0.0)}, {D.setp('eq', ay, D.c(0.0))}")
    t = D.sel(both0, D.c(0.0), t)
    bothinf = em.tmp("p")
    em.ins(f"setp.eq.and.f64 {bothinf}, {ax}, {D.c(math.inf)}, {D.setp('eq', ay, D.c(math.inf))}")
    t = D.sel(bothinf, D.c(1.0), t)
    a = _atan_pos(D, t)
    xbits = em.tmp("rd")
    em.ins(f"mov.b64 {xbits}, {x}")
    neg = em.tmp("p")
    em.ins(f"setp.lt.s64 {neg}, {xbits}, 0")                   # x < 0 or x == -0
    a = D.sel(neg, D.sub(D.c(math.pi), a), a)
    return D.copysign(a, y)


def _expm1(D, x):
    small = D.setp("lt", D.abs(x), D.c(0.5))
    p = D.horner(x, [1.0 / math.factorial(k) for k in range(1, 19)])
    return D.sel(small, D.mul(x, p), D.sub(_exp(D, x), D.c(1.0)))


def _log1p(D, x):
    u = D.add(x, D.c(1.0))
    lu = _log(D, u)
    res = D.mul(lu, D.div(x, D.sub(u, D.c(1.0))))
    res = D.sel(D.setp("eq", u, D.c(1.0)), x, res)
    res = D.sel(D.setp("eq", x, D.c(math.inf)), x, res)
    return D.sel(D.setp("eq", u, D.c(0.0)), D.c(-math.inf), res)


def _sinh(D, x):
    ax = D.abs(x)
    e = _exp(D, ax)
    big = D.mul(D.sub(e, D.div(D.c(1.0), e)), D.c(0.5))
    x2 = D.mul(x, x)
    p = D.horner(x2, [1.0 / math.factorial(2 * k + 1) for k in range(1, 10)])
    small = D.fma(D.mul(x, x2), p, x)
    return D.sel(D.setp("lt", ax, D.c(0.5)), small, D.copysign(big, x))


def _cosh(D, x):
    e = _exp(D, D.abs(x))
    return D.mul(D.add(e, D.div(D.c(1.0), e)), D.c(0.5))


def _tanh(D, x):
    ax = D.abs(x)
    m = _expm1(D, D.add(ax, ax))
    t = D.div(m, D.add(m, D.c(2.0)))
    t = D.sel(D.setp("gt", ax, D.c(22.0)), D.c(1.0), t)
    return D.copysign(t, x)


def _erf(D, x):
    """2/sqrt(pi) * exp(-x^2) * sum 2^n x^(2n+1) / (1*3*...*(2n+1)): positive terms only."""
    em = D.em
    ax = D.min(D.abs(x), D.c(6.0))
    two_x2 = D.mul(D.c(2.0), D.mul(ax, ax))
    term, total, den = em.tmp("fd"), em.tmp("fd"), em.tmp("fd")
    em.ins(f"mov.f64 {term}, {ax}")
    em.ins(f"mov.f64 {total}, {ax}")
    em.ins(f"mov.f64 {den}, {D.c(1.0)}")
    loop = em.label("erf")
    em.place(loop)
    em.ins(f"add.rn.f64 {den}, {den}, {D.c(2.0)}")
    em.ins(f"mul.rn.f64 {term}, {term}, {two_x2}")
    em.ins(f"div.rn.f64 {term}, {term}, {den}")
    em.ins(f"add.rn.f64 {total}, {total}, {term}")
    more = D.setp("gt", term, D.mul(total, D.c(2.0 ** -56)))
    em.bra(loop, more)
    e = _exp(D, D.neg(D.mul(ax, ax)))
    res = D.mul(D.mul(total, e), D.c(2.0 / math.sqrt(math.pi)))
    res = D.min(res, D.c(1.0))
    res = D.sel(D.setp("ge", ax, D.c(6.0)), D.c(1.0), res)
    res = D.copysign(res, x)
    return D.sel(D.test("notanumber", x), x, res)


def _pow(D, x, y):
    em = D.em
    r = _exp(D, D.mul(y, _log(D, D.abs(x))))
    yint = D.setp("eq", D.rint(y), y)
    half = D.mul(y, D.c(0.5))
    yodd = em.tmp("p")
    em.ins(f"setp.neu.and.f64 {yodd}, {D.rint(half)}, {half}, {yint}")
    xneg = em.tmp("p")
    xbits = em.tmp("rd")
    em.ins(f"mov.b64 {xbits}, {x}")
    em.ins(f"setp.lt.s64 {xneg}, {xbits}, 0")
    flip = em.tmp("p")
    em.ins(f"and.pred {flip}, {xneg}, {yodd}")
    r = D.sel(flip, D.neg(r), r)
    bad = em.tmp("p")
    em.ins(f"setp.lt.and.f64 {bad}, {x}, {D.c(0.0)}, {D.test('finite', y)}")
    em.ins(f"and.pred {bad}, {bad}, {D.test('finite', x)}")   # pow(-inf, y) is +-inf or 0
    em.ins(f"and.pred {bad}, {bad}, {_not(em, yint)}")
    r = D.sel(bad, D.c(math.nan), r)
    r = D.sel(D.setp("eq", x, D.c(1.0)), D.c(1.0), r)
    return D.sel(D.setp("eq", y, D.c(0.0)), D.c(1.0), r)


def _not(em, p):
    q = em.tmp("p")
    em.ins(f"not.pred {q}, {p}")
    return q


def _fmod(D, x, y):
    """Exact C fmod: subtract |y| * 2**k (exact by Sterbenz) while |x| >= |y|.

    Exponents count denormals by their leading bit (12 - clz of the mantissa) and |y| * 2**k is
    formed by multiplications, so denormal divisors work (a raw exponent-field ldexp does not
    scale a denormal correctly, and the loop would then never end)."""
    em = D.em
    special = em.tmp("p")
    em.ins(f"testp.notanumber.f64 {special}, {x}")
    for p in (D.test("notanumber", y), D.test("infinite", x), D.setp("eq", y, D.c(0.0))):
        em.ins(f"or.pred {special}, {special}, {p}")
    ax, ay = em.tmp("fd"), em.tmp("fd")
    em.ins(f"abs.f64 {ax}, {x}")
    em.ins(f"abs.f64 {ay}, {y}")
    em.ins(f"@{special} mov.f64 {ax}, {D.c(0.0)}")
    em.ins(f"@{special} mov.f64 {ay}, {D.c(1.0)}")
    ey = _fmod_exponent(em, ay)
    loop, end = em.label("fmod"), em.label("fmod_end")
    em.place(loop)
    done = D.setp("lt", ax, ay)
    em.bra(end, done)
    k = em.tmp("r")
    em.ins(f"sub.s32 {k}, {_fmod_exponent(em, ax)}, {ey}")
    em.ins(f"sub.s32 {k}, {k}, 1")
    em.ins(f"max.s32 {k}, {k}, 0")
    t = ay
    for _ in range(3):  # t = |y| * 2**k, k <= ~2100, in steps of at most 2**1000
        step, bits, p2 = em.tmp("r"), em.tmp("rd"), em.tmp("fd")
        em.ins(f"min.s32 {step}, {k}, 1000")
        em.ins(f"sub.s32 {k}, {k}, {step}")
        em.ins(f"add.s32 {step}, {step}, 1023")
        em.ins(f"cvt.u64.u32 {bits}, {step}")
        em.ins(f"shl.b64 {bits}, {bits}, 52")
        em.ins(f"mov.b64 {p2}, {bits}")
        t = D.mul(t, p2)
    t2 = D.mul(t, D.c(2.0))
    t = D.sel(D.setp("le", t2, ax), t2, t)  # now t <= |x| < 4 t
    em.ins(f"sub.rn.f64 {ax}, {ax}, {t}")
    em.bra(loop)
    em.place(end)
    res = D.copysign(ax, x)
    return D.sel(special, D.c(math.nan), res)


def _fmod_exponent(em, v):
    """Biased exponent of v >= 0; a denormal counts by its leading bit (12 - clz(mantissa))."""
    bits, field, mant, lz, e = em.tmp("rd"), em.tmp("r"), em.tmp("rd"), em.tmp("r"), em.tmp("r")
    isden = em.tmp("p")
    em.ins(f"mov.b64 {bits}, {v}")
    em.ins(f"shr.u64 {mant}, {bits}, 52")
    em.ins(f"cvt.u32.u64 {field}, {mant}")
    em.ins(f"and.b64 {mant}, {bits}, 4503599627370495")
    em.ins(f"clz.b64 {lz}, {mant}")
    em.ins(f"sub.s32 {e}, 12, {lz}")
    em.ins(f"setp.eq.u32 {isden}, {field}, 0")
    em.ins(f"selp.b32 {e}, {e}, {field}, {isden}")
    return e


_ACCURATE_1 = {"exp": _exp, "exp2": _exp2, "log": _log, "sin": _sin, "cos": _cos, "tan": _tan,
               "atan": _atan, "expm1": _expm1, "log1p": _log1p, "sinh": _sinh, "cosh": _cosh,
               "tanh": _tanh, "erf": _erf,
               "log2": lambda D, x: D.mul(_log(D, x), D.c(1.0 / LN2)),
               "log10": lambda D, x: D.mul(_log(D, x), D.c(1.0 / math.log(10.0))),
               "asin": lambda D, x: _atan2(D, x, D.sqrt(D.mul(D.sub(D.c(1.0), x), D.add(D.c(1.0), x)))),
               "acos": lambda D, x: _atan2(D, D.sqrt(D.mul(D.sub(D.c(1.0), x), D.add(D.c(1.0), x))), x),
               "rsqrt": lambda D, x: D.div(D.c(1.0), D.sqrt(x))}
_ACCURATE_2 = {"pow": _pow, "atan2": _atan2, "fmod": _fmod}

# --- fast (hardware approximation) f32 forms: fn -> (pre-scale, instruction, post-scale) ---------
_FAST = {"exp": (LOG2E, "ex2.approx.f32", None), "exp2": (None, "ex2.approx.f32", None),
         "log": (None, "lg2.approx.f32", LN2), "log2": (None, "lg2.approx.f32", None),
         "log10": (None, "lg2.approx.f32", math.log10(2.0)), "sin": (None, "sin.approx.f32", None),
         "cos": (None, "cos.approx.f32", None), "tanh": (None, "tanh.approx.f32", None),
         "rsqrt": (None, "rsqrt.approx.f32", None), "sqrt": (None, "sqrt.approx.f32", None)}
_ROUND = {"floor": "rmi", "ceil": "rpi", "trunc": "rzi", "rint": "rni"}
_TESTP = {"isnan": "notanumber", "isinf": "infinite", "isfinite": "finite"}


def emit(em: Emitter, fn: str, t: dt.DType, args: list[str], fast: bool) -> str:
    """Result register of math function ``fn`` on operands of float dtype ``t``."""
    if not t.is_float:
        raise NotImplementedError(f"PTX: math.{fn} on {t.name} (cast to a float dtype first)")
    if fn in _TESTP:
        a = em.to_f32(args[0], t) if t.bits == 16 else args[0]
        p = em.tmp("p")
        em.ins(f"testp.{_TESTP[fn]}.{'f64' if t.name == 'f64' else 'f32'} {p}, {a}")
        return p
    if fn == "copysign":
        return _copysign(em, t, *args)
    if t.bits == 16:  # compute in f32 (exact widening) and round once
        wide = [em.to_f32(a, t) for a in args]
        return em.from_f32(emit(em, fn, dt.f32, wide, fast), t)
    if fn in _ROUND:
        d = em.reg(t)
        em.ins(f"cvt.{_ROUND[fn]}.{t.name}.{t.name} {d}, {args[0]}")
        return d
    if fn == "sqrt" and not (fast and t.name == "f32"):
        d = em.reg(t)
        em.ins(f"sqrt.rn.{t.name} {d}, {args[0]}")
        return d
    if fast and t.name == "f32":
        r = _fast_f32(em, fn, args)
        if r is not None:
            return r
    if fast and t.name == "f64" and fn == "rsqrt":
        d = em.reg(t)
        em.ins(f"rsqrt.approx.f64 {d}, {args[0]}")
        return d
    D = _D(em)
    wide = [ptx_ops.cast(em, t, dt.f64, a) for a in args]
    if fn in _ACCURATE_1:
        r = _ACCURATE_1[fn](D, wide[0])
    elif fn in _ACCURATE_2:
        r = _ACCURATE_2[fn](D, *wide)
    else:
        raise NotImplementedError(f"PTX: math.{fn}")
    return ptx_ops.cast(em, dt.f64, t, r)


def fmod(em: Emitter, t: dt.DType, a: str, b: str) -> str:
    """Float ``rem`` (C fmod semantics: truncated quotient, exact)."""
    return emit(em, "fmod", t, [a, b], False)


def _fast_f32(em, fn, args):
    x = args[0]
    if fn == "tan":
        s, c, d = em.tmp("f"), em.tmp("f"), em.tmp("f")
        em.ins(f"sin.approx.f32 {s}, {x}")
        em.ins(f"cos.approx.f32 {c}, {x}")
        em.ins(f"div.approx.f32 {d}, {s}, {c}")
        return d
    if fn == "pow":
        l, d = em.tmp("f"), em.tmp("f")
        em.ins(f"lg2.approx.f32 {l}, {x}")
        em.ins(f"mul.rn.f32 {l}, {l}, {args[1]}")
        em.ins(f"ex2.approx.f32 {d}, {l}")
        return d
    if fn not in _FAST:
        return None
    pre, instr, post = _FAST[fn]
    if pre is not None:
        y = em.tmp("f")
        em.ins(f"mul.rn.f32 {y}, {x}, {f32_hex(pre)}")
        x = y
    d = em.tmp("f")
    em.ins(f"{instr} {d}, {x}")
    if post is not None:
        em.ins(f"mul.rn.f32 {d}, {d}, {f32_hex(post)}")
    return d


def _copysign(em, t, mag, sign):
    d = em.reg(t)
    if t.bits == 16:
        m, s = em.tmp("h"), em.tmp("h")
        em.ins(f"and.b16 {m}, {mag}, 0x7FFF")
        em.ins(f"and.b16 {s}, {sign}, 0x8000")
        em.ins(f"or.b16 {d}, {m}, {s}")
    else:
        em.ins(f"copysign.{t.name} {d}, {sign}, {mag}")  # PTX: copysign d, sign-source, magnitude
    return d
