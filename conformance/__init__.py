"""kaio.conformance: every kernel on every target, one report, bit-identical where promised.

The suite runs the kernel library (:mod:`kaio.kernels`) and the language-feature kernels
(:mod:`kaio.conformance.features`) on the executed targets (reference interpreter at warp 32 and
64, CUDA through kaio's PTX, CUDA through LLVM, HIP when an AMD GPU is present) and builds and
validates AMD code objects for the compile-only targets (gfx90a, gfx942). Each executed result
is compared with the interpreter at the same warp width under the kernel's rule, and with numpy
under the kernel's stated bound. See docs/conformance.md.

    from kaio.conformance import Options, run_suite
    if __name__ == "__main__":   # LLVM builds run in spawned worker processes
        report = run_suite(Options(["reference", "gfx942"]))
"""
from __future__ import annotations

from .rules import BITWISE, Rule, rel, ulp
from .runner import Options, run_suite

__all__ = ["BITWISE", "Options", "Rule", "rel", "run_suite", "ulp"]
