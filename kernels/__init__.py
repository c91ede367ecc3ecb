"""kaio's kernel library: ML ops and RAJAPerf ports, each with a numpy reference.

Every library kernel is described by a :class:`KernelCase`: how to build inputs for a problem
size, how to run the kaio kernel(s), how to compute the same result with numpy, the default and
CI sizes, the tolerance (with the reason for it), and the work done (flops, bytes) so a runner
can report TFLOP/s and GB/s. The conformance suite, the benchmarks, ``kaio showcase`` and the
tests all iterate over :func:`cases`.

    from kaio import kernels
    case = kernels.get("ml/rmsnorm")
    inp = case.make_inputs(case.small_size, seed=0)
    ok, err = case.check(case.run(inp), case.reference(inp))
"""
from __future__ import annotations

from . import ml, rajaperf  # noqa: F401  (their modules register the library's cases)
from .registry import REGISTRY, KernelCase, Tolerance, compare, max_abs_error, register

__all__ = ["REGISTRY", "KernelCase", "Tolerance", "cases", "compare", "get", "max_abs_error",
           "register"]


def cases(group: str | None = None) -> list[KernelCase]:
    """All registered cases, optionally those whose group starts with ``group``."""
    return [c for c in REGISTRY.values() if group is None or c.group.startswith(group)]


def get(name: str) -> KernelCase:
    """The case named ``name``; a bare name ('rmsnorm', 'DAXPY') matches ``group/name`` too."""
    if name in REGISTRY:
        return REGISTRY[name]
    hits = [c for c in REGISTRY.values() if c.name.split("/")[-1].lower() == name.lower()]
    if len(hits) == 1:
        return hits[0]
    raise KeyError(f"no kernel named {name!r}; known: {', '.join(sorted(REGISTRY))}")
