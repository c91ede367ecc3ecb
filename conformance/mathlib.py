"""Measure the portable math library (:mod:`kaio.mathlib`): max ULP error per function and dtype.

    python -m kaio.conformance.mathlib [--n 65536] [--fns exp,log] [--dtypes f32,f64]
                                       [--write docs/mathlib.md]

Each function's expansion (the IR :mod:`kaio.passes.expand_math` emits) runs on the reference
backend over dense inputs spanning its domain plus special values. The error of a result is
|got - exact| / ulp(exact), in ulps of the result's dtype: the exact value comes from mpmath
(80 bits) for f64 and from numpy's float64 functions for f32/f16/bf16 (whose own error, ~2^-53
relative, is far below the narrow types' ulps). A correctly rounded result has error <= 0.5.
It runs kernels, so it lives here, above the backends, not beside the library it measures.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from kaio import dtypes as dt
from kaio.backends.reference import ReferenceBackend
from kaio.ir import BufType, Builder, Param
from kaio.ir.indexmath import IndexMath
from kaio.mathlib import FUNCTIONS
from kaio.semantics import round_f64

BLOCK = 256
BINARY = ("pow", "atan2", "fmod")
DTYPES = (dt.f32, dt.f64, dt.f16, dt.bf16)


# --- running an expansion on the reference backend ---------------------------------------------
def kernel_for(fn: str, dtype) -> object:
    """A kernel y[i] = fn(x0[i] [, x1[i]]) (one lane per element)."""
    arity = 2 if fn in BINARY else 1
    params = [(f"x{i}", BufType(dtype, 1, "global", "in"), Param(f"x{i}", "buffer"))
              for i in range(arity)]
    params.append(("y", BufType(dtype, 1, "global", "out"), Param("y", "buffer")))
    b = Builder.for_kernel(f"math_{fn}_{dtype.name}", params)
    i = IndexMath(b).global_id(0)
    xs = [b.load(a, [i]) for a in b.kernel.args[:arity]]
    b.store(b.kernel.args[-1], [i], b.math(fn, *xs))
    return b.finish()


def run_reference(fn: str, dtype, *args: np.ndarray) -> np.ndarray:
    """fn(*args) by the expanded IR on the reference backend."""
    n = args[0].size
    pad = (-n) % BLOCK
    args = [np.concatenate([a, np.zeros(pad, a.dtype)]) for a in args]
    out = np.zeros(n + pad, dtype.np)
    be = ReferenceBackend(sanitize=False)
    be.launch(be.compile(kernel_for(fn, dtype)), ((n + pad) // BLOCK,), (BLOCK,), [*args, out])
    return out[:n]


# --- inputs -------------------------------------------------------------------------------------
def _bits_uniform(rng, n, dtype, positive=False):
    """Floats with uniformly random bit patterns (every binade equally likely), no NaN/inf."""
    ut = {16: np.uint16, 32: np.uint32, 64: np.uint64}[dtype.bits]
    v = rng.integers(0, np.iinfo(ut).max, n, dtype=ut, endpoint=True).view(dtype.np)
    with np.errstate(all="ignore"):
        v = v[np.isfinite(v.astype(np.float64))]
    return np.abs(v) if positive else v


def _u(rng, n, lo, hi, dtype):
    return rng.uniform(lo, hi, n).astype(dtype.np)


def special_values(dtype) -> np.ndarray:
    fi = dt._finfo(dtype.np)
    tiny = float(fi.smallest_subnormal) if hasattr(fi, "smallest_subnormal") else float(fi.tiny) * 2.0 ** -10
    base = [0.0, -0.0, tiny, -tiny, float(fi.tiny), float(fi.max), -float(fi.max), np.inf, -np.inf,
            np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-8, -1e-8, 0.25, 3.0, 10.0, -10.0, 88.72, 88.73,
            -103.9, -87.3, 709.78, 709.79, -745.1, -708.4, 11.09, -17.3, 22.0, 6.0, 5.9]
    base += [k * math.pi / 2 for k in range(-8, 9)] + [k * math.pi / 4 for k in (1, 3, 5)]
    v = np.array(base, np.float64)
    with np.errstate(over="ignore"):
        return np.unique(v.astype(dtype.np))


def _near_pio2(rng, n, dtype, top):
    k = rng.integers(1, top, n).astype(np.float64)
    x = (k * (math.pi / 2)).astype(dtype.np)
    steps = rng.integers(-3, 4, n)
    return np.nextafter(x, np.where(steps > 0, np.inf, -np.inf).astype(dtype.np)) if dtype.bits > 16 else x


def inputs(fn: str, dtype, n: int, seed: int = 0) -> list[np.ndarray]:
    """Dense inputs for ``fn``: half domain-focused uniform samples, a quarter random bit
    patterns, the rest log-uniform magnitudes; plus the special values."""
    rng = np.random.default_rng(seed)
    lim = {dt.f64: (709.0, 745.0), dt.f32: (88.7, 103.9), dt.f16: (11.1, 17.3), dt.bf16: (88.7, 92.0)}[dtype]
    h = n // 2
    q = n - h
    fmax = float(dt._finfo(dtype.np).max)
    def magn(k):
        v = 10.0 ** rng.uniform(-12, 12, k) * rng.choice([-1, 1], k)
        return np.clip(v, -fmax, fmax).astype(dtype.np)

    def u(lo, hi):
        return lambda k: _u(rng, k, lo, hi, dtype)

    def halves(f, g):
        return lambda k: np.concatenate([f(k // 2), g(k - k // 2)])

    trig = halves(u(-10, 10), lambda k: _near_pio2(rng, k, dtype, 2000))
    focus = {
        "exp": u(-lim[1], lim[0]), "exp2": u(-lim[1] * 1.45, lim[0] * 1.45),
        "expm1": halves(u(-1, 1), u(-40, lim[0])),
        "log": u(0.5, 2.0), "log2": u(0.5, 2.0), "log10": u(0.5, 2.0),
        "log1p": halves(u(-1, 1), u(-0.01, 0.01)),
        "sin": trig, "cos": trig, "tan": trig,
        "tanh": u(-20, 20), "sinh": u(-lim[0], lim[0]), "cosh": u(-lim[0], lim[0]),
        "erf": u(-6.5, 6.5), "atan": u(-4, 4), "asin": u(-1, 1), "acos": u(-1, 1), "rsqrt": u(0, 4),
    }
    if fn in BINARY:
        a = np.concatenate([_bits_uniform(rng, q, dtype), magn(h)])
        b = np.concatenate([_bits_uniform(rng, q, dtype), magn(h)])
        m = min(a.size, b.size)
        a, b = a[:m], b[:m]
        if fn == "pow":
            xs = _u(rng, h, 0, 4, dtype)
            ys = (rng.uniform(-1, 1, h) * lim[0] / np.maximum(np.abs(np.log(xs.astype(np.float64))), 1e-3))
            ys = np.where(rng.random(h) < 0.2, np.round(ys), ys).astype(dtype.np)
            xs = np.where(rng.random(h) < 0.1, -xs, xs).astype(dtype.np)
            a, b = np.concatenate([a, xs]), np.concatenate([b, ys])
        sv = special_values(dtype)
        ga, gb = np.meshgrid(sv, sv)
        return [np.concatenate([a, ga.ravel()]), np.concatenate([b, gb.ravel()])]
    x = np.concatenate([focus[fn](h), _bits_uniform(rng, q // 2, dtype), magn(q - q // 2)])
    return [np.concatenate([x, special_values(dtype)]).astype(dtype.np)]


# --- exact references -----------------------------------------------------------------------------
_NP = {"exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
       "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan,
       "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "atan": np.arctan, "asin": np.arcsin,
       "acos": np.arccos, "atan2": np.arctan2, "pow": np.power, "fmod": np.fmod,
       "rsqrt": lambda x: 1.0 / np.sqrt(x),
       "erf": np.vectorize(math.erf, otypes=[np.float64])}


def _mp_fn(fn):
    import mpmath as mp  # lazy: mpmath, optional (the dev extra); only f64 references need it
    table = {"exp": mp.exp, "exp2": lambda x: mp.power(2, x), "expm1": mp.expm1, "log": mp.log,
             "log2": lambda x: mp.log(x, 2), "log10": mp.log10, "log1p": mp.log1p, "sin": mp.sin,
             "cos": mp.cos, "tan": mp.tan, "tanh": mp.tanh, "sinh": mp.sinh, "cosh": mp.cosh,
             "atan": mp.atan, "asin": mp.asin, "acos": mp.acos, "erf": mp.erf,
             "atan2": mp.atan2, "pow": mp.power, "rsqrt": lambda x: 1 / mp.sqrt(x),
             "fmod": mp.fmod}
    return table[fn]


def reference(fn: str, dtype, *args: np.ndarray):
    """(hi, lo): the exact value as a float64 pair (lo = 0 for narrow dtypes), NaN where the
    function is undefined, +-inf where it overflows f64."""
    wide = [a.astype(np.float64) for a in args]
    with np.errstate(all="ignore"):
        hi = np.asarray(_NP[fn](*wide), dtype=np.float64)
    lo = np.zeros_like(hi)
    if dtype is not dt.f64 or fn == "fmod":     # numpy's fmod is exact
        return hi, lo
    import mpmath as mp  # lazy: mpmath, optional (the dev extra)
    f = _mp_fn(fn)
    with mp.workprec(96):
        finite = np.logical_and.reduce([np.isfinite(w) for w in wide])
        for i in np.nonzero(np.isfinite(hi) & finite)[0]:
            try:
                v = f(*[mp.mpf(float(w[i])) for w in wide])
            except (ValueError, ZeroDivisionError):
                continue
            if isinstance(v, mp.mpc):
                continue
            h = float(v)
            hi[i] = h
            lo[i] = float(v - h) if math.isfinite(h) else 0.0
    return hi, lo


def ulp_errors(got: np.ndarray, hi: np.ndarray, lo: np.ndarray, dtype) -> np.ndarray:
    """|got - (hi + lo)| in ulps of the exact value in ``dtype`` (NaN/inf matched exactly: 0 when
    both agree, inf otherwise)."""
    g = got.astype(np.float64)
    fi = dt._finfo(dtype.np)
    mant = {16: 10 if dtype is dt.f16 else 7, 32: 23, 64: 52}[dtype.bits]
    emin = int(np.log2(float(fi.tiny)))
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.abs(hi)))
        e = np.maximum(np.where(np.isfinite(e), e, emin), emin)
        ulp = np.ldexp(1.0, (e - mant).astype(np.int64))
        err = np.abs((g - hi) - lo) / ulp
        rounded = hi.astype(dtype.np).astype(np.float64) if dtype is not dt.bf16 else hi
        if dtype in (dt.f16, dt.bf16):
            rounded = round_f64(dtype, hi).astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(hi)
    same = both_nan | ((g == hi) & (lo == 0) & ~np.isfinite(hi)) | (np.isinf(rounded) & (g == rounded))
    err = np.where(same, 0.0, err)
    err = np.where(np.isnan(g) != np.isnan(hi), np.inf, err)
    inf_mismatch = (np.isinf(g) | np.isinf(rounded)) & (g != rounded) & ~np.isnan(hi)
    return np.where(inf_mismatch, np.inf, err)


def measure(fn: str, dtype, n: int = 1 << 16, seed: int = 0) -> dict:
    """Max ULP error of the expansion of ``fn`` on ``dtype`` over :func:`inputs`."""
    args = inputs(fn, dtype, n, seed)
    got = run_reference(fn, dtype, *args)
    hi, lo = reference(fn, dtype, *args)
    err = ulp_errors(got, hi, lo, dtype)
    i = int(np.argmax(err))
    return {"fn": fn, "dtype": dtype.name, "points": int(got.size), "max_ulp": float(err[i]),
            "worst_input": [float(a[i]) for a in args], "got": float(got[i]), "want": float(hi[i])}


def _table(rows, dtypes) -> str:
    by = {(r["fn"], r["dtype"]): r for r in rows}
    head = "| function | " + " | ".join(d.name for d in dtypes) + " |"
    lines = [head, "|---|" + "---|" * len(dtypes)]
    for fn in sorted({r["fn"] for r in rows}, key=FUNCTIONS.index):
        cells = []
        for d in dtypes:
            r = by.get((fn, d.name))
            cells.append("" if r is None else f"{r['max_ulp']:.3f}")
        lines.append(f"| {fn} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kaio.conformance.mathlib",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1 << 16, help="dense points per function (plus specials)")
    ap.add_argument("--fns", default=",".join(FUNCTIONS))
    ap.add_argument("--dtypes", default=",".join(d.name for d in DTYPES))
    ap.add_argument("--write", metavar="MD", help="replace the measured table in this Markdown file")
    a = ap.parse_args(argv)
    dtypes = [dt.from_name(d) for d in a.dtypes.split(",")]
    rows = []
    for fn in a.fns.split(","):
        for d in dtypes:
            t0 = time.time()
            r = measure(fn, d, a.n)
            rows.append(r)
            print(f"{fn:6s} {d.name:5s} max {r['max_ulp']:.3f} ulp over {r['points']} points "
                  f"(worst at {r['worst_input']}: got {r['got']!r}, want {r['want']!r}) "
                  f"[{time.time() - t0:.1f}s]", flush=True)
    table = _table(rows, dtypes)
    print(table)
    if a.write:
        text = open(a.write).read()
        cmd = "python -m kaio.conformance.mathlib " + " ".join(argv if argv is not None else sys.argv[1:])
        block = f"{BEGIN}\nProduced by `{cmd.strip()}` ({time.strftime('%Y-%m-%d')}).\n\n{table}\n{END}"
        start, end = text.index(BEGIN), text.index(END) + len(END)
        open(a.write, "w").write(text[:start] + block + text[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
