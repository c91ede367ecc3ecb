"""Checked mode's cost: saxpy and softmax, checked vs unchecked, on one GPU.

    python3 benchmarks/bench_checked.py [--out DIR] [--quick] [--backend cuda]

Each kernel of benchmarks/bench_gpu.py's saxpy and softmax rows is compiled twice from the same
function, ``checked=False`` and ``checked=True``, and run on the same device arrays:

- ``kernel``: the kernel alone, 20 back-to-back launches between two events, median of 7 (as
  bench_gpu.py). The checked kernel is launched through the backend with a device-resident
  fault record, so this is what the guards cost on the device.
- ``call``: one call as a user makes it, median of 7 rounds of 20: the unchecked call followed
  by a synchronize, against the checked call, which copies its fault record in and out and
  synchronizes (that is how it reads the record back).

Both runs' outputs are compared bit for bit, and the fault record must stay zero. Prints a
Markdown table and writes it, with JSON, to --out. ``--backend reference --quick`` runs the
same code on the CPU (a smoke test of this script; its times mean nothing).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_gpu  # noqa: E402
import kaio_bench_kernels as kk  # noqa: E402

import kaio  # noqa: E402
from kaio.passes import bounds_check  # noqa: E402


def twin(kern, checked: bool):
    """The same kernel function compiled with ``checked`` set, its other options kept."""
    o = kern.options
    return kaio.kernel(kern.fn, fast_math=o.fast_math, max_registers=o.max_registers,
                       disabled_passes=o.disabled_passes, checked=checked)


REPS, ROUNDS, WARMUP = 20, 7, 3


def timed(fn) -> float:
    """Milliseconds per call (bench_gpu.timed with kaio's events): ``REPS`` calls between two
    events, median of ``ROUNDS``."""
    return bench_gpu.timed(fn, REPS, ROUNDS, WARMUP, event=kaio.Event, synchronize=kaio.synchronize)


def cases(quick: bool):
    """(name, kernel, grid, block, consts, make_args) per benchmark."""
    rng = np.random.default_rng(0)
    n = 1 << (16 if quick else 28)
    rows, cols = (16, 1024) if quick else (4096, 8192)
    x, y = rng.random(n, np.float32), rng.random(n, np.float32)
    xs = rng.standard_normal((rows, cols), np.float32)
    saxpy = lambda: [2.0, kaio.to_device(x), kaio.to_device(y)]          # noqa: E731
    softmax = lambda: [kaio.to_device(xs), kaio.device_array((rows, cols), np.float32)]  # noqa: E731
    return [
        (f"saxpy n=2^{n.bit_length() - 1} f32, 1/thread", kk.saxpy, -(-n // 256), 256, {}, saxpy),
        (f"saxpy n=2^{n.bit_length() - 1} f32, blocked(8)", kk.saxpy8, -(-n // 2048), 256, {}, saxpy),
        (f"softmax {rows}x{cols} f32, 3-pass", kk.softmax_rows, rows, 1024, {}, softmax),
        (f"softmax {rows}x{cols} f32, resident", kk.softmax_rows_resident, rows, 512,
         {"PER": -(-cols // 512)}, softmax),
    ]


def measure(name, kern, grid, block, consts, make) -> dict:
    off, on = twin(kern, False), twin(kern, True)
    be = kaio.backends.get_backend(None)
    compiled = on.compile(be, **consts)
    record = kaio.to_device(np.zeros(bounds_check.RECORD_LEN, np.int64))
    a_off, a_on = make(), make()
    off[grid, block](*a_off, **consts)
    on[grid, block](*a_on, **consts)
    same = all(np.array_equal(np.asarray(p.to_host()).view(np.uint8), np.asarray(q.to_host()).view(np.uint8))
               for p, q in zip(a_off, a_on) if hasattr(p, "to_host"))
    kernel_off = timed(lambda: off[grid, block](*a_off, **consts))
    kernel_on = timed(lambda: be.launch(compiled, (grid, 1, 1), (block, 1, 1), [*a_on, record]))
    call_off = timed(lambda: (off[grid, block](*a_off, **consts), kaio.synchronize()))
    call_on = timed(lambda: on[grid, block](*a_on, **consts))
    clean = not record.to_host().any()
    return {"case": name, "kernel_ms": kernel_off, "kernel_checked_ms": kernel_on,
            "call_ms": call_off, "call_checked_ms": call_on, "identical": bool(same),
            "no_fault": bool(clean)}


def table(results, device: str) -> str:
    out = [f"device: {device}",
           "| case | kernel ms | checked kernel ms | ratio | call ms (+ sync) | checked call ms | ratio "
           "| same bits |",
           "|---|---|---|---|---|---|---|---|"]
    for r in results:
        out.append(f"| {r['case']} | {r['kernel_ms']:.4f} | {r['kernel_checked_ms']:.4f} | "
                   f"{r['kernel_checked_ms'] / r['kernel_ms']:.2f} | {r['call_ms']:.4f} | "
                   f"{r['call_checked_ms']:.4f} | {r['call_checked_ms'] / r['call_ms']:.2f} | "
                   f"{'yes' if r['identical'] and r['no_fault'] else 'NO'} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for JSON/Markdown")
    ap.add_argument("--quick", action="store_true", help="smaller problems")
    ap.add_argument("--backend", default="cuda", help="cuda (default), hip or reference")
    args = ap.parse_args(argv)
    kaio.set_backend(args.backend)
    if args.backend == "reference":   # a smoke test of this script: one call per number
        global REPS, ROUNDS, WARMUP
        REPS, ROUNDS, WARMUP = 1, 1, 0
    device = (kaio.backends.get_backend(None).devices() or [args.backend])[0]
    results = [measure(*c) for c in cases(args.quick)]
    text = table(results, device)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_checked.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "bench_checked.json"), "w") as f:
        json.dump({"device": device, "results": results}, f, indent=1)
    return 0 if all(r["identical"] and r["no_fault"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
