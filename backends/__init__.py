"""Backends: each turns checked IR into something that runs, behind one interface.

A backend declares its compilation as an ordered list of named stages (Triton's shape): each
stage is a function from one artifact to the next, every artifact is kept and can be printed
(``kaio compile --emit STAGE``). The registry below knows every backend by name and why it is
unavailable on this machine.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Callable

from ..errors import BackendUnavailable


@dataclass
class Compiled:
    """The artifacts of one compilation (stage name -> artifact) and the runnable handle."""

    kernel: object                       # the checked IR kernel (kaio.ir.Kernel)
    artifacts: dict = field(default_factory=dict)
    handle: object = None                # backend-specific loaded function
    launch_plan: object = None           # backend-specific argument plan, built on first launch


class Backend:
    """Interface every backend implements.

    - ``name``: 'reference' | 'cuda' | 'hip'
    - ``warp_size``: lanes per warp on this backend's device
    - ``available()``: (bool, reason) without side effects beyond probing the driver
    - ``stages()``: [(stage name, function(artifact, options) -> artifact)], starting from IR
    - ``compile(kernel, options) -> Compiled``: run the stages and load the result
    - ``launch(compiled, grid, block, args, shared_bytes, stream)``: run it. ``args`` are in
      IR parameter order: Python scalars (already range-checked) and buffers (numpy arrays or
      the backend's device arrays); the backend copies host arrays by intent
      (in: copy in; out: copy out; region: both; atomic/raw: both).
    """

    name = "?"
    warp_size = 32

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    def stages(self) -> list[tuple[str, Callable]]:
        raise NotImplementedError

    def compile(self, kernel, options=None) -> Compiled:
        artifacts = {"ir": kernel}
        art = kernel
        for name, stage in self.stages():
            art = stage(art, options or {})
            artifacts[name] = art
        return Compiled(kernel, artifacts, self.load(artifacts))

    def load(self, artifacts):
        return None

    def launch(self, compiled: Compiled, grid, block, args, shared_bytes=0, stream=None):
        raise NotImplementedError

    def devices(self) -> list[str]:
        return []


# name -> "module:Class" (imported lazily so a missing driver never breaks `import kaio`)
REGISTRY = {
    "reference": "kaio.backends.reference:ReferenceBackend",
    "cuda": "kaio.backends.cuda:CudaBackend",
    "hip": "kaio.backends.hip:HipBackend",
}
PREFERENCE = ("cuda", "hip", "reference")

_instances: dict[str, Backend] = {}
_current: str | None = None


def backend_class(name: str):
    if name not in REGISTRY:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(REGISTRY)}")
    mod, _, cls = REGISTRY[name].partition(":")
    try:
        return getattr(importlib.import_module(mod), cls)
    except ImportError as e:
        raise BackendUnavailable(f"backend '{name}' cannot be imported: {e}") from e


def availability(name: str) -> tuple[bool, str]:
    try:
        return backend_class(name).available()
    except BackendUnavailable as e:
        return False, str(e)


def get_backend(name: str | None = None) -> Backend:
    """The named backend, or the current one (set_backend / KAIO_BACKEND / best available)."""
    name = name or current_name()
    if name not in _instances:
        ok, why = availability(name)
        if not ok:
            raise BackendUnavailable(f"backend '{name}' is unavailable: {why}")
        _instances[name] = backend_class(name)()
    return _instances[name]


def current_name() -> str:
    global _current
    if _current is None:
        env = os.environ.get("KAIO_BACKEND")
        if env:
            if env not in REGISTRY:
                raise ValueError(f"KAIO_BACKEND={env!r}: choose one of {', '.join(REGISTRY)}")
            _current = env
        else:
            _current = next(n for n in PREFERENCE if availability(n)[0])
    return _current


def set_backend(name: str) -> None:
    """Select the backend used by kernel launches: 'reference', 'cuda' or 'hip'."""
    global _current
    ok, why = availability(name)
    if not ok:
        raise BackendUnavailable(f"backend '{name}' is unavailable: {why}")
    _current = name
