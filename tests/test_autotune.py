"""kaio.autotune: selection, in-memory and on-disk caching, damaged records, key separation, the
switches that keep the default, and the row ops choosing through it. Timings come from an
injected fake timer (the reference backend's timings mean nothing)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import kaio
from kaio import autotune
from kaio.autotune import Autotuner, Config, tuned
from kaio.cache import CompileCache


@kaio.kernel
def scale_by(x: kaio.In[kaio.f32], y: kaio.Out[kaio.f32], a: kaio.f32):
    for i in y.owned():
        y[i] = x[i] * a


@pytest.fixture
def store(tmp_path):
    """A fresh on-disk record store for the test (and the process default restored after)."""
    cache = CompileCache(tmp_path / "autotune", disk=True)
    autotune.set_autotune_cache(cache)
    yield cache
    autotune.set_autotune_cache(None)


class FakeTimer:
    """ms per config name; counts what it timed."""

    def __init__(self, ms: dict):
        self.ms, self.timed = ms, []

    def __call__(self, run, config):
        run()
        self.timed.append(config.name)
        return self.ms[config.name]


CONFIGS = [Config("a", factor=1.0), Config("b", factor=1.0), Config("c", factor=1.0)]


def make_tuner(name="t.scale", configs=CONFIGS, **kw):
    def fn(x, y, *, config):
        scale_by(x, y, config.factor * 2.0)
    return Autotuner(fn, name=name, configs=configs, key=lambda x, y: [list(x.shape)],
                     outputs=lambda x, y: [y], **kw)


def call(tuner, n=64):
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    tuner(x, y)
    np.testing.assert_array_equal(y, 2.0 * x)  # the real call still writes the caller's array
    return y


def test_fastest_candidate_is_chosen_and_recorded(reference, store):
    timer = FakeTimer({"a": 3.0, "b": 1.0, "c": 2.0})
    tuner = make_tuner()
    with autotune.use_timer(timer), autotune.choices() as got:
        call(tuner)
    assert timer.timed == ["a", "b", "c"]
    assert [(name, c.config.name, c.source) for name, _, c in got] == [("t.scale", "b", "tuned")]
    [rec] = autotune.records()
    assert rec["chosen"] == "b" and rec["default"] == "a" and rec["key"] == [[64]]
    assert [t["ms"] for t in rec["tried"]] == [3.0, 1.0, 2.0]
    assert "b" in autotune.format_record(rec) and "<- chosen" in autotune.format_record(rec)


def test_second_call_and_a_new_process_use_the_winner_without_timing(reference, store, tmp_path):
    timer = FakeTimer({"a": 3.0, "b": 2.0, "c": 1.0})
    with autotune.use_timer(timer):
        call(make_tuner())
        with autotune.choices() as got:
            tuner = make_tuner()
            call(tuner)
            call(tuner)
    assert timer.timed == ["a", "b", "c"]  # tuned once only
    assert [c.source for _, _, c in got] == ["cache", "memory"]
    # a "new process": fresh in-memory state and a fresh cache object over the same folder
    autotune.set_autotune_cache(CompileCache(tmp_path / "autotune", disk=True))
    with autotune.use_timer(timer), autotune.choices() as got:
        call(make_tuner())
    assert timer.timed == ["a", "b", "c"] and got[0][2].config.name == "c"
    assert got[0][2].source == "cache"


def test_the_default_stays_unless_beaten_by_more_than_the_margin(reference, store):
    for other_ms, want in ((0.99, "a"), (0.97, "b")):
        timer = FakeTimer({"a": 1.0, "b": other_ms, "c": 2.0})
        with autotune.use_timer(timer), autotune.choices() as got:
            call(make_tuner(name=f"t.margin{other_ms}"))
        assert got[0][2].config.name == want and got[0][2].record["chosen"] == want


def test_fresh_tunes_again_and_replaces_the_winner(reference, store):
    tuner = make_tuner()
    with autotune.use_timer(FakeTimer({"a": 3.0, "b": 1.0, "c": 2.0})):
        call(tuner)
    timer = FakeTimer({"a": 3.0, "b": 2.0, "c": 1.0})
    with autotune.use_timer(timer), autotune.choices() as got:
        with autotune.fresh():
            call(tuner)
        call(tuner)
        call(make_tuner())  # another instance: reads the replaced record
    assert [(c.config.name, c.source) for _, _, c in got] == [("c", "tuned"), ("c", "memory"), ("c", "cache")]
    assert timer.timed == ["a", "b", "c"] and len(autotune.records()) == 1


def test_a_damaged_record_is_deleted_and_tuned_again(reference, store):
    timer = FakeTimer({"a": 3.0, "b": 1.0, "c": 2.0})
    with autotune.use_timer(timer):
        call(make_tuner())
    [key] = store.stored_keys()
    path = store.path(key)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # flip bits in the JSON payload: its checksum no longer matches
    path.write_bytes(bytes(data))
    fresh = CompileCache(store.directory, disk=True)
    autotune.set_autotune_cache(fresh)
    with autotune.use_timer(timer), autotune.choices() as got:
        call(make_tuner())
    assert got[0][2].source == "tuned" and timer.timed == ["a", "b", "c"] * 2
    assert fresh.stats["corrupt"] == 1 and len(autotune.records()) == 1


def test_a_record_naming_no_current_candidate_is_ignored(reference, store):
    with autotune.use_timer(FakeTimer({"a": 3.0, "b": 1.0, "c": 2.0})):
        call(make_tuner())
    [key] = store.stored_keys()
    rec = json.loads(store.get(key))
    store.put(key, json.dumps(dict(rec, chosen="gone")))
    timer = FakeTimer({"a": 1.0, "b": 2.0, "c": 3.0})
    with autotune.use_timer(timer), autotune.choices() as got:
        call(make_tuner())
    assert got[0][2].source == "tuned" and got[0][2].config.name == "a"


def test_keys_tuner_names_and_devices_are_tuned_separately(reference, store, monkeypatch):
    timer = FakeTimer({"a": 3.0, "b": 1.0, "c": 2.0})
    with autotune.use_timer(timer):
        tuner = make_tuner()
        call(tuner, 64)
        call(tuner, 96)
        call(make_tuner(name="t.other"), 64)
        monkeypatch.setattr(autotune, "device_id", lambda backend=None: "cuda:Fake GPU:sm_90:ptx")
        call(make_tuner(), 64)
    assert len(timer.timed) == 12
    recs = autotune.records()
    assert sorted((r["tuner"], r["device"], r["key"][0][0]) for r in recs) == [
        ("t.other", "reference", 64), ("t.scale", "cuda:Fake GPU:sm_90:ptx", 64),
        ("t.scale", "reference", 64), ("t.scale", "reference", 96)]


def test_failing_and_disagreeing_candidates_are_skipped(reference, store):
    def fn(x, y, *, config):
        if config.name == "broken":
            raise RuntimeError("does not build")
        scale_by(x, y, config.factor)
    configs = [Config("slow", factor=2.0), Config("broken", factor=2.0), Config("wrong", factor=3.0),
               Config("fast", factor=2.0)]
    tuner = Autotuner(fn, name="t.skip", configs=configs, key=lambda x, y: [x.size],
                      outputs=lambda x, y: [y], check=(0.0, 1e-6))
    timer = FakeTimer({"slow": 5.0, "wrong": 0.1, "fast": 1.0})
    with autotune.use_timer(timer), autotune.choices() as got:
        call(tuner)
    assert got[0][2].config.name == "fast" and timer.timed == ["slow", "fast"]
    tried = {t["config"]: t for t in autotune.records()[0]["tried"]}
    assert "does not build" in tried["broken"]["error"]
    assert "max |diff|" in tried["wrong"]["mismatch"] and "ms" not in tried["wrong"]


def test_switches_keep_the_default_without_timing(reference, store, monkeypatch):
    timer = FakeTimer({"a": 3.0, "b": 1.0, "c": 2.0})
    with autotune.choices() as got:
        call(make_tuner())  # reference backend, no timer: nothing timed, nothing recorded
    assert got[0][2].config.name == "a" and got[0][2].source == "reference backend"
    with autotune.use_timer(timer), autotune.choices() as got:
        call(make_tuner(tune_when=lambda key: key[0][0] > 1000))
    assert got[0][2].source == "not tuned at this size"
    monkeypatch.setenv("KAIO_AUTOTUNE", "0")
    with autotune.use_timer(timer), autotune.choices() as got:
        call(make_tuner())
    assert got[0][2].config.name == "a" and got[0][2].source == "disabled"
    assert timer.timed == [] and autotune.records() == []


def test_decorator_form_and_the_command(reference, store, capsys):
    @tuned(configs=[Config("x1", factor=1.0), Config("x2", factor=1.0)], key=lambda x, y: [x.size])
    def twice(x, y, *, config):
        scale_by(x, y, 2.0 * config.factor)

    assert twice.name.endswith("twice")
    with autotune.use_timer(FakeTimer({"x1": 2.0, "x2": 1.0})):
        call(twice)
    from kaio import cli
    assert cli.main(["autotune", "--show"]) == 0
    out = capsys.readouterr().out
    assert "twice" in out and "x2" in out and "<- chosen" in out
    assert cli.main(["autotune", "--clear"]) == 0
    assert autotune.records() == []


def test_config_attributes_and_identity():
    c = Config("b256", block=256)
    assert c.block == 256 and c == Config("b256", block=256) and hash(c) == hash(Config("b256", block=256))
    assert c != Config("b256", block=512)
    with pytest.raises(AttributeError, match="no parameter 'warps'"):
        _ = c.warps


def test_repeated_config_names_are_refused():
    t = Autotuner(name="t.dup", configs=[Config("a"), Config("a")])
    with pytest.raises(ValueError, match="repeat"):
        t.configs(None)


# --- the row ops -------------------------------------------------------------------------------
@pytest.fixture
def row_tuners(monkeypatch):
    from kaio.kernels.ml import row_tuning
    monkeypatch.setattr(row_tuning, "TUNE_MIN_ELEMENTS", 0)  # tune the small test shapes
    for t in row_tuning.TUNERS.values():
        t.forget()
    yield row_tuning
    for t in row_tuning.TUNERS.values():
        t.forget()


@pytest.mark.parametrize("op", ["softmax", "rmsnorm", "layernorm"])
def test_row_ops_run_the_autotuners_winner_within_their_tolerance(reference, store, row_tuners, op):
    from kaio.kernels import REGISTRY
    from kaio.kernels.ml import norms
    shape = (2, 1024)
    configs = row_tuners.row_configs("f32", "f32", *shape)
    assert configs[0].name == "resident 256x4 v4 r64"  # the table's choice comes first
    assert len(configs) == 8
    want = "resident 128x8 v4 r40"
    timer = FakeTimer({c.name: (0.5 if c.name == want else 1.0) for c in configs})
    case = REGISTRY.get(f"ml/{op}")
    inputs = case.make_inputs(shape, seed=1)
    with autotune.use_timer(timer), autotune.choices() as got:
        out = case.run(inputs)
    assert [(c.config.name, c.source) for _, _, c in got] == [(want, "tuned")]
    assert timer.timed == [c.name for c in configs]  # every candidate agreed with the default
    ok, ratio = case.check(out, case.reference(inputs))
    assert ok, ratio
    with autotune.choices() as got:  # later calls: the remembered winner, no timing
        norms.row_kernel(op, "f32", "f32", shape)
        case.run(inputs)
    assert [(c.config.name, c.source) for _, _, c in got] == [(want, "memory")]


def test_autotune_rows_script_reports_each_ops_decision(reference, store):
    """benchmarks/autotune_rows.py (the device_run.sh step): one line per op; on the reference
    backend the table's default, untimed."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import autotune_rows
    assert autotune_rows.tune_shape(2, 1000, "f16") == [
        f"{op} f16 2x1000: resident 128x8 v8 r64 (reference backend)"
        for op in ("softmax", "rmsnorm", "layernorm")]


