"""``@kaio.kernel``: the user-facing kernel object -- specialise, check arguments, launch.

Pipeline per call::

    arguments --check--> specialisation key --(cached) frontend + passes--> checked IR
              --(cached per backend) backend.compile--> Compiled --launch shape--> backend.launch

Everything that can be wrong with the arguments or the launch is reported before any copy or
launch happens, so the user's arrays are untouched on error.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from . import backends
from . import dtypes as dt
from .checked import fault_record, raise_fault
from .config import settings
from .device import check_cuda_array_interface
from .dlpack import from_dlpack
from .errors import LaunchError
from .ir import print_kernel
from .lang import KaioFunction
from .options import KernelOptions
from .regions import Elementwise, check_launch_attrs
from .signature import ParamInfo, bind, parse_signature

MAX_BLOCK_THREADS = 1024
GRID_LIMITS = (2**31 - 1, 65535, 65535)
INDEX_LIMIT = 2**31 - 1  # shapes and ids are i32 in kernels


def _dim3(v, what: str, kernel: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                                       for x in t):
        raise LaunchError(f"kernel '{kernel}': {what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    t = tuple(int(x) for x in t) + (1,) * (3 - len(t))
    if any(x < 1 for x in t):
        raise LaunchError(f"kernel '{kernel}': {what} dimensions must be >= 1, got {t}")
    return t


_LAUNCH_MEMO: dict = {}


def normalize_launch(kernel: str, grid, block) -> tuple[tuple, tuple]:
    """(grid, block) as validated 3-tuples; valid shapes are memoised (launches repeat)."""
    plain = _plain_dims(grid) and _plain_dims(block)  # bools hash like ints: keep them out
    if plain:
        hit = _LAUNCH_MEMO.get((grid, block))
        if hit is not None:
            return hit
    out = _normalize_launch(kernel, grid, block)
    if plain and len(_LAUNCH_MEMO) < 4096:
        _LAUNCH_MEMO[(grid, block)] = out
    return out


def _plain_dims(v) -> bool:
    if type(v) is int:
        return True
    return type(v) is tuple and all(type(x) is int for x in v)


def _normalize_launch(kernel: str, grid, block) -> tuple[tuple, tuple]:
    grid, block = _dim3(grid, "grid", kernel), _dim3(block, "block", kernel)
    if math.prod(block) > MAX_BLOCK_THREADS:
        raise LaunchError(f"kernel '{kernel}': block {block} has {math.prod(block)} threads; "
                          f"the limit is {MAX_BLOCK_THREADS}")
    for g, lim, ax in zip(grid, GRID_LIMITS, "xyz"):
        if g > lim:
            raise LaunchError(f"kernel '{kernel}': grid.{ax} = {g} exceeds the limit {lim}")
    return grid, block


def _is_device_array(obj) -> bool:
    return hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__kaio_device__")


def check_scalar(kernel: str, p: ParamInfo, value):
    """Return the Python value for a scalar parameter, or raise TypeError/ValueError."""
    t: dt.DType = p.spec
    if type(value) is float and t.is_float:  # the common case, one range test
        if abs(value) <= _float_max(t) or value != value or abs(value) == float("inf"):
            return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        ok = True
    elif isinstance(value, int):
        ok = not t.is_bool
    elif isinstance(value, float):
        ok = t.is_float
    else:
        ok = False
    if not ok:
        raise TypeError(f"kernel '{kernel}': parameter '{p.name}' expects a {t.name} scalar, "
                        f"got {type(value).__name__} {value!r}")
    if t.is_int and not (t.min_value() <= int(value) <= t.max_value()):
        raise ValueError(f"kernel '{kernel}': parameter '{p.name}' is {t.name} "
                         f"(range {t.min_value()}..{t.max_value()}) but got {value}")
    if t.is_float and np.isfinite(value) and abs(value) > t.max_value():
        raise ValueError(f"kernel '{kernel}': parameter '{p.name}' is {t.name} but {value!r} "
                         f"overflows it (max {t.max_value()})")
    return value


def _fast_buffer_ok(spec, arr) -> bool:
    """The common cases, checked without building any message: a well-formed numpy array or
    one of kaio's own device arrays (always C-contiguous)."""
    if type(arr) is np.ndarray:
        return (arr.dtype == spec.dtype.np and arr.ndim == spec.ndim and arr.flags.c_contiguous
                and (spec.intent == "in" or arr.flags.writeable)
                and (arr.size == 0 or max(arr.shape) <= INDEX_LIMIT))
    if getattr(arr, "__kaio_device__", False):
        shape = arr.shape
        return (arr.dtype == spec.dtype.np and len(shape) == spec.ndim
                and (not shape or max(shape) <= INDEX_LIMIT))
    return False


