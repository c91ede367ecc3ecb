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
  up to the f32 accumulation the scalar kernel has too. (``q * s`` has at most 15 significant
  bits, and ``lo`` the ones ``hi`` lacks; both are exact for bf16, and for f16 whenever the
  scales are normal, >= 2**-14; smaller f16 scales lose at most 2**-25 absolute per weight in
  ``lo``.) The output is rounded once to T (``kaio.mma.store``).

:mod:`kaio.kernels.ml.quant` launches them where the backend compiles them (W4A16 everywhere
fragments are lowered; W8A8 where ``m16n8k32`` is: kaio's PTX path, the LLVM nvptx64 path,
gfx942, the reference backend) and falls back to its scalar kernels elsewhere (gfx90a has no
int8 MFMA lowering) and for f32 activations.
"""
import functools

import kaio
from kaio import f32, i32

from .tiled import double_buffered, warp_origins


@kaio.func
def int4_at(packed_byte, high):
    """The signed int4 in one nibble of a byte (as i32): low nibble when high == 0."""
    nib = (i32(packed_byte) >> (4 * high)) & 15
    return nib - ((nib & 8) << 1)


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

    origins = warp_origins(BM, BN, WM, WN)
    k_loop = double_buffered(stage, step, BK)

    @kaio.kernel(block=(nthreads,))
    def matmul_w8a8_mma(a: kaio.In[kaio.i8, 2], b: kaio.In[kaio.i8, 2], sa: kaio.In[f32, 2],
                        sb: kaio.In[f32], c: kaio.Raw[f32, 2]):
        As0 = kaio.shared_array(kaio.i8, (BM, BK + PAD))
        Bs0 = kaio.shared_array(kaio.i8, (BK, BN + PAD))
        As1 = kaio.shared_array(kaio.i8, (BM, BK + PAD))
        Bs1 = kaio.shared_array(kaio.i8, (BK, BN + PAD))
        wm, wn, row0, col0 = origins()
        acc = kaio.mma.fill(i32, 0, m=WM, n=WN)
        acc = k_loop(As0, Bs0, As1, Bs1, a, b, row0, col0, wm, wn, acc, a.shape[1])
        kaio.mma.store(c, row0 + wm, col0 + wn, acc, row_scale=sa, col_scale=sb)

    return matmul_w8a8_mma


def w8a8_launch_config(m: int, n: int, warp_size: int = 32):
    """(grid, block) of :func:`w8a8_kernel` for an [m, n] output."""
    return ((-(-n // BN), -(-m // BM)), (threads(BM, BN, WM, WN, warp_size),))


@functools.lru_cache(maxsize=None)
def w4a16_kernel(dt: str, warp_size: int = 32):
    """y = x @ dequant(w) on f16/bf16 fragments (``dt``), weights split into hi + lo parts;
    double-buffered: the block stages K-step k + 1 (x by copy_tile, the weights dequantized)
    while its warps multiply step k, one barrier per step."""
    T = {"f16": kaio.f16, "bf16": kaio.bf16}[dt]
    nthreads = threads(QBM, QBN, QWM, QWN, warp_size)
    rows = nthreads // QBN          # the 2-d block's y extent

    @kaio.func
    def dequant(Wh, Wl, packed, scales, k0, col0, group):
        """Block-cooperative: Wh + Wl = q * s of the K-step at k0 (zeros outside the weights);
        each thread takes one byte (two k, one group: the group size is even) of its column at
        a time."""
        n = col0 + kaio.thread_idx.x
        for kp in range(kaio.thread_idx.y, QBK // 2, rows):
            kb = k0 // 2 + kp
            byte = kaio.u8(0)
            s = f32(0.0)
            if kb < packed.shape[0] and n < packed.shape[1]:
                byte = packed[kb, n]
                s = f32(scales[(2 * kb) // group, n])
            for h in kaio.static_range(2):
                w = f32(int4_at(byte, h)) * s
                hi = T(w)
                Wh[2 * kp + h, kaio.thread_idx.x] = hi
                Wl[2 * kp + h, kaio.thread_idx.x] = T(w - f32(hi))     # exact: w - hi fits f32

    @kaio.func
    def stage(Xs, Wh, Wl, x, packed, scales, row0, col0, k0, group):
        kaio.mma.copy_tile(Xs, x, row0, k0, cols=QBK)
        dequant(Wh, Wl, packed, scales, k0, col0, group)

    @kaio.func
    def step(Xs, Wh, Wl, wm, wn, acc):
        for kk in kaio.static_range(QBK // 16):
            a = kaio.mma.load_a(Xs, wm, kk * 16, m=QWM, k=16)
            acc = kaio.mma.mma(a, kaio.mma.load_b(Wh, kk * 16, wn, k=16, n=QWN), acc)
            acc = kaio.mma.mma(a, kaio.mma.load_b(Wl, kk * 16, wn, k=16, n=QWN), acc)
        return acc

    @kaio.kernel(block=(QBN, rows))     # 2-d: x walks the weight tile's columns
    def matmul_w4a16_mma(x: kaio.In[T, 2], packed: kaio.In[kaio.u8, 2], scales: kaio.In[T, 2],
                         y: kaio.Raw[T, 2], group: kaio.Const[int]):
        Xs0 = kaio.shared_array(T, (QBM, QBK + QPAD))
        Wh0 = kaio.shared_array(T, (QBK, QBN + QPAD))
        Wl0 = kaio.shared_array(T, (QBK, QBN + QPAD))
        Xs1 = kaio.shared_array(T, (QBM, QBK + QPAD))
        Wh1 = kaio.shared_array(T, (QBK, QBN + QPAD))
        Wl1 = kaio.shared_array(T, (QBK, QBN + QPAD))
        warp = (kaio.thread_idx.y * QBN + kaio.thread_idx.x) // kaio.warp_size
        wm = (warp // (QBN // QWN)) * QWM
        wn = (warp % (QBN // QWN)) * QWN
        row0 = kaio.block_idx.y * QBM
        col0 = kaio.block_idx.x * QBN
        acc = kaio.mma.fill(f32, 0.0, m=QWM, n=QWN)
        stage(Xs0, Wh0, Wl0, x, packed, scales, row0, col0, 0, group)
        kaio.sync()
        for k0 in range(0, x.shape[1], 2 * QBK):
            stage(Xs1, Wh1, Wl1, x, packed, scales, row0, col0, k0 + QBK, group)
            acc = step(Xs0, Wh0, Wl0, wm, wn, acc)
            kaio.sync()
            stage(Xs0, Wh0, Wl0, x, packed, scales, row0, col0, k0 + 2 * QBK, group)
            acc = step(Xs1, Wh1, Wl1, wm, wn, acc)
            kaio.sync()
        kaio.mma.store(y, row0 + wm, col0 + wn, acc)

    return matmul_w4a16_mma


def w4a16_launch_config(m: int, n: int, warp_size: int = 32):
    """(grid, block) of :func:`w4a16_kernel` for an [m, n] output (a 2-d block)."""
    return ((-(-n // QBN), -(-m // QBM)), (QBN, threads(QBM, QBN, QWM, QWN, warp_size) // QBN))
