"""Backward (gradient) kernels of the ML ops, written in kaio: RMSNorm, LayerNorm, softmax,
SiLU-gate and both GELUs.

Given the upstream gradient ``g`` of an op's output, each computes the gradients of its inputs:

- row ops, one block per row (``rows_per_block``, as the forward kernels): softmax
  ``dx = y * (g - sum(g * y))``; RMSNorm ``dx = r (g w) - x r^3 mean(g w x)`` with
  ``r = 1 / rms``; LayerNorm ``dx = r (g w - mean(g w) - xh mean(g w xh))``, ``xh = (x - mean) r``.
  The norms' kernels also write each row's statistics (``per_block()``: thread 0 of the row's
  block), which the weight gradients read;
- weight and bias gradients sum over rows: a first kernel sums chunks of :data:`CHUNK_ROWS` rows
  per column (one thread per (chunk, column), so enough threads for a GPU and coalesced loads),
  a second sums the chunks per column -- a fixed order, so results never depend on scheduling
  (no atomics);
- elementwise: SiLU-gate ``dx = g gate s (1 + x (1 - s))``, ``dgate = g x s`` (s = sigmoid x);
  exact GELU ``dx = g (Phi(x) + x phi(x))``; tanh GELU through ``s = sigmoid(2u)``, the same
  cancellation-free form as its forward: ``dx = g (s + 2 x s (1 - s) u'(x))``.

Activations are f32, f16, bf16 or f64; math is f32 (f64 for f64 arrays, so torch's gradcheck can
run in f64). The host entry points take and return numpy arrays; the ``*_into`` launchers take
any arrays a kaio kernel takes (numpy, device arrays, torch tensors) and a stream, for
:mod:`kaio.kernels.ml.torch_ops`. Each op has a float64 numpy reference (``*_ref``).
"""
import functools

import numpy as np

import kaio
from kaio import regions

from .._launch import BLOCK, acc_dtype, cdiv, kdtype
from .elementwise import INV_SQRT_2, SQRT_2_OVER_PI, _erf64, _name

INV_SQRT_2PI = 0.3989422804014327  # 1/sqrt(2 pi)
GELU_C = 0.044715
#: rows summed per (chunk, column) thread by the weight-gradient kernels
CHUNK_ROWS = 32


# --- row ops -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def softmax_backward_kernel(dt: str):
    """dx[r, c] = y[r, c] * (g[r, c] - sum_c g[r, c] y[r, c]), from the forward's output y."""
    T, C = kdtype(dt), acc_dtype(dt)

    @kaio.kernel
    def softmax_backward(y: kaio.In[T, 2], g: kaio.In[T, 2], dx: kaio.Out[T, regions.rows_per_block()]):
        row = kaio.block_idx.x
        s = C(0.0)
        for c in range(kaio.thread_idx.x, y.shape[1], kaio.block_dim.x):
            s += C(g[row, c]) * C(y[row, c])
        dot = kaio.block_sum(s)
        for r, c in dx.owned():
            dx[r, c] = T(C(y[r, c]) * (C(g[r, c]) - dot))

    return softmax_backward


@functools.lru_cache(maxsize=None)
def rmsnorm_backward_kernel(dt: str):
    """dx of RMSNorm, and each row's r = 1 / sqrt(mean(x^2) + eps) into ``rstd`` (for dw)."""
    T, C = kdtype(dt), acc_dtype(dt)

    @kaio.kernel
    def rmsnorm_backward(x: kaio.In[T, 2], w: kaio.In[T], g: kaio.In[T, 2],
                         dx: kaio.Out[T, regions.rows_per_block()],
                         rstd: kaio.Out[C, regions.per_block()], eps: C):
        row = kaio.block_idx.x
        n = x.shape[1]
        ss = C(0.0)
        gwx = C(0.0)
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            v = C(x[row, c])
            ss += v * v
            gwx += C(g[row, c]) * C(w[c]) * v
        r = 1.0 / kaio.math.sqrt(kaio.block_sum(ss) / C(n) + eps)
        coef = kaio.block_sum(gwx) * r * r * r / C(n)
        for i, c in dx.owned():
            dx[i, c] = T(r * C(g[i, c]) * C(w[c]) - C(x[i, c]) * coef)
        if kaio.thread_idx.x == 0:
            rstd[row] = r

    return rmsnorm_backward


