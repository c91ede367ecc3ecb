"""Device memory, pinned host memory, streams and events (NVIDIA, through the CUDA driver).

The manual interface::

    x = kaio.to_device(np.arange(n, dtype=np.float32))    # copy in once
    y = kaio.device_array(n, np.float32)                   # uninitialised device memory
    s = kaio.Stream()
    saxpy[grid, block, 0, s](2.0, x, y)                    # no copies, asynchronous
    s.synchronize()
    y.to_host()                                            # -> numpy array

``DeviceArray`` exports ``__cuda_array_interface__`` (v3), so CuPy, PyTorch and Numba can use it
without a copy, and kaio accepts their arrays the same way. Every host<->device copy kaio makes
(explicit here, or automatic in a launch) is counted in :func:`transfer_stats`.
"""
from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from . import dtypes as dt


def _drv():
    from .backends import cuda_driver
    cuda_driver.context()  # probe, retain the primary context, make it current here
    return cuda_driver


# --- transfer accounting -----------------------------------------------------------------
class TransferStats:
    """Counts of host->device and device->host copies and their bytes."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.htod_copies = self.htod_bytes = self.dtoh_copies = self.dtoh_bytes = 0

    def add(self, direction: str, nbytes: int) -> None:
        with self._lock:
            if direction == "htod":
                self.htod_copies += 1
                self.htod_bytes += nbytes
            else:
                self.dtoh_copies += 1
                self.dtoh_bytes += nbytes

    def snapshot(self) -> dict:
        return {"htod_copies": self.htod_copies, "htod_bytes": self.htod_bytes,
                "dtoh_copies": self.dtoh_copies, "dtoh_bytes": self.dtoh_bytes}


_stats = TransferStats()


def transfer_stats() -> TransferStats:
    """The process-wide copy counters (``.snapshot()``, ``.reset()``)."""
    return _stats


def _stream_arg(stream) -> int:
    """A stream handle as an int: None -> 0 (the legacy default stream)."""
    if stream is None:
        return 0
    if isinstance(stream, Stream):
        return stream.handle
    if isinstance(stream, (int, np.integer)):
        return int(stream)
    if hasattr(stream, "__cuda_stream__"):  # CUDA stream protocol: (version, handle)
        return int(stream.__cuda_stream__()[1])
    if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
        return int(stream.cuda_stream)
    if hasattr(stream, "ptr"):  # cupy.cuda.Stream
        return int(stream.ptr)
    try:
        return int(stream)  # cuda.bindings CUstream
    except (TypeError, ValueError):
        raise TypeError(f"not a CUDA stream: {type(stream).__name__} {stream!r}; pass a kaio.Stream, "
                        "a torch/CuPy stream or a raw handle") from None


def copy_htod(dst: int, src: np.ndarray, stream=None) -> None:
    """Copy a C-contiguous host array to device memory at ``dst`` (counted)."""
    n = src.nbytes
    if n == 0:
        return
    drv = _drv()
    if stream is None:
        drv.call("cuMemcpyHtoD", dst, src.ctypes.data, n)
    else:
        drv.call("cuMemcpyHtoDAsync", dst, src.ctypes.data, n, _stream_arg(stream))
    _stats.add("htod", n)


def copy_dtoh(dst: np.ndarray, src: int, stream=None) -> None:
    """Copy device memory at ``src`` into a C-contiguous host array (counted)."""
    n = dst.nbytes
    if n == 0:
        return
    drv = _drv()
    if stream is None:
        drv.call("cuMemcpyDtoH", dst.ctypes.data, src, n)
    else:
        drv.call("cuMemcpyDtoHAsync", dst.ctypes.data, src, n, _stream_arg(stream))
    _stats.add("dtoh", n)


# --- device allocations ------------------------------------------------------------------
def _free_device(ptr: int) -> None:
    try:
        from .backends import cuda_driver
        cuda_driver.call("cuMemFree", ptr)
    except Exception:  # at interpreter exit the driver may be gone; nothing left to leak
        pass


class TempPool:
    """Reuses device blocks for a launch's automatic transfers.

    Blocks are returned only after the launch that used them has been synchronized, so reuse
    can never overlap a running kernel. Sizes round up to 512 bytes (small) or a power of two;
    at most ``limit`` bytes stay cached (``empty()`` releases them).
    """

    def __init__(self, limit: int = 1 << 30):
        self.limit = limit
        self._free: dict[int, list[int]] = {}
        self._cached = 0
        self._lock = threading.Lock()
        self.live = 0  # blocks handed out and not yet returned (tests check for leaks)

    @staticmethod
    def _round(n: int) -> int:
        return max(512, -(-n // 512) * 512) if n <= 1 << 20 else 1 << (n - 1).bit_length()

    def alloc(self, nbytes: int) -> tuple[int, int]:
        """(pointer, block size) of a block of at least ``nbytes``."""
        size = self._round(nbytes)
        with self._lock:
            blocks = self._free.get(size)
            if blocks:
                self._cached -= size
                self.live += 1
                return blocks.pop(), size
        ptr = int(_drv().call("cuMemAlloc", size))
        with self._lock:
            self.live += 1
        return ptr, size

    def release(self, ptr: int, size: int) -> None:
        with self._lock:
            self.live -= 1
            if self._cached + size <= self.limit:
                self._free.setdefault(size, []).append(ptr)
                self._cached += size
                return
        _free_device(ptr)

    def empty(self) -> None:
        """Free every cached block."""
        with self._lock:
            blocks = [p for ps in self._free.values() for p in ps]
            self._free.clear()
            self._cached = 0
        for p in blocks:
            _free_device(p)


temp_pool = TempPool()


def _np_dtype(dtype) -> np.dtype:
    if isinstance(dtype, dt.DType):
        return dtype.storage_np
    d = np.dtype(dtype)
    dt.from_numpy(d)  # ValueError for dtypes kernels cannot use
    return d


def _shape(shape) -> tuple[int, ...]:
    t = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not all(isinstance(s, (int, np.integer)) and s >= 0 for s in t):
        raise ValueError(f"shape must be non-negative ints, got {shape!r}")
    return tuple(int(s) for s in t)


class DeviceArray:
    """A C-contiguous array in device memory.

    Attributes: ``shape``, ``dtype`` (numpy), ``size``, ``ndim``, ``nbytes``, ``ptr`` (device
    address as int). Freed when garbage-collected or by :meth:`free`.
    """

    __kaio_device__ = True

    def __init__(self, shape, dtype, *, _ptr: int | None = None, _owner=None):
        self.shape = _shape(shape)
        self.dtype = _np_dtype(dtype)
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self._owner = _owner  # keeps a foreign allocation alive (views)
        if _ptr is not None:
            self.ptr, self._finalizer = int(_ptr), None
        elif self.nbytes == 0:
            self.ptr, self._finalizer = 0, None
        else:
            self.ptr = int(_drv().call("cuMemAlloc", self.nbytes))
            self._finalizer = weakref.finalize(self, _free_device, self.ptr)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d device array")
        return self.shape[0]

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": None}

    def _check_host(self, arr: np.ndarray, what: str) -> None:
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{what} expects a numpy array, got {type(arr).__name__}")
        if arr.dtype != self.dtype or arr.shape != self.shape:
            raise ValueError(f"{what}: device array is {self.dtype}{list(self.shape)}, "
                             f"host array is {arr.dtype}{list(arr.shape)}")
        if not arr.flags.c_contiguous:
            raise ValueError(f"{what} needs a C-contiguous host array; use np.ascontiguousarray")

    def __array__(self, *args, **kwargs):
        raise TypeError("a kaio.DeviceArray is not converted to numpy implicitly: call .to_host()")

    def copy_from_host(self, arr: np.ndarray, stream=None) -> "DeviceArray":
        """Copy a host array of the same dtype and shape into this array."""
        self._check_host(arr, "copy_from_host")
        copy_htod(self.ptr, arr, stream)
        return self

    def copy_to_host(self, out: np.ndarray | None = None, stream=None) -> np.ndarray:
        """Copy into ``out`` (or a new array) and return it. With a stream the copy is
        asynchronous: synchronize the stream before reading ``out``."""
        if out is None:
            out = np.empty(self.shape, self.dtype)
        else:
            self._check_host(out, "copy_to_host")
            if not out.flags.writeable:
                raise ValueError("copy_to_host: the output array is read-only")
        copy_dtoh(out, self.ptr, stream)
        return out

    def to_host(self, stream=None) -> np.ndarray:
        """A new numpy array with this array's contents."""
        return self.copy_to_host(None, stream)

    def copy_(self, other: "DeviceArray") -> "DeviceArray":
        """Device-to-device copy from an array of the same dtype and shape."""
        if other.dtype != self.dtype or other.shape != self.shape:
            raise ValueError(f"copy_: {other.dtype}{list(other.shape)} into {self.dtype}{list(self.shape)}")
        if self.nbytes:
            _drv().call("cuMemcpyDtoD", self.ptr, other.ptr, self.nbytes)
        return self

    def free(self) -> None:
        """Release the device memory now (the array must not be used afterwards)."""
        if self._finalizer is not None:
            self._finalizer()
        self.ptr = 0  # later use fails in the driver instead of touching freed memory

    def __repr__(self) -> str:
        return f"<kaio.DeviceArray {self.dtype}{list(self.shape)} at 0x{self.ptr:x}>"


