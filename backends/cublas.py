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
    """One cuBLAS handle on a CUDA backend's context, through :attr:`binding`.

    :attr:`plans` is :func:`kaio.blas.gemm`'s cache of checked call signatures on this handle;
    each holds a call :meth:`prepare` built once."""

    def __init__(self, backend):
        self.backend = backend
        self.binding = open_binding()
        self.path = getattr(self.binding, "path", None)
        backend.ctx.make_current()
        self.handle = self.binding.create()
        self.stream = None                # the stream the handle is bound to (set when it changes)
        self.lock = threading.Lock()      # a handle is bound to one stream at a time
        # alpha and beta for cublasGemmEx (host pointer mode: read during the call), written
        # under the lock: f32 for f16/bf16/f32, f64 for f64
        self.scalars = {"f32": (ctypes.c_float * 2)(), "f64": (ctypes.c_double * 2)()}
        self.plans: dict = {}

    def prepare(self, a_shape, b_shape, t, trans_a: bool, trans_b: bool, tf32: bool):
        """``run(a_ptr, b_ptr, out_ptr, alpha, beta, stream)``: the cublasGemmEx of a checked
        row-major call of these shapes and kaio dtype ``t``, everything but the pointers, the
        scalars' values and the stream computed now."""
        call = column_major_call(a_shape, b_shape, trans_a, trans_b)
        ctx, rt = self.backend.ctx, self.backend.runtime
        if call.m == 0 or call.n == 0:
            def run(pa, pb, pc, alpha, beta, stream) -> None:
                rt.stream_handle(stream)      # still checked: a bad stream is an error
            return run
        sc = self.scalars["f64" if t.name == "f64" else "f32"]
        args = gemm_args(call, t.name, tf32, (0, 0, 0), ctypes.addressof(sc),
                         ctypes.addressof(sc) + ctypes.sizeof(sc) // 2)
        # the arguments around the pointers (b's buffer first: see GemmCall)
        head, mid1, mid2, tail = args[:6], args[7:9], args[10:13], args[14:]
        lock, handle, gemm_ex = self.lock, self.handle, self.binding.gemm_ex

        def run(pa, pb, pc, alpha, beta, stream) -> None:
            ctx.make_current()
            hstream = rt.stream_handle(stream)
            with lock:
                sc[0] = float(alpha)
                sc[1] = float(beta)
                if hstream != self.stream:
                    self.binding.set_stream(handle, hstream)
                    self.stream = hstream
                gemm_ex(handle, *head, pb, *mid1, pa, *mid2, pc, *tail)
        return run

    def gemm(self, A, B, C, alpha: float, beta: float, trans_a: bool, trans_b: bool,
             tf32: bool, stream) -> None:
        """The general path (numpy operands copied through temporaries, foreign arrays)."""
        self.backend.ctx.make_current()
        rt = self.backend.runtime
        hstream = rt.stream_handle(stream)
        if 0 in C.shape:      # nothing to compute (nor to copy)
            return
        run = self.prepare(A.shape, B.shape, A.dtype, trans_a, trans_b, tf32)
        xfer = Transfers(rt, hstream)
        try:
            pa, pb, pc = gemm_pointers(rt, (A, B, C), beta, xfer)
            run(pa, pb, pc, alpha, beta, stream)
            if xfer.temps:
                xfer.finish()
        finally:
            xfer.release()
