"""kaio.mma.group_mma and kaio.mma.shared_tile: the block's warps multiply staged shared tiles
together (one wgmma per four warps on sm_90, ldmatrix + mma.sync elsewhere), checked against
numpy on every backend, in the PTX simulator (the swizzled layout, sm_80's path) and as PTX."""
import numpy as np
import pytest
from test_ptx import ptxas

import kaio
from kaio import f16, f32
from kaio.backends.ptx import emit_ptx
from kaio.kernels.ml import gemm as G
from kaio.passes import target_pipeline

OUT = kaio.regions.warp_tiles((64, 64), (16, 64))


def _product_kernel(ta: bool, tb: bool, n: int = 64):
    out = kaio.regions.warp_tiles((64, n), (16, n))
    a_tile = (64, 64)
    b_tile = (n, 64) if tb else (64, n)

    @kaio.kernel(block=(128,))
    def product(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Region[f32, 2, out]):
        """C's 64 x n block tile = A's 64 rows x B's n columns, K = 64, one staged step."""
        As = kaio.mma.shared_tile(f16, a_tile)
        Bs = kaio.mma.shared_tile(f16, b_tile)
        r0 = kaio.block_idx.y * 64
        c0 = kaio.block_idx.x * n
        if ta:
            kaio.mma.copy_tile(As, A, 0, r0)
        else:
            kaio.mma.copy_tile(As, A, r0, 0)
        if tb:
            kaio.mma.copy_tile(Bs, B, c0, 0)
        else:
            kaio.mma.copy_tile(Bs, B, 0, c0)
        kaio.sync()
        acc = kaio.mma.fill(f32, 0.0, m=16, n=n)
        for kk in kaio.static_range(2):     # two calls of k = 32: 4 k16 steps
            acc = kaio.mma.group_mma(As, Bs, acc, 0, 0, kk * 32, k=32, trans_a=ta, trans_b=tb)
        w = kaio.thread_idx.x // kaio.warp_size
        kaio.mma.store(C, r0 + 16 * w, c0, acc)

    return product


def _data(m, n, ta, tb, seed=0):
    g = np.random.default_rng(seed)
    a = g.integers(-4, 5, (64, m) if ta else (m, 64)).astype(np.float16)
    b = g.integers(-4, 5, (n, 64) if tb else (64, n)).astype(np.float16)
    exact = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    return a, b, exact


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_group_mma_is_each_warps_rows_of_the_product(backend, ta, tb):
    """Integer data: every sum is exact, so a misplaced row, column, swizzle chunk or warp
    changes the result (128 x 128 output: two block rows, two block columns)."""
    a, b, exact = _data(128, 128, ta, tb)
    c = np.zeros((128, 128), np.float32)
    _product_kernel(ta, tb)[(2, 2), (4 * kaio.backends.get_backend().warp_size,)](a, b, c)
    np.testing.assert_array_equal(c, exact)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_swizzled_tiles_run_exactly_in_the_ptx_simulator(ta, tb):
    """sm_80's path: copies into and ldmatrix from 128-byte-swizzled shared tiles."""
    from ptx_sim import Machine
    a, b, exact = _data(64, 64, ta, tb, seed=3)
    c = np.zeros((64, 64), np.float32)
    ptx, abi = emit_ptx(target_pipeline(_product_kernel(ta, tb).specialize_ir(), 32), "sm_80")
    assert "wgmma" not in ptx and "ldmatrix" in ptx
    Machine(ptx).launch([a, b, c], abi, (1, 1, 1), (128, 1, 1), 0)
    np.testing.assert_array_equal(c, exact)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_sm90_issues_wgmma_from_descriptors_and_assembles(ta, tb):
    k = _product_kernel(ta, tb, n=128)
    ptx = k.emit("ptx", "sm_90")
    assert ".target sm_90a" in ptx and ".version 8." in ptx
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") == 4
    assert "ldmatrix" not in ptx and "mma.sync" not in ptx     # no per-warp fragments at all
    # accumulates in place, waits once before the store, fences for the async proxy
    assert ptx.count("wgmma.wait_group.sync.aligned 0") == 1
    assert "fence.proxy.async.shared::cta" in ptx
    ptxas(ptx, "sm_90")
    ptxas(k.emit("ptx", "sm_80"), "sm_80")


