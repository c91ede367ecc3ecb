"""The scripts in examples/ run as a user runs them: each is a subprocess, on the reference
backend at small sizes here (and in CI), on the GPU at its default sizes under the gpu marker.
Each script checks its own result against numpy (or torch, or the CUDA C++ twin) and exits
non-zero when it differs."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
HAVE_TORCH = importlib.util.find_spec("torch") is not None

#: (script, small arguments, extra environment, what its output must say)
REFERENCE_RUNS = [
    ("saxpy.py", ["--n", "5000"], {}, "saxpy n=5000 on reference: matches numpy"),
    ("jacobi_2d.py", ["--n", "40", "--steps", "3"], {},
     "jacobi_2d manual    n=40 steps=3 on reference: identical"),
    ("block_scan.py", ["--n", "300"], {}, "(warp size 32): identical to numpy.cumsum"),
    ("block_scan.py", ["--n", "1000"], {"KAIO_REF_WARP_SIZE": "64"}, "(warp size 64): identical"),
    pytest.param("rmsnorm_training.py", ["--steps", "12", "--dim", "64", "--batch", "32"], {},
                 "gradients match torch",
                 marks=pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed")),
]


def run_example(script: str, args, env: dict, timeout: int = 600) -> str:
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True,
                       text=True, timeout=timeout, cwd=EXAMPLES.parent,
                       env=dict(os.environ, KAIO_PROGRESS="0", **env))
    assert r.returncode == 0, f"{script} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.mark.parametrize("script, args, env, says", REFERENCE_RUNS)
def test_example_on_the_reference_backend(script, args, env, says):
    out = run_example(script, args, dict(env, KAIO_BACKEND="reference"))
    assert says in out, out


def test_every_example_is_tested():
    tested = {p.values[0] if hasattr(p, "values") else p[0] for p in REFERENCE_RUNS}
    tested |= {"rajaperf_vs_cuda.py", "jacobi_mpi.py"}   # GPU only / tests/test_mpi.py
    assert {p.name for p in EXAMPLES.glob("*.py")} <= tested


def test_a_wrong_result_fails_the_script(tmp_path):
    # the scripts' checks are real: a saxpy whose kernel is off by one element must exit non-zero
    bad = tmp_path / "saxpy_bad.py"
    bad.write_text((EXAMPLES / "saxpy.py").read_text().replace("a * x[i] + y[i]", "a * x[i] + y[i] + 1.0"))
    r = subprocess.run([sys.executable, str(bad), "--n", "100"], capture_output=True, text=True,
                       env=dict(os.environ, KAIO_BACKEND="reference"), timeout=300)
    assert r.returncode != 0 and "saxpy differs from numpy" in r.stderr


GPU_RUNS = [("saxpy.py", []), ("jacobi_2d.py", []), ("block_scan.py", ["--n", "1024"]),
            ("rajaperf_vs_cuda.py", [])]


@pytest.mark.gpu
@pytest.mark.parametrize("script, args", GPU_RUNS)
def test_example_on_the_gpu(script, args):
    if script == "rajaperf_vs_cuda.py" and not (shutil.which("nvcc") or
                                                 Path("/usr/local/cuda/bin/nvcc").exists()):
        pytest.skip("nvcc not installed")
    print(run_example(script, args, {"KAIO_BACKEND": "cuda"}))


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed")
def test_rmsnorm_training_on_the_gpu():
    out = run_example("rmsnorm_training.py", [], {"KAIO_BACKEND": "cuda"})
    assert "(cuda tensors): gradients match torch" in out, out
