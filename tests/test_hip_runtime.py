"""The HIP runtime (kaio.backends.hip).

Without ROCm: availability, kernarg packing checked against real code-object metadata, and the
whole compile -> load -> launch -> copy path driven through a fake ``hip`` module whose
"device" is host memory and whose kernel launch runs the same IR on this CPU (tests/llvm_host).
With an AMD GPU (``hip`` marker): the sample kernels run on the device against numpy.
"""
from __future__ import annotations

import copy
import ctypes
import struct
from types import SimpleNamespace

import llvm_host
import llvm_kernels as K
import numpy as np
import pytest

from kaio import dtypes as dt
from kaio.backends import codeobject, llvm_compile, targets
from kaio.backends import hip as H
from kaio.backends.abi import kernel_abi
from kaio.backends.runtime import DeviceArray, Event, Stream
from kaio.errors import CompileError, HipError

try:
    llvm_compile.find_linker()
    NO_LLD = ""
except CompileError as e:
    NO_LLD = str(e)
needs_lld = pytest.mark.skipif(bool(NO_LLD), reason=NO_LLD or "ld.lld present")


# --- a fake hip-python module ----------------------------------------------------------------------
class FakeHip:
    """Enough of hip-python for HipBackend; device memory is host memory."""

    class hipMemcpyKind:
        hipMemcpyHostToDevice = 1
        hipMemcpyDeviceToHost = 2

    def __init__(self, arch=b"gfx90a:sramecc+:xnack-", count=1, fail=None):
        self.arch, self.count, self.fail = arch, count, fail
        self.mem: dict[int, ctypes.Array] = {}
        self.copies: list[tuple[str, int, int]] = []
        self.launches: list[dict] = []
        self.kernel = None          # IR kernel the next launch executes on the host

    def _r(self, name, *vals):
        return (7, *[None] * len(vals)) if name == self.fail else (0, *vals)

    def hipGetDeviceCount(self):
        return self._r("hipGetDeviceCount", self.count)

    def hipGetDeviceProperties(self, i):
        return self._r("hipGetDeviceProperties", SimpleNamespace(
            name=b"AMD Instinct MI250X", gcnArchName=self.arch, warpSize=64, multiProcessorCount=110,
            totalGlobalMem=64 << 30, maxThreadsPerBlock=1024, sharedMemPerBlock=65536))

    def hipGetErrorName(self, err):
        return (0, b"hipErrorInvalidValue")

    def hipSetDevice(self, i):
        return self._r("hipSetDevice")

    def hipMalloc(self, n):
        buf = ctypes.create_string_buffer(n)
        self.mem[ctypes.addressof(buf)] = buf
        return self._r("hipMalloc", ctypes.addressof(buf))

    def hipFree(self, p):
        del self.mem[p]
        return self._r("hipFree")

    def hipMemcpy(self, dst, src, n, kind):
        ctypes.memmove(dst, src, n)
        self.copies.append(("htod" if kind == 1 else "dtoh", dst if kind == 1 else src, n))
        return self._r("hipMemcpy")

    def hipModuleLoadData(self, image):
        codeobject.metadata(bytes(image))   # must be a real code object
        return self._r("hipModuleLoadData", "module")

    def hipModuleGetFunction(self, module, name):
        return self._r("hipModuleGetFunction", ("function", name))

    def hipModuleLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        arr = (ctypes.c_void_p * 5).from_address(extra)
        assert (arr[0], arr[2], arr[4]) == (1, 2, 3) and params is None
        size = ctypes.c_size_t.from_address(arr[3]).value
        kernarg = ctypes.string_at(arr[1], size)
        self.launches.append({"function": f, "grid": (gx, gy, gz), "block": (bx, by, bz),
                              "kernarg": kernarg, "shared": shared})
        if self.kernel is not None and self.fail != "hipModuleLaunchKernel":
            llvm_host.run_flat(self.kernel, unpack(kernel_abi(self.kernel), kernarg), (gx, gy, gz),
                               (bx, by, bz))
        return self._r("hipModuleLaunchKernel")

    def hipDeviceSynchronize(self):
        return self._r("hipDeviceSynchronize")

    def hipStreamSynchronize(self, s):
        return self._r("hipStreamSynchronize")


def unpack(abi, kernarg: bytes) -> list:
    """Flat values back out of a kernarg buffer, by kaio's layout."""
    slots, _ = codeobject.kernarg_layout(abi)
    return [struct.unpack_from("<" + H._STRUCT[p.dtype], kernarg, s.offset)[0]
            for s, p in zip(slots, abi.params)]


