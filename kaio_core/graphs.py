"""CUDA graphs: record a sequence of kaio launches once, replay it with one driver call.

    with kaio.graph() as g:            # launches inside are captured, not run
        for _ in range(10):
            step[grid, block](x, y)    # device arrays only
    for _ in range(1000):
        g.replay()                     # all ten kernels, one cuGraphLaunch
    g.synchronize()

Small kernels are bound by Python's per-launch cost; a replay pays it once per graph. Arguments
are frozen at capture: a replay reads and writes the same device arrays (update their contents,
not the objects). Inside the ``with`` block, launches that do not name a stream go to the
graph's capture stream; numpy arguments are refused there (their copies and the synchronization
they need cannot be captured).
"""
from __future__ import annotations

import threading
import weakref

from .errors import LaunchError


class _Local(threading.local):
    graph = None  # a class default: reading it never raises (this is on every launch's path)


_tls = _Local()


def capturing() -> "Graph | None":
    """The graph being captured in this thread, if any."""
    return _tls.graph


def _destroy(fn: str, handle) -> None:
    try:
        from .backends import cuda_driver
        cuda_driver.call(fn, handle)
    except Exception:
        pass


class Graph:
    """A captured sequence of launches (see module docs). Use :func:`kaio.graph`."""

    def __init__(self, stream=None):
        from .device import Stream
        self.stream = stream if stream is not None else Stream(non_blocking=True)
        self._exec = None
        self.launches = 0

    def __enter__(self) -> "Graph":
        from .backends import cuda_driver as drv
        from .device import _stream_arg
        if capturing() is not None:
            raise LaunchError("kaio.graph() blocks cannot be nested")
        d = drv.driver()
        drv.context()
        # relaxed: a kernel compiled and loaded on its first launch inside the block still works
        drv.call("cuStreamBeginCapture", _stream_arg(self.stream),
                 d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED)
        _tls.graph = self
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        from .backends import cuda_driver as drv
        from .device import _stream_arg
        _tls.graph = None
        r = drv.driver().cuStreamEndCapture(_stream_arg(self.stream))
        if exc_type is not None:  # the body failed: drop the partial graph, keep its error
            if int(r[0]) == 0 and r[1] is not None:
                _destroy("cuGraphDestroy", r[1])
            return
        graph = drv.check("cuStreamEndCapture", r)
        weakref.finalize(self, _destroy, "cuGraphDestroy", graph)
        self._exec = drv.call("cuGraphInstantiate", graph, 0)
        weakref.finalize(self, _destroy, "cuGraphExecDestroy", self._exec)

    def replay(self, stream=None) -> None:
        """Launch the whole graph (asynchronously) on ``stream`` (default: its capture stream)."""
        from .backends import cuda_driver as drv
        from .device import _stream_arg
        if self._exec is None:
            raise LaunchError("this graph has not been captured yet: use it as `with kaio.graph() as g:`")
        drv.context()
        drv.call("cuGraphLaunch", self._exec, _stream_arg(self.stream if stream is None else stream))

    def synchronize(self) -> None:
        """Wait for the replays queued on the capture stream."""
        self.stream.synchronize()


def graph(stream=None) -> Graph:
    """Capture the launches made inside a ``with`` block into a replayable CUDA graph."""
    return Graph(stream)
