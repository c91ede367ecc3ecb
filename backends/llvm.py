"""kaio IR -> LLVM IR text, for amdgcn-amd-amdhsa and nvptx64-nvidia-cuda.

The emitter is a set of tables (IR op -> LLVM instruction) plus the walk that turns structured
control flow into basic blocks with phi nodes. What differs per target (intrinsics, address
spaces, barrier, warp primitives, calling convention) comes from
:mod:`kaio.backends.llvm_targets`; the math instructions from :mod:`kaio.backends.llvm_math`
(every other math function is kaio.mathlib's IR).

Semantics kept exactly as the IR defines them (kaio.ir.ops):

- integer add/sub/mul carry no nsw/nuw (two's complement wrap-around);
- div/rem get a safe divisor (1) when it is 0, or when the operation is INT_MIN / -1, so the
  result is never poison or a trap (the wrapped INT_MIN / 0 result);
- shifts by >= the bit width select 0 (or the sign fill for arithmetic shr), because LLVM
  makes such shifts poison;
- float instructions carry no fast-math flags (so no fmul+fadd contraction); ``fma`` is
  ``llvm.fma``; min/max are ``llvm.minimumnum``/``llvm.maximumnum`` (a NaN operand loses, -0 is
  below +0: ``llvm.minnum`` leaves the order of zeros open); float atomic min/max are a
  compare-and-swap loop around them; float ``rem`` never reaches the emitter (the target
  pipeline writes it as kaio.mathlib's exact loop: LLVM's ``frem`` is expanded inexactly as
  ``x - trunc(x / y) * y`` by the nvptx and AMDGPU backends);
- compares are ordered (``oeq``, ``olt``...) except ``ne`` (``une``);
- float->int casts use ``llvm.fptosi.sat``/``llvm.fptoui.sat`` (saturating, NaN -> 0).
"""
from __future__ import annotations

import math
import re

import numpy as np

from ..errors import CompileError
from ..ir.ops import handler_table
from ..ir.types import BufType
from ..passes.expand_math import library_code
from . import llvm_math, vector_access
from .abi import kernel_abi
from .llvm_mma import MmaEmitter
from .llvm_targets import LlvmTarget, get_target, snippet_intrinsics
from .llvm_types import float_literal, int_literal, literal, llty, memty, suffix

# --- op tables --------------------------------------------------------------------------------
INT_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "and": "and", "or": "or", "xor": "xor"}
FLOAT_BINARY = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
FLOAT_INTRINSIC_BINARY = {"min": "llvm.minimumnum", "max": "llvm.maximumnum"}
INT_MINMAX = {("min", True): "llvm.smin", ("min", False): "llvm.umin",
              ("max", True): "llvm.smax", ("max", False): "llvm.umax"}
DIVREM = {("div", True): "sdiv", ("div", False): "udiv", ("rem", True): "srem", ("rem", False): "urem"}
ICMP = {("eq", True): "eq", ("ne", True): "ne", ("lt", True): "slt", ("le", True): "sle",
        ("gt", True): "sgt", ("ge", True): "sge", ("eq", False): "eq", ("ne", False): "ne",
        ("lt", False): "ult", ("le", False): "ule", ("gt", False): "ugt", ("ge", False): "uge"}
FCMP = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
ATOMIC_INT = {"add": "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor", "exch": "xchg"}
ATOMIC_FLOAT = {"add": "fadd", "sub": "fsub", "exch": "xchg"}
FOR_CMP = {(True, True): "slt", (True, False): "sgt", (False, True): "ult", (False, False): "ugt"}

_TEMP = re.compile(r"\{(t[1-9])\}")


