"""``kaio rajaperf``: run the RAJAPerf ports the way the RAJA Performance Suite runs its kernels.

    kaio rajaperf [--kernels K ...] [--exclude-kernels K ...] [--variants V ...]
                  [--sizefact F | --size N] [--repfact F] [--npasses P]
                  [--outdir DIR] [--outfile PREFIX] [--backend NAME] [--time-limit S]

Kernels are named as in the suite (``DAXPY``, ``Basic_DAXPY``) or by group (``Stream``,
``Polybench``). Variants:

- ``numpy``: the port's numpy reference with every rep applied (the analogue of the suite's
  sequential variant; full-size checksums on a CPU). Reps that do not feed each other give the
  same outputs, so one is run and its time counted once per rep;
- ``kaio``: the port's device-resident kernels launched one by one from Python, as a user's
  loop would;
- ``kaio_graph``: the pass's reps captured once as a graph (:func:`kaio.graph`) and replayed;
- ``cuda``: the suite's Base_CUDA form of the port (benchmarks/cuda/rajaperf_*.cu), compiled
  with nvcc and launched from C++ on the same device arrays (:mod:`.native`).

Like the suite, each pass sets the data up afresh, times its reps, then takes the checksum;
times are the mean over passes, checksums the sum over passes. Files written to ``--outdir``
(prefix ``--outfile``, default ``RAJAPerf``): ``-timing-Average.csv`` (mean seconds per pass),
``-checksum.txt`` (per variant, with the difference against the first variant) and
``-kernels.csv`` (problem size, reps, bytes and flops per rep; kaio adds each kernel's set-up and
total seconds on the host).
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

import kaio
from kaio import backends
from kaio.progress import progress

from ..registry import REGISTRY
from . import _case
from . import native as native_mod
from ._host import keep_freed_memory
from .checksum import relative_diff, trim_weights
from .sizes import problem_size, size_for

VARIANTS = ("numpy", "kaio", "kaio_graph", "cuda")
GROUPS = {"stream": "Stream", "basic": "Basic", "lcals": "Lcals", "polybench": "Polybench",
          "apps": "Apps"}
#: problem sizes from which the run keeps freed memory for reuse (:func:`._host.keep_freed_memory`)
BIG = 1 << 24
#: the relative checksum difference allowed where a port gives no checksum_rtol of its own
CHECKSUM_RTOL = 1e-12


@dataclass
class KernelResult:
    """One kernel: its sizes and, per variant, mean seconds per pass and the checksum."""

    name: str              # the suite's full name, e.g. Basic_DAXPY
    port: str              # the port's short name, e.g. DAXPY
    size: object
    problem: int
    reps: int
    bytes_per_rep: float
    flops_per_rep: float
    times: dict = field(default_factory=dict)
    checksums: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)   # variant -> why it does not apply
    setup: float = 0.0     # seconds to build the inputs (the suite's set-up, on the host)
    wall: float = 0.0      # seconds for the whole kernel: set-up, every variant, checksums


def ports() -> list[str]:
    """Every port's short name, in the suite's group order."""
    order = list(GROUPS)
    cases = [c for c in REGISTRY.values() if c.name.startswith("rajaperf/")]
    cases.sort(key=lambda c: (order.index(c.group.split("/")[1]), c.name))
    return [c.name.split("/", 1)[1] for c in cases]


def full_name(port: str) -> str:
    group = REGISTRY[f"rajaperf/{port}"].group.split("/")[1]
    return f"{GROUPS[group]}_{port}"


def select(kernels=None, exclude=None) -> list[str]:
    """The ports named by ``kernels`` (default all) less ``exclude``: short names, full names
    or group names, any case. An unknown name raises ValueError."""
    every = ports()

    def expand(names):
        out = []
        for n in names:
            key = n.strip().upper()
            hit = [p for p in every if key in (p.upper(), full_name(p).upper())
                   or key == full_name(p).split("_")[0].upper()]
            if not hit:
                raise ValueError(f"unknown kernel or group {n!r} (kaio rajaperf --list shows them)")
            out += [p for p in hit if p not in out]
        return out
    chosen = expand(kernels) if kernels else every
    dropped = set(expand(exclude)) if exclude else set()
    return [p for p in chosen if p not in dropped]


# --- variants --------------------------------------------------------------------------------
def _timed(fn) -> float:
    kaio.synchronize()
    t0 = time.perf_counter()
    fn()
    kaio.synchronize()
    return time.perf_counter() - t0


def _run_numpy(port, inputs, size, reps, npasses):
    """A port whose reps do not feed each other gives the same outputs every rep, so
    :func:`_case.after_reps` runs one and folds it; its pass time is that rep's time x reps."""
    per_pass = 1 if _case.SUITE[port].carry is not None else reps
    times, total = [], 0.0
    for _ in range(npasses):
        t0 = time.perf_counter()
        out = _case.after_reps(port, inputs, reps, "reference")
        times.append((time.perf_counter() - t0) * per_pass)
        total += _case.pass_checksum(port, size, out)
    return times, total


