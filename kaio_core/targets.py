"""Compilation targets and the text (or bytes) of any stage, with no GPU needed.

Targets:

- ``sm_80``, ``sm_86``, ``sm_89``, ``sm_90``: NVIDIA through kaio's own
  PTX emitter (stages ``ir``, ``ptx``);
- ``gfx90a``, ``gfx942``, ``gfx1100``: AMD through LLVM (stages ``ir``, ``llvm``, ``asm``,
  ``hsaco``);
- ``nvptx64-sm_80``, ``nvptx64-sm_90``: the same LLVM path retargeted to NVIDIA (stages ``ir``,
  ``llvm``, ``asm``/``ptx``: PTX written by LLVM).

``ir`` with a target prints the kernel after ``kaio.passes.target_pipeline(kernel, warp_size)``
(warp 32 on NVIDIA and gfx11, 64 on gfx9); the later stages lower the same way.
"""
from __future__ import annotations

NVIDIA_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")  # what backends/ptx.py emits
AMD_ARCHS = ("gfx90a", "gfx942", "gfx1100")
NVPTX_TARGETS = ("nvptx64-sm_80", "nvptx64-sm_90")
TARGETS = NVIDIA_ARCHS + AMD_ARCHS + NVPTX_TARGETS
STAGES = ("ir", "ptx", "llvm", "asm", "hsaco")

DEFAULT_TARGET = {"ir": None, "ptx": "sm_90", "llvm": "gfx942", "asm": "gfx942", "hsaco": "gfx942"}


def family(target: str) -> str:
    """'ptx' (kaio's PTX emitter), 'amdgpu' or 'nvptx' (the LLVM path)."""
    if target in NVIDIA_ARCHS:
        return "ptx"
    if target in AMD_ARCHS:
        return "amdgpu"
    if target in NVPTX_TARGETS:
        return "nvptx"
    raise ValueError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")


def warp_size(target: str) -> int:
    """Lanes per warp the target's code is built for."""
    if family(target) == "ptx":
        return 32
    try:  # the LLVM target table knows each target's wave size
        from .backends.llvm_targets import get_target
        return get_target(target).warp_size
    except (ImportError, ValueError):
        return 64 if target.startswith("gfx9") else 32


def stages_of(target: str) -> tuple[str, ...]:
    return {"ptx": ("ir", "ptx"), "amdgpu": ("ir", "llvm", "asm", "hsaco"),
            "nvptx": ("ir", "llvm", "asm", "ptx")}[family(target)]


def check(stage: str, target: str | None) -> str | None:
    """Validate a (stage, target) pair, filling in the default target; ValueError if invalid."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
    if target is None:
        target = DEFAULT_TARGET[stage]
    if target is None:
        return None
    if stage not in stages_of(target):
        raise ValueError(f"target {target} has no stage {stage!r}; its stages are "
                         f"{', '.join(stages_of(target))}")
    return target


def emit_stage(kernel_ir, stage: str, target: str | None = None, fast_math: bool = False):
    """The artifact of ``stage`` for ``target``: str for text stages, bytes for ``hsaco``.

    ``ir`` with no target prints the checked IR as the frontend produced it; with a target it
    prints the IR after that target's lowering (reductions expanded for its warp width).
    """
    target = check(stage, target)
    if stage == "ir" and target is None:
        from .ir import print_kernel
        return print_kernel(kernel_ir)
    if stage == "ir":
        from .ir import print_kernel
        return print_kernel(lower_for(kernel_ir, warp_size(target)))
    if family(target) == "ptx":
        try:
            from .backends.ptx import emit_ptx
        except ImportError as e:
            raise RuntimeError(f"the PTX emitter (kaio.backends.ptx) is not available: {e}") from e
        ptx, _abi = emit_ptx(lower_for(kernel_ir, 32), target, fast_math=fast_math)
        return ptx
    try:
        from .backends.amdgpu import emit
    except ImportError as e:
        raise RuntimeError(f"the LLVM code generator (kaio.backends.amdgpu) is not available for "
                           f"target {target}: {e}") from e
    return emit(kernel_ir, stage, target, fast_math)  # it runs target_pipeline on a copy itself


def lower_for(kernel_ir, warp: int):
    """``target_pipeline`` on a copy of the kernel (passes may rewrite in place, and the
    frontend's cached IR must stay valid for other targets)."""
    from .ir import parse_kernel, print_kernel
    from .passes import target_pipeline
    return target_pipeline(parse_kernel(print_kernel(kernel_ir)), warp)
