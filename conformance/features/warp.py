"""Warp-level ops and block reductions.

``warp_ops``: shuffle (computed source lane), shuffle_up/down (own value past the edge),
shuffle_xor, vote_any/all, ballot, warp_sum/max/min and lane_id. Their results depend on the
warp width, so each target is compared with the interpreter at its own width (32 on NVIDIA, 64
on AMD wave64) and with a numpy model of that width.

``block_reductions``: block_sum/max/min over f32, f64 and i32 at 256 and 1024 threads, with
signed zeros, NaN and infinities in some blocks. kaio fixes the combination order (a halving
tree within each group of 32 threads, then over the group totals: independent of the warp
width), so the sums must be bit-identical on every target and at both widths; the numpy
reference evaluates the same tree.
"""
import numpy as np

import kaio
from kaio import f32, f64, i32, u64

from ..rules import BITWISE, Rule, rel
from ._util import feature
from .arith import min_max_num

WB, WBLOCKS = 128, 3   # warp_ops block size (a multiple of 64) and block count


@kaio.kernel
def warp_ops(x: kaio.In[i32], f: kaio.In[f32], o: kaio.Raw[i32], of: kaio.Raw[f32],
             ob: kaio.Raw[u64], n: i32):
    i = kaio.global_id(0)
    lane = kaio.lane_id()
    w = kaio.warp_size
    v = x[i]
    o[i] = kaio.shuffle(v, (lane * 5 + 3) % w)
    o[n + i] = kaio.shuffle_up(v, 3)
    o[2 * n + i] = kaio.shuffle_down(v, 5)
    o[3 * n + i] = kaio.shuffle_xor(v, 6)
    o[4 * n + i] = i32(kaio.vote_any(v > 990))
    o[5 * n + i] = i32(kaio.vote_all(v > -990))
    o[6 * n + i] = kaio.warp_sum(v)
    o[7 * n + i] = kaio.warp_max(v)
    o[8 * n + i] = kaio.warp_min(v)
    o[9 * n + i] = lane
    ob[i] = kaio.ballot(v % 3 == 0)
    of[i] = kaio.shuffle_xor(f[i], 1)
    of[n + i] = kaio.warp_sum(f[i])
    of[2 * n + i] = kaio.warp_max(f[i])


INT_NAMES = ("shuffle", "shuffle_up", "shuffle_down", "shuffle_xor", "vote_any", "vote_all",
             "warp_sum", "warp_max", "warp_min", "lane_id")
FLOAT_NAMES = ("shuffle_xor_f32", "warp_sum_f32", "warp_max_f32")


def _warp_inputs():
    rng = np.random.default_rng(3)
    n = WB * WBLOCKS
    x = rng.integers(-989, 989, n).astype(np.int32)
    x[5] = 995          # vote_any true in the first warp(s) only
    x[200] = -995       # vote_all false around thread 200
    f = rng.standard_normal(n).astype(np.float32)
    f[7], f[8] = -0.0, np.inf
    return {"x": x, "f": f}