def _run_device(port, inputs, size, reps, npasses, mode, native=None):
    """``mode``: "kaio" (launch by launch), "kaio_graph" (one captured pass replayed) or
    "cuda" (the native twin's C++ loop on the same device arrays)."""
    case = REGISTRY[f"rajaperf/{port}"]
    res = case.bench(inputs)
    res()                              # compiles and loads every kernel before timing,
    res()                              # and makes each launch's plan (on its second call)
    kaio.synchronize()
    if mode == "kaio":
        def one_pass():
            for _ in range(reps):
                res()
    elif mode == "kaio_graph":
        with kaio.graph() as g:
            for _ in range(reps):
                res()
        g.replay()                     # the first replay uploads the graph: not timed
        kaio.synchronize()
        one_pass = g.replay
    else:
        twin = native.twin(port, res, inputs)
        twin.run(1)                    # loads the module, allocates a reduction's scratch
        kaio.synchronize()
        one_pass = lambda: twin.run(reps)  # noqa: E731
    times, total = [], 0.0
    for _ in range(npasses):
        res.reset()
        times.append(_timed(one_pass))
        out = twin.outputs() if mode == "cuda" else res.outputs()
        total += _case.pass_checksum(port, size, out, last_rep=reps)
    return times, total


def run_kernel(port: str, variants, *, sizefact=1.0, size=None, repfact=1.0, npasses=1,
               native=None) -> KernelResult:
    """Every variant of one port; a variant that fails is recorded in ``errors``."""
    start = time.perf_counter()
    case = REGISTRY[f"rajaperf/{port}"]
    psize = size_for(port, sizefact=sizefact, size=size)
    reps = max(1, round(case.reps * repfact))
    r = KernelResult(full_name(port), port, psize, problem_size(port, psize), reps,
                     float(case.bytes(psize)), float(case.flops(psize)))
    inputs = case.make_inputs(psize, 0)
    r.setup = time.perf_counter() - start
    for v in variants:
        try:
            if v == "numpy":
                times, ck = _run_numpy(port, inputs, psize, reps, npasses)
            elif v == "cuda" and (native is None or not native.has(port)):
                r.skipped[v] = ("no CUDA C++ form (a kaio-only variant)" if native is not None
                                else "nvcc/CUDA unavailable")
                continue
            else:
                times, ck = _run_device(port, inputs, psize, reps, npasses, v, native)
        except Exception as e:  # one broken variant must not stop the run
            r.errors[v] = f"{type(e).__name__}: {e}"
            continue
        r.times[v] = sum(times) / len(times)
        r.checksums[v] = ck
    trim_weights()
    r.wall = time.perf_counter() - start
    return r


# --- output files ----------------------------------------------------------------------------
def _csv(rows) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "".join(", ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() + "\n"
                   for row in rows)


def timing_csv(results, variants) -> str:
    """Mean seconds per pass, one row per kernel (``Not run`` where a variant did not run)."""
    rows = [["Kernel  ", *variants]]
    for r in results:
        rows.append([r.name, *(f"{r.times[v]:.9g}" if v in r.times else "Not run" for v in variants)])
    return "Mean Runtime Report (sec.)\n" + _csv(rows)


