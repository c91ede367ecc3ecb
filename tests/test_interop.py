"""kaio arrays and streams with other libraries: DLPack export (``DeviceArray.__dlpack__``) read
back by numpy, torch and kaio's own capsule reader; streams given as anything speaking the CUDA
stream protocol (``__cuda_stream__``). Reference-backend arrays are host memory (DLPack device
kDLCPU), so the export runs here; the gpu-marked tests do the round trips with torch and CuPy
on CUDA, and launch on their streams."""
import gc

import ml_dtypes
import numpy as np
import pytest

import kaio
from kaio import f32
from kaio.backends import dlpack as D
from kaio.dlpack import read_capsule


@kaio.kernel
def scale(x: kaio.In[f32], y: kaio.Out[f32], a: f32):
    for i in y.owned():
        y[i] = a * x[i]


class ProtocolStream:
    """A stream of some other library: only the CUDA stream protocol."""

    def __init__(self, handle, version=0):
        self.handle, self.version, self.calls = handle, version, 0

    def __cuda_stream__(self):
        self.calls += 1
        return (self.version, self.handle)


# --- DLPack export on the reference backend (host memory) --------------------------------------
def test_numpy_reads_a_kaio_array_without_a_copy(reference):
    a = np.arange(12, dtype=np.float32)
    d = kaio.to_device(a)
    assert d.__dlpack_device__() == (1, 0)
    n = np.from_dlpack(d)
    assert n.ctypes.data == d.ptr and n.shape == (12,) and n.dtype == np.float32
    np.testing.assert_array_equal(n, a)
    scale(kaio.to_device(np.ones(12, np.float32)), d, 5.0)
    np.testing.assert_array_equal(n, np.full(12, 5.0, np.float32))  # the same memory


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int8, np.uint16,
                                   np.int64, np.float64, np.bool_])
def test_capsule_describes_the_array(dtype, reference):
    d = kaio.to_device(np.zeros((2, 3), dtype))
    info = read_capsule(d.__dlpack__())
    assert info["device_type"] == 1 and info["device_id"] == 0
    assert info["ptr"] == d.ptr and info["shape"] == (2, 3) and info["strides"] is None
    assert info["dtype"] == np.dtype(dtype)


def test_the_export_keeps_the_array_alive_until_the_consumer_is_done(reference):
    gc.collect()
    before = len(D._exported)
    d = kaio.to_device(np.arange(5, dtype=np.float64))
    n = np.from_dlpack(d)
    del d
    gc.collect()
    assert len(D._exported) == before + 1
    np.testing.assert_array_equal(n, np.arange(5.0))  # still the array's (live) memory
    del n
    gc.collect()
    assert len(D._exported) == before
    cap = kaio.to_device(np.ones(3, np.float32)).__dlpack__()  # never consumed
    assert len(D._exported) == before + 1
    del cap
    gc.collect()
    assert len(D._exported) == before


def test_kaio_reads_its_own_export_and_empty_and_0d_arrays(reference):
    a = np.arange(6, dtype=np.float32)
    back = kaio.from_dlpack(kaio.to_device(a))
    np.testing.assert_array_equal(back.to_host(), a)
    assert np.from_dlpack(kaio.device_array((0, 3), np.float32)).shape == (0, 3)
    assert np.from_dlpack(kaio.device_array((), np.float64)).shape == ()


def test_export_refusals(reference):
    d = kaio.to_device(np.ones(3, np.float32))
    with pytest.raises(BufferError, match="without a copy"):
        d.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="not"):
        d.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream must be None"):
        d.__dlpack__(stream=1)
    assert d.__dlpack__(copy=False, dl_device=(1, 0), max_version=(1, 0)) is not None


def test_torch_takes_a_kaio_array_without_a_copy(reference):
    torch = pytest.importorskip("torch")
    d = kaio.to_device(np.arange(6, dtype=np.float32))
    t = torch.from_dlpack(d)
    assert t.data_ptr() == d.ptr and t.device.type == "cpu"
    t[0] = 7.0
    assert d.to_host()[0] == 7.0
    b = torch.from_dlpack(kaio.to_device(np.ones(3, ml_dtypes.bfloat16)))
    assert b.dtype == torch.bfloat16


