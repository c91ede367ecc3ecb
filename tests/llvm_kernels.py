"""Sample IR kernels with numpy references, for the LLVM path.

Used by tests/test_llvm.py, tests/test_amdgpu.py (compile + validate for gfx90a / gfx942) and
scripts/llvm_nvptx_smoke.py (executes the nvptx64 retarget on an NVIDIA GPU). Each sample gives
its kernel, inputs, launch shape and a reference: ``ref(args, warp) -> {param index: expected}``
with a tolerance per output (0 = exact).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from kaio import dtypes as dt
from kaio.ir import BufType, Builder, Param
from kaio.ir.indexmath import IndexMath

BLOCK = 256


def buf(dtype, intent="in", ndim=1):
    return BufType(dtype, ndim, "global", intent)


def builder(name, params):
    ps = [(n, t, Param(n, "buffer" if isinstance(t, BufType) else "scalar")) for n, t in params]
    b = Builder.for_kernel(name, ps)
    return b, b.block.args


@contextmanager
def when(b, cond):
    with b.if_(cond) as (then, _other, _res):
        with b.at(then):
            yield


def c32(b, v):
    return b.const(v, dt.i32)


def gid(b):
    return IndexMath(b).global_id(0)


@dataclass
class Sample:
    name: str
    build: Callable
    inputs: Callable                 # rng -> list of args in IR parameter order
    ref: Callable                    # (args, warp) -> {param index: expected array}
    n: int = 1024
    rtol: dict = field(default_factory=dict)   # param index -> relative tolerance (default exact)
    shared_bytes: int = 0

    def launch_shape(self):
        return ((self.n + BLOCK - 1) // BLOCK, 1, 1), (BLOCK, 1, 1)


# --- kernels -------------------------------------------------------------------------------------
def saxpy():
    b, (a, x, y) = builder("saxpy", [("a", dt.f32), ("x", buf(dt.f32)), ("y", buf(dt.f32, "region"))])
    i = gid(b)
    with when(b, b.cmp("lt", i, b.shape(y, 0))):
        b.store(y, [i], b.fma(a, b.load(x, [i]), b.load(y, [i])))
    return b.finish()


def intops():
    """Wrapping, C division with INT_MIN / -1, clamped shifts, min/max, unsigned ops."""
    b, (x, y, out) = builder("intops", [("x", buf(dt.i32)), ("y", buf(dt.i32)),
                                        ("out", buf(dt.i32, "out", 2))])
    i = gid(b)
    with when(b, b.cmp("lt", i, b.shape(x, 0))):
        xv, yv = b.load(x, [i]), b.load(y, [i])
        amt = b.binary("and", yv, c32(b, 63))
        ux, uy = b.bitcast(xv, dt.u32), b.bitcast(yv, dt.u32)
        rows = [b.binary("add", xv, yv), b.binary("sub", xv, yv), b.binary("mul", xv, yv),
                b.binary("div", xv, yv), b.binary("rem", xv, yv), b.binary("shl", xv, amt),
                b.binary("shr", xv, amt), b.binary("min", xv, yv), b.binary("max", xv, yv),
                b.bitcast(b.binary("div", ux, uy), dt.i32),
                b.bitcast(b.binary("shr", ux, b.bitcast(amt, dt.u32)), dt.i32),
                b.bitcast(b.binary("max", ux, uy), dt.i32), b.unary("abs", xv), b.unary("neg", xv)]
        for r, v in enumerate(rows):
            b.store(out, [c32(b, r), i], v)
    return b.finish()


def intops_inputs(rng, n=1024):
    x = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    y = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    y[:64] = rng.integers(-40, 40, 64)
    y[y == 0] = 7          # division by zero is unspecified: not compared
    x[:8], y[:8] = np.iinfo(np.int32).min, -1
    return [x, y, np.zeros((14, n), np.int32)]


def intops_ref(args, warp):
    x, y = (a.astype(np.int64) for a in args[:2])
    ux, uy = x & 0xFFFFFFFF, y & 0xFFFFFFFF
    amt = y & 63
    wrap = lambda v: ((np.asarray(v, dtype=np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)  # noqa: E731
    q = np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))    # C: truncate toward zero
    r = x - q * y
    shl = np.where(amt >= 32, 0, (x << np.minimum(amt, 31)))
    shr = x >> np.minimum(amt, 31)
    ushr = np.where(amt >= 32, 0, ux >> np.minimum(amt, 31))
    rows = [x + y, x - y, x * y, q, r, shl, shr, np.minimum(x, y), np.maximum(x, y), ux // uy, ushr,
            np.maximum(ux, uy), np.abs(x), -x]
    return {2: np.stack([wrap(v) for v in rows])}


def casts():
    """Saturating float->int (NaN -> 0), float narrowing to f16/bf16, int->float, to bool."""
    b, (x, oi, ou, oh, ob, ol, obool) = builder("casts", [
        ("x", buf(dt.f32)), ("oi", buf(dt.i32, "out")), ("ou", buf(dt.u8, "out")),
        ("oh", buf(dt.f16, "out")), ("ob", buf(dt.bf16, "out")), ("ol", buf(dt.f64, "out")),
        ("obool", buf(dt.bool_, "out"))])
    i = gid(b)
    with when(b, b.cmp("lt", i, b.shape(x, 0))):
        v = b.load(x, [i])
        b.store(oi, [i], b.cast(v, dt.i32))
        b.store(ou, [i], b.cast(v, dt.u8))
        b.store(oh, [i], b.cast(v, dt.f16))
        b.store(ob, [i], b.cast(v, dt.bf16))
        b.store(ol, [i], b.cast(b.cast(v, dt.i64), dt.f64))
        b.store(obool, [i], b.cast(v, dt.bool_))
    return b.finish()


def casts_inputs(rng, n=1024):
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 12, n)).astype(np.float32)
    x[:6] = [np.nan, np.inf, -np.inf, 3e9, -3e9, -0.0]
    return [x] + [np.zeros(n, t) for t in (np.int32, np.uint8, np.float16, dt.bf16.np, np.float64, bool)]


def _sat(x, lo, hi):
    t = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=hi, neginf=lo))
    return np.clip(t, lo, hi)


def casts_ref(args, warp):
    x = args[0]
    with np.errstate(over="ignore", invalid="ignore"):
        return _casts_ref(x)


def _casts_ref(x):
    return {1: _sat(x, -2**31, 2**31 - 1).astype(np.int32), 2: _sat(x, 0, 255).astype(np.uint8),
            3: x.astype(np.float16), 4: x.astype(dt.bf16.np),
            5: _sat(x, -2**63, 2**63 - 1).astype(np.float64), 6: (x != 0)}


def loops():
    """for with a carried value (row sums), a runtime negative step, and a while loop."""
    b, (x, step, rs, rv, steps) = builder("loops", [
        ("x", buf(dt.f32, "in", 2)), ("step", dt.i32), ("rs", buf(dt.f32, "out")),
        ("rv", buf(dt.f32, "out")), ("steps", buf(dt.i32, "out"))])
    i = gid(b)
    with when(b, b.cmp("lt", i, b.shape(x, 0))):
        cols = b.shape(x, 1)
        f0 = b.const(0.0, dt.f32)
        op, body, j, (acc,) = b.for_(c32(b, 0), cols, c32(b, 1), [f0])
        with b.at(body):
            b.yield_(b.binary("add", acc, b.load(x, [i, j])))
        b.store(rs, [i], op.results[0])
        start = b.binary("sub", cols, c32(b, 1))
        op2, body2, j2, (acc2,) = b.for_(start, c32(b, -1), step, [f0])
        with b.at(body2):     # order-dependent: acc*0.5 + x
            b.yield_(b.binary("add", b.binary("mul", acc2, b.const(0.5, dt.f32)), b.load(x, [i, j2])))
        b.store(rv, [i], op2.results[0])
        # collatz steps of i + 1
        wop, before, after = b.while_([b.binary("add", i, c32(b, 1)), c32(b, 0)])
        with b.at(before):
            b.condition(b.cmp("ne", before.args[0], c32(b, 1)), *before.args)
        with b.at(after):
            v, cnt = after.args
            even = b.cmp("eq", b.binary("and", v, c32(b, 1)), c32(b, 0))
            nxt = b.select(even, b.binary("div", v, c32(b, 2)),
                           b.binary("add", b.binary("mul", v, c32(b, 3)), c32(b, 1)))
            b.yield_(nxt, b.binary("add", cnt, c32(b, 1)))
        b.store(steps, [i], wop.results[1])
    return b.finish()


def loops_inputs(rng, n=1024):
    return [rng.standard_normal((n, 37)).astype(np.float32), -1,
            np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.int32)]


def loops_ref(args, warp):
    x = args[0]
    acc = np.zeros(x.shape[0], np.float32)
    for j in range(x.shape[1]):
        acc = acc + x[:, j]
    acc2 = np.zeros(x.shape[0], np.float32)
    for j in range(x.shape[1] - 1, -1, -1):
        acc2 = acc2 * np.float32(0.5) + x[:, j]
    steps = []
    for v in range(1, x.shape[0] + 1):
        c = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            c += 1
        steps.append(c)
    return {2: acc, 3: acc2, 4: np.array(steps, np.int32)}


def shared_reverse(dynamic=False):
    """Reverse each block's slice through shared memory (static or dynamic) and a barrier."""
    name = "dyn_reverse" if dynamic else "shared_reverse"
    b, (x, out) = builder(name, [("x", buf(dt.f32)), ("out", buf(dt.f32, "out"))])
    tile = b.dyn_shared(dt.f32) if dynamic else b.shared_array(dt.f32, (BLOCK,))
    t = b.special("thread_idx", 0)
    i = gid(b)
    b.store(tile, [t], b.load(x, [i]))
    b.barrier()
    b.store(out, [i], b.load(tile, [b.binary("sub", c32(b, BLOCK - 1), t)]))
    return b.finish()


