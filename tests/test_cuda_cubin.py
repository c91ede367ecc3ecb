"""The driver's cubin of kaio's PTX kept in the compile cache (kaio.backends.cuda_cubin): a
later process loads the cubin instead of the PTX; anything the link path cannot do takes the
PTX load. Against the fake driver (tests/test_cuda_runtime_fake.py) with a JIT linker, against
the libcuda stub (scripts/stub_libcuda.c, where gcc is present) in fresh processes, and on a
GPU."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_cuda_runtime_fake import FakeDriver, _ns, _saxpy_impl, _saxpy_ir, fake  # noqa: F401

import kaio
from kaio.backends import Compiled, cuda_cubin
from kaio.backends import cuda_driver as drv
from kaio.backends.abi import kernel_abi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LinkingDriver(FakeDriver):
    """The fake driver with the JIT linker: a PTX's "cubin" is b"CUBIN:" + the PTX."""

    CUjitInputType = _ns("CU_JIT_INPUT_PTX")

    def __init__(self):
        super().__init__()
        self.links, self.loaded_cubins, self.ptx_loads, self.refuse_cubins = [], [], [], False
        self._images = {}

    def cuLinkCreate(self, n, opts, vals):
        assert n == len(opts) == len(vals)
        return 0, "link-state"

    def cuLinkAddData(self, state, kind, data, size, name, n, opts, vals):
        assert kind == "CU_JIT_INPUT_PTX" and data.endswith(b"\0") and size == len(data)
        if b"BROKEN" in data:
            return (218,)   # CUDA_ERROR_INVALID_PTX
        self.links.append(data)
        self._image = b"CUBIN:" + data
        return (0,)

    def cuLinkComplete(self, state):
        import ctypes
        buf = ctypes.create_string_buffer(self._image, len(self._image))
        self._images[state] = buf          # owned by the state, as the driver's is
        return 0, ctypes.addressof(buf), len(self._image)

    def cuLinkDestroy(self, state):
        self._images.pop(state, None)
        return (0,)

    def cuModuleLoadDataEx(self, image, n, opts, vals):
        self.ptx_loads.append(image)
        return super().cuModuleLoadDataEx(image, n, opts, vals)

    def cuModuleLoadData(self, image):
        assert image.startswith(b"CUBIN:")
        if self.refuse_cubins:
            return 200, None   # CUDA_ERROR_INVALID_IMAGE
        self.loaded_cubins.append(image)
        return 0, ("module", image[len(b"CUBIN:"):])


@pytest.fixture
def linking(fake, monkeypatch):  # noqa: F811
    f = LinkingDriver()
    drv.set_driver(f)
    for k in cuda_cubin.stats:
        monkeypatch.setitem(cuda_cubin.stats, k, 0)
    return f


def _load(be, k):
    abi = kernel_abi(k)
    ptx = f"// fake ptx for {k.name} nparams={len(abi.params)}\n"
    return Compiled(k, {}, be.load_ptx(ptx, abi, k.name))


def _fresh_process_backend():
    """A new backend with nothing in memory: what a later process starts with."""
    from kaio import cache
    from kaio.backends.cuda import CudaBackend
    cache.default_cache().clear_memory()
    return CudaBackend()


def test_first_load_links_and_stores_later_one_loads_the_cubin(linking):
    be = _fresh_process_backend()
    k = _saxpy_ir()
    c = _load(be, k)
    assert len(linking.links) == 1 and cuda_cubin.stats["links"] == 1
    assert len(linking.loaded_cubins) == 1            # the linked cubin is what got loaded
    be2 = _fresh_process_backend()
    c2 = _load(be2, k)
    assert len(linking.links) == 1 and cuda_cubin.stats["hits"] == 1   # no second link
    assert linking.loaded_cubins[1] == linking.loaded_cubins[0]
    assert linking.ptx_loads == []
    # and the module loaded from the cubin launches
    linking.kernels["saxpy"] = _saxpy_impl
    x, y = np.arange(64, dtype=np.float32), np.ones(64, np.float32)
    be2.launch(c2, (1, 1, 1), (64, 1, 1), [2.0, x, y])   # y is out: never copied in
    np.testing.assert_array_equal(y, 2 * np.arange(64, dtype=np.float32))
    assert c.handle is not c2.handle


def test_key_covers_ptx_device_and_driver():
    base = cuda_cubin.cubin_key(b"ptx\0", (9, 0), 12080)
    assert base == cuda_cubin.cubin_key(b"ptx\0", (9, 0), 12080)
    others = {cuda_cubin.cubin_key(b"ptx2\0", (9, 0), 12080),
              cuda_cubin.cubin_key(b"ptx\0", (10, 0), 12080),
              cuda_cubin.cubin_key(b"ptx\0", (9, 0), 13000)}
    assert base not in others and len(others) == 3


