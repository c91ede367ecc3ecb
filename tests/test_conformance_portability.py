"""The conformance report's portability proofs: the warp-width flag, portable mode, the new
feature rows (fragments, checked mode, per-block partition, fuzzer kernels) and the CLI on the
compile-and-validate and reference columns with a small case set (what CI runs)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import kaio
from kaio import config, f32
from kaio.conformance.case import ConformanceCase
from kaio.conformance.cli import main
from kaio.conformance.render import markdown
from kaio.conformance.rules import BITWISE, rel
from kaio.conformance.runner import Options, run_suite

QUIET = dict(log=lambda m: None)


@kaio.kernel
def lane0_sums(x: kaio.In[f32], y: kaio.Raw[f32]):
    """Deliberately width-dependent: the literal 32 stands for the warp width."""
    g = kaio.global_id()
    s = kaio.warp_sum(x[g])
    if kaio.thread_idx.x % 32 == 0:
        y[g // 32] = s


def _width_case(declared: bool) -> ConformanceCase:
    x = np.arange(128, dtype=np.float32)

    def run(inp):
        y = np.zeros(4, np.float32)
        lane0_sums[1, 128](inp["x"], y)
        return {"y": y}

    def expected(inp, warp):
        if warp == 64:   # a 64-lane warp sums 64 values; lanes 0 and 32 both store that sum
            s = inp["x"].reshape(2, 64).sum(axis=1)
            return {"y": np.repeat(s, 2).astype(np.float32)}
        return {"y": inp["x"].reshape(4, 32).sum(axis=1).astype(np.float32)}

    return ConformanceCase(name=f"test/lane0_{'declared' if declared else 'literal'}",
                           group="test", make_inputs=lambda size: {"x": x}, run=run,
                           expected=expected if declared else (lambda inp, w: expected(inp, 32)),
                           vs_numpy=BITWISE, rule=BITWISE, width_dependent=declared,
                           fixed_size=True)


def test_width_dependent_kernel_is_flagged():
    with pytest.warns(Warning):   # kaio's WarpWidthWarning names the literal too
        rep = run_suite(Options(["reference"], cases=[_width_case(False), _width_case(True)],
                                **QUIET))
    rows = {r.kernel: r for r in rep.rows}
    literal, declared = rows["test/lane0_literal"], rows["test/lane0_declared"]
    assert literal.width["status"] == "FLAGGED" and "y[0]" in literal.width["detail"]
    assert declared.width["status"] == "declared"
    assert rep.width_flagged == ["test/lane0_literal"]
    # reference-w64 ran though only 'reference' was selected (a hidden baseline)
    assert "reference-w64" in rep.header["hidden_baselines"]
    md = markdown(json.loads(rep.to_json()))
    assert "1 FLAGGED" in md and "## Warp width: flagged kernels" in md
    assert "test/lane0_literal" in md.split("## Warp width: flagged kernels")[1]


def test_width_independent_rows_say_so():
    from kaio.conformance.cases import all_cases, select
    rep = run_suite(Options(["reference"], cases=select(all_cases(), ["feature/partition_per_block",
                                                                      "fuzz/s1_k16"]), **QUIET))
    assert [r.width["status"] for r in rep.rows] == ["independent", "independent"]
    assert rep.width_flagged == []


def _fast_case():
    @kaio.kernel(fast_math=True)
    def fast_exp(x: kaio.In[f32], y: kaio.Out[f32]):
        for i in y.owned():
            y[i] = kaio.math.exp(x[i]) / (x[i] + 3.0)

    x = np.linspace(-5, 5, 200, dtype=np.float32)

    def run(inp):
        y = np.zeros_like(inp["x"])
        fast_exp(inp["x"], y)
        return {"y": y}

    return ConformanceCase(name="test/fast_exp", group="test", make_inputs=lambda s: {"x": x},
                           run=run, expected=lambda inp, w: {"y": (np.exp(inp["x"].astype(
                               np.float64)) / (inp["x"] + 3.0)).astype(np.float32)},
                           vs_numpy=rel(1e-5, "fast exp"), fixed_size=True)


def _atomic_case():
    @kaio.kernel
    def float_hist(x: kaio.In[f32], h: kaio.Atomic[f32]):
        i = kaio.global_id()
        if i < x.shape[0]:
            kaio.atomic_add(h, i % 4, x[i])

    x = np.random.default_rng(0).standard_normal(256).astype(np.float32)

    def run(inp):
        h = np.zeros(4, np.float32)
        float_hist[2, 128](inp["x"], h)
        return {"h": h}

    return ConformanceCase(name="test/float_atomics", group="test", make_inputs=lambda s: {"x": x},
                           run=run, expected=lambda inp, w: {"h": inp["x"].reshape(-1, 4).sum(
                               axis=0, dtype=np.float64).astype(np.float32)},
                           vs_numpy=rel(1e-5, "float sum"), fixed_size=True)


def test_portable_mode_rules_summary_and_environment():
    assert not config.settings().portable
    cases = [_fast_case(), _atomic_case()]
    plain = run_suite(Options(["reference"], cases=cases, **QUIET))
    assert plain.rows[0].rule.startswith("rel") and "fast-math" in plain.rows[0].why
    rep = run_suite(Options(["reference", "reference-w64"], cases=cases, portable=True, **QUIET))
    assert not config.settings().portable and "KAIO_PORTABLE" not in os.environ   # restored
    rows = {r.kernel: r for r in rep.rows}
    assert rows["test/fast_exp"].rule == "bitwise"      # portable: no approximation remains
    assert rows["test/fast_exp"].order == ""
    assert rows["test/float_atomics"].order.startswith("float atomics order")
    assert rep.header["portable_mode"] is True and plain.header["portable_mode"] is False
    md = markdown(json.loads(rep.to_json()))
    assert "**portable mode**: every executed cell bit-identical to the interpreter" in md
    assert "## Portable mode: order-dependent cases" in md and "test/float_atomics" in md
    assert "portable mode" not in markdown(json.loads(plain.to_json()))


def test_portable_mode_records_portable_launches():
    from kaio.conformance.targets import Recorder, make_backend, using
    rec = Recorder(make_backend("reference", 32))
    case = _fast_case()
    from kaio.conformance.portability import portable_env
    with portable_env(True), using(rec, "t"):
        case.run(case.make_inputs("small"))
    assert rec.log and all(o.portable for _, o in rec.log)


def test_new_feature_rows_and_their_rules():
    from kaio.conformance.cases import all_cases, select
    cases = {c.name: c for c in select(all_cases(), ["feature/fragment", "feature/checked",
                                                     "feature/partition", "fuzz"])}
    assert {"feature/fragment_gemm_f16", "feature/fragment_gemm_bf16",
            "feature/fragment_warp_tile", "feature/fragment_integer_data",
            "feature/checked_mode", "feature/partition_per_block"} <= set(cases)
    assert len([n for n in cases if n.startswith("fuzz/")]) == 8
    frag = cases["feature/fragment_gemm_f16"]
    assert frag.rule.kind == "rel" and frag.rule.bound == 0 and frag.rule.atol > 0
    assert "matrix-unit accumulation order" in frag.rule.why and frag.order_dependent
    for n in ("feature/fragment_integer_data", "feature/checked_mode",
              "feature/partition_per_block", "fuzz/s1_k27"):
        assert cases[n].rule is BITWISE and not cases[n].order_dependent
    rep = run_suite(Options(["reference"], cases=[cases["feature/fragment_gemm_bf16"],
                                                  cases["feature/checked_mode"]], **QUIET))
    assert rep.failing == []
    assert all(c.status == "identical" for r in rep.rows for c in r.cells.values())
    assert rep.rows[0].order == "matrix-unit accumulation order"


def test_fragment_bound_catches_a_wrong_product():
    from kaio.conformance.cases import all_cases, select
    from kaio.conformance.rules import compare
    case = select(all_cases(), ["feature/fragment_gemm_f16"])[0]
    inp = case.make_inputs("small")
    good = case.expected(inp, 32)
    bad = {"c": good["c"].copy()}
    bad["c"][3, 5] += 4 * case.rule.atol
    assert compare(good, good, case.rule).identical
    assert not compare(bad, good, case.rule).ok


def test_cli_compile_and_reference_columns_small_set(tmp_path):
    """What CI runs: the interpreter at both widths and the compile-and-validate columns on a
    small set holding every new row kind."""
    out = tmp_path / "rep"
    targets = "reference,reference-w64,sm_80,sm_89-llvm,gfx90a"
    rc = main(["--target", targets, "--kernel", "feature/fragment_integer_data",
               "feature/checked_mode", "feature/partition_per_block", "fuzz/s1_k27",
               "--out", str(out), "--jobs", "2"])
    d = json.loads((out / "conformance.json").read_text())
    rows = {r["kernel"]: r for r in d["rows"]}
    assert rc == 0, d["failing"]
    for name, r in rows.items():
        assert r["cells"]["reference"]["status"] == "identical", name
        assert r["cells"]["reference-w64"]["status"] == "identical", name
        assert r["width"]["status"] == "independent"
        for t in ("sm_80", "sm_89-llvm", "gfx90a"):
            assert r["cells"][t]["status"] in ("compiled", "not-available", "not-run"), (name, t)
            if r["cells"][t]["status"] == "not-run":   # only for a missing toolchain
                assert "not available" in r["cells"][t]["detail"] or "no " in r["cells"][t]["detail"]
    assert rows["feature/checked_mode"]["cells"]["gfx90a"]["status"] in ("compiled", "not-run")
    assert "warp width" in (out / "conformance.md").read_text()


def test_executed_llvm_target_refusal_is_not_available():
    """cuda-llvm's pre-flight build refused for a feature the path lacks (fragments before
    their lowering) makes a 'not available on this target' cell, never failing or passing;
    any other build error stays failing."""
    from kaio.conformance import runner
    from kaio.conformance.builds import BuildResult

    class Rec:
        class inner:
            arch = "sm_90"

    class Pool:
        def __init__(self, result):
            self.result = result

        def run(self, jobs):
            return {j: self.result for j in jobs}

    from kaio.conformance.features.fragments import GEMM
    launched = [(GEMM["f16"].specialize_ir({}), kaio.options.KernelOptions())]
    logs, results = {"reference": launched}, {"reference": {}}
    refused = BuildResult("fragment_gemm", "nvptx64-sm_90", False,
                          ["kaio.mma fragments are not supported on target nvptx64-sm_90 yet"],
                          unavailable=True)
    status, msg = runner._preflight("cuda-llvm", Rec(), logs, results, Pool(refused))
    assert status == "not-available" and msg.startswith("not available on this target")
    broken = BuildResult("fragment_gemm", "nvptx64-sm_90", False, ["LLVM ERROR: boom"])
    assert runner._preflight("cuda-llvm", Rec(), logs, results, Pool(broken))[0] == "failing"
    ok = BuildResult("fragment_gemm", "nvptx64-sm_90", True)
    assert runner._preflight("cuda-llvm", Rec(), logs, results, Pool(ok)) is None
