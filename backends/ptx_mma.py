"""kaio.mma fragments -> PTX ``mma.sync.aligned.m16n8k16`` (``m16n8k32`` for i8, ``m16n8k8`` for
tf32; sm_80 and later).

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
i8 (``m16n8k32``) packs four per register; tf32 (``m16n8k8``, from f32 data) holds one per
register, converted on load by ``cvt.rna.tf32.f32`` (nearest, ties away from zero: exactly
kaio.semantics.tf32), so the matrix unit, which ignores the low 13 fraction bits, multiplies
the rounded values: A (16 x 8) element i (0..3) at row ``g + 8 * (i % 2)``, column
``t + 4 * (i // 2)``; B (8 x 8) element i (0..1) at row ``t + 4 * i``, column ``g``.

A warp-tile fragment (``FragType.tiles``) is a row-major grid of instruction tiles, their
registers concatenated in that order; ``mma`` issues one ``mma.sync`` per (i, j, kk), kk outer.

Loads from a 2-d shared array whose rows are whole 16-byte units and whose column origin is
provably a multiple of 8 use ``ldmatrix`` (x4: one A tile or two B tiles per instruction, the
``.trans`` form where the memory holds the other orientation); the lane supplying each 8x8
matrix's row addresses follows two patterns (see :func:`_ldmatrix_lane`). Other loads compute
every lane's own elements (scalar 16-bit loads packed by ``mov.b32``; tf32 tiles, whose 32-bit
elements ldmatrix cannot place where B needs them, always load this way, from ``ld.shared`` at
immediate offsets in a 2-d shared array). Stores round the f32
accumulator to the buffer's dtype (``cvt.rn``), skip elements outside the buffer and apply
the BLAS epilogue when asked. ``copy_tile`` is ``cp.async`` of 16-byte chunks (zero-filled
outside the source) where the source's alignment allows, checked once at run time, and
element copies otherwise; every ``bar.sync`` of a kernel that copies waits for its copies
first (``cp.async.wait_all``), which gives the documented "visible after the next barrier".
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir.types import row_frag
from . import ptx_mem
from .vector_access import _multiple_of

#: per shape, per role, per element: ((row symbol, row offset), (col symbol, col offset)); the
#: symbols are 'g' (laneid >> 2), 't' (laneid % 4), 't2' (2 * (laneid % 4)) and 't4' (4 * (laneid % 4))
_LAYOUT = {
    "m16n8k16": {
        "a": [(("g", 8 * (i // 2 % 2)), ("t2", i % 2 + 8 * (i // 4))) for i in range(8)],
        "b": [(("t2", i % 2 + 8 * (i // 2)), ("g", 0)) for i in range(4)],
        "acc": [(("g", 8 * (i // 2)), ("t2", i % 2)) for i in range(4)],
    },
    # i8: four elements per register; A's registers are (rows 0-7 | 8-15) x (cols 0-15 | 16-31)
    "m16n8k32": {
        "a": [(("g", 8 * (i // 4 % 2)), ("t4", i % 4 + 16 * (i // 8))) for i in range(16)],
        "b": [(("t4", i % 4 + 16 * (i // 4)), ("g", 0)) for i in range(8)],
        "acc": [(("g", 8 * (i // 2)), ("t2", i % 2)) for i in range(4)],
    },
    # tf32: one element per register; A's registers are (rows 0-7 | 8-15) x (cols 0-3 | 4-7)
    "m16n8k8": {
        "a": [(("g", 8 * (i % 2)), ("t", 4 * (i // 2))) for i in range(4)],
        "b": [(("t", 4 * i), ("g", 0)) for i in range(2)],
        "acc": [(("g", 8 * (i // 2)), ("t2", i % 2)) for i in range(4)],
    },
}
#: 32-bit registers per instruction tile, per role (every shape)
_REGS = {"a": 4, "b": 2, "acc": 4}
_INSTR = {"m16n8k16": "mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32",
          "m16n8k32": "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
          "m16n8k8": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"}


def _lane_syms(em) -> dict:
    lane, g, t, t2, t4 = (em.tmp("r") for _ in range(5))
    em.ins(f"mov.u32 {lane}, %laneid")
    em.ins(f"shr.u32 {g}, {lane}, 2")
    em.ins(f"and.b32 {t}, {lane}, 3")
    em.ins(f"shl.b32 {t4}, {t}, 2")
    em.ins(f"shl.b32 {t2}, {t}, 1")
    return {"g": g, "t": t, "t2": t2, "t4": t4, "lane": lane}


def _tiles(t):
    """(index, row offset, col offset) of each instruction tile of fragment type ``t``, in
    register order (row-major over the tile grid)."""
    tr, tc = t.tile_dims
    return [(i * t.tiles[1] + j, i * tr, j * tc) for i in range(t.tiles[0]) for j in range(t.tiles[1])]


def _split(regs: str, t) -> list[list[str]]:
    """A fragment's register string -> one register list per instruction tile."""
    r, n = regs.split(","), _REGS[t.role]
    return [r[k * n:(k + 1) * n] for k in range(t.ntiles)]


def _element_addrs(em, info, op, regs, ftype, trans, syms, roff=0, coff=0, inside=None,
                   rc=None) -> list[str]:
    """The address of each of this lane's elements of one instruction tile whose matrix origin
    is (row0 + roff, col0 + coff), in element order. ``regs``: the tile's index registers (row0,
    col0, and ld for a 1-d buffer). ``inside``: a list to receive, per element, a predicate
    register "the element lies inside the buffer" (stores skip the others)."""
    buf_t = op.operands[0].type
    row0, col0 = regs[0], regs[1]
    at = _coord_adder(em, syms)
    out = []
    for (rs, ro), (cs, co) in _LAYOUT[ftype.shape][ftype.role]:
        ro, co = ro + roff, co + coff
        if trans:    # the buffer holds the tile transposed: matrix (r, c) is memory (c, r)
            (rs, ro), (cs, co) = (cs, co), (rs, ro)
        r, c = at(row0, rs, ro), at(col0, cs, co)
        if rc is not None:          # the element's (row, column) in the matrix
            rc.append((r, c))
        if buf_t.ndim == 1:
            lin = em.tmp("r")
            em.ins(f"mad.lo.s32 {lin}, {r}, {regs[2]}, {c}")
            idx = [lin]
        else:
            idx = [r, c]
        if inside is not None:
            inside.append(_inside(em, info, idx))
        out.append(ptx_mem.address(em, info, buf_t.dtype, idx))
    return out


