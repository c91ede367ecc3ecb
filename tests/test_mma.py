"""kaio.mma warp matrix fragments: reference semantics against numpy (f16 and bf16 products,
f32 accumulation in the documented order), a tiled GEMM on every backend present, the checks
that refuse what is not proved (divergent fragment ops, racy shared tiles, Region stores), and
the PTX (mma.sync, assembled by ptxas for sm_80 and sm_90). On a CUDA GPU the tiled GEMM runs
on whichever NVIDIA path KAIO_CUDA_CODEGEN selects (the LLVM path's own tests:
tests/test_mma_llvm.py).

Tolerance against a float64 product: the reference adds in f32, one rounding per addition, so
|C - A @ B| <= K * 2**-24 * (|A| @ |B|) elementwise; a matrix unit adds in another order and
precision, so on a GPU the bound is doubled (docs/language.md, "Matrix fragments").
"""

import numpy as np
import pytest
from test_ptx import ptxas

import kaio
from kaio import bf16, f16, f32
from kaio.backends.reference import ReferenceBackend

DTYPES = {"f16": (f16, np.float16), "bf16": (bf16, kaio.bf16.storage_np)}


def _inputs(m, n, k, npdt, seed=0):
    g = np.random.default_rng(seed)
    a = g.standard_normal((m, k)).astype(np.float32).astype(npdt)
    b = g.standard_normal((k, n)).astype(np.float32).astype(npdt)
    return a, b


def _check_product(c, a, b, gpu=False):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = a.shape[1] * 2.0**-24 * (np.abs(a64) @ np.abs(b64)) * (2 if gpu else 1)
    err = np.abs(c.astype(np.float64) - a64 @ b64)
    assert (err <= bound + 1e-30).all(), f"max error {err.max()} over bound {bound.max()}"


# --- kernels ---------------------------------------------------------------------------------
@kaio.kernel
def tile(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
    acc = kaio.mma.fill(f32, 0.0)
    acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), acc)
    kaio.mma.store(C, 0, 0, acc)


@kaio.kernel
def tile_bf16(A: kaio.In[bf16, 2], B: kaio.In[bf16, 2], C: kaio.Raw[f32, 2]):
    acc = kaio.mma.fill(f32, 0.0)
    acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), acc)
    kaio.mma.store(C, 0, 0, acc)


def _gemm(dtype, out):
    @kaio.kernel
    def gemm(A: kaio.In[dtype, 2], B: kaio.In[dtype, 2], C: kaio.Raw[out, 2]):
        """Block x: a 16-row strip of C; each warp of the block one 16 x 8 tile per step."""
        nw = kaio.block_dim.x // kaio.warp_size
        warp = kaio.thread_idx.x // kaio.warp_size
        row0 = kaio.block_idx.x * 16
        for cb in range(0, C.shape[1], 8 * nw):
            col0 = cb + warp * 8
            acc = kaio.mma.fill(f32, 0.0)
            for k0 in range(0, A.shape[1], 16):
                a = kaio.mma.load_a(A, row0, k0)
                b = kaio.mma.load_b(B, k0, col0)
                acc = kaio.mma.mma(a, b, acc)
            kaio.mma.store(C, row0, col0, acc)
    return gemm


GEMM = {(d, o): _gemm(DTYPES[d][0], o) for d in DTYPES for o in (f32, f16)}


@kaio.kernel
def gemm_bt_accumulate(A: kaio.In[f16, 2], BT: kaio.In[f16, 2], C0: kaio.In[f32, 2],
                       C: kaio.Raw[f32, 2]):
    """C = C0 + A @ BT.T: B read transposed, the accumulator loaded from C0."""
    row0 = kaio.block_idx.x * 16
    col0 = kaio.block_idx.y * 8
    acc = kaio.mma.load_acc(C0, row0, col0)
    for k0 in range(0, A.shape[1], 16):
        acc = kaio.mma.mma(kaio.mma.load_a(A, row0, k0), kaio.mma.load_b(BT, col0, k0, trans=True),
                           acc)
    kaio.mma.store(C, row0, col0, acc)


