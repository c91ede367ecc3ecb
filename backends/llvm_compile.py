"""The LLVM path after LLVM IR text: llvmlite and the linker (stages of kaio.backends.targets).

- ``asm`` (amdgcn) / ``ptx`` (nvptx64): llvmlite parses, verifies and optimises the module
  (new pass manager, O2 by default) and the target machine prints assembly;
- ``object`` and ``hsaco`` (amdgcn): the target machine emits an ELF object and
  ``ld.lld -shared`` links it into a code object that HIP's ``hipModuleLoadData`` accepts.

The linker is looked up in this order: ``$KAIO_LLD``, ``/opt/rocm/llvm/bin/ld.lld``, ``ld.lld``
on PATH, ``ld.lld-22`` .. ``ld.lld-17`` on PATH, and last the LLD that Triton's wheel links into
its extension module (``triton._C.libtriton.amd.link_hsaco``, the same ``-shared`` link run in
process), so a machine with Triton but no LLVM tools (the NVIDIA GPU image) still builds AMD code
objects. That last one is a private Triton entry point: used only when nothing else is found, and
the code object it writes goes through the same validation as any other.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Callable

from ..config import settings
from ..errors import CompileError
from .llvm_targets import get_target

OPT_LEVEL = 2
LLD_HINT = ("install LLVM's linker (Debian/Ubuntu: `apt-get install lld-19`; ROCm ships it as "
            "/opt/rocm/llvm/bin/ld.lld) or point KAIO_LLD at an ld.lld binary")


@functools.lru_cache(maxsize=None)
def _llvm():
    import llvmlite.binding as llvm  # lazy: import time, ~19 ms (only the LLVM paths use it)
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@functools.lru_cache(maxsize=None)
def target_machine(target: str):
    """The llvmlite TargetMachine for a kaio LLVM target name (cached)."""
    t = get_target(target)
    llvm = _llvm()
    return llvm.Target.from_triple(t.triple).create_target_machine(
        cpu=t.cpu, features=t.features, opt=3, reloc="pic", codemodel="default")


def find_lld() -> str:
    """Path of an ld.lld binary that can link AMDGPU objects; CompileError saying how to get one."""
    env = settings().lld
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise CompileError(f"KAIO_LLD={env!r} is not an executable file; {LLD_HINT}")
    rocm = "/opt/rocm/llvm/bin/ld.lld"
    if os.path.isfile(rocm) and os.access(rocm, os.X_OK):
        return rocm
    for name in ["ld.lld"] + [f"ld.lld-{v}" for v in range(22, 16, -1)]:
        path = shutil.which(name)
        if path:
            return path
    raise CompileError(f"no ld.lld found to link the AMDGPU code object; {LLD_HINT}")


@dataclass(frozen=True)
class Linker:
    """How AMDGPU objects get linked here: ``name`` for reports, ``link(src, dst)`` raises
    CompileError with the linker's message on failure."""
    name: str
    link: Callable[[str, str], None]


def _lld_binary_linker(lld: str) -> Linker:
    def link(src: str, dst: str) -> None:
        p = subprocess.run([lld, "-shared", "--no-undefined", src, "-o", dst],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise CompileError(f"{lld} failed linking the code object: {p.stderr.strip()}")
    return Linker(lld, link)


def _triton_lld_linker() -> Linker | None:
    try:
        from triton._C.libtriton import amd  # lazy: triton, optional; private API (module docstring)
    except Exception:                            # not installed, or built without AMD support
        return None
    link_hsaco = getattr(amd, "link_hsaco", None)
    if link_hsaco is None:
        return None

    def link(src: str, dst: str) -> None:
        try:
            link_hsaco(src, dst)
        except Exception as e:
            raise CompileError(f"Triton's LLD failed linking the code object: {e}") from e
    return Linker("triton._C.libtriton.amd.link_hsaco (in-process LLD)", link)


def find_linker() -> Linker:
    """The AMDGPU linker to use (see the module docstring for the order); CompileError naming how
    to get one when there is none."""
    try:
        return _lld_binary_linker(find_lld())
    except CompileError:
        if settings().lld:
            raise                                # an explicit choice that is broken: say so
        triton = _triton_lld_linker()
        if triton is None:
            raise
        return triton


def optimized_module(llvm_text: str, target: str, opt_level: int = OPT_LEVEL, name: str = "kernel"):
    """Parse, verify and optimise LLVM IR text; returns the llvmlite module."""
    llvm = _llvm()
    try:
        mod = llvm.parse_assembly(llvm_text)
        mod.verify()
    except RuntimeError as e:
        raise CompileError(f"internal error: the LLVM IR for {target} does not verify: {e}",
                           kernel=name) from e
    tm = target_machine(target)
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod


def llvm_to_asm(llvm_text: str, target: str, name: str = "kernel", opt_level: int = OPT_LEVEL) -> str:
    """AMDGPU assembly (amdgcn targets) or PTX (nvptx64 targets)."""
    return target_machine(target).emit_assembly(optimized_module(llvm_text, target, opt_level, name))


def llvm_to_object(llvm_text: str, target: str, name: str = "kernel", opt_level: int = OPT_LEVEL) -> bytes:
    """An ELF relocatable object (amdgcn targets)."""
    return target_machine(target).emit_object(optimized_module(llvm_text, target, opt_level, name))


def link_code_object(obj: bytes, name: str = "kernel") -> bytes:
    """Link an AMDGPU ELF object into a code object (HSACO) with :func:`find_linker`'s linker."""
    linker = find_linker()
    with tempfile.TemporaryDirectory(prefix="kaio-lld-") as d:
        src, dst = os.path.join(d, "k.o"), os.path.join(d, "k.hsaco")
        with open(src, "wb") as f:
            f.write(obj)
        try:
            linker.link(src, dst)
        except CompileError as e:
            raise CompileError(e.bare_message, kernel=name) from e
        with open(dst, "rb") as f:
            return f.read()
