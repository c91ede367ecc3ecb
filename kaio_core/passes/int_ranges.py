"""Integer value ranges that hold on every valid launch, for passes that need a sign.

:class:`IntRanges` walks a kernel once, in program order, and gives each integer value an
interval ``(lo, hi)`` of the mathematical value it holds (``None``: unknown). An interval is
given only when no op on the way can wrap, so ``lo >= 0`` proves a value non-negative. What it
knows:

- the thread geometry: ``thread_idx``/``block_dim`` within the block limits (or the declared
  block, ``@kaio.kernel(block=...)``), ``block_idx``/``grid_dim`` within the grid limits
  (:mod:`kaio.passes.loop_facts`), ``lane_id``, ``warp_size``, ``shape`` >= 0;
- linear ids: every launch has at most ``2**31`` threads (kaio.backends.launch_checks), so a
  product of distinct geometry extents (``grid_dim.x * block_dim.x``...) is at most ``2**31``
  and the mixed-radix ids built from them (``thread_idx``, ``block_idx``, ``id * extent +
  id'``: the thread, block and global linear ids of :class:`kaio.ir.indexmath.IndexMath`) lie
  in ``[0, product)``, below ``2**31``, though interval arithmetic alone would say they may wrap;
- arithmetic: ``add sub mul min max select``, int casts, ``and``/``shr`` of non-negative
  values, ``div``/``rem`` of a non-negative value by a positive one;
- control flow: the counter of a ``for`` with a positive step whose last increment cannot wrap
  (or a Region's ``owned`` loop, whose partition checks that at launch) lies in
  ``[lb, ub - 1]``; inside ``if x < p`` with ``x >= 0``, ``p`` and every factor of a product
  ``p`` (``mul`` operands, recursively) are non-zero (a zero factor makes the wrapped product 0).
"""
from __future__ import annotations

from ..ir.core import Kernel, Op, Value

I32_MAX = 2**31 - 1
#: launch limits (kaio.launch: a block has at most 1024 threads; grid.x < 2**31, y/z <= 65535)
BLOCK_MAX = 1024
GRID_MAX = (I32_MAX, 65535, 65535)
#: the geometry extents whose product, each taken at most once, is a launch's thread count
_EXTENTS = frozenset(("b0", "b1", "b2", "g0", "g1", "g2"))


def _is_int(v: Value) -> bool:
    t = v.type
    return getattr(t, "is_int", False) and not getattr(t, "is_bool", False)


def fits(lo, hi, t):
    return (lo, hi) if t.min_value() <= lo and hi <= t.max_value() else None


