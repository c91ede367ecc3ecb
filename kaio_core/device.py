"""The manual interface: device memory, pinned host memory, streams and events, on every backend.

    x = kaio.to_device(np.arange(n, dtype=np.float32))    # copy in once
    y = kaio.device_array(n, np.float32)                   # uninitialised device memory
    s = kaio.Stream()
    saxpy[grid, block, 0, s](2.0, x, y)                    # no copies, asynchronous
    s.synchronize()
    y.to_host()                                            # -> numpy array

Every object is made on the current backend's runtime (:mod:`kaio.backends.runtime`): CUDA
and HIP device memory on a GPU, host memory on the reference backend, where the same program
runs unchanged (launches there finish before they return). On CUDA a ``DeviceArray`` exports
``__cuda_array_interface__`` (v3), so CuPy, PyTorch and Numba can use it without a copy, and
kaio accepts their arrays the same way. Every host<->device copy kaio makes (explicit here, or
automatic in a GPU launch) is counted in :func:`transfer_stats`.
"""
from __future__ import annotations

import math

import numpy as np

from .backends.runtime import (  # noqa: F401  (re-exported: the public names live here)
    DeviceArray,
    Event,
    PinnedBlock,
    Stream,
    TransferStats,
    check_cuda_array_interface,
    current,
    np_dtype,
    shape_tuple,
    transfer_stats,
)


def device_array(shape, dtype) -> DeviceArray:
    """Uninitialised device memory of ``shape`` and ``dtype`` (numpy dtype or kaio dtype)."""
    return DeviceArray(shape, dtype)


def to_device(arr, stream=None) -> DeviceArray:
    """A device copy of a numpy array (made C-contiguous first if it is not)."""
    if isinstance(arr, DeviceArray) or hasattr(arr, "__cuda_array_interface__"):
        raise TypeError(f"to_device: {type(arr).__name__} is already in device memory; pass it to "
                        "kernels directly, or copy it with kaio.device_array(...).copy_(x)")
    arr = np.ascontiguousarray(arr)
    d = DeviceArray(arr.shape, arr.dtype)
    return d.copy_from_host(arr, stream)


def pinned_array(shape, dtype) -> np.ndarray:
    """A numpy array in page-locked host memory (fast, truly asynchronous copies; plain host
    memory on the reference backend); the memory is released when the last array using it is
    garbage-collected. Contents are uninitialised."""
    shape, npd = shape_tuple(shape), np_dtype(dtype)
    block = PinnedBlock(current(), math.prod(shape) * npd.itemsize)
    return np.asarray(block).view(npd).reshape(shape)


def is_pinned(arr: np.ndarray) -> bool:
    """Whether ``arr`` lies in memory from :func:`pinned_array`."""
    base = arr
    while base is not None:
        if isinstance(base, PinnedBlock):
            return True
        base = getattr(base, "base", None)
    return False


def synchronize() -> None:
    """Wait for all work on the current backend's device."""
    current().synchronize()
