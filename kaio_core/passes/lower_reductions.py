"""Lower ``warp_reduce`` and ``block_reduce`` to shuffles, shared memory and barriers.

``warp_reduce{op}`` becomes a guarded shuffle-down tree: for offsets ``warp_size/2, ..., 1``,
``v = v op shuffle_down(v, offset)`` where lane + offset is a lane that exists (a warp is partial
when the block's thread count is not a multiple of the width), then lane 0's value is broadcast
with ``shuffle(v, 0)``, so every lane gets the reduction over the warp's existing lanes. Its
combination order depends on the warp width, as warp reductions inherently do.

``block_reduce{op}`` gets a fixed two-level tree whose order does *not* depend on the warp width,
so float sums are bit-identical on every target. With ``t`` the thread's linear id in the block,
``n`` the block's thread count (at most 1024), ``l = t % 32`` and ``g = t // 32``:

    for s in 16, 8, 4, 2, 1:              # within each group of 32 consecutive threads
        if l < s and t + s < n: v = v op v[t + s]              (by shuffle_down)
    if l == 0: scratch[g] = v; barrier    # one total per group, ceil(n / 32) of them
    if t < 32:                            # the group totals, by the same tree, in warp 0
        w = scratch[t]   (t < groups)
        for s in 16, ..., 1: if t < s and t + s < groups: w = w op w[t + s]
        if t == 0: scratch[32] = w
    barrier; result = scratch[32]; barrier   # the last barrier lets the scratch be reused

A group of 32 consecutive threads is one warp on NVIDIA and half a wave on AMD (wave64): the
partners ``t + s`` with ``l < s`` never leave the group, so the shuffles pair exactly the same
values at either width. Narrower warps (the reference interpreter's 1- to 16-lane targets) cannot
shuffle within a group; there every thread stores its value and thread 0 runs the same two trees
over the scratch array, in the same order, so the result is still bit-identical.

Three barriers per reduction (a pairwise tree through shared memory
over the whole block needs one per halving step).

Each site gets its own 1024-element shared array, declared at the top of the kernel body.
"""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import Block, Kernel, Op, Value
from ..ir.indexmath import IndexMath
from ..ir.rewrite import expand_in_place

MAX_BLOCK_THREADS = 1024
_COMBINE = {"sum": "add", "max": "max", "min": "min"}


def run(kernel: Kernel, warp_size: int = 32) -> Kernel:
    """Replace every reduction in ``kernel`` (in place) for a target of ``warp_size`` lanes."""
    if warp_size < 1 or warp_size & (warp_size - 1):
        raise ValueError(f"warp_size must be a power of two, got {warp_size}")
    scratch: list[Op] = []     # each site's shared array, the latest first

    def lower(b: Builder, op: Op) -> list[Value]:
        if op.opcode == "warp_reduce":
            return [_warp(b, op, warp_size)]
        buf = _scratch(op, scratch)
        return [_block(b, op, buf) if warp_size >= GROUP else _block_serial(b, op, buf)]

    expand_in_place(kernel.body, lambda op: op.opcode in ("warp_reduce", "block_reduce"), lower)
    for o in scratch:
        o.parent = kernel.body
    kernel.body.ops[0:0] = scratch
    return kernel


def _warp(b: Builder, op: Op, warp_size: int) -> Value:
    im = IndexMath(b)
    v = op.operands[0]
    combine = _COMBINE[op.attrs["op"]]
    lane = b.special("lane_id")
    base = im.sub(im.thread_linear_id(), lane)
    present = im.min(im.sub(im.block_threads(), base), warp_size)  # lanes of this warp that exist
    offset = warp_size // 2
    while offset >= 1:
        other = b.shuffle("down", v, im.const(offset))
        v = b.select(im.lt(im.add(lane, offset), present), b.binary(combine, v, other), v)
        offset //= 2
    return b.shuffle("idx", v, im.const(0))


def _scratch(op: Op, heads: list[Op]) -> Value:
    """A new shared array for reduction ``op``, put in front of ``heads`` (declared at the top
    of the kernel body once every site is lowered)."""
    head = Builder(Block(), op.loc)
    buf = head.shared_array(op.operands[0].type, (MAX_BLOCK_THREADS,), name="reduce_scratch")
    heads[0:0] = head.block.ops
    return buf


