"""Run-time errors of the reference backend (structured fields besides the message).

``KernelRuntimeError`` and ``OutOfBoundsError`` are :mod:`kaio.errors`' (a GPU kernel in checked
mode raises the same out-of-bounds error); they are re-exported here."""
from __future__ import annotations

from ...errors import KernelRuntimeError, OutOfBoundsError, RaceError

__all__ = ["KernelRuntimeError", "OutOfBoundsError", "DivergentBarrierError",
           "UninitializedReadError", "OwnershipError"]


class DivergentBarrierError(KernelRuntimeError):
    """A barrier was reached by some but not all threads of a block."""


class UninitializedReadError(KernelRuntimeError):
    """The sanitizer saw a read of an ``Out`` (or shared) element no thread had written yet."""

    def __init__(self, message: str, *, kernel=None, buffer=None, index=None, thread=None,
                 line=None):
        self.buffer, self.index = buffer, index
        super().__init__(message, kernel=kernel, line=line, thread=thread)


class OwnershipError(RaceError):
    """The sanitizer saw a thread write or read back an element of a partitioned Region/Out
    buffer that its partition gives to another thread (or to none): a race waiting to happen,
    and a kernel the static checker should have rejected. ``kind`` is 'ownership';
    ``threads`` is (owner, offender) with owner -1 when no thread owns the element."""
