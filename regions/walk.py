"""Symbolic execution of a kernel's IR for the race checker.

One pass over the structured IR gives every integer value a polynomial (:mod:`.affine`),
every boolean a :class:`Cond`, and records:

- each memory access (buffer, kind, symbolic index, the facts that hold where it runs, its
  barrier interval and its position inside loops that contain barriers);
- each barrier (``barrier`` op or ``block_reduce``, which contains barriers) with the control
  flow around it, for the uniformity rule.

Uniformity falls out of the symbols: a value is uniform across a block when every symbol it
mentions is (thread ids, loaded data, lane ids and warp results are not).

An integer's polynomial is its machine value: fixed-width arithmetic keeps the exact polynomial
only where :mod:`.widths` proves it cannot wrap, and is an opaque symbol elsewhere.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.core import Op
from ..ir.types import BufType
from ..records import record
from .affine import Poly, SymbolTable, SymMath, bounds, trivially_nonneg
from .base import block_pins
from .partitions import Elementwise
from .widths import Fits, geometry_facts, type_range

BARRIER_OPS = ("barrier", "block_reduce")


def touches_shared(op) -> bool:
    """``op`` itself reads or writes a shared array: a plain load, store or atomic, a fragment
    load (``group_mma`` reads its tiles through these), a tile copy. Global memory is no
    business of the barrier intervals: Region/Out accesses are proved per thread, In buffers
    are read-only."""
    return (op.opcode in ("load", "store", "atomic", "mma_load", "mma_copy")
            and op.operands[0].type.space == "shared")


@record
class Cond:
    """A boolean value: ('cmp', pred, a, b) | ('and'|'or', c1, c2) | ('not', c) | ('opaque',)."""

    kind: str
    args: tuple = ()
    uniform: bool = False

    def facts(self, truth: bool) -> list:
        k = self.kind
        if k == "not":
            return self.args[0].facts(not truth)
        if k == "and" and truth or k == "or" and not truth:
            return self.args[0].facts(truth) + self.args[1].facts(truth)
        if k != "cmp":
            return []
        pred, a, b = self.args
        if not truth:
            pred = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}[pred]
        return {"lt": [b - a - 1], "le": [b - a], "gt": [a - b - 1], "ge": [a - b],
                "eq": [a - b, b - a], "ne": []}[pred]


def _and(a: Cond, b: Cond) -> Cond:
    for x, y in ((a, b), (b, a)):
        if x.kind == "const":
            return y if x.args[0] else x
    return Cond("and", (a, b), uniform=a.uniform and b.uniform)


def _or(a: Cond, b: Cond) -> Cond:
    for x, y in ((a, b), (b, a)):
        if x.kind == "const":
            return x if x.args[0] else y
    return Cond("or", (a, b), uniform=a.uniform and b.uniform)


class _InBounds(Poly):
    """A fact from an earlier access being in bounds. The range proofs of :mod:`.widths` use it;
    an access's own facts (what ownership proofs search) leave it out, to keep them small."""

    __slots__ = ()


@record
class Access:
    op: object
    buf: object            # the buffer Value
    kind: str              # 'load' | 'store' | 'atomic'
    index: list            # Polys
    facts: list            # Polys >= 0 holding where the access runs
    interval: int
    segs: dict             # loop id -> barrier count before it in that loop's body (loops
    #                        with a barrier directly in their body only)
    block: object          # the IR block containing the op


@record
class Barrier:
    op: object
    ctrl: list             # [(kind, op, uniform)] enclosing control flow, outermost first


@record
class _Loop:
    op: object
    direct_barrier: bool
    seg: int = 0


