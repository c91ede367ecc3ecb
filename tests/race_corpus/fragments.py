"""The race corpus for fragment stores (``kaio.mma.store``) into per-warp Regions
(``kaio.regions.warp_tiles``): kernels the checker must accept, each with a numpy reference, and
racy ones it must reject, each with the launch on which, forced through unchecked, the reference
backend's sanitizer sees the race (or the lanes of a warp disagree, which no GPU defines).

``GOOD``: name -> run(variant, call) launching the kernel with ``call(kernel, *args)`` (the
test's sanitizing reference backend, at each warp width, default launch shape) and asserting its
numpy reference. ``BAD``: name -> (buffer the message names, launch, args,
expected misbehaviour: "race" a RaceError between two threads, "ownership" an element another
warp owns, "fragment" a FragmentError, "frontend" refused before the checker, and the warp width
to run at). The racy line carries ``# RACE``.
"""
from __future__ import annotations

import numpy as np

import kaio
from kaio import f16, f32
from kaio.regions import tiles, warp_tiles

RNG = np.random.default_rng(14)
BM, BN, WM, WN = 32, 32, 16, 16          # 4 warps per block, 2 x 2 warp tiles
WT = warp_tiles((BM, BN), (WM, WN))
TALL = warp_tiles((64, 16), (16, 16))    # 4 warps stacked: one warp tile per row of warps


def _h(*shape):
    return RNG.standard_normal(shape).astype(np.float16)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# --- accepted ---------------------------------------------------------------------------------
