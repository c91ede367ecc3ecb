"""Fused scaled dot-product attention on f16 fragments with split operands, the keys split over
blocks (flash-decoding): ``O = softmax(Q K^T * scale [+ causal mask]) V`` (f32 in and out)
without writing the S x S scores to memory.

Block ``(j, i)`` of the partial kernel (:func:`kernel`) owns ``nw * WR`` query rows (tile
``i``), ``nw`` warps of ``WR = 16`` rows each (four, or eight where :func:`warps` says: then
the block's halves split K and V at once into tiles of their own), and key chunk ``j``:
``nsteps`` steps of ``KS = 64`` keys. Each warp keeps everything about its rows in fragments
(FlashAttention-2's arrangement): per step

1. the block copies the step's K and V rows into f32 shared tiles (``kaio.mma.copy_tile``:
   ``cp.async``, all in flight at once) and splits K into f16 hi + lo tiles;
2. the warp's scores ``S`` (16 x 64) are three products ``qh kh + qh kl + ql kh`` of split f16
   fragments accumulated in f32 (as in :mod:`.attention_mma`: a few 2**-24 of ``|q k|`` per
   term); Q's tiles come straight from global memory through ``kaio.mma.apply`` (an element
   loaded per lane, zeros past the rows and ``d``) and ``kaio.mma.to_a``;
3. ``kaio.mma.apply`` scales and masks ``S``, ``kaio.mma.row_max`` gives the running row
   maximum ``m``, ``P = exp(S - m)`` (apply again, ``m`` broadcast along the rows; the fast
   exp, within 3.4 ulp, branch-free), the running sum ``l`` and the output accumulator ``O``
   are rescaled by ``exp(m_old - m)`` (online softmax), and ``kaio.mma.row_sum(P)`` is added
   to ``l``;
4. the block splits V into the same f16 tiles, and ``O += P V``: P's 16-key slices become A
   fragments in registers (``kaio.mma.to_a`` of P and of its low part ``P - f16(P)``), V's
   B fragments come from the shared tiles.

No score leaves the registers; K and V are split once per step (a chunk of several steps
rescales ``O`` instead of recomputing its scores). At the end the warp stores ``O / l``, the
chunk's normalised partial ``O_j``, into a ``Region`` declared by warp tiles (the race checker
proves it), and its rows' ``(m_j, l_j)`` as the first two columns of an 8-wide tile of ``ml``
(``Raw``, ``[ROWS * row tiles, 8 * chunks]``: each warp its own rows, which the sanitizer
checks at both warp widths). Shared memory: two f32 and two f16 tiles of ``KS x dp`` (98 KiB
at dp = 128: two blocks per SM). ``O`` is scaled by ``1 / l`` once per row at the end.

The combine kernel (:func:`combine_kernel`) weights the chunks: ``O = sum_j w_j O_j / sum_j
w_j`` with ``w_j = l_j exp(m_j - max_j m_j)``; chunks a causal mask hides entirely report
``l_j = 0`` and are skipped. :func:`combine_launch` takes it unrolled for the plan's chunk
count (up to :data:`MAX_TRIP`: one pass of loads for the maxima, one for the sums). With one
chunk the partial kernel writes ``O`` directly.
"""
import functools

import numpy as np

import kaio
from kaio import f16, f32, regions

NW = 4                          # warps per block
WR = 16                         # query rows per warp (one m16 tile)
ROWS = NW * WR                  # query rows per block
KS = 64                         # keys per step
UNROLL = 16                     # rows a thread splits per loop trip (divides KS)
PAD = 8                         # f16 row padding of the shared tiles (ldmatrix banks)
TARGET_BLOCKS = 1024            # blocks plan() aims for at most
ML_COLS = 8                     # ml's columns per chunk: one n8 tile, (m, l) in its first two
CU = 4                          # chunks the combine reads per loop trip (past MAX_TRIP chunks)
MAX_TRIP = 32                   # chunk counts up to this are read in one trip


