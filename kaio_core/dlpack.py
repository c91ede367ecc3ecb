"""DLPack both ways, zero-copy: ``kaio.from_dlpack(x)`` -> DeviceArray here, and
``DeviceArray.__dlpack__`` (so ``torch.from_dlpack(kaio_array)`` and the like work) in
:mod:`kaio.backends.dlpack`, with the DLPack structures.

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

from .backends.dlpack import (  # noqa: F401  (export: kaio.dlpack.export)
    _DL_CODES,
    K_DL_CPU,
    K_DL_CUDA,
    K_DL_ROCM,
    _DLDataType,
    _DLManagedTensor,
    export,
)
from .device import DeviceArray, current


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
