"""Compilation targets and their stage lists: the one compile path.

A :class:`Target` declares its compilation as an ordered list of named :class:`Stage` s, each a
small function from earlier artifacts to the next one (Triton's ``add_stages`` shape):

=============================  ===============================================================
target                         stages (each artifact kept, printable by name)
=============================  ===============================================================
sm_80 sm_86 sm_89 sm_90 ...    ir -> lowered -> ptx [-> cubin, when ptxas is installed]
nvptx64-sm_80 .. -sm_90        ir -> lowered -> llvm -> ptx (PTX written by LLVM; ``asm`` too)
gfx90a gfx942 gfx1100          ir -> lowered -> llvm -> object -> hsaco -> report; asm beside
reference-w1 .. reference-w64  ir -> lowered (the interpreter runs the lowered IR)
=============================  ===============================================================

``ir`` is the checked kernel as the frontend produced it (in checked mode, with the fault-record
parameter appended: the signature it is launched with); ``lowered`` is it after
:func:`kaio.passes.target_pipeline` for the target's warp width. Everything that changes the
code is in one :class:`~kaio.options.CompileOptions`. Backends compile through :func:`build`
(which adds the compile cache), ``kaio compile --emit`` through :func:`emit`, and the
conformance pre-flight through :meth:`Target.run`: there is no second path.
"""
from __future__ import annotations

import os
from dataclasses import field
from typing import Callable

from ..cache import cache_key
from ..errors import CompileError
from ..ir import print_kernel
from ..ir.types import FragType
from ..options import CompileOptions, KernelOptions, kernel_fields
from ..records import frozen
from .abi import SUPPORTED_ARCHS, kernel_abi

# The passes and the code generators (llvmlite, kaio's PTX emitter, the code-object reader) are
# imported by the stages that run them, not here: a launch whose code comes from the compile
# cache (kaio.warm) needs this module's target table only, and those imports took ~100 ms.


@frozen
class Stage:
    """One step: ``run(artifacts, options)`` computes artifact ``name`` from the artifacts named
    in ``needs`` (all earlier in the target's list)."""

    name: str
    needs: tuple
    run: Callable
    binary: bool = False
    doc: str = ""


class Artifacts(dict):
    """Stage name -> artifact, in the order computed (``ir`` first). ``cache_key``: the compile
    cache's key of the loaded artifact, where :func:`build` went through the cache."""

    cache_key: str | None = None

    def text(self, name: str) -> str:
        """A stage's artifact as text (IR is printed)."""
        art = self[name]
        return art if isinstance(art, str) else print_kernel(art) if hasattr(art, "body") else str(art)


@frozen
class Target:
    """A compilation target: its name, warp width, codegen path, stages, and which artifact a
    runtime loads (``loads``) and the compile cache keeps."""

    name: str
    family: str                  # 'ptx' | 'nvptx' | 'amdgpu' | 'reference'
    warp_size: int
    codegen: str                 # 'ptx' | 'llvm' | 'interp' (CompileOptions.codegen)
    stages: tuple = field(repr=False)
    loads: str = "lowered"

    @property
    def stage_names(self) -> tuple:
        return ("ir",) + tuple(s.name for s in self.stages)

    def options(self, kernel_options: KernelOptions | None = None, **fields) -> CompileOptions:
        """CompileOptions for this target, with a kernel's options and any field overrides:
        one construction (each is a few hundredths of a millisecond of a first launch)."""
        given = {"target": self.name, "warp_size": self.warp_size, "codegen": self.codegen}
        if kernel_options is not None:
            given.update(kernel_fields(kernel_options))
        given.update(fields)
        return CompileOptions(**given)

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise ValueError(f"target {self.name} has no stage {name!r}; its stages are "
                         f"{', '.join(self.stage_names)}")

    def run(self, kernel, options: CompileOptions | None = None, until: str | None = None,
            given: dict | None = None) -> Artifacts:
        """Run the stages ``until`` needs (default: up to :attr:`loads`) on an IR kernel;
        ``given`` artifacts (from a cache) are used instead of recomputing them."""
        options = options or self.options()
        if options.target != self.name:
            raise ValueError(f"options are for target {options.target}, not {self.name}")
        until = until or self.loads
        wanted = self._closure(until)
        arts = Artifacts(ir=launched(kernel, options))
        arts.update(given or {})
        for s in self.stages:
            if s.name in wanted and s.name not in arts:
                arts[s.name] = s.run(arts, options)
        return arts

    def _closure(self, name: str) -> set:
        if name == "ir":
            return {"ir"}
        out = {name}
        for dep in self.stage(name).needs:
            out |= self._closure(dep)
        return out


