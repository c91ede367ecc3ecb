"""The manual interface on every backend: device arrays, copies, streams, events, graphs,
pinned memory, vendor BLAS on device arrays -- the same test bodies on the reference backend
(host memory, here and in CI) and on CUDA / HIP where present, checked against numpy. Plus the
HIP runtime's streams, events and graphs through a stand-in ``hip`` module, and the README's
manual example, run as written.
"""
from __future__ import annotations

import ctypes
import re
from pathlib import Path

import numpy as np
import pytest
from test_cuda_runtime import saxpy, scale_out  # the GPU suite's kernels, here on every backend
from test_hip_runtime import NO_LLD, FakeHip, unpack

import kaio
from kaio import f32, i32
from kaio.backends.abi import kernel_abi

ROOT = Path(__file__).resolve().parent.parent


def test_arrays_and_copies(backend):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    kaio.transfer_stats().reset()
    d = kaio.to_device(a)
    assert (d.shape, d.dtype, d.size, d.ndim, d.nbytes) == ((4, 6), np.float32, 24, 2, 96)
    assert d.runtime is kaio.get_backend().runtime and d.ptr != 0
    np.testing.assert_array_equal(d.to_host(), a)
    e = kaio.device_array((4, 6), kaio.f32).copy_(d)
    d.copy_from_host(a * 2)
    np.testing.assert_array_equal(e.to_host(), a)          # a copy, not a view
    out = np.empty_like(a)
    assert d.copy_to_host(out) is out
    np.testing.assert_array_equal(out, a * 2)
    assert kaio.transfer_stats().snapshot() == {"htod_copies": 2, "htod_bytes": 192,
                                                "dtoh_copies": 3, "dtoh_bytes": 288}
    with pytest.raises(ValueError, match="host array is float32\\[6, 4\\]"):
        d.copy_from_host(np.zeros((6, 4), np.float32))
    with pytest.raises(TypeError, match="already in device memory"):
        kaio.to_device(d)
    with pytest.raises(TypeError, match="to_host"):
        np.asarray(d)
    d.free()
    with pytest.raises(ValueError, match="freed"):
        d.to_host()
    assert kaio.device_array(0, kaio.f32).to_host().shape == (0,)


def test_launch_on_device_arrays_and_a_stream(backend):
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    y = np.ones(1000, np.float32)
    dx, dy = kaio.to_device(x), kaio.to_device(y)
    s = kaio.Stream()
    start, end = kaio.Event(), kaio.Event()
    start.record(s)
    kaio.transfer_stats().reset()
    saxpy[(4,), (256,), 0, s](2.0, dx, dy)
    scale_out[(4,), (256,), 0, s](-1.5, dx, dy)            # Out: old contents never read
    saxpy(0.5, dx, dy)                                       # default stream, launch shape from dy
    end.record(s)
    s.synchronize()
    kaio.synchronize()
    assert kaio.transfer_stats().snapshot()["htod_copies"] == 0  # device arrays: no copies
    assert s.query() and end.query() and start.elapsed_time(end) >= 0
    np.testing.assert_array_equal(dy.to_host(), np.float32(-1.5) * x + np.float32(0.5) * x)
    np.testing.assert_array_equal(dx.to_host(), x)            # In: never written


def test_graph_replays_its_launches_on_current_contents(backend):
    x = np.arange(256, dtype=np.float32)
    dx, dy = kaio.to_device(x), kaio.to_device(np.zeros(256, np.float32))
    saxpy[(1,), (256,)](0.0, dx, dy)                         # compile and load before capturing
    with kaio.graph() as g:
        for a in (1.0, 2.0, 3.0):
            saxpy[(1,), (256,)](a, dx, dy)
    g.synchronize()
    assert g.launches == 3
    np.testing.assert_array_equal(dy.to_host(), np.zeros(256))   # captured, not run
    g.replay()
    g.synchronize()
    np.testing.assert_array_equal(dy.to_host(), 6 * x)
    dx.copy_from_host(np.full(256, 10, np.float32))          # new contents, same array
    g.replay()
    g.replay()
    g.synchronize()
    np.testing.assert_array_equal(dy.to_host(), 6 * x + 2 * 6 * 10)
    with pytest.raises(kaio.LaunchError, match="numpy array cannot be used inside kaio.graph"):
        with kaio.graph():
            saxpy[(1,), (256,)](1.0, x, dy)
    with pytest.raises(kaio.LaunchError, match="cannot be nested"):
        with kaio.graph():
            with kaio.graph():
                pass
    with pytest.raises(kaio.LaunchError, match="not been captured"):
        kaio.graph().replay()


def test_graph_keeps_its_arrays_alive(backend):
    """The driver keeps only addresses: a graph whose arrays were dropped by the code that made
    them (a closure returning only its replay) must still own them, or a replay reads and
    writes freed memory."""
    import gc
    import weakref
    x = np.arange(256, dtype=np.float32)
    dy = kaio.to_device(np.zeros(256, np.float32))

    def captured():
        dx = kaio.to_device(x)                  # only the graph refers to it after return
        saxpy[(1,), (256,)](0.0, dx, dy)
        with kaio.graph() as g:
            saxpy[(1,), (256,)](2.0, dx, dy)
        return g, weakref.ref(dx)
    g, input_ref = captured()
    gc.collect()
    assert input_ref() is not None
    kaio.to_device(np.full(256, 7, np.float32))   # an allocation that could reuse freed memory
    g.replay()
    g.replay()
    g.synchronize()
    np.testing.assert_array_equal(dy.to_host(), 4 * x)
    del g
    gc.collect()
    assert input_ref() is None                  # released with the graph


