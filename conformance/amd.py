"""Compile-and-validate for AMD targets that cannot execute here (gfx90a, gfx942).

Each job builds one kernel's code object with :func:`kaio.backends.amdgpu.emit` (stage
'hsaco') and checks it with :func:`kaio.backends.codeobject.validate_code_object`. Jobs are
keyed by the kernel's IR text, so a kernel launched by several cases is built once per arch.
They run in worker processes (``spawn``: safe after a CUDA context exists in the parent); the
IR crosses the process boundary as text and is parsed back with :func:`kaio.ir.parse_kernel`.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from dataclasses import asdict, dataclass, field


@dataclass
class BuildResult:
    """The outcome of one (kernel, arch) build: validated or the errors met."""

    kernel: str
    arch: str
    ok: bool
    errors: list[str] = field(default_factory=list)
    lds_bytes: int = 0
    sgpr: int = 0
    vgpr: int = 0
    agpr: int = 0
    spills: int = 0
    scratch_bytes: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def build(ir_text: str, arch: str, fast_math: bool) -> BuildResult:
    """Build and validate one kernel (runs in a worker; catches everything it can report)."""
    from kaio.backends import amdgpu, codeobject
    from kaio.backends.abi import kernel_abi
    from kaio.backends.llvm_targets import get_target
    from kaio.ir import parse_kernel
    name = "?"
    try:
        k = parse_kernel(ir_text)
        name = k.name
        hsaco = amdgpu.emit(k, "hsaco", arch, fast_math)
        rep = codeobject.validate_code_object(hsaco, k, kernel_abi(k), arch,
                                              warp_size=get_target(arch).warp_size)
    except Exception as e:
        return BuildResult(name, arch, False, [f"{type(e).__name__}: {e}"])
    return BuildResult(name, arch, rep.ok, list(rep.errors), rep.lds_bytes, rep.sgpr, rep.vgpr,
                       rep.agpr, rep.sgpr_spills + rep.vgpr_spills, rep.private_bytes)


def build_all(jobs: list[tuple[str, str, bool]], workers: int | None = None) -> dict:
    """{(ir_text, arch, fast_math): BuildResult} for every distinct job."""
    jobs = list(dict.fromkeys(jobs))
    if not jobs:
        return {}
    workers = workers or min(len(jobs), max(1, (os.cpu_count() or 1)), 16)
    if workers <= 1 or len(jobs) < 4:
        return {j: build(*j) for j in jobs}
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {j: pool.submit(build, *j) for j in jobs}
        out = {}
        for j, f in futures.items():
            try:
                out[j] = f.result()
            except Exception as e:  # a crashed worker: reported on that kernel's cell
                out[j] = BuildResult("?", j[1], False, [f"worker failed: {type(e).__name__}: {e}"])
        return out
