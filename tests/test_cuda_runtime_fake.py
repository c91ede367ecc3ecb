"""The CUDA runtime's logic on any machine, against a small fake of ``cuda.bindings.driver``.

The fake keeps device memory in Python byte arrays and runs "kernels" as Python functions that
read their arguments through the kernelParams pointer array exactly as the driver would. So these
tests check, without a GPU: argument packing per ABI (every dtype, bool, bf16, extents), transfers
by intent, temporaries returned to the pool, the launch plan, JIT error logs, error naming, the
compile cache path and device arrays. tests/test_cuda_runtime.py checks the real thing on a GPU.
"""
from __future__ import annotations

import ctypes
import re
import types

import ml_dtypes
import numpy as np
import pytest

import kaio
from kaio import dtypes as dt
from kaio.backends import Compiled
from kaio.backends import cuda_driver as drv
from kaio.backends.abi import kernel_abi
from kaio.ir import BufType, Builder, Param

ILLEGAL_ADDRESS, INVALID_PTX, INVALID_VALUE, NOT_READY = 700, 218, 1, 600
NAMES = {0: "CUDA_SUCCESS", 700: "CUDA_ERROR_ILLEGAL_ADDRESS", 218: "CUDA_ERROR_INVALID_PTX",
         1: "CUDA_ERROR_INVALID_VALUE", 600: "CUDA_ERROR_NOT_READY"}


def _ns(*names):
    return types.SimpleNamespace(**{n: n for n in names})


