"""How a RAJAPerf port becomes a :class:`kaio.kernels.KernelCase`."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..registry import KernelCase, Tolerance, register
from .checksum import checksum_of

#: Arithmetic-only float64 kernels evaluate the same expressions in the same order as the numpy
#: reference, with IEEE rounding and no contraction on every backend: results agree to the last
#: bit in practice. The bound leaves room for one reassociation inside a formula
#: (a few ulp, 2^-52 ~ 2.2e-16 each) and for values that cancel to ~0.
ARITH = Tolerance(atol=1e-14, rtol=1e-13,
                  why="float64, same operation order as the reference: a few ulp at most")
#: Reductions sum in a different order (per-thread partials, a block tree, then the host):
#: relative error <= (terms per thread + log2(block) + log2(blocks)) * 2^-53 of sum |terms|.
REDUCTION = Tolerance(atol=1e-12, rtol=1e-12,
                      why="float64 sums in a different order: ~(n/threads + 20) * 1.1e-16 relative")
#: Kernels calling exp/log: kaio's portable math is within a few ulp of the correctly rounded
#: value, numpy's libm likewise.
TRANSCENDENTAL = Tolerance(atol=1e-14, rtol=1e-12,
                           why="float64 with exp: both sides within a few ulp of the exact value")


def raja_case(*, name: str, group: str, make: Callable[[int], dict], run: Callable[[dict], dict],
              reference: Callable[[dict], dict], default_size, small_size, reps: int,
              tolerance: Tolerance = ARITH, flops: Callable = lambda n: 0.0,
              bytes: Callable = lambda n: 0.0, checksum_scale: float = 1.0,
              checksum_rtol: float = 1e-12, checksum_keys: tuple = (),
              checksum_select: Callable | None = None, bench: Callable | None = None,
              description: str = "") -> KernelCase:
    """Register a RAJAPerf port. ``make(size)`` builds the suite's deterministic inputs (the
    seed is ignored: the suite has none); the checksum adds the checksums of the outputs the
    suite checksums (``checksum_keys``; default: every output), or of the arrays
    ``checksum_select(outputs)`` returns when the suite checksums part of an output."""

    def checksum(outputs: dict) -> float:
        if checksum_select is not None:
            arrays = checksum_select(outputs)
        else:
            arrays = [outputs[k] for k in (checksum_keys or sorted(outputs))]
        return checksum_of(*(np.asarray(a, dtype=np.float64) for a in arrays), scale=checksum_scale)

    case = KernelCase(name=f"rajaperf/{name}", group=f"rajaperf/{group}",
                      make_inputs=lambda size, seed=0: make(size), run=run, reference=reference,
                      default_size=default_size, small_size=small_size, tolerance=tolerance,
                      flops=flops, bytes=bytes, description=description, reps=reps,
                      checksum=checksum, checksum_rtol=checksum_rtol, bench=bench)
    return register(case)


def copy(inputs: dict, *names: str) -> dict:
    """Fresh copies of the arrays a kernel updates in place (run() must not touch its inputs)."""
    return {n: np.array(inputs[n], copy=True) for n in names}
