"""The CUDA backend's planned launch: the launch of one argument signature as one Python
function, compiled from source (issue 15: a checked call within 1.2x of a raw cuLaunchKernel).

A plan (:class:`kaio.backends.launch_checks.LaunchPlan`) fixes every pointer and extent of its
launches, so the parameter buffer is packed once and a launch writes only the scalars, each
through a memoryview of its slot. The driver reads the buffer during ``cuLaunchKernel``, with
the GIL released, so each thread has a buffer of its own (no lock on the hot path).

:class:`PlannedLaunch` holds two kinds of function, each one frame with no loops, the plan's
constants being its globals and literals:

- ``run(args, shared_bytes, stream) -> bool``: ``Backend.launch``'s, for arguments checked
  already (compiled at the plan's third launch: its first two take the backend's full path,
  the second making the plan's :class:`PlannedLaunch`);
- :meth:`PlannedLaunch.guarded` ``(args, stream) -> bool``: a repeated call's (kaio.launch,
  which makes it at the plan's second launch: ``_second_launch``):
  the current backend and settings, the plan's guard (:meth:`LaunchPlan.guard_source`) over
  the unpacked arguments, then the launch, with the configuration's shared memory and default
  stream as literals (the default stream passed as None: cuda.bindings then builds no CUstream).

Both return False, launching nothing, where the arguments do not match or the full path must
run: above 48 KiB of dynamic shared memory (the function must opt in first); in a graph capture
(which counts its launches) the guarded one runs the full path itself.
"""
from __future__ import annotations

import functools
import struct
import threading

from .. import backends, config
from . import cuda_driver as drv
from .runtime import capture_state, captures

#: memoryview formats of the flat scalar codes written through a view (f16's "e" has none: it
#: is packed with struct)
_VIEW_CODES = frozenset("bBhHiIqQfd")
_GUARDED_KEPT = 16  # guarded functions kept per plan (shared bytes, stream or not, backend, settings)


def _success():
    """The driver's CUDA_SUCCESS as it returns it (an identity test is cheaper than its truth)."""
    return getattr(getattr(drv.driver(), "CUresult", None), "CUDA_SUCCESS", 0)


