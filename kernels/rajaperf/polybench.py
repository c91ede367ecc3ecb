"""RAJAPerf Polybench group: ATAX, GEMM, JACOBI_1D, JACOBI_2D, HEAT_3D, MVT, FDTD_2D, 2MM.

Inputs follow the suite's set-up (its generic ``initData`` in call order, see ``_suite_inputs``).
Those values vary little across an array, so :func:`varied_inputs` also provides PolyBench's own
initialisation formulas (e.g. ``A[i][j] = ((i + j) % N) / (5 N)``) for tests that must tell
neighbouring elements apart. Stencils keep two buffers and swap roles each half-step
(read A, write B; read B, write A): every point is written by its own thread and neighbours
are only read from the other buffer, so no step races. Matrix-vector products use one thread
per output element; matrix-matrix products use the shared-memory tiled kernel.
"""
import numpy as np

import kaio
from kaio import f64, i32, regions

from .._bench import launcher, resident
from ..registry import Tolerance
from ._case import REDUCTION, copy, feed, raja_case
from ._tiled import matmul_tiled, tiled_launcher
from .checksum import DataInit


# --- matrix-vector -----------------------------------------------------------------------------
@kaio.kernel
def matvec(a: kaio.In[f64, 2], x: kaio.In[f64], y: kaio.Out[f64]):
    """y[i] = sum_j a[i, j] x[j]."""
    for i in y.owned():
        acc = f64(0.0)
        for j in range(a.shape[1]):
            acc += a[i, j] * x[j]
        y[i] = acc


@kaio.kernel
def matvec_t(a: kaio.In[f64, 2], x: kaio.In[f64], y: kaio.Out[f64]):
    """y[j] = sum_i a[i, j] x[i] (neighbouring threads read neighbouring columns)."""
    for j in y.owned():
        acc = f64(0.0)
        for i in range(a.shape[0]):
            acc += a[i, j] * x[i]
        y[j] = acc


@kaio.kernel
def matvec_add(a: kaio.In[f64, 2], x: kaio.In[f64], y: kaio.Region[f64], transpose: kaio.Const[bool]):
    """y += A x (or A^T x): the dot product first, then one addition, as the suite does."""
    for i in y.owned():
        acc = f64(0.0)
        for j in range(a.shape[0]):
            if transpose:
                acc += a[j, i] * x[j]
            else:
                acc += a[i, j] * x[j]
        y[i] = y[i] + acc


@kaio.kernel
def mvt_x2(a: kaio.In[f64, 2], y2: kaio.In[f64], x2: kaio.Region[f64]):
    """The suite's second MVT loop: x2[i] += sum_j A[j][i] * y2[i] (it indexes y2 by i, not j;
    src/polybench/POLYBENCH_MVT.hpp BODY5)."""
    for i in x2.owned():
        acc = f64(0.0)
        for j in range(a.shape[0]):
            acc += a[j, i] * y2[i]
        x2[i] = x2[i] + acc


# --- stencils ----------------------------------------------------------------------------------
@kaio.kernel
def jacobi_1d_step(a: kaio.In[f64], b: kaio.Region[f64]):
    n = b.shape[0]
    for i in b.owned():
        if i > 0 and i < n - 1:
            b[i] = 0.33333 * (a[i - 1] + a[i] + a[i + 1])


@kaio.kernel
def jacobi_2d_step(a: kaio.In[f64, 2], b: kaio.Region[f64, 2, regions.tiles()]):
    """tiles(): the CUDA 2-D index under a guard, no unravel of a linear id by division."""
    n = b.shape[0]
    for i, j in b.owned():
        if i > 0 and i < n - 1 and j > 0 and j < n - 1:
            b[i, j] = 0.2 * (a[i, j] + a[i, j - 1] + a[i, j + 1] + a[i + 1, j] + a[i - 1, j])


@kaio.kernel
def jacobi_2d_slab(a: kaio.In[f64, 2], b: kaio.Region[f64, 2], halo: i32, row0: i32, n: i32):
    """JACOBI_2D on one MPI rank's rows (:mod:`kaio.mpi`): ``b`` is the owned rows
    ``row0 .. row0 + b.shape[0]`` of the ``n`` x ``n`` grid, ``a`` the same rows with ``halo``
    rows above and below. Each point is computed as :func:`jacobi_2d_step` computes it, so the
    ranks together give the single-process result bit for bit."""
    m = b.shape[1]
    for i, j in b.owned():
        g = row0 + i
        if g > 0 and g < n - 1 and j > 0 and j < m - 1:
            r = i + halo
            b[i, j] = 0.2 * (a[r, j] + a[r, j - 1] + a[r, j + 1] + a[r + 1, j] + a[r - 1, j])