class FunctionEmitter(MmaEmitter):
    """Emits one kernel's LLVM IR function (and the module globals it needs); the kaio.mma
    fragment ops come from :class:`kaio.backends.llvm_mma.MmaEmitter`."""

    def __init__(self, kernel, target: LlvmTarget, fast_math: bool = False):
        self.k, self.t, self.fast_math = kernel, target, fast_math
        self.lines: list[str] = []
        self.allocas: list[str] = []
        self.globals: list[str] = []
        self.vals: dict[int, str] = {}
        self.bufs: dict[int, tuple] = {}    # buffer value id -> (base ptr, space number, extents)
        self.n = 0
        self.label = "entry"
        self.warp_mask = "-1"               # replaced in the prologue when warp ops need it
        self.declares: dict[str, str] = {}  # intrinsic -> its declaration, as calls are emitted
        self.vec = vector_access.plan_kernel(kernel)   # op id -> its group of 16-byte accesses
        self.aligned: dict[int, str] = {}   # buffer id -> i1 "pointer is 16-byte aligned"

    # --- low-level helpers ------------------------------------------------------------------
    def tmp(self, hint: str = "v") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def ins(self, rhs: str, hint: str = "v") -> str:
        """Emit ``%tmp = rhs`` and return ``%tmp``."""
        t = self.tmp(hint)
        self.emit(f"{t} = {rhs}")
        return t

    def call(self, ret: str, name: str, *args: tuple[str, str]) -> str:
        self.declare(ret, name, [t for t, _ in args])
        return self.ins(f"call {ret} @{name}(" + ", ".join(f"{t} {v}" for t, v in args) + ")")

    def declare(self, ret: str, name: str, types) -> None:
        self.declares.setdefault(name, f"declare {ret} @{name}({', '.join(types)})")

    def snippet(self, text: str, **kw) -> str:
        """Emit a target snippet (see llvm_targets); returns the name bound to ``{out}``."""
        names = {m: self.tmp("s") for m in dict.fromkeys(_TEMP.findall(text))}   # in order: reproducible text
        out = self.tmp("s") if "{out}" in text else None
        if "{mask}" in text:
            kw.setdefault("mask", self.warp_mask)
        filled = text.format(out=out, **names, **kw)
        for ret, name, types in snippet_intrinsics(text):
            self.declare(ret, name.format(**kw), types)
        for line in filled.splitlines():
            self.emit(line)
        return out

    def new_label(self, hint: str) -> str:
        self.n += 1
        return f"{hint}{self.n}"

    def start(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.label = label

    def v(self, value) -> str:
        try:
            return self.vals[value.id]
        except KeyError:
            raise CompileError(f"LLVM emitter: value {value!r} used before definition",
                               kernel=self.k.name) from None

    def error(self, op, msg: str) -> CompileError:
        return CompileError.at(getattr(op, "loc", None), f"{msg} (LLVM target {self.t.name})",
                               kernel=self.k.name)

    def need(self, snippet: str, what: str, op) -> str:
        if not snippet:
            raise self.error(op, f"{what} is not available")
        return snippet

    def ptrty(self, space: int) -> str:
        return "ptr" if space == 0 else f"ptr addrspace({space})"

    # --- kernel -----------------------------------------------------------------------------
    def signature(self) -> list[str]:
        """LLVM parameters from the shared ABI; binds IR params to their LLVM values."""
        abi = kernel_abi(self.k)
        sig = []
        g = self.t.space["global"]
        for p in abi.params:
            value = self.k.args[p.ir_param_index]
            name = "%" + p.name
            if p.kind == "pointer":
                attrs = " noalias" + (" readonly" if value.type.intent == "in" else "")
                sig.append(f"{self.ptrty(g)}{attrs} {name}")
                self.bufs[value.id] = (name, g, [])
                self.vals[value.id] = name
            elif p.kind == "extent":
                sig.append(f"i32 {name}")
                self.bufs[value.id][2].append(name)
            elif value.type.is_bool:      # bool travels as a u8 holding 0 or 1
                sig.append(f"i8 {name}")
                self.vals[value.id] = f"{name}.b"
                self.lines.append(f"  {name}.b = icmp ne i8 {name}, 0")
            else:
                sig.append(f"{llty(value.type)} {name}")
                self.vals[value.id] = name
        return sig

    def function(self) -> str:
        sig = self.signature()
        if any(o.opcode in ("shuffle", "vote", "ballot") for o in self.k.walk()) and \
                "{mask}" in (self.t.lane_read or ""):
            self.warp_mask = self._member_mask()
        for buf in vector_access.grouped_buffers(self.vec):   # once, in the entry block
            base, space, _ = self.bufs[buf.id]
            low = self.ins(f"and i64 {self.ins(f'ptrtoint {self.ptrty(space)} {base} to i64')}, 15")
            self.aligned[buf.id] = self.ins(f"icmp eq i64 {low}, 0", "aligned")
            if vector_access.needs_extent_check(buf):    # N-d: rows start 16-byte aligned too
                n = vector_access.group_length(buf.type.dtype)
                rem = self.ins(f"and i32 {self.bufs[buf.id][2][-1]}, {n - 1}")
                rows = self.ins(f"icmp eq i32 {rem}, 0")
                self.aligned[buf.id] = self.ins(f"and i1 {self.aligned[buf.id]}, {rows}", "aligned")
        prologue = self.lines
        self.lines = []
        self.block(self.k.body)
        self.emit("ret void")
        cc = self.t.kernel_cc + " " if self.t.kernel_cc else ""
        head = f"define {cc}void @{kernel_abi(self.k).entry}({', '.join(sig)}) #0 {{"
        body = ["entry:"] + ["  " + a for a in self.allocas] + prologue + self.lines
        return "\n".join([head, *body, "}"])

    def _member_mask(self) -> str:
        """This thread's warp as a lane mask: all 32 lanes, or those that exist in the last,
        partial warp of a block whose size is not a multiple of 32 (computed in the entry block,
        which dominates every warp op)."""
        lin, tot = self.block_thread()
        first = self.ins(f"and i32 {lin}, -32")                   # the warp's first thread
        left = self.ins(f"sub i32 {tot}, {first}")
        full = self.ins(f"icmp uge i32 {left}, 32")
        bits = self.ins(f"shl i32 1, {self.ins(f'select i1 {full}, i32 0, i32 {left}')}")
        part = self.ins(f"sub i32 {bits}, 1")
        return self.ins(f"select i1 {full}, i32 -1, i32 {part}")

    def special(self, name: str, axis: int = 0) -> str:
        """The i32 value of special register ``name`` (thread_idx, block_dim...) on ``axis``."""
        return self.snippet(self.need(self.t.specials.get(name), name, None), ax="xyz"[axis],
                            axn=axis, off2=12 + 2 * axis, off4=4 * axis)

    def block_thread(self) -> tuple[str, str]:
        """(this thread's linear index in its block, threads per block)."""
        tx, ty, tz = (self.special("thread_idx", a) for a in range(3))
        nx, ny, nz = (self.special("block_dim", a) for a in range(3))
        lin = self.ins(f"add i32 {self.ins(f'mul i32 {tz}, {ny}')}, {ty}")
        lin = self.ins(f"add i32 {self.ins(f'mul i32 {lin}, {nx}')}, {tx}")
        return lin, self.ins(f"mul i32 {self.ins(f'mul i32 {nx}, {ny}')}, {nz}")

    # --- blocks -----------------------------------------------------------------------------
    def block(self, block):
        """Emit a region's ops; returns the terminator op (yield/condition) or None."""
        for op in block.ops:
            if op.opcode in ("yield", "condition"):
                return op
            handler = _HANDLERS.get(op.opcode)
            if handler is None:
                raise self.error(op, f"op '{op.opcode}' is not supported by the LLVM emitter"
                                 + ("; run kaio.passes.target_pipeline first"
                                    if op.opcode.endswith("_reduce") else ""))
            handler(self, op)
        return None

    def bind(self, op, value: str) -> None:
        self.vals[op.result.id] = value

    # --- scalars ----------------------------------------------------------------------------
    def op_const(self, op):
        self.bind(op, literal(op.attrs["value"], op.result.type))

    def op_binary(self, op):
        t = op.result.type
        a, b = (self.v(x) for x in op.operands)
        ty, name = llty(t), op.opcode
        if t.is_float:
            if name == "rem":   # not frem: nvptx/AMDGPU expand it as x - trunc(x/y)*y, inexact
                raise self.error(op, "float 'rem' is expanded by kaio.passes.target_pipeline "
                                     "(kaio.mathlib's exact fmod); run it first")
            if name in FLOAT_BINARY:
                return self.bind(op, self.ins(f"{FLOAT_BINARY[name]} {ty} {a}, {b}"))
            if name in FLOAT_INTRINSIC_BINARY:
                return self.bind(op, self.call(ty, f"{FLOAT_INTRINSIC_BINARY[name]}.{suffix(t)}",
                                               (ty, a), (ty, b)))
            raise self.error(op, f"'{name}' is not defined on {t.name}")
        if name in INT_BINARY:
            return self.bind(op, self.ins(f"{INT_BINARY[name]} {ty} {a}, {b}"))
        signed = t.is_signed
        if (name, signed) in INT_MINMAX:
            return self.bind(op, self.call(ty, f"{INT_MINMAX[name, signed]}.{ty}", (ty, a), (ty, b)))
        if (name, signed) in DIVREM:
            signed = signed and not op.attrs.get("nonneg")   # kaio.passes.unsigned_divide: udiv
            return self.bind(op, self.ins(f"{DIVREM[name, signed]} {ty} {a}, "
                                          f"{self.safe_divisor(t, a, b, signed)}"))
        if name in ("shl", "shr"):
            return self.bind(op, self.shift(t, name, a, b))
        raise self.error(op, f"'{name}' is not defined on {t.name}")

    def safe_divisor(self, t, a: str, b: str, signed: bool) -> str:
        ty = llty(t)
        bad = self.ins(f"icmp eq {ty} {b}, 0")
        if signed:   # INT_MIN / -1 overflows: divide by 1 instead (wrapped result INT_MIN)
            amin = self.ins(f"icmp eq {ty} {a}, {int_literal(t.min_value(), t)}")
            bneg = self.ins(f"icmp eq {ty} {b}, -1")
            bad = self.ins(f"or i1 {bad}, " + self.ins(f"and i1 {amin}, {bneg}"))
        return self.ins(f"select i1 {bad}, {ty} 1, {ty} {b}")

    def shift(self, t, name: str, a: str, b: str) -> str:
        ty, w = llty(t), t.bits
        big = self.ins(f"icmp uge {ty} {b}, {w}")
        if name == "shr" and t.is_signed:   # sign fill: shift by width-1
            amt = self.ins(f"select i1 {big}, {ty} {w - 1}, {ty} {b}")
            return self.ins(f"ashr {ty} {a}, {amt}")
        r = self.ins(f"{'shl' if name == 'shl' else 'lshr'} {ty} {a}, {b}")
        return self.ins(f"select i1 {big}, {ty} 0, {ty} {r}")

    def op_unary(self, op):
        t = op.result.type
        a, ty = self.v(op.operands[0]), llty(t)
        name = op.opcode
        if name == "neg":
            r = self.ins(f"fneg {ty} {a}") if t.is_float else self.ins(f"sub {ty} 0, {a}")
        elif name == "not":
            r = self.ins(f"xor {ty} {a}, {'true' if t.is_bool else -1}")
        elif t.is_float:
            r = self.call(ty, f"llvm.fabs.{suffix(t)}", (ty, a))
        elif t.is_signed:   # abs(INT_MIN) wraps to INT_MIN: the poison flag stays off
            r = self.call(ty, f"llvm.abs.{ty}", (ty, a), ("i1", "false"))
        else:
            r = a
        self.bind(op, r)

    def op_fma(self, op):
        t = op.result.type
        a, b, c = (self.v(x) for x in op.operands)
        ty = llty(t)
        if t.is_float:
            return self.bind(op, self.call(ty, f"llvm.fma.{suffix(t)}", (ty, a), (ty, b), (ty, c)))
        self.bind(op, self.ins(f"add {ty} {self.ins(f'mul {ty} {a}, {b}')}, {c}"))

    def op_cmp(self, op):
        t = op.operands[0].type
        a, b = (self.v(x) for x in op.operands)
        pred = op.attrs["pred"]
        if t.is_float:
            self.bind(op, self.ins(f"fcmp {FCMP[pred]} {llty(t)} {a}, {b}"))
        else:
            self.bind(op, self.ins(f"icmp {ICMP[pred, t.is_signed]} {llty(t)} {a}, {b}"))

    def op_select(self, op):
        c, a, b = (self.v(x) for x in op.operands)
        ty = self.vty(op.result.type)
        self.bind(op, self.ins(f"select i1 {c}, {ty} {a}, {ty} {b}"))

    def op_cast(self, op):
        self.bind(op, self.convert(self.v(op.operands[0]), op.operands[0].type, op.result.type))

    def convert(self, a: str, src, dst) -> str:
        """Value conversion with kaio's cast semantics (see the module docstring)."""
        s, d = llty(src), llty(dst)
        if src is dst:
            return a
        if dst.is_bool:
            return self.ins(f"fcmp une {s} {a}, 0.0") if src.is_float else self.ins(f"icmp ne {s} {a}, 0")
        if src.is_bool:
            return self.ins(f"uitofp i1 {a} to {d}") if dst.is_float else self.ins(f"zext i1 {a} to {d}")
        if src.is_float and dst.is_float:
            if {src.name, dst.name} == {"f16", "bf16"}:   # through f32, exactly representable
                a, s = self.ins(f"fpext {s} {a} to float"), "float"
            return self.ins(f"{'fpext' if dst.bits > src.bits else 'fptrunc'} {s} {a} to {d}")
        if src.is_float:
            fn = "fptosi" if dst.is_signed else "fptoui"
            return self.call(d, f"llvm.{fn}.sat.{d}.{suffix(src)}", (s, a))
        if dst.is_float:
            return self.ins(f"{'sitofp' if src.is_signed else 'uitofp'} {s} {a} to {d}")
        if dst.bits == src.bits:
            return a
        if dst.bits < src.bits:
            return self.ins(f"trunc {s} {a} to {d}")
        return self.ins(f"{'sext' if src.is_signed else 'zext'} {s} {a} to {d}")

    def op_bitcast(self, op):
        src, dst = op.operands[0].type, op.result.type
        a = self.v(op.operands[0])
        same = llty(src) == llty(dst)
        self.bind(op, a if same else self.ins(f"bitcast {llty(src)} {a} to {llty(dst)}"))

    def op_special(self, op):
        if op.opcode == "warp_size":
            return self.bind(op, str(self.t.warp_size))
        self.need(self.t.specials.get(op.opcode), op.opcode, op)
        self.bind(op, self.special(op.opcode, op.attrs.get("axis", 0)))

    def op_shape(self, op):
        buf = op.operands[0]
        st = buf.type.static_shape
        axis = op.attrs["axis"]
        if st is not None:
            return self.bind(op, str(st[axis]))
        _, _, extents = self.bufs[buf.id]
        if not extents:
            raise self.error(op, "dynamic shared memory has no shape inside the kernel")
        self.bind(op, extents[axis])

    def op_math(self, op):
        fn, t = op.attrs["fn"], op.operands[0].type
        fast = bool(op.attrs.get("fast")) or self.fast_math
        r = self.native_math(op, fn, t, [self.v(x) for x in op.operands], fast)
        if r is None:   # no instruction for it: kaio.mathlib's code, emitted in place
            with library_code(op) as (code, value):
                self.block(code)
                r = self.v(value)
        self.bind(op, r)

    def native_math(self, op, fn: str, t, args: list[str], fast: bool) -> str | None:
        """``fn(args)`` by the target's instructions (:mod:`.llvm_math`), or None."""
        if not t.is_float:
            raise self.error(op, f"math.{fn} takes a float argument, got {t.name}; cast first")
        ty, sfx, a = llty(t), suffix(t), args[0]
        if fast and t.name == "f32" and op.attrs.get("ftz") and fn in self.t.fast_f32_ftz:
            return self.snippet(self.t.fast_f32_ftz[fn], a=a)
        if fast and t.name == "f32" and fn in self.t.fast_f32:
            return self.snippet(self.t.fast_f32[fn], a=a)
        if fn in llvm_math.EXACT_UNARY:
            return self.call(ty, f"{llvm_math.EXACT_UNARY[fn]}.{sfx}", (ty, a))
        if fn in llvm_math.EXACT_BINARY:
            return self.call(ty, f"{llvm_math.EXACT_BINARY[fn]}.{sfx}", (ty, a), (ty, args[1]))
        if fn in llvm_math.CLASSES:
            pred, magnitude = llvm_math.CLASSES[fn]
            if not magnitude:
                return self.ins(f"fcmp {pred} {ty} {a}, {a}")
            mag = self.call(ty, f"llvm.fabs.{sfx}", (ty, a))
            return self.ins(f"fcmp {pred} {ty} {mag}, {float_literal(math.inf, t)}")
        return None

    # --- memory -----------------------------------------------------------------------------
    def address(self, buf, index) -> tuple[str, int]:
        """Pointer to element ``index`` of ``buf`` (row-major) and its address space."""
        if buf.id not in self.bufs:
            raise CompileError(f"LLVM emitter: buffer {buf!r} is not a kernel parameter or a "
                               "shared/local array (buffers cannot flow through control flow)",
                               kernel=self.k.name)
        base, space, extents = self.bufs[buf.id]
        bt: BufType = buf.type
        wide = bt.space == "global"      # global buffers may exceed 2**31 elements
        it = "i64" if wide else "i32"
        dims = list(bt.static_shape) if bt.static_shape is not None else extents
        idx = [self.index_value(i, it) for i in index]
        lin = idx[0]
        for d in range(1, len(idx)):
            n = str(dims[d]) if isinstance(dims[d], int) else (
                self.ins(f"zext i32 {dims[d]} to i64") if wide else dims[d])
            lin = self.ins(f"add {it} {self.ins(f'mul {it} {lin}, {n}')}, {idx[d]}")
        ptr = self.ins(f"getelementptr {memty(bt.dtype)}, {self.ptrty(space)} {base}, {it} {lin}", "p")
        return ptr, space

    def index_value(self, value, it: str) -> str:
        t, a = value.type, self.v(value)
        width = int(it[1:])
        if t.is_bool:
            return self.ins(f"zext i1 {a} to {it}")
        if t.bits == width:
            return a
        if t.bits > width:
            return self.ins(f"trunc {llty(t)} {a} to {it}")
        return self.ins(f"{'sext' if t.is_signed else 'zext'} {llty(t)} {a} to {it}")

    def op_load(self, op):
        if id(op) in self.vec:
            return self.vector(self.vec[id(op)], op)
        buf, *index = op.operands
        t = buf.type.dtype
        ptr, space = self.address(buf, index)
        r = self.ins(f"load {memty(t)}, {self.ptrty(space)} {ptr}, align {t.itemsize}")
        self.bind(op, self.ins(f"icmp ne i8 {r}, 0") if t.is_bool else r)

    def op_store(self, op):
        if id(op) in self.vec:
            return self.vector(self.vec[id(op)], op)
        buf, *index, value = op.operands
        t = buf.type.dtype
        ptr, space = self.address(buf, index)
        v = self.v(value)
        if t.is_bool:
            v = self.ins(f"zext i1 {v} to i8")
        self.emit(f"store {memty(t)} {v}, {self.ptrty(space)} {ptr}, align {t.itemsize}")

    def vector(self, g: vector_access.Group, op):
        """A group of n = 16 / itemsize accesses, or a narrow group's n (kaio.backends.vector_access)
        at its anchor op: one ``<n x T>`` access aligned to its n * itemsize bytes when the
        buffer's pointer is 16-byte aligned, the n scalar accesses otherwise; the other members
        emit nothing."""
        if op is not g.at:
            return
        t, n = g.buf.type.dtype, len(g.ops)
        align = n * t.itemsize
        ty, vty = memty(t), f"<{n} x {memty(t)}>"
        ptr, space = self.address(g.buf, g.index)
        pty = self.ptrty(space)

        def at(k):      # member k's address: the chunk's offset folded in
            off = g.offset + k
            return self.ins(f"getelementptr {ty}, {pty} {ptr}, i64 {off}", "p") if off else ptr
        vec_l, scalar_l, end_l = (self.new_label(h) for h in ("vec", "scalar", "endvec"))
        self.emit(f"br i1 {self.aligned[g.buf.id]}, label %{vec_l}, label %{scalar_l}")
        self.start(vec_l)
        if g.kind == "load":
            wide = self.ins(f"load {vty}, {pty} {at(0)}, align {align}")
        else:
            vals = [self.v(o.operands[-1]) for o in g.ops]
            self.emit(f"store {vty} {self.narrowed(g, vty) or self.pack(vty, ty, vals)}, "
                      f"{pty} {at(0)}, align {align}")
        self.emit(f"br label %{end_l}")
        self.start(scalar_l)
        if g.kind == "load":
            narrow = self.pack(vty, ty, [self.ins(f"load {ty}, {pty} {at(k)}, align {t.itemsize}")
                                         for k in range(n)])
        else:
            for k, x in enumerate(vals):
                self.emit(f"store {ty} {x}, {pty} {at(k)}, align {t.itemsize}")
        self.emit(f"br label %{end_l}")
        self.start(end_l)
        if g.kind == "load":
            # one vector phi, split after the join: with the elements split before it, LLVM
            # scalarises the vector load and then hoists the two identical arms (align 4)
            whole = self.ins(f"phi {vty} [ {wide}, %{vec_l} ], [ {narrow}, %{scalar_l} ]")
            for k, o in enumerate(g.ops):
                self.bind(o, self.ins(f"extractelement {vty} {whole}, i32 {k}"))

    def narrowed(self, g: vector_access.Group, vty: str) -> str | None:
        """When every value a 16-bit float store group stores is a cast from f32: one
        ``fptrunc <n x float>`` of the f32 sources (LLVM makes it n/2 packed conversions,
        ``cvt.rn.f16x2.f32`` on NVIDIA; each lane rounds as the scalar cast does), else None."""
        casts = [o.operands[-1].owner for o in g.ops]
        t = g.buf.type.dtype
        if not (t.is_float and t.bits == 16) or not all(
                getattr(c, "opcode", None) == "cast" and c.operands[0].type.name == "f32"
                for c in casts):
            return None
        wide = self.pack(f"<{len(casts)} x float>", "float", [self.v(c.operands[0]) for c in casts])
        return self.ins(f"fptrunc <{len(casts)} x float> {wide} to {vty}")

    def pack(self, vty: str, ty: str, vals: list[str]) -> str:
        """A vector of type ``vty`` holding the ``ty`` values ``vals``."""
        whole = "poison"
        for k, x in enumerate(vals):
            whole = self.ins(f"insertelement {vty} {whole}, {ty} {x}, i32 {k}")
        return whole

    def op_atomic(self, op):
        buf = op.operands[0]
        t, kind = buf.type.dtype, op.attrs["op"]
        nvals = 2 if kind == "cas" else 1
        index, values = op.operands[1:-nvals], [self.v(x) for x in op.operands[-nvals:]]
        ptr, space = self.address(buf, index)
        scope = self.t.atomic_scope.get(buf.type.space, "")
        ty, pty, al = llty(t), self.ptrty(space), t.itemsize
        if t.is_bool:
            raise self.error(op, "atomics on bool buffers are not supported")
        if kind == "cas":   # cmpxchg needs an integer type: floats go through their bits
            it = ty if not t.is_float else f"i{t.bits}"
            cmp, new = values
            if t.is_float:
                cmp, new = (self.ins(f"bitcast {ty} {x} to {it}") for x in (cmp, new))
            pair = self.cmpxchg(pty, ptr, it, cmp, new, scope, al)
            old = self.ins(f"extractvalue {{ {it}, i1 }} {pair}, 0")
            return self.bind(op, self.ins(f"bitcast {it} {old} to {ty}") if t.is_float else old)
        if t.is_float and kind in FLOAT_INTRINSIC_BINARY:
            # atomicrmw fmin/fmax have minnum's open order of zeros: a loop around the IR's min
            fn = f"{FLOAT_INTRINSIC_BINARY[kind]}.{suffix(t)}"
            return self.bind(op, self.cas_loop(ptr, pty, t, scope, lambda old: self.call(
                ty, fn, (ty, old), (ty, values[0]))))
        if t.is_float:
            rmw = ATOMIC_FLOAT.get(kind)
        elif kind in ("min", "max"):
            rmw = kind if t.is_signed else "u" + kind
        else:
            rmw = ATOMIC_INT.get(kind)
        if rmw is None:
            raise self.error(op, f"atomic '{kind}' is not defined on {t.name}")
        self.bind(op, self.ins(f"atomicrmw {rmw} {pty} {ptr}, {ty} {values[0]} {scope}monotonic, align {al}"))

    def cmpxchg(self, pty: str, ptr: str, it: str, cmp: str, new: str, scope: str, al: int) -> str:
        """A monotonic compare-and-swap of integer type ``it``; returns its {old, success} pair."""
        return self.ins(f"cmpxchg {pty} {ptr}, {it} {cmp}, {it} {new} {scope}monotonic monotonic, "
                        f"align {al}")

    def cas_loop(self, ptr: str, pty: str, t, scope: str, combine) -> str:
        """Atomically replace the ``t`` at ``ptr`` by ``combine(old)`` with a compare-and-swap
        loop on its bits; returns the value replaced."""
        ty, it, al = llty(t), f"i{t.bits}", t.itemsize
        pre = self.label
        first = self.ins(f"load atomic {it}, {pty} {ptr} {scope}monotonic, align {al}")
        loop, done = self.new_label("cas"), self.new_label("cas_done")
        self.emit(f"br label %{loop}")
        self.start(loop)
        seen = self.tmp("seen")
        bits = self.ins(f"phi {it} [ {first}, %{pre} ], [ {seen}, %{loop} ]")
        old = self.ins(f"bitcast {it} {bits} to {ty}")
        new = self.ins(f"bitcast {ty} {combine(old)} to {it}")
        pair = self.cmpxchg(pty, ptr, it, bits, new, scope, al)
        self.emit(f"{seen} = extractvalue {{ {it}, i1 }} {pair}, 0")
        ok = self.ins(f"extractvalue {{ {it}, i1 }} {pair}, 1")
        self.emit(f"br i1 {ok}, label %{done}, label %{loop}")
        self.start(done)
        return old

    def op_shared_array(self, op):
        t = op.result.type
        name = f"@__kaio_shared_{len(self.globals)}"
        n = int(np.prod(t.static_shape))
        sp = self.t.space["shared"]
        self.globals.append(f"{name} = internal addrspace({sp}) global [{n} x {memty(t.dtype)}] "
                            f"poison, align 16")
        self.bufs[op.result.id] = (name, sp, [])
        self.vals[op.result.id] = name

    def op_dyn_shared(self, op):
        # every dyn_shared view starts at the same launch-sized LDS/shared block
        name = "@__kaio_dyn_shared"
        sp = self.t.space["shared"]
        decl = f"{name} = external addrspace({sp}) global [0 x i8], align 16"
        if decl not in self.globals:
            self.globals.append(decl)
        self.bufs[op.result.id] = (name, sp, [])
        self.vals[op.result.id] = name

    def op_local_array(self, op):
        t = op.result.type
        n = int(np.prod(t.static_shape))
        sp = self.t.alloca_space
        name = self.tmp("local")
        self.allocas.append(f"{name} = alloca [{n} x {memty(t.dtype)}], align 16"
                            + (f", addrspace({sp})" if sp else ""))
        self.bufs[op.result.id] = (name, sp, [])
        self.vals[op.result.id] = name

    def op_barrier(self, op):
        self.before_barrier()
        self.snippet(self.t.barrier)

    # --- warp -------------------------------------------------------------------------------
    def op_shuffle(self, op):
        value, lane_arg = op.operands
        mode, w = op.attrs["mode"], self.t.warp_size
        self.need(self.t.lane_read, "shuffle", op)
        lane = self.snippet(self.t.specials["lane_id"])
        x = self.index_value(lane_arg, "i32")
        if mode == "idx":   # source lane taken modulo the warp width
            src = self.ins(f"and i32 {x}, {w - 1}")
        else:               # out-of-warp sources read the lane's own value
            s = self.ins({"up": f"sub i32 {lane}, {x}", "down": f"add i32 {lane}, {x}",
                          "xor": f"xor i32 {lane}, {x}"}[mode])
            ok = self.ins(f"icmp ult i32 {s}, {w}")
            src = self.ins(f"select i1 {ok}, i32 {s}, i32 {lane}")
        self.bind(op, self.lane_read(self.v(value), value.type, src))

    def lane_read(self, a: str, t, src: str) -> str:
        """Read value ``a`` of dtype ``t`` from lane ``src`` with the 32-bit lane primitive."""
        ty = llty(t)
        if t.bits == 64:
            bits = self.ins(f"bitcast {ty} {a} to i64") if t.is_float else a
            lo = self.ins(f"trunc i64 {bits} to i32")
            hi = self.ins(f"trunc i64 {self.ins(f'lshr i64 {bits}, 32')} to i32")
            lo, hi = (self.snippet(self.t.lane_read, a=x, b=src) for x in (lo, hi))
            hi64 = self.ins(f"shl i64 {self.ins(f'zext i32 {hi} to i64')}, 32")
            r = self.ins(f"or i64 {hi64}, {self.ins(f'zext i32 {lo} to i64')}")
            return self.ins(f"bitcast i64 {r} to {ty}") if t.is_float else r
        nb = 1 if t.is_bool else t.bits
        it = f"i{nb}"
        bits = self.ins(f"bitcast {ty} {a} to {it}") if t.is_float else a
        word = bits if nb == 32 else self.ins(f"zext {it} {bits} to i32")
        got = self.snippet(self.t.lane_read, a=word, b=src)
        back = got if nb == 32 else self.ins(f"trunc i32 {got} to {it}")
        return self.ins(f"bitcast {it} {back} to {ty}") if t.is_float else back

    def op_vote(self, op):
        snip = {"any": self.t.vote_any, "all": self.t.vote_all}[op.attrs["mode"]]
        self.bind(op, self.snippet(self.need(snip, "vote", op), a=self.v(op.operands[0])))

    def op_ballot(self, op):
        self.bind(op, self.snippet(self.need(self.t.ballot, "ballot", op), a=self.v(op.operands[0])))

    # --- control flow -----------------------------------------------------------------------
    def op_if(self, op):
        cond = self.v(op.operands[0])
        then_l, else_l, end_l = (self.new_label(h) for h in ("then", "else", "endif"))
        self.emit(f"br i1 {cond}, label %{then_l}, label %{else_l}")
        incoming = []
        for label, region in ((then_l, op.regions[0]), (else_l, op.regions[1])):
            self.start(label)
            term = self.block(region)
            vals = [self.v(x) for x in term.operands] if term is not None else []
            incoming.append((vals, self.label))
            self.emit(f"br label %{end_l}")
        self.start(end_l)
        for i, r in enumerate(op.results):
            phis = ", ".join(f"[ {vals[i]}, %{lab} ]" for vals, lab in incoming)
            self.vals[r.id] = self.ins(f"phi {self.vty(r.type)} {phis}")

    def _phis(self, args, inits, pre: str) -> list[int]:
        """Emit header phis with a placeholder for the back edge; returns their line numbers."""
        slots = []
        for arg, init in zip(args, inits):
            name = self.tmp("phi")
            self.vals[arg.id] = name
            slots.append(len(self.lines))
            self.emit(f"{name} = phi {self.vty(arg.type)} [ {init}, %{pre} ], @BACKEDGE@")
        return slots

    def _close_phis(self, slots, values, latch: str) -> None:
        for slot, v in zip(slots, values):
            self.lines[slot] = self.lines[slot].replace("@BACKEDGE@", f"[ {v}, %{latch} ]")

    def op_for(self, op):
        lb, ub, step, *inits = (self.v(x) for x in op.operands)
        t = op.operands[0].type
        ty = llty(t)
        body = op.regions[0]
        pre = self.label
        hdr, body_l, exit_l = (self.new_label(h) for h in ("for", "body", "endfor"))
        self.emit(f"br label %{hdr}")
        self.start(hdr)
        slots = self._phis(body.args, [lb, *inits], pre)
        iv = self.v(body.args[0])
        step_op = op.operands[2].owner
        known = getattr(step_op, "opcode", None) == "const"
        positive = op.attrs.get("step_sign") == 1    # kaio.passes.loop_facts proved step > 0
        if known or positive or not t.is_signed:   # direction known at compile time
            up = positive or not t.is_signed or step_op.attrs["value"] > 0
            cond = self.ins(f"icmp {FOR_CMP[t.is_signed, up]} {ty} {iv}, {ub}")
        else:
            pos = self.ins(f"icmp sgt {ty} {step}, 0")
            lt = self.ins(f"icmp slt {ty} {iv}, {ub}")
            gt = self.ins(f"icmp sgt {ty} {iv}, {ub}")
            cond = self.ins(f"select i1 {pos}, i1 {lt}, i1 {gt}")
        self.emit(f"br i1 {cond}, label %{body_l}, label %{exit_l}")
        self.start(body_l)
        term = self.block(body)
        yielded = [self.v(x) for x in term.operands] if term is not None else []
        nxt = self.ins(f"add {ty} {iv}, {step}")
        self._close_phis(slots, [nxt, *yielded], self.label)
        self.emit(f"br label %{hdr}")
        self.start(exit_l)
        for r, arg in zip(op.results, body.args[1:]):
            self.vals[r.id] = self.v(arg)

    def op_while(self, op):
        inits = [self.v(x) for x in op.operands]
        before, after = op.regions
        pre = self.label
        hdr, body_l, exit_l = (self.new_label(h) for h in ("while", "do", "endwhile"))
        self.emit(f"br label %{hdr}")
        self.start(hdr)
        slots = self._phis(before.args, inits, pre)
        cond_op = self.block(before)
        cond, *vals = (self.v(x) for x in cond_op.operands)
        self.emit(f"br i1 {cond}, label %{body_l}, label %{exit_l}")
        self.start(body_l)
        for arg, v in zip(after.args, vals):
            self.vals[arg.id] = v
        term = self.block(after)
        self._close_phis(slots, [self.v(x) for x in term.operands] if term else [], self.label)
        self.emit(f"br label %{hdr}")
        self.start(exit_l)
        for r, v in zip(op.results, vals):
            self.vals[r.id] = v


_HANDLERS = handler_table(FunctionEmitter, "op_")

def emit_llvm(kernel, target: str | LlvmTarget, fast_math: bool = False,
              max_registers: int | None = None) -> str:
    """LLVM IR text (one module, one kernel) for an IR kernel already lowered by
    ``kaio.passes.target_pipeline`` for the target's warp width. ``max_registers`` caps
    registers per thread through the target's function attribute."""
    t = get_target(target) if isinstance(target, str) else target
    fe = FunctionEmitter(kernel, t, fast_math)
    fn = fe.function()
    kattrs = dict(t.kernel_attrs)
    if max_registers:
        kattrs[t.max_registers_attr] = str(int(max_registers))
    attrs = " ".join(f'"{k}"="{v}"' for k, v in kattrs.items())
    layout = [f'target datalayout = "{t.datalayout}"'] if t.datalayout else []
    parts = [f"; kaio kernel '{kernel.name}' for {t.name}", *layout, f'target triple = "{t.triple}"',
             "", t.prelude, *fe.globals, "", fn, "", *sorted(fe.declares.values()), "",
             f"attributes #0 = {{ nounwind {attrs} }}", ""]
    return "\n".join(parts)
