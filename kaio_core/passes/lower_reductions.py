"""Lower ``warp_reduce`` and ``block_reduce`` to shuffles, shared memory and barriers.

``warp_reduce{op}`` becomes a guarded shuffle-down tree: for offsets ``warp_size/2, ..., 1``,
``v = v op shuffle_down(v, offset)`` where lane + offset is a lane that exists (a warp is partial
when the block's thread count is not a multiple of the width), then lane 0's value is broadcast
with ``shuffle(v, 0)``, so every lane gets the reduction over the warp's existing lanes. Its
combination order depends on the warp width, as warp reductions inherently do.

``block_reduce{op}`` gets a fixed pairwise tree whose order does *not* depend on the warp width,
so float sums are bit-identical on every target. With ``t`` the thread's linear id in the block
and ``n`` the block's thread count (at most 1024):

    scratch[t] = v; barrier
    for s in 512, 256, ..., 1:            # unrolled, s is a constant
        if t < s and t + s < n: scratch[t] = scratch[t] op scratch[t + s]
        barrier
    result = scratch[0]; barrier          # the last barrier lets the scratch be reused

Two refinements keep exactly this pairing (so exactly these bits) while costing less:
steps with ``s >= n`` change nothing and are skipped under a block-uniform ``if s < n`` (their
barriers too); and when ``n >= 32``, the steps ``s = 16 .. 1`` only involve threads 0..31, which
form one full warp on every target (32 or 64 lanes), so warp 0 runs them with
``shuffle_down`` (the partner's running value is the value ``scratch[t + s]`` would hold)
instead of shared memory and five barriers.

Each site gets its own 1024-element shared array, declared at the top of the kernel body.
Thread ``t``'s own partial ``scratch[t]`` is carried in a register (an ``if`` result), since
no other thread writes it; the pairing and so the bits are those of the tree above.
"""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import Block, Kernel, Op, Value
from ..ir.indexmath import IndexMath
from ..ir.rewrite import erase, insert_before, replace_all_uses

MAX_BLOCK_THREADS = 1024
_COMBINE = {"sum": "add", "max": "max", "min": "min"}


def run(kernel: Kernel, warp_size: int = 32) -> Kernel:
    """Replace every reduction in ``kernel`` (in place) for a target of ``warp_size`` lanes."""
    if warp_size < 1 or warp_size & (warp_size - 1):
        raise ValueError(f"warp_size must be a power of two, got {warp_size}")
    for op in [o for o in kernel.walk() if o.opcode in ("warp_reduce", "block_reduce")]:
        tmp = Builder(Block(), op.loc)
        if op.opcode == "warp_reduce":
            out = _warp(tmp, op, warp_size)
        else:
            out = _block(tmp, op, _scratch(kernel, op))
        insert_before(op, tmp.block.ops)
        replace_all_uses(kernel, op.result, out)
        erase(op)
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


def _scratch(kernel: Kernel, op: Op) -> Value:
    head = Builder(Block(), op.loc)
    buf = head.shared_array(op.operands[0].type, (MAX_BLOCK_THREADS,), name="reduce_scratch")
    body = kernel.body
    for o in head.block.ops:
        o.parent = body
    body.ops[0:0] = head.block.ops
    return buf


def _block(b: Builder, op: Op, buf: Value) -> Value:
    im = IndexMath(b)
    combine = _COMBINE[op.attrs["op"]]
    t = im.thread_linear_id()
    n = im.block_threads()
    mine = op.operands[0]
    b.store(buf, [t], mine)
    b.barrier()
    for s in _strides(MAX_BLOCK_THREADS // 2, WARP_TAIL):
        mine = _shared_step(b, im, combine, buf, t, n, mine, s)
    full = b.cmp("ge", n, im.const(WARP_TAIL))  # block-uniform
    with b.if_(full) as (then, other, _):
        with b.at(then):
            _warp_tail(b, im, combine, buf, t, mine)
        with b.at(other):  # a block of fewer than 32 threads: the same steps in shared memory
            for s in _strides(WARP_TAIL // 2, 1):
                mine = _shared_step(b, im, combine, buf, t, n, mine, s)
    b.barrier()
    out = b.load(buf, [im.const(0)])
    b.barrier()
    return out


#: below this stride the tree's remaining steps stay inside threads 0..31 (one warp everywhere)
WARP_TAIL = 32


def _strides(hi: int, lo: int):
    s = hi
    while s >= lo:
        yield s
        s //= 2


def _shared_step(b, im, combine, buf, t, n, mine, s):
    """One tree step through shared memory, skipped (barrier included) when s >= n."""
    with b.if_(im.lt(s, n), [mine.type]) as (live, skip, (out,)):  # block-uniform
        with b.at(live):
            partner = im.add(t, s)
            active = im.and_(im.lt(t, s), im.lt(partner, n))
            # only thread t writes scratch[t], so its running value stays in a register
            with b.if_(active, [mine.type]) as (then, other, (merged,)):
                with b.at(then):
                    v = b.binary(combine, mine, b.load(buf, [partner]))
                    b.store(buf, [t], v)
                    b.yield_(v)
                with b.at(other):
                    b.yield_(mine)
            b.barrier()
            b.yield_(merged)
        with b.at(skip):
            b.yield_(mine)
    return out


def _warp_tail(b, im, combine, buf, t, mine):
    """Steps s = 16..1 in warp 0 by shuffles; thread 0 then stores the total in scratch[0]."""
    with b.if_(im.lt(t, WARP_TAIL)) as (warp0, _, _):
        with b.at(warp0):
            for s in _strides(WARP_TAIL // 2, 1):
                other = b.shuffle("down", mine, im.const(s))
                mine = b.select(im.lt(t, s), b.binary(combine, mine, other), mine)
            with b.if_(b.cmp("eq", t, im.const(0))) as (first, _, _):
                with b.at(first):
                    b.store(buf, [im.const(0)], mine)
