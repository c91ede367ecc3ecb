"""The quantized matmuls on the matrix units (kaio.mma fragments); conventions: kaio.kernels.ml.quant.

- W8A8 (:func:`w8a8_kernel`): i8 x i8 on ``m16n8k32`` fragments with exact i32 accumulation.
  A block computes a ``BM x BN`` tile of c with eight ``WM x WN`` warp tiles; the K loop is
  double-buffered (``kaio.mma.copy_tile`` of the next K-step while the warps multiply this one).
  Each warp stores its own tile of c (``kaio.Raw``) with the scaling epilogue of
  ``kaio.mma.store(..., row_scale=sa, col_scale=sb)``: ``c = f32(acc) * sa[m] * sb[n]``, the
  same three f32 roundings as the scalar kernel.
- W4A16 (:func:`w4a16_kernel`): f16/bf16 activations on ``m16n8k16`` fragments, a tiled GEMM
  (tilings :data:`W4_TILES`, chosen per shape by kaio.autotune). The pipelined tilings
  (``s3_*``/``s4_*``, first where they fill the GPU) stage the x tile and the *packed* weight
  tile with ``copy_tile``, S - 1 K steps in flight, and unpack the weights as B fragments load
  them (``kaio.mma.load_b_int4``); their split-K forms (``*_k2``) give each warp tile two
  warps, each half of every K-step's slices, the halves' sums added through an f32
  workspace at the end. The others (within 48 KiB of static shared memory for
  every tile: the LLVM nvptx path) copy x and load each thread's packed bytes into registers;
  after the warps multiply the previous K-step, the threads write those bytes' int4 values
  once into a shared f16/bf16 tile (-8..7: exact in either), read with ldmatrix as the GEMM
  reads B. The scale is applied outside the multiply: per
  quantization group the warps accumulate ``tmp = x @ q`` in f32 (exact products), and where
  the group ends fold it in as ``acc += tmp * s[g, c]`` (one f32 fma) by element access
  (``kaio.mma.apply``): one matrix product per K-slice and exact weights. (A weight ``q * s``
  rounded once to f16 -- what cuBLAS on f16-dequantized weights computes -- leaves ~850 of the
  1M outputs of 256 x 4096 x 4096, group 128, outside the registry's atol = rtol = 1e-3; the
  kernel before element access carried it as two f16 parts and multiplied both.) Groups are
  multiples of 16 (one ``m16n8k16`` K-slice), which :mod:`.quant` checks before choosing this
  kernel. The output is rounded once to T (``kaio.mma.store``).

:mod:`kaio.kernels.ml.quant` launches them where the backend compiles them (W4A16 everywhere
fragments are lowered; W8A8 where ``m16n8k32`` is: kaio's PTX path, the LLVM nvptx64 path,
gfx942, the reference backend) and falls back to its scalar kernels elsewhere (gfx90a has no
int8 MFMA lowering) and for f32 activations.
"""
import functools

import kaio
import kaio.kernels.ml.quant_group as quant_group  # not `from . import`: the package __getattr__
from kaio import f32, i32

from .quant_stages import PPAD, QPAD, stages
from .quant_stages import group_ends as _group_ends
from .quant_stages import over as _over
from .tiled import double_buffered, warp_origins


@kaio.func
def int4_at(packed_byte, high):
    """The signed int4 in one nibble of a byte (as i32): low nibble when high == 0."""
    nib = (i32(packed_byte) >> (4 * high)) & 15
    return nib - ((nib & 8) << 1)


#: W8A8 tilings: block tile (BM, BN), K step BK, warp tile (WM, WN). The first is the default;
#: the small one is for outputs the large tiles cover with too few blocks to fill the GPU
#: (the quantized attention's projection, 1024 x 384: 24 blocks of 128 x 128, 96 of 64 x 64).
#: Its K step is 128 deep: there each block's few products cannot hide a copy's latency, so
#: the K loop costs about one global round trip per step (K = 512: four instead of eight).
W8_TILES = {"128x128x64_w64x32": (128, 128, 64, 64, 32), "64x64x128_w32x32": (64, 64, 128, 32, 32)}
W8_DEFAULT = "128x128x64_w64x32"
BM, BN, BK, WM, WN = W8_TILES[W8_DEFAULT]
PAD = 16                        # bytes of row padding of the shared i8 tiles


