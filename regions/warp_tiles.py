"""The warp-tile partition: each warp of a block owns one tile of a 2-D output, written by one
warp-collective ``kaio.mma.store``.

``warp_tiles((bm, bn), (wm, wn))``: block (bx, by) of a 2-D grid covers the block tile at rows
``by*bm``, columns ``bx*bn``; its 1-D block holds ``(bm/wm) * (bn/wn)`` warps of
``kaio.warp_size`` lanes, and warp ``w = thread_idx.x // kaio.warp_size`` owns the ``wm x wn``
warp tile at rows ``by*bm + (w // (bn/wn))*wm``, columns ``bx*bn + (w % (bn/wn))*wn``: the
warps laid row-major over the block tile, as a GEMM spells it.

The owner of an element is a warp, not a thread: its lanes share the tile in a layout that
belongs to the target. So the race checker accepts only warp-collective accesses to such a
buffer (:meth:`WarpTiles.store_obligations`: a fragment of exactly the warp tile's size, stored
at exactly the warp's origin); a plain load or store is refused. As a thread-level partition
(``owned_spec``, the sanitizer's owner maps) the warp's lane 0 stands for the warp, and the
sanitizer lets any lane of the owning warp touch the element.

Unlike the other partitions, the owned sets depend on the warp width, so ``launch_shape`` and
``check_launch`` take the width of the target that launches (``per_warp``).
"""
from __future__ import annotations

from ..errors import LaunchError
from ..ir.attrs import register
from ..records import frozen
from .affine import I32_MAX, Eq
from .base import OwnedSpec, Partition


def _text(grid, block) -> str:
    return f"grid={tuple(grid)} block={tuple(block)}"


