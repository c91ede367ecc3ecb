"""Thin, checked access to the CUDA driver API through cuda-python (``cuda.bindings.driver``).

Every driver call goes through :func:`call` (or :func:`check` on a result already in hand),
which turns a failing ``CUresult`` into :class:`kaio.CudaError` naming the call, the driver's
error name and description, and the kernel involved. cuda-python is imported lazily, so
``import kaio`` works on machines without it; :func:`probe` says why CUDA cannot be used here.

This module also owns the per-process CUDA state: the primary context of each device
(retained once, made current per thread on demand) and the device properties read from it.
"""
from __future__ import annotations

import threading

from ..config import settings
from ..errors import BackendUnavailable, CudaError
from ..records import frozen

_driver = None
_probe_result: tuple[bool, str] | None = None
_lock = threading.RLock()
class _Local(threading.local):
    current = None  # the Context current in this thread (a class default: reads never raise)


_tls = _Local()
#: this thread's current context as ``current_context.current`` (read on every launch)
current_context = _tls
_contexts: dict[int, "Context"] = {}
#: ``contexts_made[0]``: Contexts created in this process. While it is 1, a thread that made that
#: context current keeps it (kaio makes no other one current), so a planned launch reads its
#: thread's current context only once there are more (kaio.backends.cuda_planned)
contexts_made = [0]

#: errors after which the context is unusable (a kernel faulted); named so messages can say so
STICKY_ERRORS = {"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_MISALIGNED_ADDRESS",
                 "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_HARDWARE_STACK_ERROR",
                 "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_ASSERT", "CUDA_ERROR_INVALID_ADDRESS_SPACE"}

#: the kernel launched most recently; asynchronous faults surface at a later call, and naming
#: this kernel is the best clue the runtime has
last_launched: str | None = None


def driver():
    """The ``cuda.bindings.driver`` module (BackendUnavailable when cuda-python is missing)."""
    global _driver
    if _driver is None:
        try:
            from cuda.bindings import driver as d  # lazy: cuda-python, optional
        except ImportError:
            try:  # cuda-python releases before the cuda.bindings package layout
                from cuda import cuda as d  # type: ignore[no-redef]  # lazy: cuda-python, optional
            except ImportError as e:
                raise BackendUnavailable(
                    f"cuda-python is not installed ({e}); pip install 'kaio[cuda]'") from None
        _driver = d
    return _driver


def set_driver(module) -> None:
    """Replace the driver module (tests use a fake one) and forget all CUDA state."""
    global _driver, _probe_result
    _driver = module
    _probe_result = None
    _contexts.clear()
    _tls.current = None


def error_name(code) -> tuple[str, str]:
    """(name, description) of a CUresult, e.g. ('CUDA_ERROR_ILLEGAL_ADDRESS', 'an illegal ...')."""
    d = driver()
    name, desc = f"CUresult {int(code)}", ""
    try:
        r = d.cuGetErrorName(code)
        if int(r[0]) == 0 and r[1]:
            name = r[1].decode() if isinstance(r[1], bytes) else str(r[1])
        r = d.cuGetErrorString(code)
        if int(r[0]) == 0 and r[1]:
            desc = r[1].decode() if isinstance(r[1], bytes) else str(r[1])
    except Exception:  # the names are a courtesy; never hide the real error behind another
        pass
    return name, desc


def make_error(call: str, code, kernel: str | None = None, detail: str = "") -> CudaError:
    name, desc = error_name(code)
    msg = f"{call} failed: {name}" + (f" ({desc})" if desc else "")
    if kernel is None and name in STICKY_ERRORS and last_launched:
        kernel = last_launched
        msg += f"; the kernel that faulted is most likely '{kernel}' (launched last)"
    elif kernel is not None:
        msg = f"kernel '{kernel}': {msg}"
    if name in STICKY_ERRORS:
        msg += ("\nhint: the kernel touched memory it must not (out-of-bounds index, or a Raw "
                "buffer misused); the CUDA context is now unusable: restart the process")
    if detail:
        msg += "\n" + detail
    return CudaError(msg, call=call, code=name, kernel=kernel)


def check(call: str, result, kernel: str | None = None):
    """Raise CudaError if ``result`` (a CUresult or a ``(CUresult, *values)`` tuple) failed;
    otherwise return the values: None, the single value, or a tuple."""
    if isinstance(result, tuple):
        err, rest = result[0], result[1:]
    else:
        err, rest = result, ()
    if int(err) != 0:
        raise make_error(call, err, kernel)
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def call(name: str, *args, kernel: str | None = None):
    """``cuda.bindings.driver.<name>(*args)``, checked."""
    return check(name, getattr(driver(), name)(*args), kernel)


# --- probing ----------------------------------------------------------------------------
def probe() -> tuple[bool, str]:
    """(True, summary) when a CUDA device is usable here, else (False, reason). Cached."""
    global _probe_result
    if _probe_result is not None:
        return _probe_result
    with _lock:
        if _probe_result is None:
            _probe_result = _probe()
    return _probe_result


