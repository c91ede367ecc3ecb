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

#: launch limits (kaio.launch: a block has at most 1024 threads; grid.x < 2**31, y/z <= 65535)
_BLOCK_MAX = 1024
_GRID_MAX = (2**31 - 1, 65535, 65535)


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


def _fits(lo, hi, t):
    return (lo, hi) if t.min_value() <= lo and hi <= t.max_value() else None


def _range(v: Value, memo) -> tuple[int, int] | None:
    t, op = v.type, v.owner
    if not isinstance(op, Op) or not getattr(t, "is_int", False) or getattr(t, "is_bool", False):
        return None
    opc, a = op.opcode, op.attrs
    if opc == "const":
        return (a["value"], a["value"])
    if opc == "block_dim":
        return (1, _BLOCK_MAX)
    if opc == "grid_dim":
        return (1, _GRID_MAX[a.get("axis", 0)])
    if opc == "thread_idx":
        return (0, _BLOCK_MAX - 1)
    if opc == "block_idx":
        return (0, _GRID_MAX[a.get("axis", 0)] - 1)
    if opc == "lane_id":
        return (0, 63)
    if opc == "warp_size":
        return (1, 64)
    if opc == "shape":
        return (0, t.max_value())
    if opc == "cast" and op.operands[0].type.is_int:
        r = value_range(op.operands[0], memo)
        return None if r is None else _fits(*r, t)
    if opc not in ("add", "sub", "mul", "min", "max", "shl", "div"):
        return None
    ra, rb = (value_range(x, memo) for x in op.operands)
    if ra is None or rb is None:
        return None
    (alo, ahi), (blo, bhi) = ra, rb
    if opc == "add":
        return _fits(alo + blo, ahi + bhi, t)
    if opc == "sub":
        return _fits(alo - bhi, ahi - blo, t)
    if opc == "mul":
        c = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return _fits(min(c), max(c), t)
    if opc == "min":
        return (min(alo, blo), min(ahi, bhi))
    if opc == "max":
        return (max(alo, blo), max(ahi, bhi))
    if opc == "shl" and blo == bhi and 0 <= blo < t.bits and alo >= 0:
        return _fits(alo << blo, ahi << blo, t)
    if opc == "div" and blo == bhi and blo > 0 and alo >= 0:   # truncation == floor here
        return (alo // blo, ahi // blo)
    return None
