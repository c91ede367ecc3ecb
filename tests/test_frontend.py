"""Frontend tests: each language construct lowers to the expected IR (structure, types,
printer/parser round trip, verifier) and, on every available backend (the reference
interpreter always), computes what numpy says."""

import numpy as np
import pytest

import kaio
from kaio import f16, f32, i32, u8, u32
from kaio import thread_idx as tidx
from kaio.frontend import lower_kernel
from kaio.ir import parse_kernel, print_kernel

SCALE = 3          # module-level constants are weak literals inside kernels
HALF = 0.5


def lower(k, **consts):
    """Lower, verify and round-trip a kernel; returns the IR kernel."""
    ir = lower_kernel(k.fn, k.params, consts, fast_math=k.fast_math)
    text = print_kernel(ir)
    assert print_kernel(parse_kernel(text)) == text
    try:
        from kaio.passes import verify
    except ImportError:  # pragma: no cover - verifier module not present
        verify = None
    if verify is not None:
        verify.run(ir)
    missing = [op.opcode for op in ir.walk() if op.loc is None]
    assert not missing, f"ops without a source location: {missing}"
    return ir


def ops(ir, opcode=None):
    return [op for op in ir.walk() if opcode is None or op.opcode == opcode]


@pytest.fixture(autouse=True)
def _every_backend(backend):
    """Execution checks run on each available backend (conftest's fixture: reference always)."""
    yield backend


# --- structure ----------------------------------------------------------------------------
@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


def test_saxpy_structure_and_params():
    ir = lower(saxpy)
    assert [p.name for p in ir.params] == ["a", "x", "y"]
    assert [p.kind for p in ir.params] == ["scalar", "buffer", "buffer"]
    assert ir.params[2].partition is not None and ir.params[1].partition is None
    assert ir.args[0].type is f32 and ir.args[2].type.intent == "region"
    assert len(ops(ir, "load")) == 2 and len(ops(ir, "store")) == 1
    assert not ops(ir, "fma")  # never contracted behind the user's back
    assert all(op.loc is not None and op.loc.file.endswith("test_frontend.py") for op in ir.walk())


def test_saxpy_runs():
    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, np.float32)
    saxpy(2.0, x, y)
    np.testing.assert_array_equal(y, 2 * np.arange(1000, dtype=np.float32) + 1)


@kaio.kernel
def weak(v: u32, h: kaio.In[f16], y: kaio.Out[u32], z: kaio.Out[f16]):
    for i in y.owned():
        y[i] = v // 2 + SCALE
        z[i] = h[i] * 2.0


def test_weak_literals_take_the_operand_type():
    ir = lower(weak)
    assert not ops(ir, "cast")
    assert {op.results[0].type for op in ops(ir, "div")} == {u32}
    assert {op.results[0].type for op in ops(ir, "mul") if op.loc.line > 60} >= {f16}
    y, z = np.zeros(4, np.uint32), np.zeros(4, np.float16)
    weak[1, 4](4000000001, np.full(4, 1.5, np.float16), y, z)
    assert list(y) == [2000000003] * 4 and list(z) == [3.0] * 4


@kaio.kernel
def promote(a: i32, b: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = a + b[i]


def test_typed_operands_promote_with_a_cast():
    ir = lower(promote)
    casts = ops(ir, "cast")
    assert len(casts) == 1 and casts[0].results[0].type is f32
    y = np.zeros(3, np.float32)
    promote(2, np.array([0.5, 1, 2], np.float32), y)
    np.testing.assert_array_equal(y, [2.5, 3, 4])


# --- integer semantics --------------------------------------------------------------------
@kaio.kernel
def intops(a: kaio.In[i32], b: kaio.In[i32], q: kaio.Out[i32], r: kaio.Out[i32],
           w: kaio.Out[i32], s: kaio.Out[u8]):
    for i in q.owned():
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]
        w[i] = a[i] * 65536 * 65536 + a[i] * 2147483647
        s[i] = u8(a[i]) + 250


def test_integer_wrap_and_c_division():
    a = np.array([-7, 7, -7, 7, 100000, 3], np.int32)
    b = np.array([2, -2, -2, 2, 7, 5], np.int32)
    q, r, w, s = *(np.zeros(6, np.int32) for _ in range(3)), np.zeros(6, np.uint8)
    intops(a, b, q, r, w, s)
    np.testing.assert_array_equal(q, np.trunc(a / b).astype(np.int32))
    np.testing.assert_array_equal(r, np.fmod(a, b))
    expect = (a.astype(np.int64) * 65536 * 65536 + a.astype(np.int64) * 2147483647)
    np.testing.assert_array_equal(w, ((expect + 2**31) % 2**32 - 2**31).astype(np.int32))
    np.testing.assert_array_equal(s, (a.astype(np.int64) % 256 + 250) % 256)


