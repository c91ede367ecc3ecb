"""Row-wise ops over many rows of any width: RMSNorm, LayerNorm and a numerically stable softmax.

One block per row (the ``rows_per_block`` partition): the block's threads stride over the row's
columns, combine their partial sums / maxima with ``kaio.block_sum`` / ``kaio.block_max`` (a fixed
combination order, so results do not depend on the warp width), then each thread writes the
columns it owns. Rows of up to 32768 columns take the register-resident variants (the row read
once into registers: :func:`resident_plan`), wider ones the general kernels, which read the row
two or three times; :func:`row_kernel` picks (a measured table, autotuned per shape on a GPU:
kernels/ml/row_tuning.py). Inputs and outputs are f32, f16 or bf16;
statistics are accumulated in f32 (f64 arrays, for torch's gradcheck: the general kernels, in
f64). The softmax's exp is the fast one (``fast=True``: the hardware
exp2 after an exact range reduction, within a few ulp: docs/mathlib.md), as in Triton's softmax;
for f16/bf16 results it is the hardware exp2 of ``(x - max) log2 e`` without the reduction
(:func:`.elementwise.exp_narrow`).
"""
import functools

import numpy as np

import kaio
from kaio import f32, regions

from .._launch import acc_dtype, kdtype
from .elementwise import _name, exp_narrow, narrow
from .row_tuning import (  # noqa: F401  (the measured table is part of this module's interface)
    RESIDENT_MAX_PER,
    RESIDENT_MAX_THREADS,
    RESIDENT_REGS,
    resident_plan,
    resident_regs,
    resident_vec,
    tuned_launch,
)


def _rows(vec: int = 1):
    """The row kernels' partition: one row per block, its threads striding the columns (in
    chunks of ``vec`` contiguous ones)."""
    return regions.rows_per_block(vec=vec)


@functools.lru_cache(maxsize=None)
def rmsnorm_kernel(dt: str, out_dt: str):
    """y[r, c] = x[r, c] / sqrt(mean_c(x[r]^2) + eps) * w[c]."""
    T, OT, C = kdtype(dt), kdtype(out_dt), acc_dtype(dt)

    @kaio.kernel
    def rmsnorm(x: kaio.In[T, 2], w: kaio.In[T], y: kaio.Out[OT, _rows()], eps: C):
        row = kaio.block_idx.x
        n = x.shape[1]
        sumsq = C(0.0)
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            v = C(x[row, c])
            sumsq += v * v
        total = kaio.block_sum(sumsq)
        inv_rms = 1.0 / kaio.math.sqrt(total / C(n) + eps)
        for r, c in y.owned():
            y[r, c] = OT(C(x[r, c]) * inv_rms * C(w[c]))

    return rmsnorm


@functools.lru_cache(maxsize=None)
def layernorm_kernel(dt: str, out_dt: str):
    """y = (x - mean) / sqrt(var + eps) * w + b per row; two passes (mean, then the centred
    sum of squares) so the variance does not suffer from cancellation."""
    T, OT, C = kdtype(dt), kdtype(out_dt), acc_dtype(dt)

    @kaio.kernel
    def layernorm(x: kaio.In[T, 2], w: kaio.In[T], b: kaio.In[T], y: kaio.Out[OT, _rows()],
                  eps: C):
        row = kaio.block_idx.x
        n = x.shape[1]
        s = C(0.0)
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            s += C(x[row, c])
        mean = kaio.block_sum(s) / C(n)
        ss = C(0.0)
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            d = C(x[row, c]) - mean
            ss += d * d
        inv_std = 1.0 / kaio.math.sqrt(kaio.block_sum(ss) / C(n) + eps)
        for r, c in y.owned():
            y[r, c] = OT((C(x[r, c]) - mean) * inv_std * C(w[c]) + C(b[c]))

    return layernorm




@functools.lru_cache(maxsize=None)
def softmax_kernel(dt: str, out_dt: str):
    """y[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r): subtracting the row maximum
    keeps every exponent <= 0, so nothing overflows."""
    T, OT, C = kdtype(dt), kdtype(out_dt), acc_dtype(dt)
    narrow_out = narrow(out_dt)

    @kaio.kernel
    def softmax(x: kaio.In[T, 2], y: kaio.Out[OT, _rows()]):
        row = kaio.block_idx.x
        n = x.shape[1]
        m = C(-kaio.math.inf)
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            m = kaio.math.max(m, C(x[row, c]))
        row_max = kaio.block_max(m)
        s = C(0.0)
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            if narrow_out:          # compile-time choices
                s += exp_narrow(C(x[row, c]) - row_max)
            else:
                s += kaio.math.exp(C(x[row, c]) - row_max, fast=True)
        inv_sum = 1.0 / kaio.block_sum(s)
        for r, c in y.owned():
            if narrow_out:
                y[r, c] = OT(exp_narrow(C(x[r, c]) - row_max) * inv_sum)
            else:
                y[r, c] = OT(kaio.math.exp(C(x[r, c]) - row_max, fast=True) * inv_sum)

    return softmax


