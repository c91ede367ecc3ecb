"""The ``cuda`` variant of ``kaio rajaperf``: the suite's Base_CUDA form of each port, in CUDA C++.

The sources are ``benchmarks/cuda/rajaperf_*.cu`` (written for this repository; one entry point
``rp_NAME`` per port, see ``rajaperf_common.cuh``). :func:`build` compiles them with nvcc into
one shared library (cached by the sources' hash); :func:`load` opens it with ctypes. A twin
launches on the device arrays of the port's :class:`~kaio.kernels._bench.Resident`, so both
variants read the same inputs and write the same outputs, and the reps loop runs in C++ as in
the suite. The CUDA runtime in the library attaches to the device's primary context, the one
kaio's CUDA backend uses, so kaio's device pointers are valid there.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

import kaio
from kaio import backends

from ._domain import Domain
from .apps import FIR_COEFF, VNORMQ


def _source_dir(here: Path) -> Path:
    """The CUDA C++ sources: ``cuda/`` next to this module in an installed wheel (pyproject.toml
    maps the repository's benchmarks/cuda there), else the checkout's benchmarks/cuda."""
    installed = here / "cuda"
    return installed if installed.is_dir() else here.parents[1] / "benchmarks" / "cuda"


#: where the CUDA C++ sources live
SOURCE_DIR = _source_dir(Path(__file__).resolve().parent)
_WHY = ["not loaded yet"]


def sources() -> list[Path]:
    """The .cu files of the twins (empty when the repository's benchmarks/ is not present)."""
    return sorted(SOURCE_DIR.glob("rajaperf_*.cu"))


def nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    cand = Path(home) / "bin" / "nvcc"
    return str(cand) if cand.exists() else None


def build(out_dir: str | os.PathLike | None = None, arch: str = "native") -> Path:
    """Compile every twin into ``librajaperf.so`` (nvcc -O3, ``-arch=arch``); reuses an earlier
    build of the same sources and arch. Extra nvcc flags come from ``KAIO_RAJAPERF_NVCC_FLAGS``
    (e.g. ``-fmad=false``, to compare checksums without FMA contraction). Raises RuntimeError
    with nvcc's message on failure."""
    cu = sources()
    extra = os.environ.get("KAIO_RAJAPERF_NVCC_FLAGS", "").split()
    if not cu:
        raise RuntimeError(f"no rajaperf_*.cu under {SOURCE_DIR}")
    compiler = nvcc()
    if compiler is None:
        raise RuntimeError("nvcc not found (put it on PATH or set CUDA_HOME)")
    digest = hashlib.sha256(" ".join([arch, *extra]).encode())
    for f in [*cu, SOURCE_DIR / "rajaperf_common.cuh"]:
        digest.update(f.read_bytes())
    base = Path(out_dir) if out_dir else Path(os.environ.get("KAIO_CACHE_DIR") or
                                              Path.home() / ".cache" / "kaio") / "rajaperf_native"
    lib = base / digest.hexdigest()[:16] / "librajaperf.so"
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}.tmp"
    flags = ["-O3", f"-arch={arch}", "-Xcompiler", "-fPIC", *extra]
    # one nvcc per source at once (each is its own translation unit either way), then one link
    objects = [lib.parent / f"{f.stem}.{tag}.o" for f in cu]
    jobs = [([compiler, *flags, "-c", "-o", str(o), str(f)]) for f, o in zip(cu, objects)]
    procs = [(cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
             for cmd in jobs]
    tmp = lib.with_suffix(f".{tag}")
    try:
        for cmd, proc in procs:
            _, err = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"nvcc failed ({' '.join(cmd)}):\n{err.strip()}")
        cmd = [compiler, *flags, "-shared", "-o", str(tmp), *map(str, objects)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
        tmp.replace(lib)
    finally:
        for _, proc in procs:
            proc.wait()
        for o in objects:
            o.unlink(missing_ok=True)
    return lib


@dataclass(frozen=True)
class Spec:
    """How a port's entry point is called: its Resident arrays in order, the scalars (input
    names, or a function of the inputs), the sizes (default: the length of the first array,
    which must then be 1-D), extra
    arrays uploaded from the inputs, and for reductions how the returned values become
    outputs."""

    arrays: tuple = ()
    scalars: tuple | Callable = ()
    sizes: Callable | None = None
    extra: tuple = ()
    result: Callable | None = None


def _n_out(i, d):
    return (i["n_out"],)


def _n(i, d):
    return (i["n"],)


def _edge_steps(i, d):
    return (d["a"].shape[0], i["steps"])


def _vol3d_sizes(i, d):
    dom = Domain(i["n"], 3)
    return (dom.fpz, dom.lpz + 1, dom.jp, dom.kp)


def _ddv_sizes(i, d):
    dom = Domain(i["n"], 2)
    return (dom.jp, i["zones"].size, dom.nnalls)


_THREE = ("in1", "in2", "out1", "out2", "out3")
_ENERGY = ("e_old", "delvc", "p_new", "p_old", "q_old", "work", "comp_half", "p_half", "bvc", "pbvc",
           "ql_old", "qq_old", "vnewc", "e_new", "q_new")

#: port -> how its CUDA C++ twin is called (PRESSURE_FUSED / ENERGY_FUSED are kaio variants, not
#: the suite's kernels: they have no twin)
TWINS = {
    "ADD": Spec(("a", "b", "c")),
    "COPY": Spec(("a", "c")),
    "MUL": Spec(("c", "b"), ("alpha",)),
    "TRIAD": Spec(("b", "c", "a"), ("alpha",)),
    "DOT": Spec(("a", "b"), result=lambda o: {"dot": np.array(o[0])}),
    "DAXPY": Spec(("x", "y"), ("a",)),
    "IF_QUAD": Spec(("a", "b", "c", "x1", "x2")),
    "INIT3": Spec(_THREE),
    "MULADDSUB": Spec(_THREE),
    "NESTED_INIT": Spec(("array",), sizes=lambda i, d: tuple(reversed(i["shape"]))),
    "REDUCE3_INT": Spec(("vec",), result=lambda o: {"vsum": np.array(int(o[0])), "vmin": np.array(int(o[1])),
                                                     "vmax": np.array(int(o[2]))}),
    "TRAP_INT": Spec((), ("x0", "xp", "y", "yp", "h"), _n, result=lambda o: {"sumx": np.array(o[0])}),
    "PI_REDUCE": Spec((), lambda i: (1.0 / i["n"],), _n, result=lambda o: {"pi": np.array(o[0])}),
    "MAT_MAT_SHARED": Spec(("a", "b", "c"), sizes=lambda i, d: (d["a"].shape[0],)),
    "DIFF_PREDICT": Spec(("cx4", "rows"), sizes=_n),
    "EOS": Spec(("y", "z", "u", "x"), ("q", "r", "t"), _n_out),
    "FIRST_DIFF": Spec(("y", "x"), sizes=_n_out),
    "HYDRO_1D": Spec(("y", "z", "x"), ("q", "r", "t"), _n_out),
    "INT_PREDICT": Spec(("rest", "px0"), ("dm22", "dm23", "dm24", "dm25", "dm26", "dm27", "dm28", "c0"), _n),
    "PLANCKIAN": Spec(("x", "u", "v", "y", "w")),
    "TRIDIAG_ELIM": Spec(("xin", "y", "z", "xout")),
    "GEN_LIN_RECUR": Spec(("sa", "sb", "b5", "stb5")),
    "ATAX": Spec(("a", "x", "tmp", "y"), sizes=lambda i, d: (d["a"].shape[0],)),
    "GEMM": Spec(("a", "b", "c"), ("alpha",),
                 lambda i, d: (d["a"].shape[0], d["b"].shape[1], d["a"].shape[1])),
    "JACOBI_1D": Spec(("a", "b"), sizes=_edge_steps),
    "JACOBI_2D": Spec(("a", "b"), sizes=_edge_steps),
    "HEAT_3D": Spec(("a", "b"), sizes=_edge_steps),
    "MVT": Spec(("a", "y1", "y2", "x1", "x2"), sizes=lambda i, d: (d["a"].shape[0],)),
    "FDTD_2D": Spec(("fict", "hz", "ex", "ey"), sizes=lambda i, d: (*d["hz"].shape, i["steps"])),
    "2MM": Spec(("a", "b", "c", "tmp", "d"), ("alpha", "beta"),
                lambda i, d: (d["a"].shape[0], d["b"].shape[1], d["a"].shape[1], d["c"].shape[1])),
    "PRESSURE": Spec(("compression", "e_old", "vnewc", "bvc", "p_new"), ("cls", "p_cut", "pmin", "eosvmax")),
    "ENERGY": Spec(_ENERGY, ("rho0", "e_cut", "emin", "q_cut")),
    "VOL3D": Spec(("x", "y", "z", "dense"), lambda i: (VNORMQ,), _vol3d_sizes),
    "DEL_DOT_VEC_2D": Spec(("x", "y", "fx", "fy", "zones", "div"), sizes=_ddv_sizes, extra=("zones",)),
    "FIR": Spec(("inp", "dense"), lambda i: tuple(FIR_COEFF), lambda i, d: (i["n"] - FIR_COEFF.size,)),
    "LTIMES": Spec(("ell", "psi", "phi"),
                   sizes=lambda i, d: (*d["psi"].shape[:2], d["ell"].shape[0], d["ell"].shape[1])),
}


class Twin:
    """One port's CUDA C++ entry point bound to a Resident's device arrays."""

    def __init__(self, fn, res, inputs, spec: Spec):
        self._fn, self._res, self._spec = fn, res, spec
        arrays = dict(res.arrays)
        for k in spec.extra:           # arrays the kaio port does not need on the device
            arrays[k] = kaio.to_device(np.ascontiguousarray(inputs[k]))
        self._keep = [arrays[k] for k in spec.arrays]
        self._ptrs = (ctypes.c_void_p * max(1, len(self._keep)))(*[a.ptr for a in self._keep])
        sc = spec.scalars(inputs) if callable(spec.scalars) else [inputs[k] for k in spec.scalars]
        self._s = (ctypes.c_double * max(1, len(sc)))(*map(float, sc))
        sizes = spec.sizes(inputs, arrays) if spec.sizes else (self._keep[0].size,)
        self._n = (ctypes.c_long * len(sizes))(*map(int, sizes))
        self._out = (ctypes.c_double * 4)()

    def run(self, reps: int) -> None:
        """``reps`` reps, looped in C++ (asynchronous: the caller synchronizes)."""
        err = self._fn(reps, self._ptrs, self._s, self._n, self._out)
        if err:
            raise RuntimeError(f"CUDA error {err} in the CUDA C++ twin")

    def outputs(self) -> dict:
        if self._spec.result is not None:
            return self._spec.result(list(self._out))
        return self._res.outputs()


class Native:
    """The loaded library: which ports have a twin, and binding one to a Resident."""

    def __init__(self, lib: ctypes.CDLL):
        self._lib = lib
        self._fns = {}

    def has(self, port: str) -> bool:
        return port in TWINS

    def twin(self, port: str, res, inputs) -> Twin:
        fn = self._fns.get(port)
        if fn is None:
            fn = getattr(self._lib, f"rp_{port}")
            fn.argtypes = [ctypes.c_long, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_double),
                           ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_double)]
            fn.restype = ctypes.c_int
            self._fns[port] = fn
        return Twin(fn, res, inputs, TWINS[port])


def load() -> Native | None:
    """Build (or reuse) and open the library; None, with :func:`why_unavailable` saying why,
    when the current backend is not CUDA, nvcc is missing or compilation fails."""
    name = backends.current_name()
    if name != "cuda":
        _WHY[0] = f"the cuda variant needs the CUDA backend (current: {name})"
        return None
    try:
        try:
            lib = build(arch="native")
        except RuntimeError:
            lib = build(arch="sm_90")     # nvcc too old for -arch=native
        return Native(ctypes.CDLL(str(lib)))
    except (RuntimeError, OSError) as e:
        _WHY[0] = str(e)
        return None


def why_unavailable() -> str:
    return _WHY[0]
