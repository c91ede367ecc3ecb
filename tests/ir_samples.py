"""IR kernels built with kaio.ir.Builder, shared by test_ir.py and test_passes.py."""
from __future__ import annotations

from kaio import dtypes as dt
from kaio.ir import BufType, Builder, Loc, Param
from kaio.ir.core import Block
from kaio.ir.types import frag_type


def buf(dtype, ndim=1, intent="in"):
    return BufType(dtype, ndim, "global", intent)


def builder(name="k", params=()):
    """A Builder for a kernel whose params are (name, type) pairs."""
    ps = [(n, t, Param(n, "buffer" if isinstance(t, BufType) else "scalar")) for n, t in params]
    return Builder.for_kernel(name, ps, loc=Loc("sample.py", 1, 0))


def every_op_kernel(fragments: bool = False):
    """One kernel using every opcode, with nested if/for/while regions carrying values;
    ``fragments``: the kaio.mma ops too (the LLVM paths refuse those, so they are optional)."""
    b = builder("every_op", [("x", buf(dt.f32, 2)), ("y", buf(dt.f32, 2, "raw")),
                             ("c", buf(dt.i32, 1, "atomic")), ("n", dt.i32), ("a", dt.f32)])
    x, y, c, n, a = b.block.args
    b.loc = Loc("sample.py", 3, 4, 9)
    i = b.special("thread_idx", 0)
    j = b.special("block_idx", 1)
    b.special("block_dim", 2)
    b.special("grid_dim", 0)
    lane = b.special("lane_id")
    b.special("warp_size")
    rows = b.shape(x, 0)
    v = b.load(x, [i, j])
    one = b.const(1.0, dt.f32)
    for name in ("add", "sub", "mul", "div", "rem", "min", "max"):
        v = b.binary(name, v, one)
    k = i
    for name in ("and", "or", "xor", "shl", "shr", "div", "rem"):
        k = b.binary(name, k, rows)
    flag = b.cmp("lt", k, n)
    flag = b.binary("xor", flag, b.const(True, dt.bool_))
    for name in ("neg", "abs"):
        v = b.unary(name, v)
    k = b.unary("not", k)
    v = b.fma(v, a, one)
    v = b.math("sqrt", v)
    v = b.math("pow", v, a, fast=True)
    b.math("isnan", v)
    v = b.select(flag, v, one)
    h = b.cast(v, dt.f16)
    bits = b.bitcast(h, dt.u16)
    b.cast(bits, dt.i64)
    b.atomic("add", c, [i], k)
    b.atomic("cas", c, [i], k, n)
    sh = b.shared_array(dt.f32, (4, 8), name="tile")
    b.dyn_shared(dt.u8)
    loc = b.local_array(dt.i32, (3,))
    b.store(sh, [i, j], v)
    b.store(loc, [b.const(0, dt.i32)], k)
    b.barrier()
    s = b.shuffle("xor", v, lane)
    b.vote("any", flag)
    b.ballot(flag)
    w = b.warp_reduce("sum", s)
    r = b.block_reduce("max", w)
    # if with results and a nested for inside the then-branch
    with b.if_(flag, [dt.f32]) as (then, other, (res,)):
        with b.at(then):
            lb, ub, st = b.const(0, dt.i32), n, b.const(1, dt.i32)
            _, body, iv, (acc,) = b.for_(lb, ub, st, [r], iv_name="it", attrs={"owned": "y"})
            with b.at(body):
                b.yield_(b.binary("add", acc, b.cast(iv, dt.f32)))
            b.yield_(_.results[0])
        with b.at(other):
            b.yield_(r)
    # while with two carried values
    wop, before, after = b.while_([i, res])
    with b.at(before):
        b.condition(b.cmp("lt", before.args[0], n), *before.args)
    with b.at(after):
        b.yield_(b.binary("add", after.args[0], b.const(1, dt.i32)), after.args[1])
    b.store(y, [i, j], wop.results[1])
    if fragments:
        ht = b.shared_array(dt.f16, (16, 16), name="htile")
        fa = b.op("mma_load", [ht, i, j], [frag_type("a", "m16n8k16", dt.f16)], {"trans": True}).result
        fb = b.op("mma_load", [ht, j, i], [frag_type("b", "m16n8k16", dt.f16)]).result
        acc = b.op("mma_load", [x, i, j], [frag_type("acc", "m16n8k16", dt.f32)]).result
        acc = b.op("mma", [fa, fb, acc], [acc.type]).result
        z = b.op("mma_fill", [a], [acc.type]).result
        b.op("mma_store", [y, i, j, b.op("mma", [fa, fb, z], [acc.type]).result])
        b.op("mma_store", [y, i, j, acc])
        # warp tiles, the BLAS epilogue, and tile copies with an explicit wait
        wide = b.op("mma_fill", [a], [frag_type("acc", "m16n8k16", dt.f32, (2, 2))]).result
        b.op("mma_store", [y, i, j, a, a, wide], attrs={"scaled": True})
        st = b.shared_array(dt.f32, (16, 16), name="stage")
        b.op("mma_copy", [st, x, i, j], attrs={"rows": 16, "cols": 8})
        b.op("mma_copy_wait", [], attrs={"pending": 0})
        # element access: x * y + a at each element (r, c), y the other fragment's element
        body = Block()
        ex, _, _, ey = (body.add_arg(t) for t in (dt.f32, dt.i32, dt.i32, dt.f32))
        app = b.op("mma_apply", [acc, i, j, z], [acc.type], regions=[body]).result
        with b.at(body):
            b.yield_(b.binary("add", b.binary("mul", ex, ey), a))
        b.op("mma_store", [y, i, j, app])
        # whole rows: a row maximum broadcast by an apply, and the accumulator as an A
        mx = b.op("mma_row_reduce", [wide], [frag_type("acc", "m16n8k16", dt.f32, (2, 1))],
                  {"op": "max"}).result
        body = Block()
        ex, _, _, ey = (body.add_arg(t) for t in (dt.f32, dt.i32, dt.i32, dt.f32))
        rel = b.op("mma_apply", [wide, i, j, mx], [wide.type], regions=[body]).result
        with b.at(body):
            b.yield_(b.binary("sub", ex, ey))
        pa = b.op("mma_to_a", [rel], [frag_type("a", "m16n8k16", dt.f16, (2, 1))],
                  {"col0": 0}).result
        pb = b.op("mma_load", [ht, i, j], [frag_type("b", "m16n8k16", dt.f16, (1, 2))]).result
        b.op("mma_store", [y, i, j, b.op("mma", [pa, pb, wide], [wide.type]).result])
    return b.finish()