_FLOAT_MAX: dict = {}


def _float_max(t: dt.DType) -> float:
    m = _FLOAT_MAX.get(t.name)
    if m is None:
        m = _FLOAT_MAX[t.name] = t.max_value()
    return m


def check_buffer(kernel: str, p: ParamInfo, arr):
    """Check one buffer argument's dtype, ndim, contiguity, writability and extents."""
    spec = p.spec
    if _fast_buffer_ok(spec, arr):
        return arr
    what = f"kernel '{kernel}': parameter '{p.name}' ({spec!r})"
    if not isinstance(arr, np.ndarray) and not _is_device_array(arr) and hasattr(arr, "__dlpack__"):
        try:  # a DLPack-only GPU tensor: view it without a copy
            arr = from_dlpack(arr)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{what}: cannot use the {type(arr).__name__} through DLPack: {e}") from e
    if not isinstance(arr, np.ndarray) and not _is_device_array(arr):
        raise TypeError(f"{what} expects a numpy array or a device array, got {type(arr).__name__}")
    if not isinstance(arr, np.ndarray) and not hasattr(arr, "__kaio_device__"):
        # torch / CuPy arrays: dtype, shape and strides come from __cuda_array_interface__
        adt, shape = check_cuda_array_interface(arr.__cuda_array_interface__, what)
    else:
        adt, shape = getattr(arr, "dtype", None), tuple(getattr(arr, "shape", ()))
    if adt is None or np.dtype(adt) != spec.dtype.storage_np:
        raise TypeError(f"{what} expects dtype {spec.dtype.name} ({spec.dtype.storage_np}), got {adt}; "
                        "kaio never casts arrays silently: convert with .astype()")
    if len(shape) != spec.ndim:
        raise ValueError(f"{what} expects a {spec.ndim}-d array, got shape {shape}")
    if any(s > INDEX_LIMIT for s in shape):
        raise ValueError(f"{what}: extent {max(shape)} exceeds the i32 index range of kernels")
    if isinstance(arr, np.ndarray):
        if not arr.flags.c_contiguous:
            raise ValueError(f"{what} expects a C-contiguous array, got strides {arr.strides}; "
                             "pass np.ascontiguousarray(x)")
        if spec.intent != "in" and not arr.flags.writeable:
            raise ValueError(f"{what} is written by the kernel but the array is read-only")
    return arr


def check_aliasing(kernel: str, params: list[ParamInfo], values: list) -> None:
    """A writable buffer must not overlap any other buffer argument (that would be a race)."""
    bufs = [(p, v) for p, v in zip(params, values) if p.kind == "buffer" and isinstance(v, np.ndarray)]
    for i, (p, a) in enumerate(bufs):
        for q, b in bufs[i + 1:]:
            if p.spec.intent == "in" and q.spec.intent == "in":
                continue
            # may_share_memory is a cheap bounds test; the exact test only runs when it says yes
            if np.may_share_memory(a, b) and np.shares_memory(a, b):
                raise ValueError(f"kernel '{kernel}': parameters '{p.name}' and '{q.name}' share "
                                 "memory but one of them is written; pass separate arrays")


