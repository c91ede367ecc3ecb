"""Builds in worker processes: AMD and NVIDIA compile-and-validate, and the nvptx64 pre-flight.

Compile-only AMD targets (gfx90a, gfx942): each job runs the target's stages
(:mod:`kaio.backends.targets`) up to 'report': the code object checked by
:func:`kaio.backends.codeobject.validate_code_object`. Compile-only NVIDIA columns (sm_80,
sm_86, sm_89 and their -llvm twins): PTX assembled by ``ptxas -v`` and checked
(:mod:`kaio.conformance.nvidia`). For ``cuda-llvm`` the suite first builds the kernel's PTX here
(target 'nvptx64-sm_80' / 'nvptx64-sm_90') before loading it in-process.

Why processes: an LLVM backend error such as "no libcall available for frem" is fatal -- LLVM
prints it and exits the whole process. So the builds run in ``spawn``ed workers (safe after a CUDA
context exists in the parent), and each job in a worker runs in a ``fork``ed child of that worker,
so a fatal error costs only that job: it is reported with LLVM's message on its cell and every
other build goes on. The IR crosses the process boundary as text (:func:`kaio.ir.parse_kernel`).
One pool serves the whole run (``--jobs`` workers, default the CPU count); each worker imports
the LLVM path and builds a warm-up kernel once, so the forked children start warm, and the
runner queues every case's builds as soon as the case's kernels are known, overlapping them
with the executed targets.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import pickle
import tempfile

import kaio
from kaio import f32
from kaio.backends import llvm_compile
from kaio.backends.targets import get_target
from kaio.ir import parse_kernel, print_kernel

from . import nvidia
from .builds import BuildResult


def build(ir_text: str, target: str, kernel_options=None) -> BuildResult:
    """Build (and for AMD validate) one kernel through the target's stages, with the kernel's
    own options (``kaio.options.KernelOptions``); Python-level errors become a failed result."""
    name = "?"
    try:
        k = parse_kernel(ir_text)   # the IR crossed a process boundary as text
        name = k.name
        if target in nvidia.COLUMNS:       # an NVIDIA compile column: PTX, then ptxas -v
            return nvidia.build(k, target, kernel_options)
        t = get_target(target)
        if t.family == "nvptx":
            t.run(k, t.options(kernel_options), until="ptx")
            return BuildResult(name, target, True)
        rep = t.run(k, t.options(kernel_options), until="report")["report"]
    except Exception as e:
        msg = f"{type(e).__name__}: {e}"
        return BuildResult(name, target, False, [msg], unavailable=nvidia.unavailable(msg))
    return BuildResult(name, target, rep.ok, list(rep.errors), rep.lds_bytes, rep.sgpr, rep.vgpr,
                       rep.agpr, rep.sgpr_spills + rep.vgpr_spills, rep.private_bytes)


def _kernel_name(ir_text: str) -> str:
    try:
        return parse_kernel(ir_text).name
    except Exception:
        return "?"


def build_isolated(ir_text: str, target: str, kernel_options=None) -> BuildResult:
    """:func:`build` in a forked child, so a fatal LLVM error ends only the child (runs inside a
    worker process, which holds no CUDA context and no threads of its own)."""
    if not hasattr(os, "fork"):
        return build(ir_text, target, kernel_options)
    with tempfile.TemporaryFile() as err:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: build, send the pickled result, exit without cleanup
            os.close(r)
            os.dup2(err.fileno(), 2)
            try:
                data = pickle.dumps(build(ir_text, target, kernel_options))
            except BaseException as e:  # noqa: BLE001 - everything is reported
                data = pickle.dumps(BuildResult("?", target, False, [repr(e)]))
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            os._exit(0)
        os.close(w)
        chunks = []
        while True:
            b = os.read(r, 1 << 16)
            if not b:
                break
            chunks.append(b)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        if chunks:
            return pickle.loads(b"".join(chunks))
        err.seek(0)
        tail = err.read()[-600:].decode(errors="replace").strip()
        why = f"exit status {os.waitstatus_to_exitcode(status)}" if hasattr(os, "waitstatus_to_exitcode") \
            else f"status {status}"
        return BuildResult(_kernel_name(ir_text), target, False,
                           [f"LLVM aborted the build ({why}): {tail or 'no message'}"])


def _warm_worker() -> None:
    """Pool initializer: initialise LLVM and create the target machines once, so the child forked
    for each job starts warm (a cold child re-initialises LLVM: about a second per job, five times
    the build itself). kaio's compiler itself is imported with this module."""
    try:
        llvm_compile._llvm()
        for t in ("gfx90a", "gfx942", "nvptx64-sm_80", "nvptx64-sm_86", "nvptx64-sm_89",
                  "nvptx64-sm_90"):
            try:
                llvm_compile.target_machine(t)
            except Exception:
                pass
        try:
            llvm_compile.find_linker()
        except Exception:
            pass
        # one real build per kind of target loads what the builds load on first use (the
        # frontend, the IR math library's constants, the code generators)
        ir = _warmup_ir()
        build(ir, "gfx942")
        build(ir, "nvptx64-sm_90")
    except Exception:   # a cold worker still builds, only slower
        pass


