"""DLPack both ways, zero-copy: ``kaio.from_dlpack(x)`` -> DeviceArray, and :func:`export`
behind ``DeviceArray.__dlpack__`` (so ``torch.from_dlpack(kaio_array)`` and the like work).

For libraries that export ``__dlpack__`` but not ``__cuda_array_interface__`` (JAX, for one).
The consumer side of the protocol: ask the producer for a capsule ordered on the legacy default
stream, read the ``DLManagedTensor`` it holds, mark the capsule used, and call the producer's
deleter when the returned DeviceArray is garbage-collected. Only C-contiguous tensors of a kaio
dtype on the current backend's device are accepted: CUDA tensors on CUDA, ROCm tensors on HIP,
CPU tensors (numpy, torch on the CPU) on the reference backend, whose device memory is host
memory.
"""
from __future__ import annotations

import ctypes
import weakref

import ml_dtypes
import numpy as np

from .device import DeviceArray, current

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


def _capi(name: str, restype):
    # a private prototype: setting argtypes on ctypes.pythonapi's shared function objects
    # would change them for every other library in the process
    return ctypes.PYFUNCTYPE(restype, ctypes.py_object, ctypes.c_char_p)((name, ctypes.pythonapi))


_GetPointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p)
_SetName = _capi("PyCapsule_SetName", ctypes.c_int)
_IsValid = _capi("PyCapsule_IsValid", ctypes.c_int)


def _np_dtype(dt: _DLDataType) -> np.dtype:
    kind = _DL_CODES.get(dt.code)
    if dt.lanes != 1 or kind is None:
        raise ValueError(f"DLPack dtype code {dt.code} bits {dt.bits} lanes {dt.lanes} has no kaio dtype")
    if kind == "bfloat" and dt.bits == 16:
        return np.dtype(ml_dtypes.bfloat16)
    if kind == "bool":
        return np.dtype(np.bool_)
    return np.dtype({"int": "i", "uint": "u", "float": "f", "bfloat": "V"}[kind] + str(dt.bits // 8))


def read_capsule(capsule) -> dict:
    """The fields of an unversioned ``dltensor`` capsule (not consumed): device_type,
    device_id, ptr (data + byte_offset), shape, strides (elements, or None), dtype, managed."""
    if not _IsValid(capsule, b"dltensor"):
        raise ValueError("not an unused DLPack 'dltensor' capsule")
    addr = _GetPointer(capsule, b"dltensor")
    m = _DLManagedTensor.from_address(addr)
    t = m.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    return {"device_type": t.device.device_type, "device_id": t.device.device_id,
            "ptr": (t.data or 0) + t.byte_offset, "shape": shape, "strides": strides,
            "dtype": _np_dtype(t.dtype), "managed": addr}


def _delete(addr: int) -> None:
    m = _DLManagedTensor.from_address(addr)
    if m.deleter:
        m.deleter(ctypes.cast(addr, ctypes.POINTER(_DLManagedTensor)))


def from_dlpack(obj):
    """A DeviceArray sharing memory with a tensor that exports ``__dlpack__`` (on the current
    backend's device: see the module docstring)."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{type(obj).__name__} does not export __dlpack__")
    rt = current()
    want = rt.dlpack_device
    where = f"DLPack device type {want} ({rt.name})"
    dev = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else None
    if dev is not None and int(dev[0]) != want:
        raise ValueError(f"from_dlpack: the tensor is on DLPack device type {int(dev[0])}, not "
                         f"{where}; pass host arrays to kernels directly or use kaio.to_device")
    # on a GPU, stream=1 asks the producer to order its pending work before the legacy stream
    capsule = obj.__dlpack__(stream=1 if dev is not None and want != K_DL_CPU else None)
    info = read_capsule(capsule)
    if info["device_type"] != want:
        raise ValueError(f"from_dlpack: tensor is on DLPack device type {info['device_type']}, "
                         f"not {where}")
    shape, strides = info["shape"], info["strides"]
    if strides is not None:
        acc = 1
        for st, sh in zip(reversed(strides), reversed(shape)):
            if sh > 1 and st != acc:
                raise ValueError(f"from_dlpack: tensor is not C-contiguous (strides {strides}, "
                                 f"shape {shape})")
            acc *= sh
    _SetName(capsule, b"used_dltensor")  # we own it now: the capsule must not free it
    holder = _Holder(info["managed"])
    return DeviceArray(shape, info["dtype"], runtime=rt, _ptr=info["ptr"], _owner=holder)


class _Holder:
    """Calls the producer's deleter when the last DeviceArray view goes away."""

    def __init__(self, managed: int):
        weakref.finalize(self, _delete, managed)


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


def export(arr: DeviceArray, stream=None, dl_device=None, copy=None):
    """A ``dltensor`` capsule over ``arr``'s memory (C-contiguous, no copy). On a GPU, ``stream``
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
