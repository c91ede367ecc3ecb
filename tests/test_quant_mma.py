"""The quantized matmuls on fragments (kaio.kernels.ml.quant_mma): W8A8 on i8 m16n8k32 with the
scaling epilogue, W4A16 on f16/bf16 m16n8k16 with the weights split into hi + lo parts. Exact
checks on the reference backend at ragged shapes, one small case each run exactly in the PTX
simulator (tests/ptx_sim.py) and assembled for sm_80/sm_90, and the library's choice of path.
The registry cases (tests/test_kernels_ml.py) check them against the numpy references too, and
on a GPU at their default sizes (gpu-marked there)."""

import numpy as np
import pytest
from test_mma import _sim
from test_ptx import ptxas

import kaio
from kaio.kernels import ml
from kaio.kernels.ml import quant, quant_mma


def _w8a8_inputs(m, k, n, seed=0):
    g = np.random.default_rng(seed)
    return (g.integers(-128, 128, (m, k)).astype(np.int8), g.integers(-128, 128, (k, n)).astype(np.int8),
            g.uniform(0.001, 0.02, m).astype(np.float32), g.uniform(0.001, 0.02, n).astype(np.float32))


def _w8a8_expected(a, b, sa, sb):
    """The kernel's arithmetic in numpy: exact i32 sum, then f32(acc) * sa * sb in f32."""
    acc = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    return acc.astype(np.float32) * sa[:, None] * sb[None, :]


def test_w8a8_fragments_exact_at_ragged_shapes(reference):
    a, b, sa, sb = _w8a8_inputs(37, 200, 45)
    np.testing.assert_array_equal(ml.int8_matmul(a, b, sa, sb), _w8a8_expected(a, b, sa, sb))
    a, b, sa, sb = _w8a8_inputs(130, 64, 129, seed=1)         # two blocks each way
    np.testing.assert_array_equal(ml.int8_matmul(a, b, sa, sb), _w8a8_expected(a, b, sa, sb))


def _w4a16_inputs(m, k, n, group, npdt, seed=0):
    g = np.random.default_rng(seed)
    w = g.integers(-8, 8, (k, n)).astype(np.int8)
    x = g.uniform(-1, 1, (m, k)).astype(np.float32).astype(npdt)
    scales = g.uniform(0.005, 0.02, (k // group, n)).astype(np.float32).astype(npdt)
    return x, quant.pack_int4(w), scales


@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_w4a16_fragments_are_as_exact_as_f32_accumulation(name, reference):
    """hi + lo carry every weight q * s exactly: the error is the f32 accumulation's (K * 2**-24
    of sum |x w|) plus the output's one rounding; one rounded weight part alone would be off by
    up to 2**-9 (bf16) / 2**-12 (f16) of a weight, far outside this bound."""
    npdt = np.float16 if name == "f16" else kaio.bf16.storage_np
    x, packed, scales = _w4a16_inputs(20, 96, 136, 32, npdt)
    y = ml.int4_matmul(x, packed, scales, group=32).astype(np.float32).astype(np.float64)
    w = quant.unpack_int4(packed).astype(np.float64) * np.repeat(scales.astype(np.float64), 32, axis=0)
    x64 = x.astype(np.float32).astype(np.float64)
    exact = x64 @ w
    ulp_half = 2.0 ** (-11 if name == "f16" else -8)
    bound = 96 * 2.0**-24 * (np.abs(x64) @ np.abs(w)) + ulp_half * np.abs(exact) * (1 + 2**-10)
    assert (np.abs(y - exact) <= bound + 1e-30).all()


def test_w4a16_f32_activations_use_the_scalar_kernel(reference):
    x, packed, scales = _w4a16_inputs(3, 8, 5, 4, np.float32)
    y = ml.int4_matmul(x, packed, scales, group=4)
    np.testing.assert_allclose(y, quant.int4_matmul_ref(x, packed, scales, 4), rtol=1e-6)


def test_fragment_paths_are_chosen_where_they_compile(reference):
    assert quant._compiles(quant_mma.w8a8_kernel(32))
    assert quant._compiles(quant_mma.w4a16_kernel("f16", 32), group=32)
    with pytest.raises(kaio.CompileError, match="m16n8k32"):      # -> the scalar W8A8 there
        quant_mma.w8a8_kernel(64).emit("llvm", "gfx90a")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    ptx = quant_mma.w8a8_kernel(32).emit("ptx", arch)
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in ptx and "ldmatrix" in ptx
    assert "cp.async.cg.shared.global" in ptx
    ptxas(ptx, arch)
    for name in ("f16", "bf16"):
        ptx = quant_mma.w4a16_kernel(name, 32).emit("ptx", arch, group=32)
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{name}.{name}.f32" in ptx
        ptxas(ptx, arch)


def test_w8a8_ptx_exact_in_the_simulator():
    a, b, sa, sb = _w8a8_inputs(20, 160, 24, seed=2)
    c = np.zeros((20, 24), np.float32)
    _sim(quant_mma.w8a8_kernel(32), [a, b, sa.reshape(-1, 1), sb, c], (1, 1, 1), (256, 1, 1))
    np.testing.assert_array_equal(c, _w8a8_expected(a, b, sa, sb))


def test_w4a16_ptx_matches_the_reference_backend_in_the_simulator(reference):
    x, packed, scales = _w4a16_inputs(8, 64, 16, 16, np.float16, seed=3)
    want = ml.int4_matmul(x, packed, scales, group=16)
    y = np.zeros_like(want)
    _sim(quant_mma.w4a16_kernel("f16", 32), [x, packed, scales, y], (1, 1, 1), (128, 2, 1),
         group=16)
    np.testing.assert_array_equal(y, want)


@pytest.mark.gpu
def test_fragment_paths_on_the_gpu():
    """On a GPU (either NVIDIA codegen): the tensor-core kernels are the ones launched, W8A8
    bit-exact against numpy's arithmetic at a ragged shape, W4A16 within the f32-accumulation
    bound; the registry's default sizes run in tests/test_kernels_ml.py."""
    from kaio import backends as be
    from kaio.showcase import pick_backend
    previous = be._current
    kaio.set_backend(pick_backend(None))
    try:
        assert quant.w8a8_launch(300, 260).kernel is quant_mma.w8a8_kernel(32)
        a, b, sa, sb = _w8a8_inputs(300, 1000, 260, seed=5)
        np.testing.assert_array_equal(ml.int8_matmul(a, b, sa, sb), _w8a8_expected(a, b, sa, sb))
        assert quant.w4a16_launch("f16", 100, 300, 64).kernel is quant_mma.w4a16_kernel("f16", 32)
        x, packed, scales = _w4a16_inputs(100, 512, 300, 64, np.float16, seed=6)
        y = ml.int4_matmul(x, packed, scales, group=64).astype(np.float64)
        w = quant.unpack_int4(packed).astype(np.float64) * np.repeat(scales.astype(np.float64), 64, axis=0)
        exact = x.astype(np.float64) @ w
        accumulation = 2 * 512 * 2.0**-24 * (np.abs(x.astype(np.float64)) @ np.abs(w))
        bound = accumulation + 2.0**-11 * np.abs(exact) * 1.01
        assert (np.abs(y - exact) <= bound + 2.0**-24).all()
    finally:
        be._current = previous
