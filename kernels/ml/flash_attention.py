"""Fused scaled dot-product attention on f16 fragments with split operands: one launch computes
``O = softmax(Q K^T * scale [+ causal mask]) V`` (f32 in and out) without writing the S x S
scores to memory.

Block ``by`` owns 16 query rows and four warps. The keys go in steps of ``KS = 4 * KW``; in a
step warp ``w`` computes the 16 x ``KW`` score tile of keys ``w*KW ...`` (``Q K^T`` on
``m16n8k16`` fragments, each f32 operand split into f16 hi + lo and three products
``ah bh + ah bl + al bh`` accumulated in f32, as in :mod:`.attention_mma`: a few 2**-24 of
``|q k|`` per term), stores it to a per-block scratch tile, and after a barrier the block's
threads do the softmax arithmetic on it, each thread a fixed set of (row, column) positions.

Two passes over the keys, so the output accumulators never need rescaling (fragments have no
element access): pass 1 keeps each thread's running maximum and sum of exponentials (online
softmax in f32 scalars) and combines them per row; pass 2 recomputes the same scores, forms
``p = exp(s - m) / l`` exactly normalised, splits it into f16 hi + lo in shared memory and
multiplies it with the step's V tile (split likewise) on fragments; warp ``w`` accumulates the
output columns ``w*DS ...`` of all 16 rows over all keys, and stores them once at the end into
the output ``Region`` declared by warp tiles, which the race checker proves.

The score scratch is a ``Raw`` global array (``[16 * blocks, KS]``, each block its own rows):
kaio's fragment stores go to global memory only, so the tile round-trips through L1/L2 instead
of shared memory; each warp stores its own 16 x KW tile, which the reference backend's
sanitizer checks. The causal variant skips the key steps past the block's last row.
"""
import functools

import numpy as np

import kaio
from kaio import f16, f32, regions

NW = 4                          # warps per block
ROWS = 16                       # query rows per block (one m16 tile)
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
    read consecutive addresses)."""
    for r in range(rows):
        for c in range(kaio.thread_idx.x, cols, kaio.block_dim.x):
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
    def step_scores(Qh, Ql, Kh, Kl, k, k0, kc, d, scr, row0, w):
        """Stage the step's keys (split) and store the warps' score tiles; after the barrier
        that ends it every thread may read scr and the tiles may be refilled."""
        split_rows(Kh, Kl, k, k0, kc, KS, dp, d)
        kaio.sync()
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
        Ph = kaio.shared_array(f16, (ROWS, KS + PAD))
        Pl = kaio.shared_array(f16, (ROWS, KS + PAD))
        red_m = kaio.shared_array(f32, (ROWS, KS))
        red_l = kaio.shared_array(f32, (ROWS, KS))
        row_m = kaio.shared_array(f32, (ROWS,))
        row_il = kaio.shared_array(f32, (ROWS,))
        m_t = kaio.local_array(f32, ROWS)       # this thread's running max and sum per row
        l_t = kaio.local_array(f32, ROWS)
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
        for rr in kaio.static_range(ROWS):
            m_t[rr] = f32(-kaio.math.inf)
            l_t[rr] = f32(0.0)
        # pass 1: each thread's running max and sum of exp over its key of each step
        for st in range(steps):
            k0 = st * KS
            step_scores(Qh, Ql, Kh, Kl, k, k0, kc, d, scr, row0, w)
            for rr in kaio.static_range(ROWS):
                if valid(row0 + rr, k0 + tid, n_rows, n_keys, causal):
                    s = scr[row0 + rr, tid] * scale
                    m_new = kaio.math.max(m_t[rr], s)
                    l_t[rr] = l_t[rr] * kaio.math.exp(m_t[rr] - m_new) + kaio.math.exp(s - m_new)
                    m_t[rr] = m_new
        for rr in kaio.static_range(ROWS):
            red_m[rr, tid] = m_t[rr]
            red_l[rr, tid] = l_t[rr]
        kaio.sync()
        if tid < ROWS:                          # thread t combines row t
            m = f32(-kaio.math.inf)
            for t in range(KS):
                m = kaio.math.max(m, red_m[tid, t])
            lsum = f32(0.0)
            for t in range(KS):
                mt = red_m[tid, t]
                if mt > -kaio.math.inf:
                    lsum += red_l[tid, t] * kaio.math.exp(mt - m)
            row_m[tid] = m
            row_il[tid] = 1.0 / lsum
        kaio.sync()
        # pass 2: the same scores, p = exp(s - m) / l split into f16 hi + lo, O += P V
        acc = kaio.mma.fill(f32, 0.0, m=ROWS, n=ds)
        for st in range(steps):
            k0 = st * KS
            step_scores(Qh, Ql, Kh, Kl, k, k0, kc, d, scr, row0, w)
            split_rows(Kh, Kl, v, k0, vc, KS, dp, d)     # V in K's tiles, Q K^T is done
            for rr in kaio.static_range(ROWS):
                p = f32(0.0)
                if valid(row0 + rr, k0 + tid, n_rows, n_keys, causal):
                    p = kaio.math.exp(scr[row0 + rr, tid] * scale - row_m[rr]) * row_il[rr]
                ph = f16(p)
                Ph[rr, tid] = ph
                Pl[rr, tid] = f16(p - f32(ph))
            kaio.sync()
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
