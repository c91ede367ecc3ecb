"""GEMM on the matrix units, written in kaio: ``C = alpha * op(A) @ op(B) + beta * C``.

f16 or bf16 inputs, f32 accumulation, f32/f16/bf16 output, either operand transposed, any M, N
and K (edge tiles are zero-filled on the way in and masked on the way out). One block computes
a ``BM x BN`` tile of C with eight warps, each a ``64 x 32`` warp tile (a 4 x 4 grid of
m16n8k16 instruction tiles: 64 f32 accumulators per lane). The K loop is double-buffered:
while the warps multiply the tiles in one pair of shared arrays, ``kaio.mma.copy_tile`` fills
the other (``cp.async`` on NVIDIA), and one barrier per half-step hands them over. Rows of the
shared tiles are padded by 8 elements so the eight 16-byte rows each ``ldmatrix`` reads fall
in distinct banks.

The kernel assumes 32-lane warps (NVIDIA): on a 64-lane target it is refused at launch.
"""
import functools

import numpy as np

import kaio
from kaio import f32

from .elementwise import _name

BM, BN, BK = 128, 128, 32       # block tile (M, N) and K step
WM, WN = 64, 32                 # warp tile: 2 x 4 warps cover the block tile
THREADS = 256
PAD = 8                         # elements of row padding in shared memory (16 bytes)

_DTYPES = {"f16": kaio.f16, "bf16": kaio.bf16, "f32": kaio.f32}
_NP = [t.storage_np for t in _DTYPES.values()]


@functools.lru_cache(maxsize=None)
def gemm_kernel(dtype: str, out: str, trans_a: bool, trans_b: bool):
    """The kaio kernel for one (input dtype, output dtype, transposes)."""
    dt, ot = _DTYPES[dtype], _DTYPES[out]
    a_tile = (BK, BM + PAD) if trans_a else (BM, BK + PAD)
    b_tile = (BN, BK + PAD) if trans_b else (BK, BN + PAD)

    @kaio.func
    def stage(As, Bs, A, B, row0, col0, k0):
        """Start copying the K-step at k0 of this block's A rows and B columns."""
        if trans_a:
            kaio.mma.copy_tile(As, A, k0, row0, cols=BM)
        else:
            kaio.mma.copy_tile(As, A, row0, k0, cols=BK)
        if trans_b:
            kaio.mma.copy_tile(Bs, B, col0, k0, cols=BK)
        else:
            kaio.mma.copy_tile(Bs, B, k0, col0, cols=BN)

    @kaio.func
    def step(As, Bs, wm, wn, acc):
        """acc += this warp's rows of As @ its columns of Bs (one K-step, 16 at a time)."""
        for kk in kaio.static_range(BK // 16):
            if trans_a:
                a = kaio.mma.load_a(As, kk * 16, wm, trans=True, m=WM, k=16)
            else:
                a = kaio.mma.load_a(As, wm, kk * 16, m=WM, k=16)
            if trans_b:
                b = kaio.mma.load_b(Bs, wn, kk * 16, trans=True, k=16, n=WN)
            else:
                b = kaio.mma.load_b(Bs, kk * 16, wn, k=16, n=WN)
            acc = kaio.mma.mma(a, b, acc)
        return acc

    @kaio.kernel
    def gemm(A: kaio.In[dt, 2], B: kaio.In[dt, 2], C: kaio.Raw[ot, 2], alpha: f32, beta: f32):
        As0 = kaio.shared_array(dt, a_tile)
        Bs0 = kaio.shared_array(dt, b_tile)
        As1 = kaio.shared_array(dt, a_tile)
        Bs1 = kaio.shared_array(dt, b_tile)
        warp = kaio.thread_idx.x // 32
        wm = (warp // (BN // WN)) * WM
        wn = (warp % (BN // WN)) * WN
        row0 = kaio.block_idx.y * BM
        col0 = kaio.block_idx.x * BN
        K = A.shape[0] if trans_a else A.shape[1]
        acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN)
        stage(As0, Bs0, A, B, row0, col0, 0)
        kaio.sync()
        for k0 in range(0, K, 2 * BK):
            stage(As1, Bs1, A, B, row0, col0, k0 + BK)
            acc = step(As0, Bs0, wm, wn, acc)
            kaio.sync()
            stage(As0, Bs0, A, B, row0, col0, k0 + 2 * BK)
            acc = step(As1, Bs1, wm, wn, acc)
            kaio.sync()
        kaio.mma.store(C, row0 + wm, col0 + wn, acc, alpha=alpha, beta=beta)

    return gemm


def launch_config(m: int, n: int) -> tuple:
    """(grid, block) of the GEMM kernel for an m x n output."""
    return ((-(-n // BN), -(-m // BM)), (THREADS,))


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
         trans_b: bool = False, out_dtype=None):
    """``alpha * op(a) @ op(b) + beta * c`` on the matrix units; op transposes when asked.

    ``a`` (M x K, or K x M with ``trans_a``) and ``b`` (K x N, or N x K with ``trans_b``) are
    f16 or bf16 of one dtype; the product accumulates in f32. ``c`` (M x N, f32/f16/bf16) is
    updated in place and returned; without it a new array of ``out_dtype`` (default f32) is.
    ``beta`` 0 never reads ``c``.
    """
    names = [_name(x) if getattr(x, "dtype", None) in _NP else None for x in (a, b)]
    name = names[0]
    if name not in ("f16", "bf16") or names[1] != name:
        raise kaio.errors.ArgumentTypeError(
            f"kaio.kernels.ml.gemm: a and b must both be f16 or both bf16, got {a.dtype} and "
            f"{b.dtype}")
    if np.ndim(a) != 2 or np.ndim(b) != 2:
        raise kaio.errors.ArgumentValueError("kaio.kernels.ml.gemm: a and b must be 2-d")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != kb:
        raise kaio.errors.ArgumentValueError(
            f"kaio.kernels.ml.gemm: op(a) is {m} x {k} but op(b) is {kb} x {n}: inner sizes differ")
    if c is None:
        out = "f32" if out_dtype is None else (
            str(out_dtype) if str(out_dtype) in _DTYPES else _name(np.empty(0, out_dtype)))
        c = np.empty((m, n), dtype=kaio.dtypes.from_name(out).storage_np)
        beta = 0.0
    elif tuple(c.shape) != (m, n):
        raise kaio.errors.ArgumentValueError(
            f"kaio.kernels.ml.gemm: c is {tuple(c.shape)}, expected ({m}, {n})")
    kern = gemm_kernel(name, _name(c), bool(trans_a), bool(trans_b))
    kern[launch_config(m, n)](a, b, c, float(alpha), float(beta))
    return c


def gemm_ref(a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False):
    """float64 reference of :func:`gemm`."""
    a64 = np.asarray(a).astype(np.float64)
    b64 = np.asarray(b).astype(np.float64)
    p = (a64.T if trans_a else a64) @ (b64.T if trans_b else b64)
    out = alpha * p
    if c is not None and beta != 0:
        out = out + beta * np.asarray(c).astype(np.float64)
    return out
