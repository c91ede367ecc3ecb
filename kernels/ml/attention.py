"""Quantized attention: INT8 Q/K/V projections feeding scaled dot-product attention.

    xq, sx = quantize_rows(x)                     # per-token symmetric int8
    Q = W8A8(xq, Wq) ; K = W8A8(xq, Wk) ; V = W8A8(xq, Wv)   # int32 accumulate, f32 out
    P = softmax(Q K^T / sqrt(d) [+ causal mask])  # one block per query row
    O = P V                                       # f32

Q K^T and P V run on f16 tensor cores with split operands (:mod:`.attention_mma`) where the
backend compiles them; otherwise the softmax kernel computes the dot products itself and P V
takes the tiled f32 kernel.

Single head; batch and heads are independent and map to more launches (or more rows).
"""
import numpy as np

import kaio
from kaio import f32, regions

from .._bench import empty
from ..rajaperf._tiled import tiled_launcher
from . import attention_mma
from .quant import (
    _compiles,
    _warp_size,
    int8_matmul,
    int8_matmul_ref,
    quantize_rows,
    quantize_rows_kernel,
    quantize_rows_ref,
    w8a8_launch,
)


def _rows():
    return regions.rows_per_block()


@kaio.func
def dot_row(q, i, k, j):
    """sum_d q[i, d] * k[j, d] in f32."""
    acc = f32(0.0)
    for d in range(q.shape[1]):
        acc += q[i, d] * k[j, d]
    return acc


def _scores_kernel():
    @kaio.kernel
    def attention_probs(q: kaio.In[f32, 2], k: kaio.In[f32, 2], p: kaio.Region[f32, _rows()],
                        scale: f32, causal: kaio.Const[bool], precomputed: kaio.Const[bool]):
        # pass 1: scaled scores (masked ones -inf) and this thread's running maximum; with
        # ``precomputed``, p holds Q K^T already (the fragment matmul)
        m = f32(-kaio.math.inf)
        for r, j in p.owned():
            sc = f32(-kaio.math.inf)
            if not causal or j <= r:
                if precomputed:
                    sc = p[r, j] * scale
                else:
                    sc = dot_row(q, r, k, j) * scale
            p[r, j] = sc
            m = kaio.math.max(m, sc)
        row_max = kaio.block_max(m)
        # pass 2: exponentials (exp(-inf) = 0 for masked keys) and their sum
        s = f32(0.0)
        for r, j in p.owned():
            e = kaio.math.exp(p[r, j] - row_max)
            p[r, j] = e
            s += e
        inv_sum = 1.0 / kaio.block_sum(s)
        for r, j in p.owned():
            p[r, j] = p[r, j] * inv_sum

    return attention_probs


_SCORES = None


def qk_launcher(q, k, p):
    """A zero-argument launch of p = q @ k.T on split-f16 fragments, or None where the backend
    does not compile them (the softmax kernel then computes the dot products)."""
    w = _warp_size()
    kern = attention_mma.matmul_kernel(w, True)
    if not _compiles(kern):
        return None
    bound = kern[attention_mma.launch_config(p.shape[0], p.shape[1], w)]
    return lambda: bound(q, k, p)


def pv_launcher(p, v, o):
    """A zero-argument launch of o = p @ v (f32): split-f16 fragments (:mod:`.attention_mma`)
    where the backend compiles them, else the shared-memory tiled kernel."""
    w = _warp_size()
    k = attention_mma.matmul_kernel(w)
    if _compiles(k):
        bound = k[attention_mma.launch_config(o.shape[0], o.shape[1], w)]
        return lambda: bound(p, v, o)
    return tiled_launcher(p, v, o)


def quantized_attention(x, wq, wk, wv, sq, sk, sv, causal: bool = False) -> np.ndarray:
    """Attention over x [S, Dm] (f32) with int8 weights w* [Dm, D] and per-column scales s* [D]."""
    global _SCORES
    if _SCORES is None:
        _SCORES = _scores_kernel()
    xq, sx = quantize_rows(x)
    q = int8_matmul(xq, wq, sx, sq)
    k = int8_matmul(xq, wk, sx, sk)
    v = int8_matmul(xq, wv, sx, sv)
    p = np.empty((x.shape[0], x.shape[0]), dtype=np.float32)
    qk = qk_launcher(q, k, p)
    if qk is not None:
        qk()
    _SCORES(q, k, p, float(1.0 / np.sqrt(q.shape[1])), bool(causal), qk is not None)
    o = np.zeros((x.shape[0], v.shape[1]), np.float32)
    pv_launcher(p, v, o)()
    return o


def device_pipeline(x, wq, wk, wv, sq, sk, sv, causal: bool = False, alloc=None):
    """A launch-only closure of the whole pipeline on device arrays (intermediates allocated
    once with ``alloc(shape, dtype)``, default ``kaio.device_array``), for timing without
    host<->device copies. The output array is ``launch.output``."""
    global _SCORES
    if _SCORES is None:
        _SCORES = _scores_kernel()
    if alloc is None:
        alloc = empty
    s, dm = x.shape
    d = wq.shape[1]
    xq = alloc((s, dm), np.int8)
    sx = alloc((s, 1), np.float32)
    q, k, v, o = (alloc((s, d), np.float32) for _ in range(4))
    p = alloc((s, s), np.float32)
    quantize = quantize_rows_kernel("f32")[(s,), (256,)]
    project = w8a8_launch(s, d)     # int8 tensor cores where the backend has them
    qk = qk_launcher(q, k, p)
    pv = pv_launcher(p, v, o)
    scale = float(1.0 / np.sqrt(d))

    def launch():
        quantize(x, xq, sx)
        project(xq, wq, sx, sq, q)
        project(xq, wk, sx, sk, k)
        project(xq, wv, sx, sv, v)
        if qk is not None:
            qk()
        _SCORES(q, k, p, scale, bool(causal), qk is not None)
        pv()
    launch.output = o
    return launch


def quantized_attention_ref(x, wq, wk, wv, sq, sk, sv, causal: bool = False) -> np.ndarray:
    """float64 reference of the same pipeline (the int8 activations are computed exactly as the
    kernel does, in f32, so both sides start from the same integers)."""
    xq, sx = quantize_rows_ref(x)
    q = int8_matmul_ref(xq, wq, sx, sq)
    k = int8_matmul_ref(xq, wk, sx, sk)
    v = int8_matmul_ref(xq, wv, sx, sv)
    s = (q @ k.T) / np.sqrt(q.shape[1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ v
