"""Math functions for the LLVM emitter.

Three kinds:

- exact (``sqrt floor ceil trunc rint copysign fmod isnan isinf isfinite``, and ``rsqrt`` as
  ``1 / sqrt``): LLVM intrinsics / instructions that are correctly rounded on every target, so
  bit-identical everywhere (``llvm.sqrt`` without ``afn`` is correctly rounded on amdgcn and
  nvptx; ``fmod`` is an exact loop (:func:`fmod_exact`), not ``frem``, which the nvptx and
  AMDGPU backends expand inexactly);
- fast (``fast=True``, f32 only, where the target has one): the hardware approximation from the
  target table (amdgcn ``v_exp_f32``/``v_log_f32``/``v_sin_f32``...; nvptx ``ex2.approx``...);
  other functions and dtypes fall back to the portable form;
- portable: evaluated in f64 from basic IEEE operations (range reduction + polynomials), then
  rounded once to the argument's dtype. For f32/f16/bf16 results the f64 error (a few 1e-16
  relative) is far below half an ulp, so results are correctly rounded except in rare
  double-rounding cases (<= 1 ulp). For f64 results: exp/exp2/expm1/log/log2/log10/log1p/sin/
  cos/atan/asin/acos/atan2 are within a few ulp; tan/sinh/cosh/tanh within ~8 ulp; pow loses
  up to |y*log(x)|*2^-52 relative (hundreds of ulp near overflow); erf within ~1e-15 absolute.
  sin/cos/tan reduce by pi/2 with a three-part Cody-Waite reduction for |x| < 2^20 and a
  Payne-Hanek reduction (2/pi in 24-bit chunks, exact split products, two-sum) above, so large
  arguments are reduced accurately too.

This module is a stopgap until the portable IR math library (written once in kaio IR for every
backend) replaces the portable branch.
"""
from __future__ import annotations

import math

from ..errors import CompileError

EXACT_UNARY = {"sqrt": "llvm.sqrt", "floor": "llvm.floor", "ceil": "llvm.ceil",
               "trunc": "llvm.trunc", "rint": "llvm.roundeven"}

_LN2_HI = 6.93147180369123816490e-01   # ln 2 split so that n * hi is exact for |n| < 2^20
_LN2_LO = 1.90821492927058770002e-10
_PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21)
_PH_CHUNKS = 7          # chunks of 2/pi per Payne-Hanek reduction: truncation error < 2^-90


def _pi_fixed(bits: int) -> int:
    """floor(pi * 2^bits) from Machin's formula in integer arithmetic."""
    one = 1 << (bits + 32)

    def arctan_inv(q):
        total, term, k, sign = 0, one // q, 1, 1
        while term:
            total += sign * (term // k)
            term //= q * q
            k, sign = k + 2, -sign
        return total
    return (4 * (4 * arctan_inv(5) - arctan_inv(239))) >> 32


def _two_over_pi_chunks(n: int = 56) -> list[int]:
    """2/pi = sum_j c_j * 2^(-24 (j + 1)) with 24-bit integers c_j."""
    bits = 24 * n + 64
    v = (1 << (2 * bits + 1)) // _pi_fixed(bits)     # floor(2/pi * 2^bits)
    return [(v >> (bits - 24 * (j + 1))) & 0xFFFFFF for j in range(n)]


_TWO_OVER_PI = _two_over_pi_chunks()
_PIO2_HI = math.pi / 2
_PIO2_LO = 6.123233995736766e-17        # pi/2 - _PIO2_HI


def _hex(v: float) -> str:
    import struct
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]


