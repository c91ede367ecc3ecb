"""The conformance suite (kaio.conformance) on the reference backend and the AMD compile checks.

The whole suite (library at the small sizes + every feature kernel) runs on the interpreter at
warp 32 and 64; a representative subset is built and validated for gfx90a and gfx942 (the full
build runs in `kaio conformance`). A planted mismatch must make a failing cell and a non-zero
exit; the report files must be written and parse.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kaio.conformance import amd, rules
from kaio.conformance.cases import ConformanceCase, all_cases, select
from kaio.conformance.cli import main, write
from kaio.conformance.render import html_page, markdown
from kaio.conformance.rules import BITWISE, Rule, compare, rel, ulp
from kaio.conformance.runner import Options, run_suite

AMD_SUBSET = ["ml/rmsnorm", "rajaperf/DAXPY", "feature/shared_memory", "feature/warp_ops",
              "feature/block_reductions"]


def _lld_missing() -> str:
    try:
        from kaio.backends.llvm_compile import find_linker
        find_linker()
        return ""
    except Exception as e:
        return str(e)


@pytest.fixture(scope="module")
def reference_report():
    return run_suite(Options(["reference", "reference-w64"], log=lambda m: None))


def test_every_case_conforms_on_the_interpreter(reference_report):
    rep = reference_report
    names = {r.kernel for r in rep.rows}
    from kaio import kernels
    assert {c.name for c in kernels.cases()} <= names          # every library kernel
    assert len([n for n in names if n.startswith("feature/")]) >= 40
    assert rep.failing == [], [(k, t, next(r for r in rep.rows if r.kernel == k).cells[t].detail)
                               for k, t in rep.failing]
    for r in rep.rows:
        assert set(r.cells) == {"reference", "reference-w64"}
        assert r.rule


def test_width_independent_kernels_agree_across_warp_widths(reference_report):
    """block_sum and every width-independent kernel: the wave64 interpreter is compared with the
    wave32 one under the kernel's rule (bitwise for reductions)."""
    rows = {r.kernel: r for r in reference_report.rows}
    red = rows["feature/block_reductions"]
    assert red.rule == "bitwise"
    assert red.cells["reference-w64"].status == "identical"
    assert red.cells["reference-w64"].baseline == "reference"
    warp = rows["feature/warp_ops"]                      # width-dependent: its own numpy model
    assert warp.cells["reference-w64"].baseline == "numpy"
    assert warp.cells["reference-w64"].status in ("identical", "within-bound")


@pytest.mark.skipif(bool(_lld_missing()), reason=f"no ld.lld: {_lld_missing()}")
def test_amd_compile_and_validate_subset():
    rep = run_suite(Options(["reference", "gfx90a", "gfx942"], kernels=AMD_SUBSET,
                            log=lambda m: None))
    assert len(rep.rows) == len(AMD_SUBSET)
    for r in rep.rows:
        for arch in ("gfx90a", "gfx942"):
            c = r.cells[arch]
            assert c.status == "compiled", (r.kernel, arch, c.detail)
            assert c.build and all(b["ok"] and b["arch"] == arch for b in c.build)
            assert "vgpr" in c.detail
    rmsnorm = next(r for r in rep.rows if r.kernel == "ml/rmsnorm")
    assert rmsnorm.cells["gfx942"].build[0]["lds_bytes"] > 0    # its block reduction uses LDS


def test_unavailable_targets_are_reported_not_run():
    rep = run_suite(Options(["reference", "hip"], kernels=["feature/control_flow"], log=lambda m: None))
    from kaio.backends import availability
    if availability("hip")[0]:
        pytest.skip("an AMD GPU is present")
    cell = rep.rows[0].cells["hip"]
    assert cell.status == "not-run" and cell.detail
    assert "hip" in rep.header["not_executed"]


# --- a planted mismatch --------------------------------------------------------------------------
def _planted(delta_ulps: int, rule: Rule) -> ConformanceCase:
    """A case whose wave64 run differs from the wave32 run by ``delta_ulps`` at index 3."""
    def run(inputs):
        from kaio import backends as be
        y = inputs["x"].copy()
        if be.get_backend().warp_size == 64:
            y[3] = np.nextafter(y[3], np.float32(np.inf)) if delta_ulps == 1 else y[3] * 2
        return {"y": y}
    return ConformanceCase(
        name="test/planted", group="test", make_inputs=lambda size: {"x": np.arange(8, dtype=np.float32)},
        run=run, expected=lambda inputs, warp: {"y": inputs["x"]},
        vs_numpy=ulp(4, "test bound"), rule=rule, fixed_size=True)


def test_planted_mismatch_fails_with_index_and_values(tmp_path):
    rep = run_suite(Options(["reference", "reference-w64"], cases=[_planted(2, BITWISE)],
                            log=lambda m: None))
    cell = rep.rows[0].cells["reference-w64"]
    assert cell.status == "failing"
    assert cell.mismatch["against"] == "reference" and cell.mismatch["index"] == [3]
    assert cell.mismatch["got"].startswith("6.0") and cell.mismatch["want"].startswith("3.0")
    assert rep.rows[0].cells["reference"].status == "identical"
    assert rep.failing == [("test/planted", "reference-w64")]
    paths = write(rep, str(tmp_path))
    md = open(paths[1]).read()
    assert "FAIL vs reference: y[3]" in md and "## Failing cells" in md


