"""Python frontend: reads a ``@kaio.kernel`` function's AST and lowers it to kaio IR.

Entry points: :func:`lower_kernel`, then :func:`frontend_pipeline` on what it returns. The
supported language, its typing rules and the errors users get for unsupported constructs are
documented in docs/language.md.
"""
from __future__ import annotations

from ..errors import CompileError
from ..passes import constfold, cse, dce, verify
from ..passes.limits import check_static_shared
from ..regions.checker import check as check_regions
from .lowering import Lowerer


def lower_kernel(fn, params, consts: dict, fast_math: bool = False, coarsen: int | None = None):
    """Lower ``fn`` (a kernel's Python function) to a :class:`kaio.ir.Kernel`.

    ``params`` are the kernel's :class:`kaio.signature.ParamInfo` list; ``consts`` gives the
    values of its Const parameters (substituted as weakly typed literals); ``fast_math`` sets
    ``fast`` on every ``math`` op; ``coarsen``: k for :class:`~kaio.regions.partitions.Coarsened`
    default Regions (from :func:`kaio.frontend.coarsen.coarsening`), None for elementwise.
    Raises :class:`kaio.CompileError` on any error in the source.
    """
    kernel = Lowerer(fn, params, consts, fast_math, coarsen).lower()
    check_static_shared(kernel)
    return kernel


def checked_ir(fn, params, consts: dict, *, fast_math: bool = False, attrs=None,
               coarsen: int | None = None):
    """The checked IR of a kernel function: :func:`lower_kernel` then :func:`frontend_pipeline`,
    with ``attrs`` set on the kernel in between. ``coarsen``: k elements per thread for default
    Regions (:mod:`kaio.frontend.coarsen`); if that version is refused, the refusal users see is
    the one for the elementwise partition they wrote against."""

    def build(k):
        kernel = lower_kernel(fn, params, consts, fast_math, k)
        kernel.attrs.update(attrs or {})
        return frontend_pipeline(kernel)

    if coarsen:
        try:
            return build(coarsen)
        except CompileError:
            pass
    return build(None)


def frontend_pipeline(kernel):
    """Verify, check Regions ownership, fold and clean a kernel fresh from the frontend (in
    place); returns the kernel. The ownership checker always runs: a kernel it cannot check
    does not compile. (It composes passes and the race checker, so it lives here, above both;
    the per-target pipeline is :func:`kaio.passes.target_pipeline`.)"""
    verify.run(kernel)
    check_regions(kernel)
    kernel = constfold.run(kernel)
    kernel = cse.run(kernel)
    kernel = dce.run(kernel)
    verify.run(kernel)
    return kernel


__all__ = ["checked_ir", "frontend_pipeline", "lower_kernel"]