def test_pinned_memory(backend):
    from kaio.device import is_pinned
    p = kaio.pinned_array((3, 5), kaio.f32)
    assert p.shape == (3, 5) and p.dtype == np.float32 and is_pinned(p[1:])
    assert not is_pinned(np.zeros(3))
    p[:] = 7
    d = kaio.to_device(p)
    np.testing.assert_array_equal(d.to_host(), np.full((3, 5), 7, np.float32))


def test_gemm_on_device_arrays(backend):
    a = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((8, 12)).astype(np.float32)
    da, db = kaio.to_device(a), kaio.to_device(b)
    dc = kaio.blas.gemm(da, db)
    assert isinstance(dc, kaio.DeviceArray) and dc.runtime is da.runtime
    np.testing.assert_allclose(dc.to_host(), a @ b, rtol=1e-5, atol=1e-5)
    s = kaio.Stream()
    kaio.blas.gemm(da, db, out=dc, alpha=2.0, beta=-1.0, stream=s)
    s.synchronize()
    np.testing.assert_allclose(dc.to_host(), a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(kaio.LaunchError, match="'out' overlaps 'a'"):
        sq = kaio.to_device(np.eye(4, dtype=np.float32))
        kaio.blas.gemm(sq, kaio.to_device(np.eye(4, dtype=np.float32)), out=sq)


def test_readme_manual_example_runs_as_written(backend, tmp_path):
    """README's first kernel, its "three ways" block and its manual-interface block, run as one
    script exactly as printed (from a file: kaio reads a kernel's source)."""
    import runpy
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    first = next(b for b in blocks if "def saxpy" in b)
    manual = [b for b in blocks if "kaio.to_device" in b]
    assert len(manual) == 2
    script = tmp_path / "readme_example.py"
    script.write_text("\n".join([first, *manual]))
    ns = runpy.run_path(str(script))
    x = np.arange(1000, dtype=np.float32)
    want = np.ones(1000, np.float32)
    for _ in range(2 + 2 + 2):      # two launches in each block (the graph's: its replay)
        want = np.float32(2.0) * x + want
    np.testing.assert_array_equal(ns["y"], want)


# --- reference backend specifics ---------------------------------------------------------
@pytest.fixture
def reference():
    from kaio import backends
    previous = backends._current
    kaio.set_backend("reference")
    yield kaio.get_backend("reference")
    backends._current = previous


def test_reference_memory_starts_as_nan(reference):
    d = kaio.device_array(4, kaio.f32)
    assert np.isnan(d.to_host()).all()
    assert (kaio.device_array(2, kaio.i32).to_host() == -1).all()


def test_reference_failed_launch_leaves_device_arrays_untouched(reference):
    @kaio.kernel
    def bad(j: kaio.In[i32], x: kaio.Raw[f32], y: kaio.Region[f32]):
        for i in y.owned():
            y[i] = x[j[i]]     # an index read from memory: past the end only when it runs

    dx, dy = kaio.to_device(np.ones(8, np.float32)), kaio.to_device(np.zeros(8, np.float32))
    with pytest.raises(Exception, match="out of bounds"):
        bad(np.arange(1, 9, dtype=np.int32), dx, dy)   # the last thread reads x[8]
    np.testing.assert_array_equal(dy.to_host(), np.zeros(8))


def test_reference_refuses_other_memory_and_streams(reference):
    from kaio.backends.reference.runtime import ReferenceRuntime
    other = ReferenceRuntime()               # stands in for another backend's runtime
    other.name = "cuda"
    foreign = kaio.DeviceArray(8, np.float32, runtime=other)
    y = kaio.to_device(np.zeros(8, np.float32))
    with pytest.raises(TypeError, match="parameter 'x'.* got a cuda device array"):
        saxpy(1.0, foreign, y)
    with pytest.raises(TypeError, match="belongs to the cuda backend"):
        saxpy[(1,), (8,), 0, kaio.Stream(runtime=other)](1.0, kaio.to_device(np.ones(8, np.float32)), y)
    with pytest.raises(ValueError, match="must be a reference device array"):
        y.copy_(foreign)
    assert not hasattr(y, "__cuda_array_interface__")  # host memory never passes for device memory
    assert not hasattr(kaio.Stream(), "__cuda_stream__")


def test_reference_events_time_on_the_host(reference):
    start, end = kaio.Event(), kaio.Event()
    with pytest.raises(ValueError, match="recorded"):
        start.elapsed_time(end)
    start.record()
    kaio.to_device(np.zeros(1 << 16, np.float32))
    end.record()
    assert start.elapsed_time(end) > 0


# --- HIP through a stand-in hip module ----------------------------------------------------
class FakeHipRuntime(FakeHip):
    """FakeHip plus streams, events, asynchronous copies, pinned memory and stream capture:
    launches on a capturing stream are recorded and run by hipGraphLaunch."""

    hipStreamCaptureMode = type("M", (), {"hipStreamCaptureModeRelaxed": 2})

    def __init__(self):
        super().__init__()
        self.streams, self.events, self.captures = [], {}, {}
        self.calls: list[str] = []

    def hipStreamCreateWithFlags(self, flags):
        self.streams.append(("stream", len(self.streams), flags))
        return 0, self.streams[-1]

    def hipStreamDestroy(self, s):
        return (0,)

    def hipStreamSynchronize(self, s):
        self.calls.append("sync")
        return (0,)

    def hipStreamQuery(self, s):
        return (600,)   # hipErrorNotReady

    def hipEventCreateWithFlags(self, flags):
        ev = ("event", len(self.events))
        self.events[ev] = None
        return 0, ev

    def hipEventRecord(self, ev, s):
        self.events[ev] = 2.5 * len([v for v in self.events.values() if v is not None])
        return (0,)

    def hipEventSynchronize(self, ev):
        return (0,)

    def hipEventElapsedTime(self, a, b):
        return 0, self.events[b] - self.events[a]

    def hipEventDestroy(self, ev):
        return (0,)

    def hipMemcpyAsync(self, dst, src, n, kind, stream):
        self.calls.append(f"async{kind}")
        return self.hipMemcpy(dst, src, n, kind)

    def hipHostMalloc(self, n, flags):
        return self.hipMalloc(n)

    def hipHostFree(self, p):
        return self.hipFree(p)

    def hipModuleLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        if stream in self.captures:
            arr = (ctypes.c_void_p * 5).from_address(extra)
            size = ctypes.c_size_t.from_address(arr[3]).value
            self.captures[stream].append((ctypes.string_at(arr[1], size), (gx, gy, gz), (bx, by, bz)))
            return (0,)
        return super().hipModuleLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)

    def hipStreamBeginCapture(self, s, mode):
        assert mode == 2
        self.captures[s] = []
        return (0,)

    def hipStreamEndCapture(self, s):
        return 0, ("graph", self.captures.pop(s))

    def hipGraphInstantiateWithFlags(self, g, flags):
        return 0, ("exec", g[1])

    def hipGraphLaunch(self, exe, s):
        import llvm_host
        for kernarg, grid, block in exe[1]:
            llvm_host.run_flat(self.kernel, unpack(kernel_abi(self.kernel), kernarg), grid, block)
        return (0,)

    def hipGraphDestroy(self, g):
        return (0,)

    def hipGraphExecDestroy(self, g):
        return (0,)