def kernels_csv(results) -> str:
    rows = [["Kernel  ", "Problem size", "Reps", "Bytes/rep", "FLOPS/rep", "Size", "Set-up (s)",
             "Host total (s)"]]
    for r in results:
        shape = "x".join(map(str, r.size)) if isinstance(r.size, tuple) else str(r.size)
        rows.append([r.name, r.problem, r.reps, f"{r.bytes_per_rep:.0f}", f"{r.flops_per_rep:.0f}", shape,
                     f"{r.setup:.2f}", f"{r.wall:.2f}"])
    return "Kernel sizes\n" + _csv(rows)


def checksum_txt(results, variants) -> str:
    """Per kernel, each variant's checksum and its difference against the first variant run."""
    width = max([len(r.name) for r in results] + [len(v) for v in variants] + [10]) + 2
    eq, dots, dash = "*" * 80, "." * 80, "-" * 80
    lines = [eq, "Checksum Report ", eq, "", "Kernel  ", dots,
             f"{'Variants  ':<{width}}{'Checksum  ':<28}Checksum Diff (vs. first variant listed)", dash]
    for r in results:
        lines += [r.name, dots]
        ref = next((r.checksums[v] for v in variants if v in r.checksums), None)
        for v in variants:
            if v in r.checksums:
                lines.append(f"{v:<{width}}{r.checksums[v]:<28.20g}{ref - r.checksums[v]:.20g}")
            else:
                why = r.errors.get(v) or r.skipped.get(v) or "Not run"
                lines.append(f"{v:<{width}}{'Not run':<28}{why}")
        lines.append("")
    return "\n".join(lines) + "\n"


def write_files(results, variants, outdir, prefix="RAJAPerf") -> list[Path]:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    files = {f"{prefix}-timing-Average.csv": timing_csv(results, variants),
             f"{prefix}-checksum.txt": checksum_txt(results, variants),
             f"{prefix}-kernels.csv": kernels_csv(results)}
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / n for n in files]


# --- summary ---------------------------------------------------------------------------------
def checksum_ok(r: KernelResult, variant: str) -> bool | None:
    """Whether ``variant``'s checksum agrees with the first variant's within the port's
    tolerance (None when either did not run)."""
    first = next((v for v in r.checksums), None)
    if first is None or variant not in r.checksums:
        return None
    case = REGISTRY[f"rajaperf/{r.port}"]
    rtol = case.checksum_rtol if case.checksum_rtol is not None else CHECKSUM_RTOL
    return relative_diff(r.checksums[first], r.checksums[variant]) <= rtol


def geomean(values) -> float | None:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def ratios(results, variants, base: str) -> dict:
    """variant -> {kernel: time / base time} for kernels where both ran."""
    return {v: {r.name: r.times[v] / r.times[base] for r in results
                if v in r.times and base in r.times and r.times[base] > 0}
            for v in variants if v != base}


def summary_table(results, variants) -> Table:
    base = "cuda" if "cuda" in variants else None
    t = Table(title="kaio rajaperf (mean time per rep)")
    t.add_column("kernel", no_wrap=True)
    t.add_column("size", justify="right")
    t.add_column("reps", justify="right")
    t.add_column("host s: set-up/all", justify="right")
    for v in variants:
        t.add_column(f"{v} us/rep", justify="right")
    if base:
        for v in variants:
            if v != base:
                t.add_column(f"{v}/cuda", justify="right")
    t.add_column("checksums")
    per = ratios(results, variants, base) if base else {}
    for r in results:
        cells = [r.name, str(r.problem), str(r.reps), f"{r.setup:.1f}/{r.wall:.1f}"]
        cells += [f"{1e6 * r.times[v] / r.reps:.2f}" if v in r.times else "-" for v in variants]
        if base:
            cells += [f"{per[v][r.name]:.2f}x" if r.name in per[v] else "-" for v in variants if v != base]
        bad = [v for v in r.checksums if checksum_ok(r, v) is False]
        failed = list(r.errors)
        cells.append("ok" if not bad and not failed else
                     " ".join([f"[red]{v} differs[/red]" for v in bad] + [f"[yellow]{v}: failed[/yellow]"
                                                                         for v in failed]))
        t.add_row(*cells)
    if base:
        row = ["geomean", "", "", ""] + [""] * len(variants)
        row += [f"{geomean(per[v].values()):.2f}x" if geomean(per[v].values()) else "-"
                for v in variants if v != base]
        t.add_row(*row, "", style="bold")
    return t