def test_group_gemm_keeps_one_step_in_flight_through_each_barrier():
    """The library's warp-group GEMM: one wgmma per k16 step of every stage, the accumulator
    chained in place through the K loop (no copies of its 128 registers), one commit per step,
    and at each barrier a wait for all but the newest step (the stage refilled after it was
    read two steps before), then one full wait before the epilogue."""
    ptx = G.gemm_kernel("f16", "f32", False, False, "wg128x256x64_s4").emit("ptx", "sm_90")
    loop = ptx[ptx.index("$L_for_"):ptx.rindex("$L_endfor_")]
    assert ptx.count("wgmma.mma_async") == 16
    assert ptx.count("bar.sync") == 4 and ptx.count("wgmma.commit_group") == 4
    assert ptx.count("wgmma.wait_group.sync.aligned 1") == 4
    assert ptx.count("wgmma.wait_group.sync.aligned 0") == 1
    assert ptx.index("wgmma.wait_group.sync.aligned 0") > ptx.rindex("bra.uni $L_for_")
    assert "mov.b32 %f" not in loop
    ptxas(ptx, "sm_90")


@kaio.kernel(block=(128,))
def refill_after_read(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Region[f32, 2, OUT]):
    """One stage: the tile is refilled right after the barrier that follows its products."""
    As = kaio.mma.shared_tile(f16, (64, 64))
    Bs = kaio.mma.shared_tile(f16, (64, 64))
    acc = kaio.mma.fill(f32, 0.0, m=16, n=64)
    kaio.mma.copy_tile(Bs, B, 0, 0)
    for k0 in range(0, A.shape[1], 64):
        kaio.mma.copy_tile(As, A, 0, k0)
        kaio.sync()
        acc = kaio.mma.group_mma(As, Bs, acc, 0, 0, 0, k=64)
        kaio.sync()
    w = kaio.thread_idx.x // kaio.warp_size
    kaio.mma.store(C, kaio.block_idx.y * 64 + 16 * w, kaio.block_idx.x * 64, acc)


