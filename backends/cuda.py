"""The runtime side of the NVIDIA backend: compile to PTX (cached), load through the CUDA
driver, pack arguments and launch.

Compiling runs the target's stages (:mod:`kaio.backends.targets`: ``sm_XX`` for kaio's PTX for
the device's arch and the PTX ISA version its driver accepts, or ``nvptx64-sm_XX`` for the LLVM
path); the PTX text is kept in the on-disk compile cache and the loaded module in memory per PTX
text, so a kernel is JIT-compiled by the driver once per process, never per launch; the cubin the
driver makes of it is kept on disk too (:mod:`kaio.backends.cuda_cubin`), so a later process
loads that instead of handing the driver the PTX again.

Launch: arguments are flattened per :class:`kaio.backends.abi.KernelABI` into one fixed parameter
buffer per kernel (built once: the *launch plan*), so a launch costs one ``struct.pack_into`` and
one ``cuLaunchKernel``. Numpy arguments are transferred by intent (``in``: copy in only; ``out``:
copy out only; ``region``/``atomic``/``raw``: both) through pooled temporaries, and the launch is
synchronized before copying back; device arrays (kaio's, or anything with
``__cuda_array_interface__``) pass through with no copy and the launch stays asynchronous.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import struct
import threading

import ml_dtypes
import numpy as np

from ..config import settings
from ..errors import CudaError, LaunchError
from ..ir.types import BufType
from ..passes.limits import DYN_SHARED_MARK
from . import Backend, Compiled, cuda_cubin, cuda_runtime
from . import cuda_driver as drv
from .abi import KernelABI, kernel_abi, ptx_version_for
from .cuda_planned import PlannedLaunch
from .runtime import DeviceArray, Transfers, buffer_arg, capture_target
from .targets import get_target, nvptx_target_for

#: struct codes of the flat argument dtypes (f16 packs natively; bf16 as its 16-bit pattern)
_STRUCT = {"u8": "B", "i8": "b", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "i64": "q",
           "u64": "Q", "f16": "e", "bf16": "H", "f32": "f", "f64": "d"}
_DEFAULT_DYN_SHARED = 48 * 1024  # above this a kernel must opt in to more dynamic shared memory
_LOG_BYTES = 64 * 1024


def _bf16_bits(v) -> int:
    return int(np.array(v, dtype=ml_dtypes.bfloat16).view(np.uint16))


class ArgPacker:
    """The launch plan of one kernel: a parameter buffer laid out once, with the array of
    pointers to each argument that ``cuLaunchKernel`` reads. ``pack(values)`` fills it."""

    def __init__(self, abi: KernelABI):
        fmt, offsets, off = "=", [], 0
        self.convert: list[tuple[int, object]] = []
        self.codes: list[str] = []  # struct code of each flat parameter
        for i, p in enumerate(abi.params):
            code = _STRUCT.get(p.dtype)
            if code is None:
                raise TypeError(f"kernel '{abi.entry}': no packing for argument {p.name} of dtype {p.dtype}")
            pad = (-off) % p.align
            fmt += "x" * pad
            off += pad
            offsets.append(off)
            self.codes.append(code)
            fmt += code
            off += struct.calcsize("=" + code)
            if p.dtype == "bf16":
                self.convert.append((i, _bf16_bits))
            elif p.dtype == "u8" and p.kind == "scalar":
                self.convert.append((i, int))  # bool -> 0 / 1
        self.struct = struct.Struct(fmt)
        self.offsets = offsets
        self.size = off
        self.buffer, self.pointers, self.address = self.new_buffer()
        self.lock = threading.Lock()  # the buffer is shared: pack + launch under it

    def new_buffer(self) -> tuple:
        """(parameter buffer, what keeps its array of pointers to each argument alive, that
        array's address). Both are bytearrays, addressed through a ``c_char`` view each (which
        also keeps them from being resized): a ctypes array type of each size would be made on
        first use instead, ~0.03 ms of a kernel's first launch."""
        buffer = bytearray(max(self.size, 8))
        view = ctypes.c_char.from_buffer(buffer)
        base = ctypes.addressof(view)
        pointers = bytearray(struct.pack(f"{max(len(self.offsets), 1)}P",
                                         *([base + o for o in self.offsets] or [0])))
        pview = ctypes.c_char.from_buffer(pointers)
        return buffer, (view, pointers, pview), ctypes.addressof(pview) if self.offsets else 0

    def pack(self, values: list) -> int:
        """Write ``values`` (flat, in ABI order) and return the kernelParams address."""
        for i, fn in self.convert:
            values[i] = fn(values[i])
        self.struct.pack_into(self.buffer, 0, *values)
        return self.address


