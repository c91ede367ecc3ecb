"""Classic CUDA kernels written the way their authors write them (issue 12, "Classic CUDA
kernels"): each compiles as written and matches numpy on the reference backend (the race
sanitizer is on, see conftest), and an equally natural racy twin is still refused; run unchecked,
the twin really races (or writes elements its partition gives other threads).

- the tiled transpose: a padded 32x33 shared tile, 32x8 threads each moving four rows, the block
  shape declared (``@kaio.kernel(block=(32, 8))``);
- block-stride loops over shared memory (a histogram's clear and flush), 1-D and 2-D blocks;
- 2-D stencils indexed ``i = block_idx.y * block_dim.y + thread_idx.y`` into ``tiles()`` (the
  tile is the block), or into ``tiles(16, 16)`` with the block declared.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from race_corpus.good import histogram_shared

import kaio
from kaio import f32, i32
from kaio.backends.reference import ReferenceBackend
from kaio.regions import checker, tiles

# the tiled transpose and the CUDA-indexed stencil are the ones `kaio bench` times against nvcc
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
from kaio_bench_kernels import stencil5  # noqa: E402
from kaio_bench_kernels import transpose32 as transpose  # noqa: E402

RNG = np.random.default_rng(12)
SHAPES = [(64, 96), (37, 70), (1, 1), (33, 31), (100, 5)]


# --- tiled transpose ------------------------------------------------------------------------
@kaio.kernel(block=(32, 8))
def transpose_out_grid(x: kaio.In[f32, 2], y: kaio.Out[f32, 2, tiles(32, 32)]):
    """The same kernel with the grid laid over the output (block (bx, by) reads input tile
    (by, bx)): plain tiles(32, 32)."""
    tile = kaio.shared_array(f32, (32, 33))
    tx = kaio.thread_idx.x
    ty = kaio.thread_idx.y
    bx = kaio.block_idx.x
    by = kaio.block_idx.y
    for j in range(0, 32, 8):
        if bx * 32 + ty + j < x.shape[0] and by * 32 + tx < x.shape[1]:
            tile[ty + j, tx] = x[bx * 32 + ty + j, by * 32 + tx]
    kaio.sync()
    for j in range(0, 32, 8):
        if by * 32 + ty + j < y.shape[0] and bx * 32 + tx < y.shape[1]:
            y[by * 32 + ty + j, bx * 32 + tx] = tile[tx, ty + j]


def _transpose_no_sync(x: kaio.In[f32, 2], y: kaio.Region[f32, 2, tiles(32, 32, transposed=True)]):
    tile = kaio.shared_array(f32, (32, 33))
    tx = kaio.thread_idx.x
    ty = kaio.thread_idx.y
    bx = kaio.block_idx.x
    by = kaio.block_idx.y
    for j in range(0, 32, 8):
        tile[ty + j, tx] = x[by * 32 + ty + j, bx * 32 + tx]
    for j in range(0, 32, 8):
        y[bx * 32 + ty + j, by * 32 + tx] = tile[tx, ty + j]   # RACE: no barrier before


def _transpose_rows_4(x: kaio.In[f32, 2], y: kaio.Region[f32, 2, tiles(32, 32, transposed=True)]):
    tile = kaio.shared_array(f32, (32, 33))
    tx = kaio.thread_idx.x
    ty = kaio.thread_idx.y
    bx = kaio.block_idx.x
    by = kaio.block_idx.y
    for j in range(0, 32, 4):   # RACE: 8 rows of threads step by 4: rows ty + 4 collide
        tile[ty + j, tx] = x[by * 32 + ty + j, bx * 32 + tx]
    kaio.sync()
    for j in range(0, 32, 8):
        y[bx * 32 + ty + j, by * 32 + tx] = tile[tx, ty + j]


def _transpose_swapped(x: kaio.In[f32, 2], y: kaio.Region[f32, 2, tiles(32, 32, transposed=True)]):
    tile = kaio.shared_array(f32, (32, 33))
    tx = kaio.thread_idx.x
    ty = kaio.thread_idx.y
    bx = kaio.block_idx.x
    by = kaio.block_idx.y
    for j in range(0, 32, 8):
        tile[ty + j, tx] = x[by * 32 + ty + j, bx * 32 + tx]
    kaio.sync()
    for j in range(0, 32, 8):
        y[bx * 32 + tx, by * 32 + ty + j] = tile[tx, ty + j]   # NOT OWNED: ty and tx swapped


def _transpose_undeclared(x: kaio.In[f32, 2], y: kaio.Region[f32, 2, tiles(32, 32, transposed=True)]):
    tile = kaio.shared_array(f32, (32, 33))
    tx = kaio.thread_idx.x
    ty = kaio.thread_idx.y
    bx = kaio.block_idx.x
    by = kaio.block_idx.y
    for j in range(0, 32, 8):
        tile[ty + j, tx] = x[by * 32 + ty + j, bx * 32 + tx]
    kaio.sync()
    for j in range(0, 32, 8):
        y[bx * 32 + ty + j, by * 32 + tx] = tile[tx, ty + j]


def _grid(h, w):
    return (-(-w // 32), -(-h // 32))


@pytest.mark.parametrize("shape", SHAPES)
def test_tiled_transpose_matches_numpy(reference, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    y = np.zeros(shape[::-1], np.float32)
    transpose[_grid(*shape), (32, 8)](x, y)
    np.testing.assert_array_equal(y, x.T)
    y = np.zeros(shape[::-1], np.float32)
    transpose(x, y)   # the launch shape from the partition, with the declared block
    np.testing.assert_array_equal(y, x.T)
    z = np.zeros(shape[::-1], np.float32)
    transpose_out_grid(x, z)
    np.testing.assert_array_equal(z, x.T)


def test_transpose_proof_is_for_the_declared_block():
    ir = transpose.specialize_ir({})
    assert ir.attrs["block"] == (32, 8, 1) and "launch_dims" not in ir.attrs


def test_transpose_launch_with_another_block_is_refused(reference):
    x = np.zeros((64, 64), np.float32)
    with pytest.raises(kaio.LaunchError, match=r"'transpose32' is declared with block=\(32, 8, 1\)"):
        transpose[(2, 2), (32, 32)](x, np.zeros((64, 64), np.float32))


def test_transpose_without_a_declared_block_is_refused_at_compile_time_at_the_store():
    """With any block height the four-row loop may collide (block (32, 32): rows ty and
    ty' + 8); the proof for 1-D blocks alone is not compiled: the error names the store."""
    with pytest.raises(kaio.CompileError) as ei:
        kaio.kernel(_transpose_undeclared).specialize_ir({})
    err = ei.value
    assert err.line == _line_of(_transpose_undeclared, "y[bx * 32 + ty + j")
    assert err.index == "bx * 32 + ty + j, by * 32 + tx"
    assert "race-free only on 1-D launches" in str(err) and "thread_idx.y" in str(err)
    assert "@kaio.kernel(block=" in err.hint


@pytest.mark.parametrize("fn, what", [(_transpose_no_sync, "may touch one element"),
                                      (_transpose_rows_4, "may touch one element"),
                                      (_transpose_swapped, "not provably owned")])
def test_transpose_twins_are_refused(fn, what):
    with pytest.raises(kaio.CompileError, match=what) as ei:
        kaio.kernel(fn, block=(32, 8)).specialize_ir({})
    assert "block=(32, 8, 1)" in str(ei.value) or "not provably owned" in what


def _run_unchecked(fn, block, grid, args, launch_block=None):
    """Run ``fn`` compiled without the checker on the reference backend, with the race
    sanitizer and its ownership check on."""
    be = ReferenceBackend(sanitize=True, check_ownership=True)
    with checker.disabled():
        k = kaio.kernel(fn, block=block)
        be.launch(k.compile(be), grid, launch_block or block, args)


@pytest.mark.parametrize("fn", [_transpose_no_sync, _transpose_rows_4, _transpose_swapped])
def test_transpose_twins_really_race_when_unchecked(fn):
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    with pytest.raises(kaio.RaceError):
        _run_unchecked(fn, (32, 8), (2, 2), [x, np.zeros((64, 64), np.float32)])


# --- block-stride loops over shared memory --------------------------------------------------
def _hist_2d(data: kaio.In[i32, 2], hist: kaio.Atomic[i32]):
    h = kaio.shared_array(i32, 256)
    t = kaio.thread_idx.y * kaio.block_dim.x + kaio.thread_idx.x
    r = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    c = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    for b in range(t, 256, kaio.block_dim.x * kaio.block_dim.y):
        h[b] = 0
    kaio.sync()
    if r < data.shape[0] and c < data.shape[1]:
        kaio.atomic_add(h, data[r, c], 1)
    kaio.sync()
    for b in range(t, 256, kaio.block_dim.x * kaio.block_dim.y):
        kaio.atomic_add(hist, b, h[b])


def _hist_2d_row_stride(data: kaio.In[i32, 2], hist: kaio.Atomic[i32]):
    h = kaio.shared_array(i32, 256)
    t = kaio.thread_idx.y * kaio.block_dim.x + kaio.thread_idx.x
    for b in range(t, 256, kaio.block_dim.x):   # RACE: threads t and t + 32 both clear t + 32
        h[b] = 0
    kaio.sync()
    for b in range(t, 256, kaio.block_dim.x * kaio.block_dim.y):
        kaio.atomic_add(hist, b, h[b])


def test_block_stride_histogram_1d(reference):
    data = RNG.integers(0, 256, 1000).astype(np.int32)
    hist = np.zeros(256, np.int32)
    k = kaio.kernel(histogram_shared.fn)   # for b in range(t, 256, kaio.block_dim.x)
    k[(16,), (64,)](data, hist)
    np.testing.assert_array_equal(hist, np.bincount(data, minlength=256))
    assert k.specialize_ir({}).attrs["launch_dims"] == 1   # x ids only: held to 1-D launches
    hist[:] = 0
    declared = kaio.kernel(histogram_shared.fn, block=64)   # proved for the block: no launch_dims needed
    assert "launch_dims" not in declared.specialize_ir({}).attrs
    declared[(16,), (64,)](data, hist)
    np.testing.assert_array_equal(hist, np.bincount(data, minlength=256))


@pytest.mark.parametrize("block", [None, (32, 8)])
def test_block_stride_histogram_2d(reference, block):
    """The linear thread id ty * block_dim.x + tx, striding by the block's size: distinct per
    thread for any 2-D block (z extents 1), or for the declared one."""
    data = RNG.integers(0, 256, (20, 50)).astype(np.int32)
    hist = np.zeros(256, np.int32)
    k = kaio.kernel(_hist_2d, block=block)
    k[(2, 3), (32, 8)](data, hist)
    np.testing.assert_array_equal(hist, np.bincount(data.ravel(), minlength=256))
    attrs = k.specialize_ir({}).attrs
    assert attrs.get("launch_dims") == (2 if block is None else None)
    if block is None:
        hist[:] = 0
        k[(4, 5), (16, 4)](data, hist)
        np.testing.assert_array_equal(hist, np.bincount(data.ravel(), minlength=256))


@pytest.mark.parametrize("block", [None, (32, 8)])
def test_block_stride_row_stride_twin_is_refused(block):
    with pytest.raises(kaio.CompileError, match="shared array 'h'") as ei:
        kaio.kernel(_hist_2d_row_stride, block=block).specialize_ir({})
    if block is not None:
        assert "threads 0 (writes) and 32 (writes) touch element [32]" in str(ei.value)


def test_block_stride_row_stride_twin_really_races():
    data = RNG.integers(0, 256, (8, 32)).astype(np.int32)
    with pytest.raises(kaio.RaceError):
        _run_unchecked(_hist_2d_row_stride, (32, 8), (1, 1), [data, np.zeros(256, np.int32)])


# --- 2-D stencils ---------------------------------------------------------------------------
def _stencil_shifted(x: kaio.In[f32, 2], y: kaio.Out[f32, 2, tiles()]):
    i = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    j = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    if i + 1 < x.shape[0] and j < x.shape[1]:
        y[i + 1, j] = x[i, j]   # NOT OWNED: the row below belongs to another thread


def _stencil_fixed_tile(x: kaio.In[f32, 2], y: kaio.Out[f32, 2, tiles(16, 16)]):
    i = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    j = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    if i >= 1 and i < x.shape[0] - 1 and j >= 1 and j < x.shape[1] - 1:
        y[i, j] = 0.25 * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1]) - x[i, j]
    elif i < x.shape[0] and j < x.shape[1]:
        y[i, j] = x[i, j]