def _warp_run(inp):
    n = len(inp["x"])
    o = np.zeros(len(INT_NAMES) * n, np.int32)
    of = np.zeros(len(FLOAT_NAMES) * n, np.float32)
    ob = np.zeros(n, np.uint64)
    warp_ops[n // WB, WB](inp["x"], inp["f"], o, of, ob, n)
    out = {k: o[j * n:(j + 1) * n] for j, k in enumerate(INT_NAMES)}
    out |= {k: of[j * n:(j + 1) * n] for j, k in enumerate(FLOAT_NAMES)}
    out["ballot"] = ob
    return out


def _warp_expected(inp, w: int):
    x, f = inp["x"], inp["f"]
    n = len(x)
    xs, fs = x.reshape(-1, w), f.reshape(-1, w)   # one row per warp (blocks are multiples of w)
    lane = np.arange(w)
    up = np.where(lane >= 3, lane - 3, lane)
    down = np.where(lane + 5 < w, lane + 5, lane)
    c_rem = xs - np.trunc(xs / 3).astype(np.int64) * 3     # C remainder
    bits = c_rem == 0
    ballot = (bits.astype(np.uint64) << lane.astype(np.uint64)).sum(axis=1, dtype=np.uint64)
    out = {
        "shuffle": xs[:, (lane * 5 + 3) % w], "shuffle_up": xs[:, up], "shuffle_down": xs[:, down],
        "shuffle_xor": xs[:, lane ^ 6],
        "vote_any": np.repeat((xs > 990).any(axis=1), w).reshape(-1, w),
        "vote_all": np.repeat((xs > -990).all(axis=1), w).reshape(-1, w),
        "warp_sum": np.repeat(xs.sum(axis=1), w).reshape(-1, w),
        "warp_max": np.repeat(xs.max(axis=1), w).reshape(-1, w),
        "warp_min": np.repeat(xs.min(axis=1), w).reshape(-1, w),
        "lane_id": np.tile(lane, xs.shape[0]).reshape(-1, w),
    }
    out = {k: np.asarray(v).reshape(n).astype(np.int32) for k, v in out.items()}
    out["shuffle_xor_f32"] = fs[:, lane ^ 1].reshape(n)
    with np.errstate(invalid="ignore"):
        out["warp_sum_f32"] = np.repeat(fs.astype(np.float64).sum(axis=1), w).astype(np.float32)
    out["warp_max_f32"] = np.repeat(fs.max(axis=1), w).astype(np.float32)
    out["ballot"] = np.repeat(ballot, w).astype(np.uint64)
    return out


# --- block reductions ----------------------------------------------------------------------
@kaio.kernel
def block_reductions(x: kaio.In[f32], xd: kaio.In[f64], xi: kaio.In[i32], o: kaio.Raw[f32],
                     od: kaio.Raw[f64], oi: kaio.Raw[i32]):
    g = kaio.global_id(0)
    b = kaio.block_idx.x
    s = kaio.block_sum(x[g])
    hi = kaio.block_max(x[g])
    lo = kaio.block_min(x[g])
    sd = kaio.block_sum(xd[g])
    si = kaio.block_sum(xi[g])
    mi = kaio.block_max(xi[g])
    if kaio.thread_idx.x == 0:
        o[3 * b] = s
        o[3 * b + 1] = hi
        o[3 * b + 2] = lo
        od[b] = sd
        oi[2 * b] = si
        oi[2 * b + 1] = mi


BLOCK_SHAPES = ((256, 6), (1024, 2))


def _red_inputs():
    rng = np.random.default_rng(17)
    inp = {}
    for bs, nb in BLOCK_SHAPES:
        n = bs * nb
        x = (rng.standard_normal(n) * np.exp(rng.uniform(-8, 8, n))).astype(np.float32)
        x[bs:2 * bs] = np.where(np.arange(bs) % 2 == 0, -0.0, 0.0)   # block 1: signed zeros
        if nb > 3:
            x[2 * bs + 5] = np.nan                                    # block 2: one NaN
            x[3 * bs + 9] = np.inf                                    # block 3: +inf
        inp[f"x{bs}"] = x
        inp[f"xd{bs}"] = rng.standard_normal(n) * 1e3
        inp[f"xi{bs}"] = rng.integers(-10 ** 6, 10 ** 6, n).astype(np.int32)
    return inp


def _red_run(inp):
    out = {}
    for bs, nb in BLOCK_SHAPES:
        o, od, oi = np.zeros(3 * nb, np.float32), np.zeros(nb, np.float64), np.zeros(2 * nb, np.int32)
        block_reductions[nb, bs](inp[f"x{bs}"], inp[f"xd{bs}"], inp[f"xi{bs}"], o, od, oi)
        out |= {f"sum_f32_{bs}": o[0::3], f"max_f32_{bs}": o[1::3], f"min_f32_{bs}": o[2::3],
                f"sum_f64_{bs}": od, f"sum_i32_{bs}": oi[0::2], f"max_i32_{bs}": oi[1::2]}
    return out


def _tree_sum(v: np.ndarray) -> np.ndarray:
    """Rows summed by kaio's fixed two-level tree, in the rows' dtype: the halving tree
    (element k += element k + stride, stride 16 .. 1) within each group of 32 consecutive
    threads, then the same tree over the group totals (block sizes here are multiples of 32)."""
    def halving(t):
        s = t.shape[1] // 2
        while s:
            t[:, :s] = t[:, :s] + t[:, s:2 * s]
            s //= 2
        return t[:, 0]
    nb, bs = v.shape
    with np.errstate(invalid="ignore", over="ignore"):
        groups = halving(v.reshape(nb * (bs // 32), 32).copy()).reshape(nb, bs // 32)
        return halving(groups.copy())


def _minmax(v: np.ndarray, is_min: bool) -> np.ndarray:
    """Per block, the min/max by a halving tree with minNum/maxNum's NaN and signed-zero rules."""
    t = v.copy()
    s = t.shape[1] // 2
    while s:
        t[:, :s] = min_max_num(t[:, :s], t[:, s:2 * s], is_min)
        s //= 2
    return t[:, 0]


def _red_expected(inp):
    out = {}
    for bs, nb in BLOCK_SHAPES:
        x = inp[f"x{bs}"].reshape(nb, bs)
        xi = inp[f"xi{bs}"].reshape(nb, bs)
        out |= {f"sum_f32_{bs}": _tree_sum(x), f"max_f32_{bs}": _minmax(x, False),
                f"min_f32_{bs}": _minmax(x, True),
                f"sum_f64_{bs}": _tree_sum(inp[f"xd{bs}"].reshape(nb, bs)),
                f"sum_i32_{bs}": xi.sum(axis=1).astype(np.int32),
                f"max_i32_{bs}": xi.max(axis=1).astype(np.int32)}
    return out


def cases():
    warp_rule = Rule("bitwise", why="warp ops: compared with the interpreter at the target's own "
                                    "warp width (the result depends on it)")
    return [
        feature("warp_ops", _warp_inputs, _warp_run, _warp_expected, width_dependent=True,
                rule=warp_rule,
                vs_numpy=rel(1e-5, "numpy sums the f32 warp_sum in float64, not in kaio's "
                                   "shuffle-tree order (integer outputs are compared exactly)"),
                description="shuffle/up/down/xor, vote any/all, ballot, warp sum/max/min, lane_id"),
        feature("block_reductions", _red_inputs, _red_run, _red_expected, rule=BITWISE,
                description="block_sum/max/min f32 f64 i32 at 256 and 1024 threads; signed "
                            "zeros, NaN, inf; fixed tree order, width-independent"),
    ]
