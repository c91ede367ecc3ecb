"""Quantized attention: INT8 Q/K/V projections feeding scaled dot-product attention.

    xq, sx = quantize_rows(x)                     # per-token symmetric int8
    Q = W8A8(xq, Wq) ; K = W8A8(xq, Wk) ; V = W8A8(xq, Wv)   # int32 accumulate, f32 out
    O = softmax(Q K^T / sqrt(d) [+ causal mask]) V               # f32

Where the backend compiles f16 fragments, the three projections are one W8A8 launch on the
concatenated weights ([Dm, 3D]: each output column is computed exactly as alone) and the
attention fused (:mod:`.flash_attention`: scores, softmax and P V per 64-row block and chunk of
keys, on split-f16 fragments held in registers, the S x S scores never in memory, then a launch
combining the chunks). The projection quantizes x's rows itself where it compiles
(:mod:`.quant_project`: kaio's PTX path; the same bits as the quantize launch), so three
launches (two where the keys make one chunk), else four. :func:`device_pipeline` (the timing
closure on device arrays) replays them from a captured graph: one host launch per call.
Otherwise three projections, then Q K^T on fragments (:mod:`.attention_mma`) or in the softmax
kernel (one block per query row), and P V on fragments or the tiled f32 kernel.

Single head; batch and heads are independent and map to more launches (or more rows).
"""
import numpy as np

import kaio

# submodules by full name: `from . import` asks the package's __getattr__, which imports every
# ML module (cases.py) and so this one again, half initialised, when it is imported first
import kaio.kernels.ml.attention_mma as attention_mma
import kaio.kernels.ml.flash_attention as flash_attention
import kaio.kernels.ml.quant_project as quant_project
from kaio import f32, regions
from kaio.backends.runtime import DeviceArray, capturing
from kaio.config import settings

from .._bench import empty
from ..rajaperf._tiled import tiled_launcher
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


def fused_launcher(qkv, o, causal: bool, alloc=np.empty):
    """A zero-argument launch of the fused attention (:mod:`.flash_attention`) on ``qkv`` [S, 3D]
    (Q, K and V side by side) into ``o`` [S, D], or None where the backend does not compile it
    (no fragments, or shared memory past its limit). ``alloc(shape, dtype)`` makes the
    partials. The keys are split over blocks (``flash_attention.plan``): the partial kernel,
    then the combining one; with a single chunk the partial kernel writes ``o`` alone."""
    w = _warp_size()
    s, d = o.shape
    if not flash_attention.supported(w):
        return None
    dp = flash_attention.padded_dim(d)
    for nw in flash_attention.warps(dp, w):     # the first that compiles
        kern = flash_attention.kernel(dp, w, nw)
        if _compiles(kern, causal=bool(causal)):
            break
    else:
        return None
    chunks, nsteps = flash_attention.plan(s, s, w, nw)
    bound = kern[flash_attention.launch_config(s, w, chunks, nw)]
    args = (float(1.0 / np.sqrt(d)), d, 0, d, 2 * d, nsteps, bool(causal))
    if chunks == 1:
        ml = flash_attention.partials(s, 0, 1, alloc, nw)[1]

        def one():
            bound(qkv, qkv, qkv, o, ml, *args)
        one.launches = 1
        return one
    part, ml = flash_attention.partials(s, dp, chunks, alloc, nw)
    combine = flash_attention.combine_launch(s, d, chunks)

    def launch():
        bound(qkv, qkv, qkv, part, ml, *args)
        combine(part, ml, o, chunks, dp)
    launch.launches = 2
    return launch


def _stacked(*arrays, axis: int):
    """numpy concatenation of host or device arrays (device ones come back to the device)."""
    host = all(isinstance(a, np.ndarray) for a in arrays)
    out = np.concatenate([a if isinstance(a, np.ndarray) else a.to_host() for a in arrays], axis=axis)
    return out if host else kaio.to_device(out)


