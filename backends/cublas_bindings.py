"""The two ways :class:`kaio.backends.cublas.Cublas` reaches cuBLAS, and which one it takes.

- ``nvmath``: NVIDIA's nvmath-python (``nvmath.bindings.cublas``, compiled Cython), which finds
  libcublas itself (the ``nvidia-cublas`` wheel, then the system's; cuda-pathfinder's order).
- ``ctypes``: kaio's own declarations of the three entry points it calls, on the libcublas
  :func:`find_cublas` locates (``$KAIO_CUBLAS`` first). Needs nothing beyond the library.

Both expose ``create() -> handle``, ``set_stream(handle, stream)`` and ``gemm_ex(handle, *args)``
taking the same integers (pointers as addresses), and raise :class:`kaio.CudaError` on a failed
status, so :class:`Cublas` is written once. ``KAIO_CUBLAS_BINDING=ctypes|nvmath`` forces one;
otherwise :data:`PREFERRED_BINDING` is taken when it works, else ctypes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys

from ..config import settings
from ..errors import BackendUnavailable, CudaError

#: The binding used when KAIO_CUBLAS_BINDING is unset. "nvmath": nvmath-python when it imports
#: and loads libcublas, else ctypes; "ctypes": always ctypes. Chosen by kaio.blas.gemm's call
#: overhead with each (benchmarks/blas_overhead.py; docs/backends.md): nvmath is the default only
#: while its call costs at most a few microseconds more than the ctypes one. On the H200
#: (2026-12-01) it cost 5 us less per kaio.blas.gemm (35 vs 40 us) and its GPU tests passed.
PREFERRED_BINDING = "nvmath"
BINDINGS = ("nvmath", "ctypes")
SONAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so")

_nvmath_module = None     # nvmath.bindings.cublas once imported (tests substitute a stand-in)


def find_cublas() -> str:
    """Path (or soname) of a loadable libcublas; BackendUnavailable saying how to get one.

    In order: ``$KAIO_CUBLAS`` (a path), the NVIDIA pip wheels on ``sys.path``
    (``nvidia/cu13/lib``, ``nvidia/cublas/lib``), ``ctypes.util.find_library("cublas")``, then the
    usual sonames and ``/usr/local/cuda/lib64``."""
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
    raise BackendUnavailable("cuBLAS (libcublas) was not found: `pip install nvidia-cublas` "
                             "(or a CUDA toolkit), or point KAIO_CUBLAS at libcublas.so")


def load_library(path: str):
    """The ctypes handle on libcublas at ``path`` (tests substitute a stand-in)."""
    return ctypes.CDLL(path)


class CtypesBinding:
    """cuBLAS through ctypes declarations of the entry points kaio calls."""

    name = "ctypes"
    why = ""

    def __init__(self):
        self.path = find_cublas()
        self.detail = self.path
        lib = load_library(self.path)
        vp, i = ctypes.c_void_p, ctypes.c_int
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasGemmEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, vp, i, i, vp, vp, i, i, i, i]
        lib.cublasGetStatusName.restype = ctypes.c_char_p
        lib.cublasGetStatusName.argtypes = [i]
        for fn in (lib.cublasCreate_v2, lib.cublasSetStream_v2, lib.cublasGemmEx):
            fn.restype = i
        self.lib = lib

    def _check(self, status: int, call: str) -> None:
        if status != 0:
            name = self.lib.cublasGetStatusName(status).decode()
            raise CudaError(f"{call} failed: {name}", call=call, code=status)

    def create(self) -> int:
        handle = ctypes.c_void_p()
        self._check(self.lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate_v2")
        return handle.value

    def set_stream(self, handle: int, stream: int) -> None:
        self._check(self.lib.cublasSetStream_v2(handle, stream or None), "cublasSetStream_v2")

    def gemm_ex(self, handle: int, *args) -> None:
        status = self.lib.cublasGemmEx(handle, *args)
        if status:
            self._check(status, "cublasGemmEx")


def nvmath_cublas():
    """``nvmath.bindings.cublas``; BackendUnavailable when nvmath-python is missing."""
    global _nvmath_module
    if _nvmath_module is None:
        try:
            from nvmath.bindings import cublas as _c  # lazy: nvmath-python, optional
        except ImportError as e:
            raise BackendUnavailable(f"nvmath-python is not installed ({e}): "
                                     "`pip install nvmath-python`") from e
        _nvmath_module = _c
    return _nvmath_module


def _nvmath_error(e: Exception, call: str) -> CudaError:
    status = getattr(e, "status", None)
    return CudaError(f"{call} failed: {e}", call=call, code=int(status) if status is not None else None)


class NvmathBinding:
    """cuBLAS through nvmath-python's ``nvmath.bindings.cublas``."""

    name = "nvmath"
    why = ""

    def __init__(self):
        mod = nvmath_cublas()
        try:
            version = mod.get_cudart_version()   # loads libcublas and the driver: "it works"
        except Exception as e:  # nvmath raises its own types (NotSupportedError, RuntimeError, ...)
            raise BackendUnavailable(f"nvmath-python cannot load cuBLAS: {type(e).__name__}: {e}") from e
        self.mod = mod
        self.errors = getattr(mod, "cuBLASError", RuntimeError)
        try:   # libraryPropertyType: major, minor, patch
            lib = "cuBLAS " + ".".join(str(int(mod.get_property(i))) for i in range(3))
        except Exception:  # only for the description: the version it was built for will do
            lib = f"cuBLAS for CUDA runtime {version}"
        self.detail = f"nvmath-python {_version()}, {lib}"

    def create(self) -> int:
        try:
            return int(self.mod.create())
        except self.errors as e:
            raise _nvmath_error(e, "cublasCreate_v2") from None

    def set_stream(self, handle: int, stream: int) -> None:
        try:
            self.mod.set_stream(handle, stream or 0)
        except self.errors as e:
            raise _nvmath_error(e, "cublasSetStream_v2") from None

    def gemm_ex(self, handle: int, *args) -> None:
        try:
            self.mod.gemm_ex(handle, *args)
        except self.errors as e:
            raise _nvmath_error(e, "cublasGemmEx") from None


