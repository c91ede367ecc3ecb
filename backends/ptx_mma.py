"""kaio.mma fragments -> PTX ``mma.sync.aligned.m16n8k16`` (sm_80 and later).

A fragment value is several registers (the renderer's register string is their comma-joined
list, :data:`kaio.backends.ptx_emit.FRAG_REGS`): A is four ``.b32`` registers of two f16/bf16
each, B two, the f32 accumulator four ``.f32``. Which matrix element each lane's element holds
is the PTX ISA's fragment layout for ``mma.m16n8k16`` with f16/bf16 multiplicands, written
below in terms of ``g = laneid >> 2`` and ``t = laneid % 4``:

- A (16 x 16, row-major ``.row``): element i (0..7) at row ``g + 8 * (i // 2 % 2)``,
  column ``2t + i % 2 + 8 * (i // 4)``;
- B (16 x 8, ``.col``): element i (0..3) at row ``2t + i % 2 + 8 * (i // 2)``, column ``g``;
- C/D (16 x 8, f32): element i (0..3) at row ``g + 8 * (i // 2)``, column ``2t + i % 2``.

Two consecutive elements share one ``.b32`` register, the lower index in the low half.

Loads and stores compute every lane's own elements (scalar 16-bit loads packed by ``mov.b32``);
``ldmatrix`` and vectorised accesses are a later optimisation. Stores round the f32
accumulator to the buffer's dtype (``cvt.rn``).
"""
from __future__ import annotations

from . import ptx_mem

#: per role, per element: ((row symbol, row offset), (col symbol, col offset)); the symbols are
#: 'g' (laneid >> 2) and 't2' (2 * (laneid % 4))
_LAYOUT = {
    "a": [(("g", 8 * (i // 2 % 2)), ("t2", i % 2 + 8 * (i // 4))) for i in range(8)],
    "b": [(("t2", i % 2 + 8 * (i // 2)), ("g", 0)) for i in range(4)],
    "acc": [(("g", 8 * (i // 2)), ("t2", i % 2)) for i in range(4)],
}
_INSTR = "mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32"


def _lane_syms(em) -> dict:
    lane, g, t2 = em.tmp("r"), em.tmp("r"), em.tmp("r")
    em.ins(f"mov.u32 {lane}, %laneid")
    em.ins(f"shr.u32 {g}, {lane}, 2")
    em.ins(f"and.b32 {t2}, {lane}, 3")
    em.ins(f"shl.b32 {t2}, {t2}, 1")
    return {"g": g, "t2": t2}


def _element_addrs(em, info, op, regs, role, trans) -> list[str]:
    """The address of each of this lane's fragment elements, in element order. ``regs``: the
    tile's index registers (row0, col0, and ld for a 1-d buffer)."""
    buf_t = op.operands[0].type
    row0, col0 = regs[0], regs[1]
    syms = _lane_syms(em)
    base: dict = {}

    def at(origin, sym, off):   # origin + sym + off, each distinct sum computed once
        key = (origin, sym, off)
        if key not in base:
            r = em.tmp("r")
            em.ins(f"add.s32 {r}, {origin}, {syms[sym]}")
            if off:
                em.ins(f"add.s32 {r}, {r}, {off}")
            base[key] = r
        return base[key]

    out = []
    for (rs, ro), (cs, co) in _LAYOUT[role]:
        if trans:    # the buffer holds the tile transposed: matrix (r, c) is memory (c, r)
            (rs, ro), (cs, co) = (cs, co), (rs, ro)
        r, c = at(row0, rs, ro), at(col0, cs, co)
        if buf_t.ndim == 1:
            lin = em.tmp("r")
            em.ins(f"mad.lo.s32 {lin}, {r}, {regs[2]}, {c}")
            idx = [lin]
        else:
            idx = [r, c]
        out.append(ptx_mem.address(em, info, buf_t.dtype, idx))
    return out


def load(em, info, op, regs) -> str:
    """``mma_load``: the fragment's register string."""
    t = op.results[0].type
    addrs = _element_addrs(em, info, op, regs, t.role, bool(op.attrs.get("trans")))
    vals = [ptx_mem.load(em, info, t.dtype, a) for a in addrs]
    if t.role == "acc":
        return ",".join(vals)
    packed = []
    for lo, hi in zip(vals[0::2], vals[1::2]):
        w = em.tmp("r")
        em.ins(f"mov.b32 {w}, {{{lo}, {hi}}}")
        packed.append(w)
    return ",".join(packed)


def fill(em, t, value: str) -> str:
    regs = em.reg(t)
    for r in regs.split(","):
        em.ins(f"mov.f32 {r}, {value}")
    return regs


def mma(em, t_in, a: str, b: str, c: str, d: str) -> None:
    """``d = c + a @ b`` on the matrix unit (register strings of the four fragments)."""
    em.ins(f"{_INSTR.format(t=t_in.name)} {{{d}}}, {{{a}}}, {{{b}}}, {{{c}}}")


def store(em, info, op, regs, acc: str) -> None:
    buf_t = op.operands[0].type
    addrs = _element_addrs(em, info, op, regs, "acc", False)
    t = buf_t.dtype
    for a, v in zip(addrs, acc.split(",")):
        ptx_mem.store(em, info, t, a, v if t.name == "f32" else em.from_f32(v, t))
