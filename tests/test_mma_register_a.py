"""The register-A forms: kaio.mma.load_a_int4 (an A fragment of int4 weights in the W4A16
layout, read transposed), kaio.mma.store(..., trans=True) (the accumulator stored transposed)
and kaio.mma.group_mma(a_fragment, b_buf, acc, col0, k0) (on sm_90 a wgmma with A from
registers). Together: y = x @ W computed as (W^T x^T)^T, the int4 weights as the 64-row A of a
warp group and the activations as its shared B. Small random integers keep every sum exact, so
a misplaced nibble, lane, register or element changes the result; each kernel runs on every
available backend (the reference in CI), in the PTX simulator and on the LLVM nvptx path.
"""
import re

import numpy as np
import pytest
from test_mma import _sim
from test_mma_int4 import pack
from test_mma_llvm import _sim_llvm
from test_ptx import ptxas

import kaio
from kaio import f16, f32

BF16 = kaio.bf16.storage_np
NP = {"f16": np.float16, "bf16": BF16, "f32": np.float32}
OUT = kaio.regions.warp_tiles((64, 64), (16, 64))


def _warp():
    return kaio.backends.get_backend().warp_size


# --- load_a_int4: A[r, c] = nibble c % 2 of packed[row0 + c // 2, col0 + r] ------------------

def _a_global(dt, m, k, n0):
    @kaio.kernel
    def a_int4_global(p: kaio.In[kaio.u8, 2], x: kaio.In[dt, 2], y: kaio.Raw[f32, 2]):
        """y[m, 16] = W[:, n0:n0+m]^T @ x, the weights read straight from global memory."""
        acc = kaio.mma.fill(f32, 0.0, m=m, n=16)
        for k0 in range(0, x.shape[0], k):
            a = kaio.mma.load_a_int4(p, k0 // 2, n0, dt, m=m, k=k)
            acc = kaio.mma.mma(a, kaio.mma.load_b(x, k0, 0, k=k, n=16), acc)
        kaio.mma.store(y, 0, 0, acc)
    return a_int4_global


def _a_shared(dt):
    @kaio.kernel
    def a_int4_shared(p: kaio.In[kaio.u8, 2], x: kaio.In[dt, 2], y: kaio.Raw[f32, 2]):
        """Two warps, 16 weight columns each: the packed tile staged in shared memory by
        copy_tile (rows padded to 48 bytes), a k=32 fragment per step."""
        ps = kaio.shared_array(kaio.u8, (16, 48))
        w = kaio.thread_idx.x // kaio.warp_size
        acc = kaio.mma.fill(f32, 0.0, m=16, n=16)
        for k0 in range(0, x.shape[0], 32):
            kaio.mma.copy_tile(ps, p, k0 // 2, 0, cols=32)
            kaio.sync()
            a = kaio.mma.load_a_int4(ps, 0, 16 * w, dt, m=16, k=32)
            acc = kaio.mma.mma(a, kaio.mma.load_b(x, k0, 0, k=32, n=16), acc)
            kaio.sync()
        kaio.mma.store(y, 16 * w, 0, acc)
    return a_int4_shared


@kaio.kernel
def a_int4_flat(p: kaio.In[kaio.i8], x: kaio.In[f16, 2], y: kaio.Raw[f32, 2], ld: kaio.i32):
    """The packed weights as a flat i8 buffer with ld= (defaults m=16, k=16), columns 8..24."""
    acc = kaio.mma.fill(f32, 0.0)
    for k0 in range(0, x.shape[0], 16):
        a = kaio.mma.load_a_int4(p, k0 // 2, 8, f16, ld=ld)
        acc = kaio.mma.mma(a, kaio.mma.load_b(x, k0, 0), acc)
    kaio.mma.store(y, 0, 0, acc)


A_CASES = {   # name: (kernel, dtype, K, N, x columns, n0, rows of y, warps)
    "global_f16_m16k16": (_a_global(f16, 16, 16, 0), "f16", 64, 16, 16, 0, 16, 1),
    "global_bf16_m32k32": (_a_global(kaio.bf16, 32, 32, 16), "bf16", 96, 48, 16, 16, 32, 1),
    "global_f16_m32k16": (_a_global(f16, 32, 16, 8), "f16", 48, 40, 16, 8, 32, 1),
    "shared_f16": (_a_shared(f16), "f16", 96, 32, 16, 0, 32, 2),
    "shared_bf16": (_a_shared(kaio.bf16), "bf16", 64, 32, 16, 0, 32, 2),
    "flat_i8": (a_int4_flat, "f16", 48, 40, 8, 8, 16, 1),
}


def _a_case(name, warp=32):
    k, dt, K, N, nx, n0, rows, nw = A_CASES[name]
    g = np.random.default_rng(sorted(A_CASES).index(name))
    q = g.integers(-8, 8, (K, N))
    x = g.integers(-3, 4, (K, nx)).astype(np.float32).astype(NP[dt])
    p = pack(q)
    want = q[:, n0:n0 + rows].T.astype(np.float64) @ x.astype(np.float64)
    y = np.zeros((rows, nx), np.float32)
    args = [p.view(np.int8).ravel(), x, y, N] if name == "flat_i8" else [p, x, y]
    return k, args, (1, 1, 1), (nw * warp, 1, 1), y, want


@pytest.mark.parametrize("name", sorted(A_CASES))
def test_load_a_int4_exact_on_every_backend(backend, name):
    k, args, grid, block, y, want = _a_case(name, _warp())     # every warp of the case
    k[grid[:1], block[:1]](*args)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(A_CASES))
def test_load_a_int4_in_the_ptx_simulator(arch, name):
    k, args, grid, block, y, want = _a_case(name)
    _sim(k, args, grid, block, arch=arch)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("name", sorted(A_CASES))
def test_load_a_int4_on_the_llvm_nvptx_path(name):
    k, args, grid, block, y, want = _a_case(name)
    _sim_llvm(k, args, grid, block)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("name", sorted(A_CASES))
def test_load_a_int4_builds_for_amd(target, name):
    k = A_CASES[name][0]
    report = k.emit("report", target)
    assert f"[{target}] ok:" in report.splitlines()[0] and "error" not in report, report
    assert re.search(r"v_mfma_f32_16x16x16_?(f16|bf16)", k.emit("asm", target))


# --- store(..., trans=True): acc (i, j) -> buf[row0 + j, col0 + i] ----------------------------

def _store_t(out):
    @kaio.kernel
    def store_trans(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[out, 2], r0: kaio.i32,
                    c0: kaio.i32):
        acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0, m=32), kaio.mma.load_b(B, 0, 0, n=16),
                           kaio.mma.fill(f32, 0.0, m=32, n=16))
        kaio.mma.store(C, r0, c0, acc, trans=True)
    return store_trans


