"""Checked mode at launch: the fault record a checked kernel writes, and the ``IndexError``.

A kernel compiled with ``checked`` (:mod:`kaio.passes.bounds_check`) takes the fault record as
one more buffer argument. The launch path gives it a fresh zeroed one (:func:`fault_record`),
passed like any other ``raw`` numpy argument, so every backend copies it in, synchronizes after
the launch and copies it back; :func:`raise_fault` then turns a recorded fault into the same
:class:`kaio.errors.OutOfBoundsError` (an ``IndexError``) the reference backend raises: kernel,
buffer, index, shape, thread and block ids, and the source line, found through the site table
of the launched kernel (:func:`kaio.passes.bounds_check.sites`, recomputed only when a fault
happened).
"""
from __future__ import annotations

import numpy as np

from .backends.runtime import capturing
from .errors import LaunchError, OutOfBoundsError


def fault_record(kernel_name: str) -> np.ndarray:
    """A zeroed fault record for one checked launch."""
    from .passes import bounds_check as bc  # lazy: import time (kaio.passes, ~30 ms)
    if capturing() is not None:
        # the record is read back after a synchronize, which a graph capture cannot do
        raise LaunchError(f"kernel '{kernel_name}' is compiled in checked mode, which reads its "
                          "fault record after each launch; launch it outside kaio.graph(), or "
                          "compile it with checked=False")
    return np.zeros(bc.RECORD_LEN, np.int64)


def raise_fault(compiled, record: np.ndarray, args, grid, block) -> None:
    """Raise the OutOfBoundsError a checked launch recorded, if any. ``args``: the launch's
    arguments in parameter order (the fault record excluded); the shape in the message is the
    faulting argument's."""
    from .passes import bounds_check as bc  # lazy: import time (kaio.passes, ~30 ms)
    if not record[bc.SITE]:
        return
    kernel = compiled.kernel
    r = [int(v) for v in record]
    site = bc.sites(kernel)[r[bc.SITE] - 1]
    shape = site.static_shape if site.param is None else tuple(args[site.param].shape)
    raise OutOfBoundsError.for_access(kernel.name, site.opcode, site.buffer,
                                      r[bc.INDEX:bc.INDEX + site.ndim], shape, site.loc,
                                      r[bc.THREAD], grid, block)
