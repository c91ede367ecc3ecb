"""W4A16 on warp-group multiplies: y = x @ dequant(w) computed as its transpose, y^T = W^T x^T.

Hopper's wgmma reads its B operand from shared memory only, but its A operand may come from
registers. So the kernel makes the *weights* the A operand: each warp unpacks its 16 columns of
the packed int4 tile into an f16/bf16 A fragment of W^T (``kaio.mma.load_a_int4``: one byte load
and three ALU instructions per register, no conversion unit), and the block's x tile, staged
in a 128-byte-swizzled ``kaio.mma.shared_tile``, is the B operand every warp shares
(``kaio.mma.group_mma(a, Xs, ...)``, B transposed: x is K-major). One wgmma per four warps
then multiplies a 64 x 16 slice of W^T by a 16 x BM slice of x^T: each unpacked weight serves
BM rows of x at once, where mma.sync's warp tiles re-read and re-issue it per 8 columns (the
pipelined tilings of :mod:`.quant_mma` spend 8.5 SASS instructions per HMMA on the H200).
The accumulator is y^T's tile, stored transposed (``kaio.mma.store(..., trans=True)``).

The scale is folded per quantization group as in :mod:`.quant_mma`: the group's products
accumulate exactly in ``tmp`` and ``acc += tmp * s[g, n]`` where the group ends (one f32 fma;
n is the accumulator's row here). The K loop keeps S - 2 K-steps of copies in flight and
refills the stage read two steps before, so on sm_90 a step's wgmmas keep running through the
next barrier (backends/ptx_wgmma.py) until a fold reads them. Elsewhere each warp's
``mma.sync`` path computes the same products (the reference backend, sm_80, the LLVM paths
and AMD's MFMA run it too).

Tilings (``quant_mma.W4_TILES``' ``wg*`` entries, in y's coordinates): a block computes a
BM x BN tile of y with BN / 16 warps, warp w the columns 16 w .. 16 w + 15 for all BM rows
(its warp tile BM x 16).
"""
import functools

import kaio
from kaio import f32

from .quant_stages import group_ends, over, stages


@kaio.func
def _fold_rows(x, r, c, t, scales, g):
    """acc + tmp * s[g, r]: the accumulator's row r is the weights' column n. Indices clamped
    into the scales (past N or the groups tmp is 0, so x stays)."""
    s = f32(scales[min(g, scales.shape[0] - 1), min(r, scales.shape[1] - 1)])
    return kaio.math.fma(t, s, x)


@kaio.func
def _scale_at(x, r, c, scales, g):
    """s[g, r] as f32, indices clamped as in :func:`_fold_rows` (an m x 8 fragment of a
    group's scales, loaded before the products it scales so its latency hides behind them;
    g is -1 in a step before the first group ends, where nothing folds)."""
    return f32(scales[max(min(g, scales.shape[0] - 1), 0), min(r, scales.shape[1] - 1)])


@kaio.func
def _fold_scaled(x, r, c, t, s):
    return kaio.math.fma(t, s, x)


@functools.lru_cache(maxsize=None)
def kernel(T, warp_size: int, BM: int, BN: int, BK: int, S: int):
    """The W4A16 kernel for activations of dtype T of one warp-group tiling: the block's BM
    rows of y (wgmma's n: a multiple of 8 up to 256), BN columns (16 per warp), K step BK (a
    multiple of 64: whole swizzle rows) and S stages."""
    span = S * BK
    buffers, stage = stages(T, BM, BN, BK, S, swizzled=True)

    @kaio.func
    def fold(acc, tmp, end, at, S_, r0, c0, group):
        """Where a group ends at K offset ``end`` (``at`` into the loop iteration), acc takes
        its scaled products and tmp starts over."""
        if group_ends(end, at, group, span):
            acc = kaio.mma.apply(_fold_rows, acc, r0, c0, tmp, S_, over(end, group) - 1)
            tmp = kaio.mma.fill(f32, 0.0, m=16, n=BM)
        return acc, tmp

    @kaio.func
    def step(Xs, Ps, acc, tmp, wn, kstep, s, S_, r0, c0, group):
        """One staged K-step: the warp's A fragments unpacked, one group mma per 16-deep slice
        (the whole step at once where groups end only at step ends: then the scales of the
        group a fold would close are loaded first, so the fold after wgmma's wait does not
        wait on global memory too)."""
        if group % BK == 0:
            end = kstep + BK
            sc = kaio.mma.apply(_scale_at, kaio.mma.fill(f32, 0.0, m=16, n=8), r0, 0, S_,
                                over(end, group) - 1)
            a = kaio.mma.load_a_int4(Ps, 0, wn, T, m=16, k=BK)
            tmp = kaio.mma.group_mma(a, Xs, tmp, 0, 0, trans_b=True)
            if group_ends(end, s * BK + BK, group, span):
                acc = kaio.mma.apply(_fold_scaled, acc, r0, c0, tmp, sc)
                tmp = kaio.mma.fill(f32, 0.0, m=16, n=BM)
        else:
            for kk in kaio.static_range(BK // 16):
                a = kaio.mma.load_a_int4(Ps, kk * 8, wn, T, m=16, k=16)
                tmp = kaio.mma.group_mma(a, Xs, tmp, 0, kk * 16, trans_b=True)
                acc, tmp = fold(acc, tmp, kstep + 16 * (kk + 1), s * BK + 16 * (kk + 1), S_,
                                r0, c0, group)
        return acc, tmp

    @kaio.kernel(block=(BN // 16 * warp_size,))
    def matmul_w4a16_group(x: kaio.In[T, 2], packed: kaio.In[kaio.u8, 2],
                           scales: kaio.In[T, 2], y: kaio.Raw[T, 2], group: kaio.Const[int]):
        Xs, Ps = buffers()
        wn = 16 * (kaio.thread_idx.x // kaio.warp_size)
        m0, n0 = kaio.block_idx.y * BM, kaio.block_idx.x * BN
        acc = kaio.mma.fill(f32, 0.0, m=16, n=BM)
        tmp = kaio.mma.fill(f32, 0.0, m=16, n=BM)
        for s in kaio.static_range(S - 2):
            stage(Xs[s], Ps[s], x, packed, m0, n0, s * BK)
        for k0 in range(0, x.shape[1], span):
            for s in kaio.static_range(S):
                # step s complete (two copies a step, S - 3 younger steps in flight) and
                # visible; every warp is done with the stage read two steps before, which
                # takes the step S - 2 ahead
                kaio.mma.copy_wait(pending=2 * (S - 3))
                kaio.sync()
                nxt = (s + S - 2) % S
                stage(Xs[nxt], Ps[nxt], x, packed, m0, n0, k0 + (s + S - 2) * BK)
                acc, tmp = step(Xs[s], Ps[s], acc, tmp, wn, k0 + s * BK, s, scales, n0 + wn,
                                m0, group)
        kaio.mma.store(y, m0, n0 + wn, acc, trans=True)

    return matmul_w4a16_group
