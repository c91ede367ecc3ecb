"""A small autotuner: pick, per shape and device, the fastest of the configurations a kernel declares.

    import kaio
    from kaio.autotune import Config, tuned

    @tuned(configs=[Config("b256", block=256), Config("b512", block=512), Config("b1024", block=1024)],
           key=lambda x, y: (x.shape, str(x.dtype)), outputs=lambda x, y: [y])
    def scale(x, y, *, config):
        b = config.block
        scale_kernel[(x.size + b - 1) // b, b](x, y)

    scale(x, y)      # first call for this shape on this device: times each config, keeps the fastest

The first configuration is the **default**. On the first call for a key (``key(*args)``: shape,
dtype, whatever the best choice depends on) on a GPU, each candidate is run once (compiling it;
a candidate that raises is recorded and skipped), its outputs (``outputs(*args)``, optional) are
compared with the first good candidate's (``check=(atol, rtol)``; a disagreeing one is rejected),
then timed with kaio events: ``warmup`` calls, then ``rounds`` timings of ``reps`` back-to-back
calls, the median per call. The fastest wins, unless it beats the default by less than
``margin`` (2%). numpy arguments are copied to the device once for the trials, so they time the
kernel and not the copies; the trials write the outputs, so a tuned function must compute its
outputs from its inputs (not update them in place).

The winner is kept in memory and on disk, per (tuner name, device, key), in kaio's cache
(:class:`kaio.cache.CompileCache` under ``<cache dir>/autotune``: atomic writes, entries verified on
read, a damaged one deleted and re-tuned), as a JSON record of what was tried (each candidate's
time, error or mismatch) and what was chosen. The cache key also covers the candidates' names and
kaio's version and compiler fingerprint, so a changed candidate list or compiler tunes again.
Later calls and later processes use the winner without timing anything.

No timing happens -- the default is used -- with ``KAIO_AUTOTUNE=0``, on the reference backend
(its timings mean nothing; :func:`use_timer` installs a timer there, which the tests do), while a
graph is being captured (a cached winner is still used), or when ``tune_when(key)`` is false.
:func:`records` (``kaio autotune --show``) lists the records; :func:`choices` collects the
decisions made while it is active (``kaio bench --ml`` reports them); :func:`fresh` tunes again
whatever is cached (``kaio bench --ml`` does, unless ``--autotune cached``).
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import statistics
import threading
from collections.abc import Callable, Sequence

import numpy as np

from . import backends
from .backends.runtime import capturing
from .cache import CompileCache, compiler_fingerprint, default_dir
from .config import settings
from .device import Event, to_device
from .device import synchronize as device_synchronize
from .version import __version__

#: cache entries are JSON records starting with this tag (anything else is a miss)
RECORD_FORMAT = "kaio-autotune-1"


class Config:
    """One candidate configuration: a ``name`` (stable across processes: the cache records it) and
    parameters, readable as attributes (``config.block``) or as the dict ``config.params``."""

    def __init__(self, name: str, **params):
        self.name = str(name)
        self.params = dict(params)

    def __getattr__(self, item):
        try:
            return self.__dict__["params"][item]
        except KeyError:
            raise AttributeError(f"autotune Config {self.name!r} has no parameter {item!r}") from None

    def __eq__(self, other):
        return isinstance(other, Config) and (self.name, self.params) == (other.name, other.params)

    def __hash__(self):
        return hash((self.name, json.dumps(self.params, sort_keys=True, default=str)))

    def __repr__(self):
        args = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"Config({self.name!r}{args})"


class Choice:
    """What :meth:`Autotuner.choose` decided: the ``config``, where it came from (``source``:
    'tuned', 'cache', 'memory', 'default', 'disabled', 'reference backend', 'not tuned at this
    size', 'capturing'), whether it is ``final`` (a capture's default is not remembered), and
    the tuning ``record`` behind it (what was tried; None for a default)."""

    def __init__(self, config: Config, source: str, final: bool = True, record: dict | None = None):
        self.config, self.source, self.final, self.record = config, source, final, record

    def __repr__(self):
        return f"Choice({self.config.name!r}, {self.source!r})"


# --- process-wide state ------------------------------------------------------------------------
_timer_override: list = []
_recorders: list[list] = []
_fresh: list = []
_cache: CompileCache | None = None


def autotune_cache() -> CompileCache:
    """The cache of tuning records: kaio's compile cache class in ``<cache dir>/autotune``."""
    global _cache
    if _cache is None:
        _cache = CompileCache(default_dir() / "autotune")
    return _cache


