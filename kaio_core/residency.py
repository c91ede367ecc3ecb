"""``kaio.resident``: numpy arrays kept on the device across launches.

The automatic interface copies every numpy argument to the device and back at each launch. A
residency scope keeps the arrays it names on the device instead:

    with kaio.resident(u, v):
        for step in range(100):
            jacobi(u, v)          # no copies: the launches use u's and v's device mirrors
            jacobi(v, u)
    # here u and v hold what the kernels wrote

- Entering copies each array to the device once. A launch inside the scope passes the mirror
  for an argument that *is* one of the arrays (the same object).
- Leaving copies back every array a kernel could have written (a parameter other than
  ``kaio.In``), also when the block raises, so nothing the kernels computed is lost; then the
  mirrors are freed.
- Inside the scope the host copies are stale: read one with ``scope.fetch(a)`` (device to host
  now) and, after changing one on the host, call ``scope.push(a)`` (host to device). Passing a
  view or slice of a resident array to a kernel is refused (it would be copied on its own and
  disagree with the mirror); pass the array itself.

Scopes nest and belong to the thread that opened them; an inner scope naming an array an outer
one holds already shares its mirror (no copy in; on its exit a copy back if written, the mirror
kept for the outer scope). A launch swaps in the mirrors (:func:`swap`) before its
repeated-call fast path, so a loop inside a scope launches as one on device arrays does: checked
once per signature.
"""
from __future__ import annotations

import threading

import numpy as np

from .errors import ArgumentTypeError, ArgumentValueError


class _Local(threading.local):
    scopes = ()    # this thread's open scopes, innermost last
    table = None   # id(array) -> its entry [mirror, written], over all of them (None: no scope)


_local = _Local()
_count_lock = threading.Lock()
#: scopes open in any thread: a launch looks for this thread's only while some are
active = 0


def _opened(scope, n: int) -> None:
    """Open (n=1) or close (n=-1) ``scope`` in this thread."""
    global active
    scopes = _local.scopes
    _local.scopes = (*scopes, scope) if n > 0 else tuple(s for s in scopes if s is not scope)
    table = {}
    for s in _local.scopes:
        table.update(s._entries)
    _local.table = table or None
    with _count_lock:
        active += n


class Residency:
    """An open residency scope (what ``with kaio.resident(...) as scope`` gives)."""

    def __init__(self, arrays):
        for i, a in enumerate(arrays):
            if not isinstance(a, np.ndarray):
                raise ArgumentTypeError(f"kaio.resident: argument {i} is a {type(a).__name__}, "
                                        "not a numpy array (device arrays are resident already)")
            if not a.flags.c_contiguous or not a.flags.writeable:
                raise ArgumentValueError(f"kaio.resident: argument {i} must be a C-contiguous, "
                                         "writable numpy array (np.ascontiguousarray makes one)")
        self.arrays = list(arrays)
        # id(array) -> [device mirror, written by a kernel]; self.arrays keeps each array alive,
        # so while the scope is open an id found here is that very array (no other live object
        # has its id). An entry an outer scope holds is shared, not owned (not freed here).
        self._entries: dict[int, list] = {}
        self._owned: list = []

    # --- the scope ---------------------------------------------------------------------------
    def __enter__(self) -> "Residency":
        from .device import to_device  # lazy: import time, ~60 ms (the backends)
        outer = _local.table or {}
        try:
            for a in self.arrays:
                if id(a) in self._entries:
                    continue
                e = outer.get(id(a))
                if e is None:
                    e = [to_device(a), False]
                    self._owned.append(e[0])
                self._entries[id(a)] = e
        except BaseException:
            self._free()
            raise
        _opened(self, 1)
        return self

    def __exit__(self, *exc) -> None:
        _opened(self, -1)
        try:
            for a in self.arrays:
                mirror, written = self._entries[id(a)]
                if written:
                    mirror.copy_to_host(a)
        finally:
            self._free()

    def _free(self) -> None:
        for m in self._owned:
            m.free()
        self._owned.clear()
        self._entries.clear()

    # --- host access inside the scope ----------------------------------------------------------
    def fetch(self, a: np.ndarray) -> np.ndarray:
        """Copy ``a``'s device mirror into ``a`` now (for reading it on the host); returns ``a``."""
        self._own(a).copy_to_host(a)
        return a

    def push(self, a: np.ndarray) -> None:
        """Copy ``a`` (changed on the host) to its device mirror now."""
        self._own(a).copy_from_host(a)

    def _own(self, a):
        e = self._entries.get(id(a))
        if e is None:
            raise ArgumentValueError("kaio.resident: this array is not resident in this scope")
        return e[0]


def resident(*arrays: np.ndarray) -> Residency:
    """A scope (``with kaio.resident(a, b): ...``) in which launches keep ``a`` and ``b`` on the
    device: copied there on entry, back on exit (the ones a kernel may have written), never per
    launch. See :mod:`kaio.residency`."""
    return Residency(arrays)


def swap(buffers, args):
    """``args`` with each argument that is an array resident in an open scope of this thread
    replaced by its device mirror, marked written where the parameter is not ``kaio.In``;
    ``args`` itself when none is. ``buffers``: (argument index, written) of the kernel's buffer
    parameters. Anything else (views of resident arrays too) is left for the checked path
    (:func:`substitute`)."""
    table = _local.table
    if table is None:
        return args
    out = None
    try:
        for i, written in buffers:
            e = table.get(id(args[i]))
            if e is not None:
                if out is None:
                    out = list(args)
                out[i] = e[0]
                if written:
                    e[1] = True
    except IndexError:  # too few arguments: the checked path says so
        return args
    return args if out is None else out


def substitute(kernel_name: str, params, values):
    """``values`` with each resident numpy argument replaced by its device mirror (:func:`swap`),
    or ``values`` itself when no scope is open on this thread; a view of a resident array is
    refused (ArgumentValueError)."""
    scopes = _local.scopes
    if not scopes:
        return values
    out = swap([(i, p.spec.intent != "in") for i, p in enumerate(params) if p.kind == "buffer"],
               values)
    for p, v in zip(params, out):
        if p.kind != "buffer" or not isinstance(v, np.ndarray):
            continue
        for scope in scopes:
            for a in scope.arrays:
                if np.shares_memory(a, v):
                    raise ArgumentValueError(
                        f"kernel '{kernel_name}': parameter '{p.name}' is a view of an array "
                        "resident in an open kaio.resident scope; it would be copied on its "
                        "own and disagree with the device copy: pass the array itself")
    return out