def load_module(ptx: str, kernel_name: str | None = None):
    """``cuModuleLoadDataEx`` on PTX text with JIT log buffers; a failure raises CudaError whose
    message includes the driver's JIT error log."""
    d = drv.driver()
    err_log, info_log = bytearray(_LOG_BYTES), bytearray(_LOG_BYTES)
    J = d.CUjit_option
    opts = [J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            J.CU_JIT_INFO_LOG_BUFFER, J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES]
    vals = [err_log, _LOG_BYTES, info_log, _LOG_BYTES]
    r = d.cuModuleLoadDataEx(ptx.encode() + b"\0", len(opts), opts, vals)
    err = r[0] if isinstance(r, tuple) else r
    if int(err) != 0:
        log = bytes(err_log).split(b"\0", 1)[0].decode(errors="replace").strip()
        detail = f"JIT error log:\n{log}" if log else "the driver gave no JIT log"
        raise drv.make_error("cuModuleLoadDataEx", err, kernel_name, detail)
    return r[1]


def _own_shared(ptx: str) -> int:
    at = ptx.find(DYN_SHARED_MARK, 0, 4096)     # in the header
    if at < 0:
        return 0
    return int(ptx[at + len(DYN_SHARED_MARK):].split(None, 1)[0])


class LoadedKernel:
    """A loaded module, its entry function, the ABI and the launch plan."""

    def __init__(self, ptx: str, abi: KernelABI, kernel_name: str, module=None):
        self.name, self.abi = kernel_name, abi
        self.module = load_module(ptx, kernel_name) if module is None else module
        self.function = drv.call("cuModuleGetFunction", self.module, abi.entry.encode(), kernel=kernel_name)
        self.packer = ArgPacker(abi)
        self._cuLaunchKernel = drv.driver().cuLaunchKernel  # bound once: the hot path
        self.dyn_shared_optin = _DEFAULT_DYN_SHARED
        # bytes of dynamic shared memory the kernel's own shared arrays take (kaio's PTX puts
        # them there when they pass 48 KiB); every launch adds them to the caller's bytes
        self.own_shared = _own_shared(ptx)

    def allow_dynamic_shared(self, nbytes: int, props) -> None:
        """Opt the function in to ``nbytes`` of dynamic shared memory when above 48 KiB."""
        if nbytes <= self.dyn_shared_optin:
            return
        if nbytes > props.shared_per_block_optin:
            raise LaunchError(f"kernel '{self.name}': {nbytes} bytes of dynamic shared memory requested; "
                              f"{props.name} allows at most {props.shared_per_block_optin} per block")
        d = drv.driver()
        attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        drv.call("cuFuncSetAttribute", self.function, attr, int(nbytes), kernel=self.name)
        self.dyn_shared_optin = nbytes

    def launch(self, grid, block, shared_bytes: int, stream: int, values: list) -> None:
        packer = self.packer
        with packer.lock:
            if packer.convert:
                params = packer.pack(values)
            else:  # nothing to convert: pack in place (the hot path)
                packer.struct.pack_into(packer.buffer, 0, *values)
                params = packer.address
            r = self._cuLaunchKernel(self.function, grid[0], grid[1], grid[2], block[0], block[1],
                                     block[2], shared_bytes, stream, params, 0)
        drv.last_launched = self.name
        if r[0]:  # CUresult is an int enum: nonzero is an error
            drv.check("cuLaunchKernel", r, self.name)


class _Later:
    """``plan.data`` after a plan's first launch, which makes nothing for later launches (a
    fresh process's first launch of a kernel, issue 15): its launcher is made at its second."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False


_LATER = _Later()


def _param_plan(compiled: Compiled) -> list:
    """Per IR parameter: None for a scalar, (BufType, numpy dtype, ndim) for a buffer; kept as
    the Compiled object's ``launch_plan`` so a launch does not re-derive it."""
    plan = [(v.type, v.type.dtype.storage_np, v.type.ndim) if isinstance(v.type, BufType) else None
            for v in compiled.kernel.args]
    compiled.launch_plan = plan
    return plan