def reverse_ref(args, warp):
    return {1: args[0].reshape(-1, BLOCK)[:, ::-1].reshape(-1)}


def warp_ops():
    """Width-independent butterfly sum, shuffles up/down/idx, ballot and votes."""
    b, (x, wsum, up, down, bcast, bal, anyv, allv) = builder("warp_ops", [
        ("x", buf(dt.i32)), ("wsum", buf(dt.i32, "out")), ("up", buf(dt.f32, "out")),
        ("down", buf(dt.f64, "out")), ("bcast", buf(dt.i32, "out")), ("bal", buf(dt.u64, "out")),
        ("anyv", buf(dt.bool_, "out")), ("allv", buf(dt.bool_, "out"))])
    i = gid(b)
    v = b.load(x, [i])
    w = b.special("warp_size")
    wop, before, after = b.while_([b.binary("div", w, c32(b, 2)), v])
    with b.at(before):
        b.condition(b.cmp("gt", before.args[0], c32(b, 0)), *before.args)
    with b.at(after):
        off, acc = after.args
        b.yield_(b.binary("div", off, c32(b, 2)), b.binary("add", acc, b.shuffle("xor", acc, off)))
    b.store(wsum, [i], wop.results[1])
    b.store(up, [i], b.shuffle("up", b.cast(v, dt.f32), c32(b, 1)))
    b.store(down, [i], b.shuffle("down", b.cast(v, dt.f64), c32(b, 3)))
    b.store(bcast, [i], b.shuffle("idx", v, c32(b, 0)))
    odd = b.cmp("ne", b.binary("and", v, c32(b, 1)), c32(b, 0))
    b.store(bal, [i], b.ballot(odd))
    b.store(anyv, [i], b.vote("any", b.cmp("gt", v, c32(b, 90))))
    b.store(allv, [i], b.vote("all", b.cmp("ge", v, c32(b, 0))))
    return b.finish()


