"""RAJAPerf Lcals group (Livermore loops): DIFF_PREDICT, EOS, FIRST_DIFF, HYDRO_1D, INT_PREDICT,
PLANCKIAN, TRIDIAG_ELIM, GEN_LIN_RECUR (float64, default length 1,000,000).

DIFF_PREDICT and INT_PREDICT work on one long array ``px`` viewed as rows of length n
(``px[i + j*n]`` is row j, column i); each index i is independent:

- DIFF_PREDICT updates rows 4..13 of column i in a chain. The rows are a Region with the
  grid-stride partition launched with exactly n threads, so thread i owns i, i + n, i + 2n, ...
  -- precisely its column -- and walks it in row order through ``owned()``;
- INT_PREDICT writes row 0 from rows 2..12: row 0 and rows 1..12 are passed as two disjoint views
  of the same array (a Region and an In buffer), so no thread reads what another writes.
"""
import functools

import numpy as np

import kaio
from kaio import f64, regions

from .._bench import launcher, like, resident
from .._launch import exact_threads_block
from ._case import TRANSCENDENTAL, copy, feed, raja_case
from .checksum import DataInit

N = 1_000_000
SMALL = 10_000


@functools.lru_cache(maxsize=None)
def _diff_predict_kernel():
    """DIFF_PREDICT's kernel: thread i owns column i of px (kaio.regions.grid_stride)."""

    @kaio.kernel
    def diff_predict(cx: kaio.In[f64], px: kaio.Region[f64, regions.grid_stride()], n: kaio.i32):
        """px holds rows 4..13; thread i owns column i (rows in order). For rows 4..12 the value
        carried down the column replaces the row's entry and continues as its difference with
        the old entry; row 13 receives the last difference."""
        carry = f64(0.0)
        for idx in px.owned():
            row = idx // n
            if row == 0:
                carry = cx[idx]
            if row < 9:
                diff = carry - px[idx]
                px[idx] = carry
                carry = diff
            else:
                px[idx] = carry
    return diff_predict


@kaio.kernel
def eos(y: kaio.In[f64], z: kaio.In[f64], u: kaio.In[f64], x: kaio.Out[f64], q: f64, r: f64, t: f64):
    for i in x.owned():
        x[i] = (u[i] + r * (z[i] + r * y[i])
                + t * (u[i + 3] + r * (u[i + 2] + r * u[i + 1])
                       + t * (u[i + 6] + q * (u[i + 5] + q * u[i + 4]))))


@kaio.kernel
def first_diff(y: kaio.In[f64], x: kaio.Out[f64]):
    for i in x.owned():
        x[i] = y[i + 1] - y[i]


@kaio.kernel
def hydro_1d(y: kaio.In[f64], z: kaio.In[f64], x: kaio.Out[f64], q: f64, r: f64, t: f64):
    for i in x.owned():
        x[i] = q + y[i] * (r * z[i + 10] + t * z[i + 11])


@kaio.kernel
def int_predict(rest: kaio.In[f64], px0: kaio.Region[f64], dm22: f64, dm23: f64, dm24: f64,
                dm25: f64, dm26: f64, dm27: f64, dm28: f64, c0: f64):
    """px0 is row 0 of px; rest is rows 1..12, so px[i + j*n] is rest[i + (j-1)*n]."""
    n = px0.shape[0]
    for i in px0.owned():
        px0[i] = (dm28 * rest[i + 11 * n] + dm27 * rest[i + 10 * n] + dm26 * rest[i + 9 * n]
                  + dm25 * rest[i + 8 * n] + dm24 * rest[i + 7 * n] + dm23 * rest[i + 6 * n]
                  + dm22 * rest[i + 5 * n] + c0 * (rest[i + 3 * n] + rest[i + 4 * n])
                  + rest[i + 1 * n])


@kaio.kernel
def planckian(x: kaio.In[f64], u: kaio.In[f64], v: kaio.In[f64], y: kaio.Out[f64], w: kaio.Out[f64]):
    for i in y.owned():
        y[i] = u[i] / v[i]
        w[i] = x[i] / (kaio.math.exp(y[i]) - 1.0)


