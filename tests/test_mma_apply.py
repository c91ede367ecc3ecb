"""kaio.mma.apply: element access to accumulators (epilogues) on every target.

The function sees each element with its coordinates in the enclosing matrix; which lane holds
which element is the target's (reference: its own layout at warp 32 and 64; PTX and NVVM:
mma.sync's; AMD: MFMA 16x16 on 64-lane wavefronts, padding of a lone n-tile included), so a
wrong coordinate shows as a wrong scale/bias against numpy. Data are small integers and
scales powers of two where the result must be exact on every target.
"""
import re

import numpy as np
import pytest
from test_mma import _sim
from test_mma_llvm import _sim_llvm
from test_ptx import ptxas

import kaio
from kaio import f16, f32, i32
from kaio.backends.reference import ReferenceBackend


# --- kernels ---------------------------------------------------------------------------------
@kaio.func
def _scale_bias_relu(x, r, c, s, bias):
    return max(x * s[c] + bias[r], 0.0)


@kaio.func
def _group_accumulate(x, r, c, t, scale, g):
    """acc + tmp * scale[g, c]: the per-group step of a W4A16 matmul."""
    return x + t * scale[g, c]


def _epilogue(n):
    @kaio.kernel
    def epilogue(A: kaio.In[f16, 2], B: kaio.In[f16, 2], S: kaio.In[f32, 1],
                 Bias: kaio.In[f32, 1], C: kaio.Raw[f32, 2]):
        """Each warp a 32 x n tile: relu(A @ B * S[c] + Bias[r])."""
        nw = kaio.block_dim.x // kaio.warp_size
        warp = kaio.thread_idx.x // kaio.warp_size
        row0 = kaio.block_idx.x * 32
        col0 = (kaio.block_idx.y * nw + warp) * n
        acc = kaio.mma.fill(f32, 0.0, m=32, n=n)
        for k0 in range(0, A.shape[1], 16):
            a = kaio.mma.load_a(A, row0, k0, m=32)
            acc = kaio.mma.mma(a, kaio.mma.load_b(B, k0, col0, n=n), acc)
        acc = kaio.mma.apply(_scale_bias_relu, acc, row0, col0, S, Bias)
        kaio.mma.store(C, row0, col0, acc)
    return epilogue


EPILOGUE = {n: _epilogue(n) for n in (8, 16, 24)}


@kaio.kernel
def grouped(A: kaio.In[f16, 2], Q: kaio.In[f16, 2], Scale: kaio.In[f32, 2],
            C: kaio.Raw[f32, 2], group: kaio.Const[int]):
    """C = sum over groups g of (A[:, g] @ Q[g, :]) * Scale[g, c]: a temporary per group,
    folded into the accumulator by a two-fragment apply."""
    row0 = kaio.block_idx.x * 16
    col0 = kaio.block_idx.y * 16
    acc = kaio.mma.fill(f32, 0.0, n=16)
    for g in range(0, A.shape[1] // group):
        tmp = kaio.mma.fill(f32, 0.0, n=16)
        for k0 in range(g * group, g * group + group, 16):
            tmp = kaio.mma.mma(kaio.mma.load_a(A, row0, k0), kaio.mma.load_b(Q, k0, col0, n=16),
                               tmp)
        acc = kaio.mma.apply(_group_accumulate, acc, row0, col0, tmp, Scale, g)
    kaio.mma.store(C, row0, col0, acc)


@kaio.func
def _mask_int(x, r, c, lim):
    if c > r + lim:
        return 0
    return x


@kaio.kernel
def masked_int(A: kaio.In[kaio.i8, 2], B: kaio.In[kaio.i8, 2], C: kaio.Raw[i32, 2], lim: i32):
    """An i32 accumulator: elements above the band c <= r + lim become 0 (an if in fn)."""
    acc = kaio.mma.fill(i32, 0)
    acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), acc)
    acc = kaio.mma.apply(_mask_int, acc, 0, 0, lim)
    kaio.mma.store(C, 0, 0, acc)




def _ints(shape, g, lo=-3, hi=4, dtype=np.float16):
    return g.integers(lo, hi, shape).astype(dtype)


def _epilogue_data(n, seed=0):
    g = np.random.default_rng(seed)
    a, b = _ints((64, 32), g), _ints((32, 4 * n), g)
    s = (2.0 ** g.integers(-3, 3, 4 * n)).astype(np.float32)
    bias = g.integers(-20, 20, 64).astype(np.float32)
    ref = np.maximum(a.astype(np.float32) @ b.astype(np.float32) * s + bias[:, None], 0)
    return [a, b, s, bias, np.zeros((64, 4 * n), np.float32)], ref


