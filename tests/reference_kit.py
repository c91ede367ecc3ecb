"""Helpers for the reference-backend tests: build small IR kernels and run them.

``build(name, params, body)`` calls ``body(b, ix, *args)`` with a Builder ``b``, its IndexMath
``ix`` and the kernel's parameter values; ops get source line 1 unless the body sets
``b.loc = at(n)``. ``run(kernel, grid, block, *args, ...)`` compiles for a fresh
ReferenceBackend (the ``ir`` stage lowers reductions) and launches.
"""
from __future__ import annotations

from kaio import dtypes as dt
from kaio.backends.reference import ReferenceBackend
from kaio.ir import BufType, Builder, Loc, Param
from kaio.ir.indexmath import IndexMath

FILE = "kern.py"


def at(line: int) -> Loc:
    return Loc(FILE, line, 4)


def buf(dtype, intent="in", ndim=1):
    return BufType(dtype, ndim, "global", intent)


def build(name, params, body):
    ps = [(n, t, Param(n, "buffer" if isinstance(t, BufType) else "scalar")) for n, t in params]
    b = Builder.for_kernel(name, ps, loc=at(1))
    body(b, IndexMath(b), *b.kernel.args)
    return b.finish()


def run(kernel, grid, block, *args, warp_size=32, sanitize=True, shared_bytes=0, lower=True):
    """Launch on a fresh ReferenceBackend; ``lower=False`` skips the ir stage (reductions
    interpreted directly)."""
    be = ReferenceBackend(warp_size=warp_size, sanitize=sanitize)
    compiled = be.compile(kernel) if lower else kernel
    be.launch(compiled, grid, block, list(args), shared_bytes)


def guarded(b, cond):
    """``with guarded(b, c):`` -- the then-block of an if without results."""
    class _Ctx:
        def __enter__(self):
            self._cm = b.if_(cond)
            then, _, _ = self._cm.__enter__()
            self._at = b.at(then)
            self._at.__enter__()

        def __exit__(self, *exc):
            self._at.__exit__(*exc)
            self._cm.__exit__(*exc)
            return False
    return _Ctx()


def gid_guard(b, ix, n):
    """(global linear id, with-context guarding id < n)."""
    g = ix.global_linear_id()
    return g, guarded(b, b.cmp("lt", g, n))


def elementwise(name, in_types, out_type, fn):
    """out[i] = fn(b, *loads) for i < len(out); params x0..xk (In) and out (Out)."""
    params = [(f"x{k}", buf(t)) for k, t in enumerate(in_types)] + [("out", buf(out_type, "out"))]

    def body(b, ix, *args):
        *xs, out = args
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            vals = [b.load(x, [g]) for x in xs]
            b.store(out, [g], fn(b, *vals))
    return build(name, params, body)


I32 = dt.i32


# --- switching one target pass on and off (tests compare a pass's output with the loop as written)
def _disabled(pass_module, on: bool) -> frozenset:
    """The kernel option that switches ``pass_module`` (kaio.passes.unroll, full_tiles) off."""
    return frozenset() if on else frozenset({pass_module.__name__.rsplit(".", 1)[-1]})


def lowered_with(pass_module, k, on=True):
    """``k``'s target pipeline (warp 32) with ``pass_module`` on or off."""
    from kaio.passes import target_pipeline
    return target_pipeline(k.specialize_ir(), 32, disabled_passes=_disabled(pass_module, on))


def run_ref_with(pass_module, k, args, grid, block, on=True):
    """Launch ``k`` on a fresh reference backend (sanitizer on) with ``pass_module`` on or off;
    copies of the array arguments after the launch."""
    import numpy as np

    from kaio.options import KernelOptions
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    be = ReferenceBackend(sanitize=True)
    compiled = be.compile(k.specialize_ir(), KernelOptions(disabled_passes=_disabled(pass_module, on)))
    be.launch(compiled, (grid, 1, 1), (block, 1, 1), args)
    return [a for a in args if isinstance(a, np.ndarray)]
