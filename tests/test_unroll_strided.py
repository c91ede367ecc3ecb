"""Grid-stride loops unrolled by 4 (the ``unroll_strided`` switch of kaio.passes.unroll): loops
whose step's sign is unknown at compile time (``grid_dim.x * block_dim.x``, a grid_stride
Region's ``owned()``, a parameter) get a main loop behind a run-time test of the step, with the
four bodies' loads first. Results must be bit-identical to the loop as written (the reference
backend with unrolling off), on the reference interpreter, the emitted PTX (simulated) and the
LLVM path (host JIT)."""
from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest
from reference_kit import run_ref_with
from test_ptx import ptxas

import kaio
from kaio import f32, i32
from kaio.backends.ptx import emit_ptx
from kaio.options import SWITCHABLE_PASSES
from kaio.passes import target_pipeline, unroll, verify
from kaio.regions import grid_stride

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import kaio_bench_kernels as kk  # noqa: E402

I32_MAX = 2**31 - 1


# --- kernels ------------------------------------------------------------------------------------
@kaio.kernel
def gs_sum(x: kaio.In[f32], out: kaio.Raw[f32]):
    """Per-thread grid-stride float sum (one partial per thread, so the order is observable)."""
    acc = 0.0
    for i in range(kaio.global_id(), x.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
        acc += x[i]
    out[kaio.global_id()] = acc


@kaio.kernel
def gs_mix(x: kaio.In[i32], f: kaio.In[f32], out: kaio.Raw[i32], fout: kaio.Raw[f32]):
    """Order-sensitive carried values: an int polynomial hash and a float recurrence."""
    a = 0
    s = 0.0
    for i in range(kaio.global_id(), x.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
        a = a * 31 + x[i]
        s = s * 0.75 + f[i]
    out[kaio.global_id()] = a
    fout[kaio.global_id()] = s


@kaio.kernel
def gs_owned(x: kaio.In[f32], y: kaio.Region[f32, grid_stride()]):
    """Stores inside the loop: a grid_stride Region's owned() loop."""
    for i in y.owned():
        y[i] = y[i] * 0.5 + x[i]


@kaio.kernel
def gs_inplace(y: kaio.Raw[f32], out: kaio.Raw[f32]):
    """Loads and stores of one writable buffer in the loop, and a carried sum of what was read."""
    acc = 0.0
    for i in range(kaio.global_id(), y.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
        v = y[i]
        y[i] = v * 3.0 - 1.0
        acc += v
    out[kaio.global_id()] = acc


@kaio.kernel
def param_step(lo: i32, hi: i32, st: i32, out: kaio.Raw[i32]):
    """A parameter step: any sign, any size, bounds anywhere."""
    a = 0
    for j in range(lo, hi, st):
        a = a * 7 + (j - lo)
    out[0] = a


def fors(k):
    return [op for op in k.walk() if op.opcode == "for"]


def lowered(k, disabled=()):
    return target_pipeline(k.specialize_ir(), 32, disabled_passes=frozenset(disabled))


def same_bits(a, b):
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (x, y)


def on_off(k, args, grid, block):
    """Reference results with unrolling on and off (the loops as written)."""
    return run_ref_with(unroll, k, args, grid, block, True), run_ref_with(unroll, k, args, grid, block, False)


# --- which loops, and how -----------------------------------------------------------------------
def test_switch_is_listed():
    assert "unroll_strided" in SWITCHABLE_PASSES


@pytest.mark.parametrize("kern", [gs_sum, gs_mix, gs_owned, gs_inplace, param_step], ids=lambda k: k.name)
def test_unknown_sign_step_unrolled_behind_a_runtime_test(kern):
    k = lowered(kern)
    verify.run(k)
    main, rem = fors(k)
    assert main.attrs.get("unrolled") == 4 and main.attrs["step_sign"] == 1
    assert rem.attrs.get("unrolled") == 1 and "step_sign" not in rem.attrs   # sign still tested
    assert rem.operands[0] is main.results[0] and list(rem.operands[3:]) == list(main.results[1:])
    bound, step = main.operands[1].owner, main.operands[2].owner
    assert bound.opcode == "select" and step.opcode == "select"
    guard = bound.operands[0].owner                    # s <= max/4 and s > 0
    preds = sorted(o.owner.attrs["pred"] for o in guard.operands) if guard.opcode == "and" else []
    assert preds == ["gt", "le"]
    # off: the loop as written; with only unroll_strided off too
    for disabled in (("unroll",), ("unroll_strided",)):
        assert [op.attrs.get("unrolled") for op in fors(lowered(kern, disabled))] == [None]


def test_owned_loop_keeps_its_attr():
    main, rem = fors(lowered(gs_owned))
    assert main.attrs["owned"] == rem.attrs["owned"] == "y"


def test_loads_first_in_the_main_loop():
    body = [op.opcode for op in fors(lowered(gs_mix))[0].regions[0].ops]
    assert body.count("load") == 8
    assert max(i for i, o in enumerate(body) if o == "load") < body.index("mul")


def test_never_positive_step_left_alone():
    @kaio.kernel
    def down(x: kaio.In[f32], out: kaio.Raw[f32]):
        s = 0.0
        for j in range(x.shape[0] - 1, kaio.thread_idx.x - 1, 0 - kaio.block_dim.x):
            s += x[j]
        out[kaio.thread_idx.x] = s

    assert [op.attrs.get("unrolled") for op in fors(lowered(down))] == [None]


# --- bit-identical to the loop as written -------------------------------------------------------
NS = [0, 1, 5, 11, 12, 13, 47, 48, 49, 50, 51, 100, 257]     # step 12: n < step, n % step != 0


@pytest.mark.parametrize("n", NS)
def test_float_sum_bit_identical(n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)).astype(np.float32)
    grid, block = 3, 4
    on, off = on_off(gs_sum, [x, np.zeros(grid * block, np.float32)], grid, block)
    same_bits(on, off)
    for t in range(grid * block):                     # the loop as written, in f32
        s = np.float32(0)
        for i in range(t, n, grid * block):
            s = np.float32(s + x[i])
        assert on[1][t].tobytes() == s.tobytes()


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("grid, block", [(3, 4), (1, 1), (2, 5)])
def test_int_and_recurrence_bit_identical(n, grid, block):
    rng = np.random.default_rng(n + 7)
    x = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    f = rng.standard_normal(n).astype(np.float32)
    args = [x, f, np.zeros(grid * block, np.int32), np.zeros(grid * block, np.float32)]
    on, off = on_off(gs_mix, args, grid, block)
    same_bits(on, off)
    g = grid * block
    for t in range(g):
        a = 0
        for i in range(t, n, g):
            a = (a * 31 + int(x[i])) & 0xFFFFFFFF
        assert on[2][t] == np.array(a, np.uint32).view(np.int32)


@pytest.mark.parametrize("n", NS)
def test_stores_in_the_loop_bit_identical(n):
    rng = np.random.default_rng(n + 3)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    on, off = on_off(gs_owned, [x, y], 3, 4)
    same_bits(on, off)
    assert np.array_equal(on[1], y * np.float32(0.5) + x)
    on, off = on_off(gs_inplace, [y, np.zeros(10, np.float32)], 2, 5)
    same_bits(on, off)
    assert np.array_equal(on[0], y * np.float32(3) - np.float32(1))


@pytest.mark.parametrize("lo, hi, st", [
    (0, 10, 1), (0, 0, 1), (5, 4, 1), (0, 40, 3), (3, 40, 13), (-7, 20, 5), (20, -7, -5),
    (40, 3, -3), (10, 0, -1), (0, 100, 2**29 - 1), (0, I32_MAX - 2**29, 2**29),
    (0, I32_MAX - 2**29 - 1, 2**29 + 1), (-2**31, 2**30, 2**30), (0, 5, I32_MAX),
    (-2**31, 2**31 - 2**29, 2**29 - 1), (I32_MAX - 40, I32_MAX - 1, 1)])
def test_parameter_steps_bit_identical(lo, hi, st):
    """Steps of either sign, around max/4 (where 4*step would wrap), bounds near the limits
    (none where the loop as written would wrap its iv: that loop would not end)."""
    out = np.zeros(1, np.int32)
    on, off = on_off(param_step, [lo, hi, st, out], 1, 1)
    same_bits(on, off)
    a = 0
    for j in range(lo, hi, st):
        a = (a * 7 + (j - lo)) & 0xFFFFFFFF
    assert on[0][0] == np.array(a, np.uint32).view(np.int32)


# --- backends -----------------------------------------------------------------------------------
def _main_loop(ptx):
    """Instruction lines of the first ``$L_for_N: ... $L_endfor_M:`` loop."""
    body = re.findall(r"\$L_for_\d+:\n(.*?)\$L_endfor_\d+:", ptx, re.S)[0]
    lines = (ln.strip() for ln in body.splitlines())
    return [ln for ln in lines if ln and not ln.startswith(("//", ".loc"))]


@pytest.mark.parametrize("kern", [gs_sum, kk.grid_sum], ids=["gs_sum", "bench_grid_sum"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_four_loads_before_the_first_add(kern, arch):
    ptx, _ = emit_ptx(lowered(kern), arch)
    code = _main_loop(ptx)
    loads = [i for i, c in enumerate(code) if c.startswith("ld.global.nc.f32")]
    adds = [i for i, c in enumerate(code) if c.startswith("add.rn.f32")]
    assert len(loads) == 4 and len(adds) == 4 and max(loads) < min(adds)
    # the main loop tests only iv < bound: its step is positive (no per-iteration sign test)
    assert code[0].startswith("setp.ge.s32") and not any(c.startswith("setp.le") for c in code)
    ptxas(ptx, arch)


def test_ptx_rolled_without_the_switch():
    ptx, _ = emit_ptx(lowered(kk.grid_sum, ("unroll_strided",)), "sm_90")
    assert sum(c.startswith("ld.global.nc.f32") for c in _main_loop(ptx)) == 1


_SIM = [
    (gs_sum, lambda: [np.arange(53, dtype=np.float32) * 0.1, np.zeros(6, np.float32)], 2, 3),
    (gs_owned, lambda: [np.arange(29, dtype=np.float32), np.ones(29, np.float32)], 2, 3),
    (gs_inplace, lambda: [np.arange(31, dtype=np.float32), np.zeros(4, np.float32)], 1, 4),
    (param_step, lambda: [0, 200, 7, np.zeros(1, np.int32)], 1, 1),
    (param_step, lambda: [40, 3, -3, np.zeros(1, np.int32)], 1, 1),
    (param_step, lambda: [0, I32_MAX - 2**29 - 1, 2**29 + 1, np.zeros(1, np.int32)], 1, 1),
    (param_step, lambda: [-2**31, 2**31 - 2**29, 2**29 - 1, np.zeros(1, np.int32)], 1, 1),
]


@pytest.mark.parametrize("case", range(len(_SIM)))
def test_ptx_simulated_matches_the_loop_as_written(case):
    from ptx_sim import Machine
    kern, make, grid, block = _SIM[case]
    args = make()
    want = run_ref_with(unroll, kern, args, grid, block, on=False)
    ptx, abi = emit_ptx(lowered(kern), "sm_90")
    sim = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    Machine(ptx).launch(sim, abi, (grid, 1, 1), (block, 1, 1))
    same_bits([a for a in sim if isinstance(a, np.ndarray)], want)


@pytest.mark.parametrize("n", [0, 5, 49, 100])
def test_llvm_host_jit_matches_the_loop_as_written(n):
    pytest.importorskip("llvmlite")
    from llvm_host import run_on_host
    rng = np.random.default_rng(n)
    x, f = rng.integers(-99, 99, n).astype(np.int32), rng.standard_normal(n).astype(np.float32)
    args = [x, f, np.zeros(12, np.int32), np.zeros(12, np.float32)]
    want = run_ref_with(unroll, gs_mix, args, 3, 4, on=False)
    got = run_on_host(gs_mix.specialize_ir(), [a.copy() for a in args], (3, 1, 1), (4, 1, 1))
    same_bits(got, want)


# --- the benchmark's classic grid-stride sum ------------------------------------------------------
@pytest.mark.parametrize("n, grid, block", [(0, 2, 64), (1000, 3, 64), (100003, 7, 96)])
def test_bench_grid_sum(n, grid, block):
    x = np.random.default_rng(n).random(n).astype(np.float32)
    for k in (kk.grid_sum, kk.grid_sum_rolled):
        total = np.zeros(1, np.float32)
        k[(grid,), (block,)](x, total)
        assert abs(float(total[0]) - float(x.astype(np.float64).sum())) <= 1e-5 * max(n, 1), k.name