@kaio.kernel
def literal_fold(y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = (-7) // 2 * 10 + (-7) % 2


def test_literal_folding_uses_c_division():
    ir = lower(literal_fold)
    assert not ops(ir, "div") and not ops(ir, "rem")
    y = np.zeros(1, np.int32)
    literal_fold(y)
    assert y[0] == -31


@kaio.kernel
def powers(x: kaio.In[f32], y: kaio.Out[f32], z: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[i] ** 3
        z[i] = x[i] ** -2 + x[i] ** 0.5


def test_pow_with_integer_literal_unrolls():
    ir = lower(powers)
    assert [op.attrs["fn"] for op in ops(ir, "math")] == ["pow"]
    x = np.array([1.5, 2.0, 3.0], np.float32)
    y, z = np.zeros(3, np.float32), np.zeros(3, np.float32)
    powers(x, y, z)
    np.testing.assert_allclose(y, x ** 3, rtol=1e-6)
    np.testing.assert_allclose(z, x ** -2.0 + np.sqrt(x), rtol=1e-6)


# --- control flow -------------------------------------------------------------------------
@kaio.kernel
def ranges(n: i32, st: i32, y: kaio.Out[i32]):
    for i in y.owned():
        acc = 0
        for j in range(n, 0, -2):      # negative constant step
            acc += j
        for j in range(0, n, st):      # dynamic step
            acc += 100 * j
        for j in range(n, 0, -st):     # dynamic negative step
            acc += 10000 * j
        y[i] = acc


def test_ranges_negative_and_dynamic_steps():
    ir = lower(ranges)
    assert len(ops(ir, "for")) == 3
    y = np.zeros(2, np.int32)
    ranges(9, 3, y)
    expect = sum(range(9, 0, -2)) + 100 * sum(range(0, 9, 3)) + 10000 * sum(range(9, 0, -3))
    assert list(y) == [expect] * 2


@kaio.kernel
def flow(x: kaio.In[i32], y: kaio.Out[i32], n: i32):
    for i in y.owned():
        total = 0
        for j in range(n):
            if x[j] < 0:
                continue
            if x[j] == 99:
                break
            total += x[j]
        k = 0
        while True:
            k += 1
            if k * k > total:
                break
        y[i] = total * 1000 + k


def test_break_continue_while():
    ir = lower(flow)
    assert not ops(ir, "for")  # a for with break becomes a while
    assert len(ops(ir, "while")) == 2
    x = np.array([3, -1, 4, -5, 9, 99, 7], np.int32)
    y = np.zeros(1, np.int32)
    flow(x, y, 7)
    total = 16
    k = next(k for k in range(1, 100) if k * k > total)
    assert y[0] == total * 1000 + k


@kaio.kernel
def early_return(x: kaio.In[f32], y: kaio.Region[f32]):
    i = kaio.global_id()
    if i >= len(y):
        return
    if x[i] < 0.0:
        y[i] = 0.0
        return
    y[i] = x[i] * 2.0


def test_early_return_in_kernel():
    ir = lower(early_return)
    assert not any(op.opcode in ("return",) for op in ir.walk())
    x = np.array([1, -2, 3, -4, 5], np.float32)
    y = np.full(5, 7, np.float32)
    early_return[1, 8](x, y)
    np.testing.assert_array_equal(y, [2, 0, 6, 0, 10])


@kaio.kernel
def search(x: kaio.In[i32], y: kaio.Region[i32], target: i32):
    i = kaio.global_id()
    if i < 1:
        for j in range(len(x)):
            if x[j] == target:
                y[0] = j
                return
        y[0] = -1


def test_return_inside_loop():
    x = np.array([5, 8, 2, 8], np.int32)
    y = np.zeros(1, np.int32)
    search[1, 1](x, y, 8)
    assert y[0] == 1
    search[1, 1](x, y, 4)
    assert y[0] == -1


@kaio.kernel
def logic(x: kaio.In[i32], y: kaio.Out[i32], n: i32):
    for i in y.owned():
        j = i + 2
        ok = j < n and x[j] > 0           # short-circuit: x[j] is never read when j >= n
        c = 0 < x[i] <= 5 or not ok
        t = x[i] if x[i] > 2 else -x[i]    # loads on both sides: an if, not a select
        y[i] = (1 if ok else 0) + (10 if c else 0) + 100 * t


def test_short_circuit_chained_compare_ternary():
    ir = lower(logic)
    assert ops(ir, "if") and ops(ir, "select")
    x = np.array([1, -3, 6, 2, 0], np.int32)
    y = np.zeros(5, np.int32)
    logic[1, 5](x, y, 5)
    expect = []
    for i in range(5):
        j = i + 2
        ok = j < 5 and x[j] > 0
        c = 0 < x[i] <= 5 or not ok
        t = x[i] if x[i] > 2 else -x[i]
        expect.append(int(ok) + 10 * int(c) + 100 * t)
    assert list(y) == expect


@kaio.kernel
def tuples(x: kaio.In[f32], y: kaio.Out[f32], n: i32):
    for i in y.owned():
        a, b = 0.0, 1.0
        for _ in range(n):
            a, b = b, a + b       # Fibonacci through a tuple swap
        pair = (a, b)
        y[i] = pair[0] + x[i] * pair[1]


def test_tuple_swap_in_loop():
    y = np.zeros(2, np.float32)
    tuples(np.array([0, 1], np.float32), y, 10)
    assert list(y) == [55.0, 55.0 + 89.0]


@kaio.kernel
def unrolled(x: kaio.In[f32], y: kaio.Out[f32], K: kaio.Const[int]):
    for i in y.owned():
        acc = 0.0
        for k in kaio.static_range(K):
            if k == 2:
                continue
            acc += x[i * K + k] * (k + 1)
        y[i] = acc


def test_static_range_unrolls_with_const():
    ir = lower(unrolled, K=4)
    assert not ops(ir, "for") and not ops(ir, "while")
    assert len(ops(ir, "load")) == 3
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(2, np.float32)
    unrolled(x, y, 4)
    w = np.array([1, 2, 0, 4], np.float32)
    np.testing.assert_array_equal(y, x.reshape(2, 4) @ w)


@kaio.kernel
def twod(x: kaio.In[f32, 2], y: kaio.Out[f32, 2]):
    for i, j in y.owned():
        y[i, j] = x[i, j] + i * 10 + j + x.shape[1]


def test_owned_2d_unpack_and_shape():
    ir = lower(twod)
    assert any(op.attrs.get("axis") == 1 for op in ops(ir, "shape"))
    x = np.ones((3, 4), np.float32)
    y = np.zeros((3, 4), np.float32)
    twod(x, y)
    ii, jj = np.indices((3, 4))
    np.testing.assert_array_equal(y, 1 + ii * 10 + jj + 4)


# --- device functions ---------------------------------------------------------------------
@kaio.func
def clamp01(v):
    if v < 0.0:
        return 0.0
    elif v > 1.0:
        return 1.0
    return v


@kaio.func
def divmod_(a, b):
    return a // b, a % b


@kaio.kernel
def use_funcs(x: kaio.In[f32], n: kaio.In[i32], y: kaio.Out[f32], q: kaio.Out[i32]):
    for i in y.owned():
        y[i] = clamp01(x[i]) + clamp01(x[i] * HALF)
        d, m = divmod_(n[i], 3)
        q[i] = d * 10 + m


def test_func_inlining_early_returns_and_tuples():
    ir = lower(use_funcs)
    x = np.array([-1, 0.5, 1.5, 3], np.float32)
    n = np.array([7, -7, 9, 1], np.int32)
    y, q = np.zeros(4, np.float32), np.zeros(4, np.int32)
    use_funcs(x, n, y, q)
    np.testing.assert_allclose(y, np.clip(x, 0, 1) + np.clip(x * 0.5, 0, 1))
    np.testing.assert_array_equal(q, np.trunc(n / 3).astype(int) * 10 + np.fmod(n, 3))
    assert ops(ir, "if")


# --- intrinsics ---------------------------------------------------------------------------
@kaio.kernel
def block_ops(x: kaio.In[f32], out: kaio.Raw[f32], hist: kaio.Atomic[i32]):
    s = kaio.shared_array(f32, 64)
    t = tidx.x
    s[t] = x[kaio.global_id()]
    kaio.sync()
    total = kaio.block_sum(s[t])
    kaio.atomic_add(hist, i32(x[kaio.global_id()]) % 4, 1)
    if t == 0:
        out[kaio.block_idx.x] = total + s.shape[0]


def test_shared_sync_block_sum_atomics():
    ir = lower(block_ops)
    for opc in ("shared_array", "barrier", "block_reduce", "atomic"):
        assert ops(ir, opc), opc
    x = np.arange(128, dtype=np.float32)
    out, hist = np.zeros(2, np.float32), np.zeros(4, np.int32)
    block_ops[2, 64](x, out, hist)
    np.testing.assert_array_equal(out, [x[:64].sum() + 64, x[64:].sum() + 64])
    np.testing.assert_array_equal(hist, [32, 32, 32, 32])


@kaio.kernel(fast_math=True)
def mathy(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = kaio.math.exp(x[i]) + abs(x[i]) + max(x[i], 0.25, 0.5) + kaio.math.fma(x[i], 2.0, 1.0)


def test_math_functions_and_fast_attr():
    ir = lower(mathy)
    m = ops(ir, "math")
    assert [op.attrs for op in m] == [{"fn": "exp", "fast": True}]
    assert ops(ir, "abs") and len(ops(ir, "max")) == 2 and ops(ir, "fma")
    x = np.array([-1, 0, 0.3, 2], np.float32)
    y = np.zeros(4, np.float32)
    mathy(x, y)
    np.testing.assert_allclose(y, np.exp(x) + abs(x) + np.maximum(x, 0.5) + (2 * x + 1), rtol=2e-6)


@kaio.kernel
def locals_and_warps(x: kaio.In[i32], y: kaio.Out[i32]):
    for i in y.owned():
        buf = kaio.local_array(i32, 4)
        for k in range(4):
            buf[k] = x[i] * k
        v = buf[3]
        other = kaio.shuffle_xor(v, 1)
        lanes = kaio.warp_size
        y[i] = other + kaio.i32(kaio.vote_any(v > 90)) * lanes


def test_local_array_and_warp_ops():
    ir = lower(locals_and_warps)
    for opc in ("local_array", "shuffle", "vote", "warp_size"):
        assert ops(ir, opc), opc
    x = np.arange(32, dtype=np.int32)
    y = np.zeros(32, np.int32)
    locals_and_warps[1, 32](x, y)
    np.testing.assert_array_equal(y, (x ^ 1) * 3 + kaio.get_backend().warp_size)


def closure_kernel(factor):
    @kaio.kernel
    def scaled(x: kaio.In[f32], y: kaio.Out[f32]):
        for i in y.owned():
            y[i] = x[i] * factor
    return scaled


def test_closure_values_are_literals():
    k = closure_kernel(4)
    y = np.zeros(3, np.float32)
    k(np.ones(3, np.float32), y)
    assert list(y) == [4, 4, 4]


@kaio.kernel
def annotated(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        acc: f32 = 0
        acc += x[i]
        y[i] += acc


def test_annotation_and_augmented_store():
    ir = lower(annotated)
    assert len(ops(ir, "store")) == 1
    y = np.ones(2, np.float32)
    annotated(np.array([1, 2], np.float32), y)
    assert list(y) == [2, 3]


def test_value_names_follow_variables():
    text = print_kernel(lower(tuples))
    assert "%a" in text and "%b" in text


# --- partitions with loops, bit operations, constants ------------------------------------
from kaio.regions import Blocked, GridStride, Rows  # noqa: E402


@kaio.kernel
def strided(x: kaio.In[i32], y: kaio.Region[i32, GridStride()], cnt: kaio.Atomic[i32]):
    seen = 0
    for i in y.owned():
        if x[i] < 0:
            continue
        y[i] = x[i] * 2
        seen += 1
    kaio.atomic_add(cnt, 0, seen)


def test_grid_stride_owned_loop_carries_variables():
    ir = lower(strided)
    fors = ops(ir, "for")
    assert len(fors) == 1 and fors[0].attrs == {"owned": "y"} and len(fors[0].results) == 1
    x = np.arange(-5, 45, dtype=np.int32)
    y, cnt = np.zeros(50, np.int32), np.zeros(1, np.int32)
    strided[2, 8](x, y, cnt)
    np.testing.assert_array_equal(y, np.where(x < 0, 0, x * 2))
    assert cnt[0] == 45


@kaio.kernel
def blocked_break(x: kaio.In[i32], y: kaio.Region[i32, Blocked(4)]):
    for i in y.owned():
        if x[i] == 0:
            break
        y[i] = 1


def test_break_in_owned_loop_with_ranges():
    ir = lower(blocked_break)
    assert ops(ir, "for")[0].attrs["owned"] == "y"
    x = np.array([1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1], np.int32)
    y = np.zeros(12, np.int32)
    blocked_break(x, y)
    np.testing.assert_array_equal(y, [1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0])


@kaio.kernel
def row_sums(x: kaio.In[f32, 2], y: kaio.Region[f32, Rows()]):
    for r, c in y.owned():
        y[r, c] = x[r, c] * 2.0 + c


def test_rows_partition_2d_index():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros((3, 4), np.float32)
    row_sums(x, y)
    np.testing.assert_array_equal(y, x * 2 + np.arange(4))


@kaio.kernel
def bits(a: kaio.In[u32], b: kaio.In[i32], y: kaio.Out[u32], z: kaio.Out[i32]):
    for i in y.owned():
        y[i] = (a[i] << 4) ^ (a[i] >> 28) | ~a[i] & 0xFF
        z[i] = (b[i] >> 1) + (b[i] << 33) + kaio.i32((b[i] > 0) & (b[i] < 5) | False)


def test_shifts_and_bitwise():
    a = np.array([0xF0000001, 5, 0xFFFFFFFF], np.uint32)
    b = np.array([-9, 3, 7], np.int32)
    y, z = np.zeros(3, np.uint32), np.zeros(3, np.int32)
    bits(a, b, y, z)
    a64 = a.astype(np.uint64)
    np.testing.assert_array_equal(y, (((a64 << 4) & 0xFFFFFFFF) ^ (a64 >> 28) | (~a & 0xFF)))
    np.testing.assert_array_equal(z, (b >> 1) + ((b > 0) & (b < 5)))  # << 33 clamps to 0


@kaio.kernel
def signed_unsigned(a: i32, b: u32, y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = kaio.i32(a < b) + 10 * kaio.i32(a + 0 < 1)


def test_mixed_sign_compare_promotes_to_unsigned():
    ir = lower(signed_unsigned)
    assert any(op.results[0].type is u32 for op in ops(ir, "cast"))
    y = np.zeros(1, np.int32)
    signed_unsigned(-1, 1, y)
    assert y[0] == 10  # -1 as u32 is 4294967295 (C rule, documented)


@kaio.kernel
def consts_kernel(y: kaio.Out[f32], N: kaio.Const[int], NEG: kaio.Const[bool]):
    for i in y.owned():
        v = kaio.math.pi * N
        if NEG:
            v = -v
        y[i] = v


def test_const_params_fold_and_select_branches():
    ir = lower(consts_kernel, N=2, NEG=True)
    assert not ops(ir, "if") or len(ops(ir, "if")) == 1  # only the owned() guard
    assert [p.name for p in ir.params] == ["y"]
    y = np.zeros(2, np.float32)
    consts_kernel(y, 2, True)
    np.testing.assert_allclose(y, -2 * np.pi, rtol=1e-7)


@kaio.kernel
def geometry(y: kaio.Raw[i32]):
    t = tidx.x + kaio.thread_idx.y * 10
    g = kaio.global_id(axis=1)
    y[kaio.block_idx.y * 8 + tidx.y * 4 + tidx.x] = t + 100 * g + 1000 * kaio.block_dim.y \
        + 10000 * kaio.grid_dim.y


def test_geometry_intrinsics():
    ir = lower(geometry)
    assert {op.attrs.get("axis") for op in ops(ir, "thread_idx")} == {0, 1}
    y = np.zeros(16, np.int32)
    geometry[(1, 2), (4, 2)](y)
    expect = [tx + 10 * ty + 100 * (by * 2 + ty) + 2000 + 20000
              for by in range(2) for ty in range(2) for tx in range(4)]
    assert list(y) == expect


@kaio.func
def first_negative(x, n):
    """Index of the first negative element of x[:n], or -1 (return inside a loop)."""
    for j in range(n):
        if x[j] < 0.0:
            return j
    return -1


@kaio.func
def minmax(a, b):
    if a < b:
        return a, b
    return b, a


@kaio.kernel
def nested_flow(x: kaio.In[f32], y: kaio.Out[i32], n: i32):
    from_kaio_ws = kaio.warp_size  # noqa: F841  (reads a target constant)
    for i in y.owned():
        hits = 0
        for a in range(n):
            if a == 1:
                continue
            for b in range(n):
                if b > a:
                    break
                if (a + b) % 2 == 1:
                    continue
                hits += 1
        lo, hi = minmax(first_negative(x, n), hits)
        y[i] = lo * 100 + hi


def test_nested_loops_funcs_with_returns_in_loops():
    lower(nested_flow)
    x = np.array([1, 2, 3, -1, 5], np.float32)
    y = np.zeros(2, np.int32)
    nested_flow(x, y, 5)
    hits = sum(1 for a in range(5) if a != 1 for b in range(a + 1) if (a + b) % 2 == 0)
    lo, hi = sorted((3, hits))
    assert list(y) == [lo * 100 + hi] * 2


@kaio.kernel
def not_found(x: kaio.In[f32], y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = first_negative(x, len(x))


def test_device_function_fallthrough_return():
    y = np.zeros(1, np.int32)
    not_found(np.ones(4, np.float32), y)
    assert y[0] == -1


# --- typing across every dtype --------------------------------------------------------------
def _arith_kernel(T):
    @kaio.kernel
    def arith(a: kaio.In[T], b: kaio.In[T], s: kaio.Out[T], p: kaio.Out[T], q: kaio.Out[T]):
        for i in s.owned():
            s[i] = a[i] + b[i] + 1
            p[i] = a[i] * b[i] * 3
            q[i] = a[i] // 2 - b[i] % 3
    return arith


INT_TYPES = [kaio.i8, kaio.u8, kaio.i16, kaio.u16, kaio.i32, kaio.u32, kaio.i64, kaio.u64]


@pytest.mark.parametrize("T", INT_TYPES, ids=lambda t: t.name)
def test_integer_ops_keep_the_dtype_and_wrap(T):
    k = _arith_kernel(T)
    ir = lower(k)
    assert not ops(ir, "cast")
    for opc, count in (("add", 2), ("mul", 2), ("div", 1), ("rem", 1), ("sub", 1)):
        assert len([op for op in ops(ir, opc) if op.results[0].type is T]) >= count, opc
    rng = np.random.default_rng(T.bits)
    info = np.iinfo(T.np)
    a = rng.integers(info.min, info.max, 64, dtype=T.np, endpoint=True)
    b = rng.integers(info.min, info.max, 64, dtype=T.np, endpoint=True)
    b[b == 0] = 1
    s, p, q = (np.zeros(64, T.np) for _ in range(3))
    k(a, b, s, p, q)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, a + b + T.np.type(1))
        np.testing.assert_array_equal(p, a * b * T.np.type(3))
    ai, bi = a.astype(object), b.astype(object)

    def cdiv(x, y):
        return abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
    expect = [(cdiv(x, 2) - (y - 3 * cdiv(y, 3))) for x, y in zip(ai, bi)]
    mod = 1 << T.bits
    expect = [((e % mod) + (mod if T.is_signed and (e % mod) >= mod // 2 else 0)) % mod
              - (mod if T.is_signed and (e % mod) >= mod // 2 else 0) for e in expect]
    np.testing.assert_array_equal(q.astype(object), np.array(expect, dtype=object))


@pytest.mark.parametrize("T", [kaio.f16, kaio.bf16, kaio.f32, kaio.f64], ids=lambda t: t.name)
def test_float_literals_take_the_float_type(T):
    @kaio.kernel
    def scale(x: kaio.In[T], y: kaio.Out[T]):
        for i in y.owned():
            y[i] = x[i] * 2.5 + 1 - x[i] / 4
    ir = lower(scale)
    assert not ops(ir, "cast")
    assert {c.results[0].type for c in ops(ir, "const") if isinstance(c.attrs["value"], float)} == {T}
    x = np.arange(8).astype(T.np)
    y = np.zeros(8, T.np)
    scale(x, y)
    xf = x.astype(np.float64)
    rtol = 1e-2 if T.bits == 16 else 1e-6  # each op rounds to T
    np.testing.assert_allclose(y.astype(np.float64), xf * 2.5 + 1 - xf / 4, rtol=rtol)


@kaio.kernel
def countdown(x: kaio.In[i32], y: kaio.Out[i32], n: i32, st: i32):
    for i in y.owned():
        last = -1
        for j in range(n - 1, -1, st):   # run-time step sign and a break
            if x[j] > 0:
                last = j
                break
        y[i] = last


@pytest.mark.parametrize("st", [-1, -2, 1])
def test_break_with_run_time_step_sign(st):
    assert ops(lower(countdown), "select")  # the loop test picks < or > by the step's sign
    x = np.array([0, 5, 0, 0, 7, 0, 0], np.int32)
    y = np.zeros(1, np.int32)
    countdown(x, y, 7, st)
    expect = next((j for j in range(6, -1, st) if x[j] > 0), -1)
    assert y[0] == expect
