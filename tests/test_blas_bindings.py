"""cuBLAS's two bindings without a GPU: which one kaio.blas takes (KAIO_CUBLAS_BINDING, KAIO_CUBLAS,
the default, nvmath-python missing or unusable), and that the ctypes and nvmath bindings receive
identical cublasGemmEx arguments. Both are driven through stand-ins (a fake libcublas for ctypes, a
fake ``nvmath.bindings.cublas``) on the fake CUDA driver of tests/test_cuda_runtime_fake.py; the
stand-ins compute the column-major product on the fake device memory, so the results are checked
against numpy too. tests/test_blas.py runs both bindings on a real GPU."""
from __future__ import annotations

import ctypes
import sys
import types

import numpy as np
import pytest
from test_blas import TOL, _check, _colmajor_gemm, _rand
from test_cuda_runtime_fake import fake  # noqa: F401  (fixture)

import kaio
from kaio.backends import cublas as CU
from kaio.backends import cublas_bindings as CB

NP = {0: np.float32, 1: np.float64, 2: np.float16}


def _compute(drv, args):
    """Run one cublasGemmEx (arguments after the handle) on the fake driver's memory."""
    ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, comp, algo = args
    t = NP[at]
    sc = ctypes.c_double if t is np.float64 else ctypes.c_float
    al, be = sc.from_address(alpha).value, sc.from_address(beta).value

    def flat(ptr, count):
        return np.frombuffer(drv.read(ptr, count * np.dtype(t).itemsize), t)
    a = flat(A, lda * (m if ta else k))
    b = flat(B, ldb * (k if tb else n))
    work = flat(C, ldc * n).astype(np.float64)
    _colmajor_gemm(bool(ta), bool(tb), m, n, k, al, a.astype(np.float64), lda, b.astype(np.float64),
                   ldb, be, work, ldc)
    drv.write(C, work.astype(t).tobytes())
    return al, be


class Recorder:
    """What a binding stand-in was called with; ``drv`` is the fake CUDA driver."""

    def __init__(self, drv):
        self.drv, self.gemms, self.scalars, self.streams, self.creates = drv, [], [], [], 0

    def create(self):
        self.creates += 1
        return 0xC0B1A5

    def set_stream(self, handle, stream):
        assert handle == 0xC0B1A5
        self.streams.append(stream or 0)

    def gemm(self, handle, args):
        assert handle == 0xC0B1A5
        self.gemms.append(tuple(args))
        self.scalars.append(_compute(self.drv, args))   # read during the call, as cuBLAS does


class FakeLib:
    """A libcublas for the ctypes binding: status ints, the handle written through byref."""

    class Fn:
        def __init__(self, f):
            self.f = f

        def __call__(self, *args):
            return self.f(*args)

    def __init__(self, rec: Recorder):
        def create(ref):
            ref._obj.value = rec.create()
            return 0

        def set_stream(handle, stream):
            rec.set_stream(handle, stream)
            return 0

        def gemm(handle, *args):
            rec.gemm(handle, args)
            return 0
        self.cublasCreate_v2, self.cublasSetStream_v2 = self.Fn(create), self.Fn(set_stream)
        self.cublasGemmEx, self.cublasGetStatusName = self.Fn(gemm), self.Fn(lambda s: b"FAKE")


class CuBLASError(Exception):
    def __init__(self, status):
        super().__init__(f"CUBLAS_STATUS_{status}")
        self.status = status


def fake_nvmath(rec: Recorder, broken: str | None = None):
    """A stand-in ``nvmath.bindings.cublas``; ``broken``: what loading libcublas raises."""
    def get_cudart_version():
        if broken:
            raise RuntimeError(broken)
        return 13000
    return types.SimpleNamespace(
        create=rec.create, set_stream=rec.set_stream, cuBLASError=CuBLASError,
        gemm_ex=lambda handle, *args: rec.gemm(handle, args), get_cudart_version=get_cudart_version,
        get_property=lambda i: (13, 1, 0)[i])


@pytest.fixture
def stand_ins(fake, monkeypatch):  # noqa: F811  (the imported fixture)
    """Recorders behind both bindings: (ctypes recorder, nvmath recorder)."""
    rc, rn = Recorder(fake), Recorder(fake)
    monkeypatch.setattr(CB, "find_cublas", lambda: "/fake/libcublas.so.13")
    monkeypatch.setattr(CB, "load_library", lambda path: FakeLib(rc))
    monkeypatch.setattr(CB, "_nvmath_module", fake_nvmath(rn))
    return rc, rn


def _backend(monkeypatch):
    """The (fake) CUDA backend, its cuBLAS handle made anew under the current settings."""
    be = kaio.get_backend("cuda")
    monkeypatch.setitem(be.__dict__, "_cublas", None)
    return be


