"""Vendor BLAS: matrix products by cuBLAS (NVIDIA) or hipBLAS (AMD), numpy on the reference backend.

    c = kaio.blas.gemm(a, b)                               # numpy in, numpy out (copies both ways)
    kaio.blas.gemm(a_dev, b_dev, out=c_dev, alpha=2.0, beta=1.0, trans_b=True, stream=s)

``gemm`` computes ``out = alpha * op(a) @ op(b) + beta * out`` on row-major (C-contiguous) 2-d
arrays, where ``op(x)`` is ``x.T`` when ``trans_x`` is set. Arguments follow the launch rules
of kernels: numpy arrays are copied to the device and ``out`` back (nothing is copied in for
``out`` when ``beta == 0``); kaio device arrays and objects exporting
``__cuda_array_interface__`` (PyTorch, CuPy) are used in place. Every argument is checked before
anything is copied or launched, and a bad one raises :class:`kaio.LaunchError` naming the
parameter and what was expected. On cuBLAS, calls on kaio device arrays are checked in full once
per signature (shapes, dtype, transposes, ``tf32``, the scalars' types); later ones re-check only
what depends on the arrays themselves (:func:`gemm_plan`), which keeps the call cost near the
binding's own.

Precision: f64 and f32 compute in their own precision (``tf32=True`` lets cuBLAS use TF32 tensor
cores for f32); f16 and bf16 multiply in tensor cores and accumulate in f32. The reference
backend computes in float64 and rounds once, so it is at least as accurate as any vendor result.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes as dt
from .backends import get_backend
from .backends.launch_checks import overlaps
from .device import DeviceArray, check_cuda_array_interface
from .errors import LaunchError

GEMM_DTYPES = (dt.f16, dt.bf16, dt.f32, dt.f64)
MAX_PLANS = 256   # signatures kept per BLAS handle (all are dropped when it fills)


@dataclass
class Operand:
    """A checked gemm argument: its kaio dtype, shape and the object given."""
    name: str
    value: object
    dtype: dt.DType
    shape: tuple

    @property
    def on_host(self) -> bool:
        return isinstance(self.value, np.ndarray)


_KAIO_DTYPES: dict = {}   # numpy dtype -> kaio dtype or None: dt.from_numpy scans every dtype


def _kaio_dtype(npd) -> dt.DType | None:
    t = _KAIO_DTYPES.get(npd, False)
    if t is False:
        try:
            t = dt.from_numpy(npd)
        except (KeyError, TypeError, ValueError):
            t = None
        _KAIO_DTYPES[npd] = t
    return t


def _describe(value) -> tuple[dt.DType | None, tuple | None, bool]:
    """(kaio dtype or None, shape, C-contiguous) of an array argument."""
    if isinstance(value, np.ndarray):
        return _kaio_dtype(value.dtype), value.shape, bool(value.flags.c_contiguous)
    if isinstance(value, DeviceArray):   # any backend's (always C-contiguous)
        return _kaio_dtype(value.dtype), tuple(value.shape), True
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        try:
            npd, shape = check_cuda_array_interface(cai, "gemm argument")
        except ValueError:
            return None, tuple(cai.get("shape", ())), False
        return _kaio_dtype(np.dtype(npd)), tuple(shape), True
    return None, None, False


def _operand(name: str, value) -> Operand:
    t, shape, contiguous = _describe(value)
    if shape is not None and len(shape) == 2 and contiguous and t in GEMM_DTYPES:
        return Operand(name, value, t, tuple(map(int, shape)))
    what = f"kaio.blas.gemm: parameter '{name}'"   # only now: this runs on every call
    if shape is None:
        raise LaunchError(f"{what} expects a numpy array, a kaio device array or a CUDA array "
                          f"(PyTorch/CuPy), got {type(value).__name__}")
    if len(shape) != 2:
        raise LaunchError(f"{what} expects a 2-d matrix, got shape {tuple(shape)}")
    if not contiguous:
        raise LaunchError(f"{what} expects a C-contiguous (row-major) matrix; pass "
                          f"numpy.ascontiguousarray(...) or use trans_a/trans_b for a transpose")
    raise LaunchError(f"{what} expects f16, bf16, f32 or f64 elements, got "
                      f"{t.name if t else getattr(value, 'dtype', '?')}")


def check_gemm(a, b, out, alpha, beta, trans_a, trans_b) -> tuple[Operand, Operand, Operand | None]:
    """Check every gemm argument (raises LaunchError); returns the operands."""
    A, B = _operand("a", a), _operand("b", b)
    C = _operand("out", out) if out is not None else None
    if B.dtype is not A.dtype or (C is not None and C.dtype is not A.dtype):
        got = ", ".join(f"{o.name}: {o.dtype.name}" for o in (A, B, C) if o is not None)
        raise LaunchError(f"kaio.blas.gemm: a, b and out must have one dtype, got {got}")
    m, k = (A.shape[1], A.shape[0]) if trans_a else A.shape
    k2, n = (B.shape[1], B.shape[0]) if trans_b else B.shape
    if k != k2:
        raise LaunchError(f"kaio.blas.gemm: parameter 'b': op(a) is {m}x{k} so op(b) needs {k} "
                          f"rows, got {k2}x{n} (shape {B.shape}, trans_b={trans_b})")
    if C is not None and C.shape != (m, n):
        raise LaunchError(f"kaio.blas.gemm: parameter 'out' must have shape ({m}, {n}), got {C.shape}")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise LaunchError(f"kaio.blas.gemm: parameter '{name}' must be a real number, got {v!r}")
    if beta != 0 and C is None:
        raise LaunchError("kaio.blas.gemm: parameter 'beta' is nonzero, so 'out' (the matrix it "
                          "scales) must be given")
    for o in (A, B, C):
        if o is not None and isinstance(o.value, DeviceArray) and o.value.ptr == 0 and o.value.nbytes:
            raise LaunchError(f"kaio.blas.gemm: parameter '{o.name}': the device array was freed")
    hosts = {o.on_host for o in (A, B, C) if o is not None}
    if len(hosts) > 1:
        raise LaunchError("kaio.blas.gemm: mix of numpy and device arrays; pass all on the host "
                          "(copied for you) or all on the device")
    for x, y in ((A, C), (B, C)):  # by memory, for every kind of array (views included)
        if y is not None and overlaps(x.value, y.value):
            raise LaunchError(f"kaio.blas.gemm: parameter 'out' overlaps '{x.name}'")
    return A, B, C


def gemm(a, b, out=None, *, alpha=1.0, beta=0.0, trans_a: bool = False, trans_b: bool = False,
         tf32: bool = False, backend=None, stream=None):
    """``out = alpha * op(a) @ op(b) + beta * out`` by the backend's vendor BLAS; returns ``out``
    (a new array of the inputs' kind when not given). See the module docstring."""
    be = backend if backend is not None and not isinstance(backend, str) else get_backend(backend)
    key = plans = None
    if type(out) is DeviceArray and type(a) is DeviceArray and type(b) is DeviceArray:
        blas = be.blas()
        plans = getattr(blas, "plans", None)   # None: the backend's BLAS does not plan
    if plans is not None:
        key = (a.shape, b.shape, out.shape, a.dtype, trans_a, trans_b, tf32, type(alpha), type(beta))
        try:
            plan = plans.get(key)
        except TypeError:   # an unhashable flag: the checked path takes it, unplanned
            plan = key = None
        if plan is not None and plan(a, b, out, alpha, beta, stream):
            return out
    A, B, C = check_gemm(a, b, out, alpha, beta, bool(trans_a), bool(trans_b))
    m = A.shape[1] if trans_a else A.shape[0]
    n = B.shape[0] if trans_b else B.shape[1]
    if C is None:
        C = _new_out(A, (m, n), be)
    blas = be.blas()
    if key is not None:   # checked device arrays: plan the calls that repeat this one
        if len(plans) >= MAX_PLANS:
            plans.clear()
        plan = plans[key] = gemm_plan(be.runtime, A, B, C, blas.prepare(
            A.shape, B.shape, A.dtype, bool(trans_a), bool(trans_b), bool(tf32)))
        if plan(a, b, out, alpha, beta, stream):
            return out
    blas.gemm(A, B, C, float(alpha), float(beta), bool(trans_a), bool(trans_b), bool(tf32), stream)
    return C.value


def gemm_plan(rt, A: Operand, B: Operand, C: Operand, run):
    """The plan of every :func:`gemm` call with the signature of checked device-array operands
    ``A``, ``B``, ``C`` (shapes, dtype, transposes, tf32, the scalars' types): ``plan(a, b, out,
    alpha, beta, stream)`` calls the backend's prepared ``run(a_ptr, b_ptr, out_ptr, alpha, beta,
    stream)`` and returns True when what still depends on the arrays themselves passes (each on
    ``rt``, one dtype, none freed, out neither an input nor overlapping one); else it returns
    False without launching, and the caller takes the checked path, which raises naming the
    parameter. A closure: its cells are the cheapest state a Python call can read."""
    dtype = A.value.dtype
    na, nb, nc = A.value.nbytes, B.value.nbytes, C.value.nbytes

    def plan(a, b, out, alpha, beta, stream) -> bool:
        pa, pb, pc = a.ptr, b.ptr, out.ptr
        if (a.runtime is rt and b.runtime is rt and out.runtime is rt
                and b.dtype is dtype and out.dtype is dtype
                and (pa or not na) and (pb or not nb) and (pc or not nc)   # freed: ptr 0
                and out is not a and out is not b    # then by address range, as overlaps() does
                and (not na or not nc or pa >= pc + nc or pc >= pa + na)
                and (not nb or not nc or pb >= pc + nc or pc >= pb + nb)):
            run(pa, pb, pc, alpha, beta, stream)
            return True
        return False
    return plan


def _new_out(A: Operand, shape, be) -> Operand:
    if A.on_host:
        return Operand("out", np.zeros(shape, A.dtype.storage_np), A.dtype, shape)
    return Operand("out", DeviceArray(shape, A.dtype.storage_np, runtime=be.runtime), A.dtype, shape)