# --- the stages -------------------------------------------------------------------------------
def launched(kernel, options: CompileOptions):
    """The kernel as launched: in checked mode a copy taking the fault record as its last
    parameter (kaio.passes.bounds_check), so every backend's ABI and argument list include it."""
    if not options.checked:
        return kernel
    from ..passes.bounds_check import with_record_param  # lazy: import time, ~30 ms (checked mode)
    return with_record_param(kernel)


def lower(kernel, options: CompileOptions):
    """The target pipeline on a copy of ``kernel`` (the frontend's cached IR is shared by every
    target and stays as it is)."""
    from ..passes import target_pipeline  # lazy: import time, ~70 ms (passes, math library)
    return target_pipeline(kernel, options.warp_size, options.fast_math,
                           disabled_passes=options.disabled_passes, checked=options.checked,
                           portable=options.portable)


def _lowered(a, o):
    return lower(a["ir"], o)


def _ptx(a, o):
    from .ptx import emit_ptx  # lazy: import time, ~40 ms (kaio's PTX emitter)
    return emit_ptx(a["lowered"], o.target, fast_math=o.fast_math, ptx_version=o.ptx_version,
                    version_aligned=o.pass_enabled("version_aligned"),
                    max_registers=o.max_registers)[0]


def _cubin(a, o):
    """PTX assembled by ptxas (a view: the driver JIT-compiles the PTX it loads)."""
    import shutil  # lazy: import time, ~5 ms with subprocess; only ptxas needs them
    import subprocess  # lazy: import time, ~5 ms (locale, selectors)
    import tempfile
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        raise CompileError("the cubin stage needs NVIDIA's ptxas on PATH (CUDA toolkit); the "
                           "CUDA driver loads the 'ptx' stage itself", kernel=a["ir"].name)
    with tempfile.TemporaryDirectory(prefix="kaio-ptxas-") as d:
        src, dst = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(a["ptx"])
        p = subprocess.run([ptxas, f"-arch={o.target}", src, "-o", dst], capture_output=True, text=True)
        if p.returncode != 0:
            raise CompileError(f"ptxas failed: {p.stderr.strip()}", kernel=a["ir"].name)
        with open(dst, "rb") as f:
            return f.read()


def _llvm(a, o):
    from ..passes.limits import SHARED_LIMIT, check_static_shared  # lazy: import time, ~70 ms
    from .llvm import emit_llvm  # lazy: import time, ~35 ms (the LLVM IR emitter)
    from .llvm_targets import get_target as llvm_target  # lazy: import time, ~4 ms
    from .llvm_targets import module_flags  # lazy: import time, ~4 ms
    _no_fragments(a["lowered"], o.target)
    # the LLVM paths keep shared arrays static: 48 KiB on NVIDIA, the 64 KiB of LDS on AMD
    limit = "amd" if o.target.startswith("gfx") else "llvm"
    check_static_shared(a["lowered"], SHARED_LIMIT[limit], f"target {o.target} (LLVM path)")
    text = emit_llvm(a["lowered"], o.target, fast_math=o.fast_math, max_registers=o.max_registers)
    return text + module_flags(llvm_target(o.target), o.code_object_version)