@kaio.kernel
def tridiag_elim(xin: kaio.In[f64], y: kaio.In[f64], z: kaio.In[f64], xout: kaio.Region[f64]):
    for i in xout.owned():
        if i > 0:
            xout[i] = z[i] * (y[i] - xin[i - 1])


@kaio.kernel
def gen_lin_recur(sa: kaio.In[f64], sb: kaio.In[f64], b5: kaio.Region[f64], stb5: kaio.Region[f64]):
    """One sweep; the suite's forward and backward sweeps touch each k independently, so each
    is one launch."""
    for k in b5.owned():
        b5[k] = sa[k] + stb5[k] * sb[k]
        stb5[k] = b5[k] - stb5[k]


# --- host runners and references ---------------------------------------------------------------
def _diff_in(n):
    d = DataInit()
    return {"px": d.const(14 * n, 0.0), "cx": d.real(14 * n), "n": n}


def _run_diff(i):
    n = i["n"]
    px = i["px"].copy()
    rows = px[4 * n:]                          # rows 4..13: a contiguous view, updated in place
    block = exact_threads_block(n)
    _diff_predict_kernel()[(n // block,), (block,)](i["cx"][4 * n:], rows, n)
    return {"px": px}


def _diff_ref(i):
    n = i["n"]
    px = i["px"].reshape(14, n).copy()
    carry = i["cx"].reshape(14, n)[4].copy()
    for row in range(4, 13):
        diff = carry - px[row]
        px[row] = carry
        carry = diff
    px[13] = carry
    return {"px": px.reshape(-1)}


def _diff_bench(i):
    n = i["n"]
    block = exact_threads_block(n)
    k = _diff_predict_kernel()[(n // block,), (block,)]
    views = {**i, "cx4": i["cx"][4 * n:], "rows": i["px"][4 * n:]}
    return resident(views, lambda d: launcher(k, d["cx4"], d["rows"], n), read=("cx4",),
                    update=("rows",),
                    finish=lambda h, v: {"px": np.concatenate([v["px"][:4 * n], h["rows"]])})


def _eos_in(n):
    d = DataInit()
    return {"x": d.const(n, 0.0), "y": d.real(n), "z": d.real(n), "u": d.real(n + 7),
            "q": d.scalar(), "r": d.scalar(), "t": d.scalar()}


def _eos_ref(i):
    u, y, z, q, r, t = i["u"], i["y"], i["z"], i["q"], i["r"], i["t"]
    n = y.shape[0]

    def U(k):
        return u[k:k + n]
    return {"x": (U(0) + r * (z + r * y)
                  + t * (U(3) + r * (U(2) + r * U(1)) + t * (U(6) + q * (U(5) + q * U(4)))))}


def _run_out(kernel, ins, scalars=()):
    def run(i):
        x = np.empty(i["n_out"], np.float64)
        kernel(*(i[k] for k in ins), x, *(i[s] for s in scalars))
        return {"x": x}
    return run


def _bench_out(kernel, ins, scalars=()):
    """Device-resident form of :func:`_run_out`."""
    def bench(i):
        return resident(i, lambda d: launcher(kernel, *(d[k] for k in ins), d["x"],
                                              *(i[s] for s in scalars)),
                        read=ins, new={"x": ((i["n_out"],), np.float64)})
    return bench


def _with_n(make):
    def wrapped(n):
        d = make(n)
        d["n_out"] = n
        return d
    return wrapped


def _hydro_in(n):
    d = DataInit()
    return {"x": d.const(n, 0.0), "y": d.real(n), "z": d.real(n + 12),
            "q": d.scalar(), "r": d.scalar(), "t": d.scalar()}


def _int_in(n):
    d = DataInit()
    out = {"px": d.const(13 * n, PX_INIT), "n": n}
    for name in ("dm22", "dm23", "dm24", "dm25", "dm26", "dm27", "dm28", "c0"):
        out[name] = d.scalar()
    return out


#: INT_PREDICT's initial px; the suite subtracts it from row 0 before its checksum
#: (src/lcals/INT_PREDICT.cpp, updateChecksum).
PX_INIT = 1.0
_DM = ("dm22", "dm23", "dm24", "dm25", "dm26", "dm27", "dm28", "c0")


def _run_int(i):
    n = i["n"]
    px = i["px"].copy()
    int_predict(px[n:], px[:n], *(i[k] for k in _DM))
    return {"px": px}


def _int_bench(i):
    n = i["n"]
    views = {**i, "rest": i["px"][n:], "px0": i["px"][:n]}
    return resident(views, lambda d: launcher(int_predict, d["rest"], d["px0"], *(i[k] for k in _DM)),
                    read=("rest",), update=("px0",),
                    finish=lambda h, v: {"px": np.concatenate([h["px0"], v["rest"]])})


def _int_ref(i):
    n = i["n"]
    p = i["px"].reshape(13, n).copy()
    p[0] = (i["dm28"] * p[12] + i["dm27"] * p[11] + i["dm26"] * p[10] + i["dm25"] * p[9]
            + i["dm24"] * p[8] + i["dm23"] * p[7] + i["dm22"] * p[6]
            + i["c0"] * (p[4] + p[5]) + p[2])
    return {"px": p.reshape(-1)}


def _planck_in(n):
    d = DataInit()
    return {"x": d.real(n), "y": d.real(n), "u": d.real(n), "v": d.real(n), "w": d.const(n, 0.0)}


def _run_planck(i):
    y, w = np.empty_like(i["x"]), np.empty_like(i["x"])
    planckian(i["x"], i["u"], i["v"], y, w)
    return {"y": y, "w": w}


def _planck_ref(i):
    y = i["u"] / i["v"]
    return {"y": y, "w": i["x"] / (np.exp(y) - 1.0)}


def _tridiag_in(n):
    d = DataInit()
    return {"xout": d.const(n, 0.0), "xin": d.real(n), "y": d.real(n), "z": d.real(n)}


def _run_tridiag(i):
    out = copy(i, "xout")
    tridiag_elim(i["xin"], i["y"], i["z"], out["xout"])
    return out


_TRIDIAG = ("xin", "y", "z", "xout")


def _tridiag_ref(i):
    x = i["xout"].copy()
    x[1:] = i["z"][1:] * (i["y"][1:] - i["xin"][:-1])
    return {"xout": x}


def _glr_in(n):
    d = DataInit()
    return {"b5": d.const(n, 0.0), "stb5": d.real(n), "sa": d.real(n), "sb": d.real(n)}


def _run_glr(i):
    out = copy(i, "b5", "stb5")
    for _sweep in range(2):  # forward, then backward: independent per k, so order is moot
        gen_lin_recur(i["sa"], i["sb"], out["b5"], out["stb5"])
    return out


def _glr_bench(i):
    def step(d):
        args = (d["sa"], d["sb"], d["b5"], d["stb5"])

        def launch():
            gen_lin_recur(*args)
            gen_lin_recur(*args)
        return launch
    return resident(i, step, read=("sa", "sb"), update=("b5", "stb5"))


def _glr_ref(i):
    b5, stb5 = i["b5"].copy(), i["stb5"].copy()
    for _sweep in range(2):
        b5 = i["sa"] + stb5 * i["sb"]
        stb5 = b5 - stb5
    return {"b5": b5, "stb5": stb5}


raja_case(name="DIFF_PREDICT", group="lcals", make=_diff_in, reps=200, default_size=N,
          small_size=SMALL, run=_run_diff, reference=_diff_ref, flops=lambda n: 9.0 * n,
          bytes=lambda n: 8.0 * 20 * n, checksum_keys=("px",), carry=feed("px"), bench=_diff_bench,
          description="difference predictor (column chain, grid-stride ownership)")
raja_case(name="EOS", group="lcals", make=_with_n(_eos_in), reps=500, default_size=N, small_size=SMALL,
          run=_run_out(eos, ("y", "z", "u"), ("q", "r", "t")), reference=_eos_ref,
          flops=lambda n: 16.0 * n, bytes=lambda n: 8.0 * 5 * n, description="equation of state",
          bench=_bench_out(eos, ("y", "z", "u"), ("q", "r", "t")),
          checksum_scale=1e-4)
raja_case(name="FIRST_DIFF", group="lcals",
          make=_with_n(lambda n: {"y": _first_y(n)}), reps=2000,
          default_size=N, small_size=SMALL, run=_run_out(first_diff, ("y",)),
          reference=lambda i: {"x": i["y"][1:] - i["y"][:-1]},
          flops=lambda n: 1.0 * n, bytes=lambda n: 16.0 * n, description="x[i] = y[i+1] - y[i]",
          bench=_bench_out(first_diff, ("y",)))
raja_case(name="HYDRO_1D", group="lcals", make=_with_n(_hydro_in), reps=1000, default_size=N,
          small_size=SMALL, run=_run_out(hydro_1d, ("y", "z"), ("q", "r", "t")),
          reference=lambda i: {"x": i["q"] + i["y"] * (i["r"] * i["z"][10:10 + i["n_out"]]
                                                       + i["t"] * i["z"][11:11 + i["n_out"]])},
          flops=lambda n: 5.0 * n, bytes=lambda n: 24.0 * n, description="hydro fragment",
          checksum_scale=1e-3, problem=lambda n: n,  # src/lcals/HYDRO_1D.cpp
          bench=_bench_out(hydro_1d, ("y", "z"), ("q", "r", "t")))
raja_case(name="INT_PREDICT", group="lcals", make=_int_in, reps=400, default_size=N, small_size=SMALL,
          run=_run_int, reference=_int_ref, flops=lambda n: 17.0 * n, bytes=lambda n: 8.0 * 11 * n,
          checksum_select=lambda out: [out["px"][:out["px"].shape[0] // 13] - PX_INIT],
          description="integrate predictors (row 0 from rows 2..12)", bench=_int_bench)
raja_case(name="PLANCKIAN", group="lcals", make=_planck_in, reps=50, default_size=N, small_size=SMALL,
          run=_run_planck, reference=_planck_ref, tolerance=TRANSCENDENTAL,
          flops=lambda n: 4.0 * n, bytes=lambda n: 8.0 * 5 * n, checksum_keys=("w",),
          description="y = u/v; w = x/(exp(y) - 1)",
          bench=lambda i: resident(i, lambda d: launcher(planckian, *(d[k] for k in "xuvyw")),
                                   read=("x", "u", "v"), new=like(i, "x", "y", "w")))
raja_case(name="TRIDIAG_ELIM", group="lcals", make=_tridiag_in, reps=1000, default_size=N,
          small_size=SMALL, run=_run_tridiag, reference=_tridiag_ref, flops=lambda n: 2.0 * n,
          bytes=lambda n: 32.0 * n, description="xout[i] = z[i] (y[i] - xin[i-1])",
          bench=lambda i: resident(i, lambda d: launcher(tridiag_elim, *(d[k] for k in _TRIDIAG)),
                                   read=_TRIDIAG[:3], update=("xout",)))
raja_case(name="GEN_LIN_RECUR", group="lcals", make=_glr_in, reps=500, default_size=N,
          small_size=SMALL, run=_run_glr, reference=_glr_ref, flops=lambda n: 6.0 * n,
          bytes=lambda n: 8.0 * 10 * n, checksum_keys=("b5",), carry=feed("b5", "stb5"),
          checksum_scale=1e-2, problem=lambda n: n,  # src/lcals/GEN_LIN_RECUR.cpp
          description="general linear recurrence (forward and backward sweeps)", bench=_glr_bench)


def _first_y(n):
    d = DataInit()
    d.const(n + 1, 0.0)  # x is initialised first in the suite
    return d.real(n + 1)