@kaio.kernel(block=32)
def shared_tiles(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32]):
    """A's 16 x 16 tile staged in 1-d shared memory by the block, then read by the warp (ld=16);
    C is 1-d too (ld=8)."""
    sa = kaio.shared_array(f16, 256)
    t = kaio.thread_idx.x
    for i in range(t, 256, kaio.block_dim.x):
        sa[i] = A[i // 16, i % 16]
    kaio.sync()
    acc = kaio.mma.mma(kaio.mma.load_a(sa, 0, 0, ld=16), kaio.mma.load_b(B, 0, 0),
                       kaio.mma.fill(f32, 0.0))
    kaio.mma.store(C, 0, 0, acc, ld=8)


# --- reference semantics -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_single_tile_matches_numpy(reference, name):
    dt, npdt = DTYPES[name]
    a, b = _inputs(16, 8, 16, npdt)
    c = np.full((16, 8), np.nan, np.float32)
    (tile if name == "f16" else tile_bf16)[1, 32](a, b, c)
    _check_product(c, a, b)
    ints = np.arange(-8, 8, dtype=np.float32)     # small integers: every sum exact
    ai, bi = np.resize(ints, (16, 16)).astype(npdt), np.resize(ints[::-1], (16, 8)).astype(npdt)
    (tile if name == "f16" else tile_bf16)[1, 32](ai, bi, c)
    np.testing.assert_array_equal(c, ai.astype(np.float32) @ bi.astype(np.float32))


def test_accumulation_order_is_ascending_k_in_f32(reference):
    """C = 2**24 plus sixteen products 1 * 1: each f32 addition rounds 2**24 + 1 back to 2**24
    (ties to even), so the documented order gives exactly 2**24 (an exact sum would be
    2**24 + 16)."""
    a = np.ones((16, 16), np.float16)
    bt = np.ones((8, 16), np.float16)
    c0 = np.full((16, 8), 2.0**24, np.float32)
    c = np.zeros((16, 8), np.float32)
    gemm_bt_accumulate[(1, 1), 32](a, bt, c0, c)
    assert (c == 2.0**24).all()


def test_transposed_b_and_loaded_accumulator(reference):
    a, b = _inputs(32, 16, 48, np.float16, seed=3)
    c0 = np.random.default_rng(4).standard_normal((32, 16)).astype(np.float32)
    c = np.zeros((32, 16), np.float32)
    gemm_bt_accumulate[(2, 2), 32](a, np.ascontiguousarray(b.T), c0, c)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = (49 * 2.0**-24) * (np.abs(c0) + np.abs(a64) @ np.abs(b64))
    assert (np.abs(c - (c0 + a64 @ b64)) <= bound).all()


def test_shared_staging_and_1d_store_with_ld(reference):
    a, b = _inputs(16, 8, 16, np.float16, seed=5)
    c = np.zeros(128, np.float32)
    shared_tiles[1, 32](a, b, c)
    _check_product(c.reshape(16, 8), a, b)


@pytest.mark.parametrize("width", [32, 64])
def test_gemm_is_the_same_on_every_warp_width(width):
    """The layout belongs to the target: 32- and 64-lane warps give bit-identical results."""
    a, b = _inputs(64, 64, 64, np.float16, seed=1)
    be = ReferenceBackend(warp_size=width)
    k = GEMM["f16", f32]
    compiled = be.compile(k.specialize_ir({}))
    c = np.zeros((64, 64), np.float32)
    be.launch(compiled, (4, 1, 1), (128, 1, 1), [a, b, c])
    _check_product(c, a, b)
    ref = np.zeros((64, 64), np.float32)
    for r in range(0, 64, 16):   # the documented order, tile by tile, from the semantics model
        for cc in range(0, 64, 8):
            acc = np.zeros((16, 8), np.float32)
            for k0 in range(0, 64, 16):
                acc = kaio.semantics.mma(a[r:r + 16, k0:k0 + 16], b[k0:k0 + 16, cc:cc + 8], acc)
            ref[r:r + 16, cc:cc + 8] = acc
    np.testing.assert_array_equal(c, ref)


# --- every backend (the GPU runs of these are the lead's) ----------------------------------------
@pytest.mark.parametrize("name", ["f16", "bf16"])
@pytest.mark.parametrize("out", ["f32", "f16"])
def test_tiled_gemm_64(backend, name, out):
    dt, npdt = DTYPES[name]
    a, b = _inputs(64, 64, 64, npdt, seed=2)
    o = kaio.dtypes.from_name(out)
    c = np.zeros((64, 64), o.storage_np)
    GEMM[name, o][4, 128](a, b, c)
    if out == "f32":
        _check_product(c, a, b, gpu=backend != "reference")
    else:   # one more rounding, to f16
        exact = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(c.astype(np.float64), exact, rtol=2**-10,
                                   atol=64 * 2.0**-23 * np.abs(exact).max())


# --- what the checker refuses --------------------------------------------------------------------
def _compile_error(fn, *match):
    with pytest.raises(kaio.CompileError) as e:
        fn.specialize_ir({})
    for m in match:
        assert m in str(e.value), str(e.value)
    return e.value


def test_fragment_op_under_thread_dependent_branch_is_refused():
    @kaio.kernel
    def split(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
        acc = kaio.mma.fill(f32, 0.0)
        if kaio.thread_idx.x < 16:
            acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), acc)
        kaio.mma.store(C, 0, 0, acc)
    err = _compile_error(split, "warp-collective", "depends on the thread")
    assert err.kind == "divergent-collective"


