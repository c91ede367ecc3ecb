"""The kernel language's surface: parameter annotations, in-kernel intrinsics and the function
objects ``@kaio.kernel`` / ``@kaio.func`` make.

Outside a kernel these objects only describe; the frontend (kaio.frontend) recognises them by
identity or class when it reads a ``@kaio.kernel`` function and turns them into IR.
"""
from __future__ import annotations

from typing import Any

from . import dtypes as dt
from .records import frozen


# --- parameter annotations ------------------------------------------------------------------
@frozen
class BufferSpec:
    """A buffer parameter: ``kaio.In[f32]``, ``kaio.Region[f32, 2]``, ``kaio.Region[f32, part]``."""

    intent: str            # 'in' | 'region' | 'out' | 'atomic' | 'raw'
    dtype: dt.DType
    ndim: int = 1
    partition: Any = None  # kaio.regions.Partition for region/out; None -> default

    def __repr__(self):
        extra = f", {self.partition.spec()}" if self.partition is not None else ""
        return f"kaio.{_INTENT_NAMES[self.intent]}[{self.dtype.name}, {self.ndim}{extra}]"


class _BufferIntent:
    def __init__(self, intent: str, doc: str):
        self.intent = intent
        self.__doc__ = doc

    def __getitem__(self, item) -> BufferSpec:
        items = item if isinstance(item, tuple) else (item,)
        if not items or not isinstance(items[0], dt.DType):
            raise TypeError(f"kaio.{_INTENT_NAMES[self.intent]}[...] needs an element dtype first, "
                            f"e.g. kaio.{_INTENT_NAMES[self.intent]}[kaio.f32]; got {items!r}")
        dtype, ndim, partition = items[0], None, None
        for extra in items[1:]:
            if isinstance(extra, int) and not isinstance(extra, bool):
                ndim = extra
            elif hasattr(extra, "owned_spec"):
                partition = extra
            else:
                raise TypeError(f"unexpected item {extra!r} in kaio.{_INTENT_NAMES[self.intent]}[...]: "
                                "expected an ndim (int) or a partition from kaio.regions")
        if partition is not None and self.intent not in ("region", "out"):
            raise TypeError(f"only Region/Out buffers take a partition, not {_INTENT_NAMES[self.intent]}")
        if ndim is None:
            ndim = partition.ndim if partition is not None and partition.ndim else 1
        if not 1 <= ndim <= 3:
            raise TypeError(f"buffers have 1 to 3 dimensions, not {ndim}")
        return BufferSpec(self.intent, dtype, ndim, partition)


_INTENT_NAMES = {"in": "In", "region": "Region", "out": "Out", "atomic": "Atomic", "raw": "Raw"}
In = _BufferIntent("in", "Read-only buffer: copied to the device, never written.")
Region = _BufferIntent("region", "Writable buffer partitioned among threads; copied in and out.")
Out = _BufferIntent("out", "Write-only Region: old contents never read (no copy-in).")
Atomic = _BufferIntent("atomic", "Buffer touched only through kaio.atomic_* operations.")
Raw = _BufferIntent("raw", "Unchecked writable buffer: the explicit escape hatch.")


@frozen
class ConstSpec:
    """A compile-time constant parameter: the kernel is specialised per value."""

    pytype: type

    def __repr__(self):
        return f"kaio.Const[{self.pytype.__name__}]"


class _Const:
    def __getitem__(self, pytype) -> ConstSpec:
        if pytype not in (int, bool, float):
            raise TypeError(f"kaio.Const[...] takes int, bool or float, not {pytype!r}")
        return ConstSpec(pytype)


Const = _Const()


# --- intrinsics -------------------------------------------------------------------------------
class Intrinsic:
    """A name usable only inside kernels; the frontend dispatches on ``name``."""

    def __init__(self, name: str, doc: str = ""):
        self.name = name
        self.__doc__ = doc

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"kaio.{self.name} can only be used inside a @kaio.kernel or @kaio.func")

    def __getattr__(self, attr):
        if attr in ("x", "y", "z"):
            raise RuntimeError(f"kaio.{self.name}.{attr} can only be used inside a @kaio.kernel")
        raise AttributeError(attr)

    def __repr__(self):
        return f"kaio.{self.name}"


