"""Why GELU trails Triton where it does: the library kernels against variants that change one
thing each, side by side with Triton, at 2^24 and 2^28 elements.

    python3 benchmarks/gelu_sweep.py [--sizes 24,28]

Variants (every one computes the library's formula in f32 and rounds once):
- ``library``: kaio.kernels.ml's kernel as launched (kaio's automatic coarsening, 8 per thread);
- ``blocked(k)``: the same body with k elements per thread stated in the Region;
- ``ex2(x log2e)``: tanh-GELU's exp as Triton writes it, the hardware exp2 on x log2 e without
  kaio's range reduction (larger error for large |x|; here only to price the reduction);
- ``exact, blocked(k)``: the library's exact form with k per thread (f32: the erf; f16: the
  one-exponential form of kernels/ml/gelu16.py), and for f16 ``blocked(16), erf form``, the
  erf form the 16-bit kernels used before.
"""
import argparse
import sys

import kaio
import kaio.kernels.ml.gelu16 as gelu16
from kaio import regions
from kaio.kernels.ml import elementwise as E

LOG2E = 1.4426950408889634
KS = (2, 4, 8, 16)


def tanh_kernel(T, k, hw_exp2=False):
    @kaio.kernel(fast_math=True)
    def gelu_tanh_k(x: kaio.In[T], y: kaio.Out[T, regions.blocked(k)]):
        for i in y.owned():
            v = kaio.f32(x[i])
            inner = E.SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)
            if hw_exp2:
                e = kaio.math.exp2(-2.0 * LOG2E * inner, fast=True)
            else:
                e = kaio.math.exp(-2.0 * inner)
            y[i] = T(v / (1.0 + e))
    return gelu_tanh_k


def exact_kernel(T, k, dt, erf_form=False):
    narrow = E.narrow(dt) and not erf_form
    amax, lcoeffs = gelu16.L_FITS[dt] if narrow else (0.0, ())

    @kaio.kernel
    def gelu_exact_k(x: kaio.In[T], y: kaio.Out[T, regions.blocked(k)]):
        for i in y.owned():
            v = kaio.f32(x[i])
            if narrow:
                y[i] = T(gelu16.gelu16(v, amax, lcoeffs))
            else:
                y[i] = T(0.5 * v * (1.0 + kaio.math.erf(v * E.INV_SQRT_2)))
    return gelu_exact_k


def sweep(e, dt, torch, triton_ml, timed):
    """Every variant of both GELUs at 2^e elements of dtype dt, with Triton and a torch copy."""
    n = 1 << e
    T = E.kdtype(dt)
    xt = torch.randn(n, device="cuda", dtype={"f32": torch.float32, "f16": torch.float16}[dt])
    yt = torch.empty_like(xt)
    x, y = kaio.from_dlpack(xt), kaio.from_dlpack(yt)
    nbytes = 2 * n * xt.element_size()

    def row(op, name, fn):
        us = timed(fn, reps=10, rounds=5) * 1e3
        print(f"| {op} | {dt} | 2^{e} | {name} | {us:.1f} | {nbytes / us / 1e3:.0f} |", flush=True)

    def kaio_row(op, name, kern):
        row(op, name, lambda: kern(x, y))

    kaio_row("gelu_tanh", "library", E.gelu_tanh_kernel(dt))
    for k in KS:
        kaio_row("gelu_tanh", f"blocked({k})", tanh_kernel(T, k))
    kaio_row("gelu_tanh", "blocked(8), ex2(x log2e)", tanh_kernel(T, 8, True))
    row("gelu_tanh", "Triton", lambda: triton_ml.gelu_tanh(xt, yt))
    kaio_row("gelu_exact", "library", E.gelu_exact_kernel(dt))
    for k in KS:
        kaio_row("gelu_exact", f"blocked({k})", exact_kernel(T, k, dt))
    if E.narrow(dt):
        kaio_row("gelu_exact", "blocked(16), erf form", exact_kernel(T, 16, dt, True))
    row("gelu_exact", "Triton", lambda: triton_ml.gelu_exact(xt, yt))
    row("copy", "torch", lambda: yt.copy_(xt))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gelu_sweep.py", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="24,28", help="log2 of the element counts")
    args = p.parse_args(argv)
    kaio.set_backend("cuda")
    import torch
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import triton_ml
    from bench_gpu import timed

    print("| op | dtype | n | variant | us | GB/s |")
    print("|---|---|---|---|---|---|")
    for e in (int(s) for s in args.sizes.split(",")):
        for dt in ("f32", "f16"):
            sweep(e, dt, torch, triton_ml, timed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
