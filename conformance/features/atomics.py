"""Atomics with collisions: many threads of many blocks hit a few slots.

add/sub/min/max/and/or/xor on i32, u32, i64 and u64 (wrapping sums included), add/min/max on f32
and f64 with integer-valued addends (exact in any order, so the sum is order-free and the rule
stays bitwise), a compare-and-swap increment loop handing out tickets, and exchange. The value
an exchange or a CAS returns depends on scheduling, so those outputs are checked as multisets:
per slot, the sorted tickets (exactly 0..count-1) and the sorted exchanged values plus the final
one (exactly the initial value plus every value written).
"""
import numpy as np

import kaio
from kaio import dtypes as dt
from kaio import i32

from ..rules import Rule
from ._util import feature, grid_for

N = 700          # threads
SLOTS = 7
OPS = ("add", "sub", "min", "max", "and", "or", "xor")


def _int_kernel(T):
    @kaio.kernel
    def atomics_int(v: kaio.In[T], key: kaio.In[i32], a: kaio.Atomic[T], n: i32):
        i = kaio.global_id(0)
        if i < n:
            k = key[i]
            x = v[i]
            kaio.atomic_add(a, k, x)
            kaio.atomic_sub(a, 7 + k, x)
            kaio.atomic_min(a, 14 + k, x)
            kaio.atomic_max(a, 21 + k, x)
            kaio.atomic_and(a, 28 + k, x)
            kaio.atomic_or(a, 35 + k, x)
            kaio.atomic_xor(a, 42 + k, x)
    return atomics_int


def _float_kernel(T):
    @kaio.kernel
    def atomics_float(v: kaio.In[T], key: kaio.In[i32], a: kaio.Atomic[T], n: i32):
        i = kaio.global_id(0)
        if i < n:
            k = key[i]
            kaio.atomic_add(a, k, v[i])
            kaio.atomic_min(a, 7 + k, v[i])
            kaio.atomic_max(a, 14 + k, v[i])
    return atomics_float


@kaio.kernel
def cas_tickets(key: kaio.In[i32], c: kaio.Atomic[i32], tickets: kaio.Raw[i32],
                xv: kaio.In[i32], x: kaio.Atomic[i32], old: kaio.Raw[i32], n: i32):
    i = kaio.global_id(0)
    if i < n:
        k = key[i]
        cur = kaio.atomic_add(c, k, 0)
        while True:
            seen = kaio.atomic_cas(c, k, cur, cur + 1)
            if seen == cur:
                break
            cur = seen
        tickets[i] = cur
        old[i] = kaio.atomic_exchange(x, k, xv[i])


def _inputs():
    rng = np.random.default_rng(5)
    key = rng.integers(0, SLOTS, N).astype(np.int32)
    inp = {"key": key}
    for t in (dt.i32, dt.u32, dt.i64, dt.u64):
        lo, hi = max(t.min_value(), -2 ** 40), min(t.max_value(), 2 ** 40)
        v = rng.integers(lo, hi, N, dtype=np.int64).astype(t.storage_np)
        v[:4] = [t.max_value(), t.min_value(), 0, 1] if t.is_signed else [t.max_value(), 0, 1, 2]
        inp[t.name] = v
    for t in (dt.f32, dt.f64):
        v = rng.integers(-1000, 1000, N).astype(t.storage_np)
        v[:3] = [-0.0, 0.0, 2.0 ** 20]
        inp[t.name] = v
    inp["xv"] = np.arange(N, dtype=np.int32) * 3 + 1
    return inp


def _init(t) -> np.ndarray:
    """Initial slots: 0 for add/sub, the max for min, the min for max, all-ones for and."""
    st = t.storage_np
    if t.is_float:
        return np.concatenate([np.zeros(SLOTS), np.full(SLOTS, np.inf), np.full(SLOTS, -np.inf)]).astype(st)
    parts = [0, 0, t.max_value(), t.min_value(), -1 if t.is_signed else t.max_value(), 0, 0]
    return np.concatenate([np.full(SLOTS, p, dtype=object) for p in parts]).astype(st)