def test_row_ops_untuned_on_the_reference_backend(reference, store):
    """Without a timer (the reference backend) the row ops launch the table's choice, as before
    the autotuner: the launch shape of norms.resident_plan and nothing recorded."""
    from kaio.kernels.ml import norms, row_tuning
    for t in row_tuning.TUNERS.values():
        t.forget()
    x = np.random.default_rng(0).standard_normal((2, 1000)).astype(np.float32)
    with autotune.choices() as got:
        norms.softmax(x)
    [(_, key, choice)] = got
    assert key == ["f32", "f32", 2, 1000] and choice.source == "reference backend"
    assert choice.config.params == {"kind": "resident", "threads": 256, "per": 4, "vec": 4, "regs": 64}
    assert autotune.records() == []


def test_event_timer_counts_warmup_and_timed_calls(reference):
    calls = []
    ms = autotune.event_timer(lambda: calls.append(1), warmup=3, reps=4, rounds=5)
    assert len(calls) == 3 + 4 * 5 and ms >= 0.0


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["softmax", "rmsnorm", "layernorm"])
def test_row_ops_tune_on_the_gpu_and_a_new_process_reads_the_winner(op, store, tmp_path):
    """On a real GPU: the first call at a shape times every candidate with events (each one
    agreeing with the default), the result is within the op's tolerance, and a fresh process
    state reads the winner from disk without timing."""
    from kaio import backends as be
    from kaio.kernels import REGISTRY
    from kaio.kernels.ml import row_tuning
    from kaio.showcase import pick_backend
    previous = be._current
    kaio.set_backend(pick_backend(None))
    row_tuning.TUNERS[op].forget()
    try:
        case = REGISTRY.get(f"ml/{op}_f16")
        inputs = case.make_inputs((2048, 4096), seed=3)
        with autotune.choices() as got:
            out = case.run(inputs)
        [(_, key, choice)] = got
        assert key == ["f16", "f16", 2048, 4096] and choice.source == "tuned"
        tried = choice.record["tried"]
        assert [t["config"] for t in tried] == [c.name for c in row_tuning.row_configs(*key)]
        assert all(t.get("ms", 0) > 0 for t in tried), tried  # none failed or disagreed
        ok, ratio = case.check(out, case.reference(inputs))
        assert ok, ratio
        row_tuning.TUNERS[op].forget()
        autotune.set_autotune_cache(CompileCache(tmp_path / "autotune", disk=True))
        with autotune.use_timer(lambda run, c: pytest.fail("timed again")), autotune.choices() as got:
            case.run(inputs)
        assert got[0][2].source == "cache" and got[0][2].config == choice.config
    finally:
        row_tuning.TUNERS[op].forget()
        be._current = previous


