"""Barriers must be reached by all threads of a block or by none.

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


def check(kernel, walk) -> None:
    """Raise CompileError for the first barrier in thread-dependent control flow."""
    for b in walk.barriers:
        for kind, op, uniform in b.ctrl:
            if uniform:
                continue
            what = ("kaio.sync()" if b.op.opcode == "barrier"
                    else f"kaio.block_{b.op.attrs.get('op', 'sum')}() (which synchronises the block)")
            line = f" (line {op.loc.line})" if op.loc is not None else ""
            err = CompileError.at(
                b.op.loc, f"{what} is {_WHERE[kind]}{line}: threads that skip it would deadlock "
                          "or race the others", kernel=kernel.name,
                hint="move kaio.sync() out of the branch (or make the condition depend only on "
                     "block ids, params, shapes and constants)")
            err.kind = "divergent-barrier"
            raise err