def test_a_tile_refilled_after_the_next_barrier_waits_for_every_wgmma(backend):
    """The copy after the second barrier (at the next trip's top) overwrites what the wgmmas
    read: that barrier waits for all of them (wait_group 0); the first then has none running."""
    ptx = refill_after_read.emit("ptx", "sm_90")
    loop = ptx[ptx.index("$L_for_"):ptx.rindex("$L_endfor_")]
    assert loop.count("wgmma.wait_group") == 1
    second = loop.split("bar.sync")[1]
    assert "wgmma.wait_group.sync.aligned 0" in second and "wgmma.mma_async" in second
    ptxas(ptx, "sm_90")
    g = np.random.default_rng(2)
    a = g.integers(-3, 4, (64, 192)).astype(np.float16)
    b = g.integers(-3, 4, (64, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    refill_after_read[(1,), (4 * kaio.backends.get_backend().warp_size,)](a, b, c)
    exact = sum(a[:, k:k + 64].astype(np.float64) @ b.astype(np.float64) for k in range(0, 192, 64))
    np.testing.assert_array_equal(c, exact)


def test_group_mma_origin_must_be_block_uniform():
    @kaio.kernel(block=(128,))
    def bad(A: kaio.In[f16, 2], C: kaio.Region[f32, 2, OUT]):
        As = kaio.mma.shared_tile(f16, (64, 64))
        kaio.mma.copy_tile(As, A, 0, 0)
        kaio.sync()
        acc = kaio.mma.fill(f32, 0.0, m=16, n=64)
        w = kaio.thread_idx.x // kaio.warp_size
        acc = kaio.mma.group_mma(As, As, acc, 16 * w, 0)
        kaio.mma.store(C, 16 * w, 0, acc)

    with pytest.raises(kaio.CompileError, match="row0 depends on the thread"):
        bad.emit("ptx", "sm_90")


@pytest.mark.parametrize("body,match", [
    ("kaio.mma.shared_tile(f16, (60, 64))", "rows a multiple of 8"),
    ("kaio.mma.shared_tile(f32, (64, 64))", "of f16 or bf16"),
    ("kaio.mma.group_mma(A, A, kaio.mma.fill(f32, 0.0, m=16, n=64), 0, 0)", "a_buf must be a 2-d"),
    ("kaio.mma.group_mma(kaio.mma.shared_tile(f16, (64, 64)), kaio.mma.shared_tile(f16, (64, 64)), "
     "kaio.mma.fill(f32, 0.0, m=32, n=64), 0, 0)", "16-row f32"),
])
def test_group_mma_refuses_bad_calls(tmp_path, body, match):
    src = tmp_path / "k.py"
    src.write_text("import kaio\nfrom kaio import f16, f32\n\n@kaio.kernel(block=(128,))\n"
                   "def k(A: kaio.In[f16, 2]):\n    x = " + body + "\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location("k_bad", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(kaio.CompileError, match=match):
        mod.k.emit("ptx", "sm_90")


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("tile", [t for t in G.TILES if t.startswith("wg")])
def test_warp_group_gemm_tilings(backend, tile, ta, tb):
    """Each warp-group tiling, every transpose, edge tiles on every axis and K not a multiple
    of a stage (integer data: exact)."""
    if backend == "cuda" and kaio.config.settings().cuda_codegen == "llvm":
        pytest.skip("the LLVM path keeps shared arrays static (48 KiB): the autotuner skips these")
    if backend == "reference" and (ta, tb) != (False, False) and tile != "wg128x256x64_s4":
        pytest.skip("reference: every transpose once")
    m, n, k = 200, 300, 136
    g = np.random.default_rng(11)
    a = g.integers(-3, 4, (k, m) if ta else (m, k)).astype(np.float16)
    b = g.integers(-3, 4, (n, k) if tb else (k, n)).astype(np.float16)
    c0 = g.integers(-3, 4, (m, n)).astype(np.float32)
    c = c0.copy()
    w = kaio.backends.get_backend().warp_size
    G.gemm_kernel("f16", "f32", ta, tb, tile, w)[G.launch_config(m, n, tile, w)](a, b, c, 1.0, 1.0)
    exact = c0 + (a.T if ta else a).astype(np.float32) @ (b.T if tb else b).astype(np.float32)
    np.testing.assert_array_equal(c, exact)


def _store_kernel(out):
    @kaio.kernel(block=(32,))
    def store_tile(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[out, 2], alpha: f32,
                   beta: f32):
        acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0, m=32), kaio.mma.load_b(B, 0, 0, n=16),
                           kaio.mma.fill(f32, 0.0, m=32, n=16))
        kaio.mma.store(C, 0, 0, acc, alpha=alpha, beta=beta)
    return store_tile


@pytest.mark.parametrize("out", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("rows,cols", [(32, 16), (31, 16), (32, 15)])
@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_accumulator_store_pairs_in_the_ptx_simulator(out, rows, cols, beta):
    """The store's fast path (the whole warp tile inside, even rows: column pairs as one
    8-byte or packed 4-byte store) and its element path (an edge) write the same values."""
    from ptx_sim import Machine
    npdt = {"f32": np.float32, "f16": np.float16, "bf16": kaio.bf16.storage_np}[out]
    g = np.random.default_rng(4)
    a = g.integers(-4, 5, (32, 16)).astype(np.float16)
    b = g.integers(-4, 5, (16, 16)).astype(np.float16)
    c0 = g.integers(-4, 5, (rows, cols)).astype(np.float32)
    k = _store_kernel(getattr(kaio, out))
    ref = [a, b, c0.astype(npdt), 0.5, beta]
    k[(1,), (32,)](*ref)                      # the reference backend
    ptx, abi = emit_ptx(target_pipeline(k.specialize_ir(), 32), "sm_80")
    assert ("st.global.v2.f32" if out == "f32" else "cvt.rn." + out + "x2.f32") in ptx
    sim = [a, b, c0.astype(npdt), 0.5, beta]
    Machine(ptx).launch(sim, abi, (1, 1, 1), (32, 1, 1), 0)
    np.testing.assert_array_equal(sim[2].view(np.uint8), ref[2].view(np.uint8))
    exact = 0.5 * (a.astype(np.float64) @ b.astype(np.float64))[:rows, :cols] + beta * c0
    np.testing.assert_array_equal(ref[2].astype(np.float64), exact)


@kaio.kernel(block=(128,))
def swizzled_elements(O: kaio.Raw[f16, 2]):
    """Element stores into a shared_tile, then each element read back transposed."""
    S = kaio.mma.shared_tile(f16, (64, 128))
    t = kaio.thread_idx.x
    for r in range(64):                 # thread t writes column t
        S[r, t] = f16((r * 128 + t) % 251)
    kaio.sync()
    for r in range(64):                 # and reads row t, every column: written by others
        O[r, t] = S[t // 2, (r + 64 * (t % 2))]


def test_shared_tile_element_access_in_the_ptx_simulator():
    """Plain loads and stores of a swizzled tile address it through the same layout (two
    64-column slabs, chunks permuted per row), so what is stored is what is read."""
    from ptx_sim import Machine
    src = (np.arange(64 * 128) % 251).reshape(64, 128)
    want = np.array([[src[t // 2, r + 64 * (t % 2)] for t in range(128)] for r in range(64)],
                    np.float16)
    out = np.zeros((64, 128), np.float16)
    swizzled_elements[(1,), (128,)](out)                  # the reference backend
    np.testing.assert_array_equal(out, want)
    ptx, abi = emit_ptx(target_pipeline(swizzled_elements.specialize_ir(), 32), "sm_90")
    assert "xor.b32" in ptx and ".align 1024" in ptx
    sim = np.zeros((64, 128), np.float16)
    Machine(ptx).launch([sim], abi, (1, 1, 1), (128, 1, 1), 0)
    np.testing.assert_array_equal(sim, want)


@kaio.kernel(block=(128,))
def group_in_a_branch(A: kaio.In[f16, 2], C: kaio.Raw[f32, 2], twice: kaio.i32):
    """A group mma under a block-uniform branch: the branch ends with every wgmma complete."""
    As = kaio.mma.shared_tile(f16, (64, 64))
    kaio.mma.copy_tile(As, A, 0, 0)
    kaio.sync()
    acc = kaio.mma.fill(f32, 0.0, m=16, n=64)
    acc = kaio.mma.group_mma(As, As, acc, 0, 0, 0, k=64, trans_b=True)
    if twice > 0:
        acc = kaio.mma.group_mma(As, As, acc, 0, 0, 0, k=64, trans_b=True)
    kaio.mma.store(C, (kaio.thread_idx.x // kaio.warp_size) * 16, 0, acc)


@pytest.mark.parametrize("twice", [0, 1])
def test_group_mma_in_a_branch(backend, twice):
    ptx = group_in_a_branch.emit("ptx", "sm_90")
    branch = ptx[ptx.index("@!%p"):]                    # from the branch on
    assert branch.index("wgmma.wait_group.sync.aligned 0") < branch.index("$L_endif")
    ptxas(ptx, "sm_90")
    g = np.random.default_rng(6)
    a = g.integers(-3, 4, (64, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    group_in_a_branch[(1,), (128,)](a, c, twice)
    rows = 16 * (128 // kaio.backends.get_backend().warp_size)
    exact = (1 + twice) * (a.astype(np.float64) @ a.astype(np.float64).T)
    np.testing.assert_array_equal(c[:rows], exact[:rows])


@kaio.kernel(block=(128,))
def group_at_a_param(A: kaio.In[f16, 2], C: kaio.Raw[f32, 2], k0: kaio.i32):
    """k0 a launch parameter: block-uniform, but no descriptor can be proved on its grid."""
    As = kaio.mma.shared_tile(f16, (64, 64))
    kaio.mma.copy_tile(As, A, 0, 0)
    kaio.sync()
    acc = kaio.mma.group_mma(As, As, kaio.mma.fill(f32, 0.0, m=16, n=64), 0, 0, k0,
                             trans_b=True)
    kaio.mma.store(C, (kaio.thread_idx.x // kaio.warp_size) * 16, 0, acc)


@kaio.kernel
def group_undeclared_block(A: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
    """No declared block: it may launch with part of a warp group."""
    As = kaio.mma.shared_tile(f16, (64, 64))
    kaio.mma.copy_tile(As, A, 0, 0)
    kaio.sync()
    acc = kaio.mma.group_mma(As, As, kaio.mma.fill(f32, 0.0, m=16, n=64), 0, 0, 0,
                             trans_b=True)
    kaio.mma.store(C, (kaio.thread_idx.x // kaio.warp_size) * 16, 0, acc)


@pytest.mark.parametrize("k0", [0, 8, 48])
def test_group_mma_off_the_descriptor_grid_takes_each_warps_path(backend, k0):
    """A runtime k0 (8 would start a descriptor off a k16 step), or an undeclared block (maybe
    part of a warp group): each warp's ldmatrix + mma.sync, exact for any origin, no wgmma."""
    for k in (group_at_a_param, group_undeclared_block):
        ptx = k.emit("ptx", "sm_90")
        assert "wgmma" not in ptx and "mma.sync" in ptx and ".target sm_90\n" in ptx
    g = np.random.default_rng(8)
    a = g.integers(-3, 4, (64, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    group_at_a_param[(1,), (128,)](a, c, k0)
    rows = 16 * (128 // kaio.backends.get_backend().warp_size)
    exact = a[:, k0:k0 + 16].astype(np.float64) @ a[:, k0:k0 + 16].astype(np.float64).T
    np.testing.assert_array_equal(c[:rows], exact[:rows])


def test_copy_into_a_swizzled_tile_without_a_declared_block_in_the_ptx_simulator():
    """The copy's loop form (no declared block to unroll by) addresses the swizzle too."""
    from ptx_sim import Machine
    g = np.random.default_rng(9)
    a = g.integers(-3, 4, (64, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    ptx, abi = emit_ptx(target_pipeline(group_undeclared_block.specialize_ir(), 32), "sm_80")
    Machine(ptx).launch([a, c], abi, (1, 1, 1), (128, 1, 1), 0)
    exact = a[:, :16].astype(np.float64) @ a[:, :16].astype(np.float64).T
    np.testing.assert_array_equal(c, exact)
