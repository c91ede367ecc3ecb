"""Helpers to build small IR kernels with kaio.ir.Builder for the regions tests."""
from __future__ import annotations

from kaio import dtypes as dt
from kaio.ir import BufType, Builder, Loc, Param
from kaio.ir.indexmath import IndexMath

F32, I32 = dt.f32, dt.i32


def buf(intent, ndim=1, dtype=F32):
    return BufType(dtype, ndim, "global", intent)


def kernel(name, params):
    """params: list of (name, type, partition-or-None). Returns (builder, IndexMath, values)."""
    ps = []
    for pname, t, part in params:
        kind = "buffer" if isinstance(t, BufType) else "scalar"
        ps.append((pname, t, Param(pname, kind, part)))
    b = Builder.for_kernel(name, ps, Loc(__file__, 1))
    b.loc = Loc("<ir>", 1)
    return b, IndexMath(b), {p[0]: v for p, v in zip(params, b.block.args)}


def at(b, line):
    b.loc = Loc("<ir>", line)


def for_range(b, lb, ub, step, name="i"):
    """Context-free helper: returns (body block, iv) of a new for loop (no carried values)."""
    _, body, iv, _ = b.for_(lb, ub, step, iv_name=name)
    return body, iv


def if_then(b, cond):
    with b.if_(cond) as (then, other, _):
        pass
    return then


def tid(m, axis=0):
    return m.special("thread_idx", axis)
