"""kaio's own CUDA runtime vs NVIDIA's ``cuda.core`` on the launch path (docs/runtime.md).

    python scripts/bench_cuda_core.py OUT_DIR [--launches 20000]

For the one-store kernel of scripts/bench_launch_overhead.py (same PTX, same device buffer), it
times N back-to-back launches through kaio (its rows from bench_launch_overhead, plus launches on
a non-default stream) and through ``cuda.core.launch`` (arguments prebuilt, and built per launch
as kaio does), then stream and event creation, event recording, graph replay and PTX loading
through each. Every figure is the best of 3 rounds, in microseconds per operation; all the
operations take turns within each round, so drift over the run biases them alike. It prints a
table and writes OUT_DIR/bench_cuda_core.json. Needs an NVIDIA GPU; without ``cuda.core``
installed the kaio rows are still measured and the JSON says why the others are missing.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_launch_overhead as blo  # noqa: E402  (the shared kernel, timer and kaio cases)
from bench_launch_overhead import Case  # noqa: E402

import kaio  # noqa: E402


def _cuda_core():
    """The cuda.core module (``cuda.core.experimental`` in releases before 0.4)."""
    try:
        import cuda.core as cc
        cc.launch  # noqa: B018  (old releases have the package but not the names)
        return cc
    except (ImportError, AttributeError):
        import cuda.core.experimental as cc
        return cc


def kaio_stream_cases(st, n: int) -> dict:
    """kaio launches on a non-blocking stream, and kaio's stream / event / module objects."""
    from kaio.backends.cuda import load_module
    from kaio.backends.cuda_driver import call
    s = kaio.Stream(non_blocking=True)
    cfg = blo.touch[1, 32, 0, s]
    ev = kaio.Event()
    few = max(200, n // 20)
    return {
        "kaio touch[1, 32, 0, stream](y, 2.0)": Case(lambda: cfg(st.y, 2.0), n),
        "kaio backend.launch(..., stream)": Case(
            lambda: st.be.launch(st.compiled, (1, 1, 1), (32, 1, 1), [st.y, 2.0], 0, s), n),
        "kaio.Stream() create + destroy": Case(lambda: kaio.Stream(), few),
        "kaio.Event() create + destroy": Case(lambda: kaio.Event(), few),
        "kaio Event.record(stream)": Case(lambda: ev.record(s), n),
        "kaio load PTX (cuModuleLoadDataEx + cuModuleGetFunction)": Case(
            lambda: call("cuModuleGetFunction", load_module(st.ptx), st.abi.entry.encode()),
            20, warmup=2),
    }


def cuda_core_cases(cc, st, n: int, errors: dict) -> dict:
    """The same operations through cuda.core (a launch is checked to have run first)."""
    dev = cc.Device(st.be.ctx.ordinal)
    dev.set_current()           # the primary context, the one kaio uses
    kernel = cc.ObjectCode.from_ptx(st.ptx.encode()).get_kernel(st.abi.entry)
    s = dev.create_stream(options=cc.StreamOptions(nonblocking=True))
    cfg = cc.LaunchConfig(grid=1, block=32)
    args = (np.uint64(st.y.ptr), np.int32(1), np.float32(5.0))
    cc.launch(s, cfg, kernel, *args)
    s.sync()
    if st.y.to_host()[0] != 5.0:
        errors["cuda.core launch result"] = f"y[0] = {st.y.to_host()[0]}, expected 5.0"
    timing = cc.EventOptions(timing_enabled=True)
    ev = dev.create_event(timing)
    few = max(200, n // 20)
    cases = {
        "cuda.core launch(stream, config, kernel, *args), args prebuilt": Case(
            lambda: cc.launch(s, cfg, kernel, *args), n),
        "cuda.core launch, LaunchConfig + args built per launch": Case(
            lambda: cc.launch(s, cc.LaunchConfig(grid=1, block=32), kernel, np.uint64(st.y.ptr),
                              np.int32(1), np.float32(5.0)), n),
        "cuda.core Device.create_stream() + close()": Case(lambda: dev.create_stream().close(), few),
        "cuda.core Device.create_event() + close()": Case(lambda: dev.create_event(timing).close(), few),
        "cuda.core Stream.record(event)": Case(lambda: s.record(ev), n),
        "cuda.core load PTX (ObjectCode.from_ptx + get_kernel)": Case(
            lambda: cc.ObjectCode.from_ptx(st.ptx.encode()).get_kernel(st.abi.entry), 20, warmup=2),
    }
    try:
        gb = s.create_graph_builder() if hasattr(s, "create_graph_builder") else dev.create_graph_builder()
        gb.begin_building()
        for _ in range(100):
            cc.launch(gb, cfg, kernel, *args)
        gb.end_building()
        g = gb.complete()
        cases["cuda.core graph replay, per captured launch"] = Case(
            lambda: g.launch(s), max(10, n // 100), per=100)
    except Exception:  # graphs came later to cuda.core than launch
        errors["cuda.core graph replay"] = traceback.format_exc(limit=3)
    return cases


def main() -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", help="folder for bench_cuda_core.json")
    ap.add_argument("--launches", type=int, default=20000)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, "bench_cuda_core.json")
    try:
        st = blo.setup()
    except kaio.BackendUnavailable as e:   # no NVIDIA GPU here: say so, in the JSON too
        with open(path, "w") as f:
            json.dump({"error": str(e)}, f, indent=1)
        print(f"cannot measure: {e}")
        return 2
    n = a.launches
    report = {"device": st.be.props.name, "launches": n, "errors": {}}
    try:
        import cuda.bindings
        report["cuda_bindings"] = cuda.bindings.__version__
    except (ImportError, AttributeError):
        pass
    cases = {**blo.kaio_cases(st, n), **kaio_stream_cases(st, n)}
    try:
        cc = _cuda_core()
        version = getattr(cc, "__version__", None)
        if version is None:
            import importlib.metadata
            version = importlib.metadata.version("cuda-core")
        report["cuda_core"] = {"available": True, "version": version}
        core = cuda_core_cases(cc, st, n, report["errors"])
    except ImportError as e:
        report["cuda_core"] = {"available": False,
                               "reason": f"cuda.core is not installed ({e}); pip install cuda-core"}
        core = {}
    except Exception:  # an API this script does not know: keep the kaio rows, say why
        report["errors"]["cuda.core setup"] = traceback.format_exc(limit=3)
        core = {}
    us = blo.measure({**cases, **core}, st.sync, errors=report["errors"])
    kaio_us = {k: v for k, v in us.items() if k in cases}
    core_us = {k: v for k, v in us.items() if k in core}
    report["us"] = {k: round(v, 3) for k, v in {**kaio_us, **core_us}.items()}
    # like for like: both prebuilt (the driver call's floor), both from Python values per launch
    pairs = [("cuda.core launch(stream, config, kernel, *args), args prebuilt",
              "raw cuLaunchKernel (cuda.bindings)"),
             ("cuda.core launch, LaunchConfig + args built per launch",
              "kaio backend.launch(..., stream)"),
             ("cuda.core graph replay, per captured launch", "kaio graph replay, per captured launch")]
    report["ratios"] = {f"{c} / {k}": round(core_us[c] / kaio_us[k], 3)
                        for c, k in pairs if c in core_us and k in kaio_us}
    blo.print_rows(f"kaio on {report['device']}, {n} launches, best of 3:", kaio_us)
    if core_us:
        blo.print_rows(f"cuda.core {report['cuda_core']['version']}:", core_us)
    elif "reason" in report.get("cuda_core", {}):
        print(report["cuda_core"]["reason"])
    for name, err in report["errors"].items():
        print(f"  failed: {name}\n{err}")
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