def padded_dim(d: int) -> int:
    """The head dimension the kernel works at: a multiple of 16 (whole k16 steps of Q K^T and
    n8 tiles of O); the extra columns are zeros."""
    return -(-d // 16) * 16


@kaio.func
def split_rows(hi, lo, src, row0, col0, rows, cols, d, tid, lanes):
    """hi + lo = src[row0:row0+rows, col0:col0+cols] (zeros past src's rows and past column
    col0 + d), by ``lanes`` threads: thread ``tid`` (0 .. lanes - 1) takes columns tid, tid +
    lanes, ... of every row (consecutive threads read consecutive addresses, UNROLL loads in
    flight); ``rows`` is a multiple of UNROLL. Visible after the next barrier."""
    for c in range(tid, cols, lanes):
        for r0 in range(0, rows, UNROLL):
            for u in kaio.static_range(UNROLL):
                r = r0 + u
                v = f32(0.0)
                if row0 + r < src.shape[0] and c < d:
                    v = src[row0 + r, col0 + c]
                h = f16(v)
                hi[r, c] = h
                lo[r, c] = f16(v - f32(h))          # exact in f32


# --- per element of a fragment (kaio.mma.apply): x the element, r and c its row and column ---
@kaio.func
def q_elem(x, r, c, q, n_rows, c_end):
    """Q[r, c] (zero past the rows and the head dimension)."""
    v = f32(0.0)
    if r < n_rows and c < c_end:
        v = q[r, c]
    return v


@kaio.func
def low_part(x, r, c):
    """x - f16(x): the f16 split's low part, exact in f32."""
    return x - f32(f16(x))


@kaio.func
def valid(i, j, n_rows, n_keys, causal):
    return i < n_rows and j < n_keys and (not causal or j <= i)


@kaio.func
def scaled(x, r, c, scale, n_rows, n_keys, causal):
    """The score of row r and key c scaled, or -inf where the key is masked or missing."""
    s = f32(-kaio.math.inf)
    if valid(r, c, n_rows, n_keys, causal):
        s = x * scale
    return s


@kaio.func
def larger(x, r, c, y):
    return kaio.math.max(x, y)


@kaio.func
def exp_from(x, r, c, m):
    """exp(x - m), 0 for x = -inf (a masked score, or a row with no key yet): the fast exp
    (the hardware exp2 after an exact range reduction, within 3.4 ulp), without a branch
    (x - m is NaN where both are -inf; clamped, then replaced)."""
    e = kaio.math.exp(kaio.math.max(x - m, f32(-200.0)), fast=True)
    if x == -kaio.math.inf:
        e = f32(0.0)
    return e


@kaio.func
def rescaled_sum(x, r, c, alpha, s):
    return x * alpha + s


@kaio.func
def times(x, r, c, alpha):
    return x * alpha


@kaio.func
def reciprocal(x, r, c):
    """1 / x, 0 for x = 0 (a row no key of the chunk reaches)."""
    v = f32(0.0)
    if x > 0.0:
        v = 1.0 / x
    return v


@kaio.func
def ml_pair(x, r, c, l):
    """Column 0 of each 8-wide tile: m (x); column 1: l; the others 0."""
    v = f32(0.0)
    if c % ML_COLS == 0:
        v = x
    elif c % ML_COLS == 1:
        v = l
    return v


@functools.lru_cache(maxsize=None)
def kernel(dp: int, warp_size: int = 32, nw: int = NW):
    """The partial kernel for a padded head dimension ``dp`` (:func:`padded_dim`; the same code
    at every warp width): block ``(j, i)`` writes the normalised attention of row tile ``i``
    over key chunk ``j`` into ``part[rows, j*dp ...]`` and the chunk's row max and sum into
    ``ml[rows, 8j]`` and ``ml[rows, 8j + 1]`` (arguments: q, k, v, part, ml, scale, d, the
    column offsets of Q, K and V in their arrays, steps per chunk, causal). A block is ``nw``
    warps of ``WR`` rows. Blocks of more than four warps with a thread per column for K and
    another for V (``nw * warp_size >= 2 dp``: eight warps at dp = 128) split both at once
    into tiles of their own (one split phase and two barriers a step fewer, 32 KiB more shared
    memory); otherwise V is split into K's tiles once Q K^T has read them (four-warp blocks keep
    the registers: on 64-lane AMD targets the paired form spills at d = 32)."""
    ROWS = nw * WR
    nthreads = nw * warp_size
    half = nthreads // 2
    paired = _paired(dp, warp_size, nw)

    @kaio.kernel(block=(nthreads,))
    def attention_partial(q: kaio.In[f32, 2], k: kaio.In[f32, 2], v: kaio.In[f32, 2],
                          part: kaio.Region[f32, 2, regions.warp_tiles((ROWS, dp), (WR, dp))],
                          ml: kaio.Raw[f32, 2], scale: f32, d: kaio.i32, qc: kaio.i32,
                          kc: kaio.i32, vc: kaio.i32, nsteps: kaio.i32,
                          causal: kaio.Const[bool]):
        Kf = kaio.shared_array(f32, (KS, dp))           # the step's K and V rows as copied
        Vf = kaio.shared_array(f32, (KS, dp))
        Hi = kaio.shared_array(f16, (KS, dp + PAD))     # K split into hi + lo (and V unpaired)
        Lo = kaio.shared_array(f16, (KS, dp + PAD))
        if paired:      # compile-time: V's own tiles
            Hv = kaio.shared_array(f16, (KS, dp + PAD))
            Lv = kaio.shared_array(f16, (KS, dp + PAD))
        else:
            Hv = Hi
            Lv = Lo
        w = kaio.thread_idx.x // kaio.warp_size
        chunk = kaio.block_idx.x
        row0 = kaio.block_idx.y * ROWS
        r0 = row0 + (w // 1) * WR                       # this warp's rows (warp_tiles' origin)
        n_rows = q.shape[0]
        n_keys = k.shape[0]
        kbeg = chunk * nsteps * KS
        last = kaio.math.min(n_keys, kbeg + nsteps * KS)
        if causal:
            last = kaio.math.min(last, row0 + ROWS)
        steps = kaio.math.max(0, (last - kbeg + KS - 1) // KS)
        m = kaio.mma.fill(f32, -kaio.math.inf, m=WR, n=8)     # running row max and sum
        l = kaio.mma.fill(f32, 0.0, m=WR, n=8)
        o = kaio.mma.fill(f32, 0.0, m=WR, n=dp)
        for it in range(steps):
            k0 = kbeg + it * KS
            kaio.mma.copy_tile(Kf, k, k0, kc, rows=KS, cols=dp)
            kaio.mma.copy_tile(Vf, v, k0, vc, rows=KS, cols=dp)
            kaio.sync()
            if paired:
                if kaio.thread_idx.x < half:
                    split_rows(Hi, Lo, Kf, 0, 0, KS, dp, d, kaio.thread_idx.x, half)
                else:
                    split_rows(Hv, Lv, Vf, 0, 0, KS, dp, d, kaio.thread_idx.x - half, half)
            else:
                split_rows(Hi, Lo, Kf, 0, 0, KS, dp, d, kaio.thread_idx.x, nthreads)
            kaio.sync()
            s = kaio.mma.fill(f32, 0.0, m=WR, n=KS)
            for kk in kaio.static_range(dp // 16):
                qt = kaio.mma.apply(q_elem, kaio.mma.fill(f32, 0.0, m=WR, n=16), r0,
                                    qc + kk * 16, q, n_rows, qc + d)
                ah = kaio.mma.to_a(qt, f16)
                bh = kaio.mma.load_b(Hi, 0, kk * 16, trans=True, k=16, n=KS)
                s = kaio.mma.mma(kaio.mma.to_a(kaio.mma.apply(low_part, qt, r0, 0), f16), bh, s)
                s = kaio.mma.mma(ah, kaio.mma.load_b(Lo, 0, kk * 16, trans=True, k=16, n=KS), s)
                s = kaio.mma.mma(ah, bh, s)
            s = kaio.mma.apply(scaled, s, r0, k0, scale, n_rows, n_keys, causal)
            m_new = kaio.mma.apply(larger, m, r0, 0, kaio.mma.row_max(s))
            p = kaio.mma.apply(exp_from, s, r0, k0, m_new)
            alpha = kaio.mma.apply(exp_from, m, r0, 0, m_new)   # exp(m_old - m), 0 at first
            l = kaio.mma.apply(rescaled_sum, l, r0, 0, alpha, kaio.mma.row_sum(p))
            o = kaio.mma.apply(times, o, r0, 0, alpha)
            m = m_new
            pl = kaio.mma.apply(low_part, p, r0, k0)
            if not paired:
                kaio.sync()                             # every warp is done with K's tiles
                split_rows(Hi, Lo, Vf, 0, 0, KS, dp, d, kaio.thread_idx.x, nthreads)
                kaio.sync()
            for kk in kaio.static_range(KS // 16):
                ph = kaio.mma.to_a(p, f16, col0=kk * 16, k=16)
                vh = kaio.mma.load_b(Hv, kk * 16, 0, k=16, n=dp)       # (V)
                o = kaio.mma.mma(kaio.mma.to_a(pl, f16, col0=kk * 16, k=16), vh, o)
                o = kaio.mma.mma(ph, kaio.mma.load_b(Lv, kk * 16, 0, k=16, n=dp), o)
                o = kaio.mma.mma(ph, vh, o)
        if steps > 0:
            o = kaio.mma.apply(times, o, r0, 0, kaio.mma.apply(reciprocal, l, r0, 0))
            kaio.mma.store(part, r0, chunk * dp + (w % 1) * dp, o)
        # (-inf, 0) where no key of the chunk is seen
        kaio.mma.store(ml, r0, chunk * ML_COLS, kaio.mma.apply(ml_pair, m, r0, 0, l))

    return attention_partial


@kaio.func
def _weighted(acc, j, r, c, m, part, ml, dp, value):
    """acc + w_j * part[r, j*dp + c] (``value``) or acc + w_j, w_j = l_j exp(m_j - m); acc
    itself where l_j = 0 (a chunk no key of the row reached: its part is never written). A
    select, not a branch, so an unrolled loop issues every chunk's loads at once."""
    lj = ml[r, ML_COLS * j + 1]
    wj = lj * kaio.math.exp(ml[r, ML_COLS * j] - m)
    t = wj * part[r, j * dp + c] if value else wj
    return acc + t if lj > 0.0 else acc


@functools.lru_cache(maxsize=None)
def combine_kernel(chunks: int = 0):
    """o[r, c] = sum_j w_j part[r, j*dp + c] / sum_j w_j, w_j = l_j exp(m_j - max m) over the
    chunks, (m_j, l_j) = ml[r, 8j], ml[r, 8j + 1] (arguments: part, ml, o, chunks, dp); one
    thread per element of o, the sums in chunk order. With ``chunks`` > 0 the kernel is for
    exactly that many (the ``chunks`` argument must equal it: :func:`combine_launch`) and its
    loops are unrolled, every load of a pass in flight at once; with 0 it reads ``CU`` chunks
    per loop trip (with CU = 4 the 16 chunks of S = 1024 took eight dependent round trips)."""

    @kaio.func
    def unrolled(r, c, part, ml, dp, n):
        """Both passes over exactly ``chunks`` chunks, no loop: all loads of a pass at once."""
        m = f32(-kaio.math.inf)
        for j in kaio.static_range(chunks):
            m = kaio.math.max(m, ml[r, ML_COLS * j])
        num = f32(0.0)
        den = f32(0.0)
        for j in kaio.static_range(chunks):
            num = _weighted(num, j, r, c, m, part, ml, dp, True)
            den = _weighted(den, j, r, c, m, part, ml, dp, False)
        return num / den

    @kaio.func
    def looped(r, c, part, ml, dp, n):
        """Both passes over ``n`` chunks, ``CU`` per loop trip."""
        m = f32(-kaio.math.inf)
        for j0 in range(0, n, CU):              # CU chunks' loads in flight per trip
            for u in kaio.static_range(CU):
                if j0 + u < n:
                    m = kaio.math.max(m, ml[r, ML_COLS * (j0 + u)])
        num = f32(0.0)
        den = f32(0.0)
        for j0 in range(0, n, CU):
            for u in kaio.static_range(CU):
                if j0 + u < n:
                    num = _weighted(num, j0 + u, r, c, m, part, ml, dp, True)
                    den = _weighted(den, j0 + u, r, c, m, part, ml, dp, False)
        return num / den

    combined = unrolled if chunks > 0 else looped

    @kaio.kernel
    def attention_combine(part: kaio.In[f32, 2], ml: kaio.In[f32, 2], o: kaio.Out[f32, 2],
                          nchunks: kaio.i32, dp: kaio.i32):
        for r, c in o.owned():
            o[r, c] = combined(r, c, part, ml, dp, nchunks)

    return attention_combine


def combine_launch(s: int, d: int, chunks: int):
    """The combine kernel for ``chunks`` chunks, bound to its launch over an [s, d] output (256
    threads a block): unrolled for exactly that many where they are at most :data:`MAX_TRIP`."""
    kern = combine_kernel(chunks if chunks <= MAX_TRIP else 0)
    return kern[(-(-(s * d) // 256),), (256,)]


def plan(s: int, n_keys: int, warp_size: int = 32, nw: int = NW):
    """(chunks, steps per chunk) for ``s`` query rows over ``n_keys`` keys: one step of ``KS``
    keys per block while the grid stays within :data:`TARGET_BLOCKS` (S = 1024: 16 chunks x 16
    row tiles = 256 blocks), more steps per chunk past it, so the partials stay within
    ~TARGET_BLOCKS * ROWS * dp floats. The tiles are the same at every warp width
    (``warp_size`` is accepted for the callers' symmetry)."""
    total = max(1, -(-n_keys // KS))
    tiles = -(-s // (nw * WR))
    chunks = min(total, max(1, TARGET_BLOCKS // tiles))
    nsteps = -(-total // chunks)
    return -(-total // nsteps), nsteps


def launch_config(s: int, warp_size: int, chunks: int = 1, nw: int = NW):
    """(grid, block) of the partial kernel for ``s`` query rows: a block per ``nw * WR`` rows
    and key chunk, ``nw`` warps each."""
    return (chunks, -(-s // (nw * WR))), (nw * warp_size,)


def partials(s: int, dp: int, chunks: int, alloc=np.empty, nw: int = NW):
    """(part, ml): the partial outputs [ROWS * row tiles, chunks * dp] and the row (max, sum)
    tiles [ROWS * row tiles, 8 * chunks] (f32; (m_j, l_j) in columns 8j and 8j + 1), ROWS =
    ``nw * WR``."""
    rows = -(-s // (nw * WR)) * nw * WR
    return alloc((rows, chunks * dp), np.float32), alloc((rows, ML_COLS * chunks), np.float32)


def _paired(dp: int, warp_size: int, nw: int) -> bool:
    """Whether a block of ``nw`` warps splits K and V at once: more than four warps, with a
    thread per column for each (four-warp blocks keep the registers: on 64-lane AMD targets the
    paired form spills at d = 32)."""
    return nw > NW and nw * warp_size >= 2 * dp


def warps(dp: int, warp_size: int) -> tuple:
    """Block sizes (warps) to try for the partial kernel, best first: eight warps where they
    split K and V at once (32-lane warps, dp <= 128; H200, S = 1024, d = 128, from a graph:
    13.5 us against 16.0 for four, scripts/attention_breakdown.py, 2026-12-02), then four
    (48 KiB of static shared memory on the LLVM NVIDIA path and AMD's 64 KiB of LDS take
    neither at d = 128). 64-lane targets keep four warps (unmeasured)."""
    if warp_size == 32 and _paired(dp, warp_size, 8):
        return (8, NW)
    return (NW,)


def supported(warp_size: int) -> bool:
    """Fragments lay out at any warp width kaio targets (32 and 64 lanes)."""
    return warp_size % 8 == 0
