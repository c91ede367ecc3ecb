"""cuBLAS for :func:`kaio.blas.gemm` on the CUDA backend (no toolkit needed).

The library is reached through nvmath-python or kaio's own ctypes declarations
(:mod:`kaio.backends.cublas_bindings` says which and why; ``kaio info`` shows it). Every call goes
through ``cublasGemmEx`` on the backend's context and the caller's stream, with the arguments
:func:`gemm_args` builds from the row-major call's :class:`~kaio.backends.gemm.GemmCall`.
"""
from __future__ import annotations

import ctypes
import threading

from .cublas_bindings import find_cublas, open_binding  # noqa: F401  (find_cublas: public here)
from .gemm import GemmCall, column_major_call
from .runtime import Transfers, gemm_pointers

# enums from cublas_api.h / library_types.h
OP_N, OP_T = 0, 1
CUDA_R = {"f32": 0, "f64": 1, "f16": 2, "bf16": 14}
COMPUTE_32F, COMPUTE_64F, COMPUTE_32F_FAST_TF32 = 68, 70, 77
GEMM_DEFAULT = -1


def gemm_args(call: GemmCall, t: str, tf32: bool, ptrs, alpha: int, beta: int) -> tuple:
    """``cublasGemmEx``'s arguments after the handle, as integers, for dtype ``t``: ``ptrs``
    are the device addresses of a, b, out and ``alpha``/``beta`` the host addresses of the
    scalars (f64 for f64, else f32). Both bindings receive exactly this tuple."""
    r = CUDA_R[t]
    compute = COMPUTE_64F if t == "f64" else \
        COMPUTE_32F_FAST_TF32 if (tf32 and t == "f32") else COMPUTE_32F
    return (OP_T if call.trans_first else OP_N, OP_T if call.trans_second else OP_N,
            call.m, call.n, call.k, alpha, ptrs[1], r, call.ld_first, ptrs[0], r, call.ld_second,
            beta, ptrs[2], r, call.ld_out, compute, GEMM_DEFAULT)


class Cublas:
    """One cuBLAS handle on a CUDA backend's context, through :attr:`binding`."""

    def __init__(self, backend):
        self.backend = backend
        self.binding = open_binding()
        self.path = getattr(self.binding, "path", None)
        backend.ctx.make_current()
        self.handle = self.binding.create()
        self.stream = None                # the stream the handle is bound to (set when it changes)
        self.lock = threading.Lock()      # a handle is bound to one stream at a time

    def gemm(self, A, B, C, alpha: float, beta: float, trans_a: bool, trans_b: bool,
             tf32: bool, stream) -> None:
        call = column_major_call(A.shape, B.shape, trans_a, trans_b)
        if call.m == 0 or call.n == 0:
            return
        t = A.dtype.name
        scalar = ctypes.c_double if t == "f64" else ctypes.c_float
        al, be_ = scalar(alpha), scalar(beta)
        self.backend.ctx.make_current()
        rt = self.backend.runtime
        hstream = rt.stream_handle(stream)
        xfer = Transfers(rt, hstream)
        try:
            ptrs = gemm_pointers(rt, (A, B, C), beta, xfer)
            args = gemm_args(call, t, tf32, ptrs, ctypes.addressof(al), ctypes.addressof(be_))
            with self.lock:
                if hstream != self.stream:
                    self.binding.set_stream(self.handle, hstream)
                    self.stream = hstream
                self.binding.gemm_ex(self.handle, *args)
            if xfer.temps:
                xfer.finish()
        finally:
            xfer.release()
