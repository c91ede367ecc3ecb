"""Device-resident launch closures for timing kernels without host<->device copies.

A case's ``bench(inputs)`` uploads what the kernel reads once, allocates its outputs on the
device, and returns a zero-argument function that only launches. These use kaio's manual
interface (``kaio.to_device`` / ``kaio.device_array``), so they run where device arrays exist;
inside ``with host_memory():`` they use numpy arrays instead, so the same closures can be
checked on the reference backend.
"""
import contextlib

import numpy as np

import kaio

_HOST = [False]


@contextlib.contextmanager
def host_memory():
    """Make :func:`up` and :func:`empty` return numpy arrays (for testing bench closures)."""
    _HOST[0] = True
    try:
        yield
    finally:
        _HOST[0] = False


def up(inputs: dict, *keys: str) -> list:
    """Device copies of ``inputs[k]`` for each key."""
    if _HOST[0]:
        return [np.array(inputs[k], copy=True) for k in keys]
    return [kaio.to_device(np.asarray(inputs[k])) for k in keys]


def empty(shape, dtype):
    """Uninitialised device memory."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if _HOST[0]:
        return np.zeros(shape, np.dtype(dtype))
    return kaio.device_array(shape, np.dtype(dtype))


def launcher(kernel, *args, config=None):
    """``lambda: kernel(*args)`` (or ``kernel[config](*args)``) with the arguments fixed."""
    if config is None:
        return lambda: kernel(*args)
    k = kernel[config]
    return lambda: k(*args)
