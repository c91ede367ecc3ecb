"""Version short fixed-length loops so that the full case runs straight-line code.

A ``blocked(C)`` Region's ``owned()`` loop, and ``range(s, min(s + C, n))`` written by hand, are

    %e = add %lo, C                                   # C a constant, 2 <= C <= MAX_TILE
    %r = for %lo, min(%e, %n), 1, %init (%i, %c) { body; yield %y }

and become

    %full = (lo < e) and (e <= n)                     # lo + C did not wrap, and fits
    %r = if %full { body(lo); body(lo + 1); ...; body(lo + C - 1); yield the carried values }
         else     { the original loop, marked unrolled = 1; yield its results }

In the full case the loop runs exactly those C iterations with those ``iv`` values and the
carried values are combined in the same order, so results are bit-identical; the partial tile at
the end of the buffer takes the original loop. What this buys: every copy indexes ``lo + j`` with
``j`` a constant, so when ``lo`` is a multiple of 4 (``g * C`` with ``C % 4 == 0``) both
emitters turn each run of four neighbouring 4-byte accesses into one 16-byte access
(:mod:`kaio.backends.vector_access`); and the loads of all C copies are scheduled first
(:func:`kaio.passes.loop_body.loads_first`, which moves a load only past stores to other elements), so
they are in flight together.

Eligible bodies are those :mod:`.unroll` accepts (no nested loops, barriers, warp, block or
atomic ops, no array allocations), with at most ``MAX_COPIED_OPS`` ops after copying; a
Region's own ``owned()`` tile (the loop carries ``owned``) may copy up to ``MAX_OWNED_OPS``: its
copies are the point of a blocked or coarsened partition (an exact GELU is ~100 ops after math
expansion, and its 8-element coarsened tile must still become two 16-byte loads).
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir.core import Block, Kernel, Op
from ..ir.indexmath import const_value
from ..ir.rewrite import detach, insert_before
from .loop_body import OpList, body_size, clone_body, loads_first

MAX_TILE = 16
MAX_COPIED_OPS = 256
MAX_OWNED_OPS = 1536


def run(kernel: Kernel) -> Kernel:
    """Version every eligible loop of ``kernel`` in place; returns the kernel."""
    for op in [o for o in kernel.walk() if o.opcode == "for"]:
        tile = _tile(op)
        if tile is not None:
            _version(kernel, op, *tile)
    return kernel


def _tile(op: Op):
    """(C, end value, n value) when ``op`` is ``for lo, min(lo + C, n), 1``, else None."""
    if "unrolled" in op.attrs:
        return None
    lb, ub, step = op.operands[:3]
    if not lb.type.is_int or const_value(step) != 1 or getattr(ub.owner, "opcode", None) != "min":
        return None
    for end, n in (ub.owner.operands, ub.owner.operands[::-1]):
        add = end.owner
        if getattr(add, "opcode", None) != "add":
            continue
        a, b = add.operands
        c = const_value(b) if a is lb else const_value(a) if b is lb else None
        if c is not None and 2 <= c <= MAX_TILE and _body_ok(op, c):
            return c, end, n
    return None


def _body_ok(op: Op, copies: int) -> bool:
    n = body_size(op)
    limit = MAX_OWNED_OPS if "owned" in op.attrs else MAX_COPIED_OPS
    return n is not None and n * copies <= limit


def _version(kernel: Kernel, op: Op, tile: int, end, n) -> None:
    lb, _, _, *inits = op.operands
    t = lb.type
    pre = OpList(op.loc)
    no_wrap = pre("cmp", [lb, end], dt.bool_, {"pred": "lt"})
    fits = pre("cmp", [end, n], dt.bool_, {"pred": "le"})
    full = pre("and", [no_wrap, fits], dt.bool_)
    insert_before(op, pre.ops)

    body = op.regions[0]
    then = Block()
    ins = OpList(op.loc)
    carried = list(inits)
    for j in range(tile):
        iv = lb if j == 0 else ins("add", [lb, ins.const(j, t)], t)
        mapping = {body.args[0].id: iv}
        mapping.update({a.id: v for a, v in zip(body.args[1:], carried)})
        ops, carried = clone_body(body, mapping)
        ins.ops.extend(ops)
    for o in loads_first(ins.ops):     # the tile's loads first, so they are in flight together
        then.append(o)
    then.append(Op("yield", list(carried), loc=op.loc))

    other = Block()
    branch = Op("if", [full], [v.type for v in inits], {}, [then, other], op.loc)
    insert_before(op, [branch])
    old_results = list(op.results)
    op.attrs["unrolled"] = 1          # the partial tile: rare, keep it small
    _move_into(op, other)
    other.append(Op("yield", list(old_results), loc=op.loc))
    for old, new in zip(old_results, branch.results):   # every use but the else-yield's
        old.replace_all_uses_with(new, keep=(other.ops[-1],))


def _move_into(op: Op, block: Block) -> None:
    detach(op)
    block.append(op)
