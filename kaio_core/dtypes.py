"""Scalar types of the kernel language and their promotion rules.

Every value in kaio's IR has one of these dtypes. Python literals are *weak*: they take the
dtype of the typed operand they meet (``v // 2`` with ``v: u32`` stays ``u32``), as in Triton
and JAX. Two typed operands of different dtypes promote by :func:`promote`.
"""
from __future__ import annotations

import numpy as np

try:  # bf16 has no numpy dtype of its own; ml_dtypes provides one when installed
    import ml_dtypes as _ml_dtypes

    _BF16_NP = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a hard dependency, kept soft for safety
    _BF16_NP = None


def _finfo(np_dtype):
    """np.finfo, or ml_dtypes.finfo for bf16 (np.finfo rejects it)."""
    return _ml_dtypes.finfo(np_dtype) if _BF16_NP is not None else np.finfo(np_dtype)


#: the largest finite value of each float dtype, as finfo gives it (tests/test_first_launch.py): a
#: process's first finfo call costs ~0.07 ms of a kernel's first launch (its scalars' checks)
_FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e+38, "f32": 3.4028234663852886e+38,
              "f64": 1.7976931348623157e+308}


class DType:
    """A scalar type: its name, bit width, kind ('bool' | 'int' | 'uint' | 'float')."""

    __slots__ = ("name", "bits", "kind", "np")

    def __init__(self, name: str, bits: int, kind: str, np_dtype):
        self.name = name
        self.bits = bits
        self.kind = kind
        self.np = np_dtype

    # --- classification -------------------------------------------------------------
    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integer (bool excluded)."""
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def min_value(self):
        if self.is_float:
            return -_float_max(self)
        if self.is_bool:
            return 0
        return -(1 << (self.bits - 1)) if self.is_signed else 0

    def max_value(self):
        if self.is_float:
            return _float_max(self)
        if self.is_bool:
            return 1
        return (1 << (self.bits - 1)) - 1 if self.is_signed else (1 << self.bits) - 1

    @property
    def storage_np(self):
        """numpy dtype used to hold values of this type (bf16 needs ml_dtypes)."""
        if self.np is None:
            raise TypeError(f"{self.name} needs the ml_dtypes package for numpy storage")
        return self.np

    # --- the dtype is also the cast function inside kernels: kaio.f16(x) ----------------
    def __call__(self, value):
        raise TypeError(
            f"kaio.{self.name}(...) is a cast inside @kaio.kernel functions; "
            f"on the host use numpy, e.g. np.asarray(x, dtype=kaio.{self.name}.np)")

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):
        return (from_name, (self.name,))


def _float_max(t: DType) -> float:
    """The largest finite value of float dtype ``t`` (inf where it has no numpy storage)."""
    if t.np is None:
        return np.inf
    m = _FLOAT_MAX.get(t.name)
    return float(_finfo(t.np).max) if m is None else m


bool_ = DType("bool", 8, "bool", np.dtype(np.bool_))
i8 = DType("i8", 8, "int", np.dtype(np.int8))
u8 = DType("u8", 8, "uint", np.dtype(np.uint8))
i16 = DType("i16", 16, "int", np.dtype(np.int16))
u16 = DType("u16", 16, "uint", np.dtype(np.uint16))
i32 = DType("i32", 32, "int", np.dtype(np.int32))
u32 = DType("u32", 32, "uint", np.dtype(np.uint32))
i64 = DType("i64", 64, "int", np.dtype(np.int64))
u64 = DType("u64", 64, "uint", np.dtype(np.uint64))
f16 = DType("f16", 16, "float", np.dtype(np.float16))
bf16 = DType("bf16", 16, "float", _BF16_NP)
f32 = DType("f32", 32, "float", np.dtype(np.float32))
f64 = DType("f64", 64, "float", np.dtype(np.float64))

ALL = (bool_, i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64)
INTS = tuple(t for t in ALL if t.is_int)
FLOATS = tuple(t for t in ALL if t.is_float)
_BY_NAME = {t.name: t for t in ALL}
_BY_NAME["bool_"] = bool_

#: The type of thread/block ids, shapes and default integer literals.
INDEX = i32


def from_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(t.name for t in ALL)}") from None


def from_numpy(np_dtype) -> DType:
    """The kaio dtype of a numpy dtype (ValueError when kaio has none)."""
    np_dtype = np.dtype(np_dtype)
    for t in ALL:
        if t.np is not None and t.np == np_dtype:
            return t
    raise ValueError(f"numpy dtype {np_dtype} has no kaio equivalent")


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary arithmetic op on two *typed* operands.

    Rules (documented in docs/language.md):
    - same dtype: that dtype;
    - float with anything: the wider float; f16 with bf16 gives f32;
    - int with int, same signedness: the wider;
    - signed with unsigned: the wider of the two if it is the signed one, otherwise the unsigned
      one (C's rule for equal widths: i32 + u32 -> u32);
    - bool behaves as the other operand's dtype.
    """
    if a is b:
        return a
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if {a, b} == {f16, bf16}:
                return f32
            return a if a.bits > b.bits else b
        return a if a.is_float else b
    if a.is_signed == b.is_signed:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.is_signed else (b, a)
    return signed if signed.bits > unsigned.bits else unsigned


def literal_fits(value, dtype: DType) -> bool:
    """Whether a Python literal can take ``dtype`` without changing its value class."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        if dtype.is_float:
            return True
        if dtype.is_bool:
            return value in (0, 1)
        return dtype.min_value() <= value <= dtype.max_value()
    if isinstance(value, float):
        return dtype.is_float
    return False


def literal_dtype(value) -> DType:
    """Default dtype of a literal that meets no typed operand."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return i32 if i32.min_value() <= value <= i32.max_value() else i64
    if isinstance(value, float):
        return f32
    raise TypeError(f"not a scalar literal: {value!r}")
