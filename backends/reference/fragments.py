"""kaio.mma fragments on the reference backend: each warp's fragment is one whole matrix.

A fragment value is a numpy array of shape (E, L): E elements per lane, lanes last (so the
interpreter's lane masks merge fragments of ``if``/``for`` results like any value). The
reference layout: in a warp of W lanes, element e of lane l holds the matrix element at flat
(row-major) position ``e * W + l``. Nothing outside this module sees it; the kernel never names
a layout, and a GPU target uses its own (the PTX backend: ``mma.sync``'s).

The ops are warp-collective. The interpreter requires what the hardware does: whole warps
(block size a multiple of the warp width), every lane of a warp active or none, and one tile
origin per warp; anything else raises :class:`FragmentError` naming the op.
"""
from __future__ import annotations

import numpy as np

from ... import semantics
from ...errors import KernelRuntimeError


class FragmentError(KernelRuntimeError):
    """A warp-collective kaio.mma op was not executed by a whole warp, or its lanes disagreed."""


def _fail(interp, op, msg, hint):
    raise FragmentError(f"{interp.where(op)}in kernel '{interp.kernel.name}': {msg}"
                        f"{interp.excerpt(op)}\nhint: {hint}", kernel=interp.kernel.name,
                        line=op.loc.line if op.loc else None)


def _what(op) -> str:
    role = (op.results[0].type if op.results else op.operands[-1].type).role
    return {"mma_load": f"kaio.mma.load_{role}", "mma_store": "kaio.mma.store",
            "mma_copy": "kaio.mma.copy_tile", "mma_copy_wait": "kaio.mma.copy_wait",
            "mma": "kaio.mma.mma", "mma_fill": "kaio.mma.fill",
            "mma_apply": "kaio.mma.apply", "mma_to_a": "kaio.mma.to_a",
            "mma_row_reduce": f"kaio.mma.row_{op.attrs.get('op')}"}[op.opcode]


def check_warps(interp, op, mask):
    """Whole warps only, each entirely active or entirely inactive at ``op``."""
    b = interp.batch
    W = b.warp_size
    if b.T % W:
        _fail(interp, op, f"{_what(op)} in a block of {b.T} threads, not a multiple of the warp "
                          f"width {W}: the last warp is partial",
              "launch blocks whose size is a multiple of kaio.warp_size")
    if mask is not None:
        m = mask.reshape(-1, W)
        if (m.any(axis=1) & ~m.all(axis=1)).any():
            _fail(interp, op, f"{_what(op)} reached by only some lanes of a warp (it is "
                              "warp-collective: every lane of the warp takes part)",
                  "keep kaio.mma calls out of branches that split a warp")


def _uniform_per_warp(interp, op, v, mask, what):
    """``v`` as one value per lane, checked equal across each warp's active lanes."""
    b = interp.batch
    if np.ndim(v) == 0:
        return v
    w = np.asarray(v).reshape(-1, b.warp_size)
    act = np.ones_like(w, dtype=bool) if mask is None else mask.reshape(w.shape)
    first = w[np.arange(len(w)), np.argmax(act, axis=1)][:, None]
    if (act & (w != first)).any():
        _fail(interp, op, f"{_what(op)}: the lanes of one warp disagree on the tile's {what}",
              "every lane of a warp passes the same tile origin (derive it from the warp's "
              "index, e.g. thread_idx.x // kaio.warp_size, not from the lane)")
    return v


def coords(batch, ftype):
    """(rows, cols), each (E, L): the matrix element each lane's element e holds."""
    rows, cols = ftype.dims
    W = batch.warp_size
    E = rows * cols // W
    flat = np.arange(E)[:, None] * W + (batch.tid % W)[None, :]
    return flat // cols, flat % cols


def to_matrices(batch, ftype, vals):
    """(E, L) lane values -> (nblocks * warps per block, rows, cols) matrices."""
    rows, cols = ftype.dims
    E, W = vals.shape[0], batch.warp_size
    per = np.broadcast_to(vals, (E, batch.L)).reshape(E, -1, W).transpose(1, 0, 2)
    return per.reshape(-1, rows, cols)


def from_matrices(batch, mats):
    W = batch.warp_size
    nw, rows, cols = mats.shape
    E = rows * cols // W
    return np.ascontiguousarray(mats.reshape(nw, E, W).transpose(1, 0, 2).reshape(E, batch.L))


def _tile_index(interp, op, mask, rc=None, int4=False):
    """Per element e: the buffer index (list of per-lane arrays) it reads or writes. ``rc``: a
    list to receive, per element, the (row, column) of the matrix it is (per-lane arrays).
    ``int4``: row0 counts packed rows, so the first index is in K units (2 row0 + k)."""
    buf_v = op.operands[0]
    ftype = op.results[0].type if op.results else op.operands[-1].type
    n_idx = 3 if buf_v.type.ndim == 1 else 2
    idx = [_uniform_per_warp(interp, op, interp.env[v.id], mask, what)
           for v, what in zip(op.operands[1:1 + n_idx], ("row", "column", "leading dimension"))]
    r, c = coords(interp.batch, ftype)
    if op.attrs.get("trans"):
        r, c = c, r
    row, col = (2 * idx[0] if int4 else idx[0]) + r, idx[1] + c   # (E, L), int64
    if rc is not None:
        rc.extend(zip(row, col))
    if n_idx == 3 and int4:     # the packed row's offset is applied by the caller
        return [[row[e], col[e], idx[2]] for e in range(len(row))]
    if n_idx == 3:
        return [[row[e] * idx[2] + col[e]] for e in range(len(row))]
    return [[row[e], col[e]] for e in range(len(row))]


