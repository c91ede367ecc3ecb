"""Shared-memory tiled matmul (f64 or f32), used by MAT_MAT_SHARED, GEMM, 2MM and attention.

``c = sum_k (alpha * a[i, k]) * b[k, j]``, optionally added to ``beta * c`` (2MM's second
product). Each TILE x TILE block stages one tile of ``a`` and one of ``b`` in shared memory per
step along k; out-of-range elements load as 0, so any shape works.
"""
import functools

import numpy as np

import kaio
from kaio import regions

from .._launch import cdiv

TILE = 16
_DTYPES = {"float64": kaio.f64, "float32": kaio.f32}


@functools.lru_cache(maxsize=None)
def _kernel(dtype_name: str = "float64"):
    T = _DTYPES[dtype_name]

    @kaio.kernel
    def matmul_tiled(a: kaio.In[T, 2], b: kaio.In[T, 2], c: kaio.Region[T, regions.tiles(TILE, TILE)],
                     alpha: T, beta: T, accumulate: kaio.Const[bool]):
        """The tiles partition gives thread (tx, ty) of block (bx, by) the element
        (by*TILE + ty, bx*TILE + tx): the one this thread accumulates."""
        a_tile = kaio.shared_array(T, (TILE, TILE))
        b_tile = kaio.shared_array(T, (TILE, TILE))
        tx = kaio.thread_idx.x
        ty = kaio.thread_idx.y
        row = kaio.block_idx.y * TILE + ty
        col = kaio.block_idx.x * TILE + tx
        n = a.shape[1]
        acc = T(0.0)
        for t in range((n + TILE - 1) // TILE):
            av = T(0.0)
            if row < a.shape[0] and t * TILE + tx < n:
                av = a[row, t * TILE + tx]
            a_tile[ty, tx] = av
            bv = T(0.0)
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
    return matmul_tiled


def tiled_launcher(a, b, c, alpha: float = 1.0, beta: float = 0.0, accumulate: bool = False):
    """A zero-argument launch of the tiled kernel on (device) arrays, for timing."""
    grid = (cdiv(c.shape[1], TILE), cdiv(c.shape[0], TILE))
    k = _kernel(np.dtype(c.dtype).name)[grid, (TILE, TILE)]
    return lambda: k(a, b, c, float(alpha), float(beta), accumulate)


def matmul_tiled(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, c: np.ndarray | None = None,
                 beta: float = 0.0) -> np.ndarray:
    """alpha * (a @ b) [+ beta * c] for f64 or f32 arrays: a new array, or ``c`` updated in
    place when given."""
    accumulate = c is not None
    if c is None:
        c = np.zeros((a.shape[0], b.shape[1]), a.dtype)
    tiled_launcher(a, b, c, alpha, beta, accumulate)()
    return c
