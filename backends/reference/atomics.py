"""Atomic read-modify-writes with a defined order: lanes are applied one after another in
increasing global linear thread id (the lane order), each getting the value it replaced.

Lanes hitting distinct elements are applied in one vector step. Collisions use a segmented
scan for order-independent integer ops, and otherwise repeat vector steps (one per collision
rank) or, when fewer elements than collisions are involved, run each element's sequence.
"""
from __future__ import annotations

import numpy as np

from ... import semantics

_BINOP = {"add": "add", "sub": "sub", "min": "min", "max": "max", "and": "and", "or": "or",
          "xor": "xor"}


def _combine(kind, dtype, old, values):
    if kind == "exch":
        return values[0]
    if kind == "cas":
        cmpv, new = values
        if dtype.is_float:  # compare bit patterns, as the hardware does
            u = np.dtype(f"u{dtype.itemsize}")
            eq = np.asarray(old).view(u) == np.asarray(cmpv).view(u)
        else:
            eq = old == cmpv
        return np.where(eq, new, old).astype(dtype.storage_np)
    return semantics.binary(_BINOP[kind], dtype, old, values[0])


def apply(kind: str, dtype, flat: np.ndarray, pos: np.ndarray, values: list) -> np.ndarray:
    """Apply atomic ``kind`` at ``flat[pos[i]]`` for i in order; return the old values."""
    n = len(pos)
    if n == 0:
        return np.zeros(0, dtype=dtype.storage_np)
    values = [np.asarray(v, dtype=dtype.storage_np) for v in values]
    order = np.argsort(pos, kind="stable")
    sp = pos[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(sp[1:], sp[:-1], out=first[1:])
    if first.all():
        old = flat[pos].copy()
        flat[pos] = _combine(kind, dtype, old, values)
        return old
    idx = np.arange(n)
    rank = idx - np.maximum.accumulate(np.where(first, idx, 0))
    maxrank = int(rank.max())
    if kind == "exch":
        return _exch(flat, pos, order, sp, first, rank, values[0])
    if dtype.is_int and kind in ("add", "sub", "and", "or", "xor", "min", "max") or \
            kind in ("min", "max"):
        return _scan(kind, dtype, flat, order, sp, first, rank, maxrank, values[0])
    groups = int(first.sum())
    if kind in ("add", "sub") and groups < maxrank + 1:
        return _per_element(kind, dtype, flat, order, sp, first, values[0])
    return _rounds(kind, dtype, flat, pos, order, rank, maxrank, values)


def _exch(flat, pos, order, sp, first, rank, v):
    vs = v[order]
    old_sorted = np.where(rank == 0, flat[sp], np.roll(vs, 1))
    last = np.append(first[1:], True)
    flat[sp[last]] = vs[last]
    old = np.empty_like(old_sorted)
    old[order] = old_sorted
    return old


def _scan(kind, dtype, flat, order, sp, first, rank, maxrank, v):
    """Segmented Hillis-Steele inclusive scan of the lanes' values per element."""
    op = _BINOP[kind]
    vs = v[order]
    if kind == "sub":  # base - v0 - v1 ... == base + (-v0) + (-v1) ... with wrapping ints
        op, vs = "add", semantics.unary("neg", dtype, vs)
    incl = np.array(vs)
    d = 1
    while d <= maxrank:
        m = rank[d:] >= d
        new = incl.copy()
        new[d:][m] = semantics.binary(op, dtype, incl[:-d][m], incl[d:][m])
        incl = new
        d *= 2
    base = flat[sp]
    prev = np.roll(incl, 1)
    old_sorted = np.where(rank == 0, base, semantics.binary(op, dtype, base, prev))
    last = np.append(first[1:], True)
    flat[sp[last]] = semantics.binary(op, dtype, base[last], incl[last])
    old = np.empty_like(old_sorted)
    old[order] = old_sorted
    return old


def _rounds(kind, dtype, flat, pos, order, rank, maxrank, values):
    """One vector step per collision rank: within a rank every element is distinct."""
    old = np.empty(len(pos), dtype=dtype.storage_np)
    by_rank = order[np.argsort(rank, kind="stable")]
    counts = np.bincount(rank, minlength=maxrank + 1)
    start = 0
    for r in range(maxrank + 1):
        lanes = np.sort(by_rank[start:start + counts[r]])
        start += counts[r]
        p = pos[lanes]
        o = flat[p].copy()
        flat[p] = _combine(kind, dtype, o, [v[lanes] if v.ndim else v for v in values])
        old[lanes] = o
    return old


def _per_element(kind, dtype, flat, order, sp, first, v):
    """Float add/sub on few elements: each element's sequence as one sequential cumsum."""
    vs = v[order]
    if kind == "sub":
        vs = semantics.unary("neg", dtype, vs)
    old_sorted = np.empty_like(vs)
    starts = np.nonzero(first)[0]
    ends = np.append(starts[1:], len(sp))
    for s, e in zip(starts, ends):
        seq = np.concatenate([flat[sp[s]:sp[s] + 1], vs[s:e]])
        acc = _sequential_sum(dtype, seq)
        old_sorted[s:e] = acc[:-1]
        flat[sp[s]] = acc[-1]
    old = np.empty_like(old_sorted)
    old[order] = old_sorted
    return old


def _sequential_sum(dtype, seq):
    """Running sums rounded to ``dtype`` after every addition: numpy's add.accumulate is
    sequential and, for f16/bf16, computes each step in f32 and rounds back (exact enough:
    f32 carries more than twice their precision, so the double rounding is harmless)."""
    with np.errstate(all="ignore"):
        return np.cumsum(seq, dtype=dtype.storage_np)
