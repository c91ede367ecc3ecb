"""What the autotuner tries and chooses for the row ops at ``kaio bench --ml``'s shapes.

    python3 benchmarks/autotune_rows.py [--quick] [--out DIR]

Tunes softmax, rmsnorm and layernorm (kernels/ml/row_tuning.py's candidates) at rows of
4096x1024, 4096x8192 and 1024x32768 in f32, f16 and bf16, again over any cached winner, on
device arrays, and prints each record: every candidate's time (or failure) and the choice.
``--out DIR`` also writes autotune_rows.md. On the reference backend nothing is timed: each
line names the default.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import kaio
from kaio import autotune
from kaio.kernels._launch import np_dtype
from kaio.kernels.ml import norms

SHAPES = ((4096, 1024), (4096, 8192), (1024, 32768))


def tune_shape(rows: int, cols: int, dt: str) -> list[str]:
    """Tune the three row ops at one shape and dtype; one text block per decision."""
    g = np.random.default_rng(0)
    d = np_dtype(dt)
    x = kaio.to_device(g.normal(0.0, 2.0, (rows, cols)).astype(d))
    w = kaio.to_device(g.uniform(0.5, 1.5, cols).astype(d))
    b = kaio.to_device(g.uniform(-0.5, 0.5, cols).astype(d))
    y = kaio.device_array((rows, cols), d)
    calls = {"softmax": (x, y), "rmsnorm": (x, w, y, 1e-6), "layernorm": (x, w, b, y, 1e-5)}
    out = []
    for op, call in calls.items():
        with autotune.fresh(), autotune.choices() as got:
            norms.row_kernel(op, dt, dt, (rows, cols))(*call)
        kaio.synchronize()
        for _, _, choice in got:
            out.append(autotune.format_record(choice.record) if choice.record else
                       f"{op} {dt} {rows}x{cols}: {choice.config.name} ({choice.source})")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="folder for autotune_rows.md")
    ap.add_argument("--quick", action="store_true", help="4096x8192 in f32 and f16 only")
    args = ap.parse_args(argv)
    lines = [f"device: {autotune.device_id()}"]
    for rows, cols in ((4096, 8192),) if args.quick else SHAPES:
        for dt in ("f32", "f16") if args.quick else ("f32", "f16", "bf16"):
            for text in tune_shape(rows, cols, dt):
                print(text, flush=True)
                lines.append(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "autotune_rows.md"), "w") as f:
            f.write("```\n" + "\n".join(lines) + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
