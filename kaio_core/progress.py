"""Progress bars for kaio's long commands (showcase --all, conformance, bench, rajaperf).

    from kaio.progress import progress, track

    with progress("conformance", total=len(cases)) as bar:
        for case in cases:
            bar.label(case.name)       # what is running now
            run(case)
            bar.advance()

    for case in track(cases, "showcase", label=lambda c: c.name):
        run(case)

The bar is drawn with rich on stderr, so stdout stays clean for tables, JSON and pipes. It is
drawn only when stderr is a terminal, not under pytest, and not when ``KAIO_PROGRESS=0``;
otherwise the same calls do nothing, so callers need no branches of their own.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")


def enabled(stream=None) -> bool:
    """Whether a bar would be drawn: ``stream`` (default stderr) is a TTY, pytest is not
    running, and ``KAIO_PROGRESS`` is not ``0``/``off``/``false``."""
    if os.environ.get("KAIO_PROGRESS", "").strip().lower() in ("0", "off", "false", "no"):
        return False
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    return _isatty(sys.stderr if stream is None else stream)


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


class Bar:
    """One task's handle: :meth:`advance` counts finished items, :meth:`label` names the running
    one. A disabled bar only counts (``done``), so callers can use it unconditionally."""

    def __init__(self, rich_progress=None, task_id=None, description: str = ""):
        self._p, self._id, self._description = rich_progress, task_id, description
        self.done = 0

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._p is not None:
            self._p.advance(self._id, n)

    def label(self, text: str) -> None:
        if self._p is not None:
            self._p.update(self._id, description=f"{self._description} [dim]{text}[/dim]")


@contextmanager
def progress(description: str, total: int | None, *, force: bool | None = None) -> Iterator[Bar]:
    """A progress bar over ``total`` items (None: unknown) on stderr; see the module docstring.
    ``force`` overrides :func:`enabled` (tests pass False; True draws even when piped)."""
    on = enabled() if force is None else force
    if not on:
        yield Bar()
        return
    import rich.progress as rp  # lazy: only a terminal shows a bar (import time, ~40 ms)
    from rich.console import Console  # lazy: only a terminal shows a bar (import time, ~40 ms)

    columns = [rp.SpinnerColumn(), rp.TextColumn("{task.description}"), rp.BarColumn(),
               rp.MofNCompleteColumn(), rp.TimeElapsedColumn(), rp.TimeRemainingColumn()]
    console = Console(stderr=True, force_terminal=True if force else None)
    # prints to stderr while the bar runs go above it; stdout is routed there too only when it is
    # the same terminal (redirected output must stay in its file)
    with rp.Progress(*columns, console=console, transient=True,
                     redirect_stdout=_isatty(sys.stdout)) as p:
        yield Bar(p, p.add_task(description, total=total), description)


def track(items: Iterable[T], description: str, *, label: Callable[[T], str] | None = None,
          total: int | None = None, force: bool | None = None) -> Iterator[T]:
    """Yield ``items`` while a bar counts them; ``label(item)`` names the running one."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress(description, total, force=force) as bar:
        for item in items:
            if label is not None:
                bar.label(label(item))
            yield item
            bar.advance()
