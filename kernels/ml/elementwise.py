"""Elementwise activations: fused SiLU-gate, exact GELU (erf) and tanh-approximated GELU.

Inputs and outputs may be f32, f16 or bf16; every kernel loads into f32, computes in f32 and
rounds once when it stores. The f32 SiLU-gate and tanh-GELU give each thread four neighbouring elements
(``regions.blocked(4)``), so full tiles load and store 16 bytes per instruction. The others are
written one element per thread; kaio itself gives them 32 bytes per thread and buffer (8 f32 or
16 f16/bf16 neighbours) when it picks the launch (automatic coarsening, docs/regions.md), with
16-byte accesses.
SiLU and tanh-GELU are ``fast_math`` kernels: the fast exp (the hardware exp2 after an exact
range reduction, docs/mathlib.md, as Triton's ``tl.exp``) and the hardware division
(``div.full.f32``, 2 ulp), whose IEEE form dominated their cost. Exact GELU is portable (the
same bits on every target): f32 through kaio.math.erf, f16/bf16 through :mod:`.gelu16` (x Phi(x)
from one exponential, within 0.51 ulp of the 16-bit result, about half erf's operations).
"""
import functools

import numpy as np

import kaio
from kaio import regions

from .._launch import acc_dtype, kdtype, np_dtype
from .gelu16 import L_FITS as GELU16_FITS
from .gelu16 import gelu16

SQRT_2_OVER_PI = 0.7978845608028654  # sqrt(2/pi)
INV_SQRT_2 = 0.7071067811865476      # 1/sqrt(2)
LOG2E = 1.4426950408889634           # log2(e)


def _out(dt: str):
    """The output annotation of the fast-math kernels (SiLU-gate, tanh-GELU) over ``dt``: four
    f32 elements per thread (one 16-byte access per buffer), else kaio's own coarsening (16
    2-byte elements). H200 2026-12-01 (benchmarks/gelu_sweep.py), f32 tanh-GELU at 2^28 / 2^24:
    508 / 34.9 us with four per thread against 609 / 41.9 with kaio's eight (erf-GELU, whose
    body has no MUFU work, is fastest at eight: 541 vs 594 us)."""
    T = kdtype(dt)
    return kaio.Out[T, regions.blocked(4)] if dt == "f32" else kaio.Out[T]


def narrow(dt: str) -> bool:
    """Whether results of ``dt`` are 16-bit floats (f16/bf16), rounded far more coarsely than the
    f32 arithmetic that produces them."""
    return dt in ("f16", "bf16")


@kaio.func
def exp_narrow(z, scale=1.0):
    """e^(scale z) for a result rounded to f16/bf16 (``scale`` a literal, folded into log2 e at
    compile time: one multiply): the hardware exp2 of z log2 e, without the fast
    exp's range reduction. That product's rounding costs at most |z| 2^-24 ln 2 relative, < 2^-17
    wherever e^z is a normal f32 (|z| <= 88), far inside the result's half ulp (2^-12 for f16),
    and saves the reduction's 8 instructions per element: 16-bit data leaves half the time per
    element that f32 does (H200 2026-12-01, f16 tanh-GELU at 2^24: 20.5 against 23.5 us)."""
    return kaio.math.exp2(z * (scale * LOG2E), fast=True)


@functools.lru_cache(maxsize=None)
def silu_gate_kernel(dt: str):
    """y = silu(x) * gate = x * sigmoid(x) * gate, elementwise."""
    T, C = kdtype(dt), acc_dtype(dt)

    @kaio.kernel(fast_math=True)   # the fast exp and the hardware division (div.full, 2 ulp)
    def silu_gate(x: kaio.In[T], gate: kaio.In[T], y: _out(dt)):
        for i in y.owned():
            v = C(x[i])
            y[i] = T(v / (1.0 + kaio.math.exp(-v)) * C(gate[i]))

    return silu_gate


