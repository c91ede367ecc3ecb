"""Loop facts (``step_sign``) and unrolling by 4: which loops they touch, that results are
bit-identical to the loops as written (the reference backend with the pass off), and what the
PTX / LLVM backends make of it (one compare per iteration, four loads in flight)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from reference_kit import lowered_with, run_ref_with
from test_ptx import ptxas

import kaio
from kaio import dtypes as dt
from kaio import f32, i32
from kaio.backends import targets
from kaio.backends.ptx import emit_ptx
from kaio.errors import CompileError
from kaio.ir import parse_kernel, print_kernel
from kaio.ir.attrs import AttrError
from kaio.passes import loop_facts, target_pipeline, unroll, verify
from kaio.passes.verify import IRVerifyError
from kaio.regions import rows_per_block

I32_MIN, I32_MAX = -2**31, 2**31 - 1


def lowered(k, on=True):
    return lowered_with(unroll, k, on)


def fors(k):
    return [op for op in k.walk() if op.opcode == "for"]


def run_ref(k, args, grid, block, on=True):
    """Launch on the reference backend (sanitizer on); copies of the arrays after."""
    return run_ref_with(unroll, k, args, grid, block, on)


def same_bits(a, b):
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (x, y)


# --- kernels ------------------------------------------------------------------------------------
@kaio.kernel
def strided_sum(x: kaio.In[f32], out: kaio.Raw[f32], cnt: kaio.Raw[i32]):
    """Block-strided float sum (dynamic positive step) with an int count and a branch."""
    s = 0.0
    c = 0
    for j in range(kaio.thread_idx.x, x.shape[0], kaio.block_dim.x):
        v = x[j]
        s += v * 1.5 + 0.25
        if v > 0.0:
            c += j
    out[kaio.thread_idx.x] = s
    cnt[kaio.thread_idx.x] = c


@kaio.kernel
def const_step(x: kaio.In[f32], out: kaio.Raw[f32]):
    s = 0.0
    for j in range(kaio.thread_idx.x, x.shape[0], 3):
        s = s * 0.5 + x[j]
    out[kaio.thread_idx.x] = s


@kaio.kernel
def down(x: kaio.In[f32], out: kaio.Raw[f32]):
    """Negative constant step: never marked, never unrolled."""
    s = 0.0
    for j in range(x.shape[0] - 1 - kaio.thread_idx.x, -1, -2):
        s += x[j]
    out[kaio.thread_idx.x] = s


@kaio.kernel
def grid_step(x: kaio.In[f32], out: kaio.Raw[f32]):
    """Steps that may wrap (grid_dim.x * block_dim.x) or are unbounded (grid_dim.x)."""
    s = 0.0
    for j in range(kaio.global_id(), x.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
        s += x[j]
    for j in range(kaio.global_id(), x.shape[0], kaio.grid_dim.x):
        s += x[j] * 2.0
    out[kaio.global_id()] = s


@kaio.kernel
def scalar_bounds(lo: i32, hi: i32, st: i32, out: kaio.Raw[i32]):
    """Bounds near the i32 limits (3 is constant; ``st`` is a parameter: unknown sign)."""
    a = 0
    for j in range(lo, hi, 3):
        a = a * 7 + (j - lo)
    b = 0
    for j in range(lo, hi, st):
        b = b * 7 + (j - lo)
    out[0] = a
    out[1] = b


@kaio.kernel
def row_max(x: kaio.In[f32, 2], y: kaio.Raw[f32, 2]):
    """The softmax row loop: one block per row, block-strided."""
    row = kaio.block_idx.x
    m = -kaio.math.inf
    for j in range(kaio.thread_idx.x, x.shape[1], kaio.block_dim.x):
        m = max(m, x[row, j])
    for j in range(kaio.thread_idx.x, x.shape[1], kaio.block_dim.x):
        y[row, j] = x[row, j] - m


@kaio.kernel
def scale_rows(x: kaio.In[f32, 2], y: kaio.Out[f32, 2, rows_per_block()]):
    for r, j in y.owned():
        y[r, j] = x[r, j] * 2.0


# --- which loops are marked and unrolled ------------------------------------------------------
def test_step_sign_marks_only_provably_positive_steps():
    marks = {name: [op.attrs.get("step_sign") for op in fors(lowered(k, on=False))]
             for name, k in [("strided", strided_sum), ("const", const_step), ("down", down),
                             ("grid", grid_step), ("scalar", scalar_bounds)]}
    assert marks == {"strided": [1], "const": [1], "down": [None],
                     "grid": [None, 1],             # grid_dim.x * block_dim.x may wrap
                     "scalar": [1, None]}           # a parameter step has no known sign


def test_value_ranges():
    from kaio.ir import Builder, Param
    b = Builder.for_kernel("r", [("n", dt.i32, Param("n", "scalar"))])
    bx, by = b.special("block_dim", 0), b.special("block_dim", 1)
    gx = b.special("grid_dim", 0)
    c = b.const(4, dt.i32)
    vr = loop_facts.value_range
    assert vr(b.binary("mul", bx, by)) == (1, 1024 * 1024)
    assert vr(b.binary("mul", gx, bx)) is None
    assert vr(b.binary("add", b.special("thread_idx", 0), c)) == (4, 1027)
    assert vr(b.binary("sub", bx, c)) == (-3, 1020)
    assert vr(b.binary("shl", bx, c)) == (16, 16384)
    assert vr(b.binary("div", bx, c)) == (0, 256)
    assert vr(b.kernel.args[0]) is None


def test_unroll_structure_main_loop_then_remainder():
    k = lowered(strided_sum)
    verify.run(k)
    main, rem = fors(k)
    assert main.attrs == {"step_sign": 1, "unrolled": 4}
    assert rem.attrs == {"step_sign": 1, "unrolled": 1}
    assert rem.operands[0] is main.results[0]                 # remainder starts where main ended
    assert [r for r in rem.operands[3:]] == main.results[1:]  # and carries its values on
    body = [op.opcode for op in main.regions[0].ops]
    assert body.count("load") == 4 and body.count("if") == 4
    assert body.index("load") < body.index("mul") and body[:8].count("load") == 4  # loads first
    # idempotent: a second run of the pipeline leaves the loops alone
    again = target_pipeline(parse_kernel(print_kernel(k)), 32)
    assert len(fors(again)) == 2


def test_not_unrolled_negative_or_effectful():
    """A step that is never positive is left alone; one of unknown sign (grid_dim.x *
    block_dim.x, a parameter) is unrolled behind a run-time test (tests/test_unroll_strided.py),
    and not with the unroll_strided switch off."""
    assert [op.attrs.get("unrolled") for op in fors(lowered(down))] == [None]
    assert [op.attrs.get("unrolled") for op in fors(lowered(grid_step))] == [4, 1, 4, 1]
    assert [op.attrs.get("unrolled") for op in fors(lowered(scalar_bounds))] == [4, 1, 4, 1]
    no_strided = target_pipeline(grid_step.specialize_ir(), 32,
                                 disabled_passes=frozenset({"unroll_strided"}))
    assert [op.attrs.get("unrolled") for op in fors(no_strided)] == [None, 4, 1]

    @kaio.kernel
    def with_barrier(x: kaio.In[f32], out: kaio.Raw[f32]):
        s = 0.0
        for j in range(0, x.shape[0], 1):
            s += x[j]
            kaio.sync()
        out[kaio.thread_idx.x] = s

    @kaio.kernel
    def nested(x: kaio.In[f32], out: kaio.Raw[f32]):
        s = 0.0
        for j in range(0, x.shape[0], 1):
            for _i in range(0, 2, 1):
                s += x[j]
        out[kaio.thread_idx.x] = s

    assert [op.attrs.get("unrolled") for op in fors(lowered(with_barrier))] == [None]
    outer, *inner = fors(lowered(nested))
    assert "unrolled" not in outer.attrs and outer.attrs["step_sign"] == 1


def test_owned_loops_keep_their_attrs():
    loops = [op for op in fors(lowered(scale_rows)) if "owned" in op.attrs]
    assert [op.attrs.get("unrolled") for op in loops] == [4, 1]
    assert all(op.attrs["owned"] == "y" and op.attrs["step_sign"] == 1 for op in loops)
    for cols in (0, 1, 5, 300):
        x = np.arange(3 * cols, dtype=np.float32).reshape(3, cols)
        y = np.zeros_like(x)
        scale_rows(x, y)
        np.testing.assert_array_equal(y, x * 2)


def test_verifier_checks_the_attrs():
    k = lowered(down)
    (loop,) = fors(k)
    loop.attrs["step_sign"] = 1                       # a constant -2 step is not positive
    with pytest.raises(IRVerifyError, match="step_sign"):
        verify.run(k)
    with pytest.raises(AttrError, match="step_sign = -1 must be the int 1"):
        loop.attrs["step_sign"] = -1                  # typed attrs: refused when written
    with pytest.raises(AttrError, match="unrolled = 0 must be an int >= 1"):
        loop.attrs["unrolled"] = 0
    k2 = lowered(strided_sum)
    assert print_kernel(parse_kernel(print_kernel(k2))) == print_kernel(k2)


# --- bit-identical results on the reference backend -------------------------------------------
@pytest.mark.parametrize("block", [1, 4, 32])
@pytest.mark.parametrize("n_over", range(10))
def test_strided_float_sums_bit_identical(block, n_over):
    """Trip counts 0..9 per thread (block 1), and around multiples of the unroll factor."""
    n = block * n_over + (n_over % 3)                 # some threads one iteration longer
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)).astype(np.float32)
    args = [x, np.zeros(block, np.float32), np.zeros(block, np.int32)]
    on = run_ref(strided_sum, args, 1, block, on=True)
    off = run_ref(strided_sum, args, 1, block, on=False)
    same_bits(on, off)
    # and the loop as written, sequentially, in f32
    for t in range(block):
        s, c = np.float32(0), 0
        for j in range(t, n, block):
            s = np.float32(s + np.float32(np.float32(x[j] * np.float32(1.5)) + np.float32(0.25)))
            c += j if x[j] > 0 else 0
        assert on[1][t].tobytes() == s.tobytes() and on[2][t] == c


@pytest.mark.parametrize("n", list(range(0, 14)) + [31, 100])
@pytest.mark.parametrize("kern", [const_step, down, row_max, grid_step], ids=lambda k: k.name)
def test_other_loops_bit_identical(kern, n):
    rng = np.random.default_rng(n + 1)
    if kern is row_max:
        x = rng.standard_normal((3, n)).astype(np.float32)
        args, grid, block = [x, np.zeros_like(x)], 3, 4
    else:
        x = rng.standard_normal(n).astype(np.float32)
        grid, block = (2, 3) if kern is grid_step else (1, 5)
        args = [x, np.zeros(grid * block, np.float32)]
    same_bits(run_ref(kern, args, grid, block, on=True), run_ref(kern, args, grid, block, on=False))


@pytest.mark.parametrize("lo, hi, st", [
    (0, 10, 1), (0, 0, 1), (5, 4, 1), (I32_MIN, I32_MIN + 5, 1), (I32_MIN, I32_MIN + 13, 2),
    (I32_MAX - 30, I32_MAX - 2, 4), (-7, 20, 5), (20, -7, -5)])
def test_bounds_near_the_i32_limits(lo, hi, st):
    """ub - 3*step must not wrap: the main loop is skipped where it would."""
    out = np.zeros(2, np.int32)
    on = run_ref(scalar_bounds, [lo, hi, st, out], 1, 1, on=True)[0]
    off = run_ref(scalar_bounds, [lo, hi, st, out], 1, 1, on=False)[0]
    same_bits([on], [off])
    a = 0
    for j in range(lo, hi, 3):
        a = (a * 7 + (j - lo)) & 0xFFFFFFFF
    assert on[0] == np.array(a, np.uint32).view(np.int32)


def test_unbounded_dynamic_step_guard():
    """A grid_dim.x step (up to 2**31-1): the main loop runs only when 4*step cannot wrap; with
    small grids it runs, and results match the loop as written."""
    k = lowered(grid_step)
    main = [op for op in fors(k) if op.attrs.get("unrolled") == 4][0]
    assert main.operands[1].owner.opcode == "select"  # guarded bound
    x = np.random.default_rng(5).standard_normal(77).astype(np.float32)
    args = [x, np.zeros(12, np.float32)]
    same_bits(run_ref(grid_step, args, 3, 4, on=True), run_ref(grid_step, args, 3, 4, on=False))


# --- backends ------------------------------------------------------------------------------------
def _loops(ptx):
    """Text of each ``$L_for_N: ... $L_endfor_M:`` loop in emission order."""
    return re.findall(r"\$L_for_\d+:\n(.*?)\$L_endfor_\d+:", ptx, re.S)


def _code(text):
    """Instruction lines (no comments, no .loc)."""
    lines = (ln.strip() for ln in text.splitlines())
    return [ln for ln in lines if ln and not ln.startswith(("//", ".loc"))]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_one_compare_per_iteration_and_four_loads(arch):
    ptx, _ = emit_ptx(lowered(row_max), arch)
    ptxas(ptx, arch)
    loops = _loops(ptx)
    assert len(loops) == 4                             # 2 loops, each main + remainder
    for body in loops:
        code = _code(body)
        assert code[0].startswith("setp.ge.s32") and code[1].startswith("@%p")
        assert not any(c.startswith(("setp.gt", "and.pred", "or.pred", "not.pred")) for c in code)
        # the row address x + row*cols*4 is computed once, before the loops
        assert not any(c.startswith(("cvt.s64.s32", "mad.lo.s64", "mul.lo.s64")) for c in code)
        assert body.count("mul.wide.s32") == body.count("ld.global") + body.count("st.global")
    main_max, rem_max, main_st, _ = loops
    assert main_max.count("ld.global.nc.f32") == 4 and rem_max.count("ld.global.nc.f32") == 1
    loads = [i for i, ln in enumerate(main_max.splitlines()) if "ld.global.nc" in ln]
    first_max = next(i for i, ln in enumerate(main_max.splitlines()) if "max.f32" in ln)
    assert max(loads) < first_max                      # four loads in flight before their uses
    assert main_st.count("ld.global.nc.f32") == 4 and main_st.count("st.global.f32") == 4


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_dynamic_sign_test_is_hoisted(arch):
    ptx, _ = emit_ptx(lowered(scalar_bounds), arch)
    ptxas(ptx, arch)
    last = _loops(ptx)[-1]                             # the `st` loop: sign unknown
    code = _code(last)
    assert code[0].startswith("@%p") and "setp.ge.s32" in code[0]
    assert code[1].startswith("@!%p") and "setp.le.s32" in code[1]
    assert not any(c.startswith(("setp.gt", "and.pred", "or.pred")) for c in code)


@pytest.mark.parametrize("kern", [strided_sum, const_step, down, grid_step, scalar_bounds, row_max],
                         ids=lambda k: k.name)
def test_ptx_assembles(kern):
    k = lowered(kern)
    for arch in ("sm_80", "sm_90"):
        ptxas(emit_ptx(k, arch)[0], arch)


def test_llvm_uses_one_compare_with_step_sign():
    text = targets.emit(row_max.specialize_ir(), "llvm", "gfx90a")
    assert "icmp sgt" not in text                      # no sign test: step_sign = 1
    assert text.count("load float") >= 10              # 4 + 1 per loop (2 loops)


@pytest.mark.parametrize("kern", [strided_sum, row_max, scalar_bounds, grid_step], ids=lambda k: k.name)
def test_llvm_compiles_for_gfx90a(kern):
    try:
        hsaco = targets.emit(kern.specialize_ir(), "hsaco", "gfx90a")
    except CompileError as e:
        if "ld.lld" in str(e):
            pytest.skip(str(e))
        raise
    assert len(hsaco) > 0


_SIM_CASES = [
    (strided_sum, lambda: [np.arange(13, dtype=np.float32) - 5.5, np.zeros(4, np.float32),
                           np.zeros(4, np.int32)], 1, 4),
    (row_max, lambda: [np.random.default_rng(0).standard_normal((3, 11)).astype(np.float32),
                       np.zeros((3, 11), np.float32)], 3, 2),
    (scalar_bounds, lambda: [I32_MIN, I32_MIN + 13, 2, np.zeros(2, np.int32)], 1, 1),
    (scalar_bounds, lambda: [40, 3, -3, np.zeros(2, np.int32)], 1, 1),
    (grid_step, lambda: [np.arange(29, dtype=np.float32), np.zeros(6, np.float32)], 2, 3),
    (const_step, lambda: [np.arange(23, dtype=np.float32), np.zeros(2, np.float32)], 1, 2),
]


@pytest.mark.parametrize("case", range(len(_SIM_CASES)))
def test_ptx_simulated_matches_the_loop_as_written(case):
    """The emitted PTX (unrolled, row addresses hoisted), run by tests/ptx_sim.py, gives the bits
    of the reference interpreter running the loops as written."""
    from ptx_sim import Machine
    kern, make, grid, block = _SIM_CASES[case]
    args = make()
    want = run_ref(kern, args, grid, block, on=False)
    ptx, abi = emit_ptx(lowered(kern), "sm_90")
    sim = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    Machine(ptx).launch(sim, abi, (grid, 1, 1), (block, 1, 1))
    same_bits([a for a in sim if isinstance(a, np.ndarray)], want)