@kaio.kernel
def heat_3d_step(a: kaio.In[f64, 3], b: kaio.Region[f64, 3, regions.tiles()]):
    """tiles() on 3-d: the CUDA 3-D index (planes on z) under a guard, no division."""
    n = b.shape[0]
    for i, j, k in b.owned():
        if i > 0 and i < n - 1 and j > 0 and j < n - 1 and k > 0 and k < n - 1:
            b[i, j, k] = (0.125 * (a[i + 1, j, k] - 2.0 * a[i, j, k] + a[i - 1, j, k])
                          + 0.125 * (a[i, j + 1, k] - 2.0 * a[i, j, k] + a[i, j - 1, k])
                          + 0.125 * (a[i, j, k + 1] - 2.0 * a[i, j, k] + a[i, j, k - 1])
                          + a[i, j, k])


@kaio.kernel
def fdtd_ey(hz: kaio.In[f64, 2], fict: kaio.In[f64], ey: kaio.Region[f64, 2], t: i32):
    for i, j in ey.owned():
        if i == 0:
            ey[i, j] = fict[t]
        else:
            ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])


@kaio.kernel
def fdtd_ex(hz: kaio.In[f64, 2], ex: kaio.Region[f64, 2]):
    for i, j in ex.owned():
        if j > 0:
            ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])


@kaio.kernel
def fdtd_hz(ex: kaio.In[f64, 2], ey: kaio.In[f64, 2], hz: kaio.Region[f64, 2]):
    nx = hz.shape[0]
    ny = hz.shape[1]
    for i, j in hz.owned():
        if i < nx - 1 and j < ny - 1:
            hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])


@kaio.kernel
def fill_2d(x: kaio.Out[f64, 2], value: f64):
    """x[i, j] = value: 2MM's second product starts each sum at beta."""
    for i, j in x.owned():
        x[i, j] = value


# --- inputs -------------------------------------------------------------------------------------
def _suite_inputs(name, size):
    """The suite's set-up for each kernel: arrays initialised in its order (then reshaped)."""
    d = DataInit()
    if name == "ATAX":
        n = size
        d.real(n)  # tmp: initialised by the suite, overwritten by the kernel
        x = d.real(n)
        return {"x": x, "a": d.real(n * n).reshape(n, n)}
    if name == "GEMM":
        ni, nj, nk = size
        return {"a": d.real(ni * nk).reshape(ni, nk), "b": d.real(nk * nj).reshape(nk, nj), "alpha": 0.62}
    if name in ("JACOBI_1D", "JACOBI_2D", "HEAT_3D"):
        n, steps = size
        shape = {"JACOBI_1D": (n,), "JACOBI_2D": (n, n), "HEAT_3D": (n, n, n)}[name]
        cells = int(np.prod(shape))
        return {"a": d.real(cells).reshape(shape), "b": d.real(cells).reshape(shape), "steps": steps}
    if name == "MVT":
        n = size
        y1, y2 = d.real(n), d.real(n)
        a = d.real(n * n).reshape(n, n)
        return {"y1": y1, "y2": y2, "a": a, "x1": d.const(n, 0.0), "x2": d.const(n, 0.0)}
    if name == "2MM":
        ni, nj, nk, nl = size
        d.real(ni * nj)  # tmp
        a, b = d.real(ni * nk).reshape(ni, nk), d.real(nk * nj).reshape(nk, nj)
        c = d.real(nj * nl).reshape(nj, nl)
        return {"a": a, "b": b, "c": c, "d": d.const(ni * nl, 0.0).reshape(ni, nl),
                "alpha": 1.5, "beta": 1.2}
    raise KeyError(name)


def _suite(name):
    return lambda size: _suite_inputs(name, size)


def varied_inputs(name, size):
    """PolyBench's initialisation formulas (every element distinct), for tests."""
    return {"ATAX": _atax_in, "GEMM": _gemm_in, "JACOBI_1D": _jacobi1_in, "JACOBI_2D": _jacobi2_in,
            "HEAT_3D": _heat_in, "MVT": _mvt_in, "2MM": _2mm_in}[name](size)


def _grid(*shape):
    return np.meshgrid(*(np.arange(s, dtype=np.int64) for s in shape), indexing="ij")


def _atax_in(n):
    i, j = _grid(n, n)
    return {"a": ((i + j) % n) / (5.0 * n), "x": 1.0 + np.arange(n) / n}


def _atax_run(inp):
    tmp = np.empty(inp["a"].shape[0])
    matvec(inp["a"], inp["x"], tmp)
    y = np.empty(inp["a"].shape[1])
    matvec_t(inp["a"], tmp, y)
    return {"y": y}


