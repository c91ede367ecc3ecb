"""kaio.blas.gemm: results against numpy (float64) on every available backend (the reference in
CI, cuBLAS on an NVIDIA GPU), the row-major -> column-major mapping checked by emulating a
column-major BLAS, argument errors raised before anything is copied, the hipBLAS path driven
through stand-in hip / hip.hipblas modules (no AMD GPU exists here), and cuBLAS on a GPU through
each binding (ctypes, nvmath-python; tests/test_blas_bindings.py checks the choice on the CPU)."""
from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest
from test_hip_runtime import FakeHip

import kaio
from kaio import dtypes as dt
from kaio.backends.gemm import column_major_call

BF16 = dt.bf16.storage_np
# |error| <= TOL * sum_p |a_ip| |b_pj| (+ |beta c|): one rounding of the result plus the
# accumulation error of the vendor library (f32 accumulation for f16/bf16; TF32 inputs: 2^-11)
TOL = {"f64": 1e-13, "f32": 2e-6, "f16": 2e-3, "bf16": 1e-2}


def _rand(t: str, shape, seed):
    v = np.random.default_rng(seed).standard_normal(shape)
    return v.astype({"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": BF16}[t])


def _check(got, a, b, c0, alpha, beta, ta, tb, tol):
    x = a.astype(np.float64)
    y = b.astype(np.float64)
    x, y = (x.T if ta else x), (y.T if tb else y)
    want = alpha * (x @ y) + (beta * c0.astype(np.float64) if beta else 0.0)
    scale = abs(alpha) * (np.abs(x) @ np.abs(y)) + (abs(beta) * np.abs(c0.astype(np.float64)) if beta else 0)
    err = np.abs(np.asarray(got).astype(np.float64) - want)
    assert np.all(err <= tol * scale + 1e-30), f"max err/scale {np.max(err / (scale + 1e-30)):.3g}"


# --- results on every backend -------------------------------------------------------------------
@pytest.mark.parametrize("t", ["f64", "f32", "f16", "bf16"])
@pytest.mark.parametrize("ta,tb", list(itertools.product([False, True], repeat=2)))
def test_gemm_numpy_in_numpy_out(backend, t, ta, tb):
    m, n, k = 37, 23, 51
    a = _rand(t, (k, m) if ta else (m, k), 1)
    b = _rand(t, (n, k) if tb else (k, n), 2)
    c = kaio.blas.gemm(a, b, trans_a=ta, trans_b=tb)
    assert isinstance(c, np.ndarray) and c.shape == (m, n) and c.dtype == a.dtype
    _check(c, a, b, None, 1.0, 0.0, ta, tb, TOL[t])


@pytest.mark.parametrize("t", ["f64", "f32"])
def test_gemm_alpha_beta_into_out(backend, t):
    a, b = _rand(t, (64, 40), 3), _rand(t, (40, 72), 4)
    c0 = _rand(t, (64, 72), 5)
    c = c0.copy()
    ret = kaio.blas.gemm(a, b, out=c, alpha=-0.5, beta=2.0)
    assert ret is c
    _check(c, a, b, c0, -0.5, 2.0, False, False, TOL[t])


def test_gemm_beta_zero_ignores_nan_in_out(backend):
    """beta == 0: out's old contents are never read (not even NaN), as BLAS specifies."""
    a, b = _rand("f32", (8, 8), 6), _rand("f32", (8, 8), 7)
    c = np.full((8, 8), np.nan, np.float32)
    kaio.blas.gemm(a, b, out=c)
    _check(c, a, b, None, 1.0, 0.0, False, False, TOL["f32"])


def test_gemm_empty_and_k0(backend):
    z = kaio.blas.gemm(np.ones((0, 4), np.float32), np.ones((4, 3), np.float32))
    assert z.shape == (0, 3)
    c = np.full((2, 3), 5.0, np.float32)
    kaio.blas.gemm(np.ones((2, 0), np.float32), np.ones((0, 3), np.float32), out=c, beta=1.0)
    assert np.array_equal(c, np.full((2, 3), 5.0, np.float32))   # k = 0: out = beta * out


# --- the column-major mapping ----------------------------------------------------------------------
def _colmajor_gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
    """What a column-major BLAS gemm computes, on flat buffers with leading dimensions."""
    def view(flat, rows, cols, ld):
        return np.lib.stride_tricks.as_strided(flat, (rows, cols), (flat.itemsize, ld * flat.itemsize))
    opA = view(A, k, m, lda).T if ta else view(A, m, k, lda)
    opB = view(B, n, k, ldb).T if tb else view(B, k, n, ldb)
    Cv = view(C, m, n, ldc)
    Cv[...] = alpha * (opA.astype(np.float64) @ opB) + beta * Cv


