"""The library GEMM (kaio.kernels.ml.gemm) and the fragment features it is built from: warp-tile
fragments (m=/n=/k=), kaio.mma.copy_tile, the store epilogue (alpha, beta, edge masking), and
their PTX (ldmatrix, cp.async), executed in tests/ptx_sim.py where the GPU is absent.

Tolerance: each output element is an f32 sum of K exact products; the reference adds in
ascending k (one rounding per addition) and a matrix unit in its own order, so against the
float64 product the error is at most 2 * K * 2**-24 * (|alpha| |A| @ |B| + |beta| |C|) plus the
output's own rounding (docs/language.md, "Matrix fragments"). Small integer data make every sum
exact, so there the kernels must match bit for bit.
"""
import numpy as np
import pytest
from test_mma import _sim
from test_ptx import ptxas

import kaio
from kaio.kernels.ml import gemm as G

NP = {"f16": np.float16, "bf16": kaio.bf16.storage_np, "f32": np.float32}


def _operands(m, n, k, ta, tb, dt, out, seed=0, ints=False):
    g = np.random.default_rng(seed)
    draw = (lambda s: g.integers(-3, 4, s).astype(np.float32)) if ints else \
        (lambda s: g.standard_normal(s).astype(np.float32))
    a = draw((k, m) if ta else (m, k)).astype(NP[dt])
    b = draw((n, k) if tb else (k, n)).astype(NP[dt])
    c = draw((m, n)).astype(NP[out])
    return a, b, c


def _bound(a, b, c, alpha, beta, ta, tb, out, k):
    a64, b64 = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    mag = abs(alpha) * ((a64.T if ta else a64) @ (b64.T if tb else b64)) \
        + abs(beta) * np.abs(c.astype(np.float64))
    rounding = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}[out]
    return 2 * (k + 2) * 2.0**-24 * mag + rounding * mag + 1e-30


SHAPES = [  # m, n, k, trans_a, trans_b: edge tiles on every axis, K not a multiple of 64 or 8
    (130, 136, 70, False, False),
    (64, 40, 96, True, True),
    (33, 129, 64, True, False),
    (100, 128, 50, False, True),
    (1, 1, 1, False, False),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dt,out", [("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("bf16", "bf16")])
def test_gemm_matches_the_float64_product(backend, shape, dt, out):
    m, n, k, ta, tb = shape
    if backend != "reference" and shape != SHAPES[0] and (dt, out) != ("f16", "f32"):
        pytest.skip("GPU: one shape per dtype pair, all shapes for f16 -> f32")
    a, b, c0 = _operands(m, n, k, ta, tb, dt, out, seed=hash(shape) % 1000)
    c = c0.copy()
    got = G.gemm(a, b, c, alpha=0.75, beta=-1.5, trans_a=ta, trans_b=tb)
    assert got is c
    exact = G.gemm_ref(a, b, c0, 0.75, -1.5, ta, tb)
    err = np.abs(c.astype(np.float64) - exact)
    bound = _bound(a, b, c0, 0.75, -1.5, ta, tb, out, k)
    assert (err <= bound).all(), f"max error {err.max()} (bound there {bound.flat[err.argmax()]})"


@pytest.mark.parametrize("tile", list(G.TILES))
def test_every_declared_tiling_computes_the_product(backend, tile):
    """Each configuration the autotuner may pick, with edge tiles and both transposes."""
    a, b, c0 = _operands(150, 70, 40, True, True, "f16", "f32", seed=7, ints=True)
    c = c0.copy()
    from kaio.passes.limits import MAX_STATIC_SHARED, shared_layout
    kern = G.gemm_kernel("f16", "f32", True, True, tile)
    if (backend == "cuda" and kaio.config.settings().cuda_codegen == "llvm"
            and shared_layout(kern.specialize_ir({}))[1] > MAX_STATIC_SHARED):
        # the LLVM path keeps shared arrays static (48 KiB); the autotuner skips such tilings
        with pytest.raises(kaio.CompileError, match="LLVM path"):
            kern[G.launch_config(150, 70, tile)](a, b, c, 1.0, 1.0)
        return
    w = kaio.backends.get_backend().warp_size
    G.gemm_kernel("f16", "f32", True, True, tile, w)[G.launch_config(150, 70, tile, w)](a, b, c, 1.0, 1.0)
    np.testing.assert_array_equal(c, c0 + a.T.astype(np.float32) @ b.T.astype(np.float32))