def load(interp, op, mask):
    check_warps(interp, op, mask)
    buf = interp.env[op.operands[0].id]
    t = op.results[0].type
    int4 = bool(op.attrs.get("int4"))
    out = np.zeros((len(coords(interp.batch, t)[0]), interp.batch.L), dtype=t.dtype.storage_np)
    for e, index in enumerate(_tile_index(interp, op, mask, int4=int4)):
        nibble = None
        if int4:                # row k of B is nibble k % 2 of packed row row0 + k // 2
            k, col, *ld = index
            nibble = k % 2
            index = [k // 2 * ld[0] + col] if ld else [k // 2, col]
        sel, pos = interp._positions(op, buf, index, mask)
        if interp.san is not None:
            interp.san.read(interp, op, buf, pos, sel)
        v = buf.flat[pos]
        if int4:
            v = _signed_nibble(v, nibble if sel is None else np.asarray(nibble)[sel])
        out[e, slice(None) if sel is None else sel] = v
    return out


def _signed_nibble(byte, high):
    """The 4-bit two's complement value in the low (high == 0) or high nibble of ``byte``."""
    nib = (np.asarray(byte).astype(np.int32) & 0xFF) >> (4 * np.asarray(high, dtype=np.int32)) & 15
    return (nib - ((nib & 8) << 1)).astype(np.float32)


def _inside(buf, index):
    """Per lane: whether an element index (list of per-lane arrays) lies inside ``buf``."""
    ok = True
    for v, extent in zip(index, buf.shape):
        ok = ok & (v >= 0) & (v < extent)
    return np.asarray(ok)


def _lanes(mask, L):
    return np.ones(L, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)


def store(interp, op, mask):
    """Elements outside the buffer are skipped (edge tiles); with ``scaled``, each stored
    element is ``alpha * acc + beta * old`` in f32 (the old value is not read where beta is 0,
    as BLAS does, so NaNs in an uninitialised output do not leak)."""
    check_warps(interp, op, mask)
    buf = interp.env[op.operands[0].id]
    acc = interp.env[op.operands[-1].id]
    L = interp.batch.L
    if op.attrs.get("scaled"):
        alpha, beta = (np.broadcast_to(np.asarray(interp.env[v.id], dtype=np.float32), (L,))
                       for v in op.operands[-3:-1])
    rc: list = []
    for e, index in enumerate(_tile_index(interp, op, mask, rc)):
        index = [np.broadcast_to(np.asarray(v), (L,)) for v in index]
        sel_mask = _lanes(mask, L) & _inside(buf, index)
        if not sel_mask.any():
            continue
        sel, pos = interp._positions(op, buf, index, sel_mask)
        v = acc[e][sel]
        if acc.dtype.kind == "i":        # an i32 accumulator: exact, or scaled into f32
            if op.attrs.get("int_scaled"):
                v = _int_scaled(interp, op, v, rc[e], sel_mask, L)
            if interp.san is not None:
                interp.san.write(interp, op, buf, pos, sel)
            buf.flat[pos] = v
            continue
        v = v.astype(np.float32)
        if op.attrs.get("scaled"):
            with np.errstate(over="ignore", invalid="ignore"):
                v = alpha[sel] * v
                b = beta[sel]
                if (b != 0).any():
                    if interp.san is not None:
                        interp.san.read(interp, op, buf, pos, sel)
                    old = semantics.cast(buf.dtype, op.operands[-1].type.dtype, buf.flat[pos])
                    v = np.where(b != 0, v + b * old.astype(np.float32), v).astype(np.float32)
        if interp.san is not None:
            interp.san.write(interp, op, buf, pos, sel)
        buf.flat[pos] = semantics.cast(op.operands[-1].type.dtype, buf.dtype, v)


def _int_scaled(interp, op, v, rowcol, sel_mask, L):
    """``f32(v) * row_scale[row] * col_scale[col]`` of the selected lanes, rounded per step."""
    rs, cs = (interp.env[o.id] for o in op.operands[-3:-1])
    row, col = (np.broadcast_to(np.asarray(x), (L,)) for x in rowcol)
    ridx = [row] if len(rs.shape) == 1 else [row, np.zeros_like(row)]
    scales = []
    for b, index in ((rs, ridx), (cs, [col])):
        sel, pos = interp._positions(op, b, index, sel_mask)
        scales.append(b.flat[pos].astype(np.float32))
    with np.errstate(over="ignore", invalid="ignore"):
        return (v.astype(np.float32) * scales[0]).astype(np.float32) * scales[1]


def copy_tile(interp, op, mask):
    """Block-collective ``dst[0:rows, 0:cols] = src[row0.., col0..]`` (zeros outside src): the
    block's threads take the tile's elements in turn (element e to thread e % T), so the
    sanitizer sees disjoint writes, as on the GPU."""
    b = interp.batch
    dst, src = (interp.env[v.id] for v in op.operands[:2])
    row0, col0 = (np.broadcast_to(np.asarray(interp.env[v.id]), (b.L,)) for v in op.operands[2:])
    rows, cols = op.attrs["rows"], op.attrs["cols"]
    tid = np.asarray(b.tid) % b.T
    active = _lanes(mask, b.L)
    for k in range(-(-rows * cols // b.T)):
        e = tid + k * b.T
        lanes = active & (e < rows * cols)
        if not lanes.any():
            break
        r, c = e // cols, e % cols
        sidx = [row0 + r, col0 + c]
        inside = lanes & _inside(src, sidx)
        vals = np.zeros(b.L, dtype=dst.dtype.storage_np)
        if inside.any():
            sel, pos = interp._positions(op, src, sidx, inside)
            if interp.san is not None:
                interp.san.read(interp, op, src, pos, sel)
            vals[sel] = src.flat[pos]
        sel, pos = interp._positions(op, dst, [r, c], lanes)
        if interp.san is not None:
            interp.san.write(interp, op, dst, pos, sel)
        dst.flat[pos] = vals[sel]


def fill(interp, op, mask):
    t = op.results[0].type
    E = len(coords(interp.batch, t)[0])
    return np.full((E, interp.batch.L), interp.env[op.operands[0].id], dtype=t.dtype.storage_np)


def mma(interp, op, mask):
    check_warps(interp, op, mask)
    b = interp.batch
    a, bm, c = (to_matrices(b, v.type, interp.env[v.id]) for v in op.operands[:3])
    return from_matrices(b, semantics.mma(a, bm, c))


def apply(interp, op, mask):
    """``mma_apply``: the region run once per element slot e, over all lanes at once, with each
    lane's element e, its (row0 + row, col0 + column) in the reference layout and the other
    fragments' element e."""
    check_warps(interp, op, mask)
    b = interp.batch
    acc_v, row_v, col_v, *others = op.operands
    t = acc_v.type
    origin = [np.asarray(_uniform_per_warp(interp, op, interp.env[v.id], mask, what))
              for v, what in ((row_v, "row"), (col_v, "column"))]
    rows, cols = coords(b, t)
    vals = [np.broadcast_to(interp.env[v.id], rows.shape) if v.type is t else
            _broadcast_rows(b, v.type, interp.env[v.id], t) for v in (acc_v, *others)]
    body = op.regions[0]
    x, r, c, *ys = body.args
    out = np.empty(rows.shape, dtype=t.dtype.storage_np)
    for e in range(len(rows)):
        interp.env[x.id] = vals[0][e]
        interp.env[r.id] = (origin[0] + rows[e]).astype(np.int32)
        interp.env[c.id] = (origin[1] + cols[e]).astype(np.int32)
        for y, v in zip(ys, vals[1:]):
            interp.env[y.id] = v[e]
        (res,) = interp.block(body, mask)
        out[e] = res
    return out


def _broadcast_rows(batch, narrow, vals, wide):
    """A one-tile-wide accumulator ``narrow`` (row_max, row_sum) laid out as ``wide``: element
    (i, j) is its element (i, j % n)."""
    mats = to_matrices(batch, narrow, vals)
    n = narrow.dims[1]
    return from_matrices(batch, mats[:, :, np.arange(wide.dims[1]) % n])


def to_a(interp, op, mask):
    """``mma_to_a``: columns col0 .. col0 + k of the accumulator, each element rounded to the A
    fragment's dtype."""
    check_warps(interp, op, mask)
    src, out = op.operands[0], op.results[0].type
    col0, k = op.attrs.get("col0", 0), out.dims[1]
    mats = to_matrices(interp.batch, src.type, interp.env[src.id])[:, :, col0:col0 + k]
    return semantics.cast(src.type.dtype, out.dtype, from_matrices(interp.batch, mats))


def row_reduce(interp, op, mask):
    """``mma_row_reduce``: per row, the maximum (NaNs ignored, as fmax) or the f32 sum in
    ascending column order (a rounding per addition), in every column of an n-tile-wide
    accumulator."""
    check_warps(interp, op, mask)
    b = interp.batch
    src = op.operands[0]
    mats = to_matrices(b, src.type, interp.env[src.id]).astype(np.float32)
    red = mats[:, :, 0]
    with np.errstate(all="ignore"):
        for j in range(1, mats.shape[2]):
            red = (np.fmax(red, mats[:, :, j]) if op.attrs["op"] == "max"
                   else (red + mats[:, :, j]).astype(np.float32))
    out = op.results[0].type
    return from_matrices(b, np.repeat(red[:, :, None], out.dims[1], axis=2).astype(np.float32))
