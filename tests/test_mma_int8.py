"""kaio.mma int8 fragments (shape m16n8k32: i8 multiplicands, i32 accumulators): the reference's
exact, wrapping arithmetic; the PTX (mma.sync m16n8k32 s8, ldmatrix for i8 tiles in shared
memory, element loads packed four bytes per register) executed exactly in tests/ptx_sim.py and
assembled by ptxas for sm_80 and sm_90; the frontend's checks and the LLVM paths' refusal.

Integer sums are exact in any order, so every comparison here is equality with numpy's int64
product wrapped to i32 (the hardware's mma without .satfinite wraps the same way).
"""

import numpy as np
import pytest
from test_mma import _compile_error, _sim
from test_ptx import ptxas

import kaio
from kaio import f16, f32, i8, i32


def _wrap(x):
    return np.asarray(x, np.int64).astype(np.uint32).view(np.int32)


def _ints(shape, seed):
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


@kaio.kernel
def accumulate(A: kaio.In[i8, 2], B: kaio.In[i8, 2], C0: kaio.In[i32, 2], C: kaio.Raw[i32, 2]):
    """Global element loads: one warp per 16 x 8 tile of C, C = C0 + A @ B over K in steps of 32."""
    warp = kaio.thread_idx.x // kaio.warp_size
    nw = kaio.block_dim.x // kaio.warp_size
    row0 = kaio.block_idx.x * 16
    for cb in range(0, C.shape[1], nw * 8):      # C's width: a multiple of 8 * warps
        col0 = cb + warp * 8
        acc = kaio.mma.load_acc(C0, row0, col0)
        for k0 in range(0, A.shape[1], 32):
            acc = kaio.mma.mma(kaio.mma.load_a(A, row0, k0), kaio.mma.load_b(B, k0, col0), acc)
        kaio.mma.store(C, row0, col0, acc)


@kaio.kernel(block=64)
def shared_warp_tiles(A: kaio.In[i8, 2], BT: kaio.In[i8, 2], C: kaio.Raw[i32, 2]):
    """A (32 x 64) and B held as N x K (16 x 64) staged by copy_tile; each of the two warps
    multiplies a 16 x 16 warp tile (two n-tiles, two k-steps): ldmatrix for both operands."""
    sa = kaio.shared_array(i8, (32, 64))
    sb = kaio.shared_array(i8, (16, 64))
    kaio.mma.copy_tile(sa, A, 0, 0)
    kaio.mma.copy_tile(sb, BT, 0, 0)
    kaio.sync()
    warp = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(i32, 7, n=16)
    a = kaio.mma.load_a(sa, warp * 16, 0, k=64)
    b = kaio.mma.load_b(sb, 0, 0, trans=True, k=64, n=16)
    acc = kaio.mma.mma(a, b, acc)
    kaio.mma.store(C, warp * 16, 0, acc)


@kaio.kernel(block=32)
def shared_k_by_n(A: kaio.In[i8, 2], B: kaio.In[i8, 2], C: kaio.Raw[i32]):
    """B held as K x N and A transposed (A[r, c] = AT[c, r]) in shared arrays: no ldmatrix for
    i8 held that way, element loads at immediate offsets from a lane base; C 1-d (ld=8)."""
    sa = kaio.shared_array(i8, (32, 16))
    sb = kaio.shared_array(i8, (32, 8))
    kaio.mma.copy_tile(sa, A, 0, 0)
    kaio.mma.copy_tile(sb, B, 0, 0)
    kaio.sync()
    acc = kaio.mma.mma(kaio.mma.load_a(sa, 0, 0, trans=True), kaio.mma.load_b(sb, 0, 0),
                       kaio.mma.fill(i32, 0))
    kaio.mma.store(C, 0, 0, acc, ld=8)


@kaio.kernel(block=32)
def dequant_store(A: kaio.In[i8, 2], B: kaio.In[i8, 2], rs: kaio.In[f32], cs: kaio.In[f32],
                  C: kaio.Raw[f32, 2]):
    """The int8 epilogue: C = f32(A @ B) * rs[r] * cs[c], C smaller than the tile (edges skipped)."""
    acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), kaio.mma.fill(i32, 0))
    kaio.mma.store(C, 0, 0, acc, row_scale=rs, col_scale=cs)


def _dequant_case(seed):
    g = np.random.default_rng(seed)
    a, b = _ints((16, 32), seed), _ints((32, 8), seed + 1)
    rs, cs = g.uniform(-2, 2, 13).astype(np.float32), g.uniform(-2, 2, 6).astype(np.float32)
    want = (a.astype(np.int64) @ b.astype(np.int64))[:13, :6].astype(np.float32) * rs[:, None] * cs
    return [a, b, rs, cs, np.full((13, 6), np.nan, np.float32)], want


def test_scaled_store_of_i32_accumulators(reference):
    args, want = _dequant_case(20)
    dequant_store[1, 32](*args)
    np.testing.assert_array_equal(args[-1], want)
    args, want = _dequant_case(21)
    _sim(dequant_store, args, (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(args[-1], want)


def test_reference_is_exact_and_wraps(reference):
    a, b = _ints((32, 96), 1), _ints((96, 32), 2)
    c0 = np.random.default_rng(3).integers(-2**31, 2**31, (32, 32)).astype(np.int32)
    c0[0, 0] = 2**31 - 1           # overflow on purpose: wraps, no saturation
    c = np.zeros_like(c0)
    accumulate[2, 64](a, b, c0, c)
    want = _wrap(c0.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64))
    np.testing.assert_array_equal(c, want)
    assert (c0.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64) != want).any()


