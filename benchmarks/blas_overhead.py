"""kaio.blas.gemm's host call overhead through each cuBLAS binding (ctypes, nvmath-python), with
torch.matmul (cuBLAS too) for scale.

A 64x64x64 product (f16 with f32 accumulation, and f32) on kaio device arrays, ``out`` given, on
one kaio stream: the GPU needs a few microseconds for it, so the wall time of issuing the call is
the host's cost. Each round issues ``--calls`` calls back to back (fewer than fit in the launch
queue, so the host never waits for the GPU), timed without the synchronization that follows; the
figure is the median over ``--rounds`` rounds, the cases taking turns within each round. The
"cublasGemmEx alone" rows call the binding with prebuilt arguments: what the binding itself costs.

    python benchmarks/blas_overhead.py [--calls 500] [--rounds 200] [--out DIR] [--fake]

``--fake`` needs no GPU: the fake CUDA driver of tests/test_cuda_runtime_fake.py and bindings
whose entry points do nothing, so the rows are kaio's own Python cost (CPU time). The default
binding (kaio.backends.cublas_bindings.PREFERRED_BINDING) is nvmath only while its kaio.blas.gemm
rows are within a few microseconds of the ctypes ones (docs/backends.md).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np

import kaio
from kaio import config
from kaio.backends import cublas_bindings as CB
from kaio.backends.cublas import Cublas, gemm_args
from kaio.backends.gemm import column_major_call

N = 64
#: nvmath stays the default while its kaio.blas.gemm call costs at most this much more (us)
TOLERANCE_US = 3.0


@dataclass
class Case:
    """One timed call; ``prepare`` runs (untimed) before each of its rounds, ``sync`` waits for
    its work (default: the kaio stream's)."""
    fn: object
    prepare: object = None
    sync: object = None


def use_fakes() -> None:
    """The fake CUDA driver and do-nothing bindings (no GPU: kaio's own cost)."""
    import tempfile
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    os.environ.setdefault("KAIO_CACHE_DIR", tempfile.mkdtemp())
    from test_blas_bindings import FakeLib, fake_nvmath
    from test_cuda_runtime_fake import FakeDriver

    from kaio.backends import cuda_driver as drv
    drv.set_driver(FakeDriver())

    class Idle:  # the stand-in bindings' calls, doing nothing
        def create(self):
            return 1

        def set_stream(self, handle, stream):
            pass

        def gemm(self, handle, args):
            pass
    CB.find_cublas = lambda: "fake-libcublas.so"
    CB.load_library = lambda path: FakeLib(Idle())
    CB._nvmath_module = fake_nvmath(Idle())


def open_handles(be) -> tuple[dict, dict]:
    """({binding: Cublas}, {binding: why not}) for each binding that works here."""
    handles, missing = {}, {}
    for name in CB.BINDINGS:
        os.environ["KAIO_CUBLAS_BINDING"] = name
        config.reload()
        try:
            handles[name] = Cublas(be)
        except Exception as e:  # one binding missing must not hide the other
            missing[name] = f"{type(e).__name__}: {e}"
    os.environ.pop("KAIO_CUBLAS_BINDING", None)
    config.reload()
    return handles, missing


def kaio_cases(be, handles: dict, stream) -> dict:
    """{(case, binding): Case}: kaio.blas.gemm through each binding; for ctypes also as the code
    before nvmath was added did it (cublasSetStream on every call); cublasGemmEx alone."""
    cases = {}
    for t, npd in (("f16", np.float16), ("f32", np.float32)):
        rng = np.random.default_rng(0)
        a, b = (kaio.to_device(rng.standard_normal((N, N)).astype(npd)) for _ in range(2))
        c = kaio.to_device(np.zeros((N, N), npd))
        case = f"kaio.blas.gemm {N}^3 " + ("f16 (f32 accumulation)" if t == "f16" else "f32")

        def gemm(a=a, b=b, c=c):
            kaio.blas.gemm(a, b, out=c, stream=stream, backend=be)
        for name, cub in handles.items():
            def use(cub=cub):
                be._cublas = cub
            cases[(case, name)] = Case(gemm, use)
            if name == "ctypes":
                def before(cub=cub, gemm=gemm):
                    cub.stream = None      # forgets the bound stream: set again on every call
                    gemm()
                cases[(case, "ctypes, stream set per call (before)")] = Case(before, use)
    for name, cub in handles.items():   # the binding alone: prebuilt arguments, f32
        a, b, c = (kaio.to_device(np.zeros((N, N), np.float32)) for _ in range(3))
        al, bt = np.ones(1, np.float32), np.zeros(1, np.float32)
        args = gemm_args(column_major_call((N, N), (N, N), False, False), "f32", False,
                         (a.ptr, b.ptr, c.ptr), al.ctypes.data, bt.ctypes.data)

        def alone(cub=cub, args=args, keep=(a, b, c, al, bt)):   # keep: the buffers stay alive
            cub.binding.gemm_ex(cub.handle, *args)

        def bind(cub=cub):
            cub.binding.set_stream(cub.handle, stream.handle)
            cub.stream = stream.handle
        cases[(f"cublasGemmEx alone {N}^3 f32", name)] = Case(alone, bind)
    return cases


def torch_cases() -> dict:
    """torch.matmul on torch's current stream (cuBLAS, torch's own binding); {} without torch."""
    try:
        import torch  # optional: the scale
        if not torch.cuda.is_available():
            return {}
    except ImportError:
        return {}
    cases = {}
    for label, dtype in (("f16", torch.float16), ("f32", torch.float32)):
        a, b = (torch.randn(N, N, device="cuda", dtype=dtype) for _ in range(2))
        c = torch.empty(N, N, device="cuda", dtype=dtype)
        cases[(f"torch.matmul {N}^3 {label}", "torch")] = Case(
            lambda a=a, b=b, c=c: torch.matmul(a, b, out=c), sync=torch.cuda.synchronize)
    return cases


def measure(cases: dict, sync, calls: int, rounds: int, clock) -> dict:
    """{key: (median host us per call, median us per call including the sync)}."""
    host = {k: [] for k in cases}
    total = {k: [] for k in cases}
    for c in cases.values():     # warm up: handles, allocators, caches
        if c.prepare:
            c.prepare()
        for _ in range(200):
            c.fn()
        (c.sync or sync)()
    for _ in range(rounds):
        for k, c in cases.items():
            if c.prepare:
                c.prepare()
            done = c.sync or sync
            done()
            fn = c.fn
            t0 = clock()
            for _ in range(calls):
                fn()
            t1 = clock()
            done()
            t2 = clock()
            host[k].append((t1 - t0) / calls * 1e6)
            total[k].append((t2 - t0) / calls * 1e6)
    return {k: (statistics.median(host[k]), statistics.median(total[k])) for k in cases}


def own_cost(results: dict) -> dict:
    """{binding: kaio.blas.gemm's f32 host us minus the bare binding call's}: kaio's own cost."""
    out = {}
    for binding in CB.BINDINGS:
        call = results.get((f"kaio.blas.gemm {N}^3 f32", binding))
        bare = results.get((f"cublasGemmEx alone {N}^3 f32", binding))
        if call and bare:
            out[binding] = round(call[0] - bare[0], 3)
    return out


def report(results: dict, missing: dict, device: str, fake: bool) -> tuple[str, dict]:
    lines = [f"kaio.blas.gemm call overhead on {device}" + (" (fake driver and bindings: kaio's own "
             "CPU time)" if fake else ""),
             f"default binding: {CB.PREFERRED_BINDING} (kaio.backends.cublas_bindings.PREFERRED_BINDING)",
             "", "| case | binding | host us/call (median) | us/call with sync |", "|---|---|---|---|"]
    for (case, binding), (h, t) in results.items():
        lines.append(f"| {case} | {binding} | {h:.2f} | {t:.2f} |")
    for binding, d in own_cost(results).items():
        lines.append(f"| kaio's own: kaio.blas.gemm {N}^3 f32 minus cublasGemmEx alone | {binding} "
                     f"| {d:.2f} | |")
    for name, why in missing.items():
        lines.append(f"| (all) | {name} | unavailable: {why} | |")
    verdict = {}
    for (case, binding), (h, _) in results.items():
        other = results.get((case, "ctypes"))
        if binding == "nvmath" and other and case.startswith("kaio.blas.gemm"):
            verdict[case] = round(h - other[0], 3)
    if verdict:
        lines.append("")
        worst = max(verdict.values())
        for case, d in verdict.items():
            lines.append(f"nvmath - ctypes, {case}: {d:+.2f} us")
        keep = "nvmath" if worst <= TOLERANCE_US else "ctypes"
        lines.append(f"rule (nvmath default while within {TOLERANCE_US:g} us of ctypes): "
                     f"PREFERRED_BINDING = {keep!r}" + ("" if keep == CB.PREFERRED_BINDING else
                                                        "  <-- differs from the current default"))
    return "\n".join(lines), verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=500, help="calls per round (default 500)")
    ap.add_argument("--rounds", type=int, default=200, help="rounds; the median is reported")
    ap.add_argument("--out", help="folder for blas_overhead.md and blas_overhead.json")
    ap.add_argument("--fake", action="store_true", help="no GPU: kaio's own cost on fakes")
    args = ap.parse_args()
    if args.fake:
        use_fakes()
    kaio.set_backend("cuda")      # kaio.to_device and kaio.Stream follow the current backend
    be = kaio.get_backend("cuda")
    handles, missing = open_handles(be)
    if not handles:
        print("no cuBLAS binding works here: " + "; ".join(f"{k}: {v}" for k, v in missing.items()))
        return 1
    stream = kaio.Stream()
    cases = kaio_cases(be, handles, stream)
    if not args.fake:
        cases.update(torch_cases())
    clock = time.process_time if args.fake else time.perf_counter
    results = measure(cases, stream.synchronize, args.calls, args.rounds, clock)
    text, verdict = report(results, missing, be.props.name, args.fake)
    print(text)
    data = {"device": be.props.name, "fake": args.fake, "calls": args.calls, "rounds": args.rounds,
            "default": CB.PREFERRED_BINDING, "missing": missing, "nvmath_minus_ctypes_us": verdict,
            "kaio_own_us": own_cost(results),
            "us_per_call": {f"{c} [{b}]": [round(h, 3), round(t, 3)] for (c, b), (h, t) in results.items()}}
    print(json.dumps(data))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "blas_overhead.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(args.out, "blas_overhead.json"), "w") as f:
            json.dump(data, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
