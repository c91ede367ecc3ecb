"""Integer ranges (kaio.passes.int_ranges) and unsigned division where both operands are >= 0
(kaio.passes.unsigned_divide): which div/rem get ``nonneg``, what the PTX and LLVM emitters make
of it, and that results are unchanged (reference interpreter vs PTX run by tests/ptx_sim.py),
negative operands still truncating toward zero."""
from __future__ import annotations

import re

import numpy as np
import pytest
from reference_kit import run_ref_with
from test_ptx import ptxas

import kaio
from kaio import f64, i32
from kaio.backends.ptx import emit_ptx
from kaio.ir import parse_kernel, print_kernel
from kaio.passes import target_pipeline, unroll
from kaio.passes.int_ranges import IntRanges

I32_MAX = 2**31 - 1


@kaio.kernel
def init3(out: kaio.Out[f64, 3]):
    for k, j, i in out.owned():
        out[k, j, i] = f64(i) + 100.0 * f64(j) + 10000.0 * f64(k)


@kaio.kernel
def signs(a: i32, b: i32, out: kaio.Raw[i32]):
    """Divisions of unknown sign (parameters) next to ones of thread ids (>= 0)."""
    t = kaio.thread_idx.x
    out[4 * t] = a // b
    out[4 * t + 1] = a % b
    out[4 * t + 2] = (t + 5) // 2
    out[4 * t + 3] = (t - 1) % 3          # t - 1 may be -1: signed


@kaio.kernel
def loops(n: i32, out: kaio.Raw[i32]):
    s = 0
    for i in range(0, n):                 # 0 <= i < n: i // 3 unsigned
        s += i // 3
    for i in range(-4, n):                # i may be negative: signed
        s += i // 3
    out[kaio.thread_idx.x] = s


def lowered(k):
    return target_pipeline(k.specialize_ir(), 32)


def divs(k):
    return [(op.opcode, bool(op.attrs.get("nonneg"))) for op in k.walk() if op.opcode in ("div", "rem")
            and op.result.type.is_int]


def test_elementwise_unravel_is_unsigned():
    assert divs(lowered(init3)) == [("rem", True), ("div", True), ("rem", True), ("div", True)]


def test_unknown_signs_stay_signed():
    assert divs(lowered(signs)) == [("div", False), ("rem", False), ("div", True), ("rem", False)]


def test_loop_counters():
    k = target_pipeline(loops.specialize_ir(), 32, disabled_passes=frozenset({"unroll"}))
    assert divs(k) == [("div", True), ("div", False)]


def test_attribute_round_trips_and_verifies():
    k = lowered(init3)
    assert "{nonneg = true}" in print_kernel(k)
    assert print_kernel(parse_kernel(print_kernel(k))) == print_kernel(k)


def _ranges(src: str):
    k = parse_kernel(src)
    r = IntRanges(k)
    return {op.result.name: r.at(op.result, op) for op in k.walk() if op.results and op.result.name}


def test_mixed_radix_ids_are_below_2_31():
    """(by * gx + bx) * bdx + tx is in [0, 2**31) on every launch (at most 2**31 threads);
    bx * gx + bx repeats an extent and may wrap, so it has no range."""
    r = _ranges("""kernel @k(%y: buf<i32, 1, global, raw>) params {y = {kind = "buffer"}} {
  %bx = block_idx {axis = 0} : i32
  %by = block_idx {axis = 1} : i32
  %gx = grid_dim {axis = 0} : i32
  %dx = block_dim {axis = 0} : i32
  %tx = thread_idx {axis = 0} : i32
  %a = mul %by, %gx : i32
  %b = add %a, %bx : i32
  %c = mul %b, %dx : i32
  %gid = add %c, %tx : i32
  %d = mul %bx, %gx : i32
  %bad = add %d, %bx : i32
  %e = mul %gx, %dx : i32
  %dm1 = sub %tx, %dx : i32
}""")
    assert r["gid"] == (0, I32_MAX) and r["b"] == (0, I32_MAX)
    assert r["bad"] is None and r["d"] is None
    assert r["e"] is None                       # grid.x * block.x may be 2**31: wraps
    assert r["dm1"] == (-1024, 1022)


