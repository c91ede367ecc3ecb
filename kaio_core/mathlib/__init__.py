"""kaio's portable math library, written in kaio IR.

Every non-exact ``kaio.math`` function is expanded (by :mod:`kaio.passes.expand_math`) into a
sequence of correctly rounded IR operations -- add, sub, mul, div, fma, sqrt, rint/floor/trunc,
cmp, select, casts, bitcasts and integer ops -- so every backend that implements those per
IEEE-754 computes the same bits. docs/mathlib.md has the algorithms and the measured errors.

Precision: the algorithms are written in f64 (:class:`~kaio.mathlib.ctx.F64`); exp, log, log2,
log10, sin, cos, expm1, tanh and erf also run natively in f32 for f32 arguments (``_NATIVE_F32``,
within 0.87 ulp; sin/cos of |x| >= 2^17 take the f64 code), and expm1/tanh/erf of f16/bf16 take
the same f32 code (``NATIVE_F32_FOR_16``: rounded once to 16 bits, at most 0.5001 ulp). Any other
f32, f16 or bf16 argument is widened to f64 (exactly), the function evaluated in f64 and the
result rounded once to the argument's type: the f64 result is within a few f64 ulp, so the
narrow result is the correctly rounded one except when the exact value lies within ~2^-50
relative of a rounding boundary (then it may be 1 ulp off -- double rounding; the same on every
target). ``fmod`` -- also the IR's float ``rem``, which no target has as an instruction -- is an
exact loop in the argument's format (:mod:`.fmod`; 16-bit types through f32, exactly: the result
is representable in the narrow type); ``rsqrt`` is ``1 / sqrt`` refined by one Newton step.
"""
from __future__ import annotations

from .. import dtypes as dt
from .ctx import F64

#: fn -> (module of this package, its f64 implementation taking (F64, *args)); each family's
#: module is imported the first time a kernel uses one of its functions (a kernel without
#: math never imports them: 5 ms of a process's first compile)
_IMPLS = {
    "exp": ("explog", "exp"), "exp2": ("explog", "exp2"), "expm1": ("explog", "expm1"),
    "log": ("explog", "log"), "log2": ("explog", "log2"), "log10": ("explog", "log10"),
    "log1p": ("explog", "log1p"), "pow": ("explog", "pow"),
    "sin": ("trig", "sin"), "cos": ("trig", "cos"), "tan": ("trig", "tan"),
    "atan": ("inverse", "atan"), "asin": ("inverse", "asin"), "acos": ("inverse", "acos"),
    "atan2": ("inverse", "atan2"),
    "sinh": ("hyper", "sinh"), "cosh": ("hyper", "cosh"), "tanh": ("hyper", "tanh"),
    "erf": ("hyper", "erf"),
}
#: native f32 implementations (f32 arguments use these instead of the f64 algorithm), as
#: (module, name) or (module, factory, its argument)
_NATIVE_F32 = {"exp": ("explog", "exp_f32"), "log": ("explog", "log"),
               "log2": ("explog", "log2"), "log10": ("explog", "log10"),
               "sin": ("trig", "native_f32", "sin"), "cos": ("trig", "native_f32", "cos"),
               "expm1": ("explog", "expm1_f32"), "tanh": ("hyper", "tanh_f32"),
               "erf": ("hyper", "erf_f32")}
#: functions whose f16/bf16 arguments also take the native f32 code (widened exactly, rounded
#: once to the 16-bit type): the f32 result is within ~1 f32 ulp = 2^-13 f16 ulp, so the 16-bit
#: result is within 0.5 + 2^-13 of its ulp
NATIVE_F32_FOR_16 = ("expm1", "tanh", "erf")
#: functions expanded here (every MATH_FNS entry that is not in MATH_EXACT)
FUNCTIONS = tuple(_IMPLS) + ("rsqrt", "fmod")
_LOADED: dict = {}


