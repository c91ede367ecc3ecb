"""A RAJAPerf kernel (Stream TRIAD) timed in kaio and in its CUDA C++ form, on the same arrays.

    python examples/rajaperf_vs_cuda.py [--n 100000000] [--reps 100]     # NVIDIA GPU and nvcc

TRIAD is ``a[i] = b[i] + alpha * c[i]`` over float64 arrays. The kaio side is the library's port
(``kaio.kernels.rajaperf.stream.stream_triad``); the CUDA side is the RAJA Performance Suite's
Base_CUDA form of it, below, compiled with ``nvcc -O3`` into a shared library and called through
ctypes with the device pointers of kaio's arrays (the CUDA runtime attaches to the device's
primary context, the one kaio uses, so the pointers are valid there). Both run ``--reps``
back-to-back launches between two CUDA events on the default stream, and both results must
agree (the CUDA form may fuse the multiply-add, kaio never does: within one rounding).

``kaio rajaperf --variants kaio cuda`` does the same for every port of the suite.
"""
from __future__ import annotations

import argparse
import ctypes
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import kaio

CUDA_SOURCE = r"""
#include <cuda_runtime.h>

__global__ void triad(double* a, const double* b, const double* c, double alpha, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) a[i] = b[i] + alpha * c[i];
}

// reps launches of 256-thread blocks, as the suite's TRIAD<Base_CUDA> runs them
extern "C" int triad_reps(long reps, double* a, const double* b, const double* c, double alpha,
                          long n) {
    unsigned grid = (unsigned)((n + 255) / 256);
    for (long r = 0; r < reps; ++r) triad<<<grid, 256>>>(a, b, c, alpha, n);
    return (int)cudaGetLastError();
}
"""


def build(nvcc: str, workdir: Path) -> ctypes.CDLL:
    """nvcc -O3 for this GPU (-arch=native) into a shared library, loaded with ctypes."""
    src, lib = workdir / "triad.cu", workdir / "libtriad.so"
    src.write_text(CUDA_SOURCE)
    subprocess.run([nvcc, "-O3", "-arch=native", "-shared", "-Xcompiler", "-fPIC", "-o", str(lib),
                    str(src)], check=True)
    so = ctypes.CDLL(str(lib))
    so.triad_reps.restype = ctypes.c_int
    so.triad_reps.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_double, ctypes.c_long]
    return so


def ptr(array) -> int:
    return array.__cuda_array_interface__["data"][0]


def time_ms(launch_reps, reps: int) -> float:
    """Milliseconds per launch: ``reps`` launches between two events, after a warm-up."""
    launch_reps(1)
    kaio.synchronize()
    start, end = kaio.Event(), kaio.Event()
    start.record()
    launch_reps(reps)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="RAJAPerf TRIAD: kaio vs its CUDA C++ form")
    p.add_argument("--n", type=int, default=100_000_000, help="elements (default 10^8)")
    p.add_argument("--reps", type=int, default=100, help="timed launches (default 100)")
    args = p.parse_args(argv)
    if kaio.get_backend().name != "cuda":
        print("rajaperf_vs_cuda needs an NVIDIA GPU (kaio's cuda backend)", file=sys.stderr)
        return 2
    nvcc = shutil.which("nvcc") or next((str(c) for c in [Path("/usr/local/cuda/bin/nvcc")]
                                         if c.exists()), None)
    if nvcc is None:
        print("rajaperf_vs_cuda needs nvcc (the CUDA toolkit) on PATH", file=sys.stderr)
        return 2
    from kaio.kernels.rajaperf.stream import stream_triad

    n, alpha = args.n, 0.5
    rng = np.random.default_rng(0)
    b, c = kaio.to_device(rng.random(n)), kaio.to_device(rng.random(n))
    a_kaio, a_cuda = kaio.device_array((n,), np.float64), kaio.device_array((n,), np.float64)
    with tempfile.TemporaryDirectory() as tmp:
        so = build(nvcc, Path(tmp))

        def kaio_reps(reps):
            for _ in range(reps):
                stream_triad(b, c, a_kaio, alpha)

        def cuda_reps(reps):
            err = so.triad_reps(reps, ptr(a_cuda), ptr(b), ptr(c), alpha, n)
            if err:
                raise RuntimeError(f"CUDA error {err} in triad_reps")

        ms = {"kaio": time_ms(kaio_reps, args.reps), "cuda-c++": time_ms(cuda_reps, args.reps)}
    got, want = a_kaio.to_host(), a_cuda.to_host()
    if not np.allclose(got, want, rtol=2**-52, atol=0):
        raise SystemExit(f"TRIAD: kaio and CUDA C++ differ (max |diff| {np.abs(got - want).max():.3g})")
    for name, t in ms.items():
        print(f"TRIAD n={n} {name:8s}: {t * 1e3:8.1f} us per launch, {24 * n / t / 1e6:7.1f} GB/s")
    print(f"kaio / CUDA C++ time: {ms['kaio'] / ms['cuda-c++']:.3f}; results agree")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