class FakeDriver:
    """Just enough of cuda.bindings.driver for kaio's runtime."""

    CUdevice_attribute = _ns(*(f"CU_DEVICE_ATTRIBUTE_{n}" for n in (
        "COMPUTE_CAPABILITY_MAJOR", "COMPUTE_CAPABILITY_MINOR", "MULTIPROCESSOR_COUNT",
        "MAX_THREADS_PER_BLOCK", "MAX_SHARED_MEMORY_PER_BLOCK", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
        "WARP_SIZE")))
    CUjit_option = _ns("CU_JIT_ERROR_LOG_BUFFER", "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES",
                       "CU_JIT_INFO_LOG_BUFFER", "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES")
    CUfunction_attribute = _ns("CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES")
    ATTRS = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0, "MULTIPROCESSOR_COUNT": 132,
             "MAX_THREADS_PER_BLOCK": 1024, "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
             "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448, "WARP_SIZE": 32}

    def __init__(self):
        self.mem: dict[int, bytearray] = {}
        self.host: dict[int, ctypes.Array] = {}
        self.next = 1 << 32
        self.kernels = {}          # entry name -> python impl(fake, args_addr, grid, block)
        self.calls: list[str] = []
        self.launches = []
        self.func_attrs = {}
        self.fail_next_sync = None
        self.nparams = {}            # entry name -> number of flat parameters

    def __getattr__(self, name):  # record every driver call made through this fake
        raise AttributeError(name)

    # errors and init
    def cuGetErrorName(self, e):
        return 0, NAMES.get(int(e), f"E{int(e)}").encode()

    def cuGetErrorString(self, e):
        return 0, b"fake description"

    def cuInit(self, flags):
        return (0,)

    def cuDeviceGetCount(self):
        return 0, 1

    def cuDeviceGet(self, i):
        return 0, i

    def cuDevicePrimaryCtxRetain(self, dev):
        return 0, "ctx"

    def cuCtxSetCurrent(self, ctx):
        return (0,)

    def cuCtxSynchronize(self):
        return (0,)

    def cuDriverGetVersion(self):
        return 0, 12080

    def cuDeviceGetName(self, n, dev):
        return 0, b"Fake H200\0\0\0"

    def cuDeviceGetAttribute(self, attr, dev):
        return 0, self.ATTRS[attr.replace("CU_DEVICE_ATTRIBUTE_", "")]

    def cuDeviceTotalMem(self, dev):
        return 0, 141 << 30

    # device memory
    def cuMemAlloc(self, n):
        p = self.next
        self.mem[p] = bytearray(n)
        self.next += (n + 4095) // 4096 * 4096 + 4096
        return 0, p

    def cuMemFree(self, p):
        if p not in self.mem:
            return (INVALID_VALUE,)
        del self.mem[p]
        return (0,)

    def find(self, p, n):
        for base, buf in self.mem.items():
            if base <= p and p + n <= base + len(buf):
                return buf, p - base
        raise AssertionError(f"fake: access to unallocated device memory 0x{p:x}+{n}")

    def read(self, p, n) -> bytes:
        buf, off = self.find(p, n)
        return bytes(buf[off:off + n])

    def write(self, p, data: bytes):
        buf, off = self.find(p, len(data))
        buf[off:off + len(data)] = data

    def cuMemcpyHtoD(self, dst, src, n):
        self.calls.append("htod")
        self.write(dst, ctypes.string_at(src, n))
        return (0,)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        return self.cuMemcpyHtoD(dst, src, n)

    def cuMemcpyDtoH(self, dst, src, n):
        self.calls.append("dtoh")
        ctypes.memmove(dst, self.read(src, n), n)
        return (0,)

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        return self.cuMemcpyDtoH(dst, src, n)

    def cuMemcpyDtoD(self, dst, src, n):
        self.write(dst, self.read(src, n))
        return (0,)

    def cuMemHostAlloc(self, n, flags):
        b = ctypes.create_string_buffer(n)
        self.host[ctypes.addressof(b)] = b
        return 0, ctypes.addressof(b)

    def cuMemFreeHost(self, p):
        self.host.pop(p)
        return (0,)

    # modules and launches
    def cuModuleLoadDataEx(self, image, n, opts, vals):
        assert image.endswith(b"\0") and n == len(opts) == len(vals)
        if b"BROKEN" in image:
            msg = b"ptxas application ptx input, line 3; error   : Unknown symbol 'BROKEN'\0"
            vals[0][:len(msg)] = msg
            return INVALID_PTX, None
        return 0, ("module", image)

    def cuModuleGetFunction(self, mod, name):
        # how many flat parameters the entry takes: from real PTX, or the fake PTX's note
        m = re.search(rb"nparams=(\d+)", mod[1])
        self.nparams[name.decode()] = int(m.group(1)) if m else mod[1].count(b"\t.param .")
        return 0, name.decode()

    def cuFuncSetAttribute(self, f, attr, value):
        self.func_attrs[(f, attr)] = value
        return (0,)

    capture = None

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        self.launches.append((f, (gx, gy, gz), (bx, by, bz), shared, stream))
        n = self.nparams[f]
        # the driver copies the parameters during the call: so does the fake
        ptrs = (ctypes.c_void_p * n).from_address(params)
        frozen = [ctypes.string_at(ptrs[i], 8) for i in range(n)]
        args = (f, frozen, (gx, gy, gz), (bx, by, bz))
        if self.capture is not None and self.capture[0] == stream:
            self.capture[1].append(args)
            return (0,)
        return (self._run(*args) or 0,)

    def _run(self, f, frozen, grid, block):
        bufs = [ctypes.create_string_buffer(b, 8) for b in frozen]
        ptrs = (ctypes.c_void_p * max(len(bufs), 1))(*[ctypes.addressof(b) for b in bufs])
        return self.kernels[f](self, ctypes.addressof(ptrs), grid, block)

    def cuStreamSynchronize(self, s):
        self.calls.append("sync")
        if self.fail_next_sync:
            code, self.fail_next_sync = self.fail_next_sync, None
            return (code,)
        return (0,)

    def cuStreamCreate(self, flags):
        return 0, 0x5000 + flags

    def cuStreamDestroy(self, s):
        return (0,)

    def cuStreamQuery(self, s):
        return (NOT_READY,)

    def cuEventCreate(self, flags):
        return 0, 0x6000

    def cuEventRecord(self, e, s):
        return (0,)

    def cuEventElapsedTime(self, a, b):
        return 0, 1.5

    # graphs: capture records launches on the stream; replay re-runs them
    CUstreamCaptureMode = _ns("CU_STREAM_CAPTURE_MODE_RELAXED")

    def cuStreamBeginCapture(self, s, mode):
        self.capture = (s, [])
        return (0,)

    def cuStreamEndCapture(self, s):
        assert self.capture[0] == s
        g, self.capture = self.capture[1], None
        return 0, g

    def cuGraphInstantiate(self, g, flags):
        return 0, list(g)

    def cuGraphLaunch(self, ex, s):
        for args in ex:
            self._run(*args)
        return (0,)

    def cuGraphDestroy(self, g):
        return (0,)

    def cuGraphExecDestroy(self, g):
        return (0,)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    f = FakeDriver()
    monkeypatch.setenv("KAIO_CACHE_DIR", str(tmp_path / "cache"))
    from kaio import cache
    cache.set_default_cache(None)
    from kaio import backends
    from kaio.backends.cuda_runtime import temp_pool
    # on a GPU machine the real driver's pooled blocks must never reach the fake, nor back
    saved_pool = (temp_pool._free, temp_pool._cached, temp_pool.live)
    temp_pool._free, temp_pool._cached, temp_pool.live = {}, 0, 0
    saved = drv._driver
    drv.set_driver(f)
    # kaio.to_device / kaio.Stream / kaio.graph() use the current backend: the (fake) CUDA one
    monkeypatch.setattr(backends, "_instances", {})
    monkeypatch.setattr(backends, "_current", "cuda")
    yield f
    drv.set_driver(saved)
    cache.set_default_cache(None)
    temp_pool._free, temp_pool._cached, temp_pool.live = saved_pool