@functools.lru_cache(maxsize=None)
def layernorm_backward_kernel(dt: str):
    """dx of LayerNorm, and each row's mean and 1 / std into ``mean`` / ``rstd`` (for dw)."""
    T, C = kdtype(dt), acc_dtype(dt)

    @kaio.kernel
    def layernorm_backward(x: kaio.In[T, 2], w: kaio.In[T], g: kaio.In[T, 2],
                           dx: kaio.Out[T, regions.rows_per_block()],
                           mean: kaio.Out[C, regions.per_block()],
                           rstd: kaio.Out[C, regions.per_block()], eps: C):
        row = kaio.block_idx.x
        n = x.shape[1]
        s = C(0.0)
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            s += C(x[row, c])
        mu = kaio.block_sum(s) / C(n)
        ss = C(0.0)  # centred second pass, as the forward: no cancellation in the variance
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            d = C(x[row, c]) - mu
            ss += d * d
        r = 1.0 / kaio.math.sqrt(kaio.block_sum(ss) / C(n) + eps)
        a = C(0.0)
        b = C(0.0)
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            gw = C(g[row, c]) * C(w[c])
            a += gw
            b += gw * (C(x[row, c]) - mu) * r
        mean_gw = kaio.block_sum(a) / C(n)
        mean_gwx = kaio.block_sum(b) / C(n)
        for i, c in dx.owned():
            xh = (C(x[i, c]) - mu) * r
            dx[i, c] = T(r * (C(g[i, c]) * C(w[c]) - mean_gw - xh * mean_gwx))
        if kaio.thread_idx.x == 0:
            mean[row] = mu
            rstd[row] = r

    return layernorm_backward


@functools.lru_cache(maxsize=None)
def param_partial_kernel(dt: str):
    """Per chunk of CHUNK_ROWS rows and column: p[0, k, c] = sum g (x - mean) rstd (the weight's
    gradient; ``CENTER`` False: no mean, for RMSNorm, which passes any array as ``mean``) and,
    when p has two planes, p[1, k, c] = sum g (the bias')."""
    T, C = kdtype(dt), acc_dtype(dt)

    @kaio.kernel
    def param_partial(x: kaio.In[T, 2], g: kaio.In[T, 2], mean: kaio.In[C], rstd: kaio.In[C],
                      p: kaio.Out[C, 3], CENTER: kaio.Const[bool]):
        rows = x.shape[0]
        for s, k, c in p.owned():
            acc = C(0.0)
            for r in range(k * CHUNK_ROWS, kaio.math.min(k * CHUNK_ROWS + CHUNK_ROWS, rows)):
                if s == 0:
                    v = C(x[r, c])
                    if CENTER:
                        v = v - mean[r]
                    acc += C(g[r, c]) * v * rstd[r]
                else:
                    acc += C(g[r, c])
            p[s, k, c] = acc

    return param_partial


@functools.lru_cache(maxsize=None)
def column_sum_kernel(dt: str, out_dt: str):
    """out[s, c] = sum_k p[s, k, c]: the chunks' partial sums, in chunk order."""
    C, OT = kdtype(dt), kdtype(out_dt)

    @kaio.kernel
    def column_sum(p: kaio.In[C, 3], out: kaio.Out[OT, 2]):
        for s, c in out.owned():
            acc = C(0.0)
            for k in range(p.shape[1]):
                acc += p[s, k, c]
            out[s, c] = OT(acc)

    return column_sum


# --- elementwise -------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def silu_gate_backward_kernel(dt: str):
    """dx = g * gate * s * (1 + x (1 - s)) and dgate = g * x * s, s = sigmoid(x)."""
    T, C = kdtype(dt), acc_dtype(dt)

    @kaio.kernel
    def silu_gate_backward(x: kaio.In[T], gate: kaio.In[T], g: kaio.In[T], dx: kaio.Out[T],
                           dgate: kaio.Out[T]):
        for i in dx.owned():
            v = C(x[i])
            gv = C(g[i])
            s = 1.0 / (1.0 + kaio.math.exp(-v))
            dx[i] = T(gv * C(gate[i]) * s * (1.0 + v * (1.0 - s)))
            dgate[i] = T(gv * v * s)

    return silu_gate_backward


