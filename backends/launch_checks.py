"""The one checked launch path: everything a launch must satisfy, checked before anything is
copied or launched.

Every way to launch a kernel goes through :func:`check_launch`: ``kernel(...)`` and
``kernel[grid, block, ...](...)`` (:mod:`kaio.launch`), launches captured by ``kaio.graph()``
(they are ordinary launches on the capture stream), and ``Backend.launch`` itself, which checks
and then hands the launch to the backend's internal ``_launch``. It checks, in order:

1. the arguments: count, scalar types and ranges, each buffer's kind, dtype, rank, contiguity
   and writability (numpy arrays, kaio device arrays, ``__cuda_array_interface__`` objects);
2. the launch shape: 1 to 3 positive extents within the limits of every backend and at most
   ``2**31`` threads (global ids are i32), or, with none given, the first Region/Out
   parameter's default (:meth:`Partition.launch_shape`);
3. for the shapes and scalars of this launch (memoised per kernel; with 1 and 2, once per
   argument signature: :meth:`LaunchChecks.planned`): each partition's
   ``check_launch`` (every element one owner, no i32 overflow in its index formulas), the
   declared block (``@kaio.kernel(block=...)``: the only block allowed, and the default one),
   the launch dimensionality the race proof assumed (``launch_dims``) and the kernel's index
   bounds (:mod:`kaio.regions.bounds`);
4. aliasing: a written buffer must not overlap any other buffer argument (a race, and LLVM
   marks kernel pointers ``noalias``), compared as byte ranges in one memory space (host memory
   for numpy and reference device arrays, device memory for CUDA/HIP device arrays and
   ``__cuda_array_interface__`` objects, DLPack tensors being viewed as device arrays).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from numpy.lib.array_utils import byte_bounds

from .. import dtypes as dt
from ..errors import ArgumentTypeError, ArgumentValueError, LaunchError
from ..ir.types import BufType
from ..regions import bounds, check_launch_attrs
from ..regions.affine import GRID_YZ_MAX, I32_MAX, MAX_BLOCK_THREADS

GRID_LIMITS = (I32_MAX, GRID_YZ_MAX, GRID_YZ_MAX)
INDEX_LIMIT = I32_MAX  # buffer extents: kernels read them as i32
#: threads in one launch: linear global ids, which kernels compute in i32, up to I32_MAX (the
#: race checker assumes this on every launch: kaio.regions.widths.geometry_facts)
MAX_THREADS = I32_MAX + 1

_MEMO_SIZE = 256


# --- launch shape ----------------------------------------------------------------------------
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
    plain = plain_dims(grid) and plain_dims(block)  # bools hash like ints: keep them out
    if plain:
        hit = _LAUNCH_MEMO.get((grid, block))
        if hit is not None:
            return hit
    out = _normalize_launch(kernel, grid, block)
    if plain and len(_LAUNCH_MEMO) < 4096:
        _LAUNCH_MEMO[(grid, block)] = out
    return out


def plain_dims(v) -> bool:
    """Whether a grid or block is an int or a tuple of ints (no bools: they hash like ints)."""
    if type(v) is int:
        return True
    if type(v) is not tuple:
        return False
    if len(v) == 3:  # the common case: a shape normalized already
        return type(v[0]) is int and type(v[1]) is int and type(v[2]) is int
    return all(type(x) is int for x in v)


def _normalize_launch(kernel: str, grid, block) -> tuple[tuple, tuple]:
    grid, block = _dim3(grid, "grid", kernel), _dim3(block, "block", kernel)
    if math.prod(block) > MAX_BLOCK_THREADS:
        raise LaunchError(f"kernel '{kernel}': block {block} has {math.prod(block)} threads; "
                          f"the limit is {MAX_BLOCK_THREADS}")
    for g, lim, ax in zip(grid, GRID_LIMITS, "xyz"):
        if g > lim:
            raise LaunchError(f"kernel '{kernel}': grid.{ax} = {g} exceeds the limit {lim}")
    threads = math.prod(grid) * math.prod(block)
    if threads > MAX_THREADS:
        # kernels compute thread ids in i32 and the race proofs take them as exact integers
        raise LaunchError(f"kernel '{kernel}': the launch grid={grid} block={block} has {threads} "
                          f"threads; kaio computes global thread ids in 32 bits, so a launch has at "
                          f"most 2**31 = {MAX_THREADS} threads (ids up to {INDEX_LIMIT}); use fewer "
                          f"blocks, e.g. a grid-stride partition")
    return grid, block


# --- arguments -------------------------------------------------------------------------------
def check_scalar(kernel: str, name: str, t: dt.DType, value):
    """The Python value for scalar parameter ``name`` of type ``t``, or ArgumentTypeError /
    ArgumentValueError (also a TypeError / ValueError). ``True`` and ``False`` are only taken
    for bool parameters."""
    if type(value) is float and t.is_float:  # the common case, one range test
        if abs(value) <= _float_max(t) or value != value or abs(value) == float("inf"):
            return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        ok = t.is_bool  # True is no number: `k(x, True)` for an i32 or f32 is a mistake
    elif isinstance(value, int):
        ok = not t.is_bool
    elif isinstance(value, float):
        ok = t.is_float
    else:
        ok = False
    if not ok:
        raise ArgumentTypeError(f"kernel '{kernel}': parameter '{name}' expects a {t.name} scalar, "
                                f"got {type(value).__name__} {value!r}")
    if t.is_int and not (t.min_value() <= int(value) <= t.max_value()):
        raise ArgumentValueError(f"kernel '{kernel}': parameter '{name}' is {t.name} "
                                 f"(range {t.min_value()}..{t.max_value()}) but got {value}")
    if t.is_float and np.isfinite(value) and abs(value) > t.max_value():
        raise ArgumentValueError(f"kernel '{kernel}': parameter '{name}' is {t.name} but {value!r} "
                                 f"overflows it (max {t.max_value()})")
    return value


_FLOAT_MAX: dict = {}


def _float_max(t: dt.DType) -> float:
    m = _FLOAT_MAX.get(t.name)
    if m is None:
        m = _FLOAT_MAX[t.name] = t.max_value()
    return m


def check_cuda_array_interface(cai: dict, what: str = "argument", owner=None) -> tuple[np.dtype, tuple]:
    """(dtype, shape) of a ``__cuda_array_interface__`` dict; ValueError unless C-contiguous
    and unmasked. ``owner``: the exporting object, whose own dtype names what an opaque
    2-byte typestr holds (torch exports bfloat16 as ``|V2``)."""
    shape = tuple(int(s) for s in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    if dtype.kind == "V" and dtype.itemsize == 2 and "bfloat16" in str(getattr(owner, "dtype", "")):
        dtype = np.dtype(ml_dtypes.bfloat16)
    strides = cai.get("strides")
    if strides is not None:
        acc = dtype.itemsize
        for st, sh in zip(reversed(tuple(strides)), reversed(shape)):
            if sh > 1 and st != acc:  # extents of 1 may carry any stride
                raise ArgumentValueError(f"{what} is not C-contiguous (strides {tuple(strides)} for shape "
                                         f"{shape}); make it contiguous first (e.g. tensor.contiguous())")
            acc *= sh
    if cai.get("mask") is not None:
        raise ArgumentValueError(f"{what}: masked arrays are not supported")
    return dtype, shape


def _kaio_array(a) -> bool:
    """A :class:`kaio.backends.runtime.DeviceArray` (by its marker: that module imports this
    one)."""
    return getattr(a, "__kaio_device__", False)


def _fast_shape(t: BufType, arr):
    """The shape of a well-formed numpy array or kaio device array (the common cases, checked
    without building any message), or None."""
    if type(arr) is np.ndarray:
        ok = (arr.dtype == t.dtype.storage_np and arr.ndim == t.ndim and arr.flags.c_contiguous
              and (t.intent == "in" or arr.flags.writeable)
              and (arr.size == 0 or max(arr.shape) <= INDEX_LIMIT))
        return arr.shape if ok else None
    if _kaio_array(arr):
        shape = arr.shape
        ok = (arr.dtype == t.dtype.storage_np and len(shape) == t.ndim
              and (not shape or max(shape) <= INDEX_LIMIT))
        return shape if ok else None
    return None


def check_buffer(kernel: str, name: str, t: BufType, arr) -> tuple:
    """The shape of buffer argument ``name``: its dtype, rank, contiguity, writability and
    extents checked (TypeError / ValueError naming kernel, parameter, expected and got)."""
    shape = _fast_shape(t, arr)
    if shape is not None:
        return shape
    what = f"kernel '{kernel}': parameter '{name}' ({t.intent.capitalize()} {t.dtype.name}, {t.ndim}-d)"
    if isinstance(arr, np.ndarray) or _kaio_array(arr):
        adt, shape = arr.dtype, tuple(arr.shape)
    elif hasattr(arr, "__cuda_array_interface__"):  # torch / CuPy: dtype, shape, strides from it
        try:
            adt, shape = check_cuda_array_interface(arr.__cuda_array_interface__, what, arr)
        except (KeyError, TypeError, IndexError) as e:
            raise ArgumentTypeError(f"{what}: the {type(arr).__name__}'s __cuda_array_interface__ is "
                                    f"malformed ({type(e).__name__}: {e})") from e
    else:
        raise ArgumentTypeError(f"{what} expects a numpy array or a device array, got {type(arr).__name__}")
    if np.dtype(adt) != t.dtype.storage_np:
        raise ArgumentTypeError(f"{what} expects dtype {t.dtype.name} ({t.dtype.storage_np}), got {adt}; "
                                "kaio never casts arrays silently: convert with .astype()")
    if len(shape) != t.ndim:
        raise ArgumentValueError(f"{what} expects a {t.ndim}-d array, got shape {shape}")
    if any(s > INDEX_LIMIT for s in shape):
        raise ArgumentValueError(f"{what}: extent {max(shape)} exceeds the i32 index range of kernels")
    if isinstance(arr, np.ndarray):
        if not arr.flags.c_contiguous:
            raise ArgumentValueError(f"{what} expects a C-contiguous array, got strides {arr.strides}; "
                                     f"pass np.ascontiguousarray({name})")
        if t.intent != "in" and not arr.flags.writeable:
            raise ArgumentValueError(f"{what} is written by the kernel but the array is read-only")
    return shape


def _span(a):
    """(memory space, first byte, end) of a buffer argument, or None when it holds no bytes."""
    if isinstance(a, np.ndarray):
        return ("host", *byte_bounds(a)) if a.nbytes else None
    if _kaio_array(a):  # reference device arrays are host memory
        space = "host" if a.runtime.dlpack_device == 1 else "device"
        return (space, a.ptr, a.ptr + a.nbytes) if a.nbytes and a.ptr else None
    cai = a.__cuda_array_interface__
    dtype, shape = check_cuda_array_interface(cai)
    nbytes = math.prod(shape) * dtype.itemsize
    return ("device", int(cai["data"][0]), int(cai["data"][0]) + nbytes) if nbytes else None


def overlaps(a, b) -> bool:
    """Whether two buffer arguments share memory: numpy arrays exactly, kaio device arrays of
    one runtime by address range, anything else by the byte ranges of :func:`_span`."""
    if _kaio_array(a) and _kaio_array(b) and a.runtime is b.runtime:
        return a is b or (a.nbytes > 0 and b.nbytes > 0 and a.ptr < b.ptr + b.nbytes
                          and b.ptr < a.ptr + a.nbytes)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        # may_share_memory is a cheap bounds test; the exact test only runs when it says yes
        return np.may_share_memory(a, b) and np.shares_memory(a, b)
    sa, sb = _span(a), _span(b)
    return sa is not None and sb is not None and sa[0] == sb[0] and sa[1] < sb[2] and sb[1] < sa[2]


# --- the checked path ------------------------------------------------------------------------
class LaunchChecks:
    """The checks of one kernel (an IR kernel, checked or not), prepared once; calling it checks
    one launch and returns ``(grid, block, args)`` (scalars as Python values)."""

    def __init__(self, kernel, index_bounds: bool = True, warp_size: int | None = None):
        self.name = kernel.name
        self.kernel = kernel
        self.warp_size = warp_size   # the target's (per-warp partitions need it; None: unknown)
        self.names = [p.name for p in kernel.params]
        self.types = [v.type for v in kernel.args]
        # the partitions the IR declares (the frontend and the race checker always declare
        # them; IR built by hand and never checked may leave them out)
        self.owners = [(i, p.name, p.partition) for i, (p, t) in enumerate(zip(kernel.params, self.types))
                       if isinstance(t, BufType) and t.intent in ("region", "out") and p.partition]
        self.bounds = kernel.attrs.get("index_bounds", ()) if index_bounds else ()
        used = {s for r in self.bounds for e in r.upper + r.lower + r.when for s in bounds.symbols(e)}
        self.scalars = [i for i, (n, t) in enumerate(zip(self.names, self.types))
                        if n in used and not isinstance(t, BufType)]
        self.plan = [(i, n, t, isinstance(t, BufType))
                     for i, (n, t) in enumerate(zip(self.names, self.types))]
        self.kinds = [(i, is_buf) for i, _, _, is_buf in self.plan]
        # scalars re-checked on a planned launch: (index, name, type, largest finite float)
        self.scalar_plan = [(i, n, t, _float_max(t) if t.is_float else None)
                            for i, n, t, is_buf in self.plan if not is_buf]
        bufs = [i for i, _, _, is_buf in self.plan if is_buf]
        self.buffer_pos = {i: k for k, i in enumerate(bufs)}
        self.buffer_names = [self.names[i] for i in bufs]
        # pairs that must not overlap: at least one of the two is written
        self.pairs = [(i, j) for k, i in enumerate(bufs) for j in bufs[k + 1:]
                      if self.types[i].intent != "in" or self.types[j].intent != "in"]
        self.memo: dict = {}
        self.plans: dict = {}  # signature -> LaunchPlan (see planned)
        self.last = (LaunchPlan(None, None), (), ())  # the last plan, its grid and block as given

    def planned(self, grid, block, args) -> tuple["LaunchPlan", list]:
        """``(plan, args)`` for one launch: the checks run once per argument signature
        (:meth:`signature`); a repeated signature re-checks only its scalars' types and ranges,
        everything else being what the signature fixes. Arguments with no signature (numpy
        arrays, foreign arrays) are checked in full on every launch, with a plan of their own.
        The last plan is tried first, by its guard (:meth:`LaunchPlan.matches`), where the launch
        shape is the very objects it was given (tuples do not change)."""
        last = self.last
        if last[1] is grid and last[2] is block and last[0].matches(args):
            return last[0], args  # matches: every scalar a Python value in its checked range
        key = self.signature(grid, block, args)
        if key is not None:
            p = self.plans.get(key)
            if p is not None:
                self.last = (p, grid, block)
                for i, n, t, fmax in self.scalar_plan:
                    a = args[i]
                    if type(a) is float and fmax is not None and (abs(a) <= fmax or a != a):
                        continue  # in range, or NaN (the signature holds its type: float)
                    v = check_scalar(self.name, n, t, a)
                    if v is not a:
                        args = list(args)
                        args[i] = v
                return p, args
        given, given_grid, given_block = args, grid, block
        grid, block, args = self(grid, block, args)
        p = LaunchPlan(grid, block, None if key is None else self._guard(given))
        if key is not None:
            self.last = (p, given_grid, given_block)
            if len(self.plans) < _MEMO_SIZE:
                self.plans[key] = p
        return p, args

    def _guard(self, args):
        """What another launch must match, attribute by attribute, to have this launch's
        signature (:meth:`LaunchPlan.matches`); None where a scalar is no Python bool, int or
        float (those are converted on every launch). Each scalar keeps the range its checks
        accept (its value, where the index bounds read it)."""
        bufs, scalars, bounded = [], [], set(self.scalars)
        for i, is_buf in self.kinds:
            a, t = args[i], self.types[i]
            if is_buf:
                bufs.append((i, type(a), a._launch_key))  # (runtime, ptr, shape, dtype)
                continue
            ty = type(a)
            if ty not in (bool, int, float):
                return None
            if i in bounded:
                lo = hi = a
            elif ty is bool:
                lo, hi = False, True
            elif t.is_float:
                hi = _float_max(t)
                lo = -hi
            else:
                lo, hi = t.min_value(), t.max_value()
            scalars.append((i, ty, lo, hi))
        return len(args), tuple(bufs), tuple(scalars)

    def signature(self, grid, block, args):
        """What every check of a launch depends on, or None where it cannot be keyed: the
        launch shape as given, and per argument a kaio device array's runtime, address, shape
        and dtype (dtype, rank, extents, partitions and aliasing follow from them) or a
        scalar's Python type, plus the values of the scalars the index bounds read."""
        if len(args) != len(self.types) or not (
                grid is None and block is None or plain_dims(grid) and plain_dims(block)):
            return None  # bools hash like ints: a shape of bools must reach the checks
        key = [grid, block]
        for i, is_buf in self.kinds:
            a = args[i]
            if not is_buf:
                key.append(type(a))
            elif getattr(type(a), "__kaio_device__", False):
                key.append(a._launch_key)  # (runtime, ptr, shape, dtype)
            else:
                return None
        for i in self.scalars:
            key.append(args[i])
        return tuple(key)

    def __call__(self, grid, block, args):
        if len(args) != len(self.types):
            raise LaunchError(f"kernel '{self.name}': {len(args)} arguments given, the kernel takes "
                              f"{len(self.types)} ({', '.join(self.names)})")
        shapes, given = [], args
        for i, n, t, is_buf in self.plan:
            a = args[i]
            if is_buf:
                shape = _fast_shape(t, a)
                shapes.append(shape if shape is not None else tuple(check_buffer(self.name, n, t, a)))
            else:
                v = check_scalar(self.name, n, t, a)
                if v is not a:  # a numpy scalar as a Python value
                    args = list(args) if args is given else args
                    args[i] = v
        if grid is None:
            grid, block = self._default_shape(shapes)
        grid, block = normalize_launch(self.name, grid, block)
        key = (grid, block, *shapes, *[args[i] for i in self.scalars])
        if key not in self.memo:
            self._check_shapes(grid, block, shapes, args)
            if len(self.memo) < _MEMO_SIZE:
                self.memo[key] = True
        for i, j in self.pairs:
            if overlaps(args[i], args[j]):
                raise LaunchError(f"kernel '{self.name}': parameters '{self.names[i]}' and "
                                  f"'{self.names[j]}' share memory but one of them is written; "
                                  "pass separate arrays")
        return grid, block, args

    def _default_shape(self, shapes):
        if not self.owners:
            raise LaunchError(f"kernel '{self.name}' has no Region/Out parameter to derive its launch "
                              f"shape from; launch it explicitly: {self.name}[grid, block](...)")
        i, name, part = self.owners[0]
        shape = shapes[self.buffer_pos[i]]
        grid, block = part.launch_shape(shape, **self._width(part))
        declared = self.kernel.attrs.get("block")
        if declared is None or tuple(declared) == tuple(block):
            return grid, block
        return _grid_for(part, shape, grid, block, declared, name, self.name), declared

    def _width(self, part) -> dict:
        """The warp width, for a partition whose owners are warps (kaio.regions.warp_tiles)."""
        return {"warp_size": self.warp_size} if getattr(part, "per_warp", False) else {}

    def _check_shapes(self, grid, block, shapes, args) -> None:
        for i, name, part in self.owners:
            part.check_launch(shapes[self.buffer_pos[i]], grid, block, buffer=name, kernel=self.name,
                              **self._width(part))
        check_launch_attrs(self.kernel, grid, block)
        if self.bounds:
            scalars = {self.names[i]: int(args[i]) for i in self.scalars}
            env = bounds.launch_env(grid, block, dict(zip(self.buffer_names, shapes)), scalars)
            bounds.check(self.name, self.bounds, env)


