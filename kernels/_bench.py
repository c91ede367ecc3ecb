"""Device-resident launch closures for timing kernels without host<->device copies.

A case's ``bench(inputs)`` uploads what the kernel reads once, allocates its outputs on the
device, and returns a zero-argument function that only launches. These use kaio's manual
interface (``kaio.to_device`` / ``kaio.device_array``), which every backend implements, so the
same closures run on the reference backend (host memory) in CI.
"""
import numpy as np

import kaio


def up(inputs: dict, *keys: str) -> list:
    """Device copies of ``inputs[k]`` for each key."""
    return [kaio.to_device(np.asarray(inputs[k])) for k in keys]


def empty(shape, dtype):
    """Uninitialised device memory."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return kaio.device_array(shape, np.dtype(dtype))


def launcher(kernel, *args, config=None):
    """``lambda: kernel(*args)`` (or ``kernel[config](*args)``) with the arguments fixed."""
    if config is None:
        return lambda: kernel(*args)
    k = kernel[config]
    return lambda: k(*args)
