"""``@kaio.kernel``: the user-facing kernel object -- specialise, check arguments, launch.

Pipeline per call::

    arguments --check--> specialisation key --(cached) frontend + passes--> checked IR
              --(cached per backend) backend.compile--> Compiled --launch shape--> backend.launch

Everything that can be wrong with the arguments or the launch is reported before any copy or
launch happens, so the user's arrays are untouched on error.
"""
from __future__ import annotations

import threading

import numpy as np

from . import backends, residency, warm
from .backends.launch_checks import normalize_launch, plain_dims, plan_launch
from .backends.runtime import DeviceArray
from .checked import fault_record, raise_fault
from .config import settings
from .dlpack import from_dlpack
from .errors import ArgumentTypeError, LaunchError, public_entry
from .ir import print_kernel
from .lang import KaioFunction
from .options import KernelOptions
from .residency import substitute, swap
from .signature import bind, parse_signature


def dlpack_view(kernel: str, name: str, arr):
    """A DLPack-only tensor (one with ``__dlpack__`` but neither ``__cuda_array_interface__``
    nor kaio's own array type) as a zero-copy kaio device array; other arguments unchanged."""
    if (type(arr) is np.ndarray or type(arr) is DeviceArray or not hasattr(arr, "__dlpack__")
            or isinstance(arr, np.ndarray) or hasattr(arr, "__cuda_array_interface__")):
        return arr
    try:
        return from_dlpack(arr)
    except (TypeError, ValueError) as e:
        raise ArgumentTypeError(f"kernel '{kernel}': parameter '{name}': cannot use the "
                                f"{type(arr).__name__} through DLPack: {e}") from e


#: argument types :func:`dlpack_view` returns unchanged, whatever they hold
_PLAIN = (DeviceArray, np.ndarray)


