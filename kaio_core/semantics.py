"""Exact semantics of kaio IR scalar ops, vectorised with numpy.

One implementation of the rules in :mod:`kaio.ir.ops`, shared by the reference interpreter and
the constant folder so both agree bit for bit:

- integers wrap (two's complement); ``div``/``rem`` truncate toward zero; division by zero
  gives 0 (the IR leaves it unspecified; 0 is the reference's choice), never a trap;
- shifts by an amount >= the bit width (read as unsigned) give 0, or -1 for ``shr`` of a
  negative signed value; ``shr`` is arithmetic for signed, logical for unsigned dtypes;
- floats round to nearest even after every op, f16 and bf16 included (computed in f64 and
  rounded once, correctly: f64 holds every exact result of + - * / sqrt of 16-bit floats to
  more than twice their precision); ``fma`` rounds once;
- float ``min``/``max`` return the non-NaN operand (IEEE minNum/maxNum); of +0 and -0,
  ``min`` gives -0 and ``max`` gives +0, so every backend can agree;
- ``cmp`` is false on NaN except ``ne``; float->int casts truncate, saturate, NaN -> 0.

Every function takes numpy arrays or scalars (Python scalars are converted to the dtype) and
returns values of ``dtype.storage_np``; 0-d results come back as numpy scalars. Math functions
are computed in float64 and rounded to the dtype (not correctly rounded for f64 itself).
"""
from __future__ import annotations

import math as _pymath

import numpy as np

from . import dtypes as dt

__all__ = ["binary", "unary", "fma", "cmp", "cast", "bitcast", "math", "select", "const",
           "round_f64", "poison", "mma"]

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)
_UNSIGNED_OF = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _ret(x):
    return x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x


def const(dtype: dt.DType, value):
    """A Python scalar as a numpy scalar of ``dtype`` (ints wrap, floats round to nearest)."""
    return _ret(_as(dtype, value))


def _as(dtype: dt.DType, x) -> np.ndarray:
    """``x`` as an ndarray of the dtype's storage type, without changing typed values."""
    sn = dtype.storage_np
    if isinstance(x, np.ndarray) and x.dtype == sn:
        return x
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        if dtype.is_bool:
            return np.asarray(bool(x))
        if dtype.is_int:
            v = int(x) & ((1 << dtype.bits) - 1)
            if dtype.is_signed and v >= 1 << (dtype.bits - 1):
                v -= 1 << dtype.bits
            return np.asarray(v, dtype=sn)
        return np.asarray(round_f64(dtype, np.asarray(float(x))))
    a = np.asarray(x)
    if a.dtype == sn:
        return a
    raise TypeError(f"semantics: expected values of dtype {dtype.name} ({sn}), got {a.dtype}")


# --- correct rounding of f64 to narrower floats --------------------------------------------

def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """f64 -> f32 rounding to odd (inexact results get an odd last bit): composing it with a
    round-to-nearest to a format at least 2 bits narrower gives the correctly rounded result."""
    y = x.astype(_F32)
    with np.errstate(all="ignore"):
        inexact = (y.astype(_F64) != x) & np.isfinite(y)
    even = (y.view(np.uint32) & 1) == 0
    fix = inexact & even
    if np.any(fix):
        toward = np.where(x > y.astype(_F64), np.float32(np.inf), np.float32(-np.inf))
        y = np.where(fix, np.nextafter(y, toward), y)
    return y


