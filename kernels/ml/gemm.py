"""GEMM on the matrix units, written in kaio: ``C = alpha * op(A) @ op(B) + beta * C``.

f16 or bf16 inputs, f32 accumulation, f32/f16/bf16 output, either operand transposed, any M, N
and K (edge tiles are zero-filled on the way in and masked on the way out). One block computes
a ``BM x BN`` tile of C with ``(BM / WM) x (BN / WN)`` warps, each a ``WM x WN`` warp tile (the
default 128 x 128 block with eight 64 x 32 warp tiles: a 4 x 4 grid of m16n8k16 instruction
tiles, 64 f32 accumulators per lane). :data:`TILES` lists the block/warp tilings the library
declares; :mod:`kaio.autotune` picks one per shape on a GPU (the first is the default).
The K loop is double-buffered: while the warps multiply the tiles in one pair of shared
arrays, ``kaio.mma.copy_tile`` fills the other (``cp.async`` on NVIDIA), and one barrier per
half-step hands them over. Rows of the shared tiles are padded by 8 elements so the eight
16-byte rows each ``ldmatrix`` reads fall in distinct banks.

C is a Region partitioned by ``kaio.regions.warp_tiles``: the race checker proves that every
warp stores (and, with beta, reads) only its own warp tile. Warps are ``kaio.warp_size``
lanes: a block has ``(BM / WM) x (BN / WN)`` warps on any width (256 threads on NVIDIA, 512 on a
64-lane target), each owning the same warp tile.
"""
import functools

import numpy as np

import kaio
from kaio import f32
from kaio.autotune import Autotuner, Config
from kaio.backends import get_backend

from .tiled import double_buffered, warp_origins

