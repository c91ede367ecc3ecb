"""Packed 16-bit float arithmetic: which pairs of scalar ops may become one ``f16x2`` / ``bf16x2``
instruction (kaio's PTX emitter, sm_80+).

Why it is exact. The IR rounds every f16/bf16 ``add sub mul`` and ``fma`` once, to nearest even,
from the exact result (:mod:`kaio.semantics`); ``min``/``max`` are IEEE minNum/maxNum, ``neg`` and
``abs`` flip or clear the sign bit; a cast from f32 rounds once to nearest even. The packed PTX
instructions (``add.rn.f16x2``, ``fma.rn.bf16x2``, ``min.f16x2``, ``cvt.rn.f16x2.f32`` ...) apply
that same per-element operation to each half of a 32-bit register independently, without
flushing subnormals (no ``.ftz``). So one packed instruction on lanes ``(a0, a1)``, ``(b0, b1)``
gives exactly the bits of the two scalar instructions kaio emits otherwise, whatever the data.
Pairing only regroups independent ops; it never changes an op, so there is nothing to relax
and no fast-math question (docs/performance.md, "Packed 16-bit arithmetic", says why the
library's f32-computing kernels get only the packed narrowing from it).

Which pairs. Like SLP vectorisation, seeds come from 16-byte groups of 16-bit float accesses
(:mod:`kaio.backends.vector_access`): the stored values of members ``2m`` and ``2m + 1`` of a
store group, and the users of loaded members ``2m``/``2m + 1`` of a load group (the low and high
half of the group's word ``m``). Two ops ``lo``, ``hi`` pair when they are in the same block, have
the same opcode and types (a packable one: :data:`ARITH`, or a cast f32 -> f16/bf16), neither
is already paired, and, operand by operand, both use the same value (broadcast into both halves)
or a pair that is itself packed (a load word or a planned pair, lane for lane). A cast from f32
needs no operand pairing. The pair is emitted at the later op; so the earlier one's result must
have no use at or before it.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..records import record

#: 16-bit float ops with a packed form: opcode -> operand count
ARITH = {"add": 2, "sub": 2, "mul": 2, "min": 2, "max": 2, "fma": 3, "neg": 1, "abs": 1}


@record
class Pair:
    """Two ops computed by one packed instruction: ``lo`` in the low half, ``hi`` in the high
    half; emitted at ``at`` (the later of the two)."""

    lo: object
    hi: object
    at: object


def _half(t) -> bool:
    return isinstance(t, dt.DType) and t.is_float and t.bits == 16


def _same(x, y) -> bool:
    """The same value in both halves: one value, or two equal constants (bit for bit)."""
    if x is y:
        return True
    ox, oy = x.owner, y.owner
    return getattr(ox, "opcode", None) == getattr(oy, "opcode", None) == "const" and \
        x.type == y.type and repr(ox.attrs["value"]) == repr(oy.attrs["value"])


def _packable(op) -> bool:
    if op.opcode in ARITH:
        return len(op.results) == 1 and _half(op.result.type) and \
            all(v.type == op.result.type for v in op.operands)
    return op.opcode == "cast" and _half(op.result.type) and op.operands[0].type == dt.f32


class _Planner:
    def __init__(self, groups: dict):
        self.pairs: dict = {}          # op id -> Pair
        self.packed: set = set()       # (lo value id, hi value id) available as one word
        self.load_words: set = set()   # such keys that are load-group words (used packed)
        self.words: dict = {}          # (lo id, hi id) -> 'load' for every load-group word
        self.pos: dict = {}            # op id -> (block id, position)
        self.groups = groups
        for g in {id(g): g for g in groups.values()}.values():
            if g.kind == "load" and _half(g.buf.type.dtype):
                for m in range(0, len(g.ops), 2):
                    self.words[(g.ops[m].result.id, g.ops[m + 1].result.id)] = g

    def _where(self, op, block):
        """Position in ``block`` where ``op``, or its ancestor there, is emitted (a paired op at
        its pair's later op, a grouped store at its group's last member); None: not inside
        ``block``."""
        while op is not None and op.parent is not block:
            op = getattr(op.parent, "parent", None)
        if op is None:
            return None
        g, pair = self.groups.get(id(op)), self.pairs.get(id(op))
        at = pair.at if pair is not None else g.at if g is not None and g.kind == "store" else op
        return self.pos[id(at)][1]

    def available(self, a, b) -> bool:
        return (a.id, b.id) in self.words or (a.id, b.id) in self.packed

    def match(self, a, b, block) -> bool:
        """Pair the ops defining ``a`` (low) and ``b`` (high), if they may be."""
        if self.available(a, b):
            return True
        oa, ob = a.owner, b.owner
        if a is b or not hasattr(oa, "opcode") or not hasattr(ob, "opcode"):
            return False
        if oa.parent is not block or ob.parent is not block or oa.opcode != ob.opcode:
            return False
        if id(oa) in self.pairs or id(ob) in self.pairs or not (_packable(oa) and _packable(ob)):
            return False
        if oa.result.type != ob.result.type or oa.attrs != ob.attrs:
            return False
        at = max((oa, ob), key=lambda o: self.pos[id(o)][1])
        if oa.opcode != "cast":
            for x, y in zip(oa.operands, ob.operands):
                if not _same(x, y) and not self.match(x, y, block):
                    return False
            if id(oa) in self.pairs or id(ob) in self.pairs:
                return False           # an operand's pairing took one of them: never two pairs
        self.pairs[id(oa)] = self.pairs[id(ob)] = Pair(oa, ob, at)
        self.packed.add((a.id, b.id))
        return True

    def block(self, block, groups: dict) -> None:
        for i, op in enumerate(block.ops):
            self.pos[id(op)] = (id(block), i)
        for g in {id(g): g for op in block.ops if id(op) in groups
                  for g in [groups[id(op)]]}.values():
            if g.kind == "store" and _half(g.buf.type.dtype):
                vals = [o.operands[-1] for o in g.ops]
                for m in range(0, len(vals), 2):
                    self.match(vals[m], vals[m + 1], block)
        # forward from every word: users of both halves in the same operand position
        seeds = list(self.words) + list(self.packed)
        values = {v.id: v for op in block.ops for v in op.results}
        for g in {id(g): g for g in groups.values() if g.kind == "load"}.values():
            for o in g.ops:
                values[o.result.id] = o.result
        while seeds:
            la, lb = seeds.pop()
            a, b = values.get(la), values.get(lb)
            if a is None or b is None:
                continue
            for ua in a.users:
                for ub in b.users:
                    if ua is not ub and ua.opcode == ub.opcode and len(ua.results) == 1 and \
                            any(x is a and y is b for x, y in zip(ua.operands, ub.operands)):
                        key = (ua.result.id, ub.result.id)
                        if key not in self.packed and self.match(ua.result, ub.result, block):
                            values.update({ua.result.id: ua.result, ub.result.id: ub.result})
                            seeds.append(key)


    def _valid(self, pair) -> bool:
        """The earlier op's result is not used before the pair is emitted (its users placed
        where they are emitted: a use by the partner is a dependence), and every operand pair
        is still available."""
        block, limit = pair.at.parent, self.pos[id(pair.at)][1]
        first = pair.lo if pair.at is pair.hi else pair.hi
        for u in first.result.users:
            p = self._where(u, block)
            if p is not None and p <= limit:
                return False
        return pair.lo.opcode == "cast" or all(
            _same(x, y) or self.available(x, y) for x, y in zip(pair.lo.operands, pair.hi.operands))

    def settle(self) -> None:
        """Drop invalid pairs until none is left (dropping one moves its ops back to where
        they are, which may invalidate others), then note the load words that are read."""
        changed = True
        while changed:
            changed = False
            for pair in {id(q): q for q in self.pairs.values()}.values():
                if not self._valid(pair):
                    del self.pairs[id(pair.lo)], self.pairs[id(pair.hi)]
                    self.packed.discard((pair.lo.result.id, pair.hi.result.id))
                    changed = True
        for pair in self.pairs.values():
            if pair.lo.opcode != "cast":
                self.load_words.update((x.id, y.id) for x, y in zip(pair.lo.operands, pair.hi.operands)
                                       if (x.id, y.id) in self.words)


def plan_kernel(kernel, groups: dict) -> tuple[dict, set]:
    """(op id -> Pair, the load-group words some pair reads packed) for ``kernel``, given its
    vector groups (:func:`kaio.backends.vector_access.plan_kernel`)."""
    p = _Planner(groups)
    for blk in [kernel.body] + [r for op in kernel.walk() for r in op.regions]:
        p.block(blk, groups)
    p.settle()
    return p.pairs, p.load_words
