"""Partitions of a writable buffer's index space among the threads of a launch.

A partition answers three questions:

- ``owned_spec(ctx, buf)``: which indices does the current thread own? Returned as an
  :class:`OwnedSpec` built from IR values -- a guard, nested ranges and the index tuple as a
  function of the range variables -- so the frontend can emit ``for i in y.owned()`` as ordinary
  structured loops (loop-carried variables and all) and the checker can reason about it;
- ``launch_shape(shape)``: the default (grid, block) for a buffer of this shape;
- ``check_launch(shape, grid, block)``: raise unless the launch gives every index exactly one owner.

The Regions issue adds partitions and the static ownership checker (regions/checker.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..errors import LaunchError  # noqa: F401  (re-exported for partitions' messages)

DEFAULT_BLOCK = 256


@dataclass
class OwnedSpec:
    """What one thread owns, as IR: ``if guard: for r in ranges: index(rs)``.

    ``ranges`` are (lb, ub, step) triples of i32 IR values, outermost first; ``index`` maps the
    range variables to the index tuple (one i32 value per buffer dimension).
    """

    guard: object | None
    ranges: list = field(default_factory=list)
    index: Callable = None


class Partition:
    """Base class. Subclasses set ``name`` and implement the three methods."""

    name = "partition"
    ndim: int | None = None  # dimensions the partition requires (None: any)

    def spec(self) -> str:
        """Text form used by the IR printer; ``partition_from_spec`` parses it back."""
        return f"{self.name}()"

    def owned_spec(self, ctx, buf) -> OwnedSpec:
        raise NotImplementedError

    def launch_shape(self, shape: tuple[int, ...]):
        raise NotImplementedError

    def check_launch(self, shape, grid, block, *, buffer: str, kernel: str) -> None:
        raise NotImplementedError

    def __eq__(self, other):
        return type(self) is type(other) and self.spec() == other.spec()

    def __hash__(self):
        return hash(self.spec())


class Elementwise(Partition):
    """One element per thread: thread with global linear id g owns element g (row-major for N-d).

    Global linear id: ``((bz*gy + by)*gx + bx) * (tx*ty*tz) + (tz*ty + ty)*tx + tx`` with the
    block's threads linearised x fastest. Valid launches have at least ``size`` threads; threads
    past the end own nothing.
    """

    name = "elementwise"

    def owned_spec(self, ctx, buf) -> OwnedSpec:
        gid = ctx.global_linear_id()
        shape = [ctx.shape(buf, a) for a in range(buf.type.ndim)]
        size = ctx.product(shape)
        guard = ctx.lt(gid, size)
        return OwnedSpec(guard, [], lambda: ctx.unravel(gid, shape))

    def launch_shape(self, shape):
        size = math.prod(shape)
        return (max(1, -(-size // DEFAULT_BLOCK)), 1, 1), (DEFAULT_BLOCK, 1, 1)

    def check_launch(self, shape, grid, block, *, buffer, kernel):
        size = math.prod(shape)
        threads = math.prod(grid) * math.prod(block)
        if threads < size:
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has {size} elements (shape {tuple(shape)}) "
                f"but the launch grid={tuple(grid)} block={tuple(block)} has only {threads} threads; "
                f"under the elementwise partition each thread owns one element, so "
                f"{size - threads} elements would be left unwritten. Launch at least {size} threads "
                f"or use a blocked or grid-stride partition.")


PARTITIONS: dict[str, type] = {"elementwise": Elementwise}


def elementwise() -> Elementwise:
    """The default partition: one element per thread, by global linear id."""
    return Elementwise()


def partition_from_spec(text: str) -> Partition:
    """Inverse of ``Partition.spec()``: ``"blocked(k=4)"`` -> Blocked(k=4)."""
    name, _, rest = text.partition("(")
    cls = PARTITIONS.get(name)
    if cls is None:
        raise ValueError(f"unknown partition {text!r}")
    kwargs = {}
    for item in filter(None, (s.strip() for s in rest.rstrip(")").split(","))):
        k, _, v = item.partition("=")
        kwargs[k.strip()] = int(v)
    return cls(**kwargs)