STORE_T = {o: _store_t(getattr(kaio, o)) for o in ("f32", "f16", "bf16")}
EDGES = [((16, 32), 0, 0), ((15, 31), 0, 0), ((20, 40), 8, 12), ((24, 40), 3, 5)]
SENTINEL = -77.0


def _store_case(out, shape, r0, c0):
    g = np.random.default_rng(5)
    a = g.integers(-4, 5, (32, 16)).astype(np.float16)
    b = g.integers(-4, 5, (16, 16)).astype(np.float16)
    prod = a.astype(np.float64) @ b.astype(np.float64)            # 32 x 16
    want = np.full(shape, SENTINEL)
    for i in range(32):
        for j in range(16):
            if r0 + j < shape[0] and c0 + i < shape[1]:
                want[r0 + j, c0 + i] = prod[i, j]
    c = np.full(shape, SENTINEL, np.float32).astype(NP[out])
    return [a, b, c, r0, c0], c, want


@pytest.mark.parametrize("out", sorted(STORE_T))
@pytest.mark.parametrize("shape,r0,c0", EDGES)
def test_store_trans_exact_on_every_backend(backend, out, shape, r0, c0):
    """Inside elements land transposed; the skipped ones keep the sentinel."""
    args, c, want = _store_case(out, shape, r0, c0)
    STORE_T[out][(1,), (_warp(),)](*args)
    np.testing.assert_array_equal(c.astype(np.float64), want)


@pytest.mark.parametrize("path", ["sm_80", "sm_90", "llvm"])
@pytest.mark.parametrize("out", sorted(STORE_T))
@pytest.mark.parametrize("shape,r0,c0", EDGES)
def test_store_trans_in_the_ptx_simulator(path, out, shape, r0, c0):
    args, c, want = _store_case(out, shape, r0, c0)
    if path == "llvm":
        _sim_llvm(STORE_T[out], args, (1, 1, 1), (32, 1, 1))
    else:
        _sim(STORE_T[out], args, (1, 1, 1), (32, 1, 1), arch=path)
    np.testing.assert_array_equal(c.astype(np.float64), want)


# --- group_mma(a_fragment, b_buf, acc, col0, k0): y = x @ W as (W^T x^T)^T --------------------

