"""The CUDA implementation of :class:`kaio.backends.runtime.Runtime`, through the driver API.

Memory is ``cuMemAlloc``/``cuMemFree`` (pinned host memory ``cuMemHostAlloc``); launch
temporaries come from a :class:`TempPool`; streams, events and graphs are the driver's
(``cuStreamBeginCapture`` in relaxed mode, so a kernel compiled and loaded on its first launch
inside ``kaio.graph()`` still works). Every call goes through
:func:`kaio.backends.cuda_driver.call`, so a failure raises :class:`kaio.CudaError`.
"""
from __future__ import annotations

import ctypes
import functools
import threading

import numpy as np

from . import cuda_driver as drv
from .runtime import ExecGraph, Runtime, one_per_device, protocol_stream, quietly

_IPC_HANDLE_BYTES = 64  # CU_IPC_HANDLE_SIZE


class TempPool:
    """Reuses device blocks for a launch's automatic transfers.

    Blocks are returned only after the launch that used them has been synchronized, so reuse
    can never overlap a running kernel. Sizes round up to 512 bytes (small) or a power of two;
    at most ``limit`` bytes stay cached (``empty()`` releases them).
    """

    def __init__(self, limit: int = 1 << 30, ordinal: int | None = None):
        self.limit = limit
        self.ordinal = ordinal  # the device its blocks are on (None: the default device)
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
        drv.context(self.ordinal)
        ptr = int(drv.call("cuMemAlloc", size))
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
        quietly(drv.call, "cuMemFree", ptr)

    def empty(self) -> None:
        """Free every cached block."""
        with self._lock:
            blocks = [p for ps in self._free.values() for p in ps]
            self._free.clear()
            self._cached = 0
        for p in blocks:
            quietly(drv.call, "cuMemFree", p)


#: the pool of launch temporaries of the default device (``KAIO_CUDA_DEVICE``); every other
#: device has its own (``CudaRuntime.pool``)
temp_pool = TempPool()


def _not_ready(fn: str, r) -> bool:
    """True for CUDA_ERROR_NOT_READY (a query's "still running"); raises for real errors."""
    err = r[0] if isinstance(r, tuple) else r
    if int(err) == 0:
        return False
    if drv.error_name(err)[0] == "CUDA_ERROR_NOT_READY":
        return True
    drv.check(fn, r)
    return False


