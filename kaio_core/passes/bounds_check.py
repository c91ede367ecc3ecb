"""Checked mode (``@kaio.kernel(checked=True)``, ``KAIO_CHECKED=1``): every load, store and
atomic bounds-checked on the device, every dimension against its own extent.

Each access to a kernel parameter or to a shared/local array of static shape is a *site*,
numbered in program order (pre-order walk, as :func:`sites` lists them). The pass rewrites it as

    ok = idx_0 <u n_0 and idx_1 <u n_1 ...       one unsigned compare per dimension: a
                                                  negative index is a huge unsigned one
    r  = if ok { the access; yield its value } else { record the fault; yield 0 }

Checking each dimension, not the flat offset, is what catches a column past a row's end: its
flat offset is in bounds, in the next row (another thread's under ``rows()``/``tiles()``).
A faulting access is skipped (a load yields 0, a store or atomic does nothing), so the launch
completes, no memory is corrupted, and codegen needs no special case.

The fault record is one more kernel parameter, appended last (:func:`add_record_param`):
``_kaio_fault: buf<i64, 1, global, raw>`` of :data:`RECORD_LEN` zeros, written by the first
faulting thread only (a compare-and-swap on the first slot):

    if atomic_cas(rec[SITE], 0, site + 1) == 0:
        rec[THREAD] = global linear thread id (x fastest, as kaio.global_id in 1-D; in i64)
        rec[INDEX + d] = idx_d

The host derives block and thread ids from the linear id and the launch shape. One linear id
instead of six ids keeps the (cold) fault path short: on the register-resident softmax (32
sites) it is what keeps ptxas within its 64-register cap without spilling.

:mod:`kaio.checked` allocates it per launch, reads it back and raises the ``IndexError``.
Not checked: dynamic shared memory (its extent is the launch's byte count, which no IR op
reads) and kaio's own block-reduction scratch (added later in the pipeline, in bounds by
construction).
"""
from __future__ import annotations

import itertools

from .. import dtypes as dt
from ..errors import CompileError
from ..ir.builder import Builder
from ..ir.core import Kernel, Loc, Op, Param, Value
from ..ir.rewrite import clone_kernel, expand_in_place
from ..ir.types import BufType
from ..records import frozen

RECORD_PARAM = "_kaio_fault"
RECORD_TYPE = BufType(dt.i64, 1, "global", "raw")
#: slots of the fault record (i64 each): site + 1 (0: no fault), linear thread id, the index
SITE, THREAD, INDEX = 0, 1, 2
MAX_NDIM = 8
RECORD_LEN = INDEX + MAX_NDIM

_ALLOCS = ("shared_array", "local_array")


@frozen
class Site:
    """One checked access: ``opcode`` (load/store/atomic), the buffer's name, its kernel
    parameter index (None for a shared/local array), its static shape (None for a parameter,
    whose shape is the launch argument's) and the source location."""

    opcode: str
    buffer: str
    param: int | None
    static_shape: tuple | None
    ndim: int
    loc: Loc | None


def _checkable(op: Op, params: dict) -> bool:
    if op.opcode not in ("load", "store", "atomic"):
        return False
    buf = op.operands[0]
    return buf.id in params or isinstance(buf.owner, Op) and buf.owner.opcode in _ALLOCS


def _params(kernel: Kernel) -> dict:
    """value id -> (parameter index, Param) of the kernel's buffer parameters, the fault record
    excepted."""
    rec = record_param(kernel)
    return {v.id: (i, p) for i, (v, p) in enumerate(zip(kernel.args, kernel.params))
            if isinstance(v.type, BufType) and v is not rec}


def buffer_name(buf: Value, params: dict) -> str:
    """How messages name a buffer (the reference interpreter's names for scratch arrays)."""
    if buf.id in params:
        return params[buf.id][1].name
    op = buf.owner
    if op.opcode == "shared_array":
        return buf.name or f"shared array (line {op.loc.line if op.loc else '?'})"
    return buf.name or "local array"


def sites(kernel: Kernel) -> list[Site]:
    """The checked accesses of ``kernel`` in site-number order (what :func:`run` numbers)."""
    params = _params(kernel)
    out = []
    for op in kernel.walk():
        if _checkable(op, params):
            buf = op.operands[0]
            t = buf.type
            out.append(Site(op.opcode, buffer_name(buf, params),
                            params[buf.id][0] if buf.id in params else None,
                            None if buf.id in params else tuple(t.static_shape), t.ndim, op.loc))
    return out