def _round_to_odd_f64(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Round-to-odd of the exact value ``s + err`` (``s`` its nearest f64, ``err`` exact)."""
    with np.errstate(all="ignore"):
        fix = (err != 0) & np.isfinite(err) & ((s.view(np.uint64) & 1) == 0)
    if np.any(fix):
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def round_f64(dtype: dt.DType, x) -> np.ndarray:
    """Correctly round float64 values to a float dtype (numpy/ml_dtypes casts of f64 to bf16
    round twice, through f32, so they are not used directly)."""
    x = np.asarray(x, dtype=_F64)
    if dtype is dt.f64:
        return x
    with np.errstate(all="ignore"):  # overflow to inf is the intended result
        if dtype is dt.f32:
            return x.astype(_F32)
        return _round_to_odd_f32(x).astype(dtype.storage_np)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


def _to_f64(x) -> np.ndarray:
    return np.asarray(x).astype(_F64)


# --- binary / unary ----------------------------------------------------------------------

def _int_divrem(a: np.ndarray, b: np.ndarray, signed: bool):
    zero = b == 0
    bs = np.where(zero, np.ones_like(b), b)
    if not signed:
        return np.where(zero, 0, a // bs).astype(a.dtype), np.where(zero, 0, a % bs).astype(a.dtype)
    minus1 = bs == -1
    bs = np.where(minus1, np.ones_like(bs), bs)  # MIN // -1 overflows: handle as wrapping -a
    q = a // bs
    r = a - q * bs
    adjust = (r != 0) & ((a < 0) != (bs < 0))  # floor -> trunc toward zero
    q = q + adjust.astype(a.dtype)
    r = r - np.where(adjust, bs, 0).astype(a.dtype)
    q = np.where(minus1, -a, q)
    r = np.where(minus1, 0, r)
    return np.where(zero, 0, q).astype(a.dtype), np.where(zero, 0, r).astype(a.dtype)


def _shift(opcode, dtype, a, b):
    ub = b.astype(_UNSIGNED_OF[dtype.bits], copy=False)
    big = ub >= dtype.bits
    amt = np.where(big, 0, ub).astype(a.dtype)
    if opcode == "shl":
        out = np.left_shift(a, amt)
        return np.where(big, 0, out).astype(a.dtype)
    out = np.right_shift(a, amt)
    if dtype.is_signed:
        fill = np.where(a < 0, -1, 0).astype(a.dtype)
        return np.where(big, fill, out).astype(a.dtype)
    return np.where(big, 0, out).astype(a.dtype)


def _fminmax(opcode, a, b):
    r = np.fmin(a, b) if opcode == "min" else np.fmax(a, b)
    zeros = (a == 0) & (b == 0)
    if np.any(zeros):
        sa, sb = np.signbit(a), np.signbit(b)
        neg = (sa | sb) if opcode == "min" else (sa & sb)
        z = np.where(neg, np.asarray(-0.0, a.dtype), np.asarray(0.0, a.dtype))
        r = np.where(zeros, z, r)
    return r


_FLOAT_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "rem": np.fmod}
_INT_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and,
            "or": np.bitwise_or, "xor": np.bitwise_xor, "min": np.minimum, "max": np.maximum}


def binary(opcode: str, dtype: dt.DType, a, b):
    """``a <opcode> b`` for one of kaio.ir.ops.BINARY under the IR's rules."""
    a, b = _as(dtype, a), _as(dtype, b)
    with np.errstate(all="ignore"):
        if dtype.is_float:
            if opcode in ("min", "max"):
                return _ret(_fminmax(opcode, a, b))
            f = _FLOAT_BIN.get(opcode)
            if f is None:
                raise ValueError(f"op '{opcode}' is not defined on {dtype.name}")
            if dtype.bits == 16:
                return _ret(round_f64(dtype, f(_to_f64(a), _to_f64(b))))
            return _ret(f(a, b))
        if dtype.is_bool:
            f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
                 "min": np.logical_and, "max": np.logical_or}.get(opcode)
            if f is None:
                raise ValueError(f"op '{opcode}' is not defined on bool")
            return _ret(f(a, b))
        if opcode in ("div", "rem"):
            a1, b1 = np.broadcast_arrays(np.atleast_1d(a), np.atleast_1d(b))
            q, r = _int_divrem(a1, b1, dtype.is_signed)
            out = q if opcode == "div" else r
            return _ret(out.reshape(np.broadcast_shapes(a.shape, b.shape)))
        if opcode in ("shl", "shr"):
            return _ret(_shift(opcode, dtype, a, b))
        f = _INT_BIN.get(opcode)
        if f is None:
            raise ValueError(f"unknown binary op {opcode!r}")
        return _ret(np.asarray(f(a, b)).astype(a.dtype, copy=False))


