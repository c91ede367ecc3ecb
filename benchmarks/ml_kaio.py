"""The kaio side of ``kaio bench --ml``: the library's launch closures, what they launched, and the
driver's register and local-memory figures for it. Needs no torch (and no GPU for the closures:
the reference backend runs them too, which the tests use).

kaio is timed through what a user calls: the registry case's device-resident ``bench`` closure
(kernels/ml/cases.py, built from kernels/_bench.py), never a benchmark-only kernel variant. The
only op without such a case in every dtype is ``dequantize_int8`` (the registry has f32): its
other dtypes take the library's choice ``quant.dequantize_launch(dtype, shape)`` through the same helpers.
"""
from __future__ import annotations

import contextlib

import kaio
from kaio import kernels
from kaio.backends.runtime import DeviceArray
from kaio.kernels import _bench
from kaio.kernels._launch import np_dtype
from kaio.kernels.ml import quant

#: the registry keys of each op's inputs (the names its ``make_inputs`` uses)
INPUT_KEYS = {
    "softmax": ("x",),
    "rmsnorm": ("x", "w"),
    "layernorm": ("x", "w", "b"),
    "silu_gate": ("x", "gate"),
    "gelu_tanh": ("x",),
    "gelu_exact": ("x",),
    "dequantize_int8": ("q", "scale"),
}


def case_name(op: str, dtype: str) -> str:
    """The registry name of ``op`` in ``dtype`` ('ml/softmax', 'ml/softmax_f16', ...)."""
    return f"ml/{op}" + ("" if dtype == "f32" else f"_{dtype}")


def kaio_closure(op: str, dtype: str, inputs: dict):
    """(launch, source): the library's device-resident launch closure for host ``inputs``
    (numpy arrays under :data:`INPUT_KEYS`) and a note of where it came from."""
    name = case_name(op, dtype)
    case = kernels.REGISTRY.get(name)
    if case is not None and case.bench is not None:
        return case.bench(inputs), f"{name} bench closure"
    if op == "dequantize_int8":
        q = inputs["q"]
        launch = _bench.launcher(quant.dequantize_launch(dtype, q.shape), *_bench.up(inputs, "q", "scale"),
                                 _bench.empty(q.shape, np_dtype(dtype)))
        return launch, f"quant.dequantize_launch({dtype!r}, shape) via kernels/_bench.py"
    raise LookupError(f"the library has no case {name} with a bench closure")


def tune(launch, fresh: bool = False) -> list[dict]:
    """Call ``launch`` once, before it is spied on, checked or timed: an autotuned op (the row
    ops: kernels/ml/row_tuning.py) makes its choice for the shape on this first call, timing its
    candidates if no cached winner exists, so what is timed afterwards is the chosen kernel.
    Returns one entry per choice made: the tuner, the configuration, where it came from
    ('tuned', 'cache', ...) and, when tuned or cached, each candidate's time or failure.
    ``fresh``: tune again even where a winner is cached (:func:`kaio.autotune.fresh`)."""
    with kaio.autotune.choices() as picked, (kaio.autotune.fresh() if fresh else contextlib.nullcontext()):
        launch()
    kaio.synchronize()
    out = []
    for name, _key, choice in picked:
        entry = {"tuner": name, "config": choice.config.name, "source": choice.source}
        if choice.record is not None:
            entry["tried"] = [{k: t[k] for k in ("config", "ms", "error", "mismatch") if k in t}
                              for t in choice.record.get("tried", [])]
        out.append(entry)
    return out


class LaunchSpy:
    """While active, records every launch through ``backend`` (default: the current one) as
    ``(compiled, grid, block, args)``: which compiled kernels a closure runs, with what launch
    shape, and its arguments (the output buffer is the last device array of the last launch)."""

    def __init__(self, backend=None):
        self.backend = backend if backend is not None else kaio.get_backend()
        self.launches: list[tuple] = []
        self._saved = None

    def __enter__(self) -> "LaunchSpy":
        be = self.backend
        self._saved = be.__dict__.get("_launch_planned")
        original = be._launch_planned

        # every checked launch, planned or repeated, reaches the backend through _launch_planned
        def spy(compiled, plan, args, *rest, **kw):
            self.launches.append((compiled, plan.grid, plan.block, list(args)))
            return original(compiled, plan, args, *rest, **kw)

        be._launch_planned = spy  # an instance attribute shadows the method for this object only
        # new settings: the repeated-call plans kept so far (the CUDA ones launch without
        # _launch_planned) are dropped, and those kept while spying call it (kaio.launch)
        kaio.config.reload()
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is None:
            self.backend.__dict__.pop("_launch_planned", None)
        else:
            self.backend._launch_planned = self._saved
        kaio.config.reload()  # the plans kept while spying are dropped in turn

    def output(self):
        """The last device-array argument of the last launch (the ops' output), or None."""
        if not self.launches:
            return None
        arrays = [a for a in self.launches[-1][3] if isinstance(a, DeviceArray)]
        return arrays[-1] if arrays else None

    def kernels(self) -> list[dict]:
        """One entry per distinct compiled kernel launched: name, launch shape, and the driver's
        register and local-memory figures (None off CUDA)."""
        seen, out = set(), []
        for compiled, grid, block, _ in self.launches:
            if id(compiled) in seen:
                continue
            seen.add(id(compiled))
            entry = {"name": getattr(compiled.kernel, "name", "?"),
                     "grid": list(grid) if grid is not None else None,
                     "block": list(block) if block is not None else None}
            entry.update(function_attributes(getattr(compiled.handle, "function", None)))
            out.append(entry)
        return out


#: cuFuncGetAttribute attributes reported, by the name used in the results
_ATTRIBUTES = {"regs": "CU_FUNC_ATTRIBUTE_NUM_REGS",
               "local_bytes": "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES",
               "static_shared_bytes": "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES"}


def function_attributes(function) -> dict:
    """Registers per thread, local memory per thread in bytes (spills and local arrays) and
    static shared memory of a loaded CUDA function (a ``CUfunction``, or its address as an int),
    from the driver's ``cuFuncGetAttribute``; all None when there is no function or no driver."""
    none = {k: None for k in _ATTRIBUTES}
    if function is None:
        return none
    try:
        from kaio.backends import cuda_driver as drv
        d = drv.driver()
        if isinstance(function, int):
            function = d.CUfunction(function)
        return {k: int(drv.call("cuFuncGetAttribute", getattr(d.CUfunction_attribute, attr), function))
                for k, attr in _ATTRIBUTES.items()}
    except Exception as e:  # reporting only: never fail the benchmark over it
        return dict(none, attributes_error=f"{type(e).__name__}: {e}")
