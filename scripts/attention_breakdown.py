"""Where the quantized attention's time goes: each launch of its device pipeline timed alone.

    python3 scripts/attention_breakdown.py [--causal]

The library's pipeline at the registry's default size (S = 1024, Dm = 512, D = 128): one W8A8
projection to [S, 3D] that quantizes x's rows itself (kernels/ml/quant_project.py; where it
compiles), the fused attention's partial kernel (keys split over blocks) and the combining
kernel (unrolled for the plan's chunk count). For comparison the two launches the quantizing
projection replaces (quantize the rows, then the W8A8 matmul). Each row is CUDA events around
20 back-to-back launches of that launch alone, median of 5 (benchmarks/bench_gpu.py's timer),
and the same launch 20 times in one captured graph (the device's time per launch: a small
kernel launched from Python is timed at the host's launch rate), then the whole pipeline launch
by launch and replayed from its captured graph (what ``device_pipeline`` returns on device
arrays, and what ``kaio bench --gemm`` times).
"""
import argparse
import os
import sys

import numpy as np

import kaio
from kaio.kernels import REGISTRY
from kaio.kernels._bench import empty, up
from kaio.kernels.ml import attention as A
from kaio.kernels.ml import flash_attention as F
from kaio.kernels.ml import quant as Q
from kaio.kernels.ml import quant_project as QP


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="attention_breakdown.py", description=__doc__.splitlines()[0])
    p.add_argument("--causal", action="store_true")
    p.add_argument("--backend", default="cuda", help="kaio backend (reference: --small, a check)")
    p.add_argument("--small", action="store_true", help="the registry's small size")
    p.add_argument("--once", action="store_true",
                   help="run each launch once, untimed (under a profiler: device step attn-ncu)")
    args = p.parse_args(argv)
    kaio.set_backend(args.backend)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
    from bench_gpu import timed
    if args.backend == "reference" or args.once:    # no CUDA events: run each launch once
        def timed(fn, **_):
            fn()
            return float("nan")

    case = REGISTRY["ml/quantized_attention"]
    size = case.small_size if args.small else case.default_size
    x, wq, wk, wv, sq, sk, sv = up(case.make_inputs(size, 0),
                                   "x", "wq", "wk", "wv", "sq", "sk", "sv")
    s, dm = x.shape
    d = wq.shape[1]
    xq, sx = empty((s, dm), np.int8), empty((s, 1), np.float32)
    qkv, o = empty((s, 3 * d), np.float32), empty((s, d), np.float32)
    quantize = Q.quantize_rows_kernel("f32")[(s,), (256,)]
    project = A.w8a8_launch(s, 3 * d)
    wqkv, sqkv = A._stacked(wq, wk, wv, axis=1), A._stacked(sq, sk, sv, axis=0)
    fused = QP.launch(s, 3 * d, dm)
    w = kaio.get_backend().warp_size
    dp = F.padded_dim(d)
    nw = F.warps(dp, w)[0]                  # the library's block (cuda: kaio's PTX)
    chunks, nsteps = F.plan(s, s, w, nw)
    partial = F.kernel(dp, w, nw)[F.launch_config(s, w, chunks, nw)]
    part, ml = F.partials(s, dp, chunks, empty, nw)
    fargs = (float(1.0 / np.sqrt(d)), d, 0, d, 2 * d, nsteps, bool(args.causal))
    combine = F.combine_launch(s, d, chunks)
    launches = A.device_pipeline(x, wq, wk, wv, sq, sk, sv, causal=args.causal, graph=False)
    replay = A.device_pipeline(x, wq, wk, wv, sq, sk, sv, causal=args.causal)
    rows = []
    if fused is not None:
        qkv_bits = QP.bits(qkv)
        for tile in QP.TILES:           # the library's tiling and the others
            f = QP.launch(s, 3 * d, dm, tile)
            rows.append((f"quantizing W8A8 projection [{s}, {3 * d}] tile {tile} ({f.grid} x "
                         f"{f.block}){' (library)' if tile == QP.tile_for(s, 3 * d) else ''}",
                         lambda f=f: f(x, wqkv, sqkv, qkv_bits)))
    rows += [("quantize rows (x -> int8; the two-launch form)", lambda: quantize(x, xq, sx)),
             (f"W8A8 projection [{s}, {3 * d}] ({project.grid} x {project.block}; two-launch form)",
              lambda: project(xq, wqkv, sx, sqkv, qkv)),
             (f"attention partial, {nw} warps a block ({chunks} chunks x {nsteps} steps)",
              lambda: partial(qkv, qkv, qkv, part, ml, *fargs)),
             (f"attention combine ({chunks} chunks)", lambda: combine(part, ml, o, chunks, dp)),
             (f"whole pipeline, {launches.launches} launches (device_pipeline, graph=False)",
              launches),
             (f"whole pipeline, graph replay (device_pipeline; {replay.launches} kernels)", replay)]
    if fused is not None:               # the same with the two-launch projection
        def two_launch_pipeline():
            quantize(x, xq, sx)
            project(xq, wqkv, sx, sqkv, qkv)
            partial(qkv, qkv, qkv, part, ml, *fargs)
            combine(part, ml, o, chunks, dp)
        rows.append(("whole pipeline with the two-launch projection (4 kernels)",
                     two_launch_pipeline))
    for nw4 in (F.NW,):                  # four-warp blocks (K and V split in turn)
        c8, n8 = F.plan(s, s, w, nw4)
        p8 = F.kernel(dp, w, nw4)[F.launch_config(s, w, c8, nw4)]
        part8, ml8 = F.partials(s, dp, c8, empty, nw4)
        comb8 = F.combine_launch(s, d, c8)
        a8 = fargs[:5] + (n8,) + fargs[6:]

        def both8(p8=p8, part8=part8, ml8=ml8, comb8=comb8, a8=a8, c8=c8):
            p8(qkv, qkv, qkv, part8, ml8, *a8)
            comb8(part8, ml8, o, c8, dp)
        rows += [(f"attention partial, {nw4} warps a block ({c8} chunks x {n8} steps)",
                  lambda p8=p8, part8=part8, ml8=ml8, a8=a8: p8(qkv, qkv, qkv, part8, ml8, *a8)),
                 (f"partial + combine, {nw4} warps a block", both8)]
    steps = -(-s // F.KS)                   # 64-key steps over all the keys
    for c2 in (c for c in (chunks // 2, chunks // 4) if c >= 1):    # fewer, longer chunks
        rows.append(_plan_row(qkv, o, s, d, dp, w, c2, -(-steps // c2), fargs, nw))
    print(f"quantized attention S={s} Dm={dm} D={d}{' causal' if args.causal else ''}")
    print("| launch | us | us from a graph |")
    print("|---|---|---|")
    for name, fn in rows:
        alone = timed(fn, reps=20, rounds=5) * 1e3
        graphed = "-"
        if fn is not replay and not args.once:
            g = _captured(fn, GRAPH_REPS)
            graphed = f"{timed(lambda g=g: g.replay(0), reps=2, rounds=5) * 1e3 / GRAPH_REPS:.1f}"
        print(f"| {name} | {alone:.1f} | {graphed} |", flush=True)
    return 0


#: launches per graph in the third column (kernels back to back on the device, one host call)
GRAPH_REPS = 20


def _captured(fn, n):
    """``n`` calls of ``fn`` captured into one graph (replayed once, untimed, to upload it).
    Launched one by one from Python a small kernel is timed at the host's launch rate (several
    us a launch on the H200: docs/performance.md, "Launch overhead"); replayed from a graph,
    at the device's."""
    with kaio.graph() as g:
        for _ in range(n):
            fn()
    g.replay(0)
    kaio.synchronize()
    return g


def _plan_row(qkv, o, s, d, dp, w, chunks, nsteps, fargs, nw):
    """(name, launch) of the partial kernel and the combine at another plan: ``chunks`` chunks
    of ``nsteps`` steps (what plan() trades: fewer blocks, each walking more keys, against
    a combine reading fewer partials)."""
    partial = F.kernel(dp, w, nw)[F.launch_config(s, w, chunks, nw)]
    part, ml = F.partials(s, dp, chunks, empty, nw)
    combine = F.combine_launch(s, d, chunks)
    args = fargs[:5] + (nsteps,) + fargs[6:]

    def both():
        partial(qkv, qkv, qkv, part, ml, *args)
        combine(part, ml, o, chunks, dp)
    return (f"partial + combine at {chunks} chunks x {nsteps} steps "
            f"({chunks * -(-s // (nw * F.WR))} blocks)", both)


if __name__ == "__main__":
    sys.exit(main())
