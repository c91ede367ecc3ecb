"""An f32 matmul on f16 matrix fragments (split operands), for quantized attention's Q K^T
and P V.

``c = a @ b`` (or ``a @ b.T`` with ``trans_b``) with a, b and c f32. Each operand value is
split into two f16 parts, ``x = xh + xl`` with ``xh = f16(x)`` and ``xl = f16(x - xh)`` (22
significant bits of x's 24), and three ``m16n8k16`` products accumulate in f32:
``ah bh + ah bl + al bh`` (the dropped ``al bl`` is below 2**-22 of ``|a b|``). Each product of
f16 parts is exact in f32, so the result is the f32 product up to a few 2**-24 of ``|a b|`` per
term (at most 2**-21) plus the f32 accumulation the scalar kernel has too; values below f16's
normal range (2**-14) lose at most 2**-25 absolute in their low part, and values beyond 65504
overflow: attention's Q, K (projections of int8 data) and V are O(1), P is in [0, 1].

A block computes a ``BM x BN`` tile of c with four ``WM x WN`` warp tiles; the block splits
each ``BK``-wide K step of a and b cooperatively into shared f16 tiles (a 2-d block: x walks
the columns, so each thread writes its own elements), one barrier each side of the multiply.
"""
import functools

import kaio
from kaio import f16, f32

BM, BN, BK, WM, WN, PAD = 64, 64, 32, 32, 32, 8
COLS = 32                       # the 2-d block's x extent (BK and BN are multiples of it)


@kaio.func
def split_into(hi, lo, src, row0, col0, rows, cols, ny):
    """hi + lo = src[row0:row0+rows, col0:col0+cols] (zeros outside src), block-cooperative."""
    for r in range(kaio.thread_idx.y, rows, ny):
        for c2 in kaio.static_range(cols // COLS):
            c = c2 * COLS + kaio.thread_idx.x
            v = f32(0.0)
            if row0 + r < src.shape[0] and col0 + c < src.shape[1]:
                v = src[row0 + r, col0 + c]
            h = f16(v)
            hi[r, c] = h
            lo[r, c] = f16(v - f32(h))          # exact in f32


@functools.lru_cache(maxsize=None)
def matmul_kernel(warp_size: int = 32, trans_b: bool = False):
    """The split-f16 fragment matmul for one warp width (four warps per block); ``trans_b``:
    b is [N, K] and c = a @ b.T (staged as N x K tiles, loaded ``trans=True``)."""
    nthreads = (BM // WM) * (BN // WN) * warp_size
    ny = nthreads // COLS
    b_tile = (BN, BK + PAD) if trans_b else (BK, BN + PAD)

    @kaio.func
    def load_b(Bs, kk, wn):
        if trans_b:      # a compile-time choice (one return: a func's early return cannot
            b = kaio.mma.load_b(Bs, wn, kk * 16, trans=True, k=16, n=WN)  # yield a fragment)
        else:
            b = kaio.mma.load_b(Bs, kk * 16, wn, k=16, n=WN)
        return b

    @kaio.kernel(block=(COLS, ny))
    def matmul_f32_split(a: kaio.In[f32, 2], b: kaio.In[f32, 2], c: kaio.Raw[f32, 2]):
        Ah = kaio.shared_array(f16, (BM, BK + PAD))
        Al = kaio.shared_array(f16, (BM, BK + PAD))
        Bh = kaio.shared_array(f16, b_tile)
        Bl = kaio.shared_array(f16, b_tile)
        warp = (kaio.thread_idx.y * COLS + kaio.thread_idx.x) // kaio.warp_size
        wm = (warp // (BN // WN)) * WM
        wn = (warp % (BN // WN)) * WN
        row0 = kaio.block_idx.y * BM
        col0 = kaio.block_idx.x * BN
        acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN)
        for k0 in range(0, a.shape[1], BK):
            split_into(Ah, Al, a, row0, k0, BM, BK, ny)
            if trans_b:
                split_into(Bh, Bl, b, col0, k0, BN, BK, ny)
            else:
                split_into(Bh, Bl, b, k0, col0, BK, BN, ny)
            kaio.sync()
            for kk in kaio.static_range(BK // 16):
                ah = kaio.mma.load_a(Ah, wm, kk * 16, m=WM, k=16)
                al = kaio.mma.load_a(Al, wm, kk * 16, m=WM, k=16)
                bh = load_b(Bh, kk, wn)
                acc = kaio.mma.mma(al, bh, acc)
                acc = kaio.mma.mma(ah, load_b(Bl, kk, wn), acc)
                acc = kaio.mma.mma(ah, bh, acc)
            kaio.sync()
        kaio.mma.store(c, row0 + wm, col0 + wn, acc)

    return matmul_f32_split


def launch_config(m: int, n: int, warp_size: int = 32):
    """(grid, block) of :func:`matmul_kernel` for an [m, n] output (a 2-d block)."""
    return ((-(-n // BN), -(-m // BM)), (COLS, (BM // WM) * (BN // WN) * warp_size // COLS))