def _warmup_ir() -> str:
    @kaio.kernel
    def conformance_warmup(x: kaio.In[f32], y: kaio.Out[f32]):
        for i in y.owned():
            y[i] = kaio.math.exp(x[i]) + kaio.math.sin(x[i]) + x[i] % 3.0

    return print_kernel(conformance_warmup.specialize_ir({}))


class BuildPool:
    """One pool of spawned, pre-warmed worker processes for every build of a run; started on
    first use and closed by the runner.

    ``submit(jobs)`` queues builds and returns at once (the AMD builds run while the GPU targets
    execute); ``result(job)`` waits for one; ``run(jobs)`` does both. A job is built once however
    often it is submitted. Each job runs in a forked child of its worker (see
    :func:`build_isolated`), so a fatal LLVM error fails that job only; should a worker die all
    the same, the pool is recreated and the jobs it took down are retried once, each alone."""

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool = None
        self._futures: dict = {}
        self._done: dict = {}

    def _executor(self):
        if self._pool is None:
            ctx = multiprocessing.get_context("spawn")
            self._pool = cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx,
                                                initializer=_warm_worker)
        return self._pool

    def submit(self, jobs) -> None:
        for j in dict.fromkeys(jobs):
            if j not in self._futures and j not in self._done:
                self._futures[j] = self._executor().submit(build_isolated, *j)

    def result(self, job) -> BuildResult:
        if job in self._done:
            return self._done[job]
        if job not in self._futures:
            self.submit([job])
        try:
            r = self._futures[job].result()
        except Exception:   # the worker died (BrokenProcessPool): retry this job alone, once
            self._futures.pop(job, None)
            self._restart()
            alone = cf.ProcessPoolExecutor(max_workers=1,
                                           mp_context=multiprocessing.get_context("spawn"))
            try:
                r = alone.submit(build_isolated, *job).result()
            except Exception as e:
                r = BuildResult(_kernel_name(job[0]), job[1], False,
                                [f"build worker failed: {type(e).__name__}: {e}"])
            finally:
                alone.shutdown(wait=False, cancel_futures=True)
        self._futures.pop(job, None)
        self._done[job] = r
        return r

    def poll(self, job) -> BuildResult | None:
        """The job's result if its build has finished, else None (never waits)."""
        if job in self._done:
            return self._done[job]
        f = self._futures.get(job)
        return self.result(job) if f is not None and f.done() else None

    def _restart(self) -> None:
        """Replace a broken pool; resubmit the jobs that were queued on it and not finished."""
        lost = [j for j, f in self._futures.items() if not f.done() or f.exception() is not None]
        self.close()
        for j in lost:
            self._futures.pop(j, None)
        self.submit(lost)

    def run(self, jobs) -> dict:
        jobs = list(dict.fromkeys(jobs))
        self.submit(jobs)
        return {j: self.result(j) for j in jobs}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
