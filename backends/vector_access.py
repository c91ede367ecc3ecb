"""Vectorised global memory access: which n scalar accesses may become one 16-byte access.

The group length is ``n = 16 / itemsize``: four 4-byte elements (f32, i32, u32), eight 2-byte
ones (f16, bf16, i16, u16) or sixteen 1-byte integers (i8, u8). Where no whole 16-byte group
forms, 1- and 2-byte elements also group as *narrow* 8- and 4-byte accesses (``n / 2`` and
``n / 4`` elements, one or two 32-bit words: ``ld.global.v2.b32`` / ``ld.global.b32``): a row
chunk of 4 int8 feeding a 16-byte f32 store is one 4-byte load, not four 1-byte ones, so a kernel
can size its chunks by its widest buffer and keep every warp access contiguous. The analysis is
target-independent; both emitters use :func:`plan`. kaio's PTX emitter
(:mod:`kaio.backends.ptx`) emits a group as predicated instructions (``@p ld.global.v4.b32`` /
``@!p`` n scalar loads; 2- and 1-byte elements are split out of, or packed into, the four 32-bit
words), the LLVM emitter (:mod:`kaio.backends.llvm`) as a branch on the
predicate to one ``<n x T>`` load or store with ``align 16`` or to the n scalar accesses.

Pattern (what ``for j in kaio.static_range(n): ... x[n*i + j]`` becomes after unrolling, what
a ``blocked(n*k)`` Region's loop becomes after :mod:`kaio.passes.full_tiles`, and a
``Coarsened(k)`` thread's k elements): n loads, or n stores, in one block, of the same global
kernel-parameter buffer with a 1-, 2- or 4-byte dtype, at last-axis indices ``base + nc + 0 .. base +
nc + n - 1`` (``c`` a constant chunk number, ``base`` an ``i32``) where ``base`` is provably a
multiple of n (``mul`` by a constant multiple of n or by a multiple of n, ``shl`` by a constant
>= log2(n), sums and differences of those, or a ``for`` variable whose start and step are), and,
for an N-d buffer (row-major), the same leading index *values* ``r`` in every member.
Then the n elements are one 16-byte aligned chunk *if* the buffer's pointer is 16-byte aligned
and, for N >= 2, its last extent ``d`` is a multiple of n: the element's linear index is
``lin(r) * d + base + nc`` and its byte offset that times ``itemsize``, a multiple of ``n *
itemsize = 16`` exactly when ``lin(r) * d`` is a multiple of n for every row, i.e. (rows being
arbitrary) when ``d`` is (wrapping ``i32`` arithmetic keeps multiples of n since n divides
2**32; the row part is computed in 64 bits). The emitted code tests that once per buffer (at
kernel entry: pointer aligned, and ``d % n == 0``); the access is emitted both ways under that
predicate, so views with odd offsets and rows of odd length stay correct. A statically known
``d`` that is not a multiple of n never groups. A narrow group (``n / 2`` or ``n / 4`` elements, ``base`` a
multiple of its own length) is tested by the same 16-byte predicate, which implies its own
alignment.

Member ``k``'s address is emitted as the address of element ``base`` plus ``(nc + k) *
itemsize`` bytes (64-bit arithmetic) rather than the IR's wrapping ``i32`` sum ``base + 4c + k``. The two
differ only when that sum overflows, i.e. when the IR's index is negative although it would be
at least 2**31 in exact arithmetic -- out of bounds either way, since extents are below 2**31.

A load group is emitted at its first member, a store group at its last, which moves the other
members. That is allowed when no moved member crosses an access it may conflict with:

- ``in`` buffers never change during a launch: their loads always group;
- for a writable buffer, the other accesses between the first and the last member must all index
  ``[r..., base + constant]`` (the same leading values and the same ``base`` value, so equal
  offsets are equal addresses and distinct offsets distinct ones), and a moved member must not
  cross a store (for a load) or any access (for a store) at its own address. Anything else
  touching the buffer in that range (an index of another shape, other leading indices, nested
  control flow, an atomic) or any barrier blocks the group.

A written buffer overlaps no other buffer argument (kaio's launch checks refuse such launches;
the LLVM emitter marks the pointers ``noalias``), so accesses to other buffers never block a
group.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir.indexmath import base_and_offset as _split
from ..ir.indexmath import const_value as _const
from ..records import record

#: bytes moved by one vectorised access
VEC_BYTES = 16


#: the narrowest grouped access: one 32-bit word
WORD_BYTES = 4


def group_length(dtype) -> int | None:
    """Elements per 16-byte access for ``dtype`` (4, 8 or 16), or None when it is never
    grouped."""
    if dtype.is_bool or dtype.bits not in (8, 16, 32) or (dtype.bits == 8 and not dtype.is_int):
        return None
    return VEC_BYTES // dtype.itemsize


def group_lengths(dtype) -> tuple:
    """The group lengths tried for ``dtype``, widest first: the 16-byte one, then the narrow
    8- and 4-byte ones where an element is smaller than a word (() when never grouped)."""
    n = group_length(dtype)
    if n is None:
        return ()
    if dtype.itemsize >= WORD_BYTES:
        return (n,)
    return tuple(n >> k for k in range(3) if (n >> k) * dtype.itemsize >= WORD_BYTES)


@record
class Group:
    """One vectorised access: the ops (by offset 0..n-1), the base index value (a multiple of
    n), and the op at which the vector instruction is emitted."""

    kind: str            # 'load' | 'store'
    buf: object          # the buffer Value
    base: object         # i32 Value, a multiple of the group length
    ops: list            # ops ordered by offset (16 / itemsize of them, or a narrow group's)
    at: object           # op where the instruction goes
    offset: int = 0      # elements from ``base`` to the chunk (a multiple of the length)
    lead: tuple = ()     # the leading index Values (N-d buffers), the same in every member

    @property
    def index(self) -> list:
        """The index Values of the chunk's element ``base`` (leading indices, then ``base``)."""
        return [*self.lead, self.base]