@frozen(repr=False)
class WarpTiles(Partition):
    """Warp tiles of ``wm x wn`` inside block tiles of ``bm x bn`` (see the module doc)."""

    bm: int = 128
    bn: int = 128
    wm: int = 64
    wn: int = 32
    name = "warp_tiles"
    ndim = 2
    per_warp = True

    def __post_init__(self):
        dims = (self.bm, self.bn, self.wm, self.wn)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in dims):
            raise ValueError(f"kaio.regions.warp_tiles((bm, bn), (wm, wn)) needs ints >= 1, got "
                             f"({self.bm}, {self.bn}), ({self.wm}, {self.wn})")
        if self.bm % self.wm or self.bn % self.wn:
            raise ValueError(f"kaio.regions.warp_tiles: the warp tile ({self.wm}, {self.wn}) must "
                             f"divide the block tile ({self.bm}, {self.bn})")
        if self.warps > 16:
            raise ValueError(f"kaio.regions.warp_tiles(({self.bm}, {self.bn}), ({self.wm}, "
                             f"{self.wn})) has {self.warps} warps per block; at most 16 fit a "
                             "block of 1024 threads on 64-lane targets")

    @property
    def warps(self) -> int:
        """Warps per block: the warp tiles of one block tile."""
        return (self.bm // self.wm) * (self.bn // self.wn)

    def spec(self):
        return f"warp_tiles(({self.bm}, {self.bn}), ({self.wm}, {self.wn}))"

    def launch_pins(self, ndim: int = 2):
        return {"thread_idx.y": 0, "thread_idx.z": 0, "block_dim.y": 1, "block_dim.z": 1,
                "block_idx.z": 0, "grid_dim.z": 1}

    def launch_facts(self, ctx, buf):
        # tile origins fit in i32: (grid + 1) * block tile; the block is the warps (so a warp
        # index stays below `warps`: an origin that leaves out a single row of warps proves)
        gx, gy = ctx.special("grid_dim", 0), ctx.special("grid_dim", 1)
        facts = [ctx.sub(I32_MAX, ctx.mul(ctx.add(gx, 1), self.bn)),
                 ctx.sub(I32_MAX, ctx.mul(ctx.add(gy, 1), self.bm))]
        if getattr(ctx, "warp", None) is None:
            return facts
        threads = ctx.mul(ctx.warp_size(), self.warps)
        bx = ctx.special("block_dim", 0)
        return facts + [ctx.sub(threads, bx), ctx.sub(bx, threads)]

    def warp_origin(self, ctx):
        """(row, col) of the current warp's tile, from ``thread_idx.x // ctx.warp_size()``."""
        w = ctx.div(ctx.special("thread_idx", 0), ctx.warp_size())
        per_row = self.bn // self.wn
        q = ctx.div(w, per_row)
        col = ctx.sub(w, ctx.mul(q, per_row))   # w % per_row (w >= 0), said without a rem atom:
        # the prover then meets the user's `w % per_row` through its defining equation, and an
        # origin that leaves out a lone row of warps (q == 0) in one step
        return (ctx.add(ctx.mul(ctx.special("block_idx", 1), self.bm), ctx.mul(q, self.wm)),
                ctx.add(ctx.mul(ctx.special("block_idx", 0), self.bn), ctx.mul(col, self.wn)))

    def store_obligations(self, ctx, origin) -> list:
        """What makes a ``wm x wn`` fragment stored at ``origin`` (row0, col0) the current
        warp's tile: the origin is the warp's, exactly."""
        r, c = self.warp_origin(ctx)
        return [Eq(ctx.sub(origin[0], r)), Eq(ctx.sub(origin[1], c))]

    def owned_spec(self, ctx, buf):
        r0, c0 = self.warp_origin(ctx)
        lane0 = ctx.lt(ctx.rem(ctx.special("thread_idx", 0), ctx.warp_size()), 1)
        mine = ctx.lt(ctx.special("thread_idx", 0), ctx.mul(ctx.warp_size(), self.warps))
        rows = ctx.min(self.wm, ctx.sub(ctx.shape(buf, 0), r0))
        cols = ctx.min(self.wn, ctx.sub(ctx.shape(buf, 1), c0))
        return OwnedSpec(ctx.and_(lane0, mine), [(ctx.const(0), rows, ctx.const(1)),
                                                 (ctx.const(0), cols, ctx.const(1))],
                         lambda i, j: (ctx.add(r0, i), ctx.add(c0, j)))

    def owned_affine(self, ctx, buf, index):
        raise NotImplementedError("warp_tiles() elements are owned by warps: only kaio.mma.store "
                                  "is proved against it (store_obligations)")

    def launch_block(self, warp_size: int) -> tuple:
        return self.warps * warp_size, 1, 1

    def launch_grid(self, shape, block=None) -> tuple:
        return max(1, -(-shape[1] // self.bn)), max(1, -(-shape[0] // self.bm)), 1

    def launch_shape(self, shape, warp_size: int | None = None):
        return self.launch_grid(shape), self.launch_block(warp_size or 32)

    def check_launch(self, shape, grid, block, *, buffer, kernel, warp_size: int | None = None):
        if len(shape) != 2:
            raise LaunchError(f"kernel '{kernel}': Region '{buffer}' has shape {tuple(shape)} but "
                              f"the {self.spec()} partition needs a 2-d buffer")
        if warp_size is None:
            raise LaunchError(f"kernel '{kernel}': Region '{buffer}' uses {self.spec()}, whose "
                              "owners are warps, but this launch does not say the target's warp "
                              "width; launch through a backend (kernel(...) or Backend.launch)")
        want = self.launch_block(warp_size)
        if tuple(block) != want or grid[2] != 1:
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' (shape {tuple(shape)}) uses {self.spec()}: "
                f"{self.warps} warps of {warp_size} lanes per block, so it needs block={want} and "
                f"grid.z == 1, but the launch is {_text(grid, block)}")
        for what, n, t in (("(grid.x + 1) * bn", grid[0], self.bn), ("(grid.y + 1) * bm", grid[1], self.bm)):
            if (n + 1) * t > I32_MAX:
                raise LaunchError(f"kernel '{kernel}': Region '{buffer}' uses {self.spec()}, whose i32 "
                                  f"tile origins need {what} <= 2**31 - 1, but the launch "
                                  f"{_text(grid, block)} gives {(n + 1) * t}; launch fewer blocks")
        if grid[0] * self.bn < shape[1] or grid[1] * self.bm < shape[0]:
            need = self.launch_grid(shape)[:2]
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has shape {tuple(shape)} but the launch "
                f"{_text(grid, block)} covers only {grid[1] * self.bm} x {grid[0] * self.bn} with "
                f"{self.bm}x{self.bn} block tiles; use at least grid={need}")


register(WarpTiles.name, WarpTiles)   # the IR prints it as #warp_tiles{...} and parses it back
