"""Partition base class, the owned-set record shared by all partitions, and the per-launch check
of what the race checker's proof assumed about the launch (:func:`check_launch_attrs`)."""
from __future__ import annotations

from dataclasses import field
from typing import Callable

from ..errors import LaunchError
from ..ir.attrs import StructAttr
from ..records import record

DEFAULT_BLOCK = 256


@record
class OwnedSpec:
    """What one thread owns, as IR: ``if guard: for r in ranges: index(rs)``.

    ``ranges`` are (lb, ub, step) triples of i32 IR values, outermost first; ``index`` maps the
    range variables to the index tuple (one i32 value per buffer dimension).
    """

    guard: object | None
    ranges: list = field(default_factory=list)
    index: Callable = None


class Partition(StructAttr):
    """Base class. Subclasses are frozen dataclasses (their fields are the partition's
    parameters, so equal partitions compare and hash equal), set ``name`` (and ``ndim`` when
    they need a fixed rank) and implement ``owned_spec``, ``owned_affine``, ``launch_shape`` and
    ``check_launch``. Registered under ``name`` as an IR attribute (:mod:`kaio.ir.attrs`), a
    partition prints in the IR's text form as ``#blocked{k = 4}`` and parses back to an equal
    object.

    ``launch_1d``: the partition is only valid for 1-D launches (its ``check_launch`` enforces
    it), so the static checker may assume thread/block y and z are 0 and their extents 1.
    """

    name = "partition"
    ndim: int | None = None
    #: the ranks it divides when more than one (``tiles``: 2 and 3; ``ndim`` is then the rank a
    #: declaration without one gets); ``(ndim,)`` when None
    ndims: tuple | None = None
    launch_1d = False

    def ranks(self) -> tuple | None:
        """The buffer ranks this partition divides, or None for any."""
        return self.ndims or (None if self.ndim is None else (self.ndim,))

    def ranks_text(self) -> str:
        return " or ".join(f"{n}-d" for n in self.ranks())

    def spec(self) -> str:
        """How messages name the partition, as the user writes it: ``blocked(k=4)``."""
        return f"{self.name}(" + ", ".join(f"{k}={v}" for k, v in self.attr_fields().items()) + ")"

    def owned_spec(self, ctx, buf) -> OwnedSpec:
        """The current thread's owned indices as loops over ``ctx`` (an IndexMath)."""
        raise NotImplementedError

    def owned_affine(self, ctx, buf, index) -> list:
        """Proof obligations (kaio.regions.affine Eq/Nonneg/Divides) that hold iff ``index``
        (a tuple of symbolic polynomials) is owned by the current thread."""
        raise NotImplementedError

    def launch_pins(self, ndim: int = 1) -> dict:
        """Geometry symbols whose value ``check_launch`` fixes on a buffer of ``ndim``
        dimensions: {"block_dim.z": 1, ...}."""
        if self.launch_1d:
            return {f"{k}.{a}": (0 if k in ("thread_idx", "block_idx") else 1)
                    for k in ("thread_idx", "block_idx", "block_dim", "grid_dim") for a in "yz"}
        return {}

    def launch_facts(self, ctx, buf) -> list:
        """Polynomials ``>= 0`` over the launch geometry and ``buf``'s shape (``ctx.shape``)
        that ``check_launch`` guarantees; the race checker assumes them on every launch."""
        return []

    def launch_shape(self, shape: tuple[int, ...]):
        """Default (grid, block) for a buffer of this shape."""
        raise NotImplementedError

    def check_launch(self, shape, grid, block, *, buffer: str, kernel: str) -> None:
        """Raise kaio.LaunchError unless every index has exactly one owner in this launch."""
        raise NotImplementedError

    def __repr__(self):
        return f"kaio.regions.{self.spec()}"


def block_pins(block) -> dict:
    """The geometry a declared block shape (``@kaio.kernel(block=...)``, a 3-tuple or None)
    fixes for the race checker: each ``block_dim`` axis, and ``thread_idx`` 0 where it is 1."""
    if block is None:
        return {}
    return {**{f"block_dim.{a}": n for a, n in zip("xyz", block)},
            **{f"thread_idx.{a}": 0 for a, n in zip("xyz", block) if n == 1}}


def check_launch_attrs(kernel, grid, block) -> None:
    """Enforce, per launch, the launch assumptions :mod:`kaio.regions.checker` recorded on the
    IR kernel: ``launch_dims`` (its proof used x, or x and y, ids only; ``launch_dims_at`` names
    the access that needed it) and ``block`` (the declared block shape, the only one allowed)."""
    declared = kernel.attrs.get("block")
    if declared is not None and tuple(block) != tuple(declared):
        raise LaunchError(
            f"kernel '{kernel.name}' is declared with block={tuple(declared)} "
            f"(@kaio.kernel(block=...)) and its race-freedom proof holds for that block only, but "
            f"the launch gives block={tuple(block)}; launch it with block={tuple(declared)} (or "
            f"give no launch shape)")
    dims = kernel.attrs.get("launch_dims", 3)
    if any(g != 1 for g in tuple(grid)[dims:]) or any(b != 1 for b in tuple(block)[dims:]):
        at = kernel.attrs.get("launch_dims_at")   # "line 12: y[i]"
        raise LaunchError(
            f"kernel '{kernel.name}': its race-freedom proof assumes a {dims}-D launch "
            f"({'x' if dims == 1 else 'x and y'} ids only){f', for the access at {at}' if at else ''}, "
            f"but the launch is grid={tuple(grid)} block={tuple(block)}; launch with "
            f"{'grid=(gx,) and block=(bx,)' if dims == 1 else 'grid.z == block.z == 1'}, or declare "
            f"the block shape the kernel is written for, @kaio.kernel(block=...), so the checker "
            f"proves it for that shape")
