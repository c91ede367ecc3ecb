#!/usr/bin/env python3
"""Run kaio's PTX on a real NVIDIA GPU and compare with numpy (device-side smoke test).

Builds ~12 kernels with kaio's IR builder, emits PTX for sm_80 *and* sm_90 (the driver JITs
sm_80 PTX on newer GPUs, so the sm_80 emulation paths -- bf16 through fma, CAS-loop atomics,
round-to-odd casts -- run too), loads them through cuda.bindings.driver, launches, copies back
and checks. Prints PASS/FAIL per kernel and arch; exits 1 on any failure.

    python scripts/ptx_smoke.py [--arch sm_80,sm_90] [--only NAME] [--dump DIR]

Needs numpy, ml_dtypes and cuda-python; kaio is imported from this checkout even when it is
not pip-installed.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import traceback
from fractions import Fraction

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bootstrap_kaio():
    """Import kaio from the checkout (kaio_core -> kaio, backends -> kaio.backends)."""
    try:
        import kaio  # noqa: F401
        import kaio.backends.ptx  # noqa: F401
        return
    except ImportError:
        pass
    for name in [m for m in sys.modules if m == "kaio" or m.startswith("kaio.")]:
        del sys.modules[name]
    for mod, path in (("kaio", "kaio_core"), ("kaio.backends", "backends")):
        d = os.path.join(ROOT, path)
        spec = importlib.util.spec_from_file_location(mod, os.path.join(d, "__init__.py"),
                                                      submodule_search_locations=[d])
        m = importlib.util.module_from_spec(spec)
        sys.modules[mod] = m
        spec.loader.exec_module(m)


_bootstrap_kaio()
from cuda.bindings import driver as cu  # noqa: E402

from kaio import dtypes as dt  # noqa: E402
from kaio.backends.ptx import emit_ptx  # noqa: E402
from kaio.ir import BufType, Builder, Param  # noqa: E402
from kaio.passes import target_pipeline  # noqa: E402

BF16 = dt.bf16.storage_np
I32 = dt.i32


# --- driver plumbing ---------------------------------------------------------------------------
def _ok(res):
    err, *rest = res if isinstance(res, tuple) else (res,)
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        raise RuntimeError(f"CUDA error {name.decode() if name else err}")
    return rest[0] if len(rest) == 1 else rest


class Device:
    def __init__(self):
        _ok(cu.cuInit(0))
        self.dev = _ok(cu.cuDeviceGet(0))
        self.ctx = _ok(cu.cuDevicePrimaryCtxRetain(self.dev))
        _ok(cu.cuCtxSetCurrent(self.ctx))
        name = _ok(cu.cuDeviceGetName(128, self.dev))
        self.name = name.split(b"\0")[0].decode()
        self.driver = _ok(cu.cuDriverGetVersion())

    def run(self, ptx: str, abi, args: list, grid, block, shared=0):
        """Launch; ``args`` in IR parameter order (numpy arrays or Python scalars). Arrays are
        copied in and back (in place)."""
        mod = _ok(cu.cuModuleLoadData(ptx.encode() + b"\0"))
        try:
            fn = _ok(cu.cuModuleGetFunction(mod, abi.entry.encode()))
            dev_ptrs, storage = {}, []
            for i, a in enumerate(args):
                if isinstance(a, np.ndarray):
                    n = max(a.nbytes, 4)
                    p = _ok(cu.cuMemAlloc(n))
                    _ok(cu.cuMemcpyHtoD(p, a.ctypes.data, a.nbytes))
                    dev_ptrs[i] = p
            for p in abi.params:
                a = args[p.ir_param_index]
                if p.kind == "pointer":
                    storage.append(np.array([int(dev_ptrs[p.ir_param_index])], np.uint64))
                elif p.kind == "extent":
                    storage.append(np.array([a.shape[p.dim]], np.int32))
                elif p.dtype == "bf16":
                    storage.append(np.array([a], BF16).view(np.uint16))
                else:
                    storage.append(np.array([a], dt.from_name(p.dtype).storage_np))
            ptrs = np.array([s.ctypes.data for s in storage], np.uint64)
            g = tuple(grid) + (1,) * (3 - len(grid))
            b = tuple(block) + (1,) * (3 - len(block))
            _ok(cu.cuLaunchKernel(fn, *g, *b, shared, 0, ptrs.ctypes.data, 0))
            _ok(cu.cuCtxSynchronize())
            for i, p in dev_ptrs.items():
                _ok(cu.cuMemcpyDtoH(args[i].ctypes.data, p, args[i].nbytes))
                _ok(cu.cuMemFree(p))
        finally:
            _ok(cu.cuModuleUnload(mod))


# --- kernel building helpers ----------------------------------------------------------------------
def build(name, params, body):
    b = Builder.for_kernel(name, [(n, t, Param(n, "buffer" if isinstance(t, BufType) else "scalar"))
                                  for n, t in params])
    body(b, *b.kernel.args)
    return target_pipeline(b.finish(), 32)


def g(t, intent="region", ndim=1):
    return BufType(t, ndim, "global", intent)


def gid(b):
    return b.binary("add", b.binary("mul", b.special("block_idx", 0), b.special("block_dim", 0)),
                    b.special("thread_idx", 0))


def guarded(b, buf, fn):
    i = gid(b)
    with b.if_(b.cmp("lt", i, b.shape(buf, 0))) as (then, _e, _r):
        with b.at(then):
            fn(i)


def c32(b, v):
    return b.const(v, I32)


def rng(seed=0):
    return np.random.default_rng(seed)


def exact(got, want):
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype == BF16 or want.dtype == BF16:
        want = want.astype(BF16)
        nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))  # any NaN is NaN
        got, want = got.view(np.uint16).copy(), want.view(np.uint16).copy()
        got[nan] = want[nan] = 0x7FC0
        same = np.array_equal(got, want)
        return same, "" if same else f"bits differ at {np.flatnonzero(got != want)[:5]}"
    same = (got == want) | (np.isnan(got) & np.isnan(want)) if got.dtype.kind == "f" else got == want
    bad = np.flatnonzero(~np.asarray(same))
    return bad.size == 0, (f"{bad.size} mismatches, first at {bad[0]}: got {got.flat[bad[0]]!r} "
                           f"want {want.flat[bad[0]]!r}" if bad.size else "")


def close_ulp(got, want, ulps, dtype):
    got = np.asarray(got, np.float64)
    want64 = np.asarray(want, np.float64)
    spacing = np.abs(np.spacing(want64.astype(dtype))).astype(np.float64)
    err = np.abs(got - want64) / np.maximum(spacing, np.finfo(dtype).tiny)
    rounded = want64.astype(dtype).astype(np.float64)   # overflow to inf in narrow dtypes
    ok = (err <= ulps) | (np.isnan(got) & np.isnan(want64)) | (got == want64) | (got == rounded)
    bad = np.flatnonzero(~ok)
    return bad.size == 0, (f"{bad.size} beyond {ulps} ulp, worst {np.nanmax(err):.3g} ulp at "
                           f"{bad[0]}: got {got[bad[0]]!r} want {want64[bad[0]]!r}" if bad.size else "")


# --- the kernels --------------------------------------------------------------------------------
def k_saxpy(dev, arch):
    n = 1000
    x, y = rng(1).standard_normal(n).astype(np.float32), rng(2).standard_normal(n).astype(np.float32)
    a = np.float32(1.7)

    def body(b, a_, x_, y_):
        guarded(b, y_, lambda i: b.store(y_, [i], b.binary("add", b.binary("mul", a_, b.load(x_, [i])),
                                                              b.load(y_, [i]))))
    k = build("saxpy", [("a", dt.f32), ("x", g(dt.f32, "in")), ("y", g(dt.f32))], body)
    want = a * x + y  # numpy: rounded mul then rounded add, as the IR says (no fma)
    out = y.copy()
    dev.launch(k, arch, [float(a), x, out], (8,), (128,))
    return exact(out, want)


def k_half(dev, arch, t):
    n = 777
    x = (rng(3).standard_normal(n) * 4).astype(t.storage_np)
    y = (rng(4).standard_normal(n) * 4).astype(t.storage_np)

    def body(b, x_, y_, o_):
        def f(i):
            a, c = b.load(x_, [i]), b.load(y_, [i])
            r = b.binary("sub", b.binary("mul", a, c), b.binary("div", a, c))
            r = b.binary("max", b.binary("add", r, a), b.unary("neg", c))
            b.store(o_, [i], r)
        guarded(b, o_, f)
    k = build(f"half_{t}", [("x", g(t, "in")), ("y", g(t, "in")), ("o", g(t, "out"))], body)
    out = np.zeros(n, t.storage_np)
    dev.launch(k, arch, [x, y, out], (7,), (128,))
    r = (x * y) - (x / y)
    want = np.maximum(r + x, -y)  # numpy computes each 16-bit op in f32 and rounds once
    return exact(out, want)


def _wrap(v, bits, signed):
    v = np.asarray(v, np.int64) & ((1 << bits) - 1)
    return np.where(signed & (v >= (1 << (bits - 1))), v - (1 << bits), v)


def k_int8(dev, arch):
    n = 512
    x = rng(5).integers(-128, 128, n).astype(np.int8)
    y = rng(6).integers(-128, 128, n).astype(np.int8)
    y[y == 0] = 3
    s = rng(7).integers(-3, 12, n).astype(np.int8)
    x[:4], y[:4] = [-128, -128, 127, -7], [-1, 1, -1, 2]

    def body(b, x_, y_, s_, o_):
        def f(i):
            a, c, sh = b.load(x_, [i]), b.load(y_, [i]), b.load(s_, [i])
            v = b.binary("add", b.binary("mul", a, c), b.const(100, dt.i8))
            v = b.binary("xor", v, b.binary("div", a, c))
            v = b.binary("add", v, b.binary("rem", a, c))
            v = b.binary("add", v, b.binary("shr", a, sh))
            v = b.binary("add", v, b.binary("shl", c, sh))
            b.store(o_, [i], v)
        guarded(b, o_, f)
    k = build("int8", [("x", g(dt.i8, "in")), ("y", g(dt.i8, "in")), ("s", g(dt.i8, "in")),
                       ("o", g(dt.i8, "out"))], body)
    out = np.zeros(n, np.int8)
    dev.launch(k, arch, [x, y, s, out], (4,), (128,))
    X, Y, S = (a.astype(np.int64) for a in (x, y, s))
    q = _wrap(np.sign(X) * np.sign(Y) * (np.abs(X) // np.abs(Y)), 8, True)
    r = X - np.sign(X) * np.sign(Y) * (np.abs(X) // np.abs(Y)) * Y
    su = S & 0xFF  # shift amounts as unsigned: >= 8 gives 0 (shl) / sign fill (shr)
    shr = np.where(su >= 8, np.where(X < 0, -1, 0), X >> np.minimum(su, 7))
    shl = np.where(su >= 8, 0, _wrap(Y << np.minimum(su, 7), 8, True))
    v = _wrap(X * Y + 100, 8, True)
    v = _wrap(v ^ q, 8, True)
    v = _wrap(v + r, 8, True)
    v = _wrap(v + shr, 8, True)
    v = _wrap(v + shl, 8, True)
    return exact(out, v.astype(np.int8))


def k_loops(dev, arch):
    rows, cols = 37, 45
    x = rng(8).integers(-50, 50, (rows, cols)).astype(np.int32)

    def body(b, x_, o_, steps_):
        def f(r):
            zero, one = c32(b, 0), c32(b, 1)
            op, blk, c, (acc, alt) = b.for_(zero, b.shape(x_, 1), one, inits=[zero, one])
            with b.at(blk):
                b.yield_(alt, b.binary("add", acc, b.load(x_, [r, c])))   # swap: parallel moves
            b.store(o_, [r], b.binary("add", op.results[0], op.results[1]))
            # Collatz step count of r+1 with a while loop
            w, before, after = b.while_([b.binary("add", r, one), zero])
            with b.at(before):
                v, n = before.args
                b.condition(b.cmp("gt", v, one), v, n)
            with b.at(after):
                v, n = after.args
                odd = b.cmp("eq", b.binary("and", v, one), one)
                nxt = b.select(odd, b.binary("add", b.binary("mul", v, c32(b, 3)), one),
                               b.binary("shr", v, one))
                b.yield_(nxt, b.binary("add", n, one))
            b.store(steps_, [r], w.results[1])
        guarded(b, o_, f)
    k = build("loops", [("x", g(dt.i32, "in", 2)), ("o", g(dt.i32, "out")),
                        ("steps", g(dt.i32, "out"))], body)
    out, steps = np.zeros(rows, np.int32), np.zeros(rows, np.int32)
    dev.launch(k, arch, [x, out, steps], (1,), (64,))

    def collatz(v):
        n = 0
        while v > 1:
            v, n = (3 * v + 1 if v & 1 else v >> 1), n + 1
        return n
    want_sum = x.sum(axis=1) + 1     # the swap alternates, so the two carries sum everything + 1
    ok1, m1 = exact(out, want_sum.astype(np.int32))
    ok2, m2 = exact(steps, np.array([collatz(r + 1) for r in range(rows)], np.int32))
    return ok1 and ok2, m1 or m2


def k_block_reduce(dev, arch):
    n, block = 4000, 256
    x = rng(9).integers(-1000, 1000, n).astype(np.int32)
    xf = rng(10).standard_normal(n).astype(np.float32)

    def body(b, x_, xf_, o_, of_):
        i = gid(b)
        inb = b.cmp("lt", i, b.shape(x_, 0))
        safe = b.select(inb, i, c32(b, 0))
        v = b.select(inb, b.load(x_, [safe]), c32(b, 0))
        vf = b.select(inb, b.load(xf_, [safe]), b.const(0.0, dt.f32))
        s, sf = b.block_reduce("sum", v), b.block_reduce("sum", vf)
        with b.if_(b.cmp("eq", b.special("thread_idx", 0), c32(b, 0))) as (then, _e, _r):
            with b.at(then):
                blk = b.special("block_idx", 0)
                b.store(o_, [blk], s)
                b.store(of_, [blk], sf)
    k = build("block_reduce", [("x", g(dt.i32, "in")), ("xf", g(dt.f32, "in")),
                               ("o", g(dt.i32, "out")), ("of", g(dt.f32, "out"))], body)
    nb = -(-n // block)
    out, outf = np.zeros(nb, np.int32), np.zeros(nb, np.float32)
    dev.launch(k, arch, [x, xf, out, outf], (nb,), (block,))
    pad = np.zeros(nb * block, np.int32)
    pad[:n] = x
    padf = np.zeros(nb * block, np.float64)
    padf[:n] = xf
    ok1, m1 = exact(out, pad.reshape(nb, block).sum(1).astype(np.int32))
    ok2 = np.allclose(outf, padf.reshape(nb, block).sum(1), rtol=1e-5, atol=1e-4)
    return ok1 and ok2, m1 or ("" if ok2 else f"f32 block sums off: {outf[:4]}")


def k_atomics(dev, arch):
    n = 2048
    vals = rng(11).integers(0, 7, n)

    def body(b, v32, f, h, bh, u8, i64, fmin, imax, o32):
        i = gid(b)
        zero = c32(b, 0)
        v = b.load(v32, [i])
        slot = b.binary("rem", i, c32(b, 4))
        b.atomic("add", f, [slot], b.cast(v, dt.f32))
        b.atomic("add", h, [slot], b.cast(v, dt.f16))
        b.atomic("add", bh, [slot], b.cast(v, dt.bf16))
        b.atomic("add", u8, [slot], b.cast(v, dt.u8))          # wraps mod 256, CAS loop
        b.atomic("sub", i64, [zero], b.cast(v, dt.i64))
        b.atomic("min", fmin, [zero], b.unary("neg", b.cast(i, dt.f32)))
        b.atomic("max", imax, [slot], b.binary("mul", v, i))
        b.atomic("add", o32, [zero], v)
    params = [("v", g(dt.i32, "in")), ("f", g(dt.f32, "atomic")), ("h", g(dt.f16, "atomic")),
              ("bh", g(dt.bf16, "atomic")), ("u8", g(dt.u8, "atomic")), ("i64", g(dt.i64, "atomic")),
              ("fmin", g(dt.f32, "atomic")), ("imax", g(dt.i32, "atomic")), ("o32", g(dt.i32, "atomic"))]
    k = build("atomics", params, body)
    v = vals.astype(np.int32)
    f, h, bh = np.zeros(4, np.float32), np.zeros(4, np.float16), np.zeros(4, BF16)
    u8, i64 = np.zeros(4, np.uint8), np.full(1, 10, np.int64)
    fmin, imax, o32 = np.zeros(1, np.float32), np.full(4, -5, np.int32), np.zeros(1, np.int32)
    dev.launch(k, arch, [v, f, h, bh, u8, i64, fmin, imax, o32], (n // 256,), (256,))
    per = [v[s::4].sum() for s in range(4)]
    idx = np.arange(n)
    checks = [exact(f, np.array(per, np.float32)),
              exact(h, np.array(per, np.float16)),          # sums <= 2048*6/4, exact in f16
              exact(u8, (np.array(per) % 256).astype(np.uint8)),
              exact(i64, np.array([10 - v.sum()], np.int64)),
              exact(fmin, np.array([-(n - 1)], np.float32)),
              exact(imax, np.array([max(-5, (v[s::4] * idx[s::4]).max()) for s in range(4)], np.int32)),
              exact(o32, np.array([v.sum()], np.int32))]
    # bf16 sums of small ints are exact only while < 256; check with the order-free bound
    okb = np.allclose(bh.astype(np.float64), per, rtol=2 ** -7 * 16)
    checks.append((okb, "" if okb else f"bf16 atomic sums {bh} vs {per}"))
    bad = [m for ok, m in checks if not ok]
    return not bad, "; ".join(bad)


def k_shuffles(dev, arch):
    n = 256
    x = rng(12).integers(-10 ** 6, 10 ** 6, n).astype(np.int32)
    d = rng(13).standard_normal(n)
    hh = rng(14).standard_normal(n).astype(np.float16)

    def body(b, x_, d_, h_, o_, od, oh, ob, ov):
        i = gid(b)
        v = b.load(x_, [i])
        lane = b.special("lane_id")
        b.store(o_, [i], b.warp_reduce("sum", v))
        dv = b.shuffle("down", b.load(d_, [i]), c32(b, 3))
        dv = b.binary("add", dv, b.shuffle("up", b.load(d_, [i]), c32(b, 5)))
        b.store(od, [i], dv)
        b.store(oh, [i], b.shuffle("idx", b.load(h_, [i]), b.binary("xor", lane, c32(b, 7))))
        pos = b.cmp("gt", v, c32(b, 0))
        b.store(ob, [i], b.ballot(pos))
        anyall = b.select(b.vote("all", pos), c32(b, 2), b.select(b.vote("any", pos), c32(b, 1), c32(b, 0)))
        b.store(ov, [i], anyall)
    k = build("shuffles", [("x", g(dt.i32, "in")), ("d", g(dt.f64, "in")), ("h", g(dt.f16, "in")),
                           ("o", g(dt.i32, "out")), ("od", g(dt.f64, "out")), ("oh", g(dt.f16, "out")),
                           ("ob", g(dt.u64, "out")), ("ov", g(dt.i32, "out"))], body)
    o, od, oh = np.zeros(n, np.int32), np.zeros(n), np.zeros(n, np.float16)
    ob, ov = np.zeros(n, np.uint64), np.zeros(n, np.int32)
    dev.launch(k, arch, [x, d, hh, o, od, oh, ob, ov], (2,), (128,))
    w = x.reshape(-1, 32)
    lane = np.arange(n) % 32
    base = np.arange(n) - lane
    down = np.where(lane + 3 < 32, d[np.minimum(np.arange(n) + 3, n - 1)], d)
    up = np.where(lane >= 5, d[np.maximum(np.arange(n) - 5, 0)], d)
    bits = [(int(sum(1 << j for j in range(32) if r[j] > 0))) for r in w]
    votes = [2 if (r > 0).all() else 1 if (r > 0).any() else 0 for r in w]
    checks = [exact(o, np.repeat(w.astype(np.int64).sum(1), 32).astype(np.int32)),
              exact(od, down + up), exact(oh, hh[base + (lane ^ 7)]),
              exact(ob, np.repeat(np.array(bits, np.uint64), 32)),
              exact(ov, np.repeat(np.array(votes, np.int32), 32))]
    bad = [m for ok, m in checks if not ok]
    return not bad, "; ".join(bad)


def k_partial_warp(dev, arch):
    """Block of 48 threads: the second warp has 16 lanes (member mask 0xffff)."""
    n = 96
    x = rng(19).integers(-1000, 1000, n).astype(np.int32)

    def body(b, x_, o_, ob):
        i = gid(b)
        v = b.load(x_, [i])
        b.store(o_, [i], b.binary("add", b.warp_reduce("sum", v), b.warp_reduce("max", v)))
        b.store(ob, [i], b.ballot(b.cmp("gt", v, c32(b, 0))))
    k = build("partial_warp", [("x", g(dt.i32, "in")), ("o", g(dt.i32, "out")), ("ob", g(dt.u64, "out"))],
              body)
    o, ob = np.zeros(n, np.int32), np.zeros(n, np.uint64)
    dev.launch(k, arch, [x, o, ob], (2,), (48,))
    want, wantb = np.zeros(n, np.int32), np.zeros(n, np.uint64)
    for blk in range(2):
        for w0, w1 in ((0, 32), (32, 48)):
            seg = x[blk * 48 + w0: blk * 48 + w1]
            want[blk * 48 + w0: blk * 48 + w1] = seg.sum() + seg.max()
            wantb[blk * 48 + w0: blk * 48 + w1] = sum(1 << j for j, v in enumerate(seg) if v > 0)
    ok1, m1 = exact(o, want)
    ok2, m2 = exact(ob, wantb)
    return ok1 and ok2, m1 or m2


def _bf16_round(x: float) -> int:
    """Correctly rounded (nearest even) bf16 bits of a float, by exact arithmetic."""
    if math.isnan(x):
        return 0x7FC0
    f = np.float32(x)
    c = int(np.array(f, BF16).view(np.uint16))
    best = None
    for cand in (c - 1, c, c + 1):
        v = float(np.array(cand & 0xFFFF, np.uint16).view(BF16).astype(np.float64))
        if math.isnan(v):
            continue
        if math.isinf(v) or math.isinf(x):
            err = 0 if v == x else math.inf
            key = (err, 0)
        else:
            key = (abs(Fraction(v) - Fraction(x)), cand & 1)
        if best is None or key < best[0]:
            best = (key, cand & 0xFFFF)
    return best[1]


def k_casts(dev, arch):
    special = [np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 255.9, 256.0, -128.7, -129.0,
               127.9, 0.5, -0.5, -0.0, 65504.0, 70000.0, 1.0000001, 2.0 ** 63, -2.0 ** 63]
    xs = np.array(special + list(rng(15).standard_normal(44) * 300), np.float64)
    n = xs.size
    targets = [dt.i32, dt.u32, dt.i8, dt.u8, dt.i16, dt.u16, dt.i64, dt.u64, dt.f16, dt.bf16, dt.f32,
               dt.bool_]
    big = rng(16).integers(-2 ** 31, 2 ** 31, n).astype(np.int32)

    def body(b, x_, bi_, *outs):
        def f(i):
            v = b.load(x_, [i])
            for t, o in zip(targets, outs[:len(targets)]):
                b.store(o, [i], b.cast(v, t))
            b.store(outs[-2], [i], b.cast(b.cast(v, dt.f32), dt.i16))
            b.store(outs[-1], [i], b.cast(b.load(bi_, [i]), dt.bf16))
        guarded(b, x_, f)
    params = ([("x", g(dt.f64, "in")), ("bi", g(dt.i32, "in"))]
              + [(f"o_{t}", g(t, "out")) for t in targets] + [("o_f32_i16", g(dt.i16, "out")),
                                                              ("o_i32_bf16", g(dt.bf16, "out"))])
    k = build("casts", params, body)
    outs = [np.zeros(n, t.storage_np) for t in targets] + [np.zeros(n, np.int16), np.zeros(n, BF16)]
    dev.launch(k, arch, [xs, big, *outs], (1,), (64,))

    def sat(t, v):
        if math.isnan(v):
            return 0
        return int(min(max(math.trunc(v) if math.isfinite(v) else v, t.min_value()), t.max_value()))
    bad = []
    for t, o in zip(targets, outs):
        if t.is_int:
            want = np.array([sat(t, v) for v in xs], t.storage_np)
        elif t.is_bool:
            want = np.array([bool(v) for v in xs])
        elif t is dt.bf16:
            want = np.array([_bf16_round(v) for v in xs], np.uint16).view(BF16)
        else:
            want = xs.astype(t.storage_np)
        ok, m = exact(o, want)
        if not ok:
            bad.append(f"f64->{t}: {m}")
    want = np.array([sat(dt.i16, float(np.float32(v))) for v in xs], np.int16)
    ok, m = exact(outs[-2], want)
    if not ok:
        bad.append(f"f64->f32->i16: {m}")
    ok, m = exact(outs[-1], np.array([_bf16_round(float(v)) for v in big], np.uint16).view(BF16))
    if not ok:
        bad.append(f"i32->bf16: {m}")
    return not bad, "; ".join(bad)


def k_math(dev, arch, t, fast):
    n = 256
    r = rng(17)
    x = np.concatenate([r.uniform(-10, 10, n - 8), [0.0, -0.0, 1e-3, 0.7, 50.0, -80.0, 3.0, 0.25]])
    y = np.concatenate([r.uniform(0.1, 4, n - 8), [1.0, 2.0, 0.5, -1.5, 3.0, 2.0, -2.0, 0.5]])
    x, y = x.astype(t.storage_np), y.astype(t.storage_np)
    fns = {"exp": np.exp, "log": lambda a: np.log(np.abs(a) + 0.5), "sin": np.sin, "cos": np.cos,
           "tanh": np.tanh, "erf": None, "atan2": np.arctan2, "pow": lambda a, b: np.abs(a) ** b,
           "fmod": np.fmod, "sqrt": lambda a: np.sqrt(np.abs(a)), "atan": np.arctan,
           "expm1": np.expm1, "log1p": lambda a: np.log1p(np.abs(a)), "sinh": np.sinh,
           "exp2": np.exp2, "tan": np.tan, "asin": lambda a: np.arcsin(a / 10), "cosh": np.cosh}
    ops = list(fns)

    def arg(b, fn, a):
        if fn in ("log", "log1p"):
            return b.binary("add", b.unary("abs", a), b.const(0.5 if fn == "log" else 0.0, t))
        if fn in ("sqrt", "pow"):
            return b.unary("abs", a)
        if fn == "asin":
            return b.binary("div", a, b.const(10.0, t))
        return a

    def body(b, x_, y_, o_):
        i = gid(b)
        a, c = b.load(x_, [i]), b.load(y_, [i])
        for k, fn in enumerate(ops):
            two = fn in ("atan2", "pow", "fmod")
            v = b.math(fn, arg(b, fn, a), *([c] if two else []), fast=fast)
            b.store(o_, [b.binary("add", b.binary("mul", c32(b, k), c32(b, n)), i)], v)
    k = build(f"math_{t}", [("x", g(t, "in")), ("y", g(t, "in")), ("o", g(t, "out"))], body)
    out = np.zeros(len(ops) * n, t.storage_np)
    dev.launch(k, arch, [x, y, out], (1,), (n,))
    yd = y.astype(np.float64)
    st = t.storage_np
    host_arg = {"log": lambda a: np.abs(a) + st.type(0.5), "log1p": np.abs, "sqrt": np.abs,
                "pow": np.abs, "asin": lambda a: a / st.type(10.0)}   # rounded as the kernel does
    bad = []
    for k, fn in enumerate(ops):
        xd = host_arg.get(fn, lambda a: a)(x).astype(np.float64)
        if fn == "erf":
            want = np.array([math.erf(v) for v in xd])
        else:
            want = {"log": np.log, "log1p": np.log1p, "sqrt": np.sqrt, "asin": np.arcsin,
                    "pow": lambda a, b: a ** b}.get(fn, fns[fn])
            want = want(xd, yd) if fn in ("atan2", "pow", "fmod") else want(xd)
        got = out[k * n:(k + 1) * n].astype(np.float64)
        if fast:
            ok = np.allclose(got, want, rtol=2e-3 if t.bits == 16 else 1e-5, atol=1e-5, equal_nan=True)
            ok = ok or fn in ("tan", "pow")   # approximations near poles / large results: not checked
            m = "" if ok else f"fast {fn}: max rel err {np.nanmax(np.abs(got - want) / np.abs(want)):.3g}"
        else:
            ulps = 1 if t.bits < 64 else (256 if fn in ("pow", "erf", "asin", "tan") else 8)
            ok, m = close_ulp(got, want, ulps, t.storage_np)
            m = f"{fn}: {m}" if m else ""
        if not ok:
            bad.append(m)
    return not bad, "; ".join(bad)


def k_arrays(dev, arch):
    nx, ny, nz = 4, 8, 2
    x = rng(18).standard_normal((nz, ny, nx)).astype(np.float32)

    def body(b, x_, o_, f_):
        tx, ty, tz = (b.special("thread_idx", a) for a in range(3))
        sm = b.shared_array(dt.f32, (nz, ny, nx))
        dyn = b.dyn_shared(dt.f32)
        loc = b.local_array(dt.f32, (3,))
        v = b.load(x_, [tz, ty, tx])
        b.store(sm, [tz, ty, tx], v)
        lin = b.binary("add", b.binary("mul", b.binary("add", b.binary("mul", tz, c32(b, ny)), ty),
                                       c32(b, nx)), tx)
        b.store(dyn, [lin], b.binary("mul", v, b.const(2.0, dt.f32)))
        for j in range(3):
            b.store(loc, [c32(b, j)], b.binary("add", v, b.const(float(j), dt.f32)))
        b.barrier()
        # read the transposed-in-x neighbour from shared memory
        rx = b.binary("sub", c32(b, nx - 1), tx)
        w = b.binary("add", b.load(sm, [tz, ty, rx]), b.load(dyn, [b.binary("sub", b.binary(
            "sub", b.shape(dyn, 0), c32(b, 1)), lin)]))
        w = b.binary("add", w, b.load(loc, [c32(b, 2)]))
        b.store(o_, [tz, ty, tx], w)
        b.store(f_, [lin], b.cmp("gt", w, b.const(0.0, dt.f32)))
    k = build("arrays", [("x", g(dt.f32, "in", 3)), ("o", g(dt.f32, "out", 3)),
                         ("flags", g(dt.bool_, "out"))], body)
    out, flags = np.zeros_like(x), np.zeros(x.size, np.bool_)
    dev.launch(k, arch, [x, out, flags], (1,), (nx, ny, nz), shared=x.nbytes)
    flat2 = (x * np.float32(2)).reshape(-1)[::-1].reshape(x.shape)
    want = (x[:, :, ::-1] + flat2) + (x + np.float32(2))
    ok1, m1 = exact(out, want.astype(np.float32))
    ok2, m2 = exact(flags, (want > 0).reshape(-1))
    return ok1 and ok2, m1 or m2


def _launch(self, k, arch, args, grid, block, shared=0):
    ptx, abi = emit_ptx(k, arch)
    if DUMP:
        with open(os.path.join(DUMP, f"{k.name}_{arch}.ptx"), "w") as f:
            f.write(ptx)
    self.run(ptx, abi, args, grid, block, shared)


Device.launch = _launch
DUMP = None


class CompileOnly(Exception):
    """Raised instead of launching under --compile-only (after ptxas accepted the PTX)."""


class OfflineDevice:
    """No GPU: ``reference`` runs the IR on kaio's numpy interpreter (checks this script's
    expected values); ``ptxas`` only assembles the PTX."""

    def __init__(self, mode):
        self.mode, self.name, self.driver = mode, f"offline ({mode})", 0

    def launch(self, k, arch, args, grid, block, shared=0):
        if self.mode == "reference":
            from kaio.backends.reference.backend import ReferenceBackend
            ReferenceBackend(sanitize=False).launch(k, grid, block, args, shared)
            return
        import subprocess
        import tempfile
        ptx, _ = emit_ptx(k, arch)
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "k.ptx")
            with open(src, "w") as f:
                f.write(ptx)
            r = subprocess.run(["ptxas", f"-arch={arch}", src, "-o", os.path.join(d, "k.o")],
                               capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"ptxas: {r.stderr}")
        raise CompileOnly()
CASES = {
    "saxpy_f32": k_saxpy,
    "elementwise_f16": lambda d, a: k_half(d, a, dt.f16),
    "elementwise_bf16": lambda d, a: k_half(d, a, dt.bf16),
    "int8_wrap_div_shift": k_int8,
    "loops_for_while": k_loops,
    "block_reduce_shared": k_block_reduce,
    "atomics": k_atomics,
    "shuffles_vote_ballot": k_shuffles,
    "partial_warp_reduce_ballot": k_partial_warp,
    "casts_nan_inf_saturate": k_casts,
    "arrays_shared_dyn_local_3d": k_arrays,
    "math_f32": lambda d, a: k_math(d, a, dt.f32, False),
    "math_f64": lambda d, a: k_math(d, a, dt.f64, False),
    "math_f16": lambda d, a: k_math(d, a, dt.f16, False),
    "math_f32_fast": lambda d, a: k_math(d, a, dt.f32, True),
}


def main(argv=None) -> int:
    global DUMP
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_80,sm_90")
    ap.add_argument("--only", default=None, help="comma-separated case names")
    ap.add_argument("--dump", default=None, help="write each kernel's PTX into this folder")
    ap.add_argument("--offline", choices=("reference", "ptxas"), default=None,
                    help="no GPU: check expectations on the reference interpreter, or only "
                         "assemble with ptxas")
    args = ap.parse_args(argv)
    DUMP = args.dump
    if DUMP:
        os.makedirs(DUMP, exist_ok=True)
    dev = OfflineDevice(args.offline) if args.offline else Device()
    print(f"device: {dev.name}, driver {dev.driver // 1000}.{dev.driver % 1000 // 10}")
    names = args.only.split(",") if args.only else list(CASES)
    failures = 0
    for arch in args.arch.split(","):
        for name in names:
            try:
                ok, msg = CASES[name](dev, arch)
            except CompileOnly:
                print(f"ASSEMBLED {arch} {name}", flush=True)
                continue
            except Exception as e:  # report and go on: one broken kernel must not hide others
                ok, msg = False, f"{type(e).__name__}: {e}"
                traceback.print_exc()
            failures += not ok
            print(f"{'PASS' if ok else 'FAIL'} {arch} {name}" + ("" if ok else f": {msg}"), flush=True)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