# --- command line ----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kaio rajaperf", description=__doc__.split("\n\n")[0].replace("``", ""),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", "-k", nargs="+", help="kernels or groups to run (default: all)")
    ap.add_argument("--exclude-kernels", "-ek", nargs="+", help="kernels or groups to leave out")
    ap.add_argument("--variants", "-v", nargs="+", default=None,
                    help=f"variants, of {', '.join(VARIANTS)} (default: numpy kaio kaio_graph; numpy "
                         "alone on the reference backend; comma-separated lists work too)")
    ap.add_argument("--sizefact", type=float, default=1.0, help="problem size times the default")
    ap.add_argument("--size", type=int, default=None, help="target problem size (overrides --sizefact)")
    ap.add_argument("--repfact", type=float, default=1.0, help="reps times the default")
    ap.add_argument("--npasses", type=int, default=1,
                    help="passes (each sets the data up afresh; times averaged, checksums summed)")
    ap.add_argument("--outdir", "-od", default=".", help="directory for the output files")
    ap.add_argument("--outfile", "-of", default="RAJAPerf", help="prefix of the output files")
    ap.add_argument("--backend", default=None, help="kaio backend (default: the current one)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="start no kernel after this many seconds since the command started, the "
                         "cuda variant's nvcc build included (kaio's option, not the suite's)")
    ap.add_argument("--list", action="store_true", help="list the kernels and exit")
    return ap


def _split(values):
    return [x for v in values or [] for x in v.split(",") if x]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    console = Console()
    if args.list:
        for p in ports():
            c = REGISTRY[f"rajaperf/{p}"]
            console.print(f"{full_name(p):<28} {c.description}")
        return 0
    start = time.perf_counter()
    if args.backend:
        kaio.set_backend(args.backend)
    # the reference backend interprets kernels: its kaio variants are for tiny --size runs
    default = ["numpy"] if backends.current_name() == "reference" else ["numpy", "kaio", "kaio_graph"]
    variants = _split(args.variants) or default
    unknown = [v for v in variants if v not in VARIANTS]
    try:
        if unknown:
            raise ValueError(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
        if args.npasses < 1 or args.repfact <= 0 or args.sizefact <= 0:
            raise ValueError("--npasses, --repfact and --sizefact must be positive")
        chosen = select(_split(args.kernels), _split(args.exclude_kernels))
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    if any(problem_size(p, size_for(p, sizefact=args.sizefact, size=args.size)) >= BIG for p in chosen):
        keep_freed_memory()      # such runs allocate and free tens of GB of 0.5 GB arrays
    native = None
    if "cuda" in variants:
        native = native_mod.load()
        if native is None:
            console.print(f"[yellow]cuda variant skipped:[/yellow] {native_mod.why_unavailable()}")
    results, files = [], []
    with progress("rajaperf", total=len(chosen)) as bar:
        for port in chosen:
            if args.time_limit is not None and time.perf_counter() - start > args.time_limit:
                console.print(f"[yellow]--time-limit reached:[/yellow] {len(chosen) - len(results)} "
                              "kernels not run")
                break
            bar.label(port)
            results.append(run_kernel(port, variants, sizefact=args.sizefact, size=args.size,
                                      repfact=args.repfact, npasses=args.npasses, native=native))
            files = write_files(results, variants, args.outdir, args.outfile)  # kept if killed
            bar.advance()
    console.print(summary_table(results, variants))
    for r in results:
        for v, why in r.errors.items():
            console.print(f"[yellow]{r.name} {v}:[/yellow] {why}")
    if files:
        console.print("wrote " + ", ".join(str(f) for f in files))
    bad = [r.name for r in results for v in r.checksums if checksum_ok(r, v) is False]
    return 1 if bad else 0
