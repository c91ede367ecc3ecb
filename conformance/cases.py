"""What the suite runs: conformance cases (:class:`~kaio.conformance.case.ConformanceCase`) built
from the kernel library and the feature kernels, and the selection of cases by name.
"""
from __future__ import annotations

from kaio import kernels

from . import features
from .case import ConformanceCase
from .features import fuzzed


def from_library(kc) -> ConformanceCase:
    """A conformance case for a :class:`kaio.kernels.KernelCase` (rule derived from its IR)."""
    def make_inputs(size: str):
        return kc.make_inputs(kc.default_size if size == "default" else kc.small_size, 0)

    return ConformanceCase(
        name=kc.name, group=f"library/{kc.group}", make_inputs=make_inputs, run=kc.run,
        expected=lambda inputs, warp: kc.reference(inputs), vs_numpy=kc.tolerance,
        description=kc.description, tags=tuple(kc.tags))


def library_cases() -> list[ConformanceCase]:
    return [from_library(kc) for kc in kernels.cases()]


def feature_cases() -> list[ConformanceCase]:
    return features.cases()


def fuzz_cases() -> list[ConformanceCase]:
    """A fixed group of race-checker fuzzer kernels (conformance/features/fuzzed.py)."""
    return fuzzed.cases()


def all_cases() -> list[ConformanceCase]:
    return library_cases() + feature_cases() + fuzz_cases()


def select(cases: list[ConformanceCase], names: list[str] | None) -> list[ConformanceCase]:
    """Cases whose name equals, ends with '/NAME', or starts with a NAME prefix ('feature/',
    'library/ml' groups too); KeyError naming the unknown ones."""
    if not names:
        return cases
    out, unknown = [], []
    for n in names:
        low = n.lower()
        hits = [c for c in cases if c.name.lower() == low or c.name.lower().split("/")[-1] == low
                or c.name.lower().startswith(low.rstrip("/") + "/")
                or c.group.lower().startswith(low)]
        if not hits:
            unknown.append(n)
        out += [c for c in hits if c not in out]
    if unknown:
        raise KeyError(f"no conformance case matches {', '.join(unknown)}")
    return out
