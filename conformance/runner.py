"""Run the conformance cases on the targets and build the report.

For each case: build the inputs once; run on every executed target (plus, unreported, the
interpreter baselines the selected GPU targets need); derive the rule from the IR the case
launched; compare every executed target with the interpreter at its warp width (under the
rule) and with numpy (under the kernel's numpy bound). The launched kernels' LLVM builds (the
compile-only targets, the cuda-llvm pre-flight) are queued on one worker pool as soon as
the first executed target has run the case, and run while the other targets execute.
"""
from __future__ import annotations

import contextlib
import datetime
import platform
import sys
import time
from dataclasses import dataclass, field

import numpy as np

import kaio
from kaio import kernels
from kaio.ir import print_kernel

from . import amd, rules
from .cases import ConformanceCase, all_cases, select
from .derive import derive_rule, features, order_reason, portable_math_active
from .portability import portable_env, width_check
from .report import Cell, Report, Row, finite
from .targets import (
    BASELINE,
    COMPILE_ONLY,
    EXECUTED,
    VENDOR,
    WARP,
    Recorder,
    make_backend,
    probe,
    using,
)


@dataclass
class Options:
    targets: list[str]
    kernels: list[str] | None = None
    size: str = "small"
    workers: int | None = None
    cases: list | None = None                # override the case list (tests)
    command: str = ""
    log: object = field(default=None, repr=False)
    sanitize: bool = False                   # the reference interpreter's race sanitizer
    on_row: object = field(default=None, repr=False)   # called with the partial Report
    portable: bool = False                   # compile every kernel in portable mode


def run_suite(opts: Options) -> Report:
    """Run the cases; returns the report. ``opts.on_row(report)`` (if set) gets the partial
    report after every case. On KeyboardInterrupt or SIGTERM the run stops and the report of
    what is done is returned, with ``header['interrupted']`` saying why. With ``opts.portable``
    every kernel is compiled in portable mode (``KAIO_PORTABLE=1`` for the run, build workers
    included)."""
    with portable_env(opts.portable):
        return _run_suite(opts)


def _run_suite(opts: Options) -> Report:
    log = opts.log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    cases = select(opts.cases if opts.cases is not None else all_cases(), opts.kernels)
    infos = {t: probe(t) for t in _needed(opts.targets)}
    for t in opts.targets:
        if t in ("hip",) and infos[t].available and infos[t].warp_size not in BASELINE:
            infos[t].available, infos[t].reason = False, f"warp size {infos[t].warp_size} has no baseline"
    hidden = [t for t in infos if t not in opts.targets]
    backends = _backends(infos, opts.sanitize)
    rows = []
    t0 = time.perf_counter()
    pool = amd.BuildPool(opts.workers)
    interrupted = ""

    def report() -> Report:
        out = []
        for row in rows:
            r = Row(row.kernel, row.group, row.rule, row.why, row.description, row.kernels,
                    {t: row.cells[t] for t in opts.targets if t in row.cells}, row.width,
                    row.order)
            out.append(r)
        header = _header(opts, infos, hidden, time.perf_counter() - t0)
        if interrupted:
            header["interrupted"] = interrupted
        return Report(header, list(opts.targets), out)

    def harvest(wait: bool) -> None:
        """Fill the compile-only cells whose builds are finished (all of them when ``wait``)."""
        for key in list(pending_groups):
            row, target, job_keys = pending_groups[key]
            built = [pool.result(k) if wait else pool.poll(k) for k in job_keys]
            if any(b is None for b in built):
                continue
            del pending_groups[key]
            row.cells[target] = cell = _compile_cell(built)
            if cell.status == "failing":
                log(f"    {row.kernel} @ {target}: FAILING: {cell.detail}")

    pending_groups: dict = {}
    with _stop_on_sigterm():
        try:
            for i, case in enumerate(cases):
                row, jobs = _run_case(case, opts, infos, backends, pool)
                rows.append(row)
                for r, target, job_keys in _group_jobs(jobs):
                    pending_groups[(id(r), target)] = (r, target, job_keys)
                harvest(wait=False)
                log(_progress_line(i + 1, len(cases), row))
                if opts.on_row is not None:
                    opts.on_row(report())
            if pending_groups:
                log(f"waiting for {sum(len(g[2]) for g in pending_groups.values())} compile-and-"
                    f"validate build(s) for {', '.join(t for t in opts.targets if t in COMPILE_ONLY)} ...")
            harvest(wait=True)
        except (KeyboardInterrupt, _Terminated) as e:
            interrupted = ("SIGTERM" if isinstance(e, _Terminated) else "KeyboardInterrupt") + \
                f" after {len(rows)} of {len(cases)} case(s)"
            log(f"interrupted ({interrupted}): reporting what is done")
            for row, target, _ in pending_groups.values():
                row.cells[target] = Cell("not-run", "build not finished: the run was interrupted")
        finally:
            pool.close()
    return report()


