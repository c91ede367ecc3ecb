"""The partitions: who owns which index of a Region/Out buffer.

Every partition describes the current thread's owned set twice, from the same thread-geometry
vocabulary (:class:`kaio.ir.indexmath.IndexMath`):

- ``owned_spec(ctx, buf)`` -- the set as loops (guard, ranges, index function). With an IR
  ``ctx`` the frontend emits ``for i in y.owned()`` from it; with a numeric ctx
  (:class:`NumericMath`) tests and launch checks enumerate it;
- ``owned_affine(ctx, buf, index)`` -- membership of an arbitrary index as proof obligations
  (:mod:`kaio.regions.affine`), which the static checker discharges for every access.

A partition is trusted library code in the way Rust's partitioning strategies are: its
disjointness is tested here (``owner_map`` on many launches) and its launch preconditions are
checked before every launch by ``check_launch``.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import LaunchError
from ..ir.attrs import register
from ..ir.indexmath import IndexMath
from ..records import frozen
from .affine import I32_MAX, Divides, Eq, Nonneg
from .base import DEFAULT_BLOCK, OwnedSpec, Partition


class NumericMath(IndexMath):
    """IndexMath over Python ints for one concrete thread: used to enumerate owned sets."""

    def __init__(self, shape, grid, block, tid, bid, warp: int = 32):
        self.shape_, self.grid, self.block, self.tid, self.bid = tuple(shape), grid, block, tid, bid
        self.warp = warp

    def const(self, v): return int(v)
    def _v(self, x): return int(x)
    def add(self, a, b): return a + b
    def sub(self, a, b): return a - b
    def mul(self, a, b): return a * b
    def div(self, a, b): return int(a / b) if b else 0
    def rem(self, a, b): return a - b * int(a / b) if b else 0
    def min(self, a, b): return min(a, b)
    def max(self, a, b): return max(a, b)
    def lt(self, a, b): return a < b
    def and_(self, a, b): return a and b

    def warp_size(self): return self.warp

    def special(self, name, axis):
        return {"thread_idx": self.tid, "block_idx": self.bid, "block_dim": self.block,
                "grid_dim": self.grid}[name][axis]

    def shape(self, buf, axis):
        return self.shape_[axis]


def _launch_text(grid, block) -> str:
    return f"grid={tuple(grid)} block={tuple(block)}"


def _require_1d(part, shape, grid, block, buffer, kernel):
    if tuple(grid[1:]) != (1, 1) or tuple(block[1:]) != (1, 1):
        raise LaunchError(
            f"kernel '{kernel}': Region '{buffer}' (shape {tuple(shape)}) uses the {part.spec()} "
            f"partition, which needs a 1-D launch, but the launch is {_launch_text(grid, block)}; "
            f"use grid=(gx,) and block=(bx,)")


def _require_i32(part, what, value, shape, grid, block, buffer, kernel):
    """The partition's own index arithmetic is i32: refuse launches on which it would wrap."""
    if value > I32_MAX:
        raise LaunchError(
            f"kernel '{kernel}': Region '{buffer}' (shape {tuple(shape)}) uses {part.spec()}, whose "
            f"i32 index arithmetic needs {what} <= 2**31 - 1, but the launch "
            f"{_launch_text(grid, block)} gives {value}; launch fewer threads")


def _require_ndim(part, shape, buffer, kernel):
    ranks = part.ranks()
    if ranks is not None and len(shape) not in ranks:
        raise LaunchError(f"kernel '{kernel}': Region '{buffer}' has shape {tuple(shape)} but the "
                          f"{part.spec()} partition needs a {part.ranks_text()} buffer")


