"""The reference backend (numpy SIMT interpreter) on IR built with kaio.ir.Builder.

Every result is checked against a numpy / Python model written independently in the test.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from reference_kit import at, buf, build, elementwise, gid_guard, guarded, run

import kaio
from kaio import dtypes as dt
from kaio.backends.reference import (
    DivergentBarrierError,
    OutOfBoundsError,
    ReferenceBackend,
    UninitializedReadError,
)

BF16 = np.dtype(ml_dtypes.bfloat16)


def _binop_kernel(opcode, dtype):
    return elementwise(opcode, [dtype, dtype], dtype, lambda b, x, y: b.binary(opcode, x, y))


def _run_binop(opcode, dtype, x, y):
    out = np.zeros(len(x), dtype=dtype.storage_np)
    run(_binop_kernel(opcode, dtype), max(1, -(-len(x) // 64)), 64, x, y, out)
    return out


# --- basics -------------------------------------------------------------------------------

def test_saxpy_matches_numpy():
    def body(b, ix, a, x, y):
        g, guard = gid_guard(b, ix, b.shape(y, 0))
        with guard:
            b.store(y, [g], b.binary("add", b.binary("mul", a, b.load(x, [g])), b.load(y, [g])))
    k = build("saxpy", [("a", dt.f32), ("x", buf(dt.f32)), ("y", buf(dt.f32, "region"))], body)
    rng = np.random.default_rng(0)
    x = rng.random(1000, dtype=np.float32)
    y = rng.random(1000, dtype=np.float32)
    want = np.float32(2.5) * x + y
    run(k, 4, 256, 2.5, x, y)
    np.testing.assert_array_equal(y, want)


def test_thread_geometry_3d():
    """thread/block ids, dims and the row-major store into a 3-d buffer."""
    grid, block = (2, 3, 2), (4, 2, 3)
    shape = tuple(g * bl for g, bl in zip(grid, block))[::-1]  # (z, y, x)

    def body(b, ix, out):
        gx, gy, gz = (ix.global_id(a) for a in range(3))
        code = ix.add(ix.mul(b.special("block_dim", 0), 1000), ix.global_linear_id())
        b.store(out, [gz, gy, gx], code)
    k = build("geo", [("out", buf(dt.i32, "out", 3))], body)
    out = np.zeros(shape, np.int32)
    run(k, grid, block, out)
    T = math.prod(block)
    want = np.zeros(shape, np.int32)
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                for tz in range(block[2]):
                    for ty in range(block[1]):
                        for tx in range(block[0]):
                            blin = (bz * grid[1] + by) * grid[0] + bx
                            tlin = (tz * block[1] + ty) * block[0] + tx
                            want[bz * block[2] + tz, by * block[1] + ty, bx * block[0] + tx] = \
                                4000 + blin * T + tlin
    np.testing.assert_array_equal(out, want)


def test_scalar_param_types_and_device_array_rejected():
    def body(b, ix, a, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            b.store(out, [g], a)
    k = build("fill", [("a", dt.u8), ("out", buf(dt.u8, "out"))], body)
    out = np.zeros(5, np.uint8)
    run(k, 1, 8, 200, out)
    assert (out == 200).all()

    class DeviceArray:
        __cuda_array_interface__ = {"shape": (5,), "typestr": "|u1", "data": (1 << 20, False),
                                    "version": 3}
    with pytest.raises(TypeError, match="numpy arrays"):
        run(k, 1, 8, 3, DeviceArray())


def test_out_buffers_start_poisoned():
    """Elements an Out kernel never writes come back NaN (floats) / 0xA5 bytes (ints)."""
    def body(b, ix, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            with guarded(b, b.cmp("eq", ix.rem(g, 2), ix.const(0))):
                b.store(out, [g], b.cast(g, out.type.dtype))
    for dtype, check in ((dt.f32, np.isnan), (dt.i32, lambda v: v == np.int32(-1515870811)),
                         (dt.u16, lambda v: v == 0xA5A5)):
        k = build("evens", [("out", buf(dtype, "out"))], body)
        out = np.zeros(10, dtype.storage_np)
        run(k, 1, 16, out)
        np.testing.assert_array_equal(out[0::2], np.arange(0, 10, 2).astype(dtype.storage_np))
        assert check(out[1::2]).all(), (dtype, out)


# --- integer and float semantics through the interpreter -----------------------------------

@pytest.mark.parametrize("dtype", dt.INTS, ids=lambda t: t.name)
def test_integer_wraparound_per_width(dtype):
    lo, hi = dtype.min_value(), dtype.max_value()
    x = np.array([hi, lo, hi, lo, 3, hi // 3], dtype=dtype.storage_np)
    y = np.array([1, -1 if dtype.is_signed else hi, hi, lo, 5, 7], dtype=dtype.storage_np)
    mod = 1 << dtype.bits

    def wrap(v):
        v %= mod
        return v - mod if dtype.is_signed and v > hi else v
    for op, f in (("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                  ("mul", lambda a, b: a * b)):
        got = _run_binop(op, dtype, x, y)
        want = [wrap(f(int(a), int(b))) for a, b in zip(x, y)]
        assert [int(v) for v in got] == want, (op, dtype)


def test_c_division_and_remainder():
    x = np.array([7, -7, 7, -7, 0, -2**31, -2**31, 5, -5], np.int32)
    y = np.array([2, 2, -2, -2, 3, -1, 1, 0, 0], np.int32)
    assert list(_run_binop("div", dt.i32, x, y)) == [3, -3, -3, 3, 0, -2**31, -2**31, 0, 0]
    assert list(_run_binop("rem", dt.i32, x, y)) == [1, -1, 1, -1, 0, 0, 0, 0, 0]
    ux = np.array([7, 2**32 - 1, 9], np.uint32)
    uy = np.array([2, 2, 0], np.uint32)
    assert list(_run_binop("div", dt.u32, ux, uy)) == [3, 2**31 - 1, 0]
    assert list(_run_binop("rem", dt.u32, ux, uy)) == [1, 1, 0]


def test_shifts_clamp_at_width():
    x = np.array([1, -8, -8, 8, 1, -1], np.int32)
    s = np.array([31, 1, 32, 40, -1, 100], np.int32)
    assert list(_run_binop("shl", dt.i32, x, s)) == [-2**31, -16, 0, 0, 0, 0]
    assert list(_run_binop("shr", dt.i32, x, s)) == [0, -4, -1, 0, 0, -1]
    ux = np.array([0x80, 0xFF, 0xFF], np.uint8)
    us = np.array([7, 8, 3], np.uint8)
    assert list(_run_binop("shr", dt.u8, ux, us)) == [1, 0, 0x1F]
    assert list(_run_binop("shl", dt.u8, ux, us)) == [0, 0, 0xF8]


def test_float_min_max_nan_and_signed_zero():
    nan, inf = np.nan, np.inf
    x = np.array([nan, 1.0, nan, -0.0, 0.0, -inf, 2.0], np.float32)
    y = np.array([1.0, nan, nan, 0.0, -0.0, 3.0, inf], np.float32)
    mn = _run_binop("min", dt.f32, x, y)
    mx = _run_binop("max", dt.f32, x, y)
    np.testing.assert_array_equal(mn[[0, 1, 5, 6]], [1.0, 1.0, -inf, 2.0])
    np.testing.assert_array_equal(mx[[0, 1, 5, 6]], [1.0, 1.0, 3.0, inf])
    assert np.isnan(mn[2]) and np.isnan(mx[2])
    assert np.signbit(mn[3]) and np.signbit(mn[4])
    assert not np.signbit(mx[3]) and not np.signbit(mx[4])


def test_float_compares_follow_python_on_nan():
    vals = [np.nan, 0.0, -0.0, 1.0, np.inf]
    x = np.array([a for a in vals for _ in vals], np.float64)
    y = np.array([b for _ in vals for b in vals], np.float64)
    for pred, f in (("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b),
                    ("lt", lambda a, b: a < b), ("le", lambda a, b: a <= b),
                    ("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b)):
        k = elementwise(pred, [dt.f64, dt.f64], dt.bool_, lambda b, p, q, pred=pred: b.cmp(pred, p, q))
        out = np.zeros(len(x), bool)
        run(k, 1, 32, x, y, out)
        assert list(out) == [f(float(a), float(b)) for a, b in zip(x, y)], pred


def test_saturating_float_to_int_casts():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.9, -2.9, -0.5, 255.5, 300.0], np.float32)
    for to, want in ((dt.i32, [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 2, -2, 0, 255, 300]),
                     (dt.u8, [0, 255, 0, 255, 0, 2, 0, 0, 255, 255]),
                     (dt.i64, [0, 2**63 - 1, -2**63, 3000000000, -3000000000, 2, -2, 0, 255, 300])):
        k = elementwise("cast", [dt.f32], to, lambda b, v, to=to: b.cast(v, to))
        out = np.zeros(len(x), to.storage_np)
        run(k, 1, 32, x, out)
        assert [int(v) for v in out] == want, to


def test_f16_and_bf16_round_at_each_op():
    rng = np.random.default_rng(1)
    a16 = rng.standard_normal(200).astype(np.float16)
    b16 = rng.standard_normal(200).astype(np.float16)
    for op, f in (("add", np.add), ("mul", np.multiply), ("div", np.divide)):
        np.testing.assert_array_equal(_run_binop(op, dt.f16, a16, b16), f(a16, b16))  # numpy rounds per op
    abf = rng.standard_normal(200).astype(BF16)
    bbf = rng.standard_normal(200).astype(BF16)
    from fractions import Fraction
    got = _run_binop("add", dt.bf16, abf, bbf)
    for g, p, q in zip(got, abf, bbf):
        exact = Fraction(float(p)) + Fraction(float(q))
        # the nearest bf16: no representable value strictly closer than the result
        lo, hi = np.nextafter(g, BF16.type(-np.inf)), np.nextafter(g, BF16.type(np.inf))
        err = abs(Fraction(float(g)) - exact)
        assert err <= abs(Fraction(float(lo)) - exact) and err <= abs(Fraction(float(hi)) - exact)
    # a chain of two f16 adds rounds twice: (2048 + 1) + 1 stays 2048 in f16
    k = elementwise("chain", [dt.f16], dt.f16,
                    lambda b, v: b.binary("add", b.binary("add", v, b.const(1.0, dt.f16)),
                                          b.const(1.0, dt.f16)))
    out = np.zeros(1, np.float16)
    run(k, 1, 1, np.array([2048], np.float16), out)
    assert out[0] == 2048


def test_fma_rounds_once():
    x = np.array([0.1], np.float32)
    k = elementwise("fma", [dt.f32], dt.f32, lambda b, v: b.fma(v, b.const(10.0, dt.f32),
                                                                b.const(-1.0, dt.f32)))
    out = np.zeros(1, np.float32)
    run(k, 1, 1, x, out)
    assert out[0] == np.float32(float(np.float32(0.1)) * 10.0 - 1.0)
    assert out[0] != np.float32(0.1) * np.float32(10) - np.float32(1)


def test_math_and_casts_between_floats():
    x = np.linspace(-3, 3, 50).astype(np.float32)
    k = elementwise("tanh", [dt.f32], dt.f32, lambda b, v: b.math("tanh", v))
    out = np.zeros(50, np.float32)
    run(k, 1, 64, x, out)
    np.testing.assert_allclose(out, np.tanh(x.astype(np.float64)), rtol=1e-6)
    k = elementwise("tobf", [dt.f64], dt.bf16, lambda b, v: b.cast(v, dt.bf16))
    out = np.zeros(1, BF16)
    run(k, 1, 1, np.array([1.0 + 2**-8 + 2**-30]), out)
    assert float(out[0]) == 1.0 + 2**-7  # just above the halfway point: rounds up, not to even


# --- control flow -------------------------------------------------------------------------

def test_nested_divergence_with_yields():
    """out[i] = (i%3==0) ? ((i%2==0) ? 10*i : -i) : i+1000 with every branch mixing lanes."""
    def body(b, ix, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            c3 = b.cmp("eq", ix.rem(g, 3), ix.const(0))
            with b.if_(c3, [dt.i32]) as (then, other, (res,)):
                with b.at(then):
                    c2 = b.cmp("eq", ix.rem(g, 2), ix.const(0))
                    with b.if_(c2, [dt.i32]) as (t2, e2, (inner,)):
                        with b.at(t2):
                            b.yield_(ix.mul(g, 10))
                        with b.at(e2):
                            b.yield_(b.unary("neg", g))
                    b.yield_(inner)
                with b.at(other):
                    b.yield_(ix.add(g, 1000))
            b.store(out, [g], res)
    k = build("nest", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(100, np.int32)
    run(k, 2, 64, out)
    i = np.arange(100)
    np.testing.assert_array_equal(out, np.where(i % 3 == 0, np.where(i % 2 == 0, 10 * i, -i), i + 1000))


def test_for_with_per_lane_trip_counts_and_carried_values():
    """acc = sum(k*k for k in range(lo, i, 2)) with lane-dependent bounds."""
    def body(b, ix, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            lo = ix.rem(g, 3)
            op, blk, iv, (acc,) = b.for_(lo, g, ix.const(2), [ix.const(0)])
            with b.at(blk):
                b.yield_(ix.add(acc, ix.mul(iv, iv)))
            b.store(out, [g], op.results[0])
    k = build("tri", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(70, np.int32)
    run(k, 3, 32, out)
    np.testing.assert_array_equal(out, [sum(k * k for k in range(i % 3, i, 2)) for i in range(70)])


def test_for_counting_down_uniform_bounds():
    def body(b, ix, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            op, blk, iv, (acc,) = b.for_(ix.const(10), ix.const(0), ix.const(-3), [g])
            with b.at(blk):
                b.yield_(ix.add(ix.mul(acc, 2), iv))
            b.store(out, [g], op.results[0])
    k = build("down", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(5, np.int32)
    run(k, 1, 8, out)
    want = []
    for g in range(5):
        acc = g
        for i in range(10, 0, -3):
            acc = acc * 2 + i
        want.append(acc)
    assert list(out) == want


def test_while_collatz_steps():
    def body(b, ix, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            n0 = ix.add(g, 1)
            op, before, after = b.while_([n0, ix.const(0)])
            with b.at(before):
                n, steps = before.args
                b.condition(b.cmp("ne", n, ix.const(1)), n, steps)
            with b.at(after):
                n, steps = after.args
                even = b.cmp("eq", ix.rem(n, 2), ix.const(0))
                nxt = b.select(even, ix.div(n, 2), ix.add(ix.mul(n, 3), 1))
                b.yield_(nxt, ix.add(steps, 1))
            b.store(out, [g], op.results[1])
    k = build("collatz", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(300, np.int32)
    run(k, 3, 128, out)

    def steps(n):
        s = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
        return s
    assert list(out) == [steps(i + 1) for i in range(300)]


# --- memory: shared, dynamic shared, local, bounds -------------------------------------------

def _tree_reduce_kernel(with_barriers=True, dyn=False):
    """Block sum of x in shared memory: s = T/2 .. 1: if t < s: sh[t] += sh[t + s]."""
    def body(b, ix, x, out):
        t = b.special("thread_idx", 0)
        g = ix.global_linear_id()
        sh = b.dyn_shared(dt.f32, name="sh") if dyn else b.shared_array(dt.f32, (128,), name="sh")
        b.store(sh, [t], b.load(x, [g]))
        if with_barriers:
            b.barrier()
        for s in (64, 32, 16, 8, 4, 2, 1):
            with guarded(b, b.cmp("lt", t, ix.const(s))):
                b.loc = at(20 + s)
                b.store(sh, [t], b.binary("add", b.load(sh, [t]), b.load(sh, [ix.add(t, s)])))
            b.loc = at(1)
            if with_barriers:
                b.barrier()
        with guarded(b, b.cmp("eq", t, ix.const(0))):
            b.store(out, [b.special("block_idx", 0)], b.load(sh, [t]))
    return build("tree", [("x", buf(dt.f32)), ("out", buf(dt.f32, "out"))], body)


def _tree_model(x, T=128):
    sh = x.reshape(-1, T).copy()
    s = T // 2
    while s:
        sh[:, :s] = sh[:, :s] + sh[:, s:2 * s]
        s //= 2
    return sh[:, 0]


def test_shared_memory_tree_reduction():
    x = np.random.default_rng(2).standard_normal(128 * 40).astype(np.float32)
    out = np.zeros(40, np.float32)
    run(_tree_reduce_kernel(), 40, 128, x, out)
    np.testing.assert_array_equal(out, _tree_model(x))


def test_dynamic_shared_sized_by_launch(monkeypatch):
    x = np.random.default_rng(3).standard_normal(128 * 5).astype(np.float32)
    out = np.zeros(5, np.float32)
    run(_tree_reduce_kernel(dyn=True), 5, 128, x, out, shared_bytes=128 * 4)
    np.testing.assert_array_equal(out, _tree_model(x))
    with pytest.raises(OutOfBoundsError, match="'sh'"):
        run(_tree_reduce_kernel(dyn=True), 5, 128, x, out, shared_bytes=64 * 4)


def test_batches_of_blocks_give_the_same_answer(monkeypatch):
    from kaio.backends.reference import backend
    monkeypatch.setattr(backend, "LANES_PER_BATCH", 300)  # 2 blocks per batch, 17 batches
    x = np.random.default_rng(4).standard_normal(128 * 33).astype(np.float32)
    out = np.zeros(33, np.float32)
    run(_tree_reduce_kernel(), 33, 128, x, out)
    np.testing.assert_array_equal(out, _tree_model(x))


def test_local_arrays_are_per_lane():
    """Each lane fills a local array with g, g+1, g+2 and sums it back in reverse."""
    def body(b, ix, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            loc = b.local_array(dt.i32, (3,), name="scratch")
            for j in range(3):
                b.store(loc, [ix.const(j)], ix.add(g, j))
            acc = ix.const(0)
            for j in (2, 1, 0):
                acc = ix.add(ix.mul(acc, 10), b.load(loc, [ix.const(j)]))
            b.store(out, [g], acc)
    k = build("loc", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(40, np.int32)
    run(k, 1, 64, out)
    g = np.arange(40)
    np.testing.assert_array_equal(out, (g + 2) * 100 + (g + 1) * 10 + g)


def test_out_of_bounds_names_everything_and_leaves_arrays_untouched():
    def body(b, ix, x, y):
        g, guard = gid_guard(b, ix, b.shape(y, 0))
        with guard:
            b.loc = at(7)
            v = b.load(x, [ix.add(g, 1)])
            b.loc = at(8)
            b.store(y, [g], v)
    k = build("shifted", [("x", buf(dt.f32)), ("y", buf(dt.f32, "region"))], body)
    x = np.ones(10, np.float32)
    y = np.zeros(10, np.float32)
    with pytest.raises(OutOfBoundsError) as ei:
        run(k, 1, 16, x, y)
    e = ei.value
    assert isinstance(e, IndexError) and isinstance(e, kaio.KaioError)
    assert e.buffer == "x" and e.index == (10,) and e.line == 7 and e.kernel == "shifted"
    msg = str(e)
    assert "'shifted'" in msg and "'x'" in msg and "(10,)" in msg and "thread (9, 0, 0)" in msg
    assert "kern.py:7" in msg
    assert (y == 0).all()  # nothing copied back


def test_two_d_bounds_are_checked_per_dimension():
    def body(b, ix, x, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            b.store(out, [g], b.load(x, [ix.const(0), g]))  # column g of a 3x4 array
    k = build("col", [("x", buf(dt.f32, "in", 2)), ("out", buf(dt.f32, "out"))], body)
    with pytest.raises(OutOfBoundsError, match=r"\(0, 4\)"):
        run(k, 1, 8, np.zeros((3, 4), np.float32), np.zeros(5, np.float32))


def test_divergent_barrier_is_an_error():
    def body(b, ix, out):
        t = b.special("thread_idx", 0)
        with guarded(b, b.cmp("lt", t, ix.const(16))):
            b.loc = at(42)
            b.barrier()
        b.loc = at(1)
        b.store(out, [t], t)
    k = build("div_bar", [("out", buf(dt.i32, "out"))], body)
    with pytest.raises(DivergentBarrierError, match="divergent control flow") as ei:
        run(k, 1, 32, np.zeros(32, np.int32))
    assert ei.value.line == 42 and "kern.py:42" in str(ei.value)
    assert isinstance(ei.value, RuntimeError)


def test_barrier_in_block_uniform_branch_is_fine():
    """Only block 1 takes the branch with the barrier: uniform within every block."""
    def body(b, ix, out):
        t, blk = b.special("thread_idx", 0), b.special("block_idx", 0)
        g = ix.global_linear_id()
        with guarded(b, b.cmp("eq", blk, ix.const(1))):
            b.barrier()
        b.store(out, [g], t)
    k = build("uni_bar", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(64, np.int32)
    run(k, 2, 32, out)
    np.testing.assert_array_equal(out, np.tile(np.arange(32), 2))


def test_uninitialised_out_read_is_reported():
    def body(b, ix, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            b.loc = at(5)
            b.store(out, [g], b.binary("add", b.load(out, [g]), b.const(1.0, dt.f32)))
    k = build("acc_out", [("out", buf(dt.f32, "out"))], body)
    with pytest.raises(UninitializedReadError, match="'out'"):
        run(k, 1, 8, np.zeros(8, np.float32))


# --- atomics ----------------------------------------------------------------------------------

def _atomic_kernel(kind, dtype, index_fn, value_fn, extra_fn=None):
    def body(b, ix, data, old):
        g, guard = gid_guard(b, ix, b.shape(old, 0))
        with guard:
            vals = [value_fn(b, ix, g)] + ([extra_fn(b, ix, g)] if extra_fn else [])
            b.store(old, [g], b.atomic(kind, data, [index_fn(b, ix, g)], *vals))
    return build(f"atomic_{kind}", [("data", buf(dtype, "atomic")), ("old", buf(dtype, "out"))], body)


def test_atomic_histogram_with_collisions():
    n = 5000
    keys = np.random.default_rng(5).integers(0, 7, n).astype(np.int32)

    def body(b, ix, k, hist):
        g, guard = gid_guard(b, ix, b.shape(k, 0))
        with guard:
            b.atomic("add", hist, [b.load(k, [g])], ix.const(1))
    kern = build("hist", [("k", buf(dt.i32)), ("hist", buf(dt.i32, "atomic"))], body)
    hist = np.zeros(7, np.int32)
    run(kern, -(-n // 256), 256, keys, hist)
    np.testing.assert_array_equal(hist, np.bincount(keys, minlength=7))


@pytest.mark.parametrize("dtype", [dt.i32, dt.u64, dt.f32, dt.f16], ids=lambda t: t.name)
def test_atomic_add_old_values_follow_thread_order(dtype):
    """All threads add to element g % 3: each sees the running sum of lower threads."""
    n = 200
    k = _atomic_kernel("add", dtype, lambda b, ix, g: ix.rem(g, 3),
                       lambda b, ix, g: b.cast(ix.add(ix.rem(g, 5), 1), dtype))
    data = np.array([10, 20, 30], dtype.storage_np)
    old = np.zeros(n, dtype.storage_np)
    run(k, 4, 64, data, old)
    acc = [dtype.storage_np.type(v) for v in (10, 20, 30)]
    want = []
    for g in range(n):
        want.append(acc[g % 3])
        acc[g % 3] = (acc[g % 3] + dtype.storage_np.type(g % 5 + 1)).astype(dtype.storage_np)
    np.testing.assert_array_equal(old, np.array(want, dtype.storage_np))
    np.testing.assert_array_equal(data, np.array(acc, dtype.storage_np))


def test_atomic_cas_exch_min_max():
    n = 64
    # cas(data[0], compare=g, new=g+1): succeeds for thread 0, then 1, ... -> a chain
    k = _atomic_kernel("cas", dt.i32, lambda b, ix, g: ix.const(0), lambda b, ix, g: g,
                       lambda b, ix, g: ix.add(g, 1))
    data, old = np.zeros(1, np.int32), np.zeros(n, np.int32)
    run(k, 1, n, data, old)
    np.testing.assert_array_equal(old, np.arange(n))
    assert data[0] == n
    # cas compare=0 for everyone: only thread 0 succeeds
    k = _atomic_kernel("cas", dt.i32, lambda b, ix, g: ix.const(0), lambda b, ix, g: ix.const(0),
                       lambda b, ix, g: ix.add(g, 7))
    data = np.zeros(1, np.int32)
    run(k, 1, n, data, old)
    assert old[0] == 0 and (old[1:] == 7).all() and data[0] == 7
    # exch: each thread gets the previous thread's value
    k = _atomic_kernel("exch", dt.i32, lambda b, ix, g: ix.rem(g, 2), lambda b, ix, g: g)
    data = np.array([-1, -2], np.int32)
    run(k, 1, n, data, old)
    g = np.arange(n)
    np.testing.assert_array_equal(old, np.where(g < 2, [-1, -2] * (n // 2), g - 2))
    np.testing.assert_array_equal(data, [n - 2, n - 1])
    # max: old values are running maxima of (g * 37) % 64 in thread order
    k = _atomic_kernel("max", dt.i32, lambda b, ix, g: ix.const(0),
                       lambda b, ix, g: ix.rem(ix.mul(g, 37), 64))
    data = np.zeros(1, np.int32)
    run(k, 1, n, data, old)
    v = (g * 37) % 64
    np.testing.assert_array_equal(old, np.concatenate([[0], np.maximum.accumulate(v)[:-1]]))
    assert data[0] == v.max()


def test_atomic_float_add_into_one_cell_is_sequential():
    n = 1000
    k = _atomic_kernel("add", dt.f32, lambda b, ix, g: ix.const(0),
                       lambda b, ix, g: b.binary("div", b.const(1.0, dt.f32), b.cast(ix.add(g, 1), dt.f32)))
    data, old = np.zeros(1, np.float32), np.zeros(n, np.float32)
    run(k, 4, 256, data, old)
    acc = np.float32(0)
    for g in range(n):
        assert old[g] == acc
        acc = np.float32(acc + np.float32(1) / np.float32(g + 1))
    assert data[0] == acc


# --- warp ops -----------------------------------------------------------------------------

def _warp_model_src(mode, lane, arg, W):
    if mode == "idx":
        return arg % W, True
    if mode == "xor":
        return (lane ^ arg) % W, True
    if mode == "up":
        return lane - arg, lane - arg >= 0
    return lane + arg, lane + arg < W


@pytest.mark.parametrize("W", [32, 64])
@pytest.mark.parametrize("mode", ["idx", "up", "down", "xor"])
def test_shuffle_modes(W, mode):
    T = 96  # not a multiple of 64: the last warp is partial at W=64

    def body(b, ix, out):
        g = ix.global_linear_id()
        t = b.special("thread_idx", 0)
        arg = ix.rem(ix.mul(t, 7), 5) if mode != "idx" else ix.sub(ix.mul(t, 3), 40)
        v = ix.add(ix.mul(g, 10), 1)
        b.store(out, [g], b.shuffle(mode, v, arg))
    k = build("shfl", [("out", buf(dt.i32, "out"))], body)
    out = np.zeros(2 * T, np.int32)
    run(k, 2, T, out, warp_size=W)
    want = []
    for g in range(2 * T):
        t = g % T
        lane, base = t % W, t - t % W
        arg = (t * 7) % 5 if mode != "idx" else t * 3 - 40
        src, ok = _warp_model_src(mode, lane, arg, W)
        st = base + src
        ok = ok and st < T
        want.append(((g - t + st) if ok else g) * 10 + 1)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("W", [32, 64])
def test_vote_ballot_lane_id_over_active_lanes(W):
    T = 128

    def body(b, ix, anys, alls, ballots, lanes):
        g, t = ix.global_linear_id(), b.special("thread_idx", 0)
        b.store(lanes, [g], ix.add(ix.mul(b.special("lane_id"), 1000), b.special("warp_size")))
        # only lanes with t % 4 != 3 take part; pred: t % 8 == 0 (true in the first lane)
        with guarded(b, b.cmp("ne", ix.rem(t, 4), ix.const(3))):
            pred = b.cmp("eq", ix.rem(t, 8), ix.const(0))
            b.store(anys, [g], b.vote("any", pred))
            notlast = b.cmp("ne", ix.rem(t, 4), ix.const(2))
            b.store(alls, [g], b.vote("all", b.binary("or", notlast, b.cmp("ge", t, ix.const(0)))))
            b.store(ballots, [g], b.ballot(pred))
    k = build("votes", [("anys", buf(dt.bool_, "raw")), ("alls", buf(dt.bool_, "raw")),
                        ("ballots", buf(dt.u64, "raw")), ("lanes", buf(dt.i32, "out"))], body)
    anys, alls = np.zeros(T, bool), np.zeros(T, bool)
    ballots, lanes = np.zeros(T, np.uint64), np.zeros(T, np.int32)
    run(k, 1, T, anys, alls, ballots, lanes, warp_size=W)
    t = np.arange(T)
    np.testing.assert_array_equal(lanes, (t % W) * 1000 + W)
    part = t % 4 != 3
    assert anys[part].all() and alls[part].all()
    bits = sum(1 << l for l in range(W) if l % 8 == 0)
    assert (ballots[part] == bits).all()
    assert not anys[~part].any() and (ballots[~part] == 0).all()


def test_vote_all_false_when_an_active_lane_disagrees():
    def body(b, ix, out):
        t = b.special("thread_idx", 0)
        b.store(out, [t], b.vote("all", b.cmp("ne", t, ix.const(40))))
    k = build("vall", [("out", buf(dt.bool_, "out"))], body)
    out = np.zeros(96, bool)
    run(k, 1, 96, out)
    np.testing.assert_array_equal(out, ~((np.arange(96) >= 32) & (np.arange(96) < 64)))


@pytest.mark.parametrize("W", [32, 64])
def test_reductions_lowered_and_direct_agree(W):
    """block_reduce follows the fixed tree; warp_reduce is the xor butterfly; the lowered IR
    (lower_reductions) and the direct interpretation give the same bits."""
    T = 200

    def body(b, ix, x, bs, ws):
        g = ix.global_linear_id()
        v = b.load(x, [g])
        b.store(bs, [g], b.block_reduce("sum", v))
        b.store(ws, [g], b.warp_reduce("max", v))
    k = build("reds", [("x", buf(dt.f32)), ("bs", buf(dt.f32, "out")), ("ws", buf(dt.f32, "out"))],
              body)
    x = np.random.default_rng(6).standard_normal(2 * T).astype(np.float32)
    results = []
    for lower in (False, True):
        bs, ws = np.zeros(2 * T, np.float32), np.zeros(2 * T, np.float32)
        run(k, 2, T, x, bs, ws, warp_size=W, lower=lower)
        results.append((bs, ws))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    from test_passes import tree_reduce
    tree = [tree_reduce(row, lambda a, b: np.float32(a) + np.float32(b)) for row in x.reshape(2, T)]
    np.testing.assert_array_equal(results[0][0], np.repeat(np.array(tree, np.float32), T))
    full_warps = (np.arange(2 * T) % T) < (T // W) * W
    wmax = np.array([x[(g // T) * T + (g % T) // W * W:][:W].max() for g in range(2 * T)])
    np.testing.assert_array_equal(results[0][1][full_warps], wmax[full_warps])


# --- configuration ----------------------------------------------------------------------------

def test_warp_size_and_sanitize_from_environment(monkeypatch):
    monkeypatch.setenv("KAIO_REF_WARP_SIZE", "64")
    monkeypatch.setenv("KAIO_SANITIZE", "0")
    be = ReferenceBackend()
    assert be.warp_size == 64 and not be.sanitize and be.name == "reference"
    monkeypatch.setenv("KAIO_SANITIZE", "1")
    assert ReferenceBackend().sanitize
    assert ReferenceBackend(warp_size=32, sanitize=False).warp_size == 32
    assert ReferenceBackend.available() == (True, "")
    with pytest.raises(ValueError, match="power of two"):
        ReferenceBackend(warp_size=48)


def test_f64_fma_with_infinite_addend_and_overflowing_product():
    """fma(a, b, ±inf) with finite a, b is ±inf: the exact product is finite (the H200 agrees;
    a product rounded first would overflow and give inf - inf = NaN)."""
    from kaio import dtypes as dt
    from kaio import semantics
    a = np.array([1e300, -1e300, 2.0, 1e300])
    b = np.array([1e300, 1e300, 3.0, 1e300])
    c = np.array([np.inf, np.inf, -np.inf, -1e300])
    got = semantics.fma(dt.f64, a, b, c)
    np.testing.assert_array_equal(got, [np.inf, np.inf, -np.inf, np.inf])
