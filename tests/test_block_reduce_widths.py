"""Block reductions give bit-identical results at every warp width the reference runs, 1 to 64
lanes (kaio.passes.lower_reductions: shuffles within groups of 32 where a warp holds a group,
the same tree run by thread 0 where it does not)."""
from __future__ import annotations

import numpy as np
import pytest

import kaio
from kaio import f32
from kaio.backends.reference.backend import ReferenceBackend


@kaio.kernel
def block_stats(x: kaio.In[f32], total: kaio.Out[f32, kaio.regions.per_block()],
                hi: kaio.Out[f32, kaio.regions.per_block()], lo: kaio.Out[f32, kaio.regions.per_block()]):
    v = x[kaio.global_id()]
    s = kaio.block_sum(v)
    m = kaio.block_max(v)
    k = kaio.block_min(v)
    if kaio.thread_idx.x == 0:
        total[kaio.block_idx.x] = s
        hi[kaio.block_idx.x] = m
        lo[kaio.block_idx.x] = k


def _run(width, block, x, blocks):
    be = ReferenceBackend(warp_size=width)
    out = np.zeros((3, blocks), np.float32)
    be.launch(block_stats.compile(be), (blocks, 1, 1), (block, 1, 1), [x, out[0], out[1], out[2]])
    return out


@pytest.mark.parametrize("block", [1, 31, 100, 256, 1024])
def test_every_width_agrees_bit_for_bit_with_the_32_lane_tree(block):
    blocks = 2
    x = np.random.default_rng(block).standard_normal(block * blocks).astype(np.float32) * 1e3
    want = _run(32, block, x, blocks)
    rows = x.reshape(blocks, block)
    np.testing.assert_allclose(want[0], rows.astype(np.float64).sum(1), rtol=1e-5, atol=1e-2)
    np.testing.assert_array_equal(want[1], rows.max(1))
    np.testing.assert_array_equal(want[2], rows.min(1))
    for width in (1, 2, 4, 8, 16, 64):
        np.testing.assert_array_equal(_run(width, block, x, blocks), want, err_msg=f"width {width}")