def _w4a16(dt):
    @kaio.kernel(block=(128,))
    def w4a16_group(x: kaio.In[dt, 2], p: kaio.In[kaio.u8, 2], y: kaio.Raw[f32, 2]):
        """Block (bx, by): y[64 by : +64, 64 bx : +64]; warp w the 16 weight columns n0: its A
        the transposed int4 weights, B the block's 64 rows of x staged as a shared tile."""
        Xs = kaio.mma.shared_tile(dt, (64, 64))
        m0 = kaio.block_idx.y * 64
        n0 = kaio.block_idx.x * 64 + 16 * (kaio.thread_idx.x // kaio.warp_size)
        tmp = kaio.mma.fill(f32, 0.0, m=16, n=64)
        for k0 in range(0, x.shape[1], 64):
            kaio.mma.copy_tile(Xs, x, m0, k0)
            kaio.sync()
            for kk in kaio.static_range(4):
                a = kaio.mma.load_a_int4(p, k0 // 2 + kk * 8, n0, dt, m=16, k=16)
                tmp = kaio.mma.group_mma(a, Xs, tmp, 0, kk * 16, trans_b=True)
            kaio.sync()
        kaio.mma.store(y, m0, n0, tmp, trans=True)
    return w4a16_group


W4A16 = {"f16": _w4a16(f16), "bf16": _w4a16(kaio.bf16)}


@kaio.kernel(block=(128,))
def fragment_a_plain_b(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
    """A k=32 fragment from load_a, B held k x n (no trans_b) at column 64: C = A @ B[:, 64:]."""
    Bs = kaio.mma.shared_tile(f16, (64, 128))
    w = kaio.thread_idx.x // kaio.warp_size
    kaio.mma.copy_tile(Bs, B, 0, 0)
    kaio.sync()
    acc = kaio.mma.fill(f32, 0.0, m=16, n=64)
    for kk in kaio.static_range(2):
        a = kaio.mma.load_a(A, 16 * w, kk * 32, m=16, k=32)
        acc = kaio.mma.group_mma(a, Bs, acc, col0=64, k0=kk * 32)
    kaio.mma.store(C, 16 * w, 0, acc)


@kaio.kernel(block=(128,))
def fragment_at_a_param(x: kaio.In[f16, 2], p: kaio.In[kaio.u8, 2], y: kaio.Raw[f32, 2],
                        k0: kaio.i32):
    """k0 a launch parameter: block-uniform, but no descriptor can be proved on its grid."""
    Xs = kaio.mma.shared_tile(f16, (64, 64))
    kaio.mma.copy_tile(Xs, x, 0, 0)
    kaio.sync()
    n0 = 16 * (kaio.thread_idx.x // kaio.warp_size)
    a = kaio.mma.load_a_int4(p, k0 // 2, n0, f16)
    acc = kaio.mma.group_mma(a, Xs, kaio.mma.fill(f32, 0.0, m=16, n=64), 0, k0, trans_b=True)
    kaio.mma.store(y, 0, n0, acc, trans=True)


def _w4a16_case(dt, M, N, K, seed=0, k0=0, k=None):
    """x [M, K], int4 W [K, N]: y = x[:, k0:k0+k] @ W[k0:k0+k] (k: all of K)."""
    g = np.random.default_rng(seed)
    q = g.integers(-8, 8, (K, N))
    x = g.integers(-3, 4, (M, K)).astype(np.float32).astype(NP[dt])
    y = np.zeros((M, N), np.float32)
    s = slice(k0, K if k is None else k0 + k)
    return [x, pack(q), y], y, x[:, s].astype(np.float64) @ q[s].astype(np.float64)


def _plain_case():
    g = np.random.default_rng(7)
    a = g.integers(-3, 4, (64, 64)).astype(np.float16)
    b = g.integers(-3, 4, (64, 128)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    return [a, b, c], c, a.astype(np.float64) @ b[:, 64:].astype(np.float64)


@pytest.mark.parametrize("dt", sorted(W4A16))
def test_group_mma_int4_fragment_exact_on_every_backend(backend, dt):
    """M = 100 (an edge block row: copy_tile's zeros, the store's skipped rows), N = 128 (two
    block columns), K = 192 (three staged steps)."""
    args, y, want = _w4a16_case(dt, 100, 128, 192)
    W4A16[dt][(2, 2), (128,)](*args)
    cols = np.arange(128) % 64 < 16 * (128 // _warp())      # 64-lane warps: two per block
    want[:, ~cols] = 0
    np.testing.assert_array_equal(y, want)


def test_group_mma_plain_fragment_exact_on_every_backend(backend):
    args, c, want = _plain_case()
    fragment_a_plain_b[(1,), (128,)](*args)
    rows = 16 * (128 // _warp())
    np.testing.assert_array_equal(c[:rows], want[:rows])


@pytest.mark.parametrize("path", ["sm_80", "llvm"])
def test_group_mma_fragment_forms_in_the_simulator(path):
    """sm_80 and the LLVM path: each warp's own mma.sync (B from shared, A the fragment)."""
    cases = [(W4A16["f16"], *_w4a16_case("f16", 64, 64, 128, seed=1)),
             (fragment_a_plain_b, *_plain_case())]
    for k, args, out, want in cases:
        if path == "llvm":
            _sim_llvm(k, args, (1, 1, 1), (128, 1, 1))
        else:
            ptx = k.emit("ptx", "sm_80")
            assert "wgmma" not in ptx and "mma.sync" in ptx
            _sim(k, args, (1, 1, 1), (128, 1, 1), arch="sm_80")
        np.testing.assert_array_equal(out, want)


REGISTER_A = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.(bf16|f16)\.\1\s*"
                        r"\{[^}]*\},\s*\{\s*%r\d+(?:\s*,\s*%r\d+){3}\s*\},\s*%rd\d+\s*,")


@pytest.mark.parametrize("name", ["f16", "bf16", "plain"])
def test_sm90_issues_wgmma_with_register_a_and_assembles(name):
    k = fragment_a_plain_b if name == "plain" else W4A16[name]
    ptx = k.emit("ptx", "sm_90")
    assert ".target sm_90a" in ptx
    issued = [ln for ln in ptx.splitlines() if "wgmma.mma_async" in ln]
    assert len(issued) == 4 and all(REGISTER_A.search(ln) for ln in issued), issued
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx     # B by descriptor, A in registers
    done = ptx.rindex("wgmma.wait_group.sync.aligned 0")    # every product complete before the
    assert ptx.rindex("wgmma.mma_async") < done < ptx.index("st.global")      # store reads it
    ptxas(ptx, "sm_90")
    ptxas(k.emit("ptx", "sm_80"), "sm_80")


def _param_case(k0):
    args, y, want = _w4a16_case("f16", 64, 64, 64, seed=k0, k0=k0, k=16)
    return [*args, k0], y, want


@pytest.mark.parametrize("k0", [0, 8, 48])
def test_group_mma_fragment_off_the_descriptor_grid(backend, k0):
    """A runtime k0 (8: off a k16 step): each warp's mma.sync on sm_90 too, run in the
    simulator there, and exact on every backend."""
    ptx = fragment_at_a_param.emit("ptx", "sm_90")
    assert "wgmma" not in ptx and "mma.sync" in ptx
    args, y, want = _param_case(k0)
    fragment_at_a_param[(1,), (128,)](*args)
    want[:, 16 * (128 // _warp()):] = 0
    np.testing.assert_array_equal(y, want)
    if backend == "reference":
        args, y, want = _param_case(k0)
        _sim(fragment_at_a_param, args, (1, 1, 1), (128, 1, 1), arch="sm_90")
        np.testing.assert_array_equal(y, want)


def test_group_mma_fragment_builds_for_amd():
    for k in (W4A16["f16"], fragment_a_plain_b):
        report = k.emit("report", "gfx942")
        assert "[gfx942] ok:" in report.splitlines()[0] and "error" not in report, report


# --- refusals -----------------------------------------------------------------------------

def test_group_mma_refuses_a_b_fragment():
    with pytest.raises(kaio.CompileError, match=r"kaio\.mma\.group_mma.* got frag<b"):
        @kaio.kernel(block=(128,))
        def b_first(B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
            Bs = kaio.mma.shared_tile(f16, (64, 64))
            kaio.mma.copy_tile(Bs, B, 0, 0)
            kaio.sync()
            b = kaio.mma.load_b(B, 0, 0, k=16, n=16)
            acc = kaio.mma.group_mma(b, Bs, kaio.mma.fill(f32, 0.0, m=16, n=64), 0, 0)
            kaio.mma.store(C, 16 * (kaio.thread_idx.x // kaio.warp_size), 0, acc)
        b_first.emit("ptx", "sm_90")
    with pytest.raises(kaio.CompileError, match=r"a must be a 16-row f16 or bf16 A fragment"):
        @kaio.kernel(block=(128,))
        def tall_a(A: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
            Bs = kaio.mma.shared_tile(f16, (64, 64))
            kaio.mma.copy_tile(Bs, A, 0, 0)
            kaio.sync()
            a = kaio.mma.load_a(A, 0, 0, m=32)
            acc = kaio.mma.group_mma(a, Bs, kaio.mma.fill(f32, 0.0, m=16, n=64), 0, 0)
            kaio.mma.store(C, 16 * (kaio.thread_idx.x // kaio.warp_size), 0, acc)
        tall_a.emit("ptx", "sm_90")


def test_group_mma_fragment_col0_must_be_block_uniform():
    with pytest.raises(kaio.CompileError, match="col0 depends on the thread"):
        @kaio.kernel(block=(128,))
        def thread_col(A: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
            Bs = kaio.mma.shared_tile(f16, (64, 128))
            kaio.mma.copy_tile(Bs, A, 0, 0)
            kaio.sync()
            w = kaio.thread_idx.x // kaio.warp_size
            a = kaio.mma.load_a(A, 16 * w, 0)
            acc = kaio.mma.group_mma(a, Bs, kaio.mma.fill(f32, 0.0, m=16, n=64), 16 * w, 0)
            kaio.mma.store(C, 16 * w, 0, acc)
        thread_col.emit("ptx", "sm_90")


def test_group_mma_fragment_dtype_must_match_the_tile():
    with pytest.raises(kaio.CompileError, match=r"a holds bf16, b_buf f16"):
        @kaio.kernel(block=(128,))
        def mixed(P: kaio.In[kaio.u8, 2], X: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
            Xs = kaio.mma.shared_tile(f16, (64, 64))
            kaio.mma.copy_tile(Xs, X, 0, 0)
            kaio.sync()
            w = kaio.thread_idx.x // kaio.warp_size
            a = kaio.mma.load_a_int4(P, 0, 16 * w, kaio.bf16)
            acc = kaio.mma.group_mma(a, Xs, kaio.mma.fill(f32, 0.0, m=16, n=64), 0, 0,
                                     trans_b=True)
            kaio.mma.store(C, 0, 16 * w, acc, trans=True)
        mixed.emit("ptx", "sm_90")


@pytest.mark.parametrize("intent", ["region", "out"])
def test_store_trans_refuses_a_region_or_out_buffer(intent):
    Out = {"region": kaio.Region, "out": kaio.Out}[intent]
    with pytest.raises(kaio.CompileError, match=rf"trans=True\) into 'C', a {intent}"):
        @kaio.kernel(block=(128,))
        def into(A: kaio.In[f16, 2], C: Out[f32, 2, OUT]):
            w = kaio.thread_idx.x // kaio.warp_size
            acc = kaio.mma.mma(kaio.mma.load_a(A, 16 * w, 0), kaio.mma.load_b(A, 0, 0, n=64),
                               kaio.mma.fill(f32, 0.0, m=16, n=64))
            kaio.mma.store(C, 0, 16 * w, acc, trans=True)
        into.emit("ptx", "sm_80")


def test_store_trans_refuses_the_epilogue():
    with pytest.raises(kaio.CompileError, match=r"trans=True\) takes no alpha="):
        @kaio.kernel
        def with_alpha(A: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
            acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(A, 0, 0),
                               kaio.mma.fill(f32, 0.0))
            kaio.mma.store(C, 0, 0, acc, alpha=2.0, trans=True)
        with_alpha.emit("ptx", "sm_80")


def test_load_a_int4_refusals_name_the_call():
    with pytest.raises(kaio.CompileError, match=r"kaio\.mma\.load_a_int4"):
        @kaio.kernel
        def wrong_buffer(p: kaio.In[f16, 2], y: kaio.Raw[f32, 2]):
            a = kaio.mma.load_a_int4(p, 0, 0, f16)
            kaio.mma.store(y, 0, 0, kaio.mma.mma(a, kaio.mma.load_b(p, 0, 0),
                                                 kaio.mma.fill(f32, 0.0)))
        wrong_buffer.emit("ir")
    with pytest.raises(kaio.CompileError, match=r"kaio\.mma\.load_a_int4"):
        @kaio.kernel
        def wrong_dtype(p: kaio.In[kaio.u8, 2], y: kaio.Raw[f32, 2]):
            a = kaio.mma.load_a_int4(p, 0, 0, f32)
            kaio.mma.store(y, 0, 0, kaio.mma.mma(a, a, kaio.mma.fill(f32, 0.0)))
        wrong_dtype.emit("ir")
