"""``kaio bench``: run the side-by-side GPU benchmarks in the repository's benchmarks/ folder.

The benchmarks compare kaio with nvcc-compiled CUDA C++, Triton and PyTorch/cuBLAS on the same
tensors; they need an NVIDIA GPU with those installed, and a source checkout (they are not part
of the installed package).
"""
from __future__ import annotations

import os
import runpy
import sys


def _script() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.getcwd(), os.path.dirname(here)):
        path = os.path.join(root, "benchmarks", "bench_gpu.py")
        if os.path.exists(path):
            return path
    return None


def main(argv=None) -> int:
    path = _script()
    if path is None:
        print("kaio bench: benchmarks/bench_gpu.py not found; run it from a kaio source checkout",
              file=sys.stderr)
        return 2
    sys.argv = [path, *(argv or [])]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return int(e.code or 0)
    return 0