def set_autotune_cache(cache: CompileCache | None) -> None:
    """Replace the records' cache (None: recreate it from the environment on next use)."""
    global _cache
    _cache = cache


@contextlib.contextmanager
def use_timer(timer: Callable):
    """Time candidates with ``timer(run, config) -> ms`` while active, on any backend (the
    reference one included): for tests, and for callers with their own clock."""
    _timer_override.append(timer)
    try:
        yield timer
    finally:
        _timer_override.remove(timer)


@contextlib.contextmanager
def fresh():
    """While active, decisions ignore remembered and cached winners and tune again (replacing
    them): for a benchmark that must not inherit a winner timed under other load, e.g. a test
    suite running in parallel on the same GPU."""
    _fresh.append(True)
    try:
        yield
    finally:
        _fresh.pop()


@contextlib.contextmanager
def choices():
    """Collect ``(tuner name, key, Choice)`` for every decision made while active."""
    got: list = []
    _recorders.append(got)
    try:
        yield got
    finally:
        _recorders.remove(got)


def device_id(backend=None) -> str:
    """What a winner is valid for: the backend, its device's name and arch, and on CUDA the code
    generator (kaio's PTX or the LLVM path)."""
    if backend is None:
        backend = backends.get_backend()
    name = getattr(backend, "name", "?")
    if name == "reference":
        return "reference"
    props = getattr(backend, "props", None)
    parts = [name, str(getattr(props, "name", "?")), str(getattr(backend, "arch", "?"))]
    if name == "cuda":
        parts.append(getattr(backend, "codegen", None) or settings().cuda_codegen)
    return ":".join(parts)


def event_timer(run: Callable, config=None, *, warmup: int = 2, reps: int = 10, rounds: int = 5,
                event: Callable | None = None, synchronize: Callable | None = None) -> float:
    """Milliseconds per call of ``run()``: ``warmup`` calls, then the median over ``rounds`` of
    timing events around ``reps`` back-to-back calls (so host-side launch overhead overlaps the
    previous kernel). ``event()`` makes an event and ``synchronize()`` waits for the device:
    kaio's unless given (benchmarks/bench_gpu.py passes torch's)."""
    event, synchronize = event or Event, synchronize or device_synchronize
    for _ in range(warmup):
        run()
    synchronize()
    times = []
    for _ in range(rounds):
        start, end = event(), event()
        start.record()
        for _ in range(reps):
            run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times)