class KernelFunction(KaioFunction):
    """A Python function compiled by kaio. Call it, or index it with a launch configuration:
    ``k(args...)``, ``k[grid, block](args...)``, ``k[grid, block, shared_bytes](...)``,
    ``k[grid, block, shared_bytes, stream](...)``."""

    @public_entry
    def __init__(self, fn, *, fast_math: bool = False, max_registers: int | None = None,
                 disabled_passes=(), checked: bool | None = None, block=None,
                 portable: bool | None = None):
        try:
            self.options = KernelOptions(fast_math, max_registers, frozenset(disabled_passes),
                                         checked, block, portable)
        except ValueError as e:
            raise ValueError(f"kernel '{fn.__name__}': {e}") from None
        super().__init__(fn)
        self.params = parse_signature(fn)
        self._ir_cache: dict = {}
        self._compiled: dict = {}
        self._lock = threading.Lock()
        self._has_consts = any(p.kind == "const" for p in self.params)
        self._buffers = [i for i, p in enumerate(self.params) if p.kind == "buffer"]
        # (index, written) per buffer: what a kaio.resident scope swaps (residency.swap)
        self._resident = [(i, self.params[i].spec.intent != "in") for i in self._buffers]
        self._last = (None, None, None, None)  # (backend, settings, coarsen, Compiled) of the last call
        self._auto = _BoundLaunch(self, None, None, 0, None)  # k(args): kaio picks the shape
        self._configs: dict = {}  # k[grid, block(, shared)] as written -> its launch function
        self._last_config = (None, None)  # the configuration indexed last, and its launch

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
                raise ArgumentTypeError(f"kernel '{self.name}': constant parameter '{p.name}' expects "
                                        f"{ty.__name__}, got {type(v).__name__} {v!r}")
            consts[p.name] = ty(v)
        return consts

    def coarsening(self) -> int | None:
        """Elements per thread kaio gives this kernel's default Regions when it chooses the
        launch shape (:mod:`kaio.frontend.coarsen`); None: it keeps one per thread."""
        if not hasattr(self, "_coarsen_k"):
            k = None
            if self.options.block is None and "coarsen" not in self.options.disabled_passes:
                from .frontend.coarsen import coarsening  # lazy: import time, ~30 ms
                k = coarsening(self.fn, self.params, self.name)
            self._coarsen_k = k
        return self._coarsen_k

    def specialize_ir(self, consts: dict | None = None, coarsen: bool = False):
        """The checked IR kernel for these constant values (cached). ``coarsen``: the version
        kaio launches when it picks the launch shape (:meth:`coarsening`)."""
        consts = dict(consts or {})
        missing = [p.name for p in self.params if p.kind == "const" and p.name not in consts]
        if missing:
            raise ArgumentTypeError(f"kernel '{self.name}': give values for constant parameters {missing}")
        elems = self.coarsening() if coarsen else None
        key = (tuple(sorted(consts.items())), elems)
        with self._lock:
            k = self._ir_cache.get(key)
            if k is None:
                from .frontend import checked_ir  # lazy: import time, ~30 ms
                block = self.options.block  # the checker proves it for this block only
                k = checked_ir(self.fn, self.params, consts, fast_math=self.fast_math,
                               attrs={} if block is None else {"block": block}, coarsen=elems)
                self._ir_cache[key] = k
        return k

    @property
    def ir(self) -> str:
        """The kernel's IR as text (kernels with Const parameters: use ``ir_for(**consts)``)."""
        return self.ir_for()

    @public_entry
    def ir_for(self, **consts) -> str:
        return print_kernel(self.specialize_ir(consts))

    @public_entry
    def compile(self, backend=None, **consts):
        """Compile for a backend (default: the current one); returns ``Compiled``."""
        return self._compile(backend, consts, False)

    def _compile(self, backend, consts: dict, coarsen: bool):
        be = backend if hasattr(backend, "compile") else backends.get_backend(backend)
        checked = self.options.checked  # None: KAIO_CHECKED decides, so it is part of the key
        portable = self.options.portable  # likewise KAIO_PORTABLE
        # as asked (the warm path knows the coarsening without the frontend's analysis)
        coarsen = bool(coarsen and self.options.block is None
                       and "coarsen" not in self.options.disabled_passes)
        key = (id(be), tuple(sorted(consts.items())) if consts else (),
               settings().checked if checked is None else checked, coarsen,
               settings().portable if portable is None else portable)
        hit = self._compiled.get(key)
        # the entry holds the backend itself: an id is only unique while its object lives, and a
        # freed backend's id reused by another would otherwise return the wrong Compiled
        if hit is not None and hit[0] is be:
            return hit[1]
        c = warm.compile_kernel(self, be, consts, coarsen)  # the disk cache, then the frontend
        self._compiled[key] = (be, c)
        return c

    @property
    def fast_math(self) -> bool:
        return self.options.fast_math

    @property
    def max_registers(self) -> int | None:
        return self.options.max_registers

    @public_entry
    def emit(self, stage: str, target: str | None = None, **consts):
        """One compilation stage's artifact ('ir', 'lowered', 'ptx', 'llvm', 'asm', 'hsaco', ...)
        for a target, with no GPU needed (see ``kaio compile``): text, or bytes for binary
        stages. Runs the same stages a launch does."""
        from .backends.targets import emit  # lazy: import time (the code generators, ~70 ms)
        return emit(self.specialize_ir(consts), stage, target, self.options)

    # --- launching --------------------------------------------------------------------
    def __getitem__(self, config):
        """The launch function of a configuration (:class:`_BoundLaunch`); one per kernel and
        configuration of ints. ``k[grid, block](...)`` written in a loop indexes with one tuple
        object (a constant of the caller's code), found by identity."""
        last = self._last_config
        if config is last[0]:
            return last[1]
        if (type(config) is tuple and len(config) == 2 and type(config[0]) is int
                and type(config[1]) is int):  # k[blocks, threads], inline
            plain = True
        else:
            plain = _plain_config(config)
        launch = self._configs.get(config) if plain else None
        if launch is None:
            launch = self._bind(config).call
            if plain and len(self._configs) < _CONFIGS:
                self._configs[config] = launch
        if plain:  # kept alive here: its id is not another object's while it is compared
            self._last_config = (config, launch)
        return launch

    def _bind(self, config) -> "_BoundLaunch":
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
        bound = self._auto
        if not kwargs and (bound.fast(args, None) or bound.retry(args)):  # _BoundLaunch.call
            return None
        return bound.checked(args, kwargs)

    def on(self, stream):
        """``k.on(stream)(args...)``: the launch kaio shapes (as ``k(args...)``) on ``stream``
        (a kaio.Stream, a torch or CuPy stream, anything with ``__cuda_stream__``, a handle;
        None: the default stream)."""
        return _BoundLaunch(self, None, None, 0, stream).call

    def _launch(self, bound: "_BoundLaunch", args, kwargs):
        grid, block, shared_bytes, stream = bound.grid, bound.block, bound.shared, bound.stream
        st = settings()  # before compiling: the plan kept below is for the Compiled these pick
        if not kwargs and len(args) == len(self.params):
            values = args  # the common call: all arguments positional
        else:
            values = bind(self.name, self.params, args, kwargs)
        values = substitute(self.name, self.params, values)   # kaio.resident scopes' mirrors
        backend = backends.get_backend(None)
        coarsen = grid is None and block is None
        last = self._last
        plain = last[0] is backend and last[1] is settings() and last[2] is coarsen
        for i in self._buffers if plain else ():
            if type(values[i]) not in _PLAIN:
                plain = False
                break
        if plain:
            # the common repeated call: no constants, arrays that need no DLPack view, and the
            # kernel compiled already for this backend, settings and shape choice
            compiled, runtime = last[3], values
        else:
            consts = self._const_values(values) if self._has_consts else {}
            runtime = [dlpack_view(self.name, p.name, v) if p.kind == "buffer" else v
                       for p, v in zip(self.params, values) if p.kind != "const"]
            # kaio picks the shape: elementwise kernels get k elements per thread (frontend.coarsen)
            compiled = self._compile(backend, consts, coarsen)
            if not self._has_consts:
                self._last = (backend, settings(), coarsen, compiled)
        # Backend.launch is the one checked path: arguments, launch shape, partitions, index
        # bounds and aliasing are all checked there, before anything is copied or launched
        if compiled.options is not None and compiled.options.checked:
            fault = fault_record(self.name)
            grid, block = backend.launch(compiled, grid, block, [*runtime, fault], shared_bytes, stream)
            raise_fault(compiled, fault, runtime, grid, block)
            return
        # Backend.launch, with the plan kept for the next call of this launch configuration
        plan, checked_args = plan_launch(compiled, grid, block, runtime)
        backend._launch_planned(compiled, plan, checked_args, shared_bytes, stream)
        if plan.nargs >= 0 and not kwargs and not self._has_consts:
            bound.remember(backend, st, compiled, plan)

    def _forget_plans(self) -> None:
        """Forget the recent plans of every launch configuration (tests: a freed array's
        address may come back, and with it another test's plan)."""
        for launch in self._configs.values():
            launch.bound.recent = ()
        self._configs.clear()
        self._last_config = (None, None)
        self._auto.recent = ()

    def __repr__(self):
        return f"<kaio.kernel {self.name}({', '.join(p.name for p in self.params)})>"


