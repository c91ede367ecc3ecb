"""IR surgery shared by the passes: insert, move, erase, expand in place, inline, clone.

Replacing a value is :meth:`kaio.ir.Value.replace_all_uses_with`: values know their users, so
it touches only the ops that use the value. What keeps those use-lists right:

- an op built with :class:`~kaio.ir.Op` (or a Builder) becomes a user of its operands, and
  assigning ``op.operands`` moves it;
- an op that leaves the IR goes through :func:`erase` (or :func:`discard`, when a pass rebuilds
  a block's op list itself), which drops its uses and those of every op nested in it;
- an op that only moves (:func:`detach`, then appended elsewhere) keeps its uses.
"""
from __future__ import annotations

import dataclasses

from .builder import Builder
from .core import Block, Kernel, Op, Value


def insert_before(anchor: Op, ops: list[Op]) -> None:
    """Insert ``ops`` (not in any block) just before ``anchor`` in its block."""
    block = anchor.parent
    at = _index(block, anchor)
    for op in ops:
        op.parent = block
    block.ops[at:at] = ops


def detach(op: Op) -> Op:
    """Unlink ``op`` from its block, keeping it (and its uses) intact, to be placed elsewhere."""
    block = op.parent
    del block.ops[_index(block, op)]
    op.parent = None
    return op


def erase(op: Op) -> None:
    """Remove ``op`` from its block and from the IR (its results must be unused by then, except
    by ops nested in it)."""
    if op.parent is not None:
        detach(op)
    discard(op)


def discard(op: Op) -> None:
    """Drop the uses of ``op``, already unlinked from its block, and of every op nested in it:
    they leave the IR. ValueError if an op outside still uses one of their results."""
    inner = list(op.walk())
    for o in inner:
        o.drop_operands()
    for o in inner:
        for r in o.results:
            if r.is_used:
                raise ValueError(f"erasing {o.opcode} whose result {r!r} is still used by "
                                 f"{', '.join(u.opcode for u in r.users)}")


def expand_in_place(scope: Block, match, build) -> int:
    """Replace every op under ``scope`` that ``match(op)`` accepts by the ops ``build(b, op)``
    emits into a Builder ``b`` (at the op's location); ``build`` returns the values that replace
    the op's results. Ops are visited in pre-order, and what ``build`` emits is not visited.
    Each block is rebuilt in one sweep, so this is linear in the kernel's size plus what is
    emitted. Returns how many ops were replaced."""
    n = 0
    out: list[Op] = []
    for op in scope.ops:
        if not match(op):
            for r in op.regions:
                n += expand_in_place(r, match, build)
            out.append(op)
            continue
        b = Builder(Block(), op.loc)
        values = build(b, op)
        for new in b.block.ops:
            new.parent = scope
        out.extend(b.block.ops)
        for r, v in zip(op.results, values):
            r.replace_all_uses_with(v)
        op.parent = None
        discard(op)
        n += 1
    if n:
        scope.ops = out
    return n


def inline_region(op: Op, region: Block) -> list[Value]:
    """Move ``region``'s ops (minus its terminator) before ``op``; returns what it yielded.

    The region must have no block arguments (as an ``if`` branch). The terminator stays in the
    region (erasing ``op`` drops it)."""
    term = region.terminator
    yielded = list(term.operands) if term is not None else []
    body = region.ops[:-1] if term is not None else list(region.ops)
    region.ops = [term] if term is not None else []
    insert_before(op, body)
    return yielded


def _index(block: Block, op: Op) -> int:
    for i, o in enumerate(block.ops):
        if o is op:
            return i
    raise ValueError(f"{op!r} is not in its parent block")


# --- copying ----------------------------------------------------------------------------------
def clone_kernel(k: Kernel) -> Kernel:
    """A deep copy of ``k``: fresh values and ops (with their own use-lists), the same names,
    types, attributes, locations and parameter records. Passes that specialise per target work
    on one, so the frontend's cached IR is never modified. Attribute values are immutable, so
    they are shared. ValueError if an op uses a value not defined in ``k``."""
    mapping: dict[int, Value] = {}
    return Kernel(k.name, clone_block(k.body, mapping, strict=True),
                  [dataclasses.replace(p) for p in k.params], k.loc, dict(k.attrs))


def clone_block(b: Block, mapping: dict, strict: bool = False) -> Block:
    """A fresh copy of block ``b``; see :func:`clone_op`."""
    nb = Block()
    for a in b.args:
        mapping[a.id] = nb.add_arg(a.type, a.name)
    for op in b.ops:
        nb.append(clone_op(op, mapping, strict))
    return nb


def clone_op(op: Op, mapping: dict, strict: bool = False) -> Op:
    """A fresh copy of ``op`` and its regions, operands renamed by ``mapping`` (value id ->
    value), which is extended with the copy's results and block arguments. An operand not in
    ``mapping`` is a value defined outside what is copied and is used as is, unless ``strict``
    (then it is a ValueError)."""
    regions = [clone_block(r, mapping, strict) for r in op.regions]
    new = Op(op.opcode, [_mapped(mapping, v, strict) for v in op.operands],
             [r.type for r in op.results], op.attrs, regions, op.loc, [r.name for r in op.results])
    for old, r in zip(op.results, new.results):
        mapping[old.id] = r
    return new


def _mapped(mapping: dict, v: Value, strict: bool) -> Value:
    got = mapping.get(v.id)
    if got is not None:
        return got
    if strict:
        raise ValueError(f"cannot copy: operand {v!r} is not defined in the kernel being copied")
    return v
