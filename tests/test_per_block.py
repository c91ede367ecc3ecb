"""The per_block() partition: one result per block, written by the block's first thread.

The block-sum reduction (``if kaio.thread_idx.x == 0: partial[kaio.block_idx.x] = ...``) and its
2-D form compile and match numpy on the reference backend (sanitizer on, see conftest); the racy
twins (no guard, a shifted index, a guard that lets two threads in, one writer per warp) are
still refused and, run unchecked, really race; launches that leave elements unowned are refused
before anything runs; hints point at per_block() where it fits.
"""
from __future__ import annotations

import linecache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from race_corpus.irkit import buf, if_then, kernel
from test_partition_props import _spec_matches_affine

import kaio
from kaio import f32
from kaio.regions import PerBlock, checker, owner_map

GRID, BLOCK = 8, 64


def _expected(x):
    """Block b's sum: thread t of block b adds x[b*BLOCK + t + k*GRID*BLOCK] for k >= 0."""
    pad = np.zeros(-len(x) % (GRID * BLOCK), x.dtype)
    return np.concatenate([x, pad]).reshape(-1, GRID, BLOCK).sum(axis=(0, 2))


@kaio.kernel
def block_sums(x: kaio.In[f32], partial: kaio.Out[f32, kaio.regions.per_block()]):
    s = f32(0.0)
    for i in range(kaio.global_id(), x.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
        s += x[i]
    total = kaio.block_sum(s)
    if kaio.thread_idx.x == 0:
        partial[kaio.block_idx.x] = total


def _ownership_checked(monkeypatch):
    """The reference backend with its ownership check on: a fresh instance (a cached one read
    KAIO_SANITIZE_OWNERSHIP when it was made)."""
    from kaio import backends
    monkeypatch.setenv("KAIO_SANITIZE_OWNERSHIP", "1")
    monkeypatch.setattr(backends, "_instances", {})
    assert backends.get_backend("reference").check_ownership


def test_block_sum_reduction_writes_one_partial_per_block(reference, monkeypatch):
    _ownership_checked(monkeypatch)   # each write checked against owned_spec
    x = np.random.default_rng(0).random(1000).astype(np.float32)
    partial = np.full(GRID, -1, np.float32)
    block_sums[(GRID,), (BLOCK,)](x, partial)
    np.testing.assert_allclose(partial, _expected(x), rtol=1e-5)
    np.testing.assert_allclose(partial.sum(), x.sum(), rtol=1e-5)
    # the guard names x only: the proof holds for 1-D blocks, and the launch is held to them
    assert block_sums.specialize_ir({}).attrs["launch_dims"] == 1
    with pytest.raises(kaio.LaunchError, match="1-D launch"):
        block_sums[(GRID,), (BLOCK, 2)](x, partial)


@kaio.func
def _block_total(x):
    """The block's sum of its threads' grid-stride partial sums (as block_sums computes it)."""
    s = f32(0.0)
    for i in range(kaio.global_id(), x.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
        s += x[i]
    return kaio.block_sum(s)


@kaio.kernel
def block_sums_owned(x: kaio.In[f32], partial: kaio.Out[f32, kaio.regions.per_block()]):
    total = _block_total(x)
    for b in partial.owned():
        partial[b] = total


@kaio.kernel
def block_sums_gid_guard(x: kaio.In[f32], partial: kaio.Out[f32, kaio.regions.per_block()]):
    total = _block_total(x)
    if kaio.global_id() == kaio.block_idx.x * kaio.block_dim.x:   # thread_idx.x == 0, spelled out
        partial[kaio.block_idx.x] = total


@kaio.kernel
def block_sums_early_return(x: kaio.In[f32], partial: kaio.Out[f32, kaio.regions.per_block()]):
    total = _block_total(x)
    if kaio.thread_idx.x != 0:
        return
    partial[kaio.block_idx.x] = total


@pytest.mark.parametrize("k, dims", [(block_sums_owned, None), (block_sums_gid_guard, 1),
                                     (block_sums_early_return, 1)])
def test_other_spellings_of_the_owner_thread(reference, k, dims):
    x = np.arange(700, dtype=np.float32)
    partial = np.zeros(GRID, np.float32)
    k[(GRID,), (BLOCK,)](x, partial)
    np.testing.assert_allclose(partial, _expected(x), rtol=1e-5)
    assert k.specialize_ir({}).attrs.get("launch_dims") == dims


@kaio.kernel
def tile_sums(x: kaio.In[f32, 2], partial: kaio.Out[f32, 2, kaio.regions.per_block()]):
    r = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    c = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    total = kaio.block_sum(x[r, c])
    if kaio.thread_idx.x == 0 and kaio.thread_idx.y == 0:
        partial[kaio.block_idx.y, kaio.block_idx.x] = total


def test_2d_form_block_bx_by_owns_element_by_bx(reference):
    gx, gy, bx, by = 3, 2, 8, 4
    x = np.random.default_rng(1).random((gy * by, gx * bx)).astype(np.float32)
    partial = np.zeros((gy, gx), np.float32)
    tile_sums[(gx, gy), (bx, by)](x, partial)
    np.testing.assert_allclose(partial, x.reshape(gy, by, gx, bx).sum(axis=(1, 3)), rtol=1e-5)
    assert tile_sums.specialize_ir({}).attrs["launch_dims"] == 2


# --- racy twins: refused, and really racy when run unchecked ---------------------------------
BODIES = {
    "thread0": "    if kaio.thread_idx.x == 0:\n        partial[kaio.block_idx.x] = total",
    "no_guard": "    partial[kaio.block_idx.x] = total                 # every thread writes",
    "shifted": "    if kaio.thread_idx.x == 0:\n        partial[kaio.block_idx.x + 1] = total",
    "two_threads": "    if kaio.thread_idx.x < 2:\n        partial[kaio.block_idx.x] = total",
    "one_per_warp": "    if kaio.lane_id() == 0:\n        partial[kaio.block_idx.x] = total",
}
TWINS = sorted(set(BODIES) - {"thread0"})


def _twin(name, partition="kaio.regions.per_block()"):
    src = (f"def {name}(x: kaio.In[f32], partial: kaio.Out[f32, {partition}]):\n"
           "    total = _block_total(x)\n" + BODIES[name] + "\n")
    path = f"<per_block_{name}>"
    linecache.cache[path] = (len(src), None, src.splitlines(True), path)
    ns = {"kaio": kaio, "f32": f32, "_block_total": _block_total}
    exec(compile(src, path, "exec"), ns)
    return ns[name]


@pytest.mark.parametrize("name", TWINS)
def test_racy_twins_are_refused(name):
    k = kaio.kernel(_twin(name))
    with pytest.raises(kaio.CompileError) as ei:
        k.specialize_ir({})
    err = ei.value
    assert err.buffer == "partial" and "per_block()" in str(err)
    assert "block_idx.x" in err.index


@pytest.mark.parametrize("name", TWINS)
def test_racy_twins_really_race_when_unchecked(reference, monkeypatch, name):
    """Run unchecked, with the sanitizer's ownership check on: several threads of a block write
    its element, or (shifted) a block writes the next one's and the last writes past the end."""
    _ownership_checked(monkeypatch)
    expected = kaio.OutOfBoundsError if name == "shifted" else kaio.RaceError
    with checker.disabled(), pytest.raises(expected):
        kaio.kernel(_twin(name))[(GRID,), (BLOCK,)](np.ones(1000, np.float32), np.zeros(GRID, np.float32))


def test_missing_guard_hint_names_the_guard():
    with pytest.raises(kaio.CompileError) as ei:
        kaio.kernel(_twin("no_guard")).specialize_ir({})
    assert "kaio.thread_idx.x == 0" in ei.value.hint


def test_block_indexed_store_under_another_partition_suggests_per_block():
    for part in ("kaio.regions.elementwise()", "kaio.regions.grid_stride()"):
        with pytest.raises(kaio.CompileError) as ei:
            kaio.kernel(_twin("thread0", part)).specialize_ir({})
        assert "kaio.regions.per_block()" in ei.value.hint, ei.value.hint


def test_rows_per_block_on_a_1d_buffer_is_a_clear_ndim_error():
    @kaio.kernel
    def bad(x: kaio.In[f32], partial: kaio.Out[f32, 1, kaio.regions.rows_per_block()]):
        total = kaio.block_sum(x[kaio.global_id()])
        if kaio.thread_idx.x == 0:
            partial[kaio.block_idx.x] = total

    with pytest.raises(kaio.CompileError) as ei:
        bad.specialize_ir({})
    msg = str(ei.value)
    assert "'partial'" in msg and "1-d" in msg and "2-d" in msg and "rows_per_block()" in msg
    assert "internal error" not in msg and "e.g." not in msg
    assert "kaio.regions.per_block()" in ei.value.hint


# --- launch checks ------------------------------------------------------------------------
def test_grid_smaller_than_the_buffer_is_refused_before_running(reference):
    x = np.ones(1000, np.float32)
    partial = np.full(GRID + 2, 7, np.float32)
    with pytest.raises(kaio.LaunchError) as ei:
        block_sums[(GRID,), (BLOCK,)](x, partial)
    msg = str(ei.value)
    assert "'partial'" in msg and "10 elements" in msg and f"only {GRID} blocks" in msg
    assert "at least 10 blocks" in msg
    assert (partial == 7).all()


@pytest.mark.parametrize("shape, grid, words", [
    ((5,), (2, 2, 1), ["5 elements", "only 4 blocks"]),
    ((3, 4), (4, 2, 1), ["shape (3, 4)", "grid=(4, 3)"]),
    ((3, 4), (4, 3, 2), ["grid.z == 1"]),
    ((2, 3, 4), (4, 3, 1), ["grid=(4, 3, 2)"]),
    ((4,), (2**31 - 1, 2, 1), [r"i32 index arithmetic needs the linear block id <= 2**31 - 1"]),
])
def test_bad_launches_are_refused(shape, grid, words):
    with pytest.raises(kaio.LaunchError) as ei:
        PerBlock().check_launch(shape, grid, (32, 1, 1), buffer="partial", kernel="k")
    for w in words:
        assert w in str(ei.value), str(ei.value)


def test_owners_are_the_first_thread_of_each_block():
    np.testing.assert_array_equal(owner_map(PerBlock(), (5,), (3, 2, 1), (4, 1, 1)),
                                  [0, 4, 8, 12, 16])
    np.testing.assert_array_equal(owner_map(PerBlock(), (2, 3), (3, 2, 1), (2, 2, 1)),
                                  [[0, 4, 8], [12, 16, 20]])
    # blocks past the buffer's end own nothing; no thread but (0, 0, 0) owns anything
    owners = owner_map(PerBlock(), (2, 2), (3, 3, 1), (2, 1, 1))
    np.testing.assert_array_equal(owners, [[0, 2], [6, 8]])


@pytest.mark.parametrize("shape", [(37,), (13, 29), (3, 4, 5)])
def test_default_launch_is_valid(shape):
    grid, block = PerBlock().launch_shape(shape)
    PerBlock().check_launch(shape, grid, block, buffer="y", kernel="k")
    assert (owner_map(PerBlock(), shape, grid, (2, 1, 1)) >= 0).all()


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_owned_spec_and_owned_affine_agree_on_covering_launches(data):
    """Every thread's owned set, enumerated from owned_spec, is the set owned_affine admits,
    on launches that cover the buffer (with spare blocks and threads on every axis)."""
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 3)) for _ in range(ndim))
    if ndim == 1:
        grid = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)))
    else:
        need = tuple(reversed(shape)) + (1,) * (3 - ndim)
        grid = tuple(n + data.draw(st.integers(0, 1)) if a < ndim else 1 for a, n in enumerate(need))
    block = tuple(data.draw(st.integers(1, 3)) for _ in range(3))
    part = PerBlock()
    try:
        part.check_launch(shape, grid, block, buffer="y", kernel="k")
    except kaio.LaunchError:
        assert np.prod(grid) < np.prod(shape)
        return
    _spec_matches_affine(part, shape, grid, block)
    owners = owner_map(part, shape, grid, block)
    assert (owners >= 0).all() and (owners % np.prod(block) == 0).all()


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_owned_loop_passes_the_checker_on_any_launch(ndim):
    """`for i in y.owned()` built from owned_spec: proved with no launch assumption."""
    b, m, v = kernel("own", [("y", buf("region", ndim), PerBlock())])
    spec = PerBlock().owned_spec(m, v["y"])
    with b.at(if_then(b, spec.guard)):
        idx = list(spec.index())
        b.store(v["y"], idx, b.load(v["y"], idx))
    k = checker.check(b.finish())
    assert "launch_dims" not in k.attrs


def test_ir_round_trip():
    from kaio.ir import BufType, Builder, Param, parse_kernel, print_kernel
    t = BufType(f32, 1, "global", "out")
    k = Builder.for_kernel("k", [("y", t, Param("y", "buffer", PerBlock()))]).finish()
    text = print_kernel(k)
    assert "partition = #per_block{}" in text
    assert parse_kernel(text).params[0].partition == PerBlock()
    assert kaio.regions.per_block() == PerBlock() and repr(PerBlock()) == "kaio.regions.per_block()"