def test_other_device_or_driver_links_again(linking):
    k = _saxpy_ir()
    _load(_fresh_process_backend(), k)
    linking.ATTRS = dict(FakeDriver.ATTRS, COMPUTE_CAPABILITY_MAJOR=10)
    drv.set_driver(linking)     # forget the context: the device reads as cc 10.0 now
    _load(_fresh_process_backend(), k)
    assert len(linking.links) == 2 and cuda_cubin.stats["hits"] == 0


def test_refused_cubin_is_linked_again_then_ptx(linking):
    k = _saxpy_ir()
    _load(_fresh_process_backend(), k)
    linking.refuse_cubins = True
    c = _load(_fresh_process_backend(), k)
    # the cached cubin refused, a new link refused too: the plain PTX load
    assert cuda_cubin.stats["ptx_loads"] == 1 and len(linking.ptx_loads) == 1
    assert c.handle.module[1].startswith(b"// fake ptx")


def test_broken_ptx_still_reports_the_jit_log(linking):
    from kaio.backends.abi import KernelABI
    be = _fresh_process_backend()
    with pytest.raises(kaio.CudaError) as ei:
        be.load_ptx(".version 8.0\nBROKEN\n", KernelABI("bad", []), "bad_kernel")
    e = ei.value
    assert e.call == "cuModuleLoadDataEx" and e.code == "CUDA_ERROR_INVALID_PTX"
    assert "Unknown symbol 'BROKEN'" in str(e)


def test_driver_without_linker_loads_ptx(fake, monkeypatch):  # noqa: F811
    monkeypatch.setitem(cuda_cubin.stats, "ptx_loads", 0)
    c = _load(_fresh_process_backend(), _saxpy_ir())
    assert cuda_cubin.stats["ptx_loads"] == 1 and c.handle.module[0] == "module"


def test_cache_without_disk_loads_ptx(linking, monkeypatch):
    monkeypatch.setenv("KAIO_CACHE_DISABLE", "1")
    from kaio import cache
    cache.set_default_cache(None)
    _load(_fresh_process_backend(), _saxpy_ir())
    assert linking.links == [] and cuda_cubin.stats["ptx_loads"] == 1


_CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    import kaio
    from kaio import f32, warm
    from kaio.backends import cuda_cubin
    kaio.set_backend("cuda")


    @kaio.kernel
    def axpb(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
        for i in y.owned():
            y[i] = a * x[i] + y[i]


    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    dx, dy = kaio.to_device(x), kaio.to_device(np.ones_like(x))
    axpb(2.0, dx, dy)
    kaio.synchronize()
    ok = bool(np.array_equal(dy.to_host(), np.float32(2.0) * x + np.float32(1.0)))
    print(json.dumps({"cubin": cuda_cubin.stats, "warm": warm.stats, "ok": ok,
                      "same_input": bool(np.array_equal(dx.to_host(), x))}))
''')


def _two_processes(tmp_path, env):
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    env = dict(env, KAIO_CACHE_DIR=str(tmp_path / "cache"), KAIO_AUTOTUNE="0", KAIO_PROGRESS="0")
    env.pop("KAIO_CACHE_DISABLE", None)
    out = []
    for _ in range(2):
        p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-3000:]
        out.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return out


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the libcuda stub")
def test_fresh_processes_on_the_libcuda_stub(tmp_path):
    """The CUDA backend on scripts/stub_libcuda.c: the first process links and stores the
    cubin, the second finds the kernel and its cubin on disk (no frontend, no link)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(lib / "libcuda.so.1"),
                    os.path.join(ROOT, "scripts", "stub_libcuda.c")], check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(
        p for p in (str(lib), os.environ.get("LD_LIBRARY_PATH")) if p))
    cold, warm = _two_processes(tmp_path, env)
    assert cold["cubin"] == {"hits": 0, "links": 1, "ptx_loads": 0}
    assert warm["cubin"] == {"hits": 1, "links": 0, "ptx_loads": 0}
    assert warm["warm"]["hits"] == 1 and warm["same_input"]   # stub memory round-trips


@pytest.mark.cuda
def test_fresh_processes_on_the_gpu(tmp_path):
    """On a GPU: the second process launches the kernel from the cached cubin, correctly."""
    cold, warm = _two_processes(tmp_path, dict(os.environ))
    assert cold["ok"] and warm["ok"]
    assert cold["cubin"]["links"] == 1 and warm["cubin"]["hits"] == 1
    assert warm["warm"]["hits"] == 1
