"""ReferenceBackend: runs kaio IR on the CPU with numpy, every thread a vector lane.

Launch semantics: ``in`` buffers are read in place; ``region``/``atomic``/``raw`` buffers
are run on a working copy and ``out`` buffers on a poisoned array (NaN for floats, 0xA5 bytes
for ints, True for bool); all of them are copied into the user's arrays only after the whole
launch succeeded, so a kernel that raises leaves the arrays untouched. A device array of this
backend (``kaio.to_device`` on the reference backend) is the same as a numpy array here: its host
storage is used in place, with the same semantics. Streams, events and graphs:
:mod:`kaio.backends.reference.runtime`.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ... import semantics
from ...config import settings
from ...errors import LaunchError
from .. import Backend, Compiled
from ..runtime import DeviceArray, capture_target, check_same_device
from ..targets import get_target
from .blas import ReferenceBlas
from .interpreter import Interpreter
from .lanes import Batch
from .memory import Buf
from .ownership import owner_map
from .runtime import runtime as reference_runtime
from .sanitizer import Sanitizer

#: lanes per batch: bounds the memory of per-lane values (about 8 MiB per value)
LANES_PER_BATCH = 1 << 20


class Launch:
    """The state of one launch shared by its batches."""

    def __init__(self, kernel, grid, block, shared_bytes, sanitizer):
        self.kernel, self.grid, self.block = kernel, grid, block
        self.shared_bytes = shared_bytes
        self.sanitizer = sanitizer


class ReferenceBackend(Backend):
    """The numpy SIMT interpreter (always available).

    ``warp_size``: lanes per warp (default 32, env ``KAIO_REF_WARP_SIZE``), a power of two up to
    64. ``sanitize``: run the race sanitizer (default: env ``KAIO_SANITIZE=1``).
    ``check_ownership``: with the sanitizer on, also report any access to a partitioned
    Region/Out element by a thread that does not own it, conflict or not (default: env
    ``KAIO_SANITIZE_OWNERSHIP=1``); this checks the static checker's proofs directly.
    ``device``: which of the ``KAIO_REF_DEVICES`` pretend devices this instance runs on.
    """

    name = "reference"

    def __init__(self, warp_size: int | None = None, sanitize: bool | None = None,
                 check_ownership: bool | None = None, check_uninit_shared: bool = False,
                 device: int = 0):
        if warp_size is None:
            warp_size = settings().ref_warp_size
        if warp_size not in (1, 2, 4, 8, 16, 32, 64):
            raise ValueError(f"reference backend: warp_size must be a power of two <= 64, "
                             f"got {warp_size}")
        self.warp_size = warp_size
        self.sanitize = settings().sanitize if sanitize is None else bool(sanitize)
        self.check_ownership = (settings().sanitize_ownership if check_ownership is None
                                else bool(check_ownership))
        # with the sanitizer on, also report a read (or atomic update) of a shared element no
        # thread of the block wrote (the fuzz: such a kernel has no one defined result)
        self.check_uninit_shared = bool(check_uninit_shared)
        self.target = f"reference-w{warp_size}"
        self.device = device

    @classmethod
    def available(cls):
        return True, ""

    def compile_options(self, kernel_options=None):
        """The interpreter at this warp width (it runs the lowered IR; nothing is cached)."""
        return get_target(self.target).options(kernel_options)

    def compile_cache(self):
        return None

    def devices(self):
        return ["cpu (numpy)"] * self.device_count()

    def device_count(self) -> int:
        """``KAIO_REF_DEVICES`` (default 1): the devices this backend pretends to have."""
        return max(1, settings().ref_devices)

    def _make_on(self, device: int) -> "ReferenceBackend":
        return ReferenceBackend(self.warp_size, self.sanitize, self.check_ownership,
                                self.check_uninit_shared, device=device)

    # --- memory, streams, events, graphs, BLAS -----------------------------------------
    @property
    def runtime(self):
        """Host memory standing in for device memory (:mod:`kaio.backends.reference.runtime`)."""
        return reference_runtime(self.device)

    def blas(self):
        """numpy standing in for a vendor BLAS (:func:`kaio.blas.gemm`)."""
        return ReferenceBlas(self.runtime)

    # --- launching ----------------------------------------------------------------------
    def _launch(self, compiled: Compiled, grid, block, args, shared_bytes=0, stream=None):
        """Run a checked launch (``Backend.launch``; ``compiled`` may also be a bare IR kernel)
        on ``args`` (numpy arrays, this backend's device arrays, scalars). Inside
        ``kaio.graph()`` the launch is recorded on the capture stream, not run."""
        kernel = compiled.artifacts["lowered"] if isinstance(compiled, Compiled) else compiled
        params = kernel.body.args
        rt = self.runtime
        graph, stream = capture_target(stream, args)
        h = rt.stream_handle(stream)
        values = [self._array(kernel, p.name, v.type, a, graph) if v.is_buffer
                  else _scalar(kernel, p.name, v.type, a)
                  for v, p, a in zip(params, kernel.params, args)]
        run = functools.partial(self._run, kernel, grid, block, values, int(shared_bytes))
        if not rt.record(h, run):   # recorded: a graph replay runs it
            run()

    def _run(self, kernel, grid, block, arrays, shared_bytes):
        """One launch on numpy arrays (buffers) and IR constants (scalars)."""
        params = kernel.body.args
        values, copies = [], []
        for v, p, a in zip(params, kernel.params, arrays):
            if v.is_buffer:
                buf = _buf(p.name, v.type, a)
                values.append(buf)
                if v.type.intent != "in":
                    copies.append((a, buf))
            else:
                values.append(a)
        san = Sanitizer(kernel, grid, block) if self.sanitize else None
        if san is not None:
            san.check_uninit_shared = self.check_uninit_shared
        if san is not None and self.check_ownership:
            for p, buf in zip(kernel.params, values):
                if isinstance(buf, Buf) and buf.intent in ("region", "out") and p.partition:
                    buf.partition = p.partition
                    buf.owner = owner_map(p.partition, buf.shape, grid, block,
                                          ReferenceBackend(self.warp_size, sanitize=False).launch)
        launch = Launch(kernel, grid, block, shared_bytes, san)
        T = math.prod(block)
        nblocks = math.prod(grid)
        per_batch = max(1, LANES_PER_BATCH // T)
        with np.errstate(all="ignore"):
            for first in range(0, nblocks, per_batch):
                batch = Batch(grid, block, first, min(per_batch, nblocks - first), self.warp_size)
                Interpreter(launch, batch).run(values)
        for user, buf in copies:   # only after the whole launch succeeded
            np.copyto(user, buf.flat.reshape(user.shape))

    def _array(self, kernel, name, btype, arr, graph) -> np.ndarray:
        """The numpy array a buffer argument stands for: itself, or a device array's host
        storage (zero-copy, so the launch writes into it)."""
        what = f"kernel '{kernel.name}': parameter '{name}'"
        if isinstance(arr, DeviceArray) and arr.runtime is self.runtime:
            arr = self.runtime.host_array(arr, what)
        elif isinstance(arr, DeviceArray) and arr.runtime.name == self.name:
            check_same_device(self.runtime, arr, what)
        elif not isinstance(arr, np.ndarray):
            got = (f"a {arr.runtime.name} device array" if isinstance(arr, DeviceArray)
                   else type(arr).__name__)
            raise TypeError(f"{what}: the reference backend runs on numpy arrays and its own "
                            f"device arrays, got {got}; copy device arrays to the host first")
        elif graph is not None:   # refused on every backend, so graph code is portable
            raise LaunchError(f"{what}: a numpy array cannot be used inside kaio.graph() (its "
                              "copies and synchronization cannot be captured on a GPU); pass "
                              "kaio.to_device(array)")
        if arr.dtype != btype.dtype.storage_np or arr.ndim != btype.ndim:
            raise TypeError(f"{what} expects a {btype.ndim}-d {btype.dtype.name} array, "
                            f"got {arr.ndim}-d {arr.dtype}")
        return arr


def _buf(name, btype, arr) -> Buf:
    """Interpreter storage for one buffer: ``in`` read in place; ``out`` a poisoned array;
    ``region``/``atomic``/``raw`` a working copy (both committed after the launch)."""
    intent = btype.intent
    if intent == "in":
        flat = np.ascontiguousarray(arr).reshape(-1)
    elif intent == "out":
        flat = np.full(arr.size, semantics.poison(btype.dtype), dtype=arr.dtype)
    else:
        flat = np.array(arr, order="C").reshape(-1)
    return Buf(name, btype.dtype, arr.shape, flat, "global", intent)


def _scalar(kernel, name, dtype, value):
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        raise TypeError(f"kernel '{kernel.name}': parameter '{name}' expects a {dtype.name} "
                        f"scalar, got {type(value).__name__}")
    if dtype.is_int and isinstance(value, float):
        raise TypeError(f"kernel '{kernel.name}': parameter '{name}' expects {dtype.name}, "
                        f"got float {value!r}")
    return semantics.const(dtype, value)


__all__ = ["ReferenceBackend"]