@pytest.fixture
def fake(monkeypatch):
    f = FakeHip()
    monkeypatch.setattr(H, "_hip_module", f)
    return f


# --- availability -------------------------------------------------------------------------------------
def test_unavailable_without_rocm_says_why():
    from kaio.backends import availability
    ok, why = availability("hip")
    if ok:
        pytest.skip("a HIP device is present")
    assert why and ("libamdhip64" in why or "hip-python" in why or "no AMD GPU" in why)


def test_available_with_fake_device(monkeypatch, fake):
    assert H.HipBackend.available() == (True, "")
    monkeypatch.setattr(H, "_hip_module", FakeHip(count=0))
    assert H.HipBackend.available() == (False, "no AMD GPU found")
    monkeypatch.setattr(H, "_hip_module", FakeHip(arch=b"gfx803"))
    ok, why = H.HipBackend.available()
    assert not ok and "gfx803" in why


def test_device_props_rocm5_and_rocm6_shapes():
    rocm6 = SimpleNamespace(name=b"AMD Instinct MI300X\0\0", gcnArchName=b"gfx942:sramecc+:xnack-\0",
                            warpSize=64, multiProcessorCount=304, totalGlobalMem=192 << 30,
                            maxThreadsPerBlock=1024, sharedMemPerBlock=65536)
    p = H.props_from(rocm6, 0)
    assert (p.name, p.arch, p.arch_full, p.cu_count) == ("AMD Instinct MI300X", "gfx942",
                                                         "gfx942:sramecc+:xnack-", 304)
    rocm5 = SimpleNamespace(name=b"MI250X", gcnArchName=b"", gcnArch=910, warpSize=64,
                            multiProcessorCount=110, totalGlobalMem=64 << 30)
    p = H.props_from(rocm5, 1)
    assert p.arch == "gfx90a" and p.shared_per_block == 65536 and p.ordinal == 1


def test_errors_become_hip_error(monkeypatch):
    monkeypatch.setattr(H, "_hip_module", FakeHip(fail="hipMalloc"))
    with pytest.raises(HipError, match="hipMalloc failed: hipErrorInvalidValue") as e:
        DeviceArray((4,), np.float32, runtime=H.hip_runtime(0))
    assert e.value.call == "hipMalloc" and e.value.code == "hipErrorInvalidValue"


# --- kernarg packing against real metadata --------------------------------------------------------------
def mixed_kernel():
    b, args = K.builder("mixed", [("flag", dt.bool_), ("h", dt.f16), ("d", dt.f64), ("c", dt.i8),
                                  ("x", K.buf(dt.f32, "out", 2)), ("q", dt.i64), ("bh", dt.bf16)])
    flag, h, d, c, x, q, bh = args
    v = b.binary("add", b.cast(d, dt.f32), b.cast(h, dt.f32))
    v = b.binary("add", v, b.cast(b.binary("add", b.cast(c, dt.i64), q), dt.f32))
    v = b.binary("add", v, b.cast(bh, dt.f32))
    i = K.gid(b)
    with K.when(b, b.cmp("lt", i, b.shape(x, 1))):
        b.store(x, [K.c32(b, 0), i], b.select(flag, v, b.const(-1.0, dt.f32)))
    return b.finish()


@needs_lld
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_kernarg_packing_matches_metadata(arch):
    k = mixed_kernel()
    hsaco = targets.emit(k, "hsaco", arch)
    meta = codeobject.kernels(hsaco)["mixed"]
    packer = H.KernargPacker(kernel_abi(k), meta.explicit_args)
    values = [True, 1.5, -2.25, -7, 0xDEADBEEF00, 3, 5, -(2**40), 0.375]
    packer.pack(list(values))
    raw = packer.bytes()
    codes = {"by_value": None, "global_buffer": "<Q"}
    got = []
    for a, p in zip(meta.explicit_args, kernel_abi(k).params):
        code = codes[a[".value_kind"]] or "<" + H._STRUCT[p.dtype]
        assert struct.calcsize(code) == a[".size"]
        got.append(struct.unpack_from(code, raw, a[".offset"])[0])
    assert got[:8] == [1, 1.5, -2.25, -7, 0xDEADBEEF00, 3, 5, -(2**40)]
    assert got[8] == int(np.array(0.375, dt.bf16.np).view(np.uint16))
    assert len(raw) == max(a[".offset"] + a[".size"] for a in meta.explicit_args)


def test_kernarg_packer_rejects_a_different_layout():
    abi = kernel_abi(K.saxpy())
    wrong = [{".offset": 0, ".size": 8}] * len(abi.params)
    with pytest.raises(HipError, match="kaio packs"):
        H.KernargPacker(abi, wrong)