def test_within_bound_records_bound_and_error():
    rep = run_suite(Options(["reference", "reference-w64"], cases=[_planted(1, ulp(2, "test"))],
                            log=lambda m: None))
    cell = rep.rows[0].cells["reference-w64"]
    assert cell.status == "within-bound" and cell.rule == "ulp:2" and cell.max_error == 1.0


def test_cli_exit_status_and_report_files(tmp_path, monkeypatch):
    out = tmp_path / "ok"
    assert main(["--target", "reference,gfx90a", "--kernel", "feature/control_flow",
                 "rajaperf/DAXPY", "--out", str(out)]) == 0
    d = json.loads((out / "conformance.json").read_text())
    assert d["schema"] == "kaio-conformance/1" and d["targets"] == ["reference", "gfx90a"]
    assert [r["kernel"] for r in d["rows"]] == ["feature/control_flow", "rajaperf/DAXPY"]
    assert d["header"]["kaio_version"] and d["header"]["date"]
    md = (out / "conformance.md").read_text()
    assert "| feature/control_flow |" in md and "| rajaperf/DAXPY |" in md
    page = (out / "conformance.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "feature/control_flow" in page
    # a planted mismatch through the CLI: exit status 1
    monkeypatch.setattr("kaio.conformance.cases.feature_cases", lambda: [_planted(2, BITWISE)])
    bad = tmp_path / "bad"
    assert main(["--target", "reference,reference-w64", "--kernel", "test/planted",
                 "--out", str(bad)]) == 1
    assert json.loads((bad / "conformance.json").read_text())["failing"] == [
        ["test/planted", "reference-w64"]]


def test_cli_usage_errors():
    assert main(["--target", "reference,nope"]) == 2
    assert main(["--kernel", "no_such_kernel_anywhere"]) == 2


def test_kaio_cli_dispatches_to_the_suite(tmp_path):
    from kaio.cli import main as kaio_main
    rc = kaio_main(["conformance", "--target", "reference", "--kernel", "feature/atomics",
                    "--out", str(tmp_path)])
    assert rc == 0 and os.path.exists(tmp_path / "conformance.json")


# --- rules ------------------------------------------------------------------------------------------
def test_bitwise_rule_nan_payloads_and_signed_zeros():
    a = np.array([np.nan, 0.0, 1.0], np.float32)
    b = a.copy()
    b.view(np.uint32)[0] = 0x7FC00123                # another NaN payload: equal
    assert compare({"y": a}, {"y": b}, BITWISE).identical
    b[1] = -0.0                                      # signed zero: differs
    o = compare({"y": a}, {"y": b}, BITWISE)
    assert not o.ok and o.mismatch.index == (1,)
    assert compare({"y": a}, {"y": b}, ulp(1, "t")).ok   # 0 ulp apart under a ulp rule


def test_ulp_and_rel_rules():
    x = np.array([1.0, -2.0, np.inf, 1e-45], np.float32)
    y = x.copy()
    y[0] = np.nextafter(np.nextafter(y[0], np.float32(2)), np.float32(2))
    o = compare({"y": y}, {"y": x}, ulp(2, "t"))
    assert o.ok and o.max_error == 2.0 and not o.identical
    assert not compare({"y": y}, {"y": x}, ulp(1, "t")).ok
    z = x.copy()
    z[2] = -np.inf
    assert not compare({"y": z}, {"y": x}, ulp(1e9, "t")).ok   # inf vs -inf never within bound
    assert compare({"y": y}, {"y": x}, rel(3e-7, "t")).ok
    assert not compare({"y": y}, {"y": x}, rel(1e-7, "t")).ok
    i = np.array([1, 2], np.int32)
    assert not compare({"y": i + 1}, {"y": i}, rel(1.0, "t")).ok   # ints are always exact
    with pytest.raises(ValueError):
        ulp(1, "")                                   # non-bitwise rules need a reason
    assert rules.parse("rel:1e-6").describe() == "rel:1e-06"


def test_derived_rules():
    """Library kernels: bitwise unless their IR needs native math, fast math or float atomics."""
    rep = run_suite(Options(["reference"], kernels=["rajaperf/DAXPY", "ml/gelu_exact", "ml/softmax"],
                            log=lambda m: None))
    rows = {r.kernel: r for r in rep.rows}
    assert rows["rajaperf/DAXPY"].rule == "bitwise"
    from kaio.conformance.derive import portable_math_active
    if portable_math_active():
        assert rows["ml/gelu_exact"].rule == "bitwise"   # erf from the portable math library
    else:
        assert rows["ml/gelu_exact"].rule.startswith("rel:") and "erf" in rows["ml/gelu_exact"].why
    # the softmax asks for the hardware exp2 (fast=True): held to its stated bound everywhere
    assert rows["ml/softmax"].rule.startswith("rel:") and "exp2" in rows["ml/softmax"].why


def test_fatal_llvm_error_is_isolated(monkeypatch):
    """A build that kills its process (as LLVM's fatal errors do) is reported, not fatal."""
    def dying(ir_text, target, fast):
        os.write(2, b"error: no libcall available for frem\n")
        os._exit(1)
    monkeypatch.setattr(amd, "build", dying)
    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    r = amd.build_isolated("not ir", "gfx90a", False)
    assert not r.ok and "no libcall available for frem" in r.errors[0]


def test_case_selection():
    cs = all_cases()
    assert [c.name for c in select(cs, ["rmsnorm"])] == ["ml/rmsnorm"]
    assert all(c.name.startswith("feature/") for c in select(cs, ["feature"]))
    with pytest.raises(KeyError):
        select(cs, ["nothing_like_this"])


def test_renderers_from_json(reference_report):
    d = json.loads(reference_report.to_json())
    md, page = markdown(d), html_page(d)
    for r in d["rows"][:5]:
        assert f"| {r['kernel']} |" in md and r["kernel"] in page


def test_gpu_target_plumbing_with_a_stand_in(monkeypatch):
    """cuda / cuda-llvm cells, their interpreter baseline and the cuda-llvm PTX pre-flight
    (built in a worker), with the interpreter standing in for the GPU."""
    import kaio.conformance.runner as runner
    from kaio.backends.reference import ReferenceBackend
    from kaio.conformance.targets import TargetInfo

    class StandIn(ReferenceBackend):
        arch = "sm_90"

    real_probe, real_make = runner.probe, runner.make_backend
    monkeypatch.setattr(runner, "probe", lambda t: TargetInfo(t, "execute", 32, True,
                                                              device={"name": "stand-in"})
                        if t in ("cuda", "cuda-llvm") else real_probe(t))
    monkeypatch.setattr(runner, "make_backend", lambda t, w=None: StandIn(32, sanitize=False)
                        if t in ("cuda", "cuda-llvm") else real_make(t, w))
    monkeypatch.setattr(runner, "_LIVE", {})
    rep = run_suite(Options(["cuda", "cuda-llvm"], kernels=["feature/warp_ops", "rajaperf/DAXPY"],
                            log=lambda m: None))
    # both interpreter widths run for every case (the warp-width check), shown or not
    assert rep.header["hidden_baselines"] == ["reference", "reference-w64"]
    assert all(r.width["status"] in ("independent", "declared") for r in rep.rows)
    for r in rep.rows:
        for t in ("cuda", "cuda-llvm"):
            c = r.cells[t]
            assert c.status == "identical" and c.baseline == "reference", (r.kernel, t, c.detail)


def test_progress_line_carries_the_detail():
    """A failing or within-bound cell prints its index, both values (float and hex bits) and
    the rule on the progress log, so a log alone is enough to diagnose."""
    lines = []
    run_suite(Options(["reference", "reference-w64"], cases=[_planted(2, BITWISE)],
                      log=lines.append))
    text = "\n".join(lines)
    assert "reference-w64=failing" in text
    assert "FAILING [rule bitwise]" in text and "y[3]" in text
    assert "0x40c00000" in text and "0x40400000" in text          # 6.0 and 3.0 as bits
    lines.clear()
    run_suite(Options(["reference", "reference-w64"], cases=[_planted(1, ulp(2, "t"))],
                      log=lines.append))
    text = "\n".join(lines)
    assert "WITHIN-BOUND [rule ulp:2]" in text and "first difference y[3]" in text


def test_interrupt_returns_the_partial_report(tmp_path):
    """KeyboardInterrupt (and SIGTERM, which raises the same way) ends the run with the report
    of the finished cases; the JSON is rewritten after every case."""
    def interrupting(inputs):
        raise KeyboardInterrupt
    stop = ConformanceCase(name="test/stop", group="test", make_inputs=lambda s: {},
                           run=interrupting, expected=lambda i, w: {}, vs_numpy=BITWISE,
                           fixed_size=True)
    from kaio.conformance.cli import write_json
    seen = []
    rep = run_suite(Options(["reference"], cases=[_planted(0, BITWISE), stop], log=lambda m: None,
                            on_row=lambda r: seen.append(write_json(r, str(tmp_path)))))
    assert [r.kernel for r in rep.rows] == ["test/planted"]
    assert "KeyboardInterrupt" in rep.header["interrupted"]
    assert json.loads((tmp_path / "conformance.json").read_text())["rows"][0]["kernel"] == "test/planted"
    assert "INCOMPLETE" in markdown(json.loads(rep.to_json()))


def test_first_difference_ignores_nan_payloads():
    a = np.array([np.nan, -0.0, 1.0], np.float32)
    b = a.copy()
    b.view(np.uint32)[0] = 0xFFC00001
    assert rules.first_difference({"y": a}, {"y": b}) is None
    b[1] = 0.0
    m = rules.first_difference({"y": a}, {"y": b})
    assert m.index == (1,) and "0x80000000" in m.got and "0x00000000" in m.want
