"""The runtime side of the AMD backend: HIP through hip-python.

Compile: IR -> LLVM IR -> code object (:mod:`kaio.backends.amdgpu`) for the device's
``gcnArchName``; the code object's metadata is validated against kaio's ABI before loading
(:func:`kaio.backends.codeobject.validate_code_object`) and kept in the compile cache; the loaded
module is kept per code object, so a kernel is loaded once per process.

Launch: ``hipModuleLaunchKernel`` with the ``extra`` form (HIP_LAUNCH_PARAM_BUFFER_POINTER /
_SIZE / _END): one kernarg buffer per kernel, laid out by
:func:`kaio.backends.codeobject.kernarg_layout` and checked against the metadata's explicit
arguments when the module is loaded; HIP appends the hidden (code object v5) arguments itself.
Numpy arguments are copied by intent (``in``: copy in; ``out``: copy out only;
``region``/``atomic``/``raw``: both); device arrays pass through.

Nothing here touches HIP at import time: without hip-python, ``libamdhip64`` or an AMD GPU,
:meth:`HipBackend.available` returns ``(False, reason)``.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import struct
import threading
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..config import settings
from ..errors import HipError, LaunchError
from ..ir.types import BufType
from . import Backend, Compiled
from .abi import KernelABI, kernel_abi
from .runtime import (
    ExecGraph,
    Runtime,
    Transfers,
    buffer_arg,
    capture_target,
    one_per_device,
    protocol_stream,
    quietly,
)
from .targets import get_target

#: struct codes of flat argument dtypes (bf16 travels as its 16-bit pattern, bool as u8)
_STRUCT = {"u8": "B", "i8": "b", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "i64": "q",
           "u64": "Q", "f16": "e", "bf16": "H", "f32": "f", "f64": "d"}
#: architectures kaio's LLVM path builds code objects for
SUPPORTED_ARCHS = ("gfx90a", "gfx942", "gfx1100")
_hip_module = None


def hip_api():
    """The hip-python ``hip`` module (imported on first use; tests may substitute a fake)."""
    global _hip_module
    if _hip_module is None:
        from hip import hip as _h  # lazy: hip-python, optional (ImportError without it)
        _hip_module = _h
    return _hip_module


def _error_name(h, err) -> str:
    try:
        name = h.hipGetErrorName(err)
        name = name[-1] if isinstance(name, tuple) else name
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # the name lookup must never hide the original failure
        return str(err)


def call(fn: str, *args, kernel: str | None = None):
    """Call ``hip.<fn>(*args)``; raise :class:`kaio.HipError` unless it returns hipSuccess.
    Returns the remaining results (None, one value, or a tuple)."""
    h = hip_api()
    out = getattr(h, fn)(*args)
    err, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
    if int(err) != 0:
        name = _error_name(h, err)
        where = f" (kernel '{kernel}')" if kernel else ""
        raise HipError(f"{fn} failed{where}: {name}", call=fn, code=name, kernel=kernel)
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


# --- devices ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HipDeviceProps:
    """What kaio uses from ``hipDeviceProp_t`` (read by field name, never by offset)."""

    ordinal: int
    name: str
    arch: str               # gcnArchName without feature suffixes: 'gfx90a'
    arch_full: str          # 'gfx90a:sramecc+:xnack-'
    warp_size: int
    cu_count: int
    total_memory: int
    max_threads_per_block: int
    shared_per_block: int


def _text(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).split(b"\0", 1)[0].decode(errors="replace")
    return str(v)


def _prop(p, *names, default=0):
    """First present field: ROCm 5 and 6 bindings differ in a few names (gcnArch is gone in 6)."""
    for n in names:
        v = getattr(p, n, None)
        if v is not None:
            return v
    return default


def props_from(p, ordinal: int) -> HipDeviceProps:
    """:class:`HipDeviceProps` from a hip-python ``hipDeviceProp_t`` (or any object with its fields)."""
    arch_full = _text(_prop(p, "gcnArchName", default=""))
    if not arch_full:   # ROCm 5 before gcnArchName was filled: gcnArch is 906, 908, 910 ...
        num = int(_prop(p, "gcnArch", default=0))
        arch_full = {910: "gfx90a", 942: "gfx942"}.get(num, f"gfx{num}")
    return HipDeviceProps(
        ordinal=ordinal, name=_text(_prop(p, "name", default="AMD GPU")),
        arch=arch_full.split(":", 1)[0], arch_full=arch_full,
        warp_size=int(_prop(p, "warpSize", default=64)),
        cu_count=int(_prop(p, "multiProcessorCount")),
        total_memory=int(_prop(p, "totalGlobalMem")),
        max_threads_per_block=int(_prop(p, "maxThreadsPerBlock", default=1024)),
        shared_per_block=int(_prop(p, "sharedMemPerBlock", default=65536)))


def device_props(ordinal: int) -> HipDeviceProps:
    return props_from(call("hipGetDeviceProperties", ordinal), ordinal)


def device_count() -> int:
    return int(call("hipGetDeviceCount"))


# --- kernel arguments -----------------------------------------------------------------------------
class KernargPacker:
    """One kernel's kernarg buffer and the ``extra`` array pointing at it.

    ``metadata_args``: the code object's explicit ``.args`` (from
    :func:`kaio.backends.codeobject.kernels`); when given, the layout must match it exactly."""

    def __init__(self, abi: KernelABI, metadata_args: list[dict] | None = None):
        from .codeobject import kernarg_layout  # lazy: import time, ~9 ms (msgpack, pyelftools)
        self.abi = abi
        self.slots, self.size = kernarg_layout(abi)
        if metadata_args is not None:
            self.check(metadata_args)
        self.codes = []
        for p in abi.params:
            if p.dtype not in _STRUCT:
                raise HipError(f"kernel '{abi.entry}': no packing for argument {p.name} ({p.dtype})",
                               call="kernarg", kernel=abi.entry)
            self.codes.append("<" + _STRUCT[p.dtype])
        self.buffer = ctypes.create_string_buffer(max(self.size, 8))
        self.size_t = ctypes.c_size_t(self.size)
        # HIP_LAUNCH_PARAM_BUFFER_POINTER=1, _BUFFER_SIZE=2, _END=3 (void* sentinels)
        self.extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(self.buffer), 2,
                                           ctypes.addressof(self.size_t), 3)
        self.lock = threading.Lock()

    def check(self, metadata_args: list[dict]) -> None:
        want = [(s.offset, s.size) for s in self.slots]
        have = [(a.get(".offset"), a.get(".size")) for a in metadata_args]
        if want != have:
            raise HipError(f"kernel '{self.abi.entry}': code object expects kernel arguments at "
                           f"(offset, size) {have} but kaio packs {want}", call="kernarg",
                           kernel=self.abi.entry)

    def pack(self, values: list) -> int:
        """Write flat ``values`` (ABI order) into the buffer; returns the ``extra`` address."""
        if len(values) != len(self.slots):
            raise LaunchError(f"kernel '{self.abi.entry}': {len(values)} flat arguments, "
                              f"expected {len(self.slots)}")
        for s, code, p, v in zip(self.slots, self.codes, self.abi.params, values):
            if p.dtype == "bf16":
                v = int(np.array(v, dtype=ml_dtypes.bfloat16).view(np.uint16))
            elif p.dtype == "u8" and p.kind == "scalar":
                v = int(bool(v))
            struct.pack_into(code, self.buffer, s.offset, v)
        return ctypes.addressof(self.extra)

    def bytes(self) -> bytes:
        return self.buffer.raw[: self.size]


# --- memory, streams, events, graphs --------------------------------------------------------------
def _stream_handle(stream):
    """A HIP stream argument as hip-python takes it: None for the null stream; an object with
    ``__cuda_stream__`` (the stream protocol, which CuPy-on-ROCm speaks too) by its handle."""
    handle = protocol_stream(stream)
    if handle is not None:
        return handle or None
    if stream is None or stream == 0:
        return None
    return getattr(stream, "handle", stream)


def _enum(holder: str, member: str, default: int):
    """A hip-python enum member (the bindings take the enum), or HIP's header value."""
    enum = getattr(hip_api(), holder, None)
    return getattr(enum, member) if enum is not None else default


