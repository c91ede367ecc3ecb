"""One runtime interface: device memory, copies, streams, events and graphs, on every backend.

Every backend has a :class:`Runtime` (``backend.runtime``) with the same few parts (tinygrad's
shape: an allocator, streams and events, and graph capture): CUDA
(:mod:`kaio.backends.cuda_runtime`), HIP (:class:`kaio.backends.hip.HipRuntime`) and the
reference backend (:mod:`kaio.backends.reference.runtime`, whose "device memory" is host memory).

The user-facing objects are written once, against that interface, and bound to the runtime of the
backend current when they are made: :class:`DeviceArray`, :class:`Stream`, :class:`Event`,
:class:`Graph` and the pinned host blocks behind ``kaio.pinned_array``. So code written against
the manual interface (``kaio.to_device``, ``kaio.Stream``, ``kaio.graph`` ...) runs unchanged on
a GPU and in CI. The launch helpers at the end (:class:`Transfers`, :func:`buffer_arg`) are the
automatic-transfer path that the CUDA and HIP launches and vendor BLAS calls share.

Runtime methods take *handles* (what :meth:`Runtime.stream_handle` returns for a stream); the
objects here hold them.
"""
from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from .. import dtypes as dt
from ..errors import LaunchError
from . import get_backend
from .dlpack import export as dlpack_export
from .launch_checks import check_cuda_array_interface  # noqa: F401  (kaio.device re-exports it)


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


def protocol_stream(stream) -> int | None:
    """The handle of an object speaking the CUDA stream protocol (``__cuda_stream__()`` returns
    ``(version, handle)``: CuPy, cuda.core, kaio's own streams), or None when it does not."""
    fn = getattr(stream, "__cuda_stream__", None)
    if fn is None:
        return None
    got = fn()
    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], (int, np.integer))):
        raise TypeError(f"{type(stream).__name__}.__cuda_stream__() must return (version, handle), "
                        f"got {got!r}")
    return int(got[1])


def quietly(fn, *args) -> None:
    """Run a release call from a finalizer: at interpreter exit the driver may already be gone,
    and a finalizer has nobody to report to."""
    try:
        fn(*args)
    except Exception:
        pass


