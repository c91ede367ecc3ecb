"""kaio bench --gemm: the library GEMM (kaio.kernels.ml.gemm, mma.sync) against cuBLAS.

Side by side in one process on one GPU: kaio's GEMM launched on torch tensors (no copies; kaio
reads them through __cuda_array_interface__) against ``torch.matmul`` (cuBLAS), f16 and bf16,
f32 accumulation, at 4096^3 and 8192^3 (``--sizes``); then the quantized library kernels
against torch (``torch._int_mm`` for W8A8). Each figure: ``--reps`` back-to-back calls timed
with CUDA events, the median of ``--rounds``. Every kaio result is checked against cuBLAS's
first (relative Frobenius error, bound stated per row). Writes bench_gemm.json/.md to --out.
"""
import argparse
import json
import os
import statistics
import sys


def _time(fn, reps, rounds):
    import torch
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / reps)   # us per call
    return statistics.median(times)


def _attributes(kernel_fn):
    """Registers / local bytes / static shared of the compiled GEMM (driver attributes)."""
    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from ml_kaio import function_attributes
        c = kernel_fn.compile()
        return function_attributes(getattr(c.handle, "function", None))
    except Exception as e:   # reporting only
        return {"attributes_error": f"{type(e).__name__}: {e}"}


def gemm_rows(sizes, dtypes, reps, rounds):
    import torch

    import kaio
    from kaio.kernels.ml import gemm as G
    rows = []
    for dt in dtypes:
        tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
        for n in sizes:
            m = k = n
            g = torch.Generator(device="cuda").manual_seed(0)
            a = torch.randn((m, k), device="cuda", dtype=tdt, generator=g)
            b = torch.randn((k, n), device="cuda", dtype=tdt, generator=g)
            c = torch.empty((m, n), device="cuda", dtype=torch.float32)
            ref = torch.matmul(a.float(), b.float())
            t_cublas = _time(lambda a=a, b=b: torch.matmul(a, b), reps, rounds)
            fl = 2.0 * m * n * k
            stream = torch.cuda.current_stream()
            for tile in list(G.TILES) + ["autotuned"]:
                if tile == "autotuned":     # the library call: kaio.autotune picks the tiling
                    with kaio.autotune.choices() as picked:
                        G.gemm(a, b, c)
                    torch.cuda.synchronize()
                    chosen = picked[-1][2].config.name if picked else G.DEFAULT_TILE
                    kern = G.gemm_kernel(dt, "f32", False, False, chosen)
                    grid, block = G.launch_config(m, n, chosen)
                else:
                    chosen = tile
                    kern = G.gemm_kernel(dt, "f32", False, False, tile)
                    grid, block = G.launch_config(m, n, tile)
                launch = kern[grid, block, 0, stream]       # on torch's stream

                def kaio_call(launch=launch, a=a, b=b, c=c):
                    launch(a, b, c, 1.0, 0.0)
                c.zero_()
                kaio_call()
                torch.cuda.synchronize()
                err = float((c - ref).norm() / ref.norm())
                t_kaio = _time(kaio_call, reps, rounds)
                label = f"gemm {dt} {m}x{n}x{k} {tile}" + (f" ({chosen})" if tile == "autotuned" else "")
                row = {"case": label,
                       "kaio_us": t_kaio, "cublas_us": t_cublas,
                       "kaio_tflops": fl / t_kaio / 1e6, "cublas_tflops": fl / t_cublas / 1e6,
                       "ratio": t_cublas / t_kaio, "rel_err": err, "ok": err < 1e-2}
                row.update(_attributes(kern))
                rows.append(row)
                print(f"{row['case']:<52} kaio {t_kaio:9.1f} us {row['kaio_tflops']:6.1f} TF/s | "
                      f"cuBLAS {t_cublas:9.1f} us {row['cublas_tflops']:6.1f} TF/s | "
                      f"speed {row['ratio']:.2f}x | err {err:.1e} | regs {row.get('regs')}",
                      flush=True)
    return rows


