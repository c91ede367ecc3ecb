"""The driver's machine code for kaio's PTX, kept in the compile cache (the warm path's module
load).

Loading PTX (``cuModuleLoadDataEx``) makes the driver JIT-compile it, or, with its own JIT cache
warm, hash the text and read the code back from ``~/.nv/ComputeCache``: a cost in every
process's first launch of a kernel. Here a cold load JIT-links the PTX once
(``cuLinkCreate``/``cuLinkAddData``/``cuLinkComplete``), loads the cubin that gives
(``cuModuleLoadData``) and keeps it in kaio's compile cache on disk; a later process loads the
cubin straight from there, with no PTX for the driver to look at.

Key (:func:`cubin_key`): the PTX text, the device's compute capability (a cubin runs on its own
architecture only) and the driver's version (its JIT compiler), with :data:`FORMAT`. The
cache verifies what it reads (header, key, length, sha256); a cubin the driver refuses anyway
is linked again. Anything the link path cannot do -- a driver or binding without the linker
API, a link error, a cache without a disk layer -- takes the plain PTX load, whose errors carry
the driver's JIT log as before.
"""
from __future__ import annotations

import ctypes
import hashlib

from ..errors import CudaError
from . import cuda_driver as drv

#: bump when the key's contents change
FORMAT = 1
_LOG_BYTES = 16 * 1024

#: counters for tests and benchmarks: cubins loaded from the cache, PTX linked (and stored),
#: loads that took the plain PTX path
stats = {"hits": 0, "links": 0, "ptx_loads": 0}


def cubin_key(ptx: bytes, cc: tuple[int, int], driver_version: int) -> str:
    """The compile-cache key of the cubin the driver makes of ``ptx`` on a device of compute
    capability ``cc`` under driver ``driver_version``."""
    h = hashlib.sha256(f"kaio cubin {FORMAT} sm {cc[0]}.{cc[1]} driver {driver_version}\n".encode())
    h.update(ptx)
    return "c" + h.hexdigest()[1:]


def load_module(ptx: str, kernel_name: str | None, cache, cc, driver_version: int, load_ptx):
    """The module of ``ptx`` in the current context: from its cached cubin, else by linking it
    and storing the cubin, else through ``load_ptx(ptx, kernel_name)`` (the plain PTX load)."""
    if cache is None or not cache.disk:   # only another process would reuse the cubin
        stats["ptx_loads"] += 1
        return load_ptx(ptx, kernel_name)
    text = ptx.encode() + b"\0"
    key = cubin_key(text, cc, driver_version)
    image = cache.get(key)
    if isinstance(image, bytes):
        module = _load_image(image)
        if module is not None:
            stats["hits"] += 1
            return module
    image = _link(text)
    if image is not None:
        module = _load_image(image)
        if module is not None:
            cache.put(key, image)
            stats["links"] += 1
            return module
    stats["ptx_loads"] += 1
    return load_ptx(ptx, kernel_name)


def _load_image(image: bytes):
    """``cuModuleLoadData`` on a cubin; None where the driver refuses it."""
    try:
        return drv.call("cuModuleLoadData", image)
    except (CudaError, AttributeError, TypeError):
        return None


def _link(text: bytes) -> bytes | None:
    """The cubin of PTX ``text`` (NUL-terminated), JIT-linked by the driver for the current
    context's device; None on any failure (the PTX load reports it with the JIT log)."""
    try:
        d = drv.driver()
        J = d.CUjit_option
        logs = [bytearray(_LOG_BYTES), bytearray(_LOG_BYTES)]
        opts = [J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                J.CU_JIT_INFO_LOG_BUFFER, J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES]
        vals = [logs[0], _LOG_BYTES, logs[1], _LOG_BYTES]
        state = drv.call("cuLinkCreate", len(opts), opts, vals)
    except (CudaError, AttributeError, TypeError, ValueError):
        return None
    try:
        drv.call("cuLinkAddData", state, d.CUjitInputType.CU_JIT_INPUT_PTX, text, len(text),
                 b"kaio.ptx", 0, None, None)
        out, size = drv.call("cuLinkComplete", state)
        address = out if isinstance(out, int) else int(getattr(out, "getPtr", lambda: out)())
        if not address or size <= 0:
            return None
        return ctypes.string_at(address, size)   # the state owns it: copied before destroying
    except (CudaError, AttributeError, TypeError, ValueError):
        return None
    finally:
        try:
            d.cuLinkDestroy(state)
        except Exception:  # cleanup only: the image is already copied or the link failed
            pass
