"""numpy in place of a vendor BLAS, for :func:`kaio.blas.gemm` on the reference backend.

Takes numpy arrays and this backend's device arrays alike (their host storage, in place), so
code written for cuBLAS / hipBLAS with device arrays runs unchanged in CI.
"""
from __future__ import annotations

import numpy as np

from ...errors import LaunchError
from ..gemm import reference_gemm
from ..runtime import DeviceArray


class ReferenceBlas:
    """The reference backend's BLAS: float64 products rounded once (``kaio.backends.gemm.reference_gemm``)."""

    def __init__(self, runtime):
        self.runtime = runtime

    def _host(self, o) -> np.ndarray:
        v = o.value
        if isinstance(v, np.ndarray):
            return v
        what = f"kaio.blas.gemm: parameter '{o.name}'"
        if isinstance(v, DeviceArray) and v.runtime is self.runtime:
            return self.runtime.host_array(v, what)
        raise LaunchError(f"{what}: the reference backend takes numpy arrays and its own device "
                          f"arrays, got {type(v).__name__}")

    def gemm(self, A, B, C, alpha: float, beta: float, trans_a: bool, trans_b: bool,
             tf32: bool, stream) -> None:
        self.runtime.stream_handle(stream)  # a stream of another backend is an error here too
        a, b, c = self._host(A), self._host(B), self._host(C)
        c[...] = reference_gemm(a, b, c, alpha, beta, trans_a, trans_b, A.dtype)
