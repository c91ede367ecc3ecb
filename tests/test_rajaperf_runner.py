"""``kaio rajaperf`` end to end on the reference backend: every port at a tiny problem size,
variants numpy and kaio (plus kaio_graph on a few), output files shaped like the suite's."""
import re

import numpy as np
import pytest

import kaio.kernels as K
from kaio.cli import main as kaio_main
from kaio.kernels.rajaperf import _case, runner, sizes
from kaio.kernels.rajaperf.checksum import relative_diff

SIZE, REPFACT = 2000, 0.02


def _checksums(text: str) -> dict:
    """kernel -> {variant: checksum} from a -checksum.txt file."""
    out, kernel = {}, None
    for line in text.splitlines():
        if re.fullmatch(r"[A-Z][a-z]+_\w+", line.strip()):
            kernel = line.strip()
            out[kernel] = {}
        elif kernel and (m := re.match(r"(\w+)\s+(-?[0-9.e+-]+)\s+(-?[0-9.e+-]+)$", line)):
            out[kernel][m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return out


def _csv(text: str) -> list[list[str]]:
    lines = text.splitlines()
    return [[c.strip() for c in ln.split(",")] for ln in lines[1:]]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    import kaio
    from kaio import backends as be
    previous = be._current
    out = tmp_path_factory.mktemp("rajaperf")
    rc = kaio_main(["rajaperf", "--backend", "reference", "--size", str(SIZE), "--repfact", str(REPFACT),
                    "--variants", "numpy,kaio", "--outdir", str(out), "--outfile", "tiny"])
    be._current = previous
    del kaio
    return rc, out


def test_all_kernels_run_and_checksums_agree(tiny_run):
    rc, out = tiny_run
    assert rc == 0
    sums = _checksums((out / "tiny-checksum.txt").read_text())
    assert set(sums) == {runner.full_name(p) for p in runner.ports()}
    for port in runner.ports():
        case = K.get(f"rajaperf/{port}")
        got = sums[runner.full_name(port)]
        assert set(got) == {"numpy", "kaio"}, port
        (ref, zero), (kaio_sum, diff) = got["numpy"], got["kaio"]
        assert zero == 0.0
        assert diff == pytest.approx(ref - kaio_sum, rel=1e-6, abs=1e-300)
        assert relative_diff(ref, kaio_sum) <= case.checksum_rtol, port


def test_numpy_checksum_is_the_suites_definition(tiny_run):
    _, out = tiny_run
    sums = _checksums((out / "tiny-checksum.txt").read_text())
    for port in ("DAXPY", "JACOBI_2D", "DOT", "TRAP_INT", "FDTD_2D", "INT_PREDICT"):
        size = sizes.size_for(port, size=SIZE)
        reps = max(1, round(K.get(f"rajaperf/{port}").reps * REPFACT))
        want = _case.suite_checksum(port, size=size, reps=reps)
        assert sums[runner.full_name(port)]["numpy"][0] == pytest.approx(want, rel=1e-15), port


def test_timing_and_kernels_files_parse(tiny_run):
    _, out = tiny_run
    timing = (out / "tiny-timing-Average.csv").read_text()
    assert timing.startswith("Mean Runtime Report (sec.)")
    rows = _csv(timing)
    assert rows[0] == ["Kernel", "numpy", "kaio"]
    assert len(rows) - 1 == len(runner.ports())
    assert all(float(x) > 0 for r in rows[1:] for x in r[1:])
    kernels = _csv((out / "tiny-kernels.csv").read_text())
    assert kernels[0][:5] == ["Kernel", "Problem size", "Reps", "Bytes/rep", "FLOPS/rep"]
    by_name = {r[0]: r for r in kernels[1:]}
    assert by_name["Basic_DAXPY"][1:5] == ["2000", "10", "48000", "4000"]   # 500 reps x 0.02


def test_graph_variant_matches_launch_by_launch(tmp_path, reference):
    # in-place (carry), accumulating (fold) and multi-kernel ports: the replayed graph gives the
    # same checksums as launching rep by rep, and the numpy reference
    rc = runner.main(["--kernels", "DAXPY", "DOT", "JACOBI_1D", "FDTD_2D", "ENERGY", "--size", "500",
                      "--repfact", "0.02", "--npasses", "2", "--variants", "numpy", "kaio", "kaio_graph",
                      "--outdir", str(tmp_path)])
    assert rc == 0
    sums = _checksums((tmp_path / "RAJAPerf-checksum.txt").read_text())
    assert len(sums) == 5
    for name, got in sums.items():
        assert got["kaio_graph"][0] == pytest.approx(got["numpy"][0], rel=1e-11), name
        assert got["kaio"][0] == pytest.approx(got["numpy"][0], rel=1e-11), name


def test_npasses_sums_checksums(tmp_path, reference):
    for p in (1, 3):
        runner.main(["-k", "TRIAD", "--size", "300", "--repfact", "0.01", "--variants", "kaio",
                     "--npasses", str(p), "--outdir", str(tmp_path), "--outfile", f"p{p}"])
    one = _checksums((tmp_path / "p1-checksum.txt").read_text())["Stream_TRIAD"]["kaio"][0]
    three = _checksums((tmp_path / "p3-checksum.txt").read_text())["Stream_TRIAD"]["kaio"][0]
    assert three == pytest.approx(3 * one, rel=1e-14)


def test_select_by_name_group_and_exclusion():
    assert runner.select(["daxpy", "Lcals_EOS"]) == ["DAXPY", "EOS"]
    stream = runner.select(["Stream"])
    assert stream == ["ADD", "COPY", "DOT", "MUL", "TRIAD"]
    assert runner.select(["Stream"], ["DOT", "Stream_ADD"]) == ["COPY", "MUL", "TRIAD"]
    with pytest.raises(ValueError, match="unknown kernel"):
        runner.select(["NOPE"])


def test_bad_arguments_exit_2(capsys):
    assert runner.main(["--variants", "sycl"]) == 2
    assert runner.main(["--kernels", "NOPE"]) == 2
    assert "unknown" in capsys.readouterr().out


def test_sizefact_scales_edges_by_the_root():
    for port in runner.ports():
        base = sizes.problem_size(port, sizes.size_for(port))
        scaled = sizes.problem_size(port, sizes.size_for(port, sizefact=64))
        tol = 0.1 if port == "VOL3D" else 0.01       # VOL3D's zone range includes ghost layers
        assert scaled / base == pytest.approx(64, rel=tol), port
    assert sizes.size_for("2MM", sizefact=64) == (8000, 8000, 1120, 8000)   # nk stays
    assert sizes.size_for("FDTD_2D", sizefact=4) == (2000, 2000, 40)        # time steps stay
    assert sizes.size_for("NESTED_INIT", sizefact=8) == (200, 200, 200)
    assert sizes.size_for("DAXPY", size=1234) == 1234


def test_summary_ratios_and_geomean():
    r = runner.KernelResult("Basic_DAXPY", "DAXPY", 10, 10, 5, 0.0, 0.0,
                            times={"kaio": 2.0, "kaio_graph": 0.5, "cuda": 1.0},
                            checksums={"kaio": 1.0, "kaio_graph": 1.0, "cuda": 1.0})
    s = runner.KernelResult("Stream_ADD", "ADD", 10, 10, 5, 0.0, 0.0,
                            times={"kaio": 8.0, "kaio_graph": 2.0, "cuda": 1.0}, checksums={"kaio": 1.0})
    per = runner.ratios([r, s], ["kaio", "kaio_graph", "cuda"], "cuda")
    assert per["kaio"] == {"Basic_DAXPY": 2.0, "Stream_ADD": 8.0}
    assert runner.geomean(per["kaio"].values()) == pytest.approx(4.0)
    assert runner.geomean(per["kaio_graph"].values()) == pytest.approx(1.0)
    table = runner.summary_table([r, s], ["kaio", "kaio_graph", "cuda"])
    assert [c.header for c in table.columns][-3:] == ["kaio/cuda", "kaio_graph/cuda", "checksums"]


# glibc rand() against the scalar recurrence: tests/test_rajaperf_host.py


def test_checksum_chunks_agree_with_an_exact_sum():
    import math

    from kaio.kernels.rajaperf import checksum as ck
    data = np.linspace(-3.0, 5.0, ck._CHUNK + 12345)
    weights = np.abs(np.sin(np.arange(1, data.size + 1, dtype=np.float64))) + 0.5
    assert ck.checksum(data) == pytest.approx(math.fsum((weights * data).tolist()), rel=1e-15)


def test_time_limit_stops_before_the_next_kernel(tmp_path, reference, capsys):
    assert runner.main(["-k", "Stream", "--size", "100", "--repfact", "0.01", "--variants", "numpy",
                        "--time-limit", "0", "--outdir", str(tmp_path)]) == 0
    assert "5 kernels not run" in capsys.readouterr().out


def test_default_variants_on_the_reference_backend_are_numpy(tmp_path, reference):
    assert runner.main(["-k", "DAXPY", "--size", "100", "--outdir", str(tmp_path)]) == 0
    rows = _csv((tmp_path / "RAJAPerf-timing-Average.csv").read_text())
    assert rows[0] == ["Kernel", "numpy"]
