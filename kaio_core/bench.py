"""``kaio bench``: run the side-by-side GPU benchmarks in the repository's benchmarks/ folder.

    kaio bench [--quick] [--out DIR]            benchmarks/bench_gpu.py: kaio vs nvcc-compiled
                                                CUDA C++, Triton and PyTorch/cuBLAS
    kaio bench --ml [--quick] [--ops A,B] [--dtypes f32,f16] [--out DIR]
                                                benchmarks/bench_ml.py: the library's ML ops vs
                                                Triton and torch eager, GB/s against the copy

They need an NVIDIA GPU with those installed, and a source checkout (the benchmarks are not part
of the installed package).
"""
from __future__ import annotations

import os
import runpy
import sys

#: the flag that picks each benchmark script other than the default one
SCRIPTS = {"--ml": "bench_ml.py"}
DEFAULT_SCRIPT = "bench_gpu.py"


def _script(name: str = DEFAULT_SCRIPT) -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.getcwd(), os.path.dirname(here)):
        path = os.path.join(root, "benchmarks", name)
        if os.path.exists(path):
            return path
    return None


def route(argv) -> tuple[str, list[str]]:
    """(script name, its arguments): ``--ml`` anywhere picks bench_ml.py and is removed."""
    argv = list(argv or [])
    for flag, name in SCRIPTS.items():
        if flag in argv:
            return name, [a for a in argv if a != flag]
    return DEFAULT_SCRIPT, argv


def main(argv=None) -> int:
    name, argv = route(argv)
    path = _script(name)
    if path is None:
        print(f"kaio bench: benchmarks/{name} not found; run it from a kaio source checkout",
              file=sys.stderr)
        return 2
    sys.argv = [path, *argv]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return int(e.code or 0)
    return 0
