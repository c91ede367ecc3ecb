"""kaio.math over special values: +-0, denormals, the smallest normal, +-inf, NaN, huge and tiny
arguments, overflow and underflow boundaries, plus a dense sweep, in f32 and f64 (and a subset in
f16 and bf16). Non-fast math is bit-identical on every target: every backend lowers it through
kaio's portable IR math library (:mod:`kaio.conformance.derive` holds it to the stated ULP bound
only if that library were not in use). Fast-math variants run on the domain where the hardware
approximations are specified and carry their own bounds.
"""
import math

import numpy as np

import kaio
from kaio import dtypes as dt
from kaio import i32, semantics

from ..rules import BITWISE, rel, ulp
from ._util import feature, float_specials, to_dtype
from .arith import min_max_num

M = kaio.math

FAMILIES = {
    "exp_log": ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p"),
    "trig": ("sin", "cos", "tan", "atan", "asin", "acos", "atan2"),
    "hyperbolic": ("sinh", "cosh", "tanh", "erf"),
    "power": ("pow", "sqrt", "rsqrt"),
    "exact": ("floor", "ceil", "trunc", "rint", "abs", "copysign", "fmod", "min", "max"),
}
PREDICATES = ("isnan", "isinf", "isfinite")
#: ULP bounds against numpy (and between targets while math is backend-native), per dtype
BOUND = {"f32": 2, "f16": 1, "bf16": 1, "f64": {"exp_log": 4, "trig": 8, "hyperbolic": 16, "power": 1024}}
WHY = {"f32": "kaio's f32/f16/bf16 math is within 1 ulp of the exact value (native f32 code for "
              "exp/log/sin/cos/expm1/tanh/erf, <= 0.87 ulp measured; f64 code rounded once for the "
              "rest); the numpy reference is numpy's f64 libm rounded once",
       "f64": "f64 math is not correctly rounded: a few ulp for exp/log/trig, ~16 for "
              "hyperbolic/erf, pow loses |y log x| * 2^-52 relative (up to ~1000 ulp near overflow)"}


def _kernel(T, family):
    if family == "exp_log":
        @kaio.kernel
        def math_exp_log(x: kaio.In[T], y: kaio.In[T], o: kaio.Raw[T], n: i32):
            i = kaio.global_id(0)
            if i < n:
                v = x[i]
                o[i] = M.exp(v)
                o[n + i] = M.exp2(v)
                o[2 * n + i] = M.expm1(v)
                o[3 * n + i] = M.log(v)
                o[4 * n + i] = M.log2(v)
                o[5 * n + i] = M.log10(v)
                o[6 * n + i] = M.log1p(v)
        return math_exp_log
    if family == "trig":
        @kaio.kernel
        def math_trig(x: kaio.In[T], y: kaio.In[T], o: kaio.Raw[T], n: i32):
            i = kaio.global_id(0)
            if i < n:
                v = x[i]
                o[i] = M.sin(v)
                o[n + i] = M.cos(v)
                o[2 * n + i] = M.tan(v)
                o[3 * n + i] = M.atan(v)
                o[4 * n + i] = M.asin(v)
                o[5 * n + i] = M.acos(v)
                o[6 * n + i] = M.atan2(v, y[i])
        return math_trig
    if family == "hyperbolic":
        @kaio.kernel
        def math_hyperbolic(x: kaio.In[T], y: kaio.In[T], o: kaio.Raw[T], n: i32):
            i = kaio.global_id(0)
            if i < n:
                v = x[i]
                o[i] = M.sinh(v)
                o[n + i] = M.cosh(v)
                o[2 * n + i] = M.tanh(v)
                o[3 * n + i] = M.erf(v)
        return math_hyperbolic
    if family == "power":
        @kaio.kernel
        def math_power(x: kaio.In[T], y: kaio.In[T], o: kaio.Raw[T], n: i32):
            i = kaio.global_id(0)
            if i < n:
                v = x[i]
                o[i] = M.pow(v, y[i])
                o[n + i] = M.sqrt(v)
                o[2 * n + i] = M.rsqrt(v)
        return math_power

    @kaio.kernel
    def math_exact(x: kaio.In[T], y: kaio.In[T], o: kaio.Raw[T], p: kaio.Raw[i32], n: i32):
        i = kaio.global_id(0)
        if i < n:
            v = x[i]
            w = y[i]
            o[i] = M.floor(v)
            o[n + i] = M.ceil(v)
            o[2 * n + i] = M.trunc(v)
            o[3 * n + i] = M.rint(v)
            o[4 * n + i] = M.abs(v)
            o[5 * n + i] = M.copysign(v, w)
            o[6 * n + i] = M.fmod(v, w)
            o[7 * n + i] = M.min(v, w)
            o[8 * n + i] = M.max(v, w)
            p[i] = i32(M.isnan(v))
            p[n + i] = i32(M.isinf(v))
            p[2 * n + i] = i32(M.isfinite(v))
    return math_exact