@pytest.mark.parametrize("ta,tb", list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("m,n,k", [(5, 3, 4), (1, 7, 2), (6, 1, 9), (4, 4, 1)])
def test_column_major_call_computes_the_row_major_product(m, n, k, ta, tb):
    a = _rand("f64", (k, m) if ta else (m, k), m)
    b = _rand("f64", (n, k) if tb else (k, n), n)
    call = column_major_call(a.shape, b.shape, ta, tb)
    c = np.zeros((m, n))
    _colmajor_gemm(call.trans_first, call.trans_second, call.m, call.n, call.k, 1.0,
                   b.ravel(), call.ld_first, a.ravel(), call.ld_second, 0.0, c.ravel(), call.ld_out)
    assert np.allclose(c, (a.T if ta else a) @ (b.T if tb else b), rtol=1e-14, atol=1e-14)


# --- bad arguments --------------------------------------------------------------------------------
@pytest.mark.parametrize("args,kwargs,match", [
    ((np.ones((2, 3), np.float32), np.ones((4, 2), np.float32)), {}, "op\\(b\\) needs 3 rows"),
    ((np.ones((2, 3), np.float32), np.ones((3, 2), np.float64)), {}, "one dtype.*a: f32, b: f64"),
    ((np.ones((2, 3), np.int32), np.ones((3, 2), np.int32)), {}, "expects f16, bf16, f32 or f64"),
    ((np.ones(3, np.float32), np.ones((3, 2), np.float32)), {}, "parameter 'a' expects a 2-d matrix"),
    ((np.ones((3, 2), np.float32).T, np.ones((3, 2), np.float32)), {}, "a. expects a C-contiguous"),
    ((np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)), {"beta": 1.0}, "'out'.*must be given"),
    ((np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)), {"out": np.ones((3, 3), np.float32)},
     "'out' must have shape \\(2, 2\\)"),
    ((np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)), {"alpha": "2"}, "'alpha' must be a real"),
    ((np.ones((2, 3), np.float32), [[1.0]]), {}, "parameter 'b' expects a numpy array"),
])
def test_bad_arguments_are_named(args, kwargs, match):
    with pytest.raises(kaio.LaunchError, match=match):
        kaio.blas.gemm(*args, **kwargs)


def test_out_overlapping_an_input_is_refused():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(kaio.LaunchError, match="'out' overlaps 'a'"):
        kaio.blas.gemm(a, np.ones((4, 4), np.float32), out=a)


# --- hipBLAS through stand-ins --------------------------------------------------------------------------
class FakeHipblas:
    """Enough of hip.hipblas: GemmEx computes on host memory (FakeHip's 'device' memory)."""

    class hipblasOperation_t:
        HIPBLAS_OP_N, HIPBLAS_OP_T = 111, 112

    class hipblasDatatype_t:
        HIPBLAS_R_16F, HIPBLAS_R_32F, HIPBLAS_R_64F, HIPBLAS_R_16B = 150, 151, 152, 168

    class hipblasGemmAlgo_t:
        HIPBLAS_GEMM_DEFAULT = 160

    NP = {150: np.float16, 151: np.float32, 152: np.float64}

    def __init__(self):
        self.calls = []

    def hipblasCreate(self):
        return (0, "handle")

    def hipblasSetStream(self, handle, stream):
        return (0,)

    def hipblasGemmEx(self, h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, comp, algo):
        self.calls.append(dict(ta=ta, tb=tb, m=m, n=n, k=k, lda=lda, ldb=ldb, ldc=ldc, comp=comp))
        t = self.NP[at]
        sc = ctypes.c_double if t is np.float64 else ctypes.c_float
        al, be = sc.from_address(alpha).value, sc.from_address(beta).value

        def flat(ptr, count, typ):
            return np.frombuffer((ctypes.c_char * (count * np.dtype(typ).itemsize)).from_address(ptr), typ)
        a = flat(A, lda * (m if ta == 112 else k), t)
        b = flat(B, ldb * (k if tb == 112 else n), t)
        c = flat(C, ldc * n, t)
        work = c.astype(np.float64)
        _colmajor_gemm(ta == 112, tb == 112, m, n, k, al, a.astype(np.float64), lda,
                       b.astype(np.float64), ldb, be, work, ldc)
        c[...] = work.astype(t)
        return (0,)


@pytest.mark.parametrize("t", ["f64", "f32", "f16"])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_hipblas_path_through_stand_ins(monkeypatch, t, ta, tb):
    from kaio.backends import hip as H
    from kaio.backends import hipblas as HB
    fake = FakeHip()
    monkeypatch.setattr(H, "_hip_module", fake)
    fb = FakeHipblas()
    monkeypatch.setattr(HB, "_hipblas_module", fb)
    be = H.HipBackend()
    m, n, k = 9, 5, 7
    a = _rand(t, (k, m) if ta else (m, k), 8)
    b = _rand(t, (n, k) if tb else (k, n), 9)
    c0 = _rand(t, (m, n), 10)
    c = c0.copy()
    kaio.blas.gemm(a, b, out=c, alpha=1.5, beta=0.5, trans_a=ta, trans_b=tb, backend=be)
    _check(c, a, b, c0, 1.5, 0.5, ta, tb, TOL[t])
    (call,) = fb.calls
    assert (call["m"], call["n"], call["k"]) == (n, m, k)          # swapped into column-major
    assert call["ta"] == (112 if tb else 111) and call["tb"] == (112 if ta else 111)
    assert not fake.mem, "temporaries must be freed"
    assert sum(1 for d, _, _ in fake.copies if d == "dtoh") == 1   # only out comes back


