"""``kaio conformance``: run every kernel on every target and write the report.

    kaio conformance [--target reference,cuda,cuda-llvm,hip,sm_80,sm_80-llvm,sm_86,sm_86-llvm,
                               sm_89,sm_89-llvm,gfx90a,gfx942] [--kernel NAME ...]
                     [--size small|default] [--out DIR] [--jobs N] [--sanitize] [--portable]
    python -m kaio.conformance ...

Writes ``DIR/conformance.json``, ``DIR/conformance.md`` and ``DIR/conformance.html`` (default
DIR: ./conformance-report); the JSON is rewritten after every kernel, and all three are written
when the run is interrupted (Ctrl-C, SIGTERM from a timeout), so a cut-short run leaves a
report. Targets that cannot run here are reported as not run, with the reason (the compile-only
sm_XX columns without ptxas: "ptxas not available"). Exit status: 0
when no cell is failing, 1 when any is (or a kernel's result depends on the warp width without
its declaring so), 2 on a usage error, 130/143 when interrupted.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from kaio.progress import progress

from .cases import all_cases, select
from .render import html_page, markdown
from .runner import Options, run_suite
from .targets import ALL, parse_targets


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kaio conformance",
                                description="Run kaio's kernels on every target and compare them.")
    p.add_argument("--target", default=None,
                   help=f"comma-separated targets (default: all of {','.join(ALL)})")
    p.add_argument("--kernel", nargs="+", action="extend", default=None, metavar="NAME",
                   help="kernels to run: a name ('rmsnorm', 'ml/rmsnorm', 'feature/atomics') or "
                        "a group prefix ('feature', 'library/rajaperf')")
    p.add_argument("--size", choices=("small", "default"), default="small",
                   help="problem sizes: CI sizes (small) or the library's default sizes")
    p.add_argument("--out", default="conformance-report", help="report directory")
    p.add_argument("--jobs", type=int, default=None,
                   help="worker processes for the builds (AMD code objects, ptxas for the sm_XX "
                        "columns, cuda-llvm pre-flight; default: CPU count)")
    p.add_argument("--sanitize", action="store_true",
                   help="run the reference interpreter with its race sanitizer (slower; off by "
                        "default: conformance compares results)")
    p.add_argument("--portable", action="store_true",
                   help="compile every kernel in portable mode (KAIO_PORTABLE=1: correctly rounded "
                        "operations and kaio's portable math library only); the report says "
                        "whether every executed cell is bit-identical to the interpreter")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    try:
        targets = parse_targets(args.target)
        cases = select(all_cases(), args.kernel)
    except (ValueError, KeyError) as e:
        print(f"kaio conformance: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    if args.list:
        for c in cases:
            print(f"{c.name:45s} {c.group}")
        return 0
    if args.jobs is not None and args.jobs < 1:
        print("kaio conformance: --jobs must be at least 1", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)

    def on_row(partial):
        write_json(partial, args.out)
        bar.advance()
        if partial.rows:
            bar.label(f"done: {partial.rows[-1].kernel}")

    with progress("conformance", total=len(cases)) as bar:
        report = run_suite(Options(targets, None, args.size, args.jobs, cases=cases,
                                   command="kaio conformance " + shlex.join(argv),
                                   sanitize=args.sanitize, on_row=on_row,
                                   portable=args.portable))
    paths = write(report, args.out)
    counts = report.counts()
    for t in report.targets:
        c = counts[t]
        print(f"{t:14s} " + "  ".join(f"{k}={v}" for k, v in c.items() if v), file=sys.stderr)
    print("report: " + ", ".join(paths), file=sys.stderr)
    if report.header.get("interrupted"):
        print(f"incomplete: {report.header['interrupted']}", file=sys.stderr)
        return 130 if "KeyboardInterrupt" in report.header["interrupted"] else 143
    status = 0
    if report.failing:
        print(f"{len(report.failing)} failing cell(s): " + ", ".join(
            f"{k}@{t}" for k, t in report.failing[:20]), file=sys.stderr)
        status = 1
    if report.width_flagged:
        print(f"{len(report.width_flagged)} kernel(s) depend on the warp width without declaring "
              f"it: {', '.join(report.width_flagged[:20])}", file=sys.stderr)
        status = 1
    return status


def write_json(report, out_dir: str) -> str:
    """Write (atomically replace) DIR/conformance.json only: the partial report after each case."""
    path = os.path.join(out_dir, "conformance.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(report.to_json())
    os.replace(tmp, path)
    return path


def write(report, out_dir: str) -> list[str]:
    """Write conformance.{json,md,html} into ``out_dir``; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    text = report.to_json()
    d = json.loads(text)
    paths = []
    for name, body in (("conformance.json", text), ("conformance.md", markdown(d)),
                       ("conformance.html", html_page(d))):
        path = os.path.join(out_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(body)
        paths.append(path)
    return paths


if __name__ == "__main__":
    sys.exit(main())