@functools.lru_cache(maxsize=None)
def gelu_exact_backward_kernel(dt: str):
    """dx = g * (Phi(x) + x * phi(x)): the normal CDF and density."""
    T, C = kdtype(dt), acc_dtype(dt)

    @kaio.kernel
    def gelu_exact_backward(x: kaio.In[T], g: kaio.In[T], dx: kaio.Out[T]):
        for i in dx.owned():
            v = C(x[i])
            cdf = 0.5 * (1.0 + kaio.math.erf(v * INV_SQRT_2))
            pdf = INV_SQRT_2PI * kaio.math.exp(-0.5 * v * v)
            dx[i] = T(C(g[i]) * (cdf + v * pdf))

    return gelu_exact_backward


@functools.lru_cache(maxsize=None)
def gelu_tanh_backward_kernel(dt: str):
    """dx = g * (s + 2 x s (1 - s) u'), s = sigmoid(2u) = (1 + tanh u) / 2,
    u = sqrt(2/pi) (x + 0.044715 x^3), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)."""
    T, C = kdtype(dt), acc_dtype(dt)

    @kaio.kernel
    def gelu_tanh_backward(x: kaio.In[T], g: kaio.In[T], dx: kaio.Out[T]):
        for i in dx.owned():
            v = C(x[i])
            u = SQRT_2_OVER_PI * (v + GELU_C * v * v * v)
            du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * v * v)
            e = kaio.math.exp(-2.0 * u)
            s = 1.0 / (1.0 + e)
            dx[i] = T(C(g[i]) * (s + 2.0 * v * s * (s * e) * du))  # 1 - s = s e, no cancellation

    return gelu_tanh_backward


# --- launchers: any arrays a kernel takes, on a stream -----------------------------------------
def _rows_launch(kernel, rows: int, stream):
    return kernel[(rows,), (BLOCK,), 0, stream]


def softmax_backward_into(dt: str, y, g, dx, stream=None) -> None:
    """dx of softmax from its output ``y`` and the gradient ``g`` (2-D, C-contiguous)."""
    _rows_launch(softmax_backward_kernel(dt), y.shape[0], stream)(y, g, dx)


def _param_grads(dt: str, x, g, mean, rstd, out, new, stream) -> None:
    """Sum g (x - mean) rstd (g x rstd when ``mean`` is None; and g, when ``out`` has two rows)
    over the rows into ``out`` [1 or 2, cols]; ``new(shape)`` allocates an accumulator-dtype
    temporary."""
    rows, cols = x.shape
    part = new((out.shape[0], max(1, cdiv(rows, CHUNK_ROWS)), cols))
    param_partial_kernel(dt).on(stream)(x, g, rstd if mean is None else mean, rstd, part,
                                        CENTER=mean is not None)
    column_sum_kernel(_acc_name(dt), dt).on(stream)(part, out)


def rmsnorm_backward_into(dt: str, x, w, g, eps: float, dx, dw, new, stream=None) -> None:
    """dx [rows, cols] and dw [1, cols] of RMSNorm; ``new(shape)`` allocates accumulator-dtype
    temporaries (numpy, torch ... as the caller's arrays)."""
    rows = x.shape[0]
    rstd = new((rows,))
    _rows_launch(rmsnorm_backward_kernel(dt), rows, stream)(x, w, g, dx, rstd, float(eps))
    _param_grads(dt, x, g, None, rstd, dw, new, stream)


def layernorm_backward_into(dt: str, x, w, g, eps: float, dx, dwb, new, stream=None) -> None:
    """dx [rows, cols] and dw, db stacked as ``dwb`` [2, cols] of LayerNorm."""
    rows = x.shape[0]
    mean, rstd = new((rows,)), new((rows,))
    _rows_launch(layernorm_backward_kernel(dt), rows, stream)(x, w, g, dx, mean, rstd, float(eps))
    _param_grads(dt, x, g, mean, rstd, dwb, new, stream)


