"""NVIDIA compile-and-validate columns: sm_80 (A100), sm_86 (RTX 30), sm_89 (RTX 40 / L40).

Each column builds every kernel a case launched, through one of kaio's two NVIDIA code paths, and
assembles the PTX with ``ptxas -arch=sm_XX -v``:

- ``sm_80`` / ``sm_86`` / ``sm_89``: kaio's PTX emitter (backend target ``sm_XX``);
- ``sm_80-llvm`` / ``sm_86-llvm`` / ``sm_89-llvm``: the LLVM nvptx64 path (``nvptx64-sm_XX``).

ptxas's report (registers, spill stores and loads, stack frame, static shared memory, barriers)
is checked against the kernel's declared limits, as the AMD columns check code objects:
registers within the kernel's ``max_registers`` (255 without one); static shared memory equal to
kaio's shared-memory plan (:func:`kaio.backends.codeobject.shared_memory_plan`, the size the AMD
code objects are held to) and within the 48 KiB a block may declare statically; and, for a kernel
declaring its block shape, registers x threads within the 64 Ki-register file of one SM (a
larger block could never launch). Spills are recorded, not refused (a register cap may cause
them by design). A
feature the target lacks is refused at compile time with a message naming the target; such
refusals are reported as "not available on this target" (:func:`unavailable`), never as passing.
The columns never execute: their cells say "compiled and validated".
"""
from __future__ import annotations

import functools
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from kaio.backends.codeobject import shared_memory_plan
from kaio.backends.targets import get_target

from .builds import BuildResult

#: column -> (kaio backend target, ptxas arch)
COLUMNS = {f"{arch}{suffix}": (("nvptx64-" if suffix else "") + arch, arch)
           for arch in ("sm_80", "sm_86", "sm_89") for suffix in ("", "-llvm")}
#: what each arch is (for the report's header)
PARTS = {"sm_80": "A100", "sm_86": "RTX 30 / A40", "sm_89": "RTX 40 / L40"}
STATIC_SMEM_LIMIT = 48 * 1024       # bytes of shared memory a block may declare statically
MAX_REGISTERS = 255                 # per thread, every arch here
REGISTER_FILE = 64 * 1024           # 32-bit registers per SM on sm_80, sm_86 and sm_89
PTXAS_HINT = ("install the CUDA toolkit (ptxas on PATH or in $CUDA_HOME/bin) or "
              "`pip install nvidia-cuda-nvcc`")


@functools.lru_cache(maxsize=None)
def find_ptxas() -> str | None:
    """ptxas on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin, or from a pip wheel
    (:func:`_wheel_ptxas`); None when there is none."""
    found = shutil.which("ptxas")
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    for home in filter(None, homes):
        p = os.path.join(home, "bin", "ptxas")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    for p in _wheel_ptxas():
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _wheel_ptxas() -> list[str]:
    """ptxas binaries shipped in pip wheels: NVIDIA's nvidia-cuda-nvcc (nvidia/cu13/bin, or
    nvidia/cuda_nvcc/bin for CUDA 12) and Triton's (triton/backends/nvidia/bin: the GPU images
    that have Triton but no CUDA toolkit). Found by path: neither package is imported."""
    out = [os.environ.get("TRITON_PTXAS_PATH", "")]
    for pkg, rel in (("nvidia", ("*", "bin", "ptxas")),
                     ("triton", ("backends", "nvidia", "bin", "ptxas"))):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or []) if spec else []:
            out += sorted(glob.glob(os.path.join(root, *rel)))
    return [p for p in out if p]


@functools.lru_cache(maxsize=None)
def ptxas_version() -> str:
    """'ptxas 13.0.88', or '' without ptxas."""
    exe = find_ptxas()
    if exe is None:
        return ""
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"V(\d+\.\d+\.\d+)", out)
    return f"ptxas {m.group(1)}" if m else "ptxas"


@dataclass
class PtxasInfo:
    """What ``ptxas -v`` says about one entry function."""

    registers: int = 0
    spill_stores: int = 0            # bytes
    spill_loads: int = 0             # bytes
    stack_bytes: int = 0
    smem_bytes: int = 0              # static shared memory
    barriers: int = 0


