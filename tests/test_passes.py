"""DCE, reduction lowering (structure, and execution on the reference backend at warp widths
32 and 64 with bit-identical block sums) and the pass pipelines."""
from __future__ import annotations

import numpy as np
import pytest
from ir_samples import buf, builder, every_op_kernel

import kaio
from kaio import dtypes as dt
from kaio.frontend import frontend_pipeline
from kaio.ir import print_kernel
from kaio.ir.indexmath import IndexMath
from kaio.ir.rewrite import clone_kernel
from kaio.passes import cse, dce, lower_reductions, target_pipeline, verify


def _ops(k):
    return [op.opcode for op in k.walk()]


# --- DCE ----------------------------------------------------------------------------------------
def test_dce_removes_dead_pure_chains_keeps_effects():
    b = builder("d", [("x", buf(dt.f32)), ("y", buf(dt.f32, 1, "region")),
                      ("c", buf(dt.i32, 1, "atomic"))])
    x, y, c = b.block.args
    i = b.special("thread_idx", 0)
    dead = b.math("sqrt", b.binary("mul", b.load(x, [i]), b.load(x, [i])))
    b.cast(dead, dt.f64)
    b.shared_array(dt.f32, (16,))                    # unused scratch: pure, dropped
    b.atomic("add", c, [i], b.const(1, dt.i32))      # result unused, but an effect
    b.barrier()
    b.shuffle("xor", i, b.const(1, dt.i32))          # warp ops stay
    b.store(y, [i], b.load(x, [i]))
    with b.if_(b.cmp("lt", i, b.const(4, dt.i32))) as (then, other, _):
        with b.at(then):
            b.binary("add", i, i)                    # dead inside a region: the if goes too
    with b.if_(b.cmp("lt", i, b.const(5, dt.i32))) as (then, other, _):
        with b.at(then):
            b.barrier()
    k = dce.run(b.finish())
    verify.run(k)
    assert _ops(k) == ["thread_idx", "const", "atomic", "barrier", "const", "shuffle", "load",
                       "store", "const", "cmp", "if", "barrier"]


def test_dce_removes_unused_loops_only_when_they_terminate():
    def kernel(step):
        b = builder("loops", [("n", dt.i32)])
        (n,) = b.block.args
        op, body, iv, (acc,) = b.for_(b.const(0, dt.i32), n, b.const(step, dt.i32), [n])
        with b.at(body):
            b.yield_(b.binary("add", acc, iv))
        w, before, after = b.while_([n])
        with b.at(before):
            b.condition(b.cmp("lt", before.args[0], n), before.args[0])
        with b.at(after):
            b.yield_(after.args[0])
        return dce.run(b.finish())
    assert _ops(kernel(1)) == ["while", "cmp", "condition", "yield"]
    assert "for" in _ops(kernel(0))  # step 0 never ends: removing it would change behaviour


def test_dce_keeps_every_op_kernel_effects():
    k = every_op_kernel()
    effects = [op.opcode for op in k.walk() if op.opcode in
               ("store", "atomic", "barrier", "shuffle", "vote", "ballot", "while")]
    k = dce.run(k)
    verify.run(k)
    assert [op.opcode for op in k.walk() if op.opcode in
            ("store", "atomic", "barrier", "shuffle", "vote", "ballot", "while")] == effects


# --- reduction lowering: structure ------------------------------------------------------------------
def _reduce_kernel(kind, dtype, which):
    """y[gid] = <which>_reduce{kind}(x[gid]) over 1-d buffers."""
    b = builder(f"{which}_{kind}", [("x", buf(dtype)), ("y", buf(dtype, 1, "raw"))])
    x, y = b.block.args
    g = IndexMath(b).global_linear_id()
    v = b.load(x, [g])
    r = b.warp_reduce(kind, v) if which == "warp" else b.block_reduce(kind, v)
    b.store(y, [g], r)
    return b.finish()


ALLOWED_AFTER_LOWERING = {"const", "thread_idx", "block_idx", "block_dim", "grid_dim", "load",
                          "store", "add", "mul", "max", "min", "and", "cmp", "if", "barrier",
                          "shared_array", "shuffle", "yield", "lane_id", "sub", "select", "shr"}


