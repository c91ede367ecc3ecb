"""What limits the library GEMM's mma.sync main loop: the same K loop with parts taken away.

    python3 scripts/gemm_ablation.py [--n 4096] [--tiles 256x128x64_w64x64_s3,...]

For each tiling it times at n^3, f16 -> f32 (CUDA events, median of 5 x 10 launches: the timer
of benchmarks/bench_gpu.py):
  library   kaio.kernels.ml.gemm's kernel (the numbers `kaio bench --gemm` reports);
  no-copy   the same loop with the in-loop global->shared copies left out (the prologue fills
            the stages once; results are wrong on purpose): ldmatrix + mma + barriers only;
  no-sync   no-copy without the per-K-step barrier: ldmatrix + mma only;
  copy-only the copies, waits and barriers alone (3 stages), no ldmatrix or mma;
  library   with one more stage in flight, where shared memory allows;
  spread    the library's 3-stage loop with the A and B copies after different slices.
The gap library -> no-copy is what feeding shared memory from global/L2 costs; no-copy -> no-sync
what the barrier costs; no-sync against benchmarks/mma_peak.py what ldmatrix costs. A
measurement tool, not a library kernel.
"""
import argparse
import os
import sys

import numpy as np

import kaio
from kaio import f16, f32
from kaio.kernels.ml import gemm as G
from kaio.kernels.ml.tiled import warp_origins

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from bench_gpu import timed  # noqa: E402  (CUDA events, median of rounds: milliseconds)


def _pieces(tile: str):
    """(threads, C's warp_tiles, A and B shared tile shapes, warp_origins, the K-step copy) of
    a library tiling, as kernels/ml/gemm.py builds them (no transposes)."""
    BM, BN, BK, WM, WN, _ = G.TILES[tile]

    @kaio.func
    def stage(As, Bs, A, B, row0, col0, k0):
        kaio.mma.copy_tile(As, A, row0, k0, cols=BK)
        kaio.mma.copy_tile(Bs, B, k0, col0, cols=BN)
    return ((BM // WM) * (BN // WN) * 32, kaio.regions.warp_tiles((BM, BN), (WM, WN)),
            (BM, BK + G.PAD), (BK, BN + G.PAD), warp_origins(BM, BN, WM, WN), stage)


def ablated(tile: str, barrier: bool):
    BM, BN, BK, WM, WN, S = G.TILES[tile]
    threads, out_tiles, a_tile, b_tile, origins, stage = _pieces(tile)

    @kaio.func
    def step(As, Bs, wm, wn, acc):
        for kk in kaio.static_range(BK // 16):
            a = kaio.mma.load_a(As, wm, kk * 16, m=WM, k=16)
            b = kaio.mma.load_b(Bs, kk * 16, wn, k=16, n=WN)
            acc = kaio.mma.mma(a, b, acc)
        return acc

    @kaio.kernel(block=(threads,))
    def gemm_ablated(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Region[f32, 2, out_tiles]):
        As = (kaio.shared_array(f16, a_tile), kaio.shared_array(f16, a_tile))
        Bs = (kaio.shared_array(f16, b_tile), kaio.shared_array(f16, b_tile))
        wm, wn, row0, col0 = origins()
        K = A.shape[1]
        acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN)
        stage(As[0], Bs[0], A, B, row0, col0, 0)
        stage(As[1], Bs[1], A, B, row0, col0, BK)
        kaio.mma.copy_wait(pending=0)
        kaio.sync()
        for _k0 in range(0, K, 2 * BK):
            for s in kaio.static_range(2):
                if barrier:
                    kaio.sync()
                acc = step(As[s], Bs[s], wm, wn, acc)
        kaio.mma.store(C, row0 + wm, col0 + wn, acc)
    return gemm_ablated


def copy_only(tile: str):
    """The library loop's copies alone (S stages in flight, a barrier per K-step), no mma:
    the rate global/L2 -> shared sustains for this tiling's traffic."""
    BM, BN, BK, WM, WN, S = G.TILES[tile]
    threads, out_tiles, a_tile, b_tile, origins, stage = _pieces(tile)

    @kaio.kernel(block=(threads,))
    def gemm_copy_only(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Region[f32, 2, out_tiles]):
        As = (kaio.shared_array(f16, a_tile), kaio.shared_array(f16, a_tile),
              kaio.shared_array(f16, a_tile))
        Bs = (kaio.shared_array(f16, b_tile), kaio.shared_array(f16, b_tile),
              kaio.shared_array(f16, b_tile))
        wm, wn, row0, col0 = origins()
        K = A.shape[1]
        acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN)
        for s in kaio.static_range(2):
            stage(As[s], Bs[s], A, B, row0, col0, s * BK)
        for k0 in range(0, K, 3 * BK):
            for s in kaio.static_range(3):
                kaio.mma.copy_wait(pending=2)
                kaio.sync()
                stage(As[(s + 2) % 3], Bs[(s + 2) % 3], A, B, row0, col0, k0 + (s + 2) * BK)
        kaio.mma.copy_wait(pending=0)
        kaio.sync()
        a = kaio.mma.load_a(As[0], wm, 0, m=WM, k=16)
        b = kaio.mma.load_b(Bs[0], 0, wn, k=16, n=WN)
        acc = kaio.mma.mma(a, b, acc)
        kaio.mma.store(C, row0 + wm, col0 + wn, acc)
    return gemm_copy_only