def parse_ptxas(text: str, entry: str) -> PtxasInfo:
    """The ``-v`` report of ``entry`` (ValueError when ptxas printed none for it)."""
    lines = text.splitlines()
    head = re.compile(rf"(Compiling entry function|Function properties for) '?{re.escape(entry)}'?\s")
    start = next((i for i, ln in enumerate(lines) if head.search(ln + " ")), None)
    if start is None:
        raise ValueError(f"ptxas -v printed no report for entry '{entry}'")
    info, seen = PtxasInfo(), False
    for ln in lines[start:]:
        if "Compiling entry function" in ln and entry not in ln:
            break
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", ln)
        if m:
            info.stack_bytes, info.spill_stores, info.spill_loads = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", ln)
        if m:
            seen = True
            info.registers = int(m.group(1))
            b = re.search(r"used (\d+) barriers", ln)
            s = re.search(r"(\d+) bytes smem", ln)
            info.barriers = int(b.group(1)) if b else 0
            info.smem_bytes = int(s.group(1)) if s else 0
            break
    if not seen:
        raise ValueError(f"ptxas -v printed no register count for entry '{entry}'")
    return info


def assemble(ptx: str, arch: str, entry: str) -> PtxasInfo:
    """Run ``ptxas -arch=ARCH -v`` on ``ptx``; RuntimeError with ptxas's message on failure."""
    exe = find_ptxas()
    if exe is None:
        raise RuntimeError(f"ptxas not available: {PTXAS_HINT}")
    with tempfile.TemporaryDirectory(prefix="kaio-conformance-ptxas-") as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        p = subprocess.run([exe, f"-arch={arch}", "-v", src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"ptxas -arch={arch} failed: {' '.join(p.stderr.split())[:600]}")
    return parse_ptxas(p.stdout + "\n" + p.stderr, entry)


def limit_errors(info: PtxasInfo, kernel_options) -> list[str]:
    """The ways ``info`` breaks the kernel's declared limits (empty when it keeps them)."""
    errors = []
    cap = getattr(kernel_options, "max_registers", None)
    if cap is not None and info.registers > cap:
        errors.append(f"{info.registers} registers, above the kernel's max_registers={cap}")
    if info.registers > MAX_REGISTERS:
        errors.append(f"{info.registers} registers, above the {MAX_REGISTERS} a thread may use")
    if info.smem_bytes > STATIC_SMEM_LIMIT:
        errors.append(f"{info.smem_bytes} B of static shared memory, above the "
                      f"{STATIC_SMEM_LIMIT} B a block may declare")
    block = getattr(kernel_options, "block", None)
    if block is not None:
        threads = block[0] * block[1] * block[2]
        if info.registers * threads > REGISTER_FILE:
            errors.append(f"{info.registers} registers x {threads} threads (declared block {block}) "
                          f"exceed the {REGISTER_FILE} registers of one SM: the launch would fail")
    return errors


#: compile errors that mean "the target lacks this feature" (kaio's refusals name the target;
#: ptxas's name the .target it needs)
_UNAVAILABLE = re.compile(r"not (?:supported|available) on (?:target|this target|\.target)|"
                          r"requires \.target sm_\d+|requires sm_\d+ or (?:later|higher)", re.I)


def unavailable(message: str) -> bool:
    """Whether a build error is a refusal of a feature the target lacks."""
    return bool(_UNAVAILABLE.search(message))


def build(kernel, column: str, kernel_options=None):
    """Build ``kernel`` (IR) for an NVIDIA compile column and validate it with ptxas; returns a
    :class:`~kaio.conformance.builds.BuildResult` (``unavailable`` set for a target's refusal)."""
    target, arch = COLUMNS[column]
    try:
        t = get_target(target)
        arts = t.run(kernel, t.options(kernel_options), until="ptx")
        ptx, plan = arts["ptx"], shared_memory_plan(arts["lowered"])
    except Exception as e:
        msg = f"{type(e).__name__}: {e}"
        return BuildResult(kernel.name, column, False, [msg], unavailable=unavailable(msg))
    try:
        info = assemble(ptx, arch, _entry(ptx, kernel.name))
    except Exception as e:
        msg = str(e)
        return BuildResult(kernel.name, column, False, [msg], unavailable=unavailable(msg))
    errors = limit_errors(info, kernel_options)
    if info.smem_bytes != plan:
        errors.append(f"ptxas reports {info.smem_bytes} B of static shared memory, kaio's "
                      f"shared-memory plan is {plan} B")
    return BuildResult(kernel.name, column, not errors, errors, lds_bytes=info.smem_bytes,
                       spills=info.spill_stores + info.spill_loads, scratch_bytes=info.stack_bytes,
                       registers=info.registers, spill_stores=info.spill_stores,
                       spill_loads=info.spill_loads, barriers=info.barriers)


def _entry(ptx: str, name: str) -> str:
    m = re.search(r"\.entry\s+([\w$]+)", ptx)
    return m.group(1) if m else name
