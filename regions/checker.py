"""The static race-freedom checker: ``check(kernel)`` runs on every kernel the frontend makes.

Rules (docs/regions.md has examples):

- In buffers: loads only. Atomic buffers: atomics only. Raw buffers and local arrays: unchecked.
- Region/Out buffers: every load, store and atomic must be at an index the partition gives the
  current thread, proved by :mod:`.affine` from loop ranges, guards and thread geometry.
  Out buffers additionally may be read only where this thread already wrote the same index.
- Fragment stores (``kaio.mma.store``) into Region/Out buffers: the warp's own tile under a
  per-warp partition (:mod:`.frag_stores`, :mod:`.warp_tiles`); plain accesses of such buffers
  are refused.
- Shared memory (:mod:`.shared`) and barrier uniformity (:mod:`.uniformity`).
- Every integer's polynomial is its machine value: arithmetic that may wrap is opaque
  (:mod:`.widths`), so neither an index nor an unreachable branch rests on exact arithmetic
  the hardware does not do. docs/regions.md states what is proved, under which launch limits.

When a proof needs a flatter launch than the partitions guarantee (``y[kaio.global_id()]`` under
the elementwise partition, which is defined on the 3-D linear id, needs a 1-D launch; a shared
``tile[ty, tx]`` needs block.z == 1), the checker records ``kernel.attrs["launch_dims"]`` (1 or 2)
and :func:`kaio.regions.check_launch_attrs` rejects launches that use more dimensions.
"""
from __future__ import annotations

import contextlib
import threading

from ..errors import CompileError
from . import async_copies, bounds, frag_stores, shared, uniformity, warp
from .affine import Divides, Eq, Nonneg, Poly, Prover
from .diagnose import index_text, region_collision, unproved
from .partitions import PerBlock, RowsPerBlock, Tiles
from .walk import Walk


def _pins(axes: str) -> dict:
    """Geometry symbols fixed when the launch has extent 1 on these axes."""
    return {**{f"{k}.{a}": Poly.const(0) for k in ("thread_idx", "block_idx") for a in axes},
            **{f"{k}.{a}": Poly.const(1) for k in ("block_dim", "grid_dim") for a in axes}}


#: launch dimensionality -> the pins it implies
LEVEL_PINS = {3: {}, 2: _pins("z"), 1: _pins("yz")}
_VERB = {"load": "read of", "store": "store to", "atomic": "atomic update of"}

_state = threading.local()


@contextlib.contextmanager
def disabled():
    """Compile kernels without the race checker inside this block (for testing the sanitizer
    on kernels the checker would reject). Kernels specialised here stay cached unchecked."""
    _state.off = getattr(_state, "off", 0) + 1
    try:
        yield
    finally:
        _state.off -= 1


def is_disabled() -> bool:
    return getattr(_state, "off", 0) > 0


def check(kernel):
    """Reject the kernel with a CompileError if it may race; returns the kernel unchanged.

    A kernel that reads ``kaio.warp_size`` or ``lane_id()`` is proved once per warp width a
    backend can run (:data:`kaio.regions.warp.WARP_WIDTHS`), with the width a constant in each
    proof; it also gets the literal-32 warning (:func:`kaio.regions.warp.warn_literal_widths`)."""
    if is_disabled():
        return kernel
    _check_ranks(kernel)
    runs = [_check_at(kernel, w) for w in warp.widths(kernel)]
    warp.warn_literal_widths(kernel)
    flat = min((c for c, _ in runs), key=lambda c: c.level)
    if flat.level < flat.start_level:
        kernel.attrs["launch_dims"] = flat.level
        if flat.level_at:
            kernel.attrs["launch_dims_at"] = flat.level_at
    reach = warp.common_bounds([r for _, r in runs])
    if reach:
        kernel.attrs["index_bounds"] = reach
    c = runs[0][0]
    if runs[0][0].walk.warp_size is not None:
        kernel.proved_warp_widths = (flat.level, warp.WARP_WIDTHS)   # (check_width reads it)
    for p, v in zip(kernel.params, kernel.args):  # the launch checks the partitions proved against
        if v.is_buffer and v.type.intent in ("region", "out") and p.partition is None:
            p.partition = c.partition(v)
    return kernel


def _check_ranks(kernel):
    """A partition of one rank on a buffer of another is a declaration error, said as one."""
    for p, v in zip(kernel.params, kernel.args):
        part, nd = p.partition, getattr(v.type, "ndim", None)
        if not v.is_buffer or part is None or part.ranks() is None or nd in part.ranks():
            continue
        spec = part.spec()
        hint = (f"declare it kaio.{'Out' if v.type.intent == 'out' else 'Region'}[T, {part.ranks()[0]}, "
                f"kaio.regions.{spec}] or choose a partition for {nd}-d buffers")
        if isinstance(part, RowsPerBlock) and nd == 1:
            hint = ("for one element per block of a 1-D buffer use kaio.regions.per_block() (stored "
                    f"under `if kaio.thread_idx.x == 0:`); or {hint}")
        raise CompileError.at(kernel.loc, f"buffer '{p.name}' is {nd}-d, but the {spec} partition "
                                          f"divides {part.ranks_text()} buffers", kernel=kernel.name,
                              hint=hint)


