"""kaio's torch custom ops against torch's own ops on a GPU: forward, and forward + backward.

    python benchmarks/torch_ops_bench.py [--out DIR] [--rows 4096 --cols 8192] [--dtypes bf16,f32]

Times each op (``torch.ops.kaio.*`` vs the torch expression the tests compare with) with CUDA
events on torch's current stream, median of several rounds, and writes torch_ops.md (and prints
it). Needs torch with CUDA and kaio's cuda backend.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_gemm import _time  # CUDA-event timing: median microseconds per call (sibling script)


def _ops(T, F):
    return {
        "rmsnorm": (lambda x, w, b, g: T.rmsnorm(x, w, 1e-6),
                    lambda x, w, b, g: F.rms_norm(x, x.shape[-1:], w, 1e-6)),
        "layernorm": (lambda x, w, b, g: T.layernorm(x, w, b, 1e-5),
                      lambda x, w, b, g: F.layer_norm(x, x.shape[-1:], w, b, 1e-5)),
        "softmax": (lambda x, w, b, g: T.softmax(x), lambda x, w, b, g: x.softmax(-1)),
        "silu_gate": (lambda x, w, b, g: T.silu_gate(x, g), lambda x, w, b, g: F.silu(x) * g),
        "gelu_tanh": (lambda x, w, b, g: T.gelu(x, "tanh"),
                      lambda x, w, b, g: F.gelu(x, approximate="tanh")),
        "gelu_exact": (lambda x, w, b, g: T.gelu(x), lambda x, w, b, g: F.gelu(x)),
    }


def _cells(torch, fns, args, up) -> list[str]:
    """Forward times (no grad) of kaio's op and torch's, then forward + backward times."""
    out = []
    for f in fns:
        with torch.no_grad():
            out.append(f"{_time(lambda f=f: f(*args), 20, 5):.1f}")
    for f in fns:
        out.append(f"{_time(lambda f=f: f(*args).backward(up), 20, 5):.1f}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="kaio torch ops vs torch's own ops (forward, fwd+bwd)")
    p.add_argument("--out", default=None, help="folder for torch_ops.md")
    p.add_argument("--rows", type=int, default=4096, help="rows (default 4096)")
    p.add_argument("--cols", type=int, default=8192, help="columns (default 8192)")
    p.add_argument("--dtypes", default="bf16,f32", help="comma-separated: f32, f16, bf16")
    args = p.parse_args(argv)
    import torch

    import kaio
    from kaio.kernels.ml import torch_ops as T
    if not torch.cuda.is_available():
        print("torch_ops_bench needs a CUDA device", file=sys.stderr)
        return 2
    kaio.set_backend("cuda")
    F = torch.nn.functional
    dts = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    lines = [f"# kaio torch ops vs torch, {args.rows} x {args.cols}, {torch.cuda.get_device_name()}",
             "", "| op | dtype | kaio fwd us | torch fwd us | kaio fwd+bwd us | torch fwd+bwd us |",
             "|---|---|---|---|---|---|"]
    for name in args.dtypes.split(","):
        dt = dts[name]
        x = torch.randn(args.rows, args.cols, device="cuda", dtype=dt, requires_grad=True)
        g = torch.randn_like(x, requires_grad=True)
        w = torch.rand(args.cols, device="cuda", dtype=dt, requires_grad=True)
        b = torch.randn(args.cols, device="cuda", dtype=dt, requires_grad=True)
        up = torch.randn_like(x)
        for op, fns in _ops(T, F).items():
            lines.append("| " + " | ".join([op, name, *_cells(torch, fns, (x, w, b, g), up)]) + " |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "torch_ops.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
