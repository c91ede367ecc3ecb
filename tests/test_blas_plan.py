"""kaio.blas.gemm's planned path without a GPU: a call on kaio device arrays is checked in full
once per signature (kaio.blas.gemm_plan, Cublas.prepare) and later calls only re-check what depends
on the arrays themselves. On the fake CUDA driver with the stand-in cuBLAS bindings of
tests/test_blas_bindings.py (which compute the product on the fake device memory): repeated calls
skip the full check, make the same cublasGemmEx call as the checked path and give the same bytes;
bad input after warm-up is still refused, naming the parameter, before anything is launched."""
from __future__ import annotations

import numpy as np
import pytest
from test_blas import TOL, _check, _rand
from test_blas_bindings import _backend, stand_ins  # noqa: F401  (fixture)
from test_cuda_runtime_fake import fake  # noqa: F401  (fixture)

import kaio
from kaio import blas as B

POINTERS = (6, 9, 13)   # b's, a's and out's device addresses in cublasGemmEx's arguments


def _without_pointers(args):
    return tuple(v for i, v in enumerate(args) if i not in POINTERS)


@pytest.fixture(params=["nvmath", "ctypes"])
def rec_be(stand_ins, monkeypatch, request):  # noqa: F811  (the imported fixture)
    """(the binding's recorder, the fake CUDA backend with a fresh handle through that binding)"""
    monkeypatch.setenv("KAIO_CUBLAS_BINDING", request.param)
    be = _backend(monkeypatch)
    assert be.blas().binding.name == request.param
    return dict(zip(("ctypes", "nvmath"), stand_ins))[request.param], be


@pytest.fixture
def checks(monkeypatch):
    """How often the full argument check ran."""
    seen = []
    full = B.check_gemm

    def counted(*args):
        seen.append(args)
        return full(*args)
    monkeypatch.setattr(B, "check_gemm", counted)
    return seen


def test_repeated_calls_are_planned_and_identical_to_the_checked_path(rec_be, checks):
    rec, be = rec_be
    a, b = _rand("f32", (9, 7), 1), _rand("f32", (5, 7), 2)
    da, db = kaio.to_device(a), kaio.to_device(b)
    dc = kaio.to_device(np.zeros((9, 5), np.float32))
    got = []
    for _ in range(4):
        assert kaio.blas.gemm(da, db, out=dc, alpha=1.5, trans_b=True, backend=be) is dc
        got.append(dc.to_host())
    assert len(checks) == 1, "only the first call of a signature is checked in full"
    assert len(rec.gemms) == 4 and len(set(rec.gemms)) == 1
    host = kaio.blas.gemm(a, b, alpha=1.5, trans_b=True, backend=be)   # numpy: the general path
    assert len(checks) == 2
    assert _without_pointers(rec.gemms[-1]) == _without_pointers(rec.gemms[0])
    for g in got:
        assert g.tobytes() == host.tobytes()
    _check(host, a, b, None, 1.5, 0.0, False, True, TOL["f32"])
    assert rec.scalars == [(1.5, 0.0)] * 5


def test_planned_calls_take_their_own_scalars_and_stream(rec_be, checks):
    rec, be = rec_be
    a, b, c0 = _rand("f64", (6, 4), 3), _rand("f64", (4, 5), 4), _rand("f64", (6, 5), 5)
    da, db, dc = kaio.to_device(a), kaio.to_device(b), kaio.to_device(c0)
    kaio.blas.gemm(da, db, out=dc, backend=be)
    s = kaio.Stream()
    dc.copy_from_host(c0)
    kaio.blas.gemm(da, db, out=dc, alpha=-2.0, beta=0.5, backend=be, stream=s)
    _check(dc.to_host(), a, b, c0, -2.0, 0.5, False, False, TOL["f64"])
    kaio.blas.gemm(da, db, out=dc, alpha=0.25, beta=0.0, backend=be, stream=s)
    assert len(checks) == 1
    kaio.blas.gemm(da, db, out=dc, alpha=3, beta=np.float32(0.0), backend=be, stream=s)  # new types
    assert len(checks) == 2
    assert rec.scalars == [(1.0, 0.0), (-2.0, 0.5), (0.25, 0.0), (3.0, 0.0)]
    assert rec.streams == [0, s.handle]
    _check(dc.to_host(), a, b, None, 3.0, 0.0, False, False, TOL["f64"])


