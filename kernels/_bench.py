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


class Resident:
    """A kernel's data held on the device and one rep's launches, for runners that time reps and
    then check what the reps computed (``kaio rajaperf``).

    - ``resident()`` (or ``resident.launch()``) runs one rep: launches only, no copies;
    - ``arrays``: the device arrays by name (a native twin may launch on the same ones);
    - ``reset()`` copies the initial contents back into the arrays the kernels update in place,
      so every pass starts from the set-up data;
    - ``outputs()`` copies the outputs back and returns them in the form the case's ``run``
      does (``finish(host, inputs)`` combines per-block partials or re-assembles views).
    """

    def __init__(self, launch, arrays: dict, outputs, *, inputs: dict, initial=(), finish=None):
        self.launch = launch
        self.arrays = arrays
        self._outputs = tuple(outputs)
        self._inputs = inputs
        self._initial = {k: np.ascontiguousarray(inputs[k]) for k in initial}
        self._finish = finish

    def __call__(self):
        return self.launch()

    def reset(self) -> None:
        for name, host in self._initial.items():
            self.arrays[name].copy_from_host(host.reshape(self.arrays[name].shape))

    def outputs(self) -> dict:
        host = {k: self.arrays[k].to_host() for k in self._outputs}
        return self._finish(host, self._inputs) if self._finish is not None else host


def resident(inputs: dict, step, *, read=(), update=(), new=None, outputs=(), finish=None,
             shapes=None) -> Resident:
    """Upload ``read`` (read-only) and ``update`` (updated in place; restored by ``reset``) from
    ``inputs``, allocate ``new`` (name -> (shape, dtype)) on the device, and bind
    ``step(arrays) -> launch``. ``outputs`` names the arrays copied back (default: ``update``
    then ``new``); ``shapes`` gives an upload a shape other than its input's (name -> shape)."""
    shapes = shapes or {}
    arrays = {}
    for k in (*read, *update):
        host = np.ascontiguousarray(inputs[k])
        arrays[k] = kaio.to_device(host.reshape(shapes[k]) if k in shapes else host)
    for k, (shape, dtype) in (new or {}).items():
        arrays[k] = empty(shape, dtype)
    outs = outputs or (*update, *(new or {}))
    return Resident(step(arrays), arrays, outs, inputs=inputs, initial=update, finish=finish)


def like(inputs: dict, key: str, *names: str, dtype=np.float64) -> dict:
    """``resident(new=...)`` for outputs ``names`` shaped like ``inputs[key]``."""
    return {n: (np.shape(inputs[key]), dtype) for n in names}
