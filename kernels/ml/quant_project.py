"""W8A8 with the activations quantized inside the matmul: one launch for ``quantize_rows`` and
``int8_matmul`` (kaio.kernels.ml.quant) on f32 activations.

    xq, sx = quantize_rows(x)              # per row: s = max|x| / 127 (1 for a zero row)
    c = diag(sx) (xq @ b) diag(sb)         # exact i32 sums, f32(acc) * sx[m] * sb[n]

computed bit for bit as the two launches do (the same quotient ``rint(x / s)``, the same
i32 sums and epilogue), for a K small enough that a block keeps its whole panel of quantized
rows in shared memory (:func:`shared_bytes`; the quantized attention's projection: K = 512).

Block ``(j, i)`` owns the ``BM x BN`` output tile at rows ``i*BM``, columns ``j*BN`` of one of
the :data:`TILES` (:func:`tile_for` picks: 32 x 128 where N is wider than 64, so a row is
quantized N / 128 times; 64 x 64 otherwise), eight ``WM x WN`` warp tiles (eight warps to share
the quantization: two per scheduler, 64 of a row's values per thread at K = 512), in a 2-d
block of ``LPR x 32`` threads (at 32-lane warps; a 16-row tile leaves half of them out of the
quantization). It

1. issues the ``cp.async`` copy of its whole weight panel ``b[0:K, j*BN ...]`` (int8, zeros past
   K and N), which stays in flight through step 2;
2. quantizes its ``BM`` rows of ``x``: ``LPR`` threads per row (``thread_idx.x``; neighbours in
   one warp), each holding ``K / LPR`` of the row's values in registers, runs of ``VW`` = 4
   neighbouring columns (one 16-byte load where K is whole k32 slices; 32 rows at a time, all
   their loads in flight together: the loads are unconditional, indices clamped, so the
   quotient pass reuses the maximum pass's), the row's absolute maximum by xor shuffles among
   those threads, then ``rint(x / s)`` into the shared int8 panel and ``s`` into a shared
   vector of the block's row scales;
3. after one barrier multiplies the two panels on ``m16n8k32`` fragments (``K / 32`` slices)
   and applies the dequantizing epilogue by element access (``kaio.mma.apply``: ``f32(acc) *
   s[r] * sb[c]``, rounded after each step, as ``kaio.mma.store(..., row_scale=, col_scale=)``
   does, whose scales must be global buffers), storing each f32 result's bits through an i32
   view of ``c`` (:func:`bits`; an i32 accumulator stores exactly).

Each row is quantized once per column block (three times at N = 384 with 128-wide tiles, six
with 64-wide ones): as many divisions as the separate quantize kernel times N / BN, against a
launch and a round trip of the int8 rows through memory saved. Shared memory is ``BM (K + 16)
+ K (BN + 16)`` bytes (90,624 at K = 512 for 32 x 128): kaio's PTX path places it
dynamically; the LLVM NVIDIA path (48 KiB static) and AMD (64 KiB of LDS) refuse it and the
callers keep the two launches. ptxas (sm_90,
K = 512): 128 registers, no spills (one 256-thread block per SM, the 96 blocks one wave), 16
16-byte loads of x per thread and pass. H200, 20 launches from one graph at [1024, 384]
(scripts/attention_breakdown.py): 64x64 13.5 us, 32x128 10.6, 32x192 13.4; the two launches it
replaces 3.9 + 7.9.
"""
import functools

import numpy as np

import kaio
from kaio import f32, i32
from kaio.backends.runtime import DeviceArray

from .quant import _warp_size, builds
from .quant_mma import PAD, threads

#: tilings: name -> (BM, BN, WM, WN), block tile and warp tile (eight warps). A row is quantized
#: once per column block, so wider blocks quantize less (N / BN times) and copy more weights
TILES = {"64x64": (64, 64, 32, 16), "32x128": (32, 128, 32, 16), "32x192": (32, 192, 32, 24),
         "16x128": (16, 128, 16, 16)}