def test_gemm_new_output_and_beta_zero_never_reads_c(backend):
    a, b, _ = _operands(40, 24, 32, False, False, "f16", "f32", seed=3, ints=True)
    c = np.full((40, 24), np.nan, np.float32)         # beta = 0: the NaNs must not leak
    G.gemm(a, b, c, alpha=2.0, beta=0.0)
    np.testing.assert_array_equal(c, 2.0 * (a.astype(np.float32) @ b.astype(np.float32)))
    fresh = G.gemm(a, b, out_dtype=kaio.f16)
    assert fresh.dtype == np.float16 and fresh.shape == (40, 24)
    np.testing.assert_array_equal(fresh, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16))


def test_gemm_refuses_bad_arguments_before_launch():
    a = np.zeros((8, 16), np.float16)
    with pytest.raises(kaio.errors.ArgumentTypeError, match="f16 or both bf16"):
        G.gemm(a, np.zeros((16, 8), np.float32))
    with pytest.raises(kaio.errors.ArgumentValueError, match="inner sizes differ"):
        G.gemm(a, np.zeros((15, 8), np.float16))
    c = np.zeros((8, 9), np.float32)
    with pytest.raises(kaio.errors.ArgumentValueError, match=r"expected \(8, 8\)"):
        G.gemm(a, np.zeros((16, 8), np.float16), c)
    assert not c.any()


# --- the PTX: ldmatrix, cp.async, mma.sync; assembled, and executed in the simulator -------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_gemm_ptx_uses_ldmatrix_cp_async_and_assembles(arch, ta, tb):
    ptx = G.gemm_kernel("f16", "f32", ta, tb).emit("ptx", arch)
    assert ptx.count("mma.sync.aligned.m16n8k16") == 2 * 2 * 16   # two half-steps, 2 k16, 4x4 tiles
    assert ".trans" in ptx                                          # one operand per layout
    assert "ldmatrix.sync.aligned.m8n8.x4" in ptx and "cp.async.cg.shared.global" in ptx
    assert ptx.count("cp.async.wait_all") == ptx.count("bar.sync")
    ptxas(ptx, arch)


@pytest.mark.parametrize("ta,tb,dt,out", [(False, False, "f16", "f32"), (True, True, "bf16", "f16"),
                                          (True, False, "f16", "bf16"), (False, True, "bf16", "f32")])
def test_gemm_ptx_runs_exactly_in_the_simulator(ta, tb, dt, out):
    """One block, integer data: every sum is exact, so a misplaced lane, register, ldmatrix
    row or cp.async chunk changes the result. K = 48: a full double step and a half-empty one;
    m, n: edge tiles (masked stores); alpha/beta: the epilogue."""
    m, n, k = 24, 20, 48
    a, b, c0 = _operands(m, n, k, ta, tb, dt, out, seed=5, ints=True)
    c_ref = c0.copy()      # the current backend's (exact here, so any backend's) result
    G.gemm(a, b, c_ref, alpha=0.5, beta=2.0, trans_a=ta, trans_b=tb)
    c = c0.copy()
    _sim(G.gemm_kernel(dt, out, ta, tb), [a, b, c, 0.5, 2.0], G.launch_config(m, n)[0] + (1,),
         (G.THREADS, 1, 1))
    np.testing.assert_array_equal(c, c_ref)
    if out != "bf16":      # every value here is exact in f16 and f32
        exact = G.gemm_ref(a, b, c0, 0.5, 2.0, ta, tb).astype(NP[out])
        np.testing.assert_array_equal(c, exact)


