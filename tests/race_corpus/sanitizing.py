"""The reference backend as the race corpus runs kernels: current, with its sanitizer on."""
from __future__ import annotations

import contextlib

import kaio


@contextlib.contextmanager
def sanitizing(ownership: bool):
    """Make the reference backend current with the race sanitizer on, and its check that every
    access to a partitioned element is by the owner on or off; restores both afterwards."""
    from kaio import backends as be
    previous = be._current
    kaio.set_backend("reference")
    backend = kaio.get_backend()
    old = backend.sanitize, backend.check_ownership
    backend.sanitize, backend.check_ownership = True, ownership
    try:
        yield backend
    finally:
        backend.sanitize, backend.check_ownership = old
        be._current = previous