def _multiple_of(v, n: int) -> bool:
    """Whether the i32 value ``v`` is provably a multiple of ``n`` (a power of two)."""
    op = v.owner
    loop = getattr(op, "parent", None) if op is not None and not hasattr(op, "opcode") else None
    if loop is not None and getattr(loop, "opcode", None) == "for" and v is op.args[0]:
        lb, _, step = loop.operands[:3]      # a loop variable: lb + k * step
        return _multiple_of(lb, n) and _multiple_of(step, n)
    opc = getattr(op, "opcode", None)
    if opc == "const":
        return op.attrs["value"] % n == 0
    if opc == "mul":
        return any(_const(x) is not None and _const(x) % n == 0 for x in op.operands) or \
            any(_multiple_of(x, n) for x in op.operands)
    if opc == "shl":
        c = _const(op.operands[1])
        return (c is not None and 1 << c >= n and c < 32) or _multiple_of(op.operands[0], n)
    if opc in ("add", "sub"):
        return all(_multiple_of(x, n) for x in op.operands)
    return False


def _lengths(buf) -> tuple:
    """The group lengths for ``buf``'s accesses, widest first; () when they are never grouped
    (not a global kernel parameter, another dtype, or a static last extent no 16-byte group
    could align in: the alignment predicate tests the 16-byte length for every group)."""
    t = buf.type
    if (getattr(t, "space", None) != "global" or buf.owner is None
            or getattr(buf.owner, "opcode", None) is not None):
        return ()
    n = group_length(t.dtype)
    static = getattr(t, "static_shape", None)
    if n is not None and t.ndim > 1 and static is not None and static[-1] % n:
        return ()
    return group_lengths(t.dtype)


def needs_extent_check(buf) -> bool:
    """Whether ``buf``'s alignment predicate must also test its last extent (``% n == 0``): an
    N-d buffer whose last extent is not known statically (a static one was checked in
    :func:`plan`)."""
    return buf.type.ndim > 1 and getattr(buf.type, "static_shape", None) is None


