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

Scopes nest (the innermost that names an array serves it) and belong to the thread that opened
them. A launch swaps in the mirrors (:func:`swap`) before its repeated-call fast path, so a loop
inside a scope launches as one on device arrays does: checked once per signature.
"""
from __future__ import annotations

import threading

import numpy as np

from .errors import ArgumentTypeError, ArgumentValueError

_local = threading.local()
_count_lock = threading.Lock()
#: scopes open in any thread: a launch looks for this thread's only while some are
active = 0


def _opened(n: int) -> None:
    global active
    with _count_lock:
        active += n


def _scopes() -> list:
    s = getattr(_local, "scopes", None)
    if s is None:
        s = _local.scopes = []
    return s


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
        # id(array) -> device mirror; self.arrays keeps each array alive, so while the scope is
        # open an id found here is that very array (no other live object has its id)
        self._mirror: dict[int, object] = {}
        self._written: set[int] = set()

    # --- the scope ---------------------------------------------------------------------------
    def __enter__(self) -> "Residency":
        from .device import to_device  # lazy: import time, ~60 ms (the backends)
        try:
            for a in self.arrays:
                if id(a) not in self._mirror:
                    self._mirror[id(a)] = to_device(a)
        except BaseException:
            self._free()
            raise
        _scopes().append(self)
        _opened(1)
        return self

    def __exit__(self, *exc) -> None:
        _scopes().remove(self)
        _opened(-1)
        try:
            for a in self.arrays:
                if id(a) in self._written:
                    self._mirror[id(a)].copy_to_host(a)
        finally:
            self._free()

    def _free(self) -> None:
        for m in self._mirror.values():
            m.free()
        self._mirror.clear()

    # --- host access inside the scope ----------------------------------------------------------
    def fetch(self, a: np.ndarray) -> np.ndarray:
        """Copy ``a``'s device mirror into ``a`` now (for reading it on the host); returns ``a``."""
        self._own(a).copy_to_host(a)
        return a

    def push(self, a: np.ndarray) -> None:
        """Copy ``a`` (changed on the host) to its device mirror now."""
        self._own(a).copy_from_host(a)

    def _own(self, a):
        m = self._mirror.get(id(a))
        if m is None:
            raise ArgumentValueError("kaio.resident: this array is not resident in this scope")
        return m


def resident(*arrays: np.ndarray) -> Residency:
    """A scope (``with kaio.resident(a, b): ...``) in which launches keep ``a`` and ``b`` on the
    device: copied there on entry, back on exit (the ones a kernel may have written), never per
    launch. See :mod:`kaio.residency`."""
    return Residency(arrays)


def swap(buffers, args):
    """``args`` with each argument that is an array resident in an open scope of this thread
    replaced by its device mirror (the innermost scope's), marked written where the parameter is
    not ``kaio.In``; ``args`` itself when none is. ``buffers``: (argument index, written) of the
    kernel's buffer parameters. Anything else (views of resident arrays too) is left for the
    checked path (:func:`substitute`)."""
    scopes = getattr(_local, "scopes", None)
    if not scopes:
        return args
    out = None
    for i, written in buffers:
        v = args[i]
        if not isinstance(v, np.ndarray):
            continue
        for scope in reversed(scopes):
            m = scope._mirror.get(id(v))
            if m is not None:
                if out is None:
                    out = list(args)
                out[i] = m
                if written:
                    scope._written.add(id(v))
                break
    return args if out is None else out


def substitute(kernel_name: str, params, values):
    """``values`` with each resident numpy argument replaced by its device mirror (:func:`swap`),
    or ``values`` itself when no scope is open on this thread; a view of a resident array is
    refused (ArgumentValueError)."""
    scopes = getattr(_local, "scopes", None)
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
