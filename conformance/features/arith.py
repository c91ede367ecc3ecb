"""Every dtype x every arithmetic, bitwise and comparison op, over each dtype's edge values.

Integers: wrap-around of + - * and negation (MIN, MAX, MAX-1 ...), C division and remainder
(truncation toward zero, signs of the remainder), shifts by 0..70 and by "negative" amounts
(read as unsigned: >= the width, so 0, or -1 for >> of a negative signed value), abs(MIN).
Floats: + - * / fmod min max neg abs (and fma for f32/f64) over signed zeros, denormals, the
largest finite value, infinities and NaN; min/max follow minNum/maxNum with -0 < +0.
The numpy reference is computed independently: integers with Python ints, fma exactly with
fractions, 16-bit floats through numpy/ml_dtypes (f32 arithmetic rounded once: exact for these).
"""
from fractions import Fraction

import numpy as np

import kaio
from kaio import dtypes as dt
from kaio import i32

from ._util import feature, float_specials, grid_for, int_specials, pairs, round_fraction, to_dtype, wrap

INT_OPS = ("add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr",
           "neg", "abs", "not")
FLOAT_OPS = ("add", "sub", "mul", "div", "rem", "min", "max", "neg", "abs")
CMPS = ("lt", "le", "eq", "ne", "gt", "ge")


def _int_kernel(T):
    @kaio.kernel
    def int_ops(a: kaio.In[T], b: kaio.In[T], d: kaio.In[T], s: kaio.In[T], o: kaio.Raw[T],
                c: kaio.Raw[i32], n: i32):
        i = kaio.global_id(0)
        if i < n:
            x = a[i]
            y = b[i]
            q = d[i]
            o[i] = x + y
            o[n + i] = x - y
            o[2 * n + i] = x * y
            o[3 * n + i] = x // q
            o[4 * n + i] = x % q
            o[5 * n + i] = min(x, y)
            o[6 * n + i] = max(x, y)
            o[7 * n + i] = x & y
            o[8 * n + i] = x | y
            o[9 * n + i] = x ^ y
            o[10 * n + i] = x << s[i]
            o[11 * n + i] = x >> s[i]
            o[12 * n + i] = -x
            o[13 * n + i] = abs(x)
            o[14 * n + i] = ~x
            c[i] = i32(x < y)
            c[n + i] = i32(x <= y)
            c[2 * n + i] = i32(x == y)
            c[3 * n + i] = i32(x != y)
            c[4 * n + i] = i32(x > y)
            c[5 * n + i] = i32(x >= y)
    return int_ops


def _float_kernel(T, with_fma: bool):
    if with_fma:
        @kaio.kernel
        def float_ops(a: kaio.In[T], b: kaio.In[T], o: kaio.Raw[T], c: kaio.Raw[i32], n: i32):
            i = kaio.global_id(0)
            if i < n:
                _float_body(a, b, o, c, n, i)
                o[9 * n + i] = kaio.math.fma(a[i], b[i], a[(i + 7) % n])
        return float_ops

    @kaio.kernel
    def float_ops16(a: kaio.In[T], b: kaio.In[T], o: kaio.Raw[T], c: kaio.Raw[i32], n: i32):
        i = kaio.global_id(0)
        if i < n:
            _float_body(a, b, o, c, n, i)
    return float_ops16


@kaio.func
def _float_body(a, b, o, c, n, i):
    x = a[i]
    y = b[i]
    o[i] = x + y
    o[n + i] = x - y
    o[2 * n + i] = x * y
    o[3 * n + i] = x / y
    o[4 * n + i] = x % y
    o[5 * n + i] = min(x, y)
    o[6 * n + i] = max(x, y)
    o[7 * n + i] = -x
    o[8 * n + i] = abs(x)
    c[i] = i32(x < y)
    c[n + i] = i32(x <= y)
    c[2 * n + i] = i32(x == y)
    c[3 * n + i] = i32(x != y)
    c[4 * n + i] = i32(x > y)
    c[5 * n + i] = i32(x >= y)


# --- integers ------------------------------------------------------------------------------------
def _int_inputs(t):
    a, b = pairs(int_specials(t))
    lo = t.min_value()
    d = [3 if y == 0 or (t.is_signed and x == lo and y == -1) else y for x, y in zip(a, b)]
    s = [(k % 74) - 3 for k in range(len(a))]
    return {"a": to_dtype(a, t), "b": to_dtype(b, t), "d": to_dtype(d, t),
            "s": to_dtype([wrap(v, t) for v in s], t)}


def _int_run(t, kernel):
    def run(inp):
        n = len(inp["a"])
        o = np.zeros(len(INT_OPS) * n, t.storage_np)
        c = np.zeros(len(CMPS) * n, np.int32)
        kernel[grid_for(n), 64](inp["a"], inp["b"], inp["d"], inp["s"], o, c, n)
        return _split(o, INT_OPS, n) | _split(c, CMPS, n)
    return run


def _split(arr, names, n):
    return {name: arr[k * n:(k + 1) * n] for k, name in enumerate(names)}


