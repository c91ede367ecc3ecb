"""Builder: the one way to construct IR (used by the frontend, lowering passes and tests).

    b = Builder.for_kernel("saxpy", [("a", f32, Param(...)), ...])
    i = b.special("thread_idx", axis=0)
    with b.if_(b.cmp("lt", i, n)) as br:
        b.store(y, [i], b.add(b.load(x, [i]), one))
    kernel = b.finish()

Control-flow helpers (:meth:`if_`, :meth:`for_`, :meth:`while_`) build nested regions; the
value-carrying forms take the types of the values they yield.
"""
from __future__ import annotations

from contextlib import contextmanager

from .. import dtypes as dt
from .core import Block, Kernel, Loc, Op, Param, Value
from .ops import MATH_PREDICATES
from .scalars import canonical
from .types import BufType


class Builder:
    def __init__(self, block: Block, loc: Loc | None = None):
        self.block = block
        self.loc = loc

    # --- kernel -------------------------------------------------------------------------
    @classmethod
    def for_kernel(cls, name: str, params: list[tuple[str, object, Param]], loc: Loc | None = None):
        body = Block()
        for pname, ptype, _ in params:
            body.add_arg(ptype, pname)
        b = cls(body, loc)
        b.kernel = Kernel(name, body, [p for _, _, p in params], loc)
        return b

    def finish(self) -> Kernel:
        return self.kernel

    # --- generic ------------------------------------------------------------------------
    def op(self, opcode, operands=(), result_types=(), attrs=None, regions=(), name=None) -> Op:
        op = Op(opcode, operands, result_types, attrs, regions, self.loc,
                [name] * len(result_types) if name else None)
        self.block.append(op)
        return op

    def _one(self, opcode, operands, rtype, attrs=None, name=None) -> Value:
        return self.op(opcode, operands, [rtype], attrs, name=name).result

    @contextmanager
    def at(self, block: Block):
        saved, self.block = self.block, block
        try:
            yield self
        finally:
            self.block = saved

    @contextmanager
    def located(self, loc: Loc | None):
        saved, self.loc = self.loc, loc
        try:
            yield self
        finally:
            self.loc = saved

    # --- scalars ------------------------------------------------------------------------
    def const(self, value, dtype: dt.DType) -> Value:
        """A constant in canonical form: ints wrap to the dtype, floats round to it (RNE)."""
        return self._one("const", [], dtype, {"value": canonical(value, dtype)})

    def binary(self, opcode: str, a: Value, b: Value) -> Value:
        assert a.type is b.type, (opcode, a, b)
        return self._one(opcode, [a, b], a.type)

    def unary(self, opcode: str, a: Value) -> Value:
        return self._one(opcode, [a], a.type)

    def fma(self, a, b, c) -> Value:
        return self._one("fma", [a, b, c], a.type)

    def math(self, fn: str, *args: Value, fast: bool = False, ftz: bool = False) -> Value:
        rtype = dt.bool_ if fn in MATH_PREDICATES else args[0].type
        attrs = {"fn": fn}
        if fast:
            attrs["fast"] = True
        if ftz:
            attrs["ftz"] = True
        return self._one("math", list(args), rtype, attrs)

    def cmp(self, pred: str, a: Value, b: Value) -> Value:
        assert a.type is b.type, (pred, a, b)
        return self._one("cmp", [a, b], dt.bool_, {"pred": pred})

    def select(self, c: Value, a: Value, b: Value) -> Value:
        return self._one("select", [c, a, b], a.type)

    def cast(self, a: Value, to: dt.DType) -> Value:
        if a.type is to:
            return a
        return self._one("cast", [a], to)

    def bitcast(self, a: Value, to: dt.DType) -> Value:
        return self._one("bitcast", [a], to)

    def special(self, opcode: str, axis: int | None = None) -> Value:
        attrs = {} if axis is None else {"axis": axis}
        return self._one(opcode, [], dt.INDEX, attrs)

    # --- memory -------------------------------------------------------------------------
    def shape(self, buf: Value, axis: int) -> Value:
        return self._one("shape", [buf], dt.INDEX, {"axis": axis})

    def load(self, buf: Value, index: list[Value]) -> Value:
        return self._one("load", [buf, *index], buf.type.dtype)

    def store(self, buf: Value, index: list[Value], value: Value) -> Op:
        return self.op("store", [buf, *index, value])

    def atomic(self, kind: str, buf: Value, index: list[Value], *values: Value) -> Value:
        """Atomic read-modify-write returning the old value; ``cas`` takes (compare, new)."""
        return self._one("atomic", [buf, *index, *values], buf.type.dtype, {"op": kind})

    def shared_array(self, dtype: dt.DType, shape: tuple[int, ...], name=None,
                     swizzle: bool = False) -> Value:
        t = BufType(dtype, len(shape), "shared", "scratch", tuple(shape))
        attrs = {"dtype": dtype, "shape": tuple(shape)}
        if swizzle:
            attrs["swizzle"] = True
        return self._one("shared_array", [], t, attrs, name)

    def dyn_shared(self, dtype: dt.DType, name=None) -> Value:
        t = BufType(dtype, 1, "shared", "scratch", None)
        return self._one("dyn_shared", [], t, {"dtype": dtype}, name)

    def local_array(self, dtype: dt.DType, shape: tuple[int, ...], name=None) -> Value:
        t = BufType(dtype, len(shape), "local", "scratch", tuple(shape))
        return self._one("local_array", [], t, {"dtype": dtype, "shape": tuple(shape)}, name)

    def barrier(self) -> Op:
        return self.op("barrier")

    # --- warp and block -----------------------------------------------------------------
    def shuffle(self, mode: str, value: Value, lane: Value) -> Value:
        return self._one("shuffle", [value, lane], value.type, {"mode": mode})

    def vote(self, mode: str, pred: Value) -> Value:
        return self._one("vote", [pred], dt.bool_, {"mode": mode})

    def ballot(self, pred: Value) -> Value:
        return self._one("ballot", [pred], dt.u64)

    def warp_reduce(self, kind: str, value: Value) -> Value:
        return self._one("warp_reduce", [value], value.type, {"op": kind})

    def block_reduce(self, kind: str, value: Value) -> Value:
        return self._one("block_reduce", [value], value.type, {"op": kind})

    # --- control flow -------------------------------------------------------------------
    def yield_(self, *values: Value) -> Op:
        return self.op("yield", list(values))

    @contextmanager
    def if_(self, cond: Value, result_types=()):
        """``with b.if_(c, [f32]) as (then, else_, results):`` build both branches.

        ``then``/``else_`` are blocks; use ``with b.at(then): ...; b.yield_(v)``. For an if
        without results, an empty else block is fine and yields are optional.
        """
        then, other = Block(), Block()
        op = self.op("if", [cond], list(result_types), regions=[then, other])
        yield then, other, op.results

    def for_(self, lb: Value, ub: Value, step: Value, inits=(), iv_name=None, attrs=None):
        """Create a ``for`` op; returns (op, body block, iv, carried block args)."""
        body = Block()
        iv = body.add_arg(lb.type, iv_name)
        carried = [body.add_arg(v.type) for v in inits]
        op = self.op("for", [lb, ub, step, *inits], [v.type for v in inits], attrs, [body])
        return op, body, iv, carried

    def while_(self, inits=()):
        """Create a ``while`` op; returns (op, before block, after block).

        ``before`` receives the carried values and ends with ``condition(c, *vals)``;
        ``after`` receives ``vals`` and yields the next carried values. Results are ``vals``
        at the iteration where ``c`` was false. Here vals have the carried types.
        """
        before, after = Block(), Block()
        for v in inits:
            before.add_arg(v.type)
            after.add_arg(v.type)
        op = self.op("while", list(inits), [v.type for v in inits], regions=[before, after])
        return op, before, after

    def condition(self, cond: Value, *values: Value) -> Op:
        return self.op("condition", [cond, *values])
