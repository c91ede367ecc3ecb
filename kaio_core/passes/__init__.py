"""IR passes. Each pass is a small module with one function ``run(kernel, ...) -> kernel``.

``frontend_pipeline`` runs on every kernel the frontend produces (target-independent);
``target_pipeline`` runs per backend before codegen (lowers what depends on the warp width).
"""
from __future__ import annotations


def frontend_pipeline(kernel):
    """Verify, check Regions ownership, fold and clean a kernel fresh from the frontend (in
    place); returns the kernel."""
    from . import constfold, cse, dce, verify
    verify.run(kernel)
    try:
        from ..regions.checker import check as check_regions
    except ImportError:  # the static ownership checker arrives with the Regions work
        check_regions = None
    if check_regions is not None:
        check_regions(kernel)
    kernel = constfold.run(kernel)
    kernel = cse.run(kernel)
    kernel = dce.run(kernel)
    verify.run(kernel)
    return kernel


def target_pipeline(kernel, warp_size: int):
    """Expand portable math, lower block and warp reductions for a target's warp width, then
    clean up.

    Works on a copy: the frontend's (cached) kernel is shared by every target and stays as is.
    """
    from ..ir.rewrite import clone_kernel
    from . import constfold, cse, dce, expand_math, lower_reductions, verify
    kernel = expand_math.run(clone_kernel(kernel))   # portable math -> inline IR (kaio.mathlib)
    kernel = lower_reductions.run(kernel, warp_size=warp_size)
    kernel = constfold.run(kernel)
    kernel = cse.run(kernel)
    kernel = dce.run(kernel)
    verify.run(kernel)
    return kernel
