"""kaio's ML library ops against Triton and torch eager, with GB/s against the copy bandwidth.

    kaio bench --ml [--quick] [--ops softmax,rmsnorm] [--dtypes f32,f16] [--out DIR]
    python3 benchmarks/bench_ml.py [the same options]

For softmax, rmsnorm and layernorm over rows of 4096x1024, 4096x8192 and 1024x32768, and for
silu_gate, gelu_tanh, gelu_exact and dequantize_int8 over 2^24 and 2^28 elements, in f32, f16
and bf16, it runs on the same data:

- kaio: the library call, through the registry case's device-resident ``bench`` closure
  (benchmarks/ml_kaio.py), called once first so that an autotuned op (the row ops) picks its
  configuration for the shape before anything is checked or timed: the table's last column says
  what it chose, and a list under the table what each candidate took;
- Triton: the tutorial-style kernels of benchmarks/triton_ml.py;
- torch: eager PyTorch.

Each is first checked against an f32 torch reference computed from the same inputs (a failed check
marks its cell instead of a time), then timed as benchmarks/bench_gpu.py's ``timed`` does: CUDA
events around back-to-back calls, the median of several rounds. Each case also times a torch
device-to-device copy moving the same number of bytes; GB/s is shown with its fraction of that
copy's. kaio's kernels are listed with their registers and local memory per thread from the
driver (``cuFuncGetAttribute``). A case that raises is recorded in its row and the table goes on.
Writes bench_ml.json and bench_ml.md to --out (after every case, so a cut-short run keeps what it
measured).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

ROW_OPS = ("softmax", "rmsnorm", "layernorm")
ELEMENTWISE_OPS = ("silu_gate", "gelu_tanh", "gelu_exact", "dequantize_int8")
OPS = ROW_OPS + ELEMENTWISE_OPS
DTYPES = ("f32", "f16", "bf16")
QUICK_DTYPES = ("f32", "f16")
ROW_SHAPES = ((4096, 1024), (4096, 8192), (1024, 32768))
ELEMENTWISE_SIZES = (1 << 24, 1 << 28)
QUICK_ROW_SHAPE, QUICK_SIZE = (4096, 8192), 1 << 24
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2}
IMPLS = ("kaio", "triton", "torch")


@dataclass(frozen=True)
class MlCase:
    """One row of the table: an op, a dtype and a shape ((rows, cols) for the row ops and for
    dequantize_int8, whose int8 matrix is square; (n,) for the other elementwise ops)."""

    op: str
    dtype: str
    shape: tuple

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def label(self) -> str:
        if self.op in ROW_OPS:
            return "x".join(map(str, self.shape))
        n = self.elements
        power = f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)
        return power + (f" ({self.shape[0]}x{self.shape[1]})" if len(self.shape) == 2 else "")

    @property
    def traffic_bytes(self) -> int:
        """Bytes a kernel must move: every input read once, the output written once."""
        b, n = ITEMSIZE[self.dtype], self.elements
        if self.op == "softmax":
            return 2 * b * n
        if self.op == "rmsnorm":
            return 2 * b * n + b * self.shape[1]
        if self.op == "layernorm":
            return 2 * b * n + 2 * b * self.shape[1]
        if self.op == "silu_gate":
            return 3 * b * n
        if self.op in ("gelu_tanh", "gelu_exact"):
            return 2 * b * n
        if self.op == "dequantize_int8":
            return n + b * n + 4 * self.shape[0]
        raise ValueError(f"unknown op {self.op!r}")

    @property
    def copy_bytes(self) -> int:
        """Size of the buffer the reference copy copies: it reads and writes it, so it moves as
        many bytes as the case (rounded down to 16)."""
        return self.traffic_bytes // 2 // 16 * 16


def elementwise_shape(op: str, n: int) -> tuple:
    """(n,) for the flat ops; a square-ish (rows, cols) int8 matrix for dequantize_int8."""
    if op != "dequantize_int8":
        return (n,)
    rows = 1 << ((n.bit_length() - 1) // 2) if n & (n - 1) == 0 else math.isqrt(n)
    return (rows, n // rows)


def _pick(given, known: tuple, what: str) -> tuple:
    if not given:
        return known
    unknown = [g for g in given if g not in known]
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(known)}")
    return tuple(g for g in known if g in given)  # the table's order, not the command line's


def enumerate_cases(ops=None, dtypes=None, quick: bool = False) -> list[MlCase]:
    """The cases to run, op by op, shape by shape, dtype by dtype. ``quick``: one shape per op
    (4096x8192 rows, 2^24 elements) and f32 + f16 unless ``dtypes`` says otherwise."""
    ops = _pick(ops, OPS, "op")
    dtypes = _pick(dtypes, DTYPES, "dtype") if dtypes else (QUICK_DTYPES if quick else DTYPES)
    cases = []
    for op in ops:
        if op in ROW_OPS:
            shapes = (QUICK_ROW_SHAPE,) if quick else ROW_SHAPES
        else:
            shapes = tuple(elementwise_shape(op, n) for n in ((QUICK_SIZE,) if quick else ELEMENTWISE_SIZES))
        cases += [MlCase(op, dt, tuple(shape)) for shape in shapes for dt in dtypes]
    return cases


# --- results -----------------------------------------------------------------------------------
def new_result(case: MlCase) -> dict:
    """The JSON record of one case, filled in by the runner: ``impls[name]`` is
    ``{"ms", "gbps", "max_err"}`` or ``{"error"}``; ``copy`` likewise."""
    return {"op": case.op, "dtype": case.dtype, "shape": list(case.shape), "label": case.label,
            "bytes": case.traffic_bytes, "copy": None, "impls": {}, "kaio_kernels": [],
            "kaio_config": [], "triton_kernel": None, "kaio_source": None, "error": None}


def ratio(result: dict) -> float | None:
    """kaio's time over the best other implementation's (above 1: kaio is slower)."""
    kaio_ms = (result["impls"].get("kaio") or {}).get("ms")
    others = [c["ms"] for name, c in result["impls"].items() if name != "kaio" and c and c.get("ms")]
    if not kaio_ms or not others:
        return None
    return kaio_ms / min(others)


def _short(text: str, n: int = 48) -> str:
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= n else text[: n - 3] + "..."


def fmt_time(cell) -> str:
    if not cell:
        return "—"
    if "ms" in cell:
        return f"{cell['ms'] * 1e3:.1f}" + (" (unchecked)" if cell.get("unchecked") else "")
    return f"FAIL: {_short(cell.get('error', 'not run'))}"


def fmt_rate(cell, copy) -> str:
    if not cell or "gbps" not in cell:
        return "—"
    text = f"{cell['gbps']:.0f}"
    if copy and copy.get("gbps"):
        text += f" ({100.0 * cell['gbps'] / copy['gbps']:.0f}%)"
    return text


def fmt_kernels(result: dict) -> str:
    parts = []
    for k in result.get("kaio_kernels") or []:
        regs = "?" if k.get("regs") is None else k["regs"]
        local = "?" if k.get("local_bytes") is None else k["local_bytes"]
        parts.append(f"{k.get('name', '?')} {regs}/{local}")
    return ", ".join(parts) or "—"


def fmt_config(result: dict) -> str:
    """What the autotuner chose for kaio's launch, and how ('tuned' now, from the 'cache', ...);
    — for ops without an autotuner."""
    return ", ".join(f"{c['config']} ({c['source']})" for c in result.get("kaio_config") or []) or "—"


def fmt_triton_kernel(result: dict) -> str:
    k = result.get("triton_kernel") or {}
    if k.get("regs") is None:
        return "—"
    local = "?" if k.get("local_bytes") is None else k["local_bytes"]
    return f"{k['regs']}/{local}"


TABLE_HEAD = ("| op | dtype | shape | kaio us | Triton us | torch us | kaio / best | kaio GB/s | "
              "Triton GB/s | torch GB/s | copy GB/s | kaio regs/local B | Triton regs/local B | "
              "kaio config (autotune) |")


def table_row(result: dict) -> str:
    impls = result["impls"]
    r = ratio(result)
    ratio_text = f"{r:.2f}x" if r is not None else "—"
    copy = result.get("copy")
    if result.get("error") and not impls:
        cells = [f"FAIL: {_short(result['error'])}"] + ["—"] * 10
    else:
        cells = [fmt_time(impls.get(i)) for i in IMPLS] + [ratio_text]
        cells += [fmt_rate(impls.get(i), copy) for i in IMPLS]
        cells.append(f"{copy['gbps']:.0f}" if copy and copy.get("gbps") else
                     (f"FAIL: {_short(copy['error'])}" if copy and copy.get("error") else "—"))
        cells += [fmt_kernels(result), fmt_triton_kernel(result), fmt_config(result)]
    return "| " + " | ".join([result["op"], result["dtype"], result["label"], *cells]) + " |"


def markdown(header: list[str], results: list[dict]) -> str:
    """The report: header lines, then one table row per case."""
    lines = list(header) + ["", TABLE_HEAD, "|" + "---|" * TABLE_HEAD.count(" | ") + "---|"]
    lines += [table_row(r) for r in results]
    errors = [(r, name, c["error"]) for r in results for name, c in r["impls"].items()
              if c and c.get("error")]
    errors += [(r, "case", r["error"]) for r in results if r.get("error")]
    if errors:
        lines += ["", "Failures:"]
        lines += [f"- {r['op']} {r['dtype']} {r['label']} {name}: {_short(why, 300)}"
                  for r, name, why in errors]
    tuned = [(r, c) for r in results for c in r.get("kaio_config") or [] if c.get("tried")]
    if tuned:
        lines += ["", "What the autotuner tried (us per call; the chosen one marked *):"]
        lines += [f"- {r['op']} {r['dtype']} {r['label']} ({c['source']}): {fmt_tried(c)}"
                  for r, c in tuned]
    return "\n".join(lines) + "\n"


def fmt_tried(choice: dict) -> str:
    """Each candidate of one autotuner choice with its time (or why it was not timed)."""
    parts = []
    for t in choice["tried"]:
        what = (f"{t['ms'] * 1e3:.1f}" if "ms" in t else
                "mismatch" if "mismatch" in t else f"error ({_short(t.get('error', '?'), 40)})")
        parts.append(f"{t['config']}{'*' if t['config'] == choice['config'] else ''} {what}")
    return "; ".join(parts)


def write_outputs(out_dir: str, header: list[str], results: list[dict]) -> str:
    """Write bench_ml.json and bench_ml.md; returns the markdown."""
    text = markdown(header, results)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "bench_ml.json"), "w") as f:
        json.dump({"header": header, "results": results}, f, indent=1, default=str)
    with open(os.path.join(out_dir, "bench_ml.md"), "w") as f:
        f.write(text)
    return text


def summary(result: dict) -> str:
    """One progress line for a finished case."""
    parts = []
    for name in IMPLS:
        cell = result["impls"].get(name)
        parts.append(f"{name} {fmt_time(cell)}")
    r = ratio(result)
    if r is not None:
        parts.append(f"kaio/best {r:.2f}x")
    if result.get("error"):
        parts.append(f"error: {_short(result['error'], 120)}")
    return "; ".join(parts)


# --- command line ------------------------------------------------------------------------------
def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="kaio bench --ml",
                                 description="kaio's ML ops vs Triton vs torch eager, with GB/s "
                                             "against the device copy bandwidth")
    ap.add_argument("--quick", action="store_true",
                    help="one shape per op (4096x8192 rows, 2^24 elements), f32 and f16")
    ap.add_argument("--ops", type=_csv, default=None, help=f"comma-separated, from {','.join(OPS)}")
    ap.add_argument("--dtypes", type=_csv, default=None, help="comma-separated, from f32,f16,bf16")
    ap.add_argument("--out", default=os.environ.get("OUT", "."),
                    help="folder for bench_ml.json and bench_ml.md (default: $OUT or .)")
    ap.add_argument("--reps", type=int, default=20, help="back-to-back calls per timing (20)")
    ap.add_argument("--rounds", type=int, default=5, help="timings per measurement; the median (5)")
    ap.add_argument("--autotune", choices=("fresh", "cached"), default="fresh",
                    help="the row ops' autotuner: tune each shape again (fresh, the default) or "
                         "use winners already cached (cached)")
    ap.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                    help="start no case after this many seconds (they are listed as skipped)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        cases = enumerate_cases(args.ops, args.dtypes, args.quick)
    except ValueError as e:
        print(f"kaio bench --ml: {e}", file=sys.stderr)
        return 2
    try:
        import torch
        import triton  # noqa: F401  (only checked here; benchmarks/triton_ml.py uses it)
    except ImportError as e:
        print(f"kaio bench --ml needs an NVIDIA GPU with PyTorch and Triton installed: {e}",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("kaio bench --ml: torch sees no CUDA device", file=sys.stderr)
        return 2
    import ml_runner  # lazy: imports torch, Triton and kaio's CUDA backend

    env = ml_runner.Env(reps=args.reps, rounds=args.rounds, autotune=args.autotune)
    header = env.header() + [f"command: kaio bench --ml {' '.join(argv or sys.argv[1:])}".rstrip()]
    results = run_table(cases, lambda case: ml_runner.run_case(case, env), args.out, header,
                        args.time_limit)
    print(write_outputs(args.out, header, results))
    return 0


def run_table(cases, run_case, out_dir: str, header: list[str], time_limit=None,
              clock=time.monotonic) -> list[dict]:
    """Run ``run_case`` on each case in turn, printing a progress line and rewriting the outputs
    after each; cases that would start past ``time_limit`` seconds are recorded as skipped."""
    from kaio.progress import progress
    results = []
    start = clock()
    with progress("kaio bench --ml", total=len(cases)) as bar:
        for i, case in enumerate(cases):
            bar.label(f"{case.op} {case.dtype} {case.label}")
            if time_limit is not None and clock() - start > time_limit:
                result = new_result(case)
                result["error"] = f"skipped: past --time-limit {time_limit:g} s"
            else:
                result = run_case(case)
            results.append(result)
            print(f"[{i + 1}/{len(cases)} {clock() - start:6.1f}s] {case.op} {case.dtype} "
                  f"{case.label}: {summary(result)}", flush=True)
            write_outputs(out_dir, header, results)
            bar.advance()
    return results


if __name__ == "__main__":
    sys.exit(main())