def test_shared_tile_without_barrier_is_a_race():
    @kaio.kernel(block=64)
    def racy(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
        sa = kaio.shared_array(f16, 256)
        t = kaio.thread_idx.x
        for i in range(t, 256, kaio.block_dim.x):
            sa[i] = A[i // 16, i % 16]
        # RACE: no kaio.sync() between the block's writes and the warp's tile read
        acc = kaio.mma.mma(kaio.mma.load_a(sa, 0, 0, ld=16), kaio.mma.load_b(B, 0, 0),
                           kaio.mma.fill(f32, 0.0))
        kaio.mma.store(C, 0, 0, acc)
    _compile_error(racy, "shared array 'sa'")


def test_fragment_store_into_a_per_thread_region_is_refused():
    """A fragment store is a warp's write: proved only under kaio.regions.warp_tiles
    (tests/test_fragment_regions.py), refused under a partition that gives elements to threads."""
    @kaio.kernel
    def into_region(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Region[f32, 2]):
        acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0),
                           kaio.mma.fill(f32, 0.0))
        kaio.mma.store(C, 0, 0, acc)
    err = _compile_error(into_region, "kaio.mma.store", "elementwise()", "warp_tiles")
    assert err.kind == "fragment-partition"


def test_wrong_fragment_kinds_are_refused():
    @kaio.kernel
    def swapped(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
        acc = kaio.mma.mma(kaio.mma.load_b(B, 0, 0), kaio.mma.load_a(A, 0, 0),
                           kaio.mma.fill(f32, 0.0))
        kaio.mma.store(C, 0, 0, acc)
    _compile_error(swapped, "first argument of kaio.mma.mma must be an A fragment")

    @kaio.kernel
    def arith(A: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
        acc = kaio.mma.fill(f32, 0.0)
        acc = acc + 1.0
    _compile_error(arith, "matrix fragment")

    @kaio.kernel
    def f64_inputs(A: kaio.In[kaio.f64, 2], C: kaio.Raw[f32, 2]):
        kaio.mma.load_a(A, 0, 0)         # (f32 data is tf32's: tests/test_mma_tf32.py)
    _compile_error(f64_inputs, "holds f64", "bf16/f16")


def test_partial_warp_is_a_runtime_error(reference):
    a, b = _inputs(16, 8, 16, np.float16)
    c = np.zeros((16, 8), np.float32)
    with pytest.raises(kaio.KaioError, match="not a multiple of the warp width"):
        tile[1, 48](a, b, c)


def test_llvm_paths_without_a_fragment_lowering_refuse_by_name():
    """NVVM (nvptx64) and MFMA (gfx90a, gfx942) lower fragments (tests/test_mma_llvm.py);
    gfx1100 (WMMA) does not, and says so at the op."""
    for target, intrinsic in (("nvptx64-sm_80", "@llvm.nvvm.mma."), ("gfx942", "@llvm.amdgcn.mfma.")):
        assert intrinsic in tile.emit("llvm", target)
    with pytest.raises(kaio.CompileError, match="not supported on target gfx1100"):
        tile.emit("llvm", "gfx1100")


# --- PTX ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("key", [("f16", "f32"), ("bf16", "f32"), ("bf16", "f16")])
def test_ptx_uses_mma_sync_and_assembles(arch, key):
    name, out = key
    ptx = GEMM[name, kaio.dtypes.from_name(out)].emit("ptx", arch)
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{name}.{name}.f32" in ptx
    if out == "f16":
        assert "cvt.rn.f16.f32" in ptx
    ptxas(ptx, arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_of_transposed_shared_and_1d_tiles_assembles(arch):
    for k in (gemm_bt_accumulate, shared_tiles):
        ptx = k.emit("ptx", arch)
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
        ptxas(ptx, arch)


# --- the PTX executed (tests/ptx_sim.py: mma.sync from the ISA's fragment tables) ----------------
def _sim(k, args, grid, block, arch="sm_80", **consts):
    """Lower ``k`` for ``arch``, assemble its PTX and run it in tests/ptx_sim.py (``args``: the
    runtime arguments, constants left out)."""
    from ptx_sim import Machine

    from kaio.backends.ptx import emit_ptx
    from kaio.backends.targets import get_target
    t = get_target(arch)
    lowered = t.run(k.specialize_ir(consts), t.options(k.options), until="lowered")["lowered"]
    ptx, abi = emit_ptx(lowered, arch)
    ptxas(ptx, arch)
    Machine(ptx).launch(args, abi, grid, block)


@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_ptx_layout_runs_exactly_in_the_simulator(name):
    """Small random integers: every sum is exact, so any lane or register misplaced by the
    loads, the packing, the mma operands or the stores changes the result."""
    dt, npdt = DTYPES[name]
    g = np.random.default_rng(11)
    a = g.integers(-4, 5, (32, 32)).astype(np.float32).astype(npdt)
    b = g.integers(-4, 5, (32, 16)).astype(np.float32).astype(npdt)
    c = np.zeros((32, 16), np.float32)
    _sim(GEMM[name, f32], [a, b, c], (2, 1, 1), (64, 1, 1))
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_ptx_transposed_accumulated_and_shared_tiles_in_the_simulator():
    g = np.random.default_rng(12)
    a = g.integers(-4, 5, (16, 32)).astype(np.float16)
    bt = g.integers(-4, 5, (8, 32)).astype(np.float16)
    c0 = g.integers(-50, 50, (16, 8)).astype(np.float32)
    c = np.zeros((16, 8), np.float32)
    _sim(gemm_bt_accumulate, [a, bt, c0, c], (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(c, c0 + a.astype(np.float32) @ bt.T.astype(np.float32))
    b = bt.T[:16].copy()
    c1 = np.zeros(128, np.float32)
    _sim(shared_tiles, [a[:, :16].copy(), b, c1], (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(c1.reshape(16, 8), a[:, :16].astype(np.float32) @ b.astype(np.float32))


@kaio.kernel
def branch_result(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2], twice: kaio.Const[bool],
                  scale_k: kaio.i32):
    """A fragment as the result of a block-uniform branch (a runtime scalar and a constant)."""
    acc = kaio.mma.fill(f32, 0.0)
    a = kaio.mma.load_a(A, 0, 0)
    b = kaio.mma.load_b(B, 0, 0)
    if scale_k > 0:
        acc = kaio.mma.mma(a, b, acc)
    else:
        acc = kaio.mma.fill(f32, -1.0)
    if twice:
        acc = kaio.mma.mma(a, b, acc)
    kaio.mma.store(C, 0, 0, acc)


@pytest.mark.parametrize("scale_k", [1, 0])
def test_fragment_as_branch_result(reference, scale_k):
    g = np.random.default_rng(13)
    a = g.integers(-4, 5, (16, 16)).astype(np.float16)
    b = g.integers(-4, 5, (16, 8)).astype(np.float16)
    prod = a.astype(np.float32) @ b.astype(np.float32)
    want = 2 * prod if scale_k else prod - 1
    c = np.zeros((16, 8), np.float32)
    branch_result[1, 32](a, b, c, True, scale_k)
    np.testing.assert_array_equal(c, want)
    c2 = np.zeros((16, 8), np.float32)
    _sim(branch_result, [a, b, c2, scale_k], (1, 1, 1), (32, 1, 1), "sm_90", twice=True)
    np.testing.assert_array_equal(c2, want)
