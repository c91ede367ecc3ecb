"""The CUDA runtime on a real NVIDIA GPU: device memory, pinned memory, streams, events,
launches of kaio kernels, transfers by intent, zero-copy interop, JIT errors and faults.

Skipped as a whole, with the reason, where CUDA is unavailable; scripts/gpu_suite.sh runs it on
the H200. tests/test_cuda_runtime_fake.py covers the same logic on any machine against a fake
driver. (No ``from __future__ import annotations`` here: kernels below take their parameter
types from closure variables.)
"""
import json
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import kaio
from kaio import f32, i32

try:
    from kaio.backends.cuda import CudaBackend
    _OK, _WHY = CudaBackend.available()
except Exception as e:  # noqa: BLE001 -- any import problem is a reason to skip, shown to the user
    _OK, _WHY = False, f"{type(e).__name__}: {e}"

pytestmark = [pytest.mark.gpu, pytest.mark.cuda,
              pytest.mark.skipif(not _OK, reason=f"CUDA unavailable: {_WHY}")]

ALL = [kaio.bool_, kaio.i8, kaio.u8, kaio.i16, kaio.u16, kaio.i32, kaio.u32, kaio.i64, kaio.u64,
       kaio.f16, kaio.bf16, kaio.f32, kaio.f64]


@pytest.fixture(autouse=True)
def cuda_backend():
    from kaio import backends
    previous = backends._current
    kaio.set_backend("cuda")
    yield backends.get_backend("cuda")
    backends._current = previous


def _sample(t, n=1000, seed=0):
    rng = np.random.default_rng(seed)
    if t.is_bool:
        return rng.integers(0, 2, n).astype(bool)
    if t.is_float:
        return (rng.standard_normal(n) * 100).astype(t.storage_np)
    lo, hi = max(t.min_value(), -10**6), min(t.max_value(), 10**6)
    return rng.integers(lo, hi, n, endpoint=True).astype(t.storage_np)


# --- memory -------------------------------------------------------------------------------
@pytest.mark.parametrize("t", ALL, ids=lambda t: t.name)
def test_device_array_roundtrip_all_dtypes(t):
    a = _sample(t).reshape(10, 100)
    d = kaio.to_device(a)
    assert d.shape == (10, 100) and d.dtype == a.dtype and d.nbytes == a.nbytes and d.ptr != 0
    np.testing.assert_array_equal(d.to_host(), a)
    out = np.empty_like(a)
    d.copy_to_host(out)
    np.testing.assert_array_equal(out, a)
    b = _sample(t, seed=1).reshape(10, 100)
    d.copy_from_host(b)
    np.testing.assert_array_equal(d.to_host(), b)
    e = kaio.device_array(a.shape, t).copy_(d)
    np.testing.assert_array_equal(e.to_host(), b)


def test_zero_size_and_free():
    z = kaio.to_device(np.zeros((0, 3), np.float32))
    assert z.to_host().shape == (0, 3)
    d = kaio.device_array(1 << 20, kaio.f32)
    d.free()
    assert d.ptr == 0


def test_pinned_async_copies_on_stream():
    n = 1 << 20
    h = kaio.pinned_array(n, kaio.f32)
    from kaio.device import is_pinned
    assert is_pinned(h) and h.shape == (n,) and h.dtype == np.float32
    h[:] = np.arange(n, dtype=np.float32)
    s = kaio.Stream()
    d = kaio.device_array(n, kaio.f32)
    d.copy_from_host(h, stream=s)
    back = kaio.pinned_array(n, kaio.f32)
    d.copy_to_host(back, stream=s)
    s.synchronize()
    assert s.query()
    np.testing.assert_array_equal(back, np.arange(n, dtype=np.float32))


def test_events_time_work():
    n = 1 << 24
    d = kaio.device_array(n, kaio.f32)
    h = kaio.pinned_array(n, kaio.f32)
    s = kaio.Stream(non_blocking=True)
    start, end = kaio.Event(), kaio.Event()
    start.record(s)
    d.copy_from_host(h, stream=s)
    end.record(s)
    end.synchronize()
    assert end.query()
    ms = start.elapsed_time(end)
    assert 0.0 < ms < 1000.0  # 64 MiB over PCIe/NVLink takes well under a second


