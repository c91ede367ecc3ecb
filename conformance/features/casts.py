"""Casts from every dtype to every dtype, over special values.

Float -> int truncates toward zero and saturates (NaN -> 0, +-inf -> the range ends); int -> int
wraps; int -> float and float -> float round to nearest even once (ties, double-rounding traps
such as f64 1 + 2^-24 + 2^-60 -> f32, denormal results, overflow to infinity). The numpy
reference computes each result from the exact value with fractions.
"""
import math
from fractions import Fraction

import numpy as np

import kaio
from kaio import bf16, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

from ._util import feature, float_specials, grid_for, int_specials, round_fraction, to_dtype, wrap

DESTS = (i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64)

#: values near the integer ranges' ends and rounding boundaries, added to every float source
FLOAT_EXTRAS = [0.4999, 0.5, -0.5, 0.9999, -0.9999, 2.5, 127.5, 128.0, -128.5, -129.0, 255.5,
                256.0, 32767.5, 32768.0, -32769.0, 65535.9, 65536.0, 2147483520.0, 2.0 ** 31,
                -2.0 ** 31, -2.0 ** 31 - 1024, 2.0 ** 32, 4294967040.0, 2.0 ** 63, -2.0 ** 63,
                2.0 ** 64, 1e20, -1e20, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -9, 1.0 + 2.0 ** -11,
                1.0 + 2.0 ** -24 + 2.0 ** -60, 65520.0, 65519.99, 3.3961775292304e38,
                2.0 ** -149 * 1.5, 2.0 ** -25, 2.0 ** -24 * 0.75]
INT_EXTRAS = [2 ** 24 + 1, -(2 ** 24) - 1, 2 ** 31 - 1, 2 ** 53 + 1, 2 ** 63 - 1, -(2 ** 63),
              2 ** 64 - 1, 16777217 * 3, 65519, 65520, 255, 256, -129]


def _kernel(S):
    @kaio.kernel
    def casts(x: kaio.In[S], a: kaio.Raw[i8], b: kaio.Raw[u8], c: kaio.Raw[i16],
              d: kaio.Raw[u16], e: kaio.Raw[i32], f: kaio.Raw[u32], g: kaio.Raw[i64],
              h: kaio.Raw[u64], p: kaio.Raw[f16], q: kaio.Raw[bf16], r: kaio.Raw[f32],
              s: kaio.Raw[f64], n: i32):
        k = kaio.global_id(0)
        if k < n:
            v = x[k]
            a[k] = i8(v)
            b[k] = u8(v)
            c[k] = i16(v)
            d[k] = u16(v)
            e[k] = i32(v)
            f[k] = u32(v)
            g[k] = i64(v)
            h[k] = u64(v)
            p[k] = f16(v)
            q[k] = bf16(v)
            r[k] = f32(v)
            s[k] = f64(v)
    return casts


def _inputs(S):
    if S.is_float:
        vals = float_specials(S) + FLOAT_EXTRAS
        return {"x": to_dtype(vals, S)}
    vals = [wrap(v, S) for v in int_specials(S) + INT_EXTRAS]
    return {"x": to_dtype(vals, S)}


def _run(kernel):
    def run(inp):
        x = inp["x"]
        n = len(x)
        outs = [np.zeros(n, D.storage_np) for D in DESTS]
        kernel[grid_for(n), 64](x, *outs, n)
        return {D.name: o for D, o in zip(DESTS, outs)}
    return run


def _convert(v, S, D):
    """One value of dtype S (numpy scalar) converted to D under the IR's rules."""
    if S.is_float:
        f = float(np.asarray(v).astype(np.float64))
        if D.is_int:
            if math.isnan(f):
                return 0
            if math.isinf(f):
                return D.max_value() if f > 0 else D.min_value()
            return min(max(math.trunc(f), D.min_value()), D.max_value())
        if math.isnan(f) or math.isinf(f):
            return f
        if f == 0:
            return f
        return float(round_fraction(Fraction(f), D).astype(np.float64))
    iv = int(v)
    if D.is_int:
        return wrap(iv, D)
    return float(round_fraction(Fraction(iv), D).astype(np.float64))


def _expected(S):
    def expected(inp):
        out = {}
        for D in DESTS:
            vals = [_convert(v, S, D) for v in inp["x"]]
            out[D.name] = (np.array(vals, dtype=np.float64).astype(D.storage_np) if D.is_float
                           else np.array(vals, dtype=object).astype(D.storage_np))
        return out
    return expected


def cases():
    out = []
    for S in DESTS:
        out.append(feature(f"casts_from_{S.name}", lambda S=S: _inputs(S), _run(_kernel(S)),
                           _expected(S),
                           description=f"{S.name} -> every dtype: truncation, saturation, NaN -> 0, "
                                       f"wrap, round-to-nearest-even, denormals, overflow"))
    return out
