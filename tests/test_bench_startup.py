"""benchmarks/bench_startup.py on the libcuda stub (scripts/stub_libcuda.c, where gcc is
present): kaio's whole CUDA backend in fresh processes with no GPU, the warm first launch from
the cached cubin, and the breakdown of where the start-up time goes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PARTS = ["import numpy", "import kaio (its own)", "start: import cuda.bindings",
         "start: cuInit + device count", "start: context (driver calls)", "start: kaio's own",
         "first launch: warm key", "first launch: cache read, signature, kaio's load",
         "first launch: module load (driver: cubin, or PTX)",
         "first launch: the rest (launch, ...)",
         "first launch: - warm key: package stamp (its import-time thread)",
         "first launch: - warm key: function fingerprint", "first launch: - signature from JSON",
         "first launch: - cache reads (verified)",
         "first launch: launch checks + plan (once per signature)"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the libcuda stub")
def test_stub_driver_breakdown(tmp_path):
    env = dict(os.environ)
    env.pop("KAIO_BACKEND", None)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_startup.py"),
                        "--backend", "stub-driver", "--runs", "2", "--kernels", "saxpy",
                        "--as-is", "--out", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((tmp_path / "startup.json").read_text())
    warm = report["kernels"]["saxpy"]["warm_median"]
    assert set(PARTS) <= set(warm["parts_ms"])
    # the first launch compiles nothing: the plan's guarded launch function is compiled at its
    # second launch (kaio.launch._second_launch), which the report shows apart
    assert "first launch: planned launch: compile() of its guarded function" not in warm["parts_ms"]
    assert warm["second_extra_ms"] > 0 and "second launch, beyond a repeated one" in (
        tmp_path / "startup.md").read_text()
    # the warm processes found the cubin: the driver's module load is the cubin's, next to no time
    assert 0 <= warm["parts_ms"]["first launch: module load (driver: cubin, or PTX)"] < 5
    assert warm["first_cpu_ms"] > 0 and warm["init_ms"] > 0
    table = (tmp_path / "startup.md").read_text()
    assert "Where the time goes" in table and "| first launch: warm key |" in table