@pytest.fixture
def fake_hip(monkeypatch):
    from kaio import backends
    from kaio.backends import hip as H
    f = FakeHipRuntime()
    monkeypatch.setattr(H, "_hip_module", f)
    monkeypatch.setattr(backends, "_instances", {})
    monkeypatch.setattr(backends, "_current", "hip")
    return f


def test_hip_memory_streams_events(fake_hip):
    a = np.arange(12, dtype=np.int32)
    d = kaio.to_device(a)
    assert d.runtime.name == "hip" and d.ptr in fake_hip.mem
    assert d.__cuda_array_interface__["data"] == (d.ptr, False)
    s = kaio.Stream(non_blocking=True)
    assert s.handle == ("stream", 0, 1) and s.query() is False
    out = d.copy_to_host(stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out, a)
    assert fake_hip.calls == ["async2", "sync"]
    e0, e1 = kaio.Event().record(s), kaio.Event().record(s)
    assert e1.elapsed_time(e0) == -2.5 and e0.elapsed_time(e1) == 2.5
    class Protocol:  # another library's stream, by the CUDA stream protocol
        def __cuda_stream__(self):
            return (0, 0x99)
    assert s.runtime.stream_handle(Protocol()) == 0x99
    p = kaio.pinned_array(4, kaio.f32)
    assert p.ctypes.data in fake_hip.mem
    n = len(fake_hip.mem)
    d.free()
    assert len(fake_hip.mem) == n - 1


@pytest.mark.skipif(bool(NO_LLD), reason=NO_LLD or "ld.lld present")
def test_hip_graph_capture_and_replay(fake_hip):
    import llvm_kernels as K

    from kaio.backends import hip as H
    be = kaio.get_backend()
    kernel = K.saxpy()
    compiled = be.compile(kernel)
    fake_hip.kernel = kernel
    x = np.arange(64, dtype=np.float32)
    dx, dy = kaio.to_device(x), kaio.to_device(np.zeros(64, np.float32))
    with kaio.graph() as g:
        for a in (1.0, 2.0):
            be.launch(compiled, (1, 1, 1), (64, 1, 1), [a, dx, dy])
    assert g.launches == 2 and not fake_hip.launches       # recorded on the capture stream
    g.replay()
    g.replay()
    g.synchronize()
    np.testing.assert_array_equal(dy.to_host(), 6 * x)
    assert isinstance(be.runtime, H.HipRuntime)
