"""RAJAPerf ports: every kernel at its CI size on the reference backend against its numpy
reference and checksum, the suite's data initialisation and checksum method, and independent
checks of the formulas (mesh volumes, divergence of a linear field, tiled matmul shapes)."""
import math

import numpy as np
import pytest

import kaio
import kaio.kernels as K
from kaio.kernels.rajaperf import apps, basic, checksum, lcals, polybench, stream
from kaio.kernels.rajaperf._tiled import matmul_tiled

RAJA_CASES = [c.name for c in K.cases("rajaperf")]
REQUIRED = {
    "stream": "ADD COPY DOT MUL TRIAD",
    "basic": "DAXPY IF_QUAD INIT3 MULADDSUB NESTED_INIT REDUCE3_INT TRAP_INT PI_REDUCE MAT_MAT_SHARED",
    "lcals": "DIFF_PREDICT EOS FIRST_DIFF HYDRO_1D INT_PREDICT PLANCKIAN TRIDIAG_ELIM GEN_LIN_RECUR",
    "polybench": "ATAX GEMM JACOBI_1D JACOBI_2D HEAT_3D MVT FDTD_2D 2MM",
    "apps": "PRESSURE ENERGY VOL3D DEL_DOT_VEC_2D FIR LTIMES",
}


def test_every_required_kernel_is_registered_in_its_group():
    assert len(RAJA_CASES) >= 30
    for group, names in REQUIRED.items():
        for n in names.split():
            case = K.get(f"rajaperf/{n}")
            assert case.group == f"rajaperf/{group}"
            assert case.reps >= 1 and case.checksum is not None and case.tolerance.why


@pytest.mark.parametrize("name", RAJA_CASES)
def test_case_matches_reference_and_checksum(name, reference):
    case = K.get(name)
    inputs = case.make_inputs(case.small_size, seed=0)
    before = {k: np.copy(v) for k, v in inputs.items() if isinstance(v, np.ndarray)}
    outputs = case.run(inputs)
    expected = case.reference(inputs)
    ok, ratio = case.check(outputs, expected)
    assert ok, f"{name}: worst error is {ratio:.3g} x its tolerance ({case.tolerance.describe()})"
    diff = checksum.relative_diff(case.checksum(expected), case.checksum(outputs))
    assert diff <= case.checksum_rtol, f"{name}: checksum differs by {diff:.3g}"
    for k, v in before.items():
        np.testing.assert_array_equal(inputs[k], v)


# --- the suite's data and checksum -------------------------------------------------------------
def test_glibc_rand_sequence():
    np.testing.assert_array_equal(checksum.glibc_rand(1, 3), [1804289383, 846930886, 1681692777])


def test_data_init_alternates_factors_in_call_order():
    d = checksum.DataInit()
    a, b = d.real(3), d.real(3)
    np.testing.assert_allclose(a, 0.2 * (np.arange(3) + 1.1) / (np.arange(3) + 1.12345), rtol=0)
    np.testing.assert_allclose(b, a / 2, rtol=1e-15)
    d.const(2, 0.0)                                   # constants count too
    assert d.scalar() == 0.1 * 1.1 / 1.12345


def test_int_data_has_the_two_planted_extremes():
    v = checksum.DataInit().ints(10_000)
    assert v.dtype == np.int32 and v.min() == -58 and v.max() == 19
    assert set(np.unique(v)) == {-58, -1, 1, 19}


def test_checksum_is_the_kahan_weighted_sum():
    data = np.random.default_rng(0).normal(size=5000)
    weights = np.abs(np.sin(np.arange(1, 5001))) + 0.5
    assert checksum.checksum(data) == pytest.approx(math.fsum(weights * data), rel=1e-14)
    assert checksum.checksum(np.array(2.5), scale=2.0) == 5.0     # reductions: unweighted
    assert checksum.checksum(data, scale=1e-3) == pytest.approx(1e-3 * checksum.checksum(data))


def test_checksum_detects_a_single_changed_element():
    data = checksum.DataInit().real(1000)
    changed = data.copy()
    changed[500] *= 1 + 1e-9
    assert checksum.relative_diff(checksum.checksum(data), checksum.checksum(changed)) > 1e-13