def _gemm_in(size):
    ni, nj, nk = size
    i, k = _grid(ni, nk)
    k2, j = _grid(nk, nj)
    return {"a": ((i * (k + 1)) % nk) / nk, "b": ((k2 * (j + 2)) % nj) / nj, "alpha": 0.62}


def _jacobi1_in(size):
    n, steps = size
    i = np.arange(n, dtype=np.float64)
    return {"a": (i + 2.0) / n, "b": (i + 3.0) / n, "steps": steps}


def _jacobi1_run(inp):
    st = copy(inp, "a", "b")
    for _ in range(inp["steps"]):
        jacobi_1d_step(st["a"], st["b"])
        jacobi_1d_step(st["b"], st["a"])
    return st


def _jacobi1_ref(inp):
    a, b = inp["a"].copy(), inp["b"].copy()
    for _ in range(inp["steps"]):
        b[1:-1] = 0.33333 * (a[:-2] + a[1:-1] + a[2:])
        a[1:-1] = 0.33333 * (b[:-2] + b[1:-1] + b[2:])
    return {"a": a, "b": b}


def _jacobi2_in(size):
    n, steps = size
    i, j = _grid(n, n)
    return {"a": (i * (j + 2) + 2.0) / n, "b": (i * (j + 3) + 3.0) / n, "steps": steps}


def _jacobi2_run(inp):
    st = copy(inp, "a", "b")
    for _ in range(inp["steps"]):
        jacobi_2d_step(st["a"], st["b"])
        jacobi_2d_step(st["b"], st["a"])
    return st


def _j2(src, dst):
    dst[1:-1, 1:-1] = 0.2 * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1]
                             + src[:-2, 1:-1])


def _jacobi2_ref(inp):
    a, b = inp["a"].copy(), inp["b"].copy()
    for _ in range(inp["steps"]):
        _j2(a, b)
        _j2(b, a)
    return {"a": a, "b": b}


def _heat_in(size):
    n, steps = size
    i, j, k = _grid(n, n, n)
    a = (i + j + (n - k)) * 10.0 / n
    return {"a": a, "b": a.copy(), "steps": steps}


def _heat_run(inp):
    st = copy(inp, "a", "b")
    for _ in range(inp["steps"]):
        heat_3d_step(st["a"], st["b"])
        heat_3d_step(st["b"], st["a"])
    return st


def _h3(s, d):
    c = s[1:-1, 1:-1, 1:-1]
    d[1:-1, 1:-1, 1:-1] = (0.125 * (s[2:, 1:-1, 1:-1] - 2.0 * c + s[:-2, 1:-1, 1:-1])
                           + 0.125 * (s[1:-1, 2:, 1:-1] - 2.0 * c + s[1:-1, :-2, 1:-1])
                           + 0.125 * (s[1:-1, 1:-1, 2:] - 2.0 * c + s[1:-1, 1:-1, :-2]) + c)


def _heat_ref(inp):
    a, b = inp["a"].copy(), inp["b"].copy()
    for _ in range(inp["steps"]):
        _h3(a, b)
        _h3(b, a)
    return {"a": a, "b": b}


def _mvt_in(n):
    r = np.arange(n)
    i, j = _grid(n, n)
    return {"x1": (r % n) / n, "x2": ((r + 1) % n) / n, "y1": ((r + 3) % n) / n,
            "y2": ((r + 4) % n) / n, "a": ((i * j) % n) / n}


def _mvt_run(inp):
    st = copy(inp, "x1", "x2")
    matvec_add(inp["a"], inp["y1"], st["x1"], False)
    mvt_x2(inp["a"], inp["y2"], st["x2"])
    return st


def _mvt_ref(i):
    return {"x1": i["x1"] + i["a"] @ i["y1"], "x2": i["x2"] + (i["a"] * i["y2"][None, :]).sum(axis=0)}


def _fdtd_in(size):
    nx, ny, steps = size
    d = DataInit()
    return {"hz": d.const(nx * ny, 0.0).reshape(nx, ny), "ex": d.real(nx * ny).reshape(nx, ny),
            "ey": d.real(nx * ny).reshape(nx, ny), "fict": d.real(steps), "steps": steps}


def _fdtd_run(inp):
    st = copy(inp, "hz", "ex", "ey")
    for t in range(inp["steps"]):
        fdtd_ey(st["hz"], inp["fict"], st["ey"], t)
        fdtd_ex(st["hz"], st["ex"])
        fdtd_hz(st["ex"], st["ey"], st["hz"])
    return st