class KernelFunction(KaioFunction):
    """A Python function compiled by kaio. Call it, or index it with a launch configuration:
    ``k(args...)``, ``k[grid, block](args...)``, ``k[grid, block, shared_bytes](...)``,
    ``k[grid, block, shared_bytes, stream](...)``."""

    def __init__(self, fn, *, fast_math: bool = False, max_registers: int | None = None,
                 disabled_passes=(), checked: bool | None = None):
        try:
            self.options = KernelOptions(fast_math, max_registers, frozenset(disabled_passes),
                                         checked)
        except ValueError as e:
            raise ValueError(f"kernel '{fn.__name__}': {e}") from None
        super().__init__(fn)
        self.params = parse_signature(fn)
        self._ir_cache: dict = {}
        self._compiled: dict = {}
        self._lock = threading.Lock()
        self._shape_memo: dict = {}
        self._has_consts = any(p.kind == "const" for p in self.params)
        self._n_buffers = sum(p.kind == "buffer" for p in self.params)
        self._owners = [(i, p, _partition(p)) for i, p in enumerate(self.params)
                        if p.kind == "buffer" and p.spec.intent in ("region", "out")]

    # --- specialisation ---------------------------------------------------------------
    def _const_values(self, values: list) -> dict:
        consts = {}
        for p, v in zip(self.params, values):
            if p.kind != "const":
                continue
            ty = p.spec.pytype
            if isinstance(v, np.generic):
                v = v.item()
            ok = (isinstance(v, bool) if ty is bool else
                  isinstance(v, int) and not isinstance(v, bool) if ty is int else
                  isinstance(v, (int, float)) and not isinstance(v, bool))
            if not ok:
                raise TypeError(f"kernel '{self.name}': constant parameter '{p.name}' expects "
                                f"{ty.__name__}, got {type(v).__name__} {v!r}")
            consts[p.name] = ty(v)
        return consts

    def specialize_ir(self, consts: dict | None = None):
        """The checked IR kernel for these constant values (cached)."""
        consts = dict(consts or {})
        missing = [p.name for p in self.params if p.kind == "const" and p.name not in consts]
        if missing:
            raise TypeError(f"kernel '{self.name}': give values for constant parameters {missing}")
        key = tuple(sorted(consts.items()))
        with self._lock:
            k = self._ir_cache.get(key)
            if k is None:
                from .frontend import frontend_pipeline, lower_kernel  # lazy: import time, ~30 ms
                k = frontend_pipeline(lower_kernel(self.fn, self.params, consts, fast_math=self.fast_math))
                self._ir_cache[key] = k
        return k

    @property
    def ir(self) -> str:
        """The kernel's IR as text (kernels with Const parameters: use ``ir_for(**consts)``)."""
        return self.ir_for()

    def ir_for(self, **consts) -> str:
        return print_kernel(self.specialize_ir(consts))

    def compile(self, backend=None, **consts):
        """Compile for a backend (default: the current one); returns ``Compiled``."""
        be = backend if hasattr(backend, "compile") else backends.get_backend(backend)
        checked = self.options.checked  # None: KAIO_CHECKED decides, so it is part of the key
        key = (id(be), tuple(sorted(consts.items())) if consts else (),
               settings().checked if checked is None else checked)
        hit = self._compiled.get(key)
        # the entry holds the backend itself: an id is only unique while its object lives, and a
        # freed backend's id reused by another would otherwise return the wrong Compiled
        if hit is not None and hit[0] is be:
            return hit[1]
        c = be.compile(self.specialize_ir(consts), self.options)
        self._compiled[key] = (be, c)
        return c

    @property
    def fast_math(self) -> bool:
        return self.options.fast_math

    @property
    def max_registers(self) -> int | None:
        return self.options.max_registers

    def emit(self, stage: str, target: str | None = None, **consts):
        """One compilation stage's artifact ('ir', 'lowered', 'ptx', 'llvm', 'asm', 'hsaco', ...)
        for a target, with no GPU needed (see ``kaio compile``): text, or bytes for binary
        stages. Runs the same stages a launch does."""
        from .backends.targets import emit  # lazy: import time (the code generators, ~70 ms)
        return emit(self.specialize_ir(consts), stage, target, self.options)

    # --- launching --------------------------------------------------------------------
    def __getitem__(self, config) -> "_BoundLaunch":
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise LaunchError(f"kernel '{self.name}': use kernel[grid, block], kernel[grid, block, "
                              f"shared_bytes] or kernel[grid, block, shared_bytes, stream]")
        grid, block = normalize_launch(self.name, config[0], config[1])
        shared = int(config[2]) if len(config) > 2 else 0
        if shared < 0:
            raise LaunchError(f"kernel '{self.name}': shared_bytes must be >= 0, got {shared}")
        stream = config[3] if len(config) > 3 else None
        return _BoundLaunch(self, grid, block, shared, stream)

    def __call__(self, *args, **kwargs):
        return self._launch(None, None, 0, None, args, kwargs)

    def _launch(self, grid, block, shared_bytes, stream, args, kwargs):
        if not kwargs and len(args) == len(self.params):
            values = args  # the common call: all arguments positional
        else:
            values = bind(self.name, self.params, args, kwargs)
        consts = self._const_values(values) if self._has_consts else {}
        runtime, checked = [], list(values)
        for i, (p, v) in enumerate(zip(self.params, values)):
            if p.kind == "scalar":
                runtime.append(check_scalar(self.name, p, v))
            elif p.kind == "buffer":
                # check_buffer may return a view (a DLPack tensor as a kaio device array)
                checked[i] = v = check_buffer(self.name, p, v)
                runtime.append(v)
        values = checked
        if self._n_buffers > 1:
            check_aliasing(self.name, self.params, values)
        grid, block = self._launch_shape(grid, block, values)
        backend = backends.get_backend(None)
        compiled = self.compile(backend, **consts)
        check_launch_attrs(compiled.kernel, grid, block)
        if compiled.options is not None and compiled.options.checked:
            fault = fault_record(self.name)
            backend.launch(compiled, grid, block, [*runtime, fault], shared_bytes, stream)
            raise_fault(compiled, fault, runtime, grid, block)
            return
        backend.launch(compiled, grid, block, runtime, shared_bytes, stream)

    def _launch_shape(self, grid, block, values):
        key = (grid, block, tuple(values[i].shape for i, _, _ in self._owners))
        hit = self._shape_memo.get(key)
        if hit is None:
            hit = self._derive_launch_shape(grid, block, values)
            if len(self._shape_memo) < 256:
                self._shape_memo[key] = hit
        return hit

    def _derive_launch_shape(self, grid, block, values):
        if grid is None:
            if not self._owners:
                raise LaunchError(
                    f"kernel '{self.name}' has no Region/Out parameter to derive its launch shape "
                    f"from; launch it explicitly: {self.name}[grid, block](...)")
            i, p, part = self._owners[0]
            grid, block = part.launch_shape(tuple(values[i].shape))
            grid, block = normalize_launch(self.name, grid, block)
        for i, p, part in self._owners:
            part.check_launch(tuple(values[i].shape), grid, block, buffer=p.name, kernel=self.name)
        return grid, block

    def __repr__(self):
        return f"<kaio.kernel {self.name}({', '.join(p.name for p in self.params)})>"