@frozen(repr=False)
class Elementwise(Partition):
    """One element per thread: the thread with global linear id g owns element g (row-major for
    N-d buffers). Any 1-D, 2-D or 3-D launch with at least ``size`` threads is valid."""

    name = "elementwise"

    def owned_spec(self, ctx, buf) -> OwnedSpec:
        gid = ctx.global_linear_id()
        shape = [ctx.shape(buf, a) for a in range(buf.type.ndim)]
        guard = ctx.lt(gid, ctx.product(shape))
        return OwnedSpec(guard, [], lambda: ctx.unravel(gid, shape))

    def owned_affine(self, ctx, buf, index):
        shape = [ctx.shape(buf, a) for a in range(len(index))]
        return [Eq(ctx.sub(ctx.linearize(index, shape), ctx.global_linear_id()))]

    def launch_shape(self, shape):
        size = math.prod(shape)
        return (max(1, -(-size // DEFAULT_BLOCK)), 1, 1), (DEFAULT_BLOCK, 1, 1)

    def check_launch(self, shape, grid, block, *, buffer, kernel):
        size = math.prod(shape)
        _require_i32(self, "the number of elements", size, shape, grid, block, buffer, kernel)
        threads = math.prod(grid) * math.prod(block)
        if threads < size:
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has {size} elements (shape {tuple(shape)}) "
                f"but the launch {_launch_text(grid, block)} has only {threads} threads; "
                f"under the elementwise partition each thread owns one element, so "
                f"{size - threads} elements would be left unowned. Launch at least {size} threads "
                f"or use a blocked or grid-stride partition.")


@frozen(repr=False)
class Blocked(Partition):
    """Contiguous blocks: thread g (1-D launch) owns elements ``[g*k, g*k + k)`` of a 1-D buffer."""

    k: int = 1
    name = "blocked"
    ndim = 1
    launch_1d = True

    def __post_init__(self):
        k = self.k
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"kaio.regions.blocked(k) needs an int k >= 1, got {k!r}")

    def owned_spec(self, ctx, buf):
        lo = ctx.mul(ctx.global_linear_id(), self.k)
        hi = ctx.min(ctx.add(lo, self.k), ctx.shape(buf, 0))
        return OwnedSpec(None, [(lo, hi, ctx.const(1))], lambda i: (i,))

    def owned_affine(self, ctx, buf, index):
        lo = ctx.mul(ctx.global_linear_id(), self.k)
        (i,) = index
        return [Nonneg(ctx.sub(i, lo)), Nonneg(ctx.sub(ctx.add(lo, self.k - 1), i))]

    def launch_facts(self, ctx, buf):
        # k * (g + 1) fits in i32 for every thread g: its block's end, g*k + k
        return [ctx.sub(I32_MAX, ctx.mul(ctx.add(ctx.global_linear_id(), 1), self.k))]

    def launch_shape(self, shape):
        threads = max(1, -(-shape[0] // self.k))
        return (max(1, -(-threads // DEFAULT_BLOCK)), 1, 1), (min(DEFAULT_BLOCK, threads), 1, 1)

    def check_launch(self, shape, grid, block, *, buffer, kernel):
        _require_ndim(self, shape, buffer, kernel)
        if self.launch_1d:
            _require_1d(self, shape, grid, block, buffer, kernel)
        threads = math.prod(grid) * math.prod(block)
        _require_i32(self, "threads * k", threads * self.k, shape, grid, block, buffer, kernel)
        if threads * self.k < shape[0]:
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has {shape[0]} elements but the launch "
                f"{_launch_text(grid, block)} has {threads} threads owning {self.k} each "
                f"({threads * self.k} elements){self._chosen()}; launch at least "
                f"{-(-shape[0] // self.k)} threads")

    def _chosen(self) -> str:
        return ""


@frozen(repr=False)
class Coarsened(Blocked):
    """The partition kaio gives a default Region of an elementwise kernel (one whose result
    cannot depend on which thread computes which element; :mod:`kaio.frontend.coarsen`): thread
    g, by global linear id of any 1-, 2- or 3-D launch, owns ``[g*k, g*k + k)``. It is
    :class:`Blocked` without the 1-D launch requirement, so every launch the elementwise partition
    accepts stays valid, and kaio's own launch shape uses k times fewer threads, each making
    16-byte accesses (kaio.backends.vector_access, on both code paths)."""

    name = "coarsened"
    launch_1d = False

    def _chosen(self) -> str:
        return f" under the coarsened(k={self.k}) partition kaio chose for this elementwise kernel"


@frozen(repr=False)
class GridStride(Partition):
    """Grid-stride: thread g of G (1-D launch) owns g, g+G, g+2G, ... of a 1-D buffer. Valid for
    any 1-D launch."""

    name = "grid_stride"
    ndim = 1
    launch_1d = True

    def owned_spec(self, ctx, buf):
        return OwnedSpec(None, [(ctx.global_linear_id(), ctx.shape(buf, 0), ctx.total_threads())],
                         lambda i: (i,))

    def owned_affine(self, ctx, buf, index):
        (i,) = index
        return [Divides(ctx.total_threads(), ctx.sub(i, ctx.global_linear_id()))]

    def launch_facts(self, ctx, buf):
        # the stride G and the step past the last owned index, i + G <= n - 1 + G, fit in i32
        g = ctx.total_threads()
        return [ctx.sub(I32_MAX, g), ctx.sub(I32_MAX + 1, ctx.add(g, ctx.shape(buf, 0)))]

    def launch_shape(self, shape):
        room = I32_MAX + 1 - max(shape[0], 1)   # threads + n <= 2**31 (see launch_facts)
        blocks = max(1, min(-(-shape[0] // DEFAULT_BLOCK), 1024, room // DEFAULT_BLOCK))
        return (blocks, 1, 1), (max(1, min(DEFAULT_BLOCK, room)), 1, 1)

    def check_launch(self, shape, grid, block, *, buffer, kernel):
        _require_ndim(self, shape, buffer, kernel)
        _require_1d(self, shape, grid, block, buffer, kernel)
        _require_i32(self, "threads + max(n, 1)", grid[0] * block[0] + max(shape[0], 1) - 1,
                     shape, grid, block, buffer, kernel)


@frozen(repr=False)
class Rows(Partition):
    """One row of a 2-D buffer per thread: thread g (1-D launch) owns row g."""

    name = "rows"
    ndim = 2
    launch_1d = True

    def owned_spec(self, ctx, buf):
        g = ctx.global_linear_id()
        return OwnedSpec(ctx.lt(g, ctx.shape(buf, 0)), [(ctx.const(0), ctx.shape(buf, 1), ctx.const(1))],
                         lambda c: (g, c))

    def owned_affine(self, ctx, buf, index):
        return [Eq(ctx.sub(index[0], ctx.global_linear_id()))]

    def launch_shape(self, shape):
        rows = max(1, shape[0])
        return (max(1, -(-rows // DEFAULT_BLOCK)), 1, 1), (min(DEFAULT_BLOCK, rows), 1, 1)

    def check_launch(self, shape, grid, block, *, buffer, kernel):
        _require_ndim(self, shape, buffer, kernel)
        _require_1d(self, shape, grid, block, buffer, kernel)
        if grid[0] * block[0] < shape[0]:
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has {shape[0]} rows (shape {tuple(shape)}) "
                f"but the launch {_launch_text(grid, block)} has only {grid[0] * block[0]} threads; "
                f"the rows partition needs one thread per row")


@frozen(repr=False)
class RowsPerBlock(Partition):
    """One row per block (block b owns row b, by linear block id); the block's B threads split
    the row's columns by stride (thread t owns columns t, t+B, ...). The softmax/norm pattern."""

    block: int = DEFAULT_BLOCK
    name = "rows_per_block"
    ndim = 2

    def __post_init__(self):
        block = self.block
        if not isinstance(block, int) or isinstance(block, bool) or not 1 <= block <= 1024:
            raise ValueError(f"kaio.regions.rows_per_block(block) needs 1 <= block <= 1024, got {block!r}")

    def spec(self):
        return "rows_per_block()" if self.block == DEFAULT_BLOCK else f"rows_per_block(block={self.block})"

    def owned_spec(self, ctx, buf):
        b = ctx.block_linear_id()
        return OwnedSpec(ctx.lt(b, ctx.shape(buf, 0)),
                         [(ctx.thread_linear_id(), ctx.shape(buf, 1), ctx.block_threads())],
                         lambda c: (b, c))

    def owned_affine(self, ctx, buf, index):
        return [Eq(ctx.sub(index[0], ctx.block_linear_id())),
                Divides(ctx.block_threads(), ctx.sub(index[1], ctx.thread_linear_id()))]

    def launch_facts(self, ctx, buf):
        # the step past the last owned column, c + B <= cols - 1 + B, fits in i32
        return [ctx.sub(I32_MAX + 1, ctx.add(ctx.shape(buf, 1), ctx.block_threads()))]

    def launch_shape(self, shape):
        return (max(1, shape[0]), 1, 1), (self.block, 1, 1)

    def check_launch(self, shape, grid, block, *, buffer, kernel):
        _require_ndim(self, shape, buffer, kernel)
        _require_i32(self, "columns + threads per block - 1", shape[1] + math.prod(block) - 1,
                     shape, grid, block, buffer, kernel)
        if math.prod(grid) < shape[0]:
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has {shape[0]} rows (shape {tuple(shape)}) "
                f"but the launch {_launch_text(grid, block)} has only {math.prod(grid)} blocks; "
                f"the rows_per_block partition needs one block per row")


def _lane(ctx, c, v: int):
    """``c % v`` for the obligations below. When every non-constant coefficient of the symbolic
    ``c`` is an integer multiple of ``v`` (``c = v*P + j0``, the shape of a chunked access
    ``v*t + v*B*k + j``), that is ``j0 % v`` exactly for ``c >= 0``, which the obligations also
    require; otherwise the ``rem`` atom."""
    terms = getattr(c, "t", None)
    if terms is not None and all((Fraction(x) / (1 if m == () else v)).denominator == 1
                                 for m, x in terms.items()):
        return ctx.const(int(terms.get((), 0)) % v)
    return ctx.rem(c, v)


@frozen(repr=False)
class RowChunks(Partition):
    """One row per block, like :class:`RowsPerBlock`, but the block's B threads split the row
    into chunks of ``vec`` contiguous columns: thread t owns chunks t, t+B, ..., i.e. columns
    ``[vec*t + vec*B*k, vec*t + vec*B*k + vec)``, so a thread's chunk is one 16-byte access when
    ``vec`` is the vector group length (:mod:`kaio.backends.vector_access`). The row length must
    be a multiple of ``vec`` (checked at launch). Made by ``rows_per_block(block, vec=...)``."""

    block: int = DEFAULT_BLOCK
    vec: int = 4
    name = "row_chunks"
    ndim = 2
    launch_1d = True

    def __post_init__(self):
        RowsPerBlock(self.block)        # the same block check
        v = self.vec
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"kaio.regions.rows_per_block(vec=...) needs an int >= 1, got {v!r}")

    def spec(self):
        return f"rows_per_block(block={self.block}, vec={self.vec})"

    def owned_spec(self, ctx, buf):
        b, v = ctx.block_linear_id(), self.vec
        return OwnedSpec(ctx.lt(b, ctx.shape(buf, 0)),
                         [(ctx.mul(ctx.thread_linear_id(), v), ctx.shape(buf, 1),
                           ctx.mul(ctx.block_threads(), v)), (ctx.const(0), ctx.const(v), ctx.const(1))],
                         lambda c, j: (b, ctx.add(c, j)))

    def owned_affine(self, ctx, buf, index):
        v, c = self.vec, index[1]
        start = ctx.sub(ctx.sub(c, _lane(ctx, c, v)), ctx.mul(ctx.thread_linear_id(), v))
        return [Eq(ctx.sub(index[0], ctx.block_linear_id())), Nonneg(c),
                Divides(ctx.mul(ctx.block_threads(), v), start)]

    def launch_facts(self, ctx, buf):
        # the step past the last owned chunk, c + v*B <= cols - v + v*B, fits in i32
        return [ctx.sub(I32_MAX + 1, ctx.add(ctx.shape(buf, 1), ctx.mul(ctx.block_threads(), self.vec)))]

    def launch_shape(self, shape):
        return (max(1, shape[0]), 1, 1), (self.block, 1, 1)

    def check_launch(self, shape, grid, block, *, buffer, kernel):
        _require_ndim(self, shape, buffer, kernel)
        _require_1d(self, shape, grid, block, buffer, kernel)
        _require_i32(self, "columns + vec * threads per block", shape[1] + self.vec * math.prod(block),
                     shape, grid, block, buffer, kernel)
        if shape[1] % self.vec:
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has {shape[1]} columns (shape {tuple(shape)}), "
                f"not a multiple of {self.vec}, but the {self.spec()} partition splits rows into "
                f"chunks of {self.vec}; use rows_per_block() (vec=1) for such rows")
        if math.prod(grid) < shape[0]:
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has {shape[0]} rows (shape {tuple(shape)}) "
                f"but the launch {_launch_text(grid, block)} has only {math.prod(grid)} blocks; "
                f"the {self.spec()} partition needs one block per row")


@frozen(repr=False)
class Tiles(Partition):
    """2-D tiles: block (bx, by) owns rows ``[by*th, by*th+th)`` x columns ``[bx*tw, bx*tw+tw)``;
    within the tile, thread (tx, ty) owns local rows ty, ty+bdy, ... crossed with local columns
    tx, tx+bdx, ... (a block of (tw, th) threads owns one element each). The matmul/stencil
    pattern. Launch: grid.z == block.z == 1, block at most (tw, th, 1), grid covering the buffer.

    ``th``/``tw`` None: the tile is the block on that axis (``tiles()``: block (bx, by) owns
    rows ``by*bdy + ty``, columns ``bx*bdx + tx``, one element per thread, the CUDA 2-D index).
    ``transposed``: the block grid runs over the tiles transposed, block (bx, by) owning the tile
    at rows ``[bx*th, ...)`` x columns ``[by*tw, ...)``: a tiled transpose's output, written by
    the block that read the input tile (by, bx).

    A 3-d buffer adds planes on z: thread (tx, ty, tz) of block (bx, by, bz) owns plane
    ``bz*bdz + tz`` (axis 0) and, in it, what the 2-D rule gives on axes 1-2 (``tiles()``:
    ``[bz*bdz + tz, by*bdy + ty, bx*bdx + tx]``, the CUDA 3-D index). Launch: grid.z * block.z
    covering the planes, the 2-D rule on the rest."""

    th: int | None = None
    tw: int | None = None
    transposed: bool = False
    name = "tiles"
    ndim = 2            # the rank when a declaration gives none
    ndims = (2, 3)

    def __post_init__(self):
        for v in (self.th, self.tw):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"kaio.regions.tiles(th, tw) needs ints >= 1 (or neither, for "
                                 f"tiles the size of the block), got {(self.th, self.tw)!r}")
        if not isinstance(self.transposed, bool):
            raise ValueError(f"kaio.regions.tiles(transposed=...) needs a bool, got {self.transposed!r}")

    def spec(self):
        args = [] if self.th is None and self.tw is None else [f"{self.th}", f"{self.tw}"]
        return f"tiles({', '.join(args + ['transposed=True'] * self.transposed)})"

    def _tile(self, ctx):
        """(th, tw): the fixed tile, or the block's extents where the tile is the block."""
        return (ctx.special("block_dim", 1) if self.th is None else self.th,
                ctx.special("block_dim", 0) if self.tw is None else self.tw)

    def _sizes(self, block) -> tuple[int, int]:
        return (block[1] if self.th is None else self.th, block[0] if self.tw is None else self.tw)

    def _axes(self) -> tuple[int, int]:
        """The grid axes that number the tile rows and the tile columns."""
        return (0, 1) if self.transposed else (1, 0)

    def launch_pins(self, ndim: int = 2):
        if ndim == 3:   # z numbers the planes
            return {}
        return {"thread_idx.z": 0, "block_idx.z": 0, "block_dim.z": 1, "grid_dim.z": 1}

    def launch_facts(self, ctx, buf):
        # block <= (tw, th); tile origins and in-tile steps fit in i32: (grid + 1) * tile
        th, tw = self._tile(ctx)
        gr, gc = (ctx.special("grid_dim", a) for a in self._axes())
        facts = [ctx.sub(I32_MAX, ctx.mul(ctx.add(gc, 1), tw)), ctx.sub(I32_MAX, ctx.mul(ctx.add(gr, 1), th))]
        if buf.type.ndim == 3:   # plane origins and steps: (grid.z + 1) * block.z
            facts.append(ctx.sub(I32_MAX, ctx.mul(ctx.add(ctx.special("grid_dim", 2), 1),
                                                  ctx.special("block_dim", 2))))
        facts += [] if self.tw is None else [ctx.sub(self.tw, ctx.special("block_dim", 0))]
        return facts + ([] if self.th is None else [ctx.sub(self.th, ctx.special("block_dim", 1))])

    def _origin(self, ctx):
        th, tw = self._tile(ctx)
        ar, ac = self._axes()
        return ctx.mul(ctx.special("block_idx", ar), th), ctx.mul(ctx.special("block_idx", ac), tw)

    def _plane(self, ctx):
        """The first plane of the current block (3-d buffers)."""
        return ctx.mul(ctx.special("block_idx", 2), ctx.special("block_dim", 2))

    def owned_spec(self, ctx, buf):
        th, tw = self._tile(ctx)
        r0, c0 = self._origin(ctx)
        lead = (self._plane(ctx),) if buf.type.ndim == 3 else ()
        ax = len(lead)
        if self.th is None and self.tw is None:   # one element per thread: a guard, no loops
            tid = (2,) * ax + (1, 0)
            idx = tuple(ctx.add(o, ctx.special("thread_idx", a)) for o, a in zip(lead + (r0, c0), tid))
            guard = None
            for k, i in enumerate(idx):
                c = ctx.lt(i, ctx.shape(buf, k))
                guard = c if guard is None else ctx.and_(guard, c)
            return OwnedSpec(guard, [], lambda: idx)
        rows = ctx.min(th, ctx.sub(ctx.shape(buf, ax), r0))
        cols = ctx.min(tw, ctx.sub(ctx.shape(buf, ax + 1), c0))
        ranges = [(ctx.special("thread_idx", 1), rows, ctx.special("block_dim", 1)),
                  (ctx.special("thread_idx", 0), cols, ctx.special("block_dim", 0))]
        if not lead:
            return OwnedSpec(None, ranges, lambda lr, lc: (ctx.add(r0, lr), ctx.add(c0, lc)))
        p = ctx.add(lead[0], ctx.special("thread_idx", 2))
        return OwnedSpec(ctx.lt(p, ctx.shape(buf, 0)), ranges,
                         lambda lr, lc: (p, ctx.add(r0, lr), ctx.add(c0, lc)))

    def owned_affine(self, ctx, buf, index):
        th, tw = self._tile(ctx)
        r0, c0 = self._origin(ctx)
        lead = []
        if len(index) == 3:   # the plane is exactly bz*bdz + tz
            lead = [Eq(ctx.sub(ctx.sub(index[0], self._plane(ctx)), ctx.special("thread_idx", 2)))]
            index = index[1:]
        lr, lc = ctx.sub(index[0], r0), ctx.sub(index[1], c0)
        return lead + [Nonneg(lr), Nonneg(ctx.sub(ctx.sub(th, 1), lr)),
                       Nonneg(lc), Nonneg(ctx.sub(ctx.sub(tw, 1), lc)),
                       Divides(ctx.special("block_dim", 1), ctx.sub(lr, ctx.special("thread_idx", 1))),
                       Divides(ctx.special("block_dim", 0), ctx.sub(lc, ctx.special("thread_idx", 0)))]

    def launch_block(self):
        """The default block: the tile's, at most 32 threads wide and 1024 in all."""
        bx = min(32 if self.tw is None else self.tw, 32)
        return bx, max(1, min(8 if self.th is None else self.th, 1024 // bx)), 1

    def launch_grid(self, shape, block):
        """The grid covering a buffer of ``shape`` with blocks of ``block`` (a 3-d buffer: its
        planes on z, ``block.z`` per block)."""
        th, tw = self._sizes(block)
        n = (max(1, -(-shape[-1] // tw)), max(1, -(-shape[-2] // th)))
        planes = max(1, -(-shape[0] // block[2])) if len(shape) == 3 else 1
        return (n[::-1] if self.transposed else n) + (planes,)

    def launch_shape(self, shape):
        block = self.launch_block()
        return self.launch_grid(shape, block), block

    def check_launch(self, shape, grid, block, *, buffer, kernel):
        _require_ndim(self, shape, buffer, kernel)
        th, tw = self._sizes(block)
        flat = len(shape) == 2
        if (flat and (grid[2] != 1 or block[2] != 1)) or block[0] > tw or block[1] > th:
            most = "" if self.th is None and self.tw is None else \
                f"a block of at most ({tw}, {th}) threads"
            need = " and ".join(x for x in ("grid.z == block.z == 1" if flat else "", most) if x)
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' (shape {tuple(shape)}) uses {self.spec()}, "
                f"which needs {need}, but the launch is {_launch_text(grid, block)}")
        gr, gc = (grid[a] for a in self._axes())
        ax = "yx" if not self.transposed else "xy"
        _require_i32(self, f"(grid.{ax[1]} + 1) * tw", (gc + 1) * tw, shape, grid, block, buffer, kernel)
        _require_i32(self, f"(grid.{ax[0]} + 1) * th", (gr + 1) * th, shape, grid, block, buffer, kernel)
        if not flat:
            _require_i32(self, "(grid.z + 1) * block.z", (grid[2] + 1) * block[2], shape, grid, block,
                         buffer, kernel)
        planes = 1 if flat else grid[2] * block[2]
        if gc * tw < shape[-1] or gr * th < shape[-2] or (not flat and planes < shape[0]):
            need = self.launch_grid(shape, block)
            covers = f"{gr * th} x {gc * tw}" if flat else f"{planes} x {gr * th} x {gc * tw}"
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has shape {tuple(shape)} but the launch "
                f"{_launch_text(grid, block)} covers only {covers} "
                f"with {th}x{tw} tiles; use at least grid={need[:2] if flat else need}")


@frozen(repr=False)
class PerBlock(Partition):
    """One element per block, owned by the block's first thread: the one result of a block
    reduction. On a 1-D buffer the block with linear id b (``block_idx.x`` on a 1-D grid) owns
    element b; on a 2-D buffer block (bx, by) owns ``[by, bx]``, on a 3-D one block (bx, by, bz)
    owns ``[bz, by, bx]`` (the grid laid over the buffer, x fastest). Within the block only
    thread (0, 0, 0) owns it, so the store is guarded: ``if kaio.thread_idx.x == 0:`` proves it
    for 1-D blocks (the launch is then held to 1-D), ``... and kaio.thread_idx.y == 0`` for 2-D
    ones. Launch: the grid covers the buffer (a 2-D buffer needs grid.z == 1); blocks past its
    end own nothing."""

    name = "per_block"

    def spec(self):
        return "per_block()"

    @staticmethod
    def _element(ctx, ndim) -> tuple:
        """The index the current block owns, on a buffer of ``ndim`` dimensions."""
        if ndim == 1:
            return (ctx.block_linear_id(),)
        return tuple(ctx.special("block_idx", a) for a in reversed(range(ndim)))

    def owned_spec(self, ctx, buf):
        idx = self._element(ctx, buf.type.ndim)
        conds = [ctx.lt(ctx.special("thread_idx", a), 1) for a in range(3)]   # one per axis: no
        conds += [ctx.lt(i, ctx.shape(buf, a)) for a, i in enumerate(idx)]    # linear-id product
        guard = conds[0]
        for c in conds[1:]:
            guard = ctx.and_(guard, c)
        return OwnedSpec(guard, [], lambda: idx)

    def owned_affine(self, ctx, buf, index):
        own = self._element(ctx, len(index))
        return ([Eq(ctx.sub(i, b)) for i, b in zip(index, own)]
                + [Eq(ctx.special("thread_idx", a)) for a in range(3)])

    def launch_shape(self, shape):
        grid = tuple(max(1, s) for s in reversed(shape)) + (1,) * (3 - len(shape))
        return (grid if len(shape) > 1 else (max(1, shape[0]), 1, 1)), (DEFAULT_BLOCK, 1, 1)

    def check_launch(self, shape, grid, block, *, buffer, kernel):
        nd = len(shape)
        _require_i32(self, "the linear block id", math.prod(grid) - 1, shape, grid, block, buffer, kernel)
        if nd == 1:
            if math.prod(grid) < shape[0]:
                raise LaunchError(
                    f"kernel '{kernel}': Region '{buffer}' has {shape[0]} elements but the launch "
                    f"{_launch_text(grid, block)} has only {math.prod(grid)} blocks; under "
                    f"per_block() each block owns one element, so launch at least {shape[0]} blocks")
            return
        if nd == 2 and grid[2] != 1:
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' (shape {tuple(shape)}) uses per_block(), "
                f"whose block (bx, by) owns [by, bx], so it needs grid.z == 1, but the launch is "
                f"{_launch_text(grid, block)}")
        if any(grid[a] < shape[nd - 1 - a] for a in range(nd)):
            raise LaunchError(
                f"kernel '{kernel}': Region '{buffer}' has shape {tuple(shape)} but the launch "
                f"{_launch_text(grid, block)} has too few blocks: under per_block() each block owns "
                f"one element (block (bx, by) owns [by, bx]), so use at least "
                f"grid={tuple(reversed(shape))}")


def owner_map(part: Partition, shape, grid, block, warp: int = 32) -> np.ndarray:
    """Concrete owners: for each element, the global linear id of the thread owning it (-1 if
    none; ValueError if two threads own it). Enumerates ``owned_spec`` for every thread (at warp
    width ``warp``: per-warp partitions name each warp by its lane 0)."""
    owners = np.full(tuple(shape), -1, dtype=np.int64)
    bthreads = math.prod(block)

    class _Buf:  # only .type.ndim is read by owned_spec
        class type:  # noqa: N801
            ndim = len(shape)

    for b in np.ndindex(*reversed(grid)):
        bid = tuple(reversed(b))
        blin = (bid[2] * grid[1] + bid[1]) * grid[0] + bid[0]
        for t in np.ndindex(*reversed(block)):
            tid = tuple(reversed(t))
            g = blin * bthreads + (tid[2] * block[1] + tid[1]) * block[0] + tid[0]
            for idx in owned_indices(part, NumericMath(shape, grid, block, tid, bid, warp), _Buf):
                if not all(0 <= i < s for i, s in zip(idx, shape)):
                    continue
                if owners[idx] != -1:
                    raise ValueError(f"{part.spec()}: element {idx} owned by threads {owners[idx]} and {g}")
                owners[idx] = g
    return owners


def owned_indices(part: Partition, ctx, buf):
    """The index tuples one thread owns, enumerated from ``owned_spec`` with a numeric ctx."""
    spec = part.owned_spec(ctx, buf)
    if spec.guard is not None and not spec.guard:
        return []
    out = []

    def rec(k, ivs):
        if k == len(spec.ranges):
            out.append(tuple(spec.index(*ivs)))
            return
        lb, ub, step = spec.ranges[k]
        for v in range(lb, ub, step):
            rec(k + 1, ivs + [v])

    rec(0, [])
    return out


PARTITIONS = {c.name: c for c in (Elementwise, Blocked, Coarsened, GridStride, Rows, RowsPerBlock,
                                  RowChunks, Tiles, PerBlock)}
for _name, _cls in PARTITIONS.items():   # the IR prints them as #name{...} and parses them back
    register(_name, _cls)