# --- the interface -----------------------------------------------------------------------
class Runtime:
    """Memory, copies, streams, events and graphs of one device. Subclasses implement the
    methods that raise NotImplementedError; the rest is shared.

    Handles are opaque to callers: ``alloc`` returns a device address (an int on every
    runtime; host addresses on the reference one), streams and events are whatever the driver
    hands out. ``stream=None`` in a copy means a synchronous copy.
    """

    name = "?"
    #: DLPack device type of this runtime's memory (kDLCPU 1, kDLCUDA 2, kDLROCM 10)
    dlpack_device = 0
    #: device arrays export ``__cuda_array_interface__`` (CuPy-on-ROCm uses the same name)
    exports_cai = False
    #: streams export the ``__cuda_stream__`` protocol
    stream_protocol = False
    #: the handle of the stream used when none is named
    default_stream: object = 0
    #: the ordinal of the device whose memory, streams and events these are
    device = 0

    def where(self) -> str:
        """'cuda device 1': what error messages call this runtime's device."""
        return f"{self.name} device {self.device}"

    # memory -----------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        """Address of ``nbytes`` (> 0) of uninitialised device memory."""
        raise NotImplementedError

    def free(self, ptr: int) -> None:
        raise NotImplementedError

    def host_alloc(self, nbytes: int) -> int:
        """Address of ``nbytes`` of page-locked host memory."""
        raise NotImplementedError

    def host_free(self, ptr: int) -> None:
        raise NotImplementedError

    def memcpy(self, kind: str, dst: int, src: int, nbytes: int, stream=None) -> None:
        """Copy ``nbytes``; ``kind`` is 'htod', 'dtoh' or 'dtod'; asynchronous on ``stream``."""
        raise NotImplementedError

    def temp_alloc(self, nbytes: int) -> tuple[int, int]:
        """(address, size) of a launch temporary; a runtime may pool them."""
        return self.alloc(nbytes), nbytes

    def temp_release(self, ptr: int, size: int) -> None:
        self.free(ptr)

    # counted copies (every host<->device copy kaio makes goes through these two)
    def copy_htod(self, dst: int, src: np.ndarray, stream=None) -> None:
        """Copy a C-contiguous host array to device memory at ``dst``."""
        if src.nbytes:
            self.memcpy("htod", dst, src.ctypes.data, src.nbytes, stream)
            _stats.add("htod", src.nbytes)

    def copy_dtoh(self, dst: np.ndarray, src: int, stream=None) -> None:
        """Copy device memory at ``src`` into a C-contiguous host array."""
        if dst.nbytes:
            self.memcpy("dtoh", dst.ctypes.data, src, dst.nbytes, stream)
            _stats.add("dtoh", dst.nbytes)

    # peer copies between devices of one backend ----------------------------------------
    def can_access_peer(self, src: "Runtime") -> bool:
        """Whether this device can copy from ``src``'s memory directly (peer access, enabled
        by this call where the hardware allows); False: copies go through host memory."""
        return False

    def memcpy_peer(self, dst: int, src_rt: "Runtime", src: int, nbytes: int) -> None:
        """Copy ``nbytes`` from ``src`` on ``src_rt``'s device to ``dst`` on this one, directly
        (only called when :meth:`can_access_peer` said yes)."""
        raise NotImplementedError

    #: device memory can be shared with another process of the host (:meth:`ipc_export`)
    ipc = False

    def ipc_export(self, ptr: int) -> bytes:
        """A handle another process of this host opens (:meth:`ipc_open`) to reach the
        allocation starting at ``ptr``."""
        raise NotImplementedError(f"{self.name} memory cannot be shared between processes")

    def ipc_open(self, handle: bytes) -> int:
        """This process's address of another process's allocation (kept open until exit)."""
        raise NotImplementedError(f"{self.name} memory cannot be shared between processes")

    def copy_peer(self, dst: int, src_rt: "Runtime", src: int, nbytes: int) -> None:
        """Copy between two devices of this backend: directly where peer access is possible,
        else staged through host memory (two counted copies). Synchronous."""
        if self.can_access_peer(src_rt):
            self.memcpy_peer(dst, src_rt, src, nbytes)
            return
        staging = np.empty(nbytes, np.uint8)
        src_rt.copy_dtoh(staging, src)
        self.copy_htod(dst, staging)

    # streams ----------------------------------------------------------------------------
    def stream_create(self, non_blocking: bool):
        raise NotImplementedError

    def stream_destroy(self, h) -> None:
        raise NotImplementedError

    def stream_synchronize(self, h, kernel: str | None = None) -> None:
        """Wait for the work queued on ``h``; ``kernel`` names the launch a failure belongs to."""
        raise NotImplementedError

    def stream_query(self, h) -> bool:
        raise NotImplementedError

    def stream_wait(self, h, event) -> None:
        raise NotImplementedError

    def foreign_stream(self, stream):
        """The handle of a stream that is not a :class:`Stream` (an int, another library's)."""
        raise TypeError(f"not a {self.name} stream: {type(stream).__name__} {stream!r}; "
                        "pass a kaio.Stream")

    def stream_handle(self, stream):
        """The handle of ``stream``: None -> the default stream, a :class:`Stream` of this
        runtime, or whatever :meth:`foreign_stream` accepts."""
        if stream is None:
            return self.default_stream
        if isinstance(stream, Stream):
            if stream.runtime is not self:
                if stream.runtime.name == self.name:  # streams belong to one device
                    raise LaunchError(f"the stream belongs to {stream.runtime.where()}, this work "
                                      f"runs on {self.where()}; make the stream under "
                                      f"kaio.device({self.device})")
                raise TypeError(f"the stream belongs to the {stream.runtime.name} backend, this "
                                f"work runs on {self.name}")
            return stream.handle
        return self.foreign_stream(stream)

    # events -----------------------------------------------------------------------------
    def event_create(self, timing: bool):
        raise NotImplementedError

    def event_destroy(self, ev) -> None:
        raise NotImplementedError

    def event_record(self, ev, h) -> None:
        raise NotImplementedError

    def event_synchronize(self, ev) -> None:
        raise NotImplementedError

    def event_query(self, ev) -> bool:
        raise NotImplementedError

    def event_elapsed_ms(self, start, end) -> float:
        raise NotImplementedError

    # graphs -----------------------------------------------------------------------------
    def graph_begin(self, h) -> None:
        """Start capturing the work queued on stream ``h``."""
        raise NotImplementedError

    def graph_end(self, h, keep: bool):
        """Stop capturing; an executable graph (which frees itself) when ``keep``, else None."""
        raise NotImplementedError

    def graph_launch(self, exe, h) -> None:
        raise NotImplementedError

    # device -----------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for all work on the device."""
        raise NotImplementedError

    def foreign_view(self, obj, what: str) -> tuple[int, tuple, np.dtype]:
        """(address, shape, dtype) of an object exporting ``__cuda_array_interface__``; waits
        on the producer's stream when the interface names one (protocol v3)."""
        cai = obj.__cuda_array_interface__
        dtype, shape = check_cuda_array_interface(cai, what, obj)
        stream = cai.get("stream")
        if stream not in (None, 1, 2):  # 1, 2: the default streams, already ordered
            self.stream_synchronize(self.foreign_stream(int(stream)))
        return int(cai["data"][0]), shape, dtype


