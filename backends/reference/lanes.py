"""The lanes of one batch of blocks: every thread of the batch is one numpy vector lane.

Lane ``l`` is thread ``l % T`` (linear id in its block, x fastest) of block
``first_block + l // T`` (block linear id, x fastest), so lane order is global linear thread id
order -- the order in which atomics are applied.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import describe_thread


def _unravel3(linear: np.ndarray, dims) -> tuple:
    x = linear % dims[0]
    y = (linear // dims[0]) % dims[1]
    z = linear // (dims[0] * dims[1])
    return x, y, z


class Batch:
    """Geometry of a batch: blocks ``first_block .. first_block + nblocks - 1`` of the grid.

    Per-lane arrays are built lazily with np.tile / np.repeat (cheap), and ids along an axis of
    extent 1 are scalars, so 1-D launches do little index arithmetic.
    """

    def __init__(self, grid, block, first_block: int, nblocks: int, warp_size: int):
        self.grid, self.block = tuple(grid), tuple(block)
        self.T = math.prod(block)
        self.first_block, self.nblocks = first_block, nblocks
        self.L = nblocks * self.T
        self.warp_size = warp_size
        self._cache: dict = {}

    def _lazy(self, key, make):
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = make()
        return v

    @property
    def lane(self):
        return self._lazy("lane", lambda: np.arange(self.L, dtype=np.int64))

    @property
    def tid(self):
        """Thread linear id within the block, per lane."""
        return self._lazy("tid", lambda: np.tile(np.arange(self.T, dtype=np.int64), self.nblocks))

    @property
    def block_local(self):
        """Block index within the batch, per lane."""
        return self._lazy("block_local", lambda: np.repeat(np.arange(self.nblocks, dtype=np.int64),
                                                           self.T))

    @property
    def gtid(self):
        """Global linear thread id, per lane."""
        return self._lazy("gtid", lambda: self.first_block * self.T + self.lane)

    def special(self, name: str, axis: int = 0):
        return self._lazy((name, axis), lambda: self._special(name, axis))

    def _special(self, name, axis):
        if name == "thread_idx":
            if self.block[axis] == 1:
                return np.int32(0)
            per_thread = _unravel3(np.arange(self.T, dtype=np.int32), self.block)[axis]
            return np.tile(per_thread.astype(np.int32), self.nblocks)
        if name == "block_idx":
            if self.grid[axis] == 1:
                return np.int32(0)
            ids = np.arange(self.first_block, self.first_block + self.nblocks, dtype=np.int64)
            per_block = _unravel3(ids, self.grid)[axis].astype(np.int32)
            if self.nblocks == 1:
                return per_block[0]
            return np.repeat(per_block, self.T)
        if name == "block_dim":
            return np.int32(self.block[axis])
        if name == "grid_dim":
            return np.int32(self.grid[axis])
        if name == "lane_id":
            if self.T == 1:
                return np.int32(0)
            return np.tile((np.arange(self.T) % self.warp_size).astype(np.int32), self.nblocks)
        if name == "warp_size":
            return np.int32(self.warp_size)
        raise KeyError(name)

    def describe_thread(self, lane: int) -> str:
        """'block (bx, by, bz) thread (tx, ty, tz)' of one lane of this batch."""
        return describe_gtid(self.first_block * self.T + int(lane), self.grid, self.block)

    def per_block(self, mask) -> np.ndarray:
        """A lane mask reshaped (nblocks, T)."""
        return mask.reshape(self.nblocks, self.T)


def describe_gtid(g: int, grid, block) -> str:
    return describe_thread(g, grid, block)