def _views(be):
    """Two 8x8 f32 views of one 12x8 device buffer, rows 0-7 and 4-11 (they overlap)."""
    base = kaio.to_device(np.zeros((12, 8), np.float32))
    rt = be.runtime
    lo = kaio.DeviceArray((8, 8), np.float32, runtime=rt, _ptr=base.ptr, _owner=base)
    hi = kaio.DeviceArray((8, 8), np.float32, runtime=rt, _ptr=base.ptr + 4 * 8 * 4, _owner=base)
    return lo, hi


def _free(x):
    x.free()
    return x


@pytest.mark.parametrize("bad,match", [
    (lambda a, b, c, be: dict(b=kaio.to_device(np.ones((7, 8), np.float32))), "op\\(b\\) needs 8 rows"),
    (lambda a, b, c, be: dict(out=kaio.to_device(np.ones((8, 7), np.float32))),
     "'out' must have shape \\(8, 8\\)"),
    (lambda a, b, c, be: dict(b=kaio.to_device(np.ones((8, 8)))), "one dtype.*b: f64"),
    (lambda a, b, c, be: dict(out=a), "'out' overlaps 'a'"),
    (lambda a, b, c, be: dict(out=b), "'out' overlaps 'b'"),
    (lambda a, b, c, be: dict(zip(("a", "out"), _views(be))), "'out' overlaps 'a'"),
    (lambda a, b, c, be: dict(zip(("out", "b"), _views(be))), "'out' overlaps 'b'"),
    (lambda a, b, c, be: dict(b=_free(kaio.to_device(np.ones((8, 8), np.float32)))),
     "parameter 'b': the device array was freed"),
    (lambda a, b, c, be: dict(alpha=True), "'alpha' must be a real number"),
    (lambda a, b, c, be: dict(beta="0"), "'beta' must be a real number"),
    (lambda a, b, c, be: dict(out=np.zeros((8, 8), np.float32)), "mix of numpy and device arrays"),
])
def test_bad_input_after_warm_up_is_refused_before_any_launch(rec_be, bad, match):
    rec, be = rec_be
    a, b, c = (kaio.to_device(_rand("f32", (8, 8), i)) for i in range(3))
    for _ in range(2):   # the signature is planned
        kaio.blas.gemm(a, b, out=c, backend=be)
    assert len(be.blas().plans) == 1 and len(rec.gemms) == 2
    args = dict(a=a, b=b, out=c)
    args.update(bad(a, b, c, be))
    with pytest.raises(kaio.LaunchError, match=match):
        kaio.blas.gemm(args.pop("a"), args.pop("b"), **args, backend=be)
    assert len(rec.gemms) == 2, "nothing may be launched"
    kaio.blas.gemm(a, b, out=c, backend=be)      # the plan still serves good calls
    assert len(rec.gemms) == 3


def test_plans_are_bounded(rec_be, monkeypatch):
    rec, be = rec_be
    monkeypatch.setattr(B, "MAX_PLANS", 2)
    for n in (3, 4, 5, 6):
        a, b = _rand("f32", (n, 2), n), _rand("f32", (2, n), n + 1)
        dc = kaio.to_device(np.zeros((n, n), np.float32))
        kaio.blas.gemm(kaio.to_device(a), kaio.to_device(b), out=dc, backend=be)
        _check(dc.to_host(), a, b, None, 1.0, 0.0, False, False, TOL["f32"])
        assert 1 <= len(be.blas().plans) <= 2
    assert len(rec.gemms) == 4


def test_empty_product_is_planned_without_a_launch(rec_be):
    rec, be = rec_be
    a, b = kaio.to_device(np.ones((0, 4), np.float32)), kaio.to_device(np.ones((4, 3), np.float32))
    c = kaio.device_array((0, 3), np.float32)
    for _ in range(2):
        assert kaio.blas.gemm(a, b, out=c, backend=be) is c
    assert rec.gemms == []
    with pytest.raises(TypeError, match="not a CUDA stream"):
        kaio.blas.gemm(a, b, out=c, backend=be, stream="s")


def test_unhashable_flag_takes_the_checked_path(rec_be):
    rec, be = rec_be
    a, b = _rand("f32", (3, 4), 1), _rand("f32", (3, 5), 2)
    dc = kaio.device_array((4, 5), np.float32)
    for _ in range(2):
        kaio.blas.gemm(kaio.to_device(a), kaio.to_device(b), out=dc, trans_a=[1], backend=be)
    _check(dc.to_host(), a, b, None, 1.0, 0.0, True, False, TOL["f32"])
    assert len(rec.gemms) == 2 and be.blas().plans == {}