#: launch configurations kept per kernel (``k[grid, block]`` written in a loop), and plans kept
#: per configuration (the signatures a loop alternates between, e.g. swapped buffers)
_CONFIGS, _RECENT = 64, 4


def _plain_config(config) -> bool:
    """A ``k[...]`` configuration of ints and int tuples with no stream: one to key the kernel's
    bound launches by (bools hash like ints, and a stream is kept alive by its key)."""
    if type(config) is not tuple:
        return False
    n = len(config)
    return (2 <= n <= 3 and plain_dims(config[0]) and plain_dims(config[1])
            and (n == 2 or type(config[2]) is int))


def _miss(args, stream) -> bool:
    """A launch configuration's fast path before it has a plan."""
    return False


class _BoundLaunch:
    """A kernel with its launch configuration (None: kaio picks the shape) and the plans of
    the argument signatures it launched last, each kept as a function ``run(args, stream) ->
    bool`` that launches ``args`` if the backend and settings are those its plan was checked
    with and they match the plan (:meth:`LaunchPlan.matches`: every check that plan passed
    holds for them), else returns False. ``call`` is what ``k[grid, block]`` returns: it tries
    the newest plan's function (``fast``), then :meth:`retry`, then :meth:`checked`."""

    __slots__ = ("kernel", "grid", "block", "shared", "stream", "_recent", "fast", "call")

    def __init__(self, kernel, grid, block, shared, stream):
        self.kernel, self.grid, self.block, self.shared, self.stream = kernel, grid, block, shared, stream
        self.recent = ()
        self.call = _launch_function(self)

    @property
    def recent(self) -> tuple:
        """(backend, settings, run, LaunchPlan) of the recent plans, newest first."""
        return self._recent

    @recent.setter
    def recent(self, entries: tuple) -> None:
        self._recent = entries
        self.fast = entries[0][2] if entries else _miss

    def retry(self, args) -> bool:
        """Launch a call the newest plan did not take through the other recent plans, with
        the arrays resident in a ``kaio.resident`` scope swapped for their mirrors; False where
        none matches."""
        recent = self._recent
        if recent:
            if residency.active:  # a scope is open in some thread: its mirrors, if this one's
                args = swap(self.kernel._resident, args)
            stream = self.stream
            for _, _, run, _ in recent:
                if run(args, stream):
                    return True
        return False

    @public_entry  # called by the launch function itself: a CompileError's traceback is short
    def checked(self, args, kwargs):
        """The checked path (``KernelFunction._launch``)."""
        return self.kernel._launch(self, args, kwargs)

    def remember(self, backend, st, compiled, plan) -> None:
        """Keep ``plan`` (checked on ``backend`` under settings ``st``) among the recent ones,
        at first through :func:`_second_launch` (its fast function is made when it is used)."""
        if any(e[3] is plan and e[0] is backend and e[1] is st for e in self._recent):
            return
        entry = (backend, st, _second_launch(self, backend, st, compiled, plan), plan)
        self.recent = (entry, *self._recent[:_RECENT - 1])

    def _replace(self, old, run) -> None:
        """Put ``run`` where ``old`` is among the recent plans' functions (where it still is)."""
        self.recent = tuple((b, s, run if r is old else r, p) for b, s, r, p in self._recent)


