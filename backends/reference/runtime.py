"""The reference backend's runtime: the :class:`kaio.backends.runtime.Runtime` interface over
host memory, so the manual interface (device arrays, streams, events, graphs) runs in CI.

- Memory: each allocation is a numpy byte array kept by address; a device array's ``ptr`` is
  a real host address and copies are ``memmove``. New memory is filled with 0xFF bytes (NaN in
  every float dtype, -1 in signed ints), so a program that reads memory it never wrote fails
  visibly instead of reading zeros by luck.
- Streams and events: launches run to completion when they are queued, so every stream is
  always idle and ordered; an event holds the ``perf_counter`` time of its ``record``.
- Devices: ``KAIO_REF_DEVICES=N`` pretends to have N devices, one runtime each. Their memory is
  all host memory, but an array, stream or event belongs to one of them and kaio refuses to mix
  them exactly as on GPUs; a copy between two of them is a peer copy (``memmove``).
- Graphs: while a stream is being captured, launches on it are recorded (with their argument
  arrays, not their contents) instead of run; a replay runs them again in order.
"""
from __future__ import annotations

import ctypes
import itertools
import threading
import time

import numpy as np

from ...errors import LaunchError
from ..runtime import Runtime, one_per_device, protocol_stream

#: the byte new allocations are filled with (see the module docstring)
UNINITIALISED = 0xFF


class _Replay:
    """The launches recorded by one capture (callables), replayed in order."""

    def __init__(self, launches: list):
        self.launches = launches


class ReferenceRuntime(Runtime):
    """Host memory standing in for device memory; see the module docstring."""

    name = "reference"
    dlpack_device = 1  # kDLCPU

    def __init__(self, device: int = 0):
        self.device = device
        self._blocks: dict[int, np.ndarray] = {}
        self._captures: dict[int, list] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # memory
    def _keep(self, block: np.ndarray) -> int:
        ptr = block.ctypes.data
        with self._lock:
            self._blocks[ptr] = block
        return ptr

    def alloc(self, nbytes: int) -> int:
        return self._keep(np.full(nbytes, UNINITIALISED, np.uint8))

    def free(self, ptr: int) -> None:
        with self._lock:
            self._blocks.pop(ptr, None)

    def host_alloc(self, nbytes: int) -> int:
        return self._keep(np.empty(nbytes, np.uint8))

    host_free = free

    def memcpy(self, kind: str, dst: int, src: int, nbytes: int, stream=None) -> None:
        if not dst or not src:
            raise ValueError(f"{kind} copy of {nbytes} bytes with a null address")
        ctypes.memmove(dst, src, nbytes)

    # peer copies: every pretend device's memory is host memory
    def can_access_peer(self, src: Runtime) -> bool:
        return isinstance(src, ReferenceRuntime)

    def memcpy_peer(self, dst: int, src_rt: Runtime, src: int, nbytes: int) -> None:
        self.memcpy("dtod", dst, src, nbytes)

    def view(self, ptr: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A numpy array over the memory at ``ptr`` (zero-copy; writable)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        block = self._blocks.get(ptr)
        if block is not None:  # a view of the block keeps its memory alive
            raw = block[:nbytes]
        elif nbytes == 0:
            raw = np.empty(0, np.uint8)
        else:  # memory from elsewhere (a DLPack producer), kept alive by its DeviceArray
            raw = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))
        return raw.view(dtype).reshape(shape)

    def host_array(self, a, what: str) -> np.ndarray:
        """The storage of this runtime's DeviceArray ``a`` as a numpy array (zero-copy)."""
        return self.view(a.live_ptr(what), a.shape, a.dtype)

    # streams: all work has finished when it is queued
    def stream_create(self, non_blocking: bool) -> int:
        return next(self._ids)

    def stream_destroy(self, h) -> None:
        pass

    def stream_synchronize(self, h, kernel: str | None = None) -> None:
        pass

    def stream_query(self, h) -> bool:
        return True

    def stream_wait(self, h, event) -> None:
        pass

    def foreign_stream(self, stream) -> int:
        if isinstance(stream, (int, np.integer)):  # a raw handle: every stream is ordered here
            return int(stream)
        handle = protocol_stream(stream)  # anything with __cuda_stream__, ordered here as well
        if handle is not None:
            return handle
        return super().foreign_stream(stream)

    # events: [time of the last record, or None]
    def event_create(self, timing: bool) -> list:
        return [None]

    def event_destroy(self, ev) -> None:
        pass

    def event_record(self, ev, h) -> None:
        ev[0] = time.perf_counter()

    def event_synchronize(self, ev) -> None:
        pass

    def event_query(self, ev) -> bool:
        return True

    def event_elapsed_ms(self, start, end) -> float:
        if start[0] is None or end[0] is None:
            raise ValueError("elapsed_time: both events must have been recorded")
        return (end[0] - start[0]) * 1e3

    # graphs
    def graph_begin(self, h) -> None:
        with self._lock:
            if h in self._captures:
                raise LaunchError(f"stream {h!r} is already being captured")
            self._captures[h] = []

    def record(self, h, launch) -> bool:
        """Record ``launch`` (a callable) when stream ``h`` is being captured; False otherwise."""
        rec = self._captures.get(h)
        if rec is None:
            return False
        rec.append(launch)
        return True

    def graph_end(self, h, keep: bool):
        with self._lock:
            launches = self._captures.pop(h)
        return _Replay(launches) if keep else None

    def graph_launch(self, exe, h) -> None:
        for launch in exe.launches:
            launch()

    def synchronize(self) -> None:
        pass

    def foreign_view(self, obj, what: str):
        raise TypeError(f"{what}: the reference backend cannot use GPU memory "
                        f"({type(obj).__name__}); pass numpy arrays or kaio device arrays")


_runtimes = one_per_device(ReferenceRuntime)


def runtime(device: int = 0) -> ReferenceRuntime:
    """The reference runtime of (pretend) device ``device``, one per device and process."""
    return _runtimes(device)
