"""kaio.mma tf32 fragments (shape m16n8k8: f32 data rounded to tf32, f32 accumulators): the
reference's rounding (kaio.semantics.tf32: nearest, ties away from zero) and accumulation, on
32- and 64-lane warps; kaio's PTX (cvt.rna.tf32.f32 then mma.sync m16n8k8 tf32) executed in
tests/ptx_sim.py and assembled by ptxas for sm_80 and sm_90; the LLVM paths (NVVM on nvptx64,
MFMA xf32 on gfx942, a refusal on gfx90a); the frontend's checks.

Exact comparisons use data whose tf32-rounded products sum exactly in any order (integers well
inside f32's 24 bits) while the rounding itself is not trivial: integers of 12 or 13 bits lose
their low bits to tf32's 11-bit significand, with ties, so a wrong rounding mode (nearest even,
truncation) or a missing conversion changes the result.
"""

import numpy as np
import pytest
from test_mma import _compile_error, _sim
from test_ptx import ptxas

import kaio
from kaio import f16, f32
from kaio.backends.reference import ReferenceBackend

TF32 = kaio.mma.m16n8k8


def _tf32_ref(x):
    """tf32 rounding written independently of kaio.semantics.tf32, on float64: nearest value
    with an 11-bit significand, ties away from zero."""
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    nz = x != 0
    e = np.floor(np.log2(np.abs(x[nz])))
    e = np.maximum(e, -126)                       # subnormals: f32's fixed exponent
    ulp = 2.0 ** (e - 10)
    q = np.abs(x[nz]) / ulp
    out[nz] = np.sign(x[nz]) * np.floor(q + 0.5) * ulp
    return out


def _big(shape, seed):
    """Integers of up to 13 bits, odd ones included: tf32 rounds most of them (2049 -> 2050)."""
    g = np.random.default_rng(seed)
    v = g.integers(-8191, 8192, shape).astype(np.float32)
    v.flat[:4] = [2049, 2051, -2049, 4097]        # ties: away from zero
    return v


def _small(shape, seed):
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float32)


def _exact(a, b, c0=0.0):
    """c0 + tf32(a) @ tf32(b), exact in float64 for the integer cases here."""
    return c0 + _tf32_ref(a) @ _tf32_ref(b)


def _check_bound(c, a, b, c0=None, gpu=False):
    """The documented bound for f32 accumulation (docs/language.md): K additions per column,
    one rounding each, around the exact sum of the tf32-rounded products."""
    a64, b64 = _tf32_ref(a), _tf32_ref(b)
    base = np.zeros(c.shape) if c0 is None else c0.astype(np.float64)
    k = a.shape[1]
    bound = k * 2.0**-24 * (np.abs(base) + np.abs(a64) @ np.abs(b64)) * (2 if gpu else 1)
    err = np.abs(c.astype(np.float64) - (base + a64 @ b64))
    assert (err <= bound + 1e-30).all(), f"max error {err.max()} over bound {bound.max()}"


# --- kernels ---------------------------------------------------------------------------------
@kaio.kernel
def accumulate(A: kaio.In[f32, 2], B: kaio.In[f32, 2], C0: kaio.In[f32, 2], C: kaio.Raw[f32, 2]):
    """Global element loads: one warp per 16 x 8 tile of C, C = C0 + A @ B over K in steps of 8."""
    warp = kaio.thread_idx.x // kaio.warp_size
    nw = kaio.block_dim.x // kaio.warp_size
    row0 = kaio.block_idx.x * 16
    for cb in range(0, C.shape[1], nw * 8):      # C's width: a multiple of 8 * warps
        col0 = cb + warp * 8
        acc = kaio.mma.load_acc(C0, row0, col0, shape=kaio.mma.m16n8k8)
        for k0 in range(0, A.shape[1], 8):
            acc = kaio.mma.mma(kaio.mma.load_a(A, row0, k0), kaio.mma.load_b(B, k0, col0), acc)
        kaio.mma.store(C, row0, col0, acc)


