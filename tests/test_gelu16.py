"""The 16-bit exact GELU (kaio.kernels.ml.gelu16): its f32 error against float64 over every
finite f16 and bf16 input, the rounded results, special values, and the same bits on kaio's
PTX (ptx_sim) and the LLVM path (run on the host) as on the reference backend."""
import re

import llvm_host
import numpy as np
import pytest
from ptx_sim import Machine
from test_ptx import ptxas

import kaio.kernels as K
import kaio.kernels.ml.gelu16 as G
from kaio.backends.ptx import emit_ptx
from kaio.kernels.ml import elementwise as ew
from kaio.passes import target_pipeline
from kaio.regions import Coarsened, Elementwise

NAMES = ("f16", "bf16")
#: the stated f32 bounds (module docstring), relative, for |x| <= AMAX and |y| >= 2^-126
F32_BOUND = {"f16": 2.0 ** -17, "bf16": 2.0 ** -14.5}


@pytest.fixture(scope="module", params=NAMES)
def every_input(request):
    name = request.param
    x = G.all_finite(name)
    return name, x, G.reference(x)


def test_f32_result_within_its_stated_bound(every_input, reference):
    """x Phi(x) before the 16-bit rounding, against float64 at every finite input: within the
    bound inside the fitted range; beyond it the result underflows the 16-bit type."""
    name, x, ref = every_input
    y = G.gelu16_f32(x, name).astype(np.float64)
    xd = x.astype(np.float64)
    amax = G.L_FITS[name][0]
    inside = (np.abs(xd) <= amax) & (np.abs(ref) >= 2.0 ** -126)
    rel = np.abs(y - ref)[inside] / np.abs(ref[inside])
    assert rel.max() <= F32_BOUND[name]
    tiny = 2.0 ** -25 if name == "f16" else 2.0 ** -134     # half the smallest subnormal
    beyond = xd < -amax
    assert (np.abs(y[beyond]) < tiny).all() and (np.abs(ref[beyond]) < tiny).all()
    assert (y[xd > amax] == xd[xd > amax]).all()


def test_16_bit_results_within_half_an_ulp_of_float64(every_input, reference):
    """The library's exact GELU in f16/bf16 rounds x Phi(x) correctly except within 0.01 ulp of a
    tie (the f32 error above), and passes the registry case's tolerance at every input."""
    name, x, ref = every_input
    y = ew.gelu(x).astype(np.float64)
    assert (np.abs(y - ref) / G.ulp16(ref, name)).max() <= 0.51
    case = K.get(f"ml/gelu_exact_{name}")
    ok, ratio = case.check({"y": ew.gelu(x)}, {"y": ref})
    assert ok, ratio


@pytest.mark.parametrize("name", NAMES)
def test_special_values(name, reference):
    from kaio.kernels._launch import np_dtype
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 60000.0, -60000.0, 1e-7, -1e-7],
                 np.float32).astype(np_dtype(name))
    y = ew.gelu(x).astype(np.float64)
    assert y[0] == 0 and not np.signbit(y[0]) and y[1] == 0 and np.signbit(y[1])
    assert y[2] == np.inf and np.isnan(y[3]) and np.isnan(y[4])    # as 0.5 x (1 + erf) gives
    assert y[5] == x[5].astype(np.float64) and y[6] == 0 and np.signbit(y[6])
    assert y[7] == (x[7].astype(np.float64) / 2).astype(np_dtype(name)).astype(np.float64)


@pytest.mark.parametrize("name", NAMES)
def test_portable_code_no_division_or_hardware_approximation(name):
    """Coarsened (16 per thread: the @kaio.func helpers are elementwise), two 16-byte loads, and
    only exact IEEE f32 operations: no ex2/rcp approximations, division or f64."""
    k = ew.gelu_exact_kernel(name)
    assert k.coarsening() == 16
    ptx, _ = emit_ptx(target_pipeline(k.specialize_ir(coarsen=True), 32), "sm_90")
    assert len(re.findall(r"ld\.global(\.nc)?\.v4\.b32", ptx)) == 2
    assert not re.search(r"\.approx|div\.|\.f64|rcp\.", ptx)
    ptxas(ptx, "sm_90")


def test_same_bits_on_ptx_and_llvm_paths(every_input, reference):
    """Every finite input: the LLVM IR (run on the host) gives the reference backend's bits, and
    so does kaio's coarsened PTX (run by ptx_sim, slower: every 7th input)."""
    name, x, _ = every_input
    k = ew.gelu_exact_kernel(name)
    y = np.zeros_like(x)
    grid, block = Elementwise().launch_shape((x.size,))
    llvm_host.run_on_host(k.specialize_ir(), [x, y], (grid[0], 1, 1), (block[0], 1, 1))
    want = ew.gelu(x)
    assert y.tobytes() == want.tobytes()
    sub = x[::7].copy()
    ptx, abi = emit_ptx(target_pipeline(k.specialize_ir(coarsen=True), 32), "sm_90")
    args = [sub, np.zeros_like(sub)]
    grid, block = Coarsened(16).launch_shape((sub.size,))
    Machine(ptx).launch(args, abi, (grid[0], 1, 1), (block[0], 1, 1), 0)
    assert args[1].tobytes() == want[::7].tobytes()


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("codegen", ["ptx", "llvm"])
@pytest.mark.parametrize("name", NAMES)
def test_on_cuda_same_bits_as_the_reference(monkeypatch, codegen, name):
    """On an NVIDIA GPU, both code generators: every finite input gives the reference backend's
    bits (NaN inputs are left out: any NaN is a NaN)."""
    import kaio
    from kaio import backends as be
    from kaio.backends.cuda import CudaBackend
    x = G.all_finite(name)
    previous = be._current
    kaio.set_backend("reference")
    try:
        want = ew.gelu(x)
    finally:
        be._current = previous
    monkeypatch.setitem(be._instances, "cuda", CudaBackend(codegen=codegen))
    monkeypatch.setattr(be, "_current", "cuda")
    got = ew.gelu(x)
    nan = np.isnan(want.astype(np.float32))
    assert (np.isnan(got.astype(np.float32)) == nan).all()
    assert got[~nan].tobytes() == want[~nan].tobytes()
