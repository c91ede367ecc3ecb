"""hipBLAS for :func:`kaio.blas.gemm` on the HIP backend, through hip-python's ``hip.hipblas``.

Never executed: no AMD GPU exists where kaio is developed. The call mirrors the cuBLAS one
(:class:`kaio.backends.cublas.Cublas`: row-major operands swapped into the column-major call,
``hipblasGemmEx``, f32 accumulation for f16/bf16); enum values are read from hip-python by name
so they follow the installed hipBLAS (the v1 ``hipblasDatatype_t`` or the v2 ``hipDataType`` /
``hipblasComputeType_t`` spellings). The plumbing is tested against a stand-in module.
"""
from __future__ import annotations

import ctypes
import threading

from ..errors import BackendUnavailable, HipError
from .gemm import column_major_call
from .runtime import Transfers, gemm_pointers

_DATA = {"f16": ("HIP_R_16F", "HIPBLAS_R_16F"), "bf16": ("HIP_R_16BF", "HIPBLAS_R_16B"),
         "f32": ("HIP_R_32F", "HIPBLAS_R_32F"), "f64": ("HIP_R_64F", "HIPBLAS_R_64F")}
_COMPUTE = {"f32": ("HIPBLAS_COMPUTE_32F", "HIPBLAS_R_32F"),
            "f64": ("HIPBLAS_COMPUTE_64F", "HIPBLAS_R_64F")}

_hipblas_module = None


def hipblas_api():
    """hip-python's ``hip.hipblas`` (imported on first use; tests may substitute a stand-in)."""
    global _hipblas_module
    if _hipblas_module is None:
        try:
            from hip import hipblas as _b  # lazy: hip-python, optional
        except ImportError as e:
            raise BackendUnavailable(f"hipBLAS needs hip-python's hip.hipblas: {e}") from e
        _hipblas_module = _b
    return _hipblas_module


def _enum(mod, names, *type_names):
    """The first of ``names`` found in one of the enum classes ``type_names`` of ``mod`` (or of
    hip-python's ``hip.hip`` for hipDataType)."""
    holders = [getattr(mod, t, None) for t in type_names]
    try:
        from hip import hip as _h  # lazy: hip-python, optional
        holders.append(getattr(_h, "hipDataType", None))
    except ImportError:
        pass
    for holder in holders:
        for n in names:
            if holder is not None and hasattr(holder, n):
                return getattr(holder, n)
    raise BackendUnavailable(f"hip.hipblas has none of {names}: unsupported hip-python version")


def _ok(result, call: str):
    """hip-python returns (status, value...) tuples or a bare status."""
    status = result[0] if isinstance(result, tuple) else result
    if int(getattr(status, "value", status)) != 0:
        raise HipError(f"{call} failed: {status}")
    return result[1] if isinstance(result, tuple) and len(result) > 1 else None


class Hipblas:
    """One hipBLAS handle on a HIP backend's device."""

    def __init__(self, backend):
        self.backend = backend
        self.mod = hipblas_api()
        self.handle = _ok(self.mod.hipblasCreate(), "hipblasCreate")
        self.lock = threading.Lock()
        self._enums: dict = {}       # dtype name -> the enum values its gemm passes

    def enums(self, t: str):
        """(op N, op T, data type, compute type, algo) for dtype ``t``, looked up once."""
        got = self._enums.get(t)
        if got is None:
            mod = self.mod
            got = self._enums[t] = (
                _enum(mod, ("HIPBLAS_OP_N",), "hipblasOperation_t"),
                _enum(mod, ("HIPBLAS_OP_T",), "hipblasOperation_t"),
                _enum(mod, _DATA[t], "hipblasDatatype_t"),
                _enum(mod, _COMPUTE["f64" if t == "f64" else "f32"],
                      "hipblasComputeType_t", "hipblasDatatype_t"),
                _enum(mod, ("HIPBLAS_GEMM_DEFAULT",), "hipblasGemmAlgo_t"))
        return got

    def gemm(self, A, B, C, alpha: float, beta: float, trans_a: bool, trans_b: bool,
             tf32: bool, stream) -> None:
        cm = column_major_call(A.shape, B.shape, trans_a, trans_b)
        if cm.m == 0 or cm.n == 0:
            return
        mod, t = self.mod, A.dtype
        op_n, op_t, data, comp, algo = self.enums(t.name)
        op = lambda tr: op_t if tr else op_n   # noqa: E731
        scalar = ctypes.c_double if t.name == "f64" else ctypes.c_float
        al, be_ = scalar(alpha), scalar(beta)
        self.backend.make_current()
        rt = self.backend.runtime
        h = rt.stream_handle(stream)
        xfer = Transfers(rt, h)
        try:
            ptrs = gemm_pointers(rt, (A, B, C), beta, xfer)
            with self.lock:
                _ok(mod.hipblasSetStream(self.handle, h), "hipblasSetStream")
                _ok(mod.hipblasGemmEx(self.handle, op(cm.trans_first), op(cm.trans_second),
                                      cm.m, cm.n, cm.k, ctypes.addressof(al), ptrs[1], data,
                                      cm.ld_first, ptrs[0], data, cm.ld_second,
                                      ctypes.addressof(be_), ptrs[2], data, cm.ld_out, comp, algo),
                    "hipblasGemmEx")
            if xfer.temps:
                xfer.finish()
        finally:
            xfer.release()
