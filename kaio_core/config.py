"""kaio's environment switches: every ``KAIO_*`` variable is read here, once, into one frozen
:class:`Settings`. No other module reads ``os.environ``.

The settings are read on first use (so an invalid value is reported by the code that needs it,
not by ``import kaio``) and kept for the life of the process. A program or test that changes the
environment afterwards calls :func:`reload`.

=========================  ====================================================================
variable                   meaning
=========================  ====================================================================
KAIO_AMD_CODE_OBJECT       AMD code object version kaio emits: 5 (default; every ROCm 6 release
                           loads it) | 6 (LLVM 22's own default; loaders of ROCm 6.3 and later)
KAIO_AUTOTUNE              0: autotuned kernels use their declared default configuration and
                           time nothing (kaio.autotune; default 1: tune once per shape and device)
KAIO_BACKEND               backend launches use: reference | cuda | hip (default: best available)
KAIO_CACHE_DIR             compile cache folder (default ~/.cache/kaio)
KAIO_CACHE_DISABLE         1: keep compiled code in memory only
KAIO_CHECKED               1: kernels that do not say otherwise are compiled in checked mode
                           (every access bounds-checked on the device; an out-of-bounds one
                           raises IndexError after the launch)
KAIO_CUBLAS                path of the libcublas to load (through the ctypes binding)
KAIO_CUBLAS_BINDING        ctypes | nvmath: how kaio.blas reaches cuBLAS on CUDA (default:
                           kaio.backends.cublas_bindings.PREFERRED_BINDING if it works, else ctypes)
KAIO_CUDA_DEVICE           CUDA device ordinal (default 0)
KAIO_CUDA_SYNC             1: synchronize after every CUDA launch (pins a fault on its kernel)
KAIO_CUDA_CODEGEN          ptx (kaio's PTX emitter, default) | llvm (the LLVM nvptx64 path)
KAIO_HIP_DEVICE            HIP device ordinal (default 0)
KAIO_HIP_SYNC              1: synchronize after every HIP launch
KAIO_INTERNAL_FRAMES       1: keep kaio's own frames in a CompileError's traceback (for kaio
                           developers; by default it starts at the user's call)
KAIO_LLD                   the ld.lld binary that links AMD code objects
KAIO_MPI_CUDA_AWARE        1 / 0: the MPI library is / is not CUDA-aware (kaio.mpi passes device
                           buffers to it directly); default: asked of the library at run time
KAIO_PORTABLE              1: kernels that do not say otherwise are compiled in portable mode
                           (only correctly rounded operations and kaio's portable math library:
                           fast_math and per-call fast=True are ignored; docs/conformance.md)
KAIO_REF_DEVICES           devices the reference backend pretends to have (default 1), so code
                           for several devices (kaio.set_device, peer copies) runs in CI
KAIO_REF_MAX_ITERATIONS    iterations one loop may run in one reference launch before the
                           watchdog stops it with a KernelRuntimeError naming the loop's line
                           (default 10**6; 0: no limit)
KAIO_REF_WARP_SIZE         lanes per warp of the reference interpreter (default 32)
KAIO_SANITIZE              1: run the reference backend's race sanitizer
KAIO_SANITIZE_OWNERSHIP    1: the sanitizer also checks Region ownership of every access
=========================  ====================================================================
"""
from __future__ import annotations

import os
import threading

from .records import frozen

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
BACKENDS = ("reference", "cuda", "hip")
#: AMD code object versions kaio can emit (both carry the hidden kernel arguments of v5 that
#: kaio reads block and grid sizes from; v4 does not)
AMD_CODE_OBJECTS = (5, 6)


@frozen
class Settings:
    """The process's environment switches (see the module docstring for each)."""

    amd_code_object: int = 5
    autotune: bool = True
    backend: str | None = None
    cache_dir: str | None = None
    cache_disable: bool = False
    checked: bool = False
    cublas: str | None = None
    cublas_binding: str | None = None
    cuda_device: int = 0
    cuda_sync: bool = False
    cuda_codegen: str = "ptx"
    hip_device: int = 0
    hip_sync: bool = False
    internal_frames: bool = False
    lld: str | None = None
    mpi_cuda_aware: bool | None = None
    portable: bool = False
    ref_devices: int = 1
    ref_max_iterations: int = 10**6
    ref_warp_size: int = 32
    sanitize: bool = False
    sanitize_ownership: bool = False


def _flag(env, name: str) -> bool:
    return env.get(name, "").strip().lower() in _TRUE


def _tristate(env, name: str) -> bool | None:
    """True / False when the variable says so, None when it is unset (ask at run time)."""
    raw = env.get(name, "").strip().lower()
    if not raw:
        return None
    if raw not in _TRUE + _FALSE:
        raise ValueError(f"{name}={raw!r}: use 1 or 0")
    return raw in _TRUE


def _int(env, name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None


def _choice(env, name: str, choices: tuple, default):
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if raw not in choices:
        raise ValueError(f"{name}={raw!r}: choose one of {', '.join(choices)}")
    return raw


def read(env=None) -> Settings:
    """Settings from ``env`` (default ``os.environ``); ValueError naming a malformed variable."""
    env = os.environ if env is None else env
    return Settings(
        amd_code_object=int(_choice(env, "KAIO_AMD_CODE_OBJECT", tuple(map(str, AMD_CODE_OBJECTS)), "5")),
        autotune=env.get("KAIO_AUTOTUNE", "").strip().lower() not in _FALSE,
        backend=_choice(env, "KAIO_BACKEND", BACKENDS, None),
        cache_dir=env.get("KAIO_CACHE_DIR") or None,
        cache_disable=_flag(env, "KAIO_CACHE_DISABLE"),
        checked=_flag(env, "KAIO_CHECKED"),
        cublas=env.get("KAIO_CUBLAS") or None,
        cublas_binding=_choice(env, "KAIO_CUBLAS_BINDING", ("ctypes", "nvmath"), None),
        cuda_device=_int(env, "KAIO_CUDA_DEVICE", 0),
        cuda_sync=_flag(env, "KAIO_CUDA_SYNC"),
        cuda_codegen=_choice(env, "KAIO_CUDA_CODEGEN", ("ptx", "llvm"), "ptx"),
        hip_device=_int(env, "KAIO_HIP_DEVICE", 0),
        hip_sync=_flag(env, "KAIO_HIP_SYNC"),
        internal_frames=_flag(env, "KAIO_INTERNAL_FRAMES"),
        lld=env.get("KAIO_LLD") or None,
        mpi_cuda_aware=_tristate(env, "KAIO_MPI_CUDA_AWARE"),
        portable=_flag(env, "KAIO_PORTABLE"),
        ref_devices=_int(env, "KAIO_REF_DEVICES", 1),
        ref_max_iterations=_int(env, "KAIO_REF_MAX_ITERATIONS", 10**6),
        ref_warp_size=_int(env, "KAIO_REF_WARP_SIZE", 32),
        sanitize=_flag(env, "KAIO_SANITIZE"),
        sanitize_ownership=_flag(env, "KAIO_SANITIZE_OWNERSHIP"),
    )


_lock = threading.Lock()
_settings: Settings | None = None


def settings() -> Settings:
    """The process's settings, read from the environment on first use."""
    s = _settings
    if s is None:
        s = reload()
    return s


def reload() -> Settings:
    """Read the environment again (after a program or test changed it); returns the settings."""
    global _settings
    with _lock:
        _settings = read()
        return _settings