def _grouped_data(seed=1):
    g = np.random.default_rng(seed)
    a, q = _ints((32, 128), g), _ints((128, 32), g, -8, 8)
    scale = (2.0 ** g.integers(-4, 2, (4, 32))).astype(np.float32)
    ref = sum((a[:, k:k + 32].astype(np.float32) @ q[k:k + 32].astype(np.float32)) * scale[k // 32]
              for k in range(0, 128, 32))
    return [a, q, scale, np.zeros((32, 32), np.float32)], ref


# --- reference backend: both warp widths -------------------------------------------------------
@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("n", [8, 16, 24])
def test_epilogue_on_every_warp_width(width, n):
    args, ref = _epilogue_data(n)
    be = ReferenceBackend(warp_size=width)
    be.launch(be.compile(EPILOGUE[n].specialize_ir({})), (2, 2, 1), (2 * width, 1, 1), args)
    np.testing.assert_array_equal(args[-1], ref)


@pytest.mark.parametrize("width", [32, 64])
def test_two_accumulators_combine_per_group(width):
    args, ref = _grouped_data()
    be = ReferenceBackend(warp_size=width)
    be.launch(be.compile(grouped.specialize_ir({"group": 32})), (2, 2, 1), (width, 1, 1), args)
    np.testing.assert_array_equal(args[-1], ref)


def test_int_accumulator_with_a_branch_in_fn(reference):
    g = np.random.default_rng(2)
    a = g.integers(-9, 9, (16, 32)).astype(np.int8)
    b = g.integers(-9, 9, (32, 8)).astype(np.int8)
    c = np.zeros((16, 8), np.int32)
    masked_int[1, 32](a, b, c, -3)
    full = a.astype(np.int32) @ b.astype(np.int32)
    r, cc = np.indices(full.shape)
    np.testing.assert_array_equal(c, np.where(cc > r - 3, 0, full))


# --- PTX: assembled, and executed in the simulator ---------------------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    for k in (EPILOGUE[16], masked_int):
        ptxas(k.emit("ptx", arch), arch)
    ptxas(grouped.emit("ptx", arch, group=32), arch)


def test_ptx_loads_each_scale_once_per_row_or_column():
    """A 32 x 16 warp tile is 16 elements per lane in 4 rows and 4 columns: S[c] and Bias[r]
    are loaded once per column and row (8 loads), not once per element (32)."""
    ptx = EPILOGUE[16].emit("ptx", "sm_80")
    assert ptx.count("ld.global.nc.f32") == 8 and ptx.count("max.f32") == 16


@pytest.mark.parametrize("n", [8, 24])
def test_ptx_epilogue_runs_exactly(n):
    args, ref = _epilogue_data(n)
    _sim(EPILOGUE[n], args, (2, 2, 1), (64, 1, 1))
    np.testing.assert_array_equal(args[-1], ref)


def test_ptx_grouped_runs_exactly():
    args, ref = _grouped_data()
    _sim(grouped, args, (2, 2, 1), (32, 1, 1), group=32)
    np.testing.assert_array_equal(args[-1], ref)


# --- LLVM: nvptx64 executed, AMD code objects built --------------------------------------------
def test_nvvm_epilogue_and_grouped_run_exactly():
    args, ref = _epilogue_data(24)
    _sim_llvm(EPILOGUE[24], args, (2, 2, 1), (64, 1, 1))
    np.testing.assert_array_equal(args[-1], ref)
    args, ref = _grouped_data()
    _sim_llvm(grouped, args, (2, 2, 1), (32, 1, 1), group=32)
    np.testing.assert_array_equal(args[-1], ref)


@pytest.mark.parametrize("n", [16, 24])
def test_amd_code_objects_build(n):
    """gfx942: n = 24 has a lone n-tile whose padding lanes run fn at the tile origin."""
    report = EPILOGUE[n].emit("report", "gfx942")
    head = report.splitlines()[0]
    assert "[gfx942] ok:" in head and "error" not in report, report
    assert re.search(r"spills\(s/v\)=0/0", head), head
    assert "v_mfma_f32_16x16x16" in EPILOGUE[n].emit("asm", "gfx942")


def test_conformance_row_is_bitwise_on_both_warp_widths():
    from kaio.conformance.cases import all_cases, select
    from kaio.conformance.rules import BITWISE
    from kaio.conformance.runner import Options, run_suite
    (case,) = select(all_cases(), ["feature/fragment_apply"])
    assert case.rule is BITWISE
    rep = run_suite(Options(["reference", "reference-w64"], cases=[case], log=lambda m: None))
    assert rep.failing == [] and {c.status for c in rep.rows[0].cells.values()} <= {"identical"}


# --- what is refused, at the user's line ------------------------------------------------------
def _refused(k, *match, consts=None):
    with pytest.raises(kaio.CompileError) as e:
        k.specialize_ir(consts or {})
    for m in match:
        assert m in str(e.value), str(e.value)
    return e.value


def _plain(x, r, c):
    return x


@kaio.func
def _two(x, r):
    return x


@kaio.func
def _wide(x, r, c):
    return kaio.f64(x)


@kaio.func
def _stores(x, r, c, out):
    out[r, c] = x
    return x


def test_wrong_functions_and_fragments_are_refused_at_the_call():
    @kaio.kernel
    def not_func(C: kaio.Raw[f32, 2]):
        acc = kaio.mma.fill(f32, 0.0)
        acc = kaio.mma.apply(_plain, acc, 0, 0)
        kaio.mma.store(C, 0, 0, acc)
    err = _refused(not_func, "must be a @kaio.func", "def fn(x, r, c")
    assert err.line == not_func.fn.__code__.co_firstlineno + 3

    @kaio.kernel
    def arity(C: kaio.Raw[f32, 2]):
        acc = kaio.mma.apply(_two, kaio.mma.fill(f32, 0.0), 0, 0, C)
        kaio.mma.store(C, 0, 0, acc)
    err = _refused(arity, "_two(x, r)", "with 4 arguments")
    assert err.line == arity.fn.__code__.co_firstlineno + 2 and err.hint

    @kaio.kernel
    def wide(C: kaio.Raw[f32, 2]):
        kaio.mma.store(C, 0, 0, kaio.mma.apply(_wide, kaio.mma.fill(f32, 0.0), 0, 0))
    _refused(wide, "returns has type f64 but f32 is expected", "kaio.f32(")

    @kaio.kernel
    def stores(C: kaio.Raw[f32, 2]):
        kaio.mma.store(C, 0, 0, kaio.mma.apply(_stores, kaio.mma.fill(f32, 0.0), 0, 0, C))
    _refused(stores, "contains 'store'", "loads and arithmetic")

    @kaio.kernel
    def multiplicand(A: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
        kaio.mma.apply(_scale_bias_relu, kaio.mma.load_a(A, 0, 0), 0, 0, C, C)
    _refused(multiplicand, "applies a function to an accumulator")

    @kaio.kernel
    def shapes(C: kaio.Raw[f32, 2], S: kaio.In[f32, 2]):
        acc = kaio.mma.fill(f32, 0.0, n=16)
        kaio.mma.apply(_group_accumulate, acc, 0, 0, kaio.mma.fill(f32, 0.0, m=32, n=16), S, 0)
    _refused(shapes, "accumulators of one type")     # (one of acc's m and n = 8 broadcasts)


def test_apply_under_a_thread_dependent_branch_is_refused():
    @kaio.kernel
    def split(C: kaio.Raw[f32, 2], S: kaio.In[f32, 1], Bias: kaio.In[f32, 1]):
        acc = kaio.mma.fill(f32, 1.0)
        if kaio.thread_idx.x < 16:
            acc = kaio.mma.apply(_scale_bias_relu, acc, 0, 0, S, Bias)
        kaio.mma.store(C, 0, 0, acc)
    err = _refused(split, "kaio.mma.apply is", "warp-collective")
    assert err.kind == "divergent-collective"


@kaio.kernel(checked=True)
def checked_epilogue(A: kaio.In[f16, 2], B: kaio.In[f16, 2], S: kaio.In[f32, 1],
                     Bias: kaio.In[f32, 1], C: kaio.Raw[f32, 2]):
    acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), kaio.mma.fill(f32, 0.0))
    kaio.mma.store(C, 0, 0, kaio.mma.apply(_scale_bias_relu, acc, 0, 0, S, Bias))


def test_checked_mode_checks_the_loads_of_fn(reference):
    """Checked mode adds its fault record's atomic and stores inside the region: the targets
    build it, and an out-of-bounds S[c] is reported at fn's line."""
    ptxas(checked_epilogue.emit("ptx", "sm_80"), "sm_80")
    assert "@llvm.amdgcn.mfma" in checked_epilogue.emit("llvm", "gfx942")
    a, b = np.ones((16, 16), np.float16), np.ones((16, 8), np.float16)
    with pytest.raises(kaio.KaioError, match="load from 'S' at index \\(4,\\) is out of bounds"):
        checked_epilogue[1, 32](a, b, np.ones(4, np.float32), np.zeros(16, np.float32),
                                np.zeros((16, 8), np.float32))


# --- the H200 (the lead's run) ----------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("n", [8, 24])
def test_gpu_epilogue_and_grouped_match_exactly(n):
    args, ref = _epilogue_data(n)
    EPILOGUE[n][(2, 2), (64,)](*args)
    np.testing.assert_array_equal(args[-1], ref)
    args, ref = _grouped_data()
    grouped[(2, 2), (32,)](*args, 32)
    np.testing.assert_array_equal(args[-1], ref)