@kaio.kernel
def shared_warp_tiles(A: kaio.In[f32, 2], BT: kaio.In[f32, 2], C: kaio.Raw[f32, 2]):
    """A (32 x 16) and B held as N x K (16 x 16) staged by copy_tile; each of the two warps
    multiplies a 16 x 16 warp tile (two n-tiles, two k-steps), B read transposed."""
    sa = kaio.shared_array(f32, (32, 20))
    sb = kaio.shared_array(f32, (16, 20))
    kaio.mma.copy_tile(sa, A, 0, 0, cols=16)
    kaio.mma.copy_tile(sb, BT, 0, 0, cols=16)
    kaio.sync()
    warp = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, 0.5, n=16, shape=kaio.mma.m16n8k8)
    a = kaio.mma.load_a(sa, warp * 16, 0, k=16)
    b = kaio.mma.load_b(sb, 0, 0, trans=True, k=16, n=16)
    acc = kaio.mma.mma(a, b, acc)
    kaio.mma.store(C, warp * 16, 0, acc)


@kaio.kernel(block=32)
def shared_k_by_n(AT: kaio.In[f32, 2], B: kaio.In[f32, 2], C: kaio.Raw[f32]):
    """B held as K x N and A transposed in shared arrays; C 1-d (ld=8)."""
    sa = kaio.shared_array(f32, (8, 16))
    sb = kaio.shared_array(f32, (8, 8))
    kaio.mma.copy_tile(sa, AT, 0, 0)
    kaio.mma.copy_tile(sb, B, 0, 0)
    kaio.sync()
    acc = kaio.mma.mma(kaio.mma.load_a(sa, 0, 0, trans=True), kaio.mma.load_b(sb, 0, 0),
                       kaio.mma.fill(f32, 0.0, shape=kaio.mma.m16n8k8))
    kaio.mma.store(C, 0, 0, acc, ld=8)


