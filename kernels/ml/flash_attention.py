"""Fused scaled dot-product attention on f16 fragments with split operands, the keys split over
blocks (flash-decoding): ``O = softmax(Q K^T * scale [+ causal mask]) V`` (f32 in and out)
without writing the S x S scores to memory.

Block ``(j, i)`` of the partial kernel (:func:`kernel`) owns ``ROWS`` query rows (tile ``i``),
four warps, and key chunk ``j``: ``nsteps`` steps of ``KS = 4 * warp_size`` keys (128 on
NVIDIA). Per step the block splits the step's K rows into shared f16 hi + lo tiles (each thread
loads a column of them from global memory, ``UNROLL`` loads in flight); warp ``w`` computes the
``ROWS x warp_size`` score tile of keys ``w*warp_size ...`` on ``m16n8k16`` fragments with three
products ``ah bh + ah bl + al bh`` accumulated in f32 (as in :mod:`.attention_mma`: a few 2**-24
of ``|q k|`` per term) and stores it to a per-block scratch tile; after a barrier thread ``t``
does the softmax arithmetic of key ``t`` of the step for all rows, reading only what its own
lane stored. Row maxima and sums are warp reductions (``kaio.warp_max`` / ``warp_sum``) whose
per-warp results threads ``0 .. ROWS-1`` fold through a small shared array (one barrier, not a
tree over the threads).

Pass 1 gives the chunk's row maximum ``m_j`` and sum ``l_j``; pass 2 forms ``p = exp(s - m_j) /
l_j``, splits it into f16 hi + lo in shared memory, splits the step's V rows into the K tiles
and multiplies: warp ``w`` accumulates the output columns ``w*D/4 ...`` of the block's rows and
stores them once, the chunk's normalised partial ``O_j``, into a ``Region`` declared by warp
tiles (the race checker proves it). The accumulator fragments are not rescaled per step, so a
chunk of several steps recomputes its scores in pass 2; a chunk of one step (the common case:
:func:`plan` gives one step per block up to ~1024 blocks) has no pass 1: it folds its statistics
in pass 2 and computes Q K^T once. Both passes are one loop whose barriers are all unconditional
(with the recompute's barriers under ``if steps > 1`` the race checker refused the K/V tile
writes), each step's code written once.

The combine kernel (:func:`combine_kernel`) weights the chunks: ``O = sum_j w_j O_j / sum_j
w_j`` with ``w_j = l_j exp(m_j - max_j m_j)``; chunks a causal mask hides entirely report
``l_j = 0`` and are skipped. With one chunk the partial kernel writes ``O`` directly.

The score scratch is a ``Raw`` global array (``[ROWS * row tiles, KS * chunks]``, each block its
own tile): kaio's fragment stores go to global memory only, so the tile round-trips through
L1/L2; in the reference layout lane ``t`` of a warp holds column ``t`` of its ``ROWS x
warp_size`` tile, so each thread reads back only what it stored, which the reference backend's
sanitizer checks. The per-chunk ``(m_j, l_j)`` are ``Raw`` too (``[ROWS * row tiles, 2 *
chunks]``): threads ``0 .. ROWS-1`` of a 1-d block each write one row's pair, a slice no
per-thread partition names; the sanitizer checks those writes at both warp widths.
"""
import functools

import numpy as np

import kaio
from kaio import f16, f32, regions

NW = 4                          # warps per block
ROWS = 32                       # query rows per block (two m16 tiles: K and V serve 32 rows)
UNROLL = 16                     # rows a thread stages per loop trip (divides ROWS and the steps)
RU = 8                          # score rows a thread handles per loop trip (divides ROWS)
PAD = 8                         # f16 row padding of the shared tiles (ldmatrix banks)
TARGET_BLOCKS = 1024            # blocks plan() aims for (~8 per SM of a 132-SM GPU)


