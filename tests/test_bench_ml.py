"""``kaio bench --ml`` (benchmarks/bench_ml.py) without a GPU: the cases it enumerates, the bytes
it credits, the table it builds from (fake) timings, the command line, and the kaio side
(benchmarks/ml_kaio.py: the library's bench closures and what they launch) on the reference
backend. The GPU half (benchmarks/ml_runner.py) needs torch, Triton and a device."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import bench_ml as bm  # noqa: E402
import ml_kaio  # noqa: E402

from kaio import bench as kaio_bench  # noqa: E402
from kaio import cli  # noqa: E402


# --- cases -------------------------------------------------------------------------------------
def test_full_table_enumerates_every_op_dtype_and_shape():
    cases = bm.enumerate_cases()
    assert len(cases) == 3 * 3 * 3 + 4 * 2 * 3  # row ops x shapes x dtypes + elementwise
    got = {(c.op, c.dtype, c.shape) for c in cases}
    assert len(got) == len(cases)
    for dt in ("f32", "f16", "bf16"):
        for op in ("softmax", "rmsnorm", "layernorm"):
            for shape in ((4096, 1024), (4096, 8192), (1024, 32768)):
                assert (op, dt, shape) in got
        for op in ("silu_gate", "gelu_tanh", "gelu_exact"):
            assert (op, dt, (1 << 24,)) in got and (op, dt, (1 << 28,)) in got
        assert ("dequantize_int8", dt, (4096, 4096)) in got
        assert ("dequantize_int8", dt, (16384, 16384)) in got
    assert [c.op for c in cases[:9]] == ["softmax"] * 9  # op by op, in the table's order


def test_quick_is_one_shape_per_op_in_f32_and_f16():
    cases = bm.enumerate_cases(quick=True)
    assert [(c.op, c.dtype) for c in cases] == [(op, dt) for op in bm.OPS for dt in ("f32", "f16")]
    assert {c.shape for c in cases} == {(4096, 8192), (1 << 24,), (4096, 4096)}


def test_ops_and_dtypes_select_and_keep_table_order():
    cases = bm.enumerate_cases(ops=["gelu_exact", "softmax"], dtypes=["bf16"], quick=True)
    assert [(c.op, c.dtype, c.shape) for c in cases] == [
        ("softmax", "bf16", (4096, 8192)), ("gelu_exact", "bf16", (1 << 24,))]
    with pytest.raises(ValueError, match="unknown op gelu"):
        bm.enumerate_cases(ops=["gelu"])
    with pytest.raises(ValueError, match="unknown dtype f64"):
        bm.enumerate_cases(dtypes=["f64"])


def test_bytes_labels_and_copy_size():
    sm = bm.MlCase("softmax", "f32", (4096, 8192))
    assert sm.traffic_bytes == 2 * 4 * 4096 * 8192 and sm.label == "4096x8192"
    assert sm.copy_bytes == 4 * 4096 * 8192  # the copy reads and writes x: the same bytes
    assert bm.MlCase("rmsnorm", "f16", (4, 10)).traffic_bytes == 2 * 2 * 40 + 2 * 10
    assert bm.MlCase("layernorm", "bf16", (4, 10)).traffic_bytes == 2 * 2 * 40 + 2 * 2 * 10
    silu = bm.MlCase("silu_gate", "f16", (1 << 24,))
    assert silu.traffic_bytes == 3 * 2 * (1 << 24) and silu.label == "2^24"
    assert bm.MlCase("gelu_exact", "bf16", (1 << 28,)).traffic_bytes == 2 * 2 * (1 << 28)
    dq = bm.MlCase("dequantize_int8", "f32", (16384, 16384))
    assert dq.traffic_bytes == (1 << 28) * (1 + 4) + 4 * 16384
    assert dq.label == "2^28 (16384x16384)"
    assert dq.copy_bytes % 16 == 0 and 0 <= dq.traffic_bytes - 2 * dq.copy_bytes < 32


# --- the table ---------------------------------------------------------------------------------
def _fake_result(kaio=0.1644, triton=0.0705, torch=0.1432, copy_gbps=4000.0):
    r = bm.new_result(bm.MlCase("softmax", "f32", (4096, 8192)))
    for name, ms in (("kaio", kaio), ("triton", triton), ("torch", torch)):
        if ms is None:
            r["impls"][name] = {"error": "check failed: max |err| 0.5 | bad"}
        else:
            r["impls"][name] = {"ms": ms, "gbps": r["bytes"] / ms / 1e6, "max_err": 1e-9}
    r["copy"] = {"ms": 0.0671, "gbps": copy_gbps}
    r["kaio_kernels"] = [{"name": "softmax", "regs": 40, "local_bytes": 0}]
    r["triton_kernel"] = {"regs": 32, "local_bytes": 8}
    return r


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def test_row_has_times_ratio_rates_and_registers():
    r = _fake_result()
    assert bm.ratio(r) == pytest.approx(0.1644 / 0.0705)
    cells = _cells(bm.table_row(r))
    head = _cells(bm.TABLE_HEAD)
    assert len(cells) == len(head)
    row = dict(zip(head, cells))
    assert (row["op"], row["dtype"], row["shape"]) == ("softmax", "f32", "4096x8192")
    assert (row["kaio us"], row["Triton us"], row["torch us"]) == ("164.4", "70.5", "143.2")
    assert row["kaio / best"] == "2.33x"
    kaio_gbps = 2 * 4 * 4096 * 8192 / 0.1644 / 1e6  # 1633 GB/s, 41% of 4000
    assert row["kaio GB/s"] == f"{kaio_gbps:.0f} ({100 * kaio_gbps / 4000:.0f}%)" == "1633 (41%)"
    assert row["Triton GB/s"] == "3808 (95%)"
    assert row["copy GB/s"] == "4000"
    assert row["kaio regs/local B"] == "softmax 40/0"
    assert row["Triton regs/local B"] == "32/8"


def test_failed_cells_are_marked_and_keep_the_row():
    r = _fake_result(triton=None)
    row = dict(zip(_cells(bm.TABLE_HEAD), _cells(bm.table_row(r))))
    assert row["Triton us"].startswith("FAIL: check failed")
    assert "|" not in row["Triton us"]  # a message's '|' must not split the table
    assert row["Triton GB/s"] == "—"
    assert row["kaio / best"] == f"{0.1644 / 0.1432:.2f}x"  # against the one that passed
    r = _fake_result(kaio=None)
    assert bm.ratio(r) is None
    assert dict(zip(_cells(bm.TABLE_HEAD), _cells(bm.table_row(r))))["kaio / best"] == "—"
    broken = bm.new_result(bm.MlCase("gelu_tanh", "bf16", (1 << 24,)))
    broken["error"] = "RuntimeError: out of memory"
    cells = _cells(bm.table_row(broken))
    assert len(cells) == len(_cells(bm.TABLE_HEAD)) and cells[3] == "FAIL: RuntimeError: out of memory"


def test_row_and_markdown_say_what_the_autotuner_chose_and_tried():
    r = _fake_result()
    r["kaio_config"] = [{"tuner": "kaio.kernels.ml.softmax", "config": "resident 512x16 v4 r40",
                         "source": "tuned",
                         "tried": [{"config": "resident 512x16 v4 r40", "ms": 0.0861},
                                   {"config": "resident 1024x8 v4 r64", "ms": 0.0902},
                                   {"config": "3-pass 256", "error": "LaunchError: too many"},
                                   {"config": "3-pass 1024", "mismatch": "output 0: max |diff| 1"}]}]
    row = dict(zip(_cells(bm.TABLE_HEAD), _cells(bm.table_row(r))))
    assert row["kaio config (autotune)"] == "resident 512x16 v4 r40 (tuned)"
    assert dict(zip(_cells(bm.TABLE_HEAD), _cells(bm.table_row(_fake_result()))))[
        "kaio config (autotune)"] == "—"
    text = bm.markdown(["device: fake"], [r])
    assert ("- softmax f32 4096x8192 (tuned): resident 512x16 v4 r40* 86.1; resident 1024x8 v4 r64 "
            "90.2; 3-pass 256 error (LaunchError: too many); 3-pass 1024 mismatch") in text


def test_markdown_lists_failures_and_outputs_are_written(tmp_path):
    results = [_fake_result(), _fake_result(triton=None)]
    text = bm.write_outputs(str(tmp_path), ["device: fake"], results)
    lines = text.splitlines()
    assert lines[0] == "device: fake"
    sep = lines[lines.index(bm.TABLE_HEAD) + 1]
    assert sep.count("---") == len(_cells(bm.TABLE_HEAD))
    assert "Failures:" in lines and any(ln.startswith("- softmax f32 4096x8192 triton: check failed")
                                        for ln in lines)
    assert (tmp_path / "bench_ml.md").read_text() == text
    saved = json.loads((tmp_path / "bench_ml.json").read_text())
    assert saved["header"] == ["device: fake"] and saved["results"][0]["impls"]["kaio"]["ms"] == 0.1644


def test_run_table_records_every_case_and_stops_at_the_time_limit(tmp_path, capsys):
    cases = bm.enumerate_cases(ops=["softmax", "gelu_tanh"], quick=True)
    ticks = iter(range(0, 1000, 10))  # every clock() call advances 10 s

    def run_case(case):
        if case.dtype == "f16":
            raise AssertionError("run_table must not be reached for a skipped case")
        r = bm.new_result(case)
        r["impls"]["kaio"] = {"ms": 1.0, "gbps": case.traffic_bytes / 1e6}
        r["impls"]["torch"] = {"error": "RuntimeError: boom"}
        return r

    # clock: start 0; case 1 check 10 -> run, print 20; case 2 check 30 > 25 -> skipped ...
    results = bm.run_table(cases, run_case, str(tmp_path), ["h"], time_limit=25,
                           clock=lambda: next(ticks))
    assert len(results) == len(cases) == 4
    assert results[0]["impls"]["kaio"]["ms"] == 1.0
    assert all(r["error"].startswith("skipped: past --time-limit 25") for r in results[1:])
    out = capsys.readouterr().out
    assert "[1/4" in out and "[4/4" in out and "torch FAIL: RuntimeError: boom" in out
    assert len(json.loads((tmp_path / "bench_ml.json").read_text())["results"]) == 4


# --- command line ------------------------------------------------------------------------------
def test_bench_ml_options_parse():
    a = bm.parse_args(["--quick", "--ops", "softmax, gelu_exact", "--dtypes", "bf16", "--out", "d",
                       "--time-limit", "240"])
    assert a.quick and a.ops == ["softmax", "gelu_exact"] and a.dtypes == ["bf16"]
    assert (a.out, a.time_limit, a.reps, a.rounds) == ("d", 240.0, 20, 5)


def test_kaio_bench_routes_ml_to_bench_ml(monkeypatch):
    assert kaio_bench.route(["--ml", "--quick"]) == ("bench_ml.py", ["--quick"])
    assert kaio_bench.route(["--quick", "--ml"]) == ("bench_ml.py", ["--quick"])
    assert kaio_bench.route(["--quick"]) == ("bench_gpu.py", ["--quick"])
    ran = []
    monkeypatch.setattr(kaio_bench.runpy, "run_path",
                        lambda path, run_name: ran.append((path, list(sys.argv), run_name)))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    assert cli.main(["bench", "--ml", "--quick"]) == 0
    path, argv, run_name = ran[0]
    assert path.endswith(os.path.join("benchmarks", "bench_ml.py")) and os.path.exists(path)
    assert argv == [path, "--quick"] and run_name == "__main__"
    assert cli.main(["bench"]) == 0
    assert ran[1][0].endswith("bench_gpu.py")


def test_unknown_op_is_a_usage_error(capsys):
    assert bm.main(["--ops", "nope"]) == 2
    assert "unknown op nope" in capsys.readouterr().err


# --- the kaio side, on the reference backend ---------------------------------------------------
def _inputs(op: str, dt: str, rng):
    from kaio.kernels._launch import np_dtype
    d = np_dtype(dt)
    if op in bm.ROW_OPS:
        inp = {"x": rng.normal(0, 2, (5, 300)).astype(d)}
        if op != "softmax":
            inp["w"] = rng.uniform(0.5, 1.5, 300).astype(d)
        if op == "layernorm":
            inp["b"] = rng.uniform(-0.5, 0.5, 300).astype(d)
        return inp
    if op == "dequantize_int8":
        return {"q": rng.integers(-128, 128, (6, 50), dtype=np.int8),
                "scale": rng.uniform(0.001, 0.05, 6).astype(np.float32)}
    inp = {"x": rng.uniform(-6, 6, 700).astype(d)}
    if op == "silu_gate":
        inp["gate"] = rng.uniform(-6, 6, 700).astype(d)
    return inp


def _numpy_ref(op, inp):
    from kaio.kernels.ml import elementwise as ew
    from kaio.kernels.ml import norms, quant
    return {"softmax": lambda: norms.softmax_ref(inp["x"]),
            "rmsnorm": lambda: norms.rmsnorm_ref(inp["x"], inp["w"], 1e-6),
            "layernorm": lambda: norms.layernorm_ref(inp["x"], inp["w"], inp["b"], 1e-5),
            "silu_gate": lambda: ew.silu_gate_ref(inp["x"], inp["gate"]),
            "gelu_tanh": lambda: ew.gelu_tanh_ref(inp["x"]),
            "gelu_exact": lambda: ew.gelu_exact_ref(inp["x"]),
            "dequantize_int8": lambda: quant.dequantize_ref(inp["q"], inp["scale"])}[op]()


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("op", bm.OPS)
def test_kaio_closure_is_the_library_kernel_and_its_output_is_found(reference, op, dt):
    inp = _inputs(op, dt, np.random.default_rng(1))
    assert set(inp) == set(ml_kaio.INPUT_KEYS[op])
    launch, source = ml_kaio.kaio_closure(op, dt, inp)
    assert ml_kaio.case_name(op, dt) in source or (op == "dequantize_int8" and "dequantize_launch" in source)
    with ml_kaio.LaunchSpy() as spy:
        launch()
    import kaio
    assert "_launch_planned" not in vars(kaio.get_backend())  # the spy is gone
    out = spy.output()
    assert out is not None and out.dtype == np.dtype(ml_kaio.np_dtype(dt))
    want = _numpy_ref(op, inp)
    got = out.to_host().astype(np.float64).reshape(want.shape)
    rtol = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}[dt]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)
    ks = spy.kernels()
    assert ks and all(k["block"] is not None and k["regs"] is None and k["local_bytes"] is None
                      for k in ks)  # no driver here


def test_tune_runs_the_first_call_and_reports_the_autotuners_choice(reference, monkeypatch, tmp_path):
    """ml_kaio.tune: the first call of a row op's bench closure makes the autotuner's choice (here
    with a fake timer that makes a non-default candidate the fastest); ops without a tuner
    report nothing."""
    from kaio import autotune
    from kaio.cache import CompileCache
    from kaio.kernels.ml import row_tuning
    monkeypatch.setattr(row_tuning, "TUNE_MIN_ELEMENTS", 0)
    autotune.set_autotune_cache(CompileCache(tmp_path / "autotune", disk=True))
    row_tuning.TUNERS["rmsnorm"].forget()
    try:
        inp = _inputs("rmsnorm", "f32", np.random.default_rng(2))
        rows, cols = inp["x"].shape
        configs = row_tuning.row_configs("f32", "f32", rows, cols)
        fast = configs[-1].name
        launch, _ = ml_kaio.kaio_closure("rmsnorm", "f32", inp)
        with autotune.use_timer(lambda run, c: 1.0 if c.name == fast else 2.0):
            [got] = ml_kaio.tune(launch)
            assert (got["tuner"], got["config"], got["source"]) == ("kaio.kernels.ml.rmsnorm", fast, "tuned")
            assert [t["config"] for t in got["tried"]] == [c.name for c in configs]
            assert [t["ms"] for t in got["tried"]] == [2.0] * (len(configs) - 1) + [1.0]
            launch, _ = ml_kaio.kaio_closure("rmsnorm", "f32", inp)
            assert [c["source"] for c in ml_kaio.tune(launch)] == ["memory"]
            launch, _ = ml_kaio.kaio_closure("rmsnorm", "f32", inp)
            assert [c["source"] for c in ml_kaio.tune(launch, fresh=True)] == ["tuned"]
        assert bm.parse_args([]).autotune == "fresh"
        assert bm.parse_args(["--autotune", "cached"]).autotune == "cached"
        gelu = _inputs("gelu_tanh", "f32", np.random.default_rng(2))
        launch, _ = ml_kaio.kaio_closure("gelu_tanh", "f32", gelu)
        assert ml_kaio.tune(launch) == []
    finally:
        row_tuning.TUNERS["rmsnorm"].forget()
        autotune.set_autotune_cache(None)


def test_bench_gpu_timed_is_the_autotuners_event_timer(reference):
    """benchmarks/bench_gpu.py's timer and the autotuner's are one function: warm-up calls, then
    ``rounds`` timings of ``reps`` calls between the given events."""
    import bench_gpu

    import kaio
    made, calls = [], []

    def event():
        made.append(kaio.Event())
        return made[-1]
    ms = bench_gpu.timed(lambda: calls.append(1), reps=4, rounds=3, warmup=2, event=event,
                         synchronize=kaio.synchronize)
    assert len(calls) == 2 + 4 * 3 and len(made) == 2 * 3 and ms >= 0.0


def test_function_attributes_without_a_function():
    assert ml_kaio.function_attributes(None) == {"regs": None, "local_bytes": None,
                                                 "static_shared_bytes": None}


def test_unknown_closure_is_a_lookup_error(reference):
    with pytest.raises(LookupError, match="ml/nope_f16"):
        ml_kaio.kaio_closure("nope", "f16", {})


# --- the Triton kernels compile for sm_90 (where Triton is installed; it needs no GPU) ----------
@pytest.mark.parametrize("dt", ["fp32", "fp16", "bf16"])
def test_triton_kernels_compile_for_sm90(dt):
    triton = pytest.importorskip("triton")
    import triton_ml as tm
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    for name, (fn, types) in tm.KERNELS.items():
        sig = {a: t.replace("T", dt) for a, t in zip(fn.arg_names, types)}
        sig["BLOCK"] = "constexpr"
        block = 8192 if name in bm.ROW_OPS else tm.ELEMENTWISE_BLOCK
        compiled = triton.compile(ASTSource(fn=fn, signature=sig, constexprs={"BLOCK": block}),
                                  target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": tm.row_warps(block)})
        assert ".entry" in compiled.asm["ptx"], name


# --- the GPU half's logic on the CPU (where torch and Triton are installed; CI has neither) -----
def test_run_case_on_cpu_checks_times_and_marks_failures(reference, monkeypatch):
    """ml_runner.run_case end to end with torch on the CPU, kaio on the reference backend and
    Triton's launchers replaced by torch code (one deliberately wrong): every kaio and torch cell
    is checked and timed, the wrong one is marked, nothing raises."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    import ml_runner as mr
    import triton_ml as tm

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda *a, **k: None)

    def host_view(arr, dtype):  # torch_view needs CUDA: read the reference backend's memory
        h = arr.to_host()
        if dtype == torch.bfloat16:
            return torch.from_numpy(h.view(np.int16)).view(dtype)
        return torch.from_numpy(h)

    monkeypatch.setattr(mr, "torch_view", host_view)

    def fake(compute):
        def launch(*args):
            compute(*args)
            return type("Compiled", (), {"n_regs": 40, "n_spills": 2, "function": None})()
        return launch

    monkeypatch.setattr(tm, "softmax", fake(lambda x, y: y.copy_(torch.softmax(x.float(), 1))))
    monkeypatch.setattr(tm, "gelu_exact", fake(lambda x, y: y.copy_(x)))  # wrong on purpose
    monkeypatch.setattr(tm, "dequantize_int8", fake(lambda q, s, y: y.copy_(q.float() * s[:, None])))
    env = object.__new__(mr.Env)
    env.dev, env.copy_rates, env.kaio_error = torch.device("cpu"), {}, None
    env.timer = lambda fn: (fn(), 0.5)[1]
    for case in (bm.MlCase("softmax", "bf16", (8, 300)), bm.MlCase("gelu_exact", "f16", (1000,)),
                 bm.MlCase("dequantize_int8", "f16", (6, 50))):
        r = mr.run_case(case, env)
        assert r["error"] is None, r["error"]
        for name in ("kaio", "torch") + (("triton",) if case.op != "gelu_exact" else ()):
            cell = r["impls"][name]
            assert cell.get("ms") == 0.5 and cell["max_err"] <= 0.02, (case, name, cell)
        assert case.op in r["kaio_kernels"][0]["name"]  # e.g. softmax_resident
        tuned = ["reference backend"] if case.op == "softmax" else []  # only the row ops tune
        assert [c["source"] for c in r["kaio_config"]] == tuned
        assert r["copy"]["gbps"] == 2 * case.copy_bytes / 0.5 / 1e6
        if case.op == "gelu_exact":
            assert r["impls"]["triton"]["error"].startswith("check failed")
        else:
            assert r["triton_kernel"]["regs"] == 40 and r["triton_kernel"]["local_bytes"] == 8