# --- the tuner ---------------------------------------------------------------------------------
class Autotuner:
    """Chooses among ``configs`` per key and device. ``fn(*args, config=...)`` runs the work
    (for the decorator form, :func:`tuned`); library code with its own launch closures calls
    :meth:`choose` with a ``trial(config) -> callable(*args)`` instead.

    - ``configs``: a sequence of :class:`Config`, or ``configs(key)`` giving one per key; the
      first is the default;
    - ``key(*args)``: what the choice depends on (JSON-serialisable: tuples, ints, strings);
    - ``outputs(*args)``: the arrays a call writes, compared across candidates when given;
    - ``check``: (atol, rtol) of that comparison, or ``check(key)`` giving them (default: exact
      equality);
    - ``tune_when(key)``: false keeps the default without timing (small problems);
    - ``timer(run, config) -> ms``: replaces :func:`event_timer` (``warmup``, ``reps``, ``rounds``);
    - ``margin``: a candidate replaces the default only when faster by more than this fraction
      (default 2%), so timing noise does not swap configurations between runs.
    """

    def __init__(self, fn: Callable | None = None, *, name: str, configs, key: Callable | None = None,
                 outputs: Callable | None = None, check=None,
                 tune_when: Callable | None = None, timer: Callable | None = None,
                 warmup: int = 2, reps: int = 10, rounds: int = 5, margin: float = 0.02):
        self.fn, self.name, self._configs, self.key = fn, name, configs, key
        self.outputs, self.check, self.tune_when, self.timer = outputs, check, tune_when, timer
        self.warmup, self.reps, self.rounds, self.margin = warmup, reps, rounds, margin
        self._chosen: dict[tuple, Choice] = {}
        self._records: dict[str, dict] = {}
        self._lock = threading.Lock()

    # --- the decorator form ----------------------------------------------------------------
    def __call__(self, *args):
        if self.fn is None or self.key is None:
            raise TypeError(f"autotuner {self.name!r} has no function or key: call choose()")
        fn = self.fn
        choice = self.choose(self.key(*args), args, lambda c: lambda *a: fn(*a, config=c))
        return fn(*args, config=choice.config)

    def configs(self, key) -> list[Config]:
        cs = list(self._configs(key) if callable(self._configs) else self._configs)
        if not cs:
            raise ValueError(f"autotuner {self.name!r} declares no configuration for key {key!r}")
        names = [c.name for c in cs]
        if len(set(names)) != len(names):
            raise ValueError(f"autotuner {self.name!r}: configuration names repeat: {names}")
        return cs

    def remembered(self, key) -> Config | None:
        """The configuration already chosen for ``key`` on the current device in this process,
        or None; never tunes (for calls that cannot run trials, e.g. ones updating in place)."""
        hit = self._chosen.get((json.dumps(key, default=str), device_id()))
        return hit.config if hit is not None else None

    def forget(self) -> None:
        """Drop this tuner's in-memory choices (the disk records stay)."""
        with self._lock:
            self._chosen.clear()
            self._records.clear()

    # --- choosing --------------------------------------------------------------------------
    def choose(self, key, args: Sequence, trial: Callable[[Config], Callable]) -> Choice:
        """The configuration for ``key``: remembered, cached on disk, or tuned now on ``args``
        (each candidate run as ``trial(config)(*args)``)."""
        text = json.dumps(key, default=str)  # the key as the records hold it (tuples as lists)
        memo_key = (text, device_id())
        choice = None if _fresh else self._chosen.get(memo_key)
        if choice is None:
            with self._lock:
                choice = None if _fresh else self._chosen.get(memo_key)
                if choice is None:
                    choice = self._decide(json.loads(text), memo_key[1], args, trial)
                    if choice.final:
                        self._chosen[memo_key] = Choice(choice.config, "memory", record=choice.record)
        for rec in list(_recorders):
            rec.append((self.name, json.loads(text), choice))
        return choice

    def _decide(self, key, device: str, args, trial) -> Choice:
        configs = self.configs(key)
        default = configs[0]
        timer = self.timer or (_timer_override[-1] if _timer_override else None)
        if not settings().autotune:
            return Choice(default, "disabled")
        if len(configs) == 1:
            return Choice(default, "default")
        if timer is None and device == "reference":
            return Choice(default, "reference backend")
        if self.tune_when is not None and not self.tune_when(key):
            return Choice(default, "not tuned at this size")
        cache_key = self._cache_key(key, device, configs)
        found = None if _fresh else self._lookup(cache_key, configs)
        if found is not None:
            return Choice(found, "cache", record=self._records[cache_key])
        if capturing() is not None:
            return Choice(default, "capturing", final=False)
        record = self._tune(key, device, configs, args, trial, timer)
        self._records[cache_key] = record
        autotune_cache().put(cache_key, json.dumps(record, sort_keys=True))
        return Choice(next(c for c in configs if c.name == record["chosen"]), "tuned", record=record)

    def _cache_key(self, key, device: str, configs) -> str:
        blob = json.dumps({"format": RECORD_FORMAT, "tuner": self.name, "device": device, "key": key,
                           "configs": [[c.name, c.params] for c in configs], "kaio": __version__,
                           "compiler": compiler_fingerprint()}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _lookup(self, cache_key: str, configs) -> Config | None:
        record = self._records.get(cache_key) or _parse(autotune_cache().get(cache_key))
        if record is None:
            return None
        by_name = {c.name: c for c in configs}
        if record.get("chosen") not in by_name:
            return None
        self._records[cache_key] = record
        return by_name[record["chosen"]]

    def _tune(self, key, device, configs, args, trial, timer) -> dict:
        staged = _stage(args)
        if timer is None:
            def timer(run, config):
                return event_timer(run, config, warmup=self.warmup, reps=self.reps, rounds=self.rounds)
        check = self.check(key) if callable(self.check) else self.check
        tried, best, reference = [], None, None
        for config in configs:
            entry = {"config": config.name, "params": config.params}
            tried.append(entry)
            try:
                run = trial(config)
                run(*staged)  # compiles; a candidate that cannot build or launch is skipped
                device_synchronize()
                got = _host_outputs(self.outputs(*staged)) if self.outputs else None
            except Exception as e:
                entry["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                continue
            if got is not None:
                if reference is None:
                    reference = got
                else:
                    bad = _disagreement(reference, got, check)
                    if bad:
                        entry["mismatch"] = bad
                        continue
            try:
                ms = float(timer(lambda r=run: r(*staged), config))
            except Exception as e:
                entry["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                continue
            entry["ms"] = ms
            if best is None or ms < best[0]:
                best = (ms, config)
        chosen = best[1] if best is not None else configs[0]
        default_ms = tried[0].get("ms")
        if default_ms is not None and best[0] > default_ms * (1.0 - self.margin):
            chosen = configs[0]  # within the noise of the default: keep it
        return {"format": RECORD_FORMAT, "tuner": self.name, "device": device, "key": key,
                "default": configs[0].name, "chosen": chosen.name, "tried": tried,
                "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "kaio": __version__}


def tuned(*, configs, key: Callable, name: str | None = None, **options) -> Callable[[Callable], Autotuner]:
    """Decorator: ``fn(*args, config=...)`` becomes an :class:`Autotuner` called as ``fn(*args)``;
    ``name`` defaults to the function's qualified name (it names the cache records)."""
    def wrap(fn):
        return Autotuner(fn, name=name or f"{fn.__module__}.{fn.__qualname__}", configs=configs,
                         key=key, **options)
    return wrap


# --- records -----------------------------------------------------------------------------------
def records() -> list[dict]:
    """Every readable tuning record on disk (what was tried, what was chosen), oldest first."""
    cache = autotune_cache()
    out = [r for r in (_parse(cache.get(k)) for k in cache.stored_keys()) if r is not None]
    return sorted(out, key=lambda r: (r.get("when", ""), r.get("tuner", "")))


def clear() -> int:
    """Forget every tuning record (memory of the cache and disk); returns files removed.
    Tuners already holding a choice keep it until :meth:`Autotuner.forget`."""
    return autotune_cache().clear()


def format_record(r: dict) -> str:
    """One record as text: the tuner, device and key, then each candidate with its time."""
    lines = [f"{r['tuner']}  {r['device']}  key={r['key']}  chose {r['chosen']} "
             f"(default {r['default']}, {r.get('when', '?')})"]
    for t in r.get("tried", []):
        what = (f"{t['ms'] * 1e3:.1f} us" if "ms" in t else
                f"mismatch: {t['mismatch']}" if "mismatch" in t else f"error: {t.get('error', '?')}")
        mark = "  <- chosen" if t["config"] == r["chosen"] else ""
        lines.append(f"    {t['config']:<28} {what}{mark}")
    return "\n".join(lines)


def main(argv=None) -> int:
    """``kaio autotune --show [--json] | --clear``."""
    import argparse
    ap = argparse.ArgumentParser(prog="kaio autotune", description="the autotuner's records")
    ap.add_argument("--show", action="store_true", help="list what was tried and chosen (default)")
    ap.add_argument("--json", action="store_true", help="with --show: the records as JSON")
    ap.add_argument("--clear", action="store_true", help="delete every record (tune again)")
    args = ap.parse_args(argv)
    if args.clear:
        print(f"removed {clear()} autotune record(s) from {autotune_cache().directory}")
        return 0
    recs = records()
    if args.json:
        print(json.dumps(recs, indent=1))
    elif not recs:
        print(f"no autotune records in {autotune_cache().directory}")
    else:
        print("\n".join(format_record(r) for r in recs))
    return 0


# --- helpers -----------------------------------------------------------------------------------
def _parse(payload) -> dict | None:
    if payload is None:
        return None
    try:
        r = json.loads(payload)
    except (ValueError, TypeError):
        return None
    return r if isinstance(r, dict) and r.get("format") == RECORD_FORMAT else None


def _stage(args) -> list:
    """``args`` with numpy arrays copied to the device once (scalars and device arrays as given)."""
    return [to_device(a) if isinstance(a, np.ndarray) else a for a in args]


def _host_outputs(outs) -> list | None:
    """Host copies of a call's outputs, as f32 (16-bit floats: exact) or f64 (f64 and integers);
    None when one cannot be read back here."""
    got = []
    for o in outs:
        if isinstance(o, np.ndarray):
            a = np.array(o)
        elif hasattr(o, "to_host"):
            a = np.asarray(o.to_host())
        else:
            return None
        wide = a.dtype == np.float64 or a.dtype.kind in "iub"
        got.append(a.astype(np.float64 if wide else np.float32, copy=False))
    return got


def _disagreement(ref: list, got: list, check) -> str | None:
    """Why ``got`` differs from ``ref`` beyond ``check`` = (atol, rtol), or None."""
    atol, rtol = check or (0.0, 0.0)
    for i, (a, b) in enumerate(zip(ref, got)):
        if a.shape != b.shape:
            return f"output {i}: shape {b.shape}, expected {a.shape}"
        err = np.abs(a - b)
        ok = (err <= atol + rtol * np.abs(a)) | (np.isnan(a) & np.isnan(b))
        if not ok.all():
            return f"output {i}: max |diff| {float(np.nanmax(err)):.3g} over atol {atol:g} + rtol {rtol:g}"
    return None
