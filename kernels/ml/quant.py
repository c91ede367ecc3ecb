"""Quantized ops: INT8 dequantize, INT8 matmul W8A8, INT4 matmul W4A16, per-row INT8 quantize.

Conventions (documented in docs/kernels.md):

- symmetric quantization, no zero points: ``real = scale * q``;
- INT8 dequantize: ``q`` is [channels, n] int8 with one f32 scale per channel (row);
- W8A8: activations ``a`` [M, K] int8 with a scale per row ``sa`` [M]; weights ``b`` [K, N] int8
  with a scale per output column ``sb`` [N]; ``c[m, n] = sa[m] * sb[n] * sum_k a[m,k] * b[k,n]``
  with the sum in exact int32 arithmetic (|sum| <= K * 127 * 127 fits i32 for K < 133,000);
- W4A16: activations [M, K] f16 (or bf16/f32); weights are signed int4 in [-8, 7] packed two per
  byte along K: byte ``packed[k // 2, n]`` holds ``k`` even in its LOW nibble and ``k + 1`` in its
  HIGH nibble, each as a 4-bit two's-complement value; one scale per group of ``group`` rows of
  K and per column: ``scales[k // group, n]``. The product is accumulated in f32 and stored in the
  activation dtype.

The weight layouts keep N fastest so neighbouring threads (neighbouring n) read neighbouring
bytes. The scalar matmuls here stage 16 x 16 tiles in shared memory (W4A16 dequantizes its
weight tile to f32 as it loads it); :mod:`.quant_mma` has the tensor-core versions, which
:func:`int8_matmul` and :func:`int4_matmul` use where the backend compiles them.
"""
import functools

import numpy as np

import kaio
import kaio.kernels.ml.quant_mma as quant_mma  # not `from . import`: the package's __getattr__
from kaio import f32, i32, regions
from kaio.autotune import Autotuner, Config
from kaio.backends import get_backend
from kaio.config import settings

from .._launch import kdtype, np_dtype
from .elementwise import _name
from .quant_mma import int4_at


@functools.lru_cache(maxsize=None)
def dequantize_kernel(out_dt: str):
    """y[r, c] = q[r, c] * scale[r], one element per thread (any shape)."""
    OT = kdtype(out_dt)

    @kaio.kernel
    def dequantize_int8(q: kaio.In[kaio.i8, 2], scale: kaio.In[f32], y: kaio.Out[OT, 2]):
        for c, j in y.owned():
            y[c, j] = OT(f32(q[c, j]) * scale[c])

    return dequantize_int8


#: int8 elements per 16-byte load: the row kernel's rows must be a multiple of it (q's vector
#: accesses are aligned when its rows are)
CHUNK = 16


def out_chunk(out_dt: str) -> int:
    """Columns per thread chunk of the row kernel: one 16-byte store of ``out_dt`` (4 for f32,
    8 for f16/bf16), so a warp's store is 512 contiguous bytes; q's 4 or 8 bytes are one narrow
    vector load (kaio.backends.vector_access)."""
    return 16 // np.dtype(np_dtype(out_dt)).itemsize


