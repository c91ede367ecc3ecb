"""Racy kernels the checker must reject, one race each. The racy line carries ``# RACE``;
``BUFFER`` names the buffer the message must name; ``DYNAMIC`` says whether the sanitizer sees
the race at run time on the launch in ``LAUNCH`` (with the checker disabled)."""
from __future__ import annotations

import numpy as np

import kaio
from kaio import f16, f32, f64, i8, i32, u32
from kaio.regions import blocked, grid_stride, rows, rows_per_block, tiles


@kaio.kernel
def neighbour_write(x: kaio.In[f32], y: kaio.Region[f32]):
    i = kaio.global_id()
    if i + 1 < y.shape[0]:
        y[i] = x[i]
        y[i + 1] = x[i]  # RACE


@kaio.kernel
def inplace_stencil(y: kaio.Region[f32]):
    i = kaio.global_id()
    if i > 0 and i < y.shape[0] - 1:
        y[i] = y[i - 1] + y[i] + y[i + 1]  # RACE


@kaio.kernel
def missing_barrier(x: kaio.In[f32], y: kaio.Out[f32]):
    tile = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    i = kaio.global_id()
    tile[t] = x[i]
    if t + 1 < 64:
        y[i] = tile[t + 1]  # RACE


@kaio.kernel
def divergent_barrier(x: kaio.In[f32], y: kaio.Out[f32]):
    i = kaio.global_id()
    if kaio.thread_idx.x < 16:
        kaio.sync()  # RACE
    y[i] = x[i]


@kaio.kernel
def barrier_thread_loop(x: kaio.In[f32], y: kaio.Out[f32]):
    i = kaio.global_id()
    for _k in range(kaio.thread_idx.x):
        kaio.sync()  # RACE
    y[i] = x[i]


@kaio.kernel
def overlapping_blocks(x: kaio.In[f32], y: kaio.Region[f32, blocked(2)]):
    g = kaio.global_id()
    for j in range(4):
        i = g * 2 + j
        if i < y.shape[0]:
            y[i] = x[i]  # RACE