def _coord_adder(em, syms):
    """``at(origin, sym, off)``: a register holding origin + the lane symbol sym + off, each
    distinct sum emitted once per fragment op."""
    memo: dict = {}

    def at(origin, sym, off):
        key = (origin, sym, off)
        if key not in memo:
            r = em.tmp("r")
            em.ins(f"add.s32 {r}, {origin}, {syms[sym]}")
            if off:
                em.ins(f"add.s32 {r}, {r}, {off}")
            memo[key] = r
        return memo[key]
    return at


def element_coords(em, t, row0: str, col0: str) -> list[tuple[str, str]]:
    """(row, column) registers of each of this lane's elements of fragment ``t`` at matrix
    origin (row0, col0), in register order (``kaio.mma.apply``)."""
    at = _coord_adder(em, _lane_syms(em))
    return [(at(row0, rs, ro + roff), at(col0, cs, co + coff))
            for _, roff, coff in _tiles(t)
            for (rs, ro), (cs, co) in _LAYOUT[t.shape][t.role]]


def broadcast_regs(regs: list[str], narrow, wide) -> list[str]:
    """A one-tile-wide accumulator's registers laid out as ``wide``'s: element (i, j) of the
    wide matrix is the narrow one's (i, j % 8), the same register slot of the same m-tile (every
    n-tile of an accumulator places its elements alike)."""
    tn = wide.tiles[1]
    return [regs[(k // 4 // tn) * 4 + k % 4] for k in range(4 * wide.ntiles)]


def to_a(em, t, acc: str, at, col0: int) -> str:
    """``mma_to_a``: columns col0 .. of an f32 m16n8k16 accumulator as an f16/bf16 A fragment
    ``at``, in registers: A's tile (i, kk) is the accumulator's tiles (i, j0 + 2kk) and (i, j0 +
    2kk + 1) (j0 = col0 / 8), each element where
    mma.sync wants it already (A's register pairs (0, 1), (2, 3) are the first tile's rows g
    and g + 8, (4, 5), (6, 7) the second's), packed two per register by ``cvt.rn.*x2.f32``."""
    C = _split(acc, t)
    tn, j0 = t.tiles[1], col0 // 8
    out = []
    for i in range(t.tiles[0]):
        for kk in range(at.tiles[1]):
            for j in (j0 + 2 * kk, j0 + 2 * kk + 1):
                c = C[i * tn + j]
                for lo, hi in ((c[0], c[1]), (c[2], c[3])):
                    w = em.tmp("r")
                    em.ins(f"cvt.rn.{at.dtype.name}x2.f32 {w}, {hi}, {lo}")   # hi -> upper half
                    out.append(w)
    return ",".join(out)


def row_reduce(em, t, acc: str, op: str, mask: str) -> str:
    """``mma_row_reduce``: per m-tile, each lane folds its elements of rows g (registers 0, 1
    of every n-tile) and g + 8 (2, 3) in ascending column order, then the four lanes of a row
    (one ``g``, ``t`` = 0..3) exchange by ``shfl.sync.bfly`` 1 and 2; the result's n-tile holds
    the row's value in all its registers."""
    C = _split(acc, t)
    tn = t.tiles[1]
    ins = "max.f32" if op == "max" else "add.rn.f32"
    out = []
    for i in range(t.tiles[0]):
        halves = []
        for h in (0, 1):
            vals = [c for j in range(tn) for c in C[i * tn + j][2 * h:2 * h + 2]]
            v = vals[0]
            for x in vals[1:]:
                d = em.tmp("f")
                em.ins(f"{ins} {d}, {v}, {x}")
                v = d
            for k in (1, 2):
                o, d = em.tmp("f"), em.tmp("f")
                em.ins(f"shfl.sync.bfly.b32 {o}, {v}, {k}, 31, {mask}")
                em.ins(f"{ins} {d}, {v}, {o}")
                v = d
            halves.append(v)
        out += [halves[0], halves[0], halves[1], halves[1]]
    regs = em.reg(row_frag(t)).split(",")
    for d, v in zip(regs, out):
        em.ins(f"mov.f32 {d}, {v}")
    return ",".join(regs)


def _inside(em, info, idx) -> str:
    """Predicate: the element index (i32 registers) lies inside the buffer."""
    p = None
    for i, ext in zip(idx, info.extents):
        q = em.tmp("p")
        em.ins(f"setp.lt.u32 {q}, {i}, {ext}")      # unsigned: negative indices are outside
        if p is not None:
            em.ins(f"and.pred {q}, {q}, {p}")
        p = q
    return p


# --- loads -------------------------------------------------------------------------------------
def _ldmatrix_ok(op, t) -> bool:
    """ldmatrix applies: a 2-d shared array of static shape whose rows are whole 16-byte units,
    and a column origin (in the buffer's own coordinates) that is a multiple of 8."""
    buf_t = op.operands[0].type
    shape = getattr(buf_t, "static_shape", None)
    if buf_t.space != "shared" or buf_t.ndim != 2 or shape is None or t.role == "acc" or \
            t.dtype.itemsize == 4:       # tf32: ldmatrix moves 16-bit units, not B's columns
        return False
    if t.dtype.itemsize == 1 and (t.role == "a") == bool(op.attrs.get("trans")):
        return False    # i8 held the other way round: ldmatrix transposes 16-bit units only
    return (shape[1] * t.dtype.itemsize) % 16 == 0 and _multiple_of(op.operands[2], 16 // t.dtype.itemsize)


def _ldmatrix_lane(em, pattern: int, lane: str, unit: int = 8) -> tuple[str, str]:
    """(row, col) offsets of the row this lane addresses for ``ldmatrix ... .x4``.

    Pattern 1 (A untransposed; B held as k x n, loaded ``.trans``): matrices ordered (rows 0-7,
    col 0), (rows 8-15, col 0), (rows 0-7, col 8), (rows 8-15, col 8): row ``lane % 16``, col
    ``8 * (lane / 16)``. Pattern 2 (A held transposed, loaded ``.trans``; B held as n x k):
    (rows 0-7, col 0), (rows 0-7, col 8), (rows 8-15, col 0), (rows 8-15, col 8): row
    ``lane % 8 + 8 * (lane / 16)``, col ``8 * (lane / 8 % 2)``. ``unit``: the elements in a
    matrix row's 16 bytes (8; 16 for i8, whose column offsets double)."""
    r, c = em.tmp("r"), em.tmp("r")
    if pattern == 1:
        em.ins(f"and.b32 {r}, {lane}, 15")
        em.ins(f"shr.u32 {c}, {lane}, 4")
        em.ins(f"shl.b32 {c}, {c}, {unit.bit_length() - 1}")
    else:
        hi = em.tmp("r")
        em.ins(f"and.b32 {r}, {lane}, 7")
        em.ins(f"shr.u32 {hi}, {lane}, 4")
        em.ins(f"shl.b32 {hi}, {hi}, 3")
        em.ins(f"add.s32 {r}, {r}, {hi}")
        em.ins(f"and.b32 {c}, {lane}, 8")
        if unit != 8:
            em.ins(f"shl.b32 {c}, {c}, 1")
    return r, c


def _load_ldmatrix(em, info, op, regs, t, trans) -> str:
    buf_t = op.operands[0].type
    pitch = buf_t.static_shape[1] * t.dtype.itemsize          # bytes per buffer row
    # the lane pattern follows the memory orientation; .trans where the 8x8 blocks in memory
    # are the transposes of the fragment's (A held transposed, B held as k x n)
    pattern = 2 if trans else 1
    hw_trans = (t.role == "a") == trans
    lane = em.tmp("r")
    em.ins(f"mov.u32 {lane}, %laneid")
    lr, lc = _ldmatrix_lane(em, pattern, lane, 16 // t.dtype.itemsize)
    row, col = em.tmp("r"), em.tmp("r")
    em.ins(f"add.s32 {row}, {regs[0]}, {lr}")
    em.ins(f"add.s32 {col}, {regs[1]}, {lc}")
    addr = None if info.swizzle else ptx_mem.address(em, info, t.dtype, [row, col])
    suffix = ".trans" if hw_trans else ""
    tiles = _tiles(t)
    out: list[list[str]] = [[] for _ in tiles]

    def ld(nmat, roff, coff) -> list[str]:
        dst = [em.tmp("r") for _ in range(nmat)]
        if trans:
            roff, coff = coff, roff
        if info.swizzle:    # each lane's 16-byte row where the swizzle put it
            r2, c2 = em.tmp("r"), em.tmp("r")
            em.ins(f"add.s32 {r2}, {row}, {roff}")
            em.ins(f"add.s32 {c2}, {col}, {coff}")
            at = ptx_mem.swizzled(em, info, r2, c2)
        else:
            at = f"{addr}+{roff * pitch + coff * t.dtype.itemsize}"
        em.ins(f"ldmatrix.sync.aligned.m8n8.x{nmat}{suffix}.shared.b16 {{{', '.join(dst)}}}, [{at}]")
        return dst

    if t.role == "a":                       # one x4 per 16 x 16 tile
        for k, ro, co in tiles:
            out[k] = ld(4, ro, co)
    else:                                   # B: two adjacent n-tiles per x4, a lone one x2
        tk, tn = t.tiles
        for i in range(tk):
            for j in range(0, tn, 2):
                k = i * tn + j
                _, ro, co = tiles[k]
                if j + 1 < tn:
                    r4 = ld(4, ro, co)
                    out[k], out[k + 1] = r4[:2], r4[2:]
                else:
                    out[k] = ld(2, ro, co)
    return ",".join(r for tile in out for r in tile)


def load(em, info, op, regs) -> str:
    """``mma_load``: the fragment's register string."""
    t = op.results[0].type
    trans = bool(op.attrs.get("trans"))
    if op.attrs.get("int4"):
        return _load_int4(em, info, op, regs, t)
    if _ldmatrix_ok(op, t):
        return _load_ldmatrix(em, info, op, regs, t, trans)
    syms = _lane_syms(em)
    out = []
    base = _shared_lane_base(em, info, op, regs, t, trans, syms)
    for _, ro, co in _tiles(t):
        if base is not None:
            addrs = _shared_offsets(op, t, trans, base, ro, co)
        else:
            addrs = _element_addrs(em, info, op, regs, t, trans, syms, ro, co)
        vals = [ptx_mem.load(em, info, t.dtype, a) for a in addrs]
        if t.role == "acc":
            out += vals
        elif t.dtype.itemsize == 4:     # f32 -> tf32, rounded as kaio.semantics.tf32 does
            for v in vals:
                w = em.tmp("r")
                em.ins(f"cvt.rna.tf32.f32 {w}, {v}")
                out.append(w)
        elif t.dtype.itemsize == 1:     # four bytes per register, the lowest index lowest
            out += [_pack_bytes(em, vals[i:i + 4]) for i in range(0, len(vals), 4)]
        else:
            for lo, hi in zip(vals[0::2], vals[1::2]):
                w = em.tmp("r")
                em.ins(f"mov.b32 {w}, {{{lo}, {hi}}}")
                out.append(w)
    return ",".join(out)


#: int4 -> bf16 pairs: (x ^ 8) | EXP is 128 + x + 8 exactly (bf16's 7-bit fraction holds the
#: nibble), so one fma with 1 and -136 gives x: (xor/or constant, the fma's 1, its addend)
_INT4_BF16 = (0x43084308, 0x3F803F80, 0xC308C308)
#: f16 in three instructions: prmt makes 0x64BB64BB (BB the byte), lop3 keeps nibble 0 in the low
#: half and nibble 1 (16 x its value) in the high one, each XORed with 8: 1024 + (x ^ 8) and
#: 1024 + 16 (x ^ 8); the fma scales the high half by 1/16 and takes off 1032 and 72
_INT4_F16 = (0x00800008, 0x2C003C00, 0xD480E408)


#: (packed row, column) offsets of the bytes behind an int4 tile's registers, from the lane's
#: byte (t, g): B (16 x 8): register k holds rows 2t + 8k, 2t + 8k + 1 of column g; A of the
#: transposed weights (16 x 16, A[r, c] = B[c, r]): registers (g, 2t), (g + 8, 2t), (g, 2t + 8),
#: (g + 8, 2t + 8), each element pair one byte
_INT4_BYTES = {"b": ((0, 0), (4, 0)), "a": ((0, 0), (0, 8), (4, 0), (4, 8))}


def _load_int4(em, info, op, regs, t) -> str:
    """``mma_load`` with ``int4``: each register of the fragment holds two elements adjacent
    in K, both nibbles of one byte (:data:`_INT4_BYTES`): one byte load per register, its
    nibbles spread into the two halves' fractions and the bias taken off by one exact fma (3
    instructions per two f16 elements, 4 for bf16; no conversion unit)."""
    syms = _lane_syms(em)
    bt = op.operands[0].type
    row0, col0 = regs[0], regs[1]
    r, c = em.tmp("r"), em.tmp("r")
    em.ins(f"add.s32 {r}, {row0}, {syms['t']}")
    em.ins(f"add.s32 {c}, {col0}, {syms['g']}")
    shared = bt.space == "shared" and bt.ndim == 2 and bt.static_shape is not None and not info.swizzle
    base = ptx_mem.address(em, info, bt.dtype, [r, c]) if shared else None
    f16 = t.dtype.name == "f16"
    bias, one, neg = _INT4_F16 if f16 else _INT4_BF16
    k_one, k_neg, k_exp = em.tmp("r"), em.tmp("r"), em.tmp("r")
    em.ins(f"mov.b32 {k_one}, {one:#x}")
    em.ins(f"mov.b32 {k_neg}, {neg:#x}")
    if f16:
        em.ins(f"mov.b32 {k_exp}, 0x64646464")
    out = []
    for _, ro, co in _tiles(t):
        if t.role == "a":       # the tile's k (packed rows) runs along its columns
            ro, co = co, ro
        for dk, dn in _INT4_BYTES[t.role]:
            kb, cn = ro // 2 + dk, co + dn
            if shared:
                addr = f"{base}+{kb * bt.static_shape[1] + cn}"
            else:
                rr, cc = em.tmp("r"), em.tmp("r")
                em.ins(f"add.s32 {rr}, {r}, {kb}")
                em.ins(f"add.s32 {cc}, {c}, {cn}")
                idx = [rr, cc]
                if bt.ndim == 1:
                    lin = em.tmp("r")
                    em.ins(f"mad.lo.s32 {lin}, {rr}, {regs[2]}, {cc}")
                    idx = [lin]
                addr = ptx_mem.address(em, info, bt.dtype, idx)
            byte = ptx_mem.load(em, info, dt.u8, addr)     # zero-extended, i8 buffers too
            hi, pair, w = em.tmp("r"), em.tmp("r"), em.tmp("r")
            if f16:     # 0x64BB64BB; low half keeps nibble 0, high half nibble 1 (x 16)
                em.ins(f"prmt.b32 {hi}, {byte}, {k_exp}, 0x4040")
                em.ins(f"lop3.b32 {pair}, {hi}, 0x64F0640F, {bias:#x}, 0x6A")    # (a & b) ^ c
            else:
                em.ins(f"shl.b32 {hi}, {byte}, 12")
                em.ins(f"lop3.b32 {pair}, {byte}, {hi}, 0x000F000F, 0xA8")     # (a | b) & c
                em.ins(f"xor.b32 {pair}, {pair}, {bias:#x}")
            em.ins(f"fma.rn.{t.dtype.name}x2 {w}, {pair}, {k_one}, {k_neg}")
            out.append(w)
    return ",".join(out)


def _shared_lane_base(em, info, op, regs, t, trans, syms) -> str | None:
    """For a 2-d shared array of static shape: the address of this lane's first element of the
    fragment (every element of a role shares the lane symbols, so the others lie at constant
    offsets from it, :func:`_shared_offsets`); None for other buffers."""
    bt = op.operands[0].type
    if bt.space != "shared" or bt.ndim != 2 or bt.static_shape is None or info.swizzle:
        return None
    (rs, _), (cs, _) = _LAYOUT[t.shape][t.role][0]
    if trans:
        rs, cs = cs, rs
    r, c = em.tmp("r"), em.tmp("r")
    em.ins(f"add.s32 {r}, {regs[0]}, {syms[rs]}")
    em.ins(f"add.s32 {c}, {regs[1]}, {syms[cs]}")
    return ptx_mem.address(em, info, t.dtype, [r, c])


def _shared_offsets(op, t, trans, base: str, roff: int, coff: int) -> list[str]:
    """``base+imm`` addresses of this lane's elements of the instruction tile at (roff, coff)."""
    pitch = op.operands[0].type.static_shape[1]
    out = []
    for (_, ro), (_, co) in _LAYOUT[t.shape][t.role]:
        ro, co = ro + roff, co + coff
        if trans:
            ro, co = co, ro
        out.append(f"{base}+{(ro * pitch + co) * t.dtype.itemsize}")
    return out


def _pack_bytes(em, vals) -> str:
    """One .b32 of the low bytes of four 32-bit registers, ``vals[0]`` in the lowest byte."""
    lo, hi, w = em.tmp("r"), em.tmp("r"), em.tmp("r")
    em.ins(f"prmt.b32 {lo}, {vals[0]}, {vals[1]}, 0x0040")     # bytes: v0.b0, v1.b0, -, -
    em.ins(f"prmt.b32 {hi}, {vals[2]}, {vals[3]}, 0x0040")
    em.ins(f"prmt.b32 {w}, {lo}, {hi}, 0x5410")                # lo.b0, lo.b1, hi.b0, hi.b1
    return w


def fill(em, t, value: str) -> str:
    regs = em.reg(t)
    for r in regs.split(","):
        em.ins(f"mov.{'s32' if t.dtype.is_int else 'f32'} {r}, {value}")
    return regs


def mma(em, types, a: str, b: str, c: str, d: str) -> None:
    """``d = c + a @ b`` on the matrix unit, one ``mma.sync`` per instruction tile triple
    (kk outer, so consecutive instructions are independent)."""
    ta, tb, tc = types
    A, B, C, D = _split(a, ta), _split(b, tb), _split(c, tc), _split(d, tc)
    instr = _INSTR[ta.shape].format(t=ta.dtype.name)
    tm, tn = tc.tiles
    for kk in range(ta.tiles[1]):
        for i in range(tm):
            for j in range(tn):
                src = C[i * tn + j] if kk == 0 else D[i * tn + j]
                em.ins(f"{instr} {{{','.join(D[i * tn + j])}}}, {{{','.join(A[i * ta.tiles[1] + kk])}}}, "
                       f"{{{','.join(B[kk * tn + j])}}}, {{{','.join(src)}}}")


# --- stores --------------------------------------------------------------------------------------
def store(em, info, op, regs, acc: str, scale=None) -> None:
    """Round each element to the buffer's dtype and store it where it lies inside the buffer;
    ``scale``: (alpha, beta) f32 registers, storing ``alpha * acc + beta * old`` (old read only
    where beta != 0)."""
    buf_t = op.operands[0].type
    t = buf_t.dtype
    ftype = op.operands[-1].type
    syms = _lane_syms(em)
    vals = acc.split(",")
    read_old = None
    if op.attrs.get("int_scaled"):
        return _store_int_scaled(em, info, op, regs, acc, *scale)
    if scale is not None:
        read_old = em.tmp("p")
        em.ins(f"setp.ne.f32 {read_old}, {scale[1]}, 0f00000000")
    done = None
    trans = bool(op.attrs.get("trans"))     # element (i, j) to buf[row0 + j, col0 + i]
    if info.space == "global" and len(regs) == 2 and len(info.extents) == 2 and not trans and \
            ftype.dtype.is_float and t.name in ("f32", "f16", "bf16"):
        done = em.label("store_done")
        _store_pairs(em, info, regs, vals, ftype, t, scale, read_old, done)
    for k, ro, co in _tiles(ftype):
        inside: list = []
        addrs = _element_addrs(em, info, op, regs, ftype, trans, syms, ro, co, inside)
        for e, (a, p) in enumerate(zip(addrs, inside)):
            v = vals[k * 4 + e]
            if scale is not None:
                alpha, beta = scale
                r = em.tmp("f")
                em.ins(f"mul.rn.f32 {r}, {alpha}, {v}")
                rp = em.tmp("p")
                em.ins(f"and.pred {rp}, {p}, {read_old}")
                old = em.reg(t)
                em.ins(f"@{rp} ld.{info.space}.{ptx_mem.mem_type(t)} {old}, [{a}]")
                of = old if t.name == "f32" else em.to_f32(old, t)
                r2 = em.tmp("f")
                em.ins(f"fma.rn.f32 {r2}, {beta}, {of}, {r}")
                em.ins(f"selp.f32 {r}, {r2}, {r}, {rp}")
                v = r
            out = v if t is ftype.dtype else em.from_f32(v, t)   # i32 stores as it is
            em.ins(f"@{p} st.{info.space}.{ptx_mem.mem_type(t)} [{a}], {out}")
    if done is not None:
        em.place(done)


def _scaled(em, v: str, old: str | None, scale, rp: str) -> str:
    """``alpha * v + beta * old`` where ``rp`` (old was read), else ``alpha * v`` (f32)."""
    alpha, beta = scale
    r = em.tmp("f")
    em.ins(f"mul.rn.f32 {r}, {alpha}, {v}")
    r2 = em.tmp("f")
    em.ins(f"fma.rn.f32 {r2}, {beta}, {old}, {r}")
    em.ins(f"selp.f32 {r}, {r2}, {r}, {rp}")
    return r


def _store_pairs(em, info, regs, vals, ftype, t, scale, read_old, done: str) -> None:
    """The accumulator store's fast path, taken when the warp's whole tile lies inside a 2-d
    global buffer whose rows keep column pairs aligned (a warp-uniform test; else it falls
    through to the element-by-element path): each lane's two adjacent columns of a tile row
    are one 8-byte (f32) or 4-byte (f16/bf16 pair) store at a constant offset from the lane's
    first element, the rows 8 apart one 64-bit add each. Same values as the general path."""
    size = t.itemsize
    tm, tn = ftype.tiles
    M, N = info.extents
    p, q, w = em.tmp("p"), em.tmp("p"), em.tmp("r")
    low = em.tmp("rd")
    em.ins(f"add.s32 {w}, {regs[0]}, {16 * tm}")
    em.ins(f"setp.le.s32 {p}, {w}, {M}")
    em.ins(f"add.s32 {w}, {regs[1]}, {8 * tn}")
    em.ins(f"setp.le.and.s32 {p}, {w}, {N}, {p}")
    em.ins(f"setp.ge.and.s32 {p}, {regs[0]}, 0, {p}")
    em.ins(f"setp.ge.and.s32 {p}, {regs[1]}, 0, {p}")
    em.ins(f"and.b32 {w}, {N}, 1")                       # even rows: pairs stay aligned
    em.ins(f"setp.eq.and.u32 {p}, {w}, 0, {p}")
    em.ins(f"and.b64 {low}, {info.base}, {2 * size - 1}")
    em.ins(f"setp.eq.and.u64 {p}, {low}, 0, {p}")
    em.ins(f"and.b32 {w}, {regs[1]}, 1")                 # an even first column
    em.ins(f"setp.eq.and.u32 {q}, {w}, 0, {p}")
    slow = em.label("store_elements")
    em.bra(slow, q, negate=True)
    syms = _lane_syms(em)
    r, c = em.tmp("r"), em.tmp("r")
    em.ins(f"add.s32 {r}, {regs[0]}, {syms['g']}")
    em.ins(f"add.s32 {c}, {regs[1]}, {syms['t2']}")
    base = ptx_mem.address(em, info, t, [r, c])
    step = em.tmp("rd")                                  # 8 rows, in bytes
    em.ins(f"mul.wide.s32 {step}, {N}, {8 * size}")
    rows = [base]
    for _ in range(2 * tm - 1):
        nxt = em.tmp("rd")
        em.ins(f"add.s64 {nxt}, {rows[-1]}, {step}")
        rows.append(nxt)
    mt = ptx_mem.mem_type(t)
    for k, ro, co in _tiles(ftype):
        for h in range(2):                               # rows g and g + 8 of the tile
            at = f"{rows[ro // 8 + h]}+{co * size}"
            pair = [vals[k * 4 + 2 * h], vals[k * 4 + 2 * h + 1]]
            if scale is not None:
                old = [em.reg(t), em.reg(t)]
                if size == 4:
                    for o in old:
                        em.ins(f"mov.{ptx_mem.bits_type(t)} {o}, 0")
                    em.ins(f"@{read_old} ld.global.v2.{mt} {{{old[0]}, {old[1]}}}, [{at}]")
                else:                                    # one word, split into its halves
                    word = em.tmp("r")
                    em.ins(f"mov.b32 {word}, 0")
                    em.ins(f"@{read_old} ld.global.b32 {word}, [{at}]")
                    em.ins(f"mov.b32 {{{old[0]}, {old[1]}}}, {word}")
                    old = [em.to_f32(o, t) for o in old]
                pair = [_scaled(em, v, o, scale, read_old) for v, o in zip(pair, old)]
            if size == 4:
                em.ins(f"st.global.v2.f32 [{at}], {{{pair[0]}, {pair[1]}}}")
            else:
                hw = em.tmp("r")                         # the lower column in the low half
                em.ins(f"cvt.rn.{t.name}x2.f32 {hw}, {pair[1]}, {pair[0]}")
                em.ins(f"st.global.b32 [{at}], {hw}")
    em.bra(done)
    em.place(slow)


def _store_int_scaled(em, info, op, regs, acc: str, rows: "ptx_mem.BufInfo",
                      cols: "ptx_mem.BufInfo") -> None:
    """``f32(acc) * rows[r] * cols[c]`` into an f32 buffer, rounded after each step (``rows``
    is [M] or [M, 1]); the scales are read only for elements inside the buffer."""
    ftype = op.operands[-1].type
    rs_t = op.operands[-3].type
    syms = _lane_syms(em)
    vals = acc.split(",")
    zero = em.tmp("r")
    em.ins(f"mov.u32 {zero}, 0")
    for k, ro, co in _tiles(ftype):
        inside: list = []
        rc: list = []
        addrs = _element_addrs(em, info, op, regs, ftype, False, syms, ro, co, inside, rc)
        for e, (a, p, (r, c)) in enumerate(zip(addrs, inside, rc)):
            v, sr, sc = em.tmp("f"), em.tmp("f"), em.tmp("f")
            em.ins(f"cvt.rn.f32.s32 {v}, {vals[k * 4 + e]}")
            ra = ptx_mem.address(em, rows, op.operands[-3].type.dtype,
                                 [r] if rs_t.ndim == 1 else [r, zero])
            ca = ptx_mem.address(em, cols, op.operands[-2].type.dtype, [c])
            space_r = "global.nc" if rows.nc else rows.space
            space_c = "global.nc" if cols.nc else cols.space
            em.ins(f"@{p} ld.{space_r}.f32 {sr}, [{ra}]")
            em.ins(f"@{p} ld.{space_c}.f32 {sc}, [{ca}]")
            em.ins(f"mul.rn.f32 {v}, {v}, {sr}")
            em.ins(f"mul.rn.f32 {v}, {v}, {sc}")
            em.ins(f"@{p} st.{info.space}.f32 [{a}], {v}")


# --- copy_tile -----------------------------------------------------------------------------------
def copy_tile(em, op, dst: "ptx_mem.BufInfo", src: "ptx_mem.BufInfo", row0: str, col0: str,
              tid: str, nthreads: str, block_threads: int | None = None) -> None:
    """Block-collective ``dst[0:rows, 0:cols] = src[row0.., col0..]`` with zeros outside src.

    Fast path (a run-time test, uniform over the block): 16-byte chunks by ``cp.async.cg`` with
    the source size 0 outside src (hardware zero fill), when ``cols`` and the shared row are
    whole chunks, src's pointer is 16-byte aligned, its row length a multiple of the chunk and
    ``col0`` too. Otherwise one element per thread and step (``ld.global`` / ``st.shared``).
    ``block_threads``: the declared block size (``@kaio.kernel(block=...)``), which unrolls the
    16-byte path into straight-line code."""
    t = op.operands[0].type.dtype
    size = t.itemsize
    n = 16 // size
    rows, cols = op.attrs["rows"], op.attrs["cols"]
    pitch = op.operands[0].type.static_shape[1]
    M, K = src.extents[0], src.extents[1]
    l_scalar, l_end = em.label("copy_scalar"), em.label("copy_end")
    vector_ok = cols % n == 0 and (pitch * size) % 16 == 0
    loop = _copy_unrolled if block_threads else _copy_loop
    T = block_threads or nthreads
    if vector_ok:
        low, q, p = em.tmp("rd"), em.tmp("r"), em.tmp("p")
        em.ins(f"and.b64 {low}, {src.base}, 15")
        em.ins(f"cvt.u32.u64 {q}, {low}")
        em.ins(f"or.b32 {q}, {q}, {_and_const(em, K, n - 1)}")
        em.ins(f"or.b32 {q}, {q}, {_and_const(em, col0, n - 1)}")
        em.ins(f"setp.ne.u32 {p}, {q}, 0")
        em.bra(l_scalar, p)
        per_row = cols // n
        # a swizzled tile's rounds must move whole 8-row groups (the chunk permutation stays)
        rounds_ok = not dst.swizzle or bool(block_threads) and (block_threads // per_row) % 8 == 0
        if block_threads and per_row & (per_row - 1) == 0 and block_threads % per_row == 0 \
                and rounds_ok:
            _copy_rounds(em, dst, src, t, pitch, rows, per_row, n, tid, block_threads,
                         row0, col0, M, K)
        else:
            loop(em, rows * cols // n, per_row, n, tid, T,
                 lambda r, c, valid: _cp_async(em, dst, src, t, pitch, row0, col0, r, c, n, valid),
                 row0, col0, M, K)
        em.bra(l_end)
    em.place(l_scalar)       # the rare unaligned case stays a loop: small code, few registers
    _copy_loop(em, rows * cols, cols, 1, tid, nthreads,
         lambda r, c, valid: _copy_one(em, dst, src, t, pitch, row0, col0, r, c, valid),
         row0, col0, M, K)
    em.place(l_end)
    em.ins("cp.async.commit_group")      # one group per copy_tile (kaio.mma.copy_wait counts them)


def _and_const(em, reg: str, mask: int) -> str:
    r = em.tmp("r")
    em.ins(f"and.b32 {r}, {reg}, {mask}")
    return r


def _unit(em, u, per_row: int, n: int, row0, col0, M, K, body):
    """Unit ``u`` of the tile: row ``u / per_row``, column ``u % per_row * n`` (shifts when
    per_row is a power of two: ptxas keeps a general division otherwise)."""
    r, c, gr, gc, p, q = (em.tmp(k) for k in ("r", "r", "r", "r", "p", "p"))
    if per_row & (per_row - 1) == 0:
        em.ins(f"shr.u32 {r}, {u}, {per_row.bit_length() - 1}")
        em.ins(f"and.b32 {c}, {u}, {per_row - 1}")
    else:
        em.ins(f"div.u32 {r}, {u}, {per_row}")
        em.ins(f"rem.u32 {c}, {u}, {per_row}")
    if n > 1:
        em.ins(f"shl.b32 {c}, {c}, {n.bit_length() - 1}")
    em.ins(f"add.s32 {gr}, {row0}, {r}")
    em.ins(f"add.s32 {gc}, {col0}, {c}")
    em.ins(f"setp.lt.u32 {p}, {gr}, {M}")
    em.ins(f"setp.lt.and.u32 {q}, {gc}, {K}, {p}")
    body(r, c, (q, gr, gc))


def _copy_loop(em, units: int, per_row: int, n: int, tid, nthreads, body, row0, col0, M, K):
    """for u in range(tid, units, nthreads): body(tile row, tile col, inside-src predicate)."""
    u, p = em.tmp("r"), em.tmp("p")
    top, done = em.label("copy_top"), em.label("copy_done")
    em.ins(f"mov.u32 {u}, {tid}")
    em.place(top)
    em.ins('.pragma "nounroll"')      # the rare path: keep it small next to the hot loop
    em.ins(f"setp.ge.u32 {p}, {u}, {units}")
    em.bra(done, p)
    _unit(em, u, per_row, n, row0, col0, M, K, body)
    em.ins(f"add.u32 {u}, {u}, {nthreads}")
    em.bra(top)
    em.place(done)


def _copy_unrolled(em, units: int, per_row: int, n: int, tid, T: int, body, row0, col0, M, K):
    """The same for a block of ``T`` threads known at compile time: straight-line code, a
    bound test only in a last, partial round."""
    for i in range(-(-units // T)):
        u = em.tmp("r")
        em.ins(f"add.u32 {u}, {tid}, {i * T}")
        if (i + 1) * T <= units:
            _unit(em, u, per_row, n, row0, col0, M, K, body)
            continue
        skip, p = em.label("copy_skip"), em.tmp("p")
        em.ins(f"setp.ge.u32 {p}, {u}, {units}")
        em.bra(skip, p)
        _unit(em, u, per_row, n, row0, col0, M, K, body)
        em.place(skip)


def _copy_rounds(em, dst, src, t, pitch: int, rows: int, per_row: int, n: int, tid: str,
                 T: int, row0: str, col0: str, M: str, K: str) -> None:
    """The 16-byte path for a declared block of ``T`` threads, ``T`` a multiple of the chunks
    per row (a power of two): round ``i`` moves rows ``i * T / per_row`` further down, so each
    thread's column, shared address and source pointer are computed once and every round adds a
    constant (shared: an immediate offset; global: one 64-bit add). A block-uniform test picks
    unpredicated copies when the whole tile lies inside src (the interior of a GEMM), and
    predicated ones with hardware zero fill at the edges."""
    size = t.itemsize
    step = T // per_row                          # tile rows per round
    rounds = -(-rows // step)
    sh = per_row.bit_length() - 1
    rb, c, gr, gc, dthr = (em.tmp("r") for _ in range(5))
    em.ins(f"shr.u32 {rb}, {tid}, {sh}")
    em.ins(f"and.b32 {c}, {tid}, {per_row - 1}")
    em.ins(f"shl.b32 {c}, {c}, {n.bit_length() - 1}")
    em.ins(f"add.s32 {gr}, {row0}, {rb}")
    em.ins(f"add.s32 {gc}, {col0}, {c}")
    if dst.swizzle:       # rounds move 8k rows down: the chunk permutation stays, +128 B a row
        dthr = ptx_mem.swizzled(em, dst, rb, c)
        pitch = 128 // size
    else:
        em.ins(f"mad.lo.u32 {dthr}, {rb}, {pitch}, {c}")
        em.ins(f"mad.lo.u32 {dthr}, {dthr}, {size}, {dst.base}")
    lin, j, sthr, stride = (em.tmp("rd") for _ in range(4))
    em.ins(f"cvt.s64.s32 {lin}, {gr}")
    em.ins(f"cvt.s64.s32 {j}, {gc}")
    em.ins(f"mad.lo.s64 {lin}, {lin}, {src.extents64[0]}, {j}")
    em.ins(f"mad.lo.s64 {sthr}, {lin}, {size}, {src.base}")
    em.ins(f"mul.lo.s64 {stride}, {src.extents64[0]}, {step * size}")
    # the whole tile inside src (uniform over the block): no predicates at all
    edge, done = em.label("copy_edge"), em.label("copy_done")
    last_row, last_col, p, q = em.tmp("r"), em.tmp("r"), em.tmp("p"), em.tmp("p")
    em.ins(f"add.s32 {last_row}, {row0}, {rows}")
    em.ins(f"add.s32 {last_col}, {col0}, {per_row * n}")
    em.ins(f"setp.gt.u32 {p}, {last_row}, {M}")
    em.ins(f"setp.gt.or.u32 {q}, {last_col}, {K}, {p}")
    em.bra(edge, q)
    partial = rows % step

    def rounds_of(body):
        a = sthr
        for i in range(rounds):
            skip = None
            if partial and i == rounds - 1:       # only the first `partial` rows of this round
                skip, ps = em.label("copy_skip"), em.tmp("p")
                em.ins(f"setp.ge.u32 {ps}, {rb}, {partial}")
                em.bra(skip, ps)
            body(i, a)
            if i + 1 < rounds:
                nxt = em.tmp("rd")
                em.ins(f"add.s64 {nxt}, {a}, {stride}")
                a = nxt
            if skip:
                em.place(skip)

    def inside(i, a):
        em.ins(f"cp.async.cg.shared.global [{dthr}+{i * step * pitch * size}], [{a}], 16")

    rounds_of(inside)
    em.bra(done)
    em.place(edge)
    colok = em.tmp("p")
    em.ins(f"setp.lt.u32 {colok}, {gc}, {K}")

    def at_edge(i, a):
        r, v, nb = em.tmp("r"), em.tmp("p"), em.tmp("r")
        sa = em.tmp("rd")
        em.ins(f"add.s32 {r}, {gr}, {i * step}")
        em.ins(f"setp.lt.and.u32 {v}, {r}, {M}, {colok}")
        em.ins(f"selp.b64 {sa}, {a}, {src.base}, {v}")   # never form an address outside src
        em.ins(f"selp.u32 {nb}, 16, 0, {v}")
        em.ins(f"cp.async.cg.shared.global [{dthr}+{i * step * pitch * size}], [{sa}], 16, {nb}")

    rounds_of(at_edge)
    em.place(done)


def _dst_addr(em, dst, pitch, size, r, c) -> str:
    if dst.swizzle:
        return ptx_mem.swizzled(em, dst, r, c)
    lin, a = em.tmp("r"), em.tmp("r")
    em.ins(f"mad.lo.u32 {lin}, {r}, {pitch}, {c}")
    em.ins(f"mad.lo.u32 {a}, {lin}, {size}, {dst.base}")
    return a


def _src_addr(em, src, t, valid) -> str:
    """The element's global address, or the buffer's base where it lies outside (never read)."""
    p, gr, gc = valid
    r0, c0 = em.tmp("r"), em.tmp("r")
    em.ins(f"selp.b32 {r0}, {gr}, 0, {p}")
    em.ins(f"selp.b32 {c0}, {gc}, 0, {p}")
    return ptx_mem.address(em, src, t, [r0, c0])


def _cp_async(em, dst, src, t, pitch, row0, col0, r, c, n, valid):
    a_dst = _dst_addr(em, dst, pitch, t.itemsize, r, c)
    a_src = _src_addr(em, src, t, valid)
    nbytes = em.tmp("r")
    em.ins(f"selp.u32 {nbytes}, 16, 0, {valid[0]}")
    em.ins(f"cp.async.cg.shared.global [{a_dst}], [{a_src}], 16, {nbytes}")


def _copy_one(em, dst, src, t, pitch, row0, col0, r, c, valid):
    a_dst = _dst_addr(em, dst, pitch, t.itemsize, r, c)
    a_src = _src_addr(em, src, t, valid)
    v = em.reg(t)
    em.ins(f"mov.{ptx_mem.bits_type(t)} {v}, 0")
    em.ins(f"@{valid[0]} ld.global.{ptx_mem.mem_type(t)} {v}, [{a_src}]")
    em.ins(f"st.shared.{ptx_mem.mem_type(t)} [{a_dst}], {v}")


