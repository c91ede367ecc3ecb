"""Declared launch shapes (``@kaio.kernel(block=...)``) and what the race checker may assume
about a launch's dimensions.

- a declared block is validated, recorded on the IR, used by the checker as constants, the only
  block a launch may give (every entry refuses another), and the default block;
- a proof that holds only for flatter launches than an index's own geometry is refused at
  compile time, at the access; an x-ids-only kernel keeps its 1-D proof and the launch error
  names the access that needed it.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import kaio
from kaio import f32, i32
from kaio.options import KernelOptions, check_block
from kaio.regions import blocked, tiles


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, ln in enumerate(lines) if text in ln)


# --- the option ------------------------------------------------------------------------------
@pytest.mark.parametrize("given, want", [(256, (256, 1, 1)), ((32, 8), (32, 8, 1)),
                                         ([4, 4, 4], (4, 4, 4)), ((1024,), (1024, 1, 1))])
def test_block_is_normalised_to_three_ints(given, want):
    assert check_block(given) == want
    assert KernelOptions(block=given).block == want


@pytest.mark.parametrize("bad, match", [((0, 8), "ints >= 1"), ((32, 8.0), "ints >= 1"),
                                        ((True,), "ints >= 1"), ((), "1 to 3 ints"),
                                        ((1, 1, 1, 1), "1 to 3 ints"), ("32", "ints"),
                                        ((64, 32), "2048 threads; a block has at most 1024")])
def test_bad_block_is_a_clear_value_error(bad, match):
    with pytest.raises(ValueError, match=match):
        KernelOptions(block=bad)
    with pytest.raises(ValueError, match="kernel '_fill'"):
        kaio.kernel(block=bad)(_fill)


def _fill(y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = kaio.block_dim.x


def test_declared_block_is_in_the_ir():
    k = kaio.kernel(_fill, block=64)
    assert k.options.block == (64, 1, 1)
    assert "block = [64, 1, 1]" in k.ir


def test_declared_block_is_the_default_launch_block(reference):
    y = np.zeros(1000, np.int32)
    kaio.kernel(_fill, block=64)(y)   # the partition's default (256 threads) would differ
    assert (y == 64).all()


@pytest.mark.parametrize("block", [(32, 2), (64, 1)])
def test_launch_with_another_block_is_refused_on_every_entry(reference, block):
    k = kaio.kernel(_fill, block=block)
    y = np.zeros(100, np.int32)
    msg = rf"kernel '_fill' is declared with block=\({block[0]}, {block[1]}, 1\)"
    with pytest.raises(kaio.LaunchError, match=msg):
        k[(1,), (128,)](y)
    be = kaio.backends.get_backend("reference")
    with pytest.raises(kaio.LaunchError, match=msg):
        be.launch(k.compile(be), (1, 1, 1), (128, 1, 1), [y])
    assert (y == 0).all()
    k[(4,), block](y)   # the declared block itself is fine


def _copy_1d(x: kaio.In[f32], y: kaio.Region[f32, blocked(2)]):
    for i in y.owned():
        y[i] = x[i]


def test_declared_2d_block_with_a_1d_partition_is_a_compile_error():
    with pytest.raises(kaio.CompileError, match=r"declares block=\(32, 8\), but its blocked\(k=2\) "
                                                r"partition needs 1-D launches"):
        kaio.kernel(_copy_1d, block=(32, 8)).specialize_ir({})


# --- the checker uses the declared block ------------------------------------------------------
def _tile_rows(y: kaio.Out[f32, 2, tiles()]):
    s = kaio.shared_array(f32, 256)
    t = kaio.thread_idx.y * 32 + kaio.thread_idx.x   # distinct only while block.x <= 32
    s[t] = kaio.f32(t)
    kaio.sync()
    r = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    c = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    if r < y.shape[0] and c < y.shape[1]:
        y[r, c] = s[t]


def test_index_using_y_ids_is_refused_at_compile_time_not_proved_for_1d():
    """Before, this compiled with a 1-D-only proof (thread_idx.y pinned to 0); it uses y ids,
    so the flatter proof is refused at the store, naming line and index."""
    with pytest.raises(kaio.CompileError) as ei:
        kaio.kernel(_tile_rows).specialize_ir({})
    err = ei.value
    assert err.line == _line_of(_tile_rows, "s[t] = kaio.f32(t)") and err.kind == "launch-shape"
    assert "race-free only on 1-D launches" in str(err) and "thread_idx.y" in str(err)
    assert err.index.startswith("t")
    assert "@kaio.kernel(block=" in err.hint


def test_declared_block_makes_block_dim_constant_to_the_proof(reference):
    k = kaio.kernel(_tile_rows, block=(32, 8))
    ir = k.specialize_ir({})
    assert ir.attrs["block"] == (32, 8, 1) and "launch_dims" not in ir.attrs
    y = np.zeros((20, 70), np.float32)
    k(y)
    rows, cols = np.indices(y.shape)
    np.testing.assert_array_equal(y, (rows % 8) * 32 + cols % 32)
    with pytest.raises(kaio.CompileError, match="shared array 's'"):
        kaio.kernel(_tile_rows, block=(64, 4)).specialize_ir({})   # t collides: 64 > 32


def _scale_gid(x: kaio.In[f32], y: kaio.Out[f32]):
    i = kaio.global_id()
    if i < y.shape[0]:
        y[i] = x[i] * 2.0


def test_x_ids_kernel_keeps_its_1d_proof_and_the_launch_error_names_the_store(reference):
    k = kaio.kernel(_scale_gid)
    ir = k.specialize_ir({})
    line = _line_of(_scale_gid, "y[i] = x[i]")
    assert ir.attrs["launch_dims"] == 1 and ir.attrs["launch_dims_at"].startswith(f"line {line}: y[i ")
    x = np.ones(64, np.float32)
    y = np.zeros(64, np.float32)
    with pytest.raises(kaio.LaunchError, match=rf"assumes a 1-D launch \(x ids only\), for the "
                                               rf"access at line {line}: y\[i "):
        k[(1, 2), (32, 2)](x, y)
    k[(2,), (32,)](x, y)
    np.testing.assert_array_equal(y, 2 * x)


def test_declared_1d_block_proves_without_a_launch_dims_assumption_on_the_block(reference):
    """With block=(64,) the block's y and z are known to be 1; only the grid is held to 1-D."""
    k = kaio.kernel(_scale_gid, block=64)
    ir = k.specialize_ir({})
    assert ir.attrs["launch_dims"] == 1
    x = np.ones(100, np.float32)
    y = np.zeros(100, np.float32)
    k(x, y)
    np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(kaio.LaunchError, match="assumes a 1-D launch"):
        k[(1, 2), (64,)](x, y)


def _z_stride(y: kaio.Out[f32, 2]):
    s = kaio.shared_array(f32, (4, 64))
    s[kaio.thread_idx.z, kaio.thread_idx.x] = 1.0
    kaio.sync()
    i = kaio.global_id()
    if i < y.shape[1]:
        y[0, i] = s[0, kaio.thread_idx.x]


def test_z_ids_in_an_index_proved_only_for_flat_launches_are_refused():
    """The shared index uses thread_idx.z and no y: distinct per thread only for 1-D blocks,
    which would make its z id always 0."""
    with pytest.raises(kaio.CompileError, match=r"uses thread_idx\.z") as ei:
        kaio.kernel(_z_stride).specialize_ir({})
    assert ei.value.line == _line_of(_z_stride, "s[kaio.thread_idx.z")