class CudaBackend(Backend):
    """NVIDIA GPUs through the CUDA driver API (cuda-python). Device: ``KAIO_CUDA_DEVICE``
    (default 0), or ``kaio.set_device`` (one instance per device: ``Backend.on_device``).
    ``KAIO_CUDA_SYNC=1`` synchronizes after every launch (to pin a fault on its kernel).
    ``codegen``: 'ptx' (kaio's PTX emitter) or 'llvm' (the LLVM nvptx64 path); None
    takes ``KAIO_CUDA_CODEGEN`` (default 'ptx'); two instances can run both paths in one process
    (the conformance suite does)."""

    name = "cuda"
    warp_size = 32

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = drv.probe()
        if ok:  # read the compute capability without creating a context
            try:
                d = drv.driver()
                dev = drv.call("cuDeviceGet", drv.default_ordinal())
                names = ("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
                         "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
                cc = [int(drv.call("cuDeviceGetAttribute", getattr(d.CUdevice_attribute, n), dev))
                      for n in names]
                drv.arch_for_cc(*cc)
            except (ValueError, CudaError) as e:
                return False, str(e)
        return ok, why

    def __init__(self, device: int | None = None, codegen: str | None = None):
        if codegen not in (None, "ptx", "llvm"):
            raise ValueError(f"cuda backend: codegen must be 'ptx' or 'llvm', got {codegen!r}")
        self.codegen = codegen
        self.ctx = drv.context(device)
        self.device = self.ctx.ordinal
        self.props = self.ctx.props
        self.arch = self.target = self.props.arch
        self.ptx_version = ptx_version_for(self.arch, self.ctx.driver_version)
        self.sync_every_launch = settings().cuda_sync
        self._modules: dict[str, LoadedKernel] = {}
        self._lock = threading.Lock()

    # --- compiling (the stages are kaio.backends.targets'; Backend.compile runs them) ------
    def compile_options(self, kernel_options=None):
        """kaio's PTX for this device's arch and driver, or the LLVM nvptx64 path."""
        codegen = self.codegen or settings().cuda_codegen
        if codegen == "llvm":
            return get_target(nvptx_target_for(self.arch)).options(kernel_options)
        return get_target(self.arch).options(kernel_options, ptx_version=self.ptx_version)

    def load(self, kernel, artifacts, options):
        return self.load_ptx(artifacts["ptx"], kernel_abi(kernel), kernel.name)

    def load_ptx(self, ptx: str, abi: KernelABI, kernel_name: str | None = None) -> LoadedKernel:
        """Load PTX (once per distinct text and ABI in this process).

        The ABI is part of the key: f16 and bf16 kernels can have identical PTX (.b16 params)
        but pack their scalar arguments differently."""
        key = (hashlib.sha256(ptx.encode()).hexdigest() + ":" + abi.entry + ":"
               + ",".join(p.dtype for p in abi.params))
        lk = self._modules.get(key)
        if lk is None:
            with self._lock:
                lk = self._modules.get(key)
                if lk is None:
                    self.ctx.make_current()
                    name = kernel_name or abi.entry
                    # the cubin the driver made of this PTX in an earlier process, if cached
                    module = cuda_cubin.load_module(ptx, name, self.compile_cache(), self.props.cc,
                                                    self.ctx.driver_version, load_module)
                    lk = self._modules[key] = LoadedKernel(ptx, abi, name, module)
        return lk

    # --- memory, streams, events, graphs --------------------------------------------------
    @functools.cached_property
    def runtime(self) -> cuda_runtime.CudaRuntime:
        """This device's memory, streams, events and graphs (:mod:`kaio.backends.cuda_runtime`)."""
        return cuda_runtime.runtime(self.ctx.ordinal)

    # --- launching ------------------------------------------------------------------------
    def _launch_planned(self, compiled: Compiled, plan, args, shared_bytes=0, stream=None):
        """A checked launch whose buffers are all this device's kaio arrays runs the plan's own
        launcher (:class:`kaio.backends.cuda_planned.PlannedLaunch`: pointers and extents
        packed once per signature, only the scalars written per launch). Anything else (numpy
        copies, foreign arrays, syncing after every launch, more than 48 KiB of dynamic shared
        memory, a graph capture, which counts its launches) goes through ``_launch``."""
        fast = plan.data
        if fast:
            if fast.run(args, shared_bytes, stream):
                return
        elif fast is None:   # the plan's first launch: the full path, nothing made for later
            plan.data = _LATER
        elif fast is _LATER:   # its second: the launcher (its function compiled at the third)
            plan.data = self._planned_launcher(compiled, plan, args)
        self._launch(compiled, plan.grid, plan.block, args, shared_bytes, stream)

    def _guarded_launch(self, st, compiled: Compiled, plan, shared_bytes: int, stream_given: bool,
                        args):
        """``run(args, stream) -> bool`` for a repeated call (kaio.launch, at the plan's second
        launch, of ``args``): the plan's guard and its launcher in one function, False where
        this backend and settings ``st`` are not current or the arguments do not match the
        plan; None where the plan has no launcher of its own (it runs ``_launch``), where
        ``shared_bytes`` needs the function to opt in first, or where ``_launch_planned`` is
        not this class's (a subclass's or a spy's: it must see every launch)."""
        fast = plan.data
        if fast is _LATER:   # args match the plan: its launcher is theirs
            fast = plan.data = self._planned_launcher(compiled, plan, args)
        if (not fast or type(self)._launch_planned is not CudaBackend._launch_planned
                or "_launch_planned" in self.__dict__):
            return None

        def full(args, stream) -> bool:
            self._launch(compiled, plan.grid, plan.block, args, shared_bytes, stream)
            return True
        return fast.guarded(plan, self, st, shared_bytes, stream_given, full)

    def _planned_launcher(self, compiled: Compiled, plan, args):
        """The plan's launcher when every buffer is a live kaio array of this device (the plan's
        signature holds their pointers and shapes) and launches need no sync; False otherwise."""
        if self.sync_every_launch:
            return False
        params = compiled.launch_plan or _param_plan(compiled)
        rt, values, scalars = self.runtime, [], []
        for i, (a, t) in enumerate(zip(args, params)):
            if t is None:
                scalars.append((len(values), i))
                values.append(0)
            elif type(a) is DeviceArray and a.runtime is rt and (a.ptr or not a.nbytes):
                values.append(a.ptr)
                values.extend(a.shape)
            else:
                return False
        return PlannedLaunch(compiled.handle, self.ctx, rt, plan.grid, plan.block, values, scalars,
                             len(params), _DEFAULT_DYN_SHARED)

    def _launch(self, compiled: Compiled, grid, block, args, shared_bytes=0, stream=None):
        """Run a launch that ``Backend.launch`` checked; ``args`` in IR parameter order."""
        lk: LoadedKernel = compiled.handle
        plan = compiled.launch_plan or _param_plan(compiled)
        self.ctx.make_current()
        rt = self.runtime
        graph, stream = capture_target(stream, args)
        hstream = 0 if stream is None else rt.stream_handle(stream)
        values, xfer = [], None
        try:
            for i, (a, t) in enumerate(zip(args, plan)):
                if t is None:  # scalar
                    values.append(a)
                elif (type(a) is DeviceArray and a.runtime is rt and (a.dtype is t[1] or a.dtype == t[1])
                      and len(a.shape) == t[2] and (a.ptr or not a.nbytes)):
                    values.append(a.ptr)  # the common zero-copy case, checked inline
                    values.extend(a.shape)
                else:
                    if xfer is None:
                        xfer = Transfers(rt, hstream)
                    ptr, shape = self._buffer(a, t[0], compiled.kernel, i, xfer)
                    values.append(ptr)
                    values.extend(shape)
            shared_bytes = int(shared_bytes) + lk.own_shared
            if shared_bytes > _DEFAULT_DYN_SHARED:
                lk.allow_dynamic_shared(shared_bytes, self.props)
            lk.launch(grid, block, shared_bytes, hstream, values)
            if (xfer is not None and xfer.temps) or (self.sync_every_launch and graph is None):
                # wait here so a fault is reported against this kernel, then copy back
                (xfer or Transfers(rt, hstream)).finish(compiled.kernel.name)
        finally:
            if xfer is not None:
                xfer.release()

    def blas(self):
        """This backend's cuBLAS handle for :func:`kaio.blas.gemm` (created on first use)."""
        if self.__dict__.get("_cublas") is None:
            from .cublas import Cublas  # lazy: import time, ~12 ms (cuBLAS bindings)
            self._cublas = Cublas(self)
        return self._cublas

    def _buffer(self, a, t: BufType, kernel, i: int, xfer: Transfers):
        """(pointer, shape) of buffer argument ``i``: numpy through ``xfer``'s temporaries,
        device arrays (kaio's or ``__cuda_array_interface__``) in place."""
        what = f"kernel '{kernel.name}': parameter '{kernel.params[i].name}'"
        return buffer_arg(self.runtime, a, t, what, xfer)

    # --- devices --------------------------------------------------------------------------
    def device_count(self) -> int:
        return drv.device_count()

    def _make_on(self, device: int) -> "CudaBackend":
        return CudaBackend(device, codegen=self.codegen)

    # --- information ----------------------------------------------------------------------
    def devices(self) -> list[str]:
        return [_describe(p) for p in drv.all_device_props()]

    @staticmethod
    def device_info() -> list[dict]:
        """One dict per device: name, cc, arch, SMs, memory (empty without CUDA)."""
        if not drv.probe()[0]:
            return []
        return [{"index": p.ordinal, "name": p.name, "cc": f"{p.cc[0]}.{p.cc[1]}", "arch": p.arch,
                 "sms": p.sm_count, "memory_gib": round(p.total_memory / 2**30, 1),
                 "max_threads_per_block": p.max_threads_per_block,
                 "shared_per_block_optin": p.shared_per_block_optin, "warp_size": p.warp_size}
                for p in drv.all_device_props()]


def _describe(p) -> str:
    return f"{p.name} (cc {p.cc[0]}.{p.cc[1]}, {p.arch}, {p.sm_count} SMs, {p.total_memory / 2**30:.1f} GiB)"
