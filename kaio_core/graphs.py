"""Graphs: record a sequence of kaio launches once, replay it with one call.

    with kaio.graph() as g:            # launches inside are captured, not run
        for _ in range(10):
            step[grid, block](x, y)    # device arrays only
    for _ in range(1000):
        g.replay()                     # all ten kernels, one cuGraphLaunch on CUDA
    g.synchronize()

Small kernels are bound by Python's per-launch cost; a replay pays it once per graph. Arguments
are frozen at capture: a replay reads and writes the same device arrays (update their contents,
not the objects); the graph holds those arrays, so they live as long as it does. Inside the
``with`` block, launches that do not name a stream go to the graph's capture stream; numpy
arguments are refused there (their copies and the synchronization they need cannot be
captured). CUDA and HIP capture their streams; the reference backend records the launches and
runs them again on replay, so the same code runs in CI.
"""
from __future__ import annotations

from .backends.runtime import Graph, capturing  # noqa: F401  (public names)


def graph(stream=None) -> Graph:
    """Capture the launches made inside a ``with`` block into a replayable graph (on the
    current backend; ``stream``: the capture stream, default a new non-blocking one)."""
    return Graph(stream)
