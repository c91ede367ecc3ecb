"""One frozen options object for every compilation: everything that changes generated code.

A :class:`CompileOptions` is built by the backend that compiles (its target, warp width, codegen
path and PTX ISA version) from what the kernel asked for (:class:`KernelOptions`: fast_math,
max_registers, pass switches). It is hashable, and :meth:`CompileOptions.key` is part of the
compile-cache key, so two compilations that could differ never share a cache entry.
"""
from __future__ import annotations

from dataclasses import field, replace

from .config import AMD_CODE_OBJECTS, settings
from .records import frozen

#: passes that can be switched off per kernel (name -> what it does); all on by default
SWITCHABLE_PASSES = {
    "full_tiles": "for lo, min(lo + C, n) loops: the full-tile case unrolled",
    "unroll": "small positive-step loops unrolled by 4 (off: unroll_strided is off too)",
    "unroll_strided": "unroll also loops whose step's sign is unknown at compile time "
                      "(grid-stride loops: grid_dim.x * block_dim.x), behind a run-time test",
    "coarsen": "elementwise kernels: k elements per thread on default Regions (kaio.frontend.coarsen)",
    "version_aligned": "PTX: a body with 16-byte vector accesses emitted twice, for aligned buffers "
                       "and for the scalar fallback, behind one branch (off: each access both ways "
                       "under its predicate)",
}

CODEGENS = ("ptx", "llvm", "interp")


def _check_passes(disabled) -> frozenset:
    disabled = frozenset(disabled or ())
    unknown = sorted(disabled - set(SWITCHABLE_PASSES))
    if unknown:
        raise ValueError(f"unknown pass(es) {', '.join(unknown)}; switchable passes are "
                         f"{', '.join(SWITCHABLE_PASSES)}")
    return disabled


#: threads in one block on every backend (the launch checks and the race checker use it too)
MAX_BLOCK_THREADS = 1024


def check_block(block) -> tuple[int, int, int]:
    """A declared block shape (an int or 1 to 3 ints >= 1, at most 1024 threads) as a 3-tuple;
    ValueError otherwise."""
    t = (block,) if isinstance(block, int) and not isinstance(block, bool) else block
    ok = isinstance(t, (tuple, list)) and 1 <= len(t) <= 3 and all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in t)
    if not ok:
        raise ValueError(f"block must be an int or a tuple of 1 to 3 ints >= 1, got {block!r}")
    t = tuple(t) + (1,) * (3 - len(t))
    if t[0] * t[1] * t[2] > MAX_BLOCK_THREADS:
        raise ValueError(f"block {t} has {t[0] * t[1] * t[2]} threads; a block has at most "
                         f"{MAX_BLOCK_THREADS}")
    return t


@frozen
class KernelOptions:
    """What a kernel asks of every compilation (``@kaio.kernel(...)`` arguments).

    ``fast_math``: hardware approximations for math and division. ``max_registers``: cap on
    registers per thread (16..255). ``disabled_passes``: names from :data:`SWITCHABLE_PASSES`.
    ``checked``: every access bounds-checked on the device (None: ``KAIO_CHECKED``, read when a
    compilation applies these options). ``block``: the one block shape the kernel is launched
    with, as a 3-tuple (None: any); the race checker proves the kernel for it and every launch
    is held to it (:func:`check_block`). ``portable``: only correctly rounded operations and
    kaio's portable math library, whatever ``fast_math`` or a call's ``fast=True`` says (None:
    ``KAIO_PORTABLE``, read when a compilation applies these options).
    """

    fast_math: bool = False
    max_registers: int | None = None
    disabled_passes: frozenset = field(default_factory=frozenset)
    checked: bool | None = None
    block: tuple | None = None
    portable: bool | None = None

    def __post_init__(self):
        if self.max_registers is not None and (type(self.max_registers) is not int
                                               or not 16 <= self.max_registers <= 255):
            raise ValueError(f"max_registers must be an int in 16..255, got {self.max_registers!r}")
        object.__setattr__(self, "fast_math", bool(self.fast_math))
        object.__setattr__(self, "disabled_passes", _check_passes(self.disabled_passes))
        if self.checked is not None:
            object.__setattr__(self, "checked", bool(self.checked))
        if self.block is not None:
            object.__setattr__(self, "block", check_block(self.block))
        if self.portable is not None:
            object.__setattr__(self, "portable", bool(self.portable))


def kernel_fields(kopts: KernelOptions) -> dict:
    """The :class:`CompileOptions` fields a kernel's own options set (a kernel that does not
    say whether it is checked or portable gets ``KAIO_CHECKED`` / ``KAIO_PORTABLE``)."""
    st = settings()
    return {"fast_math": kopts.fast_math, "max_registers": kopts.max_registers,
            "disabled_passes": kopts.disabled_passes,
            "checked": st.checked if kopts.checked is None else kopts.checked,
            "portable": st.portable if kopts.portable is None else kopts.portable}


@frozen
class CompileOptions:
    """Everything that changes the code of one compilation.

    ``target``: a target name of :mod:`kaio.backends.targets` ('sm_90', 'gfx942',
    'nvptx64-sm_90', 'reference-w32', ...). ``warp_size``: lanes per warp the code is built for.
    ``codegen``: 'ptx' (kaio's PTX emitter), 'llvm' (the LLVM path) or 'interp' (the reference
    interpreter). ``ptx_version``: the PTX ISA version to write (None: the emitter's default for
    the arch). ``opt_level``: LLVM's optimisation level. ``checked``: every access
    bounds-checked on the device (kaio.passes.bounds_check; the kernel takes the fault record
    as one more parameter). ``portable``: portable mode (``fast_math`` is then always False and
    the target pipeline clears every op's ``fast`` flag, so math is kaio.mathlib's and division
    IEEE's); default ``KAIO_PORTABLE``.
    """

    target: str
    warp_size: int
    codegen: str
    fast_math: bool = False
    max_registers: int | None = None
    disabled_passes: frozenset = field(default_factory=frozenset)
    ptx_version: str | None = None
    opt_level: int = 2
    checked: bool = False
    code_object_version: int = field(default_factory=lambda: settings().amd_code_object)
    portable: bool = field(default_factory=lambda: settings().portable)

    def __post_init__(self):
        if self.portable:
            object.__setattr__(self, "fast_math", False)   # portable mode overrides fast math
        if self.codegen not in CODEGENS:
            raise ValueError(f"codegen must be one of {', '.join(CODEGENS)}, got {self.codegen!r}")
        if self.code_object_version not in AMD_CODE_OBJECTS:
            raise ValueError(f"code_object_version must be one of "
                             f"{', '.join(map(str, AMD_CODE_OBJECTS))}, got {self.code_object_version!r}")
        object.__setattr__(self, "disabled_passes", _check_passes(self.disabled_passes))

    def with_kernel(self, kopts: KernelOptions | None) -> "CompileOptions":
        """These target options with a kernel's own options applied (a kernel that does not
        say whether it is checked gets ``KAIO_CHECKED``)."""
        if kopts is None:
            return self
        return replace(self, **kernel_fields(kopts))

    def pass_enabled(self, name: str) -> bool:
        return name not in self.disabled_passes

    def key(self) -> dict:
        """A JSON-able dict of every field (part of the compile-cache key)."""
        return {"target": self.target, "warp_size": self.warp_size, "codegen": self.codegen,
                "fast_math": self.fast_math, "max_registers": self.max_registers,
                "disabled_passes": sorted(self.disabled_passes), "ptx_version": self.ptx_version,
                "opt_level": self.opt_level, "checked": self.checked,
                "code_object_version": self.code_object_version, "portable": self.portable}
