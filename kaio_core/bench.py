"""``kaio bench``: GPU benchmarks, side by side, and a roofline picture of the kernel library.

    kaio bench [--quick] [--out DIR]            benchmarks/bench_gpu.py: kaio vs nvcc-compiled
                                                CUDA C++, Triton and PyTorch/cuBLAS
    kaio bench --ml [--quick] [--ops A,B] [--dtypes f32,f16] [--out DIR]
                                                benchmarks/bench_ml.py: the library's ML ops vs
                                                Triton and torch eager, GB/s against the copy
    kaio bench --plot FILE.png [--kernel NAME ...] [--backend B] [--data FILE.json]
                                                a roofline of every library kernel (kaio.roofline)

The first two need an NVIDIA GPU with PyTorch, CuPy and Triton, and a source checkout (the
benchmarks are not part of the installed package). ``--plot`` needs only kaio and matplotlib:
it runs on the best backend (the reference interpreter at CI sizes when there is no GPU), and
``--data`` redraws a saved run without measuring.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import sys

#: the flag that picks each benchmark script other than the default one
SCRIPTS = {"--ml": "bench_ml.py", "--gemm": "bench_gemm.py"}
DEFAULT_SCRIPT = "bench_gpu.py"


def parser() -> argparse.ArgumentParser:
    """The options of ``kaio bench`` (``--ml`` has its own: ``kaio bench --ml --help``)."""
    ap = argparse.ArgumentParser(
        prog="kaio bench",
        description="Time kaio's kernels against nvcc-compiled CUDA C++, Triton and PyTorch "
                    "side by side (NVIDIA GPU, source checkout), or draw a roofline of every "
                    "library kernel (--plot, any backend).")
    ap.add_argument("--ml", action="store_true",
                    help="benchmark the library's ML ops against Triton and torch eager instead; "
                         "see 'kaio bench --ml --help' for its options")
    ap.add_argument("--gemm", action="store_true",
                    help="benchmark the library GEMM (tensor cores) against cuBLAS and the "
                         "quantized kernels against torch; see 'kaio bench --gemm --help'")
    ap.add_argument("--quick", action="store_true", help="smaller problems (side by side only)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), metavar="DIR",
                    help="folder for bench_gpu.json and bench_gpu.md (default: $OUT or .)")
    plot = ap.add_argument_group("roofline picture")
    plot.add_argument("--plot", metavar="FILE.png",
                      help="time every library kernel and draw achieved TFLOP/s and GB/s against "
                           "the device's measured copy bandwidth and f16 matrix rate; the numbers "
                           "go to FILE.json next to it")
    plot.add_argument("--data", metavar="FILE.json",
                      help="with --plot: redraw a saved FILE.json instead of measuring")
    plot.add_argument("--kernel", nargs="+", action="extend", metavar="NAME",
                      help="with --plot: only these kernels or groups (rmsnorm, rajaperf/stream); "
                           "default: all")
    plot.add_argument("--backend", choices=("cuda", "hip", "reference"),
                      help="with --plot: the backend to measure on (default: the best available)")
    return ap


def _script(name: str = DEFAULT_SCRIPT) -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.getcwd(), os.path.dirname(here)):
        path = os.path.join(root, "benchmarks", name)
        if os.path.exists(path):
            return path
    return None


def route(argv) -> tuple[str, list[str]]:
    """(script name, its arguments): ``--ml`` anywhere picks bench_ml.py and is removed."""
    argv = list(argv or [])
    for flag, name in SCRIPTS.items():
        if flag in argv:
            return name, [a for a in argv if a != flag]
    return DEFAULT_SCRIPT, argv


def _run_script(name: str, argv: list[str]) -> int:
    path = _script(name)
    if path is None:
        print(f"kaio bench: benchmarks/{name} not found; run it from a kaio source checkout",
              file=sys.stderr)
        return 2
    sys.argv = [path, *argv]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def cmd_plot(args) -> int:
    """``--plot``: measure (or load ``--data``), write FILE.json and draw FILE.png."""
    from . import roofline  # lazy: import time, ~60 ms
    if args.data:
        with open(args.data, encoding="utf-8") as f:
            data = json.load(f)
    else:
        from . import kernels as K  # lazy: import time, ~60 ms
        from .progress import progress  # lazy: import time, ~60 ms
        from .showcase import pick_backend, select_cases  # lazy: import time, ~60 ms
        try:
            cases = [c for name in args.kernel for c in select_cases(name, False)] \
                if args.kernel else K.cases()
        except KeyError as e:
            print(f"kaio bench: {e.args[0]}", file=sys.stderr)
            return 2
        backend = pick_backend(args.backend)
        with progress(f"roofline on {backend}", total=len(cases)) as bar:
            def step(case):
                bar.label(case.name)
                bar.advance()
            data = roofline.measure(cases, backend, on_case=step)
        json_path = os.path.splitext(args.plot)[0] + ".json"
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        print(f"wrote {json_path}", file=sys.stderr)
    roofline.plot(data, args.plot)
    failed = [r["name"] for r in data["kernels"] if r.get("error")]
    print(f"wrote {args.plot}: {len(data['kernels']) - len(failed)} kernels, copy "
          f"{data['copy_gbps']:.4g} GB/s, matrix {data['matrix_tflops']:.4g} TFLOP/s"
          + (f"; not measured: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


def main(argv=None) -> int:
    """Entry point of ``kaio bench``; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name, rest = route(argv)
    if name != DEFAULT_SCRIPT:
        return _run_script(name, rest)  # --ml: bench_ml.py parses (and documents) its options
    args = parser().parse_args(argv)
    if args.plot:
        return cmd_plot(args)
    if args.data or args.kernel or args.backend:
        print("kaio bench: --data, --kernel and --backend go with --plot FILE.png", file=sys.stderr)
        return 2
    return _run_script(DEFAULT_SCRIPT, (["--quick"] if args.quick else []) + ["--out", args.out])
