"""The quantized matmuls on the matrix units (kaio.mma fragments); conventions: kaio.kernels.ml.quant.

- W8A8 (:func:`w8a8_kernel`): i8 x i8 on ``m16n8k32`` fragments with exact i32 accumulation.
  A block computes a ``BM x BN`` tile of c with eight ``WM x WN`` warp tiles; the K loop is
  double-buffered (``kaio.mma.copy_tile`` of the next K-step while the warps multiply this one).
  Each warp stores its own tile of c (``kaio.Raw``) with the scaling epilogue of
  ``kaio.mma.store(..., row_scale=sa, col_scale=sb)``: ``c = f32(acc) * sa[m] * sb[n]``, the
  same three f32 roundings as the scalar kernel.
- W4A16 (:func:`w4a16_kernel`): f16/bf16 activations on ``m16n8k16`` fragments. The block
  dequantizes its K-step of the packed weights cooperatively into shared tiles. A weight
  ``q * s`` (int4 times an f16/bf16 scale) needs up to 15 significant bits, more than f16 or
  bf16 hold, so it is split into ``hi = T(q * s)`` and ``lo = T(q * s - hi)`` (exact in f32)
  and both are multiplied: ``x @ hi + x @ lo`` with f32 accumulation equals ``x @ (q * s)``
  up to the f32 accumulation the scalar kernel has too (a ``lo`` below T's normal range may
  lose bits: below 2**-24 relative to the weight for f16 scales, none for bf16). The output is
  rounded once to T (``kaio.mma.store``).

Both are kaio's PTX path's and the reference backend's; :mod:`kaio.kernels.ml.quant` falls back
to its scalar kernels where a target does not compile them (the LLVM paths have no
``m16n8k32``) or the dtype has no fragments (f32 activations).
"""
import functools

import kaio
from kaio import f32, i32

from .quant import int4_at

#: W8A8 block tile, K step and warp tile; PAD: bytes of row padding of the shared i8 tiles
BM, BN, BK, WM, WN = 128, 128, 64, 64, 32
PAD = 16
#: W4A16: block tile (64 rows: the activations are few at decode/prefill sizes), K step, warp
#: tile; rows of the f16/bf16 shared tiles padded by 8 elements (16 bytes)
QBM, QBN, QBK, QWM, QWN, QPAD = 64, 128, 32, 32, 32, 8