def device_array(shape, dtype) -> DeviceArray:
    """Uninitialised device memory of ``shape`` and ``dtype`` (numpy dtype or kaio dtype)."""
    return DeviceArray(shape, dtype)


def to_device(arr, stream=None) -> DeviceArray:
    """A device copy of a numpy array (made C-contiguous first if it is not)."""
    if hasattr(arr, "__cuda_array_interface__"):
        raise TypeError(f"to_device: {type(arr).__name__} is already in device memory; pass it to "
                        "kernels directly, or copy it with kaio.device_array(...).copy_(x)")
    arr = np.ascontiguousarray(arr)
    d = DeviceArray(arr.shape, arr.dtype)
    copy_htod(d.ptr, arr, stream)
    return d


# --- pinned host memory ------------------------------------------------------------------
class _PinnedBlock:
    """Owner of one cuMemHostAlloc block; numpy arrays over it keep it alive."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.ptr = int(_drv().call("cuMemHostAlloc", max(nbytes, 1), 0))
        weakref.finalize(self, _free_host, self.ptr)
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                                    "version": 3}


def _free_host(ptr: int) -> None:
    try:
        from .backends import cuda_driver
        cuda_driver.call("cuMemFreeHost", ptr)
    except Exception:
        pass


def pinned_array(shape, dtype) -> np.ndarray:
    """A numpy array in page-locked host memory (fast, truly asynchronous copies); the memory
    is released when the last array using it is garbage-collected. Contents are uninitialised."""
    shape, npd = _shape(shape), _np_dtype(dtype)
    block = _PinnedBlock(math.prod(shape) * npd.itemsize)
    return np.asarray(block).view(npd).reshape(shape)


def is_pinned(arr: np.ndarray) -> bool:
    """Whether ``arr`` lies in memory from :func:`pinned_array`."""
    base = arr
    while base is not None:
        if isinstance(base, _PinnedBlock):
            return True
        base = getattr(base, "base", None)
    return False


# --- streams and events ------------------------------------------------------------------
def _destroy(fn: str, handle) -> None:
    try:
        from .backends import cuda_driver
        cuda_driver.call(fn, handle)
    except Exception:
        pass


class Stream:
    """A CUDA stream: launches and copies on one stream run in order, streams run concurrently.

    ``non_blocking=False`` (default) keeps the stream ordered with the legacy default stream,
    which is what kaio's synchronous copies use.
    """

    def __init__(self, non_blocking: bool = False):
        drv = _drv()
        flags = 1 if non_blocking else 0  # CU_STREAM_NON_BLOCKING
        self._raw = drv.call("cuStreamCreate", flags)
        self.handle = int(self._raw)
        weakref.finalize(self, _destroy, "cuStreamDestroy", self._raw)

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has finished."""
        _drv().call("cuStreamSynchronize", self._raw)

    def query(self) -> bool:
        """True when all queued work has finished (never blocks)."""
        drv = _drv()
        r = drv.driver().cuStreamQuery(self._raw)
        err = r[0] if isinstance(r, tuple) else r
        if int(err) == 0:
            return True
        if drv.error_name(err)[0] == "CUDA_ERROR_NOT_READY":
            return False
        return drv.check("cuStreamQuery", r)

    def wait(self, event: "Event") -> None:
        """Make later work on this stream wait for ``event``."""
        _drv().call("cuStreamWaitEvent", self._raw, event._raw, 0)

    def __cuda_stream__(self):
        return (0, self.handle)

    def __int__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"<kaio.Stream 0x{self.handle:x}>"