class CudaRuntime(Runtime):
    """Memory, streams, events and graphs of one CUDA device (its primary context)."""

    name = "cuda"
    dlpack_device = 2  # kDLCUDA
    exports_cai = True
    stream_protocol = True
    default_stream = 0  # the legacy default stream

    def __init__(self, ordinal: int):
        self.ordinal = self.device = ordinal
        self.pool = temp_pool if ordinal == drv.default_ordinal() else TempPool(ordinal=ordinal)
        self._peers: dict[int, bool] = {}  # source ordinal -> peer access enabled
        self._ipc_opened: dict[bytes, int] = {}  # another process's handle -> address here

    def _ctx(self):
        """The device's context, current in this thread (created on first use)."""
        return drv.context(self.ordinal)

    # memory
    def alloc(self, nbytes: int) -> int:
        self._ctx()
        return int(drv.call("cuMemAlloc", nbytes))

    def free(self, ptr: int) -> None:
        drv.call("cuMemFree", ptr)

    def host_alloc(self, nbytes: int) -> int:
        self._ctx()
        return int(drv.call("cuMemHostAlloc", nbytes, 0))

    def host_free(self, ptr: int) -> None:
        drv.call("cuMemFreeHost", ptr)

    _MEMCPY = {"htod": "cuMemcpyHtoD", "dtoh": "cuMemcpyDtoH", "dtod": "cuMemcpyDtoD"}

    def memcpy(self, kind: str, dst: int, src: int, nbytes: int, stream=None) -> None:
        self._ctx()
        fn = self._MEMCPY[kind]
        if stream is None:
            drv.call(fn, dst, src, nbytes)
        else:
            drv.call(fn + "Async", dst, src, nbytes, stream)

    def temp_alloc(self, nbytes: int) -> tuple[int, int]:
        return self.pool.alloc(nbytes)

    def temp_release(self, ptr: int, size: int) -> None:
        self.pool.release(ptr, size)

    # peer copies
    def can_access_peer(self, src) -> bool:
        """Whether this device reads ``src``'s memory directly; the first call for a pair
        enables peer access from this device's context (NVLink or PCIe peer-to-peer)."""
        if not isinstance(src, CudaRuntime):
            return False
        ok = self._peers.get(src.device)
        if ok is None:
            peer = drv.context(src.device)
            ctx = self._ctx()
            ok = bool(drv.call("cuDeviceCanAccessPeer", ctx.device, peer.device))
            if ok:
                r = drv.driver().cuCtxEnablePeerAccess(peer.handle, 0)
                err = r[0] if isinstance(r, tuple) else r
                if int(err) and drv.error_name(err)[0] != "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED":
                    drv.check("cuCtxEnablePeerAccess", r)
            self._peers[src.device] = ok
        return ok

    # memory shared with other processes of the host (CUDA IPC: kaio.mpi's halos)
    ipc = True

    def ipc_export(self, ptr: int) -> bytes:
        self._ctx()
        handle = drv.call("cuIpcGetMemHandle", ptr)
        return ctypes.string_at(handle.getPtr(), _IPC_HANDLE_BYTES)

    def ipc_open(self, handle: bytes) -> int:
        ptr = self._ipc_opened.get(handle)
        if ptr is None:
            self._ctx()
            h = drv.driver().CUipcMemHandle()
            ctypes.memmove(h.getPtr(), handle, _IPC_HANDLE_BYTES)
            flags = drv.driver().CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
            ptr = self._ipc_opened[handle] = int(drv.call("cuIpcOpenMemHandle", h, flags))
        return ptr

    def memcpy_peer(self, dst: int, src_rt, src: int, nbytes: int) -> None:
        peer = drv.context(src_rt.device)
        ctx = self._ctx()
        drv.call("cuMemcpyPeer", dst, ctx.handle, src, peer.handle, nbytes)
        ctx.synchronize()  # finished on return, like the host-staged path

    # streams
    def stream_create(self, non_blocking: bool) -> int:
        self._ctx()
        return int(drv.call("cuStreamCreate", 1 if non_blocking else 0))  # CU_STREAM_NON_BLOCKING

    def stream_destroy(self, h) -> None:
        drv.call("cuStreamDestroy", h)

    def stream_synchronize(self, h, kernel: str | None = None) -> None:
        drv.call("cuStreamSynchronize", h, kernel=kernel)

    def stream_query(self, h) -> bool:
        return not _not_ready("cuStreamQuery", drv.driver().cuStreamQuery(h))

    def stream_wait(self, h, event) -> None:
        drv.call("cuStreamWaitEvent", h, event, 0)

    def foreign_stream(self, stream) -> int:
        if isinstance(stream, (int, np.integer)):
            return int(stream)
        handle = protocol_stream(stream)  # CUDA stream protocol: (version, handle)
        if handle is not None:
            return handle
        if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
            return int(stream.cuda_stream)
        if hasattr(stream, "ptr"):  # cupy.cuda.Stream
            return int(stream.ptr)
        try:
            return int(stream)  # cuda.bindings CUstream
        except (TypeError, ValueError):
            raise TypeError(f"not a CUDA stream: {type(stream).__name__} {stream!r}; pass a "
                            "kaio.Stream, a torch/CuPy stream or a raw handle") from None

    # events
    def event_create(self, timing: bool):
        self._ctx()
        return drv.call("cuEventCreate", 0 if timing else 2)  # CU_EVENT_DISABLE_TIMING

    def event_destroy(self, ev) -> None:
        drv.call("cuEventDestroy", ev)

    def event_record(self, ev, h) -> None:
        drv.call("cuEventRecord", ev, h)

    def event_synchronize(self, ev) -> None:
        drv.call("cuEventSynchronize", ev)

    def event_query(self, ev) -> bool:
        return not _not_ready("cuEventQuery", drv.driver().cuEventQuery(ev))

    def event_elapsed_ms(self, start, end) -> float:
        return float(drv.call("cuEventElapsedTime", start, end))

    # graphs
    def graph_begin(self, h) -> None:
        self._ctx()
        mode = drv.driver().CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        drv.call("cuStreamBeginCapture", h, mode)

    def graph_end(self, h, keep: bool):
        r = drv.driver().cuStreamEndCapture(h)
        if not keep:
            if int(r[0]) == 0 and r[1] is not None:
                quietly(drv.call, "cuGraphDestroy", r[1])
            return None
        graph = drv.check("cuStreamEndCapture", r)
        return ExecGraph(drv.call("cuGraphInstantiate", graph, 0), graph,
                         functools.partial(drv.call, "cuGraphExecDestroy"),
                         functools.partial(drv.call, "cuGraphDestroy"))

    def graph_launch(self, exe, h) -> None:
        self._ctx()
        drv.call("cuGraphLaunch", exe.exe, h)

    def synchronize(self) -> None:
        self._ctx().synchronize()


#: device ordinal -> its CudaRuntime
runtime = one_per_device(CudaRuntime)