def _probe() -> tuple[bool, str]:
    try:
        d = driver()
    except BackendUnavailable as e:
        return False, str(e)
    try:
        r = d.cuInit(0)
    except Exception as e:  # cuda-python raises (not returns) when libcuda cannot be loaded
        return False, f"the CUDA driver library (libcuda) could not be loaded: {e}"
    err = r[0] if isinstance(r, tuple) else r
    if int(err) != 0:
        name, desc = error_name(err)
        return False, f"cuInit failed: {name} ({desc})"
    try:
        n = check("cuDeviceGetCount", d.cuDeviceGetCount())
    except CudaError as e:
        return False, str(e)
    if n == 0:
        return False, "no CUDA device found"
    return True, f"{n} CUDA device(s)"


def require() -> None:
    """Raise BackendUnavailable with the reason unless CUDA is usable."""
    ok, why = probe()
    if not ok:
        raise BackendUnavailable(f"CUDA is unavailable: {why}")


# --- devices and contexts ---------------------------------------------------------------
@frozen
class DeviceProps:
    """What kaio needs to know about a device."""

    ordinal: int
    name: str
    cc: tuple[int, int]
    sm_count: int
    max_threads_per_block: int
    shared_per_block: int
    shared_per_block_optin: int
    warp_size: int
    total_memory: int

    @property
    def arch(self) -> str:
        return arch_for_cc(*self.cc)


def arch_for_cc(major: int, minor: int) -> str:
    """The PTX target kaio emits for a compute capability: the newest of sm_80, sm_86, sm_89,
    sm_90 not above it (8.7 -> sm_86; 9.x and newer -> sm_90). PTX is forward compatible: the
    driver JIT-compiles it for the actual GPU. Older than 8.0: ValueError."""
    if major >= 9:
        return "sm_90"
    if major == 8:
        return "sm_89" if minor >= 9 else "sm_86" if minor >= 6 else "sm_80"
    raise ValueError(f"compute capability {major}.{minor} is older than 8.0 (Ampere); "
                     "kaio's PTX needs sm_80 or newer")


class Context:
    """The retained primary context of one device, its properties and the driver version."""

    def __init__(self, ordinal: int):
        require()
        contexts_made[0] += 1
        self.ordinal = ordinal
        n = call("cuDeviceGetCount")
        if not 0 <= ordinal < n:
            raise CudaError(f"CUDA device {ordinal} does not exist ({n} device(s) present)",
                            call="cuDeviceGet")
        self.device = call("cuDeviceGet", ordinal)
        self.handle = call("cuDevicePrimaryCtxRetain", self.device)
        self.driver_version = int(call("cuDriverGetVersion"))
        self.props = self._props()
        self.make_current()

    def _attr(self, name: str) -> int:
        d = driver()
        return int(call("cuDeviceGetAttribute", getattr(d.CUdevice_attribute, name), self.device))

    def _props(self) -> DeviceProps:
        raw = call("cuDeviceGetName", 256, self.device)
        name = raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        p = "CU_DEVICE_ATTRIBUTE_"
        return DeviceProps(
            ordinal=self.ordinal, name=name,
            cc=(self._attr(p + "COMPUTE_CAPABILITY_MAJOR"), self._attr(p + "COMPUTE_CAPABILITY_MINOR")),
            sm_count=self._attr(p + "MULTIPROCESSOR_COUNT"),
            max_threads_per_block=self._attr(p + "MAX_THREADS_PER_BLOCK"),
            shared_per_block=self._attr(p + "MAX_SHARED_MEMORY_PER_BLOCK"),
            shared_per_block_optin=self._attr(p + "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            warp_size=self._attr(p + "WARP_SIZE"),
            total_memory=int(call("cuDeviceTotalMem", self.device)))

    def make_current(self) -> None:
        """Make this context current in the calling thread (once per thread)."""
        if _tls.current is not self:
            call("cuCtxSetCurrent", self.handle)
            _tls.current = self

    def synchronize(self) -> None:
        self.make_current()
        call("cuCtxSynchronize")


def default_ordinal() -> int:
    """The device kaio uses: ``KAIO_CUDA_DEVICE`` (default 0)."""
    return settings().cuda_device


def context(ordinal: int | None = None) -> Context:
    """The device's context, created on first use and current in the calling thread."""
    ordinal = default_ordinal() if ordinal is None else ordinal
    ctx = _contexts.get(ordinal)
    if ctx is None:
        with _lock:
            ctx = _contexts.get(ordinal)
            if ctx is None:
                ctx = _contexts[ordinal] = Context(ordinal)
    ctx.make_current()
    return ctx


def device_count() -> int:
    return int(call("cuDeviceGetCount")) if probe()[0] else 0


def all_device_props() -> list[DeviceProps]:
    """Properties of every device (empty without CUDA)."""
    return [context(i).props for i in range(device_count())]
