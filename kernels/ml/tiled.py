"""The pieces the library's tensor-core kernels share (kernels/ml/gemm.py, quant_mma.py).

A block computes a ``bm x bn`` tile of the output with warps laid out row-major over it, each a
``wm x wn`` warp tile (``kaio.regions.warp_tiles``); the K loop stages K-steps of ``bk`` into
shared memory with ``kaio.mma.copy_tile`` and multiplies them on fragments. The kernels supply
how a K-step is staged and multiplied (``stage``, ``step``: @kaio.func); these build the rest.
"""
import kaio


def warp_origins(bm: int, bn: int, wm: int, wn: int):
    """A @kaio.func ``() -> (wm0, wn0, row0, col0)``: this warp's tile within the block tile and
    the block tile's origin in the output (warp w = thread_idx.x // kaio.warp_size, row-major)."""
    per_row = bn // wn

    @kaio.func
    def origins():
        warp = kaio.thread_idx.x // kaio.warp_size
        return ((warp // per_row) * wm, (warp % per_row) * wn,
                kaio.block_idx.y * bm, kaio.block_idx.x * bn)
    return origins


def double_buffered(stage, step, bk: int):
    """A @kaio.func ``(As0, Bs0, As1, Bs1, A, B, row0, col0, wm0, wn0, acc, K) -> acc``: the K
    loop over two pairs of shared tiles. While the warps multiply one pair, ``copy_tile`` fills
    the other; each barrier completes the copies and hands the pairs over (one per half-step)."""

    @kaio.func
    def k_loop(As0, Bs0, As1, Bs1, A, B, row0, col0, wm0, wn0, acc, K):
        stage(As0, Bs0, A, B, row0, col0, 0)
        kaio.sync()
        for k0 in range(0, K, 2 * bk):
            stage(As1, Bs1, A, B, row0, col0, k0 + bk)
            acc = step(As0, Bs0, wm0, wn0, acc)
            kaio.sync()
            stage(As0, Bs0, A, B, row0, col0, k0 + 2 * bk)
            acc = step(As1, Bs1, wm0, wn0, acc)
            kaio.sync()
        return acc
    return k_loop
