"""RAJAPerf Basic group: DAXPY, IF_QUAD, INIT3, MULADDSUB, NESTED_INIT, REDUCE3_INT, TRAP_INT,
PI_REDUCE, MAT_MAT_SHARED.

Reductions (REDUCE3_INT, TRAP_INT, PI_REDUCE) use the same shape as Stream DOT: a grid-stride
loop of per-thread partials, ``kaio.block_sum/min/max`` per block, one value per block written
by the block's thread 0 under the ``per_block`` partition, and a host combine.
"""
import functools
import math

import numpy as np

import kaio
from kaio import f64, i32, regions

from .._bench import launcher, like, resident
from .._launch import BLOCK, reduction_grid
from ..registry import Tolerance
from ._case import REDUCTION, add_up, feed, raja_case
from ._tiled import matmul_tiled, tiled_launcher
from .checksum import DataInit

N = 1_000_000
SMALL = 10_000


# --- elementwise -------------------------------------------------------------------------------
@kaio.kernel
def daxpy(x: kaio.In[f64], y: kaio.Region[f64], a: f64):
    for i in y.owned():
        y[i] += a * x[i]


@kaio.kernel
def if_quad(a: kaio.In[f64], b: kaio.In[f64], c: kaio.In[f64], x1: kaio.Out[f64], x2: kaio.Out[f64]):
    for i in x1.owned():
        s = b[i] * b[i] - 4.0 * a[i] * c[i]
        if s >= 0.0:
            s = kaio.math.sqrt(s)
            x2[i] = (-b[i] + s) / (2.0 * a[i])
            x1[i] = (-b[i] - s) / (2.0 * a[i])
        else:
            x2[i] = 0.0
            x1[i] = 0.0


@kaio.kernel
def init3(in1: kaio.In[f64], in2: kaio.In[f64], out1: kaio.Out[f64], out2: kaio.Out[f64],
          out3: kaio.Out[f64]):
    for i in out1.owned():
        v = -in1[i] - in2[i]
        out1[i] = v
        out2[i] = v
        out3[i] = v


@kaio.kernel
def muladdsub(in1: kaio.In[f64], in2: kaio.In[f64], out1: kaio.Out[f64], out2: kaio.Out[f64],
              out3: kaio.Out[f64]):
    for i in out1.owned():
        out1[i] = in1[i] * in2[i]
        out2[i] = in1[i] + in2[i]
        out3[i] = in1[i] - in2[i]


@kaio.kernel(block=(32, 8, 1))
def nested_init(array: kaio.Out[f64, 3, regions.tiles()]):
    """array[k, j, i] = 1e-8 * i * j * k (i fastest, as the suite lays it out), written as the
    suite's Base_CUDA kernel: i and j from the (32, 8) block's x and y, k = blockIdx.z, on the
    grid (ceil(ni/32), ceil(nj/8), nk) that is 3-d tiles()' default launch for this block. No
    division unravels a linear id (the elementwise form: 116 sm_90 SASS instructions, this 44)."""
    i = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    j = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    k = kaio.block_idx.z
    if i < array.shape[2] and j < array.shape[1]:
        array[k, j, i] = 1.0e-8 * f64(i) * f64(j) * f64(k)


