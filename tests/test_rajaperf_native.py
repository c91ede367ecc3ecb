"""The ``cuda`` variant of ``kaio rajaperf``: the CUDA C++ twins in benchmarks/cuda compile with
nvcc (skipped without nvcc), every suite kernel has one, each twin's call binds to arrays its
port really has, and on an NVIDIA GPU the twins' checksums agree with kaio's."""
import ctypes

import pytest

import kaio.kernels as K
from kaio.kernels.rajaperf import native, runner
from kaio.kernels.rajaperf.checksum import relative_diff

PORTS = runner.ports()
SUITE_PORTS = [p for p in PORTS if not p.endswith("_FUSED")]   # *_FUSED are kaio-only variants


def test_every_suite_kernel_has_a_twin():
    assert sorted(native.TWINS) == sorted(SUITE_PORTS)
    assert len(native.sources()) == 5


@pytest.mark.skipif(native.nvcc() is None, reason="nvcc not installed")
def test_every_twin_compiles_and_exports_its_entry_point(tmp_path):
    lib = ctypes.CDLL(str(native.build(tmp_path, arch="sm_90")))
    missing = [p for p in native.TWINS if not hasattr(lib, f"rp_{p}")]
    assert missing == []


def test_build_reports_nvcc_errors(tmp_path, monkeypatch):
    if native.nvcc() is None:
        pytest.skip("nvcc not installed")
    bad = tmp_path / "src"
    bad.mkdir()
    (bad / "rajaperf_common.cuh").write_text("")
    (bad / "rajaperf_bad.cu").write_text("extern \"C\" int rp_X( { }\n")
    monkeypatch.setattr(native, "SOURCE_DIR", bad)
    with pytest.raises(RuntimeError, match="nvcc failed"):
        native.build(tmp_path / "out", arch="sm_90")


class _Fake:
    """Stands in for a ctypes entry point: records what a twin passes."""

    def __init__(self):
        self.calls = []

    def __call__(self, reps, ptrs, s, n, out):
        self.calls.append((reps, ptrs, list(s), list(n)))
        return 0


@pytest.mark.parametrize("port", SUITE_PORTS)
def test_twin_binds_the_ports_arrays(port, reference):
    # every array a twin names exists on the port's Resident (or is an extra upload), and its
    # sizes and scalars evaluate: a typo here would hand the C++ a wrong pointer on the GPU
    case = K.get(f"rajaperf/{port}")
    inputs = case.make_inputs(case.small_size, 0)
    res = case.bench(inputs)
    spec = native.TWINS[port]
    assert set(spec.arrays) <= set(res.arrays) | set(spec.extra), port
    if spec.sizes is None:        # the default size is a length: a 2-D array needs explicit sizes
        assert len(res.arrays[spec.arrays[0]].shape) == 1, port
    fake = _Fake()
    twin = native.Twin(fake, res, inputs, spec)
    twin.run(3)
    reps, ptrs, s, n = fake.calls[0]
    assert reps == 3 and all(x > 0 for x in n)
    assert [ptrs[k] for k in range(len(spec.arrays))] == [a.ptr for a in twin._keep]


def test_twin_sizes_match_the_cuda_comments(reference):
    case = K.get("rajaperf/2MM")
    inputs = case.make_inputs((24, 20, 36, 28), 0)
    fake = _Fake()
    native.Twin(fake, case.bench(inputs), inputs, native.TWINS["2MM"]).run(1)
    assert fake.calls[0][3] == [24, 20, 36, 28] and fake.calls[0][2] == [1.5, 1.2]
    case = K.get("rajaperf/FIR")
    inputs = case.make_inputs(100, 0)
    fake = _Fake()
    native.Twin(fake, case.bench(inputs), inputs, native.TWINS["FIR"]).run(1)
    assert fake.calls[0][3] == [84] and len(fake.calls[0][2]) == 16


def test_cuda_variant_off_cuda_is_reported_not_fatal(tmp_path, reference, capsys):
    rc = runner.main(["-k", "DAXPY", "--size", "100", "--repfact", "0.01", "--variants", "numpy,cuda",
                      "--outdir", str(tmp_path)])
    assert rc == 0
    assert "cuda variant skipped" in capsys.readouterr().out
    text = (tmp_path / "RAJAPerf-timing-Average.csv").read_text()
    assert "Not run" in text.splitlines()[2]


@pytest.fixture
def on_cuda():
    import kaio
    from kaio import backends as be
    previous = be._current
    kaio.set_backend("cuda")
    yield
    be._current = previous


@pytest.mark.cuda
def test_twins_agree_with_kaio_on_the_gpu(on_cuda):
    lib = native.load()
    assert lib is not None, native.why_unavailable()
    results = [runner.run_kernel(p, ["kaio", "cuda"], size=20000, repfact=0.05, native=lib)
               for p in SUITE_PORTS]
    for r in results:
        assert not r.errors, (r.name, r.errors)
        # nvcc contracts a*b+c into FMAs (the suite's build does too): last-bit differences
        assert relative_diff(r.checksums["kaio"], r.checksums["cuda"]) <= 1e-9, r.name


@pytest.mark.cuda
def test_runner_with_cuda_writes_ratios(tmp_path, capsys, on_cuda, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")      # the summary table's columns, whole
    rc = runner.main(["-k", "Stream", "DAXPY", "JACOBI_2D", "--repfact", "0.1", "--backend", "cuda",
                      "--variants", "kaio,kaio_graph,cuda", "--outdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "kaio/cuda" in out and "geomean" in out