def check_width(kernel, warp_size: int) -> None:
    """Before a target of ``warp_size`` lanes lowers ``kernel``: prove it at that width too if
    the frontend proved it only at other widths (it reads the width; :mod:`.warp`). Raises a
    CompileError if it may race at that width, or if the proof there needs a flatter launch
    than the one recorded. (Index bounds are not re-derived: widths outside the GPUs' are the
    reference backend's and the host target's, which check every index as they run.)"""
    level, done = getattr(kernel, "proved_warp_widths", (None, (warp_size,)))
    if warp_size in done or is_disabled():
        return
    c, _ = _check_at(kernel, warp_size)
    if c.level < level:
        raise warp.at_width(CompileError.at(
            kernel.loc, f"the race-freedom proof needs a {c.level}-D launch", kernel=kernel.name,
            hint="index with the linear thread id, or launch 1-D blocks"), warp_size)
    kernel.proved_warp_widths = (level, done + (warp_size,))


def _check_at(kernel, warp_size):
    """One proof, at one warp width (None: the kernel never reads it): (checker, bounds)."""
    try:
        walk = Walk(kernel, warp_size)
        uniformity.check(kernel, walk)
        c = Checker(kernel, walk)
        c.run()
        frag_stores.check(c)
        shared.check(c)
        async_copies.check(kernel)
        return c, bounds.index_bounds(c)
    except CompileError as err:
        warp.at_width(err, warp_size)   # (says which width the proof failed at)
        raise
    except Exception as exc:  # a checker bug must not pass a kernel unchecked, nor hide itself
        raise CompileError.at(kernel.loc, f"internal error in the race checker: {type(exc).__name__}: "
                                          f"{exc}", kernel=kernel.name,
                              hint="please report it; kaio.regions.checker.disabled() compiles "
                                   "without the checker") from exc