class _Carried:
    """What a loop's carried values are known to be in every iteration: block-uniform or not,
    an interval, and which are induction variables (init + d * iteration).

    The interval is the hull of the initial value and every yielded value, each bounded with
    the facts that hold where the iteration ends (the loop test among them: ``while s < 256:
    s *= 2`` yields at most 510). After a few rounds a growing interval is widened to the
    type's range, then narrowed once to the hull of the initial value and one more update.
    The walk stops only when a round's yielded values lie in the interval its carried values
    were bound to, so the interval holds in every iteration."""

    ROUNDS = 3

    def __init__(self, walk, inits, ind: dict):
        self.walk, self.inits, self.ind = walk, list(inits), ind
        self.uniform = [walk.uniform(v) for v in inits]
        self.start = [walk.range_of(v) for v in inits]
        self.ranges = list(self.start)   # (an induction's: only for the loop's results)
        self.widened, self.narrowed = set(), set()
        self.rounds = 0

    def bind(self, args, counter):
        w = self.walk
        for k, (a, u, (lo, hi)) in enumerate(zip(args, self.uniform, self.ranges)):
            if k in self.ind:
                w.env[a.id] = w.get(self.inits[k]) + self.ind[k] * counter
            else:
                w._opaque(a, u, lo, hi)

    def update(self, args, ys, facts: list) -> bool:
        """Fold in the walk of the body just done (``facts``: what holds where it yields);
        True when the body must be walked again. Inductions stay only where the update was
        exact (every add/sub on the way provably did not wrap, given the value was exact on
        entry)."""
        w = self.walk
        self.rounds += 1
        uniform = [u and w.uniform(y) for u, y in zip(self.uniform, ys)] + self.uniform[len(ys):]
        ind = {k: d for k, d in self.ind.items() if w.get(ys[k]) - w.get(args[k]) == d}
        ranges = list(self.ranges)
        for k, (a, y) in enumerate(zip(args, ys)):
            (lo, hi), (ylo, yhi) = ranges[k], w.range_of(y)
            if lo is None:
                continue
            narrow = k in self.widened and k not in self.narrowed
            late = self.rounds >= self.ROUNDS or k in self.narrowed
            if (ylo < lo or yhi > hi) and late or narrow:
                ylo, yhi = w.tighten(y, ylo, yhi, facts)   # (a search: only before widening)
            if ylo < lo or yhi > hi:
                if not late:
                    ranges[k] = (min(lo, ylo), max(hi, yhi))
                    if ranges[k] == type_range(a.type):   # as wide as it gets: narrow next
                        self.widened.add(k)
                else:
                    ranges[k] = type_range(a.type)
                    self.widened.add(k)
            elif narrow:   # from a range holding every value: the start and one more update
                self.narrowed.add(k)
                ranges[k] = (min(self.start[k][0], ylo), max(self.start[k][1], yhi))
        again = uniform != self.uniform or ind.keys() != self.ind.keys() or ranges != self.ranges
        self.uniform, self.ind, self.ranges = uniform, ind, ranges
        return again


def _hull(k: str, a: tuple, b: tuple):
    """The integers ``x k y`` can be for x in [a], y in [b] (None where a range is unknown)."""
    if a[0] is None or b[0] is None:
        return None
    if k == "add":
        return a[0] + b[0], a[1] + b[1]
    if k == "sub":
        return a[0] - b[1], a[1] - b[0]
    ends = [x * y for x in a for y in b]
    return min(ends), max(ends)