@pytest.mark.parametrize("ws", [32, 64])
def test_warp_reduce_becomes_guarded_down_tree_and_broadcast(ws):
    k = target_pipeline(_reduce_kernel("sum", dt.f32, "warp"), ws)
    assert set(_ops(k)) <= ALLOWED_AFTER_LOWERING
    shuffles = [op for op in k.walk() if op.opcode == "shuffle"]
    assert [op.attrs["mode"] for op in shuffles] == ["down"] * (ws.bit_length() - 1) + ["idx"]
    offsets = [op.operands[1].owner.attrs["value"] for op in shuffles]
    assert offsets == [ws >> s for s in range(1, ws.bit_length())] + [0]  # ws/2, ..., 1; lane 0


def test_block_reduce_lowering_does_not_depend_on_warp_size():
    texts = [print_kernel(target_pipeline(_reduce_kernel("sum", dt.f32, "block"), ws))
             for ws in (32, 64)]
    assert texts[0] == texts[1]
    k = target_pipeline(_reduce_kernel("max", dt.i32, "block"), 32)
    ops = _ops(k)
    assert set(ops) <= ALLOWED_AFTER_LOWERING
    # two levels of the same tree, strides 16 .. 1: within groups of 32, then over group totals
    shuffles = [op for op in k.walk() if op.opcode == "shuffle"]
    assert [op.attrs["mode"] for op in shuffles] == ["down"] * 10
    assert [op.operands[1].owner.attrs["value"] for op in shuffles] == [16, 8, 4, 2, 1] * 2
    # group totals written; the result published; read before the scratch is reused
    assert ops.count("barrier") == 3
    assert k.body.ops[0].opcode == "shared_array" and k.body.ops[0].attrs["shape"] == (1024,)


def test_each_block_reduce_site_gets_its_own_scratch():
    b = builder("two", [("x", buf(dt.f32)), ("y", buf(dt.f32, 1, "raw"))])
    x, y = b.block.args
    i = b.special("thread_idx", 0)
    v = b.load(x, [i])
    b.store(y, [i], b.binary("add", b.block_reduce("sum", v), b.block_reduce("max", v)))
    k = lower_reductions.run(b.finish(), warp_size=32)
    verify.run(k)
    assert [op.opcode for op in k.body.ops[:2]] == ["shared_array", "shared_array"]


def test_lower_reductions_rejects_bad_width():
    with pytest.raises(ValueError, match="power of two"):
        lower_reductions.run(_reduce_kernel("sum", dt.f32, "warp"), warp_size=48)


def test_target_pipeline_leaves_its_input_alone():
    k = _reduce_kernel("sum", dt.f32, "warp")
    before = print_kernel(k)
    k32, k64 = target_pipeline(k, 32), target_pipeline(k, 64)
    assert print_kernel(k) == before
    assert [_ops(x).count("shuffle") for x in (k32, k64)] == [6, 7]  # tree steps + broadcast


def test_clone_kernel_is_deep_and_fresh():
    k = every_op_kernel()
    c = clone_kernel(k)
    assert print_kernel(c) == print_kernel(k)
    old_ids = {v.id for op in k.walk() for v in op.results} | {a.id for a in k.body.args}
    assert not old_ids & ({v.id for op in c.walk() for v in op.results} | {a.id for a in c.body.args})
    verify.run(c)


def test_cse_merges_pure_duplicates_and_read_only_loads_but_not_other_loads_or_allocs():
    b = builder("c", [("x", buf(dt.f32)), ("y", buf(dt.f32, 1, "raw"))])
    x, y = b.block.args
    i1, i2 = b.special("thread_idx", 0), b.special("thread_idx", 0)
    j = b.special("thread_idx", 1)
    a1, a2 = b.binary("add", i1, j), b.binary("add", i2, j)
    l1, l2 = b.load(x, [a1]), b.load(x, [a2])          # x is In: one load (nothing writes it)
    r1 = b.load(y, [a1])
    b.store(y, [a1], l1)
    r2 = b.load(y, [a2])                                  # y is written between: two loads
    s1, s2 = b.shared_array(dt.f32, (4,)), b.shared_array(dt.f32, (4,))
    with b.if_(b.cmp("lt", a2, j)) as (then, other, _):
        with b.at(then):
            b.store(y, [b.binary("add", i1, j)], b.binary("add", l1, l2))  # dominated: merged
    b.store(s1, [i1], b.binary("add", l1, r1))
    b.store(s2, [i2], b.binary("add", l2, r2))
    b.store(s1, [i2], b.load(s2, [i1]))
    b.store(s2, [i1], b.load(s2, [i1]))                   # shared: never merged
    k = cse.run(b.finish())
    verify.run(k)
    ops = _ops(k)
    assert ops.count("thread_idx") == 2 and ops.count("shared_array") == 2
    assert ops.count("load") == 1 + 2 + 2