class Checker:
    """Classifies every global access; shared-memory pairs are checked by :mod:`.shared`."""

    def __init__(self, kernel, walk):
        self.kernel, self.walk, self.table = kernel, walk, walk.table
        self.names = {v.id: p.name for p, v in zip(kernel.params, kernel.args)}
        parts = walk.partitions.values()
        self.start_level = 1 if any(getattr(pt, "launch_1d", False) for pt in parts) else 3
        self.level = self.start_level
        self.level_at = None   # the access whose proof needed self.level, as text
        self.block = kernel.attrs.get("block")
        # a declared block fixes block_dim (walk.pins); no proof may assume a flatter block
        self.min_level = 1 if self.block is None else \
            max(a + 1 for a in range(3) if self.block[a] > 1 or not a)
        if self.start_level < self.min_level:
            part = next(pt for pt in parts if getattr(pt, "launch_1d", False))
            raise CompileError.at(kernel.loc, f"the kernel declares block={self.block[:self.min_level]}, "
                                              f"but its {part.spec()} partition needs 1-D launches",
                                  kernel=kernel.name, hint="declare a 1-D block, block=(n,), or choose "
                                  "a 2-D partition (kaio.regions.tiles)")
        self.math = walk.math
        self.pins = walk.pins
        self.launch_facts = walk.launch_facts

    def partition(self, v):
        return self.walk.partitions[v.id]

    def prover(self, level: int) -> Prover:
        return Prover(self.table, pin={**self.pins, **LEVEL_PINS[level]}, extra=self.launch_facts)

    def prove_all(self, fn, *accesses) -> bool:
        """Run ``fn(prover)`` for ``accesses`` (the first is the one to blame); if it fails,
        retry assuming a 2-D, then a 1-D launch (never flatter than a declared block). A proof
        that holds only for a flatter launch than an index's own geometry uses is refused
        (:meth:`_flatter`), so a kernel that reads y ids never compiles a proof for x ids only."""
        for level in range(self.start_level, self.min_level - 1, -1):
            if fn(self.prover(level)):
                if level < self.start_level:   # (each access is judged by its own index)
                    self._flatter(level, accesses)
                return True
        return False

    def _flatter(self, level: int, accesses):
        """Accept the proof of ``accesses`` that assumed a ``level``-D launch, recording it for
        the launch check, unless one of their indices uses thread geometry of the axes it pinned."""
        acc = accesses[0] if accesses else None
        axes = "xyz"[level:]
        # (thread ids and extents: block ids only pick the block, which a 1-D block keeps)
        used = sorted({s for a in accesses for s in self._geometry(a.index)} & {
            f"{k}.{ax}" for k in ("thread_idx", "block_dim") for ax in axes})
        if acc is not None and used:
            name = self.names.get(acc.buf.id, acc.buf.name or "shared")
            t = acc.buf.type
            what = "shared array" if t.space == "shared" else "Out" if t.intent == "out" else "Region"
            flat = "launches with block.z == grid.z == 1" if level == 2 else "1-D launches (x ids only)"
            self.error(acc, f"{_VERB[acc.kind]} {what} '{name}' at index "
                            f"`{index_text(acc, self.names)}` is race-free only on {flat}, but the "
                            f"index uses {', '.join(used)}; kaio does not compile a proof for "
                            "launches the kernel is not written for",
                       "declare the block the kernel is launched with, e.g. @kaio.kernel(block=(32, 8)), "
                       "so the checker proves it for that shape (then kaio.block_dim is a constant to "
                       "it), or change the index so it is distinct per thread on every block shape",
                       "launch-shape")
        if level >= self.level:
            return
        self.level = level
        if acc is not None:
            loc = acc.op.loc
            where = f"line {loc.line}: " if loc is not None else ""
            name = self.names.get(acc.buf.id, acc.buf.name or "shared")
            self.level_at = f"{where}{name}[{index_text(acc, self.names)}]"

    def _geometry(self, polys) -> set:
        """The thread-geometry symbols ``polys`` depend on, through atoms and wrapped values."""
        out, seen, todo = set(), set(), [s for p in polys for s in p.symbols()]
        while todo:
            s = todo.pop()
            if s in seen:
                continue
            seen.add(s)
            if s.split(".")[0] in ("thread_idx", "block_idx", "block_dim", "grid_dim"):
                out.add(s)
            atom = getattr(self.table.info.get(s), "atom", None)
            if atom is not None:
                todo += [*atom[1].symbols(), *atom[2].symbols()]
            elif s in self.walk.wrapped:
                todo += list(self.walk.wrapped[s][0].symbols())
        return out

    def error(self, access, msg, hint, kind):
        err = CompileError.at(access.op.loc, msg, kernel=self.kernel.name, hint=hint)
        err.buffer = self.names.get(access.buf.id, access.buf.name)
        err.index = index_text(access, self.names)
        err.kind = kind
        raise err

    # --- global buffers ---------------------------------------------------------------
    def run(self):
        for acc in self.walk.accesses:
            t = acc.buf.type
            if t.space != "global" or t.intent == "raw":
                continue
            name = self.names.get(acc.buf.id, acc.buf.name)
            text = index_text(acc, self.names)
            if t.intent == "in" and acc.kind != "load":
                self.error(acc, f"{'store to' if acc.kind == 'store' else 'atomic on'} read-only buffer "
                                f"'{name}' at index `{text}`",
                           f"declare '{name}' as kaio.Region (partitioned), kaio.Atomic or kaio.Raw",
                           "write-to-in")
            elif t.intent == "atomic" and acc.kind != "atomic":
                self.error(acc, f"plain {acc.kind} of Atomic buffer '{name}' at index `{text}`: an "
                                "Atomic buffer is touched only through kaio.atomic_* operations, since "
                                "other threads update it concurrently",
                           f"use kaio.atomic_add({name}, ...) (or read the result in a later launch); "
                           f"if '{name}' is really partitioned, declare it kaio.Region",
                           "atomic-mix")
            elif t.intent in ("region", "out"):
                self.region_access(acc, name, text)

    def region_access(self, acc, name, text):
        part = self.partition(acc.buf)
        if frag_stores.is_per_warp(part):
            frag_stores.plain_access_error(self, acc, name, text)
        intent = "Out" if acc.buf.type.intent == "out" else "Region"
        if acc.buf.type.intent == "out" and acc.kind == "load" and not self._written_before(acc):
            self.error(acc, f"read of Out buffer '{name}' at index `{text}` before this thread wrote "
                            "that element: an Out buffer's old contents are never copied in",
                       f"write {name}[{text}] earlier in the same scope, or declare '{name}' kaio.Region "
                       "to read its input values", "out-read")
        obligations = part.owned_affine(self.math, acc.buf, acc.index)

        def prove(pv):
            for ob in obligations:
                ok = (pv.eq_zero(ob.p, acc.facts) if isinstance(ob, Eq) else
                      pv.nonneg(ob.p, acc.facts) if isinstance(ob, Nonneg) else
                      pv.divides(ob.d, ob.p, acc.facts) if isinstance(ob, Divides) else False)
                if not ok:
                    return False
            return True

        if self.prove_all(prove, acc):
            return
        msg = (f"{_VERB[acc.kind]} {intent} '{name}' at index `{text}` is not provably owned by the "
               f"current thread under the {part.spec()} partition")
        try:
            found = region_collision(self.walk, acc, part)
        except Exception:  # the example is a courtesy; never mask the real error
            found = None
        msg += f"; {found or unproved(self.walk, acc)}"
        hint, kind = self._hint(acc, name)
        self.error(acc, msg, hint, kind)

    def _hint(self, acc, name):
        n = acc.buf.type.ndim
        idx = acc.op.operands[1:1 + n]
        if any(_depends(v, {"load", "atomic", "shuffle", "ballot", "vote"}) for v in idx):
            return (f"the index depends on data read at run time; scatter through a kaio.Atomic "
                    f"buffer (kaio.atomic_add({name}, i, v)) or declare '{name}' kaio.Raw", "data-dependent")
        opaque_ops = {"div", "rem", "and", "or", "xor", "shr", "select", "cast", "bitcast"}
        if any(_depends(v, opaque_ops) for v in idx):
            return ("the index uses arithmetic the checker cannot follow (//, %, bit operations); "
                    f"iterate `for i in {name}.owned()`, choose a partition that matches the "
                    "pattern (kaio.regions.blocked / grid_stride / rows / rows_per_block / tiles / "
                    "per_block), or use kaio.Raw", "non-affine")
        block_hint = self._per_block_hint(acc, name) or self._tile_hint(acc, name)
        if block_hint:
            return block_hint, "not-owned"
        return (f"each thread may touch only the indices its partition gives it (`for i in {name}.owned()`); "
                "to read neighbours use two buffers instead of updating in place (read a kaio.In, "
                "write a Region/Out), choose another partition, or use kaio.Atomic / kaio.Raw", "not-owned")

    def _tile_hint(self, acc, name):
        """A fixed tile indexed through ``block_dim`` (``i = block_idx.y * block_dim.y +
        thread_idx.y``) is owned only when the block is the tile: say how to state that."""
        part = self.partition(acc.buf)
        if (not isinstance(part, Tiles) or part.th is None or self.block is not None
                or not {"block_dim.x", "block_dim.y"} & self._geometry(acc.index)):
            return None
        return (f"the index uses block_dim, but {part.spec()} fixes the tile, and a launch may use a "
                f"smaller block; declare the block, @kaio.kernel(block=({part.tw}, {part.th})), or "
                f"let the tile be the block: kaio.regions.tiles()")

    def _per_block_hint(self, acc, name):
        """For an index the same in every thread of a block and naming the block (one result
        per block): how the per_block() partition fits it, or None."""
        if not acc.index or not all(self.table.is_uniform(i) for i in acc.index) or not any(
                s.startswith("block_idx.") for i in acc.index for s in i.symbols()):
            return None
        one = self.prover(1).eq_zero(Poly.sym("thread_idx.x"), acc.facts)   # a single writer
        guard = "store it from one thread (`if kaio.thread_idx.x == 0:`)"
        if not isinstance(self.partition(acc.buf), PerBlock):
            return (f"the index is the same for every thread of a block: to write one element per "
                    f"block, declare '{name}' with kaio.regions.per_block()"
                    + ("" if one else f" and {guard}"))
        if not one:
            return (f"more than one thread of the block may store here, but under per_block() only "
                    f"its thread (0, 0, 0) owns the block's element: {guard}, adding "
                    "`and kaio.thread_idx.y == 0` on 2-D blocks")
        return ("under per_block() the block with linear id b owns element b only (block (bx, by) "
                f"owns [by, bx] of a 2-D buffer): store {name}[kaio.block_idx.x]")

    def _written_before(self, load) -> bool:
        """This thread surely stored the element ``load`` reads before the load runs: a store at
        the same index (the same machine value) earlier in the load's block or an enclosing
        one, or an ``if`` there whose two branches each surely store it. A store inside a loop
        does not count after the loop (the loop may run zero times)."""
        stores = {id(a.op) for a in self.walk.accesses
                  if a.buf is load.buf and a.kind == "store"
                  and all(not (x - y).t for x, y in zip(a.index, load.index))}

        def writes(op) -> bool:
            if id(op) in stores:
                return True
            return op.opcode == "if" and all(any(writes(o) for o in r.ops) for r in op.regions)

        op = load.op
        while op.parent is not None:
            blk = op.parent
            if any(writes(o) for o in blk.ops[:next(k for k, o in enumerate(blk.ops) if o is op)]):
                return True
            op = blk.parent
            if op is None:
                break
        return False


def _depends(v, opcodes, seen=None) -> bool:
    seen = set() if seen is None else seen
    if v.id in seen:
        return False
    seen.add(v.id)
    op = v.owner
    if op is None or not hasattr(op, "opcode"):
        return False
    if op.opcode in opcodes:
        return True
    return any(_depends(a, opcodes, seen) for a in op.operands if not a.is_buffer)
