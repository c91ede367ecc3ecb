"""The fused attention kernel (kaio.kernels.ml.flash_attention): softmax(Q K^T * scale) V with
the scores in accumulator fragments, on the reference backend at 32- and 64-lane warps (ragged
shapes, causal, chunks of several steps, Q/K/V side by side in one array), in the PTX simulator
on both NVIDIA paths, through ptxas, and chosen by the library op."""

import re

import numpy as np
import pytest
from test_mma import _sim
from test_mma_llvm import _sim_llvm
from test_ptx import ptxas

import kaio
from kaio import backends as be
from kaio.backends.reference.backend import ReferenceBackend
from kaio.kernels.ml import attention
from kaio.kernels.ml import flash_attention as fa


@pytest.fixture(params=[32, 64])
def width(request, monkeypatch):
    """The reference backend at one warp width (four warps per block either way), its
    sanitizer checking every access (the Raw (m, l) tiles included) and the output's
    ownership."""
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


def _run(q, k, v, causal, warp_size=32, plan=None, nw=fa.NW):
    """The partial kernel at ``plan`` = (chunks, steps per chunk) (default fa.plan), then the
    combine where there are several chunks; Q, K and V as separate arrays; ``nw`` warps a
    block."""
    s, d = q.shape
    dp = fa.padded_dim(d)
    chunks, nsteps = plan or fa.plan(s, k.shape[0], warp_size, nw)
    o = np.full((s, d), np.nan, np.float32)
    part, ml = fa.partials(s, dp, chunks, nw=nw)
    part[:] = np.nan                            # a chunk the mask hides leaves its part unwritten
    kern = fa.kernel(dp, warp_size, nw)[fa.launch_config(s, warp_size, chunks, nw)]
    kern(q, k, v, o if chunks == 1 else part, ml, float(1 / np.sqrt(d)), d, 0, 0, 0, nsteps,
         causal)
    if chunks > 1:
        fa.combine_kernel()(part, ml, o, chunks, dp)
    return o


@pytest.mark.parametrize("s,d,causal,steps", [(37, 16, True, None), (150, 40, True, None),
                                              (300, 32, False, 2)])