def test_cse_does_not_reuse_values_from_sibling_regions():
    b = builder("sib", [("y", buf(dt.i32, 1, "raw")), ("c", dt.bool_)])
    y, c = b.block.args
    i = b.special("thread_idx", 0)
    with b.if_(c) as (then, other, _):
        with b.at(then):
            b.store(y, [i], b.binary("mul", i, i))
        with b.at(other):
            b.store(y, [i], b.binary("mul", i, i))
    b.store(y, [i], b.binary("mul", i, i))
    k = cse.run(b.finish())
    verify.run(k)
    assert _ops(k).count("mul") == 3


def test_pipelines_on_every_op_kernel():
    k = frontend_pipeline(every_op_kernel())
    assert "block_reduce" in _ops(k)
    k = target_pipeline(k, 64)
    assert not {"warp_reduce", "block_reduce"} & set(_ops(k))


# --- reduction lowering: execution on the reference backend ---------------------------------------
def _run(kernel, x, grid, block, ws):
    from kaio.backends.reference import ReferenceBackend
    be = ReferenceBackend(warp_size=ws, sanitize=True)
    y = np.zeros_like(x)
    be.launch(be.compile(kernel), grid, block, [x, y])
    return y


def tree_reduce(vals, op):
    """The documented block order: the halving tree (s = 16..1, a[t] = a[t] op a[t+s] for t < s,
    t+s < n) within each group of 32 consecutive threads, then over the group totals."""
    def halving(a):
        a = list(a)
        n, s = len(a), 16
        while s >= 1:
            for t in range(min(s, max(n - s, 0))):
                a[t] = op(a[t], a[t + s])
            s //= 2
        return a[0]
    vals = list(vals)
    return halving([halving(vals[g:g + 32]) for g in range(0, len(vals), 32)])


BLOCKS = [(1, 1, 1), (3, 1, 1), (64, 1, 1), (100, 1, 1), (257, 1, 1), (1024, 1, 1), (8, 4, 3)]


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_block_sum_f32_identical_across_widths_and_in_tree_order(block):
    rng = np.random.default_rng(7)
    nt = int(np.prod(block))
    grid = 2
    x = (rng.standard_normal(grid * nt) * 10.0 ** rng.integers(-3, 4, grid * nt)).astype(np.float32)
    k32, k64 = _reduce_kernel("sum", dt.f32, "block"), _reduce_kernel("sum", dt.f32, "block")
    y32, y64 = _run(k32, x, grid, block, 32), _run(k64, x, grid, block, 64)
    assert y32.tobytes() == y64.tobytes()
    for blk in range(grid):
        part = x[blk * nt:(blk + 1) * nt]
        want = tree_reduce(part, lambda a, b: np.float32(a) + np.float32(b))
        assert np.all(y32[blk * nt:(blk + 1) * nt].view(np.uint32) == np.float32(want).view(np.uint32))
        np.testing.assert_allclose(y32[blk * nt], part.astype(np.float64).sum(),
                                   rtol=1e-5, atol=1e-3 * np.abs(part).sum() * 1e-3)


@pytest.mark.parametrize("kind, np_fn", [("sum", np.sum), ("max", np.max), ("min", np.min)])
@pytest.mark.parametrize("dtype", [dt.i32, dt.u8, dt.f64], ids=lambda t: t.name)
@pytest.mark.parametrize("ws", [32, 64])
def test_block_reduce_kinds(kind, np_fn, dtype, ws):
    rng = np.random.default_rng(3)
    block, grid = (96, 1, 1), 3
    x = rng.integers(-1000 if dtype.is_signed else 0, 250, grid * 96).astype(dtype.np)
    if dtype.is_float:
        x = x / 7.0
    y = _run(_reduce_kernel(kind, dtype, "block"), x, grid, block, ws)
    for blk in range(grid):
        part = x[blk * 96:(blk + 1) * 96]
        want = np_fn(part, dtype=dtype.np) if kind == "sum" and dtype.is_int else np_fn(part)
        if dtype.is_float and kind == "sum":
            np.testing.assert_allclose(y[blk * 96:(blk + 1) * 96], want, rtol=1e-13)
        else:
            assert np.all(y[blk * 96:(blk + 1) * 96] == want)  # ints wrap like numpy's sum