def _values(T) -> list[float]:
    extra = [math.pi / 2, math.pi, -math.pi / 2, 3 * math.pi / 4, 1e-5, -1e-5, 1e-30, 1e10, -1e10,
             1e30, 88.72, 88.73, -103.97, -87.3, 0.69314718, 2.0, 10.0, -10.0, 0.999, 1.001,
             -0.999, 2.5, 3.5, -2.5, 1e6 + 0.5, 2.0 ** 23 + 1, 4.5e15]
    if T.name == "f64":
        extra += [709.78, 709.79, -745.1, -708.4, 1e300, -1e300, 1e-300, 2.0 ** 52 + 1]
    if T.bits == 16:
        extra = [v for v in extra if abs(v) < 6e4]
    dense = list(np.linspace(-20, 20, 81)) + list(np.geomspace(1e-3, 1e3, 31))
    return float_specials(T) + extra + dense


def _inputs(T):
    xs = _values(T)
    ys = list(np.roll(np.array(xs), 37))
    # pow / atan2 / fmod / copysign edge pairs
    pairs = [(0.0, -1.0), (-0.0, -3.0), (-0.0, 3.0), (0.0, 0.0), (-1.0, float("inf")),
             (-1.0, float("-inf")), (-8.0, 1.0 / 3.0), (-2.0, 3.0), (-2.0, 2.0), (1.0, float("nan")),
             (float("nan"), 0.0), (2.0, -1074.0), (2.0, 1024.0), (0.5, 2000.0),
             (float("inf"), -0.5), (float("-inf"), 3.0), (0.0, -0.0), (-0.0, -0.0),
             (1.0, 0.0), (-1.0, -0.0), (5.5, float("inf")), (-7.0, 2.0)]
    xs = [p[0] for p in pairs] + xs
    ys = [p[1] for p in pairs] + ys
    return {"x": to_dtype(xs, T), "y": to_dtype(ys, T)}


def _run(T, family, kernel):
    names = FAMILIES[family]

    def run(inp):
        n = len(inp["x"])
        o = np.zeros(len(names) * n, T.storage_np)
        grid = -(-n // 64)
        if family == "exact":
            p = np.zeros(len(PREDICATES) * n, np.int32)
            kernel[grid, 64](inp["x"], inp["y"], o, p, n)
            out = {k: p[j * n:(j + 1) * n] for j, k in enumerate(PREDICATES)}
        else:
            kernel[grid, 64](inp["x"], inp["y"], o, n)
            out = {}
        return out | {k: o[j * n:(j + 1) * n] for j, k in enumerate(names)}
    return run


def _np_fn(name):
    return {"exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
            "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan,
            "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "atan2": np.arctan2,
            "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "erf": np.vectorize(math.erf, otypes=[float]),
            "pow": np.power, "sqrt": np.sqrt, "rsqrt": lambda v: 1.0 / np.sqrt(v),
            "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
            "abs": np.abs, "copysign": np.copysign, "fmod": np.fmod}[name]


BINARY = ("atan2", "pow", "copysign", "fmod", "min", "max")


def _expected(T, family):
    """numpy's outputs for ``family`` on dtype ``T``: float64 values rounded once to T
    (kaio.semantics.round_f64, which rounds 16-bit types as the targets do), min and max by
    IEEE minNum/maxNum (arith.min_max_num), the predicates as i32."""

    def expected(inp):
        x, y = inp["x"], inp["y"]
        fx, fy = x.astype(np.float64), y.astype(np.float64)
        out = {}
        with np.errstate(all="ignore"):
            for name in FAMILIES[family]:
                if name in ("min", "max"):
                    out[name] = min_max_num(x, y, name == "min")
                    continue
                if name == "rsqrt" and T.name == "f64":
                    out[name] = 1.0 / np.sqrt(fx)
                    continue
                r = _np_fn(name)(fx, fy) if name in BINARY else _np_fn(name)(fx)
                out[name] = np.asarray(semantics.round_f64(T, r)).astype(T.storage_np)
            if family == "exact":
                out |= {"isnan": np.isnan(fx).astype(np.int32), "isinf": np.isinf(fx).astype(np.int32),
                        "isfinite": np.isfinite(fx).astype(np.int32)}
        return out
    return expected


def _bound_rule(T, family):
    if family == "exact":
        return BITWISE
    b = BOUND[T.name]
    n = b[family] if isinstance(b, dict) else b
    return ulp(n, WHY["f64" if T.name == "f64" else "f32"])


# --- fast math ---------------------------------------------------------------------------------
@kaio.kernel(fast_math=True)
def math_fast(xs: kaio.In[kaio.f32], xp: kaio.In[kaio.f32], xt: kaio.In[kaio.f32],
              o: kaio.Raw[kaio.f32], n: i32):
    i = kaio.global_id(0)
    if i < n:
        s = xs[i]
        p = xp[i]
        t = xt[i]
        o[i] = M.exp(s)
        o[n + i] = M.exp2(s)
        o[2 * n + i] = M.sqrt(p)
        o[3 * n + i] = M.rsqrt(p)
        o[4 * n + i] = s / p
        o[5 * n + i] = M.sin(t)
        o[6 * n + i] = M.cos(t)
        o[7 * n + i] = M.log(p)
        o[8 * n + i] = M.log2(p)
        o[9 * n + i] = M.tanh(s)


FAST_GROUPS = {"ulp": ("exp", "exp2", "sqrt", "rsqrt", "div"), "abs": ("sin", "cos", "log", "log2"),
               "tanh": ("tanh",)}
FAST_NAMES = ("exp", "exp2", "sqrt", "rsqrt", "div", "sin", "cos", "log", "log2", "tanh")


def _fast_inputs():
    n = 512
    rng = np.random.default_rng(23)
    xs = np.concatenate([[0.0, -0.0, 1.0, -1.0], rng.uniform(-10, 10, n - 4)]).astype(np.float32)
    xp = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), n)).astype(np.float32)
    xt = rng.uniform(-np.pi, np.pi, n).astype(np.float32)
    return {"xs": xs, "xp": xp, "xt": xt}