# --- the pieces, small ----------------------------------------------------------------------------
@kaio.kernel
def staged(A: kaio.In[kaio.f16, 2], O: kaio.Raw[kaio.f16, 2], row0: kaio.i32, col0: kaio.i32):
    """copy_tile into a padded shared array, then every element back out."""
    S = kaio.shared_array(kaio.f16, (16, 40))
    kaio.mma.copy_tile(S, A, row0, col0, cols=32)
    kaio.sync()
    for e in range(kaio.thread_idx.x, 16 * 40, kaio.block_dim.x):
        O[e // 40, e % 40] = S[e // 40, e % 40]


@pytest.mark.parametrize("cols,row0,col0", [(48, 4, 8), (50, 30, 24), (64, 0, 3)])
def test_copy_tile_zero_fills_outside_the_source(backend, cols, row0, col0):
    """48 columns and col0 % 8 == 0: the 16-byte path; 50 columns or col0 = 3: element copies."""
    a = (np.arange(40 * cols) % 2000).reshape(40, cols).astype(np.float16)
    o = np.full((16, 40), -1, np.float16)
    staged[1, 64](a, o, row0, col0)
    want = np.zeros((16, 32), np.float16)
    part = a[row0:row0 + 16, col0:col0 + 32]
    want[:part.shape[0], :part.shape[1]] = part
    np.testing.assert_array_equal(o[:, :32], want)


@pytest.mark.parametrize("cols,col0", [(48, 8), (50, 3)])
def test_copy_tile_ptx_in_the_simulator(cols, col0):
    a = (np.arange(40 * cols) % 2000).reshape(40, cols).astype(np.float16)
    o = np.zeros((16, 40), np.float16)
    _sim(staged, [a, o, 30, col0], (1, 1, 1), (64, 1, 1))
    want = np.zeros((16, 32), np.float16)
    part = a[30:46, col0:col0 + 32]
    want[:part.shape[0], :part.shape[1]] = part
    np.testing.assert_array_equal(o[:, :32], want)


@kaio.kernel(block=(64,))
def staged_declared(A: kaio.In[kaio.f16, 2], O: kaio.Raw[kaio.f16, 2], row0: kaio.i32,
                    col0: kaio.i32):
    """A declared block: the 16-byte copy in rounds of 16 rows (4 chunks per row, 64 threads),
    24 rows = one full round and a half one."""
    S = kaio.shared_array(kaio.f16, (24, 40))
    kaio.mma.copy_tile(S, A, row0, col0, cols=32)
    kaio.sync()
    for e in range(kaio.thread_idx.x, 24 * 40, 64):
        O[e // 40, e % 40] = S[e // 40, e % 40]


@pytest.mark.parametrize("row0,col0", [(8, 8), (0, 16), (50, 8), (8, 24), (60, 40)])
@pytest.mark.parametrize("where", ["backend", "ptx"])
def test_declared_block_copy_rounds(backend, where, row0, col0):
    """Inside the 64 x 48 source (no predicates: (8, 8), (0, 16)) and across its bottom, right
    or both edges (zero fill): the strength-reduced rounds and the half round place every
    chunk, in kaio's PTX (simulator) and on the current backend."""
    a = (np.arange(64 * 48) % 2000).reshape(64, 48).astype(np.float16)
    o = np.full((24, 40), -1, np.float16)
    if where == "ptx":
        _sim(staged_declared, [a, o, row0, col0], (1, 1, 1), (64, 1, 1))
    else:
        staged_declared[1, 64](a, o, row0, col0)
    want = np.zeros((24, 32), np.float16)
    part = a[row0:row0 + 24, col0:col0 + 32]
    want[:part.shape[0], :part.shape[1]] = part
    np.testing.assert_array_equal(o[:, :32], want)


def test_declared_block_copy_is_strength_reduced():
    """One address computation per copy, then a constant per round: the shared side an
    immediate offset, the global side one 64-bit add; both the unpredicated and the
    zero-filling form are present, and %ntid is never read (``.reqntid``)."""
    ptx = staged_declared.emit("ptx", "sm_90")
    assert ".reqntid 64, 1, 1" in ptx and "%ntid" not in ptx
    assert ptx.count("cp.async.cg.shared.global") == 2 + 2      # two rounds, each form
    assert "+1280], [" in ptx                                    # round 2: 16 rows x 80 bytes


def test_copy_tile_in_a_loop_without_a_barrier_is_refused():
    with pytest.raises(kaio.CompileError, match="copy_tile in a loop without kaio.sync"):
        @kaio.kernel
        def racy(A: kaio.In[kaio.f16, 2], O: kaio.Raw[kaio.f32, 2]):
            S = kaio.shared_array(kaio.f16, (16, 16))
            for k0 in range(0, A.shape[1], 16):
                kaio.mma.copy_tile(S, A, 0, k0)
            kaio.sync()
            O[0, 0] = kaio.f32(S[0, 0])
        racy.ir   # noqa: B018


def test_copy_tile_then_read_without_a_barrier_is_a_race():
    with pytest.raises(kaio.CompileError, match="shared array 'S'"):
        @kaio.kernel
        def early(A: kaio.In[kaio.f16, 2], O: kaio.Raw[kaio.f16, 2]):
            S = kaio.shared_array(kaio.f16, (16, 16))
            kaio.mma.copy_tile(S, A, 0, 0)
            O[0, kaio.thread_idx.x] = S[0, kaio.thread_idx.x]
        early.ir   # noqa: B018


def test_fragment_sizes_must_chain_and_be_whole_tiles():
    with pytest.raises(kaio.CompileError, match="not a positive multiple of 16"):
        @kaio.kernel
        def odd(A: kaio.In[kaio.f16, 2], C: kaio.Raw[kaio.f32, 2]):
            kaio.mma.store(C, 0, 0, kaio.mma.fill(kaio.f32, 0.0, m=24))
        odd.ir   # noqa: B018
    with pytest.raises(kaio.CompileError, match="do not chain"):
        @kaio.kernel
        def unchained(A: kaio.In[kaio.f16, 2], B: kaio.In[kaio.f16, 2], C: kaio.Raw[kaio.f32, 2]):
            acc = kaio.mma.fill(kaio.f32, 0.0, m=32, n=16)
            acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0, m=16), kaio.mma.load_b(B, 0, 0, n=16), acc)
            kaio.mma.store(C, 0, 0, acc)
        unchained.ir   # noqa: B018


