"""What the report proves about portability: the warp-width check of every case and the
portable-mode summary.

- **Warp width.** Every case runs on the interpreter at widths 32 and 64. :func:`width_check`
  compares the two results bit for bit: ``independent`` (identical), ``declared`` (they differ
  and the case says its result depends on the width: shuffles, votes, ballots) or ``FLAGGED``
  (they differ and the case does not say so: the class of bug where a literal 32 stands for the
  warp width). A flagged kernel makes the run fail.
- **Portable mode** (``kaio conformance --portable``: every kernel compiled with
  ``KAIO_PORTABLE=1``, only correctly rounded operations and kaio's portable math library).
  :func:`portable_summary` counts the executed GPU cells and the interpreter's wave64 cells and
  says whether each is bit-identical to the interpreter; the exceptions are the cases whose
  result depends on an order the hardware chooses (float atomics, matrix-unit accumulation),
  named with the reason and the bound that holds.
"""
from __future__ import annotations

import contextlib
import os

from kaio import config

from . import rules

WIDTHS = ("reference", "reference-w64")


def width_check(case, results: dict) -> dict:
    """{'status': 'independent'|'declared'|'FLAGGED'|'not-run', 'detail': ...} from the two
    interpreter results of ``case``."""
    if not all(t in results for t in WIDTHS):
        missing = [t for t in WIDTHS if t not in results]
        return {"status": "not-run", "detail": f"no result from {', '.join(missing)}"}
    first = rules.first_difference(results["reference-w64"], results["reference"])
    if first is None:
        return {"status": "independent", "detail": "bit-identical at warp widths 32 and 64"}
    where = f"w64 vs w32 at {first.describe()}"
    if case.width_dependent:
        return {"status": "declared", "detail": f"warp-level results (declared); {where}"}
    return {"status": "FLAGGED", "detail": "the result depends on the warp width, which the "
            f"kernel does not declare (a literal 32 for kaio.warp_size?); {where}"}


def width_flags(d: dict) -> list:
    """(kernel, detail) of every flagged row of a report dict."""
    return [(r["kernel"], r["width"]["detail"]) for r in d["rows"]
            if r.get("width", {}).get("status") == "FLAGGED"]


def width_counts(d: dict) -> dict:
    out: dict = {}
    for r in d["rows"]:
        s = r.get("width", {}).get("status")
        if s:
            out[s] = out.get(s, 0) + 1
    return out


def portable_summary(d: dict) -> dict | None:
    """For a portable-mode report dict: {'line': one sentence, 'exceptions': [(kernel, reason,
    rule)], 'differing': [(kernel, target)]}; None when the run was not in portable mode."""
    if not d["header"].get("portable_mode"):
        return None
    exceptions, differing, identical, total = [], [], 0, 0
    for r in d["rows"]:
        order = r.get("order", "")
        if order:
            exceptions.append((r["kernel"], order, r["rule"]))
        for t, c in r["cells"].items():
            if t == "reference" or c.get("status") not in ("identical", "within-bound", "failing") \
                    or c.get("baseline") in (None, "", "numpy"):
                continue
            if order:
                continue
            total += 1
            if c["status"] == "identical":
                identical += 1
            else:
                differing.append((r["kernel"], t))
    if not total:
        line = "no executed cell besides the interpreter's own to compare"
    elif not differing:
        line = f"every executed cell bit-identical to the interpreter ({total} cells)"
    else:
        line = f"NOT every executed cell bit-identical: {identical} of {total}"

    if exceptions:
        line += (f"; {len(exceptions)} order-dependent case(s) held to their stated bound instead "
                 "(float atomics order, matrix-unit accumulation order)")
    return {"line": line, "exceptions": exceptions, "differing": differing}


@contextlib.contextmanager
def portable_env(on: bool):
    """``KAIO_PORTABLE=1`` for the block when ``on`` (the spawned build workers inherit it; the
    recorded launches carry it too), the previous environment and settings restored after."""
    if not on:
        yield
        return
    old = os.environ.get("KAIO_PORTABLE")
    os.environ["KAIO_PORTABLE"] = "1"
    config.reload()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("KAIO_PORTABLE", None)
        else:
            os.environ["KAIO_PORTABLE"] = old
        config.reload()