class IntRanges:
    """Ranges of a kernel's integer values (computed on construction; read with :meth:`at`).

    ``at(v, op)`` is the range of ``v`` where ``op`` runs (the facts of the enclosing guards
    applied); the ranges themselves are those at each value's definition."""

    def __init__(self, kernel: Kernel):
        block = kernel.attrs.get("block")
        self.block = tuple(block) + (1,) * (3 - len(block)) if block else None
        self.rng: dict[int, tuple[int, int] | None] = {}
        #: mixed-radix geometry forms: value id -> ("exact", M) (the value is the product of the
        #: extents M) | ("below", M) (0 <= value < prod M) | ("steps", M, N) (value = k * prod N,
        #: 0 <= k < prod M); M, N frozensets of _EXTENTS
        self.geo: dict[int, tuple] = {}
        self.nonzero: dict[int, frozenset] = {}   # op id -> value ids non-zero where it runs
        self._walk(kernel.body.ops, frozenset())

    # --- reading ---------------------------------------------------------------------------
    def at(self, v: Value, op: Op | None = None) -> tuple[int, int] | None:
        r = self.rng.get(v.id)
        if r is not None and r[0] == 0 and op is not None and v.id in self.nonzero.get(id(op), ()):
            return (1, r[1])
        return r

    def nonneg(self, v: Value, op: Op | None = None) -> bool:
        r = self.at(v, op)
        return r is not None and r[0] >= 0

    # --- the walk --------------------------------------------------------------------------
    def _walk(self, ops, facts: frozenset) -> None:
        for op in ops:
            if facts:
                self.nonzero[id(op)] = facts
            for r in op.results:
                if _is_int(r):
                    self.rng[r.id] = self._range(op, r, facts)
            if op.opcode == "for" and op.regions:
                self._loop(op, facts)
            elif op.opcode == "if":
                then, other = op.regions
                self._walk(then.ops, facts | self._guard(op.operands[0], facts))
                self._walk(other.ops, facts)
            else:
                for region in op.regions:
                    self._walk(region.ops, facts)

    def _loop(self, op: Op, facts) -> None:
        body = op.regions[0]
        iv = body.args[0]
        lb, ub, step = (self._at(x, facts) for x in op.operands[:3])
        t = iv.type
        hi = t.max_value() if ub is None else ub[1]      # iv < ub <= hi
        if lb is not None and step is not None and step[0] >= 1 and lb[0] <= hi - 1:
            if hi + step[1] - 1 <= t.max_value() or "owned" in op.attrs:   # iv + step: no wrap
                self.rng[iv.id] = (lb[0], hi - 1)
        self._walk(body.ops, facts)

    def _guard(self, cond: Value, facts) -> frozenset:
        """Values non-zero where ``cond`` holds: ``x < p`` (or ``p > x``) with ``x >= 0`` makes
        ``p`` and, when ``p`` is a product, each factor non-zero; ``and`` combines."""
        op = cond.owner
        if not isinstance(op, Op):
            return frozenset()
        if op.opcode == "and":
            return self._guard(op.operands[0], facts) | self._guard(op.operands[1], facts)
        if op.opcode != "cmp" or op.attrs["pred"] not in ("lt", "gt"):
            return frozenset()
        x, p = op.operands if op.attrs["pred"] == "lt" else reversed(op.operands)
        if not _is_int(x) or not self._nonneg(x, facts):
            return frozenset()
        out, todo = set(), [p]
        while todo:
            v = todo.pop()
            out.add(v.id)
            if isinstance(v.owner, Op) and v.owner.opcode == "mul":
                todo.extend(v.owner.operands)
        return frozenset(out)

    def _at(self, v: Value, facts) -> tuple[int, int] | None:
        r = self.rng.get(v.id) if _is_int(v) else None
        return (1, r[1]) if r is not None and r[0] == 0 and v.id in facts else r

    def _nonneg(self, v, facts) -> bool:
        r = self._at(v, facts)
        return r is not None and r[0] >= 0

    # --- one op ----------------------------------------------------------------------------
    def _range(self, op: Op, res: Value, facts):
        t, opc, a = res.type, op.opcode, op.attrs
        if opc in _GEOMETRY:
            self.geo[res.id] = (("exact" if opc in ("block_dim", "grid_dim") else "below"),
                                frozenset((("b" if opc in ("block_dim", "thread_idx") else "g")
                                           + str(a["axis"]),)))
        if opc in LEAVES:
            return leaf_range(op, self.block)
        ins = [self._at(x, facts) if _is_int(x) else None for x in op.operands]
        if opc == "cast":
            return None if ins[0] is None else fits(*ins[0], t)
        if opc == "select":
            return None if None in ins[1:] else (min(ins[1][0], ins[2][0]), max(ins[1][1], ins[2][1]))
        if opc not in ("add", "sub", "mul", "min", "max", "div", "rem", "and", "shr", "shl"):
            return None
        geo = self._geometry(op, res)
        if geo is not None and geo[0] != "exact":
            return (0, I32_MAX) if t.max_value() >= I32_MAX else None
        if None in ins:
            return None
        return arith_range(opc, ins[0], ins[1], t)

    def _geometry(self, op: Op, res: Value):
        """The mixed-radix form of a ``mul``/``add`` of geometry forms, recorded, or None."""
        if op.opcode not in ("mul", "add") or res.type.max_value() < I32_MAX:
            return None
        f = [self.geo.get(x.id) for x in op.operands]
        if None in f:
            return None
        out = None
        for x, y in (f, f[::-1]):
            if op.opcode == "mul" and y[0] == "exact" and x[0] in ("exact", "below"):
                m, n = x[1], y[1]
                if not m & n and m | n <= _EXTENTS:
                    out = ("exact", m | n) if x[0] == "exact" else ("steps", m, n)
            elif op.opcode == "add" and x[0] == "steps" and y == ("below", x[2]):
                out = ("below", x[1] | x[2])
            if out is not None:
                self.geo[res.id] = out
                return out
        return None


_GEOMETRY = ("block_dim", "grid_dim", "thread_idx", "block_idx")
LEAVES = _GEOMETRY + ("const", "lane_id", "warp_size", "shape")


def leaf_range(op: Op, block=None):
    """The range of a constant, a thread-geometry op or a ``shape`` (``block``: the declared
    block, bounding ``thread_idx``/``block_dim``), or None for other ops."""
    opc, t = op.opcode, op.result.type
    if opc == "const":
        return (op.attrs["value"], op.attrs["value"])
    if opc in _GEOMETRY:
        axis = op.attrs.get("axis", 0)
        thread = opc in ("block_dim", "thread_idx")
        hi = (block[axis] if block else BLOCK_MAX) if thread else GRID_MAX[axis]
        return (1, hi) if opc in ("block_dim", "grid_dim") else (0, hi - 1)
    return {"lane_id": (0, 63), "warp_size": (1, 64), "shape": (0, t.max_value())}.get(opc)


def arith_range(opc, ra, rb, t):
    """The interval of ``opc`` over two operand intervals, when it cannot wrap."""
    (alo, ahi), (blo, bhi) = ra, rb
    if opc == "add":
        return fits(alo + blo, ahi + bhi, t)
    if opc == "sub":
        return fits(alo - bhi, ahi - blo, t)
    if opc == "mul":
        c = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return fits(min(c), max(c), t)
    if opc == "min":
        return (min(alo, blo), min(ahi, bhi))
    if opc == "max":
        return (max(alo, blo), max(ahi, bhi))
    if alo < 0:
        return None
    if opc == "and":
        return (0, ahi) if blo < 0 else (0, min(ahi, bhi))
    if opc == "shr" and 0 <= blo and bhi < t.bits:
        return (alo >> bhi, ahi >> blo)
    if opc == "shl" and blo == bhi and 0 <= blo < t.bits:
        return fits(alo << blo, ahi << blo, t)
    if blo < 1:              # division by zero: an unspecified value
        return None
    if opc == "div":         # truncation == floor here
        return (alo // bhi, ahi // blo)
    if opc == "rem":
        return (0, min(ahi, bhi - 1))
    return None
