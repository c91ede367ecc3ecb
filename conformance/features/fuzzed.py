"""Generated kernels from the race-checker fuzzer (:mod:`kaio.conformance.fuzz`): a fixed set of
seed-1 kernels the checker accepts and the sanitizer runs clean, across partitions (grid-stride,
rows, rows per block, elementwise, blocked, tiles), dtypes (u8 to f64), index buffers, scalar
parameters, shared memory and integer atomics; each on its first two generated launches.

No numpy model exists for a generated kernel: its expected output is the interpreter's own (a
separate interpreter instance at the same warp width), so the comparison that matters is every
other target against the interpreter, ``bitwise`` (none of these uses float atomics or warp
operations). The kernels are regenerated from (seed, index) and written to a temporary module,
as the fuzzer does (the frontend reads a kernel's source from its file).
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile

from kaio.backends.reference import ReferenceBackend

from ..case import ConformanceCase
from ..fuzz import module
from ..fuzz.case import make_args
from ..fuzz.generate import generate
from ..rules import BITWISE
from ..targets import using

SEED = 1
#: accepted, sanitizer-clean, no float atomics, no warp ops, every output a Region or Atomic
#: buffer (an Out buffer's unwritten elements hold whatever the device memory held)
INDICES = (16, 22, 27, 30, 45, 57, 60, 67)
LAUNCHES = 2
WRITTEN = ("region", "out", "atomic")


@functools.lru_cache(maxsize=None)
def _module():
    cases = [generate(SEED, i, LAUNCHES) for i in INDICES]
    folder = tempfile.mkdtemp(prefix="kaio-conformance-fuzz-")
    atexit.register(shutil.rmtree, folder, True)
    mod, _ = module.load(cases, SEED, folder, f"conformance_s{SEED}")
    return {c.index: (c, getattr(mod, c.name)) for c in cases}


@functools.lru_cache(maxsize=None)
def _interpreter(warp: int):
    return ReferenceBackend(warp_size=warp)


def _make(index):
    def make(size):
        case, _ = _module()[index]
        out = {}
        for li, launch in enumerate(case.launches[:LAUNCHES]):
            for p, a in zip(case.params, make_args(case, launch, SEED)):
                out[f"{li}:{p.name}"] = a
        return out
    return make


def _run(index):
    def run(inputs):
        case, kern = _module()[index]
        outs = {}
        for li, launch in enumerate(case.launches[:LAUNCHES]):
            args = [inputs[f"{li}:{p.name}"] for p in case.params]
            kern[launch.grid, launch.block, launch.shared_bytes](*args)
            outs.update({f"{li}:{p.name}": a for p, a in zip(case.params, args)
                         if p.role in WRITTEN})
        return outs
    return run


def _expected(index):
    def expected(inputs, warp):
        with using(_interpreter(warp), f"fuzz-expected-w{warp}"):
            return _run(index)({k: (v.copy() if hasattr(v, "copy") else v)
                                for k, v in inputs.items()})
    return expected


def cases() -> list[ConformanceCase]:
    out = []
    for i in INDICES:
        c, _ = _module()[i]
        out.append(ConformanceCase(
            name=f"fuzz/s{SEED}_k{i}", group="fuzz", make_inputs=_make(i), run=_run(i),
            expected=_expected(i), vs_numpy=BITWISE, rule=BITWISE, fixed_size=True,
            description=f"generated kernel {i} of seed {SEED}: {c.partition} partition, "
                        f"{c.dtype}; " + ", ".join(f for f in c.features
                                                  if not f.startswith(("partition:", "dtype:")))))
    return out