def spread(tile: str):
    """The library's pipelined loop (S stages) with the next K-step's A copy issued after the
    first 16-deep slice and its B copy after the second, instead of both after the first."""
    BM, BN, BK, WM, WN, S = G.TILES[tile]
    threads, out_tiles, a_tile, b_tile, origins, stage = _pieces(tile)

    @kaio.func
    def slice_(As, Bs, wm, wn, kk, acc):
        a = kaio.mma.load_a(As, wm, kk * 16, m=WM, k=16)
        b = kaio.mma.load_b(Bs, kk * 16, wn, k=16, n=WN)
        return kaio.mma.mma(a, b, acc)

    @kaio.kernel(block=(threads,))
    def gemm_spread(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Region[f32, 2, out_tiles]):
        As = (kaio.shared_array(f16, a_tile), kaio.shared_array(f16, a_tile),
              kaio.shared_array(f16, a_tile))
        Bs = (kaio.shared_array(f16, b_tile), kaio.shared_array(f16, b_tile),
              kaio.shared_array(f16, b_tile))
        wm, wn, row0, col0 = origins()
        K = A.shape[1]
        acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN)
        for s in kaio.static_range(2):
            kaio.mma.copy_tile(As[s], A, row0, s * BK, cols=BK)
            kaio.mma.copy_tile(Bs[s], B, s * BK, col0, cols=BN)
        for k0 in range(0, K, 3 * BK):
            for s in kaio.static_range(3):
                kaio.mma.copy_wait(pending=2)
                kaio.sync()
                nxt = (s + 2) % 3
                acc = slice_(As[s], Bs[s], wm, wn, 0, acc)
                kaio.mma.copy_tile(As[nxt], A, row0, k0 + (s + 2) * BK, cols=BK)
                acc = slice_(As[s], Bs[s], wm, wn, 1, acc)
                kaio.mma.copy_tile(Bs[nxt], B, k0 + (s + 2) * BK, col0, cols=BN)
                for kk in kaio.static_range(2, BK // 16):
                    acc = slice_(As[s], Bs[s], wm, wn, kk, acc)
        kaio.mma.store(C, row0 + wm, col0 + wn, acc)
    return gemm_spread


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--tiles", default="256x128x64_w64x64_s3,128x256x32_w64x64_s3,128x128x32_w64x32")
    args = p.parse_args(argv)
    kaio.set_backend("cuda")
    n = args.n
    g = np.random.default_rng(0)
    a = kaio.to_device(g.uniform(-1, 1, (n, n)).astype(np.float16))
    b = kaio.to_device(g.uniform(-1, 1, (n, n)).astype(np.float16))
    c = kaio.device_array((n, n), np.float32)
    flop = 2.0 * n ** 3
    print("| tiling | variant | us | TFLOP/s |\n|---|---|---|---|")
    for tile in args.tiles.split(","):
        cfg = G.launch_config(n, n, tile, 32)
        lib = G.gemm_kernel("f16", "f32", False, False, tile, 32)[cfg]
        rows = [("library", lambda lib=lib: lib(a, b, c, 1.0, 0.0))]
        for name, bar in (("no-copy", True), ("no-sync", False)):
            k = ablated(tile, bar)[cfg]
            rows.append((name, lambda k=k: k(a, b, c)))
        if G.TILES[tile][5] == 3:
            k = spread(tile)[cfg]
            rows.append(("spread copies", lambda k=k: k(a, b, c)))
        k = copy_only(tile)[cfg]
        rows.append(("copy-only", lambda k=k: k(a, b, c)))
        bm, bn, bk, wm, wn, st = G.TILES[tile]
        if st >= 3 and 2 * (bm * (bk + G.PAD) + bk * (bn + G.PAD)) * (st + 1) <= 227 * 1024:
            deeper = f"{tile.rsplit('_s', 1)[0]}_s{st + 1}"     # one more stage in flight
            G.TILES.setdefault(deeper, (bm, bn, bk, wm, wn, st + 1))
            k = G.gemm_kernel("f16", "f32", False, False, deeper, 32)[cfg]
            rows.append((f"library {deeper}", lambda k=k: k(a, b, c, 1.0, 0.0)))
        ref = None
        for name, fn in rows:
            us = timed(fn, reps=10, rounds=5) * 1e3
            note = ""
            if name == "library":
                ref = c.to_host()
            elif name.startswith(("spread", "library")):   # the full loops must agree
                note = f" (max diff vs library {np.abs(c.to_host() - ref).max():.2e})"
            print(f"| {tile} | {name} | {us:.1f} | {flop / us / 1e6:.1f} |{note}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
