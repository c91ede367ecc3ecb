"""cuBLAS for :func:`kaio.blas.gemm` on the CUDA backend, through ctypes (no toolkit needed).

The library is looked up in this order: ``$KAIO_CUBLAS`` (a path), the NVIDIA pip wheels on
``sys.path`` (``nvidia/cu13/lib``, ``nvidia/cublas/lib``: what PyPI's torch and cupy install),
``ctypes.util.find_library("cublas")``, then the usual sonames and ``/usr/local/cuda/lib64``.
Every call goes through ``cublasGemmEx`` on the backend's context and the caller's stream.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
import threading

from ..config import settings
from ..errors import BackendUnavailable, CudaError
from .gemm import column_major_call
from .runtime import Transfers, gemm_pointers

# enums from cublas_api.h / library_types.h
OP_N, OP_T = 0, 1
CUDA_R = {"f32": 0, "f64": 1, "f16": 2, "bf16": 14}
COMPUTE_32F, COMPUTE_64F, COMPUTE_32F_FAST_TF32 = 68, 70, 77
GEMM_DEFAULT = -1
SONAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so")


def find_cublas() -> str:
    """Path (or soname) of a loadable libcublas; BackendUnavailable saying how to get one."""
    env = settings().cublas
    if env:
        if os.path.isfile(env):
            return env
        raise BackendUnavailable(f"KAIO_CUBLAS={env!r} is not a file")
    for root in sys.path:
        for pattern in ("nvidia/cu*/lib/libcublas.so*", "nvidia/cublas/lib/libcublas.so*"):
            hits = sorted(glob.glob(os.path.join(root or ".", pattern)), reverse=True)
            if hits:
                return hits[0]
    candidates = [ctypes.util.find_library("cublas")] + list(SONAMES) + \
        [f"/usr/local/cuda/lib64/{s}" for s in SONAMES]
    for c in candidates:
        if not c:
            continue
        try:
            ctypes.CDLL(c)
            return c
        except OSError:
            continue
    raise BackendUnavailable("cuBLAS (libcublas) was not found: `pip install nvidia-cublas-cu12` "
                             "(or a CUDA toolkit), or point KAIO_CUBLAS at libcublas.so")


class Cublas:
    """One cuBLAS handle on a CUDA backend's context."""

    def __init__(self, backend):
        self.backend = backend
        self.path = find_cublas()
        lib = ctypes.CDLL(self.path)
        vp, i = ctypes.c_void_p, ctypes.c_int
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasGemmEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, vp, i, i, vp, vp, i, i, i, i]
        lib.cublasGetStatusName.restype = ctypes.c_char_p
        lib.cublasGetStatusName.argtypes = [i]
        for fn in (lib.cublasCreate_v2, lib.cublasSetStream_v2, lib.cublasGemmEx):
            fn.restype = i
        self.lib = lib
        backend.ctx.make_current()
        handle = vp()
        self._check(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate_v2")
        self.handle = handle
        self.lock = threading.Lock()      # a handle is bound to one stream at a time

    def _check(self, status: int, call: str) -> None:
        if status != 0:
            name = self.lib.cublasGetStatusName(status).decode()
            raise CudaError(f"{call} failed: {name}", call=call, code=status)

    def gemm(self, A, B, C, alpha: float, beta: float, trans_a: bool, trans_b: bool,
             tf32: bool, stream) -> None:
        call = column_major_call(A.shape, B.shape, trans_a, trans_b)
        if call.m == 0 or call.n == 0:
            return
        t = A.dtype
        scalar = ctypes.c_double if t.name == "f64" else ctypes.c_float
        compute = COMPUTE_64F if t.name == "f64" else \
            COMPUTE_32F_FAST_TF32 if (tf32 and t.name == "f32") else COMPUTE_32F
        al, be_ = scalar(alpha), scalar(beta)
        self.backend.ctx.make_current()
        rt = self.backend.runtime
        hstream = rt.stream_handle(stream)
        xfer = Transfers(rt, hstream)
        try:
            ptrs = gemm_pointers(rt, (A, B, C), beta, xfer)
            with self.lock:
                self._check(self.lib.cublasSetStream_v2(self.handle, hstream or None),
                            "cublasSetStream_v2")
                self._check(self.lib.cublasGemmEx(
                    self.handle, OP_T if call.trans_first else OP_N,
                    OP_T if call.trans_second else OP_N, call.m, call.n, call.k,
                    ctypes.byref(al), ptrs[1], CUDA_R[t.name], call.ld_first,
                    ptrs[0], CUDA_R[t.name], call.ld_second, ctypes.byref(be_),
                    ptrs[2], CUDA_R[t.name], call.ld_out, compute, GEMM_DEFAULT), "cublasGemmEx")
            if xfer.temps:
                xfer.finish()
        finally:
            xfer.release()