def test_device_id_names_backend_gpu_arch_and_codegen():
    from types import SimpleNamespace as NS
    gpu = NS(name="cuda", props=NS(name="NVIDIA H200"), arch="sm_90", codegen="llvm")
    assert autotune.device_id(gpu) == "cuda:NVIDIA H200:sm_90:llvm"
    assert autotune.device_id(NS(name="hip", props=NS(name="MI300X"), arch="gfx942")) == "hip:MI300X:gfx942"
    assert autotune.device_id(NS(name="reference")) == "reference"


def test_graph_capture_takes_the_default_without_remembering_it(reference, store):
    timer = FakeTimer({"a": 3.0, "b": 1.0, "c": 2.0})
    tuner = make_tuner()
    x, y = kaio.to_device(np.arange(64, dtype=np.float32)), kaio.device_array(64, np.float32)
    with autotune.use_timer(timer), autotune.choices() as got:
        with kaio.graph():
            tuner(x, y)
        tuner(x, y)
    assert [(c.config.name, c.source) for _, _, c in got] == [("a", "capturing"), ("b", "tuned")]


@pytest.mark.parametrize("op", ["softmax", "rmsnorm", "layernorm"])
@pytest.mark.parametrize("dt,shape", [("f32", (2, 300)), ("f16", (2, 1000)), ("bf16", (1, 4096)),
                                      ("f32", (2, 257)), ("f32", (1, 40000))])
def test_every_row_op_candidate_is_within_the_ops_tolerance(reference, op, dt, shape):
    """Whatever the autotuner picks is correct: every candidate of row_configs (resident shapes
    and caps, three-pass block sizes, vec 1 rows, rows too wide for registers) launched through
    norms.launch_for meets the op's registered tolerance against the float64 reference."""
    from kaio.kernels import REGISTRY
    from kaio.kernels.ml import norms, row_tuning
    case = REGISTRY.get(f"ml/{op}" + ("" if dt == "f32" else f"_{dt}"))
    inputs = case.make_inputs(shape, seed=5)
    args = [inputs[k] for k in {"softmax": "x", "rmsnorm": "xw", "layernorm": "xwb"}[op]]
    extra = {"softmax": (), "rmsnorm": (1e-6,), "layernorm": (1e-5,)}[op]
    ref = case.reference(inputs)
    configs = row_tuning.row_configs(dt, dt, *shape)
    assert len(configs) >= 3
    for config in configs:
        y = np.zeros(shape, inputs["x"].dtype)
        norms.launch_for(op, dt, dt, shape, config)(*args, y, *extra)
        ok, ratio = case.check({"y": y}, ref)
        assert ok, (config, ratio)
