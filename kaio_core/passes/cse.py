"""Common-subexpression elimination of pure, memory-free ops.

Two ops with the same opcode, operands, attributes and result types compute the same value when
the first dominates the second (same block earlier, or an enclosing block). The second's uses
move to the first and it is erased. Allocations (each is a distinct array) are never merged,
nor loads from memory the kernel may change between them. Loads from a global ``In`` buffer
are merged: nothing writes it while the kernel runs (the kernel cannot, and every launch
refuses a written argument that overlaps another, docs/regions.md), so the same element reads
the same value anywhere -- the assumption kaio's PTX already makes with ``ld.global.nc``. A
kernel that names ``x[n1]`` twice (RAJAPerf's DEL_DOT_VEC_2D: its ``affine`` term re-reads
eight corners) loads it once, as nvcc does. Lowering passes emit the same thread-id and
constant arithmetic many times; this keeps the code backends see small.
"""
from __future__ import annotations

from collections import ChainMap

from ..ir import ops as O
from ..ir.core import Block, Kernel, Op
from ..ir.rewrite import discard

_NEVER = ("load", "shared_array", "dyn_shared", "local_array")


def run(kernel: Kernel) -> Kernel:
    """Merge duplicate pure computations in ``kernel`` (in place) and return it."""
    _block(kernel.body, ChainMap())
    return kernel


def _key(op: Op):
    if op.opcode == "load" and not op.regions and _read_only(op.operands[0].type):
        pass
    elif op.regions or len(op.results) != 1 or op.opcode in _NEVER or not O.is_pure(op):
        return None
    return (op.opcode, tuple(v.id for v in op.operands), repr(sorted(op.attrs.items())),
            str(op.results[0].type))


def _read_only(t) -> bool:
    """A global buffer no one writes while the kernel runs."""
    return getattr(t, "space", None) == "global" and getattr(t, "intent", None) == "in"


def _block(b: Block, seen: ChainMap) -> None:
    kept = []
    for op in b.ops:
        for r in op.regions:
            _block(r, seen.new_child())
        key = _key(op)
        first = None if key is None else seen.get(key)
        if first is None:
            if key is not None:
                seen[key] = op.results[0]
            kept.append(op)
        else:   # its users move to the first (use-lists), so later keys see the merged value
            op.results[0].replace_all_uses_with(first)
            op.parent = None
            discard(op)
    b.ops = kept
