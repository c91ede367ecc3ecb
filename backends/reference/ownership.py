"""Concrete owner maps of partitioned buffers, for the sanitizer's ownership check.

A Region/Out parameter declared with a partition promises that each element is written (and
read back) only by the thread owning it; the static checker proves this. The sanitizer checks
it at run time too, which is how it checks the checker. The owner map -- for each element the
global linear id of its owner, -1 for none -- is computed by running the partition's own
``owned_spec`` IR through the interpreter (vectorised, so it costs about one extra launch): the
backend hands :func:`owner_map` a launch function of an interpreter without the sanitizer.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ... import dtypes as dt
from ...ir import BufType, Builder, Loc, Param
from ...ir.indexmath import IndexMath

_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 16


def _owner_kernel(partition, ndim: int):
    b = Builder.for_kernel("owners", [("owner", BufType(dt.i32, ndim, "global", "raw"),
                                       Param("owner", "buffer"))], Loc("<owner map>", 1))
    ix = IndexMath(b)
    (owner,) = b.kernel.args
    spec = partition.owned_spec(ix, owner)
    gid = ix.global_linear_id()
    ranges = list(spec.ranges or [])
    body = b.block
    if spec.guard is not None:
        with b.if_(spec.guard) as (then, _, _r):
            body = then
    ivs = []
    for lb, ub, step in ranges:
        with b.at(body):
            _, body, iv, _ = b.for_(ix._v(lb), ix._v(ub), ix._v(step))
        ivs.append(iv)
    with b.at(body):
        idx = [ix._v(v) for v in spec.index(*ivs)]
        ok = None
        for v, a in zip(idx, range(ndim)):  # partitions may hand out indices past the end
            inside = b.binary("and", b.cmp("ge", v, ix.const(0)), b.cmp("lt", v, ix.shape(owner, a)))
            ok = inside if ok is None else b.binary("and", ok, inside)
        with b.if_(ok) as (then, _, _r):
            with b.at(then):
                b.store(owner, idx, gid)
    return b.finish()


def owner_map(partition, shape, grid, block, launch) -> np.ndarray:
    """Flat int64 array: the owner (global linear thread id) of each element, -1 for none.
    ``launch(kernel, grid, block, args)`` runs the owner kernel (the reference backend's, with
    the sanitizer off)."""
    width = getattr(getattr(launch, "__self__", None), "warp_size", None)   # (per-warp owners)
    key = (partition, tuple(shape), tuple(grid), tuple(block), width)   # partitions hash by value
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    owners = np.full(tuple(shape), -1, dtype=np.int32)
    launch(_owner_kernel(partition, len(shape)), grid, block, [owners])
    flat = owners.reshape(-1).astype(np.int64)
    _CACHE[key] = flat
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return flat