class PlannedLaunch:
    """The launch functions of one signature of the loaded kernel ``lk`` on context ``ctx``:
    ``values`` are its flat parameters in ABI order (scalars as placeholders), ``scalars``
    (flat index, argument index) pairs, ``nargs`` the kernel's argument count and ``limit`` the
    dynamic shared bytes a launch may ask for without opting in."""

    def __init__(self, lk, ctx, rt, grid, block, values: list, scalars: list, nargs: int, limit: int):
        packer = lk.packer
        convert = dict(packer.convert)
        views = [(i, f) for f, i in scalars if packer.codes[f] in _VIEW_CODES]

        def per_thread() -> tuple:
            """(kernelParams address, a view per view slot, the buffers they keep alive), with
            ``ctx`` made current in this thread."""
            ctx.make_current()
            buffer, pointers, address = packer.new_buffer()
            packer.struct.pack_into(buffer, 0, *values)
            raw = memoryview(buffer).cast("B")
            slots = [raw[packer.offsets[f]:packer.offsets[f] + struct.calcsize(packer.codes[f])]
                     .cast(packer.codes[f]) for _, f in views]
            return (address, *slots, buffer, pointers)

        self.env = {"LIMIT": limit - lk.own_shared, "capture": capture_state, "CAPTURES": captures,
                    "stream_handle": rt.stream_handle, "tls": drv.current_context, "CTX": ctx,
                    "CONTEXTS": drv.contexts_made, "OK": _success(),
                    "local": threading.local(), "per_thread": per_thread,
                    "cu_launch": lk._cuLaunchKernel, "FUNCTION": lk.function, "OWN": lk.own_shared,
                    "NAME": lk.name, "drv": drv, "backends": backends, "config": config}
        self.writes = []
        for k, (i, f) in enumerate(views, 1):
            self.env[f"CONV{f}"] = convert.get(f)
            value = f"a{i}" if f not in convert else f"CONV{f}(a{i})"
            self.writes.append(f"    mine[{k}][0] = {value}")
        for f, i in scalars:
            if packer.codes[f] not in _VIEW_CODES:  # f16: struct's "e"
                self.env[f"PACK{f}"] = struct.Struct("=" + packer.codes[f]).pack_into
                self.env[f"OFF{f}"] = packer.offsets[f]
                self.writes.append(f"    PACK{f}(mine[-2], OFF{f}, a{i})")
        self.dims = ", ".join(str(d) for d in (*grid, *block))
        self.unpack = "".join(f"a{i}, " for i in range(nargs))
        self._guarded: dict = {}

    @functools.cached_property
    def run(self):
        """``Backend.launch``'s function, compiled on first use (after that an attribute like
        any other): the first two launches of a plan take the backend's full path, and a kernel
        called as ``k(...)`` launches through :meth:`guarded` from its second call on, so it
        never compiles this one (a compile() is a quarter millisecond of a first launch)."""
        return self._compile(self.env, [
            "def run(args, shared_bytes, stream):",
            "    if shared_bytes > LIMIT or CAPTURES[0] and capture.graph is not None:",
            "        return False",
            *([f"    {self.unpack}= args"] if self.writes else []),
            "    hstream = None if stream is None else stream_handle(stream)",
            *self._launch("shared_bytes + OWN", "hstream")])

    def guarded(self, plan, backend, settings, shared_bytes: int, stream_given: bool, full):
        """``run(args, stream) -> bool``: launch ``args`` if ``backend`` is the current backend,
        ``settings`` the current settings and ``args`` match ``plan`` (else False), with
        ``shared_bytes`` and a stream (``stream_given``; else the default stream). In a graph
        capture it returns ``full(args, stream)``. Made once per plan and launch configuration
        (None where ``shared_bytes`` needs the function to opt in first)."""
        if shared_bytes > self.env["LIMIT"]:
            return None
        key = (shared_bytes, stream_given, id(backend), id(settings))
        hit = self._guarded.get(key)
        if hit is not None and hit[0] is backend and hit[1] is settings:
            return hit[2]
        env = dict(self.env, BE=backend, ST=settings, FULL=full)
        guard = plan.guard_source(env)
        count = (["    try:", f"        {self.unpack}= args",
                  "    except ValueError:  # another argument count", "        return False"]
                 if self.unpack else ["    if args:", "        return False"])
        run = self._compile(env, [
            "def run(args, stream):",
            # get_backend(None) and settings() inline (backends.CURRENT_SOURCE: None where none
            # is chosen yet, and then the call takes the full path)
            f"    if config._settings is not ST or {backends.CURRENT_SOURCE} is not BE:",
            "        return False",
            *count,
            *guard,
            "    if CAPTURES[0] and capture.graph is not None:",
            "        return FULL(args, stream)",
            *(["    hstream = stream_handle(stream)"] if stream_given else []),
            *self._launch(str(shared_bytes + self.env["OWN"]), "hstream" if stream_given else "None")])
        if len(self._guarded) < _GUARDED_KEPT:
            self._guarded[key] = (backend, settings, run)
        return run

    def _launch(self, shared: str, stream: str) -> list[str]:
        """The lines that launch: this thread's context and buffer, the scalars, the driver call."""
        return [
            "    try:",
            "        mine = local.mine",
            "    except AttributeError:  # this thread's first launch of the signature",
            "        mine = local.mine = per_thread()",
            # the thread made CTX current above, and only another context can displace it
            "    if CONTEXTS[0] != 1 and tls.current is not CTX:",
            "        CTX.make_current()",
            *self.writes,
            f"    r = cu_launch(FUNCTION, {self.dims}, {shared}, {stream}, mine[0], 0)",
            "    if drv.last_launched is not NAME:",
            "        drv.last_launched = NAME",
            "    if r[0] is not OK and r[0]:  # CUresult is an int enum: nonzero is an error",
            '        drv.check("cuLaunchKernel", r, NAME)',
            "    return True"]

    @staticmethod
    def _compile(env: dict, lines: list[str]):
        """``lines`` (one ``def run``) as a function whose globals are ``env``."""
        code = compile("\n".join(lines) + "\n", "<kaio planned launch>", "exec")
        scope = dict(env)
        exec(code, scope)
        return scope["run"]