@kaio.kernel
def gemm_tiles(A: kaio.In[f32, 2], B: kaio.In[f32, 2],
               C: kaio.Region[f32, 2, kaio.regions.warp_tiles((32, 32), (16, 16))],
               alpha: f32, beta: f32):
    """The docs' warp-tile GEMM on tf32: four warps, each a 16 x 16 tile of a 32 x 32 block,
    C = alpha * A @ B + beta * C proven race-free by the checker."""
    warp = kaio.thread_idx.x // kaio.warp_size
    row0 = kaio.block_idx.y * 32 + (warp // 2) * 16
    col0 = kaio.block_idx.x * 32 + (warp % 2) * 16
    acc = kaio.mma.fill(f32, 0.0, m=16, n=16, shape=kaio.mma.m16n8k8)
    for k0 in range(0, A.shape[1], 8):
        a = kaio.mma.load_a(A, row0, k0, m=16)
        acc = kaio.mma.mma(a, kaio.mma.load_b(B, k0, col0, n=16), acc)
    kaio.mma.store(C, row0, col0, acc, alpha=alpha, beta=beta)


# --- reference semantics -----------------------------------------------------------------------
def test_tf32_rounding_is_nearest_ties_away():
    x = np.array([1 + 2**-11, -(1 + 2**-11), 1 + 2**-12, 1 + 3 * 2**-11, 2049, 2051, 2053,
                  3.4028235e38, -3.4028235e38, np.inf, -np.inf, 1e-40, -2.5e-39, 0.0, -0.0],
                 np.float32)
    got = kaio.semantics.tf32(x)
    want = [1 + 2**-10, -(1 + 2**-10), 1.0, 1 + 2**-9, 2050, 2052, 2054,
            np.inf, -np.inf, np.inf, -np.inf]
    np.testing.assert_array_equal(got[:11], np.array(want, np.float32))
    np.testing.assert_array_equal(got[11:], _tf32_ref(x[11:]).astype(np.float32))
    assert np.signbit(got[-1]) and (got.view(np.uint32) & 0x1FFF == 0).all()
    assert np.isnan(kaio.semantics.tf32(np.float32(np.nan)))
    r = np.random.default_rng(0).standard_normal(10000).astype(np.float32) * 1e3
    np.testing.assert_array_equal(kaio.semantics.tf32(r), _tf32_ref(r).astype(np.float32))


@pytest.mark.parametrize("width", [32, 64])
def test_reference_rounds_inputs_and_accumulates(width):
    """A's and B's elements are rounded to tf32 before the exact products; the same bits on
    32- and 64-lane warps."""
    be = ReferenceBackend(warp_size=width)
    k = be.compile(accumulate.specialize_ir({}))
    for a, b in ((_big((32, 32), 1), _small((32, 16), 2)), (_small((32, 32), 3), _big((32, 16), 4))):
        c0 = np.random.default_rng(5).integers(-100, 100, (32, 16)).astype(np.float32)
        c = np.zeros_like(c0)
        be.launch(k, (2, 1, 1), (2 * width, 1, 1), [a, b, c0, c])
        want = _exact(a, b, c0)
        np.testing.assert_array_equal(c, want)
        assert (want != c0 + a.astype(np.float64) @ b).any()     # the rounding mattered


@pytest.mark.parametrize("width", [32, 64])
def test_reference_shared_warp_tiles_and_order(width):
    be = ReferenceBackend(warp_size=width)
    g = np.random.default_rng(6)
    a = g.standard_normal((32, 16)).astype(np.float32)
    bt = g.standard_normal((16, 16)).astype(np.float32)
    c = np.zeros((32, 16), np.float32)
    be.launch(be.compile(shared_warp_tiles.specialize_ir({})), (1, 1, 1), (2 * width, 1, 1),
              [a, bt, c])
    _check_bound(c, a, bt.T, c0=np.full((32, 16), 0.5))
    want = np.zeros((32, 16), np.float32)     # the documented order, from the semantics model
    for r in (0, 16):
        for cc in (0, 8):
            acc = np.full((16, 8), 0.5, np.float32)
            for k0 in (0, 8):
                acc = kaio.semantics.mma(a[r:r + 16, k0:k0 + 8],
                                         np.ascontiguousarray(bt.T[k0:k0 + 8, cc:cc + 8]), acc)
            want[r:r + 16, cc:cc + 8] = acc
    np.testing.assert_array_equal(c, want)


def test_reference_transposed_a_and_1d_store(reference):
    at, b = _big((8, 16), 7), _small((8, 8), 8)
    c = np.zeros(128, np.float32)
    shared_k_by_n[1, 32](at, b, c)
    np.testing.assert_array_equal(c.reshape(16, 8), _exact(at.T, b))


@pytest.mark.parametrize("width", [32, 64])
def test_reference_region_warp_tiles_with_epilogue(width):
    """A tf32 fragment store into a warp_tiles Region (checked race-free at compile time), with
    the BLAS epilogue: alpha * acc, then + beta * old."""
    be = ReferenceBackend(warp_size=width)
    a, b = _big((64, 24), 9), _small((24, 64), 10)
    c = np.random.default_rng(11).integers(-50, 50, (64, 64)).astype(np.float32)
    old = c.copy()
    be.launch(be.compile(gemm_tiles.specialize_ir({})), (2, 2, 1), (4 * width, 1, 1),
              [a, b, c, np.float32(2.0), np.float32(0.5)])
    np.testing.assert_array_equal(c, 2.0 * _exact(a, b) + 0.5 * old)


def test_reference_default_launch_of_warp_tiles(reference):
    a, b = _small((32, 8), 12), _big((8, 32), 13)
    c = np.zeros((32, 32), np.float32)
    gemm_tiles(a, b, c, 1.0, 0.0)
    np.testing.assert_array_equal(c, _exact(a, b))


# --- the frontend ------------------------------------------------------------------------------
def test_frontend_checks():
    @kaio.kernel
    def f32_in_f16_shape(A: kaio.In[f32, 2]):
        kaio.mma.load_a(A, 0, 0, shape=kaio.mma.m16n8k16)
    _compile_error(f32_in_f16_shape, "m16n8k16 takes no f32 multiplicands", "f32 -> f32")

    @kaio.kernel
    def default_acc(A: kaio.In[f32, 2], B: kaio.In[f32, 2], C: kaio.Raw[f32, 2]):
        acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), kaio.mma.fill(f32, 0.0))
        kaio.mma.store(C, 0, 0, acc)
    _compile_error(default_acc, "do not match", "shape=kaio.mma.m16n8k8")

    @kaio.kernel
    def mixed(A: kaio.In[f32, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
        acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0),
                           kaio.mma.fill(f32, 0.0, shape=kaio.mma.m16n8k8))
        kaio.mma.store(C, 0, 0, acc)
    _compile_error(mixed, "do not match")

    @kaio.kernel
    def bad_k(A: kaio.In[f32, 2]):
        kaio.mma.load_a(A, 0, 0, k=12)
    _compile_error(bad_k, "k=12 is not a positive multiple of 8")


