"""Math functions -> LLVM: the intrinsics and instructions LLVM has for them, as tables (the
emitter's ``op_math`` reads them).

- exact functions (what ``kaio.passes.expand_math`` leaves for every target): ``llvm.sqrt``
  (correctly rounded without ``afn``, on amdgcn and nvptx), ``llvm.floor/ceil/trunc``,
  ``llvm.roundeven`` for rint, ``llvm.copysign``, and compares for isnan/isinf/isfinite;
- ``fast`` (per call or kernel-wide fast_math), f32 only: the target's hardware approximation,
  a snippet from its table (:attr:`~kaio.backends.llvm_targets.LlvmTarget.fast_f32`: amdgcn
  ``v_exp_f32``/``v_log_f32``/``v_sin_f32``..., nvptx ``ex2.approx``...).

Everything else -- every portable function, and a ``fast`` one the target has no entry for -- is
:mod:`kaio.mathlib`'s IR, expanded before codegen or (fast ones) by the emitter through
:func:`kaio.passes.expand_math.library_code`.
"""
from __future__ import annotations

#: exact unary functions: fn -> intrinsic (overloaded on the float type)
EXACT_UNARY = {"sqrt": "llvm.sqrt", "floor": "llvm.floor", "ceil": "llvm.ceil",
               "trunc": "llvm.trunc", "rint": "llvm.roundeven"}
#: exact binary functions: fn -> intrinsic
EXACT_BINARY = {"copysign": "llvm.copysign"}
#: float classes: fn -> (fcmp predicate, whether |x| is compared with inf; else x with itself)
CLASSES = {"isnan": ("uno", False), "isinf": ("oeq", True), "isfinite": ("olt", True)}
