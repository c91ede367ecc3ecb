"""Partitions of a writable buffer's index space among the threads of a launch, and the static
race-freedom checker (:mod:`kaio.regions.checker`).

A partition answers four questions (see :class:`Partition`):

- ``owned_spec(ctx, buf)``: which indices does the current thread own, as loops, so the frontend
  can emit ``for i in y.owned()``;
- ``owned_affine(ctx, buf, index)``: is an arbitrary index owned, as proof obligations for the
  checker's affine prover;
- ``launch_shape(shape)``: the default (grid, block) for a buffer of this shape;
- ``check_launch(shape, grid, block)``: raise unless the launch gives every index one owner.

Users write ``kaio.Region[kaio.f32, kaio.regions.blocked(4)]``; docs/regions.md has the rules.
Partitions are frozen dataclasses and IR attributes: a kernel's parameter records hold the
objects, and the IR text form prints them as ``#blocked{k = 4}``.
"""
from __future__ import annotations

from ..errors import LaunchError  # noqa: F401  (re-exported for partitions' messages)
from .base import DEFAULT_BLOCK, OwnedSpec, Partition, check_launch_attrs
from .partitions import (
    PARTITIONS,
    Blocked,
    Coarsened,
    Elementwise,
    GridStride,
    PerBlock,
    RowChunks,
    Rows,
    RowsPerBlock,
    Tiles,
    owned_indices,
    owner_map,
)
from .warp_tiles import WarpTiles

__all__ = ["DEFAULT_BLOCK", "PARTITIONS", "Blocked", "Coarsened", "Elementwise", "GridStride", "OwnedSpec",
           "Partition", "PerBlock", "RowChunks", "Rows", "RowsPerBlock", "Tiles", "WarpTiles", "blocked",
           "check_launch_attrs", "elementwise", "grid_stride",
           "owned_indices", "owner_map", "per_block", "rows", "rows_per_block", "tiles", "warp_tiles"]


def elementwise() -> Elementwise:
    """The default partition: one element per thread, by global linear id."""
    return Elementwise()


def blocked(k: int) -> Blocked:
    """Contiguous blocks of ``k`` elements per thread (1-D buffers, 1-D launches)."""
    return Blocked(k)


def grid_stride() -> GridStride:
    """Thread g of G owns g, g+G, g+2G, ... (1-D buffers, any 1-D launch)."""
    return GridStride()


def rows() -> Rows:
    """One row of a 2-D buffer per thread."""
    return Rows()


def rows_per_block(block: int = DEFAULT_BLOCK, vec: int = 1) -> RowsPerBlock | RowChunks:
    """One row per block, the block's threads striding the columns (softmax / norm pattern).
    ``vec`` > 1: threads own chunks of ``vec`` contiguous columns (thread t: chunks t, t+B, ...;
    the row length a multiple of ``vec``), which one 16-byte access can move."""
    return RowsPerBlock(block) if vec == 1 else RowChunks(block, vec)


def tiles(th: int | None = None, tw: int | None = None, *, transposed: bool = False) -> Tiles:
    """``th`` x ``tw`` tiles of a 2-D buffer per block, split among the block's threads.

    ``tiles()``: the tile is the block (``th = block_dim.y``, ``tw = block_dim.x``), so thread
    (tx, ty) of block (bx, by) owns ``[by*bdy + ty, bx*bdx + tx]``, the CUDA 2-D index.
    ``transposed=True``: block (bx, by) owns the tile at row ``bx*th``, column ``by*tw`` (the
    output of a tiled transpose written by the block that read input tile (by, bx)).
    On a 3-D buffer z numbers the planes: thread (tx, ty, tz) of block (bx, by, bz) owns plane
    ``bz*bdz + tz`` and, in it, the 2-D rule on axes 1-2 (``tiles()``: the CUDA 3-D index)."""
    return Tiles(th, tw, transposed)


def per_block() -> PerBlock:
    """One element per block, written by its thread (0, 0, 0): block b (linear id) owns element b
    of a 1-D buffer; block (bx, by) owns ``[by, bx]`` of a 2-D one. For per-block partial
    results: ``if kaio.thread_idx.x == 0: partial[kaio.block_idx.x] = kaio.block_sum(s)``."""
    return PerBlock()


def warp_tiles(block_tile: tuple[int, int], warp_tile: tuple[int, int]) -> WarpTiles:
    """Warp tiles of a 2-D output, each stored by one warp with ``kaio.mma.store``.

    Block (bx, by) covers the ``block_tile = (bm, bn)`` tile at rows ``by*bm``, columns
    ``bx*bn``; its 1-D block is ``(bm/wm) * (bn/wn)`` warps, and warp ``w = thread_idx.x //
    kaio.warp_size`` owns the ``warp_tile = (wm, wn)`` tile at rows ``by*bm + (w // (bn/wn))*wm``,
    columns ``bx*bn + (w % (bn/wn))*wn`` (row-major over the block tile). Launch: block
    ``((bm/wm) * (bn/wn) * kaio.warp_size,)``, a grid covering the buffer. Only
    ``kaio.mma.store`` of a ``wm x wn`` accumulator at the warp's origin touches it."""
    try:
        (bm, bn), (wm, wn) = block_tile, warp_tile
    except (TypeError, ValueError):
        raise ValueError(f"kaio.regions.warp_tiles((bm, bn), (wm, wn)) takes two pairs, got "
                         f"{block_tile!r}, {warp_tile!r}") from None
    return WarpTiles(bm, bn, wm, wn)
