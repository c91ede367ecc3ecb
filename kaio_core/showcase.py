"""``kaio showcase``: run the kernel library on the best backend, validate, and report speed.

    kaio showcase                      # ML ops + a RAJAPerf selection
    kaio showcase rmsnorm              # one kernel (a bare name or group/name)
    kaio showcase rajaperf/basic       # every kernel of a group
    kaio showcase --all --size small --backend reference

The backend is CUDA on an NVIDIA GPU, HIP on AMD, otherwise the reference interpreter, which
runs the CI ("small") sizes unless ``--size default`` is given. Every kernel is checked against
its numpy reference with its stated tolerance (RAJAPerf ports also compare checksums); the exit
status is non-zero if any kernel fails. Times are medians over ``--repeat`` runs after one
warm-up run (which compiles). On CUDA, kernels that provide a device-resident ``bench`` are
timed with CUDA events around the launches alone ("kernel"); the others, and every kernel on
the reference backend, are timed around the whole call with numpy arrays in and out
("end-to-end", host<->device copies included).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

import kaio

from . import kernels as K
from .backends import PREFERENCE, availability
from .kernels.rajaperf.checksum import relative_diff

#: RAJAPerf kernels the default showcase runs (one or two per group, covering reductions,
#: shared memory, stencils, transcendental math and 3-D indexing); --all runs every port.
RAJAPERF_SELECTION = (
    "rajaperf/TRIAD", "rajaperf/DOT", "rajaperf/DAXPY", "rajaperf/REDUCE3_INT", "rajaperf/PI_REDUCE",
    "rajaperf/MAT_MAT_SHARED", "rajaperf/HYDRO_1D", "rajaperf/PLANCKIAN", "rajaperf/DIFF_PREDICT",
    "rajaperf/GEMM", "rajaperf/JACOBI_2D", "rajaperf/HEAT_3D", "rajaperf/ENERGY", "rajaperf/VOL3D",
    "rajaperf/FIR", "rajaperf/LTIMES",
)
#: above this many flops per byte a kernel is reported in TFLOP/s, below it in GB/s
COMPUTE_BOUND = 4.0


@dataclass
class Result:
    """One row of the showcase table."""

    name: str
    size: str
    backend: str
    passed: bool
    max_error: float = float("nan")
    error_ratio: float = float("nan")
    tolerance: str = ""
    checksum: float | None = None
    checksum_diff: float | None = None
    median_s: float = float("nan")
    timed: str = "end-to-end"
    throughput: str = ""
    message: str = ""


def pick_backend(requested: str | None) -> str:
    """The requested backend, else the first available of cuda, hip, reference."""
    if requested:
        ok, why = availability(requested)
        if not ok:
            raise SystemExit(f"kaio showcase: backend '{requested}' is unavailable: {why}")
        return requested
    return next(n for n in PREFERENCE if availability(n)[0])


def select_cases(name: str | None, run_all: bool):
    """Cases for a NAME (kernel or group prefix), everything (--all), or the default set."""
    if run_all:
        return K.cases()
    if name:
        groups = K.cases(name)
        return groups if groups else [K.get(name)]
    return K.cases("ml") + [K.get(n) for n in RAJAPERF_SELECTION]


def _throughput(case, size, seconds: float) -> str:
    flops, nbytes = float(case.flops(size)), float(case.bytes(size))
    if not seconds or seconds != seconds or seconds <= 0:
        return ""
    if flops and (not nbytes or flops / nbytes > COMPUTE_BOUND):
        rate = flops / seconds
        return f"{rate / 1e12:.3f} TFLOP/s" if rate >= 1e10 else f"{rate / 1e9:.3f} GFLOP/s"
    if nbytes:
        return f"{nbytes / seconds / 1e9:.3f} GB/s"
    return ""


def run_case(case, size, backend: str, repeat: int, seed: int = 0) -> Result:
    """Run, validate and time one case on the current backend."""
    res = Result(case.name, _fmt_size(size), backend, False, tolerance=case.tolerance.describe())
    try:
        inputs = case.make_inputs(size, seed)
        expected = case.reference(inputs)
        times = []
        outputs = None
        for _ in range(1 + max(1, repeat)):  # the first run compiles and is not timed
            t0 = time.perf_counter()
            outputs = case.run(inputs)
            times.append(time.perf_counter() - t0)
        res.median_s = statistics.median(times[1:])
        if case.bench is not None and backend == "cuda":
            try:
                res.median_s, res.timed = time_device(case.bench(inputs), max(1, repeat)), "kernel"
            except Exception as e:  # timing is a report; a failure here is shown, not fatal
                res.message = f"device timing failed ({type(e).__name__}: {e}); end-to-end time shown"
        res.passed, res.error_ratio = case.check(outputs, expected)
        res.max_error = K.max_abs_error(outputs, expected)
        if case.checksum is not None:
            res.checksum = case.checksum(outputs)
            res.checksum_diff = relative_diff(case.checksum(expected), res.checksum)
            limit = case.checksum_rtol if case.checksum_rtol is not None else 0.0
            if res.checksum_diff > limit:
                res.passed = False
                res.message = f"checksum differs by {res.checksum_diff:.3g} (limit {limit:g})"
        res.throughput = _throughput(case, size, res.median_s)
    except Exception as e:  # one broken kernel must not hide the others' results
        res.passed = False
        res.message = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    return res


def time_device(launch, repeat: int) -> float:
    """Median seconds of ``launch()`` measured with CUDA events (after one warm-up call)."""
    launch()
    kaio.synchronize()
    times = []
    for _ in range(repeat):
        start = kaio.Event().record()
        launch()
        end = kaio.Event().record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def _fmt_size(size) -> str:
    if isinstance(size, tuple):
        return "x".join(str(s) for s in size)
    return str(size)


def render(results: list[Result], console=None) -> None:
    """Print the results as a rich table."""
    table = Table(title="kaio showcase", title_justify="left",
                  caption="err/tol: worst |out - ref| as a fraction of the kernel's tolerance "
                          "(<= 1 passes); checksum: RAJAPerf's weighted Kahan sum")
    for col, just in (("kernel", "left"), ("size", "right"), ("backend", "left"),
                      ("max |err|", "right"), ("err/tol", "right"), ("checksum", "right"),
                      ("result", "center"), ("median", "right"), ("timed", "left"),
                      ("throughput", "right")):
        table.add_column(col, justify=just, no_wrap=True)
    for r in results:
        verdict = "[green]PASS[/green]" if r.passed else "[bold red]FAIL[/bold red]"
        table.add_row(r.name, r.size, r.backend, f"{r.max_error:.3g}", f"{r.error_ratio:.3f}",
                      "" if r.checksum is None else f"{r.checksum:.10g}", verdict,
                      _fmt_time(r.median_s), r.timed, r.throughput)
    if console is None:  # piped output: do not squeeze the table into 80 columns
        console = Console() if sys.stdout.isatty() else Console(width=180)
    console.print(table)
    for r in results:
        if r.message:
            console.print(f"[red]{r.name}[/red]: {r.message}", markup=True, highlight=False)
    n_fail = sum(not r.passed for r in results)
    console.print(f"{len(results) - n_fail} passed, {n_fail} failed")


def _fmt_time(s: float) -> str:
    if s != s:
        return "-"
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.2f} s"


def main(argv=None) -> int:
    """Entry point of ``kaio showcase``; returns the process exit status."""
    ap = argparse.ArgumentParser(prog="kaio showcase", description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?",
                    help="a kernel (rmsnorm, rajaperf/DAXPY) or a group (ml, rajaperf/basic)")
    ap.add_argument("--size", choices=("small", "default"),
                    help="problem sizes (default: 'default' on a GPU, 'small' on the reference backend)")
    ap.add_argument("--backend", choices=("reference", "cuda", "hip"))
    ap.add_argument("--all", action="store_true", help="run every kernel in the library")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per kernel (median reported)")
    ap.add_argument("--list", action="store_true", help="list the kernels and exit")
    args = ap.parse_args(argv)

    if args.list:
        for c in K.cases():
            print(f"{c.name:36s} {c.group:20s} {c.description}")
        return 0
    backend = pick_backend(args.backend)
    kaio.set_backend(backend)
    size_kind = args.size or ("small" if backend == "reference" else "default")
    repeat = args.repeat if args.repeat is not None else (3 if backend == "reference" else 10)
    try:
        cases = select_cases(args.name, args.all)
    except KeyError as e:
        print(f"kaio showcase: {e.args[0]}")
        return 2
    results = []
    for case in cases:
        size = case.small_size if size_kind == "small" else case.default_size
        results.append(run_case(case, size, backend, repeat))
    render(results)
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