# --- launches -----------------------------------------------------------------------------
@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


@kaio.kernel
def scale_out(a: f32, x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = a * x[i]


@kaio.kernel
def add2d(x: kaio.In[f32, 2], y: kaio.In[f32, 2], z: kaio.Out[f32, 2]):
    for r, c in z.owned():
        z[r, c] = x[r, c] + y[r, c]


def test_saxpy_numpy():
    x = np.linspace(-5, 5, 100_003, dtype=np.float32)
    y = np.linspace(1, 2, 100_003, dtype=np.float32)
    want = np.float32(1.5) * x + y  # IR never fuses mul+add: bit-identical to numpy
    saxpy(1.5, x, y)
    np.testing.assert_array_equal(y, want)


def test_saxpy_device_arrays_on_stream():
    x = np.arange(4096, dtype=np.float32)
    dx, dy = kaio.to_device(x), kaio.to_device(np.ones(4096, np.float32))
    s = kaio.Stream()
    from kaio.device import transfer_stats
    transfer_stats().reset()
    for _ in range(3):
        saxpy[16, 256, 0, s](2.0, dx, dy)
    assert transfer_stats().snapshot()["htod_copies"] == 0  # device arrays: nothing copied
    s.synchronize()
    np.testing.assert_array_equal(dy.to_host(), 1 + 3 * 2 * x)


def test_2d_extents():
    x = np.arange(37 * 53, dtype=np.float32).reshape(37, 53)
    y = np.ones_like(x)
    z = np.zeros_like(x)
    add2d(x, y, z)
    np.testing.assert_array_equal(z, x + y)


def test_transfer_intents_counted():
    from kaio.device import transfer_stats
    x, y = np.ones(1000, np.float32), np.zeros(1000, np.float32)
    st = transfer_stats()
    st.reset()
    scale_out(3.0, x, y)  # In: copy in only; Out: copy out only, never in
    assert st.snapshot() == {"htod_copies": 1, "htod_bytes": 4000, "dtoh_copies": 1, "dtoh_bytes": 4000}
    np.testing.assert_array_equal(y, np.full(1000, 3, np.float32))
    st.reset()
    saxpy(1.0, x, y)  # Region: both ways
    assert st.snapshot() == {"htod_copies": 2, "htod_bytes": 8000, "dtoh_copies": 1, "dtoh_bytes": 4000}


def _put_kernel(t):
    @kaio.kernel
    def put(v: t, y: kaio.Out[t]):
        for i in y.owned():
            y[i] = v
    return put


@pytest.mark.parametrize("t", ALL, ids=lambda t: t.name)
def test_scalar_args_every_dtype(t):
    """A scalar of each dtype reaches the kernel bit-exact (checks ABI packing on hardware)."""
    v = {"bool": True, "f16": 1.0009765625, "bf16": -1.0078125, "f32": 0.1, "f64": 0.1}.get(
        t.name, t.max_value() if t.is_int else 1)
    y = np.zeros(70, t.storage_np)
    _put_kernel(t)(v, y)
    np.testing.assert_array_equal(y, np.full(70, v, t.storage_np))


def test_module_cached_and_no_leak():
    from kaio.backends import cuda_driver as drv
    from kaio.backends.cuda_runtime import temp_pool
    be = kaio.get_backend("cuda")
    assert saxpy.compile(be) is saxpy.compile(be)
    x, y = np.ones(1 << 16, np.float32), np.zeros(1 << 16, np.float32)
    saxpy(1.0, x, y)
    free_before, cached_before = drv.call("cuMemGetInfo")[0], temp_pool._cached
    for _ in range(200):
        saxpy(1.0, x, y)
    assert temp_pool.live == 0
    assert temp_pool._cached == cached_before      # the transfers reuse the same blocks
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # device-wide figure: only when run alone
        assert free_before - drv.call("cuMemGetInfo")[0] < 8 << 20
    np.testing.assert_array_equal(y, np.full(1 << 16, 201, np.float32))


@kaio.kernel
def dyn_shared_copy(x: kaio.In[f32], y: kaio.Out[f32]):
    s = kaio.dynamic_shared(f32)
    t = kaio.thread_idx.x
    s[t] = x[kaio.global_id()]
    kaio.sync()
    for i in y.owned():
        y[i] = s[t] * 2.0


@pytest.mark.parametrize("shared_bytes", [1024, 64 * 1024, 200 * 1024])
def test_dynamic_shared_memory(shared_bytes):
    x = np.arange(1024, dtype=np.float32)
    y = np.zeros_like(x)
    dyn_shared_copy[4, 256, shared_bytes](x, y)
    np.testing.assert_array_equal(y, 2 * x)


def test_too_much_dynamic_shared():
    props = kaio.get_backend("cuda").props
    with pytest.raises(kaio.LaunchError, match="dynamic shared memory"):
        dyn_shared_copy[4, 256, props.shared_per_block_optin + 1024](np.ones(1024, np.float32),
                                                                     np.ones(1024, np.float32))


# --- interop ------------------------------------------------------------------------------
def test_cuda_array_interface_export_import():
    d = kaio.to_device(np.arange(10, dtype=np.float32))
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3 and cai["data"][0] == d.ptr and cai["typestr"] == "<f4"


def test_torch_zero_copy():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA support here")
    x = torch.linspace(0, 1, 5000, device="cuda", dtype=torch.float32)
    y = torch.ones(5000, device="cuda", dtype=torch.float32)
    saxpy(2.0, x, y)
    kaio.synchronize()
    torch.testing.assert_close(y, 2 * x + 1, rtol=0, atol=0)
    with pytest.raises(ValueError, match="not C-contiguous"):
        saxpy(2.0, x, torch.ones(10000, device="cuda")[::2])
    with pytest.raises(TypeError, match="expects dtype f32"):
        saxpy(2.0, x, y.double())


def test_cupy_zero_copy():
    cp = pytest.importorskip("cupy")
    x = cp.arange(3000, dtype=cp.float32)
    y = cp.zeros(3000, dtype=cp.float32)
    saxpy(0.5, x, y)
    kaio.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(y), 0.5 * np.arange(3000, dtype=np.float32))


