"""Running a fuzz campaign: kernels in batches (one generated module each), classified on the
reference backend and, for accepted clean kernels, run differentially on the other backends;
batches spread over worker processes (spawned, so each worker that uses CUDA owns its
context), results folded into a :class:`kaio.conformance.fuzz.report.Summary`."""
from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field

from kaio.backends.reference import ReferenceBackend

from ..targets import using
from . import differential, module
from .classify import DIFFERENTIAL, classify
from .generate import generate
from .report import Summary

#: classes whose kernels carry their source in the result (the rest can be regenerated)
WITH_SOURCE = {"accepted-racy", "internal", "invalid", "oob", "no-launch", "rejected-clean",
               "shared-uninit"}


@dataclass
class Options:
    count: int = 1000
    seed: int = 1
    backends: tuple = ("reference",)
    jobs: int = 1
    launches: int = 4            # launches per kernel under the sanitizer
    diff_launches: int = 2       # of those, how many run on each other backend
    batch: int = 25              # kernels per generated module
    start: int = 0
    only: tuple = ()             # kernel numbers to run instead of start..start+count
    directory: str = ""          # where the generated modules go (a temp dir by default)
    progress: bool = False
    time_limit: float = 0.0      # seconds; 0: none. Past it, no new batch starts
    extra: dict = field(default_factory=dict)

    def indices(self) -> list:
        return sorted(self.only) if self.only else list(range(self.start, self.start + self.count))


_STATE: dict = {}


def _record(o) -> dict:
    d = o.as_dict()
    if o.cls in WITH_SOURCE or any(s.get("mismatch") or s.get("error") for s in o.diff.values()):
        d["source"] = o.case.source
    if o.cls != "accepted-racy" and o.cls not in ("internal", "oob", "invalid"):
        d["detail"] = d["detail"][:400]
    return d


def run_batch(task) -> list:
    """Generate, classify and (differentially) run kernels ``indices`` of ``opts.seed``; returns
    one record (a dict) per kernel."""
    opts, indices = task
    if opts.backends not in _STATE:   # per process: backends made once, CUDA contexts included
        _STATE[opts.backends] = differential.Backends(opts.backends)
    if "reference" not in _STATE:
        _STATE["reference"] = ReferenceBackend(sanitize=True, check_ownership=True,
                                              check_uninit_shared=True)
    gpu, ref = _STATE[opts.backends], _STATE["reference"]
    cases = [generate(opts.seed, i, opts.launches) for i in indices]
    mod, first = module.load(cases, opts.seed, opts.directory, f"s{opts.seed}_{indices[0]}_{os.getpid()}")
    outcomes = []
    with using(ref, "fuzz:reference"):
        for c in cases:
            outcomes.append(classify(c, getattr(mod, c.name).fn, first[c.name], opts.seed))
    for o in outcomes:
        if o.cls in DIFFERENTIAL and gpu.names:
            differential.run(o, gpu, opts.seed, opts.diff_launches)
    return [_record(o) for o in outcomes]


def run(opts: Options) -> Summary:
    """Run the campaign and return its summary."""
    own_dir = not opts.directory
    if own_dir:
        opts.directory = tempfile.mkdtemp(prefix="kaio-fuzz-")
    idx = opts.indices()
    tasks = [(opts, idx[i:i + opts.batch]) for i in range(0, len(idx), opts.batch)]
    summary = Summary(opts)
    t0 = time.time()
    try:
        if opts.jobs <= 1:
            for t in tasks:
                if _out_of_time(opts, t0, summary):
                    break
                _fold(summary, run_batch(t), len(idx), t0, opts.progress)
        else:
            ctx = multiprocessing.get_context("spawn")
            with ctx.Pool(opts.jobs) as pool:
                for records in pool.imap_unordered(run_batch, tasks):
                    _fold(summary, records, len(idx), t0, opts.progress)
                    if _out_of_time(opts, t0, summary):
                        break   # leaving the block terminates the workers
    except KeyboardInterrupt:    # Ctrl-C, or SIGTERM from a timeout (the CLI turns it into this)
        summary.incomplete = "interrupted"
    finally:
        if own_dir:
            shutil.rmtree(opts.directory, ignore_errors=True)
            opts.directory = ""
    summary.seconds = time.time() - t0
    return summary


def _out_of_time(opts: Options, t0: float, summary: Summary) -> bool:
    if opts.time_limit and time.time() - t0 > opts.time_limit:
        summary.incomplete = f"time limit of {opts.time_limit:.0f} s reached"
        return True
    return False


def _fold(summary: Summary, records: list, total: int, t0: float, progress: bool) -> None:
    before = summary.total // max(1, total // 20)
    for r in records:
        summary.add(r)
    if progress and summary.total // max(1, total // 20) != before:
        print(f"fuzz: {summary.total}/{total} kernels, {time.time() - t0:.0f} s, "
              f"accepted-racy={summary.counts['accepted-racy']} internal={summary.counts['internal']}",
              file=sys.stderr, flush=True)