def _int_expected(t):
    def expected(inp):
        a, b = [int(v) for v in inp["a"]], [int(v) for v in inp["b"]]
        d, s = [int(v) for v in inp["d"]], [int(v) for v in inp["s"]]
        w = t.bits
        out = {k: [] for k in INT_OPS}
        for x, y, q, sh in zip(a, b, d, s):
            tq = abs(x) // abs(q) * (1 if (x >= 0) == (q >= 0) else -1)
            amt = sh & ((1 << w) - 1)
            vals = {"add": x + y, "sub": x - y, "mul": x * y, "div": tq, "rem": x - tq * q,
                    "min": min(x, y), "max": max(x, y), "and": x & y, "or": x | y, "xor": x ^ y,
                    "shl": 0 if amt >= w else x << amt,
                    "shr": (-1 if x < 0 else 0) if amt >= w else x >> amt,
                    "neg": -x, "abs": abs(x), "not": ~x}
            for k, v in vals.items():
                out[k].append(wrap(v, t))
        res = {k: np.array(v, dtype=t.storage_np) for k, v in out.items()}
        return res | _cmp_i32(_cmp_expected(np.array(a, dtype=object), np.array(b, dtype=object)))
    return expected


def _cmp_expected(a, b):
    with np.errstate(invalid="ignore"):
        return {"lt": (a < b), "le": (a <= b), "eq": (a == b), "ne": (a != b), "gt": (a > b),
                "ge": (a >= b)}


def _cmp_i32(d):
    return {k: np.asarray(v).astype(np.int32) for k, v in d.items()}


# --- floats --------------------------------------------------------------------------------------
def _float_inputs(t):
    a, b = pairs(float_specials(t))
    return {"a": to_dtype(a, t), "b": to_dtype(b, t)}


def _float_run(t, kernel, ops):
    def run(inp):
        n = len(inp["a"])
        o = np.zeros(len(ops) * n, t.storage_np)
        c = np.zeros(len(CMPS) * n, np.int32)
        kernel[grid_for(n), 64](inp["a"], inp["b"], o, c, n)
        return _split(o, ops, n) | _split(c, CMPS, n)
    return run


def min_max_num(x: np.ndarray, y: np.ndarray, is_min: bool) -> np.ndarray:
    """IEEE minNum/maxNum with -0 < +0, elementwise (independent of numpy's fmin/fmax)."""
    fx, fy = x.astype(np.float64), y.astype(np.float64)
    pick_x = np.where(np.isnan(fy), True, np.where(np.isnan(fx), False,
                      (fx < fy) if is_min else (fx > fy)))
    both_zero = (fx == 0) & (fy == 0)
    neg_x = np.signbit(fx)
    pick_x = np.where(both_zero, neg_x if is_min else ~neg_x, pick_x)
    eq = (fx == fy) & ~both_zero
    pick_x = np.where(eq, True, pick_x)
    return np.where(pick_x, x, y)


def _fma_exact(x, y, z, t):
    """fma rounded once; NaN/inf by IEEE rules; exact zeros get IEEE's sign."""
    out = []
    for a, b, c in zip(x.astype(np.float64), y.astype(np.float64), z.astype(np.float64)):
        if np.isfinite(a) and np.isfinite(b) and np.isinf(c):
            out.append(c)   # the exact product is finite: the sum is c (no overflow, no NaN)
            continue
        if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
            with np.errstate(all="ignore"):
                out.append(a * b + c)   # inf/nan propagate as in IEEE fma (no finite rounding)
            continue
        q = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        if q == 0:
            prod_neg = np.signbit(a) != np.signbit(b)
            out.append(-0.0 if (a == 0 or b == 0) and prod_neg and np.signbit(c) else 0.0)
            continue
        out.append(float(round_fraction(q, t)))
    return np.array(out, dtype=np.float64).astype(t.storage_np)


def _float_expected(t, ops):
    st = t.storage_np

    def expected(inp):
        a, b = inp["a"], inp["b"]
        with np.errstate(all="ignore"):
            res = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b,
                   "rem": np.fmod(a.astype(np.float64), b.astype(np.float64)).astype(st)
                   if t.name != "f64" else np.fmod(a, b),
                   "min": min_max_num(a, b, True), "max": min_max_num(a, b, False),
                   "neg": -a, "abs": np.abs(a)}
            if "fma" in ops:
                n = len(a)
                res["fma"] = _fma_exact(a, b, a[(np.arange(n) + 7) % n], t)
            fa, fb = a.astype(np.float64), b.astype(np.float64)
            res = {k: np.asarray(v).astype(st) for k, v in res.items()}
            return res | _cmp_i32(_cmp_expected(fa, fb))
    return expected


def cases():
    out = []
    for t in (dt.i8, dt.u8, dt.i16, dt.u16, dt.i32, dt.u32, dt.i64, dt.u64):
        k = _int_kernel(t)
        exp = _int_expected(t)
        out.append(feature(f"arith_{t.name}", lambda t=t: _int_inputs(t), _int_run(t, k),
                           exp,
                           description=f"{t.name}: wrap, C division/remainder, shifts past the "
                                       f"width, bitwise ops, compares"))
    for t in (dt.f16, dt.bf16, dt.f32, dt.f64):
        with_fma = t.name in ("f32", "f64")
        ops = FLOAT_OPS + (("fma",) if with_fma else ())
        k = _float_kernel(t, with_fma)
        out.append(feature(f"arith_{t.name}", lambda t=t: _float_inputs(t), _float_run(t, k, ops),
                           _float_expected(t, ops),
                           description=f"{t.name}: + - * / fmod min max neg abs"
                                       f"{' fma' if with_fma else ''} and compares over "
                                       f"+-0, denormals, max, inf, NaN"))
    return out