def _partition(p: ParamInfo):
    return p.spec.partition or Elementwise()


class _BoundLaunch:
    def __init__(self, kernel, grid, block, shared, stream):
        self.kernel, self.grid, self.block, self.shared, self.stream = kernel, grid, block, shared, stream

    def __call__(self, *args, **kwargs):
        return self.kernel._launch(self.grid, self.block, self.shared, self.stream, args, kwargs)


def kernel(fn=None, *, fast_math: bool = False, max_registers: int | None = None,
           disabled_passes=(), checked: bool | None = None):
    """Decorator: compile a Python function into a kaio kernel (see README for the language).

    ``fast_math``: hardware approximations for math functions and division (docs/mathlib.md).
    ``max_registers``: cap on registers per thread (PTX ``.maxnreg``, AMD ``amdgpu-num-vgpr``),
    to trade spills for occupancy, e.g. so two 1024-thread blocks fit on an SM (at most 32).
    ``disabled_passes``: optimisation passes to skip for this kernel, by name
    (``kaio.options.SWITCHABLE_PASSES``: 'full_tiles', 'unroll').
    ``checked``: bound-check every load, store and atomic on the device, each dimension against
    its extent; an out-of-bounds access is skipped (loads read 0) and raises IndexError after
    the launch (docs/runtime.md). None: ``KAIO_CHECKED``.
    All four are part of the compile options, so they key the compile cache."""
    if fn is None:
        return lambda f: KernelFunction(f, fast_math=fast_math, max_registers=max_registers,
                                        disabled_passes=disabled_passes, checked=checked)
    return KernelFunction(fn, fast_math=fast_math, max_registers=max_registers,
                          disabled_passes=disabled_passes, checked=checked)