# --- reductions --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _reduce3_kernel():
    @kaio.kernel
    def reduce3_int(vec: kaio.In[i32], psum: kaio.Out[i32, regions.per_block()],
                    pmin: kaio.Out[i32, regions.per_block()], pmax: kaio.Out[i32, regions.per_block()]):
        s = i32(0)
        lo = i32(2147483647)
        hi = i32(-2147483648)
        for i in range(kaio.global_id(), vec.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
            v = vec[i]
            s += v
            lo = kaio.math.min(lo, v)
            hi = kaio.math.max(hi, v)
        bs = kaio.block_sum(s)
        bmin = kaio.block_min(lo)
        bmax = kaio.block_max(hi)
        if kaio.thread_idx.x == 0:
            psum[kaio.block_idx.x] = bs
            pmin[kaio.block_idx.x] = bmin
            pmax[kaio.block_idx.x] = bmax
    return reduce3_int


@kaio.func
def trap_int_func(x, y, xp, yp):
    denom = (x - xp) * (x - xp) + (y - yp) * (y - yp)
    return 1.0 / kaio.math.sqrt(denom)


@functools.lru_cache(maxsize=None)
def _trap_kernel():
    @kaio.kernel
    def trap_int(x0: f64, xp: f64, y: f64, yp: f64, h: f64, n: i32,
                 partial: kaio.Out[f64, regions.per_block()]):
        s = f64(0.0)
        for i in range(kaio.global_id(), n, kaio.grid_dim.x * kaio.block_dim.x):
            x = x0 + f64(i) * h
            s += trap_int_func(x, y, xp, yp)
        total = kaio.block_sum(s)
        if kaio.thread_idx.x == 0:
            partial[kaio.block_idx.x] = total
    return trap_int


@functools.lru_cache(maxsize=None)
def _pi_kernel():
    @kaio.kernel
    def pi_reduce(dx: f64, n: i32, partial: kaio.Out[f64, regions.per_block()]):
        s = f64(0.0)
        for i in range(kaio.global_id(), n, kaio.grid_dim.x * kaio.block_dim.x):
            x = (f64(i) + 0.5) * dx
            s += dx / (1.0 + x * x)
        total = kaio.block_sum(s)
        if kaio.thread_idx.x == 0:
            partial[kaio.block_idx.x] = total
    return pi_reduce


def reduce3_int(vec: np.ndarray):
    """(sum, min, max) of an int32 vector."""
    blocks = reduction_grid(vec.shape[0])
    ps, pn, px = (np.empty(blocks, np.int32) for _ in range(3))
    _reduce3_kernel()[(blocks,), (BLOCK,)](vec, ps, pn, px)
    return int(ps.sum(dtype=np.int64)), int(pn.min()), int(px.max())


def trap_int(x0, xp, y, yp, h, n) -> float:
    """h * sum_{i<n} 1/sqrt((x0 + i h - xp)^2 + (y - yp)^2)."""
    blocks = reduction_grid(n)
    partial = np.empty(blocks, np.float64)
    _trap_kernel()[(blocks,), (BLOCK,)](x0, xp, y, yp, h, n, partial)
    return math.fsum(partial) * h


def pi_reduce(n: int) -> float:
    """4 * sum_i dx / (1 + x_i^2), x_i = (i + 1/2) dx, dx = 1/n (midpoint rule for pi)."""
    blocks = reduction_grid(n)
    partial = np.empty(blocks, np.float64)
    _pi_kernel()[(blocks,), (BLOCK,)](1.0 / n, n, partial)
    return 4.0 * math.fsum(partial)


def mat_mat_shared(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A @ B (float64) through the tiled shared-memory kernel."""
    return matmul_tiled(a, b)


# --- cases -------------------------------------------------------------------------------------
def _daxpy_in(n):
    d = DataInit()
    y = d.const(n, 0.0)
    return {"y": y, "x": d.real(n), "a": d.scalar()}


def _run_daxpy(i):
    y = i["y"].copy()
    daxpy(i["x"], y, i["a"])
    return {"y": y}


raja_case(name="DAXPY", group="basic", make=_daxpy_in, reps=500, default_size=N, small_size=SMALL,
          run=_run_daxpy, reference=lambda i: {"y": i["y"] + i["a"] * i["x"]},
          flops=lambda n: 2.0 * n, bytes=lambda n: 24.0 * n, description="y += a * x",
          carry=feed("y"),  # y accumulates over the reps of a pass
          bench=lambda i: resident(i, lambda d: launcher(daxpy, d["x"], d["y"], i["a"]),
                                   read=("x",), update=("y",)))


def _ifquad_in(n):
    d = DataInit()
    return {"a": d.rand_sign(n), "b": d.real(n), "c": d.real(n)}


def _run_ifquad(i):
    x1, x2 = np.empty_like(i["a"]), np.empty_like(i["a"])
    if_quad(i["a"], i["b"], i["c"], x1, x2)
    return {"x1": x1, "x2": x2}


def _ifquad_ref(i):
    a, b, c = i["a"], i["b"], i["c"]
    s = b * b - 4.0 * a * c
    ok = s >= 0.0
    r = np.sqrt(np.where(ok, s, 0.0))
    return {"x1": np.where(ok, (-b - r) / (2.0 * a), 0.0), "x2": np.where(ok, (-b + r) / (2.0 * a), 0.0)}


raja_case(name="IF_QUAD", group="basic", make=_ifquad_in, reps=180, default_size=N, small_size=SMALL,
          run=_run_ifquad, reference=_ifquad_ref, flops=lambda n: 11.0 * n,
          bytes=lambda n: 40.0 * n, description="roots of a x^2 + b x + c where real",
          checksum_scale=1e-4, problem=lambda n: n,  # src/basic/IF_QUAD.cpp
          bench=lambda i: resident(i, lambda d: launcher(if_quad, *(d[k] for k in "abc"), d["x1"], d["x2"]),
                                   read=("a", "b", "c"), new=like(i, "a", "x1", "x2")))


def _two_in(n):
    d = DataInit()
    d.skip(3)   # the suite initialises the three outputs first; the kernel overwrites them
    return {"in1": d.real(n), "in2": d.real(n)}


def _run_three(kernel):
    def run(i):
        outs = [np.empty_like(i["in1"]) for _ in range(3)]
        kernel(i["in1"], i["in2"], *outs)
        return dict(zip(("out1", "out2", "out3"), outs))
    return run


def _bench_three(kernel):
    return lambda i: resident(i, lambda d: launcher(kernel, *(d[k] for k in _THREE_ARGS)),
                              read=("in1", "in2"), new=like(i, "in1", *_THREE_ARGS[2:]))


_THREE_ARGS = ("in1", "in2", "out1", "out2", "out3")


raja_case(name="INIT3", group="basic", make=_two_in, reps=500, default_size=N, small_size=SMALL,
          run=_run_three(init3),
          reference=lambda i: {k: -i["in1"] - i["in2"] for k in ("out1", "out2", "out3")},
          flops=lambda n: 1.0 * n, bytes=lambda n: 40.0 * n, description="out1 = out2 = out3 = -in1 - in2",
          bench=_bench_three(init3))
raja_case(name="MULADDSUB", group="basic", make=_two_in, reps=350, default_size=N, small_size=SMALL,
          run=_run_three(muladdsub),
          reference=lambda i: {"out1": i["in1"] * i["in2"], "out2": i["in1"] + i["in2"],
                               "out3": i["in1"] - i["in2"]},
          flops=lambda n: 3.0 * n, bytes=lambda n: 40.0 * n, description="product, sum, difference",
          bench=_bench_three(muladdsub))


def _nested_in(size):
    ni, nj, nk = size
    return {"shape": (nk, nj, ni)}


def _run_nested(i):
    arr = np.empty(i["shape"], np.float64)
    nested_init(arr)
    return {"array": arr}


def _nested_ref(i):
    k, j, ii = np.meshgrid(*(np.arange(s, dtype=np.float64) for s in i["shape"]), indexing="ij")
    return {"array": 1.0e-8 * ii * j * k}


raja_case(name="NESTED_INIT", group="basic", make=_nested_in, reps=1000, default_size=(100, 100, 100),
          small_size=(12, 10, 9), run=_run_nested, reference=_nested_ref,
          flops=lambda s: 3.0 * s[0] * s[1] * s[2], bytes=lambda s: 8.0 * s[0] * s[1] * s[2],
          description="array[k][j][i] = 1e-8 i j k",
          bench=lambda i: resident(i, lambda d: launcher(nested_init, d["array"]),
                                   new={"array": (i["shape"], np.float64)}))


def _reduce3_in(n):
    return {"vec": DataInit().ints(n)}


raja_case(name="REDUCE3_INT", group="basic", make=_reduce3_in, reps=50, default_size=N,
          small_size=SMALL,
          run=lambda i: dict(zip(("vsum", "vmin", "vmax"), map(np.array, reduce3_int(i["vec"])))),
          reference=lambda i: {"vsum": np.array(int(i["vec"].sum(dtype=np.int64))),
                               "vmin": np.array(int(i["vec"].min())),
                               "vmax": np.array(int(i["vec"].max()))},
          tolerance=Tolerance(exact=True, why="integer sum/min/max: exact in any order"),
          checksum_rtol=0.0, bytes=lambda n: 4.0 * n, flops=lambda n: 1.0 * n, fold=add_up("vsum"),
          description="integer sum, min, max", bench=lambda i: _reduce3_bench(i))


def _reduce3_bench(i):
    blocks = reduction_grid(i["vec"].shape[0])
    k = _reduce3_kernel()
    parts = ("psum", "pmin", "pmax")
    return resident(i, lambda d: launcher(k, d["vec"], *(d[p] for p in parts),
                                          config=((blocks,), (BLOCK,))),
                    read=("vec",), new={p: ((blocks,), np.int32) for p in parts},
                    finish=lambda h, _: {"vsum": np.array(int(h["psum"].sum(dtype=np.int64))),
                                         "vmin": np.array(int(h["pmin"].min())),
                                         "vmax": np.array(int(h["pmax"].max()))})


def _partials_bench(i, kernel, scalars, combine):
    """TRAP_INT and PI_REDUCE: ``kernel(*scalars, n, partial)``, the host combines partials."""
    blocks = reduction_grid(i["n"])
    return resident(i, lambda d: launcher(kernel, *scalars, i["n"], d["partial"],
                                          config=((blocks,), (BLOCK,))),
                    new={"partial": ((blocks,), np.float64)},
                    finish=lambda h, _: combine(h["partial"]))


def _trap_in(n):
    d = DataInit()
    xn = d.scalar()
    x0, xp, y, yp = d.scalar(), d.scalar(), d.scalar(), d.scalar()
    return {"x0": x0, "xp": xp, "y": y, "yp": yp, "h": xn - x0, "n": n}


def _trap_ref(i):
    x = i["x0"] + np.arange(i["n"], dtype=np.float64) * i["h"]
    f = 1.0 / np.sqrt((x - i["xp"]) * (x - i["xp"]) + (i["y"] - i["yp"]) * (i["y"] - i["yp"]))
    return {"sumx": np.array(math.fsum(f) * i["h"])}


raja_case(name="TRAP_INT", group="basic", make=_trap_in, reps=50, default_size=N, small_size=SMALL,
          run=lambda i: {"sumx": np.array(trap_int(i["x0"], i["xp"], i["y"], i["yp"], i["h"], i["n"]))},
          reference=_trap_ref, tolerance=REDUCTION, flops=lambda n: 10.0 * n, fold=add_up("sumx"),
          description="trapezoid-rule sum of 1/sqrt(dx^2 + dy^2)",
          bench=lambda i: _partials_bench(i, _trap_kernel(), (i["x0"], i["xp"], i["y"], i["yp"], i["h"]),
                                          lambda p: {"sumx": np.array(math.fsum(p) * i["h"])}))
raja_case(name="PI_REDUCE", group="basic", make=lambda n: {"n": n}, reps=50, default_size=N,
          small_size=SMALL, run=lambda i: {"pi": np.array(pi_reduce(i["n"]))},
          reference=lambda i: {"pi": np.array(4.0 * math.fsum(
              (1.0 / i["n"]) / (1.0 + ((np.arange(i["n"]) + 0.5) * (1.0 / i["n"])) ** 2)))},
          tolerance=REDUCTION, flops=lambda n: 6.0 * n, description="midpoint rule for pi",
          bench=lambda i: _partials_bench(i, _pi_kernel(), (1.0 / i["n"],),
                                          lambda p: {"pi": np.array(4.0 * math.fsum(p))}))


def _matmat_in(n):
    d = DataInit()
    return {"a": d.const(n * n, 1.0).reshape(n, n), "b": d.const(n * n, 1.0).reshape(n, n)}


raja_case(name="MAT_MAT_SHARED", group="basic", make=_matmat_in, reps=5, default_size=1000,
          small_size=40, run=lambda i: {"c": mat_mat_shared(i["a"], i["b"])},
          reference=lambda i: {"c": i["a"] @ i["b"]},
          flops=lambda n: 2.0 * n ** 3, bytes=lambda n: 24.0 * n * n,
          checksum_scale=1e-6, description="16x16 shared-memory tiles",
          bench=lambda i: resident(i, lambda d: tiled_launcher(d["a"], d["b"], d["c"]),
                                   read=("a", "b"), new=like(i, "a", "c")))
