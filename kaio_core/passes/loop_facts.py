"""Loop facts: mark ``for`` loops whose step is provably positive with ``step_sign = 1``.

A ``for`` runs while ``iv < ub`` when its step is positive and while ``iv > ub`` when it is
negative, so a backend that cannot see the step's sign tests it on every iteration. This pass
proves the sign from value ranges: :func:`value_range` gives the mathematical interval of an
integer value from how it is defined (constants; ``block_dim`` in 1..1024; ``grid_dim`` in
1..2**31-1 for x and 1..65535 for y/z, the launch limits of :mod:`kaio.launch`; ``thread_idx``,
``block_idx``, ``lane_id``, ``warp_size``, ``shape`` >= 0; and ``add sub mul min max``, ``shl``
and ``div`` by constants, int casts over them). An interval is given only when the op cannot wrap
for any operand values in the operands' intervals, so ``lo >= 1`` is a proof that the step is
positive. ``grid_dim.x * block_dim.x`` is not: it wraps past 2**31-1 on the largest grids.

The attribute only removes the sign test; the reference interpreter may ignore it.
"""
from __future__ import annotations

from ..ir.core import Kernel, Op, Value
from .int_ranges import LEAVES, arith_range, fits, leaf_range


def run(kernel: Kernel) -> Kernel:
    """Set ``step_sign = 1`` on every ``for`` whose step is provably > 0 (in place)."""
    ranges: dict[int, tuple[int, int] | None] = {}
    for op in kernel.walk():
        if op.opcode == "for" and "step_sign" not in op.attrs:
            r = value_range(op.operands[2], ranges)
            if r is not None and r[0] >= 1:
                op.attrs["step_sign"] = 1
    return kernel


def value_range(v: Value, memo: dict | None = None) -> tuple[int, int] | None:
    """``(lo, hi)`` bounding the integer value ``v`` on every launch, or ``None`` if unknown."""
    memo = {} if memo is None else memo
    if v.id not in memo:
        memo[v.id] = None          # cycles cannot occur in SSA, but be safe
        memo[v.id] = _range(v, memo)
    return memo[v.id]


def _range(v: Value, memo) -> tuple[int, int] | None:
    t, op = v.type, v.owner
    if not isinstance(op, Op) or not getattr(t, "is_int", False) or getattr(t, "is_bool", False):
        return None
    opc = op.opcode
    if opc in LEAVES:
        return leaf_range(op)
    if opc == "cast" and op.operands[0].type.is_int:
        r = value_range(op.operands[0], memo)
        return None if r is None else fits(*r, t)
    if opc not in ("add", "sub", "mul", "min", "max", "shl", "shr", "and", "div", "rem"):
        return None
    ra, rb = (value_range(x, memo) for x in op.operands)
    if ra is None or rb is None:
        return None
    return arith_range(opc, ra, rb, t)