def _done(fn: str, *args) -> bool:
    """A query: False while work is pending (hipErrorNotReady), True when done, HipError else."""
    out = getattr(hip_api(), fn)(*args)
    err = out[0] if isinstance(out, tuple) else out
    if int(err) == 600:
        return False
    if int(err):
        call(fn, *args)  # the failing call again, to raise its HipError with the error's name
    return True


class HipRuntime(Runtime):
    """Memory, streams, events and graphs of one AMD device, through hip-python
    (:class:`kaio.backends.runtime.Runtime`). Launch temporaries are not pooled: this path has
    never run on an AMD GPU, so it stays the simple one until it can be measured."""

    name = "hip"
    dlpack_device = 10  # kDLROCM
    exports_cai = True  # hip-python and CuPy-on-ROCm use the CUDA name
    default_stream = None

    def __init__(self, device: int):
        self.device = device

    def _use(self) -> None:
        """Make this device current in the calling thread: HIP allocates memory, streams and
        events on the current device."""
        call("hipSetDevice", self.device)

    def alloc(self, nbytes: int) -> int:
        self._use()
        return int(call("hipMalloc", nbytes))

    def free(self, ptr: int) -> None:
        call("hipFree", ptr)

    def host_alloc(self, nbytes: int) -> int:
        return int(call("hipHostMalloc", nbytes, 0))

    def host_free(self, ptr: int) -> None:
        call("hipHostFree", ptr)

    _KINDS = {"htod": ("hipMemcpyHostToDevice", 1), "dtoh": ("hipMemcpyDeviceToHost", 2),
              "dtod": ("hipMemcpyDeviceToDevice", 3)}

    def memcpy(self, kind: str, dst: int, src: int, nbytes: int, stream=None) -> None:
        k = _enum("hipMemcpyKind", *self._KINDS[kind])
        if stream is None:
            call("hipMemcpy", dst, src, nbytes, k)
        else:
            call("hipMemcpyAsync", dst, src, nbytes, k, stream)

    def stream_create(self, non_blocking: bool):
        self._use()
        return call("hipStreamCreateWithFlags", 1 if non_blocking else 0)  # hipStreamNonBlocking

    def stream_destroy(self, h) -> None:
        call("hipStreamDestroy", h)

    def stream_synchronize(self, h, kernel: str | None = None) -> None:
        if h is None:
            call("hipDeviceSynchronize", kernel=kernel)
        else:
            call("hipStreamSynchronize", h, kernel=kernel)

    def stream_query(self, h) -> bool:
        return _done("hipStreamQuery", h)

    def stream_wait(self, h, event) -> None:
        call("hipStreamWaitEvent", h, event, 0)

    def foreign_stream(self, stream):
        return _stream_handle(stream)

    def event_create(self, timing: bool):
        self._use()
        return call("hipEventCreateWithFlags", 0 if timing else 2)  # hipEventDisableTiming

    def event_destroy(self, ev) -> None:
        call("hipEventDestroy", ev)

    def event_record(self, ev, h) -> None:
        call("hipEventRecord", ev, h)

    def event_synchronize(self, ev) -> None:
        call("hipEventSynchronize", ev)

    def event_query(self, ev) -> bool:
        return _done("hipEventQuery", ev)

    def event_elapsed_ms(self, start, end) -> float:
        return float(call("hipEventElapsedTime", start, end))

    def graph_begin(self, h) -> None:
        call("hipStreamBeginCapture", h, _enum("hipStreamCaptureMode",
                                               "hipStreamCaptureModeRelaxed", 2))

    def graph_end(self, h, keep: bool):
        graph = call("hipStreamEndCapture", h)
        if not keep:
            if graph is not None:
                quietly(call, "hipGraphDestroy", graph)
            return None
        return ExecGraph(call("hipGraphInstantiateWithFlags", graph, 0), graph,
                         functools.partial(call, "hipGraphExecDestroy"),
                         functools.partial(call, "hipGraphDestroy"))

    def graph_launch(self, exe, h) -> None:
        call("hipGraphLaunch", exe.exe, h)

    def synchronize(self) -> None:
        self._use()
        call("hipDeviceSynchronize")


