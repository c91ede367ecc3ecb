"""Fused scaled dot-product attention on f16 fragments with split operands: one launch computes
``O = softmax(Q K^T * scale [+ causal mask]) V`` (f32 in and out) without writing the S x S
scores to memory.

Block ``by`` owns 16 query rows and four warps; the keys go in steps of ``KS = 4 * warp_size``
(128 on NVIDIA). Per step the block copies the step's K rows into a shared f32 staging tile
(``kaio.mma.copy_tile``: ``cp.async`` of 16-byte chunks, 64 rows at a time) and splits them into
f16 hi + lo tiles; warp ``w`` then computes the 16 x ``warp_size`` score tile of keys
``w*warp_size ...`` on ``m16n8k16`` fragments with three products ``ah bh + ah bl + al bh``
accumulated in f32 (as in :mod:`.attention_mma`: a few 2**-24 of ``|q k|`` per term) and stores
it to a per-block scratch tile; after a barrier thread ``t`` does the softmax arithmetic of key
``t`` of the step for all 16 rows, reading only what its own warp stored.

Two passes over the keys, so the output accumulators never need rescaling (fragments have no
element access): pass 1 keeps each thread's running maximum and sum of exponentials per row
(online softmax in f32, in shared memory, one exp per score) and combines them per row in a
tree over the threads; pass 2
recomputes the same scores, forms ``p = exp(s - m) / l`` exactly normalised, splits it into
f16 hi + lo in shared memory, stages the step's V rows in the K tiles (Q K^T is done with them)
and multiplies: warp ``w`` accumulates the output columns ``w*D/4 ...`` of all 16 rows over all
keys and stores them once at the end into the output ``Region`` declared by warp tiles, which
the race checker proves. Per key and query row that is 9 fragment products against FlashAttention's
6 with rescaling (3 for Q K^T in each pass, 3 for P V).

The score scratch is a ``Raw`` global array (``[16 * blocks, 4 * warp_size]``, each block its
own rows): kaio's fragment stores go to global memory only, so the tile round-trips through
L1/L2 instead of shared memory (twice per step); each warp stores its own 16 x warp_size tile
and only its own lanes read it back, which the reference backend's sanitizer checks. The causal
variant skips the key steps past the block's last row.
"""
import functools

import numpy as np

import kaio
from kaio import f16, f32, regions

NW = 4                          # warps per block
ROWS = 16                       # query rows per block (one m16 tile)
UNROLL = 16                     # rows a thread stages per loop trip (divides ROWS and the steps)
PAD = 8                         # f16 row padding of the shared tiles (ldmatrix banks)