def _block(b: Builder, op: Op, buf: Value) -> Value:
    im = IndexMath(b)
    combine = _COMBINE[op.attrs["op"]]
    t = im.thread_linear_id()
    n = im.block_threads()
    lane = b.binary("and", t, im.const(GROUP - 1))         # t >= 0: t % 32 and t // 32
    group = b.binary("shr", t, im.const(GROUP.bit_length() - 1))
    mine = _group_tree(b, im, combine, op.operands[0], lane, t, n)
    with b.if_(b.cmp("eq", lane, im.const(0))) as (leader, _, _):
        with b.at(leader):
            b.store(buf, [group], mine)
    b.barrier()
    groups = b.binary("shr", im.add(n, GROUP - 1), im.const(GROUP.bit_length() - 1))
    with b.if_(im.lt(t, GROUP)) as (warp0, _, _):
        with b.at(warp0):
            with b.if_(im.lt(t, groups), [mine.type]) as (has, none, (total,)):
                with b.at(has):
                    b.yield_(b.load(buf, [t]))
                with b.at(none):
                    b.yield_(mine)          # never combined: t >= groups
            total = _group_tree(b, im, combine, total, t, t, groups)
            with b.if_(b.cmp("eq", t, im.const(0))) as (first, _, _):
                with b.at(first):
                    b.store(buf, [im.const(GROUP)], total)
    b.barrier()
    out = b.load(buf, [im.const(GROUP)])
    b.barrier()
    return out


#: threads per group of the first level: one warp on NVIDIA, half a wave on AMD
GROUP = 32


def _group_tree(b, im, combine, v, lane, t, n):
    """``v op v[t + s]`` for s = 16..1 where ``lane < s`` and ``t + s < n``, by shuffle_down."""
    s = GROUP // 2
    while s >= 1:
        other = b.shuffle("down", v, im.const(s))
        v = b.select(im.and_(im.lt(lane, s), im.lt(im.add(t, s), n)), b.binary(combine, v, other), v)
        s //= 2
    return v


def _block_serial(b: Builder, op: Op, buf: Value) -> Value:
    """The two-level tree of :func:`_block`, run by thread 0 over the scratch array (for warps
    narrower than a group): ``buf[j] op= buf[j + s]`` for lanes ``j < s`` of each group, in the
    order the shuffle tree combines them, then the same tree over the group totals."""
    im = IndexMath(b)
    combine = _COMBINE[op.attrs["op"]]
    t, n = im.thread_linear_id(), im.block_threads()
    b.store(buf, [t], op.operands[0])
    b.barrier()
    with b.if_(b.cmp("eq", t, im.const(0))) as (first, _, _):
        with b.at(first):
            groups = b.binary("shr", im.add(n, GROUP - 1), im.const(GROUP.bit_length() - 1))
            loop, body, g, _ = b.for_(im.const(0), groups, im.const(1))
            with b.at(body):
                base = b.binary("shl", g, im.const(GROUP.bit_length() - 1))
                _serial_tree(b, im, combine, buf, base, im.const(1), im.sub(n, base))  # total at base
                b.yield_()
            _serial_tree(b, im, combine, buf, im.const(0), im.const(GROUP), groups)
    b.barrier()
    out = b.load(buf, [im.const(0)])
    b.barrier()
    return out


def _serial_tree(b, im, combine, buf, base, stride, count):
    """``buf[base + j*stride] op= buf[base + (j + s)*stride]`` for s = 16..1, j < s, j + s < count."""
    s = GROUP // 2
    while s >= 1:
        for j in range(s):
            here, there = im.add(base, im.mul(stride, j)), im.add(base, im.mul(stride, j + s))
            with b.if_(im.lt(im.const(j + s), count)) as (pair, _, _):
                with b.at(pair):
                    b.store(buf, [here], b.binary(combine, b.load(buf, [here]), b.load(buf, [there])))
        s //= 2