#: device ordinal -> its HipRuntime
hip_runtime = one_per_device(HipRuntime)


# --- modules ---------------------------------------------------------------------------------------
class LoadedKernel:
    """A loaded code object, its kernel function and its kernarg packer."""

    def __init__(self, hsaco: bytes, abi: KernelABI, kernel_name: str):
        from .codeobject import kernels  # lazy: import time, ~9 ms (msgpack, pyelftools)
        self.name, self.abi, self.hsaco = kernel_name, abi, hsaco
        meta = kernels(hsaco).get(abi.entry)
        if meta is None:
            raise HipError(f"code object has no kernel '{abi.entry}'", call="metadata", kernel=kernel_name)
        self.meta = meta
        self.packer = KernargPacker(abi, meta.explicit_args)
        self.module = call("hipModuleLoadData", hsaco, kernel=kernel_name)
        self.function = call("hipModuleGetFunction", self.module, abi.entry.encode(), kernel=kernel_name)

    def launch(self, grid, block, shared_bytes: int, stream, values: list) -> None:
        with self.packer.lock:
            extra = self.packer.pack(values)
            call("hipModuleLaunchKernel", self.function, *grid, *block, int(shared_bytes),
                 _stream_handle(stream), None, extra, kernel=self.name)


class HipBackend(Backend):
    """AMD GPUs through HIP (hip-python). Device: ``KAIO_HIP_DEVICE`` (default 0);
    ``KAIO_HIP_SYNC=1`` synchronizes after every launch."""

    name = "hip"
    warp_size = 64

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            hip_api()
        except ImportError as e:
            return False, f"hip-python is not installed ({e}); pip install hip-python"
        try:
            n = device_count()
        except HipError as e:
            return False, f"HIP reports no usable device: {e}"
        except Exception as e:  # hip-python raises RuntimeError when libamdhip64 cannot be loaded
            return False, f"ROCm's libamdhip64 cannot be loaded: {e}"
        if n == 0:
            return False, "no AMD GPU found"
        try:
            arch = device_props(_device_index()).arch
        except HipError as e:
            return False, str(e)
        if arch not in SUPPORTED_ARCHS:
            return False, f"AMD GPU arch {arch} is not supported (supported: {', '.join(SUPPORTED_ARCHS)})"
        return True, ""

    def __init__(self, device: int | None = None):
        self.device = _device_index() if device is None else device
        self.make_current()
        self.props = device_props(self.device)
        self.arch = self.target = self.props.arch
        self.warp_size = self.props.warp_size
        self.sync_every_launch = settings().hip_sync
        self._modules: dict[str, LoadedKernel] = {}
        self._lock = threading.Lock()

    def device_count(self) -> int:
        """AMD devices HIP sees (peer copies between them are host-staged: no peer access yet)."""
        return device_count()

    def make_current(self) -> None:
        """Make this backend's device the calling thread's current HIP device."""
        call("hipSetDevice", self.device)

    # --- compiling (the stages are kaio.backends.targets'; Backend.compile runs them) ------
    def compile_options(self, kernel_options=None):
        """This device's AMDGPU target (validated code objects, cached)."""
        return get_target(self.arch).options(kernel_options, warp_size=self.warp_size)

    def load(self, kernel, artifacts, options):
        return self.load_hsaco(artifacts["hsaco"], kernel_abi(kernel), kernel.name)

    def load_hsaco(self, hsaco: bytes, abi: KernelABI, kernel_name: str | None = None) -> LoadedKernel:
        key = hashlib.sha256(hsaco).hexdigest() + ":" + abi.entry
        with self._lock:
            lk = self._modules.get(key)
            if lk is None:
                self.make_current()
                lk = self._modules[key] = LoadedKernel(hsaco, abi, kernel_name or abi.entry)
        return lk

    # --- memory, streams, events, graphs ------------------------------------------------------
    @functools.cached_property
    def runtime(self) -> HipRuntime:
        """This device's memory, streams, events and graphs (:class:`HipRuntime`)."""
        return hip_runtime(self.device)

    # --- launching -----------------------------------------------------------------------------
    def _launch(self, compiled: Compiled, grid, block, args, shared_bytes=0, stream=None):
        """Run a launch that ``Backend.launch`` checked; ``args`` in IR parameter order."""
        lk: LoadedKernel = compiled.handle
        kernel = compiled.kernel
        for g, b, ax in zip(grid, block, "xyz"):
            if g * b >= 2**32:   # HIP's limit on work-items per dimension
                raise LaunchError(f"kernel '{kernel.name}': grid.{ax} * block.{ax} = {g * b} work-items; "
                                  "HIP allows fewer than 2**32 per dimension")
        total_lds = lk.meta.group_segment_fixed_size + int(shared_bytes)
        if total_lds > self.props.shared_per_block:
            raise LaunchError(f"kernel '{kernel.name}': {lk.meta.group_segment_fixed_size} B static + "
                              f"{shared_bytes} B dynamic LDS exceeds {self.props.shared_per_block} B "
                              f"per workgroup on {self.props.name}")
        self.make_current()
        rt = self.runtime
        graph, stream = capture_target(stream, args)
        h = rt.stream_handle(stream)
        values, xfer = [], Transfers(rt, h)
        try:
            for i, (a, v) in enumerate(zip(args, kernel.args)):
                if isinstance(v.type, BufType):
                    ptr, shape = self._buffer(a, v.type, kernel, i, xfer)
                    values.append(ptr)
                    values.extend(int(s) for s in shape)
                else:
                    values.append(a)
            lk.launch(grid, block, shared_bytes, h, values)
            if xfer.temps or (self.sync_every_launch and graph is None):
                xfer.finish(kernel.name)
        finally:
            xfer.release()

    def blas(self):
        """This backend's hipBLAS handle for :func:`kaio.blas.gemm` (created on first use)."""
        if self.__dict__.get("_hipblas") is None:
            from .hipblas import Hipblas  # lazy: import time, ~20 ms (hipBLAS bindings, GEMM helpers)
            self._hipblas = Hipblas(self)
        return self._hipblas

    def _buffer(self, a, t: BufType, kernel, i, xfer: Transfers):
        """(pointer, shape) of buffer argument ``i`` (see :func:`kaio.backends.runtime.buffer_arg`)."""
        what = f"kernel '{kernel.name}': parameter '{kernel.params[i].name}'"
        return buffer_arg(self.runtime, a, t, what, xfer)

    # --- information -----------------------------------------------------------------------------
    def devices(self) -> list[str]:
        return [f"{p.name} ({p.arch_full}, {p.cu_count} CUs, {p.total_memory / 2**30:.1f} GiB, "
                f"wave{p.warp_size})" for p in (device_props(i) for i in range(device_count()))]

    @staticmethod
    def device_info() -> list[dict]:
        """One dict per AMD device (empty when HIP is unavailable)."""
        if not HipBackend.available()[0]:
            return []
        return [{"index": p.ordinal, "name": p.name, "arch": p.arch_full, "cus": p.cu_count,
                 "memory_gib": round(p.total_memory / 2**30, 1), "warp_size": p.warp_size,
                 "max_threads_per_block": p.max_threads_per_block,
                 "shared_per_block": p.shared_per_block}
                for p in (device_props(i) for i in range(device_count()))]


def _device_index() -> int:
    return settings().hip_device