# --- kaio's PTX: executed in tests/ptx_sim.py, assembled by ptxas ---------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_runs_exactly_in_the_simulator(arch):
    """Every lane and register of the m16n8k8 tf32 layout, with the rounding done by
    cvt.rna.tf32.f32: the same bits as the reference (both operands rounded in turn)."""
    for a, b in ((_big((32, 16), 14), _small((16, 16), 15)), (_small((32, 16), 16), _big((16, 16), 17))):
        c0 = np.random.default_rng(18).integers(-100, 100, (32, 16)).astype(np.float32)
        c = np.zeros_like(c0)
        _sim(accumulate, [a, b, c0, c], (2, 1, 1), (64, 1, 1), arch)
        np.testing.assert_array_equal(c, _exact(a, b, c0))


def test_ptx_shared_paths_in_the_simulator():
    """Shared-memory loads at immediate offsets (A as is and transposed, B held N x K and K x N),
    warp tiles, a 1-d store; the bound on general data."""
    g = np.random.default_rng(19)
    a = g.standard_normal((32, 16)).astype(np.float32)
    bt = g.standard_normal((16, 16)).astype(np.float32)
    c = np.zeros((32, 16), np.float32)
    _sim(shared_warp_tiles, [a, bt, c], (1, 1, 1), (64, 1, 1))
    _check_bound(c, a, bt.T, c0=np.full((32, 16), 0.5))
    ai, bti = _big((32, 16), 20), _small((16, 16), 21)
    _sim(shared_warp_tiles, [ai, bti, c], (1, 1, 1), (64, 1, 1))
    np.testing.assert_array_equal(c, _exact(ai, bti.T, 0.5))
    at, b = _small((8, 16), 22), _big((8, 8), 23)
    c1 = np.zeros(128, np.float32)
    _sim(shared_k_by_n, [at, b, c1], (1, 1, 1), (32, 1, 1), "sm_90")
    np.testing.assert_array_equal(c1.reshape(16, 8), _exact(at.T, b))


def test_ptx_region_epilogue_in_the_simulator():
    a, b = _big((64, 24), 24), _small((24, 64), 25)
    c = np.random.default_rng(26).integers(-50, 50, (64, 64)).astype(np.float32)
    old = c.copy()
    _sim(gemm_tiles, [a, b, c, np.float32(2.0), np.float32(0.5)], (2, 2, 1), (128, 1, 1))
    np.testing.assert_array_equal(c, 2.0 * _exact(a, b) + 0.5 * old)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_instructions_and_ptxas(arch):
    ptx = shared_warp_tiles.emit("ptx", arch)
    # 2 n-tiles x 2 k-steps; every A/B element converted once; no ldmatrix for 32-bit elements
    assert ptx.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 4
    assert ptx.count("cvt.rna.tf32.f32") == 2 * 4 + 4 * 2
    assert "ldmatrix" not in ptx and "ld.shared.f32" in ptx
    ptxas(ptx, arch)
    ptxas(accumulate.emit("ptx", arch), arch)
    ptxas(gemm_tiles.emit("ptx", arch), arch)


