"""The RAJAPerf ports against the suite's own facts: default sizes and reps, checksum scale
factors, the padded Apps domain, the unfused structure of PRESSURE/ENERGY (and their fused
variants), and checksums taken after all reps and summed over passes."""
import numpy as np
import pytest

import kaio.kernels as K
from kaio.kernels.rajaperf import _case, apps, lcals
from kaio.kernels.rajaperf._domain import Domain
from kaio.kernels.rajaperf.checksum import checksum, relative_diff


@pytest.mark.parametrize("name, size, reps", [("FDTD_2D", (1000, 1000, 40), 8),
                                              ("2MM", (1000, 1000, 1120, 1000), 2),
                                              ("VOL3D", 100, 100), ("DEL_DOT_VEC_2D", 1000, 100)])
def test_default_sizes_and_reps_are_the_suites(name, size, reps):
    case = K.get(f"rajaperf/{name}")
    assert case.default_size == size and case.reps == reps


@pytest.mark.parametrize("name, scale", [("TRIAD", 1e-3), ("IF_QUAD", 1e-4), ("HYDRO_1D", 1e-3),
                                         ("GEN_LIN_RECUR", 1e-2), ("ATAX", 1e-3), ("GEMM", 1e-3),
                                         ("FDTD_2D", 1e-3), ("VOL3D", 1e-3), ("FIR", 1e-4),
                                         ("LTIMES", 1e-3)])
def test_checksum_scale_factors(name, scale):
    case = K.get(f"rajaperf/{name}")
    assert _case.SUITE[name].scale == scale
    out = case.reference(case.make_inputs(case.small_size, 0))
    key = {"FDTD_2D": "hz"}.get(name, sorted(out)[0])
    # the case's checksum applies the factor (one output checksummed for these kernels)
    if name in ("TRIAD", "HYDRO_1D", "ATAX", "GEMM", "FDTD_2D", "VOL3D", "FIR", "LTIMES"):
        assert case.checksum(out) == pytest.approx(checksum(out[key]) * scale, rel=1e-15)
    # away from the default size the suite scales by default problem / problem
    if _case.SUITE[name].problem is not None:
        p = _case.SUITE[name].problem
        assert _case.scale_at(name, case.small_size) == pytest.approx(
            scale * p(case.default_size) / p(case.small_size))


def test_vol3d_domain_covers_the_suites_zone_range():
    dom = Domain(100, 3)
    assert (dom.jp, dom.kp, dom.nnalls) == (104, 104 * 104, 104 ** 3)
    assert dom.lpz + 1 - dom.fpz == 1_103_022            # ~1.10M zones, ghosts included
    inp = apps._vol3d_in(4)
    assert inp["x"][1] - inp["x"][0] == pytest.approx(0.3)
    assert inp["y"][Domain(4, 3).jp] == pytest.approx(0.2)
    assert inp["z"][Domain(4, 3).kp] == pytest.approx(0.1)


def test_vol3d_uses_the_suites_four_terms(reference):
    # the repeated term vanishes on boxes, so distort the mesh: then the port follows the
    # suite's four-term sum and differs from the three-term hexahedron volume
    case = K.get("rajaperf/VOL3D")
    inp = case.make_inputs(3, 0)
    rng = np.random.default_rng(3)
    for k in ("x", "y", "z"):
        inp[k] = inp[k] + 0.01 * rng.standard_normal(inp[k].shape)
    vol = case.run(inp)["vol"]
    dom = Domain(3, 3)
    np.testing.assert_allclose(vol, apps.vol3d_suite_ref(inp["x"], inp["y"], inp["z"], dom),
                               rtol=1e-12, atol=1e-15)
    three = apps.vol3d_ref(*(inp[k].reshape(dom.jp, dom.jp, dom.jp) for k in ("x", "y", "z")))
    k, j, i = np.unravel_index(dom.real_zones(), (dom.jp,) * 3)
    assert not np.allclose(vol[dom.real_zones()], three[k, j, i], rtol=1e-6)


def test_del_dot_vec_2d_inputs_are_the_suites():
    inp = apps._ddv_in(8)
    dom = Domain(8, 2)
    assert inp["x"].size == dom.nnalls == (8 + 4) ** 2
    assert inp["x"][1] == pytest.approx(0.2) and inp["y"][dom.jp] == pytest.approx(0.1)
    i = np.arange(3)
    assert inp["fx"][:3] == pytest.approx(0.1 * (i + 1.1) / (i + 1.12345))   # 3 constants first
    assert inp["fy"][:3] == pytest.approx(0.2 * (i + 1.1) / (i + 1.12345))
    assert inp["zones"][0] == dom.imin + dom.imin * dom.jp and inp["zones"].size == 64


