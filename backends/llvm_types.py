"""LLVM IR types and literals of kaio dtypes: shared by the emitter (:mod:`.llvm`) and its
fragment and copy lowerings (:mod:`.llvm_mma`, :mod:`.llvm_copy`)."""
from __future__ import annotations

import struct

import numpy as np

from .. import dtypes as dt

_FLOAT_TY = {"f16": "half", "bf16": "bfloat", "f32": "float", "f64": "double"}
_SUFFIX = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}


def llty(t: dt.DType) -> str:
    """LLVM type of a value of dtype ``t`` in registers (bool is i1)."""
    if t.is_bool:
        return "i1"
    return _FLOAT_TY.get(t.name) or f"i{t.bits}"


def memty(t: dt.DType) -> str:
    """LLVM type of an element in memory (bool is a byte holding 0 or 1)."""
    return "i8" if t.is_bool else llty(t)


def suffix(t: dt.DType) -> str:
    """Overload suffix of intrinsics: f32, bf16, i32 ..."""
    ty = llty(t)
    return _SUFFIX.get(ty, ty)


def float_literal(value: float, t: dt.DType) -> str:
    """An exact LLVM literal for a float constant of dtype ``t`` (rounded to it first)."""
    if t.name == "f16":
        return "0xH%04X" % int(np.float16(value).view(np.uint16))
    if t.name == "bf16":
        return "0xR%04X" % int(np.asarray(value, dtype=dt.bf16.np).view(np.uint16))
    if t.name == "f32":
        value = float(np.float32(value))
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(value)))[0]


def int_literal(value: int, t: dt.DType) -> str:
    """Two's complement decimal of ``value`` at ``t``'s width."""
    bits = t.bits
    value &= (1 << bits) - 1
    if value >= 1 << (bits - 1):
        value -= 1 << bits
    return str(value)


def literal(value, t: dt.DType) -> str:
    if t.is_bool:
        return "true" if value else "false"
    if t.is_float:
        return float_literal(value, t)
    return int_literal(int(value), t)