def _index(op):
    """(leading index Values, last index Value) of a load/store."""
    nd = op.operands[0].type.ndim
    idx = op.operands[1:1 + nd]
    return tuple(idx[:-1]), idx[-1]


def _touches(op, buf) -> bool:
    """Whether ``op`` (or anything nested in it) reads or writes ``buf`` or synchronises."""
    for o in op.walk():
        if o.opcode in ("barrier", "atomic") or (o.operands and o.operands[0] is buf
                                                 and o.opcode in ("load", "store")):
            return True
    return False


def _address(op):
    """(leading index ids, base value, offset) of a plain load/store, or None otherwise."""
    if op.opcode in ("load", "store") and not op.regions and len(op.operands) >= 2:
        lead, last = _index(op)
        return (tuple(v.id for v in lead), *_split(last))
    return None


def _may_move(kind: str, members: list, block_ops: list, first: int, last: int, buf, base,
              lead: tuple) -> bool:
    """Whether a load group may move to ``first`` / a store group to ``last`` (see the module
    docstring). ``members`` are (position, op) ordered by offset; ``lead`` the leading index ids."""
    if buf.type.intent == "in":
        return True
    where = {id(o): (p, _address(o)[2]) for p, o in members}
    for pos in range(first, last + 1):
        o = block_ops[pos]
        if id(o) in where or not _touches(o, buf):
            continue
        addr = _address(o)
        if addr is None or addr[0] != lead or addr[1] is not base or o.operands[0] is not buf:
            return False                       # barrier, atomic, nested use, unrelated index
        for mpos, moff in where.values():
            if moff != addr[2]:
                continue                       # a different address: never conflicts
            if kind == "load" and o.opcode == "store" and pos < mpos:
                return False                   # the load would move above the store it reads
            if kind == "store" and pos > mpos:
                return False                   # the store would move past a use of its address
    return True


def plan(block) -> dict:
    """op id -> Group for the vectorisable accesses directly in ``block``."""
    cands: dict = {}
    for pos, op in enumerate(block.ops):
        if op.opcode not in ("load", "store") or len(op.operands) < 2:
            continue
        buf = op.operands[0]
        lead, last_index = _index(op)
        base, off = _split(last_index)
        if off < 0 or base.type != dt.INDEX:
            continue
        for n in _lengths(buf):
            if _multiple_of(base, n):
                key = (op.opcode, buf.id, tuple(v.id for v in lead), base.id, n, off // n)
                cands.setdefault(key, {}).setdefault(off % n, (pos, op))
    groups: dict = {}
    # widest first: an access joins a narrow group only where no wider one formed
    for (kind, _, lead_ids, _, n, chunk), by_off in sorted(cands.items(), key=lambda kv: -kv[0][4]):
        if len(by_off) != n or any(id(o) in groups for _, o in by_off.values()):
            continue
        members = [by_off[k] for k in range(n)]
        first = min(p for p, _ in members)
        last = max(p for p, _ in members)
        buf = members[0][1].operands[0]
        lead, last_index = _index(members[0][1])
        base = _split(last_index)[0]
        if not _may_move(kind, members, block.ops, first, last, buf, base, lead_ids):
            continue
        g = Group(kind, buf, base, [o for _, o in members],
                  block.ops[first if kind == "load" else last], n * chunk, lead)
        for _, o in members:
            groups[id(o)] = g
    return groups


def plan_kernel(kernel) -> dict:
    """op id -> Group for every block of ``kernel`` (its body and every nested region)."""
    groups: dict = {}
    for blk in [kernel.body] + [r for op in kernel.walk() for r in op.regions]:
        groups.update(plan(blk))
    return groups


def grouped_buffers(groups: dict) -> list:
    """The buffers with at least one group, each once: those needing an alignment predicate."""
    return list({id(g.buf): g.buf for g in groups.values()}.values())