def _launch_function(bound: _BoundLaunch):
    """``launch(*args, **kwargs)`` for ``bound``: a function, not a method (a call costs less)."""
    stream = bound.stream

    def launch(*args, **kwargs):
        if not kwargs and (bound.fast(args, stream) or bound.retry(args)):
            return None
        return bound.checked(args, kwargs)
    launch.bound = bound
    # the configuration as attributes, as on the bound launch objects k[...] returned before
    launch.kernel, launch.grid, launch.block = bound.kernel, bound.grid, bound.block
    launch.shared, launch.stream = bound.shared, bound.stream
    launch.__qualname__ = launch.__name__ = f"{bound.kernel.name}[launch]"
    launch.__doc__ = f"Launch kernel '{bound.kernel.name}' with its configuration (kaio.launch)."
    return launch


def _second_launch(bound: _BoundLaunch, backend, st, compiled, plan):
    """``run(args, stream) -> bool`` for a plan just checked and launched: at the plan's second
    launch (its guard, :meth:`LaunchPlan.matches`, passed) it makes the plan's fast function
    (:func:`_guarded_launch`), puts that in its own place among ``bound``'s recent plans and
    launches through it. The CUDA backend compiles that function from source (a quarter to a
    half millisecond): a plan launched once, e.g. a process's only launch of a kernel, never
    pays for it, and the first launch of a fresh process stays short (issue 15)."""
    matches, current = plan.matches, backends.get_backend

    def run(args, stream) -> bool:
        if current(None) is not backend or settings() is not st or not matches(args):
            return False
        fast = _guarded_launch(backend, st, compiled, plan, bound.shared, bound.stream is not None,
                               args)
        bound._replace(run, fast)
        return fast(args, stream)
    return run


