"""``python3 -m kaio.conformance.fuzz``: generate random kernels, compare the static race
checker's verdict with the reference sanitizer, and (optionally) run the accepted kernels
differentially on the GPU backends.

    python3 -m kaio.conformance.fuzz --count 10000 --seed 1 [--backends reference,cuda,cuda-llvm]
                                     [--out DIR] [--jobs N] [--launches 4] [--only 17,512]

Prints the counts (rich tables) and writes DIR/fuzz.json and DIR/kernels/<class>/<name>.py for
every interesting kernel. Exit status: 0 when no kernel was accepted and raced, no internal or
generator error happened and no backend differed from the reference; 1 otherwise; 2 on a usage
error (a requested backend that cannot run here included).
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys

from . import differential
from .run import Options, run

#: reference-plain: the interpreter without the sanitizer; *-compile: PTX assembled by ptxas,
#: no run (for machines without a GPU)
BACKENDS = ("reference", "cuda", "cuda-llvm", "reference-plain", "cuda-compile", "cuda-llvm-compile")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m kaio.conformance.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=1000, help="kernels to generate (default 1000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=int, default=0, help="number of the first kernel")
    p.add_argument("--only", default="", help="comma-separated kernel numbers to run instead")
    p.add_argument("--backends", default="reference",
                   help=f"comma-separated, from {','.join(BACKENDS)} (reference is always the baseline)")
    p.add_argument("--out", default="", help="directory for fuzz.json and the interesting kernels")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--launches", type=int, default=4, help="sanitized launches per kernel")
    p.add_argument("--diff-launches", type=int, default=2, help="launches per kernel on each other backend")
    p.add_argument("--time-limit", type=float, default=0,
                   help="seconds: start no new batch after this (default: none); the report "
                        "says the run is incomplete")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def main(argv: list | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = [b for b in names if b not in BACKENDS]
    if bad or args.count < 0 or args.jobs < 1 or args.launches < 1:
        print(f"kaio fuzz: bad arguments {bad or ''} (backends from {', '.join(BACKENDS)})", file=sys.stderr)
        return 2
    missing = {k: v for k, v in differential.available([n for n in names if n != "reference"]).items() if v}
    if missing:
        for k, v in missing.items():
            print(f"kaio fuzz: backend {k} cannot run here: {v}", file=sys.stderr)
        return 2
    only = tuple(int(s) for s in args.only.split(",") if s.strip())
    backends = tuple(["reference"] + [n for n in names if n != "reference"])
    opts = Options(count=args.count, seed=args.seed, backends=backends,
                   jobs=args.jobs, launches=args.launches, diff_launches=args.diff_launches,
                   start=args.start, only=only, progress=not args.quiet, time_limit=args.time_limit,
                   extra={"command": "python3 -m kaio.conformance.fuzz " + shlex.join(argv)})
    signal.signal(signal.SIGTERM, _interrupt)   # a timeout still gets the counts so far
    summary = run(opts)
    summary.print()
    if args.out:
        paths = summary.write(args.out)
        print("report: " + ", ".join(paths), file=sys.stderr)
    print(summary.line())
    if summary.incomplete == "interrupted":
        return 143
    return 1 if summary.failed else 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt
