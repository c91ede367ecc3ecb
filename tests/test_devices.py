"""Several devices in one process (kaio.devices): the current device per thread, arrays,
streams, events and graphs belonging to one device, launches refusing another device's arrays
before anything runs, and peer copies. On the reference backend with KAIO_REF_DEVICES pretend
devices; the last tests run on one real GPU (device 0 to itself)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import kaio
from kaio import backends, config, f32
from kaio.backends.runtime import Runtime


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


@pytest.fixture
def three(monkeypatch):
    """The reference backend pretending to have three devices; device 0 current."""
    monkeypatch.setenv("KAIO_REF_DEVICES", "3")
    config.reload()
    previous = backends._current
    kaio.set_backend("reference")
    kaio.set_device(None)
    yield
    kaio.set_device(None)
    backends._current = previous
    monkeypatch.delenv("KAIO_REF_DEVICES")
    config.reload()


def test_device_count_and_the_default_device(three):
    assert kaio.device_count() == 3
    assert kaio.current_device() == 0
    assert kaio.get_backend().devices() == ["cpu (numpy)"] * 3


def test_reference_has_one_device_unless_told(reference):
    assert kaio.device_count() == 1
    with pytest.raises(ValueError, match=r"set_device\(1\): the reference backend has 1 device\(s\).*"
                                         "KAIO_REF_DEVICES"):
        kaio.set_device(1)


def test_set_device_checks_the_ordinal(three):
    with pytest.raises(ValueError, match=r"has 3 device\(s\), 0 to 2"):
        kaio.set_device(3)
    with pytest.raises(ValueError):
        kaio.set_device(-1)
    with pytest.raises(TypeError, match="int ordinal"):
        kaio.set_device(True)
    assert kaio.current_device() == 0


def test_with_device_restores_and_nests(three):
    with kaio.device(2):
        assert kaio.current_device() == 2
        with kaio.device(1):
            assert kaio.current_device() == 1
        assert kaio.current_device() == 2
    assert kaio.current_device() == 0
    with pytest.raises(RuntimeError), kaio.device(1):
        raise RuntimeError("the block failed")
    assert kaio.current_device() == 0


def test_current_device_is_per_thread(three):
    kaio.set_device(2)
    seen = []
    t = threading.Thread(target=lambda: seen.append(kaio.current_device()))
    t.start()
    t.join()
    assert seen == [0] and kaio.current_device() == 2


def test_objects_belong_to_the_device_current_when_made(three):
    with kaio.device(1):
        x = kaio.to_device(np.arange(4, dtype=np.float32))
        s, e = kaio.Stream(), kaio.Event()
    y = kaio.device_array(4, np.float32)
    assert (x.device, y.device) == (1, 0)
    assert s.runtime.device == e.runtime.device == 1
    assert x.runtime is not y.runtime and x.runtime.name == y.runtime.name == "reference"
    assert "reference device 1" in repr(x)
    with kaio.device(1):   # the same runtime object for the same device
        assert kaio.device_array(1, np.float32).runtime is x.runtime


def test_launch_runs_on_the_current_device(three):
    a = np.arange(16, dtype=np.float32)
    with kaio.device(2):
        x, y = kaio.to_device(a), kaio.to_device(np.ones(16, np.float32))
        saxpy(2.0, x, y)
        assert kaio.get_backend().device == 2
    np.testing.assert_array_equal(y.to_host(), 2 * a + 1)


def test_launch_refuses_another_devices_array_before_running(three):
    x0 = kaio.to_device(np.ones(8, np.float32))
    with kaio.device(1):
        y1 = kaio.to_device(np.zeros(8, np.float32))
        with pytest.raises(kaio.LaunchError, match="kernel 'saxpy': parameter 'x' is on reference "
                                                   "device 0 but the launch runs on reference device 1"):
            saxpy(2.0, x0, y1)
    np.testing.assert_array_equal(y1.to_host(), np.zeros(8))  # nothing ran


def test_launch_refuses_another_devices_stream(three):
    with kaio.device(1):
        s1 = kaio.Stream()
    x, y = kaio.to_device(np.ones(8, np.float32)), kaio.to_device(np.zeros(8, np.float32))
    with pytest.raises(kaio.LaunchError, match="stream belongs to reference device 1, this work "
                                               "runs on reference device 0"):
        saxpy[(1,), (8,), 0, s1](1.0, x, y)
    np.testing.assert_array_equal(y.to_host(), np.zeros(8))
    with pytest.raises(kaio.LaunchError, match="reference device 1"):
        kaio.Event().record(s1)


def test_graph_belongs_to_its_streams_device(three):
    with kaio.device(1):
        x, y = kaio.to_device(np.ones(8, np.float32)), kaio.to_device(np.zeros(8, np.float32))
        with kaio.graph() as g:
            saxpy(1.0, x, y)
        assert g.runtime.device == 1
    g.replay()
    g.replay()
    np.testing.assert_array_equal(y.to_host(), np.full(8, 2.0))


def test_peer_copy_between_devices(three):
    a = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    with kaio.device(2):
        src = kaio.to_device(a)
    dst = kaio.device_array((5, 7), np.float32).copy_(src)
    assert dst.device == 0
    np.testing.assert_array_equal(dst.to_host(), a)
    with pytest.raises(ValueError, match=r"copy_: float32\[5, 7\] into float32\[35\]"):
        kaio.device_array(35, np.float32).copy_(src)


def test_peer_copy_without_peer_access_is_staged_through_the_host(three, monkeypatch):
    """Devices without peer access: two counted copies through host memory, same result."""
    rt = kaio.device_array(1, np.float32).runtime
    monkeypatch.setattr(type(rt), "can_access_peer", Runtime.can_access_peer)
    a = np.arange(6, dtype=np.float64)
    with kaio.device(1):
        src = kaio.to_device(a)
    stats = kaio.transfer_stats()
    before = stats.snapshot()
    dst = kaio.device_array(6, np.float64).copy_(src)
    after = stats.snapshot()
    np.testing.assert_array_equal(dst.to_host(), a)
    assert after["dtoh_bytes"] - before["dtoh_bytes"] >= 48
    assert after["htod_bytes"] - before["htod_bytes"] >= 48


def test_copy_between_backends_is_still_refused(three):
    from kaio.backends.reference.runtime import ReferenceRuntime
    other = ReferenceRuntime()
    other.name = "cuda"
    with pytest.raises(ValueError, match="must be a reference device array"):
        kaio.device_array(4, np.float32).copy_(kaio.DeviceArray(4, np.float32, runtime=other))


def test_backend_on_device_keeps_its_options(three):
    be = kaio.get_backend("reference")
    on2 = be.on_device(2)
    assert on2.device == 2 and on2.warp_size == be.warp_size and on2.sanitize == be.sanitize
    assert be.on_device(2) is on2 and be.on_device(be.device) is be


# --- real GPUs ----------------------------------------------------------------------------
@pytest.fixture
def gpu():
    """The first GPU backend present (the test is gpu-marked: skipped without one)."""
    previous = backends._current
    kaio.set_backend(next(n for n in ("cuda", "hip") if backends.availability(n)[0]))
    kaio.set_device(None)
    yield kaio.get_backend()
    kaio.set_device(None)
    backends._current = previous


@pytest.mark.gpu
def test_gpu_device_selection_on_device_0(gpu):
    assert kaio.device_count() >= 1
    default = kaio.current_device()
    with kaio.device(0):
        assert kaio.current_device() == 0 and kaio.get_backend().device == 0
        a = np.arange(1024, dtype=np.float32)
        x, y = kaio.to_device(a), kaio.to_device(np.ones(1024, np.float32))
        s = kaio.Stream()
        saxpy[(4,), (256,), 0, s](2.0, x, y)
        s.synchronize()
        assert x.device == 0 and s.runtime.device == 0
    assert kaio.current_device() == default
    np.testing.assert_array_equal(y.to_host(), 2 * a + 1)
    with pytest.raises(ValueError, match="device"):
        kaio.set_device(kaio.device_count())


@pytest.mark.gpu
def test_gpu_copy_to_the_same_device_direct_and_staged(gpu):
    """copy_ on one device (a device-to-device copy), and the peer-copy paths run device 0 to
    itself: cuMemcpyPeer within one context, and the host-staged fallback."""
    a = np.random.default_rng(1).standard_normal(4096)
    src = kaio.to_device(a)
    np.testing.assert_array_equal(kaio.device_array(4096, np.float64).copy_(src).to_host(), a)
    rt = src.runtime
    for direct in (True, False):
        dst = kaio.device_array(4096, np.float64)
        if direct and gpu.name == "cuda":
            rt.memcpy_peer(dst.ptr, rt, src.ptr, src.nbytes)
        else:
            Runtime.copy_peer(rt, dst.ptr, _NoPeer(rt), src.ptr, src.nbytes)
        np.testing.assert_array_equal(dst.to_host(), a)


class _NoPeer:
    """A runtime that forwards everything but has no peer access (forces host staging)."""

    def __init__(self, rt):
        self._rt = rt

    def __getattr__(self, name):
        return getattr(self._rt, name)


@pytest.mark.gpu
def test_gpu_peer_copy_between_two_gpus(gpu):
    if kaio.device_count() < 2:
        pytest.skip("one GPU: the peer copy between two GPUs needs a machine with two")
    a = np.arange(1 << 20, dtype=np.float32)
    with kaio.device(1):
        src = kaio.to_device(a)
    with kaio.device(0):
        dst = kaio.device_array(a.shape, a.dtype).copy_(src)
        x0 = kaio.to_device(np.ones(8, np.float32))
    np.testing.assert_array_equal(dst.to_host(), a)
    with kaio.device(1), pytest.raises(kaio.LaunchError, match="parameter 'x' is on .* device 0"):
        saxpy(1.0, x0, kaio.to_device(np.zeros(8, np.float32)))