def one_per_device(cls):
    """A function ``device -> runtime``: the one instance of runtime class ``cls`` per device
    and process (device arrays and streams compare runtimes by identity)."""
    table: dict = {}
    lock = threading.Lock()

    def get(device: int):
        rt = table.get(device)
        if rt is None:
            with lock:
                rt = table.get(device) or table.setdefault(device, cls(device))
        return rt
    return get


def current() -> Runtime:
    """The runtime of the current backend (``kaio.set_backend`` / ``KAIO_BACKEND``)."""
    return get_backend().runtime


# --- device arrays -----------------------------------------------------------------------
def np_dtype(dtype) -> np.dtype:
    """The numpy dtype of a kaio or numpy dtype; ValueError for dtypes kernels cannot use."""
    if isinstance(dtype, dt.DType):
        return dtype.storage_np
    d = np.dtype(dtype)
    dt.from_numpy(d)
    return d


def shape_tuple(shape) -> tuple[int, ...]:
    t = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not all(isinstance(s, (int, np.integer)) and s >= 0 for s in t):
        raise ValueError(f"shape must be non-negative ints, got {shape!r}")
    return tuple(int(s) for s in t)


class DeviceArray:
    """A C-contiguous array in one backend's device memory (host memory on the reference
    backend).

    Attributes: ``shape``, ``dtype`` (numpy), ``size``, ``ndim``, ``nbytes``, ``ptr`` (device
    address as int), ``runtime`` (the :class:`Runtime` owning the memory). Freed when
    garbage-collected or by :meth:`free`. On CUDA (and HIP) it exports
    ``__cuda_array_interface__`` v3, so CuPy, PyTorch and Numba use it without a copy; on every
    backend ``__dlpack__`` / ``__dlpack_device__`` (``torch.from_dlpack``, ``cupy.from_dlpack``,
    ``np.from_dlpack`` for the reference backend's host memory).
    """

    __kaio_device__ = True

    def __init__(self, shape, dtype, *, runtime: Runtime | None = None, _ptr: int | None = None,
                 _owner=None):
        self.runtime = rt = runtime if runtime is not None else current()
        self.shape = shape_tuple(shape)
        self.dtype = np_dtype(dtype)
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self._owner = _owner  # keeps a foreign allocation alive (views)
        if _ptr is not None:
            self.ptr, self._finalizer = int(_ptr), None
        elif self.nbytes == 0:
            self.ptr, self._finalizer = 0, None
        else:
            self.ptr = rt.alloc(self.nbytes)
            self._finalizer = weakref.finalize(self, quietly, rt.free, self.ptr)
        # what a launch's checks read of the array, as one object a repeated call compares
        # (LaunchPlan.matches); replaced where the array changes (free)
        self._launch_key = (rt, self.ptr, self.shape, self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device(self) -> int:
        """The ordinal of the device holding this array (its backend: ``runtime.name``)."""
        return self.runtime.device

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d device array")
        return self.shape[0]

    @property
    def __cuda_array_interface__(self) -> dict:
        if not self.runtime.exports_cai:  # host memory must not pass for device memory
            raise AttributeError(f"a {self.runtime.name} device array has no __cuda_array_interface__")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": None}

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this array's memory, no copy (it keeps the array alive):
        ``torch.from_dlpack``, ``cupy.from_dlpack``, ``jax.dlpack`` and, for reference-backend
        (host) arrays, ``np.from_dlpack`` take kaio arrays this way (kaio.backends.dlpack.export)."""
        return dlpack_export(self, stream, dl_device, copy)

    def __dlpack_device__(self) -> tuple:
        rt = self.runtime
        return (rt.dlpack_device, 0 if rt.dlpack_device == 1 else int(getattr(rt, "device", 0) or 0))

    def live_ptr(self, what: str) -> int:
        """The device address, or ValueError naming ``what`` when the array was freed."""
        if self.ptr == 0 and self.nbytes:
            raise ValueError(f"{what}: the device array was freed")
        return self.ptr

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

    def _stream(self, stream):
        return None if stream is None else self.runtime.stream_handle(stream)

    def copy_from_host(self, arr: np.ndarray, stream=None) -> "DeviceArray":
        """Copy a host array of the same dtype and shape into this array."""
        self._check_host(arr, "copy_from_host")
        self.runtime.copy_htod(self.live_ptr("copy_from_host"), arr, self._stream(stream))
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
        self.runtime.copy_dtoh(out, self.live_ptr("copy_to_host"), self._stream(stream))
        return out

    def to_host(self, stream=None) -> np.ndarray:
        """A new numpy array with this array's contents."""
        return self.copy_to_host(None, stream)

    def copy_(self, other: "DeviceArray") -> "DeviceArray":
        """Device-to-device copy from an array of the same dtype and shape (same backend). From
        another device of the backend it is a peer copy: direct where the devices have peer
        access, else staged through host memory; it has finished when this returns."""
        if (isinstance(other, DeviceArray) and other.runtime is not self.runtime
                and other.runtime.name == self.runtime.name):
            self._check_like(other)
            if self.nbytes:
                self.runtime.copy_peer(self.live_ptr("copy_"), other.runtime, other.live_ptr("copy_"),
                                       self.nbytes)
            return self
        if not isinstance(other, DeviceArray) or other.runtime is not self.runtime:
            raise ValueError(f"copy_: the source must be a {self.runtime.name} device array, got "
                             f"{_describe(other)}")
        self._check_like(other)
        if self.nbytes:
            self.runtime.memcpy("dtod", self.live_ptr("copy_"), other.live_ptr("copy_"), self.nbytes)
        return self

    def _check_like(self, other: "DeviceArray") -> None:
        if other.dtype != self.dtype or other.shape != self.shape:
            raise ValueError(f"copy_: {other.dtype}{list(other.shape)} into {self.dtype}{list(self.shape)}")

    def free(self) -> None:
        """Release the device memory now (the array must not be used afterwards)."""
        if self._finalizer is not None:
            self._finalizer()
        self.ptr = 0  # later use raises instead of touching freed memory
        self._launch_key = (self.runtime, 0, self.shape, self.dtype)

    def __repr__(self) -> str:
        return (f"<kaio.DeviceArray {self.dtype}{list(self.shape)} on {self.runtime.where()} "
                f"at 0x{self.ptr:x}>")


def check_same_device(rt: Runtime, a: DeviceArray, what: str) -> None:
    """Refuse, before anything is launched, an array of another device of ``rt``'s backend
    (a kernel cannot read another GPU's memory through its parameters)."""
    if a.runtime is not rt and a.runtime.name == rt.name:
        raise LaunchError(f"{what} is on {a.runtime.where()} but the launch runs on {rt.where()}; "
                          f"copy it over with kaio.device_array(...).copy_(x) under "
                          f"kaio.device({rt.device}), or launch under kaio.device({a.device})")


def _describe(obj) -> str:
    if isinstance(obj, DeviceArray):
        return f"a {obj.runtime.name} device array"
    return type(obj).__name__


# --- pinned host memory ------------------------------------------------------------------
class PinnedBlock:
    """Owner of one page-locked host block; numpy arrays over it keep it alive."""

    def __init__(self, runtime: Runtime, nbytes: int):
        self.nbytes = nbytes
        self.ptr = runtime.host_alloc(max(nbytes, 1))
        weakref.finalize(self, quietly, runtime.host_free, self.ptr)
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                                    "version": 3}


