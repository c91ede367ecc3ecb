"""Run-time errors of the reference backend (structured fields besides the message)."""
from __future__ import annotations

from ...errors import KaioError, RaceError


class KernelRuntimeError(KaioError, RuntimeError):
    """A kernel did something undefined while the reference backend ran it."""

    def __init__(self, message: str, *, kernel=None, line=None, thread=None):
        self.kernel, self.line, self.thread = kernel, line, thread
        super().__init__(message)


class OutOfBoundsError(KernelRuntimeError, IndexError):
    """A load, store or atomic indexed outside its buffer: names kernel, buffer, index, thread,
    source line."""

    def __init__(self, message: str, *, kernel=None, buffer=None, index=None, shape=None,
                 thread=None, line=None):
        self.buffer, self.index, self.shape = buffer, index, shape
        super().__init__(message, kernel=kernel, line=line, thread=thread)


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
