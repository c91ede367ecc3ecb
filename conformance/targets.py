"""The conformance targets: what each one is, whether it can run here, and how to run on it.

Executed targets run kernels and return outputs:

- ``reference``: the numpy SIMT interpreter at warp width 32 (the baseline for NVIDIA);
- ``reference-w64``: the same at warp width 64 (the baseline for AMD wave64 parts);
- ``cuda``: NVIDIA through kaio's own PTX emitter;
- ``cuda-llvm``: NVIDIA through the LLVM nvptx64 path (``CudaBackend(codegen='llvm')``);
- ``hip``: AMD through LLVM -> HSACO, executed only where an AMD GPU is present.

Compile-only targets never execute here. ``gfx90a`` and ``gfx942`` build every kernel's code
object and check it with :func:`kaio.backends.codeobject.validate_code_object`; ``sm_80``,
``sm_86``, ``sm_89`` (kaio's PTX) and ``sm_80-llvm``, ``sm_86-llvm``, ``sm_89-llvm`` (the LLVM
nvptx64 path) assemble every kernel's PTX with ``ptxas -arch=sm_XX -v`` and check its registers,
spills and shared memory (:mod:`kaio.conformance.nvidia`).

Each launch a case makes goes through a :class:`Recorder`, which keeps the IR of every kernel
launched (as the frontend produced it, before any target lowering), so the compile-only targets
build exactly the kernels the executed targets ran, with the same constants.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass, field

import llvmlite
import numpy as np

from kaio import backends as be
from kaio.backends import availability
from kaio.backends import cuda_driver as drv
from kaio.backends.cuda import CudaBackend
from kaio.backends.hip import HipBackend, hip_api
from kaio.backends.llvm_compile import find_linker
from kaio.backends.reference import ReferenceBackend
from kaio.config import settings
from kaio.options import KernelOptions

from . import nvidia

EXECUTED = ("reference", "reference-w64", "cuda", "cuda-llvm", "hip")
NVIDIA_COMPILE = tuple(nvidia.COLUMNS)       # sm_80, sm_80-llvm, sm_86, ... sm_89-llvm
AMD_COMPILE = ("gfx90a", "gfx942")
COMPILE_ONLY = NVIDIA_COMPILE + AMD_COMPILE
ALL = EXECUTED + COMPILE_ONLY
WARP = {"reference": 32, "reference-w64": 64, "cuda": 32, "cuda-llvm": 32, "hip": 64,
        "gfx90a": 64, "gfx942": 64, **{t: 32 for t in NVIDIA_COMPILE}}
#: the GPU vendor of each GPU target (the report's one-line summary per vendor)
VENDOR = {"cuda": "NVIDIA", "cuda-llvm": "NVIDIA", "hip": "AMD",
          **{t: "NVIDIA" for t in NVIDIA_COMPILE}, **{t: "AMD" for t in AMD_COMPILE}}
#: the interpreter baseline for each warp width
BASELINE = {32: "reference", 64: "reference-w64"}


@dataclass
class TargetInfo:
    """One target's availability on this machine."""

    name: str
    kind: str                     # 'execute' | 'compile'
    warp_size: int
    available: bool
    reason: str = ""              # why it cannot run (when not available)
    device: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "warp_size": self.warp_size,
                "available": self.available, "reason": self.reason, "device": self.device}


def parse_targets(text: str | None) -> list[str]:
    """'reference,cuda' -> ['reference', 'cuda'] in canonical order; ValueError on unknown names."""
    if not text:
        return list(ALL)
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in ALL]
    if bad:
        raise ValueError(f"unknown target(s) {', '.join(bad)}; choose from {', '.join(ALL)}")
    return [t for t in ALL if t in names]


def probe(name: str) -> TargetInfo:
    """Whether ``name`` can run here and, if so, the device it runs on."""
    kind = "compile" if name in COMPILE_ONLY else "execute"
    info = TargetInfo(name, kind, WARP[name], True)
    try:
        if name.startswith("reference"):
            info.device = {"name": "CPU (numpy interpreter)", "driver": f"numpy {np.__version__}",
                           "arch": f"SIMT lanes, warp {WARP[name]}"}
        elif name in ("cuda", "cuda-llvm"):
            _probe_cuda(info)
        elif name == "hip":
            _probe_hip(info)
        elif name in NVIDIA_COMPILE:
            _probe_nvidia_compile(info)
        else:
            _probe_amd_compile(info)
    except Exception as e:  # a probe must never stop the suite: the target is reported not run
        info.available, info.reason = False, f"{type(e).__name__}: {e}"
    return info


