"""The PTX renderer's structured control flow (a mixin of :class:`kaio.backends.ptx._Renderer`):
``if``, ``for`` and ``while`` become labels and predicated branches; region results and
loop-carried values are registers written at ``yield`` (fragments register by register)."""
from __future__ import annotations

from ..ir.types import FragType
from . import ptx_ops
from .ptx_emit import bits_type


class ControlOps:
    def _moves(self, dsts: list[str], srcs: list[str], types) -> None:
        """Parallel move ``dsts[i] = srcs[i]`` (through temporaries when sources overlap)."""
        pairs = [(d, s, t) for d, s, t in zip(dsts, srcs, types) if d != s]
        if any(s in {d for d, _, _ in pairs} for _, s, _ in pairs):
            staged = []
            for d, s, t in pairs:
                tmp = self.em.reg(t)
                self._mov(tmp, s, t)
                staged.append((d, tmp, t))
            pairs = staged
        for d, s, t in pairs:
            self._mov(d, s, t)

    def _mov(self, d, s, t):
        if isinstance(t, FragType):   # a fragment: its registers one by one
            for dr, sr in zip(d.split(","), s.split(",")):
                self.em.ins(f"mov.b32 {dr}, {sr}")
            return
        self.em.ins(f"mov.{'pred' if t.is_bool else bits_type(t)} {d}, {s}")

    def _yield_into(self, block, dsts, types):
        term = block.terminator
        wg = self.wgmma
        if term is not None and wg.pending and any(
                x.id in wg.inflight and self.v(x) != d for x, d in zip(term.operands, dsts)):
            wg.wait(self.em)             # a move would read registers a wgmma still writes
        if term is not None and dsts:
            self._moves(dsts, [self.v(x) for x in term.operands], types)

    def op_if(self, op):
        em = self.em
        then, other = op.regions
        types = [r.type for r in op.results]
        res = [em.define(r) for r in op.results]
        l_else, l_end = em.label("else"), em.label("endif")
        has_else = bool(other.ops) or bool(res)
        self._hoist_rows(then)                       # shared by the branches and what follows
        self._hoist_rows(other)
        wg = self.wgmma.holds(then) or self.wgmma.holds(other)
        if wg:                  # branches start and end with no wgmma in flight
            self.wgmma.wait(em)
        em.bra(l_else if has_else else l_end, self.v(op.operands[0]), negate=True)
        self.block(then)
        if wg:
            self.wgmma.wait(em)
        self._yield_into(then, res, types)
        if has_else:
            em.bra(l_end)
            em.place(l_else)
            self.block(other)
            if wg:
                self.wgmma.wait(em)
            self._yield_into(other, res, types)
        em.place(l_end)

    def op_for(self, op):
        em = self.em
        lb, ub, step, *inits = op.operands
        body = op.regions[0]
        iv_arg, *carried = body.args
        t = iv_arg.type
        self._hoist_rows(body)                       # before the body's own values exist
        iv = em.define(iv_arg)
        regs = [em.define(a) for a in carried]
        types = [a.type for a in carried]
        self._mov(iv, self.v(lb), t)
        self._moves(regs, [self.v(x) for x in inits], types)
        head, end = em.label("for"), em.label("endfor")
        up = self._step_up(op)
        wg = self.wgmma.holds(body)
        if wg:                  # nothing from before the loop runs into its first trip
            self.wgmma.wait(em)
        em.place(head)
        stop = self._loop_exit(t, iv, self.v(ub), up)
        em.bra(end, stop)
        if wg:
            self.wgmma.enter_loop(op, carried)
        self.block(body)
        if wg:                  # the trip's last wgmmas form a group before the back edge
            self.wgmma.end_trip(em)
        self._yield_into(body, regs, types)
        em.ins(f"add.{bits_type(t).replace('b', 's')} {iv}, {iv}, {self.v(step)}")
        em.normalize(iv, t)
        em.bra(head)
        em.place(end)
        for r, reg in zip(op.results, regs):
            em.define(r, reg)
        if wg:                  # after the last trip: every wgmma complete
            self.wgmma.wait(em)

    def _step_up(self, op):
        """The loop's direction: True (step > 0: a constant, or attr ``step_sign = 1``), False
        (a negative constant), or a predicate register ``step > 0`` set once before the loop."""
        step = op.operands[2]
        sop = step.owner
        if op.attrs.get("step_sign") == 1:
            return True
        if getattr(sop, "opcode", None) == "const" and sop.attrs["value"] != 0:
            return sop.attrs["value"] > 0
        up = self.em.tmp("p")
        self.em.ins(f"setp.gt.{ptx_ops.arith(step.type)} {up}, {self.v(step)}, 0")
        return up

    def _loop_exit(self, t, iv, ub, up) -> str:
        """Predicate that ends a for loop: iv >= ub for step > 0, iv <= ub otherwise (``up`` from
        :meth:`_step_up`; a dynamic direction costs two predicated compares, no logic)."""
        em = self.em
        a = ptx_ops.arith(t)
        stop = em.tmp("p")
        if up is True:
            em.ins(f"setp.ge.{a} {stop}, {iv}, {ub}")
        elif up is False:
            em.ins(f"setp.le.{a} {stop}, {iv}, {ub}")
        else:
            em.ins(f"@{up} setp.ge.{a} {stop}, {iv}, {ub}")
            em.ins(f"@!{up} setp.le.{a} {stop}, {iv}, {ub}")
        return stop

    def op_while(self, op):
        em = self.em
        before, after = op.regions
        types = [v.type for v in op.operands]
        cregs = [em.define(a) for a in before.args]
        aregs = [em.define(a) for a in after.args]
        self._moves(cregs, [self.v(x) for x in op.operands], types)
        head, end = em.label("while"), em.label("endwhile")
        em.place(head)
        wg = self.wgmma.holds(before) or self.wgmma.holds(after)
        if wg:                  # no wgmma in flight across the back edge or the exit
            self.wgmma.wait(em)
        self.block(before)
        if wg:
            self.wgmma.wait(em)
        cond = before.terminator
        self._moves(aregs, [self.v(x) for x in cond.operands[1:]], types)
        em.bra(end, self.v(cond.operands[0]), negate=True)
        self.block(after)
        if wg:
            self.wgmma.wait(em)
        self._yield_into(after, cregs, types)
        em.bra(head)
        em.place(end)
        for r, reg in zip(op.results, aregs):
            em.define(r, reg)
