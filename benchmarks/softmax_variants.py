"""Row softmax code-generation variants on one GPU, side by side (an experiment, not a gate).

    python3 benchmarks/softmax_variants.py [--out DIR]

Builds the library's register-resident softmax (kaio.kernels.ml.norms, what ``ml.softmax`` and
bench_gpu.py's "kaio" run) at three launch shapes, with its register cap and without, plus the
three-pass kernel, through the normal compile path (each cap is a compile option, so the cache
keeps the variants apart), and times each on 4096 x 8192 f32 rows against torch.softmax's
result: the measurements behind ``norms.resident_plan``.
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    import torch
    from bench_gpu import timed
    from kaio_bench_kernels import softmax_rows

    import kaio
    from kaio.kernels.ml import norms
    from kaio.launch import KernelFunction

    be = kaio.get_backend("cuda")
    rows, cols = 4096, 8192
    x = torch.randn(rows, cols, device="cuda")
    y = torch.empty_like(x)
    want = torch.softmax(x, dim=1)

    def build(kernel, consts, cap):
        variant = KernelFunction(kernel.fn, fast_math=kernel.fast_math, max_registers=cap)
        return variant.compile(be, **consts).handle

    variants = []
    for threads, per in ((1024, 8), (512, 16), (256, 32)):
        for cap in (norms.RESIDENT_REGS, None):
            lk = build(norms.softmax_resident_kernel("f32", "f32"), {"PER": per}, cap)
            variants.append((f"resident {threads}x{per} cap={cap}", lk, threads))
    variants.append(("three-pass 1024", build(softmax_rows, {}, None), 1024))
    lines = ["| variant | ms | GB/s | max err |", "|---|---|---|---|"]
    for name, lk, threads in variants:
        vals = [x.data_ptr(), rows, cols, y.data_ptr(), rows, cols]

        def run(lk=lk, threads=threads, vals=vals):
            lk.launch((rows, 1, 1), (threads, 1, 1), 0, 0, vals)
        y.zero_()
        run()
        torch.cuda.synchronize()
        err = float((y - want).abs().max())
        ms = timed(run)
        lines.append(f"| {name} | {ms:.4f} | {8 * rows * cols / ms / 1e6:.0f} | {err:.1e} |")
    text = "\n".join(lines)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "softmax_variants.md"), "w") as f:
        f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
