"""i32 index arithmetic on top of a Builder: what partitions and lowering passes need.

Kept separate from the frontend so partitions (kaio.regions) and passes can emit index code
without knowing about Python ASTs. All values are ``dtypes.INDEX`` (i32).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import dtypes as dt
from .core import Value

if TYPE_CHECKING:   # the builder loads with the frontend, not with import kaio
    from .builder import Builder

AXES = ("x", "y", "z")


class IndexMath:
    def __init__(self, b: Builder):
        self.b = b

    def const(self, v: int) -> Value:
        return self.b.const(v, dt.INDEX)

    def _v(self, x) -> Value:
        return x if isinstance(x, Value) else self.const(x)

    def add(self, a, b): return self.b.binary("add", self._v(a), self._v(b))
    def sub(self, a, b): return self.b.binary("sub", self._v(a), self._v(b))
    def mul(self, a, b): return self.b.binary("mul", self._v(a), self._v(b))
    def div(self, a, b): return self.b.binary("div", self._v(a), self._v(b))
    def rem(self, a, b): return self.b.binary("rem", self._v(a), self._v(b))
    def min(self, a, b): return self.b.binary("min", self._v(a), self._v(b))
    def max(self, a, b): return self.b.binary("max", self._v(a), self._v(b))
    def lt(self, a, b): return self.b.cmp("lt", self._v(a), self._v(b))
    def and_(self, a, b): return self.b.binary("and", a, b)

    def special(self, name: str, axis: int) -> Value:
        return self.b.special(name, axis)

    def warp_size(self) -> Value:
        """The target's warp width (``kaio.warp_size``): per-warp partitions read it."""
        return self.b.special("warp_size")

    def shape(self, buf: Value, axis: int) -> Value:
        st = buf.type.static_shape
        if st is not None:
            return self.const(st[axis])
        return self.b.shape(buf, axis)

    def product(self, vals):
        out = self._v(vals[0])
        for v in vals[1:]:
            out = self.mul(out, v)
        return out

    def thread_linear_id(self) -> Value:
        """Thread index within the block, x fastest."""
        tx, ty, tz = (self.special("thread_idx", a) for a in range(3))
        bx, by = (self.special("block_dim", a) for a in range(2))
        return self.add(self.mul(self.add(self.mul(tz, by), ty), bx), tx)

    def block_threads(self) -> Value:
        return self.product([self.special("block_dim", a) for a in range(3)])

    def block_linear_id(self) -> Value:
        bx, by, bz = (self.special("block_idx", a) for a in range(3))
        gx, gy = (self.special("grid_dim", a) for a in range(2))
        return self.add(self.mul(self.add(self.mul(bz, gy), by), gx), bx)

    def global_linear_id(self) -> Value:
        return self.add(self.mul(self.block_linear_id(), self.block_threads()), self.thread_linear_id())

    def total_threads(self) -> Value:
        return self.mul(self.product([self.special("grid_dim", a) for a in range(3)]),
                        self.block_threads())

    def global_id(self, axis: int) -> Value:
        return self.add(self.mul(self.special("block_idx", axis), self.special("block_dim", axis)),
                        self.special("thread_idx", axis))

    def unravel(self, linear: Value, shape: list) -> tuple:
        """Row-major multi-index of ``linear`` within ``shape``."""
        if len(shape) == 1:
            return (linear,)
        idx = []
        rest = linear
        for extent in reversed(shape[1:]):
            idx.append(self.rem(rest, extent))
            rest = self.div(rest, extent)
        idx.append(rest)
        return tuple(reversed(idx))


def const_value(v: Value):
    """The constant a value holds, or None when it is not a ``const`` op's result."""
    op = v.owner
    return op.attrs["value"] if getattr(op, "opcode", None) == "const" else None


def base_and_offset(v: Value) -> tuple[Value, int]:
    """An index as (base value, constant offset): ``add b, c`` -> (b, c); anything else (v, 0).
    Two indices with the same base value are equal exactly when their offsets are."""
    op = v.owner
    if getattr(op, "opcode", None) == "add":
        a, b = op.operands
        if const_value(b) is not None:
            return a, const_value(b)
        if const_value(a) is not None:
            return b, const_value(a)
    return v, 0