def _arg(params, i, ctype):
    ptrs = (ctypes.c_void_p * (i + 1)).from_address(params)
    return ctype.from_address(ptrs[i]).value


def _ir(name, params):
    """An IR kernel with the given (name, type) params (body empty: the fake runs Python)."""
    b = Builder.for_kernel(name, [(n, t, Param(n, "buffer" if isinstance(t, BufType) else "scalar"))
                                  for n, t in params])
    return b.finish()


def _compiled(be, k):
    abi = kernel_abi(k)
    ptx = f"// fake ptx for {k.name} nparams={len(abi.params)}\n"
    return Compiled(k, {}, be.load_ptx(ptx, abi, k.name))


def _saxpy_ir(intent_y="out"):
    return _ir("saxpy", [("a", dt.f32), ("x", BufType(dt.f32, 1, "global", "in")),
                         ("y", BufType(dt.f32, 1, "global", intent_y))])


def _saxpy_impl(fake, params, grid, block):
    a = _arg(params, 0, ctypes.c_float)
    xp, n = _arg(params, 1, ctypes.c_uint64), _arg(params, 2, ctypes.c_int32)
    yp, n2 = _arg(params, 3, ctypes.c_uint64), _arg(params, 4, ctypes.c_int32)
    assert n == n2
    x = np.frombuffer(fake.read(xp, 4 * n), np.float32)
    y = np.frombuffer(fake.read(yp, 4 * n), np.float32)
    fake.write(yp, (np.float32(a) * x + y).astype(np.float32).tobytes())


def test_probe_and_properties(fake):
    from kaio.backends.cuda import CudaBackend
    assert CudaBackend.available() == (True, "1 CUDA device(s)")
    be = CudaBackend()
    from kaio.backends.abi import ptx_version_for
    assert be.arch == "sm_90" and be.ptx_version == ptx_version_for("sm_90", 12080)
    assert be.props.name == "Fake H200" and be.props.sm_count == 132
    assert be.devices() == ["Fake H200 (cc 9.0, sm_90, 132 SMs, 141.0 GiB)"]
    assert CudaBackend.device_info()[0]["memory_gib"] == 141.0


