"""What a generated kernel is: its source, parameters, launches and labels, and the arguments
one launch runs on (built deterministically from the launch, so every process and backend sees
the same inputs)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kaio import dtypes as dt


@dataclass(frozen=True)
class Param:
    """One kernel parameter. ``role``: 'in' (values), 'idx' (indices into y), 'scalar',
    'region' / 'out' (the partitioned output y), 'atomic'."""

    name: str
    role: str
    dtype: str
    ndim: int = 1


@dataclass(frozen=True)
class Launch:
    """One launch: geometry, dynamic shared bytes, the shape of every buffer, the scalar values,
    and ``variant`` (which input pattern: e.g. a permutation or a repeating index buffer)."""

    grid: tuple
    block: tuple
    shapes: dict
    scalars: dict = field(default_factory=dict)
    shared_bytes: int = 0
    variant: int = 0

    @property
    def threads(self) -> int:
        return math.prod(self.grid) * math.prod(self.block)

    def text(self) -> str:
        extra = f", shared_bytes={self.shared_bytes}" if self.shared_bytes else ""
        sc = "".join(f", {k}={v}" for k, v in self.scalars.items())
        return (f"grid={self.grid} block={self.block}{extra} shapes="
                f"{ {k: tuple(v) for k, v in self.shapes.items()} }{sc} variant={self.variant}")

    def as_dict(self) -> dict:
        return {"grid": list(self.grid), "block": list(self.block), "shared_bytes": self.shared_bytes,
                "shapes": {k: list(v) for k, v in self.shapes.items()}, "scalars": dict(self.scalars),
                "variant": self.variant}


@dataclass
class Case:
    """A generated kernel. ``source`` is the decorated function's text; ``line_labels`` maps a
    line of it (1-based within the function) to the constructs written there, which name the
    likely cause when the checker rejects that line. ``mutations``: racy-on-purpose edits.
    ``tolerant``: float atomics make the result order-dependent (compare with a tolerance)."""

    index: int
    name: str
    partition: str
    dtype: str
    params: list
    source: str
    launches: list
    features: tuple = ()
    mutations: tuple = ()
    line_labels: dict = field(default_factory=dict)
    tolerant: bool = False
    counterexample: object = None   # message -> the Launch a rejection message gives, or None

    def labels_at(self, line: int | None) -> tuple:
        return tuple(self.line_labels.get(line, ())) if line is not None else ()

    def as_dict(self) -> dict:
        return {"index": self.index, "name": self.name, "partition": self.partition,
                "dtype": self.dtype, "features": list(self.features),
                "mutations": list(self.mutations), "tolerant": self.tolerant}


def _storage(dtype: str):
    return getattr(dt, dtype).storage_np


def make_args(case: Case, launch: Launch, seed: int) -> list:
    """Fresh arguments for one launch, in parameter order (deterministic in ``seed``)."""
    rng = np.random.default_rng([seed, case.index, launch.variant, launch.threads])
    args = []
    for p in case.params:
        if p.role == "scalar":
            args.append(launch.scalars[p.name])
            continue
        shape = tuple(launch.shapes[p.name])
        size = math.prod(shape)
        if p.role == "idx":
            args.append(_indices(rng, size, launch.shapes["y"], launch.variant))
        elif p.role == "atomic":
            args.append(np.zeros(shape, _storage(p.dtype)))
        else:
            args.append(_values(rng, p.dtype, size, integral=case.tolerant).reshape(shape))
    return args


def _indices(rng, size: int, yshape, variant: int) -> np.ndarray:
    """Indices into y's first dimension: a permutation (variant 0: distinct where possible) or
    values with repeats (variant 1)."""
    n = max(1, int(yshape[0]))
    if variant % 2 == 0:
        base = rng.permutation(n)
        return np.resize(base, size).astype(np.int32)
    return rng.integers(0, n, size).astype(np.int32)


def _values(rng, dtype: str, size: int, integral: bool) -> np.ndarray:
    """Small values: integers in [-8, 8) for integer types and when ``integral`` (float sums are
    then exact in any order), else normally distributed floats."""
    d = getattr(dt, dtype)
    if d.is_float and not integral:
        return rng.standard_normal(size).astype(d.storage_np)
    lo = 0 if dtype.startswith("u") else -8
    return rng.integers(lo, 8, size).astype(d.storage_np)