# --- streams, events, graphs -------------------------------------------------------------
class Stream:
    """A queue of work: launches and copies on one stream run in order, streams run
    concurrently (on the reference backend everything runs at once, in order).

    ``non_blocking=False`` (default) keeps the stream ordered with the legacy default stream,
    which is what kaio's synchronous copies use.
    """

    def __init__(self, non_blocking: bool = False, *, runtime: Runtime | None = None):
        self.runtime = rt = runtime if runtime is not None else current()
        self.handle = rt.stream_create(bool(non_blocking))
        weakref.finalize(self, quietly, rt.stream_destroy, self.handle)

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has finished."""
        self.runtime.stream_synchronize(self.handle)

    def query(self) -> bool:
        """True when all queued work has finished (never blocks)."""
        return self.runtime.stream_query(self.handle)

    def wait(self, event: "Event") -> None:
        """Make later work on this stream wait for ``event``."""
        self.runtime.stream_wait(self.handle, event._raw)

    @property
    def __cuda_stream__(self):
        if not self.runtime.stream_protocol:
            raise AttributeError(f"a {self.runtime.name} stream has no __cuda_stream__")
        return lambda: (0, int(self.handle))

    def __int__(self) -> int:
        return int(self.handle)

    def __repr__(self) -> str:
        return f"<kaio.Stream on {self.runtime.name} {self.handle!r}>"


class Event:
    """A marker in a stream, to wait on or to time work (``elapsed_time``, milliseconds).
    On the reference backend, where work runs when it is queued, it holds the host time of
    its ``record``."""

    def __init__(self, timing: bool = True, *, runtime: Runtime | None = None):
        self.runtime = rt = runtime if runtime is not None else current()
        self._raw = rt.event_create(bool(timing))
        weakref.finalize(self, quietly, rt.event_destroy, self._raw)

    def record(self, stream=None) -> "Event":
        """Record the event on ``stream`` (None: the default stream)."""
        self.runtime.event_record(self._raw, self.runtime.stream_handle(stream))
        return self

    def synchronize(self) -> None:
        self.runtime.event_synchronize(self._raw)

    def query(self) -> bool:
        return self.runtime.event_query(self._raw)

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to ``end`` (both recorded and completed)."""
        if not isinstance(end, Event) or end.runtime is not self.runtime:
            raise ValueError(f"elapsed_time: end must be a {self.runtime.name} kaio.Event")
        return float(self.runtime.event_elapsed_ms(self._raw, end._raw))

    def __repr__(self) -> str:
        return f"<kaio.Event on {self.runtime.name}>"