def unary(opcode: str, dtype: dt.DType, a):
    """``neg``, ``not`` (bitwise; logical on bool) or ``abs``."""
    a = _as(dtype, a)
    with np.errstate(all="ignore"):
        if opcode == "neg":
            if dtype.is_bool:
                raise ValueError("neg is not defined on bool")
            return _ret(np.negative(a))
        if opcode == "abs":
            return _ret(a if dtype.is_bool or not dtype.is_signed and dtype.is_int else np.abs(a))
        if opcode == "not":
            if dtype.is_float:
                raise ValueError(f"not is not defined on {dtype.name}")
            return _ret(np.logical_not(a) if dtype.is_bool else np.invert(a))
    raise ValueError(f"unknown unary op {opcode!r}")


def fma(dtype: dt.DType, a, b, c):
    """``a * b + c`` rounded once."""
    a, b, c = _as(dtype, a), _as(dtype, b), _as(dtype, c)
    with np.errstate(all="ignore"):
        if dtype.is_int:
            return _ret(np.asarray(a * b + c).astype(a.dtype, copy=False))
        if dtype.bits < 64:
            # the product of two <= 24-bit significands is exact in f64
            p = _to_f64(a) * _to_f64(b)
            s, err = _two_sum(p, _to_f64(c))
            s = _round_to_odd_f64(s, err)
            if dtype is dt.f32:
                return _ret(s.astype(_F32))
            return _ret(round_f64(dtype, s))
        return _ret(_fma_f64(*np.broadcast_arrays(a, b, c)))


def _fma_f64(a, b, c):
    """f64 fma: Dekker's exact product (ph + pl), TwoSum (s + e = ph + c), then
    RN(s + RO(pl + e)) with RO rounding to odd (Boldo & Melquiond's emulated fma, exact barring
    underflow); lanes with huge or tiny magnitudes fall back to exact rationals."""
    shape = np.shape(a)
    a, b, c = (np.array(x, dtype=_F64, ndmin=1).ravel() for x in (a, b, c))
    split = 134217729.0  # 2**27 + 1
    def _split(x):
        t = split * x
        hi = t - (t - x)
        return hi, x - hi
    ph = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    pl = ((ah * bh - ph) + ah * bl + al * bh) + al * bl
    s, e = _two_sum(ph, c)
    t, e2 = _two_sum(pl, e)
    r = s + _round_to_odd_f64(t, e2)
    ok = np.isfinite(r) & (np.abs(a) < 2.0 ** 500) & (np.abs(b) < 2.0 ** 500)
    ok &= np.abs(ph) > 2.0 ** -900
    r = np.where(r == 0, 0.0, r)  # an exact zero from a nonzero product is +0 (RN)
    # a zero factor: a * b is an exact (signed) zero, one rounding remains
    direct = ~np.isfinite(a) | ~np.isfinite(b) | ~np.isfinite(c) | (a == 0) | (b == 0)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.where(direct, a * b + c, r)
    # finite a, b with an infinite c: the exact product is finite, so the sum is c (a * b
    # rounded first could overflow to the opposite infinity and give NaN)
    r = np.where(np.isinf(c) & np.isfinite(a) & np.isfinite(b), c, r)
    slow = np.nonzero(~ok & ~direct)[0]
    if slow.size:
        from fractions import Fraction
        for i in slow:
            exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
            try:
                zero_product = a[i] == 0 or b[i] == 0  # else an exact cancellation: +0
                r[i] = float(exact) if exact != 0 else (
                    float(a[i]) * float(b[i]) + float(c[i]) if zero_product else 0.0)
            except OverflowError:
                r[i] = np.inf if exact > 0 else -np.inf
    return r.reshape(shape)


