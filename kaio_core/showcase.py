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
import os
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
from .progress import track

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


#: the table's columns in display order: (header, justify, rank). When the terminal is narrow,
#: columns are kept by rank (0 first) while they fit whole; kernel and result are always shown.
COLUMNS = (("kernel", "left", 0), ("size", "right", 5), ("max |err|", "right", 6),
           ("err/tol", "right", 3), ("checksum", "right", 7), ("result", "center", 1),
           ("median", "right", 4), ("timed", "left", 8), ("throughput", "right", 2))
ALWAYS = ("kernel", "result")
#: rich's cost of a column beyond its text: one space of padding each side and one border
COLUMN_FRAME = 3


def _piped_width() -> int:
    """Width for output that is not a terminal: $COLUMNS when set, else 180."""
    try:
        return max(40, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return 180


def _cells(r: Result) -> dict[str, str]:
    """The row of one result as plain text, by column header."""
    return {"kernel": r.name, "size": r.size, "max |err|": f"{r.max_error:.3g}",
            "err/tol": f"{r.error_ratio:.3f}",
            "checksum": "" if r.checksum is None else f"{r.checksum:.10g}",
            "result": "PASS" if r.passed else "FAIL", "median": _fmt_time(r.median_s),
            "timed": r.timed, "throughput": r.throughput}


def fit_columns(rows: list[dict[str, str]], width: int) -> list[str]:
    """The columns to show in ``width`` characters, in display order: by rank, each column is
    kept only if it fits whole (so no number is ever cut), kernel and result always."""
    need = {h: max([len(h)] + [len(row[h]) for row in rows]) + COLUMN_FRAME for h, _, _ in COLUMNS}
    used, keep = 1, set()
    for header, _, _ in sorted(COLUMNS, key=lambda c: c[2]):
        if header in ALWAYS or used + need[header] <= width:
            keep.add(header)
            used += need[header]
    return [h for h, _, _ in COLUMNS if h in keep]


def render(results: list[Result], console=None) -> None:
    """Print the results as a rich table that fits the console: columns that do not fit whole
    are left out (and named below the table) rather than cut; PASS/FAIL is always shown."""
    if console is None:  # piped output: do not squeeze the table into 80 columns unless asked to
        console = Console() if sys.stdout.isatty() else Console(width=_piped_width())
    rows = [_cells(r) for r in results]
    backends = sorted({r.backend for r in results})
    timings = sorted({r.timed for r in results})
    shown = fit_columns(rows, console.width)
    if len(timings) == 1 and "timed" in shown:  # one kind of timing: said once, below
        shown.remove("timed")
    notes = []
    if "err/tol" in shown:
        notes.append("err/tol: worst |out - ref| as a fraction of the kernel's tolerance (<= 1 passes)")
    if "checksum" in shown:
        notes.append("checksum: RAJAPerf's weighted Kahan sum")
    if len(timings) == 1 and "median" in shown:
        notes.append(f"median times are {timings[0]}")
    table = Table(title=f"kaio showcase on {', '.join(backends) or '-'}", title_justify="left",
                  caption="; ".join(notes) or None, caption_justify="left")
    justify = {h: j for h, j, _ in COLUMNS}
    for header in shown:
        # only kernel names may wrap (on a terminal too narrow even for the two kept columns)
        table.add_column(header, justify=justify[header], no_wrap=header != "kernel",
                         overflow="fold")
    for r, row in zip(results, rows):
        cells = dict(row, result="[green]PASS[/green]" if r.passed else "[bold red]FAIL[/bold red]")
        table.add_row(*(cells[h] for h in shown))
    console.print(table)
    hidden = [h for h, _, _ in COLUMNS if h not in shown and not (h == "timed" and len(timings) == 1)]
    if hidden:
        console.print(f"[dim]not shown at {console.width} columns: {', '.join(hidden)} "
                      "(widen the terminal to see them)[/dim]", highlight=False)
    for r in results:
        if r.message:
            console.print(f"[red]{r.name}[/red]: {r.message}", markup=True, highlight=False)
    n_fail = sum(not r.passed for r in results)
    console.print(f"{len(results) - n_fail} passed, {n_fail} failed")


def _fmt_time(s: float) -> str:
    if s != s:
        return "-"
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.2f} s"


def parser() -> argparse.ArgumentParser:
    """The options of ``kaio showcase``."""
    ap = argparse.ArgumentParser(
        prog="kaio showcase",
        description="Run the kernel library on the best backend (CUDA, HIP, else the reference "
                    "interpreter), check every kernel against its numpy reference and report "
                    "its time and GB/s or TFLOP/s. Exit status 1 if any kernel fails.")
    ap.add_argument("name", nargs="?",
                    help="a kernel (rmsnorm, rajaperf/DAXPY) or a group (ml, rajaperf/basic); "
                         "default: the ML ops and a RAJAPerf selection")
    ap.add_argument("--size", choices=("small", "default"),
                    help="problem sizes (default: 'default' on a GPU, 'small' on the reference backend)")
    ap.add_argument("--backend", choices=("reference", "cuda", "hip"),
                    help="run on this backend (default: the first available of cuda, hip, reference)")
    ap.add_argument("--all", action="store_true", help="run every kernel in the library")
    ap.add_argument("--repeat", type=int, default=None,
                    help="timed runs per kernel, the median is reported (default: 10 on a GPU, "
                         "3 on the reference backend)")
    ap.add_argument("--list", action="store_true", help="list the kernels and exit")
    return ap


def main(argv=None) -> int:
    """Entry point of ``kaio showcase``; returns the process exit status."""
    args = parser().parse_args(argv)

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
    for case in track(cases, f"showcase on {backend}", label=lambda c: c.name):
        size = case.small_size if size_kind == "small" else case.default_size
        results.append(run_case(case, size, backend, repeat))
    render(results)
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