# --- independent checks of the formulas ---------------------------------------------------------
def test_vol3d_rectilinear_mesh_volumes_are_products_of_spacings(reference):
    t = [np.cumsum(np.r_[0.0, s]) for s in ([0.5, 1.0, 2.0], [0.25, 0.75], [1.5, 0.5, 1.0, 3.0])]
    k, j, i = np.meshgrid(t[2], t[1], t[0], indexing="ij")
    vol = np.empty((4, 2, 3))
    apps.vol3d(i.copy(), j.copy(), k.copy(), vol, apps.VNORMQ)
    expect = np.einsum("k,j,i->kji", [1.5, 0.5, 1.0, 3.0], [0.25, 0.75], [0.5, 1.0, 2.0])
    np.testing.assert_allclose(vol, expect, rtol=1e-14)


def test_del_dot_vec_2d_of_a_linear_field(reference):
    inp = apps._ddv_in(12)
    x, y = inp["x"], inp["y"]
    inp["fx"], inp["fy"] = 3.0 * x, -0.5 * y
    div = apps._ddv_run(inp)["div"]
    # d(3x)/dx + d(-y/2)/dy + the axisymmetric term fy/y = 3 - 0.5 - 0.5
    np.testing.assert_allclose(div[inp["zones"]], 2.0, rtol=1e-12)


@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 5, 33), (32, 48, 16)])
def test_tiled_matmul_any_shape(shape, reference):
    m, k, n = shape
    g = np.random.default_rng(m)
    a, b = g.normal(size=(m, k)), g.normal(size=(k, n))
    np.testing.assert_allclose(matmul_tiled(a, b, alpha=0.5), 0.5 * a @ b, rtol=1e-12, atol=1e-13)
    c = g.normal(size=(m, n))
    np.testing.assert_allclose(matmul_tiled(a, b, c=c.copy(), beta=2.0), 2.0 * c + a @ b,
                               rtol=1e-12, atol=1e-13)


def test_reductions_on_awkward_lengths(reference):
    for n in (1, 255, 257, 4097):
        a = np.linspace(-1.0, 2.0, n)
        assert stream.dot(a, a[::-1].copy()) == pytest.approx(math.fsum(a * a[::-1]), rel=1e-13, abs=1e-14)
        v = (np.arange(n) % 7 - 3).astype(np.int32)
        assert basic.reduce3_int(v) == (int(v.sum()), int(v.min()), int(v.max()))
    assert basic.pi_reduce(20_000) == pytest.approx(math.pi, rel=1e-9)


def test_diff_predict_with_a_length_that_has_no_large_divisor(reference):
    case = K.get("rajaperf/DIFF_PREDICT")
    inp = lcals._diff_in(97)                          # prime: 97 blocks of one thread
    inp["px"] = np.random.default_rng(1).normal(size=inp["px"].shape)  # non-zero history
    ok, ratio = case.check(case.run(inp), case.reference(inp))
    assert ok, ratio


def test_int_predict_with_distinct_rows(reference):
    case = K.get("rajaperf/INT_PREDICT")
    inp = lcals._int_in(300)                          # the suite's px is all ones: vary it
    inp["px"] = np.random.default_rng(2).normal(size=inp["px"].shape)
    ok, ratio = case.check(case.run(inp), case.reference(inp))
    assert ok, ratio


@pytest.mark.parametrize("name, size", [("ATAX", 37), ("GEMM", (21, 35, 19)), ("JACOBI_1D", (300, 3)),
                                        ("JACOBI_2D", (23, 2)), ("HEAT_3D", (11, 2)), ("MVT", 29),
                                        ("2MM", (13, 18, 22, 9))])
def test_polybench_with_distinct_element_values(name, size, reference):
    case = K.get(f"rajaperf/{name}")
    inp = polybench.varied_inputs(name, size)         # PolyBench's formulas: no near-constant data
    ok, ratio = case.check(case.run(inp), case.reference(inp))
    assert ok, ratio


@pytest.mark.gpu
@pytest.mark.parametrize("name", RAJA_CASES)
def test_case_default_size_on_gpu(name):
    from kaio import backends as be
    from kaio.showcase import pick_backend
    previous = be._current
    kaio.set_backend(pick_backend(None))
    try:
        case = K.get(name)
        inputs = case.make_inputs(case.default_size, seed=0)
        outputs = case.run(inputs)
        expected = case.reference(inputs)
        ok, ratio = case.check(outputs, expected)
        assert ok, f"{name}: worst error {ratio:.3g} x tolerance"
        assert checksum.relative_diff(case.checksum(expected), case.checksum(outputs)) <= case.checksum_rtol
    finally:
        be._current = previous