PAD = 8                         # elements of row padding in shared memory (16 bytes)
#: block tile (BM, BN), K step BK, warp tile (WM, WN) and pipeline stages S of each
#: configuration. The first is the default and, at 2 * (BM (BK + PAD) + BK (BN + PAD)) * 2
#: bytes, fits the 48 KiB every NVIDIA path allows statically; the larger ones use kaio's PTX
#: path's dynamic shared memory (up to 227 KiB on sm_90) and are skipped where a target
#: refuses them. S = 2: double buffering, each barrier completes the copies; S >= 3: S - 1
#: K-steps in flight (kaio.mma.copy_wait), one barrier per K-step.
TILES = {
    "128x128x32_w64x32": (128, 128, 32, 64, 32, 2),
    "128x128x64_w64x32": (128, 128, 64, 64, 32, 2),
    "128x128x64_w64x32_s3": (128, 128, 64, 64, 32, 3),
    "128x128x32_w64x32_s4": (128, 128, 32, 64, 32, 4),
    "128x256x32_w64x64_s3": (128, 256, 32, 64, 64, 3),
    "256x128x32_w64x64_s3": (256, 128, 32, 64, 64, 3),
    "128x256x64_w64x64": (128, 256, 64, 64, 64, 2),
    "256x128x64_w64x64": (256, 128, 64, 64, 64, 2),
    "128x256x64_w64x64_s3": (128, 256, 64, 64, 64, 3),
    "256x128x64_w64x64_s3": (256, 128, 64, 64, 64, 3),
    # warp-group tilings (kaio.mma.group_mma; wgmma on sm_90): warp w owns 16 rows x all BN
    # (measured and dropped on the H200: 192x256 s4 0.58x, 256x128 s4 0.62x, 128x128 s6 0.54x)
    "wg128x256x64_s4": (128, 256, 64, 16, 256, 4),
    "wg128x128x64_s5": (128, 128, 64, 16, 128, 5),
    # one warp group a block: 128 blocks at M = 256, N = 4096 (the others make 32-64)
    "wg64x128x64_s4": (64, 128, 64, 16, 128, 4),
}
DEFAULT_TILE = "128x128x32_w64x32"
BM, BN, BK, WM, WN, _ = TILES[DEFAULT_TILE]
THREADS = (BM // WM) * (BN // WN) * 32

_DTYPES = {"f16": kaio.f16, "bf16": kaio.bf16, "f32": kaio.f32}
_BY_NP = {np.dtype(t.storage_np): n for n, t in _DTYPES.items()}
_BY_TORCH = {"torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32"}


def _name(x) -> str | None:
    """'f16', 'bf16' or 'f32' for a numpy/kaio array or a torch tensor of that dtype, else None."""
    d = getattr(x, "dtype", None)
    try:
        return _BY_NP.get(np.dtype(d))
    except TypeError:       # torch dtypes are not numpy's
        return _BY_TORCH.get(str(d))


@functools.lru_cache(maxsize=None)
def gemm_kernel(dtype: str, out: str, trans_a: bool, trans_b: bool, tile: str = DEFAULT_TILE,
                warp_size: int = 32):
    """The kaio kernel for one (input dtype, output dtype, transposes, tiling of :data:`TILES`,
    warp width). Its block is declared (``block=``), so the tile copies unroll."""
    dt, ot = _DTYPES[dtype], _DTYPES[out]
    BM, BN, BK, WM, WN, S = TILES[tile]
    threads = (BM // WM) * (BN // WN) * warp_size
    out_tiles = kaio.regions.warp_tiles((BM, BN), (WM, WN))   # each warp owns its tile of C
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
    def frags(As, Bs, wm, wn, kk):
        """This warp's A and B fragments of the 16 columns at kk * 16 of a staged K-step."""
        if trans_a:
            a = kaio.mma.load_a(As, kk * 16, wm, trans=True, m=WM, k=16)
        else:
            a = kaio.mma.load_a(As, wm, kk * 16, m=WM, k=16)
        if trans_b:
            b = kaio.mma.load_b(Bs, wn, kk * 16, trans=True, k=16, n=WN)
        else:
            b = kaio.mma.load_b(Bs, kk * 16, wn, k=16, n=WN)
        return a, b

    @kaio.func
    def lead(As, Bs, wm, wn):
        return frags(As, Bs, wm, wn, 0)

    @kaio.func
    def step(As, Bs, wm, wn, acc):
        """acc += this warp's rows of As @ its columns of Bs for one K-step, 16 deep at a time,
        but the first 16 (``lead``: multiplied before the next K-step's copies go out)."""
        for kk in kaio.static_range(1, BK // 16):
            a, b = frags(As, Bs, wm, wn, kk)
            acc = kaio.mma.mma(a, b, acc)
        return acc

    if tile.startswith("wg"):
        return _group_kernel(dt, ot, trans_a, trans_b, tile, threads, out_tiles, stage)
    origins = warp_origins(BM, BN, WM, WN)
    k_loop = double_buffered(stage, step, BK, lead)

    @kaio.kernel(block=(threads,))
    def gemm(A: kaio.In[dt, 2], B: kaio.In[dt, 2], C: kaio.Region[ot, 2, out_tiles], alpha: f32,
             beta: f32):
        As0 = kaio.shared_array(dt, a_tile)
        Bs0 = kaio.shared_array(dt, b_tile)
        As1 = kaio.shared_array(dt, a_tile)
        Bs1 = kaio.shared_array(dt, b_tile)
        wm, wn, row0, col0 = origins()
        K = A.shape[0] if trans_a else A.shape[1]
        acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN)
        acc = k_loop(As0, Bs0, As1, Bs1, A, B, row0, col0, wm, wn, acc, K)
        kaio.mma.store(C, row0 + wm, col0 + wn, acc, alpha=alpha, beta=beta)

    @kaio.kernel(block=(threads,))
    def gemm_pipelined(A: kaio.In[dt, 2], B: kaio.In[dt, 2], C: kaio.Region[ot, 2, out_tiles], alpha: f32,
                       beta: f32):
        """S stages: S - 1 K-steps in flight while one is multiplied."""
        if S == 3:     # a compile-time choice: only the taken branch is compiled
            As = (kaio.shared_array(dt, a_tile), kaio.shared_array(dt, a_tile),
                  kaio.shared_array(dt, a_tile))
            Bs = (kaio.shared_array(dt, b_tile), kaio.shared_array(dt, b_tile),
                  kaio.shared_array(dt, b_tile))
        else:
            As = (kaio.shared_array(dt, a_tile), kaio.shared_array(dt, a_tile),
                  kaio.shared_array(dt, a_tile), kaio.shared_array(dt, a_tile))
            Bs = (kaio.shared_array(dt, b_tile), kaio.shared_array(dt, b_tile),
                  kaio.shared_array(dt, b_tile), kaio.shared_array(dt, b_tile))
        wm, wn, row0, col0 = origins()
        K = A.shape[0] if trans_a else A.shape[1]
        acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN)
        for s in kaio.static_range(S - 1):
            stage(As[s], Bs[s], A, B, row0, col0, s * BK)
        for k0 in range(0, K, S * BK):
            for s in kaio.static_range(S):
                # the oldest K-step is complete (two copies per step; the S - 2 younger steps
                # stay in flight) and, after the barrier, visible; every warp is done with the
                # buffers of the step before, so they take the step S - 1 ahead
                kaio.mma.copy_wait(pending=2 * (S - 2))
                kaio.sync()
                nxt = (s + S - 1) % S
                # the first slice's loads and products before the copies: its loads go out
                # right after the barrier and the copies issue while the matrix unit works
                a, b = lead(As[s], Bs[s], wm, wn)
                acc = kaio.mma.mma(a, b, acc)
                stage(As[nxt], Bs[nxt], A, B, row0, col0, k0 + (s + S - 1) * BK)
                acc = step(As[s], Bs[s], wm, wn, acc)
        kaio.mma.store(C, row0 + wm, col0 + wn, acc, alpha=alpha, beta=beta)

    return gemm if S == 2 else gemm_pipelined


def _group_kernel(dt, ot, trans_a, trans_b, tile, threads, out_tiles, stage):
    """The warp-group form: the block's warps split the block tile's rows 16 each and share its
    columns, multiplying whole staged tiles with ``kaio.mma.group_mma`` (one wgmma per four
    warps on sm_90, from 128-byte-swizzled ``kaio.mma.shared_tile`` arrays). S >= 4 stages:
    S - 2 K-steps of copies in flight; each step first refills the stage read two steps before, so
    on sm_90 one step's products keep running through the next barrier (kaio's PTX waits only
    for wgmmas reading what is written after a barrier: backends/ptx_wgmma.py)."""
    BM, BN, BK, _, _, S = TILES[tile]
    a_tile = (BK, BM) if trans_a else (BM, BK)
    b_tile = (BN, BK) if trans_b else (BK, BN)

    @kaio.kernel(block=(threads,))
    def gemm_group(A: kaio.In[dt, 2], B: kaio.In[dt, 2], C: kaio.Region[ot, 2, out_tiles],
                   alpha: f32, beta: f32):
        if S == 4:     # compile-time: only the taken branch is compiled
            As = (kaio.mma.shared_tile(dt, a_tile), kaio.mma.shared_tile(dt, a_tile),
                  kaio.mma.shared_tile(dt, a_tile), kaio.mma.shared_tile(dt, a_tile))
            Bs = (kaio.mma.shared_tile(dt, b_tile), kaio.mma.shared_tile(dt, b_tile),
                  kaio.mma.shared_tile(dt, b_tile), kaio.mma.shared_tile(dt, b_tile))
        elif S == 5:
            As = (kaio.mma.shared_tile(dt, a_tile), kaio.mma.shared_tile(dt, a_tile),
                  kaio.mma.shared_tile(dt, a_tile), kaio.mma.shared_tile(dt, a_tile),
                  kaio.mma.shared_tile(dt, a_tile))
            Bs = (kaio.mma.shared_tile(dt, b_tile), kaio.mma.shared_tile(dt, b_tile),
                  kaio.mma.shared_tile(dt, b_tile), kaio.mma.shared_tile(dt, b_tile),
                  kaio.mma.shared_tile(dt, b_tile))
        else:
            As = (kaio.mma.shared_tile(dt, a_tile), kaio.mma.shared_tile(dt, a_tile),
                  kaio.mma.shared_tile(dt, a_tile), kaio.mma.shared_tile(dt, a_tile),
                  kaio.mma.shared_tile(dt, a_tile), kaio.mma.shared_tile(dt, a_tile))
            Bs = (kaio.mma.shared_tile(dt, b_tile), kaio.mma.shared_tile(dt, b_tile),
                  kaio.mma.shared_tile(dt, b_tile), kaio.mma.shared_tile(dt, b_tile),
                  kaio.mma.shared_tile(dt, b_tile), kaio.mma.shared_tile(dt, b_tile))
        row0 = kaio.block_idx.y * BM
        col0 = kaio.block_idx.x * BN
        K = A.shape[0] if trans_a else A.shape[1]
        acc = kaio.mma.fill(f32, 0.0, m=16, n=BN)
        for s in kaio.static_range(S - 2):
            stage(As[s], Bs[s], A, B, row0, col0, s * BK)
        for k0 in range(0, K, S * BK):
            for s in kaio.static_range(S):
                # step s complete (two copies a step, S - 3 younger steps in flight) and
                # visible; the products of two steps before are done in every warp (the
                # barrier), so their buffers take the step S - 2 ahead
                kaio.mma.copy_wait(pending=2 * (S - 3))
                kaio.sync()
                # the copies first: measured 2-7% faster than after the products (H200,
                # scripts/wgmma_probe.py --vs-library)
                nxt = (s + S - 2) % S
                stage(As[nxt], Bs[nxt], A, B, row0, col0, k0 + (s + S - 2) * BK)
                for kk in kaio.static_range(BK // 16):
                    acc = kaio.mma.group_mma(As[s], Bs[s], acc, 0, 0, kk * 16,
                                             trans_a=trans_a, trans_b=trans_b)
        warp = kaio.thread_idx.x // kaio.warp_size
        kaio.mma.store(C, row0 + 16 * warp, col0, acc, alpha=alpha, beta=beta)

    return gemm_group


def launch_config(m: int, n: int, tile: str = DEFAULT_TILE, warp_size: int | None = None) -> tuple:
    """(grid, block) of the GEMM kernel for an m x n output (``warp_size``: the current
    backend's by default)."""
    bm, bn, _, wm, wn, _ = TILES[tile]
    if warp_size is None:
        warp_size = _warp_size()
    return ((-(-n // bn), -(-m // bm)), ((bm // wm) * (bn // wn) * warp_size,))


def _warp_size() -> int:
    return get_backend().warp_size


def _run(a, b, c, alpha, beta, trans_a, trans_b, *, config):
    w = _warp_size()
    kern = gemm_kernel(_name(a), _name(c), trans_a, trans_b, config.name, w)
    kern[launch_config(c.shape[0], c.shape[1], config.name, w)](a, b, c, alpha, beta)


#: the tiling per (m, n, k, dtypes, transposes), timed on a GPU where c is not read (beta 0:
#: the trials overwrite c); calls with beta != 0 use what a beta-0 call of that shape chose
_tuner = Autotuner(_run, name="kaio.kernels.ml.gemm", configs=[Config(t) for t in TILES],
                   key=lambda a, b, c, alpha, beta, ta, tb: (
                       [int(x) for x in c.shape], int(a.shape[0] if ta else a.shape[1]),
                       _name(a), _name(c), bool(ta), bool(tb)),
                   outputs=lambda a, b, c, *rest: [c], check=lambda key: (1e-2, 1e-2),
                   tune_when=lambda key: key[0][0] * key[0][1] * key[1] >= 2**24)


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
         trans_b: bool = False, out_dtype=None):
    """``alpha * op(a) @ op(b) + beta * c`` on the matrix units; op transposes when asked.

    ``a`` (M x K, or K x M with ``trans_a``) and ``b`` (K x N, or N x K with ``trans_b``) are
    f16 or bf16 of one dtype; the product accumulates in f32. ``c`` (M x N, f32/f16/bf16) is
    updated in place and returned; without it a new array of ``out_dtype`` (default f32) is.
    ``beta`` 0 never reads ``c``.
    """
    names = [_name(x) for x in (a, b)]
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
        npdt = kaio.dtypes.from_name(out).storage_np
        # numpy in, numpy out; device-resident operands get a kaio device array
        c = np.empty((m, n), npdt) if isinstance(a, np.ndarray) else kaio.device_array((m, n), npdt)
        beta = 0.0
    elif tuple(c.shape) != (m, n):
        raise kaio.errors.ArgumentValueError(
            f"kaio.kernels.ml.gemm: c is {tuple(c.shape)}, expected ({m}, {n})")
    args = (a, b, c, float(alpha), float(beta), bool(trans_a), bool(trans_b))
    if beta == 0:
        _tuner(*args)
    else:       # in place: never a trial run; the shape's remembered choice or the default
        _run(*args, config=_tuner.remembered(_tuner.key(*args)) or Config(DEFAULT_TILE))
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
