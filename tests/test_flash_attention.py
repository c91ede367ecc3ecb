"""The fused attention kernel (kaio.kernels.ml.flash_attention): softmax(Q K^T * scale) V in one
launch, on the reference backend at 32- and 64-lane warps (ragged shapes, causal, Q/K/V side
by side in one array), in the PTX simulator, through ptxas, and chosen by the library op."""

import numpy as np
import pytest
from test_mma import _sim
from test_ptx import ptxas

import kaio
from kaio import backends as be
from kaio.backends.reference.backend import ReferenceBackend
from kaio.kernels.ml import attention
from kaio.kernels.ml import flash_attention as fa


@pytest.fixture(params=[32, 64])
def width(request, monkeypatch):
    """The reference backend at one warp width (four warps per block either way), its
    sanitizer checking every access (the Raw scratch included) and the output's ownership."""
    monkeypatch.setitem(be._instances, "reference", ReferenceBackend(
        warp_size=request.param, sanitize=True, check_ownership=True))
    monkeypatch.setattr(be, "_current", "reference")
    return request.param


def _qkv(s, d, seed):
    g = np.random.default_rng(seed)
    return tuple(g.normal(0, 1.5, (s, d)).astype(np.float32) for _ in range(3))


def _ref(q, k, v, causal):
    sc = (q.astype(np.float64) @ k.T.astype(np.float64)) / np.sqrt(q.shape[1])
    if causal:
        sc = np.where(np.tril(np.ones(sc.shape, dtype=bool)), sc, -np.inf)
    e = np.exp(sc - sc.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ v.astype(np.float64)


def _run(q, k, v, causal, warp_size=32):
    s, d = q.shape
    o = np.full((s, d), np.nan, np.float32)
    kern = fa.kernel(fa.padded_dim(d), warp_size)[fa.launch_config(s, warp_size)]
    kern(q, k, v, o, fa.scratch(s, warp_size), float(1 / np.sqrt(d)), d, 0, 0, 0, causal)
    return o


@pytest.mark.parametrize("s,d,causal", [(37, 16, False), (37, 16, True), (150, 40, True)])
def test_fused_matches_float64_at_ragged_shapes(width, s, d, causal):
    """Rows not a multiple of the 16-row block, keys past one 128-key step (150), d not a
    multiple of the 32 the kernel pads to; the attention case's tolerance (rel 1e-4, abs 1e-5)."""
    q, k, v = _qkv(s, d, s + d)
    o = _run(q, k, v, causal, width)
    np.testing.assert_allclose(o, _ref(q, k, v, causal), rtol=1e-4, atol=1e-5)
    if causal:                          # row 0 sees key 0 only: softmax over one key is 1
        np.testing.assert_allclose(o[0], v[0], rtol=1e-6, atol=1e-7)


def test_qkv_side_by_side_is_the_same_computation(reference):
    """The library passes one [S, 3D] array three times with column offsets: bit-identical to
    three separate arrays."""
    q, k, v = _qkv(40, 24, 1)
    qkv = np.ascontiguousarray(np.concatenate([q, k, v], axis=1))
    o = np.full(q.shape, np.nan, np.float32)
    kern = fa.kernel(fa.padded_dim(24))[fa.launch_config(40, 32)]
    kern(qkv, qkv, qkv, o, fa.scratch(40), float(1 / np.sqrt(24)), 24, 0, 24, 48, True)
    np.testing.assert_array_equal(o, _run(q, k, v, True))


def test_the_library_op_uses_the_fused_kernel(reference):
    """quantized_attention and its timing pipeline launch quantize, one projection and the fused
    kernel (the S x S scores are never allocated), and agree bit for bit."""
    g = np.random.default_rng(3)
    x = g.normal(0, 1, (33, 24)).astype(np.float32)
    w = [g.integers(-127, 128, (24, 8), dtype=np.int8) for _ in range(3)]
    sc = [np.full(8, 0.01, np.float32) * g.uniform(0.5, 1.5, 8).astype(np.float32) for _ in range(3)]
    shapes = []

    def alloc(shape, dtype):
        shapes.append(tuple(shape))
        return np.empty(shape, dtype)
    launch = attention.device_pipeline(x, *w, *sc, causal=True, alloc=alloc)
    assert (33, 33) not in shapes and (33, 24) in shapes      # qkv [S, 3D], no P
    launch()
    np.testing.assert_array_equal(launch.output, attention.quantized_attention(x, *w, *sc, causal=True))
    assert attention.fused_launcher(np.empty((33, 24), np.float32), np.empty((33, 8), np.float32),
                                    False) is not None


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    """Per 128-key step a warp issues 3 x 8 (Q K^T, d = 128) x 4 (n8 tiles of its 32 keys) mma
    in each pass and 3 x 8 (k16 steps of the 128 keys) x 4 (its 32 output columns) for P V."""
    ptx = fa.kernel(128).emit("ptx", arch, causal=True)
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 3 * 96
    assert "ldmatrix" in ptx
    ptxas(ptx, arch)


def test_ptx_in_the_simulator():
    """The emitted PTX run by tests/ptx_sim.py: one 16-row block over two 128-key steps,
    causal, within the split's bound of float64 (the simulator rounds each tile's sum once)."""
    q, k, v = _qkv(16, 32, 7)
    k2, v2 = _qkv(150, 32, 8)[:2]
    o = np.full((16, 32), np.nan, np.float32)
    _sim(fa.kernel(32), [q, k2, v2, o, fa.scratch(16), np.float32(1 / np.sqrt(32)), np.int32(32),
                         np.int32(0), np.int32(0), np.int32(0)], (1, 1, 1), (128, 1, 1), "sm_90",
         causal=False)
    s = (q.astype(np.float64) @ k2.T) / np.sqrt(32)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(o, (e / e.sum(axis=1, keepdims=True)) @ v2, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_fused_on_gpu_at_the_benchmark_shape(causal):
    """S = 1024, d = 128 on the device against float64."""
    from kaio.showcase import pick_backend
    previous = be._current
    kaio.set_backend(pick_backend(None))
    try:
        q, k, v = _qkv(1024, 128, 0)
        o = np.zeros((1024, 128), np.float32)
        launch = attention.fused_launcher(np.concatenate([q, k, v], axis=1), o, causal)
        assert launch is not None
        launch()
        np.testing.assert_allclose(o, _ref(q, k, v, causal), rtol=1e-4, atol=1e-5)
    finally:
        be._current = previous
