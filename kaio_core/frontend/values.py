"""What an expression evaluates to while lowering (frontend values, not IR values).

- :class:`~kaio.ir.Value` -- a typed scalar or a buffer in the IR;
- :class:`Lit` -- a Python number known at compile time, weakly typed (takes the other
  operand's dtype); Const parameters and module-level numbers are literals too;
- :class:`TupleV` -- a tuple of frontend values (``a, b = b, a``; functions returning tuples);
- :class:`PyObj` -- a Python object used only at compile time (modules, intrinsics, dtypes,
  device functions) and a few bound helpers (``x.shape``, ``y.owned``, ``thread_idx.x``);
- :class:`Undef` -- a variable that is not defined on every path reaching this point.
"""
from __future__ import annotations

from ..ir.core import Value
from ..ir.types import BufType
from ..records import frozen


@frozen
class Lit:
    """A weakly typed compile-time number (bool, int or float)."""

    value: object

    @property
    def kind(self) -> str:
        v = self.value
        return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float"

    def same(self, other) -> bool:
        return isinstance(other, Lit) and type(self.value) is type(other.value) and (
            self.value == other.value or self.value != self.value and other.value != other.value)


@frozen
class TupleV:
    items: tuple


@frozen
class PyObj:
    """A compile-time Python object."""

    obj: object


@frozen
class ShapeOf:
    """``x.shape``: indexable with a constant axis."""

    buf: Value


@frozen
class OwnedMethod:
    """``y.owned`` before it is called."""

    buf: Value


@frozen
class Undef:
    """A name not defined on every path (``why`` explains it in the error)."""

    name: str
    why: str


def is_scalar(v) -> bool:
    return isinstance(v, Lit) or (isinstance(v, Value) and not isinstance(v.type, BufType))


def is_buffer(v) -> bool:
    return isinstance(v, Value) and isinstance(v.type, BufType)


def describe(v) -> str:
    """Short description for error messages: 'f32 value', 'literal 2.5', 'buffer', ..."""
    if isinstance(v, Lit):
        return f"literal {v.value!r}"
    if is_buffer(v):
        return f"buffer {v.type}"
    if isinstance(v, Value):
        return f"{v.type.name} value"
    if isinstance(v, TupleV):
        return f"tuple of {len(v.items)}"
    if isinstance(v, PyObj):
        return f"Python object {v.obj!r}"
    if isinstance(v, ShapeOf):
        return "buffer shape"
    return type(v).__name__