class _Local(threading.local):
    graph = None  # a class default: reading it never raises (this is on every launch's path)


_tls = _Local()
#: ``capture_state.graph`` is :func:`capturing` without the call (read on every launch)
capture_state = _tls
#: ``captures[0]``: graphs being captured in any thread (a planned launch reads its thread's
#: ``capture_state`` only while some are)
captures = [0]
_captures_lock = threading.Lock()


def _count_capture(n: int) -> None:
    with _captures_lock:
        captures[0] += n


def capturing() -> "Graph | None":
    """The graph being captured in this thread, if any."""
    return _tls.graph


def capture_target(stream, args=()):
    """(graph being captured or None, the stream a launch goes to): inside ``kaio.graph()`` a
    launch that names no stream goes to the graph's stream and is counted, and the graph holds
    its arguments (the driver keeps only their addresses: a device array freed while the graph
    lives would be replayed into freed memory)."""
    graph = _tls.graph
    if graph is not None:
        graph.launches += 1
        graph.held.extend(args)
        if stream is None:
            stream = graph.stream
    return graph, stream


class ExecGraph:
    """A driver's instantiated graph ``exe`` and the graph it came from, released with this
    object by ``destroy_exec(exe)`` and ``destroy_graph(graph)``."""

    def __init__(self, exe, graph, destroy_exec, destroy_graph):
        self.exe = exe
        weakref.finalize(self, quietly, destroy_graph, graph)
        weakref.finalize(self, quietly, destroy_exec, exe)


class Graph:
    """A captured sequence of launches (see :mod:`kaio.graphs`). Use :func:`kaio.graph`."""

    def __init__(self, stream=None):
        if stream is None:
            stream = Stream(non_blocking=True)
        self.stream = stream
        self.runtime = stream.runtime if isinstance(stream, Stream) else current()
        self._exec = None
        self.launches = 0
        self.held: list = []        # the captured launches' arguments, alive as long as the graph

    def __enter__(self) -> "Graph":
        if capturing() is not None:
            raise LaunchError("kaio.graph() blocks cannot be nested")
        self.runtime.graph_begin(self.runtime.stream_handle(self.stream))
        _count_capture(1)
        _tls.graph = self
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        _tls.graph = None
        _count_capture(-1)
        # the body failed: drop the partial graph and let its error propagate
        self._exec = self.runtime.graph_end(self.runtime.stream_handle(self.stream),
                                            keep=exc_type is None)

    def replay(self, stream=None) -> None:
        """Launch the whole graph (asynchronously) on ``stream`` (default: its capture stream)."""
        if self._exec is None:
            raise LaunchError("this graph has not been captured yet: use it as `with kaio.graph() as g:`")
        rt = self.runtime
        rt.graph_launch(self._exec, rt.stream_handle(self.stream if stream is None else stream))

    def synchronize(self) -> None:
        """Wait for the replays queued on the capture stream."""
        self.stream.synchronize()


