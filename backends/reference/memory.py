"""Buffers as the interpreter sees them: one flat numpy array per buffer, N-d indices
linearised row-major, bounds checked per dimension.

Global buffers have one instance; shared arrays one per block of the batch; local arrays one per
lane. All live in a single flat array with an instance base (``block * size`` or
``lane * size``) added to the linear index, so loads and stores have one code path.
"""
from __future__ import annotations

import math

import numpy as np

from ... import semantics
from .errors import OutOfBoundsError


class Buf:
    """Storage of one IR buffer value."""

    def __init__(self, name: str, dtype, shape: tuple, flat: np.ndarray, space: str,
                 intent: str, instances: str = "one", inst_stride: int | None = None):
        self.name, self.dtype, self.shape = name, dtype, tuple(int(s) for s in shape)
        self.flat, self.space, self.intent = flat, space, intent
        self.instances = instances          # 'one' | 'block' | 'lane'
        self.size = math.prod(self.shape)
        self.inst_stride = self.size if inst_stride is None else inst_stride
        self.strides = tuple(math.prod(self.shape[d + 1:]) for d in range(len(self.shape)))
        self.tracker = None                 # sanitizer state (see sanitizer.py)
        self.owner = None                   # flat owner map of a partitioned buffer
        self.partition = None

    @classmethod
    def scratch(cls, name, dtype, shape, count: int, space: str, instances: str):
        """Poisoned scratch storage for ``count`` instances (blocks or lanes)."""
        size = math.prod(shape)
        flat = np.full(size * count, semantics.poison(dtype), dtype=dtype.storage_np)
        return cls(name, dtype, shape, flat, space, "scratch", instances)

    def base(self, batch, sel):
        if self.instances == "one":
            return 0
        owner = batch.block_local if self.instances == "block" else batch.lane
        owner = owner if sel is None else owner[sel]
        return owner * self.inst_stride

    def positions(self, ctx, op, index_vals, sel):
        """Flat storage positions (one per selected lane) of an N-d index: int32 when the
        storage allows (faster), int64 otherwise."""
        batch = ctx.batch
        n = batch.L if sel is None else len(sel)
        small = len(self.flat) < 2**31
        lin = None
        for v, extent, stride in zip(index_vals, self.shape, self.strides):
            if np.ndim(v):
                v = v if sel is None else v[sel]
                if v.size and (int(v.min()) < 0 or int(v.max()) >= extent):
                    oob = (v < 0) | (v >= extent)
                    self._raise_oob(ctx, op, index_vals, sel, int(np.argmax(oob)))
                v = v.astype(np.int32 if small else np.int64, copy=False)
            elif not 0 <= int(v) < extent:
                self._raise_oob(ctx, op, index_vals, sel, 0)
            else:
                v = np.int32(v) if small else np.int64(v)
            term = v if stride == 1 else v * (np.int32(stride) if small else np.int64(stride))
            lin = term if lin is None else lin + term
        if self.instances != "one":
            lin = lin + self.base(batch, sel)
        return np.broadcast_to(lin, (n,))

    def _raise_oob(self, ctx, op, index_vals, sel, k):
        lane = k if sel is None else int(sel[k])
        idx = tuple(int(np.asarray(v)[lane]) if np.ndim(v) else int(v) for v in index_vals)
        batch = ctx.batch
        raise OutOfBoundsError.for_access(ctx.kernel.name, op.opcode, self.name, idx, self.shape,
                                          op.loc, batch.first_block * batch.T + lane, batch.grid,
                                          batch.block)