# --- errors -------------------------------------------------------------------------------
def test_bad_ptx_reports_jit_log():
    from kaio.backends.abi import KernelABI
    be = kaio.get_backend("cuda")
    ptx = f".version {be.ptx_version}\n.target {be.arch}\n.address_size 64\n" \
          ".visible .entry broken()\n{\n\tmov.u32 %r1, 1;\n\tret;\n}\n"
    with pytest.raises(kaio.CudaError) as ei:
        be.load_ptx(ptx, KernelABI("broken", []), "broken_kernel")
    e = ei.value
    assert e.call == "cuModuleLoadDataEx" and e.kernel == "broken_kernel"
    # the driver's own message (ptxas: "line 6; error : Unknown symbol '%r1'") is in the error
    assert "JIT error log" in str(e) and "line 6" in str(e) and "error" in str(e).split("JIT error log")[1]


_FAULT_SCRIPT = textwrap.dedent('''
    import json, numpy as np, kaio
    from kaio import f32

    class Wild:  # a "device array" whose pointer is no memory at all
        __cuda_array_interface__ = {"shape": (1 << 20,), "typestr": "<f4", "data": (256, False),
                                    "version": 3, "strides": None}

    @kaio.kernel
    def wild_write(x: kaio.In[f32], y: kaio.Raw[f32]):
        i = kaio.global_id()
        if i < len(x):
            y[i] = x[i]

    kaio.set_backend("cuda")
    try:
        wild_write[4, 256](np.ones(1024, np.float32), Wild())
        print(json.dumps({"raised": None}))
    except kaio.CudaError as e:
        print(json.dumps({"raised": type(e).__name__, "kernel": e.kernel, "code": e.code,
                          "call": e.call, "message": str(e)}))
''')


