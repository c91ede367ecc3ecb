"""Shared-memory tiled float64 matmul used by MAT_MAT_SHARED, GEMM and 2MM.

``c = sum_k (alpha * a[i, k]) * b[k, j]``, optionally added to ``beta * c`` (2MM's second
product). Each TILE x TILE block stages one tile of ``a`` and one of ``b`` in shared memory per
step along k; out-of-range elements load as 0, so any shape works.
"""
import functools

import numpy as np

import kaio
from kaio import f64

from .._launch import cdiv

TILE = 16


@functools.lru_cache(maxsize=None)
def _kernel():
    from kaio import regions

    @kaio.kernel
    def matmul_tiled_f64(a: kaio.In[f64, 2], b: kaio.In[f64, 2],
                         c: kaio.Region[f64, regions.tiles(TILE, TILE)],
                         alpha: f64, beta: f64, accumulate: kaio.Const[bool]):
        """The tiles partition gives thread (tx, ty) of block (bx, by) the element
        (by*TILE + ty, bx*TILE + tx): the one this thread accumulates."""
        a_tile = kaio.shared_array(f64, (TILE, TILE))
        b_tile = kaio.shared_array(f64, (TILE, TILE))
        tx = kaio.thread_idx.x
        ty = kaio.thread_idx.y
        row = kaio.block_idx.y * TILE + ty
        col = kaio.block_idx.x * TILE + tx
        n = a.shape[1]
        acc = f64(0.0)
        for t in range((n + TILE - 1) // TILE):
            av = f64(0.0)
            if row < a.shape[0] and t * TILE + tx < n:
                av = a[row, t * TILE + tx]
            a_tile[ty, tx] = av
            bv = f64(0.0)
            if t * TILE + ty < n and col < b.shape[1]:
                bv = b[t * TILE + ty, col]
            b_tile[ty, tx] = bv
            kaio.sync()
            for kk in range(TILE):
                acc += alpha * a_tile[ty, kk] * b_tile[kk, tx]
            kaio.sync()
        for i, j in c.owned():
            if accumulate:
                c[i, j] = beta * c[i, j] + acc
            else:
                c[i, j] = acc
    return matmul_tiled_f64


def matmul_tiled(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, c: np.ndarray | None = None,
                 beta: float = 0.0) -> np.ndarray:
    """alpha * (a @ b) [+ beta * c]: a new array, or ``c`` updated in place when given."""
    accumulate = c is not None
    if c is None:
        c = np.zeros((a.shape[0], b.shape[1]), np.float64)
    grid = (cdiv(c.shape[1], TILE), cdiv(c.shape[0], TILE))
    _kernel()[grid, (TILE, TILE)](a, b, c, float(alpha), float(beta), accumulate)
    return c
