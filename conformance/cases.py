"""What the suite runs: conformance cases built from the kernel library and the feature kernels.

A :class:`ConformanceCase` knows how to build inputs for a size ('small' or 'default'), run its
kernel(s) on the current backend, and compute the expected outputs with numpy. It states two
comparisons:

- ``rule``: how every executed target must agree with the interpreter at that target's warp
  width (None: derived from the kernel's IR, see :func:`kaio.conformance.derive.derive_rule`);
- ``vs_numpy``: how every target must agree with numpy (a library kernel's
  :class:`kaio.kernels.Tolerance`, or a :class:`~kaio.conformance.rules.Rule` for features).

``width_dependent`` marks kernels whose correct result depends on the warp width (shuffles,
votes, ballots): those are compared only against the interpreter at the same width, and their
numpy reference takes the width.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .rules import Rule


@dataclass
class ConformanceCase:
    name: str
    group: str                                   # 'library/<group>' | 'feature/<topic>'
    make_inputs: Callable[[str], dict]            # size name -> inputs
    run: Callable[[dict], dict]                   # inputs -> outputs (current backend)
    expected: Callable[[dict, int], dict]         # (inputs, warp size) -> numpy outputs
    vs_numpy: Any                                 # kaio.kernels.Tolerance | Rule
    rule: Rule | None = None
    native_math_rule: Rule | None = None          # derived rule while math is backend-native
    width_dependent: bool = False
    fixed_size: bool = False                      # same problem at every size (features)
    description: str = ""
    tags: tuple = field(default_factory=tuple)


def from_library(kc) -> ConformanceCase:
    """A conformance case for a :class:`kaio.kernels.KernelCase` (rule derived from its IR)."""
    def make_inputs(size: str):
        return kc.make_inputs(kc.default_size if size == "default" else kc.small_size, 0)

    return ConformanceCase(
        name=kc.name, group=f"library/{kc.group}", make_inputs=make_inputs, run=kc.run,
        expected=lambda inputs, warp: kc.reference(inputs), vs_numpy=kc.tolerance,
        description=kc.description, tags=tuple(kc.tags))


def library_cases() -> list[ConformanceCase]:
    from kaio import kernels
    return [from_library(kc) for kc in kernels.cases()]


def feature_cases() -> list[ConformanceCase]:
    from .features import cases
    return cases()


def all_cases() -> list[ConformanceCase]:
    return library_cases() + feature_cases()


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