def threads(bm, bn, wm, wn, warp_size):
    return (bm // wm) * (bn // wn) * warp_size


@functools.lru_cache(maxsize=None)
def w8a8_kernel(warp_size: int = 32):
    """c = diag(sa) (a @ b) diag(sb) on i8 fragments (exact i32 sums). ``sa`` is [M, 1]."""
    nthreads = threads(BM, BN, WM, WN, warp_size)

    @kaio.func
    def stage(As, Bs, a, b, row0, col0, k0):
        kaio.mma.copy_tile(As, a, row0, k0, cols=BK)
        kaio.mma.copy_tile(Bs, b, k0, col0, cols=BN)

    @kaio.func
    def step(As, Bs, wm, wn, acc):
        for kk in kaio.static_range(BK // 32):
            acc = kaio.mma.mma(kaio.mma.load_a(As, wm, kk * 32, m=WM, k=32),
                               kaio.mma.load_b(Bs, kk * 32, wn, k=32, n=WN), acc)
        return acc

    @kaio.kernel(block=(nthreads,))
    def matmul_w8a8_mma(a: kaio.In[kaio.i8, 2], b: kaio.In[kaio.i8, 2], sa: kaio.In[f32, 2],
                        sb: kaio.In[f32], c: kaio.Raw[f32, 2]):
        As0 = kaio.shared_array(kaio.i8, (BM, BK + PAD))
        Bs0 = kaio.shared_array(kaio.i8, (BK, BN + PAD))
        As1 = kaio.shared_array(kaio.i8, (BM, BK + PAD))
        Bs1 = kaio.shared_array(kaio.i8, (BK, BN + PAD))
        warp = kaio.thread_idx.x // kaio.warp_size
        wm = (warp // (BN // WN)) * WM
        wn = (warp % (BN // WN)) * WN
        row0 = kaio.block_idx.y * BM
        col0 = kaio.block_idx.x * BN
        acc = kaio.mma.fill(i32, 0, m=WM, n=WN)
        stage(As0, Bs0, a, b, row0, col0, 0)
        kaio.sync()
        for k0 in range(0, a.shape[1], 2 * BK):
            stage(As1, Bs1, a, b, row0, col0, k0 + BK)
            acc = step(As0, Bs0, wm, wn, acc)
            kaio.sync()
            stage(As0, Bs0, a, b, row0, col0, k0 + 2 * BK)
            acc = step(As1, Bs1, wm, wn, acc)
            kaio.sync()
        kaio.mma.store(c, row0 + wm, col0 + wn, acc, row_scale=sa, col_scale=sb)

    return matmul_w8a8_mma


def w8a8_launch_config(m: int, n: int, warp_size: int = 32):
    """(grid, block) of :func:`w8a8_kernel` for an [m, n] output."""
    return ((-(-n // BN), -(-m // BM)), (threads(BM, BN, WM, WN, warp_size),))


@functools.lru_cache(maxsize=None)
def w4a16_kernel(dt: str, warp_size: int = 32):
    """y = x @ dequant(w) on f16/bf16 fragments (``dt``), weights split into hi + lo parts."""
    T = {"f16": kaio.f16, "bf16": kaio.bf16}[dt]
    nthreads = threads(QBM, QBN, QWM, QWN, warp_size)

    @kaio.func
    def dequant(Wh, Wl, packed, scales, k0, col0, group):
        """Block-cooperative: Wh + Wl = q * s of the K-step at k0 (zeros outside the weights)."""
        nn = kaio.thread_idx.x                        # this thread's column, rows in turn
        for kk in range(kaio.thread_idx.y, QBK, nthreads // QBN):
            k = k0 + kk
            n = col0 + nn
            w = f32(0.0)
            if k < 2 * packed.shape[0] and n < packed.shape[1]:
                w = f32(int4_at(packed[k // 2, n], k % 2)) * f32(scales[k // group, n])
            hi = T(w)
            Wh[kk, nn] = hi
            Wl[kk, nn] = T(w - f32(hi))       # exact: w - hi fits f32

    @kaio.kernel(block=(QBN, nthreads // QBN))     # 2-d: x walks the weight tile's columns
    def matmul_w4a16_mma(x: kaio.In[T, 2], packed: kaio.In[kaio.u8, 2], scales: kaio.In[T, 2],
                         y: kaio.Raw[T, 2], group: kaio.Const[int]):
        Xs = kaio.shared_array(T, (QBM, QBK + QPAD))
        Wh = kaio.shared_array(T, (QBK, QBN + QPAD))
        Wl = kaio.shared_array(T, (QBK, QBN + QPAD))
        warp = (kaio.thread_idx.y * QBN + kaio.thread_idx.x) // kaio.warp_size
        wm = (warp // (QBN // QWN)) * QWM
        wn = (warp % (QBN // QWN)) * QWN
        row0 = kaio.block_idx.y * QBM
        col0 = kaio.block_idx.x * QBN
        acc = kaio.mma.fill(f32, 0.0, m=QWM, n=QWN)
        for k0 in range(0, x.shape[1], QBK):
            kaio.mma.copy_tile(Xs, x, row0, k0, cols=QBK)
            dequant(Wh, Wl, packed, scales, k0, col0, group)
            kaio.sync()
            for kk in kaio.static_range(QBK // 16):
                a = kaio.mma.load_a(Xs, wm, kk * 16, m=QWM, k=16)
                acc = kaio.mma.mma(a, kaio.mma.load_b(Wh, kk * 16, wn, k=16, n=QWN), acc)
                acc = kaio.mma.mma(a, kaio.mma.load_b(Wl, kk * 16, wn, k=16, n=QWN), acc)
            kaio.sync()
        kaio.mma.store(y, row0 + wm, col0 + wn, acc)

    return matmul_w4a16_mma


def w4a16_launch_config(m: int, n: int, warp_size: int = 32):
    """(grid, block) of :func:`w4a16_kernel` for an [m, n] output (a 2-d block)."""
    return ((-(-n // QBN), -(-m // QBM)), (QBN, threads(QBM, QBN, QWM, QWN, warp_size) // QBN))