# --- the launch path through the fake device ----------------------------------------------------------
@needs_lld
@pytest.mark.parametrize("name", ["saxpy", "intops", "loops", "atomics", "local_half"])
def test_launch_through_fake_hip_matches_numpy(fake, name):
    s = K.BY_NAME[name]
    kernel = s.build()
    be = H.HipBackend()
    assert (be.arch, be.warp_size) == ("gfx90a", 64)
    compiled = be.compile(kernel)
    fake.kernel = kernel
    args = s.inputs(np.random.default_rng(3))
    orig = copy.deepcopy(args)
    grid, block = s.launch_shape()
    be.launch(compiled, grid, block, args, 0, None)
    assert K.check(s, orig, dict(enumerate(args)), warp=1) == []
    assert not fake.mem, "temporaries must be freed"


@needs_lld
def test_copies_follow_intent(fake):
    b, (x, y, z) = K.builder("intents", [("x", K.buf(dt.f32)), ("y", K.buf(dt.f32, "region")),
                                         ("z", K.buf(dt.f32, "out"))])
    i = K.gid(b)
    with K.when(b, b.cmp("lt", i, b.shape(x, 0))):
        v = b.load(x, [i])
        b.store(y, [i], b.binary("add", b.load(y, [i]), v))
        b.store(z, [i], b.binary("mul", v, v))
    kernel = b.finish()
    be = H.HipBackend()
    compiled = be.compile(kernel)
    fake.kernel = kernel
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    z = np.full(8, np.nan, np.float32)
    be.launch(compiled, (1, 1, 1), (8, 1, 1), [x, y, z], 0, None)
    np.testing.assert_array_equal(y, 1 + x)
    np.testing.assert_array_equal(z, x * x)
    ptrs = unpack(kernel_abi(kernel), fake.launches[-1]["kernarg"])
    px, py, pz = ptrs[0], ptrs[2], ptrs[4]
    htod = {p for d, p, _ in fake.copies if d == "htod"}
    dtoh = {p for d, p, _ in fake.copies if d == "dtoh"}
    assert htod == {px, py} and dtoh == {py, pz}     # in: copy in; region: both; out: copy out


@needs_lld
def test_launch_errors(fake):
    be = H.HipBackend()
    compiled = be.compile(K.saxpy())
    from kaio.errors import LaunchError
    with pytest.raises(LaunchError, match="2 arguments"):
        be.launch(compiled, (1, 1, 1), (32, 1, 1), [1.0, np.zeros(4, np.float32)])
    with pytest.raises(LaunchError, match="LDS"):
        be.launch(compiled, (1, 1, 1), (32, 1, 1), [1.0, np.zeros(4, np.float32),
                                                    np.zeros(4, np.float32)], 1 << 20)
    fake.fail = "hipModuleLaunchKernel"
    with pytest.raises(HipError, match="hipModuleLaunchKernel failed \\(kernel 'saxpy'\\)"):
        be.launch(compiled, (1, 1, 1), (32, 1, 1), [1.0, np.zeros(4, np.float32), np.zeros(4, np.float32)])
    assert not fake.mem


# --- on a real AMD GPU ---------------------------------------------------------------------------------
@pytest.mark.hip
@pytest.mark.parametrize("name", [s.name for s in K.SAMPLES])
def test_samples_on_amd_gpu(name):
    s = K.BY_NAME[name]
    be = H.HipBackend()
    compiled = be.compile(s.build())
    args = s.inputs(np.random.default_rng(5))
    orig = copy.deepcopy(args)
    grid, block = s.launch_shape()
    be.launch(compiled, grid, block, args, s.shared_bytes, None)
    assert K.check(s, orig, dict(enumerate(args)), warp=be.warp_size) == []


@pytest.mark.hip
def test_streams_events_and_device_arrays_on_amd_gpu():
    be = H.HipBackend()
    rt = be.runtime
    compiled = be.compile(K.saxpy())
    x = np.arange(4096, dtype=np.float32)
    dx = DeviceArray(x.shape, x.dtype, runtime=rt).copy_from_host(x)
    dy = DeviceArray(x.shape, x.dtype, runtime=rt).copy_from_host(np.ones_like(x))
    stream, start, stop = Stream(runtime=rt), Event(runtime=rt), Event(runtime=rt)
    start.record(stream)
    be.launch(compiled, (16, 1, 1), (256, 1, 1), [2.0, dx, dy], 0, stream)
    stop.record(stream)
    stop.synchronize()
    assert start.elapsed_time(stop) >= 0
    np.testing.assert_array_equal(dy.copy_to_host(), (2 * x + 1).astype(np.float32))