def padded_dim(d: int) -> int:
    """The head dimension the kernel works at: a multiple of ``8 * NW`` (each warp's output
    slice is a whole number of n8 tiles and the contraction a whole number of k16 steps); the
    extra columns are zeros."""
    return -(-d // (8 * NW)) * (8 * NW)


@kaio.func
def split_rows(hi, lo, src, row0, col0, rows, cols, d):
    """hi + lo = src[row0:row0+rows, col0:col0+cols] (zeros past src's rows and past column
    col0 + d), block-cooperative: thread t takes columns t, t + n, ... of every row (a 1-d block
    of n threads; consecutive threads read consecutive addresses, UNROLL loads in flight);
    ``rows`` is a multiple of UNROLL. Visible after the next barrier."""
    for c in range(kaio.thread_idx.x, cols, kaio.block_dim.x):
        for r0 in range(0, rows, UNROLL):
            for u in kaio.static_range(UNROLL):
                r = r0 + u
                v = f32(0.0)
                if row0 + r < src.shape[0] and c < d:
                    v = src[row0 + r, col0 + c]
                h = f16(v)
                hi[r, c] = h
                lo[r, c] = f16(v - f32(h))          # exact in f32


@functools.lru_cache(maxsize=None)
def kernel(dp: int, warp_size: int = 32):
    """The partial kernel for a padded head dimension ``dp`` (:func:`padded_dim`) and one warp
    width: block ``(j, i)`` writes the normalised attention of row tile ``i`` over key chunk
    ``j`` into ``part[rows, j*dp ...]`` and the chunk's row max and sum into ``ml[rows, 2j]`` and
    ``ml[rows, 2j + 1]`` (arguments: q, k, v, part, ml, scr, scale, d, the column offsets of Q, K
    and V in their arrays, steps per chunk, causal)."""
    ds = dp // NW                # output columns per warp
    KW = warp_size               # keys per warp and step
    KS = NW * KW                 # keys per step: one per thread of the block

    @kaio.func
    def scores(Qh, Ql, Kh, Kl, scr, row0, c0, w):
        """This warp's ROWS x KW score tile of the step (Q K^T, split f16) into scr."""
        acc = kaio.mma.fill(f32, 0.0, m=ROWS, n=KW)
        for kk in kaio.static_range(dp // 16):
            ah = kaio.mma.load_a(Qh, 0, kk * 16, m=ROWS, k=16)
            al = kaio.mma.load_a(Ql, 0, kk * 16, m=ROWS, k=16)
            bh = kaio.mma.load_b(Kh, w * KW, kk * 16, trans=True, k=16, n=KW)
            acc = kaio.mma.mma(al, bh, acc)
            acc = kaio.mma.mma(ah, kaio.mma.load_b(Kl, w * KW, kk * 16, trans=True, k=16, n=KW),
                               acc)
            acc = kaio.mma.mma(ah, bh, acc)
        kaio.mma.store(scr, row0, c0 + w * KW, acc)

    @kaio.func
    def step_scores(Qh, Ql, Kh, Kl, k, k0, kc, d, scr, row0, c0, w):
        """Split the step's keys into the K tiles and store the warps' score tiles; after the
        barrier that ends it every thread may read its scr column and the tiles be refilled."""
        split_rows(Kh, Kl, k, k0, kc, KS, dp, d)
        kaio.sync()
        scores(Qh, Ql, Kh, Kl, scr, row0, c0, w)
        kaio.sync()

    @kaio.func
    def valid(i, j, n_rows, n_keys, causal):
        return i < n_rows and j < n_keys and (not causal or j <= i)

    @kaio.func
    def step_stats(scr, warp_m, warp_l, row0, c0, k0, scale, n_rows, n_keys, causal):
        """Per row, this warp's max of the step's scaled scores and sum of exp(s - max) (warp
        reductions over its lanes' keys), stored by its lane 0 into row w of warp_m / warp_l."""
        tid = kaio.thread_idx.x
        for r0 in range(0, ROWS, RU):
            for u in kaio.static_range(RU):
                rr = r0 + u
                s = f32(-kaio.math.inf)
                if valid(row0 + rr, k0 + tid, n_rows, n_keys, causal):
                    s = scr[row0 + rr, c0 + tid] * scale
                mw = kaio.warp_max(s)
                e = f32(0.0)
                if s > -kaio.math.inf:
                    e = kaio.math.exp(s - mw)
                lw = kaio.warp_sum(e)
                if tid % kaio.warp_size == 0:
                    warp_m[tid // kaio.warp_size, rr] = mw
                    warp_l[tid // kaio.warp_size, rr] = lw

    @kaio.func
    def fold(warp_m, warp_l, row_m, row_l, row_il):
        """Row ``tid``'s running (max, sum) with the warps' pairs of a step folded in, and
        1 / sum (inf for a row with no key yet: never used)."""
        tid = kaio.thread_idx.x
        m_old = row_m[tid]
        m = m_old
        for ww in kaio.static_range(NW):
            m = kaio.math.max(m, warp_m[ww, tid])
        acc_l = f32(0.0)
        if m_old > -kaio.math.inf:
            acc_l = row_l[tid] * kaio.math.exp(m_old - m)
        for ww in kaio.static_range(NW):
            mw = warp_m[ww, tid]
            if mw > -kaio.math.inf:
                acc_l += warp_l[ww, tid] * kaio.math.exp(mw - m)
        row_m[tid] = m
        row_l[tid] = acc_l
        row_il[tid] = 1.0 / acc_l

    @kaio.kernel
    def attention_partial(q: kaio.In[f32, 2], k: kaio.In[f32, 2], v: kaio.In[f32, 2],
                          part: kaio.Region[f32, 2, regions.warp_tiles((ROWS, dp), (ROWS, ds))],
                          ml: kaio.Raw[f32, 2], scr: kaio.Raw[f32, 2], scale: f32, d: kaio.i32,
                          qc: kaio.i32, kc: kaio.i32, vc: kaio.i32, nsteps: kaio.i32,
                          causal: kaio.Const[bool]):
        Qh = kaio.shared_array(f16, (ROWS, dp + PAD))
        Ql = kaio.shared_array(f16, (ROWS, dp + PAD))
        Kh = kaio.shared_array(f16, (KS, dp + PAD))      # K of the step, then its V
        Kl = kaio.shared_array(f16, (KS, dp + PAD))
        Ph = kaio.shared_array(f16, (ROWS, KS + PAD))
        Pl = kaio.shared_array(f16, (ROWS, KS + PAD))
        warp_m = kaio.shared_array(f32, (NW, ROWS))      # each warp's row max and sum of a step
        warp_l = kaio.shared_array(f32, (NW, ROWS))
        row_m = kaio.shared_array(f32, (ROWS,))          # the chunk's running row max, sum, 1/sum
        row_l = kaio.shared_array(f32, (ROWS,))
        row_il = kaio.shared_array(f32, (ROWS,))
        tid = kaio.thread_idx.x                 # the key of each step this thread handles
        w = tid // kaio.warp_size
        chunk = kaio.block_idx.x
        row0 = kaio.block_idx.y * ROWS
        c0 = chunk * KS                         # this block's columns of scr
        n_rows = q.shape[0]
        n_keys = k.shape[0]
        kbeg = chunk * nsteps * KS
        last = kaio.math.min(n_keys, kbeg + nsteps * KS)
        if causal:
            last = kaio.math.min(last, row0 + ROWS)
        steps = kaio.math.max(0, (last - kbeg + KS - 1) // KS)
        if tid < ROWS:
            row_m[tid] = f32(-kaio.math.inf)
            row_l[tid] = f32(0.0)
        if steps > 0:
            split_rows(Qh, Ql, q, row0, qc, ROWS, dp, d)
        # One loop over both passes (each step's code once): pass 1, for chunks of several
        # steps, folds each step's row statistics into the block's running (max, sum); pass 2
        # computes p = exp(s - m) / l from the step's scores (again, after a pass 1), splits it
        # into f16 hi + lo and accumulates O_j += P V. A one-step chunk has no pass 1 and folds
        # its statistics in pass 2: Q K^T once. Every barrier is unconditional.
        n1 = steps
        if steps == 1:
            n1 = 0
        acc = kaio.mma.fill(f32, 0.0, m=ROWS, n=ds)
        for it in range(n1 + steps):
            second = it >= n1
            stats = not second or steps == 1
            k0 = kbeg + it * KS
            if second:
                k0 = kbeg + (it - n1) * KS
            step_scores(Qh, Ql, Kh, Kl, k, k0, kc, d, scr, row0, c0, w)
            if stats:
                step_stats(scr, warp_m, warp_l, row0, c0, k0, scale, n_rows, n_keys, causal)
            kaio.sync()
            if stats and tid < ROWS:
                fold(warp_m, warp_l, row_m, row_l, row_il)
            kaio.sync()
            if second:
                for r0 in range(0, ROWS, RU):
                    for u in kaio.static_range(RU):
                        rr = r0 + u
                        p = f32(0.0)
                        if valid(row0 + rr, k0 + tid, n_rows, n_keys, causal):
                            p = kaio.math.exp(scr[row0 + rr, c0 + tid] * scale - row_m[rr]) * row_il[rr]
                        ph = f16(p)
                        Ph[rr, tid] = ph
                        Pl[rr, tid] = f16(p - f32(ph))
                split_rows(Kh, Kl, v, k0, vc, KS, dp, d)     # V into K's tiles, Q K^T is done
            kaio.sync()
            if second:
                for kk in kaio.static_range(KS // 16):
                    ah = kaio.mma.load_a(Ph, 0, kk * 16, m=ROWS, k=16)
                    al = kaio.mma.load_a(Pl, 0, kk * 16, m=ROWS, k=16)
                    bh = kaio.mma.load_b(Kh, kk * 16, w * ds, k=16, n=ds)     # (V)
                    acc = kaio.mma.mma(al, bh, acc)
                    acc = kaio.mma.mma(ah, kaio.mma.load_b(Kl, kk * 16, w * ds, k=16, n=ds),
                                       acc)
                    acc = kaio.mma.mma(ah, bh, acc)
            kaio.sync()
        if steps > 0:
            # the warp-tile origin spelled as warp_tiles owns it (w // NW is 0 in a 4-warp block)
            kaio.mma.store(part, row0 + (w // NW) * ROWS, chunk * dp + (w % NW) * ds, acc)
        if tid < ROWS:                          # (-inf, 0) where no key of the chunk is seen
            ml[row0 + tid, 2 * chunk] = row_m[tid]
            ml[row0 + tid, 2 * chunk + 1] = row_l[tid]

    return attention_partial


@functools.lru_cache(maxsize=None)
def combine_kernel():
    """o[r, c] = sum_j w_j part[r, j*dp + c] / sum_j w_j, w_j = l_j exp(m_j - max m) over the
    chunks (arguments: part, ml, o, chunks, dp); one thread per element of o."""

    @kaio.kernel
    def attention_combine(part: kaio.In[f32, 2], ml: kaio.In[f32, 2], o: kaio.Out[f32, 2],
                          chunks: kaio.i32, dp: kaio.i32):
        for r, c in o.owned():
            m = f32(-kaio.math.inf)
            for j in range(chunks):
                m = kaio.math.max(m, ml[r, 2 * j])
            num = f32(0.0)
            den = f32(0.0)
            for j in range(chunks):
                lj = ml[r, 2 * j + 1]
                if lj > 0.0:                    # a chunk that saw keys of this row
                    wj = lj * kaio.math.exp(ml[r, 2 * j] - m)
                    num += wj * part[r, j * dp + c]
                    den += wj
            o[r, c] = num / den

    return attention_combine


def plan(s: int, n_keys: int, warp_size: int = 32):
    """(chunks, steps per chunk) for ``s`` query rows over ``n_keys`` keys: one step of ``4 *
    warp_size`` keys per block while the grid stays near :data:`TARGET_BLOCKS` (S = 1024: 8
    chunks x 32 row tiles = 256 blocks), more steps per chunk past it, so the partials stay
    within ~TARGET_BLOCKS * ROWS * dp floats."""
    ks = NW * warp_size
    total = max(1, -(-n_keys // ks))
    tiles = -(-s // ROWS)
    chunks = min(total, max(1, TARGET_BLOCKS // tiles))
    nsteps = -(-total // chunks)
    return -(-total // nsteps), nsteps


def launch_config(s: int, warp_size: int, chunks: int = 1):
    """(grid, block) of the partial kernel for ``s`` query rows: a block per ``ROWS`` rows and
    key chunk, four warps each."""
    return (chunks, -(-s // ROWS)), (NW * warp_size,)


def scratch(s: int, warp_size: int = 32, chunks: int = 1, alloc=np.empty):
    """The per-block score scratch (f32 [ROWS * row tiles, 4 * warp_size * chunks])."""
    return alloc((-(-s // ROWS) * ROWS, NW * warp_size * chunks), np.float32)


def partials(s: int, dp: int, chunks: int, alloc=np.empty):
    """(part, ml): the partial outputs [ROWS * row tiles, chunks * dp] and row (max, sum)
    pairs [ROWS * row tiles, 2 * chunks] (f32)."""
    rows = -(-s // ROWS) * ROWS
    return alloc((rows, chunks * dp), np.float32), alloc((rows, 2 * chunks), np.float32)


def supported(warp_size: int) -> bool:
    """A warp's score tile (``warp_size`` keys) must be whole n8 fragment tiles."""
    return warp_size % 8 == 0