def _fdtd_ref(inp):
    hz, ex, ey = inp["hz"].copy(), inp["ex"].copy(), inp["ey"].copy()
    for t in range(inp["steps"]):
        ey[0, :] = inp["fict"][t]
        ey[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return {"hz": hz, "ex": ex, "ey": ey}


def _2mm_in(size):
    ni, nj, nk, nl = size
    i, k = _grid(ni, nk)
    k2, j = _grid(nk, nj)
    j2, l1 = _grid(nj, nl)
    i2, l2 = _grid(ni, nl)
    return {"a": ((i * k) % ni) / ni, "b": ((k2 * (j + 1)) % nj) / nj,
            "c": ((j2 * (l1 + 3) + 1) % nl) / nl, "d": ((i2 * (l2 + 2)) % nk) / nk,
            "alpha": 1.5, "beta": 1.2}


def _2mm_run(inp):
    """The suite starts each D sum at beta (src/polybench/POLYBENCH_2MM.hpp): D = beta + tmp C,
    i.e. the tiled kernel's 1 * (a matrix of beta) + tmp C."""
    tmp = matmul_tiled(inp["a"], inp["b"], alpha=inp["alpha"])
    start = np.full((tmp.shape[0], inp["c"].shape[1]), float(inp["beta"]))
    return {"d": matmul_tiled(tmp, inp["c"], c=start, beta=1.0)}


def _2mm_ref(inp):
    tmp = (inp["alpha"] * inp["a"]) @ inp["b"]
    return {"d": inp["beta"] + tmp @ inp["c"]}


_STENCIL = Tolerance(atol=1e-13, rtol=1e-13,
                     why="float64 stencil, same expression order as the reference")

raja_case(name="ATAX", group="polybench", make=_suite("ATAX"), reps=100, default_size=1000, small_size=48,
          run=_atax_run, bench=lambda i: _atax_bench(i),
          reference=lambda i: {"y": i["a"].T @ (i["a"] @ i["x"])},
          tolerance=REDUCTION, flops=lambda n: 4.0 * n * n, bytes=lambda n: 16.0 * n * n,
          checksum_scale=1e-3, problem=lambda n: n * n, description="y = A^T (A x)")
raja_case(name="GEMM", group="polybench", make=_suite("GEMM"), reps=4, default_size=(1000, 1000, 1200),
          small_size=(40, 36, 50), run=lambda i: {"c": matmul_tiled(i["a"], i["b"], alpha=i["alpha"])},
          reference=lambda i: {"c": (i["alpha"] * i["a"]) @ i["b"]}, tolerance=REDUCTION,
          flops=lambda s: 2.0 * s[0] * s[1] * s[2],
          bytes=lambda s: 8.0 * (s[0] * s[2] + s[2] * s[1] + s[0] * s[1]),
          checksum_scale=1e-3, problem=lambda s: s[0] * s[1],
          description="C = sum_k alpha A[i][k] B[k][j] (the suite's beta C term is overwritten)",
          bench=lambda i: resident(i, lambda d: tiled_launcher(d["a"], d["b"], d["c"], alpha=i["alpha"]),
                                   read=("a", "b"),
                                   new={"c": ((i["a"].shape[0], i["b"].shape[1]), np.float64)}))
raja_case(name="JACOBI_1D", group="polybench", make=_suite("JACOBI_1D"), reps=100,
          default_size=(1_000_002, 16), small_size=(1000, 4), run=_jacobi1_run,
          reference=_jacobi1_ref, tolerance=_STENCIL, flops=lambda s: 6.0 * s[0] * s[1],
          bytes=lambda s: 32.0 * s[0] * s[1], checksum_keys=("a", "b"), checksum_scale=1e-4,
          carry=feed("a", "b"), description="3-point average, ping-pong A/B",
          bench=lambda i: _pingpong(jacobi_1d_step, i))
raja_case(name="JACOBI_2D", group="polybench", make=_suite("JACOBI_2D"), reps=50, default_size=(1002, 40),
          small_size=(34, 3), run=_jacobi2_run, reference=_jacobi2_ref, tolerance=_STENCIL,
          flops=lambda s: 10.0 * s[0] ** 2 * s[1], bytes=lambda s: 32.0 * s[0] ** 2 * s[1],
          checksum_keys=("a", "b"), checksum_scale=1e-4, carry=feed("a", "b"),
          description="5-point average, ping-pong A/B",
          bench=lambda i: _pingpong(jacobi_2d_step, i))
raja_case(name="HEAT_3D", group="polybench", make=_suite("HEAT_3D"), reps=20, default_size=(102, 20),
          small_size=(14, 2), run=_heat_run, reference=_heat_ref, tolerance=_STENCIL,
          flops=lambda s: 30.0 * s[0] ** 3 * s[1], bytes=lambda s: 32.0 * s[0] ** 3 * s[1],
          checksum_keys=("a", "b"), checksum_scale=1e-4, carry=feed("a", "b"),
          description="7-point heat equation, ping-pong A/B",
          bench=lambda i: _pingpong(heat_3d_step, i))


def _pingpong(step, inputs):
    def bind(d):
        a, b = d["a"], d["b"]

        def launch():
            for _ in range(inputs["steps"]):
                step(a, b)
                step(b, a)
        return launch
    return resident(inputs, bind, update=("a", "b"))


def _atax_bench(i):
    n = i["a"].shape[0]

    def bind(d):
        def launch():
            matvec(d["a"], d["x"], d["tmp"])
            matvec_t(d["a"], d["tmp"], d["y"])
        return launch
    return resident(i, bind, read=("a", "x"), new={"tmp": ((n,), np.float64), "y": ((n,), np.float64)},
                    outputs=("y",))


def _mvt_bench(i):
    def bind(d):
        def launch():
            matvec_add(d["a"], d["y1"], d["x1"], False)
            mvt_x2(d["a"], d["y2"], d["x2"])
        return launch
    return resident(i, bind, read=("a", "y1", "y2"), update=("x1", "x2"))


def _fdtd_bench(i):
    def bind(d):
        hz, ex, ey, fict = d["hz"], d["ex"], d["ey"], d["fict"]

        def launch():
            for t in range(i["steps"]):
                fdtd_ey(hz, fict, ey, t)
                fdtd_ex(hz, ex)
                fdtd_hz(ex, ey, hz)
        return launch
    return resident(i, bind, read=("fict",), update=("hz", "ex", "ey"))


def _2mm_bench(i):
    ni, nj, nl = i["a"].shape[0], i["b"].shape[1], i["c"].shape[1]

    def bind(d):
        first = tiled_launcher(d["a"], d["b"], d["tmp"], alpha=i["alpha"])
        start = launcher(fill_2d, d["d"], float(i["beta"]))
        second = tiled_launcher(d["tmp"], d["c"], d["d"], beta=1.0, accumulate=True)

        def launch():
            first()
            start()
            second()
        return launch
    return resident(i, bind, read=("a", "b", "c"),
                    new={"tmp": ((ni, nj), np.float64), "d": ((ni, nl), np.float64)}, outputs=("d",))
raja_case(name="MVT", group="polybench", make=_suite("MVT"), reps=100, default_size=1000, small_size=48,
          run=_mvt_run, reference=_mvt_ref, carry=feed("x1", "x2"), bench=_mvt_bench,
          tolerance=REDUCTION, flops=lambda n: 4.0 * n * n, bytes=lambda n: 16.0 * n * n,
          description="x1 += A y1; x2[i] += sum_j A[j][i] y2[i] (the suite's code, not PolyBench's)")
# FDTD_2D: nx = ny = 1000, 40 time steps, 8 reps (src/polybench/POLYBENCH_FDTD_2D.cpp)
raja_case(name="FDTD_2D", group="polybench", make=_fdtd_in, reps=8, default_size=(1000, 1000, 40),
          small_size=(20, 24, 3), run=_fdtd_run, reference=_fdtd_ref, tolerance=_STENCIL,
          flops=lambda s: 11.0 * s[0] * s[1] * s[2], bytes=lambda s: 8.0 * 9 * s[0] * s[1] * s[2],
          checksum_keys=("hz",), checksum_scale=1e-3, carry=feed("hz", "ex", "ey"),
          problem=lambda s: max((s[0] - 1) * s[1], s[0] * (s[1] - 1)), bench=_fdtd_bench,
          description="2-D finite-difference time domain")
# 2MM: ni = nj = nl = 1000, nk = 1120 (src/polybench/POLYBENCH_2MM.cpp)
raja_case(name="2MM", group="polybench", make=_suite("2MM"), reps=2, default_size=(1000, 1000, 1120, 1000),
          small_size=(24, 20, 36, 28), run=_2mm_run, reference=_2mm_ref, tolerance=REDUCTION,
          flops=lambda s: 2.0 * s[0] * s[1] * s[2] + 2.0 * s[0] * s[3] * s[1],
          bytes=lambda s: 8.0 * (s[0] * s[2] + s[2] * s[1] + s[1] * s[3] + 2 * s[0] * s[3]),
          checksum_keys=("d",), checksum_scale=1e-6, bench=_2mm_bench,
          description="D = beta + alpha A B C (each sum starts at beta)")
