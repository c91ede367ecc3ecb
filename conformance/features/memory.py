"""Shared memory and barriers: static and dynamic shared arrays, several barrier phases per
block (write, sync, read another thread's element, sync, overwrite), a tile of a 2-D array
transposed through shared memory, and per-thread local arrays."""
import numpy as np

import kaio
from kaio import f32, i32

from ._util import feature

B = 128          # threads per block
BLOCKS = 5
T = 16           # tile side


@kaio.kernel
def shared_phases(x: kaio.In[f32], y: kaio.Raw[f32]):
    sh = kaio.shared_array(f32, 128)
    t = kaio.thread_idx.x
    g = kaio.block_idx.x * 128 + t
    sh[t] = x[g]
    kaio.sync()
    v = sh[127 - t] + sh[(t + 1) % 128] * 2.0
    kaio.sync()
    sh[t] = v
    kaio.sync()
    y[g] = sh[t ^ 1] - sh[(t + 64) % 128]


@kaio.kernel
def dynamic_rotate(x: kaio.In[i32], y: kaio.Raw[i32], shift: i32):
    sh = kaio.dynamic_shared(i32)
    t = kaio.thread_idx.x
    nb = kaio.block_dim.x
    g = kaio.block_idx.x * nb + t
    sh[t] = x[g]
    kaio.sync()
    y[g] = sh[(t + shift) % nb] * 10 + sh[t]


@kaio.kernel
def tile_transpose(x: kaio.In[f32, 2], y: kaio.Raw[f32, 2], tiles_x: i32):
    tile = kaio.shared_array(f32, 256)
    t = kaio.thread_idx.x
    bx = kaio.block_idx.x % tiles_x
    by = kaio.block_idx.x // tiles_x
    tx = t % 16
    ty = t // 16
    tile[t] = x[by * 16 + ty, bx * 16 + tx]
    kaio.sync()
    y[bx * 16 + ty, by * 16 + tx] = tile[tx * 16 + ty]


@kaio.kernel
def local_scan(x: kaio.In[i32], y: kaio.Raw[i32]):
    buf = kaio.local_array(i32, 8)
    g = kaio.global_id(0)
    for k in range(8):
        buf[k] = x[g * 8 + k]
    for k in range(1, 8):
        buf[k] = buf[k] + buf[k - 1]
    for k in range(8):
        y[g * 8 + k] = buf[7 - k]


def _inputs():
    rng = np.random.default_rng(11)
    return {"x": rng.standard_normal(B * BLOCKS).astype(np.float32),
            "xi": rng.integers(-1000, 1000, B * BLOCKS).astype(np.int32),
            "m": rng.standard_normal((48, 32)).astype(np.float32),
            "xl": rng.integers(-50, 50, 64 * 8).astype(np.int32)}


def _run(inp):
    y = np.zeros(B * BLOCKS, np.float32)
    shared_phases[BLOCKS, B](inp["x"], y)
    yi = np.zeros(B * BLOCKS, np.int32)
    dynamic_rotate[BLOCKS, B, B * 4](inp["xi"], yi, 5)
    m = inp["m"]
    yt = np.zeros((m.shape[1], m.shape[0]), np.float32)
    tile_transpose[(m.shape[1] // T) * (m.shape[0] // T), T * T](m, yt, m.shape[1] // T)
    yl = np.zeros(64 * 8, np.int32)
    local_scan[1, 64](inp["xl"], yl)
    return {"shared_phases": y, "dynamic_rotate": yi, "tile_transpose": yt, "local_scan": yl}


def _expected(inp):
    x = inp["x"].reshape(BLOCKS, B)
    t = np.arange(B)
    v = x[:, 127 - t] + x[:, (t + 1) % B] * np.float32(2.0)
    y = v[:, t ^ 1] - v[:, (t + 64) % B]
    xi = inp["xi"].reshape(BLOCKS, B)
    yi = xi[:, (t + 5) % B] * 10 + xi
    xl = inp["xl"].reshape(64, 8)
    yl = np.cumsum(xl, axis=1)[:, ::-1]
    return {"shared_phases": y.reshape(-1), "dynamic_rotate": yi.reshape(-1).astype(np.int32),
            "tile_transpose": inp["m"].T.copy(), "local_scan": yl.reshape(-1).astype(np.int32)}


def cases():
    return [feature("shared_memory", _inputs, _run, _expected,
                    description="static/dynamic shared arrays, multi-phase barriers, 2-D tile "
                                "transpose, local arrays")]