class F64:
    """Tiny f64 instruction builder over a FunctionEmitter (values are LLVM operand strings)."""

    def __init__(self, fe):
        self.fe = fe

    def c(self, v: float) -> str:
        return _hex(float(v))

    def bin(self, op, a, b):
        return self.fe.ins(f"{op} double {a}, {b}")

    def add(self, a, b): return self.bin("fadd", a, b)
    def sub(self, a, b): return self.bin("fsub", a, b)
    def mul(self, a, b): return self.bin("fmul", a, b)
    def div(self, a, b): return self.bin("fdiv", a, b)

    def fma(self, a, b, c):
        return self.fe.call("double", "llvm.fma.f64", ("double", a), ("double", b), ("double", c))

    def un(self, name, a):
        return self.fe.call("double", f"{name}.f64", ("double", a))

    def abs(self, a): return self.un("llvm.fabs", a)
    def rint(self, a): return self.un("llvm.roundeven", a)
    def sqrt(self, a): return self.un("llvm.sqrt", a)

    def copysign(self, a, b):
        return self.fe.call("double", "llvm.copysign.f64", ("double", a), ("double", b))

    def cmp(self, pred, a, b):
        return self.fe.ins(f"fcmp {pred} double {a}, {b}")

    def sel(self, c, a, b):
        return self.fe.ins(f"select i1 {c}, double {a}, double {b}")

    def minmax(self, name, a, b):
        return self.fe.call("double", f"llvm.{name}.f64", ("double", a), ("double", b))

    def poly(self, x, coeffs):
        """coeffs[0] + x*(coeffs[1] + x*(...)) by Horner with fused steps."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def to_int(self, a, bits=32):
        return self.fe.call(f"i{bits}", f"llvm.fptosi.sat.i{bits}.f64", ("double", a))

    def pow2i(self, n):
        """2**n as f64 for an i32 n in [-1022, 1023] (built from the exponent bits)."""
        e = self.fe.ins(f"add i32 {n}, 1023")
        bits = self.fe.ins(f"shl i64 {self.fe.ins(f'zext i32 {e} to i64')}, 52")
        return self.fe.ins(f"bitcast i64 {bits} to double")

    # --- building blocks ---------------------------------------------------------------------
    def exp_reduced(self, r, n):
        """e**r * 2**n for |r| <= 0.35 and an i32 |n| <= 1800 (scaled in two halves)."""
        p = self.poly(r, [1.0 / math.factorial(k) for k in range(15)])
        n1 = self.fe.ins(f"sdiv i32 {n}, 2")
        n2 = self.fe.ins(f"sub i32 {n}, {n1}")
        return self.mul(self.mul(p, self.pow2i(n1)), self.pow2i(n2))

    def nan_through(self, x, r):
        return self.sel(self.cmp("uno", x, x), x, r)

    def exp(self, x):
        xc = self.minmax("maxnum", self.minmax("minnum", x, self.c(1200.0)), self.c(-1200.0))
        k = self.rint(self.mul(xc, self.c(1.0 / math.log(2))))
        r = self.fma(k, self.c(-_LN2_HI), xc)
        r = self.fma(k, self.c(-_LN2_LO), r)
        return self.nan_through(x, self.exp_reduced(r, self.to_int(k)))

    def exp2(self, x):
        xc = self.minmax("maxnum", self.minmax("minnum", x, self.c(1800.0)), self.c(-1800.0))
        k = self.rint(xc)
        r = self.mul(self.sub(xc, k), self.c(math.log(2)))
        return self.nan_through(x, self.exp_reduced(r, self.to_int(k)))

    def expm1(self, x):
        small = self.cmp("olt", self.abs(x), self.c(0.5))
        series = self.mul(x, self.poly(x, [1.0 / math.factorial(k + 1) for k in range(18)]))
        return self.sel(small, series, self.sub(self.exp(x), self.c(1.0)))

    def log(self, x):
        fe = self.fe
        tiny = self.cmp("olt", x, self.c(2.0 ** -1022))           # subnormal: scale up first
        xs = self.sel(tiny, self.mul(x, self.c(2.0 ** 54)), x)
        bits = fe.ins(f"bitcast double {xs} to i64")
        hi = fe.ins(f"lshr i64 {bits}, 52")
        e = fe.ins(f"sub i32 {fe.ins(f'trunc i64 {hi} to i32')}, 1023")
        e = fe.ins(f"select i1 {tiny}, i32 {fe.ins(f'sub i32 {e}, 54')}, i32 {e}")
        mbits = fe.ins(f"or i64 {fe.ins(f'and i64 {bits}, 4503599627370495')}, 4607182418800017408")
        m = fe.ins(f"bitcast i64 {mbits} to double")                # in [1, 2)
        big = self.cmp("ogt", m, self.c(math.sqrt(2.0)))
        m = self.sel(big, self.mul(m, self.c(0.5)), m)
        e = fe.ins(f"add i32 {e}, {fe.ins(f'zext i1 {big} to i32')}")
        f = self.sub(m, self.c(1.0))
        s = self.div(f, self.add(f, self.c(2.0)))
        s2 = self.mul(s, s)
        logm = self.mul(self.mul(s, self.c(2.0)), self.poly(s2, [1.0 / (2 * k + 1) for k in range(12)]))
        ef = fe.ins(f"sitofp i32 {e} to double")
        r = self.fma(ef, self.c(_LN2_HI), self.fma(ef, self.c(_LN2_LO), logm))
        r = self.sel(self.cmp("oeq", x, self.c(math.inf)), x, r)
        r = self.sel(self.cmp("oeq", x, self.c(0.0)), self.c(-math.inf), r)
        return self.sel(self.cmp("ult", x, self.c(0.0)), self.c(math.nan), r)   # x < 0 or NaN

    def log1p(self, x):
        u = self.add(x, self.c(1.0))
        um1 = self.sub(u, self.c(1.0))
        r = self.mul(self.log(u), self.div(x, um1))          # corrects the rounding of 1 + x
        r = self.sel(self.cmp("oeq", um1, self.c(0.0)), x, r)
        return self.sel(self.cmp("oeq", x, self.c(math.inf)), x, r)

    def sincos(self, x):
        """(sin x, cos x) after reduction by pi/2: Cody-Waite below 2^20, Payne-Hanek above."""
        fe = self.fe
        k = self.rint(self.mul(x, self.c(2.0 / math.pi)))
        r = x
        for part in _PIO2:
            r = self.fma(k, self.c(-part), r)
        huge = self.cmp("oge", self.abs(x), self.c(2.0 ** 20))
        pre, ph_l, join_l = fe.label, fe.new_label("payne_hanek"), fe.new_label("trig")
        fe.emit(f"br i1 {huge}, label %{ph_l}, label %{join_l}")
        fe.start(ph_l)
        k_ph, r_ph = self.payne_hanek(x)
        ph_end = fe.label
        fe.emit(f"br label %{join_l}")
        fe.start(join_l)
        k = fe.ins(f"phi double [ {k}, %{pre} ], [ {k_ph}, %{ph_end} ]")
        r = fe.ins(f"phi double [ {r}, %{pre} ], [ {r_ph}, %{ph_end} ]")
        r2 = self.mul(r, r)
        s = self.mul(r, self.poly(r2, [(-1) ** n / math.factorial(2 * n + 1) for n in range(10)]))
        c = self.poly(r2, [(-1) ** n / math.factorial(2 * n) for n in range(11)])
        q = fe.ins(f"and i64 {self.to_int(k, 64)}, 3")
        swap = fe.ins(f"icmp ne i64 {fe.ins(f'and i64 {q}, 1')}, 0")
        neg_s = fe.ins(f"icmp ne i64 {fe.ins(f'and i64 {q}, 2')}, 0")
        q1 = fe.ins(f"add i64 {q}, 1")
        neg_c = fe.ins(f"icmp ne i64 {fe.ins(f'and i64 {q1}, 2')}, 0")
        sv, cv = self.sel(swap, c, s), self.sel(swap, s, c)
        sv = self.sel(neg_s, fe.ins(f"fneg double {sv}"), sv)
        cv = self.sel(neg_c, fe.ins(f"fneg double {cv}"), cv)
        inf = self.cmp("oeq", self.abs(x), self.c(math.inf))     # sin/cos(+-inf) = NaN
        return self.sel(inf, self.c(math.nan), sv), self.sel(inf, self.c(math.nan), cv)

    def payne_hanek(self, x):
        """(k, r) with x = k*pi/2 + r, |r| <~ pi/4, for finite |x| >= 2^20: x = M*2^E is
        multiplied by the 24-bit chunks of 2/pi that matter, each product split so it is exact,
        reduced mod 4 and summed error-free (two-sum)."""
        fe = self.fe
        table = "@__kaio_two_over_pi"
        n = len(_TWO_OVER_PI)
        decl = (f"{table} = internal addrspace({fe.t.const_space}) constant [{n} x double] ["
                + ", ".join(f"double {self.c(float(c))}" for c in _TWO_OVER_PI) + "], align 8")
        if decl not in fe.globals:
            fe.globals.append(decl)
        bits = fe.ins(f"bitcast double {self.abs(x)} to i64")
        top = fe.ins(f"lshr i64 {bits}, 52")
        e = fe.ins(f"sub i32 {fe.ins(f'trunc i64 {top} to i32')}, 1075")
        m = fe.ins(f"or i64 {fe.ins(f'and i64 {bits}, 4503599627370495')}, 4503599627370496")
        mh = fe.ins(f"sitofp i64 {fe.ins(f'lshr i64 {m}, 27')} to double")
        ml = fe.ins(f"sitofp i64 {fe.ins(f'and i64 {m}, 134217727')} to double")
        em2 = fe.ins(f"sub i32 {e}, 2")
        neg_e, q24 = fe.ins(f"icmp slt i32 {em2}, 0"), fe.ins(f"sdiv i32 {em2}, 24")
        j0 = fe.ins(f"select i1 {neg_e}, i32 0, i32 {q24}")
        pieces = []
        sp = fe.ptrty(fe.t.const_space)
        for k in range(_PH_CHUNKS):
            idx = fe.ins(f"add i32 {j0}, {k}")
            ptr = fe.ins(f"getelementptr [{n} x double], {sp} {table}, i32 0, i32 {idx}")
            c = fe.ins(f"load double, {sp} {ptr}, align 8")
            nxt = fe.ins(f"add i32 {idx}, 1")
            scale = fe.ins(f"sub i32 {e}, {fe.ins(f'mul i32 {nxt}, 24')}")
            pieces.append(self.mul(self.mul(mh, c), self.pow2i(fe.ins(f"add i32 {scale}, 27"))))
            pieces.append(self.mul(self.mul(ml, c), self.pow2i(scale)))
        s, lo = self.c(0.0), self.c(0.0)
        for p in pieces:        # each piece mod 4 (exact), then an error-free running sum
            p = self.sub(p, self.mul(self.c(4.0), self.un("llvm.floor", self.mul(p, self.c(0.25)))))
            t = self.add(s, p)
            bp = self.sub(t, s)
            err = self.add(self.sub(s, self.sub(t, bp)), self.sub(p, bp))
            s, lo = t, self.add(lo, err)
        k = self.rint(s)
        f = self.add(self.sub(s, k), lo)
        k2 = self.rint(f)
        f, k = self.sub(f, k2), self.add(k, k2)
        r = self.fma(f, self.c(_PIO2_HI), self.mul(f, self.c(_PIO2_LO)))
        neg = self.cmp("olt", x, self.c(0.0))
        return (self.sel(neg, fe.ins(f"fneg double {k}"), k), self.sel(neg, fe.ins(f"fneg double {r}"), r))

    def atan_pos(self, t):
        """atan(t) for 0 <= t <= 1 (NaN passes through)."""
        sqrt3 = math.sqrt(3.0)
        big = self.cmp("ogt", t, self.c(2.0 - sqrt3))
        u = self.div(self.fma(t, self.c(sqrt3), self.c(-1.0)), self.add(t, self.c(sqrt3)))
        u = self.sel(big, u, t)
        u2 = self.mul(u, u)
        a = self.mul(u, self.poly(u2, [(-1) ** n / (2 * n + 1) for n in range(16)]))
        return self.sel(big, self.add(a, self.c(math.pi / 6)), a)

    def atan(self, x):
        ax = self.abs(x)
        inv = self.cmp("ogt", ax, self.c(1.0))
        t = self.sel(inv, self.div(self.c(1.0), ax), ax)
        a = self.atan_pos(t)
        a = self.sel(inv, self.sub(self.c(math.pi / 2), a), a)
        return self.copysign(a, x)

    def atan2(self, y, x):
        fe = self.fe
        ax, ay = self.abs(x), self.abs(y)
        yle = self.cmp("ole", ay, ax)
        t = self.sel(yle, self.div(ay, ax), self.div(ax, ay))
        t = self.sel(self.cmp("oeq", ax, ay), self.c(1.0), t)        # also inf/inf
        t = self.sel(self.cmp("oeq", self.add(ax, ay), self.c(0.0)), self.c(0.0), t)   # 0/0
        a = self.atan_pos(t)
        a = self.sel(yle, a, self.sub(self.c(math.pi / 2), a))
        xbits = fe.ins(f"bitcast double {x} to i64")
        xneg = fe.ins(f"icmp slt i64 {xbits}, 0")                  # includes -0.0
        a = self.sel(xneg, self.sub(self.c(math.pi), a), a)
        a = self.copysign(a, y)
        return self.nan_through(x, self.nan_through(y, a))

    def erf(self, x):
        ax = self.abs(x)
        x2 = self.mul(ax, ax)
        coeffs = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(46)]
        series = self.mul(ax, self.poly(x2, coeffs))
        f = ax                                   # continued fraction for erfc, bottom-up
        for k in range(40, 0, -1):
            f = self.add(ax, self.div(self.c(k / 2), f))
        erfc = self.div(self.exp(self.sub(self.c(0.0), x2)), self.mul(self.c(math.sqrt(math.pi)), f))
        tail = self.sel(self.cmp("ogt", ax, self.c(6.0)), self.c(1.0), self.sub(self.c(1.0), erfc))
        r = self.sel(self.cmp("olt", ax, self.c(2.5)), series, tail)
        return self.nan_through(x, self.copysign(r, x))


def _half_exp(d: F64, ax):
    """exp(|x|)/2 without overflowing early."""
    return d.exp(d.sub(ax, d.c(math.log(2))))


def _sinh(d: F64, x):
    ax = d.abs(x)
    e = d.expm1(ax)
    s = d.mul(d.add(e, d.div(e, d.add(e, d.c(1.0)))), d.c(0.5))
    s = d.sel(d.cmp("ogt", ax, d.c(22.0)), _half_exp(d, ax), s)
    return d.nan_through(x, d.copysign(s, x))


def _cosh(d: F64, x):
    ax = d.abs(x)
    e = d.exp(ax)
    c = d.mul(d.add(e, d.div(d.c(1.0), e)), d.c(0.5))
    return d.sel(d.cmp("ogt", ax, d.c(22.0)), _half_exp(d, ax), c)


def _tanh(d: F64, x):
    ax = d.abs(x)
    e = d.expm1(d.mul(ax, d.c(2.0)))
    t = d.div(e, d.add(e, d.c(2.0)))
    t = d.sel(d.cmp("ogt", ax, d.c(22.0)), d.c(1.0), t)
    return d.nan_through(x, d.copysign(t, x))


def _tan(d: F64, x):
    s, c = d.sincos(x)
    return d.div(s, c)


def _asin(d: F64, x):
    return d.atan2(x, d.sqrt(d.mul(d.sub(d.c(1.0), x), d.add(d.c(1.0), x))))


def _acos(d: F64, x):
    return d.atan2(d.sqrt(d.mul(d.sub(d.c(1.0), x), d.add(d.c(1.0), x))), x)


def _pow(d: F64, x, y):
    fe = d.fe
    ax = d.abs(x)
    r = d.exp(d.mul(y, d.log(ax)))
    yint = d.cmp("oeq", d.un("llvm.trunc", y), y)
    half = d.mul(y, d.c(0.5))
    yodd = fe.ins(f"and i1 {yint}, {d.cmp('une', d.un('llvm.trunc', half), half)}")
    xneg = fe.ins(f"icmp slt i64 {fe.ins(f'bitcast double {x} to i64')}, 0")
    r = d.sel(fe.ins(f"and i1 {xneg}, {yodd}"), fe.ins(f"fneg double {r}"), r)
    bad = fe.ins(f"and i1 {d.cmp('olt', x, d.c(0.0))}, {fe.ins(f'xor i1 {yint}, true')}")
    finite = fe.ins(f"and i1 {d.cmp('one', d.abs(y), d.c(math.inf))}, {d.cmp('one', ax, d.c(math.inf))}")
    r = d.sel(fe.ins(f"and i1 {bad}, {finite}"), d.c(math.nan), r)   # (-x)**non-integer
    one = fe.ins(f"and i1 {d.cmp('oeq', ax, d.c(1.0))}, {d.cmp('oeq', d.abs(y), d.c(math.inf))}")
    one = fe.ins(f"or i1 {one}, {d.cmp('oeq', y, d.c(0.0))}")
    one = fe.ins(f"or i1 {one}, {d.cmp('oeq', x, d.c(1.0))}")
    return d.sel(one, d.c(1.0), r)


PORTABLE = {
    "exp": lambda d, x: d.exp(x),
    "exp2": lambda d, x: d.exp2(x),
    "expm1": lambda d, x: d.expm1(x),
    "log": lambda d, x: d.log(x),
    "log2": lambda d, x: d.mul(d.log(x), d.c(1.0 / math.log(2))),
    "log10": lambda d, x: d.mul(d.log(x), d.c(1.0 / math.log(10))),
    "log1p": lambda d, x: d.log1p(x),
    "sin": lambda d, x: d.sincos(x)[0],
    "cos": lambda d, x: d.sincos(x)[1],
    "tan": _tan,
    "atan": lambda d, x: d.atan(x),
    "asin": _asin,
    "acos": _acos,
    "sinh": _sinh,
    "cosh": _cosh,
    "tanh": _tanh,
    "erf": lambda d, x: d.erf(x),
    "atan2": lambda d, y, x: d.atan2(y, x),
    "pow": _pow,
}


def lower(fe, fn: str, args: list[str], dtype, fast: bool) -> str:
    """LLVM value of ``math fn(args)`` for float ``dtype`` (see the module docstring)."""
    from .llvm import llty, suffix
    if not dtype.is_float:
        raise CompileError(f"math.{fn} takes a float argument, got {dtype.name}; cast first",
                           kernel=fe.k.name)
    ty, sfx = llty(dtype), suffix(dtype)
    a = args[0]
    if fn in EXACT_UNARY and not (fast and fn in fe.t.fast_f32 and dtype.name == "f32"):
        return fe.call(ty, f"{EXACT_UNARY[fn]}.{sfx}", (ty, a))
    if fn == "rsqrt" and not (fast and dtype.name == "f32"):
        return fe.ins(f"fdiv {ty} {float_one(dtype)}, {fe.call(ty, f'llvm.sqrt.{sfx}', (ty, a))}")
    if fn == "copysign":
        return fe.call(ty, f"llvm.copysign.{sfx}", (ty, a), (ty, args[1]))
    if fn == "fmod":
        return fmod_exact(fe, ty, a, args[1])
    if fn == "isnan":
        return fe.ins(f"fcmp uno {ty} {a}, {a}")
    if fn in ("isinf", "isfinite"):
        mag = fe.call(ty, f"llvm.fabs.{sfx}", (ty, a))
        inf = float_inf(dtype)
        return fe.ins(f"fcmp {'oeq' if fn == 'isinf' else 'olt'} {ty} {mag}, {inf}")
    if fast and dtype.name == "f32" and fn in fe.t.fast_f32:
        return fe.snippet(fe.t.fast_f32[fn], a=a)
    if fn not in PORTABLE:
        raise CompileError(f"math.{fn} has no LLVM lowering", kernel=fe.k.name)
    d = F64(fe)
    wide = [x if ty == "double" else fe.ins(f"fpext {ty} {x} to double") for x in args]
    r = PORTABLE[fn](d, *wide)
    return r if ty == "double" else fe.ins(f"fptrunc double {r} to {ty}")


def fmod_exact(fe, ty: str, a: str, b: str) -> str:
    """Exact C fmod (float ``rem`` and ``math.fmod``) for half/bfloat/float/double, in f64.

    Not ``frem``: the nvptx and AMDGPU backends expand frem as ``x - trunc(x / y) * y`` with a
    rounded quotient, which is wrong whenever x / y rounds across an integer (fmod(1, 0.1),
    fmod(max, 0.1)...). Like kaio's PTX: subtract |y| * 2**k (exact by Sterbenz) while
    |x| >= |y|; the loop runs about (exponent of x - exponent of y) times. Narrow types are
    widened exactly and the result (exactly representable) narrowed back."""
    d = F64(fe)
    x = a if ty == "double" else fe.ins(f"fpext {ty} {a} to double")
    y = b if ty == "double" else fe.ins(f"fpext {ty} {b} to double")
    ax0, ay0 = d.abs(x), d.abs(y)
    special = fe.ins(f"or i1 {d.cmp('uno', x, y)}, {d.cmp('oeq', ax0, d.c(math.inf))}")
    special = fe.ins(f"or i1 {special}, {d.cmp('oeq', ay0, d.c(0.0))}")   # NaN, x inf, y 0
    ax0, ay = d.sel(special, d.c(0.0), ax0), d.sel(special, d.c(1.0), ay0)

    def expo(v):   # biased exponent of v >= 0, denormals by their leading bit (12 - clz)
        bits = fe.ins(f"bitcast double {v} to i64")
        field = fe.ins(f"trunc i64 {fe.ins(f'lshr i64 {bits}, 52')} to i32")
        mant = fe.ins(f"and i64 {bits}, 4503599627370495")
        lz = fe.ins(f"trunc i64 {fe.call('i64', 'llvm.ctlz.i64', ('i64', mant), ('i1', 'false'))} to i32")
        den = fe.ins(f"sub i32 12, {lz}")
        return fe.ins(f"select i1 {fe.ins(f'icmp eq i32 {field}, 0')}, i32 {den}, i32 {field}")

    def scale(v, k):   # v * 2**k for 0 <= k <= 3000, exact (scaling up, no overflow here)
        for _ in range(3):
            step = fe.call("i32", "llvm.umin.i32", ("i32", k), ("i32", "1000"))
            k = fe.ins(f"sub i32 {k}, {step}")
            biased = fe.ins(f"add i32 {step}, 1023")
            p2 = fe.ins(f"shl i64 {fe.ins(f'zext i32 {biased} to i64')}, 52")
            v = d.mul(v, fe.ins(f"bitcast i64 {p2} to double"))
        return v

    ey = expo(ay)
    pre, loop, body, end = fe.label, fe.new_label("fmod"), fe.new_label("fmod_step"), \
        fe.new_label("fmod_end")
    fe.emit(f"br label %{loop}")
    fe.start(loop)
    nxt = fe.tmp("fm")
    ax = fe.ins(f"phi double [ {ax0}, %{pre} ], [ {nxt}, %{body} ]")
    fe.emit(f"br i1 {d.cmp('olt', ax, ay)}, label %{end}, label %{body}")
    fe.start(body)
    dd = fe.ins(f"sub i32 {expo(ax)}, {ey}")
    k = fe.call("i32", "llvm.smax.i32", ("i32", fe.ins(f"sub i32 {dd}, 1")), ("i32", "0"))
    t = scale(ay, k)                      # <= |x| < 4 t after the doubling below
    t2 = d.mul(t, d.c(2.0))
    t = d.sel(d.cmp("ole", t2, ax), t2, t)
    fe.emit(f"{nxt} = fsub double {ax}, {t}")
    fe.emit(f"br label %{loop}")
    fe.start(end)
    r = d.sel(special, d.c(math.nan), d.copysign(ax, x))
    return r if ty == "double" else fe.ins(f"fptrunc double {r} to {ty}")


def float_one(dtype) -> str:
    from .llvm import float_literal
    return float_literal(1.0, dtype)


def float_inf(dtype) -> str:
    from .llvm import float_literal
    return float_literal(math.inf, dtype)
