"""Race-free kernels the checker must accept. Each case: the kernel, and ``run(variant)``
which launches it on one of several shapes and asserts against its numpy reference."""
from __future__ import annotations

import numpy as np

import kaio
from kaio import f32, f64, i8, i32, u32
from kaio.regions import blocked, grid_stride, rows, rows_per_block, tiles

RNG = np.random.default_rng(7)
SIZES = (37, 256, 1000)


def _x(n):
    return RNG.standard_normal(n).astype(np.float32)


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


def run_saxpy(v):
    x, y = _x(SIZES[v]), _x(SIZES[v])
    want = 2.0 * x + y
    saxpy(2.0, x, y)
    _close(y, want)


@kaio.kernel
def scale_gid(x: kaio.In[f32], y: kaio.Out[f32]):
    i = kaio.global_id()
    if i < y.shape[0]:
        y[i] = x[i] * 3.0


def run_scale_gid(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    scale_gid[(-(-x.size // 64),), (64,)](x, y)
    _close(y, x * 3)


@kaio.kernel
def early_return(x: kaio.In[f32], y: kaio.Out[f32]):
    i = kaio.global_id()
    if i >= y.shape[0]:
        return
    y[i] = x[i] + 1.0


def run_early_return(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    early_return[(-(-x.size // 32),), (32,)](x, y)
    _close(y, x + 1)


@kaio.kernel
def add2d(a: kaio.In[f32, 2], b: kaio.In[f32, 2], c: kaio.Out[f32, 2]):
    for i, j in c.owned():
        c[i, j] = a[i, j] + b[i, j]


def run_add2d(v):
    shape = [(5, 7), (16, 16), (33, 9)][v]
    a, b = _x(shape[0] * shape[1]).reshape(shape), _x(shape[0] * shape[1]).reshape(shape)
    c = np.zeros(shape, np.float32)
    add2d(a, b, c)
    _close(c, a + b)


@kaio.kernel
def blocked_owned(x: kaio.In[f32], y: kaio.Out[f32, blocked(4)]):
    for i in y.owned():
        y[i] = x[i] * x[i]


def run_blocked_owned(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    blocked_owned(x, y)
    _close(y, x * x)


@kaio.kernel
def blocked_hand(x: kaio.In[f32], y: kaio.Region[f32, blocked(4)]):
    g = kaio.global_id()
    for j in range(4):
        i = g * 4 + j
        if i < y.shape[0]:
            y[i] = y[i] + x[i]


def run_blocked_hand(v):
    x, y = _x(SIZES[v]), _x(SIZES[v])
    want = x + y
    blocked_hand(x, y)
    _close(y, want)


@kaio.kernel
def prefix_in_block(x: kaio.In[f32], y: kaio.Out[f32, blocked(8)]):
    g = kaio.global_id()
    acc = 0.0
    for j in range(8):
        i = g * 8 + j
        if i < y.shape[0]:
            acc = acc + x[i]
            y[i] = acc


def run_prefix_in_block(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    prefix_in_block(x, y)
    want = np.concatenate([np.cumsum(x[k:k + 8]) for k in range(0, x.size, 8)])
    _close(y, want)


@kaio.kernel
def stride_owned(x: kaio.In[f32], y: kaio.Out[f32, grid_stride()]):
    for i in y.owned():
        y[i] = x[i] - 1.0


def run_stride_owned(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    stride_owned[(2,), (32,)](x, y)
    _close(y, x - 1)


@kaio.kernel
def stride_hand(x: kaio.In[f32], y: kaio.Out[f32, grid_stride()]):
    stride = kaio.grid_dim.x * kaio.block_dim.x
    for i in range(kaio.global_id(), y.shape[0], stride):
        y[i] = x[i] * 0.5


def run_stride_hand(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    stride_hand[(3,), (16,)](x, y)
    _close(y, x * 0.5)


@kaio.kernel
def row_scale(x: kaio.In[f32, 2], y: kaio.Out[f32, rows()]):
    r = kaio.global_id()
    if r < y.shape[0]:
        s = 0.0
        for c in range(y.shape[1]):
            s = s + x[r, c]
        for c in range(y.shape[1]):
            y[r, c] = x[r, c] / s


def run_row_scale(v):
    shape = [(5, 7), (40, 3), (9, 33)][v]
    x = np.abs(_x(shape[0] * shape[1])).reshape(shape) + 0.5
    y = np.zeros_like(x)
    row_scale(x, y)
    _close(y, x / x.sum(axis=1, keepdims=True))


@kaio.kernel
def softmax(x: kaio.In[f32, 2], y: kaio.Out[f32, rows_per_block(128)]):
    r = kaio.block_idx.x
    ncol = x.shape[1]
    m = -3.0e38
    for c in range(kaio.thread_idx.x, ncol, kaio.block_dim.x):
        m = max(m, x[r, c])
    m = kaio.block_max(m)
    s = 0.0
    for c in range(kaio.thread_idx.x, ncol, kaio.block_dim.x):
        s = s + kaio.math.exp(x[r, c] - m)
    s = kaio.block_sum(s)
    for i, c in y.owned():
        y[i, c] = kaio.math.exp(x[i, c] - m) / s


def run_softmax(v):
    shape = [(3, 5), (4, 300), (7, 128)][v]
    x = _x(shape[0] * shape[1]).reshape(shape)
    y = np.zeros_like(x)
    softmax(x, y)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    _close(y, e / e.sum(axis=1, keepdims=True))


@kaio.kernel
def rmsnorm(x: kaio.In[f32, 2], w: kaio.In[f32], y: kaio.Out[f32, rows_per_block(64)]):
    r = kaio.block_idx.x
    ncol = x.shape[1]
    ss = 0.0
    for c in range(kaio.thread_idx.x, ncol, kaio.block_dim.x):
        ss = ss + x[r, c] * x[r, c]
    ss = kaio.block_sum(ss)
    inv = 1.0 / kaio.math.sqrt(ss / kaio.f32(ncol) + 1e-5)
    for c in range(kaio.thread_idx.x, ncol, kaio.block_dim.x):
        y[r, c] = x[r, c] * inv * w[c]


def run_rmsnorm(v):
    shape = [(2, 10), (5, 100), (3, 64)][v]
    x = _x(shape[0] * shape[1]).reshape(shape)
    w = _x(shape[1])
    y = np.zeros_like(x)
    rmsnorm(x, w, y)
    want = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * w
    _close(y, want)


@kaio.kernel
def tile_copy(x: kaio.In[f32, 2], y: kaio.Out[f32, tiles(8, 8)]):
    for i, j in y.owned():
        y[i, j] = x[i, j] * 2.0


def run_tile_copy(v):
    shape = [(5, 7), (16, 24), (17, 9)][v]
    x = _x(shape[0] * shape[1]).reshape(shape)
    y = np.zeros_like(x)
    launch = [None, ((3, 2), (8, 8)), ((2, 3), (4, 2))][v]
    (tile_copy if launch is None else tile_copy[launch])(x, y)
    _close(y, x * 2)


@kaio.kernel
def tile_hand(x: kaio.In[f32, 2], y: kaio.Region[f32, tiles(8, 8)]):
    r = kaio.block_idx.y * 8 + kaio.thread_idx.y
    c = kaio.block_idx.x * 8 + kaio.thread_idx.x
    if r < y.shape[0] and c < y.shape[1]:
        y[r, c] = y[r, c] + x[r, c]


def run_tile_hand(v):
    shape = [(5, 7), (16, 24), (17, 9)][v]
    x = _x(shape[0] * shape[1]).reshape(shape)
    y = _x(shape[0] * shape[1]).reshape(shape)
    want = x + y
    tile_hand[(-(-shape[1] // 8), -(-shape[0] // 8)), (8, 8)](x, y)
    _close(y, want)


@kaio.kernel
def matmul(a: kaio.In[f32, 2], b: kaio.In[f32, 2], c: kaio.Out[f32, tiles(8, 8)]):
    As = kaio.shared_array(f32, (8, 8))
    Bs = kaio.shared_array(f32, (8, 8))
    tx = kaio.thread_idx.x
    ty = kaio.thread_idx.y
    row = kaio.block_idx.y * 8 + ty
    col = kaio.block_idx.x * 8 + tx
    kdim = a.shape[1]
    acc = 0.0
    for t in range(0, kdim, 8):
        av = 0.0
        if row < a.shape[0] and t + tx < kdim:
            av = a[row, t + tx]
        As[ty, tx] = av
        bv = 0.0
        if t + ty < kdim and col < b.shape[1]:
            bv = b[t + ty, col]
        Bs[ty, tx] = bv
        kaio.sync()
        for k in range(8):
            acc = acc + As[ty, k] * Bs[k, tx]
        kaio.sync()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


def run_matmul(v):
    m, k, n = [(5, 7, 3), (16, 16, 16), (9, 20, 17)][v]
    a = _x(m * k).reshape(m, k)
    b = _x(k * n).reshape(k, n)
    c = np.zeros((m, n), np.float32)
    matmul[(-(-n // 8), -(-m // 8)), (8, 8)](a, b, c)
    _close(c, a @ b)


@kaio.kernel
def tree_sum(x: kaio.In[f32], total: kaio.Atomic[f32]):
    buf = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    v = 0.0
    if g < x.shape[0]:
        v = x[g]
    buf[t] = v
    kaio.sync()
    s = kaio.block_dim.x // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        kaio.sync()
        s = s // 2
    if t == 0:
        kaio.atomic_add(total, 0, buf[0])


def run_tree_sum(v):
    x = _x(SIZES[v])
    total = np.zeros(1, np.float32)
    tree_sum[(-(-x.size // 64),), (64,)](x, total)
    np.testing.assert_allclose(total[0], x.sum(), rtol=1e-4, atol=1e-4)


@kaio.kernel
def tree_sum_static(x: kaio.In[f32], total: kaio.Atomic[f32]):
    buf = kaio.shared_array(f32, 32)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    v = 0.0
    if g < x.shape[0]:
        v = x[g]
    buf[t] = v
    kaio.sync()
    for k in kaio.static_range(5):
        s = 16 >> k
        if t < s:
            buf[t] = buf[t] + buf[t + s]
        kaio.sync()
    if t == 0:
        kaio.atomic_add(total, 0, buf[0])


def run_tree_sum_static(v):
    x = _x(SIZES[v])
    total = np.zeros(1, np.float32)
    tree_sum_static[(-(-x.size // 32),), (32,)](x, total)
    np.testing.assert_allclose(total[0], x.sum(), rtol=1e-4, atol=1e-4)


@kaio.kernel
def stencil_db(a: kaio.In[f32], b: kaio.Out[f32]):
    i = kaio.global_id()
    n = a.shape[0]
    if i > 0 and i < n - 1:
        b[i] = a[i - 1] + a[i] + a[i + 1]
    elif i < n:
        b[i] = a[i]


def run_stencil_db(v):
    a = _x(SIZES[v])
    b = np.zeros_like(a)
    stencil_db[(-(-a.size // 64),), (64,)](a, b)
    want = a.copy()
    want[1:-1] = a[:-2] + a[1:-1] + a[2:]
    _close(b, want)


@kaio.kernel
def stencil_shared(a: kaio.In[f32], b: kaio.Out[f32]):
    tile = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    i = kaio.global_id()
    n = a.shape[0]
    v = 0.0
    if i < n:
        v = a[i]
    tile[t] = v
    kaio.sync()
    if i < n:
        right = 0.0
        if t + 1 < kaio.block_dim.x:
            right = tile[t + 1]
        elif i + 1 < n:
            right = a[i + 1]
        b[i] = tile[t] + right


def run_stencil_shared(v):
    a = _x(SIZES[v])
    b = np.zeros_like(a)
    stencil_shared[(-(-a.size // 64),), (64,)](a, b)
    want = a + np.concatenate([a[1:], [0]])
    _close(b, want)


@kaio.kernel
def stencil2d(a: kaio.In[f32, 2], b: kaio.Out[f32, 2]):
    for i, j in b.owned():
        v = a[i, j]
        if i > 0 and i < a.shape[0] - 1 and j > 0 and j < a.shape[1] - 1:
            v = 0.25 * (a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])
        b[i, j] = v


def run_stencil2d(v):
    shape = [(5, 7), (16, 16), (3, 40)][v]
    a = _x(shape[0] * shape[1]).reshape(shape)
    b = np.zeros_like(a)
    stencil2d(a, b)
    want = a.copy()
    want[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    _close(b, want)


@kaio.kernel
def histogram(data: kaio.In[i32], hist: kaio.Atomic[i32]):
    i = kaio.global_id()
    if i < data.shape[0]:
        kaio.atomic_add(hist, data[i], 1)


def run_histogram(v):
    data = RNG.integers(0, 10, SIZES[v]).astype(np.int32)
    hist = np.zeros(10, np.int32)
    histogram[(-(-data.size // 64),), (64,)](data, hist)
    np.testing.assert_array_equal(hist, np.bincount(data, minlength=10))


@kaio.kernel
def scatter_add(idx: kaio.In[i32], x: kaio.In[f32], y: kaio.Atomic[f32]):
    i = kaio.global_id()
    if i < x.shape[0]:
        kaio.atomic_add(y, idx[i], x[i])


def run_scatter_add(v):
    x = _x(SIZES[v])
    idx = RNG.integers(0, 7, x.size).astype(np.int32)
    y = np.zeros(7, np.float32)
    scatter_add[(-(-x.size // 64),), (64,)](idx, x, y)
    want = np.zeros(7, np.float32)
    np.add.at(want, idx, x)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@kaio.kernel
def out_reread(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[i] * 2.0
        y[i] = y[i] + 1.0


def run_out_reread(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    out_reread(x, y)
    _close(y, x * 2 + 1)


@kaio.kernel
def warp_total(x: kaio.In[f32], total: kaio.Atomic[f32]):
    i = kaio.global_id()
    v = 0.0
    if i < x.shape[0]:
        v = x[i]
    s = kaio.warp_sum(v)
    if kaio.lane_id() == 0:
        kaio.atomic_add(total, 0, s)


def run_warp_total(v):
    x = _x(SIZES[v])
    total = np.zeros(1, np.float32)
    warp_total[(-(-x.size // 64),), (64,)](x, total)
    np.testing.assert_allclose(total[0], x.sum(), rtol=1e-4, atol=1e-4)


@kaio.kernel
def reverse_copy(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[x.shape[0] - 1 - i]


def run_reverse_copy(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    reverse_copy(x, y)
    _close(y, x[::-1])


@kaio.kernel
def block_partials(x: kaio.In[f32, 2], y: kaio.Out[f32, rows_per_block(32)]):
    r = kaio.block_idx.x
    s = 0.0
    for c in range(kaio.thread_idx.x, x.shape[1], kaio.block_dim.x):
        s = s + x[r, c]
    s = kaio.block_sum(s)
    for i, c in y.owned():
        y[i, c] = x[i, c] - s / kaio.f32(x.shape[1])


def run_block_partials(v):
    shape = [(2, 10), (6, 70), (1, 32)][v]
    x = _x(shape[0] * shape[1]).reshape(shape)
    y = np.zeros_like(x)
    block_partials(x, y)
    _close(y, x - x.mean(axis=1, keepdims=True))


@kaio.kernel
def stride_while(x: kaio.In[f32], y: kaio.Out[f32, grid_stride()]):
    i = kaio.global_id()
    stride = kaio.grid_dim.x * kaio.block_dim.x
    while i < y.shape[0]:
        y[i] = x[i] + 1.0
        i += stride


def run_stride_while(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    stride_while[((1, 2, 5)[v],), (32,)](x, y)
    _close(y, x + 1)


@kaio.kernel
def blocked_break(x: kaio.In[f32], y: kaio.Out[f32, blocked(4)]):
    g = kaio.global_id()
    for j in range(4):
        i = g * 4 + j
        if i >= y.shape[0]:
            break
        y[i] = -x[i]


def run_blocked_break(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    blocked_break(x, y)
    _close(y, -x)


@kaio.kernel
def blocked_carried(x: kaio.In[f32], y: kaio.Out[f32, blocked(3)]):
    i = kaio.global_id() * 3
    for _j in range(3):
        if i < y.shape[0]:
            y[i] = x[i] * 4.0
        i += 1


def run_blocked_carried(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    blocked_carried(x, y)
    _close(y, x * 4)


@kaio.kernel
def shared_broadcast(x: kaio.In[f32], y: kaio.Out[f32]):
    sh = kaio.shared_array(f32, 1)
    if kaio.thread_idx.x == 0:
        sh[0] = x[kaio.block_idx.x]
    kaio.sync()
    i = kaio.global_id()
    if i < y.shape[0]:
        y[i] = sh[0]


def run_shared_broadcast(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    shared_broadcast[(-(-x.size // 32),), (32,)](x, y)
    _close(y, np.repeat(x[:-(-x.size // 32)], 32)[:x.size])


@kaio.kernel
def warp_partials(x: kaio.In[f32], total: kaio.Atomic[f32]):
    partial = kaio.shared_array(f32, 32)
    t = kaio.thread_idx.x
    i = kaio.global_id()
    v = 0.0
    if i < x.shape[0]:
        v = x[i]
    v = kaio.warp_sum(v)
    if t % kaio.warp_size == 0:
        partial[t // kaio.warp_size] = v
    kaio.sync()
    if t == 0:
        s = 0.0
        for w in range(kaio.block_dim.x // kaio.warp_size):
            s = s + partial[w]
        kaio.atomic_add(total, 0, s)


def run_warp_partials(v):
    x = _x(SIZES[v])
    total = np.zeros(1, np.float32)
    warp_partials[(-(-x.size // 128),), (128,)](x, total)
    np.testing.assert_allclose(total[0], x.sum(), rtol=1e-4, atol=1e-4)


# --- twins of the soundness corpus (bad.py, "issue 12"): the same features, used safely -------
@kaio.func
def _stage(v):
    y = kaio.dynamic_shared(f32)   # named like the kernel's Region: a different array
    t = kaio.thread_idx.x
    if t < y.shape[0]:
        y[t] = v
    kaio.sync()
    w = v
    if t < y.shape[0]:
        w = y[t]
    return w


@kaio.kernel
def dyn_named_like_region(x: kaio.In[f32], y: kaio.Region[f32]):
    g = kaio.global_id()
    v = _stage(x[g] if g < x.shape[0] else 0.0)
    if g < y.shape[0]:
        y[g] = v * 2.0


def run_dyn_named_like_region(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    dyn_named_like_region[(-(-x.size // 64),), (64,), 4 * 64](x, y)
    _close(y, x * 2)


@kaio.kernel
def narrow_exact(x: kaio.In[f32], y: kaio.Out[f32, blocked(4)], k: i8):
    g = kaio.global_id()
    d = i32(k) + i32(k) - 2 * i32(k)   # widened before adding: 0, with no wrap
    c = i8(0)
    for _j in range(4):
        i = g * 4 + i32(c) + d         # c <= 4 never wraps in i8
        if i < y.shape[0]:
            y[i] = x[i] + 1.0
        c = c + 1


def run_narrow_exact(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    narrow_exact(x, y, 100)
    _close(y, x + 1)


@kaio.kernel
def guard_arith_fits(x: kaio.In[f32], y: kaio.Region[f32]):
    g = kaio.global_id()
    if g - y.shape[0] >= 0:   # g - n cannot wrap: both are in [0, 2**31 - 1]
        return
    y[g] = x[g] * 3.0


def run_guard_arith_fits(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    guard_arith_fits[(-(-x.size // 32),), (32,)](x, y)
    _close(y, x * 3)


@kaio.kernel
def shift_thread_ids(x: kaio.In[f32], y: kaio.Out[f32]):
    sh = kaio.shared_array(f32, 256)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    if t < 256:
        sh[(t << 2) >> 2] = x[g] if g < x.shape[0] else 0.0   # t < 1024: t << 2 fits
    kaio.sync()
    if g < y.shape[0] and t < 256:
        y[g] = sh[t]


def run_shift_thread_ids(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    shift_thread_ids[(-(-x.size // 128),), (128,)](x, y)
    _close(y, x)


@kaio.kernel
def dyn_views_disjoint(x: kaio.In[f32], y: kaio.Out[f32]):
    a = kaio.dynamic_shared(f32)
    b = kaio.dynamic_shared(f64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    v = x[g] if g < x.shape[0] else 0.0
    if t < 64:
        a[t] = v            # bytes [4t, 4t + 4): inside [0, 256)
        b[t + 32] = f64(v)  # bytes [256 + 8t, 264 + 8t): after all of a's
    kaio.sync()
    if g < y.shape[0] and t < 64:
        y[g] = a[t] + f32(b[t + 32])


def run_dyn_views_disjoint(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    dyn_views_disjoint[(-(-x.size // 64),), (64,), 8 * 96](x, y)
    _close(y, x * 2)


@kaio.kernel
def tree_then_read(x: kaio.In[f32], y: kaio.Out[f32]):
    buf = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    v = 0.0
    if g < x.shape[0]:
        v = x[g]
    buf[t] = v
    kaio.sync()
    s = kaio.block_dim.x // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        kaio.sync()   # ends every iteration: the read below is in a fresh phase
        s = s // 2
    if g < y.shape[0]:
        y[g] = buf[0]


def run_tree_then_read(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    nb = -(-x.size // 64)
    tree_then_read[(nb,), (64,)](x, y)
    sums = np.add.reduceat(np.pad(x, (0, nb * 64 - x.size)), np.arange(0, nb * 64, 64))
    np.testing.assert_allclose(y, np.repeat(sums, 64)[:x.size], rtol=1e-4, atol=1e-4)


@kaio.kernel
def loop_runs_once(x: kaio.In[f32], y: kaio.Out[f32]):
    flag = kaio.shared_array(f32, 1)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    if t == 0:
        flag[0] = 2.0
    s = 4
    while s > 0:   # runs at least once: its barrier separates the write from the read
        kaio.sync()
        s = s // 2
    if g < y.shape[0]:
        y[g] = x[g] * flag[0]


def run_loop_runs_once(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    loop_runs_once[(-(-x.size // 32),), (32,)](x, y)
    _close(y, x * 2)


@kaio.kernel
def tree_u32_stride(x: kaio.In[f32], y: kaio.Out[f32]):
    s = kaio.shared_array(f32, 256)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    s[t] = x[g] if g < x.shape[0] else 0.0
    kaio.sync()
    stride = u32(128)
    while stride > 0:   # 128, 64, ..., 1, 0: only halved, never 2**32 - 1
        if t < stride:
            s[t] += s[t + stride]
        kaio.sync()
        stride //= 2
    if g < y.shape[0]:
        y[g] = s[0]


def run_tree_u32_stride(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    nb = -(-x.size // 256)
    tree_u32_stride[(nb,), (256,)](x, y)
    sums = np.add.reduceat(np.pad(x, (0, nb * 256 - x.size)), np.arange(0, nb * 256, 256))
    np.testing.assert_allclose(y, np.repeat(sums, 256)[:x.size], rtol=1e-4, atol=1e-4)


@kaio.kernel
def doubled_offset(x: kaio.In[f32], y: kaio.Out[f32]):
    sh = kaio.shared_array(f32, 512)
    t = u32(kaio.thread_idx.x)
    g = kaio.global_id()
    off = u32(1)
    while off < 256:    # only doubled up to the bound: 1 <= off <= 510, so t + off cannot wrap
        off *= 2
    if t < 256:
        sh[t + off] = x[g] if g < x.shape[0] else 0.0
    kaio.sync()
    if g < y.shape[0] and t < 256:
        y[g] = sh[t + off]


def run_doubled_offset(v):
    x = _x(SIZES[v])
    y = np.zeros_like(x)
    doubled_offset[(-(-x.size // 128),), (128,)](x, y)
    _close(y, x)


@kaio.kernel
def histogram_shared(data: kaio.In[i32], hist: kaio.Atomic[i32]):
    h = kaio.shared_array(i32, 256)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    for b in range(t, 256, kaio.block_dim.x):   # b = t (mod block_dim.x): disjoint per thread
        h[b] = 0
    kaio.sync()
    if g < data.shape[0]:
        kaio.atomic_add(h, data[g], 1)
    kaio.sync()
    for b in range(t, 256, kaio.block_dim.x):
        kaio.atomic_add(hist, b, h[b])


def run_histogram_shared(v):
    data = RNG.integers(0, 256, SIZES[v]).astype(np.int32)
    hist = np.zeros(256, np.int32)
    histogram_shared[(-(-data.size // 64),), (64,)](data, hist)
    np.testing.assert_array_equal(hist, np.bincount(data, minlength=256))


@kaio.kernel
def planes_owned(x: kaio.In[f32, 3], y: kaio.Out[f32, 3, tiles()]):
    """3-d tiles(): thread (tx, ty, tz) of block (bx, by, bz) owns [bz*bdz + tz, by*bdy + ty,
    bx*bdx + tx]."""
    for k, j, i in y.owned():
        y[k, j, i] = x[k, j, i] * 2.0 + f32(k)


def run_planes_owned(v):
    shape = [(3, 5, 7), (4, 9, 33), (2, 16, 8)][v]
    x = _x(int(np.prod(shape))).reshape(shape)
    y = np.zeros_like(x)
    launch = [None, ((2, 2, 2), (32, 8, 2)), ((3, 5, 1), (4, 4, 2))][v]
    (planes_owned if launch is None else planes_owned[launch])(x, y)
    _close(y, x * 2 + np.arange(shape[0], dtype=np.float32)[:, None, None])


@kaio.kernel(block=(8, 4, 1))
def planes_hand(x: kaio.In[f32, 3], y: kaio.Region[f32, 3, tiles()]):
    """The CUDA 3-D index with one plane per block on z (block.z == 1, declared)."""
    i = kaio.block_idx.x * kaio.block_dim.x + kaio.thread_idx.x
    j = kaio.block_idx.y * kaio.block_dim.y + kaio.thread_idx.y
    k = kaio.block_idx.z
    if i < y.shape[2] and j < y.shape[1] and k < y.shape[0]:
        y[k, j, i] = y[k, j, i] + x[k, j, i]


def run_planes_hand(v):
    shape = [(3, 5, 7), (4, 9, 33), (2, 16, 8)][v]
    x = _x(int(np.prod(shape))).reshape(shape)
    y = _x(int(np.prod(shape))).reshape(shape)
    want = x + y
    planes_hand(x, y) if v == 0 else planes_hand[(-(-shape[2] // 8), -(-shape[1] // 4), shape[0] + v),
                                                 (8, 4, 1)](x, y)
    _close(y, want)


CASES = {name[4:]: fn for name, fn in globals().items() if name.startswith("run_")}
KERNELS = {name: globals()[name] for name in CASES}
