"""The PTX renderer's handlers of kaio.mma ops (a mixin of :class:`kaio.backends.ptx._Renderer`):
each fragment op to :mod:`.ptx_mma`'s instructions, group mmas to Hopper's wgmma where
:mod:`.ptx_wgmma` planned them."""
from __future__ import annotations

from ..ir.ops import is_pure
from . import ptx_mma, ptx_wgmma


class FragmentOps:
    def op_mma_fill(self, op):
        if id(op) in self.wgmma.skip:        # a wgmma's first product overwrites instead
            return
        self.set(op, ptx_mma.fill(self.em, op.result.type, self.v(op.operands[0])))

    def op_mma_load(self, op):
        if id(op) in self.wgmma.skip:        # a wgmma reads the tile through a descriptor
            return
        buf, *idx = op.operands
        self.set(op, ptx_mma.load(self.em, self._buf(buf), op, [self.v(i) for i in idx]))

    def op_mma(self, op):
        if id(op) in self.wgmma.lowered:
            return ptx_wgmma.emit(self, op)
        a, b, c = op.operands[:3]
        d = self.em.define(op.result)
        ptx_mma.mma(self.em, (a.type, b.type, c.type), self.v(a), self.v(b), self.v(c), d)

    def op_mma_store(self, op):
        buf, *idx, acc = op.operands
        scale = None
        if op.attrs.get("scaled"):
            *idx, alpha, beta = idx
            scale = (self.v(alpha), self.v(beta))
        elif op.attrs.get("int_scaled"):     # i32 -> f32 by row and column scale buffers
            *idx, rs, cs = idx
            scale = (self._buf(rs), self._buf(cs))
        ptx_mma.store(self.em, self._buf(buf), op, [self.v(i) for i in idx], self.v(acc), scale)

    def op_mma_apply(self, op):
        """The region once per register of the accumulator, its arguments bound to that
        register, the element's (row, column) in mma.sync's layout and the other fragments'
        same register (a fresh copy each time: the rows and words it computes stay inside)."""
        acc, row0, col0, *others = op.operands
        body = op.regions[0]
        x, r, c, *ys = body.args
        t = acc.type
        regs = [self.v(v).split(",") if v.type is t else
                ptx_mma.broadcast_regs(self.v(v).split(","), v.type, t) for v in (acc, *others)]
        out = self.em.reg(t).split(",")
        coords = ptx_mma.element_coords(self.em, t, self.v(row0), self.v(col0))
        # a region that writes memory (checked mode's fault record) reuses nothing
        memo = None if any(o.opcode in ("store", "atomic") for o in body.walk()) else {}
        for k, (rr, cc) in enumerate(coords):
            for arg, reg in zip((x, r, c, *ys), (regs[0][k], rr, cc, *(g[k] for g in regs[1:]))):
                self.em.define(arg, reg)
            self._apply_body(body, memo)
            self._mov(out[k], self.v(body.terminator.operands[0]), t.dtype)
        self.em.define(op.result, ",".join(out))

    def op_mma_to_a(self, op):
        (acc,) = op.operands
        self.set(op, ptx_mma.to_a(self.em, acc.type, self.v(acc), op.result.type,
                                  op.attrs.get("col0", 0)))

    def op_mma_row_reduce(self, op):
        (acc,) = op.operands
        self.set(op, ptx_mma.row_reduce(self.em, acc.type, self.v(acc), op.attrs["op"], self.mask))

    def _apply_body(self, body, memo: dict | None) -> None:
        """One copy of a mma_apply region. A top-level op whose operands are registers an
        earlier copy already gave the same op reuses its result: elements of one column share
        its column register, so ``scale[c]`` is loaded once per column, not once per element
        (``memo`` is None where the region writes memory: otherwise a load's value cannot
        change between copies)."""
        rows, words = dict(self.rows), dict(self.words)
        for o in body.ops:
            if o.opcode == "yield":
                break
            key = None
            if memo is not None and len(o.results) == 1 and not o.regions and \
                    id(o) not in self.vec and \
                    id(o) not in self.pairs and (is_pure(o) or o.opcode == "load"):
                key = (id(o), tuple(self.v(v) for v in o.operands))
                if key in memo:
                    self.em.define(o.result, memo[key])
                    continue
            self.op(o)
            if key is not None:
                memo[key] = self.v(o.result)
        self.rows, self.words = rows, words

    def op_mma_copy_wait(self, op):
        self.em.ins(f"cp.async.wait_group {op.attrs['pending']}")

    def op_mma_copy(self, op):
        dst, src, row0, col0 = op.operands
        lin, tot = self._linear_thread()
        declared = self.k.attrs.get("block")      # @kaio.kernel(block=...): unroll the copy
        threads = declared[0] * declared[1] * declared[2] if declared else None
        ptx_mma.copy_tile(self.em, op, self._buf(dst), self._buf(src), self.v(row0),
                          self.v(col0), lin, tot, threads)