def test_guard_makes_factors_nonzero():
    """Inside ``if g < n0 * n1`` with g >= 0, n0 and n1 are >= 1, so g // n1 has a range."""
    src = """kernel @k(%y: buf<i32, 2, global, raw>) params {y = {kind = "buffer"}} {
  %tx = thread_idx {axis = 0} : i32
  %n0 = shape %y {axis = 0} : i32
  %n1 = shape %y {axis = 1} : i32
  %p = mul %n0, %n1 : i32
  %c = cmp %tx, %p {pred = "lt"} : bool
  if %c () {
    %q = div %tx, %n1 : i32
    %r = rem %q, %n0 : i32
  } () {
    %q2 = div %tx, %n1 : i32
  }
}"""
    r = _ranges(src)
    assert r["q"] == (0, 1023) and r["r"] == (0, 1023)
    assert r["q2"] is None                      # n1 may be 0 outside the guard


def test_ptx_and_llvm_divide_unsigned():
    ptx = init3.emit("ptx", "sm_90")
    assert len(re.findall(r"\b(div|rem)\.u32", ptx)) >= 2 and not re.search(r"(div|rem)\.s32", ptx)
    ptxas(ptx, "sm_90")
    for target in ("nvptx64-sm_90", "gfx90a"):
        ll = init3.emit("llvm", target)
        assert re.search(r"\budiv i32", ll) and re.search(r"\burem i32", ll)
        assert not re.search(r"\bs(div|rem) i32", ll)
    sptx = signs.emit("ptx", "sm_90")
    assert re.search(r"div\.s32", sptx) and re.search(r"rem\.s32", sptx) and re.search(r"div\.u32", sptx)


def _sim(k, args, grid, block):
    from ptx_sim import Machine
    ptx, abi = emit_ptx(lowered(k), "sm_90")
    sim = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    Machine(ptx).launch(sim, abi, grid, block)
    return [a for a in sim if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("shape,grid,block", [((3, 5, 7), (2, 1, 1), (64, 1, 1)),
                                              ((2, 3, 11), (2, 2, 1), (8, 2, 2))])
def test_simulated_unravel_matches_numpy(shape, grid, block):
    k, j, i = np.meshgrid(*(np.arange(s, dtype=np.float64) for s in shape), indexing="ij")
    (got,) = _sim(init3, [np.zeros(shape)], grid, block)
    np.testing.assert_array_equal(got, i + 100.0 * j + 10000.0 * k)
    assert "div.u32" in init3.emit("ptx", "sm_90")


@pytest.mark.parametrize("a,b", [(-7, 2), (7, -2), (-7, -2), (7, 2), (-2**31, 3)])
def test_negative_operands_still_truncate(a, b):
    """C division on every backend: -7 // 2 == -3, -7 % 2 == -1 (the sign of the dividend)."""
    (got,) = _sim(signs, [a, b, np.zeros(8, np.int32)], (1, 1, 1), (2, 1, 1))
    q = int(a / b)
    want = [q, a - q * b, 2, -1, q, a - q * b, 3, 0]
    assert got.tolist() == want
    (ref,) = run_ref_with(unroll, signs, [a, b, np.zeros(8, np.int32)], 1, 2)
    assert ref.tolist() == want


def test_reference_results_unchanged():
    """The reference interpreter (which ignores the attribute) agrees with numpy."""
    (out,) = run_ref_with(unroll, init3, [np.zeros((3, 4, 5))], 1, 64)
    k, j, i = np.meshgrid(*(np.arange(s, dtype=np.float64) for s in out.shape), indexing="ij")
    np.testing.assert_array_equal(out, i + 100.0 * j + 10000.0 * k)
