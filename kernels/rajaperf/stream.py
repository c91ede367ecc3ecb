"""RAJAPerf Stream group: ADD, COPY, DOT, MUL, TRIAD (float64, default length 1,000,000).

Inputs follow the suite's set-up order (``a``, ``b``, ``c`` initialised with alternating
factors). DOT is a reduction: each block reduces its grid-stride partial sums with
``kaio.block_sum`` and its thread 0 writes one value per block (the ``per_block`` partition);
the host adds the per-block partials.
"""
import math

import numpy as np

import kaio
from kaio import f64, regions

from .._bench import launcher, like, resident
from .._launch import BLOCK, reduction_grid
from ._case import REDUCTION, add_up, raja_case
from .checksum import DataInit

N = 1_000_000
SMALL = 10_000


@kaio.kernel
def stream_add(a: kaio.In[f64], b: kaio.In[f64], c: kaio.Out[f64]):
    for i in c.owned():
        c[i] = a[i] + b[i]


@kaio.kernel
def stream_copy(a: kaio.In[f64], c: kaio.Out[f64]):
    for i in c.owned():
        c[i] = a[i]


@kaio.kernel
def stream_mul(c: kaio.In[f64], b: kaio.Out[f64], alpha: f64):
    for i in b.owned():
        b[i] = alpha * c[i]


@kaio.kernel
def stream_triad(b: kaio.In[f64], c: kaio.In[f64], a: kaio.Out[f64], alpha: f64):
    for i in a.owned():
        a[i] = b[i] + alpha * c[i]


def _dot_kernel():
    @kaio.kernel
    def stream_dot(a: kaio.In[f64], b: kaio.In[f64], partial: kaio.Out[f64, regions.per_block()]):
        s = f64(0.0)
        for i in range(kaio.global_id(), a.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
            s += a[i] * b[i]
        total = kaio.block_sum(s)
        if kaio.thread_idx.x == 0:
            partial[kaio.block_idx.x] = total
    return stream_dot


_DOT = []


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """sum_i a[i] * b[i]: per-block partials on the device, summed on the host."""
    if not _DOT:
        _DOT.append(_dot_kernel())
    blocks = reduction_grid(a.shape[0])
    partial = np.empty(blocks, np.float64)
    _DOT[0][(blocks,), (BLOCK,)](a, b, partial)
    return float(partial.sum())


def _setup(*spec):
    """Inputs in the suite's set-up order: (name, 'real' | 'const' | 'scalar') items."""
    def make(n):
        d = DataInit()
        out = {}
        for name, kind in spec:
            out[name] = d.real(n) if kind == "real" else d.const(n, 0.0) if kind == "const" else d.scalar()
        return out
    return make


def _bw(arrays):
    return lambda n: 8.0 * arrays * n


raja_case(name="ADD", group="stream", make=_setup(("a", "real"), ("b", "real"), ("c", "const")),
          reps=1000, default_size=N, small_size=SMALL,
          run=lambda i: {"c": _run(stream_add, i["a"], i["b"], out=i["a"])},
          reference=lambda i: {"c": i["a"] + i["b"]},
          flops=lambda n: 1.0 * n, bytes=_bw(3), description="c = a + b",
          bench=lambda i: resident(i, lambda d: launcher(stream_add, d["a"], d["b"], d["c"]),
                                   read=("a", "b"), new=like(i, "a", "c")))
raja_case(name="COPY", group="stream", make=_setup(("a", "real"), ("c", "const")),
          reps=1800, default_size=N, small_size=SMALL,
          run=lambda i: {"c": _run(stream_copy, i["a"], out=i["a"])},
          reference=lambda i: {"c": i["a"].copy()}, bytes=_bw(2), description="c = a",
          bench=lambda i: resident(i, lambda d: launcher(stream_copy, d["a"], d["c"]),
                                   read=("a",), new=like(i, "a", "c")))
raja_case(name="MUL", group="stream", make=_setup(("b", "const"), ("c", "real"), ("alpha", "scalar")),
          reps=1800, default_size=N, small_size=SMALL,
          run=lambda i: {"b": _run(stream_mul, i["c"], out=i["c"], scalars=(i["alpha"],))},
          reference=lambda i: {"b": i["alpha"] * i["c"]},
          flops=lambda n: 1.0 * n, bytes=_bw(2), description="b = alpha * c",
          bench=lambda i: resident(i, lambda d: launcher(stream_mul, d["c"], d["b"], i["alpha"]),
                                   read=("c",), new=like(i, "c", "b")))
raja_case(name="TRIAD", group="stream",
          make=_setup(("a", "const"), ("b", "real"), ("c", "real"), ("alpha", "scalar")),
          reps=1000, default_size=N, small_size=SMALL,
          run=lambda i: {"a": _run(stream_triad, i["b"], i["c"], out=i["b"], scalars=(i["alpha"],))},
          reference=lambda i: {"a": i["b"] + i["alpha"] * i["c"]},
          flops=lambda n: 2.0 * n, bytes=_bw(3), description="a = b + alpha * c",
          checksum_scale=1e-3, problem=lambda n: n,  # src/stream/TRIAD.cpp
          bench=lambda i: resident(i, lambda d: launcher(stream_triad, d["b"], d["c"], d["a"], i["alpha"]),
                                   read=("b", "c"), new=like(i, "b", "a")))
raja_case(name="DOT", group="stream", make=_setup(("a", "real"), ("b", "real")),
          reps=2000, default_size=N, small_size=SMALL,
          run=lambda i: {"dot": np.array(dot(i["a"], i["b"]))},
          reference=lambda i: {"dot": np.array(math.fsum(i["a"] * i["b"]))},
          tolerance=REDUCTION, flops=lambda n: 2.0 * n, bytes=_bw(2), fold=add_up("dot"),
          description="dot += a[i] * b[i] (block partials + host sum)", bench=lambda i: _dot_bench(i))


def _dot_bench(i):
    dot(i["a"][:1], i["b"][:1])  # builds the kernel
    blocks = reduction_grid(i["a"].shape[0])
    return resident(i, lambda d: launcher(_DOT[0], d["a"], d["b"], d["partial"],
                                          config=((blocks,), (BLOCK,))),
                    read=("a", "b"), new={"partial": ((blocks,), np.float64)},
                    finish=lambda h, _: {"dot": np.array(float(h["partial"].sum()))})


def _run(kernel, *ins, out, scalars=()):
    """Launch an elementwise kernel whose single output has the shape of ``out``."""
    res = np.empty_like(out)
    kernel(*ins, res, *scalars)
    return res
