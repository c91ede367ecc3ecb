"""Several devices in one process: which one launches and new arrays use, per thread.

    n = kaio.device_count()
    with kaio.device(1):                   # this thread's current device inside the block
        x1 = kaio.to_device(a)             # memory, streams, events and graphs of device 1
        saxpy(2.0, x1, y1)                 # launched on device 1
    x0 = kaio.device_array(a.shape, a.dtype).copy_(x1)   # a peer copy, device 1 -> 0

Every device array, stream, event and graph belongs to the device current when it was made
(``x.device``). A launch on device ``d`` refuses an array or a stream of another device before
anything runs, naming the kernel, the parameter and both devices; ``dst.copy_(src)`` is the
explicit way across (direct where the GPUs have peer access, else staged through host memory).
The reference backend pretends to have ``KAIO_REF_DEVICES`` devices, so all of this runs in CI.

``kaio.device`` is the function here: ``kaio/__init__`` imports it after the module
``kaio.device`` (device arrays), whose name it then takes; ``from kaio.device import X`` still
reads the module.
"""
from __future__ import annotations

import contextlib

from .backends import _tls, current_device, get_backend, set_device

__all__ = ["current_device", "device", "device_count", "set_device"]


def device_count() -> int:
    """How many devices the current backend has (``KAIO_REF_DEVICES`` on the reference one)."""
    return get_backend().device_count()


@contextlib.contextmanager
def device(index: int):
    """Make ``index`` this thread's current device for the ``with`` block, then restore the
    previous one (see :func:`set_device`)."""
    previous = _tls.device
    set_device(index)
    try:
        yield index
    finally:
        _tls.device = previous
