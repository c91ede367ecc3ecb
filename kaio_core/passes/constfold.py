"""Constant folding and exact simplification.

- ops whose operands are all constants fold with the IR's exact semantics
  (:mod:`kaio.passes.fold_eval`); ops that must not fold (integer division by zero,
  approximate math, ``fast`` ops) stay;
- ``select`` on a constant condition, or with equal arms, becomes the chosen operand;
- ``if`` on a constant condition is replaced by its taken region, yields mapped to results;
- ``for`` with a constant zero trip count is replaced by its init values;
- algebraic identities only where they are exact for every input: integer ``x + 0``,
  ``x - 0``, ``x * 0``, ``x | 0``, ``x ^ 0``, ``x << 0``, ``x >> 0``, and ``x * 1``, ``x / 1``
  for integers and floats (exact even for NaN and -0.0). Float ``x + 0.0`` is never simplified
  (``-0.0 + 0.0`` is ``+0.0``).

Dead ops left behind (the folded constants' operands) are removed by :mod:`kaio.passes.dce`.
"""
from __future__ import annotations

from ..ir.core import Block, Kernel, Op, Value
from ..ir.rewrite import erase, inline_region, insert_before, resolve, substitute
from .fold_eval import eval_op

_MAX_ROUNDS = 8


def run(kernel: Kernel) -> Kernel:
    """Fold ``kernel`` in place (until nothing changes) and return it."""
    for _ in range(_MAX_ROUNDS):
        folder = _Folder()
        folder.block(kernel.body)
        substitute(kernel, folder.mapping)
        if not folder.changed:
            break
    return kernel


def const_value(v: Value):
    """The constant a value holds, or ``None`` when it is not a ``const`` result."""
    owner = v.owner
    if isinstance(owner, Op) and owner.opcode == "const":
        return owner.attrs["value"]
    return None


def _is_const(v: Value) -> bool:
    return isinstance(v.owner, Op) and v.owner.opcode == "const"


def _new_const(anchor: Op, value, dtype, name=None) -> Value:
    c = Op("const", [], [dtype], {"value": value}, loc=anchor.loc,
           result_names=[name] if name else None)
    insert_before(anchor, [c])
    return c.result


class _Folder:
    def __init__(self):
        self.mapping: dict[int, Value] = {}   # replaced value id -> replacement
        self.changed = False

    def replace(self, old: Value, new: Value):
        self.mapping[old.id] = new
        self.changed = True

    def block(self, b: Block):
        for op in list(b.ops):
            if op.parent is not b:
                continue  # erased or moved while folding an earlier op
            op.operands = [resolve(self.mapping, v) for v in op.operands]
            for r in op.regions:
                self.block(r)
            self.op(op)

    def op(self, op: Op):
        name = op.opcode
        if name == "if":
            return self.fold_if(op)
        if name == "for":
            return self.fold_for(op)
        if name == "select":
            return self.fold_select(op)
        if name == "const" or len(op.results) != 1 or op.regions:
            return
        if op.operands and all(_is_const(v) for v in op.operands):
            value = eval_op(op, [const_value(v) for v in op.operands])
            if value is not None:
                self.replace(op.result, _new_const(op, value, op.result.type, op.result.name))
                erase(op)
                return
        self.identity(op)

    def identity(self, op: Op):
        if len(op.operands) != 2 or op.opcode in ("cmp",):
            return
        a, b = op.operands
        t = op.result.type
        if getattr(t, "is_bool", True) or not hasattr(t, "is_float"):
            return
        cb, ca = const_value(b), const_value(a)
        name = op.opcode
        out = None
        if t.is_int:
            if (name in ("add", "sub", "or", "xor", "shl", "shr") and cb == 0) or \
                    (name in ("add", "or", "xor") and ca == 0):
                out = a if cb == 0 else b
            elif name == "mul" and (cb == 0 or ca == 0):
                self.replace(op.result, _new_const(op, 0, t))
                erase(op)
                return
        if name == "mul" and (cb == 1 or ca == 1):
            out = a if cb == 1 else b
        elif name == "div" and cb == 1 and not op.attrs.get("fast"):
            out = a
        if out is not None and out.type == t:
            self.replace(op.result, out)
            erase(op)

    def fold_select(self, op: Op):
        c, a, b = op.operands
        cv = const_value(c)
        if cv is not None or a is b:
            self.replace(op.result, a if (a is b or cv) else b)
            erase(op)

    def fold_if(self, op: Op):
        cv = const_value(op.operands[0])
        if cv is None:
            return
        yielded = inline_region(op, op.regions[0 if cv else 1])
        for r, v in zip(op.results, yielded):
            self.replace(r, v)
        erase(op)
        self.changed = True

    def fold_for(self, op: Op):
        lb, ub, step = (const_value(v) for v in op.operands[:3])
        if lb is None or ub is None or step is None:
            return
        if (step > 0 and lb >= ub) or (step < 0 and lb <= ub):
            for r, v in zip(op.results, op.operands[3:]):
                self.replace(r, v)
            erase(op)
            self.changed = True
