"""Automatic coarsening: kaio, not the kernel author, picks how many elements a thread handles.

A kernel is *elementwise* when its result cannot depend on which thread computes which element:
its body names no thread identity (``thread_idx``, ``global_id``, ``lane_id``, ...), no shared
memory, barrier, atomic, warp or block collective, and calls only ``@kaio.func`` functions whose
bodies pass the same test (read here, transitively); its only ownership comes from ``y.owned()``. The README's
``for i in y.owned(): y[i] = a * x[i] + y[i]`` is one. For such a kernel every 1-D Region/Out left
on the default partition, when every buffer has 2- or 4-byte elements, is given
:class:`~kaio.regions.partitions.Coarsened` (k elements per thread, :func:`elements_per_thread`)
instead of
:class:`~kaio.regions.partitions.Elementwise`: kaio's launch shape then uses k times fewer
threads, and the full-tile and vector passes turn each thread's k accesses into 16-byte ones.
The results are identical, since no element's value depends on its thread.

The decision reads the function's syntax and resolves names as the frontend does (parameters,
locals, closure, globals); anything it cannot resolve to a known thread-independent object keeps
the default. ``@kaio.kernel(disabled_passes=("coarsen",))`` turns it off.
"""
from __future__ import annotations

import ast
import builtins

from ..errors import CompileError
from ..lang import DeviceFunction, Intrinsic
from .diagnostics import parse_function

#: intrinsics that do not reveal or involve other threads
THREAD_INDEPENDENT = frozenset({"static_range", "local_array", "bitcast"})

#: element sizes whose k neighbours the vector pass (kaio.backends.vector_access) turns into
#: whole 16-byte accesses: 2 bytes (groups of 8) and 4 (groups of 4); 1-byte types (groups of 16)
#: and 8-byte ones (not grouped) keep one element per thread. Coarsening pays only where
#: every buffer's accesses become 16-byte ones (H200, 2026-12-01: with k serial 2-byte accesses
#: per thread, before 2-byte groups existed, f16 GELU and silu_gate ran 3.2-4.8x behind Triton)
VECTOR_ITEMSIZES = frozenset({2, 4})

#: bytes per thread and buffer: two 16-byte accesses, as the blocked(8) f32 saxpy that reached
#: 4062 GB/s against 3336 one element per thread (H200, issue 13). 2-byte buffers get 16
#: elements, also two 16-byte accesses: H200 2026-12-01 (benchmarks/gelu_sweep.py), f16 GELU at
#: 2^28, k = 16 against 8: tanh 287 vs 312 us, erf 433 vs 473; at 2^24 22.3 vs 23.5, (erf) likewise
_TARGET_BYTES = 32


def elements_per_thread(itemsizes) -> int:
    """k for buffers of these element sizes: 32 bytes of the widest (8 f32, 16 f16/bf16)."""
    return max(1, _TARGET_BYTES // max(itemsizes))


def coarsening(fn, params, kernel_name: str) -> int | None:
    """k for this kernel, or None when it must keep the elementwise partition."""
    regions = [p for p in params if p.kind == "buffer" and p.spec.intent in ("region", "out")]
    if not regions or any(p.spec.partition is not None or p.spec.ndim != 1 for p in regions):
        return None
    sizes = [p.spec.dtype.itemsize for p in params if p.kind == "buffer"]
    if any(s not in VECTOR_ITEMSIZES for s in sizes):      # bool (1 byte) included
        return None  # no 16-byte accesses for them: k serial accesses measured slower
    tree = parse_function(fn, kernel_name).tree
    if not _thread_independent(tree, fn, {p.name for p in params}, set()):
        return None
    return elements_per_thread(sizes)   # two 16-byte accesses per buffer


def _thread_independent(tree, fn, param_names, seen: set) -> bool:
    """Whether the function ``fn`` (parsed as ``tree``) names nothing thread-dependent; ``seen``
    holds the device functions already read (each is read once, recursion included)."""
    local = set(param_names) | _assigned(tree)
    for node in _body_nodes(tree):
        if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.Global, ast.Nonlocal)) and node is not tree:
            return False
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            if not _allowed(_resolve(fn, node.id), seen):
                return False
        elif isinstance(node, ast.Attribute):
            obj = _attribute(fn, node, local)
            if obj is not _LOCAL and not _allowed(obj, seen):
                return False
    return True


def _device_function_independent(f: DeviceFunction, seen: set) -> bool:
    """A called ``@kaio.func``: its body under the kernel's rule (it is inlined where it is
    called, so what it names is what the kernel names)."""
    if id(f) in seen:
        return True
    seen.add(id(f))
    try:
        tree = parse_function(f.fn, f.name).tree
    except CompileError:    # no source to read (lowering reports it): keep the default
        return False
    a = tree.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    return _thread_independent(tree, f.fn, params, seen)


def _body_nodes(tree):
    """The nodes of the kernel's body: its decorators, parameter annotations and defaults were
    evaluated once, where it was defined (they gave the parameter specs, checked above), and may
    name definition-time locals such as a factory's ``dt``."""
    skip = set()
    if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = tree.args
        heads = tree.decorator_list + a.defaults + [d for d in a.kw_defaults if d is not None]
        heads += [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs if x.annotation]
        heads += [tree.returns] if tree.returns else []
        skip = {id(n) for h in heads for n in ast.walk(h)}
    return [n for n in ast.walk(tree) if id(n) not in skip]


_LOCAL = object()      # an attribute of a parameter or local (y.owned, x.shape): allowed
_UNKNOWN = object()    # a name that does not resolve: keep the default


def _assigned(tree) -> set:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def _resolve(fn, name):
    code = fn.__code__
    if fn.__closure__ and name in code.co_freevars:
        try:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:
            return _UNKNOWN
    if name in fn.__globals__:
        return fn.__globals__[name]
    return getattr(builtins, name, _UNKNOWN)


def _attribute(fn, node, local):
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return _LOCAL  # (expr).attr: its parts are walked on their own
    if node.id in local:
        return _LOCAL
    obj = _resolve(fn, node.id)
    for attr in reversed(chain):
        if isinstance(obj, Intrinsic):  # thread_idx.x: the intrinsic decides
            return obj
        try:
            obj = getattr(obj, attr)
        except Exception:
            return _UNKNOWN
    return obj


def _allowed(obj, seen: set) -> bool:
    if obj is _UNKNOWN:
        return False
    if isinstance(obj, DeviceFunction):
        return _device_function_independent(obj, seen)
    if isinstance(obj, Intrinsic):
        return obj.name in THREAD_INDEPENDENT or obj.name.startswith("math.")
    return True
