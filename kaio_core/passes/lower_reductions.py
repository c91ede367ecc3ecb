"""Lower ``warp_reduce`` and ``block_reduce`` to shuffles, shared memory and barriers.

``warp_reduce{op}`` becomes an xor butterfly: for offsets ``warp_size/2, ..., 2, 1``,
``v = v op shuffle_xor(v, offset)``; every lane ends with the result. Its combination order
depends on the warp width, as warp reductions inherently do.

``block_reduce{op}`` gets a fixed pairwise tree whose order does *not* depend on the warp width,
so float sums are bit-identical on every target. With ``t`` the thread's linear id in the block
and ``n`` the block's thread count (at most 1024):

    scratch[t] = v; barrier
    for s in 512, 256, ..., 1:            # unrolled, s is a constant
        if t < s and t + s < n: scratch[t] = scratch[t] op scratch[t + s]
        barrier
    result = scratch[0]; barrier          # the last barrier lets the scratch be reused

Each site gets its own 1024-element shared array, declared at the top of the kernel body.
Thread ``t``'s own partial ``scratch[t]`` is carried in a register (an ``if`` result), since
no other thread writes it; the pairing and so the bits are those of the tree above.
"""
from __future__ import annotations

from .. import dtypes as dt
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
    v = op.operands[0]
    combine = _COMBINE[op.attrs["op"]]
    offset = warp_size // 2
    while offset >= 1:
        other = b.shuffle("xor", v, b.const(offset, dt.INDEX))
        v = b.binary(combine, v, other)
        offset //= 2
    return v


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
    s = MAX_BLOCK_THREADS // 2
    while s >= 1:
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
        mine = merged
        b.barrier()
        s //= 2
    out = b.load(buf, [im.const(0)])
    b.barrier()
    return out
