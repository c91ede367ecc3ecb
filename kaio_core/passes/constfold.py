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

from ..dtypes import DType
from ..ir.core import Block, Kernel, Op, Value
from ..ir.rewrite import discard
from .fold_eval import eval_op

_MAX_ROUNDS = 8


def run(kernel: Kernel) -> Kernel:
    """Fold ``kernel`` in place (until nothing changes) and return it."""
    for _ in range(_MAX_ROUNDS):
        folder = _Folder()
        folder.block(kernel.body)
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


def _const_op(anchor: Op, value, dtype, name=None) -> Op:
    return Op("const", [], [dtype], {"value": value}, loc=anchor.loc,
              result_names=[name] if name else None)


class _Folder:
    """One folding sweep. Each op handler returns None (keep the op) or the list of ops that
    replace it (its results already replaced, through use-lists); blocks are rebuilt in one
    pass, so a sweep is linear in the kernel's size."""

    def __init__(self):
        self.changed = False

    def replace(self, old: Value, new: Value):
        old.replace_all_uses_with(new)
        self.changed = True

    def block(self, b: Block):
        out = []
        for op in b.ops:
            for r in op.regions:
                self.block(r)
            repl = self.op(op)
            if repl is None:
                out.append(op)
                continue
            op.parent = None
            for o in repl:
                o.parent = b
            out.extend(repl)
            discard(op)
        b.ops = out

    def op(self, op: Op):
        name = op.opcode
        if name == "if":
            return self.fold_if(op)
        if name == "for":
            return self.fold_for(op)
        if name == "select":
            return self.fold_select(op)
        if name == "const" or len(op.results) != 1 or op.regions:
            return None
        if op.operands and all(_is_const(v) for v in op.operands):
            value = eval_op(op, [const_value(v) for v in op.operands])
            if value is not None:
                c = _const_op(op, value, op.result.type, op.result.name)
                self.replace(op.result, c.result)
                return [c]
        return self.identity(op)

    def identity(self, op: Op):
        t = op.result.type
        if len(op.operands) != 2 or op.opcode == "cmp" or not isinstance(t, DType) or t.is_bool:
            return None
        a, b = op.operands
        cb, ca = const_value(b), const_value(a)
        name = op.opcode
        out = None
        if t.is_int:
            if (name in ("add", "sub", "or", "xor", "shl", "shr") and cb == 0) or \
                    (name in ("add", "or", "xor") and ca == 0):
                out = a if cb == 0 else b
            elif name == "mul" and (cb == 0 or ca == 0):
                c = _const_op(op, 0, t)
                self.replace(op.result, c.result)
                return [c]
        if name == "mul" and (cb == 1 or ca == 1):
            out = a if cb == 1 else b
        elif name == "div" and cb == 1 and not op.attrs.get("fast"):
            out = a
        if out is None:
            return None
        self.replace(op.result, out)
        return []

    def fold_select(self, op: Op):
        c, a, b = op.operands
        cv = const_value(c)
        if cv is None and a is not b:
            return None
        self.replace(op.result, a if (a is b or cv) else b)
        return []

    def fold_if(self, op: Op):
        cv = const_value(op.operands[0])
        if cv is None:
            return None
        taken = op.regions[0 if cv else 1]
        term = taken.terminator
        for r, v in zip(op.results, term.operands if term is not None else []):
            self.replace(r, v)
        self.changed = True
        moved = [o for o in taken.ops if o is not term]
        taken.ops = [term] if term is not None else []   # what stays is dropped with the if
        return moved

    def fold_for(self, op: Op):
        lb, ub, step = (const_value(v) for v in op.operands[:3])
        if lb is None or ub is None or step is None:
            return None
        if (step > 0 and lb >= ub) or (step < 0 and lb <= ub):
            for r, v in zip(op.results, op.operands[3:]):
                self.replace(r, v)
            self.changed = True
            return []
        return None
