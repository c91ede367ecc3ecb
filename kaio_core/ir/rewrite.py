"""Small IR surgery helpers shared by the passes: replace uses, insert, erase, inline."""
from __future__ import annotations

import copy

from .core import Block, Kernel, Op, Value


def _ops(scope):
    return scope.walk() if isinstance(scope, (Kernel, Block, Op)) else iter(scope)


def replace_all_uses(scope, old: Value, new: Value) -> int:
    """Make every op in ``scope`` (a kernel, block or op, nested regions included) use ``new``
    where it used ``old``; returns how many operands changed."""
    n = 0
    for op in _ops(scope):
        for i, v in enumerate(op.operands):
            if v is old:
                op.operands[i] = new
                n += 1
    return n


def substitute(scope, mapping: dict[int, Value]) -> None:
    """Replace operands by ``mapping`` (value id -> value) everywhere in ``scope``, in one walk."""
    if not mapping:
        return
    for op in _ops(scope):
        op.operands = [resolve(mapping, v) for v in op.operands]


def resolve(mapping: dict[int, Value], v: Value) -> Value:
    """Follow ``mapping`` (value id -> value) until it ends (replacements may chain)."""
    while v.id in mapping:
        v = mapping[v.id]
    return v


def insert_before(anchor: Op, ops: list[Op]) -> None:
    """Insert ``ops`` (not in any block) just before ``anchor`` in its block."""
    block = anchor.parent
    at = _index(block, anchor)
    for op in ops:
        op.parent = block
    block.ops[at:at] = ops


def erase(op: Op) -> None:
    """Remove ``op`` from its block (its results must be unused by then)."""
    block = op.parent
    del block.ops[_index(block, op)]
    op.parent = None


def inline_region(op: Op, region: Block) -> list[Value]:
    """Move ``region``'s ops (minus its terminator) before ``op``; returns what it yielded.

    The region must have no block arguments (as an ``if`` branch)."""
    term = region.terminator
    yielded = list(term.operands) if term is not None else []
    body = region.ops[:-1] if term is not None else list(region.ops)
    region.ops = []
    insert_before(op, body)
    return yielded


def _index(block: Block, op: Op) -> int:
    for i, o in enumerate(block.ops):
        if o is op:
            return i
    raise ValueError(f"{op!r} is not in its parent block")


def clone_kernel(k: Kernel) -> Kernel:
    """A deep copy of ``k`` with fresh values (passes that specialise per target work on one,
    so the frontend's cached IR is never modified)."""
    mapping: dict[int, Value] = {}
    return Kernel(k.name, _clone_block(k.body, mapping), list(k.params), k.loc,
                  copy.deepcopy(k.attrs))


def _clone_block(b: Block, mapping: dict) -> Block:
    nb = Block()
    for a in b.args:
        mapping[a.id] = nb.add_arg(a.type, a.name)
    for op in b.ops:
        regions = [_clone_block(r, mapping) for r in op.regions]
        new = Op(op.opcode, [mapping.get(v.id, v) for v in op.operands],
                 [r.type for r in op.results], copy.deepcopy(op.attrs), regions, op.loc,
                 [r.name for r in op.results])
        for old, r in zip(op.results, new.results):
            mapping[old.id] = r
        nb.append(new)
    return nb
