"""The benchmark's kaio kernels (benchmarks/kaio_bench_kernels.py) compute what they claim, at
small sizes on every available backend (the GPU benchmark only reports their error)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import kaio_bench_kernels as kk  # noqa: E402


def _softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("n", [7, 64, 1000])
def test_saxpy_kernels(backend, n):
    r = np.random.default_rng(n)
    x, y0 = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    want = (np.float32(2.0) * x + y0).astype(np.float32)
    for k in (kk.saxpy, kk.saxpy8):
        y = y0.copy()
        k(2.0, x, y)
        assert np.array_equal(y, want), k.name


def test_softmax_kernels(backend):
    rows, cols = 3, 512
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32) * 3
    want = _softmax(x)
    runs = {
        "three-pass": lambda y: kk.softmax_rows[(rows,), (128,)](x, y),
        "resident": lambda y: kk.softmax_rows_resident[(rows,), (128,)](x, y, PER=4),
    }
    for name, run in runs.items():
        y = np.zeros_like(x)
        run(y)
        np.testing.assert_allclose(y, want, rtol=2e-5, atol=1e-9, err_msg=name)   # fast exp


@pytest.mark.parametrize("n", [5, 4096, 5001])
def test_dot_kernels(backend, n):
    r = np.random.default_rng(n)
    x, y = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    want = float(x.astype(np.float64) @ y)
    for k in (kk.dot_partials, kk.dot_partials8):
        part = np.zeros((4, 1), np.float32)
        k[(4,), (64,)](x, y, part)
        assert abs(float(part.astype(np.float64).sum()) - want) <= 1e-5 * np.abs(x * y).sum(), k.name


@pytest.mark.parametrize("shape", [(64, 96), (37, 70)])
def test_classic_kernels(backend, shape):
    """The transpose, both stencils and the histogram of issue 13's classics, launched as
    benchmarks/bench_gpu.py launches them (grids rounded up at ragged shapes)."""
    r = np.random.default_rng(shape[0])
    x = r.standard_normal(shape).astype(np.float32)
    rows, cols = shape
    y = np.zeros((cols, rows), np.float32)
    kk.transpose32[(-(-cols // 32), -(-rows // 32)), (32, 8)](x, y)
    assert np.array_equal(y, x.T)
    want = x.copy()
    want[1:-1, 1:-1] = (np.float32(0.25) * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
                        - x[1:-1, 1:-1])
    for k in (kk.stencil5, kk.stencil5_owned):
        y = np.zeros_like(x)
        k[(-(-cols // 32), -(-rows // 8)), (32, 8)](x, y)
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6, err_msg=k.name)
    data = r.integers(0, 256, rows * cols).astype(np.int32)
    hist = np.zeros(256, np.int32)
    kk.histogram256[(3,), (64,)](data, hist)
    assert np.array_equal(hist, np.bincount(data, minlength=256))