def _stencil_want(x):
    want = x.copy()
    want[1:-1, 1:-1] = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:]) - x[1:-1, 1:-1]
    return want


@pytest.mark.parametrize("shape", [(37, 45), (16, 16), (3, 100)])
def test_stencil_tile_is_the_block(reference, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    for launch in (lambda y: stencil5(x, y),
                   lambda y: stencil5[(-(-shape[1] // 16), -(-shape[0] // 8)), (16, 8)](x, y),
                   lambda y: stencil5[(-(-shape[1] // 4), -(-shape[0] // 2)), (4, 2)](x, y)):
        y = np.zeros_like(x)
        launch(y)
        np.testing.assert_allclose(y, _stencil_want(x), rtol=1e-6, atol=1e-6)


def test_stencil_tile_is_the_block_launch_must_cover_the_buffer(reference):
    x = np.zeros((37, 45), np.float32)
    with pytest.raises(kaio.LaunchError, match="covers only 40 x 32"):
        stencil5[(2, 5), (16, 8)](x, np.zeros_like(x))
    with pytest.raises(kaio.LaunchError, match="grid.z == block.z == 1"):
        stencil5[(3, 5), (16, 8, 2)](x, np.zeros_like(x))


def test_stencil_fixed_tile_proves_with_the_block_declared(reference):
    x = RNG.standard_normal((37, 45)).astype(np.float32)
    k = kaio.kernel(_stencil_fixed_tile, block=(16, 16))
    y = np.zeros_like(x)
    k(x, y)
    np.testing.assert_allclose(y, _stencil_want(x), rtol=1e-6, atol=1e-6)
    with pytest.raises(kaio.LaunchError, match=r"declared with block=\(16, 16, 1\)"):
        k[(3, 5), (16, 8)](x, y)   # a smaller block would leave rows of each tile unwritten


def test_stencil_fixed_tile_without_a_block_is_refused_with_the_fix():
    with pytest.raises(kaio.CompileError, match=r"tiles\(16, 16\) partition") as ei:
        kaio.kernel(_stencil_fixed_tile).specialize_ir({})
    assert "@kaio.kernel(block=(16, 16))" in ei.value.hint and "tiles()" in ei.value.hint


@pytest.mark.parametrize("block", [None, (16, 16)])
def test_stencil_shifted_twin_is_refused(block):
    with pytest.raises(kaio.CompileError, match="not provably owned") as ei:
        kaio.kernel(_stencil_shifted, block=block).specialize_ir({})
    assert ei.value.index.startswith("i + 1, j")


def test_stencil_shifted_twin_writes_other_threads_elements():
    x = RNG.standard_normal((20, 20)).astype(np.float32)
    with pytest.raises(kaio.RaceError, match="belongs to block"):
        _run_unchecked(_stencil_shifted, None, (2, 3), [x, np.zeros_like(x)], (16, 8))


def _line_of(fn, text: str) -> int:
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, ln in enumerate(lines) if text in ln)