@kaio.kernel
def out_read_unwritten(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = y[i] * x[i]  # RACE


@kaio.kernel
def region_read_neighbour(x: kaio.In[f32], y: kaio.Region[f32], z: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[i]
        if i + 1 < y.shape[0]:
            z[i] = y[i + 1]  # RACE


@kaio.kernel
def data_index_store(idx: kaio.In[i32], x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[idx[i]] = x[i]  # RACE


@kaio.kernel
def shared_const_write(x: kaio.In[f32], y: kaio.Out[f32]):
    tile = kaio.shared_array(f32, 64)
    i = kaio.global_id()
    tile[0] = x[i]  # RACE
    kaio.sync()
    y[i] = tile[0]


@kaio.kernel
def shared_neighbour_read(x: kaio.In[f32], y: kaio.Out[f32]):
    tile = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    i = kaio.global_id()
    tile[t] = x[i]
    v = 0.0
    if t > 0:
        v = tile[t - 1]  # RACE
    kaio.sync()
    y[i] = v


@kaio.kernel
def atomic_plain_mix(data: kaio.In[i32], hist: kaio.Atomic[i32]):
    i = kaio.global_id()
    if i < data.shape[0]:
        kaio.atomic_add(hist, data[i], 1)
        hist[0] = 0  # RACE


@kaio.kernel
def unguarded_tree(x: kaio.In[f32], total: kaio.Atomic[f32]):
    buf = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    buf[t] = x[kaio.global_id()]
    kaio.sync()
    s = 32
    while s > 0:
        if t + s < 64:
            buf[t] += buf[t + s]  # RACE
        kaio.sync()
        s = s // 2
    if t == 0:
        kaio.atomic_add(total, 0, buf[0])


@kaio.kernel
def tree_no_sync(x: kaio.In[f32], total: kaio.Atomic[f32]):
    buf = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    buf[t] = x[kaio.global_id()]
    kaio.sync()
    s = 32
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]  # RACE
        s = s // 2
    kaio.sync()
    if t == 0:
        kaio.atomic_add(total, 0, buf[0])


@kaio.kernel
def short_stride(x: kaio.In[f32], y: kaio.Out[f32, grid_stride()]):
    for i in range(kaio.global_id(), y.shape[0], kaio.block_dim.x):
        y[i] = x[i]  # RACE


@kaio.kernel
def rows_transposed(x: kaio.In[f32, 2], y: kaio.Out[f32, rows()]):
    r = kaio.global_id()
    if r < y.shape[1]:
        for c in range(y.shape[0]):
            y[c, r] = x[c, r]  # RACE


@kaio.kernel
def whole_row_per_thread(x: kaio.In[f32, 2], y: kaio.Out[f32, rows_per_block(32)]):
    r = kaio.block_idx.x
    for c in range(y.shape[1]):
        y[r, c] = x[r, c]  # RACE


@kaio.kernel
def shifted_tile(x: kaio.In[f32, 2], y: kaio.Out[f32, tiles(8, 8)]):
    r = kaio.block_idx.y * 8 + kaio.thread_idx.y
    c = kaio.block_idx.x * 8 + kaio.thread_idx.x + 1
    if r < y.shape[0] and c < y.shape[1]:
        y[r, c] = x[r, c]  # RACE


@kaio.kernel
def plane_neighbour(x: kaio.In[f32, 3], y: kaio.Out[f32, 3, tiles()]):
    for k, j, i in y.owned():
        if k + 1 < y.shape[0]:
            y[k + 1, j, i] = x[k, j, i]  # RACE


@kaio.kernel
def planes_swapped(x: kaio.In[f32, 3], y: kaio.Out[f32, 3, tiles()]):
    for k, j, i in y.owned():
        if j < y.shape[0] and k < y.shape[1]:
            y[j, k, i] = x[k, j, i]  # RACE


@kaio.kernel
def modular_index(x: kaio.In[f32], y: kaio.Out[f32]):
    i = kaio.global_id()
    n = y.shape[0]
    if i < n:
        y[(i * 2) % n] = x[i]  # RACE


@kaio.kernel
def reversed_write(x: kaio.In[f32], y: kaio.Out[f32]):
    i = kaio.global_id()
    n = y.shape[0]
    if i < n:
        y[n - 1 - i] = x[i]  # RACE


@kaio.kernel
def shared_two_writes(x: kaio.In[f32], y: kaio.Out[f32]):
    tile = kaio.shared_array(f32, 65)
    t = kaio.thread_idx.x
    i = kaio.global_id()
    tile[t] = x[i]
    tile[t + 1] = x[i]  # RACE
    kaio.sync()
    y[i] = tile[t]


@kaio.kernel
def shared_loop_carry(x: kaio.In[f32], y: kaio.Out[f32]):
    tile = kaio.shared_array(f32, 65)
    t = kaio.thread_idx.x
    i = kaio.global_id()
    tile[t] = x[i]
    kaio.sync()
    for _k in range(4):
        if t + 1 < 64:
            tile[t] = tile[t + 1] + 1.0  # RACE
    kaio.sync()
    y[i] = tile[t]


@kaio.kernel
def divergent_while_barrier(x: kaio.In[f32], y: kaio.Out[f32]):
    i = kaio.global_id()
    k = kaio.thread_idx.x
    while k > 0:
        kaio.sync()  # RACE
        k = k - 8
    y[i] = x[i]


@kaio.kernel
def blocked_overrun(x: kaio.In[f32], y: kaio.Out[f32, blocked(4)]):
    g = kaio.global_id()
    for j in range(5):
        i = g * 4 + j
        if i < y.shape[0]:
            y[i] = x[i]  # RACE


@kaio.kernel
def block_reduce_divergent(x: kaio.In[f32], y: kaio.Out[f32]):
    i = kaio.global_id()
    v = x[i]
    if v > 0.0:
        v = kaio.block_sum(v)  # RACE
    y[i] = v


@kaio.kernel
def data_dependent_read_region(idx: kaio.In[i32], y: kaio.Region[f32], z: kaio.Out[f32]):
    for i in y.owned():
        z[i] = y[idx[i]]  # RACE
        y[i] = 0.0


@kaio.kernel
def store_to_in(x: kaio.In[f32]):
    i = kaio.global_id()
    if i < x.shape[0]:
        kaio.atomic_add(x, i, 1.0)  # RACE


@kaio.kernel
def shared_two_writers(x: kaio.In[f32], y: kaio.Out[f32]):
    sh = kaio.shared_array(f32, 1)
    if kaio.thread_idx.x <= 1:
        sh[0] = x[kaio.global_id()]  # RACE
    kaio.sync()
    i = kaio.global_id()
    if i < y.shape[0]:
        y[i] = sh[0]


@kaio.kernel
def warp_partials_half(x: kaio.In[f32], total: kaio.Atomic[f32]):
    partial = kaio.shared_array(f32, 32)
    t = kaio.thread_idx.x
    v = kaio.warp_sum(x[kaio.global_id()])
    if t % 16 == 0:
        partial[t // 32] = v  # RACE
    kaio.sync()
    if t == 0:
        kaio.atomic_add(total, 0, partial[0])


# --- soundness of the proofs themselves ("issue 12"): each was accepted, and raced -----------
@kaio.func
def _dyn_len():
    y = kaio.dynamic_shared(f32)   # named like the Region: its length is not y.shape[0]
    return y.shape[0]


@kaio.kernel
def shadowed_length(x: kaio.In[f32], y: kaio.Region[f32]):
    g = kaio.global_id()
    i = g + (_dyn_len() - y.shape[0])
    if g < y.shape[0] and i < y.shape[0]:
        y[g] = x[g]
        y[i] = x[g]  # RACE


@kaio.kernel
def narrow_param_wrap(x: kaio.In[f32], y: kaio.Region[f32], k: i8):
    g = kaio.global_id()
    i = g + (i32(k + k) - 2 * i32(k))   # k + k wraps in i8 for k = 100
    if g < y.shape[0]:
        y[g] = x[g]
        if i >= 0:
            y[i] = x[g]  # RACE


@kaio.kernel
def narrow_counter_wrap(x: kaio.In[f32], y: kaio.Out[f32, blocked(200)]):
    g = kaio.global_id()
    c = i8(0)
    for _j in range(200):
        i = g * 200 + i32(c)   # c wraps to -128 after 127
        if i >= 0 and i < y.shape[0]:
            y[i] = x[i]  # RACE
        c = c + 1


@kaio.kernel
def wrapped_guard(x: kaio.In[f32], y: kaio.Region[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[g] = x[g]
        if g + 2147483647 < 0 and 2 * g < y.shape[0]:   # true for g >= 1: the add wraps
            y[2 * g] = x[g]  # RACE


@kaio.kernel
def shift_roundtrip(x: kaio.In[f32], y: kaio.Region[f32]):
    g = kaio.global_id()
    i = (g << 12) >> 12   # g for g < 2**19 only
    if g < y.shape[0] and i >= 0:
        y[g] = x[g]
        y[i] = x[g]  # RACE


@kaio.kernel
def dyn_views_overlap(x: kaio.In[f32], y: kaio.Out[f32]):
    a = kaio.dynamic_shared(f32)
    b = kaio.dynamic_shared(f64)   # the same bytes: b[t] is a[2t] and a[2t + 1]
    t = kaio.thread_idx.x
    g = kaio.global_id()
    a[t] = x[g]
    b[t] = f64(x[g])  # RACE
    kaio.sync()
    y[g] = a[t]


# name -> (buffer the message names, launch for the sanitizer run, args maker, what the reference
# backend raises when the kernel runs with the checker disabled: "race" (kaio.RaceError),
# "barrier" (divergent barrier), "uninit" (Out read before write), "frontend" (the frontend
# already rejects it), or "ownership" (kaio OwnershipError: the sanitizer's ownership check; a
# permutation that writes elements other threads own but never write is no conflict otherwise)
def _f(n):
    return np.arange(n, dtype=np.float32)


def _f2(r, c):
    return np.arange(r * c, dtype=np.float32).reshape(r, c)


def _f3(p, r, c):
    return np.arange(p * r * c, dtype=np.float32).reshape(p, r, c)


@kaio.kernel
def tree_read_early_barrier(x: kaio.In[f32], y: kaio.Out[f32]):
    buf = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    buf[t] = x[g]
    kaio.sync()
    s = 32
    while s > 0:
        kaio.sync()   # at the start: the last iteration's writes meet the read below
        if t < s:
            buf[t] += buf[t + s]
        s = s // 2
    y[g] = buf[0]  # RACE


@kaio.kernel
def loop_may_skip(x: kaio.In[f32], y: kaio.Out[f32], n: i32):
    flag = kaio.shared_array(f32, 1)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    if t == 0:
        flag[0] = 2.0
    s = n
    while s > 0:   # may run zero times: then no barrier separates the write from the read
        kaio.sync()
        s = s // 2
    y[g] = x[g] * flag[0]  # RACE


@kaio.kernel
def tree_u32_stride_le(x: kaio.In[f32], y: kaio.Out[f32]):
    s = kaio.shared_array(f32, 512)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    if t < 256:
        s[t] = x[g]
        s[t + 256] = 0.0
    kaio.sync()
    stride = u32(128)
    while stride > 0:
        if t <= stride:   # thread `stride` writes the element thread 0 reads
            s[t] += s[t + stride]  # RACE
        kaio.sync()
        stride //= 2
    y[g] = s[0]


@kaio.kernel
def doubled_offset_halved_tid(x: kaio.In[f32], y: kaio.Out[f32]):
    sh = kaio.shared_array(f32, 512)
    t = u32(kaio.thread_idx.x)
    g = kaio.global_id()
    off = u32(1)
    while off < 256:
        off *= 2
    if t < 256:
        sh[t // 2 + off] = x[g]  # RACE
    kaio.sync()
    y[g] = sh[t // 2 + off]


@kaio.kernel
def histogram_clear_fixed_stride(data: kaio.In[i32], hist: kaio.Atomic[i32]):
    h = kaio.shared_array(i32, 256)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    for b in range(t, 256, 32):   # threads t and t + 32 both clear bin t + 32
        h[b] = 0  # RACE
    kaio.sync()
    if g < data.shape[0]:
        kaio.atomic_add(h, data[g], 1)
    kaio.sync()
    for b in range(t, 256, kaio.block_dim.x):
        kaio.atomic_add(hist, b, h[b])


# --- a loop whose body ends after its last barrier with shared accesses: the next iteration's
# head (before its first barrier) meets a slower thread's tail of the iteration before
@kaio.kernel
def tail_fragment_loads(A: kaio.In[f16, 2], out: kaio.Raw[f32, 2], n: i32):
    S = kaio.shared_array(f16, 256)
    t = kaio.thread_idx.x
    w = t // kaio.warp_size
    acc = kaio.mma.fill(f32, 0.0)
    for _i in range(n):
        for k in range(t, 256, kaio.block_dim.x):
            S[k] = A[k // 16, k % 16]  # RACE
        kaio.sync()
        acc = kaio.mma.mma(kaio.mma.load_a(S, 0, 0, ld=16), kaio.mma.load_b(S, 0, 8 * w, ld=16), acc)
    kaio.mma.store(out, 0, 8 * w, acc)


@kaio.kernel
def tail_plain_load(x: kaio.In[f32], y: kaio.Out[f32], n: i32):
    S = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    s = f32(0.0)
    for i in range(n):
        if t < 64:
            S[t] = x[g] * f32(i)  # RACE
        kaio.sync()
        s += S[63 - t % 64]
    if g < y.shape[0]:
        y[g] = s


@kaio.kernel
def tail_copy_tile(A: kaio.In[f16, 2], out: kaio.Raw[f32, 2], n: i32):
    S = kaio.shared_array(f16, (16, 16))
    t = kaio.thread_idx.x
    w = t // kaio.warp_size
    acc = kaio.mma.fill(f32, 0.0)
    kaio.mma.copy_tile(S, A, 0, 0)
    kaio.sync()
    for i in range(n):
        if t == 1:   # (element [0, 0] is thread 0's share of the copy on the reference)
            S[0, 0] = S[0, 0] + f16(1.0)  # RACE
        kaio.sync()
        acc = kaio.mma.mma(kaio.mma.load_a(S, 0, 0), kaio.mma.load_b(S, 0, 8 * w), acc)
        kaio.sync()
        kaio.mma.copy_tile(S, A, 0, 16 * (i % 2))   # no barrier after it: in flight into i + 1
    kaio.mma.store(out, 0, 8 * w, acc)


def _tile_args():
    return np.ones((16, 32), np.float16), np.zeros((16, 16), np.float32), 3


CASES = {
    "neighbour_write": ("y", ((2,), (32,)), lambda: (_f(64), _f(64)), "race"),
    "inplace_stencil": ("y", ((2,), (32,)), lambda: (_f(64),), "race"),
    "missing_barrier": ("tile", ((1,), (64,)), lambda: (_f(64), _f(64)), "race"),
    "divergent_barrier": (None, ((1,), (32,)), lambda: (_f(32), _f(32)), "barrier"),
    "barrier_thread_loop": (None, ((1,), (32,)), lambda: (_f(32), _f(32)), "barrier"),
    "overlapping_blocks": ("y", ((1,), (16,)), lambda: (_f(32), _f(32)), "race"),
    "out_read_unwritten": ("y", ((1,), (32,)), lambda: (_f(32), _f(32)), "uninit"),
    "region_read_neighbour": ("y", ((2,), (32,)), lambda: (_f(64), _f(64), _f(64)), "race"),
    "data_index_store": ("y", ((1,), (32,)), lambda: (np.zeros(32, np.int32), _f(32), _f(32)), "race"),
    "shared_const_write": ("tile", ((1,), (32,)), lambda: (_f(32), _f(32)), "race"),
    "shared_neighbour_read": ("tile", ((1,), (64,)), lambda: (_f(64), _f(64)), "race"),
    "atomic_plain_mix": ("hist", ((1,), (32,)), lambda: (np.zeros(32, np.int32), np.zeros(4, np.int32)),
                         "frontend"),
    "unguarded_tree": ("buf", ((1,), (64,)), lambda: (_f(64), np.zeros(1, np.float32)), "race"),
    "tree_no_sync": ("buf", ((1,), (64,)), lambda: (_f(64), np.zeros(1, np.float32)), "race"),
    "short_stride": ("y", ((2,), (16,)), lambda: (_f(64), _f(64)), "race"),
    "rows_transposed": ("y", ((1,), (8,)), lambda: (_f2(8, 8), _f2(8, 8)), "ownership"),
    "whole_row_per_thread": ("y", ((4,), (32,)), lambda: (_f2(4, 32), _f2(4, 32)), "race"),
    "shifted_tile": ("y", ((2, 2), (8, 8)), lambda: (_f2(16, 16), _f2(16, 16)), "ownership"),
    "plane_neighbour": ("y", ((1, 1, 2), (4, 4, 1)), lambda: (_f3(2, 4, 4), _f3(2, 4, 4)), "race"),
    "planes_swapped": ("y", ((1, 1, 4), (4, 4, 1)), lambda: (_f3(4, 4, 4), _f3(4, 4, 4)), "ownership"),
    "modular_index": ("y", ((1,), (32,)), lambda: (_f(32), _f(32)), "race"),
    "reversed_write": ("y", ((1,), (32,)), lambda: (_f(32), _f(32)), "ownership"),
    "shared_two_writes": ("tile", ((1,), (64,)), lambda: (_f(64), _f(64)), "race"),
    "shared_loop_carry": ("tile", ((1,), (64,)), lambda: (_f(64), _f(64)), "race"),
    "divergent_while_barrier": (None, ((1,), (32,)), lambda: (_f(32), _f(32)), "barrier"),
    "blocked_overrun": ("y", ((1,), (8,)), lambda: (_f(32), _f(32)), "race"),
    "block_reduce_divergent": (None, ((1,), (32,)), lambda: (_f(32) - 16, _f(32)), "barrier"),
    "data_dependent_read_region": ("y", ((1,), (32,)),
                                   lambda: (np.zeros(32, np.int32), _f(32), _f(32)), "race"),
    "store_to_in": ("x", ((1,), (32,)), lambda: (_f(32),), "frontend"),
    "shared_two_writers": ("sh", ((1,), (32,)), lambda: (_f(32), _f(32)), "race"),
    "warp_partials_half": ("partial", ((1,), (64,)), lambda: (_f(64), np.zeros(1, np.float32)), "race"),
    # dynamic shared of 65 floats: i = g + 1
    "shadowed_length": ("y", ((2,), (32,), 4 * 65), lambda: (_f(64), _f(64)), "race"),
    "narrow_param_wrap": ("y", ((2,), (256,)), lambda: (_f(512), _f(512), 100), "race"),
    "narrow_counter_wrap": ("y", ((1,), (4,)), lambda: (_f(800), _f(800)), "race"),
    "wrapped_guard": ("y", ((1,), (32,)), lambda: (_f(32), _f(32)), "race"),
    # 2**20 + 256 threads: thread 2**20 writes y[0]
    "shift_roundtrip": ("y", ((4097,), (256,)), lambda: (_f(2**20 + 256), _f(2**20 + 256)), "race"),
    "dyn_views_overlap": ("b", ((1,), (32,), 8 * 32), lambda: (_f(32), _f(32)), "race"),
    "tree_read_early_barrier": ("buf", ((1,), (64,)), lambda: (_f(64), _f(64)), "race"),
    "loop_may_skip": ("flag", ((1,), (32,)), lambda: (_f(32), _f(32), 0), "race"),
    "tree_u32_stride_le": ("s", ((1,), (256,)), lambda: (_f(256), _f(256)), "race"),
    "doubled_offset_halved_tid": ("sh", ((1,), (32,)), lambda: (_f(32), _f(32)), "race"),
    "histogram_clear_fixed_stride": ("h", ((1,), (64,)),
                                     lambda: (np.zeros(64, np.int32), np.zeros(256, np.int32)), "race"),
    "tail_fragment_loads": ("S", ((1,), (64,)), _tile_args, "race"),
    "tail_plain_load": ("S", ((1,), (64,)), lambda: (_f(64), _f(64), 3), "race"),
    "tail_copy_tile": ("S", ((1,), (64,)), _tile_args, "race"),
}
KERNELS = {name: globals()[name] for name in CASES}