def test_torch_style_bf16_cuda_array_interface_is_read_as_bf16():
    """torch exports bfloat16 through __cuda_array_interface__ as the opaque '|V2'; the
    exporter's own dtype says what it is."""
    from kaio.backends.launch_checks import check_cuda_array_interface

    class Tensor:
        dtype = "torch.bfloat16"
    cai = {"shape": (4, 8), "typestr": "|V2", "data": (0, False), "version": 3}
    dtype, shape = check_cuda_array_interface(cai, "x", Tensor())
    assert dtype == kaio.bf16.storage_np and shape == (4, 8)
    dtype, _ = check_cuda_array_interface(cai, "x")     # no exporter: stays opaque (refused later)
    assert dtype.kind == "V"


# --- shared arrays past 48 KiB: kaio's PTX moves them to dynamic shared memory -------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_90"])
def test_large_shared_tiles_live_in_dynamic_shared_memory(arch):
    from kaio.backends.cuda import _own_shared
    k = G.gemm_kernel("f16", "f32", False, False, "128x128x64_w64x32")   # 2 x 35,840 bytes
    ptx = k.emit("ptx", arch)
    assert _own_shared(ptx) == 2 * (128 * 72 + 64 * 136) * 2
    assert ".extern .shared .align 16 .b8 dyn_smem[]" in ptx and ".shared .align 16 .b8 arr" not in ptx
    ptxas(ptx, arch)
    small = G.gemm_kernel("f16", "f32", False, False).emit("ptx", arch)
    assert _own_shared(small) == 0 and ".shared .align 16 .b8 arr" in small


def test_shared_limits_are_per_target():
    @kaio.kernel
    def big(A: kaio.In[kaio.f32, 1], O: kaio.Raw[kaio.f32, 1]):
        S = kaio.shared_array(kaio.f32, (30000,))      # 120,000 bytes
        S[kaio.thread_idx.x] = A[kaio.thread_idx.x]
        kaio.sync()
        O[kaio.thread_idx.x] = S[kaio.thread_idx.x]
    assert "dyn_smem" in big.emit("ptx", "sm_90")               # 227 KiB allowed on sm_90
    with pytest.raises(kaio.CompileError, match="101,376 bytes"):
        big.emit("ptx", "sm_86")
    with pytest.raises(kaio.CompileError, match="LLVM path"):
        big.emit("llvm", "nvptx64-sm_90")
    with pytest.raises(kaio.CompileError, match="65,536 bytes"):
        big.emit("llvm", "gfx942")


def test_gemm_on_device_arrays_returns_a_device_array(backend):
    a, b, _ = _operands(20, 12, 16, False, False, "bf16", "f32", seed=9, ints=True)
    out = G.gemm(kaio.to_device(a), kaio.to_device(b))
    assert not isinstance(out, np.ndarray) and out.shape == (20, 12)
    np.testing.assert_array_equal(out.to_host(), a.astype(np.float32) @ b.astype(np.float32))


