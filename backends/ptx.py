"""IR -> PTX text for NVIDIA sm_80 / sm_86 / sm_89 / sm_90.

Entry point: :func:`emit_ptx`. The kernel must have been through
``kaio.passes.target_pipeline(kernel, 32)`` (warp and block reductions lowered).

The renderer is a table from IR opcode to a handler (fragment ops in :mod:`.ptx_fragments`, control
flow in :mod:`.ptx_control`, both mixins of the renderer); scalar arithmetic lives in
:mod:`.ptx_ops`, memory and atomics in :mod:`.ptx_mem`, the math instructions in
:mod:`.ptx_math` (every other math function is kaio.mathlib's IR), and the register / label /
``.loc`` machinery in :mod:`.ptx_emit`. Structured control flow becomes labels and predicated
branches; region results and loop-carried values are registers written at ``yield``.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir.ops import handler_table
from ..ir.types import BufType
from ..passes.expand_math import library_code
from ..passes.limits import (
    DYN_SHARED_MARK,
    MAX_STATIC_SHARED,
    SHARED_LIMIT,
    check_static_shared,
    shared_layout,
)
from ..version import __version__
from . import (
    half_pairs,
    ptx_math,
    ptx_mem,
    ptx_ops,
    ptx_packed,
    ptx_wgmma,
    ptx_workarounds,
    vector_access,
)
from .abi import SUPPORTED_ARCHS, KernelABI, kernel_abi, ptx_version_for
from .ptx_control import ControlOps
from .ptx_emit import CLASS_DECL, Emitter, reg_class
from .ptx_fragments import FragmentOps

__all__ = ["emit_ptx", "KernelABI", "SUPPORTED"]

SUPPORTED = SUPPORTED_ARCHS   # sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a
FULL_MASK = "0xffffffff"
#: special registers per axis
_SPECIAL = {"thread_idx": "%tid", "block_idx": "%ctaid", "block_dim": "%ntid", "grid_dim": "%nctaid"}
#: shuffle mode -> (PTX mode, c operand: lane clamp 0x1f, or 0 for 'up' which clamps at lane 0)
_SHFL = {"idx": ("idx", "0x1f"), "down": ("down", "0x1f"), "xor": ("bfly", "0x1f"), "up": ("up", "0")}
#: param declaration type of a scalar dtype (bool travels as a byte)
_PARAM_T = {"bool": "u8", "i8": "s8", "u8": "u8", "i16": "s16", "u16": "u16", "f16": "b16",
            "bf16": "b16"}


def emit_ptx(kernel, arch: str = "sm_90", *, fast_math: bool = False,
             ptx_version: str | None = None, max_registers: int | None = None,
             version_aligned: bool = False) -> tuple[str, KernelABI]:
    """PTX module text for ``kernel`` and its launch ABI (see :mod:`kaio.backends.abi`).

    ``fast_math`` turns float division into ``div.full.f32`` and every math function that has a
    hardware approximation into it (as ``fast=True`` does per call). ``ptx_version`` overrides
    the ``.version`` line (default: :func:`~kaio.backends.abi.ptx_version_for`).
    ``max_registers`` caps registers per thread (``.maxnreg``). ``version_aligned``: a body
    with vector groups is emitted twice, one copy per alignment (:meth:`_Renderer._versioned`;
    the compile path, kaio.backends.targets, turns it on unless the kernel switches the
    ``version_aligned`` pass off).
    """
    if arch not in SUPPORTED:
        raise ValueError(f"kernel '{kernel.name}': PTX arch {arch!r} is not supported; "
                         f"choose one of {', '.join(SUPPORTED)}")
    abi = kernel_abi(kernel)
    r = _Renderer(kernel, abi, arch, fast_math, version_aligned)
    body = ptx_workarounds.apply("\n".join(r.run()), arch).split("\n")
    version = ptx_version or ptx_version_for(arch)
    if r.wgmma.active:      # wgmma and .target sm_90a need PTX ISA 8.0
        version = max(version, ptx_version_for("sm_90a"), key=lambda v: tuple(map(int, v.split("."))))
    head = [f"// kaio {__version__}: kernel '{kernel.name}' for {arch}",
            f".version {version}", f".target {'sm_90a' if r.wgmma.active else arch}",
            ".address_size 64", ""]
    head += [f'.file {i} "{_quote(f)}"' for f, i in r.em.files.items()]
    if r.shared_in_dyn:   # read by the CUDA loader: added to every launch's shared bytes
        head.append(f"// {DYN_SHARED_MARK} {r.shared_in_dyn}")
    head += r.em.module_decls
    params = ",\n".join(f"\t.param .{_abi_param_type(p)} {p.name}" for p in abi.params)
    out = head + ["", f".visible .entry {abi.entry}(", params, ")"]
    out += [f".maxnreg {int(max_registers)}"] if max_registers else []
    declared = kernel.attrs.get("block")     # the only block a launch may use: ptxas may fold
    out += [".reqntid {}, {}, {}".format(*declared)] if declared else []   # %ntid, size regs
    out += ["{"]
    out += [f"\t.reg {CLASS_DECL[c]} %{c}<{n}>;" for c, n in r.em.counts.items() if n]
    out += ["\t" + d for d in r.em.decls]
    out += [""] + body + ["\tret;", "}", ""]
    return "\n".join(out), abi


def _is_zero(v) -> bool:
    op = v.owner
    return op is not None and getattr(op, "opcode", None) == "const" and op.attrs["value"] == 0


def _quote(path: str) -> str:
    return path.replace("\\", "\\\\").replace('"', '\\"')


def _abi_param_type(p) -> str:
    if p.kind == "pointer":
        return "u64"
    if p.kind == "extent":
        return "u32"
    return _PARAM_T.get(p.dtype, p.dtype.replace("i", "s") if p.dtype[0] == "i" else p.dtype)


class _Renderer(FragmentOps, ControlOps):
    def __init__(self, kernel, abi, arch, fast_math, version_aligned=False):
        self.k = kernel
        self.version_aligned = version_aligned
        self.abi = abi
        self.em = Emitter(arch, fast_math)
        self.bufs: dict[int, ptx_mem.BufInfo] = {}
        self.n_arrays = 0
        self.vec: dict[int, vector_access.Group] = vector_access.plan_kernel(kernel)
        # packed f16x2/bf16x2 instructions for pairs of ops on neighbouring lanes (every
        # supported arch is sm_80+, which has them all but add/sub/mul.bf16x2)
        self.pairs, self.load_words = half_pairs.plan_kernel(kernel, self.vec)
        self.words: dict[tuple, str] = {}   # (lo value id, hi value id) -> packed b32 register
        self.aligned: dict[int, str] = {}   # buffer id -> predicate "pointer is 16-byte aligned"
        # which copy of a body versioned on alignment is being emitted (:meth:`_versioned`):
        # None (not versioned: each group both ways under its predicate), "vector" or "scalar"
        self.version: str | None = None
        self.array_names: dict[int, str] = {}   # shared/local array op id -> its declared name
        # (buffer id, leading index ids) -> row address reg; ("element", buffer id, leading
        # ids, v id) -> element v's address, for the v + c elements of _element_addr
        self.rows: dict[tuple, str] = {}
        # copies complete at every barrier, unless the kernel waits for them itself
        ops = [o.opcode for o in kernel.walk()]
        self.async_copies = "mma_copy" in ops and "mma_copy_wait" not in ops
        # shared arrays beyond the 48 KiB of static .shared live in dynamic shared memory
        self.shared_offsets, total = shared_layout(kernel)
        self.shared_in_dyn = total if total > MAX_STATIC_SHARED else 0
        self.wgmma = ptx_wgmma.Plan(kernel, arch)    # group mmas issued as Hopper's wgmma
        self.swizzled_in_dyn = any(o.opcode == "shared_array" and o.attrs.get("swizzle")
                                   for o in kernel.walk())
        if total > SHARED_LIMIT[arch]:
            check_static_shared(kernel, SHARED_LIMIT[arch], arch)

    # --- driver ------------------------------------------------------------------------
    def run(self) -> list[str]:
        self.em.set_loc(self.k.loc)
        self._prologue()
        if self._versions():
            self._versioned()
        else:
            self.block(self.k.body)
        self.wgmma.wait(self.em)
        return self.em.lines

    def _versions(self) -> bool:
        """Whether the body is emitted twice, versioned on alignment (:meth:`_versioned`): when
        it has vector groups, and no tensor-core ops (large bodies, whose own copies are planned
        16-byte aligned: doubling them would cost compile time and instruction cache)."""
        return self.version_aligned and bool(self.aligned) and \
            not any(o.opcode.startswith("mma") for o in self.k.walk())

    def _versioned(self) -> None:
        """The body twice: once with every vector group as its 16-byte access alone, once with
        the scalar accesses alone, and a branch on "every grouped buffer is aligned" (uniform
        over the launch) between them. Each group emitted both ways under its predicate left
        the predicated-off half in the instruction stream, where it still issues, plus a select
        per element to merge the halves' registers (ptxas if-converts per-group branches back
        into that form): the resident rmsnorm f16's aligned path is 552 SASS instructions
        instead of 696."""
        em = self.em
        preds = list(dict.fromkeys(self.aligned.values()))
        every = preds[0]
        for q in preds[1:]:
            both = em.tmp("p")
            em.ins(f"and.pred {both}, {every}, {q}")
            every = both
        l_scalar, l_end = em.label("unaligned"), em.label("end")
        em.bra(l_scalar, every, negate=True)
        linear = self.linear      # registers computed lazily in one copy are not in the other
        self.version = "vector"
        self.block(self.k.body)
        em.bra(l_end)
        self.linear = linear
        em.place(l_scalar)
        self.version = "scalar"
        self.block(self.k.body)
        em.place(l_end)
        self.version = None

    def _prologue(self):
        em = self.em
        self.mask = FULL_MASK
        self.linear = None
        ops = {o.opcode for o in self.k.walk()}
        if ops & {"shuffle", "vote", "ballot"}:
            self.mask = self._warp_mask()
        if "mma_copy" in ops:           # every copy_tile reads it: once, dominating them all
            self._linear_thread()
        for idx, value in enumerate(self.k.args):
            flat = self.abi.for_param(idx)
            t = value.type
            if isinstance(t, BufType):
                ptr, raw = em.tmp("rd"), em.tmp("rd")
                em.ins(f"ld.param.u64 {raw}, [{flat[0].name}]")
                em.ins(f"cvta.to.global.u64 {ptr}, {raw}")
                exts, ext64 = [], []
                for p in flat[1:]:
                    e = em.tmp("r")
                    em.ins(f"ld.param.u32 {e}, [{p.name}]")
                    exts.append(e)
                for e in exts[1:]:
                    w = em.tmp("rd")
                    em.ins(f"cvt.s64.s32 {w}, {e}")
                    ext64.append(w)
                self.bufs[value.id] = ptx_mem.BufInfo("global", ptr, exts, ext64, nc=t.intent == "in")
                em.define(value, ptr)
                if any(g.buf is value for g in self.vec.values()):
                    self.aligned[value.id] = self._aligned(value, raw, exts)
            elif t.is_bool:
                w = em.tmp("r")
                em.ins(f"ld.param.u8 {w}, [{flat[0].name}]")
                em.ins(f"setp.ne.u32 {em.define(value)}, {w}, 0")
            else:
                em.ins(f"ld.param.{_abi_param_type(flat[0])} {em.define(value)}, [{flat[0].name}]")

    def _aligned(self, value, raw: str, exts: list) -> str:
        """The predicate under which ``value``'s vector groups are 16-byte aligned
        (:mod:`kaio.backends.vector_access`): the pointer is, and for an N-d buffer its last
        extent is a multiple of the group length. Computed once, at kernel entry."""
        em = self.em
        low, p = em.tmp("rd"), em.tmp("p")
        em.ins(f"and.b64 {low}, {raw}, 15")
        em.ins(f"setp.eq.u64 {p}, {low}, 0")
        if vector_access.needs_extent_check(value):
            n = vector_access.group_length(value.type.dtype)
            rem, both = em.tmp("r"), em.tmp("p")
            em.ins(f"and.b32 {rem}, {exts[-1]}, {n - 1}")
            em.ins(f"setp.eq.and.u32 {both}, {rem}, 0, {p}")
            p = both
        return p

    def _linear_thread(self) -> tuple[str, str]:
        """Registers (this thread's linear id in its block, the block's thread count), computed
        once in the prologue (a declared block makes them a few instructions on constants)."""
        if self.linear is None:
            self.linear = self._linear_thread_now()
        return self.linear

    def _linear_thread_now(self) -> tuple[str, str]:
        em = self.em
        declared = self.k.attrs.get("block")
        if declared:      # the launch refuses any other block (backends/launch_checks.py)
            x, y, z = declared
            lin, tot, ty, tz = (em.tmp("r") for _ in range(4))
            em.ins(f"mov.u32 {lin}, %tid.x")
            if y * z > 1:
                em.ins(f"mov.u32 {ty}, %tid.y")
                em.ins(f"mov.u32 {tz}, %tid.z")
                em.ins(f"mad.lo.u32 {ty}, {tz}, {y}, {ty}")
                em.ins(f"mad.lo.u32 {lin}, {ty}, {x}, {lin}")
            em.ins(f"mov.u32 {tot}, {x * y * z}")
            return lin, tot
        r = {n: em.tmp("r") for n in ("tx", "ty", "tz", "nx", "ny", "nz", "lin", "tot")}
        for ax in "xyz":
            em.ins(f"mov.u32 {r['t' + ax]}, %tid.{ax}")
            em.ins(f"mov.u32 {r['n' + ax]}, %ntid.{ax}")
        em.ins(f"mad.lo.u32 {r['lin']}, {r['tz']}, {r['ny']}, {r['ty']}")
        em.ins(f"mad.lo.u32 {r['lin']}, {r['lin']}, {r['nx']}, {r['tx']}")
        em.ins(f"mul.lo.u32 {r['tot']}, {r['nx']}, {r['ny']}")
        em.ins(f"mul.lo.u32 {r['tot']}, {r['tot']}, {r['nz']}")
        return r["lin"], r["tot"]

    def _warp_mask(self) -> str:
        """Member mask of this thread's warp: all 32 lanes, or the lanes that exist in the last,
        partial warp of a block whose size is not a multiple of 32 (naming absent lanes in a
        ``.sync`` warp op is not allowed)."""
        em = self.em
        r = {n: em.tmp("r") for n in ("n", "m", "first")}
        lin, tot = self._linear_thread()
        em.ins(f"and.b32 {r['first']}, {lin}, 0xFFFFFFE0")      # first thread of the warp
        em.ins(f"sub.u32 {r['n']}, {tot}, {r['first']}")
        em.ins(f"min.u32 {r['n']}, {r['n']}, 32")
        em.ins(f"shl.b32 {r['m']}, 1, {r['n']}")                  # 1 << 32 clamps to 0 ...
        em.ins(f"sub.u32 {r['m']}, {r['m']}, 1")                  # ... so a full warp is 0xffffffff
        return r["m"]

    def block(self, block) -> None:
        rows = dict(self.rows)      # row addresses computed in this block live until its end
        words = dict(self.words)    # so do broadcast words
        for op in block.ops:
            self.op(op)
        self.rows, self.words = rows, words

    def op(self, op) -> None:
        if op.opcode in ("yield", "condition"):
            return  # handled by the parent control-flow op
        self.em.set_loc(op.loc)
        pair = self.pairs.get(id(op))
        if pair is not None:
            return self._pair(pair) if op is pair.at else None
        self.wgmma.before(self.em, op)
        handler = _HANDLERS.get(op.opcode)
        if handler is None:
            raise NotImplementedError(
                f"kernel '{self.k.name}': the PTX backend has no lowering for IR op "
                f"'{op.opcode}' (run kaio.passes.target_pipeline(kernel, 32) first)")
        handler(self, op)

    def v(self, value) -> str:
        return self.em.val(value)

    def set(self, op, reg: str) -> None:
        self.em.define(op.result, reg)

    # --- scalars -----------------------------------------------------------------------
    def op_const(self, op):
        self.set(op, self.em.const(op.attrs["value"], op.result.type))

    def op_binary(self, op):
        a, b = op.operands
        if op.opcode == "sub" and a.type.is_int and _is_zero(a):  # 0 - b: one negation, which
            return self.set(op, ptx_ops.unary(self.em, "neg", b.type, self.v(b)))  # ptx_workarounds sees
        t = a.type
        if op.attrs.get("nonneg"):   # both operands >= 0 (kaio.passes.unsigned_divide): div.u32
            t = dt.from_name("u" + t.name[1:])
        self.set(op, ptx_ops.binary(self.em, op.opcode, t, self.v(a), self.v(b)))

    def op_unary(self, op):
        a = op.operands[0]
        self.set(op, ptx_ops.unary(self.em, op.opcode, a.type, self.v(a)))

    def _pair(self, pair: half_pairs.Pair) -> None:
        """One packed instruction for both ops of ``pair`` (kaio.backends.half_pairs); the
        scalar registers of both results are its halves."""
        em, lo, hi = self.em, pair.lo, pair.hi
        t = lo.result.type
        if lo.opcode == "cast":
            w = ptx_packed.narrow(em, t, self.v(lo.operands[0]), self.v(hi.operands[0]))
        else:
            w = ptx_packed.arith(em, lo.opcode, t, [self._word(x, y)
                                                    for x, y in zip(lo.operands, hi.operands)])
        self.words[(lo.result.id, hi.result.id)] = w
        ptx_packed.unpack(em, w, em.define(lo.result), em.define(hi.result))

    def _word(self, x, y) -> str:
        """The packed register of the values ``x`` (low) and ``y`` (high): a pair's or load
        word's, or one value in both halves (packed once per block)."""
        key = (x.id, y.id)
        if key not in self.words:       # the same value or constant in both halves
            self.words[key] = ptx_packed.pack(self.em, self.v(x), self.v(y))
        return self.words[key]

    def op_fma(self, op):
        a, b, c = op.operands
        self.set(op, ptx_ops.fma(self.em, a.type, self.v(a), self.v(b), self.v(c)))

    def op_cmp(self, op):
        a, b = op.operands
        self.set(op, ptx_ops.cmp(self.em, op.attrs["pred"], a.type, self.v(a), self.v(b)))

    def op_select(self, op):
        c, a, b = op.operands
        self.set(op, ptx_ops.select(self.em, a.type, self.v(c), self.v(a), self.v(b)))

    def op_cast(self, op):
        a = op.operands[0]
        self.set(op, ptx_ops.cast(self.em, a.type, op.result.type, self.v(a)))

    def op_bitcast(self, op):
        a = op.operands[0]
        self.set(op, ptx_ops.bitcast(self.em, a.type, op.result.type, self.v(a)))

    def op_math(self, op):
        fast = bool(op.attrs.get("fast")) or self.em.fast_math
        regs = [self.v(a) for a in op.operands]
        r = ptx_math.emit(self.em, op.attrs["fn"], op.operands[0].type, regs, fast,
                          bool(op.attrs.get("ftz")))
        if r is None:   # no instruction for it: kaio.mathlib's code, emitted in place
            with library_code(op) as (code, value):
                self.block(code)
                r = self.v(value)
        self.set(op, r)

    def op_special(self, op):
        em, d = self.em, self.em.reg(dt.INDEX)
        if op.opcode == "warp_size":
            em.ins(f"mov.u32 {d}, 32")
        elif op.opcode == "lane_id":
            em.ins(f"mov.u32 {d}, %laneid")
        else:
            em.ins(f"mov.u32 {d}, {_SPECIAL[op.opcode]}.{'xyz'[op.attrs.get('axis', 0)]}")
        self.set(op, d)

    # --- memory ------------------------------------------------------------------------
    def _buf(self, value) -> ptx_mem.BufInfo:
        return self.bufs[value.id]

    def _addr(self, buf_value, idx_values) -> str:
        info = self._buf(buf_value)
        key = (buf_value.id, tuple(v.id for v in idx_values[:-1]))
        row = self.rows.get(key)
        if row is None and len(idx_values) >= 2 and info.space == "global":
            # computed once per row and block: straight-line code (static_range bodies) reading
            # one row many times shares it, like a loop body does through _hoist_rows
            row = self.rows[key] = ptx_mem.row_base(self.em, info, buf_value.type.dtype,
                                                    [self.v(v) for v in idx_values[:-1]])
        return ptx_mem.address(self.em, info, buf_value.type.dtype,
                               [self.v(i) for i in idx_values], row)

    def _hoist_rows(self, body) -> dict:
        """Row addresses (:func:`ptx_mem.row_base`) of the N-d global accesses in a loop body or
        a branch whose leading indices are defined before it, computed here, before the loop head
        or the branch (they stay valid to the end of the enclosing block: :meth:`block` scopes the
        table). ptxas does not hoist them out of a branch: a row read in chunks, each chunk in
        its own ``if c + V <= n`` (the resident row kernels), recomputed the 64-bit row address,
        ~10 instructions, per chunk."""
        for o in body.walk():
            if o.opcode not in ("load", "store"):
                continue
            buf = o.operands[0]
            info = self.bufs.get(buf.id)
            lead = o.operands[1:buf.type.ndim]
            if info is None or info.space != "global" or not lead:
                continue
            key = (buf.id, tuple(v.id for v in lead))
            if key not in self.rows and all(v.id in self.em.vals for v in lead):
                self.rows[key] = ptx_mem.row_base(self.em, info, buf.type.dtype,
                                                  [self.v(v) for v in lead])

    def op_shape(self, op):
        buf, axis = op.operands[0], op.attrs["axis"]
        info = self._buf(buf)
        if info.dyn:
            em, d = self.em, self.em.reg(dt.INDEX)
            em.ins(f"mov.u32 {d}, %dynamic_smem_size")
            if self.shared_in_dyn:      # the launch's part follows the kernel's shared arrays
                em.ins(f"sub.u32 {d}, {d}, {self.shared_in_dyn}")
            em.ins(f"div.u32 {d}, {d}, {buf.type.dtype.itemsize}")
            self.set(op, d)
        elif isinstance(info.extents[axis], int):
            self.set(op, self.em.const(info.extents[axis], dt.INDEX))
        else:
            self.set(op, info.extents[axis])

    def op_load(self, op):
        if id(op) in self.vec:
            return self._vector(self.vec[id(op)], op)
        buf, *idx = op.operands
        addr = self._element_addr(buf, idx)
        self.set(op, ptx_mem.load(self.em, self._buf(buf), buf.type.dtype, addr))

    def op_store(self, op):
        if id(op) in self.vec:
            return self._vector(self.vec[id(op)], op)
        buf, *idx, val = op.operands
        addr = self._element_addr(buf, idx)
        ptx_mem.store(self.em, self._buf(buf), buf.type.dtype, addr, self.v(val))

    def _element_addr(self, buf_value, idx_values) -> str:
        """The address operand of one global element: where the last index is ``v + c`` (c a
        constant) the address of ``v`` (once per block, like a row) plus ``c`` elements as an
        immediate, so ``x[n]``, ``x[n + 1]`` share one 64-bit address as nvcc's do. (The i32
        sum and the 64-bit one differ only where ``v + c`` wraps, and then both lie outside the
        buffer: an in-bounds access is the same element. ptxas cannot do this itself: widening
        ``n + 1`` is not widening ``n``, plus one, in PTX's wrapping arithmetic.)"""
        info = self._buf(buf_value)
        base, off = _constant_offset(idx_values[-1]) if info.space == "global" else (None, 0)
        if not off:
            return self._addr(buf_value, idx_values)
        key = ("element", buf_value.id, tuple(v.id for v in idx_values[:-1]), base.id)
        addr = self.rows.get(key)
        if addr is None:
            addr = self.rows[key] = self._addr(buf_value, [*idx_values[:-1], base])
        return f"{addr}+{off * buf_value.type.dtype.itemsize}"     # PTX takes [r+-8]

    def _vector(self, g: vector_access.Group, op):
        """A 16-byte v4 access at the group's anchor op (the other members emit nothing), or a
        narrow group's 8-byte v2 / 4-byte scalar b32 one. 4-byte elements are the four words;
        2- and 1-byte ones are split out of (packed into) b32 words: f16/bf16 ``%h`` halves by
        ``mov.b32``, 8- and 16-bit integers (canonical in ``%r``) by ``prmt``. Element
        ``per*j + i`` is word j's i-th lowest part (little-endian)."""
        if op is not g.at:
            return
        em, info, t = self.em, self._buf(g.buf), g.buf.type.dtype
        addr = self._addr(g.buf, g.index)
        p = self.aligned[g.buf.id]
        # the vector access under @p and the scalar ones under @!p, or one of them alone in a
        # copy of a body versioned on alignment (:meth:`_versioned`)
        vec_on, scalar_on = self.version != "scalar", self.version != "vector"
        vp = "" if self.version == "vector" else f"@{p} "
        sp = "" if self.version == "scalar" else f"@!{p} "
        space = "global.nc" if info.nc else "global"
        mt = ptx_mem.mem_type(t)
        per = 4 // t.itemsize                          # elements per 32-bit word
        vt = "b32" if per > 1 else mt
        nw = len(g.ops) * t.itemsize // 4              # words: 4, or 2 / 1 for a narrow group
        vec = {4: ".v4", 2: ".v2", 1: ""}[nw]

        def regs_of(names):                            # a vector's braces, a word's register
            return f"{{{', '.join(names)}}}" if nw > 1 else names[0]

        def at(k):      # the address of member k, with the chunk's offset folded in
            off = (g.offset + k) * t.itemsize
            return f"[{addr}+{off}]" if off else f"[{addr}]"
        if g.kind == "load":
            regs = [em.define(o.result) for o in g.ops]
            words = [em.tmp("r") for _ in range(nw)] if per > 1 else regs
            if vec_on:
                em.ins(f"{vp}ld.{space}{vec}.{vt} {regs_of(words)}, {at(0)}")
                for j, w in enumerate(words if per > 1 else ()):
                    self._split_word(vp, t, w, regs[per * j:per * j + per])
            for k, r in enumerate(regs if scalar_on else ()):
                em.ins(f"{sp}ld.{space}.{mt} {r}, {at(k)}")
            for j, w in enumerate(words if per == 2 else ()):   # words read by packed ops
                key = (g.ops[2 * j].result.id, g.ops[2 * j + 1].result.id)
                if key in self.load_words:      # (the fallback path packs them too)
                    if scalar_on:
                        em.ins(f"{sp}mov.b32 {w}, {{{regs[2 * j]}, {regs[2 * j + 1]}}}")
                    self.words[key] = w
        else:
            regs = [self.v(o.operands[-1]) for o in g.ops]
            vals = [o.operands[-1] for o in g.ops]
            words = [self.words.get((vals[2 * j].id, vals[2 * j + 1].id)) if per == 2 else None
                     for j in range(nw)]
            if vec_on:
                words = [w or self._pack_word(vp, t, regs[per * j:per * j + per])
                         for j, w in enumerate(words)] if per > 1 else regs
                em.ins(f"{vp}st.global{vec}.{vt} {at(0)}, {regs_of(words)}")
            for k, r in enumerate(regs if scalar_on else ()):
                em.ins(f"{sp}st.global.{mt} {at(k)}, {r}")

    def _split_word(self, pre: str, t, w: str, parts: list) -> None:
        """Under the guard ``pre`` (``"@p "`` or ``""``): the 2 or 4 elements of b32 word ``w``
        into ``parts`` (lowest first)."""
        em = self.em
        if reg_class(t) == "h":
            em.ins(f"{pre}mov.b32 {{{parts[0]}, {parts[1]}}}, {w}")
            return
        # one prmt each (ptxas makes bfe a shift and a sign extension): the part's bytes, then its
        # top byte's sign (selector nibble 8 | byte) or zeros (byte 4: the zero operand's)
        size = t.itemsize
        for i, r in enumerate(parts):
            low = [size * i + b for b in range(size)]
            fill = 8 | low[-1] if t.is_signed else 4
            sel = sum(x << 4 * k for k, x in enumerate(low + [fill] * (4 - size)))
            em.ins(f"{pre}prmt.b32 {r}, {w}, 0, {sel:#06x}")

    def _pack_word(self, pre: str, t, parts: list) -> str:
        """Under the guard ``pre``: a b32 word holding the 2 or 4 elements ``parts`` (lowest
        first)."""
        em = self.em
        w = em.tmp("r")
        if reg_class(t) == "h":
            em.ins(f"{pre}mov.b32 {w}, {{{parts[0]}, {parts[1]}}}")
        elif len(parts) == 2:           # bytes 0-1 of lo, then bytes 0-1 of hi
            em.ins(f"{pre}prmt.b32 {w}, {parts[0]}, {parts[1]}, 0x5410")
        else:                           # byte 0 of each: pairs, then the pairs' low halves
            lo, hi = em.tmp("r"), em.tmp("r")
            em.ins(f"{pre}prmt.b32 {lo}, {parts[0]}, {parts[1]}, 0x0040")
            em.ins(f"{pre}prmt.b32 {hi}, {parts[2]}, {parts[3]}, 0x0040")
            em.ins(f"{pre}prmt.b32 {w}, {lo}, {hi}, 0x5410")
        return w

    def op_atomic(self, op):
        kind = op.attrs["op"]
        buf = op.operands[0]
        nvals = 2 if kind == "cas" else 1
        idx, vals = op.operands[1:-nvals], op.operands[-nvals:]
        addr = self._addr(buf, idx)
        self.set(op, ptx_mem.atomic(self.em, kind, self._buf(buf), buf.type.dtype, addr,
                                    [self.v(v) for v in vals]))

    def op_array(self, op):
        em, t = self.em, op.result.type
        declared = self.array_names.get(id(op))   # the second copy of a versioned body
        if declared is None:
            self.n_arrays += 1
        name = declared or f"{'dyn_smem' if op.opcode == 'dyn_shared' else 'arr'}{self.n_arrays}"
        self.array_names[id(op)] = name
        space = t.space
        offset = 0
        swizzle = bool(op.attrs.get("swizzle"))
        in_dyn = op.opcode == "dyn_shared" or (space == "shared" and self.shared_in_dyn)
        if in_dyn:
            decl = ".extern .shared .align 16 .b8 dyn_smem[];"
            if decl not in em.module_decls:
                em.module_decls.append(decl)
            name = "dyn_smem"
            # large kernels: the shared arrays first (their planned offsets), then the launch's
            offset = self.shared_offsets[op.result.id] if op.opcode == "shared_array" \
                else self.shared_in_dyn
        elif declared is None:
            nbytes = max(1, t.dtype.itemsize)
            for s in t.static_shape:
                nbytes *= s
            em.decls.append(f".{space} .align {1024 if swizzle else 16} .b8 {name}[{max(nbytes, 1)}];")
        base = em.tmp("r")
        em.ins(f"mov.u32 {base}, {name}")
        if in_dyn and self.swizzled_in_dyn and op.opcode == "shared_array":
            em.ins(f"add.u32 {base}, {base}, 1023")        # the layout's 1024-byte grid
            em.ins(f"and.b32 {base}, {base}, -1024")
        if offset:
            em.ins(f"add.u32 {base}, {base}, {offset}")
        extents = list(t.static_shape) if t.static_shape is not None else [None]
        self.bufs[op.result.id] = ptx_mem.BufInfo(space, base, extents, [], dyn=t.static_shape is None,
                                                  swizzle=swizzle)
        self.set(op, base)

    def op_barrier(self, op):
        if self.async_copies:     # kaio.mma.copy_tile is visible after the next barrier
            self.em.ins("cp.async.wait_all")
        self.wgmma.before_barrier(self.em, op)
        self.em.ins("bar.sync 0")

    # --- warp ----------------------------------------------------------------------------
    def op_shuffle(self, op):
        em = self.em
        val, lane = op.operands
        t = val.type
        mode, clamp = _SHFL[op.attrs["mode"]]

        def shfl32(r):
            d = em.tmp("r")
            em.ins(f"shfl.sync.{mode}.b32 {d}, {r}, {self.v(lane)}, {clamp}, {self.mask}")
            return d

        cls = reg_class(t)
        far = None
        c = lane.owner.attrs.get("value") if getattr(lane.owner, "opcode", None) == "const" else None
        if mode in ("up", "down") and not (c is not None and 0 <= c < 32):
            # PTX uses only the delta's low 5 bits; the IR reads the lane's own value when
            # lane -/+ delta leaves the warp, so deltas >= 32 must not wrap
            far = em.tmp("p")
            em.ins(f"setp.gt.u32 {far}, {self.v(lane)}, 31")
        if cls in ("r", "f"):
            d = em.reg(t)
            em.ins(f"shfl.sync.{mode}.b32 {d}, {self.v(val)}, {self.v(lane)}, {clamp}, {self.mask}")
        elif cls in ("rd", "fd"):
            lo, hi, d = em.tmp("r"), em.tmp("r"), em.reg(t)
            em.ins(f"mov.b64 {{{lo}, {hi}}}, {self.v(val)}")
            em.ins(f"mov.b64 {d}, {{{shfl32(lo)}, {shfl32(hi)}}}")
        elif cls == "h":
            w, d = em.tmp("r"), em.reg(t)
            em.ins(f"cvt.u32.u16 {w}, {self.v(val)}")
            em.ins(f"cvt.u16.u32 {d}, {shfl32(w)}")
        else:  # bool
            d = em.reg(t)
            em.ins(f"setp.ne.u32 {d}, {shfl32(em.pred_to_u32(self.v(val)))}, 0")
        if far is not None:
            own = ptx_ops.select(em, t, far, self.v(val), d)
            d = own
        self.set(op, d)

    def op_vote(self, op):
        d = self.em.tmp("p")
        self.em.ins(f"vote.sync.{op.attrs['mode']}.pred {d}, {self.v(op.operands[0])}, {self.mask}")
        self.set(op, d)

    def op_ballot(self, op):
        w, d = self.em.tmp("r"), self.em.tmp("rd")
        self.em.ins(f"vote.sync.ballot.b32 {w}, {self.v(op.operands[0])}, {self.mask}")
        self.em.ins(f"cvt.u64.u32 {d}, {w}")
        self.set(op, d)


_HANDLERS = handler_table(_Renderer, "op_", {"shared_array": "array", "dyn_shared": "array",
                                             "local_array": "array"})


def _constant_offset(v, limit: int = 1 << 20):
    """(w, c) where IR value ``v`` is ``w + c`` or ``w - c`` (c a nonzero integer constant
    under ``limit`` in size), else (None, 0)."""
    op = v.owner
    opc = getattr(op, "opcode", None)
    if opc not in ("add", "sub"):
        return None, 0
    pairs = [op.operands] if opc == "sub" else [op.operands, op.operands[::-1]]
    for w, k in pairs:
        kop = k.owner
        if getattr(kop, "opcode", None) == "const" and k.type.is_int:
            c = int(kop.attrs["value"]) * (-1 if opc == "sub" else 1)
            if 0 < abs(c) < limit:
                return w, c
    return None, 0