def _run(inp):
    n = len(inp["key"])
    out = {}
    for t in (dt.i32, dt.u32, dt.i64, dt.u64, dt.f32, dt.f64):
        a = _init(t)
        k = _KERNELS[t.name]
        k[grid_for(n), 64](inp[t.name], inp["key"], a, n)
        out[t.name] = a
    c = np.zeros(SLOTS, np.int32)
    tickets = np.zeros(n, np.int32)
    x = np.full(SLOTS, -5, np.int32)
    old = np.zeros(n, np.int32)
    cas_tickets[grid_for(n), 64](inp["key"], c, tickets, inp["xv"], x, old, n)
    out["cas_count"] = c
    out["cas_tickets"] = np.concatenate([np.sort(tickets[inp["key"] == s]) for s in range(SLOTS)])
    out["exchange"] = np.concatenate([np.sort(np.append(old[inp["key"] == s], x[s]))
                                      for s in range(SLOTS)]).astype(np.int32)
    return out


def _expected(inp):
    key = inp["key"]
    out = {}
    for t in (dt.i32, dt.u32, dt.i64, dt.u64):
        mask = (1 << t.bits) - 1
        init = [int(v) for v in _init(t)]
        vals = [int(v) for v in inp[t.name]]
        res = init[:]
        for k, x in zip(key, vals):
            k = int(k)
            res[k] += x
            res[7 + k] -= x
            res[14 + k] = min(res[14 + k], x)
            res[21 + k] = max(res[21 + k], x)
            res[28 + k] &= x
            res[35 + k] |= x
            res[42 + k] ^= x
        wrapped = []
        for v in res:
            v &= mask
            if t.is_signed and v >= 1 << (t.bits - 1):
                v -= 1 << t.bits
            wrapped.append(v)
        out[t.name] = np.array(wrapped, dtype=object).astype(t.storage_np)
    for t in (dt.f32, dt.f64):
        v = inp[t.name].astype(np.float64)
        res = _init(t).astype(np.float64)
        for s in range(SLOTS):
            sel = v[key == s]
            res[s] = sel.sum() + 0.0 if len(sel) else 0.0
            if len(sel):
                res[7 + s] = _signed_zero_min(sel, True)
                res[14 + s] = _signed_zero_min(sel, False)
        out[t.name] = res.astype(t.storage_np)
    counts = np.bincount(key, minlength=SLOTS).astype(np.int32)
    out["cas_count"] = counts
    out["cas_tickets"] = np.concatenate([np.arange(c) for c in counts]).astype(np.int32)
    out["exchange"] = np.concatenate([np.sort(np.append(inp["xv"][key == s], -5))
                                      for s in range(SLOTS)]).astype(np.int32)
    return out


def _signed_zero_min(v: np.ndarray, is_min: bool) -> float:
    """min/max with -0 < +0 (IEEE minNum/maxNum order, as the IR defines float min/max)."""
    m = v.min() if is_min else v.max()
    if m == 0:
        zeros = v[v == 0]
        neg = np.signbit(zeros)
        return -0.0 if (is_min and neg.any()) or (not is_min and neg.all()) else 0.0
    return float(m)


_KERNELS = {t.name: _int_kernel(t) for t in (dt.i32, dt.u32, dt.i64, dt.u64)}
_KERNELS.update({t.name: _float_kernel(t) for t in (dt.f32, dt.f64)})


def cases():
    exact = Rule("bitwise", why="float atomic adds of integer-valued addends (|sum| < 2^24): "
                                "exact in every order, so bitwise despite hardware ordering")
    return [feature("atomics", _inputs, _run, _expected, rule=exact,
                    description="add/sub/min/max/and/or/xor (ints), add/min/max (floats), "
                                "CAS loop, exchange; 700 threads on 7 slots")]