@pytest.mark.parametrize("ws", [32, 64])
@pytest.mark.parametrize("kind, np_fn", [("sum", np.sum), ("max", np.max), ("min", np.min)])
def test_warp_reduce_every_lane_gets_its_warp_result(ws, kind, np_fn):
    rng = np.random.default_rng(11)
    block, grid = (128, 1, 1), 2
    x = rng.integers(-50, 50, grid * 128).astype(np.int32)
    y = _run(_reduce_kernel(kind, dt.i32, "warp"), x, grid, block, ws)
    want = np.repeat([np_fn(w) for w in x.reshape(-1, ws)], ws)
    assert np.array_equal(y, want.astype(np.int32))

    xf = rng.standard_normal(grid * 128).astype(np.float32)
    yf = _run(_reduce_kernel(kind, dt.f32, "warp"), xf, grid, block, ws)
    wantf = np.repeat([np_fn(w.astype(np.float64)) for w in xf.reshape(-1, ws)], ws)
    np.testing.assert_allclose(yf, wantf, rtol=1e-5, atol=1e-5)
    # xor butterfly: all lanes of a warp agree bit for bit
    assert all(len(set(w.tobytes()[i:i + 4] for i in range(0, 4 * ws, 4))) == 1
               for w in yf.reshape(-1, ws))


# --- the same promise through the public API, on every available backend (CUDA on a GPU host) -----
def _block_sum_kernel():
    @kaio.kernel
    def block_sums_any_shape(x: kaio.In[dt.f32], out: kaio.Raw[dt.f32]):
        n = kaio.block_dim.x * kaio.block_dim.y * kaio.block_dim.z
        t = (kaio.thread_idx.z * kaio.block_dim.y + kaio.thread_idx.y) * kaio.block_dim.x \
            + kaio.thread_idx.x
        s = kaio.block_sum(x[kaio.block_idx.x * n + t])
        if t == 0:
            out[kaio.block_idx.x] = s
    return block_sums_any_shape


@pytest.mark.parametrize("block", [(100, 1, 1), (1000, 1, 1), (8, 4, 3), (1024, 1, 1)], ids=str)
def test_block_sum_bits_on_each_backend(backend, block):
    k = _block_sum_kernel()
    nt, grid = int(np.prod(block)), 5
    rng = np.random.default_rng(nt)
    x = (rng.standard_normal(grid * nt) * 10.0 ** rng.integers(-4, 5, grid * nt)).astype(np.float32)
    out = np.zeros(grid, np.float32)
    k[grid, block](x, out)
    want = [tree_reduce(x[b * nt:(b + 1) * nt], lambda a, c: np.float32(a) + np.float32(c))
            for b in range(grid)]
    assert out.tobytes() == np.array(want, np.float32).tobytes()


@pytest.mark.parametrize("ws", [32, 64])
@pytest.mark.parametrize("nthreads", [1, 8, 33, 100])
def test_warp_sum_over_partial_warps_counts_existing_lanes_only(ws, nthreads):
    """Blocks whose size is not a multiple of the width: each warp sums only its own lanes."""
    from kaio.backends.reference import ReferenceBackend
    k = _reduce_kernel("sum", dt.f32, "warp")
    be = ReferenceBackend(warp_size=ws)
    x = np.arange(1, nthreads + 1, dtype=np.float32)
    y = np.zeros(nthreads, np.float32)
    be.launch(be.compile(k), (1, 1, 1), (nthreads, 1, 1), [x, y])
    want = np.concatenate([np.full(len(c), c.sum()) for c in np.split(x, range(ws, nthreads, ws))])
    np.testing.assert_array_equal(y, want.astype(np.float32))