def _guarded_launch(backend, st, compiled, plan, shared: int, stream_given: bool, args):
    """``run(args, stream) -> bool``: launch ``args`` through ``plan`` if ``backend`` and
    settings ``st`` are current and they match it (:meth:`LaunchPlan.matches`), else False;
    made for the arguments ``args`` of the plan's second launch, which match it.
    The backend's own where it has one (the CUDA backend compiles the whole of it into one
    function, which declines where its ``_launch_planned`` is replaced: a spy that records
    launches, e.g. benchmarks/ml_kaio's LaunchSpy, which reloads the settings so that plans
    kept before it are dropped). Taken from the backend's class: a wrapper that forwards
    attributes (conformance.targets.Recorder) gets the generic path, through its own
    ``_launch_planned``."""
    own = getattr(type(backend), "_guarded_launch", None)
    fused = own(backend, st, compiled, plan, shared, stream_given, args) if own is not None else None
    if fused is not None:
        return fused
    matches, current = plan.matches, backends.get_backend

    def run(args, stream) -> bool:
        if current(None) is not backend or settings() is not st or not matches(args):
            return False
        backend._launch_planned(compiled, plan, args, shared, stream)  # looked up: a spy's
        return True
    return run


def kernel(fn=None, *, fast_math: bool = False, max_registers: int | None = None,
           disabled_passes=(), checked: bool | None = None, block=None,
           portable: bool | None = None):
    """Decorator: compile a Python function into a kaio kernel (see README for the language).

    ``fast_math``: hardware approximations for math functions and division (docs/mathlib.md).
    ``max_registers``: cap on registers per thread (PTX ``.maxnreg``, AMD ``amdgpu-num-vgpr``),
    to trade spills for occupancy, e.g. so two 1024-thread blocks fit on an SM (at most 32).
    ``disabled_passes``: optimisation passes to skip for this kernel, by name
    (``kaio.options.SWITCHABLE_PASSES``: 'full_tiles', 'unroll').
    ``checked``: bound-check every load, store and atomic on the device, each dimension against
    its extent; an out-of-bounds access is skipped (loads read 0) and raises IndexError after
    the launch (docs/runtime.md). None: ``KAIO_CHECKED``.
    All four are part of the compile options, so they key the compile cache.
    ``block``: the block shape every launch uses (``block=(32, 8)``; ints >= 1, at most 1024
    threads). The race checker proves the kernel for exactly this shape (``kaio.block_dim`` is
    then a constant to it), a launch with another block is a LaunchError, and a launch that
    gives no shape gets this block (docs/regions.md). It is part of the checked IR.
    ``portable``: compile with only correctly rounded operations and kaio's portable math
    library, ignoring ``fast_math`` and per-call ``fast=True``, so the result is bit-identical on
    every target (docs/conformance.md, "Portable mode"). None: ``KAIO_PORTABLE``."""
    opts = dict(fast_math=fast_math, max_registers=max_registers, disabled_passes=disabled_passes,
                checked=checked, block=block, portable=portable)
    if fn is None:
        return lambda f: KernelFunction(f, **opts)
    return KernelFunction(fn, **opts)
