"""Partitions (owned sets, launch checks, IR attribute round trip), the affine prover, and checker
mechanics (disabled(), 1-D launch assumption, error fields) on IR built with the Builder."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from race_corpus.irkit import buf, for_range, if_then, kernel

import kaio
from kaio.regions import (
    PARTITIONS,
    Blocked,
    Coarsened,
    Elementwise,
    GridStride,
    RowChunks,
    Rows,
    RowsPerBlock,
    Tiles,
    check_launch_attrs,
    checker,
    owner_map,
)
from kaio.regions.affine import Poly, Prover, SymbolTable, simplify

# --- partitions --------------------------------------------------------------------------
VALID = [
    (Elementwise(), (37,), (3, 1, 1), (16, 1, 1)),
    (Elementwise(), (5, 7), (2, 2, 1), (4, 3, 1)),
    (Elementwise(), (2, 3, 4), (1, 1, 1), (4, 3, 2)),
    (Blocked(4), (37,), (2, 1, 1), (5, 1, 1)),
    (Blocked(1), (8,), (1, 1, 1), (8, 1, 1)),
    (GridStride(), (37,), (2, 1, 1), (4, 1, 1)),
    (GridStride(), (3,), (2, 1, 1), (8, 1, 1)),
    (Rows(), (5, 7), (2, 1, 1), (3, 1, 1)),
    (RowsPerBlock(8), (5, 19), (5, 1, 1), (8, 1, 1)),
    (RowsPerBlock(8), (4, 9), (2, 3, 1), (3, 1, 1)),
    (Tiles(4, 8), (9, 17), (3, 3, 1), (8, 4, 1)),
    (Tiles(4, 8), (9, 17), (3, 3, 1), (3, 2, 1)),
]


@pytest.mark.parametrize("part, shape, grid, block", VALID)
def test_valid_launch_gives_every_index_exactly_one_owner(part, shape, grid, block):
    part.check_launch(shape, grid, block, buffer="y", kernel="k")
    owners = owner_map(part, shape, grid, block)  # raises on a doubly owned element
    assert (owners >= 0).all()
    assert owners.max() < math.prod(grid) * math.prod(block)


def test_elementwise_owner_is_the_linear_id():
    owners = owner_map(Elementwise(), (5, 7), (2, 2, 1), (4, 3, 1))
    np.testing.assert_array_equal(owners.ravel(), np.arange(35))


def test_blocked_and_grid_stride_owners():
    np.testing.assert_array_equal(owner_map(Blocked(3), (8,), (1, 1, 1), (3, 1, 1)),
                                  [0, 0, 0, 1, 1, 1, 2, 2])
    np.testing.assert_array_equal(owner_map(GridStride(), (7,), (1, 1, 1), (3, 1, 1)),
                                  [0, 1, 2, 0, 1, 2, 0])


def test_rows_per_block_threads_stride_the_columns():
    owners = owner_map(RowsPerBlock(4), (2, 6), (2, 1, 1), (4, 1, 1))
    np.testing.assert_array_equal(owners, [[0, 1, 2, 3, 0, 1], [4, 5, 6, 7, 4, 5]])


@pytest.mark.parametrize("part, shape, grid, block, words", [
    (Elementwise(), (100,), (1, 1, 1), (64, 1, 1), ["'y'", "100 elements", "64 threads", "(100,)"]),
    (Blocked(4), (100,), (1, 1, 1), (16, 1, 1), ["'y'", "100 elements", "16 threads"]),
    (Blocked(4), (100,), (1, 2, 1), (32, 1, 1), ["1-D launch", "grid=(1, 2, 1)"]),
    (GridStride(), (100,), (1, 1, 1), (8, 2, 1), ["1-D launch"]),
    (Rows(), (10, 3), (1, 1, 1), (8, 1, 1), ["10 rows", "8 threads"]),
    (RowsPerBlock(), (10, 3), (4, 1, 1), (256, 1, 1), ["10 rows", "4 blocks"]),
    (Tiles(8, 8), (20, 20), (2, 2, 1), (8, 8, 1), ["(20, 20)", "covers only 16 x 16"]),
    (Tiles(8, 8), (8, 8), (1, 1, 1), (16, 8, 1), ["at most (8, 8)"]),
    (Rows(), (10,), (1, 1, 1), (16, 1, 1), ["2-d buffer"]),
])
def test_bad_launch_is_rejected_naming_buffer_shape_and_launch(part, shape, grid, block, words):
    with pytest.raises(kaio.LaunchError) as ei:
        part.check_launch(shape, grid, block, buffer="y", kernel="k")
    for w in words:
        assert w in str(ei.value), str(ei.value)
    assert "kernel 'k'" in str(ei.value)


@pytest.mark.parametrize("part", [Elementwise(), Blocked(4), Coarsened(8), GridStride(), Rows(),
                                  RowsPerBlock(), RowsPerBlock(64), RowChunks(64, 4), Tiles(16, 8)])
def test_default_launch_shape_is_valid(part):
    shape = (37,) if part.ndim in (None, 1) else (13, 32 if isinstance(part, RowChunks) else 29)
    grid, block = part.launch_shape(shape)
    part.check_launch(shape, grid, block, buffer="y", kernel="k")
    owners = owner_map(part, shape, grid, block)
    assert (owners >= 0).all()


@pytest.mark.parametrize("part", [Elementwise(), Blocked(3), Coarsened(8), GridStride(), Rows(),
                                  RowsPerBlock(), RowsPerBlock(32), RowChunks(128, 8), Tiles(4, 8),
                                  Tiles(), Tiles(32, 32, True)])
def test_partitions_are_ir_attributes_that_round_trip(part):
    """A partition is an object in the IR, printed as #name{fields} and parsed back equal."""
    from kaio.ir import BufType, Builder, Param, parse_kernel, print_kernel
    from kaio.ir.printer import format_attr
    t = BufType(kaio.f32, part.ndim or 1, "global", "region")
    k = Builder.for_kernel("k", [("y", t, Param("y", "buffer", part))]).finish()
    text = print_kernel(k)
    fields = ", ".join(f"{f} = {format_attr(v)}" for f, v in vars(part).items())
    assert f"partition = #{part.name}{{{fields}}}" in text
    got = parse_kernel(text).params[0].partition
    assert got == part and type(got) is type(part) and hash(got) == hash(part)
    assert set(PARTITIONS) == {"elementwise", "blocked", "coarsened", "grid_stride", "rows",
                               "rows_per_block", "row_chunks", "tiles", "per_block"}