def test_illegal_address_names_kernel(tmp_path):
    """Run in a subprocess: a faulting kernel leaves its CUDA context unusable. The script is a
    file because kaio reads kernel source from files (not `python -c`)."""
    script = tmp_path / "fault.py"
    script.write_text(_FAULT_SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, KAIO_BACKEND="cuda"))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["raised"] == "CudaError", res
    assert res["kernel"] == "wild_write" and res["code"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "wild_write" in res["message"]


def test_info_shows_gpu():
    r = subprocess.run([sys.executable, "-m", "kaio.cli", "info"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    name = kaio.get_backend("cuda").props.name
    assert name.split()[-1] in r.stdout  # e.g. "H200"


def test_kaio_bf16_device_array_in_kernel():
    @kaio.kernel
    def dbl(x: kaio.In[kaio.bf16], y: kaio.Out[kaio.bf16]):
        for i in y.owned():
            y[i] = x[i] + x[i]
    x = np.array([1.5, -2.25, 3.0, 0.0078125], ml_dtypes.bfloat16)
    y = kaio.device_array(4, kaio.bf16)
    dbl(kaio.to_device(x), y)
    np.testing.assert_array_equal(y.to_host().astype(np.float32), 2 * x.astype(np.float32))


def test_i32_kernel_with_cache_dir(tmp_path, monkeypatch):
    """A fresh cache directory: first compile writes PTX to disk, a new process view reads it."""
    from kaio import cache
    monkeypatch.setenv("KAIO_CACHE_DIR", str(tmp_path))
    cache.set_default_cache(None)
    try:
        @kaio.kernel
        def iota(y: kaio.Out[i32]):
            for i in y.owned():
                y[i] = i * 3
        y = np.zeros(777, np.int32)
        iota(y)
        np.testing.assert_array_equal(y, np.arange(777, dtype=np.int32) * 3)
        assert list(tmp_path.glob("*/*.kc"))
        assert cache.default_cache().stats["writes"] >= 1
    finally:
        cache.set_default_cache(None)


def test_graph_replay():
    x = kaio.to_device(np.ones(4096, np.float32))
    y = kaio.to_device(np.zeros(4096, np.float32))
    saxpy[16, 256](0.0, x, y)  # warm up: compile and load outside the capture
    with kaio.graph() as g:
        for a in (1.0, 2.0, 3.0):
            saxpy[16, 256](a, x, y)
    assert g.launches == 3
    np.testing.assert_array_equal(y.to_host(), np.zeros(4096, np.float32))  # captured, not run
    for _ in range(10):
        g.replay()
    g.synchronize()
    np.testing.assert_array_equal(y.to_host(), np.full(4096, 60, np.float32))
    with pytest.raises(kaio.LaunchError, match="inside kaio.graph"):
        with kaio.graph():
            saxpy[16, 256](1.0, np.ones(4096, np.float32), y)


def test_from_dlpack_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA support here")
    t = torch.arange(1000, device="cuda", dtype=torch.float32)
    d = kaio.from_dlpack(t)
    assert d.shape == (1000,) and d.dtype == np.float32 and d.ptr == t.data_ptr()
    y = kaio.to_device(np.zeros(1000, np.float32))
    saxpy(2.0, d, y)
    np.testing.assert_array_equal(y.to_host(), 2 * np.arange(1000, dtype=np.float32))
    with pytest.raises(ValueError, match="not C-contiguous"):
        kaio.from_dlpack(torch.ones(10, 10, device="cuda").t())


class _DLPackOnly:
    """Wraps a GPU tensor and exports nothing but the DLPack protocol."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_dlpack_only_objects_are_used_zero_copy():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA support here")
    from kaio.device import transfer_stats
    x = torch.arange(3000, device="cuda", dtype=torch.float32)
    y = torch.ones(3000, device="cuda", dtype=torch.float32)
    before = transfer_stats().snapshot()
    saxpy(2.0, _DLPackOnly(x), _DLPackOnly(y))
    torch.cuda.synchronize()
    assert transfer_stats().snapshot() == before  # no host copies: the tensors were used in place
    assert torch.equal(y, 2 * x + 1)
    with pytest.raises(TypeError, match="'x'.*DLPack"):
        saxpy(2.0, _DLPackOnly(torch.arange(3000, dtype=torch.float32)), _DLPackOnly(y))  # CPU tensor
