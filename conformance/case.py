"""A conformance case: one kernel (or a few) with its inputs, its runs and its expected outputs.

A :class:`ConformanceCase` knows how to build inputs for a size ('small' or 'default'), run its
kernel(s) on the current backend, and compute the expected outputs with numpy. It states two
comparisons:

- ``rule``: how every executed target must agree with the interpreter at that target's warp
  width (None: derived from the kernel's IR, see :func:`kaio.conformance.derive.derive_rule`);
- ``vs_numpy``: how every target must agree with numpy (a library kernel's
  :class:`kaio.kernels.Tolerance`, or a :class:`~kaio.conformance.rules.Rule` for features).

``width_dependent`` marks kernels whose correct result depends on the warp width (shuffles,
votes, ballots): those are compared only against the interpreter at the same width, and their
numpy reference takes the width. ``order_dependent`` names the reason a case's result depends
on an order the hardware chooses (the named exceptions of portable mode).
:mod:`kaio.conformance.cases` collects every case.
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
    order_dependent: str = ""                     # why no bitwise rule holds even in portable
                                                  # mode (float atomics, matrix-unit order)
    description: str = ""
    tags: tuple = field(default_factory=tuple)
