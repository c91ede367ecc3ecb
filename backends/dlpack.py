"""DLPack's C structures and the producer side: ``DeviceArray.__dlpack__`` (:func:`export`).

The consumer side (``kaio.from_dlpack``) is :mod:`kaio.dlpack`; both share the structures here.
"""
from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np

K_DL_CPU, K_DL_CUDA, K_DL_ROCM = 1, 2, 10
_DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 6: "bool"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]


# --- export: kaio arrays as DLPack capsules ----------------------------------------------------
# The producer side: ``DeviceArray.__dlpack__`` builds a DLManagedTensor whose manager_ctx keeps
# the array alive until the consumer calls the deleter (or, when no consumer took the capsule,
# until the capsule itself is destroyed).
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR)(
    ("PyCapsule_New", ctypes.pythonapi))
_IsValidAt = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_GetPointerAt = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_exported: dict[int, tuple] = {}  # DLManagedTensor address -> (struct, shape, owner): kept alive


def _dl_dtype(dtype: np.dtype) -> _DLDataType:
    if dtype == np.dtype(ml_dtypes.bfloat16):
        code = 4
    else:
        code = _CODES.get(dtype.kind)
        if code is None:
            raise BufferError(f"dtype {dtype} has no DLPack code")
    return _DLDataType(code, dtype.itemsize * 8, 1)


@_DELETER
def _release(managed) -> None:
    """The deleter consumers call when they are done with the memory."""
    _exported.pop(ctypes.cast(managed, ctypes.c_void_p).value, None)


@_DESTRUCTOR
def _capsule_gone(capsule: int) -> None:
    """An exported capsule no consumer renamed ('used_dltensor'): release what it holds."""
    if _IsValidAt(capsule, b"dltensor"):
        _exported.pop(_GetPointerAt(capsule, b"dltensor"), None)


def export(arr, stream=None, dl_device=None, copy=None):
    """A ``dltensor`` capsule over DeviceArray ``arr``'s memory (C-contiguous, no copy). On a GPU, ``stream``
    (the consumer's stream handle, DLPack's convention: None or 1 the legacy default stream, 2 the
    per-thread one, -1 no ordering) is made to wait for the work queued on kaio's default stream."""
    rt = arr.runtime
    device = arr.__dlpack_device__()
    if copy:
        raise BufferError("kaio arrays are exported without a copy (copy=True is not supported)")
    if dl_device is not None and tuple(int(d) for d in dl_device) != device:
        raise BufferError(f"the array is on DLPack device {device}, not {tuple(dl_device)}")
    if rt.dlpack_device == K_DL_CPU:
        if stream is not None:
            raise BufferError("stream must be None for host (reference backend) arrays")
    elif stream is not None and int(stream) not in (-1, 1, 2):
        ev = rt.event_create(False)  # order the consumer's stream after kaio's default stream
        try:
            rt.event_record(ev, rt.default_stream)
            rt.stream_wait(rt.foreign_stream(int(stream)), ev)
        finally:
            rt.event_destroy(ev)
    nd = arr.ndim
    shape = (ctypes.c_int64 * max(nd, 1))(*arr.shape)
    m = _DLManagedTensor()
    m.dl_tensor = _DLTensor(arr.live_ptr("__dlpack__") if arr.nbytes else arr.ptr, _DLDevice(*device),
                            nd, _dl_dtype(arr.dtype), shape, None, 0)
    m.deleter = _release
    addr = ctypes.addressof(m)
    _exported[addr] = (m, shape, arr)
    return _New(addr, _CAPSULE_NAME, _capsule_gone)


_CAPSULE_NAME = b"dltensor"
