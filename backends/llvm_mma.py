"""kaio.mma fragments on the LLVM paths: NVVM ``mma`` intrinsics (nvptx64) and AMD MFMA (gfx90a,
gfx942).

A fragment is one LLVM vector per lane (``<E x half>``, ``<E x i8>``...), so it flows through phis
like any value. Which matrix element each lane's element e holds is the target's *scheme*:

- ``nvvm`` (32-lane warps): the fragment is a row-major grid of instruction tiles, each laid
  out as PTX's ``mma.sync`` wants it (the same tables as kaio's PTX path,
  :mod:`kaio.backends.ptx_mma`); ``mma`` is ``llvm.nvvm.mma.m16n8k16.row.col.f32.f32`` (f16),
  ``.bf16``, ``llvm.nvvm.mma.m16n8k32.row.col.s8`` (i8) or ``llvm.nvvm.mma.m16n8k8.row.col.tf32``
  (f32 data as tf32, each element converted on load by ``llvm.nvvm.f2tf32.rna``) per tile triple.
- ``mfma16`` (64-lane wavefronts): ``v_mfma_f32_16x16x16{f16,bf16_1k}``, and
  ``v_mfma_i32_16x16x32_i8`` for int8 and ``v_mfma_f32_16x16x8_xf32`` for tf32 on gfx942 (the
  f32 elements rounded to tf32 on load by integer arithmetic, nearest with ties away, so the
  unit gets values it represents exactly). An A tile is one MFMA A operand: lane l holds
  row ``l % 16``, columns ``q * (l // 16) + 0..q-1`` (q = 4; 8 for i8, 2 for tf32). B and the
  accumulator pair adjacent n-tiles (16 x 8 each) into one 16 x 16 MFMA operand: B's lane l
  holds rows ``q * (l // 16) + 0..q-1`` of column ``l % 16``, the accumulator rows
  ``4 * (l // 16) + 0..3`` of column ``l % 16``. A fragment with an odd number of n-tiles has
  a lone last tile: its MFMA still computes 16 columns, and columns 8..15 (the lanes with
  ``l % 16 >= 8``) are padding: loaded as 0, never stored (half of that MFMA's work is wasted;
  use ``n=`` multiples of 16 on AMD to avoid it).

Every element's coordinates come from :func:`element_coords`, written once against a small
arithmetic interface: the emitter runs it on LLVM values (:class:`_LlvmLanes`), the tests on
numpy lane numbers (:class:`NumpyLanes`), so the mapping the addresses use is the mapping the
tests check against a model of each instruction (tests/test_mma_llvm.py). The multiply order
is :func:`mma_plan` (kk outer), shared the same way.

On nvptx64, A/B loads from 2-d shared arrays with 16-byte rows at a column origin that is
provably a multiple of 8 use ``ldmatrix``; other loads and all stores go element by element
(stores skip padding and elements outside the buffer and apply the BLAS epilogue exactly as
the reference does: ``alpha * acc`` then ``+ beta * old``, two roundings, old read only where
beta != 0). ``copy_tile`` is :mod:`kaio.backends.llvm_copy`'s (``cp.async`` on nvptx64).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .llvm_copy import CopyEmitter
from .llvm_types import float_literal, llty, memty
from .vector_access import _multiple_of

_ELEM_TY = {"f16": "half", "bf16": "bfloat", "f32": "float", "i8": "i8", "i32": "i32"}


@dataclass(frozen=True)
class Sym:
    """A lane-derived integer: ``((lane >> shift) & mask) * mul``."""

    shift: int
    mask: int
    mul: int = 1

    @property
    def max(self) -> int:
        return self.mask * self.mul


@dataclass(frozen=True)
class Piece:
    """One instruction operand's share of a fragment: lane element e holds the fragment's
    matrix element ``(r0 + row_sym(lane) + row_off, c0 + col_sym(lane) + col_off)`` of
    ``elems[e] = ((row_sym, row_off), (col_sym, col_off))``; an element whose offset from
    ``(r0, c0)`` is not below ``(rows, cols)`` is padding (outside the fragment)."""

    r0: int
    c0: int
    rows: int
    cols: int
    elems: tuple


_G, _T2 = Sym(2, 7), Sym(0, 3, 2)             # PTX: groupID, 2 * threadID_in_group
_T4 = Sym(0, 3, 4)                            # PTX m16n8k32: 4 * threadID_in_group
_L16, _Q4 = Sym(0, 15), Sym(4, 3, 4)          # MFMA 16x16: lane % 16, 4 * (lane // 16)
_Q8 = Sym(4, 3, 8)                            # MFMA 16x16x32 i8: 8 * (lane // 16)
_T1, _Q2 = Sym(0, 3), Sym(4, 3, 2)            # PTX m16n8k8: threadID_in_group; MFMA x8: 2 * (lane // 16)
#: (scheme, role) -> the instruction operand's elements per lane; "nvvm-k32": m16n8k32 (int8)
_ELEMS = {
    "nvvm": {
        "a": tuple(((_G, 8 * (i // 2 % 2)), (_T2, i % 2 + 8 * (i // 4))) for i in range(8)),
        "b": tuple(((_T2, i % 2 + 8 * (i // 2)), (_G, 0)) for i in range(4)),
        "acc": tuple(((_G, 8 * (i // 2)), (_T2, i % 2)) for i in range(4)),
    },
    "mfma16": {
        "a": tuple(((_L16, 0), (_Q4, i)) for i in range(4)),
        "b": tuple(((_Q4, i), (_L16, 0)) for i in range(4)),
        "acc": tuple(((_Q4, i), (_L16, 0)) for i in range(4)),
    },
    "mfma16-k32": {   # v_mfma_i32_16x16x32_i8 (gfx942): eight 8-bit elements per lane
        "a": tuple(((_L16, 0), (_Q8, i)) for i in range(8)),
        "b": tuple(((_Q8, i), (_L16, 0)) for i in range(8)),
        "acc": tuple(((_Q4, i), (_L16, 0)) for i in range(4)),
    },
    "nvvm-k32": {     # mma.m16n8k32 .s8: four 8-bit elements per 32-bit register
        "a": tuple(((_G, 8 * (i // 4 % 2)), (_T4, i % 4 + 16 * (i // 8))) for i in range(16)),
        "b": tuple(((_T4, i % 4 + 16 * (i // 4)), (_G, 0)) for i in range(8)),
        "acc": tuple(((_G, 8 * (i // 2)), (_T2, i % 2)) for i in range(4)),
    },
    "nvvm-k8": {      # mma.m16n8k8 .tf32: one element per 32-bit register
        "a": tuple(((_G, 8 * (i % 2)), (_T1, 4 * (i // 2))) for i in range(4)),
        "b": tuple(((_T1, 4 * i), (_G, 0)) for i in range(2)),
        "acc": tuple(((_G, 8 * (i // 2)), (_T2, i % 2)) for i in range(4)),
    },
    "mfma16-k8": {    # v_mfma_f32_16x16x8_xf32 (gfx942): two f32 elements per lane
        "a": tuple(((_L16, 0), (_Q2, i)) for i in range(2)),
        "b": tuple(((_Q2, i), (_L16, 0)) for i in range(2)),
        "acc": tuple(((_Q4, i), (_L16, 0)) for i in range(4)),
    },
}
#: scheme -> the warp width it is laid out for
WARP = {"nvvm": 32, "mfma16": 64}
#: scheme -> the kaio.mma shapes it lowers (on AMD int8's m16n8k32 and tf32's m16n8k8 are
#: gfx942's only, see shapes_of)
SHAPES = {"nvvm": ("m16n8k16", "m16n8k32", "m16n8k8"), "mfma16": ("m16n8k16", "m16n8k32", "m16n8k8")}
_SUFFIX = {"m16n8k32": "-k32", "m16n8k8": "-k8"}


def shapes_of(target) -> tuple:
    """The kaio.mma shapes lowered for an LLVM target (backends/targets.py refuses the others):
    gfx90a has no 16x16x32 int8 MFMA and no xf32 MFMA at all."""
    s = scheme_of(target)
    if s is None:
        return ()
    return ("m16n8k16",) if target.cpu == "gfx90a" else SHAPES[s]


def _elems(scheme: str, t) -> tuple:
    return _ELEMS[scheme + _SUFFIX.get(t.shape, "")][t.role]


def scheme_of(target) -> str | None:
    """The fragment scheme of an LLVM target (:mod:`kaio.backends.llvm_targets`), or None where
    fragments have no lowering (gfx1100's WMMA, the host test target)."""
    if target.triple.startswith("nvptx"):
        return "nvvm"
    if target.cpu in ("gfx90a", "gfx942"):
        return "mfma16"
    return None


def pieces(scheme: str, t) -> list[Piece]:
    """The instruction operands fragment type ``t`` is made of, in lane-vector order."""
    elems = _elems(scheme, t)
    (tr, tc), (nr, nc) = t.tile_dims, t.tiles
    if scheme == "nvvm" or t.role == "a":     # one piece per instruction tile, row-major
        return [Piece(i * tr, j * tc, tr, tc, elems) for i in range(nr) for j in range(nc)]
    # mfma16 B / accumulator: two adjacent 16 x 8 tiles per 16 x 16 operand, a lone last one
    return [Piece(i * tr, j * tc, tr, tc * min(2, nc - j), elems)
            for i in range(nr) for j in range(0, nc, 2)]


def lane_length(scheme: str, t) -> int:
    """Elements per lane of a fragment of type ``t``."""
    return len(pieces(scheme, t)) * len(_elems(scheme, t))


def mma_plan(scheme: str, ta, tb, tc) -> list[tuple[int, int, int]]:
    """(A piece, B piece, accumulator piece) of each instruction of ``mma``, in issue order:
    kk ascending (outer), then the accumulator's pieces row-major."""
    na, nb = len(pieces(scheme, ta)), len(pieces(scheme, tb))
    tk = ta.tiles[1]
    across = nb // tk
    return [(i * tk + kk, kk * across + j, i * across + j)
            for kk in range(tk) for i in range(na // tk) for j in range(across)]


def element_coords(scheme: str, t, lane, ar) -> list[tuple]:
    """Per element of a lane's fragment vector: (row, col, valid), relative to the fragment's
    origin; ``valid`` is None where the element is never padding. ``ar`` does the arithmetic
    (``sym``, ``add``, ``lt``, ``and_``) on ``lane``: LLVM values in the emitter, numpy arrays in
    the tests."""
    out = []
    for p in pieces(scheme, t):
        for (rs, ro), (cs, co) in p.elems:
            rv, cv = ar.sym(lane, rs), ar.sym(lane, cs)
            valid = None
            for v, s, off, limit in ((rv, rs, ro, p.rows), (cv, cs, co, p.cols)):
                if s.max + off >= limit:            # some lanes land past the piece: padding
                    ok = ar.lt(v, limit - off)
                    valid = ok if valid is None else ar.and_(valid, ok)
            out.append((ar.add(rv, p.r0 + ro), ar.add(cv, p.c0 + co), valid))
    return out


class NumpyLanes:
    """:func:`element_coords` arithmetic on numpy integer lane numbers (the tests' side)."""

    def sym(self, lane, s: Sym):
        return ((np.asarray(lane) >> s.shift) & s.mask) * s.mul

    def add(self, v, k: int):
        return v + k

    def lt(self, v, k: int):
        return v < k

    def and_(self, p, q):
        return p & q


class _LlvmLanes:
    """:func:`element_coords` arithmetic emitted as i32 LLVM instructions (each distinct value
    computed once per op)."""

    def __init__(self, em):
        self.em, self.memo = em, {}

    def _once(self, key, rhs: str) -> str:
        if key not in self.memo:
            self.memo[key] = self.em.ins(rhs, "ln")
        return self.memo[key]

    def sym(self, lane: str, s: Sym) -> str:
        v = self._once(("shr", s.shift), f"lshr i32 {lane}, {s.shift}") if s.shift else lane
        v = self._once(("and", s.shift, s.mask), f"and i32 {v}, {s.mask}")
        return self._once(("sym", s), f"mul i32 {v}, {s.mul}") if s.mul != 1 else v

    def add(self, v: str, k: int) -> str:
        return self._once(("add", v, k), f"add i32 {v}, {k}") if k else v

    def lt(self, v: str, k: int) -> str:
        return self._once(("lt", v, k), f"icmp ult i32 {v}, {k}")

    def and_(self, p: str, q: str) -> str:
        return self._once(("and1", p, q), f"and i1 {p}, {q}")


# --- the instructions ------------------------------------------------------------------------
def _slice(em, vec: str, vty: str, ety: str, start: int, n: int) -> str:
    """Elements start..start+n-1 of vector ``vec`` as an ``<n x ety>`` vector."""
    mask = ", ".join(f"i32 {start + i}" for i in range(n))
    return em.ins(f"shufflevector {vty} {vec}, {vty} poison, <{n} x i32> <{mask}>")


def _nvvm_mma(em, dtype: str, a, b, c: list[str]) -> list[str]:
    """One ``mma.sync.m16n8k16`` (f16, bf16), ``m16n8k32`` (s8) or ``m16n8k8`` (tf32, held as
    f32 already rounded): ``a``/``b`` are (vector, its type, first element) of the A and B
    pieces, ``c`` the four accumulator values (f32, or i32 for s8); returns the four results."""
    ety = _ELEM_TY[dtype]
    per = {"i8": 4, "f32": 1}.get(dtype, 2)          # elements per 32-bit register
    args = []
    for vec, vty, start, n in ((*a, 4 * per), (*b, 2 * per)):
        for k in range(start, start + n, per):
            word = _slice(em, vec, vty, ety, k, per)
            args.append(("i32", em.ins(f"bitcast <{per} x {ety}> {word} to i32"))
                        if dtype != "f16" else (f"<2 x {ety}>", word))
    cty = "i32" if dtype == "i8" else "float"
    args += [(cty, x) for x in c]
    st = "{" + ", ".join([cty] * 4) + "}"
    name = "llvm.nvvm.mma." + {"f16": "m16n8k16.row.col.f32.f32", "bf16": "m16n8k16.row.col.bf16",
                               "i8": "m16n8k32.row.col.s8", "f32": "m16n8k8.row.col.tf32"}[dtype]
    d = em.call(st, name, *args)
    return [em.ins(f"extractvalue {st} {d}, {i}") for i in range(4)]


def _mfma16(em, dtype: str, a, b, c: list[str]) -> list[str]:
    """One ``v_mfma_f32_16x16x16`` (f16, or bf16_1k), ``v_mfma_i32_16x16x32_i8`` (i8, gfx942) or
    ``v_mfma_f32_16x16x8_xf32`` (tf32, gfx942): operands as for :func:`_nvvm_mma`."""
    ety = _ELEM_TY[dtype]
    n = {"i8": 8, "f32": 2}.get(dtype, 4)
    args = []
    for vec, vty, start in (a, b):
        v = _slice(em, vec, vty, ety, start, n)
        if dtype in ("f16", "f32"):
            args.append((f"<{n} x {ety}>", v))
        else:           # bf16_1k takes <4 x i16>, the i8 form an i64 of eight bytes
            it = "i64" if dtype == "i8" else "<4 x i16>"
            args.append((it, em.ins(f"bitcast <{n} x {ety}> {v} to {it}")))
    cty = "i32" if dtype == "i8" else "float"
    acc = "poison"
    for i, x in enumerate(c):
        acc = em.ins(f"insertelement <4 x {cty}> {acc}, {cty} {x}, i32 {i}")
    name = "llvm.amdgcn.mfma." + {"f16": "f32.16x16x16f16", "bf16": "f32.16x16x16bf16.1k",
                                  "i8": "i32.16x16x32.i8", "f32": "f32.16x16x8.xf32"}[dtype]
    d = em.call(f"<4 x {cty}>", name, *args, (f"<4 x {cty}>", acc), ("i32", "0"), ("i32", "0"),
                ("i32", "0"))
    return [em.ins(f"extractelement <4 x {cty}> {d}, i32 {i}") for i in range(4)]


_INSTR = {"nvvm": _nvvm_mma, "mfma16": _mfma16}


def _ldmatrix_ok(op, t) -> bool:
    """``ldmatrix`` applies to an A or B load from a 2-d shared array of static shape whose
    rows are whole 16-byte units, at a column origin provably a multiple of 8 (so every row
    address is 16-byte aligned: shared arrays are)."""
    bt = op.operands[0].type
    shape = bt.static_shape
    if bt.space != "shared" or bt.ndim != 2 or shape is None or t.role == "acc" or \
            t.dtype.itemsize != 2:
        return False
    return (shape[1] * t.dtype.itemsize) % 16 == 0 and _multiple_of(op.operands[2], 8)


# --- the emitter's fragment ops (mixed into kaio.backends.llvm.FunctionEmitter) ---------------
class MmaEmitter(CopyEmitter):
    """``op_mma_*`` handlers of the LLVM emitter (``copy_tile``: :mod:`.llvm_copy`). Uses the
    emitter's helpers (``ins``, ``call``, ``v``, ``bufs``, ``snippet``...); the scheme comes
    from the target (:func:`scheme_of`)."""

    def vty(self, t) -> str:
        """LLVM type of an IR value: a fragment's lane vector, or the scalar type."""
        if getattr(t, "kind", None) == "frag":
            return f"<{lane_length(self._scheme(None), t)} x {_ELEM_TY[t.dtype.name]}>"
        return llty(t)

    def _scheme(self, op) -> str:
        s = scheme_of(self.t)
        if s is None or WARP[s] != self.t.warp_size:
            what = "no NVVM mma / AMD MFMA lowering" if s is None else \
                f"{s} fragments are laid out for {WARP[s]}-lane warps, not {self.t.warp_size}"
            raise self.error(op, f"kaio.mma fragments are not supported on this target ({what})")
        t = next((v.type for v in (*getattr(op, "results", ()), *getattr(op, "operands", ()))
                  if getattr(v.type, "kind", None) == "frag"), None)
        if t is not None and t.shape not in shapes_of(self.t):
            raise self.error(op, f"kaio.mma shape {t.shape} is not lowered for {s} fragments")
        return s

    def _lane(self) -> str:
        return self.snippet(self.t.specials["lane_id"])

    def _tile_addr(self, buf, r: str, c: str, ld) -> tuple[str, str, list]:
        """(pointer, pointer type, index values for the bounds test) of element (r, c) of a
        tile: ``r``/``c`` are i32 coordinates in the buffer, ``ld`` the row length of a 1-d
        buffer (None for 2-d)."""
        base, space, extents = self.bufs[buf.id]
        bt = buf.type
        wide = bt.space == "global"
        it = "i64" if wide else "i32"

        def widen(x, signed=True):
            return self.ins(f"{'sext' if signed else 'zext'} i32 {x} to i64") if wide else x
        if ld is not None:
            lin32 = self.ins(f"add i32 {self.ins(f'mul i32 {r}, {ld}')}, {c}")
            lin, index = widen(lin32), [lin32]
        else:
            pitch = bt.static_shape[1] if bt.static_shape is not None else widen(extents[1], False)
            lin = self.ins(f"add {it} {self.ins(f'mul {it} {widen(r)}, {pitch}')}, {widen(c)}")
            index = [r, c]
        pty = self.ptrty(space)
        gep = f"getelementptr {memty(bt.dtype)}, {pty} {base}, {it} {lin}"
        return self.ins(gep, "p"), pty, index

    def _inside(self, buf, index: list[str]) -> str:
        """i1: the element index (i32 values) lies inside the buffer (unsigned compares, so
        negative indices are outside)."""
        _, _, extents = self.bufs[buf.id]
        dims = buf.type.static_shape or extents
        ok = None
        for i, ext in zip(index, dims):
            q = self.ins(f"icmp ult i32 {i}, {ext}")
            ok = q if ok is None else self.ins(f"and i1 {ok}, {q}")
        return ok

    def _elements(self, op, ftype, trans=False, rc=None):
        """Per lane element: (pointer, pointer type, bounds index, padding validity) of the
        element of the tile op addresses (operands: buf, row0, col0[, ld]); ``rc``: a list to
        receive each element's (row, column) in the buffer's matrix."""
        scheme = self._scheme(op)
        buf = op.operands[0]
        n_idx = 3 if buf.type.ndim == 1 else 2
        row0, col0, *ld = (self.index_value(v, "i32") for v in op.operands[1:1 + n_idx])
        lanes = _LlvmLanes(self)
        out = []
        for r, c, valid in element_coords(scheme, ftype, self._lane(), lanes):
            if trans:                 # the buffer holds the tile transposed
                r, c = c, r
            rr = lanes._once(("row", r), f"add i32 {row0}, {r}")
            cc = lanes._once(("col", c), f"add i32 {col0}, {c}")
            if rc is not None:
                rc.append((rr, cc))
            if valid is not None:     # padding reads the tile's origin (never used)
                rr = self.ins(f"select i1 {valid}, i32 {rr}, i32 {row0}")
                cc = self.ins(f"select i1 {valid}, i32 {cc}, i32 {col0}")
            out.append((*self._tile_addr(buf, rr, cc, ld[0] if ld else None), valid))
        return out

    def op_mma_fill(self, op):
        t = op.result.type
        vty, ety = self.vty(t), _ELEM_TY[t.dtype.name]
        one = self.ins(f"insertelement {vty} poison, {ety} {self.v(op.operands[0])}, i32 0")
        n = lane_length(self._scheme(op), t)
        self.bind(op, self.ins(f"shufflevector {vty} {one}, {vty} poison, <{n} x i32> zeroinitializer"))

    def op_mma_load(self, op):
        t = op.result.type
        if op.attrs.get("int4"):
            return self.bind(op, self._load_int4(op, t))
        if self._scheme(op) == "nvvm" and _ldmatrix_ok(op, t):
            return self.bind(op, self._ldmatrix(op, t, bool(op.attrs.get("trans"))))
        vty, ety = self.vty(t), _ELEM_TY[t.dtype.name]
        vec = "poison"
        for e, (ptr, pty, _, valid) in enumerate(self._elements(op, t, bool(op.attrs.get("trans")))):
            x = self.ins(f"load {ety}, {pty} {ptr}, align {t.dtype.itemsize}")
            if t.role != "acc" and t.dtype.name == "f32":     # tf32 multiplicands
                x = self._tf32(x)
            if valid is not None:
                zero = float_literal(0.0, t.dtype) if t.dtype.is_float else "0"
                x = self.ins(f"select i1 {valid}, {ety} {x}, {ety} {zero}")
            vec = self.ins(f"insertelement {vty} {vec}, {ety} {x}, i32 {e}")
        self.bind(op, vec)

    def _load_int4(self, op, t) -> str:
        """``mma_load`` with ``int4``: element (k, n) of B is nibble k % 2 of the byte at
        (row0 + k // 2, col0 + n), sign-extended and converted (exact in f16/bf16); an A
        fragment (``trans``) is the transposed weights: its element (r, c) is B's (c, r)."""
        scheme = self._scheme(op)
        buf = op.operands[0]
        n_idx = 3 if buf.type.ndim == 1 else 2
        row0, col0, *ld = (self.index_value(v, "i32") for v in op.operands[1:1 + n_idx])
        lanes = _LlvmLanes(self)
        vty, ety = self.vty(t), _ELEM_TY[t.dtype.name]
        vec = "poison"
        for e, (r, c, valid) in enumerate(element_coords(scheme, t, self._lane(), lanes)):
            if t.role == "a":       # A[r, c] = B[c, r]: k runs along A's columns
                r, c = c, r
            half = lanes._once(("khalf", r), f"lshr i32 {r}, 1")
            shift = lanes._once(("kshift", r), f"shl i32 {lanes._once(('kodd', r), f'and i32 {r}, 1')}, 2")
            rr = lanes._once(("prow", r), f"add i32 {row0}, {half}")
            cc = lanes._once(("col", c), f"add i32 {col0}, {c}")
            if valid is not None:     # padding reads the tile's origin (never used)
                rr = self.ins(f"select i1 {valid}, i32 {rr}, i32 {row0}")
                cc = self.ins(f"select i1 {valid}, i32 {cc}, i32 {col0}")
            ptr, pty, _ = self._tile_addr(buf, rr, cc, ld[0] if ld else None)
            byte = self.ins(f"zext i8 {self.ins(f'load i8, {pty} {ptr}, align 1')} to i32")
            nib = self.ins(f"and i32 {self.ins(f'lshr i32 {byte}, {shift}')}, 15")
            q = self.ins(f"ashr i32 {self.ins(f'shl i32 {nib}, 28')}, 28")     # two's complement
            x = self.ins(f"sitofp i32 {q} to {ety}")
            vec = self.ins(f"insertelement {vty} {vec}, {ety} {x}, i32 {e}")
        return vec

    def _tf32(self, x: str) -> str:
        """f32 ``x`` rounded to tf32 as kaio.semantics.tf32 does (nearest, ties away from zero;
        NaN kept), as a float: ``cvt.rna.tf32.f32`` on nvptx64, integer arithmetic on AMD."""
        if self._scheme(None) == "nvvm":
            r = self.call("i32", "llvm.nvvm.f2tf32.rna", ("float", x))
            return self.ins(f"bitcast i32 {r} to float")
        bits = self.ins(f"bitcast float {x} to i32")
        r = self.ins(f"and i32 {self.ins(f'add i32 {bits}, 4096')}, -8192")
        nan = self.ins(f"fcmp uno float {x}, 0.0")
        return self.ins(f"select i1 {nan}, float {x}, float {self.ins(f'bitcast i32 {r} to float')}")

    def _ldmatrix(self, op, t, trans: bool) -> str:
        """A or B from shared memory by ``ldmatrix.m8n8`` (x4: one A tile or two adjacent B
        tiles, x2: a lone B tile), ``.trans`` where the memory holds the other orientation.

        Which lane addresses which row of the 8x8 matrices: pattern 1 (A as is; B held k x n,
        loaded .trans) orders the matrices (rows 0-7, col 0), (8-15, 0), (0-7, 8), (8-15, 8), so
        lane l gives row ``l % 16``, column ``8 (l / 16)``; pattern 2 (A held transposed; B held
        n x k) orders them (0-7, 0), (0-7, 8), (8-15, 0), (8-15, 8): row ``l % 8 + 8 (l / 16)``,
        column ``8 (l / 8 % 2)``. Result register k holds mma.sync's register k of the tile."""
        buf = op.operands[0]
        row0, col0 = (self.index_value(v, "i32") for v in op.operands[1:3])
        lane = self._lane()
        if not trans:                      # pattern 1
            lr = self.ins(f"and i32 {lane}, 15")
            lc = self.ins(f"shl i32 {self.ins(f'lshr i32 {lane}, 4')}, 3")
        else:                              # pattern 2
            hi = self.ins(f"shl i32 {self.ins(f'lshr i32 {lane}, 4')}, 3")
            lr = self.ins(f"add i32 {self.ins(f'and i32 {lane}, 7')}, {hi}")
            lc = self.ins(f"and i32 {lane}, 8")
        r, c = self.ins(f"add i32 {row0}, {lr}"), self.ins(f"add i32 {col0}, {lc}")
        suffix = ".trans" if (t.role == "a") == trans else ""

        def ld(n, ro, co) -> list[str]:
            if trans:
                ro, co = co, ro
            ptr, pty, _ = self._tile_addr(buf, self.ins(f"add i32 {r}, {ro}") if ro else r,
                                          self.ins(f"add i32 {c}, {co}") if co else c, None)
            st = "{" + ", ".join(["i32"] * n) + "}"
            res = self.call(st, f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{n}{suffix}.b16", (pty, ptr))
            return [self.ins(f"extractvalue {st} {res}, {i}") for i in range(n)]

        ps = pieces("nvvm", t)
        regs: list = [None] * len(ps)
        if t.role == "a":
            for k, p in enumerate(ps):
                regs[k] = ld(4, p.r0, p.c0)
        else:                              # B: two adjacent n-tiles per x4, a lone one x2
            tn = t.tiles[1]
            for k, p in enumerate(ps):
                j = k % tn
                if j % 2 == 0:
                    got = ld(4 if j + 1 < tn else 2, p.r0, p.c0)
                    regs[k] = got[:2]
                    if len(got) == 4:
                        regs[k + 1] = got[2:]
        vty, ety = self.vty(t), _ELEM_TY[t.dtype.name]
        vec, e = "poison", 0
        for word in (w for tile in regs for w in tile):
            pair = self.ins(f"bitcast i32 {word} to <2 x {ety}>")
            for h in range(2):
                x = self.ins(f"extractelement <2 x {ety}> {pair}, i32 {h}")
                vec = self.ins(f"insertelement {vty} {vec}, {ety} {x}, i32 {e}")
                e += 1
        return vec

    def op_mma(self, op):
        scheme = self._scheme(op)
        a, b, c = op.operands[:3]     # a group mma's origins (3:) only steer wgmma
        ta, tb, tc = (x.type for x in (a, b, c))
        na, nb, nc = (len(_elems(scheme, t)) for t in (ta, tb, tc))
        cty = self.vty(tc)
        cv = self.v(c)
        acc = [[self.ins(f"extractelement {cty} {cv}, i32 {p * nc + i}") for i in range(nc)]
               for p in range(len(pieces(scheme, tc)))]
        A, B = (self.v(a), self.vty(ta)), (self.v(b), self.vty(tb))
        for pa, pb, pc in mma_plan(scheme, ta, tb, tc):
            acc[pc] = _INSTR[scheme](self, ta.dtype.name, (*A, pa * na), (*B, pb * nb), acc[pc])
        vec = "poison"
        for e, x in enumerate(v for piece in acc for v in piece):
            vec = self.ins(f"insertelement {cty} {vec}, {_ELEM_TY[tc.dtype.name]} {x}, i32 {e}")
        self.bind(op, vec)

    def op_mma_apply(self, op):
        """The region once per lane element e, its arguments bound to element e of the
        accumulator (and of the other fragments) and the element's (row, column) from the
        scheme's layout; a padding element (AMD's lone n-tile) runs at the tile's origin and
        its result is never stored."""
        scheme = self._scheme(op)
        acc, row0, col0, *others = op.operands
        t = acc.type
        body = op.regions[0]
        x, r, c, *ys = body.args
        vty, ety = self.vty(t), _ELEM_TY[t.dtype.name]
        r0, c0 = (self.index_value(v, "i32") for v in (row0, col0))
        lanes = _LlvmLanes(self)
        vecs = [self.v(v) if v.type is t else self._broadcast(scheme, v, t) for v in (acc, *others)]
        vec = "poison"
        for e, (rr, cc, valid) in enumerate(element_coords(scheme, t, self._lane(), lanes)):
            rr = lanes._once(("row", rr), f"add i32 {r0}, {rr}")
            cc = lanes._once(("col", cc), f"add i32 {c0}, {cc}")
            if valid is not None:
                rr = self.ins(f"select i1 {valid}, i32 {rr}, i32 {r0}")
                cc = self.ins(f"select i1 {valid}, i32 {cc}, i32 {c0}")
            elems = [self.ins(f"extractelement {vty} {v}, i32 {e}") for v in vecs]
            for arg, val in zip((x, r, c, *ys), (elems[0], rr, cc, *elems[1:])):
                self.vals[arg.id] = val
            term = self.block(body)
            vec = self.ins(f"insertelement {vty} {vec}, {ety} {self.v(term.operands[0])}, i32 {e}")
        self.bind(op, vec)

    # --- whole-row work: broadcasts, row reductions, accumulator -> A -------------------------
    def _elem(self, v: str, t, e: int) -> str:
        return self.ins(f"extractelement {self.vty(t)} {v}, i32 {e}")

    def _vector(self, t, xs: list[str]) -> str:
        vty, ety, vec = self.vty(t), _ELEM_TY[t.dtype.name], "poison"
        for e, x in enumerate(xs):
            vec = self.ins(f"insertelement {vty} {vec}, {ety} {x}, i32 {e}")
        return vec

    def _broadcast(self, scheme: str, v, wide) -> str:
        """A one-tile-wide accumulator ``v`` laid out as ``wide`` (element (i, j) is v's (i,
        j % 8)). nvvm: every n-tile places its elements alike, so the same slot of the same
        m-tile. mfma16: a pair's columns 8..15 sit in lanes ``l | 8``, whose narrow element is
        in lane ``l & ~8`` (columns 8..15 of v's lone tile are padding)."""
        narrow, nv = v.type, self.v(v)
        per = len(_elems(scheme, wide))
        across = len(pieces(scheme, wide)) // wide.tiles[0]
        src = None if scheme == "nvvm" else self.ins(f"and i32 {self._lane()}, -9")
        got: dict = {}
        xs = []
        for p in range(len(pieces(scheme, wide))):
            for e in range(per):
                k = (p // across) * per + e
                if k not in got:
                    x = self._elem(nv, narrow, k)
                    got[k] = x if src is None else self.lane_read(x, narrow.dtype, src)
                xs.append(got[k])
        return self._vector(wide, xs)

    def op_mma_row_reduce(self, op):
        """Per row: this lane's elements folded in ascending column order (padding left out),
        then the lanes holding the row exchange by xor shuffles (nvvm: the four lanes of a
        ``g``, xor 1 and 2; mfma16: the sixteen of a row group, xor 1, 2, 4, 8)."""
        scheme = self._scheme(op)
        (acc,) = op.operands
        t, av = acc.type, self.v(acc)
        is_max = op.attrs["op"] == "max"
        ps = pieces(scheme, t)
        per, across = len(_elems(scheme, t)), len(ps) // t.tiles[0]
        lane = self._lane()
        pad = None
        if scheme != "nvvm" and t.tiles[1] % 2:       # the lone tile's columns 8..15
            pad = self.ins(f"icmp uge i32 {self.ins(f'and i32 {lane}, 15')}, 8")

        def fold(a, b):
            if is_max:
                return self.call("float", "llvm.maxnum.f32", ("float", a), ("float", b))
            return self.ins(f"fadd float {a}, {b}")
        # the slots holding one row, per m-tile: nvvm (0, 1) and (2, 3); mfma16 each slot alone
        groups = [(0, 1), (2, 3)] if scheme == "nvvm" else [(e,) for e in range(per)]
        xors = (1, 2) if scheme == "nvvm" else (1, 2, 4, 8)
        out = []
        for i in range(t.tiles[0]):
            rows = []
            for slots in groups:
                v = None
                for j in range(across):
                    for e in slots:
                        x = self._elem(av, t, (i * across + j) * per + e)
                        if pad is not None and j == across - 1:
                            ident = "0xFFF0000000000000" if is_max else "0.0"
                            x = self.ins(f"select i1 {pad}, float {ident}, float {x}")
                        v = x if v is None else fold(v, x)
                for k in xors:
                    v = fold(v, self.lane_read(v, t.dtype, self.ins(f"xor i32 {lane}, {k}")))
                rows.append(v)
            out += [rows[0], rows[0], rows[1], rows[1]] if scheme == "nvvm" else rows
        self.bind(op, self._vector(op.result.type, out))

    def op_mma_to_a(self, op):
        """Columns col0 .. of the f32 accumulator as an f16/bf16 A, rounded (fptrunc: nearest
        even). nvvm: in registers (A's tile (i, kk) is the accumulator's tiles (i, j0 + 2kk) and
        (i, j0 + 2kk + 1), j0 = col0 / 8).
        mfma16: the accumulator is held transposed against A (lane l: column l % 16 against
        A's row l % 16), so each A element is read from lane ``16 (r // 4) + c`` (r, c its row
        and column in the tile), slot ``r % 4`` (four lane reads, one kept)."""
        scheme = self._scheme(op)
        (acc,) = op.operands
        t, av, at = acc.type, self.v(acc), op.result.type
        f32, to = acc.type.dtype, at.dtype
        tn, j0 = t.tiles[1], op.attrs.get("col0", 0) // 8
        xs = []
        if scheme == "nvvm":
            for i in range(t.tiles[0]):
                for kk in range(at.tiles[1]):
                    for a in range(8):
                        k = (i * tn + j0 + 2 * kk + a // 4) * 4 + (a // 2 % 2) * 2 + a % 2
                        xs.append(self.convert(self._elem(av, t, k), f32, to))
            return self.bind(op, self._vector(at, xs))
        lane = self._lane()
        r = self.ins(f"and i32 {lane}, 15")
        rg = self.ins(f"shl i32 {self.ins(f'lshr i32 {r}, 2')}, 4")          # 16 (r // 4)
        q = self.ins(f"shl i32 {self.ins(f'lshr i32 {lane}, 4')}, 2")        # A's first column
        base = self.ins(f"add i32 {rg}, {q}")
        slot = self.ins(f"and i32 {lane}, 3")
        pairs = len(pieces(scheme, t)) // t.tiles[0]
        for p in range(len(pieces(scheme, at))):       # A piece (i, kk): accumulator pair
            src_p = (p // at.tiles[1]) * pairs + j0 // 2 + p % at.tiles[1]     # (i, j0/2 + kk)
            for e in range(4):
                src = self.ins(f"add i32 {base}, {e}")
                got = [self.lane_read(self._elem(av, t, src_p * 4 + s), f32, src) for s in range(4)]
                v = got[0]
                for s in range(1, 4):
                    v = self.ins(f"select i1 {self.ins(f'icmp eq i32 {slot}, {s}')}, float "
                                 f"{got[s]}, float {v}")
                xs.append(self.convert(v, f32, to))
        self.bind(op, self._vector(at, xs))

    def _dequant(self, op, x: str, row: str, col: str) -> str:
        """``f32(x) * row_scale[row] * col_scale[col]``, a rounding per step (operands
        [..., row_scale, col_scale, acc]; a 2-d row_scale is read at [row, 0])."""
        rs, cs = op.operands[-3:-1]
        f = self.ins(f"sitofp i32 {x} to float")
        for buf, idx in ((rs, row), (cs, col)):
            ptr, pty, _ = self._tile_addr(buf, idx, "0", None if buf.type.ndim == 2 else "1")
            ety = llty(buf.type.dtype)
            v = self.ins(f"load {ety}, {pty} {ptr}, align {buf.type.dtype.itemsize}")
            if ety != "float":
                v = self.ins(f"fpext {ety} {v} to float")
            f = self.ins(f"fmul float {f}, {v}")
        return f

    def op_mma_store(self, op):
        """Each element rounded to the buffer's dtype and stored where it is no padding and
        lies inside the buffer; ``scaled``: ``alpha * acc + beta * old`` (old read where beta
        != 0), in f32 with a rounding per operation, as the reference computes it."""
        buf, acc = op.operands[0], op.operands[-1]
        bt = buf.type.dtype
        ty = llty(bt)
        cty, cv = self.vty(acc.type), self.v(acc)
        scaled = bool(op.attrs.get("scaled"))
        if scaled:
            alpha, beta = (self.v(x) for x in op.operands[-3:-1])
            read_old = self.ins(f"fcmp une float {beta}, 0.0")
        rc: list = []
        trans = bool(op.attrs.get("trans"))       # element (i, j) to buf[row0 + j, col0 + i]
        for e, (ptr, pty, index, valid) in enumerate(self._elements(op, acc.type, trans, rc)):
            ok = self._inside(buf, index)
            if valid is not None:
                ok = self.ins(f"and i1 {ok}, {valid}")
            st, nxt = self.new_label("mst"), self.new_label("mnext")
            self.emit(f"br i1 {ok}, label %{st}, label %{nxt}")
            self.start(st)
            x = self.ins(f"extractelement {cty} {cv}, i32 {e}")
            if not acc.type.dtype.is_float:      # i32: stored exactly, or dequantised into f32
                if op.attrs.get("int_scaled"):
                    x = self._dequant(op, x, *rc[e])
                    if bt.name != "f32":
                        x = self.ins(f"fptrunc float {x} to {ty}")
                self.emit(f"store {ty} {x}, {pty} {ptr}, align {bt.itemsize}")
                self.emit(f"br label %{nxt}")
                self.start(nxt)
                continue
            if scaled:
                x = self.ins(f"fmul float {alpha}, {x}")
                old_l, join = self.new_label("mold"), self.new_label("mjoin")
                here = self.label
                self.emit(f"br i1 {read_old}, label %{old_l}, label %{join}")
                self.start(old_l)
                old = self.ins(f"load {ty}, {pty} {ptr}, align {bt.itemsize}")
                if bt.name != "f32":
                    old = self.ins(f"fpext {ty} {old} to float")
                y = self.ins(f"fadd float {x}, {self.ins(f'fmul float {beta}, {old}')}")
                self.emit(f"br label %{join}")
                self.start(join)
                x = self.ins(f"phi float [ {x}, %{here} ], [ {y}, %{old_l} ]")
            if bt.name != "f32":
                x = self.ins(f"fptrunc float {x} to {ty}")
            self.emit(f"store {ty} {x}, {pty} {ptr}, align {bt.itemsize}")
            self.emit(f"br label %{nxt}")
            self.start(nxt)