def warp_inputs(rng, n=1024):
    x = rng.integers(0, 100, n).astype(np.int32)
    x[:40] = rng.integers(0, 90, 40)
    x[40] = -5
    return [x] + [np.zeros(n, t) for t in (np.int32, np.float32, np.float64, np.int32, np.uint64,
                                          bool, bool)]


def warp_ref(args, warp):
    x = args[0].reshape(-1, warp)
    lane = np.arange(warp)
    up = np.where(lane >= 1, np.roll(x, 1, axis=1), x).astype(np.float32)
    down = np.where(lane + 3 < warp, np.roll(x, -3, axis=1), x).astype(np.float64)
    bits = ((x & 1).astype(np.uint64) << lane.astype(np.uint64)).sum(axis=1, dtype=np.uint64)
    rep = lambda v: np.repeat(v, warp).reshape(-1)  # noqa: E731
    return {1: rep(x.sum(axis=1)).astype(np.int32), 2: up.reshape(-1), 3: down.reshape(-1),
            4: rep(x[:, 0]), 5: rep(bits), 6: rep((x > 90).any(axis=1)), 7: rep((x >= 0).all(axis=1))}


def atomics():
    b, (x, hist, mx, mn, fsum, bits, flag, won) = builder("atomics", [
        ("x", buf(dt.i32)), ("hist", buf(dt.i32, "atomic")), ("mx", buf(dt.i32, "atomic")),
        ("mn", buf(dt.u32, "atomic")), ("fsum", buf(dt.f32, "atomic")), ("bits", buf(dt.u32, "atomic")),
        ("flag", buf(dt.i32, "atomic")), ("won", buf(dt.i32, "out"))])
    i = gid(b)
    v = b.load(x, [i])
    z = c32(b, 0)
    b.atomic("add", hist, [v], c32(b, 1))
    b.atomic("max", mx, [z], v)
    b.atomic("min", mn, [z], b.bitcast(b.binary("sub", v, c32(b, 8)), dt.u32))
    b.atomic("add", fsum, [z], b.cast(v, dt.f32))
    b.atomic("or", bits, [z], b.binary("shl", b.const(1, dt.u32), b.bitcast(v, dt.u32)))
    old = b.atomic("cas", flag, [z], z, b.binary("add", i, c32(b, 1)))
    b.store(won, [i], b.cast(b.cmp("eq", old, z), dt.i32))
    return b.finish()