class LaunchPlan:
    """The checked launch shape of one argument signature (:meth:`LaunchChecks.planned`), and
    ``data``: the backend's own plan for it (e.g. the CUDA backend's pre-packed parameters),
    None until the backend builds it, False where it has none."""

    __slots__ = ("grid", "block", "data", "nargs", "buffers", "scalars")

    def __init__(self, grid, block, guard=None):
        self.grid, self.block, self.data = grid, block, None
        # the guard (LaunchChecks._guard): argument count, buffers, scalars; -1: none kept
        self.nargs, self.buffers, self.scalars = guard or (-1, (), ())

    def matches(self, args) -> bool:
        """Whether ``args`` have this plan's signature (the launch shape aside), so that every
        check it passed holds for them: each array's class, and its runtime, address, shape and
        dtype (``DeviceArray._launch_key``, one tuple: the same object, or equal), each scalar's type,
        and each scalar within its checked range (a NaN or an infinity misses, and is checked
        in full). False for a plan that keeps no guard."""
        if len(args) != self.nargs:
            return False
        for i, cls, key in self.buffers:
            a = args[i]
            if type(a) is not cls or a._launch_key is not key and a._launch_key != key:
                return False
        for i, ty, lo, hi in self.scalars:
            a = args[i]
            if type(a) is not ty or not lo <= a <= hi:
                return False
        return True

    def guard_source(self, env: dict) -> list[str]:
        """:meth:`matches` as lines of a function body (indented once, ``return False`` where a
        test fails) over the arguments unpacked as ``a0, a1, ...`` (their count checked by the
        caller), one test per argument, for a backend that compiles its planned launch into one
        function; the objects the lines name are added to ``env``."""
        lines = []
        for i, cls, key in self.buffers:
            env.update({f"CLS{i}": cls, f"KEY{i}": key})
            lines.append(f"type(a{i}) is not CLS{i} or a{i}._launch_key is not KEY{i}"
                         f" and a{i}._launch_key != KEY{i}")
        for i, ty, lo, hi in self.scalars:
            env.update({f"TY{i}": ty, f"LO{i}": lo, f"HI{i}": hi})
            lines.append(f"type(a{i}) is not TY{i} or not LO{i} <= a{i} <= HI{i}")
        return [part for line in lines for part in (f"    if {line}:", "        return False")]