def padded_dim(d: int) -> int:
    """The head dimension the kernel works at: a multiple of ``8 * NW`` (each warp's output
    slice is a whole number of n8 tiles and the contraction a whole number of k16 steps); the
    extra columns are zeros."""
    return -(-d // (8 * NW)) * (8 * NW)


@kaio.func
def split_rows(hi, lo, src, row0, col0, rows, cols, d):
    """hi + lo = src[row0:row0+rows, col0:col0+cols] (zeros past src's rows and past column
    col0 + d), block-cooperative: thread t
    takes columns t, t + n, ... of every row (a 1-d block of n threads; consecutive threads
    read consecutive addresses); ``rows`` is a multiple of UNROLL."""
    for c in range(kaio.thread_idx.x, cols, kaio.block_dim.x):
        for r0 in range(0, rows, UNROLL):
            for u in kaio.static_range(UNROLL):     # UNROLL independent loads in flight
                r = r0 + u
                v = f32(0.0)
                if row0 + r < src.shape[0] and c < d:
                    v = src[row0 + r, col0 + c]
                h = f16(v)
                hi[r, c] = h
                lo[r, c] = f16(v - f32(h))          # exact in f32


@functools.lru_cache(maxsize=None)
def kernel(dp: int, warp_size: int = 32):
    """The fused kernel for a padded head dimension ``dp`` (:func:`padded_dim`) and one warp
    width: a warp's score tile is ``KW = warp_size`` keys wide, so thread t of the block does
    the softmax arithmetic of key t of each step, which its own warp stored."""
    ds = dp // NW                # output columns per warp
    KW = warp_size               # keys per warp and step
    KS = NW * KW                 # keys per step: one per thread of the block
    STAGE = min(64, KS)          # rows of K or V per cp.async stage (f32)

    @kaio.func
    def scores(Qh, Ql, Kh, Kl, scr, row0, w):
        """This warp's 16 x KW score tile of the step (Q K^T, split f16) into scr."""
        acc = kaio.mma.fill(f32, 0.0, m=ROWS, n=KW)
        for kk in kaio.static_range(dp // 16):
            ah = kaio.mma.load_a(Qh, 0, kk * 16, m=ROWS, k=16)
            al = kaio.mma.load_a(Ql, 0, kk * 16, m=ROWS, k=16)
            bh = kaio.mma.load_b(Kh, w * KW, kk * 16, trans=True, k=16, n=KW)
            acc = kaio.mma.mma(al, bh, acc)
            acc = kaio.mma.mma(ah, kaio.mma.load_b(Kl, w * KW, kk * 16, trans=True, k=16, n=KW),
                               acc)
            acc = kaio.mma.mma(ah, bh, acc)
        kaio.mma.store(scr, row0, w * KW, acc)

    @kaio.func
    def stage_split(hi, lo, stg, src, row0, col0, d):
        """hi + lo = src[row0:row0+KS, col0:col0+d] (zeros past src's rows and column d), STAGE
        rows at a time: a block copy of f32 rows into stg (cp.async, 16-byte chunks), then each
        thread splits its column of them. Visible after the final barrier."""
        for h in range(0, KS, STAGE):
            kaio.mma.copy_tile(stg, src, row0 + h, col0, rows=STAGE, cols=dp)
            kaio.sync()
            for c in range(kaio.thread_idx.x, dp, kaio.block_dim.x):
                for r0 in range(0, STAGE, UNROLL):
                    for u in kaio.static_range(UNROLL):
                        x = f32(0.0)
                        if c < d:               # (stg holds the next matrix's columns there)
                            x = stg[r0 + u, c]
                        xh = f16(x)
                        hi[h + r0 + u, c] = xh
                        lo[h + r0 + u, c] = f16(x - f32(xh))
            kaio.sync()

    @kaio.func
    def step_scores(Qh, Ql, Kh, Kl, stg, k, k0, kc, d, scr, row0, w):
        """Stage the step's keys (split) and store the warps' score tiles; after the barrier
        that ends it every thread may read scr and the tiles may be refilled."""
        stage_split(Kh, Kl, stg, k, k0, kc, d)
        scores(Qh, Ql, Kh, Kl, scr, row0, w)
        kaio.sync()

    @kaio.func
    def valid(i, j, n_rows, n_keys, causal):
        return i < n_rows and j < n_keys and (not causal or j <= i)

    @kaio.kernel
    def attention_fused(q: kaio.In[f32, 2], k: kaio.In[f32, 2], v: kaio.In[f32, 2],
                        o: kaio.Region[f32, 2, regions.warp_tiles((ROWS, dp), (ROWS, ds))],
                        scr: kaio.Raw[f32, 2], scale: f32, d: kaio.i32, qc: kaio.i32,
                        kc: kaio.i32, vc: kaio.i32, causal: kaio.Const[bool]):
        Qh = kaio.shared_array(f16, (ROWS, dp + PAD))
        Ql = kaio.shared_array(f16, (ROWS, dp + PAD))
        Kh = kaio.shared_array(f16, (KS, dp + PAD))
        Kl = kaio.shared_array(f16, (KS, dp + PAD))
        stg = kaio.shared_array(f32, (STAGE, dp + 4))
        Ph = kaio.shared_array(f16, (ROWS, KS + PAD))
        Pl = kaio.shared_array(f16, (ROWS, KS + PAD))
        red_m = kaio.shared_array(f32, (ROWS, KS))
        red_l = kaio.shared_array(f32, (ROWS, KS))
        row_m = kaio.shared_array(f32, (ROWS,))
        row_il = kaio.shared_array(f32, (ROWS,))
        tid = kaio.thread_idx.x                 # the key of each step this thread handles
        w = tid // kaio.warp_size
        row0 = kaio.block_idx.y * ROWS
        n_rows = q.shape[0]
        n_keys = k.shape[0]
        last = n_keys
        if causal:
            last = kaio.math.min(n_keys, row0 + ROWS)
        steps = (last + KS - 1) // KS
        split_rows(Qh, Ql, q, row0, qc, ROWS, dp, d)
        for rr in kaio.static_range(ROWS):      # this thread's running max and sum per row
            red_m[rr, tid] = f32(-kaio.math.inf)
            red_l[rr, tid] = f32(0.0)
        # pass 1: each thread's running max and sum of exp over its key of each step
        for st in range(steps):
            k0 = st * KS
            step_scores(Qh, Ql, Kh, Kl, stg, k, k0, kc, d, scr, row0, w)
            for rr in kaio.static_range(ROWS):
                if valid(row0 + rr, k0 + tid, n_rows, n_keys, causal):
                    s = scr[row0 + rr, tid] * scale
                    m_old = red_m[rr, tid]
                    e = kaio.math.exp(-kaio.math.abs(s - m_old))    # one exp (0 at m = -inf)
                    up = s > m_old                  # a new max: rescale the sum by e, add 1
                    red_l[rr, tid] = red_l[rr, tid] * (e if up else 1.0) + (1.0 if up else e)
                    red_m[rr, tid] = kaio.math.max(m_old, s)
        kaio.sync()
        half = KS // 2                          # a tree over the KS threads' (max, sum) pairs
        while half >= 1:                        # (unrolled: KS is a constant power of two)
            if tid < half:
                for rr in kaio.static_range(ROWS):
                    m1 = red_m[rr, tid]
                    m2 = red_m[rr, tid + half]
                    m = kaio.math.max(m1, m2)
                    l1 = f32(0.0)
                    l2 = f32(0.0)
                    if m1 > -kaio.math.inf:
                        l1 = red_l[rr, tid] * kaio.math.exp(m1 - m)
                    if m2 > -kaio.math.inf:
                        l2 = red_l[rr, tid + half] * kaio.math.exp(m2 - m)
                    red_m[rr, tid] = m
                    red_l[rr, tid] = l1 + l2
            kaio.sync()
            half = half // 2
        if tid < ROWS:
            row_m[tid] = red_m[tid, 0]
            row_il[tid] = 1.0 / red_l[tid, 0]
        kaio.sync()
        # pass 2: the same scores, p = exp(s - m) / l split into f16 hi + lo, O += P V
        acc = kaio.mma.fill(f32, 0.0, m=ROWS, n=ds)
        for st in range(steps):
            k0 = st * KS
            step_scores(Qh, Ql, Kh, Kl, stg, k, k0, kc, d, scr, row0, w)
            for rr in kaio.static_range(ROWS):
                p = f32(0.0)
                if valid(row0 + rr, k0 + tid, n_rows, n_keys, causal):
                    p = kaio.math.exp(scr[row0 + rr, tid] * scale - row_m[rr]) * row_il[rr]
                ph = f16(p)
                Ph[rr, tid] = ph
                Pl[rr, tid] = f16(p - f32(ph))
            stage_split(Kh, Kl, stg, v, k0, vc, d)       # V in K's tiles, Q K^T is done
            for kk in kaio.static_range(KS // 16):
                ah = kaio.mma.load_a(Ph, 0, kk * 16, m=ROWS, k=16)
                al = kaio.mma.load_a(Pl, 0, kk * 16, m=ROWS, k=16)
                bh = kaio.mma.load_b(Kh, kk * 16, w * ds, k=16, n=ds)     # (V)
                acc = kaio.mma.mma(al, bh, acc)
                acc = kaio.mma.mma(ah, kaio.mma.load_b(Kl, kk * 16, w * ds, k=16, n=ds), acc)
                acc = kaio.mma.mma(ah, bh, acc)
            kaio.sync()
        # the warp-tile origin spelled as warp_tiles owns it (w // NW is 0 in a 4-warp block)
        kaio.mma.store(o, row0 + (w // NW) * ROWS, kaio.block_idx.x * dp + (w % NW) * ds, acc)

    return attention_fused


def launch_config(s: int, warp_size: int):
    """(grid, block) for ``s`` query rows: one block per 16 rows, four warps each."""
    return (1, -(-s // ROWS)), (NW * warp_size,)


def scratch(s: int, warp_size: int = 32, alloc=np.empty):
    """The per-block score scratch for ``s`` query rows (f32 [16 * blocks, 4 * warp_size])."""
    return alloc((-(-s // ROWS) * ROWS, NW * warp_size), np.float32)


def supported(warp_size: int) -> bool:
    """A warp's score tile (``warp_size`` keys) must be whole n8 fragment tiles."""
    return warp_size % 8 == 0