def record_param(kernel: Kernel) -> Value | None:
    """The fault-record parameter of ``kernel`` (the last one), or None."""
    if kernel.params and kernel.params[-1].name == RECORD_PARAM and kernel.args[-1].type == RECORD_TYPE:
        return kernel.args[-1]
    return None


def add_record_param(kernel: Kernel) -> Value:
    """Append the fault-record parameter to ``kernel`` (in place) unless it has it."""
    rec = record_param(kernel)
    if rec is None:
        rec = kernel.body.add_arg(RECORD_TYPE, RECORD_PARAM)
        kernel.params.append(Param(RECORD_PARAM, "buffer"))
    return rec


def with_record_param(kernel: Kernel) -> Kernel:
    """A copy of ``kernel`` (as the frontend made it) taking the fault record as its last
    parameter: the signature a checked kernel is launched with."""
    if any(p.name == RECORD_PARAM for p in kernel.params):
        raise CompileError.at(kernel.loc, f"parameter name '{RECORD_PARAM}' is reserved for "
                              "checked mode's fault record", kernel=kernel.name,
                              hint="rename the parameter")
    k = clone_kernel(kernel)
    add_record_param(k)
    return k


def run(kernel: Kernel) -> Kernel:
    """Guard every access of ``kernel`` (in place); returns it, with the record parameter."""
    rec = add_record_param(kernel)
    params = _params(kernel)
    count = itertools.count()

    def guard(b: Builder, op: Op) -> list[Value]:
        return _guard(b, op, rec, next(count))

    expand_in_place(kernel.body, lambda op: _checkable(op, params), guard)
    return kernel


def _guard(b: Builder, op: Op, rec: Value, site: int) -> list[Value]:
    buf, *rest = op.operands
    t: BufType = buf.type
    if t.ndim > MAX_NDIM:
        raise CompileError.at(op.loc, f"checked mode handles buffers of up to {MAX_NDIM} "
                              f"dimensions, not {t.ndim}")
    idx, values = rest[:t.ndim], rest[t.ndim:]
    ok = None
    for d, i in enumerate(idx):
        wide = dt.u64 if i.type.itemsize == 8 else dt.u32
        n = (b.const(t.static_shape[d], wide) if t.static_shape is not None
             else b.cast(b.shape(buf, d), wide))
        in_d = b.cmp("lt", b.cast(i, wide), n)
        ok = in_d if ok is None else b.binary("and", ok, in_d)
    result_types = [r.type for r in op.results]
    with b.if_(ok, result_types) as (then, other, results):
        with b.at(then):
            access = b.op(op.opcode, [buf, *idx, *values], result_types, op.attrs)
            if result_types:
                b.yield_(access.result)
        with b.at(other):
            _record(b, rec, site, idx)
            if result_types:
                b.yield_(b.const(0, result_types[0]))
    return list(results)


def _record(b: Builder, rec: Value, site: int, idx: list[Value]) -> None:
    """The first faulting thread writes its linear id and the index into the record."""
    i64 = dt.i64
    zero = b.const(0, i64)
    old = b.atomic("cas", rec, [b.const(SITE, dt.INDEX)], zero, b.const(site + 1, i64))
    with b.if_(b.cmp("eq", old, zero)) as (then, _, _):
        with b.at(then):
            b.store(rec, [b.const(THREAD, dt.INDEX)], _linear_thread_id(b))
            for d, i in enumerate(idx):
                b.store(rec, [b.const(INDEX + d, dt.INDEX)], b.cast(i, i64))


def _linear_thread_id(b: Builder) -> Value:
    """((bz * gy + by) * gx + bx) * (nx * ny * nz) + (tz * ny + ty) * nx + tx, in i64."""
    def ids(name):
        return [b.cast(b.special(name, axis), dt.i64) for axis in range(3)]

    def linear(i, n):   # (i2 * n1 + i1) * n0 + i0
        return b.binary("add", b.binary("mul", b.binary("add", b.binary("mul", i[2], n[1]), i[1]),
                                        n[0]), i[0])

    nthreads = ids("block_dim")
    per_block = b.binary("mul", b.binary("mul", nthreads[0], nthreads[1]), nthreads[2])
    block = linear(ids("block_idx"), ids("grid_dim"))
    return b.binary("add", b.binary("mul", block, per_block), linear(ids("thread_idx"), nthreads))