def _no_fragments(kernel, target: str) -> None:
    """kaio.mma fragments are lowered on the LLVM paths where :mod:`.llvm_mma` has a scheme for
    the target (NVVM mma on nvptx64, MFMA on gfx90a/gfx942) laid out for its warp width; any
    other target (gfx1100's WMMA is not lowered) refuses the kernel here, at its first
    fragment op."""
    from .llvm_mma import WARP, scheme_of, shapes_of  # lazy: import time, ~12 ms
    from .llvm_targets import get_target as llvm_target  # lazy: import time, ~4 ms
    t = llvm_target(target)
    scheme = scheme_of(t)
    if scheme is not None and WARP[scheme] == t.warp_size:
        _no_shape(kernel, target, shapes_of(t))
        return
    op = next((o for o in kernel.walk() if o.opcode.startswith("mma") and o.opcode != "mma_copy"),
              None)
    if op is not None:
        raise CompileError.at(
            op.loc, f"kaio.mma fragments are not supported on target {target} (LLVM path: no "
                    f"NVVM mma / AMD MFMA lowering for it)", kernel=kernel.name,
            hint="compile for an NVIDIA target (sm_80 and later, either codegen) or gfx90a / "
                 "gfx942, or use the reference backend")


def _no_shape(kernel, target: str, shapes: tuple) -> None:
    """Refuse, at its first op, a fragment of a shape :mod:`.llvm_mma` does not lower for the
    target (``shapes``: the ones it does; int8's m16n8k32 is not lowered on gfx90a)."""
    for op in kernel.walk():
        t = next((v.type for v in (*op.results, *op.operands) if isinstance(v.type, FragType)), None)
        if t is not None and t.shape not in shapes:
            why = "; it has no tf32 (xf32) matrix instruction: gfx942 does" \
                if t.shape == "m16n8k8" else ""
            raise CompileError.at(
                op.loc, f"kaio.mma shape {t.shape} ({t.dtype.name} fragments) is not supported on "
                        f"target {target} (the LLVM path lowers {', '.join(shapes)} there{why})",
                kernel=kernel.name,
                hint="use kaio's own PTX path for NVIDIA (the default KAIO_CUDA_CODEGEN=ptx), or "
                     "the reference backend")


def _asm(a, o):
    from .llvm_compile import llvm_to_asm  # lazy: import time, ~19 ms (llvmlite)
    return llvm_to_asm(a["llvm"], o.target, a["ir"].name, opt_level=o.opt_level)


def _nvptx_ptx(a, o):
    from . import ptx_workarounds  # lazy: import time, ~1 ms; the LLVM NVPTX path only
    return ptx_workarounds.apply(_asm(a, o), o.target)


def _object(a, o):
    from .llvm_compile import llvm_to_object  # lazy: import time, ~19 ms (llvmlite)
    return llvm_to_object(a["llvm"], o.target, a["ir"].name, opt_level=o.opt_level)


def _hsaco(a, o):
    from .llvm_compile import link_code_object  # lazy: import time, ~19 ms (llvmlite)
    return link_code_object(a["object"], a["ir"].name)


def _report(a, o):
    """The code object checked against the kernel (metadata, ABI, registers, LDS)."""
    from .codeobject import validate_code_object  # lazy: import time, ~9 ms (msgpack, pyelftools)
    lowered = a["lowered"]
    return validate_code_object(a["hsaco"], lowered, kernel_abi(lowered), o.target, o.warp_size,
                                o.code_object_version)


_LOWERED = Stage("lowered", ("ir",), _lowered, doc="IR after the target pipeline")
_NVIDIA_STAGES = (_LOWERED, Stage("ptx", ("lowered",), _ptx, doc="kaio's PTX"),
                  Stage("cubin", ("ptx",), _cubin, binary=True, doc="ptxas output"))
_NVPTX_STAGES = (_LOWERED, Stage("llvm", ("lowered",), _llvm, doc="LLVM IR"),
                 Stage("ptx", ("llvm",), _nvptx_ptx, doc="PTX written by LLVM's NVPTX backend"),
                 Stage("asm", ("ptx",), lambda a, o: a["ptx"], doc="the same PTX"))
_AMDGPU_STAGES = (_LOWERED, Stage("llvm", ("lowered",), _llvm, doc="LLVM IR"),
                  Stage("asm", ("llvm",), _asm, doc="AMDGPU assembly"),
                  Stage("object", ("llvm",), _object, binary=True, doc="ELF relocatable"),
                  Stage("hsaco", ("object",), _hsaco, binary=True, doc="linked code object"),
                  Stage("report", ("hsaco", "lowered"), _report, doc="code-object validation"))
