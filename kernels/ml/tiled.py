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


def double_buffered(stage, step, bk: int, lead=None):
    """A @kaio.func ``(As0, Bs0, As1, Bs1, A, B, row0, col0, wm0, wn0, acc, K) -> acc``: the K
    loop over two pairs of shared tiles. While the warps multiply one pair, ``copy_tile`` fills
    the other; each barrier completes the copies and hands the pairs over (one per half-step).

    With ``lead`` (a @kaio.func ``(As, Bs, wm0, wn0) -> (a, b)``, the fragments of a K-step's
    first 16-deep slice) each half-step loads them and multiplies them before it issues the
    next copies, and ``step`` then does the K-step's other slices: the loads the first products
    wait on go out right after the barrier, and the copy instructions issue while the matrix
    unit works, instead of ahead of both."""
    if lead is None:
        @kaio.func
        def half(As, Bs, nAs, nBs, A, B, row0, col0, k_next, wm0, wn0, acc):
            stage(nAs, nBs, A, B, row0, col0, k_next)
            return step(As, Bs, wm0, wn0, acc)
    else:
        @kaio.func
        def half(As, Bs, nAs, nBs, A, B, row0, col0, k_next, wm0, wn0, acc):
            a, b = lead(As, Bs, wm0, wn0)
            acc = kaio.mma.mma(a, b, acc)
            stage(nAs, nBs, A, B, row0, col0, k_next)
            return step(As, Bs, wm0, wn0, acc)

    @kaio.func
    def k_loop(As0, Bs0, As1, Bs1, A, B, row0, col0, wm0, wn0, acc, K):
        stage(As0, Bs0, A, B, row0, col0, 0)
        kaio.sync()
        for k0 in range(0, K, 2 * bk):
            acc = half(As0, Bs0, As1, Bs1, A, B, row0, col0, k0 + bk, wm0, wn0, acc)
            kaio.sync()
            acc = half(As1, Bs1, As0, Bs0, A, B, row0, col0, k0 + 2 * bk, wm0, wn0, acc)
            kaio.sync()
        return acc
    return k_loop
