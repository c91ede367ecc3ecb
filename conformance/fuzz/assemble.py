"""Compile-only stand-ins for the GPU backends, for machines without a GPU: a clean kernel is
compiled by kaio's PTX emitter and by the LLVM nvptx64 path for sm_90, and both PTX texts are
assembled by ``ptxas`` (the CUDA driver's JIT would see the same text). Catches code-generation
crashes and invalid PTX before a GPU run; compares no results."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import traceback

from kaio.errors import CompileError

#: name -> (stage, target) of the PTX text to assemble
TARGETS = {"cuda-compile": ("ptx", "sm_90"), "cuda-llvm-compile": ("ptx", "nvptx64-sm_90")}


def available(name: str) -> str | None:
    """None when ``name`` can run here, else why not."""
    return None if shutil.which("ptxas") else "ptxas not found (the CUDA toolkit)"


def ptxas(ptx: str, arch: str = "sm_90") -> None:
    """Assemble ``ptx``; CompileError with ptxas's message when it fails."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        p = subprocess.run([shutil.which("ptxas"), f"-arch={arch}", src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    if p.returncode != 0:
        raise CompileError(f"ptxas failed: {p.stderr.strip()}")


def run(out, name: str) -> dict:
    """Compile ``out.kernel`` for the compile-only target ``name``; the stats of one kernel."""
    stage, target = TARGETS[name]
    stats = {"compiled": 0, "error": 0}
    try:
        ptxas(out.kernel.emit(stage, target))
        stats["compiled"] = 1
    except Exception:
        stats["error"] = 1
        out.diff_details.append(f"{name}: {traceback.format_exc(limit=3)}")
    return stats
