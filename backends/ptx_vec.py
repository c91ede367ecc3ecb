"""Vectorised global memory access: four scalar accesses -> one ``v4`` instruction.

Pattern (what ``for j in kaio.static_range(4): ... x[4*i + j]`` becomes after unrolling):
four loads, or four stores, in one block, of the same 1-d global buffer with a 4-byte dtype, at
indices ``base + 0 .. base + 3`` where ``base`` is provably a multiple of 4 (``mul`` by a
constant multiple of 4, or ``shl`` by a constant >= 2). Then the four elements are one 16-byte
aligned chunk *if* the buffer's pointer is 16-byte aligned, which the prologue tests once per
buffer; the access is emitted both ways under that predicate (``@p ld.global.v4.f32`` /
``@!p`` four scalar loads), so views with odd offsets stay correct.

Loads are grouped only for read-only (``in``) buffers, so moving the later loads up to the first
one cannot cross a write. Stores are grouped only when nothing between the first and the last
store of the group touches the buffer (and no barrier or atomic intervenes); the vector store is
emitted at the last one, where all four values exist.
"""
from __future__ import annotations

from dataclasses import dataclass

VEC = 4


@dataclass
class Group:
    """One vectorised access: the ops (by offset 0..3), the base index value, and the op at
    which the vector instruction is emitted."""

    kind: str            # 'load' | 'store'
    buf: object          # the buffer Value
    base: object         # i32 Value, a multiple of 4
    ops: list            # ops ordered by offset
    at: object           # op where the instruction goes


def _const(v):
    op = v.owner
    if getattr(op, "opcode", None) == "const":
        return op.attrs["value"]
    return None


def _split(v):
    """index -> (base value, constant offset)."""
    op = v.owner
    if getattr(op, "opcode", None) == "add":
        a, b = op.operands
        if _const(b) is not None:
            return a, _const(b)
        if _const(a) is not None:
            return b, _const(a)
    return v, 0


def _multiple_of_4(v) -> bool:
    op = v.owner
    opc = getattr(op, "opcode", None)
    if opc == "const":
        return op.attrs["value"] % VEC == 0
    if opc == "mul":
        return any(_const(x) is not None and _const(x) % VEC == 0 for x in op.operands) or \
            any(_multiple_of_4(x) for x in op.operands)
    if opc == "shl":
        c = _const(op.operands[1])
        return (c is not None and 2 <= c < 32) or _multiple_of_4(op.operands[0])
    if opc in ("add", "sub"):
        return all(_multiple_of_4(x) for x in op.operands)
    return False


def _eligible(buf) -> bool:
    t = buf.type
    return (getattr(t, "space", None) == "global" and t.ndim == 1 and t.dtype.bits == 32
            and buf.owner is not None and getattr(buf.owner, "opcode", None) is None)


def _touches(op, buf) -> bool:
    """Whether ``op`` (or anything nested in it) reads or writes ``buf`` or synchronises."""
    for o in op.walk():
        if o.opcode in ("barrier", "atomic") or (o.operands and o.operands[0] is buf
                                                 and o.opcode in ("load", "store")):
            return True
    return False


def plan(block) -> dict:
    """op id -> Group for the vectorisable accesses directly in ``block``."""
    cands: dict = {}
    for pos, op in enumerate(block.ops):
        if op.opcode not in ("load", "store") or len(op.operands) < 2:
            continue
        buf = op.operands[0]
        if not _eligible(buf) or (op.opcode == "load" and buf.type.intent != "in"):
            continue
        base, off = _split(op.operands[1])
        if 0 <= off < VEC and _multiple_of_4(base):
            cands.setdefault((op.opcode, buf.id, base.id), {}).setdefault(off, (pos, op))
    groups: dict = {}
    for (kind, _, _), by_off in cands.items():
        if len(by_off) != VEC:
            continue
        members = [by_off[k] for k in range(VEC)]
        first = min(p for p, _ in members)
        last = max(p for p, _ in members)
        buf = members[0][1].operands[0]
        if kind == "store":
            ids = {id(o) for _, o in members}
            if any(_touches(o, buf) for o in block.ops[first:last + 1] if id(o) not in ids):
                continue
        g = Group(kind, buf, _split(members[0][1].operands[1])[0], [o for _, o in members],
                  block.ops[first if kind == "load" else last])
        for _, o in members:
            groups[id(o)] = g
    return groups