@functools.lru_cache(maxsize=None)
def gelu_exact_kernel(dt: str):
    """y = x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2))). For negative x, 1 + erf(.) cancels:
    its f32 error is up to ~1 ulp of 1 (2^-23), so y carries an absolute error up to
    ~0.5 |x| 2^-23 however small y is (as in every f32 implementation of this formula).
    f16/bf16 results take :mod:`.gelu16` instead: x Phi(x) from one exponential of the lower
    tail, no cancellation, within 0.51 ulp of the 16-bit result, about half the operations."""
    T, C = kdtype(dt), acc_dtype(dt)
    narrow_out = narrow(dt)
    amax, lcoeffs = GELU16_FITS[dt] if narrow_out else (0.0, ())

    @kaio.kernel
    def gelu_exact(x: kaio.In[T], y: kaio.Out[T]):
        for i in y.owned():
            v = C(x[i])
            if narrow_out:      # a compile-time choice
                y[i] = T(gelu16(v, amax, lcoeffs))
            else:
                y[i] = T(0.5 * v * (1.0 + kaio.math.erf(v * INV_SQRT_2)))

    return gelu_exact


@functools.lru_cache(maxsize=None)
def gelu_tanh_kernel(dt: str):
    """y = 0.5 * x * (1 + tanh(u)), u = sqrt(2/pi) * (x + 0.044715 x^3): the usual fast GELU,
    evaluated as the identical x / (1 + exp(-2u)), which avoids the cancellation in 1 + tanh(u)
    for negative x; for f16/bf16 results that exp is :func:`exp_narrow`'s."""
    T, C = kdtype(dt), acc_dtype(dt)
    narrow_out = narrow(dt)

    @kaio.kernel(fast_math=True)   # the fast exp and the hardware division (div.full, 2 ulp)
    def gelu_tanh(x: kaio.In[T], y: _out(dt)):
        for i in y.owned():
            v = C(x[i])
            inner = SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)
            if narrow_out:      # a compile-time choice
                e = exp_narrow(inner, -2.0)
            else:
                e = kaio.math.exp(-2.0 * inner)
            y[i] = T(v / (1.0 + e))

    return gelu_tanh


# --- host entry points -------------------------------------------------------------------------
def silu_gate(x: np.ndarray, gate: np.ndarray) -> np.ndarray:
    """SiLU-gate of two same-shape arrays (any shape; flattened for the kernel)."""
    dt = _name(x)
    y = np.empty_like(x)
    silu_gate_kernel(dt)(x.ravel(), gate.ravel(), y.reshape(-1))
    return y


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """GELU: exact (erf) by default, ``approximate='tanh'`` for the tanh form."""
    dt = _name(x)
    k = gelu_tanh_kernel(dt) if approximate == "tanh" else gelu_exact_kernel(dt)
    y = np.empty_like(x)
    k(x.ravel(), y.reshape(-1))
    return y


def _name(x: np.ndarray) -> str:
    for n in ("f32", "f16", "bf16", "f64"):
        if x.dtype == np_dtype(n):
            return n
    raise TypeError(f"ML ops take f32, f16, bf16 or f64 arrays, got {x.dtype}")


# --- references (float64) ----------------------------------------------------------------------
def silu_gate_ref(x, gate):
    v = x.astype(np.float64)
    return v / (1.0 + np.exp(-v)) * gate.astype(np.float64)


def _erf64(v):
    try:  # scipy is optional: fast when present, math.erf (same float64 accuracy) otherwise
        from scipy.special import erf  # lazy: scipy, optional
        return erf(v)
    except ImportError:
        from math import erf
        return np.vectorize(erf, otypes=[np.float64])(v)


def gelu_exact_ref(x):
    v = x.astype(np.float64)
    return 0.5 * v * (1.0 + _erf64(v * INV_SQRT_2))


def gelu_tanh_ref(x):
    v = x.astype(np.float64)
    return 0.5 * v * (1.0 + np.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v ** 3)))
