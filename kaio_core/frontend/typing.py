"""Typing rules of the kernel language: weak literals, promotion, conversions.

Rules (docs/language.md states them for users):

- a Python literal is *weak*: it takes the dtype of the typed operand it meets, if its value
  fits (an int literal fits any float type; a float literal never becomes an integer);
- two typed operands of different dtypes promote by :func:`kaio.dtypes.promote` (casts inserted);
- two literals fold at compile time with the same semantics as the IR (C division);
- a literal that meets nothing typed gets :func:`kaio.dtypes.literal_dtype` (i32 / i64 / f32 / bool).
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from ..ir.core import Value
from ..ir.types import FragType
from .values import Lit, describe, is_scalar


class TypingMixin:
    """Conversions used by expression lowering (needs ``self.b`` and ``self.err``)."""

    def lit_value(self, lit: Lit, dtype: dt.DType, node, context: str | None = None) -> Value:
        """Materialise a weak literal as a constant of ``dtype`` or raise a clear error."""
        v = lit.value
        where = f" ({context})" if context else ""
        if v is None:
            raise self.err(node, f"None is not a value{where}",
                           hint="kernels and device functions work on numbers")
        if isinstance(v, float) and not dtype.is_float:
            raise self.err(node, f"literal {v!r}{where} is a float but the expected type is {dtype.name}",
                           hint=f"write an integer literal, or cast explicitly: kaio.{dtype.name}(...)")
        if dtype.is_bool and not isinstance(v, bool) and v not in (0, 1):
            raise self.err(node, f"literal {v!r}{where} is not a bool",
                           hint="use True/False or compare: x != 0")
        if isinstance(v, int) and not isinstance(v, bool) and dtype.is_int and not dt.literal_fits(v, dtype):
            raise self.err(node, f"literal {v}{where} does not fit in {dtype.name} "
                                 f"(range {dtype.min_value()}..{dtype.max_value()})",
                           hint="use a wider type, or write the wrapped value explicitly")
        if (isinstance(v, float) and math.isfinite(v) or isinstance(v, int) and dtype.is_float) \
                and abs(v) > dtype.max_value():
            raise self.err(node, f"literal {shown_number(v)}{where} overflows {dtype.name} "
                                 f"(max {dtype.max_value()})", hint="use a wider float type")
        return self.b.const(v, dtype)

    def default_value(self, v, node) -> Value:
        """A scalar as an IR value, literals at their default dtype."""
        if isinstance(v, Lit):
            return self.b.const(v.value, dt.literal_dtype(v.value))
        return self.scalar(v, node)

    def scalar(self, v, node, what: str = "operand", frag_ok: bool = False):
        """Check that ``v`` is a scalar (Lit or typed value) and return it. A kaio.mma fragment
        passes only where values are carried whole (``frag_ok``: merges, loop variables)."""
        if not is_scalar(v):
            raise self.err(node, f"expected a scalar {what}, got {describe(v)}",
                           hint="index buffers to get elements: x[i]")
        if not frag_ok and isinstance(v, Value) and isinstance(v.type, FragType):
            raise self.err(node, f"expected a scalar {what}, got the matrix fragment {v.type}",
                           hint="fragments take part only in kaio.mma operations (mma, store)")
        return v

    def convert(self, v, dtype: dt.DType, node, what: str = "value") -> Value:
        """``v`` as ``dtype`` without an implicit cast: literals convert, typed values must match."""
        self.scalar(v, node, what, frag_ok=True)
        if isinstance(v, Lit):
            return self.lit_value(v, dtype, node, what if what != "value" else None)
        if v.type is not dtype:
            raise self.err(node, f"{what} has type {v.type.name} but {dtype.name} is expected",
                           hint=f"cast explicitly: kaio.{dtype.name}(...)")
        return v

    def unify(self, a, b, node, op: str = "operation"):
        """Bring two scalars to one dtype: returns (a, b, dtype), or (Lit, Lit, None) if both weak."""
        self.scalar(a, node)
        self.scalar(b, node)
        if isinstance(a, Lit) and isinstance(b, Lit):
            return a, b, None
        if isinstance(a, Lit):
            t = b.type
            return self.lit_value(a, t, node), b, t
        if isinstance(b, Lit):
            t = a.type
            return a, self.lit_value(b, t, node), t
        if a.type is b.type:
            return a, b, a.type
        t = dt.promote(a.type, b.type)
        return self.b.cast(a, t), self.b.cast(b, t), t

    def to_bool(self, v, node, what: str = "condition"):
        """A condition: bool values and literals only (no implicit truthiness of numbers)."""
        self.scalar(v, node, what)
        if isinstance(v, Lit):
            return Lit(bool(v.value))
        if not v.type.is_bool:
            raise self.err(node, f"{what} has type {v.type.name}, not bool",
                           hint="compare explicitly, e.g. `x != 0`")
        return v

    def index_value(self, v, node) -> Value:
        """A buffer index or shuffle lane as i32 (other integer types are cast)."""
        self.scalar(v, node, "index")
        if isinstance(v, Lit):
            if not isinstance(v.value, int) or isinstance(v.value, bool):
                raise self.err(node, f"index {v.value!r} is not an integer",
                               hint="indices are integers (i32)")
            return self.lit_value(v, dt.INDEX, node, "index")
        if not v.type.is_int:
            raise self.err(node, f"index has type {v.type.name}, not an integer type",
                           hint="cast explicitly: kaio.i32(...)")
        return self.b.cast(v, dt.INDEX)


def shown_number(v) -> str:
    """A literal for a message; an integer of more than 40 digits by its size (str() of a
    5,000-digit int raises in Python 3.11)."""
    if isinstance(v, bool) or not isinstance(v, int) or v.bit_length() < 133:
        return repr(v)
    return f"{'-' if v < 0 else ''}(an integer of about {int(v.bit_length() * 0.30103) + 1} digits)"


# --- compile-time folding of literal operations (IR semantics: C division) -------------------
def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_rem(a: int, b: int) -> int:
    return a - b * c_div(a, b)


#: folded integers stop here (far beyond any dtype; what does not fit is an error anyway)
_MAX_BITS = 4096


def ieee_div(a: float, b: float) -> float:
    """``a / b`` as IEEE float division: division by zero gives +-inf, or NaN for 0/0 and NaN/0
    (Python raises instead)."""
    if b != 0:
        return a / b
    if a != a or a == 0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def ieee_fmod(a: float, b: float) -> float:
    """C's ``fmod``: NaN where Python's math.fmod raises (``x % 0.0``, ``inf % y``)."""
    try:
        return math.fmod(a, b)
    except ValueError:
        return math.nan


def fold_binary(op: str, a, b):
    """Fold two Python numbers; returns the result or raises ZeroDivisionError (integer
    division by zero), OverflowError or TypeError. Float operations follow IEEE, as the IR
    does at run time: ``1.0 / 0.0`` is inf, ``1.0 % 0.0`` NaN."""
    both_int = isinstance(a, int) and isinstance(b, int)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "truediv":
        return ieee_div(a, b)
    if op == "floordiv":
        if both_int:
            return c_div(a, b)
        q = ieee_div(a, b)
        return float(math.floor(q)) if math.isfinite(q) else q
    if op == "mod":
        return c_rem(a, b) if both_int else ieee_fmod(a, b)
    if op == "pow":
        if both_int and b > 0 and abs(a) > 1 and b * math.log2(abs(a)) > _MAX_BITS:
            raise OverflowError  # it would not fit any dtype, and computing it may take minutes
        return a ** b
    if op == "and":
        return a & b
    if op == "or":
        return a | b
    if op == "xor":
        return a ^ b
    if op == "shl":
        if a and b > _MAX_BITS:
            raise OverflowError
        return a << b
    if op == "shr":
        return a >> b
    raise TypeError(op)