DEFAULT_TILE = "64x64"
LPR = 8                             # threads per row in the quantization pass
VW = 4                              # a thread's neighbouring columns (one 16-byte load)
MAX_SHARED = 160 * 1024             # panels past this take the two launches


def padded_k(k: int) -> int:
    """K in whole ``m16n8k32`` slices (the panels' extra columns are zeros)."""
    return -(-k // 32) * 32


def shared_bytes(k: int, tile: str = DEFAULT_TILE) -> int:
    """Shared memory of the kernel for K = ``k``: the quantized row panel and the weight panel."""
    BM, BN = TILES[tile][:2]
    kp = padded_k(k)
    return BM * (kp + PAD) + kp * (BN + PAD)


@kaio.func
def _at(x, r, c, ok):
    """x[r, c] where ``ok``, else 0; the load itself unconditional (indices clamped into x), so
    the quantizing pass's load of an element merges with the maximum pass's (kaio's CSE of
    loads from an ``In`` buffer) and the row stays in registers."""
    v = x[kaio.math.min(r, x.shape[0] - 1), kaio.math.min(c, x.shape[1] - 1)]
    return v if ok else f32(0.0)


@kaio.func
def _at_row(x, r, c, ok):
    """:func:`_at` for a row and column inside x (the row clamped by the caller), so four
    neighbouring columns from a multiple of 4 are one 16-byte load (kaio.backends.vector_access)."""
    v = x[r, c]
    return v if ok else f32(0.0)


@kaio.func
def _dequantized_bits(x, r, c, scales, sb, row0):
    """The bits (as i32) of f32(x) * scales[r - row0] * sb[c], rounded after each step: the
    epilogue of ``kaio.mma.store(..., row_scale=, col_scale=)`` with the row scales in shared
    memory (sb's index clamped: columns past N are computed, never stored)."""
    v = f32(x) * scales[r - row0]
    return kaio.bitcast(v * sb[kaio.math.min(c, sb.shape[0] - 1)], i32)


@functools.lru_cache(maxsize=None)
def kernel(k: int, warp_size: int = 32, tile: str = DEFAULT_TILE):
    """c = diag(sx) (quantize(x) @ b) diag(sb) for activations of K = ``k`` columns (f32),
    sx the rows' quantization scales (arguments: x, b, sb, c_bits; ``c_bits`` is the f32
    output's memory as i32: :func:`bits`), on the tiling ``tile`` of :data:`TILES`."""
    BM, BN, WM, WN = TILES[tile]
    kp = padded_k(k)
    nthreads = threads(BM, BN, WM, WN, warp_size)
    per_pass = nthreads // LPR                  # rows quantized together
    NU = kp // LPR                              # values a thread holds (kp: a multiple of 32)
    per_row = BN // WN
    load = _at_row if k == kp else _at          # K whole k32 slices: no column past x

    @kaio.func
    def quantize_row(As, Ss, x, row0, lr, sub):
        """Row ``lr`` of the block's panel, by the LPR threads ``sub`` = 0 .. LPR - 1."""
        r = row0 + lr
        live = r < x.shape[0]
        r = kaio.math.min(r, x.shape[0] - 1)    # the loads stay inside x
        m = f32(0.0)
        for u in kaio.static_range(NU):
            c = VW * sub + (VW * LPR * (u // VW) + u % VW)
            m = kaio.math.max(m, kaio.math.abs(load(x, r, c, live and c < k)))
        for h in kaio.static_range(3):          # max over the row's LPR = 8 threads
            m = kaio.math.max(m, kaio.shuffle_xor(m, 4 >> h))
        s = f32(1.0)
        if m > 0.0:
            s = m / 127.0
        for u in kaio.static_range(NU):
            c = VW * sub + (VW * LPR * (u // VW) + u % VW)
            As[lr, c] = kaio.i8(kaio.math.rint(load(x, r, c, live and c < k) / s))
        if sub == 0:
            Ss[lr] = s

    @kaio.func
    def quantize_panel(As, Ss, x, row0):
        sub = kaio.thread_idx.x                 # this thread's columns: runs of VW from VW*sub
        for p in kaio.static_range(max(1, BM // per_pass)):
            lr = p * per_pass + kaio.thread_idx.y   # the block's row this thread works on
            if BM >= per_pass:                  # compile-time: only the taken branch is compiled
                quantize_row(As, Ss, x, row0, lr, sub)
            else:                               # more threads than rows (64-lane warps, BM 32)
                if lr < BM:
                    quantize_row(As, Ss, x, row0, lr, sub)

    @kaio.kernel(block=(LPR, per_pass))     # 2-d: x a row's threads, y the rows of a pass
    def matmul_w8a8_quantizing(x: kaio.In[f32, 2], b: kaio.In[kaio.i8, 2], sb: kaio.In[f32],
                               c: kaio.Raw[i32, 2]):
        As = kaio.shared_array(kaio.i8, (BM, kp + PAD))
        Bs = kaio.shared_array(kaio.i8, (kp, BN + PAD))
        Ss = kaio.shared_array(f32, BM)
        warp = (kaio.thread_idx.y * LPR + kaio.thread_idx.x) // kaio.warp_size
        wm = (warp // per_row) * WM
        wn = (warp % per_row) * WN
        row0 = kaio.block_idx.y * BM
        col0 = kaio.block_idx.x * BN
        kaio.mma.copy_tile(Bs, b, 0, col0, rows=kp, cols=BN)     # in flight while quantizing
        quantize_panel(As, Ss, x, row0)
        kaio.sync()
        acc = kaio.mma.fill(i32, 0, m=WM, n=WN)
        for kk in kaio.static_range(kp // 32):
            acc = kaio.mma.mma(kaio.mma.load_a(As, wm, kk * 32, m=WM, k=32),
                               kaio.mma.load_b(Bs, kk * 32, wn, k=32, n=WN), acc)
        acc = kaio.mma.apply(_dequantized_bits, acc, row0 + wm, col0 + wn, Ss, sb, row0)
        kaio.mma.store(c, row0 + wm, col0 + wn, acc)

    return matmul_w8a8_quantizing


def bits(c):
    """The f32 array ``c`` (numpy or a kaio device array) viewed as i32, the kernel's output
    type (no copy)."""
    if isinstance(c, np.ndarray):
        return c.view(np.int32)
    return DeviceArray(c.shape, np.int32, runtime=c.runtime, _ptr=c.ptr, _owner=c)


def launch_config(m: int, n: int, warp_size: int = 32, tile: str = DEFAULT_TILE):
    """(grid, block) of :func:`kernel` for an [m, n] output."""
    BM, BN, WM, WN = TILES[tile]
    return ((-(-n // BN), -(-m // BM)), (LPR, threads(BM, BN, WM, WN, warp_size) // LPR))


def fits(k: int, tile: str = DEFAULT_TILE) -> bool:
    """Whether K = ``k`` takes this kernel (its panels within :data:`MAX_SHARED`)."""
    return k > 0 and shared_bytes(k, tile) <= MAX_SHARED


def launch(m: int, n: int, k: int, tile: str | None = None):
    """A launch ``f(x, b, sb, c_bits)`` for an [m, n] f32 output ``c`` over K = ``k``
    (``c_bits = bits(c)``) on ``tile`` (default :func:`tile_for`); None where K does not fit or
    the backend does not compile the kernel (the caller then quantizes in a launch of its own)."""
    w = _warp_size()
    tile = tile or tile_for(m, n)
    if not fits(k, tile) or not builds(("w8a8_quantizing", k, w, tile), lambda: kernel(k, w, tile)):
        return None
    return kernel(k, w, tile)[launch_config(m, n, w, tile)]


def tile_for(m: int, n: int) -> str:
    """The tiling for an [m, n] output: 32 x 128 blocks where N spans more than one 64-wide
    block (each row quantized N / 128 times instead of N / 64), else 64 x 64. Measured on the
    H200 at the attention's [1024, 384], K = 512, 20 launches from one graph: 64x64 13.5 us,
    32x128 10.6, 32x192 13.4 (scripts/attention_breakdown.py, 2026-12-02)."""
    return "32x128" if n > 64 else DEFAULT_TILE