def quant_rows(reps, rounds):
    """The quantized library kernels at the issue's shapes vs torch."""
    import torch

    from kaio import kernels
    rows = []
    for name, size in (("ml/int8_matmul_w8a8", (2048, 4096, 2048)),
                       ("ml/int4_matmul_w4a16", (256, 4096, 4096, 128)),
                       ("ml/quantized_attention", None)):
        try:
            case = kernels.get(name)
            size = size or case.default_size
            inp = case.make_inputs(size, seed=0)
            fn = case.bench(inp)
            t = _time(fn, reps, rounds)     # as many back-to-back calls as torch's rows
            row = {"case": f"{name} {size}", "kaio_us": t,
                   "kaio_tflops": case.flops(size) / t / 1e6 if case.flops else None}
            if name.endswith("w8a8"):
                m, k, n = size
                a = torch.randint(-127, 127, (m, k), device="cuda", dtype=torch.int8)
                b = torch.randint(-127, 127, (k, n), device="cuda", dtype=torch.int8)
                tt = _time(lambda a=a, b=b: torch._int_mm(a, b), reps, rounds)
                row.update(torch_us=tt, ratio=tt / t, torch_op="torch._int_mm")
            if name.endswith("w4a16"):
                m, k, n, _ = size
                x = torch.randn((m, k), device="cuda", dtype=torch.float16)
                w = torch.randn((k, n), device="cuda", dtype=torch.float16)
                tt = _time(lambda x=x, w=w: torch.matmul(x, w), reps, rounds)
                row.update(torch_us=tt, ratio=tt / t, torch_op="cuBLAS f16 on dequantized weights")
                _print_row(row)
                rows.append(row)
                row = _own_gemm_row(x, w, tt, reps, rounds)    # what bounds the W4A16 kernel
            _print_row(row)
            rows.append(row)
        except Exception as e:   # one row failing must not hide the others
            rows.append({"case": name, "error": f"{type(e).__name__}: {e}"})
            print(f"{name}: {type(e).__name__}: {e}", flush=True)
    return rows


def _print_row(row):
    print(f"{row['case']:<48} kaio {row['kaio_us']:9.1f} us"
          + (f" | {row['torch_op']} {row['torch_us']:.1f} us, kaio speed {row['ratio']:.2f}x"
             if "torch_us" in row else ""), flush=True)


def _own_gemm_row(x, w, t_cublas, reps, rounds):
    """kaio's own f16 GEMM (kaio.kernels.ml.gemm, autotuned, f16 out) on the W4A16 row's x and
    f16 weights: the matrix engine the W4A16 kernel is built on, at its shape."""
    import torch

    from kaio.kernels.ml import gemm as G
    m, k = x.shape
    n = w.shape[1]
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)
    G.gemm(x, w, c)                       # tunes the tiling once
    torch.cuda.synchronize()
    t = _time(lambda: G.gemm(x, w, c), reps, rounds)
    err = float((c.float() - x.float() @ w.float()).norm() / (x.float() @ w.float()).norm())
    return {"case": f"gemm f16 {m}x{n}x{k} (kaio.kernels.ml.gemm, the W4A16 row's engine)",
            "kaio_us": t, "kaio_tflops": 2.0 * m * n * k / t / 1e6, "torch_us": t_cublas,
            "ratio": t_cublas / t, "torch_op": "cuBLAS f16", "rel_err": err, "ok": err < 1e-2}


