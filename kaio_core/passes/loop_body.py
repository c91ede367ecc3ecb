"""Copying and scheduling loop bodies: what the unroll and full-tile passes share.

- :func:`body_size`: how many ops a loop body has, or None when it holds an op that must not be
  copied or reordered (nested loops, barriers, warp/block ops, atomics, array allocations);
- :class:`OpList`: builds new ops at a loop's location;
- :func:`clone_body`: fresh copies of a body with its arguments renamed;
- :func:`loads_first`: moves loads ahead of the other ops where no store they could read precedes
  them.
"""
from __future__ import annotations

from ..ir import ops as O
from ..ir.core import Block, Op, Value
from ..ir.indexmath import base_and_offset
from ..ir.rewrite import clone_op

FORBIDDEN = ("for", "while", "barrier", "atomic", "shuffle", "vote", "ballot", "warp_reduce",
              "block_reduce", "shared_array", "dyn_shared", "local_array")


def body_size(loop: Op) -> int | None:
    """Ops in ``loop``'s body (the yield not counted), or None when one of them is in
    :data:`FORBIDDEN`."""
    n = 0
    for inner in loop.regions[0].walk():
        if inner.opcode in FORBIDDEN:
            return None
        n += inner.opcode != "yield"
    return n


class OpList:
    """Appends new ops to a list, with the loop's location."""

    def __init__(self, loc):
        self.ops: list[Op] = []
        self.loc = loc

    def __call__(self, opcode, operands, rtype, attrs=None) -> Value:
        op = Op(opcode, operands, [rtype], attrs, loc=self.loc)
        self.ops.append(op)
        return op.result

    def const(self, value, t) -> Value:
        return self("const", [], t, {"value": value})


def clone_body(body: Block, mapping: dict) -> tuple[list[Op], list[Value]]:
    """Fresh copies of ``body``'s ops (minus the yield) with operands renamed by ``mapping``
    (value id -> value; extended with the copies' results); returns them and the values the
    copy yields."""
    out = []
    for o in body.ops:
        if o.opcode == "yield":
            return out, [mapping.get(v.id, v) for v in o.operands]
        out.append(clone_op(o, mapping))
    return out, []


def loads_first(ops: list[Op]) -> list[Op]:
    """Move loads (top level, with the pure region-free ops their operands need) ahead of the
    other ops when no store they could read from comes before them; everything else keeps its
    order. See :func:`_may_rise`."""
    pos = {r.id: i for i, o in enumerate(ops) for r in o.results}
    early: set[int] = set()

    def closure(i, acc) -> bool:
        o = ops[i]
        if i in acc or i in early:
            return True
        if o.regions or not O.is_pure(o) or (o.opcode == "load" and not _may_rise(ops, i)):
            return False
        acc.add(i)
        return all(v.id not in pos or closure(pos[v.id], acc) for v in o.operands)

    for i, o in enumerate(ops):
        if o.opcode == "load" and _may_rise(ops, i):
            acc: set[int] = set()
            if closure(i, acc):
                early |= acc
    return [o for i, o in enumerate(ops) if i in early] + \
           [o for i, o in enumerate(ops) if i not in early]


def _may_rise(ops: list[Op], i: int) -> bool:
    """Whether load ``ops[i]`` may move above ``ops[:i]``: always for an ``in`` buffer (never
    written during a launch; a writable buffer overlapping another is rejected at launch); for
    a writable 1-d buffer when every earlier store to it indexes the same base plus a *different*
    constant (a different element) and nothing earlier synchronises or is an atomic."""
    load = ops[i]
    t = load.operands[0].type
    if t.space == "global" and t.intent == "in":
        return True
    if len(load.operands) != 2:
        return False
    buf = load.operands[0]
    base, off = base_and_offset(load.operands[1])
    for o in ops[:i]:
        for q in o.walk():
            if q.opcode in ("barrier", "atomic", "shuffle", "vote", "ballot"):
                return False
            if q.opcode == "store" and q.operands[0] is buf:
                if len(q.operands) != 3:
                    return False
                qbase, qoff = base_and_offset(q.operands[1])
                if qbase is not base or qoff == off:
                    return False
    return True