# --- automatic transfers of a launch (CUDA, HIP, vendor BLAS) ------------------------------
class Transfers:
    """The copies one launch makes for its numpy arguments: a device temporary each, copied
    in unless the intent is ``out``, copied back unless it is ``in`` -- after :meth:`finish`
    waited for the launch, so a fault is reported against this kernel. :meth:`release` returns
    the temporaries (call it in a ``finally``)."""

    __slots__ = ("rt", "stream", "temps", "back")

    def __init__(self, rt: Runtime, stream):
        self.rt, self.stream = rt, stream
        self.temps: list = []
        self.back: list = []

    def host_array(self, a: np.ndarray, intent: str) -> int:
        if a.nbytes == 0:
            return 0
        ptr, size = self.rt.temp_alloc(a.nbytes)
        self.temps.append((ptr, size))
        if intent != "out":  # out: old contents are never read, so never copied in
            self.rt.copy_htod(ptr, a, self.stream if self.stream != self.rt.default_stream else None)
        if intent != "in":
            self.back.append((a, ptr))
        return ptr

    def finish(self, kernel: str | None = None) -> None:
        self.rt.stream_synchronize(self.stream, kernel=kernel)
        for host, ptr in self.back:
            self.rt.copy_dtoh(host, ptr)

    def release(self) -> None:
        for ptr, size in self.temps:
            self.rt.temp_release(ptr, size)
        self.temps.clear()


def device_pointer(rt: Runtime, a, intent: str, what: str, xfer: Transfers):
    """(address, shape, dtype) of an array argument on ``rt``: numpy through ``xfer``, a
    device array of this runtime as is, a ``__cuda_array_interface__`` object by its pointer."""
    if isinstance(a, np.ndarray):
        if capturing() is not None:
            raise LaunchError(f"{what}: a numpy array cannot be used inside kaio.graph() (its copies "
                              "and synchronization cannot be captured); pass kaio.to_device(array)")
        return xfer.host_array(a, intent), a.shape, a.dtype
    if isinstance(a, DeviceArray):
        if a.runtime is not rt:
            check_same_device(rt, a, what)
            raise LaunchError(f"{what} is {_describe(a)} but this runs on {rt.name}; copy it with "
                              ".to_host() and kaio.to_device() on this backend")
        return a.live_ptr(what), a.shape, a.dtype
    if hasattr(a, "__cuda_array_interface__"):
        return rt.foreign_view(a, what)
    raise LaunchError(f"{what} expects a numpy array or a device array, got {type(a).__name__}")


def buffer_arg(rt: Runtime, a, t, what: str, xfer: Transfers) -> tuple[int, tuple]:
    """(address, shape) of a kernel's buffer argument for :class:`kaio.ir.BufType` ``t``,
    checked before anything is copied."""
    want = t.dtype.storage_np
    if isinstance(a, np.ndarray) and (a.dtype != want or a.ndim != t.ndim or not a.flags.c_contiguous):
        raise LaunchError(f"{what} expects a C-contiguous {t.ndim}-d {t.dtype.name} array, "
                          f"got {a.dtype} shape {a.shape}")
    ptr, shape, dtype = device_pointer(rt, a, t.intent, what, xfer)
    if dtype != want or len(shape) != t.ndim:
        raise LaunchError(f"{what} expects a {t.ndim}-d {t.dtype.name} array, got {dtype} shape {shape}")
    return ptr, shape


def gemm_pointers(rt: Runtime, operands, beta: float, xfer: Transfers) -> list[int]:
    """Device addresses of :func:`kaio.blas.gemm`'s checked operands (a, b, out) for a vendor
    BLAS call: ``out`` is copied in only when ``beta != 0`` reads it."""
    intents = {"a": "in", "b": "in", "out": "region" if beta != 0 else "out"}
    return [device_pointer(rt, o.value, intents[o.name], f"kaio.blas.gemm: parameter '{o.name}'",
                           xfer)[0] for o in operands]
