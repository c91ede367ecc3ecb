"""kaio: write GPU kernels once in Python; run them race-free on NVIDIA and AMD GPUs.

    import numpy as np, kaio
    from kaio import f32

    @kaio.kernel
    def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
        for i in y.owned():
            y[i] = a * x[i] + y[i]
"""
from __future__ import annotations

# kaio.math inside kernels; kaio.regions (which registers the partitions as IR attributes, so IR
# text parses in any process); kaio.backends (set_backend / get_backend below). kaio.blas and
# kaio.autotune load on first use (__getattr__ below): a first launch needs neither.
from . import backends, math, mma, regions
from .device import (
    DeviceArray,
    Event,
    Stream,
    device_array,
    is_pinned,
    pinned_array,
    synchronize,
    to_device,
    transfer_stats,
)
from .devices import current_device, device, device_count, set_device  # after .device: see devices
from .dlpack import from_dlpack
from .dtypes import (
    DType,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)
from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    BackendUnavailable,
    CompileError,
    CudaError,
    HipError,
    KaioError,
    KaioWarning,
    LaunchError,
    OutOfBoundsError,
    RaceError,
    WarpWidthWarning,
)
from .graphs import Graph, graph
from .lang import (
    Atomic,
    Const,
    DeviceFunction,
    In,
    Out,
    Raw,
    Region,
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_exchange,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xor,
    ballot,
    bitcast,
    block_dim,
    block_idx,
    block_max,
    block_min,
    block_sum,
    dynamic_shared,
    func,
    global_id,
    grid_dim,
    lane_id,
    local_array,
    shared_array,
    shuffle,
    shuffle_down,
    shuffle_up,
    shuffle_xor,
    static_range,
    sync,
    thread_idx,
    vote_all,
    vote_any,
    warp_max,
    warp_min,
    warp_size,
    warp_sum,
)
from .launch import KernelFunction, kernel
from .residency import resident
from .version import __version__


def set_backend(name: str) -> None:
    """Select the backend for launches: 'reference', 'cuda' or 'hip' (env: KAIO_BACKEND)."""
    backends.set_backend(name)


def get_backend(name: str | None = None):
    """The current backend object (or the named one)."""
    return backends.get_backend(name)


def __getattr__(name: str):
    """``kaio.autotune`` and ``kaio.blas`` (``from kaio import ...`` too), imported on first use."""
    # plain `import` statements: `from . import name` asks this __getattr__ first (recursion)
    if name == "autotune":
        import kaio.autotune  # lazy: import time, ~8 ms (statistics, datetime)  # noqa: F401
        return globals()["autotune"]
    if name == "blas":
        import kaio.blas  # lazy: import time, ~2 ms; only kaio.blas.gemm needs it  # noqa: F401
        return globals()["blas"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
