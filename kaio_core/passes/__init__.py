"""IR passes. Each pass is a small module with one function ``run(kernel, ...) -> kernel``.

``target_pipeline`` runs per backend before codegen (lowers what depends on the warp width).
What runs on every kernel the frontend produces, the race checker included, is
:func:`kaio.frontend.frontend_pipeline`.
"""
from __future__ import annotations

import contextlib
import gc

#: the passes, imported on first use (here or as ``kaio.passes.NAME``): a process that only
#: reads ``kaio.passes.limits`` (the CUDA backend does), or launches code from the compile cache,
#: does not pay for the others, the math library and the race checker (~70 ms)
_PASSES = ("bounds_check", "constfold", "cse", "dce", "expand_math", "full_tiles", "loop_facts",
           "lower_reductions", "unroll", "unsigned_divide", "verify")


def __getattr__(name: str):
    """``kaio.passes.NAME`` for a pass not imported yet."""
    if name in _PASSES:
        _import_passes()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _import_passes() -> None:
    # plain `import` statements: `from . import name` would ask this module's __getattr__ first
    import kaio.passes.bounds_check  # lazy: import time, ~4 ms
    import kaio.passes.constfold  # lazy: import time, ~8 ms
    import kaio.passes.cse  # lazy: import time, ~1 ms
    import kaio.passes.dce  # lazy: import time, ~1 ms
    import kaio.passes.expand_math  # lazy: import time, ~24 ms (the math library)
    import kaio.passes.full_tiles  # lazy: import time, ~1 ms
    import kaio.passes.loop_facts  # lazy: import time, ~1 ms
    import kaio.passes.lower_reductions  # lazy: import time, ~1 ms
    import kaio.passes.unroll  # lazy: import time, ~1 ms
    import kaio.passes.unsigned_divide  # lazy: import time, ~1 ms
    import kaio.passes.verify  # lazy: import time, ~8 ms  # noqa: F401


def target_pipeline(kernel, warp_size: int, fast_math: bool = False, *,
                    disabled_passes=frozenset(), checked: bool = False, portable: bool = False):
    """Expand portable math, lower block and warp reductions for a target's warp width, mark
    loops with a positive step and integer divisions of non-negative values (unsigned on the
    targets), unroll the small ones by 4 (those whose step's sign is known
    only at run time, such as a grid-stride loop's, behind a run-time test), then clean up.

    Works on a copy: the frontend's (cached) kernel is shared by every target and stays as is.
    ``fast_math`` (kernel-wide) marks math ops ``fast`` instead of expanding them.
    ``disabled_passes``: names of switchable passes to skip (kaio.options.SWITCHABLE_PASSES).
    ``checked``: guard every access first (:mod:`kaio.passes.bounds_check`; the kernel gains the
    fault-record parameter), so the guards see the accesses as written.
    ``portable``: portable mode; every op's ``fast`` flag is cleared and ``fast_math`` ignored,
    so all math is kaio.mathlib's correctly specified IR (:func:`expand_math.clear_fast`).
    """
    with _collector_paused():
        return _target_pipeline(kernel, warp_size, fast_math and not portable, disabled_passes,
                                checked, portable)


def _target_pipeline(kernel, warp_size, fast_math, disabled_passes, checked, portable=False):
    from ..ir.rewrite import clone_kernel  # lazy: import time, ~3 ms
    from ..regions.checker import check_width  # lazy: import time, ~20 ms (the race checker)
    from . import (  # lazy: import time, ~70 ms (the passes and the math library)
        bounds_check,
        constfold,
        cse,
        dce,
        expand_math,
        full_tiles,
        loop_facts,
        lower_reductions,
        unroll,
        unsigned_divide,
        verify,
    )
    check_width(kernel, warp_size)                  # race-free at this target's warp width too
    kernel = clone_kernel(kernel)
    if checked:
        kernel = bounds_check.run(kernel)            # checked mode: every access guarded
    if portable:
        expand_math.clear_fast(kernel)               # portable mode: no approximation survives
    kernel = expand_math.run(kernel, fast_math)      # portable math -> IR (kaio.mathlib)
    kernel = lower_reductions.run(kernel, warp_size=warp_size)
    if "full_tiles" not in disabled_passes:
        kernel = full_tiles.run(kernel)              # for lo, min(lo + C, n): full case unrolled
    kernel = loop_facts.run(kernel)                  # step_sign = 1 where the step is > 0
    kernel = unsigned_divide.run(kernel)             # div/rem of values >= 0: unsigned
    if "unroll" not in disabled_passes:              # small loops by 4; grid-stride ones too
        kernel = unroll.run(kernel, strided="unroll_strided" not in disabled_passes)
    kernel = constfold.run(kernel)
    kernel = cse.run(kernel)
    kernel = dce.run(kernel)
    verify.run(kernel)
    return kernel


@contextlib.contextmanager
def _collector_paused():
    """The passes allocate many small objects that all stay alive until the pass ends, so the
    cyclic collector's full sweeps (which grow with the kernel) are pure cost here. Measured
    with ``python3 benchmarks/ir_scaling.py --n 40``: the pipeline on 320 math ops took 2.70 s
    with the collector running, 1.92 s paused (8x the ops: 11.5x the time before, 9.2x now)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