def test_fused_matches_float64_at_ragged_shapes(width, s, d, causal, steps):
    """Rows not a multiple of the 64-row block, d not a multiple of the 16 the kernel pads to;
    one chunk of one step (37), chunks of one step each combined (150 keys: 3 steps of 64, the
    later ones hidden from the first row tiles by the mask), and chunks of two steps (300: the
    running max and sum rescaled between steps, the last chunk ragged). The attention case's
    tolerance (rel 1e-4, abs 1e-5)."""
    q, k, v = _qkv(s, d, s + d)
    total = -(-s // fa.KS)
    plan = (-(-total // steps), steps) if steps else None
    o = _run(q, k, v, causal, width, plan)
    np.testing.assert_allclose(o, _ref(q, k, v, causal), rtol=1e-4, atol=1e-5)
    if causal:                          # row 0 sees key 0 only: softmax over one key is 1
        np.testing.assert_allclose(o[0], v[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("s,d,causal,steps", [(150, 128, True, None), (300, 40, False, 2)])
def test_eight_warp_blocks(width, s, d, causal, steps):
    """128-row blocks (eight warps), where K and V are split at once by the two halves of the
    block into tiles of their own (d = 128 at 32 lanes; d = 40, padded to 48, at both widths)."""
    q, k, v = _qkv(s, d, s + 7)
    total = -(-s // fa.KS)
    plan = (-(-total // steps), steps) if steps else None
    o = _run(q, k, v, causal, width, plan, nw=8)
    np.testing.assert_allclose(o, _ref(q, k, v, causal), rtol=1e-4, atol=1e-5)


def test_plan_splits_the_keys_into_enough_blocks():
    """One step per block while the grid stays within TARGET_BLOCKS (S = 1024: 16 chunks x 16
    row tiles = 256 blocks, at either warp width); long sequences get chunks of several steps,
    which bounds the partials; every key is in exactly one chunk."""
    assert fa.plan(1024, 1024) == (16, 1) == fa.plan(1024, 1024, 64)
    assert fa.launch_config(1024, 32, 16) == ((16, 16), (128,))
    assert fa.plan(37, 37) == (1, 1)
    for s in (130, 1000, 4096, 16384, 65536):
        chunks, nsteps = fa.plan(s, s)
        total = -(-s // fa.KS)
        assert (chunks - 1) * nsteps < total <= chunks * nsteps
        assert chunks * -(-s // fa.ROWS) <= max(fa.TARGET_BLOCKS, -(-s // fa.ROWS))
    assert fa.plan(16384, 16384) == (4, 64)


def test_qkv_side_by_side_is_the_same_computation(reference):
    """The library passes one [S, 3D] array three times with column offsets: bit-identical to
    three separate arrays."""
    q, k, v = _qkv(40, 24, 1)
    qkv = np.ascontiguousarray(np.concatenate([q, k, v], axis=1))
    o = np.full(q.shape, np.nan, np.float32)
    kern = fa.kernel(fa.padded_dim(24))[fa.launch_config(40, 32)]
    kern(qkv, qkv, qkv, o, fa.partials(40, 0, 1)[1], float(1 / np.sqrt(24)), 24, 0, 24, 48, 1,
         True)
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


def test_the_launcher_combines_chunks(reference, monkeypatch):
    """fused_launcher with the keys split: the partial launch and the combine, whose empty
    chunk (keys 64.. of 40) reports (-inf, 0) and is skipped (its partials are NaN here)."""
    q, k, v = _qkv(40, 24, 2)
    qkv = np.ascontiguousarray(np.concatenate([q, k, v], axis=1))
    direct = np.full(q.shape, np.nan, np.float32)
    attention.fused_launcher(qkv, direct, False)()
    monkeypatch.setattr(fa, "plan", lambda s, n, w, nw=fa.NW: (2, 1))
    shapes = []

    def alloc(shape, dtype):
        shapes.append(tuple(shape))
        return np.full(shape, np.nan, dtype)
    o = np.full(q.shape, np.nan, np.float32)
    attention.fused_launcher(qkv, o, False, alloc)()
    rows = fa.warps(32, 32)[0] * fa.WR                        # the library's block: 128 rows
    assert (rows, 2 * 32) in shapes and (rows, 16) in shapes  # part [rows, 2 dp], ml [rows, 16]
    np.testing.assert_allclose(o, direct, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(o, _ref(q, k, v, False), rtol=1e-4, atol=1e-5)


def test_combine_unrolled_is_the_looped_one(reference):
    """combine_launch unrolls the chunk loops for up to MAX_TRIP chunks (every load of a pass
    at once): bit for bit the looped kernel (CU chunks a trip, here 6 = a trip and a half),
    chunks with l = 0 skipped (their partials NaN), and the weighted mean of numpy."""
    g = np.random.default_rng(4)
    rows, chunks, dp, d = 64, 6, 32, 24
    ml = np.zeros((rows, fa.ML_COLS * chunks), np.float32)
    ml[:, 0::fa.ML_COLS] = g.normal(0, 3, (rows, chunks))
    ml[:, 1::fa.ML_COLS] = g.uniform(0.5, 9, (rows, chunks))
    hidden = g.random((rows, chunks)) < 0.3
    hidden[:, 0] = False
    ml[:, 0::fa.ML_COLS][hidden] = -np.inf
    ml[:, 1::fa.ML_COLS][hidden] = 0.0
    part = g.normal(0, 1, (rows, chunks * dp)).astype(np.float32)
    part.reshape(rows, chunks, dp)[hidden] = np.nan
    looped, unrolled = (np.full((40, d), np.nan, np.float32) for _ in range(2))
    fa.combine_kernel()[(-(-(40 * d) // 256),), (256,)](part, ml, looped, chunks, dp)
    fa.combine_launch(40, d, chunks)(part, ml, unrolled, chunks, dp)
    np.testing.assert_array_equal(unrolled, looped)
    m, l = ml[:40, 0::fa.ML_COLS].astype(np.float64), ml[:40, 1::fa.ML_COLS].astype(np.float64)
    w = np.where(hidden[:40], 0.0, l * np.exp(m - m.max(axis=1, keepdims=True)))
    p = np.nan_to_num(part[:40].reshape(40, chunks, dp)[:, :, :d].astype(np.float64))
    want = (w[:, :, None] * p).sum(axis=1) / w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(unrolled, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    """A warp's Q K^T per 64-key step is 3 x 8 (k16 steps, d = 128) x 8 (n8 tiles of the 64
    keys) mma and P V 3 x 4 (k16 steps of the keys) x 16 (n8 tiles of d), each written once;
    the scores never touch memory: row reductions are butterfly shuffles, P becomes A
    fragments by packing registers (cvt.rn.f16x2.f32), and the only global stores are the
    partial output and the (m, l) tile."""
    ptx = fa.kernel(128).emit("ptx", arch, causal=True)
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 384
    assert "ldmatrix" in ptx and "cp.async.cg" in ptx
    assert ptx.count("shfl.sync.bfly") == 2 * 2 * 2               # row max and sum, 2 halves
    assert ptx.count("cvt.rn.f16x2.f32") == (8 + 8 + 4 + 4) * 4    # Q hi/lo, P hi/lo slices
    # O (16 x 128) and (m, l) (16 x 8): element stores at edges, column pairs inside
    assert ptx.count("st.global.f32") == 16 * 4 + 4
    assert ptx.count("st.global.v2.f32") == (16 + 1) * 2
    ptxas(ptx, arch)
    ptxas(fa.combine_kernel().emit("ptx", arch), arch)
    ptxas(fa.combine_kernel(16).emit("ptx", arch), arch)
    # eight warps: K and V split at once, two barriers a step (four with one pair of tiles)
    assert ptx.count("bar.sync") == 4
    eight = fa.kernel(128, 32, 8).emit("ptx", arch, causal=True)
    assert eight.count("bar.sync") == 2
    assert eight.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 384
    ptxas(eight, arch)


def _sim_case(sim):
    """16 rows against 150 keys in two chunks (one of two 64-key steps, one of the last 22
    keys): the partials combined as the combine kernel does, within the split's bound of
    float64 (the simulator rounds each tile's sum once)."""
    q, k, v = _qkv(16, 32, 7)
    k2, v2 = _qkv(150, 32, 8)[:2]
    part, ml = fa.partials(16, 32, 2)
    sim(fa.kernel(32), [q, k2, v2, part, ml, np.float32(1 / np.sqrt(32)), np.int32(32),
                        np.int32(0), np.int32(0), np.int32(0), np.int32(2)],
        (2, 1, 1), (128, 1, 1), "sm_90", causal=False)
    m, l = ml[:16, 0::8].astype(np.float64), ml[:16, 1::8].astype(np.float64)
    wgt = l * np.exp(m - m.max(axis=1, keepdims=True))
    o = (wgt[:, 0:1] * part[:16, :32] + wgt[:, 1:2] * part[:16, 32:]) / wgt.sum(axis=1, keepdims=True)
    s = (q.astype(np.float64) @ k2.T) / np.sqrt(32)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(o, (e / e.sum(axis=1, keepdims=True)) @ v2, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m[:, 0], s[:, :128].max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(l[:, 0], np.exp(s[:, :128] - m[:, :1]).sum(axis=1), rtol=1e-5)


def test_ptx_in_the_simulator():
    _sim_case(_sim)


def test_nvvm_in_the_simulator():
    _sim_case(_sim_llvm)


@pytest.mark.parametrize("cpu", ["gfx90a", "gfx942"])
def test_amd_code_objects_build(cpu):
    """d = 32 (at d = 128 the f32 staging tiles pass AMD's 64 KiB of LDS per workgroup, and
    the library op takes its unfused path there)."""
    head = fa.kernel(32, 64).emit("report", cpu, causal=True).splitlines()[0]
    assert f"[{cpu}] ok:" in head and re.search(r"spills\(s/v\)=0/0", head), head


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
        if launch is None:
            # d = 128 needs ~98 KiB of shared memory: kaio's PTX path gives it dynamically, the
            # LLVM nvptx path allows 48 KiB (static) and the library op takes its unfused path
            from kaio.config import settings
            be_now = kaio.get_backend()
            assert (getattr(be_now, "codegen", None) or settings().cuda_codegen) == "llvm"
            pytest.skip("the fused kernel at d = 128 needs kaio's PTX path (dynamic shared memory)")
        launch()
        np.testing.assert_allclose(o, _ref(q, k, v, causal), rtol=1e-4, atol=1e-5)
    finally:
        be._current = previous
