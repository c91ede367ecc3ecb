"""`kaio showcase`: runs, validates, prints the table, and its exit status reflects failures."""
import numpy as np
import pytest

import kaio.kernels as K
from kaio import showcase
from kaio.kernels import KernelCase, Tolerance


@pytest.fixture
def restore_backend():
    from kaio import backends as be
    previous = be._current
    yield
    be._current = previous


def test_one_kernel_passes_and_prints_a_row(capsys, restore_backend):
    assert showcase.main(["rajaperf/DAXPY", "--backend", "reference", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "rajaperf/DAXPY" in out and "PASS" in out and "reference" in out and "GB/s" in out


def test_group_selection_and_bare_names():
    assert {c.name for c in showcase.select_cases("rajaperf/stream", False)} == {
        f"rajaperf/{n}" for n in ("ADD", "COPY", "DOT", "MUL", "TRIAD")}
    assert [c.name for c in showcase.select_cases("rmsnorm", False)] == ["ml/rmsnorm"]
    default = [c.name for c in showcase.select_cases(None, False)]
    assert "ml/quantized_attention" in default and "rajaperf/MAT_MAT_SHARED" in default
    assert len(showcase.select_cases(None, True)) == len(K.cases())


def test_a_wrong_kernel_fails_and_sets_the_exit_status(capsys, restore_backend):
    bad = KernelCase(name="test/off_by_one", group="test",
                     make_inputs=lambda size, seed: {"x": np.arange(size, dtype=np.float64)},
                     run=lambda i: {"y": i["x"] + 1.0}, reference=lambda i: {"y": i["x"]},
                     default_size=8, small_size=8, tolerance=Tolerance(rtol=1e-12, why="test"))
    K.REGISTRY[bad.name] = bad
    try:
        assert showcase.main(["test/off_by_one", "--backend", "reference", "--repeat", "1"]) == 1
    finally:
        del K.REGISTRY[bad.name]
    assert "FAIL" in capsys.readouterr().out


def test_a_crashing_kernel_is_reported_not_raised(capsys, restore_backend):
    def boom(inputs):
        raise RuntimeError("device fell over")
    bad = KernelCase(name="test/crash", group="test", make_inputs=lambda size, seed: {},
                     run=boom, reference=lambda i: {}, default_size=1, small_size=1,
                     tolerance=Tolerance(exact=True, why="test"))
    K.REGISTRY[bad.name] = bad
    try:
        assert showcase.main(["test/crash", "--backend", "reference"]) == 1
    finally:
        del K.REGISTRY[bad.name]
    assert "device fell over" in capsys.readouterr().out


def test_unknown_kernel_and_list(capsys):
    assert showcase.main(["no_such_kernel", "--backend", "reference"]) == 2
    assert showcase.main(["--list"]) == 0
    assert "rajaperf/LTIMES" in capsys.readouterr().out


BENCH_CASES = [c.name for c in K.cases() if c.bench is not None]


@pytest.mark.parametrize("name", BENCH_CASES)
def test_bench_closures_launch_their_kernels(name, restore_backend):
    # the launch-only closures used for GPU timing, run on the reference backend (its device
    # arrays are host memory): they must launch without error
    import kaio
    kaio.set_backend("reference")
    case = K.get(name)
    inputs = case.make_inputs(case.small_size, seed=0)
    launch = case.bench(inputs)
    launch()
    launch()


def test_throughput_units():
    case = K.get("rajaperf/TRIAD")
    assert showcase._throughput(case, 1_000_000, 1e-3).endswith("GB/s")     # 24 MB in 1 ms
    assert showcase._throughput(case, 1_000_000, 1e-3).startswith("24.000")
    mm = K.get("rajaperf/MAT_MAT_SHARED")
    assert showcase._throughput(mm, 1000, 1e-2) == "0.200 TFLOP/s"          # 2e9 flop in 10 ms


def _wide_results():
    R = showcase.Result
    return [R("rajaperf/MAT_MAT_SHARED", "1000", "cuda", True, 0.000123456, 0.0071234,
              checksum=123456.7890123, median_s=0.00712345, timed="kernel",
              throughput="12.345 TFLOP/s"),
            R("ml/quantized_attention", "4x128x64", "cuda", False, 1.5, 3.25, median_s=12.3,
              timed="end-to-end", throughput="1234.567 GB/s", message="checksum differs")]


@pytest.mark.parametrize("width", [80, 120, 200])
def test_table_fits_the_terminal_and_never_cuts_a_number(width):
    import io

    from rich.console import Console
    console = Console(width=width, file=io.StringIO(), color_system=None)
    showcase.render(_wide_results(), console)
    text = console.file.getvalue()
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    assert "…" not in text
    rows = [line for line in text.splitlines() if "rajaperf/MAT_MAT_SHARED" in line
            or "ml/quantized_attention" in line.split(":")[0]]
    assert "PASS" in rows[0] and "FAIL" in rows[1]      # the verdict is on the kernel's line
    for whole in ("12.345 TFLOP/s", "1234.567 GB/s", "7.123 ms", "12.30 s", "0.007", "3.250"):
        assert whole in text                             # ranked first: shown whole at 80
    if width >= 120:
        for whole in ("123456.789", "0.000123", "4x128x64"):
            assert whole in text
    else:
        assert "not shown at 80 columns:" in text and "checksum" in text
    if width >= 200:
        assert "end-to-end" in text and "not shown" not in text


def test_fit_columns_keeps_kernel_and_result_at_any_width():
    rows = [showcase._cells(r) for r in _wide_results()]
    assert showcase.fit_columns(rows, 20) == ["kernel", "result"]
    assert showcase.fit_columns(rows, 1000) == [h for h, _, _ in showcase.COLUMNS]
