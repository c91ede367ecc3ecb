"""Barriers must be reached by all threads of a block or by none; kaio.mma fragment ops
(warp-collective) likewise, by the simplest sound rule: block-uniform control flow only.

A ``barrier`` (``kaio.sync()``) or a ``block_reduce`` (``kaio.block_sum`` etc., which contain
barriers) is rejected when any enclosing ``if`` condition, ``for`` bound or ``while`` condition
is not block-uniform. Uniform values derive only from block ids, block/grid extents, params,
shapes, constants, block reductions and loads of read-only buffers at uniform indices
(see :mod:`kaio.regions.walk`).
"""
from __future__ import annotations

from ..errors import CompileError

_WHERE = {
    "if": "inside an `if` whose condition depends on the thread",
    "for": "inside a loop whose trip count depends on the thread",
    "while": "inside a `while` loop whose condition depends on the thread",
    "while-before": "inside a `while` loop whose condition depends on the thread",
}


def _first_divergent(records):
    """(record, kind, ctrl op) of the first record under thread-dependent control, or None."""
    return next(((r, kind, op) for r in records for kind, op, uniform in r.ctrl if not uniform),
                None)


def _line(op) -> str:
    return f" (line {op.loc.line})" if op.loc is not None else ""


def check(kernel, walk) -> None:
    """Raise CompileError for the first barrier (then fragment op) in thread-dependent control
    flow."""
    found = _first_divergent(walk.barriers)
    if found is not None:
        b, kind, op = found
        what = ("kaio.sync()" if b.op.opcode == "barrier"
                else f"kaio.block_{b.op.attrs.get('op', 'sum')}() (which synchronises the block)")
        err = CompileError.at(
            b.op.loc, f"{what} is {_WHERE[kind]}{_line(op)}: threads that skip it would deadlock "
                      "or race the others", kernel=kernel.name,
            hint="move kaio.sync() out of the branch (or make the condition depend only on "
                 "block ids, params, shapes and constants)")
        err.kind = "divergent-barrier"
        raise err
    found = _first_divergent(walk.collectives)
    if found is not None:
        c, kind, op = found
        what = {"mma_load": "kaio.mma.load", "mma_store": "kaio.mma.store",
                "mma_copy": "kaio.mma.copy_tile", "mma_copy_wait": "kaio.mma.copy_wait",
                "mma_apply": "kaio.mma.apply", "mma_to_a": "kaio.mma.to_a",
                "mma_row_reduce": "kaio.mma.row_max/row_sum"}.get(c.op.opcode, "kaio.mma.mma")
        err = CompileError.at(
            c.op.loc, f"{what} is {_WHERE[kind]}{_line(op)}: fragment ops are warp-collective, "
                      "and a branch that splits a warp would leave some of its lanes out",
            kernel=kernel.name,
            hint="make the condition depend only on block ids, params, shapes and constants "
                 "(conditions uniform per warp but not per block are not yet proved)")
        err.kind = "divergent-collective"
        raise err
    for c in walk.collectives:      # group_mma: one A tile, one B tile for the whole block
        op = c.op
        if op.opcode != "mma" or not op.attrs.get("group"):
            continue
        for v, what in zip(op.operands[3:], ("row0", "col0", "k0")):
            if not walk.uniform(v):
                shared_a = getattr(op.operands[0].owner, "opcode", None) == "mma_load" and \
                    op.operands[0].owner.operands[0].type.space == "shared"
                why = ("the block's warps multiply one A tile and one B tile together (warp w "
                       "takes A's rows row0 + 16 w)" if shared_a else
                       "the block's warps multiply their A fragments by one B tile together")
                err = CompileError.at(
                    op.loc, f"kaio.mma.group_mma's {what} depends on the thread: {why}",
                    kernel=kernel.name,
                    hint=f"pass the block's tile origin as {what} (block ids, params, shapes, "
                         "constants and loop counters over them); each warp's rows follow "
                         "from its index")
                err.kind = "divergent-collective"
                raise err
