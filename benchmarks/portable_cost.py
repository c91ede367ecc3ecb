"""What portable mode costs: every library kernel, default compilation vs ``KAIO_PORTABLE=1``.

    python3 benchmarks/portable_cost.py [--out DIR] [--quick] [--backend cuda] [--kernel NAME ...]

Portable mode (docs/conformance.md) compiles with only correctly rounded operations and kaio's
portable math library: fast_math kernels and per-call ``fast=True`` lose their hardware
approximations (``ex2.approx``, ``div.full``, ``tanh.approx``...). For each library case:

1. its kernels are recorded from one small run, and their PTX (sm_90) is emitted both ways; a
   case whose PTX is the same in both modes costs nothing by construction ("same code");
2. the others are timed at the library's default size with the case's device-resident launch
   closure (launches only, no copies; 20 reps between two events, median of 7, as
   bench_checked.py), once with the default compilation and once in portable mode (a fresh
   compile: portable mode is part of the compile-cache key), and the outputs' largest relative
   difference is recorded.

Prints a Markdown table and writes it, with JSON, to --out (portable_cost.md / .json).
``--backend reference --quick`` runs the same code on the CPU at the small sizes (a smoke test
of this script; its times mean nothing).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_gpu  # noqa: E402

import kaio  # noqa: E402
from kaio import backends, kernels  # noqa: E402
from kaio.backends.targets import emit  # noqa: E402
from kaio.conformance.portability import portable_env  # noqa: E402
from kaio.conformance.targets import Recorder, using  # noqa: E402

REPS, ROUNDS, WARMUP = 20, 7, 3


def timed(fn) -> float:
    return bench_gpu.timed(fn, REPS, ROUNDS, WARMUP, event=kaio.Event, synchronize=kaio.synchronize)


def changed_kernels(kc) -> list[str]:
    """Names of the case's kernels whose sm_90 PTX differs in portable mode."""
    rec = Recorder(backends.get_backend(None))
    with using(rec, "portable-cost"):
        kc.run(kc.make_inputs(kc.small_size, 0))
    out = []
    for kernel, opts in {id(k): (k, o) for k, o in rec.log}.values():
        both = [emit(kernel, "ptx", "sm_90", dataclasses.replace(opts, portable=p)) for p in (False, True)]
        if both[0] != both[1] and kernel.name not in out:
            out.append(kernel.name)
    return out


def _outputs(kc, inputs, portable: bool):
    with portable_env(portable):
        return kc.run(inputs)


def max_rel_diff(a: dict, b: dict) -> float:
    worst = 0.0
    for k, x in a.items():
        x, y = np.asarray(x, np.float64), np.asarray(b[k], np.float64)
        with np.errstate(all="ignore"):
            d = np.abs(x - y) / np.maximum(np.abs(y), 1e-30)
        d = d[np.isfinite(d)]
        worst = max(worst, float(d.max()) if d.size else 0.0)
    return worst


def measure(kc, quick: bool) -> dict:
    changed = changed_kernels(kc)
    row = {"case": kc.name, "changed": changed}
    if not changed:
        return row
    size = kc.small_size if quick else kc.default_size
    inputs = kc.make_inputs(size, 0)
    ms = {}
    for portable in (False, True):
        with portable_env(portable):
            launch = kc.bench(inputs)
            ms[portable] = timed(launch)
    row.update(default_ms=ms[False], portable_ms=ms[True],
               max_rel_diff=max_rel_diff(_outputs(kc, inputs, True), _outputs(kc, inputs, False)))
    return row


def table(rows, device: str) -> str:
    out = [f"device: {device}; portable mode (KAIO_PORTABLE=1) vs the default compilation",
           "| case | kernels whose code changes | default ms | portable ms | ratio | max rel diff |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        if not r["changed"]:
            out.append(f"| {r['case']} | none (same code) | | | 1.00 | 0 |")
            continue
        out.append(f"| {r['case']} | {', '.join(r['changed'])} | {r['default_ms']:.4f} | "
                   f"{r['portable_ms']:.4f} | {r['portable_ms'] / r['default_ms']:.2f} | "
                   f"{r['max_rel_diff']:.2g} |")
    same = sum(1 for r in rows if not r["changed"])
    out.append(f"\n{same} of {len(rows)} cases compile to the same code in portable mode.")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for JSON/Markdown")
    ap.add_argument("--quick", action="store_true", help="the small sizes")
    ap.add_argument("--backend", default="cuda", help="cuda (default), hip or reference")
    ap.add_argument("--kernel", nargs="+", default=None, help="case names (default: every one)")
    args = ap.parse_args(argv)
    kaio.set_backend(args.backend)
    if args.backend == "reference":   # a smoke test: one call per number
        global REPS, ROUNDS, WARMUP
        REPS, ROUNDS, WARMUP = 1, 1, 0
    device = (backends.get_backend(None).devices() or [args.backend])[0]
    cases = [kc for kc in kernels.cases() if kc.bench is not None
             and (not args.kernel or kc.name in args.kernel or kc.name.split("/")[-1] in args.kernel)]
    rows = []
    for kc in cases:
        try:
            rows.append(measure(kc, args.quick))
        except Exception as e:   # one case's failure is a row, not the end of the table
            rows.append({"case": kc.name, "changed": ["?"], "default_ms": float("nan"),
                         "portable_ms": float("nan"), "max_rel_diff": float("nan"),
                         "error": f"{type(e).__name__}: {e}"})
            print(f"{kc.name}: {type(e).__name__}: {e}", file=sys.stderr)
    text = table(rows, str(device))
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "portable_cost.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "portable_cost.json"), "w") as f:
        json.dump({"device": str(device), "rows": rows}, f, indent=1)
    return 0 if not any("error" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