# --- which binding ----------------------------------------------------------------------------
@pytest.mark.parametrize("env,preferred,want", [
    ({}, "nvmath", "nvmath"),
    ({}, "ctypes", "ctypes"),
    ({"KAIO_CUBLAS_BINDING": "ctypes"}, "nvmath", "ctypes"),
    ({"KAIO_CUBLAS_BINDING": "nvmath"}, "ctypes", "nvmath"),
    ({"KAIO_CUBLAS": "/some/libcublas.so"}, "nvmath", "ctypes"),     # a path only ctypes loads
])
def test_selection(stand_ins, monkeypatch, env, preferred, want):
    monkeypatch.delenv("KAIO_CUBLAS", raising=False)
    monkeypatch.delenv("KAIO_CUBLAS_BINDING", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(CB, "PREFERRED_BINDING", preferred)
    b = CB.open_binding()
    assert b.name == want
    assert ("KAIO_CUBLAS" in b.why) == bool(env)
    assert _backend(monkeypatch).blas().binding.name == want


@pytest.mark.parametrize("broken", ["missing", "CUDA driver is not found"])
def test_default_falls_back_to_ctypes_and_says_why(stand_ins, monkeypatch, broken):
    monkeypatch.delenv("KAIO_CUBLAS_BINDING", raising=False)
    monkeypatch.delenv("KAIO_CUBLAS", raising=False)
    monkeypatch.setattr(CB, "PREFERRED_BINDING", "nvmath")
    if broken == "missing":
        monkeypatch.setattr(CB, "_nvmath_module", None)
        for mod in ("nvmath", "nvmath.bindings", "nvmath.bindings.cublas"):
            monkeypatch.setitem(sys.modules, mod, None)   # importing it fails
    else:
        monkeypatch.setattr(CB, "_nvmath_module", fake_nvmath(stand_ins[1], broken))
    b = CB.open_binding()
    assert b.name == "ctypes" and b.path == "/fake/libcublas.so.13"
    why = "not installed" if broken == "missing" else broken
    assert why in b.why and why in CB.summary()
    # forced, the same failure is an error that names the variable
    monkeypatch.setenv("KAIO_CUBLAS_BINDING", "nvmath")
    with pytest.raises(kaio.BackendUnavailable, match=f"KAIO_CUBLAS_BINDING=nvmath.*{why}"):
        CB.open_binding()


def test_default_is_nvmath_else_ctypes(stand_ins, monkeypatch):
    """The H200 timing (docs/backends.md) made nvmath the default; ctypes when it cannot import."""
    monkeypatch.delenv("KAIO_CUBLAS_BINDING", raising=False)
    monkeypatch.delenv("KAIO_CUBLAS", raising=False)
    assert CB.choose() == ("nvmath", "the default", False)
    assert _backend(monkeypatch).blas().binding.name == "nvmath"
    monkeypatch.setattr(CB, "_nvmath_module", None)
    for mod in ("nvmath", "nvmath.bindings", "nvmath.bindings.cublas"):
        monkeypatch.setitem(sys.modules, mod, None)   # importing it fails
    b = _backend(monkeypatch).blas().binding
    assert b.name == "ctypes" and "nvmath unusable" in b.why and "not installed" in b.why


def test_bad_binding_name_is_refused():
    from kaio import config
    with pytest.raises(ValueError, match="KAIO_CUBLAS_BINDING='cffi': choose one of ctypes, nvmath"):
        config.read({"KAIO_CUBLAS_BINDING": "cffi"})


def test_info_names_the_binding(stand_ins, monkeypatch, capsys):
    monkeypatch.setenv("KAIO_CUBLAS_BINDING", "ctypes")
    assert CB.summary() == "ctypes: /fake/libcublas.so.13 (KAIO_CUBLAS_BINDING=ctypes)"
    monkeypatch.delenv("KAIO_CUBLAS_BINDING")
    monkeypatch.setattr(CB, "PREFERRED_BINDING", "nvmath")
    monkeypatch.setenv("COLUMNS", "300")     # one line per row
    from kaio import cli
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "cuBLAS binding" in line)
    assert "nvmath: nvmath-python" in row and "cuBLAS 13.1.0" in row and "(the default)" in row