def _version() -> str:
    try:
        import nvmath  # lazy: optional
        return str(getattr(nvmath, "__version__", "?"))
    except ImportError:
        return "?"


def choose() -> tuple[str, str, bool]:
    """(binding name, why, forced) by KAIO_CUBLAS_BINDING, KAIO_CUBLAS and
    :data:`PREFERRED_BINDING`, without loading anything."""
    s = settings()
    if s.cublas_binding:
        return s.cublas_binding, f"KAIO_CUBLAS_BINDING={s.cublas_binding}", True
    if s.cublas:
        return "ctypes", "KAIO_CUBLAS names the library, which the ctypes binding loads", False
    return PREFERRED_BINDING, "the default", False


def open_binding():
    """The binding :class:`Cublas` uses: the chosen one, or ctypes when the default nvmath one
    does not work here (a forced one that fails raises BackendUnavailable). Its ``why`` says
    how it was chosen."""
    name, why, forced = choose()
    if name == "nvmath":
        try:
            b = NvmathBinding()
        except BackendUnavailable as e:
            if forced:
                raise BackendUnavailable(f"KAIO_CUBLAS_BINDING=nvmath: {e}") from e
            name, why = "ctypes", f"nvmath unusable: {e}"
    if name == "ctypes":
        b = CtypesBinding()
    b.why = why
    return b


def summary() -> str:
    """One line for ``kaio info``: the binding kaio.blas would use here, its library and why."""
    try:
        b = open_binding()
    except BackendUnavailable as e:
        return f"{choose()[0]}: unavailable ({e})"
    return f"{b.name}: {b.detail} ({b.why})"
