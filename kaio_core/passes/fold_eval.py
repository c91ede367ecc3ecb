"""Evaluate one IR op on constant operands, for constant folding.

The arithmetic itself is :mod:`kaio.semantics` -- the same code the reference interpreter
runs, so a folded constant is bit-identical to what the kernel would have computed. This
module adds the folding policy: :func:`eval_op` returns ``None`` (do not fold) where the
result is not fixed by the IR contract or could differ between targets:

- integer ``div``/``rem`` by zero (unspecified value);
- ops carrying ``fast`` (the target's approximation decides the bits);
- ``math`` functions outside :data:`kaio.ir.ops.MATH_EXACT` (portable implementations are
  bit-identical across targets but not necessarily equal to numpy's);
- ``bitcast`` from or to a NaN (constants do not carry NaN payloads).

Constants are canonical Python scalars (:mod:`kaio.ir.scalars`); results are converted back.
"""
from __future__ import annotations

import math

import numpy as np

from .. import semantics as S
from ..ir import ops as O


def _np(v, t):
    return np.asarray(v, dtype=t.storage_np)


def to_python(x, t):
    """A numpy result of dtype ``t`` as a canonical constant value."""
    x = np.asarray(x).reshape(-1)[0]  # one value (some semantics results come back 1-d)
    if t.is_bool:
        return bool(x)
    if t.is_float:
        return float(x)
    return int(x)


def eval_op(op, args: list):
    """Fold ``op`` whose operands hold the constants ``args``; ``None``: do not fold."""
    name = op.opcode
    if op.attrs.get("fast"):
        return None
    ts = [v.type for v in op.operands]
    rt = op.results[0].type
    vals = [_np(a, t) for a, t in zip(args, ts)]
    with np.errstate(all="ignore"):
        if name in O.BINARY:
            if name in ("div", "rem") and ts[0].is_int and args[1] == 0:
                return None
            out = S.binary(name, ts[0], *vals)
        elif name in O.UNARY:
            out = S.unary(name, ts[0], vals[0])
        elif name == "fma":
            out = S.fma(rt, *vals)
        elif name == "cmp":
            out = S.cmp(op.attrs["pred"], ts[0], *vals)
        elif name == "cast":
            out = S.cast(ts[0], rt, vals[0])
        elif name == "bitcast":
            if ts[0].is_float and math.isnan(args[0]):
                return None
            out = S.bitcast(ts[0], rt, vals[0])
            if rt.is_float and np.isnan(out):
                return None
        elif name == "math":
            if op.attrs["fn"] not in O.MATH_EXACT:
                return None
            out = S.math(op.attrs["fn"], ts[0], *vals)
        else:
            return None
    return to_python(out, rt)