def test_del_dot_vec_2d_writes_zeros_off_the_zone_list(reference):
    case = K.get("rajaperf/DEL_DOT_VEC_2D")
    inp = case.make_inputs(6, 0)
    div = case.run(inp)["div"]
    off = np.ones(div.size, bool)
    off[inp["zones"]] = False
    assert np.all(div[off] == 0.0) and np.all(div[~off] != 0.0)


def test_fir_input_is_the_standard_initialisation():
    inp = apps._fir_in(100)
    i = np.arange(100)
    np.testing.assert_allclose(inp["inp"], 0.2 * (i + 1.1) / (i + 1.12345), rtol=1e-15)


def test_mvt_is_the_suites_code(reference):
    case = K.get("rajaperf/MVT")
    inp = case.make_inputs(16, 0)
    x2 = case.run(inp)["x2"]
    np.testing.assert_allclose(x2, inp["x2"] + inp["y2"] * inp["a"].sum(axis=0), rtol=1e-13)


def test_2mm_sums_start_at_beta(reference):
    case = K.get("rajaperf/2MM")
    inp = case.make_inputs((5, 6, 7, 4), 0)
    inp["d"] = np.full_like(inp["d"], 123.0)            # D's old value must not matter
    d = case.run(inp)["d"]
    tmp = inp["alpha"] * inp["a"] @ inp["b"]
    np.testing.assert_allclose(d, inp["beta"] + tmp @ inp["c"], rtol=1e-13)


def test_int_predict_checksum_subtracts_the_initial_value():
    case = K.get("rajaperf/INT_PREDICT")
    inp = case.make_inputs(50, 0)
    out = case.reference(inp)
    assert case.checksum(out) == pytest.approx(checksum(out["px"][:50] - lcals.PX_INIT))


@pytest.mark.parametrize("name", ["PRESSURE", "ENERGY"])
def test_fused_variant_equals_the_suites_structure(name, reference):
    base, fused = K.get(f"rajaperf/{name}"), K.get(f"rajaperf/{name}_FUSED")
    inp = base.make_inputs(base.small_size, 0)
    a, b = base.run(inp), fused.run(inp)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("name", ["DAXPY", "DIFF_PREDICT", "GEN_LIN_RECUR", "MVT", "JACOBI_1D",
                                  "JACOBI_2D", "HEAT_3D", "FDTD_2D", "LTIMES"])
def test_in_place_kernels_checksum_after_all_reps(name, reference):
    case = K.get(f"rajaperf/{name}")
    inp = case.make_inputs(case.small_size, 0)
    one = case.checksum(_case.after_reps(name, inp, reps=1))
    three = case.checksum(_case.after_reps(name, inp, reps=3))
    assert relative_diff(one, three) > 1e-9           # later reps change the data
    kaio_three = case.checksum(_case.after_reps(name, inp, reps=3, variant="run"))
    assert relative_diff(three, kaio_three) <= 1e-11


@pytest.mark.parametrize("name, key", [("DOT", "dot"), ("TRAP_INT", "sumx"), ("REDUCE3_INT", "vsum")])
def test_reductions_accumulate_over_reps(name, key, reference):
    case = K.get(f"rajaperf/{name}")
    inp = case.make_inputs(case.small_size, 0)
    one = _case.after_reps(name, inp, reps=1)[key]
    assert float(_case.after_reps(name, inp, reps=4)[key]) == pytest.approx(4 * float(one))


def test_checksum_is_summed_over_passes():
    one = _case.suite_checksum("DAXPY", size=1000, reps=5)
    assert _case.suite_checksum("DAXPY", size=1000, reps=5, npasses=3) == pytest.approx(3 * one)


@pytest.mark.parametrize("name", ["PRESSURE", "PRESSURE_FUSED", "ENERGY", "ENERGY_FUSED", "VOL3D",
                                  "DEL_DOT_VEC_2D", "FIR"])
def test_bench_closures_launch(name, reference):
    case = K.get(f"rajaperf/{name}")
    case.bench(case.make_inputs(case.small_size, 0))()