# --- identical arguments, correct results -----------------------------------------------------
@pytest.mark.parametrize("t", ["f64", "f32", "f16"])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_both_bindings_receive_identical_arguments(stand_ins, monkeypatch, t, ta, tb):
    recorders = dict(zip(("ctypes", "nvmath"), stand_ins))
    m, n, k = 9, 5, 7
    a = _rand(t, (k, m) if ta else (m, k), 8)
    b = _rand(t, (n, k) if tb else (k, n), 9)
    c0 = _rand(t, (m, n), 10)
    da, db = kaio.to_device(a), kaio.to_device(b)
    shapes = {}
    for name, rec in recorders.items():
        monkeypatch.setenv("KAIO_CUBLAS_BINDING", name)
        be = _backend(monkeypatch)
        assert be.blas().binding.name == name
        dc = kaio.to_device(c0)
        kaio.blas.gemm(da, db, out=dc, alpha=1.5, beta=0.5, trans_a=ta, trans_b=tb, tf32=True, backend=be)
        _check(dc.to_host(), a, b, c0, 1.5, 0.5, ta, tb, TOL[t])
        (args,) = rec.gemms
        # out's pointer and the host scalars' addresses differ per call: compare the rest, and
        # the scalars' values
        assert args[13] == dc.ptr and args[6] == db.ptr and args[9] == da.ptr
        assert rec.scalars == [(1.5, 0.5)]
        shapes[name] = args[:5] + args[7:9] + args[10:12] + args[14:]
    assert shapes["ctypes"] == shapes["nvmath"]
    want_compute = {"f64": CU.COMPUTE_64F, "f32": CU.COMPUTE_32F_FAST_TF32, "f16": CU.COMPUTE_32F}[t]
    assert shapes["ctypes"] == (int(tb), int(ta), n, m, k, CU.CUDA_R[t], b.shape[1], CU.CUDA_R[t],
                                a.shape[1], CU.CUDA_R[t], n, want_compute, CU.GEMM_DEFAULT)


@pytest.mark.parametrize("binding", ["ctypes", "nvmath"])
def test_stream_is_set_when_it_changes(stand_ins, monkeypatch, binding):
    rec = dict(zip(("ctypes", "nvmath"), stand_ins))[binding]
    monkeypatch.setenv("KAIO_CUBLAS_BINDING", binding)
    be = _backend(monkeypatch)
    a = _rand("f32", (4, 4), 1)
    for _ in range(3):
        kaio.blas.gemm(a, a, backend=be)
    s = kaio.Stream()
    kaio.blas.gemm(a, a, backend=be, stream=s)
    kaio.blas.gemm(a, a, backend=be, stream=s)
    kaio.blas.gemm(a, a, backend=be)
    assert rec.creates == 1 and len(rec.gemms) == 6
    assert rec.streams == [0, s.handle, 0]


def test_nvmath_errors_become_cuda_errors(stand_ins, monkeypatch):
    rec = stand_ins[1]
    monkeypatch.setenv("KAIO_CUBLAS_BINDING", "nvmath")
    be = _backend(monkeypatch)

    def failing(handle, args):
        raise CuBLASError(7)
    monkeypatch.setattr(rec, "gemm", failing)
    a = _rand("f32", (4, 4), 1)
    with pytest.raises(kaio.CudaError, match="cublasGemmEx failed: CUBLAS_STATUS_7") as e:
        kaio.blas.gemm(a, a, backend=be)
    assert e.value.code == 7


def test_overhead_benchmark_runs_on_fakes(tmp_path):
    """benchmarks/blas_overhead.py (scripts/device_run.sh blas-overhead) end to end on the fakes."""
    import json
    import os
    import subprocess
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    p = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "blas_overhead.py"), "--fake",
                        "--rounds", "3", "--calls", "20", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "blas_overhead.json").read_text())
    rows = data["us_per_call"]
    for binding in ("ctypes", "nvmath", "ctypes, stream set per call (before)"):
        for t in ("f16 (f32 accumulation)", "f32"):
            host, total = rows[f"kaio.blas.gemm 64^3 {t} [{binding}]"]
            assert 0 < host <= total
    assert set(data["nvmath_minus_ctypes_us"]) == {"kaio.blas.gemm 64^3 f16 (f32 accumulation)",
                                                    "kaio.blas.gemm 64^3 f32"}
    assert "PREFERRED_BINDING = " in p.stdout and data["missing"] == {}
    for binding, d in data["kaio_own_us"].items():   # kaio.blas.gemm minus the bare binding call
        assert d == pytest.approx(rows[f"kaio.blas.gemm 64^3 f32 [{binding}]"][0]
                                  - rows[f"cublasGemmEx alone 64^3 f32 [{binding}]"][0], abs=2e-3)
        assert f"| kaio's own: kaio.blas.gemm 64^3 f32 minus cublasGemmEx alone | {binding} |" in p.stdout
    assert set(data["kaio_own_us"]) == {"ctypes", "nvmath"}
