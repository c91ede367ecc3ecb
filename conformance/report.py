"""The conformance report's data: a header, one row per kernel, one cell per target.

Cell statuses:

- ``identical``: executed; every output bit-identical to the baseline (the interpreter at the
  target's warp width; for the interpreter itself, numpy) and within its numpy bound;
- ``within-bound``: executed; not bit-identical, but within the kernel's rule (the bound and the
  observed maximum error are recorded) and within its numpy bound;
- ``compiled``: compiled and validated only, never executed (AMD code object: registers and LDS
  recorded; NVIDIA: ``ptxas -v``'s registers, spills and shared memory within the kernel's limits);
- ``not-available``: compile only; the target lacks a feature the kernel uses, and the compiler
  refused it with a message naming the target (never counted as passing);
- ``failing``: a comparison failed (first differing index and the two values), the kernel
  raised, or the code object did not validate;
- ``not-run``: the target was not executed, with the reason.

The JSON form (:meth:`Report.as_dict`) is what the Markdown and HTML renderers read, so the
three files always say the same thing.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

STATUSES = ("identical", "within-bound", "compiled", "not-available", "failing", "not-run")
SCHEMA = "kaio-conformance/1"


@dataclass
class Cell:
    status: str
    detail: str = ""                  # one line for humans
    rule: str = ""                    # the rule applied ('bitwise', 'ulp:2', 'rel:1e-6')
    baseline: str = ""                # what the target was compared with
    max_error: float | None = None    # in the rule's unit (ulps / relative); None if identical
    numpy: dict = field(default_factory=dict)     # {'ok', 'bound', 'max_abs_error', 'ratio'}
    mismatch: dict = field(default_factory=dict)  # {'against', 'output', 'index', 'got', 'want'}
    build: list = field(default_factory=list)     # compile-only: one dict per kernel built
    seconds: float = 0.0

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown cell status {self.status!r}")


@dataclass
class Row:
    kernel: str
    group: str
    rule: str
    why: str = ""
    description: str = ""
    kernels: list = field(default_factory=list)   # IR kernel names it launched
    cells: dict = field(default_factory=dict)     # target -> Cell
    width: dict = field(default_factory=dict)     # kaio.conformance.portability.width_check
    order: str = ""                               # why the result is order-dependent, if it is

    @property
    def failing(self) -> bool:
        return any(c.status == "failing" for c in self.cells.values())


@dataclass
class Report:
    header: dict
    targets: list                                 # target names, column order
    rows: list = field(default_factory=list)

    def counts(self) -> dict:
        out = {t: {s: 0 for s in STATUSES} for t in self.targets}
        for r in self.rows:
            for t, c in r.cells.items():
                out[t][c.status] += 1
        return out

    @property
    def width_flagged(self) -> list[str]:
        """Kernels whose result depends on the warp width without declaring it."""
        return [r.kernel for r in self.rows if r.width.get("status") == "FLAGGED"]

    @property
    def failing(self) -> list[tuple[str, str]]:
        return [(r.kernel, t) for r in self.rows for t, c in r.cells.items() if c.status == "failing"]

    def as_dict(self) -> dict:
        return {"schema": SCHEMA, "header": self.header, "targets": self.targets,
                "counts": self.counts(), "failing": [list(x) for x in self.failing],
                "rows": [_row_dict(r) for r in self.rows]}

    def to_json(self) -> str:
        return json.dumps(_clean(self.as_dict()), indent=1, default=_jsonable, allow_nan=False)


def _row_dict(r: Row) -> dict:
    d = {k: v for k, v in asdict(r).items() if k != "cells"}
    d["cells"] = {t: asdict(c) for t, c in r.cells.items()}
    return d


def _clean(v):
    """Strict JSON: non-finite floats become strings, numpy scalars Python numbers."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, float):
        return finite(v)
    return _jsonable(v) if type(v).__module__ == "numpy" else v


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    return str(v)


def finite(x):
    """Floats for JSON: inf/nan become strings (JSON has no such numbers)."""
    if x is None:
        return None
    x = float(x)
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return x