def select(dtype: dt.DType, c, a, b):
    return _ret(np.where(np.asarray(c, dtype=bool), _as(dtype, a), _as(dtype, b)))


_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}


def cmp(pred: str, dtype: dt.DType, a, b):
    """Comparison giving bool: ordered on NaN except ``ne`` (IEEE/Python rules)."""
    with np.errstate(all="ignore"):
        return _ret(np.asarray(_CMP[pred](_as(dtype, a), _as(dtype, b))))


# --- casts ----------------------------------------------------------------------------------

def _int_to_f64_odd(x: np.ndarray, frm: dt.DType) -> np.ndarray:
    """Integers (up to 64 bits) to f64 rounded to odd, via an exact split into two halves."""
    if frm.bits <= 32 or frm.is_bool:
        return x.astype(_F64)
    if frm.is_signed:
        hi = (x >> 32).astype(_F64)
    else:
        hi = (x >> np.uint64(32)).astype(_F64)
    lo = (x & np.asarray(0xFFFFFFFF, x.dtype)).astype(_F64)
    s, err = _two_sum(hi * 4294967296.0, lo)
    return _round_to_odd_f64(s, err)


def _float_to_int(x: np.ndarray, to: dt.DType) -> np.ndarray:
    x = _to_f64(x)
    lo, hi = to.min_value(), to.max_value()
    top = 2.0 ** (to.bits - 1) if to.is_signed else 2.0 ** to.bits  # first value above hi
    nan = np.isnan(x)
    t = np.trunc(np.where(nan, 0.0, x))
    over = t >= top
    under = t < float(lo)
    mid = np.where(over | under, 0.0, t).astype(to.storage_np)
    out = np.where(over, np.asarray(hi, dtype=to.storage_np), mid)
    return np.where(under, np.asarray(lo, dtype=to.storage_np), out).astype(to.storage_np)


_EXACT_WIDENING = {("f16", "f32"), ("f16", "f64"), ("f32", "f64"), ("bf16", "f32"),
                   ("bf16", "f64")}


def cast(frm: dt.DType, to: dt.DType, x):
    """Value conversion ``frm`` -> ``to`` under the IR's rules."""
    x = _as(frm, x)
    with np.errstate(all="ignore"):
        if frm is to:
            return _ret(x)
        if to.is_bool:
            return _ret(np.asarray(x != 0))
        if to.is_float:
            if frm.is_float:
                if (frm.name, to.name) in _EXACT_WIDENING:
                    return _ret(x.astype(to.storage_np))
                return _ret(round_f64(to, _to_f64(x)))
            if to is dt.f64:
                return _ret(x.astype(_F64))  # a single correctly rounded conversion
            return _ret(round_f64(to, _int_to_f64_odd(x, frm)))
        if frm.is_float:
            return _ret(_float_to_int(x, to))
        # int/bool -> int: two's complement wrap (truncation / extension)
        return _ret(x.astype(to.storage_np))


def bitcast(frm: dt.DType, to: dt.DType, x):
    """Reinterpret the bits of ``x`` as ``to`` (same width)."""
    if frm.bits != to.bits or frm.is_bool or to.is_bool:
        raise ValueError(f"bitcast {frm.name} -> {to.name}: widths differ or bool")
    x = np.asarray(_as(frm, x))
    # (ascontiguousarray makes a 0-d value 1-d: a uniform value must stay a scalar)
    return _ret(np.ascontiguousarray(x).view(to.storage_np).reshape(x.shape))


# --- math -------------------------------------------------------------------------------------

def _erf(x):
    return np.vectorize(_pymath.erf, otypes=[_F64])(x) if x.size else x