_REFERENCE_STAGES = (_LOWERED,)


def _table() -> dict[str, Target]:
    t = {}
    for arch in SUPPORTED_ARCHS:
        t[arch] = Target(arch, "ptx", 32, "ptx", _NVIDIA_STAGES, loads="ptx")
    for arch in ("sm_80", "sm_86", "sm_89", "sm_90"):
        name = f"nvptx64-{arch}"
        t[name] = Target(name, "nvptx", 32, "llvm", _NVPTX_STAGES, loads="ptx")
    for arch, warp in (("gfx90a", 64), ("gfx942", 64), ("gfx1100", 32)):
        t[arch] = Target(arch, "amdgpu", warp, "llvm", _AMDGPU_STAGES, loads="hsaco")
    for warp in (1, 2, 4, 8, 16, 32, 64):
        name = f"reference-w{warp}"
        t[name] = Target(name, "reference", warp, "interp", _REFERENCE_STAGES, loads="lowered")
    return t


TARGETS: dict[str, Target] = _table()
#: what ``kaio compile`` offers (the reference targets are the interpreter's, not compiled code)
COMPILE_TARGETS = tuple(n for n, t in TARGETS.items() if t.family != "reference")
STAGES = ("ir", "lowered", "ptx", "cubin", "llvm", "asm", "object", "hsaco", "report")
#: the target ``kaio compile --emit STAGE`` uses when none is given
DEFAULT_TARGET = {"ptx": "sm_90", "cubin": "sm_90", "llvm": "gfx942", "asm": "gfx942",
                  "object": "gfx942", "hsaco": "gfx942", "report": "gfx942", "lowered": "sm_90"}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; choose one of {', '.join(TARGETS)}") from None


def nvptx_target_for(arch: str) -> str:
    """The LLVM path's target for a CUDA device: sm_9x gets sm_90 PTX, every other arch sm_80
    PTX (the driver JIT-compiles it forward)."""
    return "nvptx64-sm_90" if arch.startswith("sm_9") else "nvptx64-sm_80"


def check(stage: str, target: str | None) -> str | None:
    """Validate a (stage, target) pair, filling in the default target; ValueError if invalid.
    ``ir`` needs no target (None is returned for it)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
    if stage == "ir":
        return None
    t = get_target(target or DEFAULT_TARGET[stage])
    t.stage(stage)   # raises naming the target's stages
    return t.name


def emit(kernel, stage: str, target: str | None = None,
         kernel_options: KernelOptions | None = None, **fields):
    """The artifact of ``stage`` for ``target``: str for text stages (``ir`` prints the checked
    kernel itself, ``lowered`` the target's lowering, ``report`` the code-object check), bytes
    for binary ones (``cubin``, ``object``, ``hsaco``)."""
    target = check(stage, target)
    if stage == "ir":
        return print_kernel(kernel)
    t = get_target(target)
    art = t.run(kernel, t.options(kernel_options, **fields), until=stage)[stage]
    if stage == "lowered":
        return print_kernel(art)
    if stage == "report":     # the code-object check, as text
        return "\n".join([art.summary()] + [f"error: {e}" for e in art.errors])
    return art


def build(kernel, options: CompileOptions, cache=None) -> Artifacts:
    """Run ``options.target``'s stages up to what its runtime loads, through the compile cache
    (keyed on the printed IR and every option). AMD code objects are validated before they are
    cached or returned."""
    t = get_target(options.target)
    until = "report" if t.family == "amdgpu" else t.loads
    if cache is None or t.family == "reference":
        return _checked(t.run(kernel, options, until))
    key = cache_key(print_kernel(kernel), options.target, options.key())
    hit = cache.get(key)
    if hit is not None:
        arts = Artifacts(ir=launched(kernel, options), **{t.loads: hit})
    else:
        arts = _checked(t.run(kernel, options, until))
        cache.put(key, arts[t.loads])
    arts.cache_key = key   # the warm entry points to it (kaio.warm.store): not printed again
    return arts


def _checked(arts: Artifacts) -> Artifacts:
    if "report" in arts:
        arts["report"].raise_if_failed()
    return arts