# --- streams: the CUDA stream protocol ----------------------------------------------------------
def test_a_protocol_stream_is_accepted_on_every_launch_form(reference):
    s = ProtocolStream(1234)
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    scale[(1,), (8,), 0, s](x, y, 2.0)
    np.testing.assert_array_equal(y, 2 * x)
    scale.on(s)(x, y, 3.0)
    np.testing.assert_array_equal(y, 3 * x)
    kaio.Event().record(s)
    assert s.calls == 3
    from kaio.backends.runtime import current
    assert current().stream_handle(s) == 1234


def test_a_bad_protocol_answer_is_a_type_error(reference):
    class Bad:
        def __cuda_stream__(self):
            return 1234
    with pytest.raises(TypeError, match=r"must return \(version, handle\)"):
        scale.on(Bad())(np.ones(2, np.float32), np.zeros(2, np.float32), 1.0)


def test_cuda_runtime_takes_the_protocol_handle():
    from kaio.backends.cuda_runtime import CudaRuntime
    rt = CudaRuntime.__new__(CudaRuntime)  # foreign_stream needs no driver
    assert rt.foreign_stream(ProtocolStream(0xBEEF)) == 0xBEEF


# --- on the GPU: torch and CuPy ------------------------------------------------------------------
@pytest.fixture
def cuda():
    from kaio import backends as be
    previous = be._current
    kaio.set_backend("cuda")
    yield
    be._current = previous


@pytest.mark.gpu
def test_torch_round_trip_on_gpu(cuda):
    torch = pytest.importorskip("torch")
    d = kaio.to_device(np.arange(1000, dtype=np.float32))
    t = torch.from_dlpack(d)
    assert t.device.type == "cuda" and t.data_ptr() == d.ptr
    t.mul_(2.0)
    np.testing.assert_array_equal(d.to_host(), 2 * np.arange(1000, dtype=np.float32))
    back = kaio.from_dlpack(t)   # and torch -> kaio, the same memory
    assert back.ptr == d.ptr
    b = torch.from_dlpack(kaio.to_device(np.ones(4, ml_dtypes.bfloat16)))
    assert b.dtype == torch.bfloat16 and b.sum().item() == 4
    del d
    gc.collect()
    assert t.sum().item() == 999 * 1000  # the export keeps kaio's memory alive


@pytest.mark.gpu
def test_torch_from_dlpack_on_a_side_stream_sees_kaios_writes(cuda):
    torch = pytest.importorskip("torch")
    n = 1 << 22
    x = kaio.to_device(np.ones(n, np.float32))
    y = kaio.device_array((n,), np.float32)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        scale(x, y, 3.0)                 # kaio's default stream
        t = torch.from_dlpack(y)         # s waits for it (DLPack's stream argument)
        total = t.sum()
    s.synchronize()
    assert total.item() == 3.0 * n


@pytest.mark.gpu
def test_cupy_round_trip_on_gpu(cuda):
    cp = pytest.importorskip("cupy")
    d = kaio.to_device(np.arange(100, dtype=np.float32))
    c = cp.from_dlpack(d)
    assert c.data.ptr == d.ptr
    c *= 3
    np.testing.assert_array_equal(d.to_host(), 3 * np.arange(100, dtype=np.float32))


@pytest.mark.gpu
def test_launches_on_torch_and_cupy_streams(cuda):
    torch = pytest.importorskip("torch")
    x = torch.arange(4096, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    scale.on(s)(x, y, 2.0)
    scale[(16,), (256,), 0, s](x, y, 4.0)
    s.synchronize()
    assert torch.equal(y, 4 * x)
    cp = pytest.importorskip("cupy")
    cs = cp.cuda.Stream(non_blocking=True)
    cx = cp.arange(4096, dtype=cp.float32)
    cy = cp.empty_like(cx)
    cp.cuda.Device().synchronize()
    scale.on(cs)(cx, cy, 5.0)
    cs.synchronize()
    assert bool((cy == 5 * cx).all())