_MATH1 = {
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "exp": np.exp, "exp2": np.exp2,
    "log": np.log, "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "tanh": np.tanh, "erf": _erf, "atan": np.arctan, "asin": np.arcsin,
    "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh, "expm1": np.expm1, "log1p": np.log1p,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
}
_MATH2 = {"pow": np.power, "atan2": np.arctan2, "copysign": np.copysign, "fmod": np.fmod}
_PRED = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}


def math(fn: str, dtype: dt.DType, *xs):
    """``kaio.math`` function ``fn`` on float ``dtype`` (predicates return bool)."""
    xs = [_as(dtype, x) for x in xs]
    with np.errstate(all="ignore"):
        if fn in _PRED:
            return _ret(np.asarray(_PRED[fn](xs[0])))
        if fn == "sqrt" and dtype in (dt.f32, dt.f64):
            return _ret(np.sqrt(xs[0]))
        f = _MATH1.get(fn) or _MATH2.get(fn)
        if f is None:
            raise ValueError(f"unknown math function {fn!r}")
        r = f(*[_to_f64(x) for x in xs])
        return _ret(round_f64(dtype, r))


def poison(dtype: dt.DType):
    """The fill value of never-written memory: NaN for floats, 0xA5 bytes for ints."""
    if dtype.is_float:
        return np.asarray(np.nan, dtype=dtype.storage_np)[()]
    if dtype.is_bool:
        return np.True_
    return np.frombuffer(b"\xa5" * dtype.itemsize, dtype=dtype.storage_np)[0]


def tf32(x):
    """``x`` (f32) rounded to tf32 as ``cvt.rna.tf32.f32`` does: to the nearest value with a
    10-bit fraction (the low 13 of f32's 23 fraction bits zero), ties away from zero, kept as
    f32. Subnormals round the same way; a value past tf32's largest finite one becomes an
    infinity of its sign; infinities and NaNs pass through (NaN stays NaN)."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).astype(np.uint32)
    # adding half a tf32 ulp to the magnitude bits then truncating rounds ties away from zero;
    # a carry out of the fraction bumps the exponent (up to the infinity's pattern)
    return np.where(np.isnan(x), x, rounded.view(np.float32))


def mma(a, b, c):
    """``c + a @ b`` for stacks of matrices, the reference meaning of kaio.mma.mma.

    ``a`` (..., m, k) and ``b`` (..., k, n) hold f16 or bf16 values, ``c`` (..., m, n) f32.
    Each product ``a[i, p] * b[p, j]`` is computed exactly in f32 (11- or 8-bit significands
    multiply into at most 22 bits; only a product outside f32's range is not exact). The sum is
    taken in f32 in ascending ``p``, rounding to nearest even after each addition:
    ``d = ((c + a0*b0) + a1*b1) + ... + a(k-1)*b(k-1)``. Matrix units add in other orders and
    with other internal precision; docs/language.md states the bound between the two.

    Integer fragments (``a``, ``b`` i8, ``c`` i32) are exact in any order: ``c + a @ b`` modulo
    2**32, wrapped into i32 as the matrix unit does (no saturation).

    f32 multiplicands (shape ``m16n8k8``) are tf32 fragments: each element is first rounded by
    :func:`tf32`; the products of two tf32 values (11-bit significands) are exact in f32 and
    the sum is taken as above.
    """
    if np.asarray(a).dtype == np.float32:
        a, b = tf32(a), tf32(b)
    if np.asarray(a).dtype.kind in "iu":
        exact = np.asarray(c, dtype=np.int64) + np.matmul(np.asarray(a, dtype=np.int64),
                                                          np.asarray(b, dtype=np.int64))
        return exact.astype(np.uint32).view(np.int32)
    a32 = np.asarray(a).astype(np.float32)
    b32 = np.asarray(b).astype(np.float32)
    d = np.array(c, dtype=np.float32, copy=True)
    with np.errstate(over="ignore", invalid="ignore"):
        for p in range(a32.shape[-1]):
            d += a32[..., :, p, None] * b32[..., None, p, :]   # f32 += f32 product: one rounding
    return d