def silu_gate_backward_into(dt: str, x, gate, g, dx, dgate, stream=None) -> None:
    """dx and dgate of the SiLU-gate (1-D, same length)."""
    silu_gate_backward_kernel(dt).on(stream)(x, gate, g, dx, dgate)


def gelu_backward_into(dt: str, x, g, dx, approximate: str = "none", stream=None) -> None:
    """dx of GELU (exact, or ``approximate='tanh'``), 1-D arrays."""
    k = gelu_tanh_backward_kernel(dt) if approximate == "tanh" else gelu_exact_backward_kernel(dt)
    k.on(stream)(x, g, dx)


def _acc_name(dt: str) -> str:
    return "f64" if dt == "f64" else "f32"


# --- host entry points (numpy) -----------------------------------------------------------------
def _new_np(dt: str):
    acc = kdtype(_acc_name(dt)).storage_np
    return lambda shape: np.empty(shape, acc)


def softmax_backward(y: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Gradient of :func:`softmax`'s input, from its output ``y`` and the output gradient ``g``."""
    dx = np.empty_like(y)
    softmax_backward_into(_name(y), y, g, dx)
    return dx


def rmsnorm_backward(x, w, g, eps: float = 1e-6):
    """(dx, dw) of :func:`rmsnorm`."""
    dt = _name(x)
    dx, dw = np.empty_like(x), np.empty((1, x.shape[1]), w.dtype)
    rmsnorm_backward_into(dt, x, w, g, eps, dx, dw, _new_np(dt))
    return dx, dw[0]


def layernorm_backward(x, w, g, eps: float = 1e-5):
    """(dx, dw, db) of :func:`layernorm` (db does not depend on b)."""
    dt = _name(x)
    dx, dwb = np.empty_like(x), np.empty((2, x.shape[1]), w.dtype)
    layernorm_backward_into(dt, x, w, g, eps, dx, dwb, _new_np(dt))
    return dx, dwb[0], dwb[1]


def silu_gate_backward(x, gate, g):
    """(dx, dgate) of :func:`silu_gate` (any shape)."""
    dx, dgate = np.empty_like(x), np.empty_like(x)
    silu_gate_backward_into(_name(x), x.ravel(), gate.ravel(), g.ravel(), dx.reshape(-1),
                            dgate.reshape(-1))
    return dx, dgate


def gelu_backward(x, g, approximate: str = "none"):
    """dx of :func:`gelu` (any shape)."""
    dx = np.empty_like(x)
    gelu_backward_into(_name(x), x.ravel(), g.ravel(), dx.reshape(-1), approximate)
    return dx


# --- references (float64) ----------------------------------------------------------------------
def _f64(*arrays):
    return [np.asarray(a, np.float64) for a in arrays]


def softmax_backward_ref(y, g):
    y, g = _f64(y, g)
    return y * (g - (g * y).sum(axis=1, keepdims=True))


def rmsnorm_backward_ref(x, w, g, eps):
    x, w, g = _f64(x, w, g)
    r = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    gw = g * w
    dx = r * gw - x * r ** 3 * (gw * x).mean(axis=1, keepdims=True)
    return dx, (g * x * r).sum(axis=0)


def layernorm_backward_ref(x, w, g, eps):
    x, w, g = _f64(x, w, g)
    mu = x.mean(axis=1, keepdims=True)
    r = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + eps)
    xh = (x - mu) * r
    gw = g * w
    dx = r * (gw - gw.mean(axis=1, keepdims=True) - xh * (gw * xh).mean(axis=1, keepdims=True))
    return dx, (g * xh).sum(axis=0), g.sum(axis=0)


def silu_gate_backward_ref(x, gate, g):
    x, gate, g = _f64(x, gate, g)
    s = 1.0 / (1.0 + np.exp(-x))
    return g * gate * s * (1.0 + x * (1.0 - s)), g * x * s


def gelu_exact_backward_ref(x, g):
    x, g = _f64(x, g)
    return g * (0.5 * (1.0 + _erf64(x * INV_SQRT_2)) + x * INV_SQRT_2PI * np.exp(-0.5 * x * x))


def gelu_tanh_backward_ref(x, g):
    x, g = _f64(x, g)
    t = np.tanh(SQRT_2_OVER_PI * (x + GELU_C * x ** 3))
    du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * x * x)
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)