def atomics_inputs(rng, n=1024):
    x = rng.integers(0, 16, n).astype(np.int32)
    return [x, np.zeros(16, np.int32), np.full(1, -1, np.int32), np.full(1, 2**32 - 1, np.uint32),
            np.zeros(1, np.float32), np.zeros(1, np.uint32), np.zeros(1, np.int32), np.zeros(n, np.int32)]


def atomics_ref(args, warp):
    x = args[0]
    return {1: np.bincount(x, minlength=16).astype(np.int32), 2: np.array([x.max()], np.int32),
            3: np.array([(x.astype(np.int64) - 8).astype(np.uint32).min()], np.uint32),
            4: np.array([x.sum()], np.float32),
            5: np.array([np.bitwise_or.reduce((1 << x.astype(np.uint32)).astype(np.uint32))], np.uint32)}


MATH_FNS = ("exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "erf", "atan",
            "expm1", "log1p", "sinh", "cosh", "asin", "acos", "sqrt", "rsqrt", "floor", "rint")
_NP = {"rsqrt": lambda v: 1 / np.sqrt(v), "rint": np.rint, "asin": np.arcsin, "acos": np.arccos,
       "atan": np.arctan, "erf": np.vectorize(math.erf)}


def math_kernel(dtype=dt.f32, fast=False):
    name = f"math_{dtype.name}" + ("_fast" if fast else "")
    b, (x, y, out) = builder(name, [("x", buf(dtype)), ("y", buf(dtype)),
                                    ("out", buf(dtype, "out", 2))])
    i = gid(b)
    with when(b, b.cmp("lt", i, b.shape(x, 0))):
        v, w = b.load(x, [i]), b.load(y, [i])
        for r, fn in enumerate(MATH_FNS):
            arg = b.binary("div", v, b.const(8.0, dtype)) if fn in ("asin", "acos") else v
            b.store(out, [c32(b, r), i], b.math(fn, arg, fast=fast))
        r = len(MATH_FNS)
        b.store(out, [c32(b, r), i], b.math("atan2", v, w))
        b.store(out, [c32(b, r + 1), i], b.math("pow", b.unary("abs", v), w))
    return b.finish()


def math_inputs(rng, n=1024, np_dtype=np.float32):
    x = rng.uniform(-8, 8, n).astype(np_dtype)
    y = rng.uniform(-3, 3, n).astype(np_dtype)
    return [x, y, np.zeros((len(MATH_FNS) + 2, n), np_dtype)]


def math_ref(args, warp):
    x, y = (a.astype(np.float64) for a in args[:2])
    with np.errstate(all="ignore"):
        rows = [_NP.get(fn, getattr(np, fn, None))(x / 8 if fn in ("asin", "acos") else x)
                for fn in MATH_FNS]
        rows += [np.arctan2(x, y), np.power(np.abs(x), y)]
    return {2: np.stack(rows).astype(args[2].dtype)}


def local_and_half():
    """A per-thread local array, f16 and bf16 arithmetic rounded per operation."""
    b, (x, h, bh, out, oh, obh) = builder("local_half", [
        ("x", buf(dt.i32)), ("h", buf(dt.f16)), ("bh", buf(dt.bf16)), ("out", buf(dt.i32, "out")),
        ("oh", buf(dt.f16, "out")), ("obh", buf(dt.bf16, "out"))])
    i = gid(b)
    loc = b.local_array(dt.i32, (8,))
    v = b.load(x, [i])
    op, body, k, _ = b.for_(c32(b, 0), c32(b, 8), c32(b, 1))
    with b.at(body):
        b.store(loc, [k], b.binary("mul", v, b.binary("add", k, c32(b, 1))))
        b.yield_()
    op2, body2, k2, (acc,) = b.for_(c32(b, 7), c32(b, -1), c32(b, -1), [c32(b, 0)])
    with b.at(body2):
        b.yield_(b.binary("sub", b.load(loc, [k2]), acc))
    b.store(out, [i], op2.results[0])
    hv, bv = b.load(h, [i]), b.load(bh, [i])
    b.store(oh, [i], b.binary("add", b.binary("mul", hv, hv), b.const(0.1, dt.f16)))
    b.store(obh, [i], b.binary("add", b.binary("mul", bv, bv), b.const(0.1, dt.bf16)))
    return b.finish()