# --- register-resident variants: the row is read once ------------------------------------------
# Thread t of B keeps PER columns of its row in a local array (PER a compile-time constant, so
# the array is registers), so x is read once instead of two or three times. The columns are
# chunks of V contiguous ones (the rows_per_block(vec=V) partition): chunk k of thread t is
# columns [V*t + V*B*k, ... + V). With V = 16 / itemsize (rows a multiple of V long), each chunk
# is one 16-byte load of x and one 16-byte store of y (kaio.backends.vector_access); other rows
# take V = 1, the plain stride. Each thread sums its columns chunk by chunk, so the partial sums
# (and the results' last bits) differ from the general kernels', which stride by one column;
# both are checked against the float64 references. Columns past the row's end hold the
# reductions' neutral value. Capped at 64 registers, two 512-thread blocks share an SM.
@kaio.func
def _load_row(x, row, v, per, vec, fill):
    """Row ``row`` of ``x`` into the thread's ``per`` registers ``v`` as f32: chunk k holds columns
    ``[vec*t + vec*B*k, +vec)`` (one 16-byte load when vec is 16 / itemsize); a chunk past the
    row's end holds ``fill``, the reduction's neutral value."""
    t = kaio.thread_idx.x
    nt = kaio.block_dim.x
    n = x.shape[1]
    for k in kaio.static_range(per // vec):
        c = vec * t + vec * nt * k
        for j in kaio.static_range(vec):
            v[vec * k + j] = fill
        if c + vec <= n:
            for j in kaio.static_range(vec):
                v[vec * k + j] = f32(x[row, c + j])


@functools.lru_cache(maxsize=None)
def softmax_resident_kernel(dt: str, out_dt: str, fast: bool = False, vec: int = 1,
                            regs: int = RESIDENT_REGS):
    """:func:`softmax_kernel` with the row in registers (read once, written once), in chunks of
    ``vec`` columns. ``fast``: ``fast_math`` for the whole kernel (its exp is fast either way)."""
    T, OT, V = kdtype(dt), kdtype(out_dt), vec
    narrow_out = narrow(out_dt)

    @kaio.kernel(fast_math=fast, max_registers=regs)
    def softmax_resident(x: kaio.In[T, 2], y: kaio.Out[OT, _rows(V)], PER: kaio.Const[int]):
        row = kaio.block_idx.x
        t = kaio.thread_idx.x
        nt = kaio.block_dim.x
        n = x.shape[1]
        v = kaio.local_array(f32, PER)
        _load_row(x, row, v, PER, V, f32(-kaio.math.inf))
        m = f32(-kaio.math.inf)
        for k in kaio.static_range(PER):
            m = kaio.math.max(m, v[k])
        row_max = kaio.block_max(m)
        s = f32(0.0)
        for k in kaio.static_range(PER):
            if narrow_out:          # a compile-time choice
                e = exp_narrow(v[k] - row_max)
            else:
                e = kaio.math.exp(v[k] - row_max, fast=True)
            v[k] = e
            s += e
        inv_sum = 1.0 / kaio.block_sum(s)
        for k in kaio.static_range(PER // V):
            c = V * t + V * nt * k
            if c + V <= n:
                for j in kaio.static_range(V):
                    y[row, c + j] = OT(v[V * k + j] * inv_sum)

    return softmax_resident


@functools.lru_cache(maxsize=None)
def rmsnorm_resident_kernel(dt: str, out_dt: str, vec: int = 1, regs: int = RESIDENT_REGS):
    """:func:`rmsnorm_kernel` with the row in registers (read once, written once), in chunks of
    ``vec`` columns."""
    T, OT, V = kdtype(dt), kdtype(out_dt), vec

    @kaio.kernel(max_registers=regs)
    def rmsnorm_resident(x: kaio.In[T, 2], w: kaio.In[T], y: kaio.Out[OT, _rows(V)], eps: f32,
                         PER: kaio.Const[int]):
        row = kaio.block_idx.x
        t = kaio.thread_idx.x
        nt = kaio.block_dim.x
        n = x.shape[1]
        v = kaio.local_array(f32, PER)
        _load_row(x, row, v, PER, V, f32(0.0))
        sumsq = f32(0.0)
        for k in kaio.static_range(PER):
            sumsq += v[k] * v[k]
        inv_rms = 1.0 / kaio.math.sqrt(kaio.block_sum(sumsq) / f32(n) + eps)
        for k in kaio.static_range(PER // V):
            c = V * t + V * nt * k
            if c + V <= n:
                for j in kaio.static_range(V):
                    y[row, c + j] = OT(v[V * k + j] * inv_rms * f32(w[c + j]))

    return rmsnorm_resident


@functools.lru_cache(maxsize=None)
def layernorm_resident_kernel(dt: str, out_dt: str, vec: int = 1, regs: int = RESIDENT_REGS):
    """:func:`layernorm_kernel` with the row in registers, in chunks of ``vec`` columns: the
    mean and the centred sum of squares (still two passes, for the variance's accuracy) both run
    over the registers."""
    T, OT, V = kdtype(dt), kdtype(out_dt), vec

    @kaio.kernel(max_registers=regs)
    def layernorm_resident(x: kaio.In[T, 2], w: kaio.In[T], b: kaio.In[T],
                           y: kaio.Out[OT, _rows(V)], eps: f32, PER: kaio.Const[int]):
        row = kaio.block_idx.x
        t = kaio.thread_idx.x
        nt = kaio.block_dim.x
        n = x.shape[1]
        v = kaio.local_array(f32, PER)
        _load_row(x, row, v, PER, V, f32(0.0))
        s = f32(0.0)
        for k in kaio.static_range(PER):
            s += v[k]
        mean = kaio.block_sum(s) / f32(n)
        ss = f32(0.0)
        for k in kaio.static_range(PER // V):
            if V * t + V * nt * k + V <= n:
                for j in kaio.static_range(V):
                    d = v[V * k + j] - mean
                    ss += d * d
        inv_std = 1.0 / kaio.math.sqrt(kaio.block_sum(ss) / f32(n) + eps)
        for k in kaio.static_range(PER // V):
            c = V * t + V * nt * k
            if c + V <= n:
                for j in kaio.static_range(V):
                    y[row, c + j] = OT((v[V * k + j] - mean) * inv_std * f32(w[c + j])
                                       + f32(b[c + j]))

    return layernorm_resident


_GENERAL = {"softmax": softmax_kernel, "rmsnorm": rmsnorm_kernel, "layernorm": layernorm_kernel}
_RESIDENT = {"softmax": softmax_resident_kernel, "rmsnorm": rmsnorm_resident_kernel,
             "layernorm": layernorm_resident_kernel}


@functools.lru_cache(maxsize=None)
def launch_for(op: str, dt: str, out_dt: str, shape: tuple, config):
    """The launch of one row-op candidate (kernels/ml/row_tuning.py's ``Config``: the resident
    kernel at a launch shape and register cap, or the general one): a function of the op's
    kernel arguments."""
    rows, _ = shape
    p = config.params
    if p["kind"] == "general":
        k = _GENERAL[op](dt, out_dt)
        return k if p["threads"] is None else k[(rows,), (p["threads"],)]
    k = _RESIDENT[op](dt, out_dt, vec=p["vec"], regs=p["regs"])[(rows,), (p["threads"],)]
    per = p["per"]
    return lambda *args: k(*args, PER=per)


def row_kernel(op: str, dt: str, out_dt: str, shape):
    """What the library launches for row op ``op`` ('softmax', 'rmsnorm', 'layernorm') on
    [rows, cols] = ``shape``: a function of the kernel's arguments (the same as the general
    kernel's). Untuned it launches the table's choice: the register-resident kernel when the row
    fits (:func:`resident_plan`, :func:`resident_vec`, :func:`resident_regs`), the general one
    otherwise (and for f64, torch's gradcheck); on a GPU, :mod:`kaio.autotune` picks among the
    candidates of kernels/ml/row_tuning.py on the first call for the shape. The bench closures
    in cases.py time exactly this."""
    return tuned_launch(op, dt, out_dt, tuple(shape), launch_for)


# --- host entry points -------------------------------------------------------------------------
def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float = 1e-6, out_dtype=None) -> np.ndarray:
    """RMSNorm of each row of a 2-D array."""
    out = np.empty(x.shape, dtype=out_dtype or x.dtype)
    row_kernel("rmsnorm", _name(x), _name(out), x.shape)(x, w, out, float(eps))
    return out


def layernorm(x, w, b, eps: float = 1e-5, out_dtype=None) -> np.ndarray:
    """LayerNorm of each row of a 2-D array."""
    out = np.empty(x.shape, dtype=out_dtype or x.dtype)
    row_kernel("layernorm", _name(x), _name(out), x.shape)(x, w, b, out, float(eps))
    return out


def softmax(x: np.ndarray, out_dtype=None) -> np.ndarray:
    """Softmax over the last axis of a 2-D array."""
    out = np.empty(x.shape, dtype=out_dtype or x.dtype)
    row_kernel("softmax", _name(x), _name(out), x.shape)(x, out)
    return out


# --- references (float64) ----------------------------------------------------------------------
def rmsnorm_ref(x, w, eps):
    v = x.astype(np.float64)
    return v / np.sqrt(np.mean(v * v, axis=1, keepdims=True) + eps) * w.astype(np.float64)


def layernorm_ref(x, w, b, eps):
    v = x.astype(np.float64)
    mean = v.mean(axis=1, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=1, keepdims=True)
    return (v - mean) / np.sqrt(var + eps) * w.astype(np.float64) + b.astype(np.float64)


def softmax_ref(x):
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