class _Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler (a timeout), like KeyboardInterrupt."""


@contextlib.contextmanager
def _stop_on_sigterm():
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _progress_line(i: int, n: int, row: Row) -> str:
    """'[i/n] kernel: target=status ...', then one indented line per failing or within-bound
    cell with its detail (index, both values as float and hex bits, the rule)."""
    head = f"[{i}/{n}] {row.kernel}: " + " ".join(
        f"{t}={c.status}" for t, c in row.cells.items() if t not in COMPILE_ONLY)
    lines = [head]
    for t, c in row.cells.items():
        if c.status in ("failing", "within-bound"):
            rule = f" [rule {c.rule}]" if c.rule else ""
            lines.append(f"    {row.kernel} @ {t}: {c.status.upper()}{rule}: {c.detail}")
    return "\n".join(lines)


# --- targets -------------------------------------------------------------------------------
def _needed(selected: list[str]) -> list[str]:
    """Selected targets plus the interpreter at both warp widths (every case runs at 32 and
    64, for the width check; GPU targets compare against them)."""
    need = list(selected) + [t for t in ("reference", "reference-w64") if t not in selected]
    for t in selected:
        if t in ("cuda", "cuda-llvm") and "reference" not in need:
            need.append("reference")
        if t == "hip" and "reference-w64" not in need:
            need.append("reference-w64")
    if any(t in COMPILE_ONLY for t in selected) and not any(t in EXECUTED for t in need):
        need.append("reference")  # the kernels to build are recorded from an executed run
    return [t for t in EXECUTED + COMPILE_ONLY if t in need]


#: backends stay alive for the whole process: kernels cache their compiled form per backend
#: object id(), and an id reused by a new backend after the old one is freed would hand it the
#: old backend's code
_LIVE: dict = {}


def _backends(infos, sanitize: bool = False) -> dict:
    out = {}
    for t, info in infos.items():
        if info.kind != "execute" or not info.available:
            continue
        san = sanitize and t.startswith("reference")
        key = (t, info.warp_size, san)
        try:
            if key not in _LIVE:
                _LIVE[key] = Recorder(make_backend(t, info.warp_size, sanitize=True) if san
                                      else make_backend(t, info.warp_size))
            out[t] = _LIVE[key]
        except Exception as e:
            info.available, info.reason = False, f"backend failed to start: {type(e).__name__}: {e}"
    return out


def _skip_reason(case: ConformanceCase, target: str, size: str) -> str:
    if target.startswith("reference") and size == "default" and not case.fixed_size:
        return ("the interpreter runs the small sizes only; at --size default GPU targets are "
                "compared with numpy and with each other")
    return ""


# --- one case ------------------------------------------------------------------------------
def _copy(inputs: dict) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}


def _run_case(case: ConformanceCase, opts: Options, infos, backends, pool):
    row = Row(case.name, case.group, "", description=case.description)
    try:
        inputs = case.make_inputs(opts.size)
    except Exception as e:
        msg = f"building inputs raised {type(e).__name__}: {e}"
        row.cells = {t: Cell("failing", msg) for t in opts.targets}
        return row, []
    results, errors, seconds, logs = {}, {}, {}, {}
    submitted = False
    for t, info in infos.items():
        if info.kind != "execute":
            continue
        if not info.available:
            errors[t] = ("not-run", info.reason)
            continue
        why = _skip_reason(case, t, opts.size)
        if why:
            errors[t] = ("not-run", why)
            continue
        rec = backends[t]
        crash = _preflight(t, rec, logs, results, pool)
        if crash:
            errors[t] = crash
            continue
        rec.log = []
        start = time.perf_counter()
        try:
            with using(rec, t):
                results[t] = case.run(_copy(inputs))
        except Exception as e:
            errors[t] = ("failing", f"raised {type(e).__name__}: {_short(e)}")
        seconds[t] = time.perf_counter() - start
        logs[t] = list(rec.log)
        if not submitted and t in results and logs[t]:
            # the first executed run names the kernels: queue every LLVM build now, so the
            # workers build while the remaining targets (the GPUs) run
            submitted = True
            pool.submit(_llvm_jobs(logs[t], infos, backends, opts.targets))
    launched = next((logs[t] for t in logs if t in results and logs[t]), [])
    row.kernels = list(dict.fromkeys(k.name for k, _ in launched))
    row.width = width_check(case, results)
    try:
        found = features(launched)
        rule = derive_rule(case, launched, found)
        row.order = order_reason(case, found) if rule.kind != "bitwise" else ""
    except Exception as e:
        rule = rules.BITWISE
        row.why = f"rule derivation failed ({type(e).__name__}: {e}); bitwise applied"
    row.rule, row.why = rule.describe(), row.why or rule.why
    expected = _Expected(case, inputs)
    for t in opts.targets:
        if t in COMPILE_ONLY:
            continue
        if t in errors:
            row.cells[t] = Cell(errors[t][0], errors[t][1], seconds=seconds.get(t, 0.0))
            continue
        cell = _executed_cell(case, t, infos[t].warp_size, rule, results, expected)
        cell.seconds = round(seconds.get(t, 0.0), 4)
        row.cells[t] = cell
    jobs = []
    for t in opts.targets:
        if t not in COMPILE_ONLY:
            continue
        if not infos[t].available:
            row.cells[t] = Cell("not-run", infos[t].reason)
        elif not launched:
            row.cells[t] = Cell("not-run", "no executed target ran this case, so there is no "
                                           "launched kernel to build")
        else:
            for kernel, options in _unique(launched):
                jobs.append((row, t, (_ir_text(kernel), t, options)))
    return row, jobs


def _llvm_jobs(launched, infos, backends, targets) -> list:
    """Every LLVM build the case will need: the compile-only AMD targets' and the pre-flight
    of the in-process LLVM targets (cuda-llvm, hip)."""
    names = []   # the pre-flights first: a GPU target of this case waits for them
    for t in ("cuda-llvm", "hip"):
        if t in backends:
            pt = _preflight_target(t, backends[t])
            if pt:
                names.append(pt)
    names += [t for t in targets if t in COMPILE_ONLY and infos[t].available]
    return [(_ir_text(k), name, o) for name in names
            for k, o in _unique(launched)]


def _preflight_target(t: str, rec) -> str:
    arch = str(getattr(rec.inner, "arch", ""))
    if t == "cuda-llvm":
        return "nvptx64-sm_90" if arch.startswith("sm_9") else "nvptx64-sm_80"
    if t == "hip" and arch.startswith("gfx"):
        return arch
    return ""


def _preflight(t: str, rec, logs: dict, results: dict, pool) -> tuple | None:
    """For the targets that run LLVM in-process (cuda-llvm, hip): build the kernels (as an
    earlier target launched them) in a worker first, so a fatal LLVM error is reported on this
    cell instead of ending the suite. Returns (status, message) for the cell ('not-available'
    when the target refused a feature it lacks, such as fragments without a lowering; else
    'failing'), or None to go ahead."""
    target = _preflight_target(t, rec)
    if not target:
        return None
    launched = next((logs[o] for o in logs if o in results and logs[o]), [])
    jobs = [(_ir_text(k), target, o) for k, o in _unique(launched)]
    bad = [r for r in pool.run(jobs).values() if not r.ok]
    if not bad:
        return None
    if all(b.unavailable for b in bad):
        return ("not-available", f"not available on this target: {bad[0].kernel}: "
                + "; ".join(bad[0].errors)[:400])
    return ("failing", f"LLVM build of {bad[0].kernel} for {target} failed: "
            + "; ".join(bad[0].errors)[:400])


def _short(e: Exception, limit: int = 300) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= limit else s[:limit] + " ..."


def _unique(launched):
    seen = {}
    for k, o in launched:
        seen.setdefault((_ir_text(k), o), (k, o))
    return list(seen.values())


def _ir_text(kernel) -> str:
    return print_kernel(kernel)


class _Expected:
    """numpy outputs per warp width, computed once (once in all when width-independent)."""

    def __init__(self, case, inputs):
        self.case, self.inputs, self.cache = case, inputs, {}

    def get(self, warp: int) -> dict:
        key = warp if self.case.width_dependent else 0
        if key not in self.cache:
            self.cache[key] = self.case.expected(_copy(self.inputs), warp)
        return self.cache[key]


def _baseline(t: str, warp: int, case, results) -> str | None:
    """The result ``t`` is compared with under the rule: the interpreter at its width; for the
    wave64 interpreter, the wave32 one (width-independent kernels only); else None."""
    base = BASELINE.get(warp)
    if t == base:
        if t == "reference-w64" and not case.width_dependent:
            return "reference" if "reference" in results else None
        return None
    if base in results:
        return base
    for other in EXECUTED:  # no interpreter result (e.g. --size default): another GPU target
        if other != t and other in results and not other.startswith("reference") \
                and (BASELINE.get(_warp_of(other)) == base):
            return other
    return None


def _warp_of(t: str) -> int:
    return WARP[t]


def _executed_cell(case, t, warp, rule, results, expected) -> Cell:
    out = results[t]
    try:
        exp = expected.get(warp)
    except Exception as e:
        return Cell("failing", f"numpy reference raised {type(e).__name__}: {_short(e)}")
    cell = Cell("identical", rule=rule.describe())
    np_ok, np_identical = _numpy_check(case, out, exp, cell)
    base = _baseline(t, warp, case, results)
    if base is not None:
        cell.baseline = base
        o = rules.compare(out, results[base], rule)
        cell.max_error = None if o.identical else finite(o.max_error)
        if not o.ok:
            cell.status = "failing"
            m = o.mismatch
            cell.mismatch = {"against": base, "output": m.output, "index": list(m.index),
                             "got": m.got, "want": m.want}
            cell.detail = f"differs from {base} ({rule.describe()}) at {m.describe()}"
            return cell
        identical = o.identical
    else:
        cell.baseline = "numpy"
        identical = np_identical
    if not np_ok:
        cell.status = "failing"
        mm = cell.mismatch
        where = f" at {mm['output']}{mm['index']}: {mm['got']} != {mm['want']}" if mm else ""
        cell.detail = f"outside the numpy bound ({cell.numpy['bound']}){where}"
        return cell
    if identical:
        cell.detail = f"bit-identical to {cell.baseline}"
        return cell
    cell.status = "within-bound"
    if base is not None:
        cell.detail = (f"{rule.describe()} vs {base}: max error {_fmt_err(cell.max_error, rule)}; "
                       f"numpy {cell.numpy['bound']}")
        first = _first_difference(out, results[base])
    else:
        cell.detail = f"numpy {cell.numpy['bound']}: max |err| {cell.numpy['max_abs_error']}"
        first = _first_difference(out, exp)
    if first:
        cell.detail += f"; first difference {first}"
    return cell


def _first_difference(out, ref) -> str:
    try:
        m = rules.first_difference(out, ref)
    except Exception:
        return ""
    return m.describe() if m else ""


def _fmt_err(err, rule) -> str:
    if isinstance(err, str) or err is None:
        return str(err)
    return f"{err:g} ulp" if rule.kind == "ulp" else f"{err:.3g}"


def _numpy_check(case, out, exp, cell: Cell) -> tuple[bool, bool]:
    """Compare with numpy under the case's numpy bound; fills cell.numpy (and cell.mismatch on
    failure). Returns (within bound, bit-identical)."""
    identical = rules.compare(out, exp, rules.BITWISE).identical
    tol = case.vs_numpy
    if isinstance(tol, rules.Rule):
        o = rules.compare(out, exp, tol)
        cell.numpy = {"ok": o.ok, "bound": tol.describe(), "max_error": finite(o.max_error),
                      "max_abs_error": finite(_max_abs(out, exp))}
        if not o.ok and o.mismatch:
            m = o.mismatch
            cell.mismatch = {"against": "numpy", "output": m.output, "index": list(m.index),
                             "got": m.got, "want": m.want}
        return o.ok, identical
    ok, ratio = kernels.compare(out, exp, tol)
    cell.numpy = {"ok": bool(ok), "bound": tol.describe(), "ratio": finite(ratio),
                  "max_abs_error": finite(_max_abs(out, exp))}
    if not ok:
        m = _first_outside(out, exp, tol)
        if m:
            cell.mismatch = dict(m, against="numpy")
    return bool(ok), identical


def _max_abs(out, exp) -> float:
    try:
        with np.errstate(all="ignore"):
            return kernels.max_abs_error(out, exp)
    except Exception:
        return float("nan")


def _first_outside(out, exp, tol) -> dict | None:
    for key, ref in exp.items():
        if key not in out:
            return {"output": key, "index": [], "got": "missing", "want": "present"}
        o, r = np.asarray(out[key]), np.asarray(ref)
        if o.shape != r.shape:
            return {"output": key, "index": [], "got": str(o.shape), "want": str(r.shape)}
        with np.errstate(all="ignore"):
            fo, fr = o.astype(np.float64), r.astype(np.float64)
            if tol.exact:
                bad = ~rules.identical_mask(o, r) if o.dtype == r.dtype else fo != fr
            else:
                bad = (np.isnan(fo) != np.isnan(fr)) | (np.abs(fo - fr) > tol.atol + tol.rtol * np.abs(fr))
        if bad.any():
            idx = np.unravel_index(int(np.argmax(bad)), r.shape)
            return {"output": key, "index": [int(i) for i in idx], "got": rules._fmt(o[idx]),
                    "want": rules._fmt(r[idx])}
    return None


# --- compile-only ----------------------------------------------------------------------------
def _group_jobs(pending):
    grouped = {}
    for row, target, key in pending:
        grouped.setdefault((id(row), target), (row, target, []))[2].append(key)
    return list(grouped.values())


def _compile_cell(builds) -> Cell:
    """A compile-only cell: 'compiled' (compiled and validated) when every kernel built and
    kept its limits; 'not-available' when a kernel was refused because the target lacks a
    feature it uses (and nothing else failed); else 'failing'."""
    cell = Cell("compiled", build=[b.as_dict() for b in builds])
    bad = [b for b in builds if not b.ok]
    if bad:
        refused = all(b.unavailable for b in bad)
        cell.status = "not-available" if refused else "failing"
        first = next((b for b in bad if not b.unavailable), bad[0])
        cell.detail = (("not available on this target: " if refused else "")
                       + f"{first.kernel}: " + "; ".join(first.errors)[:400])
        return cell
    cell.detail = "compiled and validated; " + "; ".join(_build_summary(b) for b in builds)
    return cell


def _build_summary(b) -> str:
    if b.registers:        # NVIDIA: ptxas -v
        spills = f", spills {b.spill_stores} B stored / {b.spill_loads} B loaded" if b.spills else ""
        return f"{b.kernel}: {b.registers} registers, smem {b.lds_bytes} B" + spills
    return (f"{b.kernel}: vgpr {b.vgpr}, sgpr {b.sgpr}, LDS {b.lds_bytes} B"
            + (f", spills {b.spills}" if b.spills else ""))


# --- header ----------------------------------------------------------------------------------
def _header(opts: Options, infos, hidden, seconds: float) -> dict:
    try:
        portable = portable_math_active()
    except Exception:
        portable = False
    not_run = {t: infos[t].reason for t in opts.targets if t in infos and not infos[t].available}
    return {
        "kaio_version": kaio.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": opts.command,
        "size": opts.size,
        "host": f"{platform.node()} ({platform.platform()}, Python {platform.python_version()})",
        "targets": {t: infos[t].as_dict() for t in opts.targets if t in infos},
        "hidden_baselines": hidden,
        "not_executed": not_run,
        "portable_math": portable,
        "portable_mode": bool(opts.portable),
        "vendors": vendor_summary(opts.targets, infos),
        "seconds": round(seconds, 1),
    }


def vendor_summary(targets, infos) -> dict:
    """One line per GPU vendor: where its targets executed and what was only compiled, e.g.
    {'NVIDIA': 'executed on sm_90, compiled for sm_80/86/89', 'AMD': 'compiled for gfx90a/gfx942'}."""
    out = {}
    for vendor in ("NVIDIA", "AMD"):
        mine = [t for t in targets if VENDOR.get(t) == vendor and t in infos]
        if not mine:
            continue
        ran = sorted({_arch(infos[t]) for t in mine
                      if infos[t].kind == "execute" and infos[t].available})
        built = list(dict.fromkeys(_arch(infos[t]) for t in mine
                                   if infos[t].kind == "compile" and infos[t].available))
        missing = [t for t in mine if not infos[t].available]
        parts = []
        if ran:
            parts.append("executed on " + "/".join(ran))
        if built:
            parts.append("compiled for " + _join_archs(built))
        by_reason: dict = {}
        for t in missing:
            by_reason.setdefault(_short_reason(infos[t].reason), []).append(t)
        parts += [f"not run: {', '.join(ts)} ({why})" for why, ts in by_reason.items()]
        out[vendor] = ", ".join(parts)
    return out


def _short_reason(why: str, limit: int = 80) -> str:
    why = " ".join(str(why).split())
    return why if len(why) <= limit else why[:limit].rsplit(" ", 1)[0] + " ..."


def _arch(info) -> str:
    arch = str(info.device.get("arch", "") or info.name)
    return arch.split(" ")[0]


def _join_archs(archs: list[str]) -> str:
    """['sm_80', 'sm_86', 'sm_89'] -> 'sm_80/86/89'; other lists joined with '/'."""
    if len(archs) > 1 and all(a.startswith("sm_") for a in archs):
        return archs[0] + "/" + "/".join(a[3:] for a in archs[1:])
    return "/".join(archs)
