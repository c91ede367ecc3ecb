"""More reference-backend ops: math predicates, bitcast, select, shared atomics, aliasing
dynamic shared memory, uniform while loops, f64 fma at the extremes."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from reference_kit import buf, build, elementwise, gid_guard, guarded, run

from kaio import dtypes as dt
from kaio import semantics as S


def test_math_predicates_bitcast_select():
    x = np.array([np.nan, np.inf, -1.5, 0.0, -np.inf], np.float32)
    k = elementwise("preds", [dt.f32], dt.i32, lambda b, v: b.select(
        b.math("isnan", v), b.const(1, dt.i32),
        b.select(b.math("isinf", v), b.const(2, dt.i32),
                 b.cast(b.math("isfinite", v), dt.i32))))
    out = np.zeros(5, np.int32)
    run(k, 1, 8, x, out)
    assert list(out) == [1, 2, 1, 1, 2]
    k = elementwise("bits", [dt.f32], dt.u32, lambda b, v: b.bitcast(v, dt.u32))
    out = np.zeros(5, np.uint32)
    run(k, 1, 8, x, out)
    np.testing.assert_array_equal(out, x.view(np.uint32))


def test_shared_memory_atomics_per_block():
    """Each block counts its threads with t % 4 == 0 in a shared counter."""
    def body(b, ix, out):
        t = b.special("thread_idx", 0)
        cnt = b.shared_array(dt.i32, (1,), name="cnt")
        with guarded(b, b.cmp("eq", t, ix.const(0))):
            b.store(cnt, [ix.const(0)], ix.const(0))
        b.barrier()
        with guarded(b, b.cmp("eq", ix.rem(t, 4), ix.const(0))):
            b.atomic("add", cnt, [ix.const(0)], ix.add(b.special("block_idx", 0), 1))
        b.barrier()
        with guarded(b, b.cmp("eq", t, ix.const(0))):
            b.store(out, [b.special("block_idx", 0)], b.load(cnt, [ix.const(0)]))
    k = build("sh_atomic", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(5, np.int32)
    run(k, 5, 64, out)
    np.testing.assert_array_equal(out, 16 * (np.arange(5) + 1))


def test_dynamic_shared_views_alias_the_same_bytes():
    """Write f32 through one dyn_shared view, read the bits through a u32 view."""
    def body(b, ix, x, out):
        t = b.special("thread_idx", 0)
        g = ix.global_linear_id()
        fs = b.dyn_shared(dt.f32, name="fs")
        us = b.dyn_shared(dt.u32, name="us")
        b.store(fs, [t], b.load(x, [g]))
        b.barrier()
        b.store(out, [g], b.load(us, [ix.sub(ix.const(31), t)]))
    k = build("alias", [("x", buf(dt.f32)), ("out", buf(dt.u32, "out"))], body)
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.uint32)
    run(k, 2, 32, x, out, shared_bytes=32 * 4)
    np.testing.assert_array_equal(out, x.reshape(2, 32)[:, ::-1].reshape(-1).view(np.uint32))


def test_uniform_while_and_loop_carried_floats():
    """A while whose condition is uniform: halve a uniform value until below 1."""
    def body(b, ix, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            op, before, after = b.while_([b.const(1000.0, dt.f32), ix.const(0)])
            with b.at(before):
                v, n = before.args
                b.condition(b.cmp("ge", v, b.const(1.0, dt.f32)), v, n)
            with b.at(after):
                v, n = after.args
                b.yield_(b.binary("mul", v, b.const(0.5, dt.f32)), ix.add(n, 1))
            b.store(out, [g], ix.add(ix.mul(op.results[1], 100), g))
    k = build("halve", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(10, np.int32)
    run(k, 1, 16, out)
    np.testing.assert_array_equal(out, 1000 + np.arange(10))  # 1000 / 2**10 < 1


def test_while_inside_divergent_branch_with_lane_results():
    """Only odd lanes loop; each counts down from its id; even lanes keep the else value."""
    def body(b, ix, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            odd = b.cmp("eq", ix.rem(g, 2), ix.const(1))
            with b.if_(odd, [dt.i32]) as (then, other, (res,)):
                with b.at(then):
                    op, before, after = b.while_([g, ix.const(0)])
                    with b.at(before):
                        v, acc = before.args
                        b.condition(b.cmp("gt", v, ix.const(0)), v, acc)
                    with b.at(after):
                        v, acc = after.args
                        b.yield_(ix.sub(v, 1), ix.add(acc, v))
                    b.yield_(op.results[1])
                with b.at(other):
                    b.yield_(ix.const(-1))
            b.store(out, [g], res)
    k = build("tri_odd", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(50, np.int32)
    run(k, 2, 32, out)
    g = np.arange(50)
    np.testing.assert_array_equal(out, np.where(g % 2 == 1, g * (g + 1) // 2, -1))


@pytest.mark.parametrize("a,b,c", [
    (1e300, 1e10, -np.inf), (1e300, 1e10, -1e308), (1e-300, 1e-300, 5e-324),
    (3.0, 1.0 / 3.0, -1.0), (2.0**600, 2.0**-600, 1e-17), (1e308, 10.0, -1e308),
    (np.nan, 1.0, 1.0), (np.inf, 0.0, 1.0), (1.0 + 2**-52, 1.0 - 2**-53, -1.0),
])
def test_f64_fma_at_the_extremes(a, b, c):
    got = S.fma(dt.f64, np.array([a]), np.array([b]), np.array([c]))[0]
    if np.isfinite(a) and np.isfinite(b) and np.isinf(c):
        assert got == c  # the exact product is finite, so the sum is c (never inf - inf)
        return
    if any(np.isnan(v) or np.isinf(v) for v in (a, b, c)):
        with np.errstate(all="ignore"):
            want = np.float64(a) * np.float64(b) + np.float64(c)
        assert (np.isnan(got) and np.isnan(want)) or got == want
        return
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        want = float(exact)  # Fraction -> float rounds to nearest even
    except OverflowError:
        want = np.inf if exact > 0 else -np.inf
    assert got == want, (a, b, c, got, want)


def test_vote_and_ballot_in_a_partial_warp_at_width_64():
    T = 96  # warps of 64 and 32 lanes

    def body(b, ix, anyv, ballots):
        t = b.special("thread_idx", 0)
        pred = b.cmp("eq", t, ix.const(80))
        b.store(anyv, [t], b.vote("any", pred))
        b.store(ballots, [t], b.ballot(pred))
    k = build("pw", [("anyv", buf(dt.bool_, "out")), ("ballots", buf(dt.u64, "out"))], body)
    anyv, ballots = np.zeros(T, bool), np.zeros(T, np.uint64)
    run(k, 1, T, anyv, ballots, warp_size=64)
    t = np.arange(T)
    np.testing.assert_array_equal(anyv, t >= 64)
    np.testing.assert_array_equal(ballots, np.where(t >= 64, np.uint64(1 << 16), np.uint64(0)))
