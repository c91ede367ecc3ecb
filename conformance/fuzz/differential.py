"""The differential: a kernel the sanitizer saw run clean on every launch (accepted by the
checker, or rejected and compiled without it) runs again on other backends (kaio's PTX, LLVM
nvptx64) on the same launches with the same inputs, and every buffer it writes is compared with
the reference interpreter's: bit for bit (NaNs of any payload are equal), or within a small
tolerance where the kernel uses float atomics (order-dependent). Elements of an Out buffer that
the reference never wrote (still its poison value) are not compared: on a GPU they hold
whatever the memory held."""
from __future__ import annotations

import traceback

import numpy as np

from kaio import dtypes as dt
from kaio import semantics
from kaio.backends.reference import ReferenceBackend
from kaio.errors import CudaError

from ..targets import make_backend, probe, using
from . import assemble
from .case import make_args

#: results per backend and kernel
RESULTS = ("identical", "close", "mismatch", "error")


def available(names) -> dict:
    """name -> None when it can run here, else the reason it cannot."""
    out = {}
    for name in names:
        if name == "reference-plain":
            out[name] = None
            continue
        if name in assemble.TARGETS:
            out[name] = assemble.available(name)
            continue
        info = probe(name)
        out[name] = None if info.available else (info.reason or "not available")
    return out


class Backends:
    """One instance per backend name, made on first use in this process; a backend whose CUDA
    context broke (a sticky error) is not used again."""

    def __init__(self, names):
        self.names = [n for n in names if n != "reference"]
        self._made: dict = {}
        self.broken: dict = {}

    def get(self, name):
        if name not in self._made:
            # reference-plain: the interpreter without the sanitizer (exercises this module
            # without a GPU, and shows the sanitizer changes no result)
            self._made[name] = (ReferenceBackend(sanitize=False) if name == "reference-plain"
                                else make_backend(name))
        return self._made[name]


def compare(ref: np.ndarray, got: np.ndarray, dtype: str, out_buffer: bool, tolerant: bool) -> str:
    """'identical', 'close' (tolerant kernels only) or 'mismatch'."""
    d = getattr(dt, dtype)
    r, o = ref.reshape(-1), np.asarray(got).reshape(-1)
    if d.is_float:
        rf, of = r.astype(np.float64), o.astype(np.float64)
        bits = f"u{np.dtype(d.storage_np).itemsize}"
        eq = (r.view(bits) == o.view(bits)) | (np.isnan(rf) & np.isnan(of))
        written = ~np.isnan(rf) if out_buffer else np.ones(r.shape, bool)
    else:
        eq = r == o
        written = r != semantics.poison(d) if out_buffer else np.ones(r.shape, bool)
    if (eq | ~written).all():
        return "identical"
    if tolerant and d.is_float and np.allclose(of[written], rf[written], rtol=1e-5, atol=1e-6,
                                               equal_nan=True):
        return "close"
    return "mismatch"


def run(out, backends: Backends, seed: int, max_launches: int) -> None:
    """Run a clean kernel (``out.kernel``) on every backend; fills ``out.diff``."""
    case = out.case
    written = [p for p in case.params if p.role in ("region", "out", "atomic")]
    for name in backends.names:
        if name in assemble.TARGETS:   # compile and assemble only (no GPU here)
            out.diff[name] = assemble.run(out, name)
            continue
        stats = dict.fromkeys(RESULTS, 0)
        stats["launches"] = 0
        if name in backends.broken:
            stats["skipped"] = 1
            out.diff[name] = stats
            continue
        try:
            be = backends.get(name)
        except Exception as e:
            backends.broken[name] = f"{type(e).__name__}: {e}"
            stats["error"] += 1
            out.diff[name] = stats
            continue
        with using(be, f"fuzz:{name}"):
            for launch, ref in out.outputs[:max_launches]:
                stats["launches"] += 1
                args = make_args(case, launch, seed)
                try:
                    out.kernel[launch.grid, launch.block, launch.shared_bytes](*args)
                except Exception as e:
                    stats["error"] += 1
                    out.diff_details.append(
                        f"{name} {launch.text()}: {traceback.format_exc(limit=4)}")
                    if isinstance(e, CudaError):   # the context may be unusable from here on
                        backends.broken[name] = f"after {case.name}: {e}"
                        break
                    continue
                got = [a for a, p in zip(args, case.params) if p.role in ("region", "out", "atomic")]
                verdicts = [compare(rv, gv, p.dtype, p.role == "out", case.tolerant)
                            for rv, gv, p in zip(ref, got, written)]
                worst = max(verdicts, key=RESULTS.index)
                stats[worst] += 1
                if worst == "mismatch":
                    out.diff_details.append(
                        f"{name} {launch.text()}: " + "; ".join(
                            _diff_text(p.name, rv, gv) for rv, gv, p, v in zip(ref, got, written, verdicts)
                            if v == "mismatch"))
        out.diff[name] = stats


def _diff_text(name: str, ref: np.ndarray, got: np.ndarray) -> str:
    r, g = ref.reshape(-1), np.asarray(got).reshape(-1)
    bad = np.nonzero(~((r == g) | (np.isnan(r.astype(np.float64)) & np.isnan(g.astype(np.float64)))))[0]
    show = ", ".join(f"[{i}] {r[i]!r} vs {g[i]!r}" for i in bad[:4])
    return f"{name}: {len(bad)} element(s) differ: {show}"
