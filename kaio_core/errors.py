"""Exception classes. Each carries structured fields besides its message."""
from __future__ import annotations

import functools
import linecache

from .config import settings


class KaioError(Exception):
    """Base class of kaio's own errors."""


def source_excerpt(file: str, line: int, col: int = 0, end_col: int | None = None) -> str:
    """`  12 |     y[i] = x[i + 1]` followed by a caret line under columns [col, end_col)."""
    text = linecache.getline(file, line).rstrip("\n") if file else ""
    if not text:
        return ""
    width = max(1, (end_col if end_col and end_col > col else len(text)) - col)
    gutter = f"{line:>5} | "
    return f"{gutter}{text}\n{' ' * len(gutter)}{' ' * col}{'^' * width}"


class CompileError(KaioError):
    """A kernel cannot be compiled: carries kernel, file, line, col and hint."""

    def __init__(self, message: str, *, kernel: str | None = None, file: str | None = None,
                 line: int | None = None, col: int = 0, end_col: int | None = None,
                 hint: str | None = None):
        self.kernel, self.file, self.line, self.col, self.end_col = kernel, file, line, col, end_col
        self.hint = hint
        self.bare_message = message
        super().__init__(self._format())

    @classmethod
    def at(cls, loc, message: str, *, kernel=None, hint=None) -> "CompileError":
        if loc is None:
            return cls(message, kernel=kernel, hint=hint)
        return cls(message, kernel=kernel, file=loc.file, line=loc.line, col=loc.col,
                   end_col=loc.end_col, hint=hint)

    def _format(self) -> str:
        where = f"{self.file}:{self.line}:{self.col + 1}: " if self.file and self.line else ""
        head = f"{where}in kernel '{self.kernel}': {self.bare_message}" if self.kernel else \
            f"{where}{self.bare_message}"
        parts = [head]
        if self.file and self.line:
            ex = source_excerpt(self.file, self.line, self.col, self.end_col)
            if ex:
                parts.append(ex)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


def public_entry(method):
    """Decorator for the user-facing entry points (``kernel(...)``, ``compile``, ``ir_for``,
    ``emit``): a CompileError leaves them with its traceback starting at the user's call, not
    the dozen frames of frontend and passes beneath it (the message already points at the
    kernel's line). ``KAIO_INTERNAL_FRAMES=1`` keeps the whole traceback."""

    @functools.wraps(method)
    def entry(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except CompileError as e:
            if settings().internal_frames:
                raise
            raise e.with_traceback(None) from None

    return entry


class KaioWarning(UserWarning):
    """Base class of kaio's warnings (filter them with ``warnings.filterwarnings``)."""


class WarpWidthWarning(KaioWarning):
    """A literal 32 (``t // 32``, ``t % 32``, ``t & 31``) where warp-level code means the warp
    width, which is 64 on AMD gfx9: the message points at the line and says to use
    ``kaio.warp_size``."""


class RaceError(KaioError):
    """The race sanitizer saw two threads conflict on one element within a barrier interval."""

    def __init__(self, message: str, *, kernel=None, buffer=None, index=None, threads=None,
                 lines=None, kind=None):
        self.kernel, self.buffer, self.index, self.threads = kernel, buffer, index, threads
        self.lines, self.kind = lines, kind
        super().__init__(message)


class LaunchError(KaioError, ValueError):
    """A launch configuration or argument is invalid (raised before anything runs)."""


class ArgumentTypeError(KaioError, TypeError):
    """A kernel argument has the wrong kind or type (a list for a buffer, ``True`` for an i32
    parameter, an f64 array for an f32 buffer), or arguments are missing or extra. The message
    names the kernel, the parameter, what it expects and what it got. Also a ``TypeError``."""


class ArgumentValueError(KaioError, ValueError):
    """A kernel argument has the right type but a value kaio cannot take (out of the
    parameter's range, a non-contiguous or read-only array, the wrong rank). Also a
    ``ValueError``."""


class BackendUnavailable(KaioError):
    """A backend was requested that cannot run here; the message says why."""


class CudaError(KaioError):
    """A CUDA driver call failed: carries the call, the driver's error name and the kernel."""

    def __init__(self, message: str, *, call=None, code=None, kernel=None):
        self.call, self.code, self.kernel = call, code, kernel
        super().__init__(message)


class HipError(KaioError):
    """A HIP runtime call failed: carries the call, the error name and the kernel."""

    def __init__(self, message: str, *, call=None, code=None, kernel=None):
        self.call, self.code, self.kernel = call, code, kernel
        super().__init__(message)


class KernelRuntimeError(KaioError, RuntimeError):
    """A kernel did something undefined while it ran (found by the reference backend, or by a
    GPU kernel compiled in checked mode)."""

    def __init__(self, message: str, *, kernel=None, line=None, thread=None):
        self.kernel, self.line, self.thread = kernel, line, thread
        super().__init__(message)


class OutOfBoundsError(KernelRuntimeError, IndexError):
    """A load, store or atomic indexed outside its buffer: names kernel, buffer, index, thread,
    source line. Every backend words it the same (:meth:`for_access`)."""

    def __init__(self, message: str, *, kernel=None, buffer=None, index=None, shape=None,
                 thread=None, line=None):
        self.buffer, self.index, self.shape = buffer, index, shape
        super().__init__(message, kernel=kernel, line=line, thread=thread)

    @classmethod
    def for_access(cls, kernel: str, opcode: str, buffer: str, index: tuple, shape: tuple, loc,
                   thread: int, grid: tuple, block: tuple) -> "OutOfBoundsError":
        """The error for one access (``opcode`` load/store/atomic) by the thread of global
        linear id ``thread`` in a (grid, block) launch, at source location ``loc`` (a
        :class:`kaio.ir.Loc` or None)."""
        where = f"{loc.file}:{loc.line}: " if loc is not None else ""
        what = {"store": "store to", "atomic": "atomic on"}.get(opcode, "load from")
        ex = source_excerpt(loc.file, loc.line, loc.col, loc.end_col) if loc is not None else ""
        index, shape = tuple(int(i) for i in index), tuple(int(s) for s in shape)
        return cls(f"{where}in kernel '{kernel}': {what} '{buffer}' at index {index} is out of "
                   f"bounds for shape {shape} ({describe_thread(thread, grid, block)})"
                   + ("\n" + ex if ex else ""),
                   kernel=kernel, buffer=buffer, index=index, shape=shape, thread=int(thread),
                   line=loc.line if loc is not None else None)


def describe_thread(g: int, grid, block) -> str:
    """'block (bx, by, bz) thread (tx, ty, tz) (global thread g)' of the thread whose global
    linear id (x fastest) in a (grid, block) launch is ``g``."""
    b, t = divmod(int(g), block[0] * block[1] * block[2])
    bx, by, bz = b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1])
    tx, ty, tz = t % block[0], t // block[0] % block[1], t // (block[0] * block[1])
    return f"block ({bx}, {by}, {bz}) thread ({tx}, {ty}, {tz}) (global thread {g})"
