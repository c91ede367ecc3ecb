"""Backends: each turns checked IR into something that runs, behind one interface.

A backend compiles for one target of :mod:`kaio.backends.targets`, whose ordered, named stages
(Triton's shape) every compilation runs; every artifact is kept and can be printed
(``kaio compile --emit STAGE``). The registry below knows every backend by name and why it is
unavailable on this machine.
"""
from __future__ import annotations

import importlib
import threading
from dataclasses import field

from ..cache import default_cache
from ..config import settings
from ..errors import BackendUnavailable
from ..options import CompileOptions, KernelOptions
from ..records import record
from .launch_checks import plan_launch


@record
class Compiled:
    """One compilation: the checked IR kernel, its artifacts (stage name -> artifact, see
    :mod:`kaio.backends.targets`), the options it was built with and the loaded handle."""

    kernel: object                       # the checked IR kernel as launched (kaio.ir.Kernel)
    artifacts: dict = field(default_factory=dict)
    handle: object = None                # backend-specific loaded function
    options: CompileOptions | None = None
    launch_plan: object = None           # backend-specific argument plan, built on first launch
    checks: object = None                # its LaunchChecks (kaio.backends.launch_checks), likewise


class Backend:
    """Interface every backend implements.

    - ``name``: 'reference' | 'cuda' | 'hip'
    - ``warp_size``: lanes per warp on this backend's device
    - ``available()``: (bool, reason) without side effects beyond probing the driver
    - ``compile_options(kernel_options) -> CompileOptions``: this device's target, warp width and
      codegen path with the kernel's own options applied
    - ``compile(kernel, kernel_options) -> Compiled``: the target's stages (through the compile
      cache), then ``load``; the same for every backend
    - ``load(kernel, artifacts, options)``: the runnable handle for the loadable artifact
    - ``launch(compiled, grid, block, args, shared_bytes, stream)``: check the launch
      (:func:`kaio.backends.launch_checks.check_launch`: arguments, launch shape, partitions,
      index bounds, aliasing), then run it. ``args`` are in IR parameter order: scalars and
      buffers (numpy arrays, the backend's device arrays, ``__cuda_array_interface__``
      objects); ``grid=None`` takes the first Region/Out parameter's default launch shape.
      The backend copies host arrays by intent (in: copy in; out: copy out; region: both;
      atomic/raw: both).
    - ``_launch(compiled, grid, block, args, shared_bytes, stream)``: internal, the backend's
      own part of ``launch``, given a launch that ``launch`` has checked; never call it directly.
      The checks run once per argument signature (``LaunchChecks.planned``); ``_launch_planned``
      may keep per-signature work of its own in the plan (the CUDA backend's packed pointers).
    """

    name = "?"
    warp_size = 32
    #: the device ordinal this instance runs on (see :meth:`on_device`)
    device = 0

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    def device_count(self) -> int:
        """How many devices this backend can run on."""
        return 1

    def on_device(self, device: int) -> "Backend":
        """This backend, with the same options, on device ``device`` (one instance per device,
        kept here: each holds its own loaded code and contexts)."""
        if device == self.device:
            return self
        siblings = self.__dict__.setdefault("_siblings", {})
        be = siblings.get(device)
        if be is None:
            with _lock:
                be = siblings.get(device) or siblings.setdefault(device, self._make_on(device))
        return be

    def _make_on(self, device: int) -> "Backend":
        return type(self)(device=device)

    def compile_options(self, kernel_options: KernelOptions | None = None) -> CompileOptions:
        raise NotImplementedError

    def compile(self, kernel, kernel_options: KernelOptions | None = None) -> Compiled:
        from .targets import build  # lazy: import time (the code generators, ~70 ms)
        options = self.compile_options(kernel_options)
        artifacts = build(kernel, options, self.compile_cache())
        kernel = artifacts["ir"]   # as launched (checked mode appends the fault record)
        return Compiled(kernel, artifacts, self.load(kernel, artifacts, options), options)

    def compile_cache(self):
        """The compile cache this backend's code goes through (None: none)."""
        return default_cache()

    def load(self, kernel, artifacts, options: CompileOptions):
        return None

    def launch(self, compiled: Compiled, grid, block, args, shared_bytes=0, stream=None):
        """Check the launch, then run it (see the class docstring); nothing is copied or
        launched when a check fails. Returns the launch shape used, as 3-tuples."""
        plan, args = plan_launch(compiled, grid, block, args)
        self._launch_planned(compiled, plan, args, shared_bytes, stream)
        return plan.grid, plan.block

    def _launch_planned(self, compiled: Compiled, plan, args, shared_bytes=0, stream=None):
        """Run a checked launch given its :class:`kaio.backends.launch_checks.LaunchPlan`
        (a backend may keep its own per-signature work in ``plan.data``); by default
        ``_launch``."""
        self._launch(compiled, plan.grid, plan.block, args, shared_bytes, stream)

    def _launch(self, compiled: Compiled, grid, block, args, shared_bytes=0, stream=None):
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
_lock = threading.Lock()


class _Local(threading.local):
    device = None  # the device set_device chose in this thread; None: the backend's default


_tls = _Local()
#: whether any thread has chosen a device (until then get_backend skips the thread-local read,
#: which is on every launch's path)
_devices_chosen = False


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
    """The named backend, or the current one (set_backend / KAIO_BACKEND / best available), on
    this thread's current device (:func:`set_device`)."""
    name = name or _current or current_name()
    be = _instances.get(name)
    if be is None:
        ok, why = availability(name)
        if not ok:
            raise BackendUnavailable(f"backend '{name}' is unavailable: {why}")
        be = _instances.setdefault(name, backend_class(name)())
    if not _devices_chosen:
        return be
    device = _tls.device
    return be if device is None else be.on_device(device)


#: ``get_backend()`` as an expression over this module (named ``backends``), for launch code
#: compiled from source (kaio.backends.cuda_planned): no call until a device was chosen, and
#: None where no backend is current yet (the caller then takes its full path)
CURRENT_SOURCE = ("(backends.get_backend() if backends._devices_chosen"
                  " else backends._instances.get(backends._current))")


def current_device() -> int:
    """The device launches and new arrays, streams and events of this thread use."""
    device = _tls.device
    return get_backend().device if device is None else device


def set_device(device: int | None) -> None:
    """Make ``device`` (an ordinal of the current backend) this thread's current device; None
    goes back to the backend's default (``KAIO_CUDA_DEVICE``, ``KAIO_HIP_DEVICE``, 0)."""
    global _devices_chosen
    if device is not None:
        if isinstance(device, bool) or not isinstance(device, int):
            raise TypeError(f"set_device: a device is an int ordinal, got {type(device).__name__}")
        be = get_backend()
        n = be.device_count()
        if not 0 <= device < n:
            raise ValueError(f"set_device({device}): the {be.name} backend has {n} device(s), "
                             f"0 to {n - 1}" + (" (KAIO_REF_DEVICES=N pretends to have N)"
                                                if be.name == "reference" else ""))
        _devices_chosen = True
    _tls.device = device


def current_name() -> str:
    global _current
    if _current is None:
        env = settings().backend
        if env:
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
