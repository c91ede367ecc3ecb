"""Warp- and block-level ops over the lanes of a batch.

Threads of a block form warps by linear thread id (x fastest): warp ``t // W``, lane
``t % W``. The last warp of a block whose size is not a multiple of ``W`` is partial; lanes
that do not exist behave as out-of-range sources (a shuffle returns the caller's own value).
"""
from __future__ import annotations

import numpy as np

from ... import semantics

_COMBINE = {"sum": "add", "max": "max", "min": "min"}


def _lanes(batch, value):
    return np.broadcast_to(value, (batch.L,))


def shuffle(batch, mode: str, value, src):
    """CUDA ``__shfl*_sync`` semantics; idx and xor sources wrap modulo the warp width."""
    if np.ndim(value) == 0 and mode in ("idx", "xor") or np.ndim(value) == 0 and np.ndim(src) == 0:
        return value  # every lane holds the same value
    W, T = batch.warp_size, batch.T
    lane = batch.tid % W
    s = np.broadcast_to(np.asarray(src).astype(np.int64), (batch.L,))
    if mode == "idx":
        srcl, valid = s % W, True
    elif mode == "xor":
        srcl, valid = (lane ^ s) % W, True
    elif mode == "up":
        srcl = lane - s
        valid = srcl >= 0
    elif mode == "down":
        srcl = lane + s
        valid = srcl < W
    else:
        raise ValueError(f"unknown shuffle mode {mode!r}")
    t_src = batch.tid - lane + srcl
    valid = valid & (t_src < T) & (t_src >= 0)
    src_lane = np.where(valid, batch.block_local * T + t_src, batch.lane)
    v = _lanes(batch, value)
    return v[src_lane]


def _per_warp(batch, arr, fill):
    """(L,) -> (nblocks, nwarps, W), padding the last warp of each block with ``fill``."""
    W, T = batch.warp_size, batch.T
    nw = -(-T // W)
    out = np.full((batch.nblocks, nw * W), fill, dtype=arr.dtype)
    out[:, :T] = arr.reshape(batch.nblocks, T)
    return out.reshape(batch.nblocks, nw, W)


def _to_lanes(batch, per_warp):
    return per_warp[batch.block_local, batch.tid // batch.warp_size]


def _active(batch, mask):
    return np.ones(batch.L, dtype=bool) if mask is None else mask


def vote(batch, mode: str, pred, mask):
    """``any``/``all`` of ``pred`` over the active lanes of each warp."""
    p = np.asarray(_lanes(batch, pred), dtype=bool)
    a = _active(batch, mask)
    if mode == "any":
        r = _per_warp(batch, p & a, False).any(axis=-1)
    elif mode == "all":
        r = ~_per_warp(batch, a & ~p, False).any(axis=-1)
    else:
        raise ValueError(f"unknown vote mode {mode!r}")
    return _to_lanes(batch, r)


def ballot(batch, pred, mask):
    """u64 with bit k set when lane k of the warp is active and its ``pred`` holds."""
    p = np.asarray(_lanes(batch, pred), dtype=bool) & _active(batch, mask)
    bits = np.where(p, np.left_shift(np.uint64(1), (batch.tid % batch.warp_size).astype(np.uint64)),
                    np.uint64(0)).astype(np.uint64)
    r = np.bitwise_or.reduce(_per_warp(batch, bits, np.uint64(0)), axis=-1)
    return _to_lanes(batch, r)


def warp_reduce(batch, kind: str, dtype, value):
    """Xor butterfly ``v = v op shuffle_xor(v, off)`` for off = W/2 .. 1 (what the
    lower_reductions pass emits), so lowered and unlowered IR agree bit for bit."""
    op = _COMBINE[kind]
    v = np.array(_lanes(batch, value))
    off = batch.warp_size // 2
    while off >= 1:
        v = semantics.binary(op, dtype, v, shuffle(batch, "xor", v, np.int32(off)))
        off //= 2
    return v


def block_reduce(batch, kind: str, dtype, value):
    """The fixed two-level tree of :mod:`kaio.passes.lower_reductions`: within each group of 32
    consecutive threads, then over the group totals, the halving tree ``a[t] = a[t] op a[t + s]``
    for s = 16 .. 1 where ``t < s`` and ``t + s`` exists; the result is the first total."""
    op = _COMBINE[kind]
    T = batch.T
    lanes = np.array(_lanes(batch, value)).reshape(batch.nblocks, T)
    totals = [_halving_tree(lanes[:, g:g + 32].copy(), op, dtype) for g in range(0, T, 32)]
    return _halving_tree(np.stack(totals, axis=1), op, dtype)[batch.block_local]


def _halving_tree(a, op, dtype):
    """Columns of ``a`` (at most 32) combined by the strides 16 .. 1; column 0 of the result."""
    n = a.shape[1]
    s = 16
    while s >= 1:
        k = min(s, n - s)
        if k > 0:
            a[:, :k] = semantics.binary(op, dtype, a[:, :k], a[:, s:s + k])
        s //= 2
    return a[:, 0]
