"""One generated kernel against the static checker and the reference sanitizer.

The checker's verdict comes from compiling the kernel as users do (``specialize_ir``); a
rejected kernel is then compiled again with the checker disabled, so that the sanitizer (race
and ownership checks on) can run it too. Each kernel runs on all of its launches unless one
misbehaves. Classes:

- ``accepted-clean``; ``accepted-racy``: a soundness bug of the checker (must never happen);
- ``rejected-racy`` (a true positive); ``rejected-clean``: clean on every launch tried (a false
  positive, as far as those launches show);
- ``shared-uninit``: a shared element read before any thread wrote it (neither verdict is wrong;
  the generator's kernel reads garbage);
- ``invalid`` (the frontend rejects the generated source) and ``oob`` (an access out of
  bounds): generator bugs;
- ``no-launch``: the checker's launch assumptions refused every launch tried;
- ``internal``: any non-kaio exception, or the checker's own internal error: a kaio bug.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field

import numpy as np

import kaio
from kaio.backends.reference.errors import (
    DivergentBarrierError,
    OutOfBoundsError,
    OwnershipError,
    UninitializedReadError,
)
from kaio.errors import CompileError, KaioError, LaunchError, RaceError
from kaio.regions import checker

from .case import Case, Launch, make_args

#: CompileError message fragments -> rejection kind
KINDS = (("internal error in the race checker", "internal"), ("is not provably owned", "ownership"),
         ("read of Out buffer", "out-read"), ("shared array", "shared"), ("dynamic shared views", "shared"),
         ("would deadlock", "barrier"), ("read-only buffer", "intent"), ("Atomic buffer", "intent"))

RACY = {"race", "ownership", "barrier", "out-uninit"}
#: classes whose kernels are deterministic on the launches they ran (no conflict seen), so they
#: also run on the other backends; a rejected kernel runs there as compiled without the checker
DIFFERENTIAL = ("accepted-clean", "rejected-clean")


@dataclass
class Outcome:
    """What happened to one kernel. ``outputs``: (launch, arrays written) of every clean run,
    kept for the differential; ``diff``: backend -> {launches, identical, close, mismatch, error}."""

    case: Case
    verdict: str = ""            # accepted | rejected | invalid | internal
    kind: str = ""               # rejection kind (KINDS)
    cause: tuple = ()            # the generator's labels at the rejected line
    message: str = ""
    finding: str = ""            # race | ownership | barrier | out-uninit | shared-uninit | oob | error
    detail: str = ""
    bad_launch: Launch | None = None
    ran: int = 0
    refused: int = 0
    cls: str = ""
    outputs: list = field(default_factory=list)
    diff: dict = field(default_factory=dict)
    diff_details: list = field(default_factory=list)
    kernel: object = None        # the kernel object that ran (rejected: compiled unchecked)
    full_message: str = ""
    counter_run: bool = False    # the rejection's own example launch was run too

    def as_dict(self) -> dict:
        d = self.case.as_dict()
        d.update(cls=self.cls, verdict=self.verdict, kind=self.kind, cause=list(self.cause),
                 message=self.message, finding=self.finding, detail=self.detail, ran=self.ran,
                 refused=self.refused, diff=self.diff, diff_details=self.diff_details,
                 counter_run=self.counter_run,
                 launch=self.bad_launch.as_dict() if self.bad_launch else None)
        return d


def rejection_kind(message: str) -> str:
    return next((k for frag, k in KINDS if frag in message), "other")


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def verdict(out: Outcome, fn, first: int):
    """Compile ``fn`` with the checker; returns the kernel object to launch (None if it cannot
    compile at all)."""
    k = kaio.kernel(fn)
    try:
        k.specialize_ir({})
        out.verdict = "accepted"
        return k
    except CompileError as e:
        out.message = first_line(e.bare_message)
        out.full_message = e.bare_message
        out.kind = rejection_kind(e.bare_message)
        if out.kind == "internal":
            out.verdict, out.detail = "internal", str(e)
            return None
        out.verdict = "rejected"
        if e.line is not None and first:
            out.cause = out.case.labels_at(e.line - first + 1)
    except Exception:   # anything else from the frontend or the checker is a kaio bug
        out.verdict, out.detail = "internal", traceback.format_exc()
        return None
    unchecked = kaio.kernel(fn)
    with checker.disabled():
        try:
            unchecked.specialize_ir({})
        except CompileError as e:   # the frontend itself rejects it: a generator bug
            out.verdict, out.detail = "invalid", str(e)
            return None
        except Exception:
            out.verdict, out.detail = "internal", traceback.format_exc()
            return None
    return unchecked


def _finding(case: Case, exc: Exception) -> str:
    if isinstance(exc, OwnershipError):
        return "ownership"
    if isinstance(exc, RaceError):
        return "race"
    if isinstance(exc, DivergentBarrierError):
        return "barrier"
    if isinstance(exc, UninitializedReadError):
        outs = {p.name for p in case.params if p.role == "out"}
        return "out-uninit" if exc.buffer in outs else "shared-uninit"
    if isinstance(exc, OutOfBoundsError):
        return "oob"
    return "error"


def sanitize(out: Outcome, k, seed: int) -> None:
    """Run every launch under the sanitizer (the caller installs the sanitizing backend); for a
    rejected kernel that ran clean, also the launch the checker's message gives as its example."""
    launches = list(out.case.launches)
    if out.verdict == "rejected" and out.case.counterexample is not None:
        extra = out.case.counterexample(out.full_message)
        if extra is not None:
            launches.append(extra)
    for launch in launches:
        if launch.variant == 99:
            if out.finding and out.finding != "shared-uninit":
                return
            out.counter_run = True
        if not _launch_one(out, k, launch, seed):
            return


def _launch_one(out: Outcome, k, launch, seed: int) -> bool:
    """One sanitized launch; False when the kernel misbehaved (no point in more launches)."""
    case = out.case
    args = make_args(case, launch, seed)
    try:
        k[launch.grid, launch.block, launch.shared_bytes](*args)
    except LaunchError:
        out.refused += 1
        return True
    except KaioError as e:
        out.ran += 1
        finding = _finding(case, e)
        if finding == "shared-uninit" and out.finding:
            return True
        out.finding, out.detail, out.bad_launch = finding, str(e), launch
        return finding == "shared-uninit"   # a race may still show on another launch
    except Exception:
        out.ran += 1
        out.finding, out.detail, out.bad_launch = "internal", traceback.format_exc(), launch
        return False
    out.ran += 1
    out.outputs.append((launch, [np.array(a, copy=True) for a, p in zip(args, case.params)
                                 if p.role in ("region", "out", "atomic")]))
    return True


def classify(case: Case, fn, first: int, seed: int) -> Outcome:
    """The verdict, the sanitizer's findings, and the class (see the module docstring)."""
    out = Outcome(case)
    k = verdict(out, fn, first)
    if k is not None:
        sanitize(out, k, seed)
        out.kernel = k
    out.cls = _cls(out)
    if out.cls not in DIFFERENTIAL:
        out.outputs, out.kernel = [], None
    return out


def _cls(out: Outcome) -> str:
    if out.verdict in ("internal", "invalid"):
        return out.verdict
    if out.finding in ("internal", "error"):
        return "internal"
    if out.finding == "oob":
        return "oob"
    if out.finding in RACY:
        return f"{out.verdict}-racy"
    if out.ran == 0:
        return "no-launch"
    if out.finding == "shared-uninit":
        return "shared-uninit"
    return f"{out.verdict}-clean"