def test_arch_for_cc():
    assert [drv.arch_for_cc(*c) for c in [(8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (12, 0)]] == \
        ["sm_80", "sm_86", "sm_86", "sm_89", "sm_90", "sm_90", "sm_90"]
    with pytest.raises(ValueError, match="older than 8.0"):
        drv.arch_for_cc(7, 5)


def test_probe_without_libcuda():
    class NoLib:
        def cuInit(self, flags):
            raise RuntimeError("libcuda.so.1: cannot open shared object file")
    saved = drv._driver
    drv.set_driver(NoLib())
    try:
        ok, why = drv.probe()
        assert not ok and "libcuda" in why
    finally:
        drv.set_driver(saved)


def test_out_never_copied_in_region_both_ways(fake):
    from kaio.backends.cuda import CudaBackend
    from kaio.backends.cuda_runtime import temp_pool
    from kaio.device import transfer_stats
    be = CudaBackend()
    seen_y = []

    def impl(fake, params, grid, block):
        yp, n = _arg(params, 3, ctypes.c_uint64), _arg(params, 4, ctypes.c_int32)
        seen_y.append(np.frombuffer(fake.read(yp, 4 * n), np.float32).copy())
        _saxpy_impl(fake, params, grid, block)
    fake.kernels["saxpy"] = impl
    x = np.arange(1000, dtype=np.float32)
    for intent, expect_in in (("out", 1), ("region", 2)):
        y = np.full(1000, 7.0, np.float32)
        c = _compiled(be, _saxpy_ir(intent))
        transfer_stats().reset()
        fake.calls.clear()
        be.launch(c, (4, 1, 1), (256, 1, 1), [2.5, x, y])
        s = transfer_stats().snapshot()
        assert s["htod_copies"] == expect_in and s["htod_bytes"] == expect_in * 4000
        assert s["dtoh_copies"] == 1 and s["dtoh_bytes"] == 4000
        # the kernel saw y's old contents only when the intent reads them
        assert (seen_y[-1] == 7.0).all() == (intent == "region")
        np.testing.assert_array_equal(y, np.float32(2.5) * x + seen_y[-1])
        assert fake.calls.index("sync") < fake.calls.index("dtoh")  # copy back only after the sync
        assert temp_pool.live == 0


def test_pool_reuses_temporaries_without_leak(fake):
    from kaio.backends.cuda import CudaBackend
    from kaio.backends.cuda_runtime import temp_pool
    be = CudaBackend()
    fake.kernels["saxpy"] = _saxpy_impl
    c = _compiled(be, _saxpy_ir("region"))
    x, y = np.ones(300, np.float32), np.zeros(300, np.float32)
    be.launch(c, (2, 1, 1), (256, 1, 1), [1.0, x, y])
    n_alloc = len(fake.mem)
    for _ in range(20):
        be.launch(c, (2, 1, 1), (256, 1, 1), [1.0, x, y])
    assert len(fake.mem) == n_alloc and temp_pool.live == 0
    np.testing.assert_array_equal(y, np.full(300, 21, np.float32))


def test_module_loaded_once(fake):
    from kaio.backends.cuda import CudaBackend
    be = CudaBackend()
    k = _saxpy_ir()
    a, b = _compiled(be, k), _compiled(be, k)
    assert a.handle is b.handle


ALL_SCALARS = [dt.bool_, dt.i8, dt.u8, dt.i16, dt.u16, dt.i32, dt.u32, dt.i64, dt.u64, dt.f16,
               dt.bf16, dt.f32, dt.f64]
CTYPE = {"bool": ctypes.c_uint8, "i8": ctypes.c_int8, "u8": ctypes.c_uint8, "i16": ctypes.c_int16,
         "u16": ctypes.c_uint16, "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
         "u64": ctypes.c_uint64, "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16,
         "f32": ctypes.c_float, "f64": ctypes.c_double}
VALUES = {"bool": True, "i8": -128, "u8": 255, "i16": -32768, "u16": 65535, "i32": -2**31,
          "u32": 2**32 - 1, "i64": -2**63, "u64": 2**64 - 1, "f16": 1.0009765625, "bf16": 1.0078125,
          "f32": 0.1, "f64": 0.1}


def test_scalar_packing_every_dtype(fake):
    """Each scalar reaches the kernel as the exact bit pattern numpy gives that dtype."""
    from kaio.backends.cuda import CudaBackend
    be = CudaBackend()
    params = [(f"s_{t.name}", t) for t in ALL_SCALARS] + [("buf", BufType(dt.f64, 3, "global", "in"))]
    k = _ir("scalars", params)
    seen = {}

    def impl(fake, p, grid, block):
        for i, t in enumerate(ALL_SCALARS):
            seen[t.name] = _arg(p, i, CTYPE[t.name])
        n = len(ALL_SCALARS)
        seen["ptr"] = _arg(p, n, ctypes.c_uint64)
        seen["shape"] = tuple(_arg(p, n + 1 + d, ctypes.c_int32) for d in range(3))
    fake.kernels["scalars"] = impl
    dev = kaio.device_array((2, 3, 5), np.float64)
    be.launch(_compiled(be, k), (1, 1, 1), (1, 1, 1), [VALUES[t.name] for t in ALL_SCALARS] + [dev])
    for t in ALL_SCALARS:
        v = VALUES[t.name]
        if t.name == "bf16":
            want = int(np.array(v, ml_dtypes.bfloat16).view(np.uint16))
        elif t.name == "f16":
            want = int(np.array(v, np.float16).view(np.uint16))
        elif t.is_bool:
            want = 1
        elif t.name == "f32":
            want = float(np.float32(v))
        else:
            want = v
        assert seen[t.name] == want, t.name
    assert seen["ptr"] == dev.ptr and seen["shape"] == (2, 3, 5)


def test_device_arrays_zero_copy_and_async(fake):
    from kaio.backends.cuda import CudaBackend
    from kaio.device import transfer_stats
    be = CudaBackend()
    fake.kernels["saxpy"] = _saxpy_impl
    x = kaio.to_device(np.arange(64, dtype=np.float32))
    y = kaio.to_device(np.ones(64, np.float32))
    transfer_stats().reset()
    fake.calls.clear()
    s = kaio.Stream()
    be.launch(_compiled(be, _saxpy_ir("region")), (1, 1, 1), (64, 1, 1), [3.0, x, y], 0, s)
    assert transfer_stats().snapshot()["htod_copies"] == 0 and "sync" not in fake.calls
    assert fake.launches[-1][4] == s.handle
    np.testing.assert_array_equal(y.to_host(), 3 * np.arange(64, dtype=np.float32) + 1)


class _ForeignArray:
    """Stands in for a torch/CuPy tensor: only __cuda_array_interface__."""

    def __init__(self, dev, strides=None):
        self._dev = dev
        self.__cuda_array_interface__ = dict(dev.__cuda_array_interface__, strides=strides)


def test_cuda_array_interface_inputs(fake):
    from kaio.backends.cuda import CudaBackend
    be = CudaBackend()
    fake.kernels["saxpy"] = _saxpy_impl
    x = kaio.to_device(np.arange(16, dtype=np.float32))
    y = kaio.to_device(np.zeros(16, np.float32))
    be.launch(_compiled(be, _saxpy_ir("region")), (1, 1, 1), (16, 1, 1),
              [1.0, _ForeignArray(x), _ForeignArray(y, (4,))])
    np.testing.assert_array_equal(y.to_host(), np.arange(16, dtype=np.float32))
    with pytest.raises(ValueError, match="not C-contiguous"):
        be.launch(_compiled(be, _saxpy_ir("region")), (1, 1, 1), (16, 1, 1),
                  [1.0, _ForeignArray(x), _ForeignArray(y, (8,))])
    with pytest.raises(TypeError, match="parameter 'x' .* expects dtype f32 .* got float64"):
        be.launch(_compiled(be, _saxpy_ir("region")), (1, 1, 1), (16, 1, 1),
                  [1.0, kaio.to_device(np.zeros(16, np.float64)), y])


def test_overlapping_device_memory_refused_before_any_copy_or_launch(fake):
    """Aliasing is checked for every kind of array: the same device array twice, a
    ``__cuda_array_interface__`` view of it, or one overlapping part of it (byte ranges)."""
    from kaio.backends.cuda import CudaBackend
    be = CudaBackend()
    fake.kernels["saxpy"] = _saxpy_impl
    c = _compiled(be, _saxpy_ir("region"))
    x = kaio.to_device(np.arange(16, dtype=np.float32))
    part = types.SimpleNamespace(__cuda_array_interface__={
        "shape": (16,), "typestr": "<f4", "data": (x.ptr + 60, False), "version": 3})
    kaio.transfer_stats().reset()
    for a, b in ((x, x), (_ForeignArray(x), x), (x, _ForeignArray(x)), (part, x)):
        with pytest.raises(kaio.LaunchError, match="'x' and 'y' share memory"):
            be.launch(c, (1, 1, 1), (16, 1, 1), [1.0, a, b])
    assert not fake.launches and kaio.transfer_stats().snapshot()["htod_copies"] == 0
    y = kaio.to_device(np.zeros(16, np.float32))
    be.launch(c, (1, 1, 1), (16, 1, 1), [1.0, _ForeignArray(x), y])   # separate memory
    np.testing.assert_array_equal(y.to_host(), np.arange(16, dtype=np.float32))


def test_jit_error_log_in_exception(fake):
    from kaio.backends.abi import KernelABI
    from kaio.backends.cuda import CudaBackend
    be = CudaBackend()
    with pytest.raises(kaio.CudaError) as ei:
        be.load_ptx(".version 8.0\nBROKEN\n", KernelABI("bad", []), "bad_kernel")
    e = ei.value
    assert e.call == "cuModuleLoadDataEx" and e.code == "CUDA_ERROR_INVALID_PTX" and e.kernel == "bad_kernel"
    assert "Unknown symbol 'BROKEN'" in str(e) and "bad_kernel" in str(e)


def test_fault_reported_with_kernel_name(fake):
    from kaio.backends.cuda import CudaBackend
    from kaio.backends.cuda_runtime import temp_pool
    be = CudaBackend()
    fake.kernels["saxpy"] = _saxpy_impl
    fake.fail_next_sync = ILLEGAL_ADDRESS
    with pytest.raises(kaio.CudaError) as ei:
        be.launch(_compiled(be, _saxpy_ir()), (1, 1, 1), (8, 1, 1),
                  [1.0, np.ones(8, np.float32), np.ones(8, np.float32)])
    assert ei.value.kernel == "saxpy" and ei.value.code == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "kernel 'saxpy'" in str(ei.value) and "cuStreamSynchronize" in str(ei.value)
    assert temp_pool.live == 0
    # a later call that trips over the same sticky error names the last kernel launched
    err = drv.make_error("cuMemcpyDtoH", ILLEGAL_ADDRESS)
    assert err.kernel == "saxpy" and "most likely 'saxpy'" in str(err)


def test_dynamic_shared_opt_in(fake):
    from kaio.backends.cuda import CudaBackend
    be = CudaBackend()
    fake.kernels["saxpy"] = _saxpy_impl
    c = _compiled(be, _saxpy_ir())
    dev = [1.0, kaio.device_array(4, np.float32), kaio.device_array(4, np.float32)]
    be.launch(c, (1, 1, 1), (4, 1, 1), dev, 40_000)
    assert fake.func_attrs == {}
    be.launch(c, (1, 1, 1), (4, 1, 1), dev, 100_000)
    assert list(fake.func_attrs.values()) == [100_000] and fake.launches[-1][3] == 100_000
    with pytest.raises(kaio.LaunchError, match="at most 232448"):
        be.launch(c, (1, 1, 1), (4, 1, 1), dev, 300_000)


def test_compile_uses_disk_cache(fake, monkeypatch):
    """The PTX stage runs once: a second compile, with the memory cache and the loaded modules
    dropped, is served from the disk cache; another option is another entry."""
    from kaio import cache
    from kaio.backends import cuda as cuda_mod
    from kaio.backends import ptx
    from kaio.options import KernelOptions
    be = cuda_mod.CudaBackend(codegen="ptx")   # the stubbed stage is kaio's PTX (not KAIO_CUDA_CODEGEN=llvm)
    calls = []

    def fake_emit(lowered, arch, **kw):
        calls.append(lowered.name)
        return f"// fake ptx nparams={len(kernel_abi(lowered).params)}\n", kernel_abi(lowered)
    monkeypatch.setattr(ptx, "emit_ptx", fake_emit)   # what the 'ptx' stage calls
    k = _saxpy_ir()
    c1 = be.compile(k)
    cache.default_cache().clear_memory()
    be._modules.clear()
    c2 = be.compile(k)
    assert calls == ["saxpy"] and c2.artifacts["ptx"] == c1.artifacts["ptx"]
    be.compile(k, KernelOptions(fast_math=True))
    assert calls == ["saxpy", "saxpy"]


def test_device_array_api(fake):
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    d = kaio.to_device(a)
    assert (d.shape, d.dtype, d.size, d.ndim, d.nbytes) == ((2, 3, 4), np.int16, 24, 3, 48)
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == "<i2" and cai["data"] == (d.ptr, False)
    np.testing.assert_array_equal(d.to_host(), a)
    out = np.empty_like(a)
    assert d.copy_to_host(out) is out
    np.testing.assert_array_equal(out, a)
    d.copy_from_host(a * 2)
    np.testing.assert_array_equal(d.to_host(), a * 2)
    with pytest.raises(ValueError, match="host array is int16\\[3, 8\\]"):
        d.copy_from_host(np.zeros((3, 8), np.int16))
    with pytest.raises(ValueError):
        kaio.device_array((2, -1), np.float32)
    with pytest.raises(ValueError, match="no kaio equivalent"):
        kaio.device_array(4, np.complex64)
    assert kaio.device_array(0, kaio.f32).ptr == 0
    bf = kaio.to_device(np.array([1.5, -2], ml_dtypes.bfloat16))
    np.testing.assert_array_equal(bf.to_host().astype(np.float32), [1.5, -2])
    with pytest.raises(TypeError, match="to_host"):
        np.asarray(d)
    with pytest.raises(TypeError, match="already in device memory"):
        kaio.to_device(d)
    n_before = len(fake.mem)
    d.free()
    assert len(fake.mem) == n_before - 1


def test_pinned_array(fake):
    p = kaio.pinned_array((4, 5), kaio.f32)
    assert p.shape == (4, 5) and p.dtype == np.float32 and len(fake.host) == 1
    from kaio.device import is_pinned
    assert is_pinned(p) and is_pinned(p[1:]) and not is_pinned(np.zeros(3))
    p[:] = 3
    d = kaio.to_device(p)
    np.testing.assert_array_equal(d.to_host(), np.full((4, 5), 3, np.float32))
    del p, d
    import gc
    gc.collect()
    assert len(fake.host) == 0


def test_stream_event(fake):
    s = kaio.Stream(non_blocking=True)
    assert s.handle == 0x5001 and s.query() is False and s.__cuda_stream__() == (0, 0x5001)
    s.synchronize()
    e0, e1 = kaio.Event(), kaio.Event()
    e0.record(s)
    e1.record(s)
    assert e0.elapsed_time(e1) == 1.5
    rt = s.runtime
    assert rt.stream_handle(None) == 0 and rt.stream_handle(s) == 0x5001 and rt.stream_handle(7) == 7
    with pytest.raises(TypeError, match="not a CUDA stream"):
        rt.stream_handle("s")


@kaio.kernel
def _saxpy_k(a: kaio.f32, x: kaio.In[kaio.f32], y: kaio.Out[kaio.f32]):
    for i in y.owned():
        y[i] = a * x[i]


def scale_impl(fake, params, grid, block):
    """A kernel (a: f32, x: In[f32], y: Out[f32]) with y = a * x, as the fake runs it."""
    a = _arg(params, 0, ctypes.c_float)
    xp, n = _arg(params, 1, ctypes.c_uint64), _arg(params, 2, ctypes.c_int32)
    yp = _arg(params, 3, ctypes.c_uint64)
    x = np.frombuffer(fake.read(xp, 4 * n), np.float32)
    fake.write(yp, (np.float32(a) * x).tobytes())


def test_kernel_function_end_to_end(fake, monkeypatch):
    """@kaio.kernel -> real PTX emitter -> (fake) driver: ABI order, intents, launch shape."""
    pytest.importorskip("kaio.backends.ptx")
    from kaio import backends
    from kaio.device import transfer_stats
    monkeypatch.setattr(backends, "_instances", {})
    monkeypatch.setattr(backends, "_current", "cuda")

    fake.kernels["_saxpy_k"] = scale_impl
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    y = np.zeros(1000, np.float32)
    transfer_stats().reset()
    _saxpy_k(2.0, x, y)
    np.testing.assert_array_equal(y, np.float32(2.0) * x)
    assert transfer_stats().snapshot() == {"htod_copies": 1, "htod_bytes": 4000,
                                           "dtoh_copies": 1, "dtoh_bytes": 4000}
    f, grid, block, shared, stream = fake.launches[-1]
    # kaio chose the shape of this elementwise kernel: 8 elements per thread (frontend.coarsen)
    assert _saxpy_k.coarsening() == 8
    assert grid[0] * block[0] * 8 >= 1000 and grid[0] * block[0] < 1000 and shared == 0 and stream == 0
    ptx = _saxpy_k.compile(backends.get_backend("cuda")).artifacts["ptx"]
    assert ".visible .entry _saxpy_k(" in ptx


def test_graph_capture_and_replay(fake):
    from kaio.backends.cuda import CudaBackend
    be = CudaBackend()
    fake.kernels["saxpy"] = _saxpy_impl
    c = _compiled(be, _saxpy_ir("region"))
    x = kaio.to_device(np.ones(32, np.float32))
    y = kaio.to_device(np.zeros(32, np.float32))
    with kaio.graph() as g:
        for a in (1.0, 2.0, 3.0):
            be.launch(c, (1, 1, 1), (32, 1, 1), [a, x, y])
    assert g.launches == 3 and all(launch[4] == g.stream.handle for launch in fake.launches)
    np.testing.assert_array_equal(y.to_host(), np.zeros(32))  # captured, not run
    for _ in range(4):
        g.replay()
    g.synchronize()
    np.testing.assert_array_equal(y.to_host(), np.full(32, 24, np.float32))  # 4 x (1+2+3)
    with pytest.raises(kaio.LaunchError, match="inside kaio.graph"):
        with kaio.graph():
            be.launch(c, (1, 1, 1), (32, 1, 1), [1.0, np.ones(32, np.float32), y])
    from kaio.graphs import capturing
    assert capturing() is None
    with pytest.raises(kaio.LaunchError, match="not been captured"):
        kaio.graph().replay()


def test_dlpack_refuses_host_tensors_on_cuda(fake):
    with pytest.raises(ValueError, match="not DLPack device type 2 \\(cuda\\)"):
        kaio.from_dlpack(np.arange(4, dtype=np.float32))


def test_dlpack_import_parses_and_frees(monkeypatch):
    """from_dlpack reads the DLManagedTensor and calls the producer's deleter when the view dies.
    numpy exports CPU tensors: the reference backend's device memory, so no GPU is needed."""
    import gc
    import weakref

    from kaio import backends, dlpack
    monkeypatch.setattr(backends, "_current", "reference")
    a = np.arange(24, dtype=np.int16).reshape(4, 6)
    info = dlpack.read_capsule(a.__dlpack__())
    assert info["shape"] == (4, 6) and info["dtype"] == np.int16 and info["ptr"] == a.ctypes.data
    assert info["strides"] in (None, (6, 1))
    with pytest.raises(ValueError, match="not C-contiguous"):
        kaio.from_dlpack(a[:, ::2])
    alive = weakref.ref(a)
    d = kaio.from_dlpack(a)
    assert (d.shape, d.dtype, d.ptr, d.runtime.name) == ((4, 6), np.int16, a.ctypes.data, "reference")
    np.testing.assert_array_equal(d.to_host(), np.arange(24).reshape(4, 6))
    del a
    gc.collect()
    assert alive() is not None  # the producer keeps its memory while kaio holds the tensor
    del d
    gc.collect()
    assert alive() is None  # deleter called exactly when the view went away


def test_dlpack_export_orders_the_consumer_stream_after_kaios_default_stream(fake):
    from kaio.dlpack import read_capsule
    log = []
    fake.cuEventRecord = lambda e, s: (log.append(("record", e, s)), (0,))[1]
    fake.cuStreamWaitEvent = lambda s, e, flags: (log.append(("wait", s, e)), (0,))[1]
    fake.cuEventDestroy = lambda e: (log.append(("destroy", e)), (0,))[1]
    d = kaio.to_device(np.arange(4, dtype=np.float32))
    assert d.__dlpack_device__() == (2, 0)
    info = read_capsule(d.__dlpack__(stream=0x7777))  # a consumer's own stream
    assert log == [("record", 0x6000, 0), ("wait", 0x7777, 0x6000), ("destroy", 0x6000)]
    assert info["device_type"] == 2 and info["ptr"] == d.ptr and info["shape"] == (4,)
    log.clear()
    for s in (None, 1, 2, -1):  # the default streams are ordered already; -1: no ordering asked
        d.__dlpack__(stream=s)
    assert log == []
