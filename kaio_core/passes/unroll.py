"""Unroll small ``for`` loops with a positive step by 4 (a main loop plus the original as remainder).

    %r = for %lb, %ub, %s, %init {step_sign = 1} (%iv, %c) { body; yield %y }

becomes (``k*s`` and the bound computed once, before the loops)

    %ub3 = ub - 3*s                      # guarded, see below
    %m:2 = for %lb, %ub3, %s4, %lb, %init {step_sign = 1, unrolled = 4} (%iv, %ivc, %c) {
      body(iv) ; body(iv + s) ; body(iv + 2s) ; body(iv + 3s)      # carried values chained
      yield iv + s4, y3
    }
    %r = for %m#0, %ub, %s, %m#1 {step_sign = 1, unrolled = 1} (%iv, %c) { body; yield %y }

The main loop runs four bodies only when ``iv + 3s < ub`` holds mathematically, i.e. when the
original loop would run exactly those four iterations with exactly those ``iv`` values, and the
carried values are combined in the original order: results are bit-identical. ``ub - 3s`` must
not wrap: when the step's range (:func:`kaio.passes.loop_facts.value_range`) does not bound it by
``max/4``, the main loop gets the bound ``lb`` (no iteration) when ``s > max/4``; when ``ub``
may be near the type's minimum, ``max(ub, min + 3s) - 3s`` is used. The remainder loop (the
original op, whose results the rest of the kernel already uses) runs what is left.

Grid-stride loops (``strided``, the ``unroll_strided`` switch): a step whose sign is not proven,
such as ``grid_dim.x * block_dim.x`` (it may wrap on the largest grids) or a parameter, is still
computed once, before the loop. Such a loop is unrolled too, its main loop guarded by
``0 < s <= max/4`` at run time (bound ``lb`` and step 1 otherwise, so the main loop, marked
``step_sign = 1``, runs no iteration); the remainder keeps the sign test and runs the loop as
written. A step never positive (its range below 1) is left alone.

Eligible loops: ``step_sign = 1`` (set by :mod:`.loop_facts`) or, with ``strided``, a step of
unknown sign; no ``unrolled`` attr yet, at most :data:`MAX_BODY_OPS` ops, and no nested loops,
barriers, warp or block ops, atomics or array allocations in the body. In the main loop, loads
at the top level of the body (with the pure ops computing their indices) are moved before the
rest, so the four loads are in flight together, when no store they could read from precedes them
(:func:`kaio.passes.loop_body.loads_first`): loads from ``in`` buffers always (they never change
during a launch: the launch rejects a writable buffer that overlaps another buffer, which is also
what makes ``ld.global.nc`` valid), loads from a writable buffer past stores to other elements of
it. Every other op keeps program order.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir.core import Block, Kernel, Op
from ..ir.rewrite import insert_before
from .loop_body import OpList, body_size, clone_body, loads_first
from .loop_facts import value_range

FACTOR = 4
MAX_BODY_OPS = 40


def run(kernel: Kernel, *, strided: bool = True) -> Kernel:
    """Unroll every eligible loop of ``kernel`` in place; returns the kernel. ``strided``: also
    the loops whose step's sign is not proven (the ``unroll_strided`` switch)."""
    ranges: dict = {}
    loops = [op for op in kernel.walk() if op.opcode == "for" and _eligible(op, strided, ranges)]
    for op in loops:
        _unroll(op, ranges)
    return kernel


def _eligible(op: Op, strided: bool, ranges: dict) -> bool:
    if "unrolled" in op.attrs or not op.operands[0].type.is_int:
        return False
    if op.attrs.get("step_sign") != 1:
        rs = value_range(op.operands[2], ranges)
        if not strided or (rs is not None and rs[1] < 1):   # never positive: nothing to gain
            return False
    n = body_size(op)
    return n is not None and n <= MAX_BODY_OPS


def _unroll(op: Op, ranges: dict) -> None:
    lb, ub, s, *inits = op.operands
    t = lb.type
    lo_t, hi_t = t.min_value(), t.max_value()
    pre = OpList(op.loc)
    rs, rub = value_range(s, ranges), value_range(ub, ranges)
    guard = None
    if rs is None or rs[1] > hi_t // FACTOR:       # k*s may wrap: run the main loop only if not
        guard = pre("cmp", [s, pre.const(hi_t // FACTOR, t)], dt.bool_, {"pred": "le"})
        s_max = hi_t // FACTOR
    else:
        s_max = rs[1]
    if op.attrs.get("step_sign") != 1:             # sign unknown: run the main loop only if s > 0
        positive = pre("cmp", [s, pre.const(0, t)], dt.bool_, {"pred": "gt"})
        guard = positive if guard is None else pre("and", [guard, positive], dt.bool_)
    steps = [s] + [pre("mul", [s, pre.const(k, t)], t) for k in range(2, FACTOR + 1)]
    s3, s4 = steps[FACTOR - 2], steps[FACTOR - 1]
    if rub is not None and rub[0] - (FACTOR - 1) * s_max >= lo_t:
        ub3 = pre("sub", [ub, s3], t)
    else:                                            # max(ub, min + 3s) - 3s cannot wrap
        floor = pre("add", [pre.const(lo_t, t), s3], t)
        ub3 = pre("sub", [pre("max", [ub, floor], t), s3], t)
    if guard is not None:
        ub3 = pre("select", [guard, ub3, lb], t)
        s4 = pre("select", [guard, s4, pre.const(1, t)], t)   # keeps the step positive
    insert_before(op, pre.ops)

    body = op.regions[0]
    main_body = Block()
    iv = main_body.add_arg(t, body.args[0].name)
    main_body.add_arg(t)                             # the iv again, carried out as a result
    carried = [main_body.add_arg(a.type, a.name) for a in body.args[1:]]
    ins = OpList(op.loc)
    ivs = [iv] + [ins("add", [iv, sk], t) for sk in steps[:FACTOR - 1]]
    copies: list[list[Op]] = []
    for k in range(FACTOR):
        mapping = {body.args[0].id: ivs[k]}
        mapping.update({a.id: v for a, v in zip(body.args[1:], carried)})
        ops, carried = clone_body(body, mapping)
        copies.append(ops)
    nxt = ins("add", [iv, s4], t)
    main_ops = ins.ops[:-1] + loads_first([o for c in copies for o in c]) + [ins.ops[-1]]
    for o in main_ops:
        main_body.append(o)
    main_body.append(Op("yield", [nxt, *carried], loc=op.loc))
    attrs = dict(op.attrs, step_sign=1, unrolled=FACTOR)
    main = Op("for", [lb, ub3, s4, lb, *inits], [t] + [v.type for v in inits], attrs,
              [main_body], op.loc)
    insert_before(op, [main])
    op.operands = [main.results[0], ub, s, *main.results[1:]]
    op.attrs["unrolled"] = 1
