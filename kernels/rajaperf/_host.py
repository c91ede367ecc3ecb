"""Host-side helpers that keep ``kaio rajaperf`` at 64x sizes (64M-element arrays) fast.

- :func:`in_chunks`: a function over fixed chunks of ``range(n)`` run by a thread pool (numpy
  releases the GIL inside its loops), results in chunk order, so a caller that combines them in
  order gets the same bits as a sequential loop;
- :func:`keep_freed_memory`: glibc keeps freed memory for reuse instead of returning each large
  array to the kernel, where the next array of a run would page-fault it back in.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

#: threads for chunked host work (the device machines have 16 cores)
WORKERS = max(1, min(16, os.cpu_count() or 1))
_POOL: list = []
_PREFIX = "kaio-rajaperf"


def in_chunks(fn: Callable[[int, int], object], n: int, chunk: int) -> list:
    """``[fn(start, stop) for each chunk of range(n)]``: chunks start at multiples of ``chunk``;
    several chunks run on a thread pool, one runs inline."""
    bounds = [(s, min(s + chunk, n)) for s in range(0, n, chunk)]
    nested = threading.current_thread().name.startswith(_PREFIX)   # a pool thread must not wait on the pool
    if len(bounds) <= 1 or WORKERS == 1 or nested:
        return [fn(s, e) for s, e in bounds]
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(WORKERS, thread_name_prefix=_PREFIX))
    return list(_POOL[0].map(lambda b: fn(*b), bounds))


_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to serve large arrays from its heap and keep freed memory there
    (``mallopt``: no mmap, no trimming). A 64x run allocates and frees tens of GB of
    512 MB arrays; each fresh mmap costs its page faults again (0.1-1.5 s per 512 MB on a loaded
    virtual machine, against 0.02 s to rewrite memory already mapped). The process keeps its
    peak footprint until it exits, which suits a command-line run. Returns whether it applied
    (glibc on Linux only); meant for ``kaio rajaperf``'s main, not for library use."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, -1))   # -1: never trim
