"""Measure the hardware exp2 (``ex2.approx.f32``) and kaio's fast exp on the GPU against float64.

    python3 scripts/measure_fast_exp.py

docs/mathlib.md states the fast exp's bound from a model of ``ex2.approx.f32``'s relative error;
this measures both on the device: exp2 over every f32 in [-1, 1) with a stride (the reduced
argument's range) and fast exp over [-103, 89) and its edges, in ulps of the f32 result.
"""
from __future__ import annotations

import numpy as np

import kaio
from kaio import f32


@kaio.kernel
def fast_exp2(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = kaio.math.exp2(x[i], fast=True)


@kaio.kernel
def fast_exp(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = kaio.math.exp(x[i], fast=True)


def ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the last place of the f32 nearest to exact (normal results)."""
    e = np.abs(exact)
    ulp = np.ldexp(1.0, (np.floor(np.log2(np.maximum(e, 2.0 ** -126))) - 23).astype(int))
    return np.abs(got.astype(np.float64) - exact) / ulp


def main() -> int:
    bits = np.arange(np.float32(2.0 ** -30).view(np.int32), np.float32(1.0).view(np.int32), 17,
                     dtype=np.int32)   # every 17th f32 in [2^-30, 1), then their negatives
    pos = bits.view(np.float32)
    x = np.concatenate([pos, -pos, np.linspace(-1, 1, 1 << 22, dtype=np.float32)])
    y = np.empty_like(x)
    fast_exp2(x, y)
    rel = np.abs(y.astype(np.float64) / np.exp2(x.astype(np.float64)) - 1)
    print(f"ex2.approx.f32 on {x.size} points in [-1, 1): max relative error {rel.max():.3e} "
          f"= 2^{np.log2(rel.max()):.2f}; max {ulps(y, np.exp2(x.astype(np.float64))).max():.2f} ulp")
    x = np.concatenate([np.linspace(-87.3, 88.7, 1 << 24, dtype=np.float32),
                        np.random.default_rng(1).uniform(-87.3, 88.7, 1 << 22).astype(np.float32)])
    y = np.empty_like(x)
    fast_exp(x, y)
    u = ulps(y, np.exp(x.astype(np.float64)))
    print(f"kaio fast exp on {x.size} points in [-87.3, 88.7]: max {u.max():.2f} ulp "
          f"(at x = {x[np.argmax(u)]!r}), mean {u.mean():.3f} ulp")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
