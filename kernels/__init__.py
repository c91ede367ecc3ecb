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

from .registry import REGISTRY as _REGISTRY
from .registry import KernelCase, Tolerance, compare, max_abs_error, register

__all__ = ["REGISTRY", "KernelCase", "Tolerance", "cases", "compare", "get", "max_abs_error",
           "register"]


def _registry() -> dict:
    """The registry with every library case in it. The ML and RAJAPerf modules register their
    cases when imported, which happens here, on first use, not when the package is imported:
    a program launching one library kernel imports that kernel's module only."""
    import kaio.kernels.ml.cases  # noqa: F401  # lazy: import time, ~120 ms (every ML module)
    import kaio.kernels.rajaperf  # noqa: F401  # lazy: import time, ~80 ms (every port)

    return _REGISTRY


def __getattr__(name: str):
    """``REGISTRY`` (filled), and the subpackages and helpers the package used to import."""
    if name == "REGISTRY":
        return _registry()
    if name in ("ml", "rajaperf", "_launch", "_bench"):
        _registry()   # plain imports: `from . import ml` would ask this __getattr__ again
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cases(group: str | None = None) -> list[KernelCase]:
    """All registered cases, optionally those whose group starts with ``group``."""
    return [c for c in _registry().values() if group is None or c.group.startswith(group)]


def get(name: str) -> KernelCase:
    """The case named ``name``; a bare name ('rmsnorm', 'DAXPY') matches ``group/name`` too."""
    REGISTRY = _registry()
    if name in REGISTRY:
        return REGISTRY[name]
    hits = [c for c in REGISTRY.values() if c.name.split("/")[-1].lower() == name.lower()]
    if len(hits) == 1:
        return hits[0]
    raise KeyError(f"no kernel named {name!r}; known: {', '.join(sorted(REGISTRY))}")