def w4a16_tile_rows(reps, rounds, size=(256, 4096, 4096, 128), tiles=None):
    """int4_matmul_w4a16 at the issue's shape per tiling of quant_mma.W4_TILES (the library's
    default for the shape marked), each checked against the float64 reference first (the
    registry's atol = rtol = 1e-3), against cuBLAS f16 on dequantized weights."""
    import numpy as np
    import torch

    from kaio import kernels
    from kaio.kernels._bench import empty, up
    from kaio.kernels.ml import quant, quant_mma
    case = kernels.get("ml/int4_matmul_w4a16")
    m, k, n, group = size
    inp = case.make_inputs(size, seed=0)
    ref = case.reference(inp)["y"]
    x, packed, scales = up(inp, "x", "packed", "scales")
    y = empty((m, n), inp["x"].dtype)
    xt = torch.randn((m, k), device="cuda", dtype=torch.float16)
    wt = torch.randn((k, n), device="cuda", dtype=torch.float16)
    t_cublas = _time(lambda: torch.matmul(xt, wt), reps, rounds)
    default = quant.w4a16_launch("f16", m, n, group).kernel
    rows = []
    for tile in tiles or quant_mma.W4_TILES:
        label = f"ml/int4_matmul_w4a16 {size} {tile}"
        try:
            launch = quant.w4a16_launch("f16", m, n, group, tile)   # with its workspace
            kern = launch.kernel
            launch(x, packed, scales, y, group)
            got = y.to_host().astype(np.float64)
            ok = bool((np.abs(got - ref) <= 1e-3 + 1e-3 * np.abs(ref)).all())
            t = _time(lambda launch=launch: launch(x, packed, scales, y, group), reps, rounds)
            row = {"case": label + (" (default)" if kern is default else ""), "kaio_us": t,
                   "kaio_tflops": 2.0 * m * n * k / t / 1e6, "torch_us": t_cublas,
                   "ratio": t_cublas / t, "torch_op": "cuBLAS f16 on dequantized weights", "ok": ok}
            row.update(_attributes(kern))
            print(f"{row['case']:<64} kaio {t:8.1f} us {row['kaio_tflops']:6.1f} TF/s | cuBLAS "
                  f"{t_cublas:.1f} us, speed {row['ratio']:.2f}x | ok {ok} | regs {row.get('regs')}",
                  flush=True)
        except Exception as e:   # one tiling failing must not hide the others
            row = {"case": label, "error": f"{type(e).__name__}: {e}"}
            print(f"{label}: {type(e).__name__}: {e}", flush=True)
        rows.append(row)
    return rows


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="kaio bench --gemm",
                                 description="The library GEMM (tensor cores, written in kaio) "
                                             "against cuBLAS, and the quantized kernels against "
                                             "torch, side by side on one NVIDIA GPU.")
    ap.add_argument("--sizes", default="4096,8192", help="square sizes M=N=K, comma-separated")
    ap.add_argument("--dtypes", default="f16,bf16", help="f16 and/or bf16")
    ap.add_argument("--reps", type=int, default=10, help="back-to-back calls per timing (10)")
    ap.add_argument("--rounds", type=int, default=5, help="timings per figure; the median (5)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the results")
    ap.add_argument("--no-quant", action="store_true", help="skip the quantized kernels' rows")
    ap.add_argument("--w4a16-tiles", action="store_true",
                    help="only int4_matmul_w4a16 at 256x4096x4096, group 128, per tiling of "
                         "quant_mma.W4_TILES (each compiled cold takes tens of seconds)")
    ap.add_argument("--tiles", default=None,
                    help="with --w4a16-tiles: only these tilings (comma-separated)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device")
    except Exception as e:
        print(f"kaio bench --gemm needs torch with a CUDA GPU: {e}", file=sys.stderr)
        return 2
    os.environ.setdefault("KAIO_BACKEND", "cuda")
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.w4a16_tiles:
        rows = w4a16_tile_rows(args.reps, args.rounds,
                               tiles=args.tiles.split(",") if args.tiles else None)
    else:
        rows = gemm_rows(sizes, args.dtypes.split(","), args.reps, args.rounds)
        if not args.no_quant:
            rows += quant_rows(args.reps, args.rounds)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_gemm.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    with open(os.path.join(args.out, "bench_gemm.md"), "w") as f:
        f.write("| case | kaio us | kaio TFLOP/s | cuBLAS/torch us | ratio (speed vs it) | regs |\n"
                "|---|---|---|---|---|---|\n")
        for r in rows:
            other = r.get("cublas_us", r.get("torch_us"))
            f.write(f"| {r['case']} | {r.get('kaio_us', float('nan')):.1f} | "
                    f"{(r.get('kaio_tflops') or float('nan')):.1f} | "
                    f"{other if other is None else round(other, 1)} | "
                    f"{r.get('ratio', float('nan')):.2f} | {r.get('regs')} |\n")
    bad = [r["case"] for r in rows if r.get("ok") is False]
    if bad:
        print(f"WRONG RESULTS: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