def test_reference_warp_tiles_and_shared(reference):
    a, bt = _ints((32, 64), 4), _ints((16, 64), 5)
    c = np.zeros((32, 16), np.int32)
    shared_warp_tiles[1, 64](a, bt, c)
    np.testing.assert_array_equal(c, 7 + a.astype(np.int64) @ bt.T.astype(np.int64))
    at, b = _ints((32, 16), 6), _ints((32, 8), 7)
    c1 = np.zeros(128, np.int32)
    shared_k_by_n[1, 32](at, b, c1)
    np.testing.assert_array_equal(c1.reshape(16, 8), at.T.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_runs_exactly_in_the_simulator(arch):
    """Every lane, byte and register of the PTX layout: full-range i8 and i32 data, wrapping."""
    a, b = _ints((32, 64), 8), _ints((64, 16), 9)
    c0 = np.random.default_rng(10).integers(-2**31, 2**31, (32, 16)).astype(np.int32)
    c = np.zeros_like(c0)
    _sim(accumulate, [a, b, c0, c], (2, 1, 1), (64, 1, 1), arch)
    np.testing.assert_array_equal(c, _wrap(c0.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)))


def test_ptx_ldmatrix_and_element_paths_in_the_simulator():
    a, bt = _ints((32, 64), 11), _ints((16, 64), 12)
    c = np.zeros((32, 16), np.int32)
    _sim(shared_warp_tiles, [a, bt, c], (1, 1, 1), (64, 1, 1))
    np.testing.assert_array_equal(c, 7 + a.astype(np.int64) @ bt.T.astype(np.int64))
    at, b = _ints((32, 16), 13), _ints((32, 8), 14)
    c1 = np.zeros(128, np.int32)
    _sim(shared_k_by_n, [at, b, c1], (1, 1, 1), (32, 1, 1), "sm_90")
    np.testing.assert_array_equal(c1.reshape(16, 8), at.T.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_instructions_and_ptxas(arch):
    ptx = shared_warp_tiles.emit("ptx", arch)
    # 2 n-tiles x 2 k-steps; A: one ldmatrix.x4 per 16 x 32 tile, B: one x4 per k-step (2 n-tiles)
    assert ptx.count("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == 4
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    assert ".trans" not in ptx
    ptxas(ptx, arch)
    ptx = shared_k_by_n.emit("ptx", arch)
    assert "ldmatrix" not in ptx and "prmt.b32" in ptx
    ptxas(ptx, arch)


def test_gfx90a_refuses_the_shape_by_name():
    """The LLVM paths lower m16n8k32 on nvptx64 (NVVM mma .s8) and gfx942 (MFMA 16x16x32 i8:
    tests/test_mma_llvm.py); gfx90a has no such MFMA and says so."""
    assert "@llvm.nvvm.mma.m16n8k32.row.col.s8(" in accumulate.emit("llvm", "nvptx64-sm_80")
    assert "@llvm.amdgcn.mfma.i32.16x16x32.i8(" in accumulate.emit("llvm", "gfx942")
    with pytest.raises(kaio.CompileError, match="shape m16n8k32 .*target gfx90a"):
        accumulate.emit("llvm", "gfx90a")


def test_frontend_checks():
    @kaio.kernel
    def f16_in_int_shape(A: kaio.In[f16, 2]):
        kaio.mma.load_a(A, 0, 0, shape=kaio.mma.m16n8k32)
    _compile_error(f16_in_int_shape, "m16n8k32 takes no f16 multiplicands", "i8 -> i32")

    @kaio.kernel
    def mixed(A: kaio.In[i8, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
        acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), kaio.mma.fill(f32, 0.0))
        kaio.mma.store(C, 0, 0, acc)
    _compile_error(mixed, "do not match")

    @kaio.kernel
    def float_acc(A: kaio.In[i8, 2], B: kaio.In[i8, 2], C: kaio.Raw[f32, 2]):
        kaio.mma.fill(f32, 0.0, shape=kaio.mma.m16n8k32)
    _compile_error(float_acc, "m16n8k32 takes no f32 accumulators")

    for out, extra in ((f32, ""), (i32, ", alpha=2.0")):
        src = f"""
@kaio.kernel
def bad_store(A: kaio.In[i8, 2], B: kaio.In[i8, 2], C: kaio.Raw[{out.name}, 2]):
    acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), kaio.mma.fill(i32, 0))
    kaio.mma.store(C, 0, 0, acc{extra})
"""
        _compile_error(_from_source(src), "kaio.mma.store of an i32 accumulator")

    @kaio.kernel
    def float_scaled(A: kaio.In[f16, 2], B: kaio.In[f16, 2], s: kaio.In[f32], C: kaio.Raw[f32, 2]):
        acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), kaio.mma.fill(f32, 0.0))
        kaio.mma.store(C, 0, 0, acc, row_scale=s, col_scale=s)
    _compile_error(float_scaled, "row_scale=/col_scale= scale i32 accumulators")


def _from_source(src):
    """A kernel from source text (written to a file: kaio reads kernel source)."""
    import importlib.util
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write("import kaio\nfrom kaio import f32, i8, i32\n" + src)
    spec = importlib.util.spec_from_file_location("bad_store_mod", f.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.bad_store