def threads(bm, bn, wm, wn, warp_size):
    return (bm // wm) * (bn // wn) * warp_size


def w8a8_tile(m: int, n: int, enough_blocks: int = 128) -> str:
    """The W8A8 tiling for an [m, n] output: the default unless its grid has fewer than
    ``enough_blocks`` blocks (about one per SM of a large GPU), then the small one."""
    bm, bn = W8_TILES[W8_DEFAULT][:2]
    return W8_DEFAULT if -(-m // bm) * -(-n // bn) >= enough_blocks else "64x64x128_w32x32"


@functools.lru_cache(maxsize=None)
def w8a8_kernel(warp_size: int = 32, tile: str = W8_DEFAULT):
    """c = diag(sa) (a @ b) diag(sb) on i8 fragments (exact i32 sums), one tiling of
    :data:`W8_TILES`. ``sa`` is [M, 1]."""
    BM, BN, BK, WM, WN = W8_TILES[tile]
    nthreads = threads(BM, BN, WM, WN, warp_size)

    @kaio.func
    def stage(As, Bs, a, b, row0, col0, k0):
        kaio.mma.copy_tile(As, a, row0, k0, cols=BK)
        kaio.mma.copy_tile(Bs, b, k0, col0, cols=BN)

    @kaio.func
    def step(As, Bs, wm, wn, acc):
        for kk in kaio.static_range(BK // 32):
            acc = kaio.mma.mma(kaio.mma.load_a(As, wm, kk * 32, m=WM, k=32),
                               kaio.mma.load_b(Bs, kk * 32, wn, k=32, n=WN), acc)
        return acc

    origins = warp_origins(BM, BN, WM, WN)
    k_loop = double_buffered(stage, step, BK)

    @kaio.kernel(block=(nthreads,))
    def matmul_w8a8_mma(a: kaio.In[kaio.i8, 2], b: kaio.In[kaio.i8, 2], sa: kaio.In[f32, 2],
                        sb: kaio.In[f32], c: kaio.Raw[f32, 2]):
        As0 = kaio.shared_array(kaio.i8, (BM, BK + PAD))
        Bs0 = kaio.shared_array(kaio.i8, (BK, BN + PAD))
        As1 = kaio.shared_array(kaio.i8, (BM, BK + PAD))
        Bs1 = kaio.shared_array(kaio.i8, (BK, BN + PAD))
        wm, wn, row0, col0 = origins()
        acc = kaio.mma.fill(i32, 0, m=WM, n=WN)
        acc = k_loop(As0, Bs0, As1, Bs1, a, b, row0, col0, wm, wn, acc, a.shape[1])
        kaio.mma.store(c, row0 + wm, col0 + wn, acc, row_scale=sa, col_scale=sb)

    return matmul_w8a8_mma


def w8a8_launch_config(m: int, n: int, warp_size: int = 32, tile: str = W8_DEFAULT):
    """(grid, block) of :func:`w8a8_kernel` for an [m, n] output."""
    bm, bn, _, wm, wn = W8_TILES[tile]
    return ((-(-n // bn), -(-m // bm)), (threads(bm, bn, wm, wn, warp_size),))



#: W4A16 tilings: block tile (BM, BN), K step BK, warp tile (WM, WN); :func:`w4a16_tiles` orders
#: them per shape. Shared memory is 2 * (BM (BK + 8) + BK (BN + 8)) * 2 bytes
#: (:func:`w4a16_shared_bytes`): the 32-deep tilings and 64x64x64 fit the 48 KiB every NVIDIA
#: path allows statically; the others (52 to 70 KiB) use kaio's PTX path's dynamic shared
#: memory and are skipped where a target refuses them. At the bench shape (M = 256, N = 4096)
#: 64 x 128 and 128 x 64 tiles make 128 blocks for the H200's 132 SMs, 64 x 64 tiles 256 (two
#: per SM), 128 x 128 tiles 64.
W4_TILES = {
    "64x128x32_w32x32": (64, 128, 32, 32, 32),
    "64x128x64_w32x32": (64, 128, 64, 32, 32),
    "128x64x64_w32x32": (128, 64, 64, 32, 32),
    "64x64x64_w32x32": (64, 64, 64, 32, 32),
    "64x64x32_w32x32": (64, 64, 32, 32, 32),
    "128x128x64_w64x32": (128, 128, 64, 64, 32),
}
#: pipelined tilings (:func:`_w4a16_pipelined`): (BM, BN, BK, WM, WN, S), S stages of the x tile
#: and the *packed* weight tile in flight (copy_tile + copy_wait), B fragments unpacked from the
#: staged bytes (``kaio.mma.load_b_int4``): no unpacking pass through shared memory
W4_TILES.update({
    "s4_64x128x64_w64x32": (64, 128, 64, 64, 32, 4),
    "s4_128x64x64_w64x32": (128, 64, 64, 64, 32, 4),
    "s4_64x64x64_w32x32": (64, 64, 64, 32, 32, 4),
    "s3_64x128x64_w64x32": (64, 128, 64, 64, 32, 3),
})
#: in-block split-K tilings (:func:`_w4a16_split`): (BM, BN, BK, WM, WN, S, KS), a pipelined
#: tiling with KS = 2 warps per warp tile, each multiplying half of every K-step's slices
W4_TILES.update({
    "s4_64x128x64_w64x32_k2": (64, 128, 64, 64, 32, 4, 2),
    "s4_128x64x64_w64x32_k2": (128, 64, 64, 64, 32, 4, 2),
})
#: warp-group tilings (:mod:`.quant_group`: y^T = W^T x^T, the unpacked weights wgmma's register
#: A operand on sm_90): (BM, BN, BK, BM, 16, S), each warp all BM rows of y by 16 columns,
#: named wg<BM>x<BN>x<BK>_s<S>
W4_TILES.update({f"wg{bm}x{bn}x{bk}_s{s}": (bm, bn, bk, bm, 16, s) for bm, bn, bk, s in (
    (64, 128, 128, 4), (64, 128, 128, 3), (64, 64, 128, 4), (128, 64, 128, 4), (64, 128, 64, 4),
    (128, 64, 64, 4), (64, 64, 64, 4))})     # 32-row ones measured slower (45 us against 33-35)
W4_DEFAULT = "64x128x32_w32x32"
#: most packed bytes a thread holds per K-step (fetch's tuples); threads per packed row
MAXNB, CW = 16, 32


def w4a16_geometry(tile: str, warp_size: int = 32):
    """(threads, RS, NR, NC) of a W4A16 tiling: its block is CW x RS threads (CW = 32); thread
    (x, y) dequantizes columns ``x + CW * j`` (j < NC) of packed rows ``y + RS * i`` (i < NR) of
    the block's weight tile: a warp's loads read 32 neighbouring bytes of a row (each row's
    address computed once per K-step, the columns immediate offsets), its shared stores write 32
    neighbouring f16/bf16 of a row (conflict-free)."""
    bm, bn, bk, wm, wn = W4_TILES[tile]
    nthreads = threads(bm, bn, wm, wn, warp_size)
    rs = nthreads // CW
    if nthreads % CW or bn % CW or (bk // 2) % rs or (bk // 2 // rs) * (bn // CW) > MAXNB:
        raise ValueError(f"W4A16 tiling {tile}: {nthreads} threads do not divide its "
                         f"{bk // 2} x {bn} packed weight tile into at most {MAXNB} bytes each")
    return nthreads, rs, bk // 2 // rs, bn // CW


@kaio.func
def _byte_at(packed, kb, n, ok, live):
    """packed[kb, n] as i32 where ``live`` (a compile-time flag), column n ok and row kb in
    range, else 0 (a zero weight)."""
    v = i32(0)
    if live:
        if ok and kb < packed.shape[0]:
            v = i32(packed[kb, n])
    return v


@kaio.func
def _fold(x, r, c, t, scales, g):
    """The accumulator element plus the group's product times its scale: one f32 fma (one
    rounding). Indices are clamped into the scales: past the weights' columns (edge tiles) or
    their groups (the zero-filled K tail) tmp is 0, so the element stays x."""
    s = f32(scales[min(g, scales.shape[0] - 1), min(c, scales.shape[1] - 1)])
    return kaio.math.fma(t, s, x)


@functools.lru_cache(maxsize=None)
def w4a16_kernel(dt: str, warp_size: int = 32, tile: str = W4_DEFAULT):
    """y = x @ dequant(w) on f16/bf16 fragments (``dt``) for one tiling of :data:`W4_TILES`;
    ``group`` a multiple of 16.

    Per K-step each thread loads its bytes of the packed weight tile into registers, the block
    copies its x tile with ``copy_tile`` (cp.async), the warps multiply the previous step into
    the group's ``tmp`` (folding it into ``acc`` with its scales where a group ends), and then
    the threads write the int4 values of their bytes into the shared weight tile; one barrier,
    and the two pairs of shared tiles swap (double buffering). The loads come before the copy on
    purpose: the copy's branches keep ptxas from sinking them below the mma (issued after the
    copy, they were scheduled after the step's HMMAs, their latency exposed)."""
    T = {"f16": kaio.f16, "bf16": kaio.bf16}[dt]
    if _group(tile):
        bm, bn, bk, _, _, s = W4_TILES[tile]
        return quant_group.kernel(T, warp_size, bm, bn, bk, s)
    if _splits(tile) > 1:
        return _w4a16_split(T, warp_size, *W4_TILES[tile])
    if _pipelined(tile):
        return _w4a16_pipelined(T, warp_size, *W4_TILES[tile])
    BM_, BN_, BK_, WM_, WN_ = W4_TILES[tile]
    RS, NR, NC = w4a16_geometry(tile, warp_size)[1:]
    NB = NR * NC

    @kaio.func
    def pick(P, kb, n, ok, i):
        """This thread's packed byte i (row i // NC, column i % NC)."""
        return _byte_at(P, kb + RS * (i // NC), n + CW * (i % NC), ok[i % NC], i < NB)

    @kaio.func
    def fetch(P, k0, n, ty):
        """This thread's packed bytes of the K-step at k0: MAXNB values (entries past NB are
        never loaded; entry i: row i // NC, column i % NC), zeros outside the weights. They stay
        in registers across the step's mma (a local_array would live on the stack: ptxas keeps
        it there when copy_tile's fallback loop is in the kernel)."""
        ok = (n < P.shape[1], n + CW < P.shape[1], n + 2 * CW < P.shape[1], n + 3 * CW < P.shape[1])
        kb = (k0 >> 1) + ty
        return (pick(P, kb, n, ok, 0), pick(P, kb, n, ok, 1), pick(P, kb, n, ok, 2),
                pick(P, kb, n, ok, 3), pick(P, kb, n, ok, 4), pick(P, kb, n, ok, 5),
                pick(P, kb, n, ok, 6), pick(P, kb, n, ok, 7), pick(P, kb, n, ok, 8),
                pick(P, kb, n, ok, 9), pick(P, kb, n, ok, 10), pick(P, kb, n, ok, 11),
                pick(P, kb, n, ok, 12), pick(P, kb, n, ok, 13), pick(P, kb, n, ok, 14),
                pick(P, kb, n, ok, 15))

    @kaio.func
    def unpack(Wq, e, tx, ty):
        """Shared Wq = q (exact in T) for this thread's bytes (low nibble: even k)."""
        for i in kaio.static_range(NB):
            r = 2 * (ty + RS * (i // NC))
            c = tx + CW * (i % NC)
            for h in range(2):      # a loop (ptxas unrolls it): half the stores to race-check
                Wq[r + h, c] = T((e[i] << (28 - 4 * h)) >> 28)     # the signed nibble

    @kaio.func
    def step(Xs, Wq, wm, wn, acc, tmp, k0, half, S, r0, c0, group):
        """One K-step into tmp, folded into acc (acc += tmp * S[g, c]) where a group ends;
        ``half`` (0 or 1, compile-time): which K-step of the loop iteration this is."""
        for kk in kaio.static_range(BK_ // 16):
            a = kaio.mma.load_a(Xs, wm, kk * 16, m=WM_, k=16)
            tmp = kaio.mma.mma(a, kaio.mma.load_b(Wq, kk * 16, wn, k=16, n=WN_), tmp)
            end = k0 + 16 * (kk + 1)
            if _group_ends(end, half * BK_ + 16 * (kk + 1), group, 2 * BK_):
                acc = kaio.mma.apply(_fold, acc, r0, c0, tmp, S, _over(end, group) - 1)
                tmp = kaio.mma.fill(f32, 0.0, m=WM_, n=WN_)
        return acc, tmp

    @kaio.kernel(block=(CW, RS))        # 2-d: x walks a packed row's columns, y the rows
    def matmul_w4a16_mma(x: kaio.In[T, 2], packed: kaio.In[kaio.u8, 2], scales: kaio.In[T, 2],
                         y: kaio.Raw[T, 2], group: kaio.Const[int]):
        Xs0 = kaio.shared_array(T, (BM_, BK_ + QPAD))
        Wq0 = kaio.shared_array(T, (BK_, BN_ + QPAD))
        Xs1 = kaio.shared_array(T, (BM_, BK_ + QPAD))
        Wq1 = kaio.shared_array(T, (BK_, BN_ + QPAD))
        tx = kaio.thread_idx.x
        ty = kaio.thread_idx.y
        warp = (ty * CW + tx) // kaio.warp_size
        wm = (warp // (BN_ // WN_)) * WM_
        wn = (warp % (BN_ // WN_)) * WN_
        row0 = kaio.block_idx.y * BM_
        col0 = kaio.block_idx.x * BN_
        n = col0 + tx
        acc = kaio.mma.fill(f32, 0.0, m=WM_, n=WN_)
        tmp = kaio.mma.fill(f32, 0.0, m=WM_, n=WN_)
        kaio.mma.copy_tile(Xs0, x, row0, 0, cols=BK_)
        unpack(Wq0, fetch(packed, 0, n, ty), tx, ty)
        kaio.sync()
        for k0 in range(0, x.shape[1], 2 * BK_):
            e = fetch(packed, k0 + BK_, n, ty)
            kaio.mma.copy_tile(Xs1, x, row0, k0 + BK_, cols=BK_)
            acc, tmp = step(Xs0, Wq0, wm, wn, acc, tmp, k0, 0, scales, row0 + wm, col0 + wn,
                            group)
            unpack(Wq1, e, tx, ty)
            kaio.sync()
            e = fetch(packed, k0 + 2 * BK_, n, ty)
            kaio.mma.copy_tile(Xs0, x, row0, k0 + 2 * BK_, cols=BK_)
            acc, tmp = step(Xs1, Wq1, wm, wn, acc, tmp, k0 + BK_, 1, scales, row0 + wm,
                            col0 + wn, group)
            unpack(Wq0, e, tx, ty)
            kaio.sync()
        kaio.mma.store(y, row0 + wm, col0 + wn, acc)

    return matmul_w4a16_mma


def _pipeline(T, BM_, BN_, BK_, S, nsl, slices):
    """(buffers, k_loop), the @kaio.funcs of a pipelined W4A16 kernel. ``buffers()``: the S
    stages' shared tiles (:func:`stages`); ``k_loop(Xs, Ps, x, packed, row0, col0, state, ctx)``:
    S - 1 K-steps copied ahead (``copy_tile``), then per K-step ``slices(Xs, Ps, state, ctx,
    kstep, s, lo, hi) -> state`` over the warp's ``nsl`` 16-deep slices of the oldest: its
    first slice before the copy of the step S - 1 ahead (its loads go out right after the
    barrier), the others after. ``state`` is the warp's fragments (a tuple), ``ctx`` what
    ``slices`` reads besides the staged tiles."""
    buffers, stage = stages(T, BM_, BN_, BK_, S)

    @kaio.func
    def k_loop(Xs, Ps, x, packed, row0, col0, state, ctx):
        for s in kaio.static_range(S - 1):
            stage(Xs[s], Ps[s], x, packed, row0, col0, s * BK_)
        for k0 in range(0, x.shape[1], S * BK_):
            for s in kaio.static_range(S):
                # the oldest K-step's two copies complete (the S - 2 younger steps stay in
                # flight) and, after the barrier, are visible; every warp is done with the
                # stage of the step before, which takes the step S - 1 ahead
                kaio.mma.copy_wait(pending=2 * (S - 2))
                kaio.sync()
                nxt = (s + S - 1) % S
                state = slices(Xs[s], Ps[s], state, ctx, k0 + s * BK_, s, 0, 1)
                stage(Xs[nxt], Ps[nxt], x, packed, row0, col0, k0 + (s + S - 1) * BK_)
                state = slices(Xs[s], Ps[s], state, ctx, k0 + s * BK_, s, 1, nsl)
        return state
    return buffers, k_loop


def _w4a16_pipelined(T, warp_size, BM_, BN_, BK_, WM_, WN_, S):
    """The W4A16 kernel of a pipelined tiling (:func:`_pipeline`): ``S - 1`` K-steps in flight
    while the warps multiply the oldest, their B fragments unpacked from the staged bytes as
    they are loaded (``kaio.mma.load_b_int4``). The scale is folded in per quantization group
    as in :func:`w4a16_kernel`."""
    nthreads = threads(BM_, BN_, WM_, WN_, warp_size)
    origins = warp_origins(BM_, BN_, WM_, WN_)
    span = S * BK_

    @kaio.func
    def slices(Xs, Ps, state, ctx, k0, s, lo, hi):
        """Slices lo .. hi - 1 (16 deep) of the staged K-step ``s`` of its iteration into tmp,
        folded into acc where a quantization group ends."""
        acc, tmp = state
        wm, wn, S_, row0, col0, group = ctx
        r0, c0 = row0 + wm, col0 + wn
        for kk in kaio.static_range(lo, hi):
            a = kaio.mma.load_a(Xs, wm, kk * 16, m=WM_, k=16)
            b = kaio.mma.load_b_int4(Ps, kk * 8, wn, T, k=16, n=WN_)
            tmp = kaio.mma.mma(a, b, tmp)
            end = k0 + 16 * (kk + 1)
            if _group_ends(end, s * BK_ + 16 * (kk + 1), group, span):
                acc = kaio.mma.apply(_fold, acc, r0, c0, tmp, S_, _over(end, group) - 1)
                tmp = kaio.mma.fill(f32, 0.0, m=WM_, n=WN_)
        return acc, tmp

    buffers, k_loop = _pipeline(T, BM_, BN_, BK_, S, BK_ // 16, slices)

    @kaio.kernel(block=(nthreads,))
    def matmul_w4a16_pipelined(x: kaio.In[T, 2], packed: kaio.In[kaio.u8, 2],
                               scales: kaio.In[T, 2], y: kaio.Raw[T, 2],
                               group: kaio.Const[int]):
        Xs, Ps = buffers()
        wm, wn, row0, col0 = origins()
        zero = kaio.mma.fill(f32, 0.0, m=WM_, n=WN_)
        acc = k_loop(Xs, Ps, x, packed, row0, col0, (zero, zero),
                     (wm, wn, scales, row0, col0, group))[0]
        kaio.mma.store(y, row0 + wm, col0 + wn, acc)

    return matmul_w4a16_pipelined


@kaio.func
def _add(x, r, c, t):
    """The accumulator element plus another accumulator's (one f32 addition)."""
    return x + t


def _w4a16_split(T, warp_size, BM_, BN_, BK_, WM_, WN_, S, KS):
    """The pipelined kernel with each K-step split between KS = 2 warps per warp tile (twice
    the warps, each with half the slices: where one block per SM leaves each scheduler a
    single warp waiting on its own dependences, the other half's warp issues meanwhile).
    Warp w + h * NW (NW warp tiles, h = 0, 1) multiplies slices ``h * nsl .. h * nsl + nsl - 1``
    of every K-step into its own group products and accumulators, folded where a group ends
    *for its slices* (:func:`folds`). Its WM x WN tile is two WM / 2-row accumulators: the
    rows it stores (``rm``) and the other half's (``ro``). At the end each warp writes the
    latter to the f32 workspace ``work`` (tile-padded: every element is written and read),
    and after a barrier adds the other warp's sums of its rows and stores y: no branch on the
    warp (kaio takes fragment ops under block-uniform control only; a warp-dependent branch is
    refused), each warp half the epilogue. The barrier orders the block's global accesses on
    the GPUs (PTX bar.sync; AMD: workgroup fences around s_barrier) and in the reference
    backend's race sanitizer (a barrier fences its block's global accesses). Slice offsets
    depend on the half at run time (fixed per warp: base registers out of the loop)."""
    nw, per_row = (BM_ // WM_) * (BN_ // WN_), BN_ // WN_
    HM, KH = WM_ // 2, BK_ // KS            # rows of each accumulator, K of a half's slices
    nsl, span = KH // 16, S * BK_

    @kaio.func
    def folds(end, nxt, j, kstep, s, group):
        """Whether the warp folds after its slice j ending at K offset ``end``, its next slice
        starting at ``nxt`` (the other half's slices lie between): where a multiple of the
        group lies in [end, nxt]; the scale is that group's. Block-uniform for groups dividing
        KH (they end at the same slices of either half) and multiples of BK_ (only at the
        step's end, which both halves' last slices reach: :func:`_group_ends`); for other
        groups the test depends on the half, and kaio refuses the fold under it (the library
        takes another tiling: :func:`w4a16_group_ok`)."""
        r = False
        if KH % group == 0:
            r = (16 * (j + 1)) % group == 0
        elif group % BK_ == 0:
            if j == nsl - 1:
                r = _group_ends(kstep + BK_, s * BK_ + BK_, group, span)
        else:
            r = _over(nxt, group) * group >= end
        return r

    @kaio.func
    def scale_row(end, kstep, j, h, group):
        """The group :func:`folds` folds: the first ending at or after ``end``; from the
        block-uniform kstep and the half h where :func:`folds` is uniform (a shift of the
        warp-dependent end by 5 would read as a warp width)."""
        g = _over(kstep + BK_, group) - 1
        if KH % group == 0:
            g = _over(kstep, group) + (KH // group) * h + (16 * (j + 1)) // group - 1
        elif group % BK_ != 0:
            g = _over(end + group - 1, group) - 1
        return g

    @kaio.func
    def slices(Xs, Ps, state, ctx, kstep, s, lo, hi):
        """The warp's slices lo .. hi - 1 of the staged K-step ``s`` (K offset ``kh`` in it,
        packed row ``kh / 2``) into both row halves' group products, folded where
        :func:`folds` says."""
        am, tm, ao, to = state
        rm, ro, wn, h, S_, r0m, r0o, c0, group = ctx
        kh = KH * h
        for j in kaio.static_range(lo, hi):
            b = kaio.mma.load_b_int4(Ps, (KH // 2) * h + 8 * j, wn, T, k=16, n=WN_)
            tm = kaio.mma.mma(kaio.mma.load_a(Xs, rm, kh + 16 * j, m=HM, k=16), b, tm)
            to = kaio.mma.mma(kaio.mma.load_a(Xs, ro, kh + 16 * j, m=HM, k=16), b, to)
            end = kstep + kh + 16 * (j + 1)
            nxt = end
            if j == nsl - 1:
                nxt = kstep + BK_ + kh
            if folds(end, nxt, j, kstep, s, group):
                g = scale_row(end, kstep, j, h, group)
                am = kaio.mma.apply(_fold, am, r0m, c0, tm, S_, g)
                ao = kaio.mma.apply(_fold, ao, r0o, c0, to, S_, g)
                tm = kaio.mma.fill(f32, 0.0, m=HM, n=WN_)
                to = kaio.mma.fill(f32, 0.0, m=HM, n=WN_)
        return am, tm, ao, to

    buffers, k_loop = _pipeline(T, BM_, BN_, BK_, S, nsl, slices)

    @kaio.kernel(block=(KS * nw * warp_size,))
    def matmul_w4a16_split(x: kaio.In[T, 2], packed: kaio.In[kaio.u8, 2],
                           scales: kaio.In[T, 2], y: kaio.Raw[T, 2], work: kaio.Raw[f32, 2],
                           group: kaio.Const[int]):
        Xs, Ps = buffers()
        warp = kaio.thread_idx.x // kaio.warp_size
        h = _over(warp, nw)                         # the warp's half of each K-step
        w = warp - h * nw                           # its warp tile
        wm, wn = (w // per_row) * WM_, (w % per_row) * WN_
        rm, ro = wm + HM * h, wm + HM - HM * h
        row0, col0 = kaio.block_idx.y * BM_, kaio.block_idx.x * BN_
        zero = kaio.mma.fill(f32, 0.0, m=HM, n=WN_)
        am, _, ao, _ = k_loop(Xs, Ps, x, packed, row0, col0, (zero, zero, zero, zero),
                              (rm, ro, wn, h, scales, row0 + rm, row0 + ro, col0 + wn,
                               group))
        kaio.mma.store(work, row0 + ro, col0 + wn, ao)
        kaio.sync()
        theirs = kaio.mma.load_acc(work, row0 + rm, col0 + wn, m=HM, n=WN_)
        kaio.mma.store(y, row0 + rm, col0 + wn,
                       kaio.mma.apply(_add, am, row0 + rm, col0 + wn, theirs))

    return matmul_w4a16_split


def w4a16_launch_config(m: int, n: int, warp_size: int = 32, tile: str = W4_DEFAULT):
    """(grid, block) of :func:`w4a16_kernel` for an [m, n] output (a 2-d block, or 1-d for the
    pipelined tilings)."""
    bm, bn, _, wm, wn = W4_TILES[tile][:5]
    grid = (-(-n // bn), -(-m // bm))
    if _pipelined(tile):
        return grid, (_splits(tile) * threads(bm, bn, wm, wn, warp_size),)
    return grid, (CW, w4a16_geometry(tile, warp_size)[1])


def _pipelined(tile: str) -> bool:
    return len(W4_TILES[tile]) >= 6


def _group(tile: str) -> bool:
    """Whether a tiling is a warp-group one (:mod:`.quant_group`)."""
    return tile.startswith("wg")


def _splits(tile: str) -> int:
    """Warps per warp tile (KS): 2 for the split-K tilings, else 1."""
    return W4_TILES[tile][6] if len(W4_TILES[tile]) > 6 else 1


def w4a16_workspace(tile: str, m: int, n: int):
    """The shape of the f32 workspace (the kernel's ``work``, after ``y``) a split-K tiling
    takes for an [m, n] output: m and n rounded up to whole block tiles (its warps exchange
    whole fragments there); None for the other tilings (no such parameter)."""
    if _splits(tile) == 1:
        return None
    bm, bn = W4_TILES[tile][:2]
    return (-(-m // bm) * bm, -(-n // bn) * bn)


#: bytes of static shared memory every NVIDIA code path allows
STATIC_SHARED = 48 * 1024


def w4a16_shared_bytes(tile: str) -> int:
    """Shared memory of a W4A16 tiling: two stages of the x tile and the weight tile."""
    bm, bn, bk = W4_TILES[tile][:3]
    if _group(tile):        # swizzled x tiles: no padding
        return W4_TILES[tile][5] * (bm * bk * 2 + bk // 2 * (bn + PPAD))
    if _pipelined(tile):
        return W4_TILES[tile][5] * (bm * (bk + QPAD) * 2 + bk // 2 * (bn + PPAD))
    return 2 * (bm * (bk + QPAD) + bk * (bn + QPAD)) * 2


def w4a16_group_ok(group: int, tile: str | None = None) -> bool:
    """Whether :func:`w4a16_kernel` takes quantization groups of ``group`` (K-slices of 16);
    with ``tile``, whether that tiling does: the split-K ones fold block-uniformly only groups
    dividing a warp's half of the K step or multiples of the whole step (16, 32, 64, 128, ...
    for 64-deep steps; :func:`_w4a16_split`)."""
    ok = group > 0 and group % 16 == 0
    if ok and tile is not None and _splits(tile) > 1:
        bk = W4_TILES[tile][2]
        ok = (bk // _splits(tile)) % group == 0 or group % bk == 0
    return ok


#: blocks that fill an H200 (132 SMs) to within a few percent
FILL_BLOCKS = 120
def w4a16_tiles(m: int, n: int) -> list[str]:
    """The tilings of :data:`W4_TILES` in order of preference for an [m, n] output (the first
    is the default where it compiles; kaio.autotune times them all on a GPU): tilings that make
    at least :data:`FILL_BLOCKS` blocks first, the warp-group ones first of all (wgmma with the
    unpacked weights as its register operand on sm_90: 33.3 us for the best at 256 x 4096 x
    4096 on the H200, 2026-12-02; 128-deep K steps, more stages, fewer rows, fewer columns
    first), then the pipelined ones before the others (they unpack
    the staged bytes as fragments: 54.8 us against 84.2 for the best other tiling on the H200 at
    256 x 4096 x 4096), the largest block tile among them (the fewest reloads of x and the
    fewest dequantizations per multiply), the pipelined ones then more stages and columns, the
    others more rows (each weight is dequantized once per BM rows of x: 128 x 64 issues 959
    SASS instructions per 128 HMMA in its K loop, 64 x 128 1294), then the longer K step; on
    outputs too small to fill the GPU,
    the most blocks first, then the tilings whose shared tiles fit every NVIDIA path's 48 KiB
    of static shared memory, the smallest tile. The split-K tilings rank right after the tiling
    they split: on the H200 at 256 x 4096 x 4096 (128 blocks, one per SM) the 64 x 128 one
    took 59.3 us against 56.8 unsplit, 128 x 64 58.8 against 57.9 (2026-12-02, ``kaio bench
    --gemm --w4a16-tiles``): a second warp per scheduler did not pay for each warp's copies
    and folds (11.9 SASS instructions per HMMA against 8.75)."""
    def rank(name):
        bm, bn, bk = W4_TILES[name][:3]
        blocks = -(-m // bm) * -(-n // bn)
        split = _splits(name) > 1
        if blocks >= FILL_BLOCKS:
            if _group(name):        # H200, 256 x 4096 x 4096: 33.3-50.5 us (BK = 128 first)
                return (True, 2, bk, W4_TILES[name][5], -bm, -bn)
            if _pipelined(name):    # H200, 256 x 4096 x 4096: 64 x 128 54.8 us, 128 x 64 59.2
                return (True, 1, bm * bn, W4_TILES[name][5], bn, bk, not split)  # s3: 77.1
            return (True, 0, bm * bn, bm, bk)
        return (False, blocks, w4a16_shared_bytes(name) <= STATIC_SHARED,     # warp-group
                _pipelined(name) + (not _group(name)), -bm * bn, bk, not split)  # unmeasured
    return sorted(W4_TILES, key=rank, reverse=True)