# --- cuBLAS with device arrays (NVIDIA GPU only), through each binding --------------------------------
@pytest.fixture(params=["ctypes", "nvmath"])
def cublas_backend(request, monkeypatch):
    """The CUDA backend with a fresh cuBLAS handle through the binding named by the parameter
    (KAIO_CUBLAS_BINDING; nvmath skips where nvmath-python is not installed)."""
    if request.param == "nvmath":
        pytest.importorskip("nvmath.bindings.cublas")
    monkeypatch.setenv("KAIO_CUBLAS_BINDING", request.param)
    be = kaio.get_backend("cuda")
    monkeypatch.setitem(be.__dict__, "_cublas", None)
    assert be.blas().binding.name == request.param
    return be     # monkeypatch puts the backend's earlier handle back afterwards


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("t", ["f64", "f32", "f16", "bf16"])
def test_cublas_every_dtype_and_transpose(cublas_backend, t):
    m, n, k = 37, 23, 51
    for ta, tb in itertools.product([False, True], repeat=2):
        a = _rand(t, (k, m) if ta else (m, k), 14)
        b = _rand(t, (n, k) if tb else (k, n), 15)
        c0 = _rand(t, (m, n), 16)
        c = c0.copy()
        kaio.blas.gemm(a, b, out=c, alpha=0.75, beta=-1.25, trans_a=ta, trans_b=tb, backend=cublas_backend)
        _check(c, a, b, c0, 0.75, -1.25, ta, tb, TOL[t])


@pytest.mark.gpu
@pytest.mark.cuda
def test_cublas_device_arrays_streams_and_tf32(cublas_backend):
    be = cublas_backend
    a, b = _rand("f32", (256, 192), 11), _rand("f32", (192, 320), 12)
    da, db = kaio.to_device(a), kaio.to_device(b)
    dc = kaio.blas.gemm(da, db, backend=be)                     # out allocated on the device
    assert isinstance(dc, kaio.DeviceArray) and dc.shape == (256, 320)
    _check(dc.to_host(), a, b, None, 1.0, 0.0, False, False, TOL["f32"])
    s = kaio.Stream()
    c0 = _rand("f32", (256, 320), 13)
    dc.copy_from_host(c0)
    kaio.blas.gemm(da, db, out=dc, alpha=2.0, beta=-1.0, backend=be, stream=s)
    s.synchronize()
    _check(dc.to_host(), a, b, c0, 2.0, -1.0, False, False, TOL["f32"])
    t32 = kaio.blas.gemm(a, b, tf32=True, backend=be)             # TF32 inputs: 10-bit mantissa
    _check(t32, a, b, None, 1.0, 0.0, False, False, 2e-3)


@pytest.mark.gpu
@pytest.mark.cuda
def test_cublas_torch_tensors_in_place(cublas_backend):
    torch = pytest.importorskip("torch")
    be = cublas_backend
    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(96, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 96, device="cuda", dtype=torch.float16)
    kaio.blas.gemm(a, b, out=c, trans_b=True, backend=be)
    torch.cuda.synchronize()
    _check(c.cpu().numpy(), a.cpu().numpy(), b.cpu().numpy(), None, 1.0, 0.0, False, True, TOL["f16"])


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("t", ["f64", "f32", "f16", "bf16"])
def test_cublas_planned_calls_match_the_checked_path_bit_for_bit(cublas_backend, t):
    """Device arrays: the first call is checked and planned, later ones run the plan; numpy takes
    the general path. All make the same cublasGemmEx call, so the bytes agree."""
    be = cublas_backend
    a, b, c0 = _rand(t, (48, 40), 17), _rand(t, (56, 40), 18), _rand(t, (48, 56), 19)
    want = c0.copy()
    kaio.blas.gemm(a, b, out=want, alpha=0.5, beta=2.0, trans_b=True, backend=be)
    da, db, dc = kaio.to_device(a), kaio.to_device(b), kaio.to_device(c0)
    for _ in range(3):
        dc.copy_from_host(c0)
        kaio.blas.gemm(da, db, out=dc, alpha=0.5, beta=2.0, trans_b=True, backend=be)
        assert dc.to_host().tobytes() == want.tobytes()
    assert len(be.blas().plans) == 1
    _check(want, a, b, c0, 0.5, 2.0, False, True, TOL[t])
