"""Dead-code elimination.

Removes pure ops (:func:`kaio.ir.ops.is_pure`) whose results are unused, repeatedly (an op
whose only users were dead becomes dead itself), and control flow that does nothing:

- an ``if`` whose results are unused and whose regions hold only pure ops;
- a ``for`` likewise, when its step is a nonzero constant (so the loop surely terminates).

Everything with an effect -- stores, atomics, barriers, warp ops, ``while`` loops -- stays.
"""
from __future__ import annotations

from ..ir import ops as O
from ..ir.core import Block, Kernel, Op
from ..ir.rewrite import discard
from .constfold import const_value


def run(kernel: Kernel) -> Kernel:
    """Remove dead ops from ``kernel`` in place and return it."""
    _block(kernel.body)
    return kernel


def _block(b: Block) -> None:
    # reverse order: users are visited (and dropped, leaving their operands' use-lists)
    # before the ops defining their operands
    kept = []
    for op in reversed(b.ops):
        for r in op.regions:
            _block(r)
        if any(r.is_used for r in op.results) or not _removable(op):
            kept.append(op)
            continue
        op.parent = None
        discard(op)
    kept.reverse()
    b.ops = kept


def _removable(op: Op) -> bool:
    if op.opcode in ("if", "for"):
        if op.opcode == "for" and const_value(op.operands[2]) in (None, 0):
            return False
        return all(_only_pure(r) for r in op.regions)
    return O.is_pure(op)


def _only_pure(b: Block) -> bool:
    for op in b.ops:
        if op.opcode == "yield":
            continue
        if op.opcode in ("if", "for"):
            if not _removable(op):
                return False
        elif not O.is_pure(op):
            return False
    return True
