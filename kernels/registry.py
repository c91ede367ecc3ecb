"""What a library kernel is (:class:`KernelCase`, its :class:`Tolerance`, :func:`compare`) and
the registry the library's modules add their cases to (:func:`register`); :mod:`kaio.kernels`
imports those modules and looks cases up.
"""
from __future__ import annotations

from dataclasses import field
from typing import Any, Callable

import numpy as np

from kaio.records import frozen, record


@frozen
class Tolerance:
    """Pass when ``|out - ref| <= atol + rtol * |ref|`` elementwise (``exact``: bitwise equal).

    ``why`` states where the bound comes from (rounding of the output dtype, accumulation
    order, approximated math); every case must give one.
    """

    atol: float = 0.0
    rtol: float = 0.0
    exact: bool = False
    why: str = ""

    def describe(self) -> str:
        if self.exact:
            return "exact"
        return f"atol={self.atol:g} rtol={self.rtol:g}"


@record
class KernelCase:
    """One library kernel, ready to run, validate and time.

    - ``make_inputs(size, seed) -> dict`` builds host arrays (numpy) and scalars;
    - ``run(inputs) -> dict`` runs the kaio kernel(s) on the current backend and returns outputs
      (it must not modify ``inputs``: cases copy what their kernels update in place);
    - ``reference(inputs) -> dict`` computes the same outputs with numpy (float64 where
      precision matters);
    - ``flops(size)`` / ``bytes(size)``: work per ``run`` call, for TFLOP/s and GB/s;
    - ``checksum(outputs)``: the RAJAPerf checksum of the outputs (RAJAPerf ports only);
    - ``bench(inputs) -> launch``: optional; copies the inputs to the device once and returns a
      function that only launches the kernel(s) on device-resident data, so a runner can time
      the kernels without host<->device copies (needs a backend with device arrays).
    """

    name: str
    group: str
    make_inputs: Callable[[Any, int], dict]
    run: Callable[[dict], dict]
    reference: Callable[[dict], dict]
    default_size: Any
    small_size: Any
    tolerance: Tolerance
    flops: Callable[[Any], float] = lambda size: 0.0
    bytes: Callable[[Any], float] = lambda size: 0.0
    description: str = ""
    reps: int = 1
    checksum: Callable[[dict], float] | None = None
    checksum_rtol: float | None = None
    bench: Callable[[dict], Callable[[], None]] | None = None
    tags: tuple = field(default_factory=tuple)

    def check(self, outputs: dict, expected: dict) -> tuple[bool, float]:
        """Compare outputs with the reference: (passed, worst error as a fraction of the bound)."""
        return compare(outputs, expected, self.tolerance)


def compare(outputs: dict, expected: dict, tol: Tolerance) -> tuple[bool, float]:
    """Elementwise check of every expected output; returns (ok, max of |err| / bound).

    The ratio is <= 1 when the check passes (0 when exact), so a runner can print how close to
    its tolerance each kernel came. Missing outputs, shape mismatches and NaNs where the
    reference has none fail.
    """
    worst = 0.0
    ok = True
    for key, ref in expected.items():
        if key not in outputs:
            return False, float("inf")
        out = np.asarray(outputs[key])
        ref = np.asarray(ref)
        if out.shape != ref.shape:
            return False, float("inf")
        if tol.exact:
            same = np.array_equal(out, ref, equal_nan=True)
            ok &= same
            worst = max(worst, 0.0 if same else float("inf"))
            continue
        o = out.astype(np.float64)
        r = ref.astype(np.float64)
        if np.any(np.isnan(o) != np.isnan(r)):
            return False, float("inf")
        finite = ~np.isnan(r)
        err = np.abs(o[finite] - r[finite])
        bound = tol.atol + tol.rtol * np.abs(r[finite])
        if err.size == 0:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1.0),
                             np.where(err > 0, np.inf, 0.0))
        worst = max(worst, float(ratio.max()))
        ok &= bool(np.all(err <= bound))
    return ok, worst


def max_abs_error(outputs: dict, expected: dict) -> float:
    """Largest |out - ref| over all outputs (float64), for reports."""
    worst = 0.0
    for key, ref in expected.items():
        o = np.asarray(outputs[key]).astype(np.float64)
        r = np.asarray(ref).astype(np.float64)
        if o.shape != r.shape:
            return float("inf")
        if o.size:
            worst = max(worst, float(np.nanmax(np.abs(o - r))))
    return worst


REGISTRY: dict[str, KernelCase] = {}


def register(case: KernelCase) -> KernelCase:
    """Add a case to the registry (names are unique)."""
    if case.name in REGISTRY:
        raise ValueError(f"kernel case {case.name!r} registered twice")
    REGISTRY[case.name] = case
    return case
