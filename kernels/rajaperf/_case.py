"""How a RAJAPerf port becomes a :class:`kaio.kernels.KernelCase`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..registry import REGISTRY, KernelCase, Tolerance, register
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


@dataclass(frozen=True)
class SuiteFacts:
    """How the suite runs a kernel, beyond one call of its loop body.

    - ``scale``: the suite's checksum scale factor at the default size; at other sizes the suite
      multiplies it by ``problem(default_size) / problem(size)``;
    - ``carry(inputs, outputs) -> inputs``: the next rep's inputs, for kernels that update their
      data in place (the suite sets data up once per pass, then runs every rep on it);
    - ``fold(total, outputs) -> total``: for reductions the suite accumulates across reps.
    """

    scale: float = 1.0
    problem: Callable | None = None
    carry: Callable | None = None
    fold: Callable | None = None


#: Suite facts of every port, by short name (``"DAXPY"``).
SUITE: dict[str, SuiteFacts] = {}


def raja_case(*, name: str, group: str, make: Callable[[int], dict], run: Callable[[dict], dict],
              reference: Callable[[dict], dict], default_size, small_size, reps: int,
              tolerance: Tolerance = ARITH, flops: Callable = lambda n: 0.0,
              bytes: Callable = lambda n: 0.0, checksum_scale: float = 1.0,
              checksum_rtol: float = 1e-12, checksum_keys: tuple = (),
              checksum_select: Callable | None = None, bench: Callable | None = None,
              problem: Callable | None = None, carry: Callable | None = None,
              fold: Callable | None = None, description: str = "") -> KernelCase:
    """Register a RAJAPerf port. ``make(size)`` builds the suite's deterministic inputs (the
    seed is ignored: the suite has none); the checksum adds the checksums of the outputs the
    suite checksums (``checksum_keys``; default: every output), or of the arrays
    ``checksum_select(outputs)`` returns when the suite checksums part of an output.
    ``case.checksum`` uses the default-size scale factor; :func:`suite_checksum` applies the
    suite's size correction, reps and passes (see :class:`SuiteFacts` for ``problem``,
    ``carry`` and ``fold``)."""
    SUITE[name] = SuiteFacts(scale=checksum_scale, problem=problem, carry=carry, fold=fold)

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


def after_reps(name: str, inputs: dict, reps: int | None = None, variant: str = "reference") -> dict:
    """The outputs after the suite's ``reps`` reps of one pass (default: the case's reps).

    ``variant`` is ``"reference"`` (numpy) or ``"run"`` (kaio's kernels on the current
    backend). In-place kernels feed each rep's outputs to the next (``carry``); reductions
    accumulate (``fold``); any other kernel's reps all give the same outputs, so one is run.
    """
    case = REGISTRY[f"rajaperf/{name}"]
    facts = SUITE[name]
    fn = case.reference if variant == "reference" else case.run
    reps = case.reps if reps is None else reps
    if facts.carry is None:
        out = fn(inputs)
        total = out
        for _ in range(reps - 1 if facts.fold is not None else 0):
            total = facts.fold(total, out)
        return total
    current = inputs
    for _ in range(reps):
        out = fn(current)
        current = facts.carry(current, out)
    return out


def scale_at(name: str, size) -> float:
    """The suite's checksum scale factor at ``size``: the default-size factor times
    default problem size / problem size (every kernel the suite scales does it this way)."""
    case = REGISTRY[f"rajaperf/{name}"]
    facts = SUITE[name]
    if facts.problem is None:
        return facts.scale
    return facts.scale * facts.problem(case.default_size) / facts.problem(size)


def suite_checksum(name: str, size=None, reps: int | None = None, npasses: int = 1,
                   variant: str = "reference") -> float:
    """The suite's checksum: taken after all reps of a pass, summed over ``npasses`` passes
    (each pass sets the data up afresh, so every pass adds the same value)."""
    case = REGISTRY[f"rajaperf/{name}"]
    size = case.default_size if size is None else size
    return npasses * pass_checksum(name, size, after_reps(name, case.make_inputs(size, 0), reps, variant))


def pass_checksum(name: str, size, outputs: dict, last_rep: int = 1) -> float:
    """One pass's checksum at ``size`` from the outputs after its reps, with the suite's
    size-corrected scale factor. ``last_rep`` > 1: ``outputs`` are one rep's, and reductions
    the suite accumulates across reps are folded ``last_rep`` times first."""
    case = REGISTRY[f"rajaperf/{name}"]
    facts = SUITE[name]
    total = outputs
    for _ in range(last_rep - 1 if facts.fold is not None else 0):
        total = facts.fold(total, outputs)
    ratio = scale_at(name, size) / facts.scale if facts.scale else 1.0
    return case.checksum(total) * ratio


def feed(*keys: str) -> Callable:
    """``carry`` for in-place kernels: this rep's outputs ``keys`` are the next rep's inputs."""
    return lambda inputs, outputs: {**inputs, **{k: outputs[k] for k in keys}}


def add_up(*keys: str) -> Callable:
    """``fold`` for reductions the suite accumulates across reps (``m_sum += sum``)."""
    return lambda total, out: {**total, **{k: np.asarray(total[k] + out[k]) for k in keys}}
