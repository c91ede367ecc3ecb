"""Problem sizes the way the suite scales them (``--sizefact``, ``--size``).

The suite has one *problem size* per kernel (its default times ``--sizefact``, or ``--size``)
and derives the loop extents from it: a 1-D kernel's length is the problem size, a 2-D kernel's
edge is its square root (``N = sqrt(target) + 1``), a 3-D kernel's edge its cube root; extents
that are not edges (GEMM's and 2MM's inner dimension ``nk``, time steps, LTIMES' groups,
moments and directions) stay at their defaults. Here the edges scale from the port's default
edges by the same root of the size ratio, so ``sizefact`` 1 is exactly the port's default.
"""
from __future__ import annotations

import math

from ..registry import REGISTRY
from ._case import SUITE

#: name -> (indices of the size entries that are edges, or None when the size is one int;
#: problem dimensions). Every port not listed is 1-D with an int size.
EDGES = {
    "NESTED_INIT": ((0, 1, 2), 3),
    "MAT_MAT_SHARED": (None, 2),
    "ATAX": (None, 2),
    "MVT": (None, 2),
    "DEL_DOT_VEC_2D": (None, 2),
    "VOL3D": (None, 3),
    "GEMM": ((0, 1), 2),
    "JACOBI_1D": ((0,), 1),
    "JACOBI_2D": ((0,), 2),
    "HEAT_3D": ((0,), 3),
    "FDTD_2D": ((0, 1), 2),
    "2MM": ((0, 1, 3), 2),
    "LTIMES": ((0,), 1),
}
#: the smallest edge / length a port is built with (stencils need interior points, FIR 16 taps)
MIN_EDGE, MIN_LENGTH = 4, 32


def problem_size(name: str, size) -> int:
    """The suite's problem size of a port at ``size`` (what ``--size`` sets)."""
    facts = SUITE[name]
    if facts.problem is not None:
        return int(facts.problem(size))
    idx, dims = EDGES.get(name, (None, 1))
    if idx is None:
        return int(size) ** dims
    if len(idx) >= dims:
        return math.prod(int(size[i]) for i in idx[:dims])
    return int(size[idx[0]]) ** dims


def size_for(name: str, *, sizefact: float = 1.0, size: int | None = None):
    """The port's size for a target problem size: ``size`` when given, else ``sizefact`` times
    the default problem size."""
    case = REGISTRY[f"rajaperf/{name}"]
    default = case.default_size
    if size is None and sizefact == 1.0:
        return default
    target = size if size is not None else sizefact * problem_size(name, default)
    ratio = target / problem_size(name, default)
    idx, dims = EDGES.get(name, (None, 1))
    if idx is None:
        floor = MIN_LENGTH if dims == 1 else MIN_EDGE
        return max(floor, round(default * ratio ** (1.0 / dims)))
    scaled = list(default)
    for i in idx:
        scaled[i] = max(MIN_EDGE, round(default[i] * ratio ** (1.0 / dims)))
    return tuple(scaled)
