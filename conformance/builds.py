"""The outcome of one compile-and-validate build (AMD code object or NVIDIA ptxas), as the
build workers (:mod:`kaio.conformance.amd`) return it and the report's cells record it."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class BuildResult:
    """The outcome of one (kernel, target) build: ok, or the errors met."""

    kernel: str
    arch: str
    ok: bool
    errors: list[str] = field(default_factory=list)
    lds_bytes: int = 0
    sgpr: int = 0
    vgpr: int = 0
    agpr: int = 0
    spills: int = 0
    scratch_bytes: int = 0
    unavailable: bool = False     # refused: a feature this target lacks (kaio's or ptxas's message)
    registers: int = 0            # NVIDIA (ptxas -v): registers per thread
    spill_stores: int = 0         # NVIDIA: bytes
    spill_loads: int = 0          # NVIDIA: bytes
    barriers: int = 0             # NVIDIA: named barriers used

    def as_dict(self) -> dict:
        return asdict(self)
