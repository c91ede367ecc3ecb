"""Control flow: if/elif/else, for with break and continue, while, early return, nested loops
with loop-carried values, and a data-dependent trip count (Collatz steps), per thread."""
import numpy as np

import kaio
from kaio import f32, i32

from ._util import feature, grid_for

N = 500


@kaio.kernel
def control_flow(x: kaio.In[i32], o: kaio.Raw[i32], f: kaio.Raw[f32], n: i32):
    i = kaio.global_id(0)
    if i >= n:
        return
    v = x[i]
    # if / elif / else
    if v < 0:
        o[i] = -1
    elif v == 0:
        o[i] = 0
    elif v % 2 == 0:
        o[i] = 2
    else:
        o[i] = 1
    # for with continue and break
    acc = 0
    for j in range(40):
        if j % 3 == 0:
            continue
        if acc > v:
            break
        acc += j
    o[n + i] = acc
    # while: Collatz steps, capped
    c = v if v > 0 else 1 - v
    steps = 0
    while c != 1 and steps < 300:
        if c % 2 == 0:
            c = c // 2
        else:
            c = 3 * c + 1
        steps += 1
    o[2 * n + i] = steps
    # nested loops with a float loop-carried value
    s = 0.0
    for a in range(v % 5 + 1):
        for b in range(a, 4):
            s = s * 0.5 + f32(a * b + 1)
    f[i] = s
    # early return for some threads: the last output keeps its initial value there
    if v % 7 == 3:
        return
    o[3 * n + i] = v * 3


def _inputs():
    rng = np.random.default_rng(7)
    x = rng.integers(-60, 200, N).astype(np.int32)
    x[:6] = [0, 1, -1, 27, 3, 97]
    return {"x": x}


def _run(inp):
    n = len(inp["x"])
    o = np.full(4 * n, -7, np.int32)
    f = np.zeros(n, np.float32)
    control_flow[grid_for(n), 64](inp["x"], o, f, n)
    return {"branch": o[:n], "for_break": o[n:2 * n], "collatz": o[2 * n:3 * n],
            "early_return": o[3 * n:], "nested": f}


def _expected(inp):
    out = {k: [] for k in ("branch", "for_break", "collatz", "early_return", "nested")}
    for v in (int(t) for t in inp["x"]):
        out["branch"].append(-1 if v < 0 else 0 if v == 0 else 2 if v % 2 == 0 else 1)
        acc = 0
        for j in range(40):
            if j % 3 == 0:
                continue
            if acc > v:
                break
            acc += j
        out["for_break"].append(acc)
        c, steps = (v if v > 0 else 1 - v), 0
        while c != 1 and steps < 300:
            c = c // 2 if c % 2 == 0 else 3 * c + 1
            steps += 1
        out["collatz"].append(steps)
        s = np.float32(0)
        rem = v - int(v / 5) * 5   # C remainder: the sign of the dividend
        for a in range(rem + 1):
            for b in range(a, 4):
                s = np.float32(s * np.float32(0.5)) + np.float32(a * b + 1)
        out["nested"].append(s)
        c_rem = v - int(v / 7) * 7
        out["early_return"].append(-7 if c_rem == 3 else v * 3)
    return {k: np.array(v, dtype=np.float32 if k == "nested" else np.int32) for k, v in out.items()}


def cases():
    return [feature("control_flow", _inputs, _run, _expected,
                    description="if/elif/else, for+break/continue, while, nested loops, early return")]