class Event:
    """A CUDA event: a marker in a stream, used to wait on or to time work."""

    def __init__(self, timing: bool = True):
        drv = _drv()
        flags = 0 if timing else 2  # CU_EVENT_DISABLE_TIMING
        self._raw = drv.call("cuEventCreate", flags)
        weakref.finalize(self, _destroy, "cuEventDestroy", self._raw)

    def record(self, stream=None) -> "Event":
        """Record the event on ``stream`` (None: the default stream)."""
        _drv().call("cuEventRecord", self._raw, _stream_arg(stream))
        return self

    def synchronize(self) -> None:
        _drv().call("cuEventSynchronize", self._raw)

    def query(self) -> bool:
        drv = _drv()
        r = drv.driver().cuEventQuery(self._raw)
        err = r[0] if isinstance(r, tuple) else r
        if int(err) == 0:
            return True
        if drv.error_name(err)[0] == "CUDA_ERROR_NOT_READY":
            return False
        return drv.check("cuEventQuery", r)

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to ``end`` (both recorded and completed)."""
        return float(_drv().call("cuEventElapsedTime", self._raw, end._raw))

    def __repr__(self) -> str:
        return f"<kaio.Event {int(self._raw):#x}>"


def synchronize() -> None:
    """Wait for all work on the current device."""
    _drv().context().synchronize()


# --- foreign device arrays ---------------------------------------------------------------
def check_cuda_array_interface(cai: dict, what: str = "argument") -> tuple[np.dtype, tuple]:
    """(dtype, shape) of a ``__cuda_array_interface__`` dict; ValueError unless C-contiguous
    and unmasked."""
    shape = tuple(int(s) for s in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None:
        acc = dtype.itemsize
        for st, sh in zip(reversed(tuple(strides)), reversed(shape)):
            if sh > 1 and st != acc:  # extents of 1 may carry any stride
                raise ValueError(f"{what} is not C-contiguous (strides {tuple(strides)} for shape "
                                 f"{shape}); make it contiguous first (e.g. tensor.contiguous())")
            acc *= sh
    if cai.get("mask") is not None:
        raise ValueError(f"{what}: masked arrays are not supported")
    return dtype, shape


def cuda_array_view(obj, what: str = "argument") -> tuple[int, tuple[int, ...], np.dtype]:
    """(pointer, shape, dtype) of an object exporting ``__cuda_array_interface__``; raises
    ValueError unless it is C-contiguous. Waits on the producer's stream when the interface
    names one (protocol v3)."""
    cai = obj.__cuda_array_interface__
    dtype, shape = check_cuda_array_interface(cai, what)
    stream = cai.get("stream")
    if stream not in (None, 1, 2):  # 1, 2: the default streams, already ordered
        _drv().call("cuStreamSynchronize", int(stream))
    return int(cai["data"][0]), shape, dtype