@kaio.kernel
def gemm_warp_tiles(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Region[f32, 2, WT],
                    alpha: f32, beta: f32):
    warp = kaio.thread_idx.x // kaio.warp_size
    r0 = kaio.block_idx.y * BM + (warp // (BN // WN)) * WM
    c0 = kaio.block_idx.x * BN + (warp % (BN // WN)) * WN
    acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN)
    for k in range(0, A.shape[1], 16):
        a = kaio.mma.load_a(A, r0, k, m=WM, k=16)
        b = kaio.mma.load_b(B, k, c0, k=16, n=WN)
        acc = kaio.mma.mma(a, b, acc)
    kaio.mma.store(C, r0, c0, acc, alpha=alpha, beta=beta)


def run_gemm_warp_tiles(v, call):
    m, n, k = ((32, 32, 16), (64, 96, 32), (96, 64, 48))[v]
    a, b, c = _h(m, k), _h(k, n), _f(m, n)
    want = 1.5 * (a.astype(np.float32) @ b.astype(np.float32)) - 0.5 * c
    call(gemm_warp_tiles, a, b, c, 1.5, -0.5)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


@kaio.kernel
def fill_out_edges(C: kaio.Out[f32, 2, WT], v: f32):
    w = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, v, m=WM, n=WN)
    kaio.mma.store(C, kaio.block_idx.y * BM + (w // 2) * WM, kaio.block_idx.x * BN + (w % 2) * WN, acc)


def run_fill_out_edges(v, call):
    shape = ((5, 7), (40, 33), (70, 100))[v]   # edge tiles: the store skips what lies outside
    c = np.zeros(shape, np.float32)
    call(fill_out_edges, c, 2.5)
    np.testing.assert_array_equal(c, np.full(shape, 2.5, np.float32))


@kaio.kernel
def tall_block_running_sum(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Region[f32, 2, TALL]):
    # warps stacked in one column of the block tile; every K step stores the running product
    # (the same tile, the same fragment type: each element always through the same lane)
    w = kaio.thread_idx.x // kaio.warp_size
    r0 = kaio.block_idx.y * 64 + w * 16
    c0 = kaio.block_idx.x * 16
    acc = kaio.mma.fill(f32, 0.0, m=16, n=16)
    for k in range(0, A.shape[1], 16):
        a = kaio.mma.load_a(A, r0, k, m=16, k=16)
        acc = kaio.mma.mma(a, kaio.mma.load_b(B, k, c0, k=16, n=16), acc)
        kaio.mma.store(C, r0, c0, acc)


def run_tall_block_running_sum(v, call):
    m, n, k = ((64, 16, 16), (128, 48, 32), (64, 32, 64))[v]
    a, b, c = _h(m, k), _h(k, n), np.zeros((m, n), np.float32)
    call(tall_block_running_sum, a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-4)


WIDE = warp_tiles((16, 64), (16, 16))   # 4 warps side by side: one row of warps


@kaio.kernel
def wide_block_one_row(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Out[f32, 2, WIDE]):
    w = kaio.thread_idx.x // kaio.warp_size
    r0 = kaio.block_idx.y * 16           # (w // 4) is 0: the block is exactly 4 warps
    c0 = kaio.block_idx.x * 64 + w * 16  # (w % 4) is w
    acc = kaio.mma.fill(f32, 0.0, m=16, n=16)
    for k in range(0, A.shape[1], 16):
        a = kaio.mma.load_a(A, r0, k, m=16, k=16)
        acc = kaio.mma.mma(a, kaio.mma.load_b(B, k, c0, k=16, n=16), acc)
    kaio.mma.store(C, r0, c0, acc, alpha=2.0)


def run_wide_block_one_row(v, call):
    m, n, k = ((16, 64, 16), (48, 128, 32), (32, 192, 16))[v]
    a, b, c = _h(m, k), _h(k, n), np.zeros((m, n), np.float32)
    call(wide_block_one_row, a, b, c)
    np.testing.assert_allclose(c, 2 * (a.astype(np.float32) @ b.astype(np.float32)), rtol=1e-5,
                               atol=1e-4)


@kaio.kernel
def gemm_warp_tiles_tf32(A: kaio.In[f32, 2], B: kaio.In[f32, 2], C: kaio.Region[f32, 2, WT]):
    """tf32 fragments (m16n8k8, f32 data): K steps of 8, the same warp tiles."""
    warp = kaio.thread_idx.x // kaio.warp_size
    r0 = kaio.block_idx.y * BM + (warp // (BN // WN)) * WM
    c0 = kaio.block_idx.x * BN + (warp % (BN // WN)) * WN
    acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN, shape=kaio.mma.m16n8k8)
    for k in range(0, A.shape[1], 8):
        acc = kaio.mma.mma(kaio.mma.load_a(A, r0, k, m=WM), kaio.mma.load_b(B, k, c0, n=WN), acc)
    kaio.mma.store(C, r0, c0, acc)


def run_gemm_warp_tiles_tf32(v, call):
    """Integers of up to 13 bits times small ones: tf32 rounds A (ties away), every sum exact."""
    m, n, k = ((32, 32, 8), (64, 96, 24), (96, 64, 40))[v]
    a = RNG.integers(-8191, 8192, (m, k)).astype(np.float32)
    b = RNG.integers(-3, 4, (k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    call(gemm_warp_tiles_tf32, a, b, c)
    np.testing.assert_array_equal(c, kaio.semantics.tf32(a).astype(np.float64) @ b)


# --- rejected ---------------------------------------------------------------------------------
@kaio.kernel
def same_tile_two_warps(C: kaio.Region[f32, 2, WT]):
    w = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, 1.0, m=WM, n=WN)
    # the row of warps is forgotten: warps 0 and 2 (and 1 and 3) store one tile
    kaio.mma.store(C, kaio.block_idx.y * BM, kaio.block_idx.x * BN + (w % 2) * WN, acc)  # RACE


@kaio.kernel
def step_smaller_than_fragment(C: kaio.Region[f32, 2, WT]):
    w = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, 1.0, m=WM, n=WN)
    # 16-wide fragments 8 columns apart: neighbouring warps overlap by half a tile
    kaio.mma.store(C, kaio.block_idx.y * BM + (w // 2) * WM, kaio.block_idx.x * BN + (w % 2) * 8, acc)  # RACE


@kaio.kernel
def fragment_larger_than_tile(C: kaio.Region[f32, 2, warp_tiles((32, 32), (16, 8))]):
    w = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, 1.0, m=16, n=16)
    # the partition's warp tiles are 16 x 8 (8 warps), the fragment 16 x 16
    kaio.mma.store(C, kaio.block_idx.y * 32 + (w // 4) * 16, kaio.block_idx.x * 32 + (w % 4) * 8, acc)  # RACE


@kaio.kernel
def lane_dependent_origin(C: kaio.Region[f32, 2, WT]):
    w = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, 1.0, m=WM, n=WN)
    r0 = kaio.block_idx.y * BM + (w // 2) * WM + kaio.lane_id() % 2
    kaio.mma.store(C, r0, kaio.block_idx.x * BN + (w % 2) * WN, acc)  # RACE


@kaio.kernel
def branch_splits_warp(C: kaio.Region[f32, 2, WT]):
    w = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, 1.0, m=WM, n=WN)
    r0, c0 = kaio.block_idx.y * BM + (w // 2) * WM, kaio.block_idx.x * BN + (w % 2) * WN
    if kaio.lane_id() < 8:
        kaio.mma.store(C, r0, c0, acc)  # RACE


@kaio.kernel
def literal_warp_width(C: kaio.Region[f32, 2, WT]):
    w = kaio.thread_idx.x // 32   # on 64-lane targets a warp holds two of these "warps"
    acc = kaio.mma.fill(f32, 1.0, m=WM, n=WN)
    r0, c0 = kaio.block_idx.y * BM + (w // 2) * WM, kaio.block_idx.x * BN + (w % 2) * WN
    kaio.mma.store(C, r0, c0, acc)  # RACE


@kaio.kernel
def tf32_k_step_as_column_step(A: kaio.In[f32, 2], C: kaio.Region[f32, 2, WT]):
    w = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN, shape=kaio.mma.m16n8k8)
    acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0, m=WM), kaio.mma.load_b(A, 0, 0, n=WN), acc)
    # tf32's k step (8) taken for the warps' column step: 16-wide tiles overlap by half
    kaio.mma.store(C, kaio.block_idx.y * BM + (w // 2) * WM, kaio.block_idx.x * BN + (w % 2) * 8, acc)  # RACE


@kaio.kernel
def thread_partition(C: kaio.Region[f32, 2, tiles(32, 32)]):
    acc = kaio.mma.fill(f32, 1.0, m=32, n=32)
    kaio.mma.store(C, kaio.block_idx.y * 32, kaio.block_idx.x * 32, acc)  # RACE


@kaio.kernel
def plain_store_to_warp_tile(C: kaio.Region[f32, 2, WT]):
    t = kaio.thread_idx.x
    C[kaio.block_idx.y * BM + t // 32, kaio.block_idx.x * BN + t % 32] = 1.0  # RACE


@kaio.kernel
def beta_reads_out(C: kaio.Out[f32, 2, WT], beta: f32):
    w = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, 1.0, m=WM, n=WN)
    r0, c0 = kaio.block_idx.y * BM + (w // 2) * WM, kaio.block_idx.x * BN + (w % 2) * WN
    kaio.mma.store(C, r0, c0, acc, beta=beta)  # RACE


def _c(rows=32, cols=32):
    return lambda: (np.zeros((rows, cols), np.float32),)


_LAUNCH = ((1, 1), (128,))   # one block of 4 warps at width 32
BAD = {
    "same_tile_two_warps": ("C", _LAUNCH, _c(), "race", 32),
    "step_smaller_than_fragment": ("C", _LAUNCH, _c(), "race", 32),
    "fragment_larger_than_tile": ("C", ((1, 1), (256,)), _c(), "race", 32),
    "lane_dependent_origin": ("C", _LAUNCH, _c(), "fragment", 32),
    "branch_splits_warp": (None, _LAUNCH, _c(), "fragment", 32),
    # at width 64 a block of 4 warps is 256 threads; `// 32` splits each warp in two
    "literal_warp_width": ("C", ((1, 1), (256,)), _c(), "fragment", 64),
    "tf32_k_step_as_column_step": ("C", _LAUNCH, lambda: (np.ones((32, 32), np.float32),
                                                          np.zeros((32, 32), np.float32)),
                                   "race", 32),
    "thread_partition": ("C", ((1, 1), (32, 2)), _c(), "ownership", 32),   # 2 warps, 1 tile
    "plain_store_to_warp_tile": ("C", _LAUNCH, _c(), "ownership", 32),
    "beta_reads_out": ("C", _LAUNCH, lambda: (np.zeros((32, 32), np.float32), 1.0), "frontend", 32),
}
GOOD = {name[4:]: fn for name, fn in globals().items() if name.startswith("run_")}
KERNELS = {name: globals()[name] for name in [*GOOD, *BAD]}