def _family(name: str):
    """The family module ``name`` of this package, imported on first use."""
    if name == "explog":
        from . import explog as mod  # lazy: import time, ~1.5 ms (kernels without exp/log skip it)
    elif name == "trig":
        from . import trig as mod  # lazy: import time, ~1 ms with Payne-Hanek
    elif name == "inverse":
        from . import inverse as mod  # lazy: import time, ~1 ms
    elif name == "hyper":
        from . import hyper as mod  # lazy: import time, ~1.5 ms
    elif name == "hwexp":
        from . import hwexp as mod  # lazy: import time, ~0.2 ms (fast exp only)
    elif name == "fmod":
        from . import fmod as mod  # lazy: import time, ~0.2 ms (float rem and fmod only)
    else:
        raise KeyError(name)
    return mod


def _load(table: dict, fn: str):
    """The implementation ``table`` names for ``fn`` (None: none), imported on first use."""
    key = (id(table), fn)
    got = _LOADED.get(key)
    if got is None and fn in table:
        where = table[fn]
        got = getattr(_family(where[0]), where[1])
        if len(where) == 3:
            got = got(where[2])
        _LOADED[key] = got
    return got


def _widen_f32(b, a):
    """``a`` (f16/bf16) as f32, exactly. bf16 is widened through its bits (bf16 is the top half
    of an f32): two integer ops on every target, even those without bf16 conversions."""
    if a.type is dt.bf16:
        u = b.cast(b.bitcast(a, dt.u16), dt.u32)
        return b.bitcast(b.binary("shl", u, b.const(16, dt.u32)), dt.f32)
    return b.cast(a, dt.f32)


def _rsqrt(m, x):
    """1 / sqrt(x), then one Newton step on the residual 1 - x y^2 (computed with a two-product
    and fma) for 2^-1000 < x < 2^1000; outside, and at 0, inf, NaN, the plain quotient."""
    y = m.div(1.0, m.sqrt(x))
    p, pe = m.two_prod(y, y)
    h = m.fma(m.neg(x), pe, m.fma(m.neg(x), p, 1.0))
    refined = m.fma(m.mul(y, 0.5), h, y)
    ok = m.and_(m.gt(x, 2.0 ** -1000), m.lt(x, 2.0 ** 1000))
    return m.sel(ok, refined, y)


def expands_fast(fn: str, t) -> bool:
    """Whether a ``fast`` ``math`` op ``fn`` on dtype ``t`` is expanded here too: f32 exp, as the
    target's fast exp2 on a range-reduced argument (:mod:`.hwexp`); f16/bf16 exp through it."""
    return _family("hwexp").can_expand(fn, t)


def expand_fast(b, fn: str, x):
    """Emit the ``fast`` form of ``fn`` on ``x`` (where :func:`expands_fast`): exact IR ops
    around one ``math exp2 fast``."""
    t = x.type
    if not expands_fast(fn, t):
        raise KeyError(f"kaio.mathlib has no fast '{fn}' for {t.name}")
    exp_hw_f32 = _family("hwexp").exp_hw_f32
    if t.bits == 16:
        return b.cast(exp_hw_f32(F64(b, dt.f32), _widen_f32(b, x)), t)
    return exp_hw_f32(F64(b, dt.f32), x)


def expand(b, fn: str, *args):
    """Emit the portable implementation of ``fn`` on ``args`` (IR values of one float dtype)
    with builder ``b``; returns the result value (same dtype)."""
    t = args[0].type
    if not t.is_float:
        raise TypeError(f"kaio.mathlib: {fn} needs a float argument, got {t.name}")
    if fn == "fmod":
        # exact in any format, so 16-bit operands go through f32 (the result is representable
        # in the narrow type: the casts are exact)
        fmod = _family("fmod").fmod
        if t.bits == 16:
            return b.cast(fmod(F64(b, dt.f32), *[_widen_f32(b, a) for a in args]), t)
        return fmod(F64(b, t), *args)
    impl = _rsqrt if fn == "rsqrt" else _load(_IMPLS, fn)
    if impl is None:
        raise KeyError(f"kaio.mathlib has no portable '{fn}'")
    if t is dt.f32 and fn in _NATIVE_F32:
        return _load(_NATIVE_F32, fn)(F64(b, dt.f32), *args)
    if t.bits == 16 and fn in NATIVE_F32_FOR_16:
        return b.cast(_load(_NATIVE_F32, fn)(F64(b, dt.f32), *[_widen_f32(b, a) for a in args]), t)
    m = F64(b)
    wide = [b.cast(a, dt.f64) for a in args]
    return b.cast(impl(m, *wide), t)