# --- multi-stage pipelines: kaio.mma.copy_wait and the in-flight check (regions.async_copies) ------
def _pipeline(pending: int, sync_after_wait=True, extra_copy=False):
    """Three 16 x 16 stages of A in flight; each step multiplies one into C with B."""
    @kaio.kernel
    def pipe(A: kaio.In[kaio.f16, 2], B: kaio.In[kaio.f16, 2], C: kaio.Raw[kaio.f32, 2]):
        S0 = kaio.shared_array(kaio.f16, (16, 16))
        S1 = kaio.shared_array(kaio.f16, (16, 16))
        S2 = kaio.shared_array(kaio.f16, (16, 16))
        bufs = (S0, S1, S2)
        acc = kaio.mma.fill(kaio.f32, 0.0)
        b = kaio.mma.load_b(B, 0, 0)
        kaio.mma.copy_tile(S0, A, 0, 0)
        kaio.mma.copy_tile(S1, A, 0, 16)
        for k0 in range(0, A.shape[1], 48):
            for s in kaio.static_range(3):
                kaio.mma.copy_wait(pending=pending)
                if sync_after_wait:
                    kaio.sync()
                kaio.mma.copy_tile(bufs[(s + 2) % 3], A, 0, k0 + (s + 2) * 16)
                if extra_copy:
                    kaio.mma.copy_tile(bufs[(s + 2) % 3], A, 0, k0)
                acc = kaio.mma.mma(kaio.mma.load_a(bufs[s], 0, 0), b, acc)
        kaio.mma.store(C, 0, 0, acc)
    return pipe


def test_a_three_stage_pipeline_is_proved_and_computes(backend):
    a = (np.arange(16 * 96) % 7).reshape(16, 96).astype(np.float16)
    b = (np.arange(16 * 8) % 5).reshape(16, 8).astype(np.float16)
    c = np.zeros((16, 8), np.float32)
    _pipeline(1)[1, 32](a, b, c)
    want = sum(a[:, j:j + 16].astype(np.float32) for j in range(0, 96, 16)) @ b.astype(np.float32)
    np.testing.assert_array_equal(c, want)


@pytest.mark.parametrize("kind,kw,match", [
    ("reads a step still in flight", {"pending": 2}, "reads shared array .* may still be in flight"),
    ("no barrier after the wait", {"pending": 1, "sync_after_wait": False}, "unpublished|shared array"),
    ("a second copy into a buffer in flight", {"pending": 1, "extra_copy": True},
     "copy into shared array|in flight at the end|the tile copy into `S2`"),
])
def test_pipelines_that_touch_copies_in_flight_are_refused(kind, kw, match):
    with pytest.raises(kaio.CompileError, match=match):
        _pipeline(**kw).ir   # noqa: B018 (compiling is the test)


def test_pipelined_gemm_ptx_waits_by_group():
    ptx = G.gemm_kernel("f16", "f32", False, False, "128x128x64_w64x32_s3").emit("ptx", "sm_90")
    assert "cp.async.wait_group 2" in ptx and "cp.async.wait_all" not in ptx
    assert ptx.count("cp.async.commit_group") == 2 * 2 + 2 * 3    # prologue + three unrolled steps
    ptxas(ptx, "sm_90")


def test_pipelined_gemm_runs_exactly_in_the_simulator():
    m, n, k = 20, 24, 200           # two trips of the three-step loop, the last mostly zeros
    a, b, c0 = _operands(m, n, k, False, True, "f16", "f32", seed=6, ints=True)
    c = c0.copy()
    tile = "128x128x64_w64x32_s3"
    _sim(G.gemm_kernel("f16", "f32", False, True, tile), [a, b, c, 1.0, 1.0],
         G.launch_config(m, n, tile, 32)[0] + (1,), (256, 1, 1))
    np.testing.assert_array_equal(c, c0 + a.astype(np.float32) @ b.T.astype(np.float32))


def test_conformance_holds_float_fragment_kernels_to_a_bound_not_bitwise():
    """Matrix units sum in their own order: the GEMM's derived rule is its stated bound, and the
    report names the order (the H200 run of 19:29 had it bitwise, and failing by 2 ulps)."""
    from kaio.conformance.cases import from_library
    from kaio.conformance.derive import derive_rule, features, order_reason
    from kaio.kernels import get
    case = from_library(get("ml/gemm_f16"))
    launched = [(G.gemm_kernel("f16", "f32", False, False).specialize_ir({}), None)]
    found = features(launched)
    assert found["matrix_units"] == ["f16"]
    rule = derive_rule(case, launched, found)
    assert rule.kind != "bitwise" and "matrix-unit" in rule.why
    assert "matrix-unit accumulation order" in order_reason(case, found)