def local_inputs(rng, n=1024):
    return [rng.integers(-1000, 1000, n).astype(np.int32), rng.standard_normal(n).astype(np.float16),
            rng.standard_normal(n).astype(dt.bf16.np), np.zeros(n, np.int32),
            np.zeros(n, np.float16), np.zeros(n, dt.bf16.np)]


def local_ref(args, warp):
    x = args[0]
    acc = np.zeros_like(x)
    for k in range(7, -1, -1):
        acc = x * (k + 1) - acc
    h, bh = args[1], args[2]
    bf = dt.bf16.np
    return {3: acc, 4: (h * h + np.float16(0.1)).astype(np.float16),
            5: ((bh * bh).astype(bf) + np.asarray(0.1, bf)).astype(bf)}


def block_sum():
    b, (x, out) = builder("block_sum", [("x", buf(dt.i32)), ("out", buf(dt.i32, "out"))])
    i = gid(b)
    s = b.block_reduce("sum", b.load(x, [i]))
    with when(b, b.cmp("eq", b.special("thread_idx", 0), c32(b, 0))):
        b.store(out, [b.special("block_idx", 0)], s)
    return b.finish()


SAMPLES = [
    Sample("saxpy", saxpy, lambda r: [np.float32(1.5), r.standard_normal(1000).astype(np.float32),
                                       r.standard_normal(1000).astype(np.float32)],
           lambda a, w: {2: (np.float64(a[0]) * a[1] + a[2]).astype(np.float32)}, n=1000, rtol={2: 1e-6}),
    Sample("intops", intops, intops_inputs, intops_ref),
    Sample("casts", casts, casts_inputs, casts_ref),
    Sample("loops", loops, loops_inputs, loops_ref),
    Sample("shared_reverse", shared_reverse, lambda r: [r.standard_normal(1024).astype(np.float32),
                                                       np.zeros(1024, np.float32)], reverse_ref),
    Sample("dyn_reverse", lambda: shared_reverse(True),
           lambda r: [r.standard_normal(1024).astype(np.float32), np.zeros(1024, np.float32)],
           reverse_ref, shared_bytes=BLOCK * 4),
    Sample("warp_ops", warp_ops, warp_inputs, warp_ref),
    Sample("atomics", atomics, atomics_inputs, atomics_ref),
    Sample("math_f32", math_kernel, math_inputs, math_ref, rtol={2: 4e-7}),
    Sample("math_f64", lambda: math_kernel(dt.f64), lambda r: math_inputs(r, np_dtype=np.float64),
           math_ref, rtol={2: 1e-13}),
    Sample("local_half", local_and_half, local_inputs, local_ref),
    Sample("block_sum", block_sum, lambda r: [r.integers(-100, 100, 1024).astype(np.int32),
                                              np.zeros(4, np.int32)],
           lambda a, w: {1: a[0].reshape(4, BLOCK).sum(axis=1).astype(np.int32)}),
]
BY_NAME = {s.name: s for s in SAMPLES}


def check(sample: Sample, args, results: dict, warp: int) -> list[str]:
    """Compare ``results`` (param index -> array) with the reference; returns failure lines."""
    fails = []
    for idx, want in sample.ref(args, warp).items():
        got = results[idx]
        tol = sample.rtol.get(idx, 0.0)
        if tol:
            w, g = want.astype(np.float64), got.astype(np.float64)
            bad = ~(np.isclose(g, w, rtol=tol, atol=tol, equal_nan=True))
        else:
            w, g = np.asarray(want), np.asarray(got)
            if w.dtype.kind == "f" or w.dtype == dt.bf16.np:
                bad = ~((w.astype(np.float64) == g.astype(np.float64))
                        | (np.isnan(w.astype(np.float64)) & np.isnan(g.astype(np.float64))))
            else:
                bad = w != g
        if bad.any():
            k = np.argwhere(bad)[0]
            fails.append(f"{sample.name}: param {idx}: {int(bad.sum())} mismatches, first at "
                         f"{tuple(int(v) for v in k)}: got {g[tuple(k)]!r} want {w[tuple(k)]!r}")
    return fails