def _probe_cuda(info: TargetInfo) -> None:
    ok, why = availability("cuda")
    if not ok:
        info.available, info.reason = False, why or "no CUDA device"
        return
    ctx = drv.context()
    v = ctx.driver_version
    p = ctx.props
    info.device = {"name": p.name, "driver": f"CUDA {v // 1000}.{v % 1000 // 10}",
                   "arch": f"{p.arch} (cc {p.cc[0]}.{p.cc[1]})",
                   "codegen": "LLVM nvptx64" if info.name == "cuda-llvm" else "kaio PTX"}


def _probe_hip(info: TargetInfo) -> None:
    ok, why = availability("hip")
    if not ok:
        info.available, info.reason = False, why or "no AMD GPU"
        return
    devs = HipBackend.device_info()
    d = devs[0] if devs else {}
    info.warp_size = int(d.get("warp_size", 64))
    info.device = {"name": d.get("name", "AMD GPU"), "arch": d.get("arch", "?"),
                   "driver": _hip_driver_version()}


def _hip_driver_version() -> str:
    try:
        r = hip_api().hipDriverGetVersion()
        return f"HIP driver {r[1] if isinstance(r, tuple) else r}"
    except Exception:
        return "HIP (driver version unavailable)"


def _probe_amd_compile(info: TargetInfo) -> None:
    linker = find_linker()  # CompileError with a hint when missing
    info.device = {"name": f"AMD {info.name} (compile and validate only)",
                   "driver": f"llvmlite {llvmlite.__version__}, {os.path.basename(linker.name)}",
                   "arch": info.name}


def _probe_nvidia_compile(info: TargetInfo) -> None:
    target, arch = nvidia.COLUMNS[info.name]
    llvm = info.name.endswith("-llvm")
    info.device = {"name": f"NVIDIA {arch} ({nvidia.PARTS[arch]}; compile and validate only)",
                   "arch": arch, "codegen": f"LLVM nvptx64 ({target})" if llvm else "kaio PTX"}
    if nvidia.find_ptxas() is None:
        info.available, info.reason = False, f"ptxas not available: {nvidia.PTXAS_HINT}"
        return
    tools = [nvidia.ptxas_version()]
    if llvm:
        tools.insert(0, f"llvmlite {llvmlite.__version__}")
    info.device["driver"] = ", ".join(tools)


def make_backend(name: str, warp_size: int | None = None, sanitize: bool = False):
    """A fresh backend instance for an executed target (the interpreter's race sanitizer is off
    unless ``sanitize``: conformance compares results; races are the sanitizer suite's job)."""
    if name.startswith("reference"):
        return ReferenceBackend(warp_size=warp_size or WARP[name], sanitize=sanitize)
    if name in ("cuda", "cuda-llvm"):
        return CudaBackend(codegen="llvm" if name == "cuda-llvm" else "ptx")
    if name == "hip":
        return HipBackend()
    raise ValueError(f"target {name!r} does not execute")


class Recorder:
    """A backend wrapper that records the IR kernels launched through it (with the compile
    options), in launch order; everything else is the wrapped backend's."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.warp_size = inner.warp_size
        self.log: list[tuple[object, KernelOptions]] = []
        self._options: dict[int, KernelOptions] = {}

    def compile(self, kernel, options=None):
        c = self.inner.compile(kernel, options)
        # the IR as given (a checked kernel's compiled form already has its fault record), and
        # portable mode resolved, so a build worker compiles what ran whatever its environment
        o = options or KernelOptions()
        if o.portable is None:
            o = dataclasses.replace(o, portable=settings().portable)
        self._options[id(c)] = (kernel, o)
        return c

    def launch(self, compiled, grid, block, args, shared_bytes=0, stream=None):
        self._record(compiled)
        return self.inner.launch(compiled, grid, block, args, shared_bytes, stream)

    def _launch_planned(self, compiled, plan, args, shared_bytes=0, stream=None):
        # kaio's repeated-call fast path reaches the backend here, past Backend.launch
        self._record(compiled)
        return self.inner._launch_planned(compiled, plan, args, shared_bytes, stream)

    def _record(self, compiled) -> None:
        self.log.append(self._options.get(id(compiled), (compiled.kernel, KernelOptions())))

    def __getattr__(self, attr):
        return getattr(self.inner, attr)


@contextlib.contextmanager
def using(backend, label: str):
    """Make ``backend`` the one kernel launches use, for the duration of the block.

    kaio's backend registry keeps one instance per name; this installs the instance under a
    label of its own (e.g. 'conformance:cuda-llvm') and restores the previous selection after."""
    key = f"conformance:{label}"
    previous = be._current
    be._instances[key] = backend
    be._current = key
    try:
        yield backend
    finally:
        be._current = previous
        be._instances.pop(key, None)
