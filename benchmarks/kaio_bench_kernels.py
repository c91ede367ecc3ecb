"""The kaio side of benchmarks/bench_gpu.py: the same algorithms as cuda/native.cu, in kaio."""
from __future__ import annotations

import kaio
from kaio import f32, i32
from kaio.kernels.ml import norms
from kaio.regions import blocked, grid_stride, rows_per_block, tiles


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


# --- classics written the CUDA way (issue 13): the same code as their twins in cuda/native.cu ---
@kaio.kernel(block=(32, 8))
def transpose32(x: kaio.In[f32, 2], y: kaio.Region[f32, 2, tiles(32, 32, transposed=True)]):
    """The tiled transpose: a padded 32 x 33 shared tile, 32 x 8 threads each moving four rows
    in and four out; block (bx, by) reads input tile (by, bx) and writes output tile (bx, by)."""
    tile = kaio.shared_array(f32, (32, 33))
    tx = kaio.thread_idx.x
    ty = kaio.thread_idx.y
    bx = kaio.block_idx.x
    by = kaio.block_idx.y
    for j in range(0, 32, 8):
        if by * 32 + ty + j < x.shape[0] and bx * 32 + tx < x.shape[1]:
            tile[ty + j, tx] = x[by * 32 + ty + j, bx * 32 + tx]
    kaio.sync()
    for j in range(0, 32, 8):
        if bx * 32 + ty + j < y.shape[0] and by * 32 + tx < y.shape[1]:
            y[bx * 32 + ty + j, by * 32 + tx] = tile[tx, ty + j]


@kaio.kernel
def stencil5(x: kaio.In[f32, 2], y: kaio.Out[f32, 2, tiles()]):
    """The 5-point stencil with CUDA's 2-D index (the tile is the block); edges copied."""
    i = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    j = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    n = x.shape[0]
    m = x.shape[1]
    if i >= 1 and i < n - 1 and j >= 1 and j < m - 1:
        y[i, j] = 0.25 * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1]) - x[i, j]
    elif i < n and j < m:
        y[i, j] = x[i, j]


@kaio.kernel
def stencil5_owned(x: kaio.In[f32, 2], y: kaio.Out[f32, 2, tiles()]):
    """The same stencil written with ``owned()`` (a guard under ``tiles()``, no loop)."""
    n = x.shape[0]
    m = x.shape[1]
    for i, j in y.owned():
        if i >= 1 and i < n - 1 and j >= 1 and j < m - 1:
            y[i, j] = 0.25 * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1]) - x[i, j]
        else:
            y[i, j] = x[i, j]


@kaio.kernel
def histogram256(data: kaio.In[i32], hist: kaio.Atomic[i32]):
    """The shared-memory histogram: a block's 256 bins cleared by a block-stride loop, a
    grid-stride loop of shared atomics, the bins added to the global histogram (values must be
    in [0, 256); ``hist`` starts at 0)."""
    h = kaio.shared_array(i32, 256)
    t = kaio.thread_idx.x
    for b in range(t, 256, kaio.block_dim.x):
        h[b] = 0
    kaio.sync()
    for i in range(kaio.global_id(), data.shape[0], kaio.grid_dim.x * kaio.block_dim.x):
        kaio.atomic_add(h, data[i], 1)
    kaio.sync()
    for b in range(t, 256, kaio.block_dim.x):
        kaio.atomic_add(hist, b, h[b])


__all__ = ["saxpy", "saxpy8", "softmax_rows", "softmax_rows_resident", "dot_partials",
           "dot_partials8", "grid_stride", "grid_sum", "grid_sum_rolled", "transpose32", "stencil5",
           "stencil5_owned", "histogram256"]