# --- the LLVM paths: NVVM (run in the simulator), AMD MFMA xf32 (built and validated) -----------
def test_nvvm_runs_exactly_in_the_simulator():
    """The NVVM lowering (llvm.nvvm.f2tf32.rna on load, llvm.nvvm.mma.m16n8k8.row.col.tf32):
    the reference's bits; _sim_llvm assembles each kernel with ptxas first."""
    from test_mma_llvm import _sim_llvm
    ir = accumulate.emit("llvm", "nvptx64-sm_80")
    assert "@llvm.nvvm.mma.m16n8k8.row.col.tf32(" in ir and "@llvm.nvvm.f2tf32.rna(" in ir
    a, b = _big((32, 16), 27), _small((16, 16), 28)
    c0 = np.random.default_rng(29).integers(-100, 100, (32, 16)).astype(np.float32)
    c = np.zeros_like(c0)
    _sim_llvm(accumulate, [a, b, c0, c], (2, 1, 1), (64, 1, 1))
    np.testing.assert_array_equal(c, _exact(a, b, c0))
    ai, bti = _small((32, 16), 30), _big((16, 16), 31)
    c = np.zeros((32, 16), np.float32)
    _sim_llvm(shared_warp_tiles, [ai, bti, c], (1, 1, 1), (64, 1, 1), "sm_90")
    np.testing.assert_array_equal(c, _exact(ai, bti.T, 0.5))
    at, b = _big((8, 16), 32), _small((8, 8), 33)
    c1 = np.zeros(128, np.float32)
    _sim_llvm(shared_k_by_n, [at, b, c1], (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(c1.reshape(16, 8), _exact(at.T, b))
    a, b = _big((32, 16), 34), _small((16, 32), 35)
    c = np.random.default_rng(36).integers(-50, 50, (32, 32)).astype(np.float32)
    old = c.copy()
    _sim_llvm(gemm_tiles, [a, b, c, np.float32(2.0), np.float32(0.5)], (1, 1, 1), (128, 1, 1),
              "sm_90")
    np.testing.assert_array_equal(c, 2.0 * _exact(a, b) + 0.5 * old)


def _mfma_xf32_hw(a, b, c):
    """v_mfma_f32_16x16x8_xf32 for 64 lanes, two f32 of A and B and four of C per lane (the
    16x16 MFMA pattern with two k per lane): A's (i, k) in lane i + 16 * (k // 2), item k % 2;
    B's (k, j) in lane j + 16 * (k // 2), item k % 2; C/D's (i, j) in lane j + 16 * (i // 4),
    item i % 4."""
    A = np.array([[a[i + 16 * (k // 2), k % 2] for k in range(8)] for i in range(16)])
    B = np.array([[b[j + 16 * (k // 2), k % 2] for j in range(16)] for k in range(8)])
    C = np.array([[c[j + 16 * (i // 4), i % 4] for j in range(16)] for i in range(16)])
    D = C + A @ B
    return np.array([[D[4 * (ln // 16) + i, ln % 16] for i in range(4)] for ln in range(64)])


@pytest.mark.parametrize("scheme", ["nvvm", "mfma16"])
@pytest.mark.parametrize("tn", [1, 2, 3])
def test_lane_mapping_reconstructs_the_product(scheme, tn):
    """kaio's lane tables for tf32 (backends/llvm_mma.py) against models of the instructions:
    mma.m16n8k8 .tf32 as the PTX ISA tabulates it (tests/ptx_sim.py's) and the xf32 MFMA."""
    from ptx_sim import _mma_m16n8k8_tf32, from_bits, to_bits
    from test_mma_llvm import _distribute, _gather

    from kaio.backends import llvm_mma as M
    from kaio.ir.types import frag_type
    ta, tb, tc = (frag_type(r, TF32, f32, s) for r, s in (("a", (2, 2)), ("b", (2, tn)), ("acc", (2, tn))))
    g = np.random.default_rng(37 + tn)
    A, B, C = (g.integers(-64, 64, t.dims).astype(np.float64) for t in (ta, tb, tc))
    a, b, c = (_distribute(scheme, t, x) for t, x in ((ta, A), (tb, B), (tc, C)))
    na, nb = (len(M._elems(scheme, t)) for t in (ta, tb))
    for pa, pb, pc in M.mma_plan(scheme, ta, tb, tc):
        ops = (a[:, pa * na:(pa + 1) * na], b[:, pb * nb:(pb + 1) * nb], c[:, pc * 4:pc * 4 + 4])
        if scheme == "mfma16":
            c[:, pc * 4:pc * 4 + 4] = _mfma_xf32_hw(*ops)
            continue
        bits = [[[to_bits(float(x), "f32") for x in row] for row in op] for op in ops]
        reqs = [(None, "mma", "sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", lane,
                 [bits[0][lane], bits[1][lane], bits[2][lane]]) for lane in range(32)]
        c[:, pc * 4:pc * 4 + 4] = [[from_bits(w, "f32") for w in d] for d in _mma_m16n8k8_tf32(reqs)]
    np.testing.assert_array_equal(_gather(scheme, tc, c), C + A @ B)


def test_gfx942_code_objects_build_and_validate_and_gfx90a_refuses():
    """Not executed on AMD hardware: built, validated (registers, LDS), the MFMA present."""
    for k in (accumulate, shared_warp_tiles, shared_k_by_n, gemm_tiles):
        head = k.emit("report", "gfx942").splitlines()[0]
        assert "[gfx942] ok:" in head, head
        assert "v_mfma_f32_16x16x8_xf32" in k.emit("asm", "gfx942")
    ir = accumulate.emit("llvm", "gfx942")
    assert "@llvm.amdgcn.mfma.f32.16x16x8.xf32(" in ir and "nvvm" not in ir
    with pytest.raises(kaio.CompileError, match="m16n8k8 .*not supported on target gfx90a.*xf32"):
        accumulate.emit("llvm", "gfx90a")


# --- the conformance row ---------------------------------------------------------------------------
def test_conformance_row_runs_compiles_and_is_refused_on_gfx90a():
    """feature/fragment_gemm_tf32: identical to its numpy model (kaio.semantics.mma on the f32
    data, which rounds to tf32) on the interpreter at both widths, compiled and validated for
    kaio's PTX, the NVVM path and gfx942, "not available on this target" on gfx90a; its bound
    is tight enough to catch a product that skipped the tf32 rounding."""
    from kaio.conformance.cases import all_cases, select
    from kaio.conformance.rules import compare
    from kaio.conformance.runner import Options, run_suite
    case = select(all_cases(), ["feature/fragment_gemm_tf32"])[0]
    assert case.rule.kind == "rel" and case.rule.atol > 0 and case.order_dependent
    inp = case.make_inputs("small")
    want = case.expected(inp, 32)
    unrounded = {"c": (inp["a"].astype(np.float64) @ inp["b"]).astype(np.float32)}
    assert not compare(unrounded, want, case.rule).ok
    cols = ["reference", "reference-w64", "sm_80", "sm_89-llvm", "gfx942", "gfx90a"]
    rep = run_suite(Options(cols, cases=[case], log=lambda m: None))
    cells = rep.rows[0].cells
    assert cells["reference"].status == cells["reference-w64"].status == "identical"
    for col in ("sm_80", "sm_89-llvm", "gfx942"):
        assert cells[col].status == "compiled", (col, cells[col].detail)
    assert cells["gfx90a"].status == "not-available", cells["gfx90a"].detail
    assert "not available on this target" in cells["gfx90a"].detail
    assert rep.failing == []


# --- on an NVIDIA GPU (the lead's device run: scripts/device_run.sh gpu) ----------------------------
@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("codegen", ["ptx", "llvm"])
def test_tf32_fragments_on_cuda(monkeypatch, codegen):
    """Both code generators on the tensor cores: bit-exact where every sum is exact (so the
    rounding is cvt.rna's, ties away), the documented GPU bound on random data."""
    from kaio import backends as be
    from kaio.backends.cuda import CudaBackend
    monkeypatch.setitem(be._instances, "cuda", CudaBackend(codegen=codegen))
    monkeypatch.setattr(be, "_current", "cuda")
    for a, b in ((_big((64, 48), 40), _small((48, 32), 41)), (_small((64, 48), 42), _big((48, 32), 43))):
        c0 = np.random.default_rng(44).integers(-100, 100, (64, 32)).astype(np.float32)
        c = np.zeros_like(c0)
        accumulate[4, 64](a, b, c0, c)
        np.testing.assert_array_equal(c, _exact(a, b, c0))
    a, b = _big((64, 40), 45), _small((40, 96), 46)
    c = np.random.default_rng(47).integers(-50, 50, (64, 96)).astype(np.float32)
    old = c.copy()
    gemm_tiles(a, b, c, 2.0, 0.5)
    np.testing.assert_array_equal(c, 2.0 * _exact(a, b) + 0.5 * old)
    g = np.random.default_rng(48)
    a, bt = g.standard_normal((32, 16)).astype(np.float32), g.standard_normal((16, 16)).astype(np.float32)
    c = np.zeros((32, 16), np.float32)
    shared_warp_tiles[1, 64](a, bt, c)
    _check_bound(c, a, bt.T, c0=np.full((32, 16), 0.5), gpu=True)
