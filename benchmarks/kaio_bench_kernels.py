"""The kaio side of benchmarks/bench_gpu.py: the same algorithms as cuda/native.cu, in kaio."""
from __future__ import annotations

import kaio
from kaio import f32
from kaio.kernels.ml import norms
from kaio.regions import blocked, grid_stride, rows_per_block


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    """One element per thread (the default elementwise partition)."""
    for i in y.owned():
        y[i] = a * x[i] + y[i]


@kaio.kernel
def saxpy8(a: f32, x: kaio.In[f32], y: kaio.Region[f32, blocked(8)]):
    """Eight neighbouring elements per thread: full tiles become two 16-byte accesses per array."""
    for i in y.owned():
        y[i] = a * x[i] + y[i]


#: the library's three-pass softmax (kaio.kernels.ml.norms.softmax_kernel, what rows wider than
#: 32768 columns run): one block per row, max, sum of exp, normalise, x read three times
softmax_rows = norms.softmax_kernel("f32", "f32")

#: the library's register-resident softmax (what ml.softmax runs up to 32768 columns): 16-byte
#: chunks of 4 columns per thread, x read once, the fast exp, the library's register cap at 16
#: columns per thread (launch it with PER=16 on 512 threads for 8192 columns)
softmax_rows_resident = norms.softmax_resident_kernel("f32", "f32", vec=4, regs=norms.resident_regs(16))


@kaio.kernel
def dot_partials(x: kaio.In[f32], y: kaio.In[f32], part: kaio.Out[f32, 2, rows_per_block()]):
    """Grid-stride partial dot products: block b writes part[b, 0] (``part`` is nblocks x 1)."""
    acc = 0.0
    n = x.shape[0]
    stride = kaio.grid_dim.x * kaio.block_dim.x
    for i in range(kaio.global_id(), n, stride):
        acc += x[i] * y[i]
    total = kaio.block_sum(acc)
    for r, j in part.owned():
        part[r, j] = total


@kaio.kernel
def dot_partials8(x: kaio.In[f32], y: kaio.In[f32], part: kaio.Out[f32, 2, rows_per_block()]):
    """Grid-stride over tiles of eight neighbouring elements (16-byte loads for full tiles)."""
    acc = 0.0
    n = x.shape[0]
    stride = 8 * kaio.grid_dim.x * kaio.block_dim.x
    for base in range(8 * kaio.global_id(), n, stride):
        for i in range(base, min(base + 8, n)):
            acc += x[i] * y[i]
    total = kaio.block_sum(acc)
    for r, j in part.owned():
        part[r, j] = total


def _classic_grid_sum(x: kaio.In[f32], total: kaio.Atomic[f32]):
    """The classic CUDA sum: a grid-stride loop, a shuffle tree per warp, the warps' partials
    through shared memory, one atomic per block (``total`` must start at 0)."""
    partial = kaio.shared_array(f32, 32)
    t = kaio.thread_idx.x
    acc = 0.0
    for i in range(kaio.global_id(), x.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
        acc += x[i]
    acc = kaio.warp_sum(acc)
    if t % kaio.warp_size == 0:
        partial[t // kaio.warp_size] = acc
    kaio.sync()
    if t < kaio.warp_size:
        v = 0.0
        if t < (kaio.block_dim.x + kaio.warp_size - 1) // kaio.warp_size:
            v = partial[t]
        v = kaio.warp_sum(v)
        if t == 0:
            kaio.atomic_add(total, 0, v)


#: the grid-stride loop unrolled by 4 behind a run-time test of the step (unroll_strided)
grid_sum = kaio.kernel(_classic_grid_sum)
#: the same kernel with the loop as written: one load in flight per thread
grid_sum_rolled = kaio.kernel(_classic_grid_sum, disabled_passes=("unroll_strided",))


__all__ = ["saxpy", "saxpy8", "softmax_rows", "softmax_rows_resident", "dot_partials",
           "dot_partials8", "grid_stride", "grid_sum", "grid_sum_rolled"]
