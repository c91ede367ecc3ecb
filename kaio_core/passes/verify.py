"""IR verifier: checks that a kernel obeys the IR contract of :mod:`kaio.ir.ops`.

It checks opcodes, operand counts and types, attributes (the keys and types each opcode
declares in :mod:`kaio.ir.ops`, and what they must agree with), region shapes and terminators,
SSA dominance (an operand is defined earlier in its block or an enclosing one, block arguments
included), single definition, and use-lists (every value's users are exactly the ops of the
kernel that use it). The first problem found raises :class:`IRVerifyError` at the
op's source location; the message names the op, the operand and what was expected.

The verifier runs after the frontend and after every pass pipeline, so a pass bug shows up as
a precise error here rather than as wrong code in a backend.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import CompileError
from ..ir import ops as O
from ..ir.attrs import KERNEL_ATTRS, AttrError, StructAttr, convert
from ..ir.core import Block, Kernel, Op, Value
from ..ir.scalars import representable
from ..ir.types import MMA_ACC, MMA_INPUTS, SPACES, BufType, FragType, broadcasts_over, row_frag, type_str

_ARITH = ("add", "sub", "mul", "div", "rem", "min", "max")
_BITWISE = ("and", "or", "xor")


class IRVerifyError(CompileError):
    """The IR breaks the contract (a frontend or pass bug, or hand-written bad IR)."""


def run(kernel: Kernel) -> None:
    """Raise :class:`IRVerifyError` unless ``kernel`` is well-formed IR."""
    _Verifier(kernel).check()


def _tn(t) -> str:
    return type_str(t)


class _Verifier:
    def __init__(self, kernel: Kernel):
        self.k = kernel
        self.defined: set[int] = set()     # every value id defined so far (single definition)
        self.values: list[Value] = []      # ... and the values themselves, for the use-lists
        self.ops: set[int] = set()         # id() of every op in the kernel
        self.scopes: list[set[int]] = []   # value ids visible at the current point
        self.loc_stack = [kernel.loc]

    # --- errors -------------------------------------------------------------------------
    def fail(self, op: Op | None, msg: str):
        loc = op.loc if op is not None and op.loc is not None else next(
            (l for l in reversed(self.loc_stack) if l is not None), None)
        where = f"'{op.opcode}': " if op is not None else ""
        raise IRVerifyError.at(loc, f"invalid IR: {where}{msg}", kernel=self.k.name)

    # --- structure ----------------------------------------------------------------------
    def check(self) -> None:
        k = self.k
        if len(k.params) != len(k.body.args):
            self.fail(None, f"kernel has {len(k.params)} parameter records but "
                            f"{len(k.body.args)} body arguments")
        for p, a in zip(k.params, k.body.args):
            if p.kind not in ("scalar", "buffer"):
                self.fail(None, f"parameter '{p.name}' has kind {p.kind!r}; expected 'scalar' or 'buffer'")
            if (p.kind == "buffer") != isinstance(a.type, BufType):
                self.fail(None, f"parameter '{p.name}' is declared {p.kind} but has type {_tn(a.type)}")
            if isinstance(a.type, BufType) and (a.type.space != "global" or a.type.intent == "scratch"):
                self.fail(None, f"buffer parameter '{p.name}' must be a global buffer with a "
                                f"parameter intent, got {a.type}")
            if p.partition is not None and not (isinstance(p.partition, StructAttr) and
                                                isinstance(a.type, BufType) and a.type.writable):
                self.fail(None, f"parameter '{p.name}': a partition ({p.partition!r}) belongs to "
                                "a writable buffer and is a kaio.regions partition")
        for key, v in k.attrs.items():
            self.attr_type(None, KERNEL_ATTRS, key, v, "kernel")
        self.block(k.body, parent=None)
        self.use_lists()

    def use_lists(self) -> None:
        """Every user a value lists is an op of this kernel (an op dropped without
        ``kaio.ir.rewrite.erase`` would keep values alive and receive replacements)."""
        for v in self.values:
            for u in v.users:
                if id(u) not in self.ops:
                    self.fail(None, f"{v!r} lists a user '{u.opcode}' that is not in the kernel "
                                    "(an op left the IR without kaio.ir.rewrite.erase)")

    def define(self, op: Op | None, v: Value, what: str) -> None:
        if v.id in self.defined:
            self.fail(op, f"{what} {v!r} is defined more than once")
        if not isinstance(v.type, (dt.DType, BufType, FragType)):
            self.fail(op, f"{what} {v!r} has no valid type ({v.type!r})")
        self.defined.add(v.id)
        self.values.append(v)
        self.scopes[-1].add(v.id)

    def visible(self, v: Value) -> bool:
        return any(v.id in s for s in self.scopes)

    def block(self, b: Block, parent: Op | None) -> None:
        self.scopes.append(set())
        for a in b.args:
            self.define(parent, a, "block argument")
        for i, op in enumerate(b.ops):
            if op.parent is not b:
                self.fail(op, "op's parent link does not point at the block that holds it")
            if op.opcode in ("yield", "condition") and i != len(b.ops) - 1:
                self.fail(op, "a terminator must be the last op of its region")
            self.op(op, parent)
        self.scopes.pop()

    def op(self, op: Op, parent: Op | None) -> None:
        if op.opcode not in O.SPECS:
            self.fail(op, f"unknown opcode (known: {', '.join(sorted(O.SPECS))})")
        self.ops.add(id(op))
        for i, v in enumerate(op.operands):
            if not isinstance(v, Value):
                self.fail(op, f"operand {i} is not an IR value: {v!r}")
            if not self.visible(v):
                self.fail(op, f"operand {i} {v!r} is not defined before this use (or is "
                              "defined inside a region that does not enclose it)")
            if op not in v._users:
                self.fail(op, f"operand {i} {v!r} does not list this op among its users")
        s = O.spec(op.opcode)
        for key in s.required:
            if key not in op.attrs:
                self.fail(op, f"missing attribute '{key}'")
        for key, v in op.attrs.items():
            self.attr_type(op, s.attrs, key, v, f"'{op.opcode}'")
        if len(op.regions) != s.n_regions:
            self.fail(op, f"expected {s.n_regions} regions, got {len(op.regions)}")
        for r in op.regions:
            if r.parent is not op:
                self.fail(op, "region's parent link does not point at this op")
        getattr(self, "op_" + s.category)(op, parent)
        for r in op.results:
            self.define(op, r, "result")

    # --- helpers ------------------------------------------------------------------------
    def counts(self, op, n_operands, n_results=1):
        if n_operands is not None and len(op.operands) != n_operands:
            self.fail(op, f"expected {n_operands} operands, got {len(op.operands)}")
        if len(op.results) != n_results:
            self.fail(op, f"expected {n_results} results, got {len(op.results)}")

    def scalar(self, op, v: Value, what: str, kinds=None):
        t = v.type
        if not isinstance(t, dt.DType):
            self.fail(op, f"{what} must be a scalar, got {_tn(t)}")
        if kinds is not None and t.kind not in kinds:
            self.fail(op, f"{what} must be {'/'.join(kinds)}, got {t.name}")
        return t

    def result_is(self, op, t, what="result"):
        if op.results[0].type != t:
            self.fail(op, f"{what} type must be {_tn(t)}, got {_tn(op.results[0].type)}")

    def attr_type(self, op, schema, key, v, what):
        try:
            convert(schema, key, v, what)
        except AttrError as e:
            self.fail(op, str(e))

    def buffer(self, op, v: Value) -> BufType:
        if not isinstance(v.type, BufType):
            self.fail(op, f"operand 0 must be a buffer, got {_tn(v.type)}")
        return v.type

    def indices(self, op, bt: BufType, idx):
        if len(idx) != bt.ndim:
            self.fail(op, f"buffer {op.operands[0]!r} has {bt.ndim} dimensions but "
                          f"{len(idx)} indices were given")
        for k, v in enumerate(idx):
            self.scalar(op, v, f"index {k}", ("int", "uint"))

    # --- per category -------------------------------------------------------------------
    def op_const(self, op, parent):
        self.counts(op, 0)
        t = self.scalar(op, op.results[0], "result")
        v = op.attrs["value"]
        if not representable(v, t):
            self.fail(op, f"value {v!r} is not a canonical {t.name} constant (in range, exactly "
                          "representable; build constants with Builder.const)")

    def op_binary(self, op, parent):
        self.counts(op, 2)
        a, b = op.operands
        ta = self.scalar(op, a, "operand 0")
        if b.type != ta:
            self.fail(op, f"operands must have one dtype, got {ta.name} and {_tn(b.type)}")
        self.result_is(op, ta)
        name = op.opcode
        kinds = (("int", "uint", "float", "bool") if name in ("min", "max") else
                 ("int", "uint", "float") if name in _ARITH else
                 ("int", "uint", "bool") if name in _BITWISE else ("int", "uint"))
        self.scalar(op, a, "operands", kinds)

    def op_unary(self, op, parent):
        self.counts(op, 1)
        t = self.scalar(op, op.operands[0], "operand 0",
                        ("int", "uint", "bool") if op.opcode == "not" else ("int", "uint", "float"))
        self.result_is(op, t)

    def op_ternary(self, op, parent):
        self.counts(op, 3)
        t = self.scalar(op, op.operands[0], "operand 0", ("float",))
        for i, v in enumerate(op.operands[1:], 1):
            if v.type != t:
                self.fail(op, f"operand {i} must be {t.name}, got {_tn(v.type)}")
        self.result_is(op, t)

    def op_math(self, op, parent):
        fn = op.attrs["fn"]
        self.counts(op, O.MATH_FNS[fn])
        t = self.scalar(op, op.operands[0], f"operand 0 of math {fn}", ("float",))
        for i, v in enumerate(op.operands[1:], 1):
            if v.type != t:
                self.fail(op, f"operand {i} of math {fn} must be {t.name}, got {_tn(v.type)}")
        self.result_is(op, dt.bool_ if fn in O.MATH_PREDICATES else t)

    def op_cmp(self, op, parent):
        self.counts(op, 2)
        t = self.scalar(op, op.operands[0], "operand 0")
        if op.operands[1].type != t:
            self.fail(op, f"operands must have one dtype, got {t.name} and {_tn(op.operands[1].type)}")
        self.result_is(op, dt.bool_)

    def op_select(self, op, parent):
        self.counts(op, 3)
        self.scalar(op, op.operands[0], "condition (operand 0)", ("bool",))
        t = self.scalar(op, op.operands[1], "operand 1")
        if op.operands[2].type != t:
            self.fail(op, f"operands 1 and 2 must have one dtype, got {t.name} and "
                          f"{_tn(op.operands[2].type)}")
        self.result_is(op, t)

    def op_cast(self, op, parent):
        self.counts(op, 1)
        src = self.scalar(op, op.operands[0], "operand 0")
        dst = self.scalar(op, op.results[0], "result")
        if op.opcode == "bitcast" and (src.bits != dst.bits or src.is_bool or dst.is_bool):
            self.fail(op, f"bitcast needs two non-bool dtypes of one bit width, got "
                          f"{src.name} -> {dst.name}")

    def op_special(self, op, parent):
        if op.opcode == "shape":
            self.counts(op, 1)
            bt = self.buffer(op, op.operands[0])
            axis = op.attrs["axis"]
            if axis >= bt.ndim:
                self.fail(op, f"axis {axis!r} is out of range for a {bt.ndim}-d buffer")
        else:
            self.counts(op, 0)
        self.result_is(op, dt.INDEX)

    def op_memory(self, op, parent):
        if not op.operands:
            self.fail(op, "expected a buffer operand")
        bt = self.buffer(op, op.operands[0])
        if op.opcode == "load":
            self.indices(op, bt, op.operands[1:])
            self.counts(op, 1 + bt.ndim)
            self.result_is(op, bt.dtype)
            return
        if bt.intent == "in":
            self.fail(op, f"buffer {op.operands[0]!r} is read-only (intent 'in')")
        if op.opcode == "store":
            self.counts(op, 2 + bt.ndim, 0)
            values = op.operands[1 + bt.ndim:]
        else:
            kind = op.attrs["op"]
            nv = 2 if kind == "cas" else 1
            self.counts(op, 1 + bt.ndim + nv)
            self.result_is(op, bt.dtype)
            if bt.dtype.is_bool or (kind in _BITWISE and not bt.dtype.is_int):
                self.fail(op, f"atomic {kind} is not defined on {bt.dtype.name}")
            values = op.operands[1 + bt.ndim:]
        self.indices(op, bt, op.operands[1:1 + bt.ndim])
        for v in values:
            if v.type != bt.dtype:
                self.fail(op, f"value {v!r} must have the element dtype {bt.dtype.name}, got "
                              f"{_tn(v.type)}")

    def op_alloc(self, op, parent):
        self.counts(op, 0)
        bt = op.results[0].type
        if not isinstance(bt, BufType):
            self.fail(op, f"result must be a buffer, got {_tn(bt)}")
        space = "local" if op.opcode == "local_array" else "shared"
        if bt.space != space or bt.space not in SPACES or bt.intent != "scratch":
            self.fail(op, f"result must be a {space} scratch buffer, got {bt}")
        if op.attrs["dtype"] is not bt.dtype:
            self.fail(op, f"dtype attribute {op.attrs['dtype'].name} does not match {bt}")
        if op.opcode == "dyn_shared":
            if bt.ndim != 1 or bt.static_shape is not None:
                self.fail(op, f"dynamic shared memory is 1-d with no static shape, got {bt}")
            return
        shape = op.attrs["shape"]
        if bt.static_shape is None or tuple(bt.static_shape) != tuple(shape) or bt.ndim != len(shape):
            self.fail(op, f"shape attribute {list(shape)} does not match {bt}")

    def op_sync(self, op, parent):
        self.counts(op, 0, 0)

    def op_warp(self, op, parent):
        if op.opcode == "shuffle":
            self.counts(op, 2)
            t = self.scalar(op, op.operands[0], "value (operand 0)")
            self.scalar(op, op.operands[1], "lane (operand 1)", ("int", "uint"))
            self.result_is(op, t)
        else:
            self.counts(op, 1)
            self.scalar(op, op.operands[0], "predicate (operand 0)", ("bool",))
            if op.opcode == "vote":
                self.result_is(op, dt.bool_)
            else:
                self.result_is(op, dt.u64)

    def frag(self, op, v: Value, what: str, role: str) -> FragType:
        if not (isinstance(v.type, FragType) and v.type.role == role):
            self.fail(op, f"{what} must be a '{role}' fragment, got {_tn(v.type)}")
        return v.type

    def op_mma(self, op, parent):
        """Fragment ops (kaio.mma): a tile is addressed by (row0, col0) of a 2-d buffer, or of
        a 1-d buffer with a leading dimension ``ld`` (element (r, c) at r * ld + c)."""
        if op.opcode == "mma_fill":
            self.counts(op, 1)
            t = op.results[0].type
            if not isinstance(t, FragType) or op.operands[0].type is not t.dtype:
                self.fail(op, f"fills a fragment with a value of its element dtype, got "
                              f"{_tn(op.operands[0].type)} -> {_tn(t)}")
            return
        if op.opcode == "mma":
            group = op.attrs.get("group", False)
            self.counts(op, 6 if group else 3)
            for i, v in enumerate(op.operands[3:], 3):      # a group's row0, col0, k0
                self.scalar(op, v, f"operand {i}", ("int",))
            a, b, c = (self.frag(op, v, f"operand {i}", r)
                       for i, (v, r) in enumerate(zip(op.operands, ("a", "b", "acc"))))
            if not (a.shape == b.shape == c.shape and a.dtype is b.dtype
                    and MMA_ACC.get(a.dtype.name) == c.dtype.name
                    and a.dtype.name in MMA_INPUTS[a.shape]
                    and a.dims[0] == c.dims[0] and b.dims[1] == c.dims[1]
                    and a.dims[1] == b.dims[0]):
                self.fail(op, f"no matrix multiply {_tn(a)} x {_tn(b)} + {_tn(c)}")
            self.result_is(op, c)
            return
        if op.opcode == "mma_copy_wait":
            self.counts(op, 0, 0)
            return
        if op.opcode == "mma_apply":
            return self._mma_apply(op)
        if op.opcode == "mma_to_a":
            self.counts(op, 1)
            acc = self.frag(op, op.operands[0], "operand 0", "acc")
            a = op.results[0].type
            col0 = op.attrs.get("col0", 0)
            if not (acc.shape == "m16n8k16" and acc.dtype.name == "f32"
                    and isinstance(a, FragType) and a.role == "a" and a.shape == acc.shape
                    and a.dtype.name in MMA_INPUTS[a.shape] and a.dims[0] == acc.dims[0]
                    and col0 % 16 == 0 and col0 + a.dims[1] <= acc.dims[1]):
                self.fail(op, f"converts columns col0={col0} .. of an f32 m16n8k16 accumulator "
                              f"(col0 a multiple of 16) into an f16/bf16 A of its rows, got "
                              f"{_tn(acc)} -> {_tn(a)}")
            return
        if op.opcode == "mma_row_reduce":
            self.counts(op, 1)
            acc = self.frag(op, op.operands[0], "operand 0", "acc")
            if acc.dtype.name != "f32":
                self.fail(op, f"reduces the rows of f32 accumulators, got {_tn(acc)}")
            self.result_is(op, row_frag(acc))
            return
        if op.opcode == "mma_copy":
            self.counts(op, 4, 0)
            dst, src = self.buffer(op, op.operands[0]), self.buffer(op, op.operands[1])
            if not (dst.space == "shared" and dst.ndim == 2 and src.space == "global"
                    and src.ndim == 2 and src.dtype is dst.dtype):
                self.fail(op, f"copies a 2-d global tile into a 2-d shared array of its dtype, "
                              f"got {dst} <- {src}")
            for k, v in enumerate(op.operands[2:]):
                self.scalar(op, v, f"index {k}", ("int", "uint"))
            return
        bt = self.buffer(op, op.operands[0])
        if bt.ndim not in (1, 2):
            self.fail(op, f"a tile lives in a 1-d (with ld) or 2-d buffer, not {bt}")
        n_idx = 3 if bt.ndim == 1 else 2
        for k, v in enumerate(op.operands[1:1 + n_idx]):
            self.scalar(op, v, f"index {k}", ("int", "uint"))
        if op.opcode == "mma_load":
            self.counts(op, 1 + n_idx)
            t = op.results[0].type
            if op.attrs.get("int4"):
                role = "a" if op.attrs.get("trans") else "b"
                if not (isinstance(t, FragType) and t.role == role and t.shape == "m16n8k16"
                        and bt.dtype.name in ("u8", "i8")):
                    self.fail(op, f"unpacks int4 from a u8/i8 buffer into an m16n8k16 B "
                                  f"fragment (or, transposed, an A fragment), got {_tn(t)} from "
                                  f"{bt.dtype.name}")
                return
            if not isinstance(t, FragType) or t.dtype is not bt.dtype:
                self.fail(op, f"loads a fragment of the buffer's dtype {bt.dtype.name}, got {_tn(t)}")
            if op.attrs.get("trans") and t.role == "acc":
                self.fail(op, "an accumulator is loaded untransposed")
            return
        scaled = bool(op.attrs.get("scaled"))
        int_scaled = bool(op.attrs.get("int_scaled"))
        self.counts(op, 2 + n_idx + 2 * (scaled or int_scaled), 0)
        acc = self.frag(op, op.operands[-1], "the stored value", "acc")
        for k in range(2 * scaled):
            self.scalar(op, op.operands[1 + n_idx + k], ("alpha", "beta")[k], ("float",))
        if int_scaled:            # i32 -> f32 with row and column scales (f32 buffers)
            rs, cs = (self.buffer(op, v) for v in op.operands[1 + n_idx:3 + n_idx])
            if not (acc.dtype.is_int and not scaled and bt.writable and bt.dtype.name == "f32"
                    and rs.dtype.name == cs.dtype.name == "f32" and rs.ndim in (1, 2)
                    and cs.ndim == 1):
                self.fail(op, f"scales an i32 accumulator by f32 [M] (or [M, 1]) and [N] "
                              f"buffers into a writable f32 buffer, got {bt} by {rs}, {cs}")
        elif acc.dtype.is_int:    # i32 accumulators: unscaled, into i32 buffers only
            if not bt.writable or bt.dtype is not acc.dtype or scaled:
                self.fail(op, f"stores an {acc.dtype.name} accumulator unscaled into a writable "
                              f"{acc.dtype.name} buffer, got {bt}")
        elif not bt.writable or not bt.dtype.is_float:
            self.fail(op, f"stores into a writable float buffer, got {bt}")

    def _mma_apply(self, op):
        """[acc, row0, col0, frag...] -> acc, one region (x, r, c, y...) yielding the element."""
        if len(op.operands) < 3:
            self.fail(op, f"expected operands (acc, row0, col0, frag...), got {len(op.operands)}")
        acc = self.frag(op, op.operands[0], "operand 0", "acc")
        for k, v in enumerate(op.operands[1:3]):
            self.scalar(op, v, f"index {k}", ("int", "uint"))
        others = op.operands[3:]
        if any(v.type is not acc and not broadcasts_over(v.type, acc) for v in others):
            self.fail(op, f"combines fragments of one type {_tn(acc)}, got "
                          f"{', '.join(_tn(v.type) for v in others)}")
        self.result_is(op, acc)
        want = [acc.dtype, dt.INDEX, dt.INDEX] + [acc.dtype] * len(others)
        body = op.regions[0] if len(op.regions) == 1 else None
        if body is None or [a.type for a in body.args] != want:
            self.fail(op, f"takes one region with arguments ({', '.join(map(_tn, want))})")
        for inner in body.walk():
            if inner.opcode in O.MMA_APPLY_FORBIDDEN:
                self.fail(inner, f"'{inner.opcode}' inside a mma_apply region (one lane's code "
                                 "per element: no barriers, warp, fragment or alloc ops)")
        self.regions(op)
        self.yielded(op, body, [acc.dtype], "mma_apply region", True)

    def op_reduce(self, op, parent):
        self.counts(op, 1)
        t = self.scalar(op, op.operands[0], "operand 0", ("int", "uint", "float"))
        self.result_is(op, t)

    def op_terminator(self, op, parent):
        self.counts(op, None, 0)
        allowed = ("while",) if op.opcode == "condition" else ("if", "for", "while", "mma_apply")
        ok = parent is not None and parent.opcode in allowed
        if ok and parent.opcode == "while":
            ok = op.parent is parent.regions[0 if op.opcode == "condition" else 1]
        if not ok:
            where = f"a '{parent.opcode}' region" if parent is not None else "the kernel body"
            self.fail(op, f"not allowed in {where}")

    # --- control flow -------------------------------------------------------------------
    def regions(self, op):
        self.loc_stack.append(op.loc)
        for r in op.regions:
            self.block(r, op)
        self.loc_stack.pop()

    def yielded(self, op, block: Block, types, what: str, required: bool):
        term = block.terminator
        if term is None or term.opcode != "yield":
            if required or types:
                self.fail(op, f"{what} must end in 'yield' of ({', '.join(map(_tn, types))})")
            return
        got = [v.type for v in term.operands]
        if got != list(types):
            self.fail(term, f"{what} yields ({', '.join(map(_tn, got))}) but "
                            f"({', '.join(map(_tn, types))}) is expected")

    def op_control(self, op, parent):
        types = [r.type for r in op.results]
        if op.opcode == "if":
            self.counts(op, 1, len(op.results))
            self.scalar(op, op.operands[0], "condition", ("bool",))
            for r in op.regions:
                if r.args:
                    self.fail(op, "'if' regions take no block arguments")
            self.regions(op)
            self.yielded(op, op.regions[0], types, "then-region", False)
            self.yielded(op, op.regions[1], types, "else-region", False)
        elif op.opcode == "for":
            if len(op.operands) < 3:
                self.fail(op, f"expected operands (lb, ub, step, *inits), got {len(op.operands)}")
            lb, ub, step, *inits = op.operands
            t = self.scalar(op, lb, "lower bound", ("int", "uint"))
            for name, v in (("upper bound", ub), ("step", step)):
                if v.type != t:
                    self.fail(op, f"{name} must be {t.name} like the lower bound, got {_tn(v.type)}")
            want = [t] + [v.type for v in inits]
            body = op.regions[0]
            if [a.type for a in body.args] != want:
                self.fail(op, f"body arguments must be (iv, *carried) of types "
                              f"({', '.join(map(_tn, want))}), got "
                              f"({', '.join(_tn(a.type) for a in body.args)})")
            if types != want[1:]:
                self.fail(op, "result types must match the carried init values")
            owned = op.attrs.get("owned")
            if owned is not None and owned not in {p.name for p in self.k.params if p.kind == "buffer"}:
                self.fail(op, f"owned={owned!r} does not name a buffer parameter")
            if "step_sign" in op.attrs:     # its type (the int 1) is checked with every attr's
                c = step.owner.attrs["value"] if getattr(step.owner, "opcode", None) == "const" else 1
                if c <= 0:
                    self.fail(op, "step_sign = 1 (the step is > 0) on a loop whose step is the "
                                  f"constant {c}")
            self.regions(op)
            self.yielded(op, body, types, "loop body", False)
        else:
            inits = [v.type for v in op.operands]
            before, after = op.regions
            if [a.type for a in before.args] != inits:
                self.fail(op, "before-region arguments must match the init value types")
            self.regions(op)
            cond = before.terminator
            if cond is None or cond.opcode != "condition":
                self.fail(op, "before-region must end in 'condition'")
            if not cond.operands or cond.operands[0].type != dt.bool_:
                self.fail(cond, "first operand must be a bool")
            passed = [v.type for v in cond.operands[1:]]
            if [a.type for a in after.args] != passed:
                self.fail(cond, "passed values must match the after-region arguments")
            if types != passed:
                self.fail(op, "result types must match the values passed by 'condition'")
            self.yielded(op, after, inits, "after-region", True)