@functools.lru_cache(maxsize=None)
def dequantize_rows_kernel(out_dt: str):
    """:func:`dequantize_kernel` for rows a multiple of 16 long: one block per row, each thread
    chunks of :func:`out_chunk` contiguous columns (``rows_per_block(vec=...)``), so y is
    written in 16-byte stores whose warp covers 512 contiguous bytes and q read in 4- or 8-byte
    loads. The chunk loop is plain: kaio unrolls it (by 4 for f32, kaio.passes.unroll, the
    four loads first) and bounds ``V * k + j < n`` from ``k < n // V``, so no guard is needed.

    (Chunks of 16 int8, one 16-byte load, made each thread store 64 f32 bytes: a warp's 16-byte
    store then spanned 2 KiB in half-filled sectors, and the f32 kernel ran at 38-47% of copy
    on the H200, 1.8-2.3x behind Triton.)"""
    OT = kdtype(out_dt)
    V = out_chunk(out_dt)

    @kaio.kernel
    def dequantize_int8_rows(q: kaio.In[kaio.i8, 2], scale: kaio.In[f32],
                             y: kaio.Out[OT, regions.rows_per_block(vec=V)]):
        row = kaio.block_idx.x
        n = y.shape[1]                  # a multiple of V (the partition's launch check)
        s = scale[row]
        for k in range(kaio.thread_idx.x, n // V, kaio.block_dim.x):   # the thread's chunks
            for j in kaio.static_range(V):
                y[row, V * k + j] = OT(f32(q[row, V * k + j]) * s)

    return dequantize_int8_rows


def dequantize_launch(out_dt: str, shape):
    """What :func:`dequantize` launches on [rows, cols] = ``shape``: the 16-byte row kernel when
    ``cols`` is a multiple of 16, the elementwise one otherwise (a function of their arguments)."""
    if shape[1] % CHUNK == 0 and shape[1] > 0:
        return dequantize_rows_kernel(out_dt)
    return dequantize_kernel(out_dt)


TILE = 16


@functools.lru_cache(maxsize=None)
def w8a8_kernel():
    """c = diag(sa) (a @ b) diag(sb) with an exact int32 dot product per output; TILE x TILE
    tiles of a and b (widened to i32) are staged in shared memory, one output per thread.
    ``sa`` is [M, 1], the shape per-row quantization produces on the device. ``c`` is
    partitioned in TILE x TILE tiles (kaio.regions.tiles): each thread owns its output."""

    @kaio.kernel
    def matmul_w8a8(a: kaio.In[kaio.i8, 2], b: kaio.In[kaio.i8, 2], sa: kaio.In[f32, 2],
                    sb: kaio.In[f32], c: kaio.Out[f32, regions.tiles(TILE, TILE)]):
        a_tile = kaio.shared_array(i32, (TILE, TILE))
        b_tile = kaio.shared_array(i32, (TILE, TILE))
        tx = kaio.thread_idx.x
        ty = kaio.thread_idx.y
        row = kaio.block_idx.y * TILE + ty
        col = kaio.block_idx.x * TILE + tx
        k_len = a.shape[1]
        acc = i32(0)
        for t in range((k_len + TILE - 1) // TILE):
            av = i32(0)
            if row < a.shape[0] and t * TILE + tx < k_len:
                av = i32(a[row, t * TILE + tx])
            a_tile[ty, tx] = av
            bv = i32(0)
            if t * TILE + ty < k_len and col < b.shape[1]:
                bv = i32(b[t * TILE + ty, col])
            b_tile[ty, tx] = bv
            kaio.sync()
            for kk in range(TILE):
                acc += a_tile[ty, kk] * b_tile[kk, tx]
            kaio.sync()
        for m, n in c.owned():
            c[m, n] = f32(acc) * sa[m, 0] * sb[n]

    return matmul_w8a8


def w8a8_launch_config(m: int, n: int):
    """(grid, block) of the tiled W8A8 kernel for an [m, n] output."""
    return ((-(-n // TILE), -(-m // TILE)), (TILE, TILE))


@functools.lru_cache(maxsize=None)
def w4a16_kernel(dt: str):
    """y = x @ dequant(w): TILE x TILE tiles of x and of the dequantized weights
    (int4 * group scale, in f32) are staged in shared memory, one output per thread, f32
    accumulation, one rounding to the activation dtype at the end. ``y`` is partitioned in
    TILE x TILE tiles (kaio.regions.tiles): each thread owns its output."""
    T = kdtype(dt)

    @kaio.kernel
    def matmul_w4a16(x: kaio.In[T, 2], packed: kaio.In[kaio.u8, 2], scales: kaio.In[T, 2],
                     y: kaio.Out[T, regions.tiles(TILE, TILE)], group: kaio.Const[int]):
        x_tile = kaio.shared_array(f32, (TILE, TILE))
        w_tile = kaio.shared_array(f32, (TILE, TILE))
        tx = kaio.thread_idx.x
        ty = kaio.thread_idx.y
        row = kaio.block_idx.y * TILE + ty
        col = kaio.block_idx.x * TILE + tx
        k_len = x.shape[1]
        acc = f32(0.0)
        for t in range((k_len + TILE - 1) // TILE):
            xv = f32(0.0)
            if row < x.shape[0] and t * TILE + tx < k_len:
                xv = f32(x[row, t * TILE + tx])
            x_tile[ty, tx] = xv
            wv = f32(0.0)
            k = t * TILE + ty
            if k < k_len and col < packed.shape[1]:
                wv = f32(int4_at(packed[k // 2, col], k % 2)) * f32(scales[k // group, col])
            w_tile[ty, tx] = wv
            kaio.sync()
            for kk in range(TILE):
                acc += x_tile[ty, kk] * w_tile[kk, tx]
            kaio.sync()
        for m, n in y.owned():
            y[m, n] = T(acc)

    return matmul_w4a16


def w4a16_launch_config(m: int, n: int):
    """(grid, block) of the tiled W4A16 kernel for an [m, n] output."""
    return w8a8_launch_config(m, n)


def _rows():
    """The row kernels' partition: one row per block, its threads striding the columns."""
    return regions.rows_per_block()


@functools.lru_cache(maxsize=None)
def quantize_rows_kernel(dt: str):
    """Per-row symmetric int8 quantization: scale = max|x| / 127, q = round(x / scale). One
    block of 256 threads per row, x read twice (the max, then the quotients). A register-
    resident form (x read once in 16-byte chunks, as the resident norms hold a row) was
    slower on the H200 at the quantized attention's 1024 x 512 f32 (2026-12-02,
    scripts/attention_breakdown.py): 12.3 us at 128 threads x 4 columns, 17.4 at one warp x
    16, against this kernel's 5.8 (fewer threads per row, each with serial divisions)."""
    T = kdtype(dt)

    @kaio.kernel
    def quantize_rows_int8(x: kaio.In[T, 2], q: kaio.Out[kaio.i8, _rows()], scale: kaio.Out[f32, _rows()]):
        row = kaio.block_idx.x
        n = x.shape[1]
        m = f32(0.0)
        for c in range(kaio.thread_idx.x, n, kaio.block_dim.x):
            m = kaio.math.max(m, kaio.math.abs(f32(x[row, c])))
        amax = kaio.block_max(m)
        s = amax / 127.0 if amax > 0.0 else f32(1.0)
        for r, c in q.owned():
            q[r, c] = kaio.i8(kaio.math.rint(f32(x[r, c]) / s))
        for r, c in scale.owned():
            scale[r, c] = s

    return quantize_rows_int8


# --- host entry points -------------------------------------------------------------------------
def dequantize(q: np.ndarray, scale: np.ndarray, out_dtype=np.float32) -> np.ndarray:
    """Per-channel (per-row) INT8 dequantization."""
    y = np.empty(q.shape, dtype=out_dtype)
    dequantize_launch(_name(y), q.shape)(q, scale, y)
    return y


def _warp_size() -> int:
    return get_backend().warp_size


def _compiles(kernel, **consts) -> bool:
    """Whether ``kernel`` compiles for the current backend (cached by kaio per backend)."""
    try:
        kernel.compile(**consts)
    except kaio.CompileError:
        return False
    return True


def w8a8_launch(m: int, n: int):
    """The launch (kernel[grid, block]) of c = diag(sa) (a @ b) diag(sb) for an [m, n] output:
    the fragment kernel (:mod:`.quant_mma`) where the backend compiles it, else the scalar
    kernel; both take (a, b, sa [M, 1], sb, c)."""
    w = _warp_size()
    tile = quant_mma.w8a8_tile(m, n)
    if _compiles(quant_mma.w8a8_kernel(w, tile)):
        return quant_mma.w8a8_kernel(w, tile)[quant_mma.w8a8_launch_config(m, n, w, tile)]
    return w8a8_kernel()[w8a8_launch_config(m, n)]


def int8_matmul(a, b, sa, sb) -> np.ndarray:
    """W8A8 matmul: a [M,K] int8, b [K,N] int8, sa [M], sb [N] f32 -> [M,N] f32 (int8 tensor
    cores where the backend has them: :mod:`.quant_mma`)."""
    c = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
    w8a8_launch(*c.shape)(a, b, np.ascontiguousarray(sa).reshape(-1, 1), sb, c)
    return c


def w4a16_launch(dt: str, m: int, n: int, group: int, tile: str | None = None):
    """The launch (kernel[grid, block]) of y = x @ dequant(packed, scales) for activations of
    ``dt`` and an [m, n] output: f16/bf16 fragments (:mod:`.quant_mma`) where the backend
    compiles them (``tile``: a tiling of ``quant_mma.W4_TILES``; by default the first of
    ``quant_mma.w4a16_tiles(m, n)`` that compiles), else (and for f32) the scalar kernel; both
    take (x, packed, scales, y, group)."""
    w = _warp_size()
    if dt in ("f16", "bf16") and quant_mma.w4a16_group_ok(group):
        for t in [tile] if tile is not None else quant_mma.w4a16_tiles(m, n):
            if tile is not None or _w4a16_builds(dt, w, t, group):   # a named tile must build
                launch = quant_mma.w4a16_kernel(dt, w, t)[quant_mma.w4a16_launch_config(m, n, w, t)]
                shape = quant_mma.w4a16_workspace(t, m, n)
                return launch if shape is None else _with_workspace(launch, shape)
    return w4a16_kernel(dt)[w4a16_launch_config(m, n)]


#: (runtime, shape) -> the split-K W4A16 tilings' f32 workspace on a device runtime
_WORKSPACES: dict = {}


def _workspace(shape):
    """The f32 workspace of a split-K W4A16 tiling (``quant_mma.w4a16_workspace``): numpy on
    the reference backend; elsewhere one device array per runtime and shape, made once (a
    launch must not allocate; a kernel leaves nothing in it that the next one reads). Launches
    through :func:`w4a16_launch` go to the default stream, one after another."""
    be = get_backend()
    if be.name == "reference":
        return np.empty(shape, np.float32)
    key = (be.runtime, be.runtime.device, shape)
    if key not in _WORKSPACES:
        _WORKSPACES[key] = kaio.device_array(shape, np.float32)
    return _WORKSPACES[key]


def _with_workspace(launch, shape):
    """``launch`` of a split-K tiling as the others are called, (x, packed, scales, y, group):
    the workspace (``work``, after y) added; the launch's attributes kept."""
    def run(x, packed, scales, y, group):
        launch(x, packed, scales, y, _workspace(shape), group)
    for name in ("bound", "kernel", "grid", "block", "shared", "stream"):
        setattr(run, name, getattr(launch, name))
    return run


#: (backend kind, target, CUDA code path, what) -> whether the kernel ``what`` names compiles
_BUILDS: dict = {}


def builds(what: tuple, make, **consts) -> bool:
    """Whether the kernel ``make()`` compiles on the current backend (with ``consts``),
    remembered under ``what`` (a tuple naming the kernel and its variant): a kernel that does
    not (past the LLVM paths' 48 KiB of static shared memory) is not compiled again on every
    call (kaio caches compiled kernels, not failures)."""
    be = get_backend()
    key = (type(be).__name__, getattr(be, "target", None), settings().cuda_codegen, what)
    if key not in _BUILDS:
        _BUILDS[key] = _compiles(make(), **consts)
    return _BUILDS[key]


def _w4a16_builds(dt: str, w: int, tile: str, group: int) -> bool:
    """Whether the fragment kernel of ``tile`` compiles on the current backend (remembered)."""
    return quant_mma.w4a16_group_ok(group, tile) and builds(
        ("w4a16", dt, w, tile, group), lambda: quant_mma.w4a16_kernel(dt, w, tile), group=group)


def _w4a16_run(x, packed, scales, y, group, *, config):
    w4a16_launch(_name(x), *y.shape, group, config.name)(x, packed, scales, y, group)


#: the W4A16 tiling per (m, n, k, dtype, group), timed on a GPU (every tiling computes the same
#: bits, one accumulation order, but the split-K ones: two partial sums added); the default is
#: quant_mma.w4a16_tiles' first
_w4a16_tuner = Autotuner(
    _w4a16_run, name="kaio.kernels.ml.quant.int4_matmul",
    configs=lambda key: [Config(t) for t in quant_mma.w4a16_tiles(*key[0])
                         if _w4a16_builds(key[2], _warp_size(), t, key[3])],
    key=lambda x, packed, scales, y, group: ([int(v) for v in y.shape], int(x.shape[1]),
                                             _name(x), int(group)),
    outputs=lambda x, packed, scales, y, group: [y], check=lambda key: (1e-3, 1e-3),
    tune_when=lambda key: key[0][0] * key[0][1] * key[1] >= 2**24)


def int4_matmul(x, packed, scales, group: int) -> np.ndarray:
    """W4A16 matmul: x [M,K] f16/bf16/f32, packed [K/2,N] u8, scales [K/group,N] -> [M,N]
    (f16/bf16 tensor cores where the backend has them: :mod:`.quant_mma`, the tiling chosen by
    kaio.autotune on a GPU)."""
    if x.shape[1] % group or group % 2:
        raise ValueError(f"K = {x.shape[1]} must be a multiple of the (even) group size {group}")
    y = np.empty((x.shape[0], packed.shape[1]), dtype=x.dtype)
    launch = w4a16_launch(_name(x), *y.shape, group)
    if launch.bound.kernel is w4a16_kernel(_name(x)):   # f32, or no fragments: nothing to tune
        launch(x, packed, scales, y, group)
    else:
        _w4a16_tuner(x, packed, scales, y, group)
    return y


def quantize_rows(x: np.ndarray):
    """Per-row symmetric INT8 quantization on the device: (q int8 [M,K], scale f32 [M])."""
    q = np.empty(x.shape, dtype=np.int8)
    scale = np.empty((x.shape[0], 1), dtype=np.float32)
    quantize_rows_kernel(_name(x))[(x.shape[0],), (256,)](x, q, scale)
    return q, scale[:, 0]


# --- packing and references --------------------------------------------------------------------
def pack_int4(w: np.ndarray) -> np.ndarray:
    """Pack int4 values w [K, N] (each in [-8, 7]) into bytes [K/2, N], low nibble = even k."""
    w = np.asarray(w)
    if w.shape[0] % 2 or w.min() < -8 or w.max() > 7:
        raise ValueError("pack_int4 needs an even number of rows and values in [-8, 7]")
    nib = (w.astype(np.int16) & 0xF).astype(np.uint8)
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_int4` (int8 [2*rows, N])."""
    lo = (packed & 0xF).astype(np.int16)
    hi = (packed >> 4).astype(np.int16)
    out = np.empty((packed.shape[0] * 2, packed.shape[1]), dtype=np.int16)
    out[0::2], out[1::2] = lo, hi
    return np.where(out >= 8, out - 16, out).astype(np.int8)


def dequantize_ref(q, scale):
    return q.astype(np.float64) * scale.astype(np.float64)[:, None]


def int8_matmul_ref(a, b, sa, sb):
    # float64 BLAS is exact here: every partial sum is an integer below 2^53 (K * 127^2 < 2^53)
    acc = a.astype(np.float64) @ b.astype(np.float64)
    return acc.astype(np.float64) * sa.astype(np.float64)[:, None] * sb.astype(np.float64)[None, :]


def int4_matmul_ref(x, packed, scales, group):
    w = unpack_int4(packed).astype(np.float64)
    w *= np.repeat(scales.astype(np.float64), group, axis=0)
    return x.astype(np.float64) @ w


def quantize_rows_ref(x):
    v = x.astype(np.float32)
    amax = np.abs(v).max(axis=1)
    scale = np.where(amax > 0, amax / np.float32(127.0), np.float32(1.0)).astype(np.float32)
    q = np.rint(v / scale[:, None]).astype(np.int8)
    return q, scale
