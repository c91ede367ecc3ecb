"""Symbolic execution of a kernel's IR for the race checker.

One pass over the structured IR gives every integer value a polynomial (:mod:`.affine`),
every boolean a :class:`Cond`, and records:

- each memory access (buffer, kind, symbolic index, the facts that hold where it runs, its
  barrier interval and its position inside loops that contain barriers);
- each barrier (``barrier`` op or ``block_reduce``, which contains barriers) with the control
  flow around it, for the uniformity rule.

Uniformity falls out of the symbols: a value is uniform across a block when every symbol it
mentions is (thread ids, loaded data, lane ids and warp results are not).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.types import BufType
from .affine import Poly, SymbolTable, trivially_nonneg

BARRIER_OPS = ("barrier", "block_reduce")
_SIGNED = ("i8", "i16", "i32", "i64")


@dataclass
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


@dataclass
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


@dataclass
class Barrier:
    op: object
    ctrl: list             # [(kind, op, uniform)] enclosing control flow, outermost first


@dataclass
class _Loop:
    op: object
    direct_barrier: bool
    seg: int = 0


class Walk:
    """Runs the symbolic pass; results in ``accesses``, ``barriers``, ``table``, ``env``."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.table = SymbolTable()
        self.env: dict[int, object] = {}
        self.accesses: list[Access] = []
        self.barriers: list[Barrier] = []
        self.parent: dict[int, int] = {}
        self.n_intervals = 0
        self.cur = self._new_interval()
        self.facts: list = []
        self.ctrl: list = []
        self.loops: list[_Loop] = []
        self.param_names = {}
        for p, v in zip(kernel.params, kernel.args):
            self.param_names[v.id] = p.name
            if not v.is_buffer:
                self.env[v.id] = (self.table.add(p.name, uniform=True) if not v.type.is_bool
                                  else Cond("opaque", uniform=True))
        self.block(kernel.body)

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

    # --- values -----------------------------------------------------------------------
    def get(self, v):
        got = self.env.get(v.id)
        if got is None:  # defined somewhere we did not model: unknown, varying
            got = self._opaque(v, False)
        return got

    def _loop_ids(self):
        return tuple(id(lp.op) for lp in self.loops)

    def _opaque(self, v, uniform: bool):
        if getattr(v.type, "is_bool", False):
            val = Cond("opaque", uniform=uniform)
        else:
            val = self.table.opaque(v.name or "v", uniform=uniform, loops=self._loop_ids())
        self.env[v.id] = val
        return val

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
        k = op.opcode
        if k in ("add", "sub", "mul"):
            self.env[r.id] = pa + pb if k == "add" else pa - pb if k == "sub" else pa * pb
        elif k in ("div", "rem", "min", "max") and r.type.is_signed:
            self.env[r.id] = self.table.atom(k, pa, pb)
        elif k == "shl" and pb.is_const and 0 <= pb.value < 31:
            self.env[r.id] = pa * (1 << pb.value)
        elif k == "shr" and pb.is_const and 0 <= pb.value < 31 and trivially_nonneg(pa, self.table):
            self.env[r.id] = self.table.atom("div", pa, Poly.const(1 << pb.value))
        else:
            self._opaque(r, self.uniform(a) and self.uniform(b))

    op_add = op_sub = op_mul = op_div = op_rem = op_min = op_max = _binary
    op_and = op_or = op_xor = op_shl = op_shr = _binary

    def op_neg(self, op, blk):
        if self._int(op.result):
            self.env[op.result.id] = -self.get(op.operands[0])
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
        if self._int(a) and a.type.name in _SIGNED:
            self.env[op.result.id] = Cond("cmp", (op.attrs["pred"], self.get(a), self.get(b)),
                                          uniform=self.uniform(a) and self.uniform(b))
        else:
            self._opaque(op.result, self.uniform(a) and self.uniform(b))

    def op_cast(self, op, blk):
        a, r = op.operands[0], op.result
        if self._int(a) and self._int(r) and a.type.is_signed and r.type.is_signed \
                and r.type.bits >= a.type.bits:
            self.env[r.id] = self.get(a)
        else:
            self._opaque(r, self.uniform(a))

    def _special(self, op, blk):
        axis = op.attrs.get("axis", 0)
        if op.opcode == "lane_id":
            self._opaque(op.result, False)
        elif op.opcode == "warp_size":
            self._opaque(op.result, True)
        else:
            self.env[op.result.id] = self.table.geometry(op.opcode, axis)

    op_thread_idx = op_block_idx = op_block_dim = op_grid_dim = op_lane_id = op_warp_size = _special

    def op_shape(self, op, blk):
        buf, axis = op.operands[0], op.attrs["axis"]
        st = buf.type.static_shape
        if st is not None:
            self.env[op.result.id] = Poly.const(st[axis])
            return
        name = f"{self.param_names.get(buf.id, buf.name or 'buf')}.shape[{axis}]"
        if name not in self.table.info:
            self.table.add(name, nonneg=True, uniform=True)
        self.env[op.result.id] = Poly.sym(name)

    # --- memory -----------------------------------------------------------------------
    def _record(self, op, blk, kind, n_index):
        buf = op.operands[0]
        index = [self.get(v) for v in op.operands[1:1 + n_index]]
        self.accesses.append(Access(op, buf, kind, index, list(self.facts), self.cur,
                                    {id(lp.op): lp.seg for lp in self.loops if lp.direct_barrier}, blk))
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
        uniform_bounds = all(self.uniform(v) for v in op.operands[:3])
        carried_uniform = [self.uniform(v) for v in inits]
        has_barrier = self._has_barrier(body)
        start_acc, start_bar = len(self.accesses), len(self.barriers)
        ind: dict = {}
        while True:
            del self.accesses[start_acc:], self.barriers[start_bar:]
            entry = self.cur
            self.loops.append(_Loop(op, self._has_barrier(body, direct=True)))
            m = self.table.fresh(f"{body.args[0].name or 'iv'}_n", nonneg=True, uniform=uniform_bounds)
            self.table.info[next(iter(m.symbols()))].loops = self._loop_ids()
            iv = lb + step * m
            self.env[body.args[0].id] = iv
            self._bind_carried(body.args[1:], inits, carried_uniform, ind, m)
            saved = self.facts
            if trivially_nonneg(step - 1, self.table):
                self.facts = saved + [ub - 1 - iv]
            elif step.is_const and step.value < 0:
                self.facts = saved + [iv - ub - 1]
            self.ctrl.append(("for", op, uniform_bounds))
            self.block(body)
            self.ctrl.pop()
            self.facts = saved
            self.loops.pop()
            if has_barrier:
                self.cur = self.find(self.union(entry, self.cur))
            term = body.terminator
            ys = term.operands if term is not None else []
            new = [u and self.uniform(y) for u, y in zip(carried_uniform, ys)]
            new_ind = self._inductions(op, body.args[1:], ys, ind)
            if new == carried_uniform[:len(new)] and new_ind.keys() == ind.keys():
                break
            carried_uniform = new + carried_uniform[len(new):]
            ind = new_ind
            self.cur = entry
        for r, u in zip(op.results, carried_uniform):
            self._opaque(r, u and uniform_bounds)

    def _inductions(self, op, args, ys, known: dict) -> dict:
        """Carried integers updated as ``v + d`` with ``d`` loop-invariant: {position: d}."""
        found = dict(known)
        for k, (a, y) in enumerate(zip(args, ys)):
            if k in found or not self._int(a):
                continue
            d = self.get(y) - self.get(a)
            if all(s in self.table.info and id(op) not in self.table.info[s].loops for s in d.symbols()):
                found[k] = d
        return found

    def _bind_carried(self, args, inits, uniform, ind: dict, counter):
        for k, (a, u) in enumerate(zip(args, uniform)):
            if k in ind:
                self.env[a.id] = self.get(inits[k]) + ind[k] * counter
            else:
                self._opaque(a, u)

    def op_while(self, op, blk):
        before, after = op.regions
        carried_uniform = [self.uniform(v) for v in op.operands]
        has_barrier = self._has_barrier(before) or self._has_barrier(after)
        start_acc, start_bar = len(self.accesses), len(self.barriers)
        ind: dict = {}
        while True:
            del self.accesses[start_acc:], self.barriers[start_bar:]
            entry = self.cur
            lp = _Loop(op, self._has_barrier(after, direct=True) or self._has_barrier(before, direct=True))
            self.loops.append(lp)
            m = self.table.fresh("iter", nonneg=True, uniform=all(carried_uniform))
            self.table.info[next(iter(m.symbols()))].loops = self._loop_ids()
            self._bind_carried(before.args, op.operands, carried_uniform, ind, m)
            self.ctrl.append(("while-before", op, all(carried_uniform)))
            self.block(before)
            self.ctrl.pop()
            cond_op = before.terminator
            c = self.get(cond_op.operands[0]) if cond_op is not None else Cond("opaque")
            fwd = cond_op.operands[1:] if cond_op is not None else []
            for a, v in zip(after.args, fwd):
                self.env[a.id] = self.get(v)
            saved = self.facts
            self.facts = saved + c.facts(True)
            self.ctrl.append(("while", op, c.uniform))
            self.block(after)
            self.ctrl.pop()
            self.facts = saved
            self.loops.pop()
            if has_barrier:
                self.cur = self.find(self.union(entry, self.cur))
            term = after.terminator
            ys = term.operands if term is not None else []
            new = [u and self.uniform(y) for u, y in zip(carried_uniform, ys)]
            new_ind = self._inductions(op, before.args, ys, ind)
            if new == carried_uniform[:len(new)] and new_ind.keys() == ind.keys():
                break
            carried_uniform = new + carried_uniform[len(new):]
            ind = new_ind
            self.cur = entry
        for r in op.results:
            self._opaque(r, c.uniform and all(carried_uniform))

    def op_yield(self, op, blk):
        pass

    def op_condition(self, op, blk):
        pass
