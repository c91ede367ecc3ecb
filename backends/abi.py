"""The launch ABI shared by the PTX and LLVM/AMDGPU backends: how IR parameters become the
flat list of kernel arguments a driver passes.

For each IR parameter, in order:

- a scalar becomes one argument of its dtype (f16/bf16 are passed as their 16-bit pattern,
  bool as a u8 holding 0 or 1);
- a buffer becomes a pointer (u64 device address) followed by one i32 extent per dimension.
  Buffers are C-contiguous, so strides derive from the extents.

Shared and local arrays are not parameters and never appear here.
"""
from __future__ import annotations

import re
from dataclasses import field

from ..dtypes import DType
from ..ir.types import BufType
from ..records import frozen, record


@frozen
class AbiParam:
    """One flat kernel argument.

    ``kind``: 'scalar' | 'pointer' | 'extent'. ``dtype``: the dtype name of the value passed
    ('u64' for pointers, 'i32' for extents, 'u8' for bool scalars, 'f16'/'bf16' as is).
    ``ir_param_index``: which IR parameter it comes from. ``dim``: the axis of an extent
    (None otherwise). ``name``: a C identifier, unique within the kernel.
    """

    name: str
    kind: str
    dtype: str
    size: int
    align: int
    ir_param_index: int
    dim: int | None = None


@record
class KernelABI:
    """The entry symbol name and the flat argument list of one kernel."""

    entry: str
    params: list[AbiParam] = field(default_factory=list)

    def for_param(self, ir_index: int) -> list[AbiParam]:
        """The flat arguments of IR parameter ``ir_index`` (pointer first, then extents)."""
        return [p for p in self.params if p.ir_param_index == ir_index]


_IDENT = re.compile(r"[^A-Za-z0-9_]")


def _ident(name: str) -> str:
    s = _IDENT.sub("_", name) or "p"
    return s if not s[0].isdigit() else "_" + s


def kernel_abi(kernel) -> KernelABI:
    """The ABI of an IR kernel (a :class:`kaio.ir.Kernel`)."""
    params: list[AbiParam] = []
    taken = {_ident(m.name) for m in kernel.params}
    for idx, (meta, value) in enumerate(zip(kernel.params, kernel.args)):
        base = _ident(meta.name)
        if isinstance(value.type, BufType) and any(f"{base}_{s}" in taken for s in ("ptr", "n0", "n1", "n2")):
            base = f"{base}_{idx}"   # keep derived names clear of other parameters' names
        t = value.type
        if isinstance(t, BufType):
            params.append(AbiParam(f"{base}_ptr", "pointer", "u64", 8, 8, idx))
            for d in range(t.ndim):
                params.append(AbiParam(f"{base}_n{d}", "extent", "i32", 4, 4, idx, d))
        elif isinstance(t, DType):
            name = "u8" if t.is_bool else t.name
            size = 1 if t.is_bool else t.itemsize
            params.append(AbiParam(base, "scalar", name, size, size, idx))
        else:
            raise TypeError(f"kernel '{kernel.name}': parameter '{meta.name}' has type {t!r}; "
                            "expected a scalar dtype or a buffer")
    return KernelABI(entry_name(kernel.name), params)


def entry_name(kernel_name: str) -> str:
    """The entry symbol of the kernel named ``kernel_name`` (``KernelABI.entry``)."""
    return _ident(kernel_name)


# --- PTX ISA versions -----------------------------------------------------------------------
#: minimum PTX ISA version (major, minor) that knows each target architecture
_ARCH_MIN_PTX = {"sm_80": (7, 0), "sm_86": (7, 1), "sm_87": (7, 4), "sm_89": (7, 8),
                 "sm_90": (7, 8), "sm_90a": (8, 0)}
#: newest PTX ISA each CUDA driver version accepts (driver API version major.minor)
_DRIVER_MAX_PTX = [((11, 0), (7, 0)), ((11, 1), (7, 1)), ((11, 2), (7, 2)), ((11, 3), (7, 3)),
                   ((11, 4), (7, 4)), ((11, 5), (7, 5)), ((11, 6), (7, 6)), ((11, 7), (7, 7)),
                   ((11, 8), (7, 8)), ((12, 0), (8, 0)), ((12, 1), (8, 1)), ((12, 2), (8, 2)),
                   ((12, 3), (8, 3)), ((12, 4), (8, 4)), ((12, 5), (8, 5)), ((12, 6), (8, 5)),
                   ((12, 7), (8, 6)), ((12, 8), (8, 7)), ((12, 9), (8, 8)), ((13, 0), (9, 0))]
#: what kaio's PTX needs at least on any arch (bf16 fma/min/max/cvt, tanh.approx: ISA 7.0);
#: bf16 add/mul, cvt.f32.bf16 and atom.add.bf16 (ISA 7.8) are only emitted for sm_90
FEATURE_MIN_PTX = (7, 0)

SUPPORTED_ARCHS = tuple(_ARCH_MIN_PTX)


def _parse_driver(v) -> tuple[int, int]:
    """Accept 12040 (cuDriverGetVersion), '12.4', (12, 4) or 12.4."""
    if isinstance(v, tuple):
        return int(v[0]), int(v[1])
    if isinstance(v, int) and v >= 1000:
        return v // 1000, (v % 1000) // 10
    major, _, minor = str(v).partition(".")
    return int(major), int(minor or 0)


def ptx_version_for(arch: str, driver_version=None) -> str:
    """The ``.version`` to write for ``arch``: the arch's minimum raised to what kaio's PTX
    uses, capped by what the driver accepts. ``driver_version`` is cuDriverGetVersion's
    integer (12040), a '12.4' string or a (12, 4) tuple; None means no cap. Raises ValueError
    for an unknown arch or a driver too old for the arch."""
    if arch not in _ARCH_MIN_PTX:
        raise ValueError(f"unsupported NVIDIA arch {arch!r}; supported: {', '.join(SUPPORTED_ARCHS)}")
    want = max(_ARCH_MIN_PTX[arch], FEATURE_MIN_PTX)
    if driver_version is not None:
        drv = _parse_driver(driver_version)
        cap = None
        for d, p in _DRIVER_MAX_PTX:
            if drv >= d:
                cap = p
        if cap is None or cap < _ARCH_MIN_PTX[arch]:
            raise ValueError(f"CUDA driver {drv[0]}.{drv[1]} is too old for {arch} "
                             f"(needs PTX ISA {'.'.join(map(str, _ARCH_MIN_PTX[arch]))})")
        if cap < want:
            raise ValueError(f"CUDA driver {drv[0]}.{drv[1]} accepts PTX ISA up to "
                             f"{cap[0]}.{cap[1]} but kaio's PTX needs {want[0]}.{want[1]} "
                             "for this arch")
        want = min(want, cap)
    return f"{want[0]}.{want[1]}"