def _grid_for(part, shape, grid, block, declared, buffer, kernel) -> tuple:
    """A grid for the declared block where the partition's default launch has another block:
    the partition's own (``launch_grid``), the default grid where the partition accepts it with
    the declared block (its grid counts tiles or rows), else as many threads on a 1-D grid."""
    if hasattr(part, "launch_grid"):
        return part.launch_grid(shape, declared)
    try:
        part.check_launch(shape, grid, declared, buffer=buffer, kernel=kernel)
        return grid
    except LaunchError:
        threads = math.prod(grid) * math.prod(block)
        return (max(1, -(-threads // math.prod(declared))), 1, 1)


def launch_checks(compiled) -> LaunchChecks:
    """The :class:`LaunchChecks` of ``compiled`` (a :class:`kaio.backends.Compiled`, or an IR
    kernel), prepared on first use and kept on the Compiled object."""
    checks = getattr(compiled, "checks", None)
    if checks is None:
        # checked mode bound-checks every access on the device, naming the thread and the exact
        # index, and skips the access: the launch-time index bounds are left to it
        checked = getattr(getattr(compiled, "options", None), "checked", False)
        checks = LaunchChecks(getattr(compiled, "kernel", compiled), index_bounds=not checked,
                              warp_size=getattr(getattr(compiled, "options", None), "warp_size", None))
        if hasattr(compiled, "checks"):
            compiled.checks = checks
    return checks


def plan_launch(compiled, grid, block, args) -> tuple[LaunchPlan, list]:
    """:func:`check_launch` through the per-signature plan cache: ``(plan, args)``, where
    ``plan.grid`` and ``plan.block`` are the checked launch shape."""
    checks = getattr(compiled, "checks", None)
    if checks is None:
        checks = launch_checks(compiled)
    return checks.planned(grid, block, args)


def check_launch(compiled, grid, block, args):
    """Check one launch of ``compiled`` (a :class:`kaio.backends.Compiled`, or an IR kernel)
    before anything is copied or launched; returns ``(grid, block, args)``: the launch shape as
    3-tuples (``grid=None``: the default for the first Region/Out parameter) and the arguments
    with scalars as Python values. Raises LaunchError, TypeError or ValueError naming the kernel
    and what is wrong."""
    return launch_checks(compiled)(grid, block, args)