# thread geometry (use .x .y .z), warp-level constants
thread_idx = Intrinsic("thread_idx", "Thread index within the block (.x .y .z), i32.")
block_idx = Intrinsic("block_idx", "Block index within the grid (.x .y .z), i32.")
block_dim = Intrinsic("block_dim", "Threads per block (.x .y .z), i32.")
grid_dim = Intrinsic("grid_dim", "Blocks per grid (.x .y .z), i32.")
warp_size = Intrinsic("warp_size", "Lanes per warp on the target: 32 (NVIDIA) or 64 (AMD gfx9).")
global_id = Intrinsic("global_id", "global_id(axis=0): block_idx*block_dim + thread_idx on an axis.")
lane_id = Intrinsic("lane_id", "lane_id(): this thread's lane within its warp.")
sync = Intrinsic("sync", "sync(): barrier for all threads of the block.")
shared_array = Intrinsic("shared_array", "shared_array(dtype, shape): block-shared scratch memory.")
dynamic_shared = Intrinsic("dynamic_shared",
                           "dynamic_shared(dtype): 1-D shared array sized at launch (shared_bytes=).")
local_array = Intrinsic("local_array", "local_array(dtype, n): per-thread scratch array.")
static_range = Intrinsic("static_range", "static_range(n): a range unrolled at compile time.")
bitcast = Intrinsic("bitcast", "bitcast(value, dtype): the bits of a scalar read as another "
                    "dtype of the same width (kaio.bitcast(x, kaio.i32) for an f32 x).")
atomic_add = Intrinsic("atomic_add", "atomic_add(buf, index, value) -> old value")
atomic_sub = Intrinsic("atomic_sub", "atomic_sub(buf, index, value) -> old value")
atomic_min = Intrinsic("atomic_min", "atomic_min(buf, index, value) -> old value")
atomic_max = Intrinsic("atomic_max", "atomic_max(buf, index, value) -> old value")
atomic_and = Intrinsic("atomic_and", "atomic_and(buf, index, value) -> old value")
atomic_or = Intrinsic("atomic_or", "atomic_or(buf, index, value) -> old value")
atomic_xor = Intrinsic("atomic_xor", "atomic_xor(buf, index, value) -> old value")
atomic_exchange = Intrinsic("atomic_exchange", "atomic_exchange(buf, index, value) -> old value")
atomic_cas = Intrinsic("atomic_cas", "atomic_cas(buf, index, compare, value) -> old value")
shuffle = Intrinsic("shuffle", "shuffle(value, src_lane): read value from another lane.")
shuffle_up = Intrinsic("shuffle_up", "shuffle_up(value, delta): from lane - delta (own value if < 0).")
shuffle_down = Intrinsic("shuffle_down", "shuffle_down(value, delta): from lane + delta (own if past end).")
shuffle_xor = Intrinsic("shuffle_xor", "shuffle_xor(value, mask): from lane ^ mask.")
vote_any = Intrinsic("vote_any", "vote_any(pred): true if pred holds on any lane of the warp.")
vote_all = Intrinsic("vote_all", "vote_all(pred): true if pred holds on every lane of the warp.")
ballot = Intrinsic("ballot", "ballot(pred) -> u64 with bit k set when lane k's pred holds.")
warp_sum = Intrinsic("warp_sum", "warp_sum(v): sum over the warp's lanes (every lane gets it).")
warp_max = Intrinsic("warp_max", "warp_max(v): max over the warp's lanes.")
warp_min = Intrinsic("warp_min", "warp_min(v): min over the warp's lanes.")
block_sum = Intrinsic("block_sum", "block_sum(v): sum over the block in a fixed, width-free order.")
block_max = Intrinsic("block_max", "block_max(v): max over the block.")
block_min = Intrinsic("block_min", "block_min(v): min over the block.")

INTRINSICS = {obj.name: obj for obj in globals().values() if isinstance(obj, Intrinsic)}


# --- functions --------------------------------------------------------------------------------
class KaioFunction:
    """A Python function kaio compiles: a kernel (:class:`kaio.launch.KernelFunction`, which
    launches) or a device function (:class:`DeviceFunction`, inlined where it is called)."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn


class DeviceFunction(KaioFunction):
    """``@kaio.func``: a device function, inlined at each call site and typed from it."""

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"@kaio.func '{self.name}' can only be called from a kernel")


def func(fn):
    """Decorator for device functions callable from kernels (inlined)."""
    return DeviceFunction(fn)