def test_constructors_and_annotations():
    assert kaio.regions.blocked(4) == Blocked(4)
    assert isinstance(kaio.regions.grid_stride(), GridStride)
    spec = kaio.Region[kaio.f32, kaio.regions.rows_per_block()]
    assert spec.ndim == 2 and isinstance(spec.partition, RowsPerBlock)
    assert kaio.Out[kaio.f32, kaio.regions.tiles(16, 16)].ndim == 2
    with pytest.raises(ValueError):
        kaio.regions.blocked(0)
    with pytest.raises(ValueError):
        kaio.regions.tiles(0, 4)
    from kaio.ir import ParseError, parse_kernel
    head = 'kernel @k(%y: buf<f32, 1, global, region>) params {y = {kind = "buffer", partition = '
    with pytest.raises(ParseError, match="unknown attribute #diagonal"):
        parse_kernel(head + "#diagonal{}}} {\n}\n")
    with pytest.raises(ParseError, match="needs an int k >= 1"):
        parse_kernel(head + "#blocked{k = 0}}} {\n}\n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        kaio.regions.blocked(4).k = 5          # immutable: shared by every copy of the IR


# --- the affine prover --------------------------------------------------------------------
def test_prover_uses_loop_ranges_and_guards():
    t = SymbolTable()
    j, k = t.add("j", nonneg=True), t.add("k", uniform=True)
    pv = Prover(t)
    assert pv.nonneg(k - 1 - j, [k - 1 - j])
    assert pv.nonneg(Poly.const(3) - j, [Poly.const(2) - j])
    assert not pv.nonneg(Poly.const(1) - j, [Poly.const(2) - j])
    tid, bdim = Poly.sym("thread_idx.x"), Poly.sym("block_dim.x")
    assert pv.nonneg(bdim - 1 - tid, [])          # geometry facts come with the table
    assert not pv.nonneg(bdim - 2 - tid, [])
    s = t.add("s", uniform=True)
    tid2 = t.add("tid2", nonneg=True)
    # write tid (tid < s) vs read tid2 + s: distinct whenever tid2 > tid
    assert pv.nonneg(tid2 + s - tid - 1, [s - 1 - tid, tid2 - tid - 1])


def test_unravel_then_linearize_simplifies():
    t = SymbolTable()
    g, w = t.add("g", nonneg=True), t.add("w", positive=True)
    assert simplify(t.atom("div", g, w) * w + t.atom("rem", g, w), t) == g


def test_divisibility_for_strided_ownership():
    t = SymbolTable()
    m = t.add("m", nonneg=True)
    T = Poly.sym("grid_dim.x") * Poly.sym("block_dim.x")
    pv = Prover(t)
    assert pv.divides(T, T * m, [])
    assert not pv.divides(T, T * m + 1, [])
    assert not pv.divides(Poly.sym("block_dim.x"), T * m - m, [])


# --- checker mechanics --------------------------------------------------------------------
def _shift_kernel(shift):
    b, m, v = kernel("shift", [("x", buf("in"), None), ("y", buf("region"), None)])
    g = m.global_id(0)
    then = if_then(b, m.lt(m.add(g, shift), m.shape(v["y"], 0)))
    with b.at(then):
        b.store(v["y"], [m.add(g, shift)], b.load(v["x"], [g]))
    return b.finish()


def test_builder_kernel_accepted_and_rejected():
    k = checker.check(_shift_kernel(0))
    assert k.attrs.get("launch_dims") == 1   # proved with x ids only
    with pytest.raises(kaio.CompileError) as ei:
        checker.check(_shift_kernel(1))
    e = ei.value
    assert e.buffer == "y" and e.kind == "not-owned" and e.line == 1
    assert "thread 0 writes [1], which thread 1 owns" in str(e)


def test_disabled_context_manager():
    with checker.disabled():
        checker.check(_shift_kernel(1))
        with checker.disabled():
            pass
        checker.check(_shift_kernel(1))
    with pytest.raises(kaio.CompileError):
        checker.check(_shift_kernel(1))


@pytest.mark.parametrize("part", [None, Blocked(2), GridStride(), Rows(), RowsPerBlock(), Tiles(4, 4)])
def test_owned_loops_always_pass(part):
    """`for i in y.owned(): y[i] = ...` built from each partition's own owned_spec."""
    nd = 2 if part is not None and part.ndim == 2 else 1
    b, m, v = kernel("own", [("x", buf("in", nd), None), ("y", buf("region", nd), part)])
    spec = (part or Elementwise()).owned_spec(m, v["y"])
    blk = if_then(b, spec.guard) if spec.guard is not None else b.block
    ivs = []
    for lb, ub, step in spec.ranges:
        with b.at(blk):
            blk, iv = for_range(b, lb, ub, step)
        ivs.append(iv)
    with b.at(blk):
        idx = list(spec.index(*ivs))
        b.store(v["y"], idx, b.load(v["y"], idx))
    k = checker.check(b.finish())
    assert "launch_dims" not in k.attrs


def test_launch_1d_assumption_is_enforced_at_launch(reference):
    @kaio.kernel
    def copy_x(x: kaio.In[kaio.f32], y: kaio.Out[kaio.f32]):
        i = kaio.global_id()
        if i < y.shape[0]:
            y[i] = x[i]

    x = np.arange(16, dtype=np.float32)
    y = np.zeros_like(x)
    copy_x[(1,), (16,)](x, y)
    np.testing.assert_array_equal(y, x)
    with pytest.raises(kaio.LaunchError) as ei:
        copy_x[(1,), (8, 2)](x, y)
    assert "1-D launch" in str(ei.value) and "copy_x" in str(ei.value)


def test_shared_2d_tile_needs_only_a_2d_launch(reference):
    @kaio.kernel
    def tile_sum(x: kaio.In[kaio.f32, 2], total: kaio.Atomic[kaio.f32]):
        tile = kaio.shared_array(kaio.f32, (4, 8))
        tx = kaio.thread_idx.x
        ty = kaio.thread_idx.y
        tile[ty, tx] = x[ty, tx]
        kaio.sync()
        if tx == 0 and ty == 0:
            s = 0.0
            for r in range(4):
                for c in range(8):
                    s = s + tile[r, c]
            kaio.atomic_add(total, 0, s)

    ir = tile_sum.specialize_ir({})
    assert ir.attrs["launch_dims"] == 2
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    total = np.zeros(1, np.float32)
    tile_sum[(1,), (8, 4)](x, total)
    assert total[0] == x.sum()
    with pytest.raises(kaio.LaunchError) as ei:
        tile_sum[(1,), (8, 2, 2)](x, total)
    assert "2-D launch" in str(ei.value)


def test_region_launch_error_before_running(reference):
    @kaio.kernel
    def fill(y: kaio.Out[kaio.f32, kaio.regions.blocked(4)]):
        for i in y.owned():
            y[i] = 1.0

    y = np.zeros(100, np.float32)
    with pytest.raises(kaio.LaunchError) as ei:
        fill[(1,), (8,)](y)
    assert "'y'" in str(ei.value) and "100 elements" in str(ei.value)
    assert (y == 0).all()
    fill(y)
    assert (y == 1).all()


def test_internal_checker_error_is_a_compile_error(monkeypatch):
    from kaio.regions import walk

    def boom(self, kernel, *args):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(walk.Walk, "__init__", boom)
    with pytest.raises(kaio.CompileError) as ei:
        checker.check(_shift_kernel(0))
    assert "internal error in the race checker" in str(ei.value) and "planted" in str(ei.value)


def test_check_launch_attrs():
    k = checker.check(_shift_kernel(0))
    check_launch_attrs(k, (4, 1, 1), (32, 1, 1))
    with pytest.raises(kaio.LaunchError):
        check_launch_attrs(k, (4, 2, 1), (32, 1, 1))
    k.attrs["launch_dims"] = 2
    check_launch_attrs(k, (4, 2, 1), (8, 4, 1))
    with pytest.raises(kaio.LaunchError):
        check_launch_attrs(k, (4, 2, 1), (8, 4, 2))


# --- counterexamples are real: evaluated concretely, or not shown ---------------------------
def _interleaved(x: kaio.In[kaio.f32], y: kaio.Out[kaio.f32]):
    s = kaio.shared_array(kaio.f32, 512)
    t = kaio.thread_idx.x
    if t < 256:
        s[t] = x[t]
    kaio.sync()
    stride = kaio.u32(1)
    while stride < 256:   # race-free, but beyond the prover (t % (2*stride) is opaque)
        if t % (2 * stride) == 0:
            s[t] += s[t + stride]
        kaio.sync()
        stride *= 2


def _clear_fixed_stride(y: kaio.Out[kaio.f32]):
    h = kaio.shared_array(kaio.f32, 256)
    for b in range(kaio.thread_idx.x, 256, 32):
        h[b] = 0.0


def test_no_counterexample_where_none_is_confirmed():
    with pytest.raises(kaio.CompileError) as ei:
        kaio.kernel(_interleaved).specialize_ir({})
    msg = ei.value.bare_message
    assert "e.g." not in msg and "could not prove it race-free" in msg and "stride" in msg


def test_counterexample_is_a_real_collision_on_a_1d_block():
    with pytest.raises(kaio.CompileError) as ei:
        kaio.kernel(_clear_fixed_stride).specialize_ir({})
    assert "block=(64, 1, 1): threads 0 (writes) and 32 (writes) touch element [32]" in str(ei.value)
