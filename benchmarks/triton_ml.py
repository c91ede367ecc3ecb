"""Triton versions of kaio's ML ops, the baseline of ``kaio bench --ml`` (benchmarks/bench_ml.py).

Written the way Triton's tutorials write such kernels, so the comparison is with what a Triton
user gets without tuning:

- row ops (softmax, rmsnorm, layernorm): one program per row, the whole row in registers
  (``BLOCK = next_power_of_2(cols)``), ``num_warps`` growing with ``BLOCK``;
- elementwise ops (silu_gate, gelu_tanh, gelu_exact, dequantize_int8): 1024-element blocks.

Every kernel loads its inputs, computes in f32 and stores in the output's dtype, so one kernel
serves f32, f16 and bf16 (Triton specialises on the pointer types). The launchers take torch
tensors (contiguous, on the GPU) and return what the Triton launch returns (the compiled kernel,
whose ``n_regs`` / ``n_spills`` the benchmark reports).
"""
from __future__ import annotations

import triton
import triton.language as tl

#: elements per program of the elementwise kernels
ELEMENTWISE_BLOCK = 1024
# globals a @triton.jit function reads must be constexpr
SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
INV_SQRT_2 = tl.constexpr(0.7071067811865476)


def row_warps(block: int) -> int:
    """Warps for a program holding a ``block``-wide row: 4 up to 2048 columns, then one more
    warp per 512 columns, at most 16 (the tutorials' 4 / 8 / 16 steps, made continuous)."""
    return min(16, max(4, block // 512))


# --- row ops ---------------------------------------------------------------------------------
@triton.jit
def _softmax_rows(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * cols
    col = tl.arange(0, BLOCK)
    inside = col < cols
    v = tl.load(x_ptr + base + col, mask=inside, other=float("-inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))  # masked columns: exp(-inf) = 0
    out = e / tl.sum(e, axis=0)
    tl.store(y_ptr + base + col, out.to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * cols
    col = tl.arange(0, BLOCK)
    inside = col < cols
    v = tl.load(x_ptr + base + col, mask=inside, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + col, mask=inside, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(v * v, axis=0) / cols + eps)
    tl.store(y_ptr + base + col, (v * inv_rms * w).to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _layernorm_rows(x_ptr, w_ptr, b_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * cols
    col = tl.arange(0, BLOCK)
    inside = col < cols
    v = tl.load(x_ptr + base + col, mask=inside, other=0.0).to(tl.float32)
    mean = tl.sum(v, axis=0) / cols
    centred = tl.where(inside, v - mean, 0.0)  # two passes over registers: no cancellation
    inv_std = tl.rsqrt(tl.sum(centred * centred, axis=0) / cols + eps)
    w = tl.load(w_ptr + col, mask=inside, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + col, mask=inside, other=0.0).to(tl.float32)
    tl.store(y_ptr + base + col, (centred * inv_std * w + b).to(y_ptr.dtype.element_ty), mask=inside)


# --- elementwise -----------------------------------------------------------------------------
@triton.jit
def _silu_gate(x_ptr, g_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    v = tl.load(x_ptr + i, mask=inside, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + i, mask=inside, other=0.0).to(tl.float32)
    tl.store(y_ptr + i, (v / (1.0 + tl.exp(-v)) * g).to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _gelu_tanh(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    v = tl.load(x_ptr + i, mask=inside, other=0.0).to(tl.float32)
    u = SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)
    # 0.5 v (1 + tanh u) == v / (1 + exp(-2u)): the same formula as kaio's kernel
    tl.store(y_ptr + i, (v / (1.0 + tl.exp(-2.0 * u))).to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _gelu_exact(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    v = tl.load(x_ptr + i, mask=inside, other=0.0).to(tl.float32)
    out = 0.5 * v * (1.0 + tl.erf(v * INV_SQRT_2))
    tl.store(y_ptr + i, out.to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _dequantize_int8(q_ptr, s_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    # grid (rows, column blocks): the row's scale is one scalar load per program
    row = tl.program_id(0).to(tl.int64)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = col < cols
    q = tl.load(q_ptr + row * cols + col, mask=inside, other=0).to(tl.float32)
    s = tl.load(s_ptr + row)
    tl.store(y_ptr + row * cols + col, (q * s).to(y_ptr.dtype.element_ty), mask=inside)


# --- launchers (torch tensors) ---------------------------------------------------------------
def _row_launch(kernel, x, *args):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    return kernel[(rows,)](x, *args, BLOCK=block, num_warps=row_warps(block))


def softmax(x, y):
    rows, cols = x.shape
    return _row_launch(_softmax_rows, x, y, cols)


def rmsnorm(x, w, y, eps):
    return _row_launch(_rmsnorm_rows, x, w, y, x.shape[1], eps)


def layernorm(x, w, b, y, eps):
    return _row_launch(_layernorm_rows, x, w, b, y, x.shape[1], eps)


def _flat_grid(n: int):
    return (triton.cdiv(n, ELEMENTWISE_BLOCK),)


def silu_gate(x, gate, y):
    n = x.numel()
    return _silu_gate[_flat_grid(n)](x, gate, y, n, BLOCK=ELEMENTWISE_BLOCK)


def gelu_tanh(x, y):
    n = x.numel()
    return _gelu_tanh[_flat_grid(n)](x, y, n, BLOCK=ELEMENTWISE_BLOCK)


def gelu_exact(x, y):
    n = x.numel()
    return _gelu_exact[_flat_grid(n)](x, y, n, BLOCK=ELEMENTWISE_BLOCK)


def dequantize_int8(q, scale, y):
    rows, cols = q.shape
    grid = (rows, triton.cdiv(cols, ELEMENTWISE_BLOCK))
    return _dequantize_int8[grid](q, scale, y, cols, BLOCK=ELEMENTWISE_BLOCK)


#: the raw kernels with the argument types they take, for compiling without a GPU (tests)
KERNELS = {
    "softmax": (_softmax_rows, ("*T", "*T", "i32")),
    "rmsnorm": (_rmsnorm_rows, ("*T", "*T", "*T", "i32", "fp32")),
    "layernorm": (_layernorm_rows, ("*T", "*T", "*T", "*T", "i32", "fp32")),
    "silu_gate": (_silu_gate, ("*T", "*T", "*T", "i32")),
    "gelu_tanh": (_gelu_tanh, ("*T", "*T", "i32")),
    "gelu_exact": (_gelu_exact, ("*T", "*T", "i32")),
    "dequantize_int8": (_dequantize_int8, ("*i8", "*fp32", "*T", "i32")),
}
