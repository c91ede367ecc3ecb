"""``F64``: the small arithmetic vocabulary the math library is written in.

A thin layer over :class:`kaio.ir.Builder` that emits f64 (or, with ``F64(b, dt.f32)``, f32) IR
using only correctly rounded
operations (add sub mul div fma sqrt, rint/floor/trunc, cmp, select, casts, bitcasts and i64
integer ops), so an expansion computes the same bits on every backend that implements those
ops per IEEE-754. It also provides the error-free transformations (two-sum, two-product via
fma) and exponent manipulation (``scale`` = ldexp, exact for every result, subnormals included).
"""
from __future__ import annotations

from contextlib import contextmanager
from fractions import Fraction

from .. import dtypes as dt

#: float dtype -> (integer dtype of its bits, exponent bias, explicit mantissa bits)
LAYOUT = {dt.f64: (dt.i64, 1023, 52), dt.f32: (dt.i32, 127, 23)}


class F64:
    """Emit f64 arithmetic into builder ``b``. Values are IR values of type f64 (or i64/bool
    where a method says so); Python floats passed where a value is expected become constants.
    ``F64(b, dt.f32)`` emits the same vocabulary in f32 (i32 bits), for native f32 kernels."""

    def __init__(self, b, dtype=dt.f64):
        self.b = b
        self.F = dtype
        self.I, self.bias, self.mant = LAYOUT[dtype]
        self._consts: dict = {}

    @contextmanager
    def scoped(self, block):
        """Emit into ``block`` (a nested region) with a copy of the constant cache, so no constant
        defined inside is reused outside it (SSA dominance)."""
        saved = self._consts
        self._consts = dict(saved)
        try:
            with self.b.at(block):
                yield self
        finally:
            self._consts = saved

    # --- constants and coercion -------------------------------------------------------------
    def c(self, v) -> object:
        v = float(v)
        key = ("f", v.hex() if v == v else "nan")
        if key not in self._consts:
            self._consts[key] = self.b.const(v, self.F)
        return self._consts[key]

    def ic(self, v: int):
        key = ("i", int(v))
        if key not in self._consts:
            self._consts[key] = self.b.const(int(v), self.I)
        return self._consts[key]

    def _v(self, x):
        return self.c(x) if isinstance(x, (int, float, Fraction)) else x

    # --- arithmetic (each rounds once) ------------------------------------------------------
    def add(self, a, b):
        return self.b.binary("add", self._v(a), self._v(b))

    def sub(self, a, b):
        return self.b.binary("sub", self._v(a), self._v(b))

    def mul(self, a, b):
        return self.b.binary("mul", self._v(a), self._v(b))

    def div(self, a, b):
        return self.b.binary("div", self._v(a), self._v(b))

    def fma(self, a, b, c):
        return self.b.fma(self._v(a), self._v(b), self._v(c))

    def neg(self, a):
        return self.b.unary("neg", a)

    def abs(self, a):
        return self.b.unary("abs", a)

    def min(self, a, b):
        return self.b.binary("min", self._v(a), self._v(b))

    def max(self, a, b):
        return self.b.binary("max", self._v(a), self._v(b))

    def math(self, fn, *a):
        return self.b.math(fn, *[self._v(x) for x in a])

    def sqrt(self, a):
        return self.math("sqrt", a)

    def rint(self, a):
        return self.math("rint", a)

    def trunc(self, a):
        return self.math("trunc", a)

    def floor(self, a):
        return self.math("floor", a)

    def copysign(self, a, s):
        return self.math("copysign", self._v(a), s)

    # --- predicates and selection -----------------------------------------------------------
    def cmp(self, pred, a, b):
        return self.b.cmp(pred, self._v(a), self._v(b))

    def lt(self, a, b):
        return self.cmp("lt", a, b)

    def le(self, a, b):
        return self.cmp("le", a, b)

    def gt(self, a, b):
        return self.cmp("gt", a, b)

    def ge(self, a, b):
        return self.cmp("ge", a, b)

    def eq(self, a, b):
        return self.cmp("eq", a, b)

    def isnan(self, a):
        return self.b.math("isnan", a)

    def isinf(self, a):
        return self.b.math("isinf", a)

    def and_(self, p, q):
        return self.b.binary("and", p, q)

    def or_(self, p, q):
        return self.b.binary("or", p, q)

    def not_(self, p):
        return self.b.unary("not", p)

    def sel(self, p, a, b):
        return self.b.select(p, self._v(a), self._v(b))

    def signbit(self, a):
        """True when the sign bit of ``a`` is set (-0.0 and negative NaNs included)."""
        return self.b.cmp("lt", self.bits(a), self.ic(0))

    # --- integers and bits --------------------------------------------------------------------
    def bits(self, a):
        return self.b.bitcast(a, self.I)

    def from_bits(self, i):
        return self.b.bitcast(i, self.F)

    def iop(self, opcode, a, b):
        a = self.ic(a) if isinstance(a, int) else a
        b = self.ic(b) if isinstance(b, int) else b
        return self.b.binary(opcode, a, b)

    def to_int(self, a):
        """f64 (an integer value) -> i64 (saturating; NaN -> 0)."""
        return self.b.cast(a, self.I)

    def to_float(self, i):
        return self.b.cast(i, self.F)

    def pow2(self, k):
        """2^k for an integer ``k`` in [1 - bias, bias] (a normal number, built from its bits)."""
        return self.from_bits(self.iop("shl", self.iop("add", k, self.bias), self.mant))

    def scale(self, x, k):
        """x * 2^k for an i64 ``k``, rounded once (two exact steps, so subnormal results are
        correct); ``k`` is clamped to [-2044, 2046] (f32: [-252, 254]), far enough for any
        finite ``x``."""
        lo, hi = 2 * (1 - self.bias), 2 * self.bias
        k = self.b.binary("max", self.b.binary("min", k, self.ic(hi)), self.ic(lo))
        k1 = self.iop("shr", k, 1)
        k2 = self.iop("sub", k, k1)
        return self.mul(self.mul(x, self.pow2(k1)), self.pow2(k2))

    # --- error-free transformations -----------------------------------------------------------
    def two_sum(self, a, b):
        """(s, e) with s = fl(a + b) and s + e = a + b exactly."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        e = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, e

    def fast_two_sum(self, a, b):
        """(s, e) as two_sum, valid when |a| >= |b| (or a == 0)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_prod(self, a, b):
        """(p, e) with p = fl(a * b) and p + e = a * b exactly (barring underflow)."""
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))

    def horner(self, x, coeffs):
        """sum coeffs[i] * x^i, by Horner's rule with fma (highest degree first)."""
        coeffs = list(coeffs)
        acc = self.c(coeffs[-1])
        for a in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self._v(a))
        return acc

    def pick(self, idx_conds, values):
        """Select ``values[k]`` where ``idx_conds[k-1]`` is the last true condition (a chain of
        selects: ``values[0]`` by default)."""
        out = self._v(values[0])
        for cond, v in zip(idx_conds, values[1:]):
            out = self.sel(cond, v, out)
        return out