class Walk:
    """Runs the symbolic pass; results in ``accesses``, ``barriers``, ``table``, ``env``."""

    def __init__(self, kernel, warp_size: int | None = None):
        self.kernel = kernel
        self.warp_size = warp_size   # the width this walk proves for (None: lanes are opaque)
        self.table = SymbolTable()
        self.env: dict[int, object] = {}
        self.accesses: list[Access] = []
        self.barriers: list[Barrier] = []
        self.collectives: list[Barrier] = []   # kaio.mma ops (warp-collective), with their ctrl
        self.frag_stores: list[Access] = []    # kaio.mma.store into Region/Out: index (row0, col0)
        self.parent: dict[int, int] = {}
        self.edges: list[tuple[int, int]] = []   # (a, b): b may follow a with no barrier between
        self.counters: set = set()   # loop iteration-count symbols
        self.wrapped: dict = {}      # opaque symbol -> (exact polynomial, type) it wraps
        self.hulls: dict = {}        # value id -> a range its exact result lies in (_fixed)
        self.n_intervals = 0
        self.cur = self._new_interval()
        self.facts: list = []
        self.ctrl: list = []
        self.loops: list[_Loop] = []
        self.param_names = {}
        self.partitions: dict = {}   # buffer value id -> partition (Region/Out parameters)
        for p, v in zip(kernel.params, kernel.args):
            self.param_names[v.id] = p.name
            if v.is_buffer:
                if v.type.intent in ("region", "out"):
                    self.partitions[v.id] = p.partition or Elementwise()
            elif v.type.is_bool:
                self.env[v.id] = Cond("opaque", uniform=True)
            else:
                lo, hi = type_range(v.type) if v.type.is_int else (None, None)
                self.env[v.id] = self.table.add(p.name, uniform=True, lo=lo, hi=hi)
        # what check_launch guarantees on every launch of this kernel
        self.math = SymMath(self.table, self.shape, warp_size)
        self.pins: dict = {}
        self.launch_facts: list = []
        for v in kernel.args:
            part = self.partitions.get(v.id)
            if part is not None:
                self.pins.update(part.launch_pins(v.type.ndim))
                self.launch_facts += part.launch_facts(self.math, v)
        self.pins.update(block_pins(kernel.attrs.get("block")))   # @kaio.kernel(block=...)
        axes, products = geometry_facts(self.math)
        self.fits = Fits(self.table, self.pins, self.launch_facts + axes, products)
        self.block(kernel.body)

    def shape(self, buf, axis) -> Poly:
        """A buffer value's extent (its symbol is keyed by the value, not by its name)."""
        return self.table.shape(buf, axis, self.param_names.get(buf.id, buf.name or "buf"))

    # --- intervals (union-find) -------------------------------------------------------
    def _new_interval(self) -> int:
        self.n_intervals += 1
        self.parent[self.n_intervals] = self.n_intervals
        return self.n_intervals

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        self.parent[b] = a
        return a

    def concurrent_classes(self) -> list:
        """Pairs (c1, c2) of distinct interval classes where c2 may follow c1 with no barrier
        between (reachable over the edges): accesses in them may meet between the same two
        barriers. All threads of a block take the same way at every loop that holds a
        barrier (uniformity), so two threads in one phase are on one path: one's interval
        reaches the other's."""
        succ: dict = {}
        for a, b in self.edges:
            a, b = self.find(a), self.find(b)
            if a != b:
                succ.setdefault(a, []).append(b)
        out = []
        for c in sorted(succ):
            seen, todo = set(), list(succ[c])
            while todo:
                d = todo.pop()
                if d not in seen and d != c:
                    seen.add(d)
                    out.append((c, d))
                    todo += succ.get(d, [])
        return out

    @staticmethod
    def _quiet(blk) -> bool:
        """``blk`` holds no barrier and touches no shared array (a ``while`` test like that may
        be placed anywhere between the body's last interval and the next head or the exit)."""
        return not any(o.opcode in BARRIER_OPS or touches_shared(o) for o in blk.walk())

    def _surely(self, c: Cond, truth: bool) -> bool:
        """``c`` provably has the value ``truth`` where the walk is now."""
        k = c.kind
        if k == "const":
            return bool(c.args[0]) == truth
        if k == "not":
            return self._surely(c.args[0], not truth)
        if k in ("and", "or"):
            both = (k == "and") == truth
            parts = [self._surely(a, truth) for a in c.args]
            return all(parts) if both else any(parts)
        if k != "cmp":
            return False
        pred, a, b = c.args
        if (pred == "ne") == truth:   # a != b: one of the strict orders
            return self._provably(a - b - 1) or self._provably(b - a - 1)
        return all(self._provably(f) for f in c.facts(truth))

    # --- values -----------------------------------------------------------------------
    def get(self, v):
        got = self.env.get(v.id)
        if got is None:  # defined somewhere we did not model: unknown, varying
            got = self._opaque(v, False)
        return got

    def _loop_ids(self):
        return tuple(id(lp.op) for lp in self.loops)

    def _opaque(self, v, uniform: bool, lo=None, hi=None):
        """An unknown value; an integer still lies in its type's range (or in [lo, hi])."""
        if getattr(v.type, "is_bool", False):
            val = Cond("opaque", uniform=uniform)
        else:
            if lo is None and self._int(v):
                lo, hi = type_range(v.type)
            val = self.table.opaque(v.name or "v", uniform=uniform, loops=self._loop_ids(), lo=lo, hi=hi)
        self.env[v.id] = val
        return val

    def _fixed(self, r, p: Poly, hull=None):
        """``r`` is ``p`` computed in r's fixed-width type: exact only where it cannot wrap.
        ``hull``: an interval the exact result lies in, from the operands' ranges (an i64
        product of two i32 values always fits, though its polynomial's bounds do not show it)."""
        lo, hi = type_range(r.type)
        self.hulls.pop(r.id, None)
        if hull is not None and lo <= hull[0] and hull[1] <= hi:
            self.env[r.id] = p
            self.hulls[r.id] = hull   # (i64(g) is below 2**31 though g's polynomial may not show it)
        elif self.fits.check(p, r.type, self.facts):
            self.env[r.id] = p
        else:   # (the diagnostics evaluate it concretely: p read in r's type)
            o = self._opaque(r, self.table.is_uniform(p))
            self.wrapped[next(iter(o.symbols()))] = (p, r.type)

    def _provably(self, p: Poly) -> bool:
        """``p >= 0`` where the walk is now."""
        return trivially_nonneg(p, self.table) or self.fits.nonneg(p, self.facts)

    def uniform(self, v) -> bool:
        x = self.get(v)
        return x.uniform if isinstance(x, Cond) else self.table.is_uniform(x)

    def _int(self, v) -> bool:
        t = v.type
        return not isinstance(t, BufType) and t.is_int

    # --- walking ----------------------------------------------------------------------
    def block(self, blk):
        for op in blk.ops:
            self.op(op, blk)

    def op(self, op, blk):
        handler = getattr(self, "op_" + op.opcode, None)
        if handler is not None:
            handler(op, blk)
            return
        for r in op.regions:  # unknown structured op: walk conservatively
            self.block(r)
        uni = all(self.uniform(v) for v in op.operands if not v.is_buffer)
        for r in op.results:
            self._opaque(r, uni and op.opcode not in ("shuffle", "vote", "ballot", "warp_reduce"))

    def op_const(self, op, blk):
        v = op.attrs["value"]
        r = op.result
        if r.type.is_bool:
            self.env[r.id] = Cond("const", (bool(v),), uniform=True)
        elif r.type.is_int:
            self.env[r.id] = Poly.const(int(v))
        else:
            self.env[r.id] = self.table.opaque("c", uniform=True)

    def _binary(self, op, blk):
        a, b = op.operands
        r = op.result
        if r.type.is_bool and op.opcode in ("and", "or"):
            ca, cb = self.get(a), self.get(b)
            self.env[r.id] = Cond(op.opcode, (ca, cb), uniform=ca.uniform and cb.uniform)
            return
        if not self._int(r):
            return self._opaque(r, self.uniform(a) and self.uniform(b))
        pa, pb = self.get(a), self.get(b)
        k, t = op.opcode, r.type
        nonneg_a = not t.is_signed or trivially_nonneg(pa, self.table)
        if k in ("add", "sub", "mul"):
            self._fixed(r, pa + pb if k == "add" else pa - pb if k == "sub" else pa * pb,
                        _hull(k, self.range_of(a), self.range_of(b)))
        elif k in ("div", "rem", "min", "max"):
            self.env[r.id] = self.table.atom(k, pa, pb, type_range(t))
        elif k in ("shl", "shr") and pb.is_const and not 0 <= pb.value < t.bits:
            # the amount is read as unsigned: past the width, shl gives 0, shr 0 or -1
            if k == "shl" or nonneg_a:
                self.env[r.id] = Poly.const(0)
            else:
                self._opaque(r, self.uniform(a), lo=-1, hi=0)
        elif k == "shl" and pb.is_const:
            self._fixed(r, pa * (1 << pb.value), _hull("mul", self.range_of(a), (1 << pb.value,) * 2))
        elif k == "shr" and pb.is_const and nonneg_a:  # floor division of a value >= 0
            self.env[r.id] = self.table.atom("div", pa, Poly.const(1 << pb.value), type_range(t))
        else:
            self._opaque(r, self.uniform(a) and self.uniform(b))

    op_add = op_sub = op_mul = op_div = op_rem = op_min = op_max = _binary
    op_and = op_or = op_xor = op_shl = op_shr = _binary

    def op_neg(self, op, blk):
        if self._int(op.result):
            a = op.operands[0]
            self._fixed(op.result, -self.get(a), _hull("sub", (0, 0), self.range_of(a)))
        else:
            self._opaque(op.result, self.uniform(op.operands[0]))

    def op_not(self, op, blk):
        a = op.operands[0]
        if op.result.type.is_bool:
            c = self.get(a)
            self.env[op.result.id] = Cond("not", (c,), uniform=c.uniform)
        else:
            self._opaque(op.result, self.uniform(a))

    def op_cmp(self, op, blk):
        a, b = op.operands
        if self._int(a):  # exact values: the comparison of their integers, at any width
            self.env[op.result.id] = Cond("cmp", (op.attrs["pred"], self.get(a), self.get(b)),
                                          uniform=self.uniform(a) and self.uniform(b))
        else:
            self._opaque(op.result, self.uniform(a) and self.uniform(b))

    def op_cast(self, op, blk):
        a, r = op.operands[0], op.result
        if self._int(a) and self._int(r):  # the value survives exactly when it fits
            (alo, ahi), (rlo, rhi) = type_range(a.type), type_range(r.type)
            if rlo <= alo and ahi <= rhi:
                self._fixed(r, self.get(a), self.range_of(a))
            else:   # (narrowing, or a change of signedness)
                self._fixed(r, self.get(a), self.range_of(a))
        elif self._int(r) and a.type.is_bool:
            self._opaque(r, self.uniform(a), lo=0, hi=1)
        else:
            self._opaque(r, self.uniform(a))

    def _special(self, op, blk):
        axis = op.attrs.get("axis", 0)
        w = self.warp_size
        if op.opcode == "lane_id":
            if w is None:
                self._opaque(op.result, False)
            else:   # warps are runs of consecutive linear thread ids on every target
                self.env[op.result.id] = self.table.atom("rem", self.math.thread_linear_id(),
                                                         Poly.const(w))
        elif op.opcode == "warp_size":
            if w is None:
                self._opaque(op.result, True, lo=1, hi=64)
            else:
                self.env[op.result.id] = Poly.const(w)
        else:
            self.env[op.result.id] = self.table.geometry(op.opcode, axis)

    op_thread_idx = op_block_idx = op_block_dim = op_grid_dim = op_lane_id = op_warp_size = _special

    def op_shape(self, op, blk):
        self.env[op.result.id] = self.shape(op.operands[0], op.attrs["axis"])

    # --- memory -----------------------------------------------------------------------
    def _record(self, op, blk, kind, n_index):
        buf = op.operands[0]
        index = [self.get(v) for v in op.operands[1:1 + n_index]]
        facts = [f for f in self.facts if not isinstance(f, _InBounds)]
        self.accesses.append(Access(op, buf, kind, index, facts, self.cur,
                                    {id(lp.op): lp.seg for lp in self.loops if lp.direct_barrier}, blk))
        # what follows in this block runs only after this access, which was in bounds (the
        # checker proves race freedom of executions whose accesses are all in bounds)
        for axis, i in enumerate(index):
            if not i.is_const:
                self.facts = self.facts + [_InBounds(i.t), _InBounds((self.shape(buf, axis) - 1 - i).t)]
        return buf, index

    def op_load(self, op, blk):
        buf, index = self._record(op, blk, "load", op.operands[0].type.ndim)
        uni = (buf.type.intent == "in" and buf.type.space == "global"
               and all(self.table.is_uniform(i) for i in index))
        self._opaque(op.result, uni)

    def op_store(self, op, blk):
        self._record(op, blk, "store", op.operands[0].type.ndim)

    def op_atomic(self, op, blk):
        self._record(op, blk, "atomic", op.operands[0].type.ndim)
        self._opaque(op.result, False)

    # --- kaio.mma fragments (warp-collective) -----------------------------------------------
    def op_mma_load(self, op, blk):
        buf = op.operands[0]
        if buf.type.space == "shared":
            # the warp reads a tile whose elements its lanes split in a target's layout: modelled
            # as each thread reading any element (a fresh unbounded index per axis), so a write
            # to the array by another thread in the same barrier interval is a race
            index = [self.table.opaque("tile", loops=self._loop_ids()) for _ in range(buf.type.ndim)]
            facts = [f for f in self.facts if not isinstance(f, _InBounds)]
            self.accesses.append(Access(op, buf, "load", index, facts, self.cur,
                                        {id(lp.op): lp.seg for lp in self.loops if lp.direct_barrier},
                                        blk))
        self.op_mma(op, blk)

    def op_mma(self, op, blk):
        self.collectives.append(Barrier(op, list(self.ctrl)))
        for r in op.results:
            self._opaque(r, False)

    def op_mma_to_a(self, op, blk):
        """Warp-collective (a target may move elements between lanes); no memory."""
        self.op_mma(op, blk)

    op_mma_row_reduce = op_mma_to_a

    def op_mma_apply(self, op, blk):
        """Warp-collective like every fragment op; its region is one lane's code per element
        (loads and arithmetic; its arguments, the element and its coordinates, vary by lane)."""
        self.block(op.regions[0])
        self.op_mma(op, blk)

    def op_mma_store(self, op, blk):
        """A warp-collective store: into a Region/Out it is recorded with its tile origin, which
        the checker proves is the warp's own tile (:mod:`.warp_tiles`)."""
        buf = op.operands[0]
        if buf.type.space == "global" and buf.type.intent in ("region", "out"):
            index = [self.get(v) for v in op.operands[1:1 + buf.type.ndim]]
            facts = [f for f in self.facts if not isinstance(f, _InBounds)]
            self.frag_stores.append(Access(op, buf, "store", index, facts, self.cur, {}, blk))
        self.op_mma(op, blk)

    def op_mma_copy_wait(self, op, blk):
        self.collectives.append(Barrier(op, list(self.ctrl)))

    def op_mma_copy(self, op, blk):
        """Block-collective copy into a shared array: the block's threads share out the tile's
        elements in a target's order, modelled as each thread writing any element of ``dst``;
        the shared check lets the copy meet itself (its own elements are disjoint by
        construction) but nothing else in its barrier interval."""
        dst = op.operands[0]
        index = [self.table.opaque("tile", loops=self._loop_ids()) for _ in range(dst.type.ndim)]
        facts = [f for f in self.facts if not isinstance(f, _InBounds)]
        self.accesses.append(Access(op, dst, "store", index, facts, self.cur,
                                    {id(lp.op): lp.seg for lp in self.loops if lp.direct_barrier},
                                    blk))
        if any(not lp.direct_barrier for lp in self.loops):
            raise CompileError.at(op.loc, "kaio.mma.copy_tile in a loop without kaio.sync(): two "
                                          "iterations' copies into the same shared array would "
                                          "overlap", kernel=self.kernel.name,
                                  hint="end each iteration with kaio.sync() (the copy is visible "
                                       "after the next barrier)")
        self.op_mma(op, blk)

    def op_barrier(self, op, blk):
        self.barriers.append(Barrier(op, list(self.ctrl)))
        for lp in self.loops:
            lp.seg += 1
        self.cur = self._new_interval()

    def op_block_reduce(self, op, blk):
        self.op_barrier(op, blk)
        self._opaque(op.result, True)

    # --- control flow -----------------------------------------------------------------
    def op_if(self, op, blk):
        c = self.get(op.operands[0])
        start = self.cur
        ends = []
        saved = self.facts
        for truth, region in ((True, op.regions[0]), (False, op.regions[1])):
            self.cur, self.facts = start, saved + c.facts(truth)
            self.ctrl.append(("if", op, c.uniform))
            self.block(region)
            self.ctrl.pop()
            ends.append(self.cur)
        self.facts = saved
        self.cur = self.union(ends[0], ends[1]) if ends[0] != start or ends[1] != start else start
        self.cur = self.find(self.cur)
        for i, r in enumerate(op.results):
            ys = [rg.terminator.operands[i] for rg in op.regions if rg.terminator is not None]
            if r.type.is_bool and len(ys) == 2:  # flags (early return, break): keep the logic
                t, e = (self.get(y) for y in ys)
                self.env[r.id] = _or(_and(c, t), _and(Cond("not", (c,), uniform=c.uniform), e))
                continue
            self._opaque(r, c.uniform and all(self.uniform(y) for y in ys))

    def _has_barrier(self, blk, direct=False):
        if direct:
            return any(o.opcode in BARRIER_OPS for o in blk.ops)
        return any(o.opcode in BARRIER_OPS for o in blk.walk())

    def op_for(self, op, blk):
        lb, ub, step = (self.get(v) for v in op.operands[:3])
        inits = op.operands[3:]
        body = op.regions[0]
        ivv = body.args[0]
        uniform_bounds = all(self.uniform(v) for v in op.operands[:3])
        has_barrier = self._has_barrier(body)
        start_acc, start_bar = len(self.accesses), len(self.barriers)
        term = body.terminator
        ys = term.operands if term is not None else []
        carried = _Carried(self, inits, self._inductions(op, body.args[1:], ys, {}))
        up = self._provably(step - 1)                       # runs while iv < ub
        down = not up and self._provably(-step - 1)         # runs while iv > ub
        exact = up or down                                  # (unknown sign: iv is opaque)
        lo, hi = type_range(ivv.type)
        if has_barrier:
            may_skip = not (up and self._provably(ub - 1 - lb) or down and self._provably(lb - ub - 1))
            pre, head = self._loop_head()
        while True:
            del self.accesses[start_acc:], self.barriers[start_bar:]
            entry = self.cur
            self.loops.append(_Loop(op, self._has_barrier(body, direct=True)))
            m = self.table.fresh(f"{ivv.name or 'iv'}_n", nonneg=True, uniform=uniform_bounds)
            self.counters |= m.symbols()
            self.table.info[next(iter(m.symbols()))].loops = self._loop_ids()
            # iv = lb + step*m (m the iteration count) while no increment wraps; checked below
            iv = lb + step * m if exact else self._opaque(ivv, uniform_bounds)
            self.env[ivv.id] = iv
            carried.bind(body.args[1:], m)
            saved = self.facts
            if up:
                self.facts = saved + [ub - 1 - iv]
            elif down:
                self.facts = saved + [iv - ub - 1]
            self.ctrl.append(("for", op, uniform_bounds))
            self.block(body)
            self.ctrl.pop()
            end = self.facts    # what holds when an iteration completes (its accesses in bounds)
            self.facts = saved
            self.loops.pop()
            again = carried.update(body.args[1:], ys, end)
            if exact and not self.fits.nonneg(hi - iv - step if up else iv + step - lo, end):
                exact, again = False, True   # the increment may wrap: iv is only known to pass its test
            if not again:
                break
            self.cur = entry
        if has_barrier:
            self._loop_exit(pre, head, self.cur, self.cur, may_skip)
        for r, u, (rlo, rhi) in zip(op.results, carried.uniform, carried.ranges):
            self._opaque(r, u and uniform_bounds, rlo, rhi)  # the last carried values

    def _inductions(self, loop, args, ys, alias: dict) -> dict:
        """Candidate induction variables: carried integers whose next value is the carried value
        plus or minus loop-invariant values, {position: d} (checked by _exact_inductions)."""
        found = {}
        for k, (a, y) in enumerate(zip(args, ys)):
            if self._int(a):
                d = self._offset(y, a, loop, alias)
                if d is not None:
                    found[k] = d
        return found

    def _offset(self, v, a, loop, alias, depth=0):
        """``v - a`` when v is ``a`` through add/sub of loop-invariant values (else None)."""
        if v is a or alias.get(v.id) is a:
            return Poly()
        op = v.owner
        if depth > 8 or not isinstance(op, Op) or op.opcode not in ("add", "sub"):
            return None
        x, w = op.operands
        inv = self._invariant(w, loop)
        d = self._offset(x, a, loop, alias, depth + 1) if inv is not None else None
        if d is not None:
            return d + inv if op.opcode == "add" else d - inv
        inv = self._invariant(x, loop) if op.opcode == "add" else None
        d = self._offset(w, a, loop, alias, depth + 1) if inv is not None else None
        return None if d is None else d + inv

    def _invariant(self, v, loop, depth=0):
        """The polynomial of ``v`` when it is the same in every iteration of ``loop``: a
        constant, a value defined outside the loop, or one computed inside it from those and
        the thread geometry by + - * (``i += kaio.grid_dim.x * kaio.block_dim.x``). None
        otherwise. Only a candidate inside the loop: an induction stays only where the walked
        update equals it (:meth:`_Carried.update`), so a product that wraps drops it."""
        op = v.owner
        if isinstance(op, Op) and op.opcode == "const":
            return Poly.const(int(op.attrs["value"])) if self._int(v) else None
        node = op
        while node is not None:   # op -> its block -> that block's op -> ...
            if node is loop:
                break
            node = node.parent
        else:
            return self.get(v)
        if not isinstance(op, Op) or depth > 8 or not self._int(v):
            return None
        if op.opcode in ("thread_idx", "block_idx", "block_dim", "grid_dim"):
            return self.table.geometry(op.opcode, op.attrs.get("axis", 0))
        if op.opcode == "shape":
            return self.shape(op.operands[0], op.attrs["axis"])
        if op.opcode == "cast" and self._int(op.operands[0]):
            return self._invariant(op.operands[0], loop, depth + 1)
        if op.opcode not in ("add", "sub", "mul"):
            return None
        a, b = (self._invariant(x, loop, depth + 1) for x in op.operands)
        if a is None or b is None:
            return None
        return a + b if op.opcode == "add" else a - b if op.opcode == "sub" else a * b

    def tighten(self, v, lo: int, hi: int, facts: list) -> tuple:
        """The integer value ``v``, known to lie in [lo, hi], bounded more tightly with
        ``facts`` (a binary search over what :meth:`Fits.nonneg` proves)."""
        p = self.get(v)
        if p.is_const:
            return lo, hi
        a, b = lo, hi           # the least provable upper bound
        while a < b:
            m = (a + b) // 2
            a, b = (a, m) if self.fits.nonneg(m - p, facts) else (m + 1, b)
        new_hi = b
        a, b = lo, new_hi       # the greatest provable lower bound
        while a < b:
            m = (a + b + 1) // 2
            a, b = (m, b) if self.fits.nonneg(p - m, facts) else (a, m - 1)
        return a, new_hi

    def range_of(self, v) -> tuple:
        """(lo, hi) of an integer value (its type's range where nothing tighter is known)."""
        if not self._int(v):
            return None, None
        lo, hi = self.hulls.get(v.id) or type_range(v.type)
        blo, bhi = bounds(self.get(v), self.table)
        return max(lo, blo), min(hi, bhi)

    def op_while(self, op, blk):
        before, after = op.regions
        has_barrier = self._has_barrier(before) or self._has_barrier(after)
        start_acc, start_bar = len(self.accesses), len(self.barriers)
        cond_op, term = before.terminator, after.terminator
        fwd = cond_op.operands[1:] if cond_op is not None else []
        ys = term.operands if term is not None else []
        carried = _Carried(self, op.operands,
                           self._inductions(op, before.args, ys, {a.id: v for a, v in zip(after.args, fwd)}))
        # a test with no barrier and no shared access sits between intervals: the loop leaves
        # from its last interval; otherwise from the test's interval
        quiet_test = cond_op is not None and self._quiet(before)
        if has_barrier:
            may_skip = quiet_test and not self._first_test(op, before, cond_op)
            pre, head = self._loop_head()
        while True:
            del self.accesses[start_acc:], self.barriers[start_bar:]
            entry = self.cur
            lp = _Loop(op, self._has_barrier(after, direct=True) or self._has_barrier(before, direct=True))
            self.loops.append(lp)
            m = self.table.fresh("iter", nonneg=True, uniform=all(carried.uniform))
            self.counters |= m.symbols()
            self.table.info[next(iter(m.symbols()))].loops = self._loop_ids()
            carried.bind(before.args, m)
            saved = self.facts
            self.ctrl.append(("while-before", op, all(carried.uniform)))
            self.block(before)
            self.ctrl.pop()
            test = self.cur
            if has_barrier and not quiet_test:   # the body follows the test, as the exit does
                self.cur = self._new_interval()
                self.edges.append((test, self.cur))
            c = self.get(cond_op.operands[0]) if cond_op is not None else Cond("opaque")
            for a, v in zip(after.args, fwd):
                self.env[a.id] = self.get(v)
            self.facts = self.facts + c.facts(True)
            self.ctrl.append(("while", op, c.uniform))
            self.block(after)
            self.ctrl.pop()
            end, self.facts = self.facts, saved
            self.loops.pop()
            if not carried.update(before.args, ys, end):
                break
            self.cur = entry
        if has_barrier:
            self._loop_exit(pre, head, self.cur, self.cur if quiet_test else test, may_skip)
        for r, v in zip(op.results, fwd):   # the carried values the last test forwards
            k = next((k for k, a in enumerate(before.args) if a is v), None)
            rlo, rhi = carried.ranges[k] if k is not None else (None, None)
            self._opaque(r, c.uniform and all(carried.uniform), rlo, rhi)

    def _loop_head(self) -> tuple:
        """Before a loop that holds a barrier: its iterations start in an interval of their own
        (the head: up to the body's first barrier), which follows the code before the loop
        (iteration 0) and, through :meth:`_loop_exit`'s back edge, the body's last interval
        (iteration i + 1 after iteration i's tail). Edges, not unions: the code before the loop
        and the tail meet only where a path with no barrier leads from one to the other.
        Returns (the interval before the loop, the head), and walks on in the head."""
        pre = self.cur
        self.cur = self._new_interval()
        self.edges.append((pre, self.cur))
        return pre, self.cur

    def _loop_exit(self, pre: int, head: int, tail: int, leave: int, may_skip: bool):
        """After such a loop: the back edge tail -> head, and a fresh interval for the code
        after it, which follows ``leave`` (where the loop's test fails: the tail, or a while
        test's own interval) and, when the loop may run zero times with no barrier, ``pre``.
        Two threads at different iterations meet only across the back edge, where their
        accesses sit at different barrier counts of the body (``Access.segs``; a loop whose
        barriers are all nested has none), so the shared check gives them distinct iteration
        counts."""
        self.edges.append((tail, head))
        self.cur = self._new_interval()
        self.edges.append((leave, self.cur))
        if may_skip:
            self.edges.append((pre, self.cur))

    def _first_test(self, op, before, cond_op) -> bool:
        """A while loop's condition provably holds on entry: its condition region (barrier-free,
        no shared access: :meth:`_quiet`) walked with the carried values' initial values (the
        loop's walk then drops what it recorded)."""
        for a, v in zip(before.args, op.operands):
            self.env[a.id] = self.get(v)
        saved = self.facts
        self.block(before)
        holds = self._surely(self.get(cond_op.operands[0]), True)
        self.facts = saved
        return holds

    def op_yield(self, op, blk):
        pass

    def op_condition(self, op, blk):
        pass
