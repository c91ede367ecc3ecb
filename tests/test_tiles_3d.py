"""kaio.regions.tiles() on 3-d buffers: planes on z (block_idx.z, thread_idx.z), the 2-D rule on
axes 1-2. The partition's owners and launch checks, the owned() code (a guard, no division and no
loop when the tile is the block), the checker's proofs and refusals, and the NESTED_INIT port
written as the suite's CUDA kernel. (Racy twins: tests/race_corpus, plane_neighbour and
planes_swapped; accepted kernels: planes_owned, planes_hand.)"""
from __future__ import annotations

import re

import numpy as np
import pytest

import kaio
from kaio import f32
from kaio.passes import target_pipeline
from kaio.regions import Tiles, owner_map, tiles


@kaio.kernel
def scale3(x: kaio.In[f32, 3], y: kaio.Out[f32, 3, tiles()]):
    for k, j, i in y.owned():
        y[k, j, i] = x[k, j, i] * 3.0


@kaio.kernel
def scale3_tiled(x: kaio.In[f32, 3], y: kaio.Out[f32, 3, tiles(4, 8)]):
    for k, j, i in y.owned():
        y[k, j, i] = x[k, j, i] * 3.0


@kaio.kernel
def scale2(x: kaio.In[f32, 2], y: kaio.Out[f32, 2, tiles()]):
    for j, i in y.owned():
        y[j, i] = x[j, i] * 3.0


@kaio.kernel
def plane_per_block(x: kaio.In[f32, 3], y: kaio.Out[f32, 3, tiles()]):
    """k = block_idx.z is the plane only when block.z == 1: proved for 2-D launches only."""
    i = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    j = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    k = kaio.block_idx.z
    if i < y.shape[2] and j < y.shape[1] and k < y.shape[0]:
        y[k, j, i] = x[k, j, i]


@pytest.mark.parametrize("part,shape,grid,block", [
    (Tiles(), (3, 5, 7), (1, 1, 3), (8, 8, 1)),
    (Tiles(), (4, 5, 7), (2, 1, 2), (4, 8, 2)),
    (Tiles(), (3, 2, 9), (3, 1, 1), (4, 2, 4)),          # more z threads than planes
    (Tiles(4, 8), (2, 9, 17), (3, 3, 2), (8, 2, 1)),
    (Tiles(4, 8, True), (2, 9, 17), (3, 3, 1), (8, 4, 2)),
])
def test_every_element_has_one_owner(part, shape, grid, block):
    part.check_launch(shape, grid, block, buffer="y", kernel="k")
    assert (owner_map(part, shape, grid, block) >= 0).all()


@pytest.mark.parametrize("part", [Tiles(), Tiles(16, 8), Tiles(8, 32, True)])
def test_default_launch_covers_the_planes(part):
    shape = (5, 13, 29)
    grid, block = part.launch_shape(shape)
    assert grid[2] == 5 and block[2] == 1
    part.check_launch(shape, grid, block, buffer="y", kernel="k")
    assert (owner_map(part, shape, grid, block) >= 0).all()
    if part == Tiles():   # the suite's 3-D launch: (32, 8, 1) blocks, grid over (i, j, k)
        assert (grid, block) == ((1, 2, 5), (32, 8, 1))


@pytest.mark.parametrize("shape,grid,block,words", [
    ((4, 5, 7), (1, 1, 3), (8, 8, 1), ["3 x 8 x 8", "grid=(1, 1, 4)"]),
    ((4, 5, 7), (1, 1, 1), (8, 8, 2), ["2 x 8 x 8"]),
    ((2, 5, 7), (1, 1, 2**30), (8, 8, 2), ["(grid.z + 1) * block.z"]),
])
def test_launch_short_of_the_planes_is_refused(shape, grid, block, words):
    with pytest.raises(kaio.LaunchError) as ei:
        Tiles().check_launch(shape, grid, block, buffer="y", kernel="k")
    for w in words:
        assert w in str(ei.value), str(ei.value)


def test_fixed_tile_still_bounds_the_block_on_3d():
    with pytest.raises(kaio.LaunchError, match=r"a block of at most \(8, 4\) threads"):
        Tiles(4, 8).check_launch((2, 8, 8), (1, 2, 2), (16, 4, 1), buffer="y", kernel="k")


def test_rank_other_than_2_or_3_is_a_declaration_error():
    with pytest.raises(kaio.CompileError, match="2-d or 3-d buffers"):
        @kaio.kernel
        def one_d(y: kaio.Out[f32, 1, tiles()]):
            y[kaio.thread_idx.x] = 1.0
        one_d.specialize_ir()


@pytest.mark.parametrize("kern", [scale3, scale2], ids=lambda k: k.name)
def test_tile_the_block_owns_through_a_guard(kern):
    """tiles(): one element per thread, the CUDA index under a guard: no loop, no division."""
    low = target_pipeline(kern.specialize_ir(), 32)
    ops = {op.opcode for op in low.walk()}
    assert "for" not in ops and "div" not in ops and "rem" not in ops
    ptx = kern.emit("ptx", "sm_90")
    assert not re.search(r"\b(div|rem)\.", ptx)


@pytest.mark.parametrize("kern,launch", [(scale3, ((3, 2, 2), (4, 4, 2))), (scale3, None),
                                         (scale3_tiled, ((2, 2, 3), (8, 2, 1))),
                                         (scale3_tiled, None)], ids=str)
def test_runs_match_numpy(kern, launch):
    x = np.arange(3 * 7 * 9, dtype=np.float32).reshape(3, 7, 9)
    y = np.zeros_like(x)
    (kern if launch is None else kern[launch])(x, y)
    np.testing.assert_array_equal(y, x * 3)


def test_plane_per_block_needs_block_z_1():
    """Without a declared block the proof of k = block_idx.z assumes a 2-D launch, which a
    buffer of more than one plane cannot have; declaring block.z == 1 proves it on 3-D grids."""
    x = np.ones((3, 4, 4), np.float32)
    with pytest.raises(kaio.LaunchError, match="2-D launch|grid.z == block.z == 1"):
        plane_per_block[(1, 1, 3), (4, 4, 1)](x, np.zeros_like(x))
    declared = kaio.kernel(block=(4, 4, 1))(plane_per_block.fn)
    y = np.zeros_like(x)
    declared[(1, 1, 3), (4, 4, 1)](x, y)
    np.testing.assert_array_equal(y, x)


def test_nested_init_port_is_the_suites_kernel():
    from kernels.rajaperf.basic import nested_init
    arr = np.zeros((5, 11, 37))
    nested_init(arr)
    k, j, i = np.meshgrid(*(np.arange(s, dtype=np.float64) for s in arr.shape), indexing="ij")
    np.testing.assert_array_equal(arr, 1.0e-8 * i * j * k)
    ptx = nested_init.emit("ptx", "sm_90")
    assert not re.search(r"\b(div|rem)\.", ptx) and ".reqntid 32, 8, 1" in ptx
    assert nested_init.specialize_ir().params[0].partition == tiles()
