"""Checked mode and the per-block partition.

- ``checked_mode``: kernels compiled with ``checked=True`` (every access bounds-checked on the
  device, :mod:`kaio.passes.bounds_check`). In-bounds kernels (a guarded stencil, rows, a
  shared-memory exchange) must compute exactly what the unchecked ones do; kernels with exactly
  one out-of-bounds access (a read past the end, a negative index, an atomic past the end) must
  raise the same ``IndexError`` on every target: the outputs are the error's buffer, index,
  shape and thread as integers. ``bitwise``.
- ``per_block``: ``kaio.regions.per_block()`` outputs (one element per block, written by its
  first thread after a ``block_sum``), 1-D over f32 with integer-valued data (exact in any
  order) and over i32, and 2-D. ``bitwise``.
"""
import numpy as np

import kaio
from kaio import f32, i32

from ..rules import BITWISE
from ._util import feature


def _stencil(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        left = x[i - 1] if i > 0 else 0.0
        right = x[i + 1] if i + 1 < x.shape[0] else 0.0
        y[i] = left - 2.0 * x[i] + right


def _row_sums(m: kaio.In[i32, 2], y: kaio.Region[i32]):
    for r in y.owned():
        s = i32(0)
        for c in range(m.shape[1]):
            s += m[r, c] * (c + 1)
        y[r] = s


def _shared_swap(x: kaio.In[f32], y: kaio.Raw[f32]):
    sh = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.block_idx.x * 64 + t
    sh[t] = x[g]
    kaio.sync()
    y[g] = sh[63 - t] * 0.5


def _read_past_end(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = x[i + 1]


def _negative_index(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = x[i - 1]


def _atomic_past_end(keys: kaio.In[i32], hist: kaio.Atomic[i32]):
    i = kaio.global_id()
    if i < keys.shape[0]:
        kaio.atomic_add(hist, keys[i], 1)


IN_BOUNDS = {f.__name__: kaio.kernel(f, checked=True) for f in (_stencil, _row_sums, _shared_swap)}
FAULTING = {f.__name__: kaio.kernel(f, checked=True)
            for f in (_read_past_end, _negative_index, _atomic_past_end)}


def _checked_inputs():
    g = np.random.default_rng(21)
    return {"x": g.standard_normal(300).astype(np.float32),
            "m": g.integers(-100, 100, (37, 9)).astype(np.int32),
            "xs": g.standard_normal(192).astype(np.float32),
            "keys": np.array([0, 1, 2, 3, 4, 1, 2, 3], np.int32)}


def _fault(kern, grid, block, args) -> np.ndarray:
    """[raised, index..., shape..., thread] of the launch's IndexError (zeros when none)."""
    try:
        kern[grid, block](*args)
    except IndexError as e:
        idx, shape = tuple(getattr(e, "index", ()) or ()), tuple(getattr(e, "shape", ()) or ())
        return np.array([1, *idx, *shape, int(getattr(e, "thread", -1) or 0)], np.int64)
    return np.zeros(1, np.int64)


def _checked_run(inp):
    x, m, xs = inp["x"], inp["m"], inp["xs"]
    y = np.zeros_like(x)
    IN_BOUNDS["_stencil"](x, y)
    ys = np.zeros(m.shape[0], np.int32)
    IN_BOUNDS["_row_sums"](m, ys)
    yx = np.zeros_like(xs)
    IN_BOUNDS["_shared_swap"][3, 64](xs, yx)
    five = np.arange(5, dtype=np.float32)
    return {"stencil": y, "row_sums": ys, "shared_swap": yx,
            "read_past_end": _fault(FAULTING["_read_past_end"], 1, 8, [five, np.zeros(5, np.float32)]),
            "negative_index": _fault(FAULTING["_negative_index"], 1, 8, [five, np.zeros(5, np.float32)]),
            "atomic_past_end": _fault(FAULTING["_atomic_past_end"], 1, 8,
                                      [inp["keys"], np.zeros(4, np.int32)])}


def _checked_expected(inp):
    x = inp["x"].astype(np.float32)
    left = np.concatenate([[0], x[:-1]]).astype(np.float32)
    right = np.concatenate([x[1:], [0]]).astype(np.float32)
    sten = (left - np.float32(2.0) * x) + right
    m = inp["m"].astype(np.int64)
    rows = (m * np.arange(1, m.shape[1] + 1)).sum(axis=1).astype(np.int32)
    xs = inp["xs"].reshape(3, 64)[:, ::-1].reshape(-1) * np.float32(0.5)
    return {"stencil": sten, "row_sums": rows, "shared_swap": xs,
            # the one faulting thread: index (thread, buffer) and shape of the buffer
            "read_past_end": np.array([1, 5, 5, 4], np.int64),
            "negative_index": np.array([1, -1, 5, 0], np.int64),
            "atomic_past_end": np.array([1, 4, 4, 4], np.int64)}


@kaio.kernel
def block_totals(x: kaio.In[f32], xi: kaio.In[i32], part: kaio.Out[f32, kaio.regions.per_block()],
                 parti: kaio.Out[i32, kaio.regions.per_block()]):
    s = f32(0.0)
    si = i32(0)
    for i in range(kaio.global_id(), x.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
        s += x[i]
        si += xi[i]
    total = kaio.block_sum(s)
    totali = kaio.block_sum(si)
    if kaio.thread_idx.x == 0:
        part[kaio.block_idx.x] = total
        parti[kaio.block_idx.x] = totali


@kaio.kernel
def block_max_2d(x: kaio.In[f32, 2], part: kaio.Out[f32, 2, kaio.regions.per_block()]):
    r = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    c = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    v = x[r, c] if r < x.shape[0] and c < x.shape[1] else -1.0e30
    m = kaio.block_max(v)
    if kaio.thread_idx.x == 0 and kaio.thread_idx.y == 0:
        part[kaio.block_idx.y, kaio.block_idx.x] = m


GRID, BLOCK = 6, 128


def _pb_inputs():
    g = np.random.default_rng(31)
    return {"x": g.integers(-50, 50, 2000).astype(np.float32),
            "xi": g.integers(-10**6, 10**6, 2000).astype(np.int32),
            "m": g.standard_normal((40, 70)).astype(np.float32)}


def _pb_run(inp):
    part, parti = np.zeros(GRID, np.float32), np.zeros(GRID, np.int32)
    block_totals[GRID, BLOCK](inp["x"], inp["xi"], part, parti)
    p2 = np.zeros((3, 5), np.float32)
    block_max_2d[(5, 3), (16, 16)](inp["m"], p2)
    return {"part": part, "parti": parti, "max2d": p2}


def _pb_expected(inp):
    def per_block(v):
        pad = np.zeros(-len(v) % (GRID * BLOCK), v.dtype)
        return np.concatenate([v, pad]).reshape(-1, GRID, BLOCK).sum(axis=(0, 2))
    m = np.full((48, 80), -1.0e30, np.float32)
    m[:40, :70] = inp["m"]
    return {"part": per_block(inp["x"]).astype(np.float32),
            "parti": per_block(inp["xi"].astype(np.int64)).astype(np.int32),
            "max2d": m.reshape(3, 16, 5, 16).max(axis=(1, 3))}


def cases():
    return [feature("checked_mode", _checked_inputs, _checked_run, _checked_expected, rule=BITWISE,
                    description="checked=True: in-bounds kernels exact, one out-of-bounds "
                                "access raising the same IndexError (index, shape, thread)"),
            feature("partition_per_block", _pb_inputs, _pb_run, _pb_expected, rule=BITWISE,
                    description="kaio.regions.per_block(): 1-D f32 (integer data) and i32 "
                                "block sums, a 2-D block max")]
