"""Random small kernels over a grammar of affine indices, guards, loops and barriers, built as
IR, for comparing the static checker's verdict with the reference sanitizer.

A kernel writes a 1-D Region ``y`` (elementwise, blocked(2) or grid_stride) at
``a*g + b*j + c`` (g: global id or thread id, j: an optional loop variable), optionally reads
``y`` at a second such index, and optionally stages values through a shared array with or
without a barrier and a ``tid < s`` guard. Every access is guarded to stay in bounds, so the
only thing that can go wrong at run time is a race.
"""
from __future__ import annotations

from dataclasses import dataclass

from kaio import dtypes as dt
from kaio.ir import BufType, Builder, Loc, Param
from kaio.ir.indexmath import IndexMath
from kaio.regions import Blocked, Elementwise, GridStride

PARTS = {"elementwise": Elementwise(), "blocked": Blocked(2), "grid_stride": GridStride()}
SHARED = 16


@dataclass(frozen=True)
class Affine:
    base: str   # 'gid' | 'tid'
    a: int
    b: int
    c: int


@dataclass(frozen=True)
class Spec:
    part: str
    loop: int              # trip count of the j loop (0: no loop)
    write: Affine
    read: Affine | None    # y[...] read before the write
    guard: int | None      # extra guard: base id < guard
    shared: tuple | None   # (write index Affine on tid, read Affine on tid, barrier, guard s)


def _idx(ix, e: Affine, g, tid, j):
    out = ix.mul(g if e.base == "gid" else tid, e.a)
    if j is not None and e.b:
        out = ix.add(out, ix.mul(j, e.b))
    return ix.add(out, e.c)


def _in_bounds(b, ix, v, n):
    return b.binary("and", b.cmp("ge", v, ix.const(0)), b.cmp("lt", v, n))


def build(spec: Spec):
    part = PARTS[spec.part]
    f32 = dt.f32
    params = [("y", BufType(f32, 1, "global", "region"), Param("y", "buffer", part))]
    b = Builder.for_kernel("rand", params, Loc("<rand>", 1))
    ix = IndexMath(b)
    (y,) = b.kernel.args
    g = ix.add(ix.mul(ix.special("block_idx", 0), ix.special("block_dim", 0)), ix.special("thread_idx", 0))
    tid = ix.special("thread_idx", 0)
    n = b.shape(y, 0)
    one = b.const(1.0, f32)
    body = b.block
    if spec.guard is not None:
        with b.if_(b.cmp("lt", g if spec.write.base == "gid" else tid, ix.const(spec.guard))) as (t, _, _r):
            body = t
    with b.at(body):
        if spec.shared is not None:
            w, r, barrier, s = spec.shared
            sh = b.shared_array(f32, (SHARED,), name="sh")
            wi = _idx(ix, w, g, tid, None)
            with b.if_(_in_bounds(b, ix, wi, ix.const(SHARED))) as (t, _, _r):
                with b.at(t):
                    b.store(sh, [wi], one)
            if barrier:
                b.barrier()
            ri = _idx(ix, r, g, tid, None)
            cond = _in_bounds(b, ix, ri, ix.const(SHARED))
            if s is not None:
                cond = b.binary("and", cond, b.cmp("lt", tid, ix.const(s)))
            with b.if_(cond, [f32]) as (t, e, res):
                with b.at(t):
                    b.yield_(b.load(sh, [ri]))
                with b.at(e):
                    b.yield_(b.const(0.0, f32))
            one = b.binary("add", one, res[0])  # keep the read alive through DCE
        j, blk = None, b.block
        if spec.loop:
            _, blk, j, _ = b.for_(ix.const(0), ix.const(spec.loop), ix.const(1), iv_name="j")
        with b.at(blk):
            wi = _idx(ix, spec.write, g, tid, j)
            cond = _in_bounds(b, ix, wi, n)
            val = one
            if spec.read is not None:
                ri = _idx(ix, spec.read, g, tid, j)
                cond = b.binary("and", cond, _in_bounds(b, ix, ri, n))
            with b.if_(cond) as (t, _, _r):
                with b.at(t):
                    if spec.read is not None:
                        val = b.binary("add", b.load(y, [ri]), one)
                    b.store(y, [wi], val)
    return b.finish()


LAUNCHES = [((1, 1, 1), (8, 1, 1)), ((2, 1, 1), (4, 1, 1)), ((3, 1, 1), (4, 1, 1)), ((2, 1, 1), (8, 1, 1))]


def sizes_for(part, grid, block):
    """Buffer lengths for which the launch is valid under this partition."""
    threads = grid[0] * block[0]
    return {"elementwise": [threads, threads - 3], "blocked": [2 * threads, 2 * threads - 1],
            "grid_stride": [threads + 5, 7]}[part]