def projection(x, wq, wk, wv, sq, sk, sv, qkv, alloc=np.empty):
    """A zero-argument launch of qkv [S, 3D] = the W8A8 projections of x on the concatenated
    weights ([Dm, 3D]; each column as alone): one launch quantizing x's rows on the way in
    (:mod:`.quant_project`) where the backend compiles it, else ``quantize_rows`` into int8 and
    scales (``alloc(shape, dtype)``) and the W8A8 launch. ``launch.launches`` says how many."""
    s, dm = x.shape
    n = qkv.shape[1]
    wqkv, sqkv = _stacked(wq, wk, wv, axis=1), _stacked(sq, sk, sv, axis=0)
    fused = quant_project.launch(s, n, dm)
    if fused is not None:
        qkv_bits = quant_project.bits(qkv)

        def launch():
            fused(x, wqkv, sqkv, qkv_bits)
        launch.launches = 1
        return launch
    xq, sx = alloc((s, dm), np.int8), alloc((s, 1), np.float32)
    quantize = quantize_rows_kernel("f32")[(s,), (256,)]
    project = w8a8_launch(s, n)

    def launch2():
        quantize(x, xq, sx)
        project(xq, wqkv, sx, sqkv, qkv)
    launch2.launches = 2
    return launch2


def quantized_attention(x, wq, wk, wv, sq, sk, sv, causal: bool = False) -> np.ndarray:
    """Attention over x [S, Dm] (f32) with int8 weights w* [Dm, D] and per-column scales s* [D]."""
    global _SCORES
    if _SCORES is None:
        _SCORES = _scores_kernel()
    s, d = x.shape[0], wq.shape[1]
    qkv = np.empty((s, 3 * d), np.float32)
    o = np.zeros((s, d), np.float32)
    fused = fused_launcher(qkv, o, causal)
    if fused is not None:
        project = projection(x, wq, wk, wv, sq, sk, sv, qkv)
        project()
        fused()
        return o
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


def device_pipeline(x, wq, wk, wv, sq, sk, sv, causal: bool = False, alloc=None, graph=None):
    """A launch-only closure of the whole pipeline on device arrays (intermediates allocated
    once with ``alloc(shape, dtype)``, default ``kaio.device_array``), for timing without
    host<->device copies. The output array is ``launch.output``; ``launch.launches`` counts
    the kernel launches of one call.

    ``graph`` (default: where every argument and intermediate is a device array, outside a
    capture and checked mode): the launches are run once, captured into a :func:`kaio.graph`
    and each call replays it on the default stream, so one call costs one graph launch on the
    host instead of one launch per kernel. The graph holds the same arrays as the closure does
    (a replay reads what they hold then, as the launches would); ``launch.graph`` is it, or
    None."""
    global _SCORES
    if _SCORES is None:
        _SCORES = _scores_kernel()
    if alloc is None:
        alloc = empty
    s = x.shape[0]
    d = wq.shape[1]
    qkv, o = alloc((s, 3 * d), np.float32), alloc((s, d), np.float32)
    attend = fused_launcher(qkv, o, causal, alloc)
    if attend is not None:          # one projection (quantizing, or after quantize), the
        project = projection(x, wq, wk, wv, sq, sk, sv, qkv, alloc)    # fused attention

        def launch():
            project()
            attend()
        launch.launches = project.launches + attend.launches
    else:
        launch = _unfused_pipeline(x, wq, wk, wv, sq, sk, sv, causal, alloc)
        o = launch.output
    if graph is None:               # numpy arguments and checked launches cannot be captured
        graph = (capturing() is None and not settings().checked
                 and all(isinstance(a, DeviceArray) for a in (x, wq, wk, wv, sq, sk, sv, qkv, o)))
    return _replayed(launch, o) if graph else _with_output(launch, o)


def _with_output(launch, o, g=None):
    launch.output, launch.graph = o, g
    return launch


def _replayed(launch, o):
    """``launch`` run once (kernels compiled and loaded, shared memory opted in), then captured
    into a graph: a closure replaying it on the default stream (where uncaptured launches and
    the callers' timing events go)."""
    launch()
    kaio.synchronize()
    with kaio.graph() as g:
        launch()

    def replay():
        g.replay(0)                 # stream handle 0: the default stream on every backend
    replay.launches = launch.launches
    return _with_output(replay, o, g)


def _unfused_pipeline(x, wq, wk, wv, sq, sk, sv, causal, alloc):
    """Quantize, three projections, Q K^T (fragments) or the row softmax's dot products, the
    softmax, P V: where the fused attention does not compile."""
    s, dm = x.shape
    d = wq.shape[1]
    xq = alloc((s, dm), np.int8)
    sx = alloc((s, 1), np.float32)
    quantize = quantize_rows_kernel("f32")[(s,), (256,)]
    q, k, v, o = (alloc((s, d), np.float32) for _ in range(4))
    p = alloc((s, s), np.float32)
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
    launch.launches = 7 if qk is not None else 6
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