def _fast_run(names):
    def run(inp):
        n = len(inp["xs"])
        o = np.zeros(len(FAST_NAMES) * n, np.float32)
        math_fast[-(-n // 64), 64](inp["xs"], inp["xp"], inp["xt"], o, n)
        full = {k: o[j * n:(j + 1) * n] for j, k in enumerate(FAST_NAMES)}
        return {k: full[k] for k in names}
    return run


def _fast_expected(names):
    def expected(inp):
        s, p, t = (inp[k].astype(np.float64) for k in ("xs", "xp", "xt"))
        full = {"exp": np.exp(s), "exp2": np.exp2(s), "sqrt": np.sqrt(p), "rsqrt": 1 / np.sqrt(p),
                "div": s / p, "sin": np.sin(t), "cos": np.cos(t), "log": np.log(p),
                "log2": np.log2(p), "tanh": np.tanh(s)}
        return {k: full[k].astype(np.float32) for k in names}
    return expected


def _fast_cases():
    rules = {
        "ulp": ulp(16, "fast f32: PTX ex2.approx / AMD v_exp_f32 (~2 ulp) after scaling by log2(e) "
                       "for |x| <= 10, sqrt/rsqrt.approx and div.full (<= 2-3 ulp)"),
        "abs": rel(1e-5, "fast f32: sin/cos.approx on [-pi, pi] (abs err 2^-20.9) and lg2.approx "
                         "(abs err 2^-22) on [1e-3, 1e3]", atol=2e-6),
        "tanh": rel(1e-3, "fast f32: PTX tanh.approx has a relative error of 2^-11", atol=1e-6),
    }
    return [feature(f"math_fast_f32_{g}", _fast_inputs, _fast_run(names), _fast_expected(names),
                    rule=rules[g], vs_numpy=rules[g],
                    description=f"fast-math {', '.join(names)} on their specified domains")
            for g, names in FAST_GROUPS.items()]


def cases():
    out = []
    for T in (dt.f32, dt.f64):
        for family in FAMILIES:
            r = _bound_rule(T, family)
            out.append(feature(f"math_{family}_{T.name}", lambda T=T: _inputs(T),
                               _run(T, family, _kernel(T, family)), _expected(T, family),
                               vs_numpy=r, native_math_rule=None if r is BITWISE else r,
                               description=f"{', '.join(FAMILIES[family])} ({T.name}) over "
                                           f"special and dense arguments"))
    for T in (dt.f16, dt.bf16):
        for family in ("exp_log", "hyperbolic"):
            r = _bound_rule(T, family)
            out.append(feature(f"math_{family}_{T.name}", lambda T=T: _inputs(T),
                               _run(T, family, _kernel(T, family)), _expected(T, family),
                               vs_numpy=r, native_math_rule=r,
                               description=f"{', '.join(FAMILIES[family])} ({T.name})"))
    return out + _fast_cases()
