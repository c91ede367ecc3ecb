"""The launch plan cache (kaio.backends.launch_checks.LaunchChecks.planned): a launch's checks run
once per argument signature, and a launch that changes any part of the signature -- a shape, a
dtype, the launch shape, a scalar the index bounds read, an aliased pointer, a scalar's type or
range -- still raises exactly the error a fresh kernel raises."""
from __future__ import annotations

import numpy as np
import pytest
from test_cuda_runtime_fake import _compiled, _saxpy_impl, _saxpy_ir, fake  # noqa: F401
from test_launch_checks import prefix, saxpy  # saxpy: a Region; prefix: a bound over n

import kaio
from kaio.backends.launch_checks import LaunchChecks


def counted_calls(monkeypatch, method: str) -> list:
    """The names of the kernels whose ``LaunchChecks.<method>`` ran, in order."""
    runs = []
    original = getattr(LaunchChecks, method)

    def counted(self, grid, block, args):
        runs.append(self.name)
        return original(self, grid, block, args)
    monkeypatch.setattr(LaunchChecks, method, counted)
    return runs


@pytest.fixture
def full_checks(monkeypatch):
    """Counts the launches whose checks ran in full."""
    return counted_calls(monkeypatch, "__call__")


def _cold(kernel):
    """Forget every plan and memoised check of ``kernel`` (as in a fresh process)."""
    for _, c in kernel._compiled.values():
        if c.checks is not None:
            c.checks.plans.clear()
            c.checks.memo.clear()
            c.checks.last = LaunchChecks(c.kernel).last


def _dev(n, v=1.0, dtype=np.float32):
    return kaio.to_device(np.full(n, v, dtype))


def test_checks_run_once_per_signature(reference, full_checks):
    _cold(saxpy)  # a freed array's address may come back: no plan from another test
    x, y = _dev(8, 2.0), _dev(8, 1.0)
    for _ in range(3):
        saxpy(3.0, x, y)
    np.testing.assert_array_equal(y.to_host(), np.full(8, 19.0, np.float32))
    assert full_checks == ["saxpy"]
    saxpy(1.5, x, y)            # a new scalar value that no bound reads: still the plan
    assert full_checks == ["saxpy"]
    saxpy[(1,), (8,)](1.0, x, y)  # a new launch shape: checked again, once
    saxpy[(1,), (8,)](1.0, x, y)
    assert full_checks == ["saxpy", "saxpy"]
    np.testing.assert_array_equal(y.to_host(), np.full(8, 19.0 + 3.0 + 2.0 + 2.0, np.float32))


def _error(launch):
    with pytest.raises(Exception) as e:
        launch()
    return type(e.value), str(e.value)


def test_a_changed_signature_raises_as_a_fresh_kernel_does(reference):
    x, y, y16 = _dev(8), _dev(8), _dev(16)
    saxpy(2.0, x, y)
    saxpy[(1,), (8,)](2.0, x, y)
    prefix(4, x, y)
    bad = {
        "shape": lambda: saxpy(2.0, _dev(3), y),
        "dtype": lambda: saxpy(2.0, _dev(8, dtype=np.float64), y),
        "grid": lambda: saxpy[(1,), (4,)](2.0, x, y),
        "block": lambda: saxpy[(1,), (4,)](2.0, x, y16),
        "bounded scalar": lambda: prefix(9, x, y),
        "aliased pointer": lambda: saxpy(2.0, y, y),
        "scalar type": lambda: saxpy(True, x, y),
        "scalar range": lambda: saxpy(1e39, x, y),
        "int scalar range": lambda: prefix(2**31, x, y),
    }
    for what, launch in bad.items():
        warm = _error(launch)
        for k in (saxpy, prefix):
            _cold(k)
        assert _error(launch) == warm, what
        assert _error(launch) == warm, what   # a failed launch never leaves a plan behind
    saxpy(2.0, x, y)
    prefix(8, x, y)                           # the good launches still run
    np.testing.assert_array_equal(y.to_host(), np.full(8, 8.0, np.float32))


def test_freed_array_at_a_planned_address_is_refused(reference):
    x, y = _dev(8), _dev(8)
    saxpy(2.0, x, y)
    x.free()
    with pytest.raises(Exception, match="freed|released|null|0x0"):
        saxpy(2.0, x, y)


def test_cuda_packs_each_signature_once(fake, monkeypatch):  # noqa: F811 (the fixture)
    """The CUDA backend's plan: pointers and extents packed once per signature, scalars written
    per launch, and a new array a new plan (the fake driver reads the parameters as the GPU
    would)."""
    from kaio.backends.cuda import CudaBackend
    be = CudaBackend()
    fake.kernels["saxpy"] = _saxpy_impl
    c = _compiled(be, _saxpy_ir("region"))
    builds = []
    original = CudaBackend._planned_launcher
    monkeypatch.setattr(CudaBackend, "_planned_launcher",
                        lambda self, *a: builds.append(1) or original(self, *a))
    rt = be.runtime
    x = kaio.DeviceArray(8, np.float32, runtime=rt)
    y = kaio.DeviceArray(8, np.float32, runtime=rt)
    x.copy_from_host(np.arange(8, dtype=np.float32))
    y.copy_from_host(np.zeros(8, np.float32))
    for a in (1.0, 2.0, 0.5):
        be.launch(c, (1,), (8,), [a, x, y])
    np.testing.assert_array_equal(y.to_host(), 3.5 * np.arange(8, dtype=np.float32))
    assert builds == [1]
    z = kaio.DeviceArray(8, np.float32, runtime=rt)
    z.copy_from_host(np.ones(8, np.float32))
    be.launch(c, (1,), (8,), [1.0, x, z])       # another pointer: another plan, whose first
    assert builds == [1]                        # launch takes the full path, building nothing
    be.launch(c, (1,), (8,), [1.0, x, z])       # (its launcher made at its second)
    assert builds == [1, 1]
    np.testing.assert_array_equal(z.to_host(), 2 * np.arange(8, dtype=np.float32) + 1)
    with pytest.raises(kaio.LaunchError, match="'x' and 'y' share memory"):
        be.launch(c, (1,), (8,), [1.0, z, z])
    host = np.zeros(8, np.float32)              # numpy: copied by intent, on the full path
    be.launch(c, (1,), (8,), [2.0, x, host])
    np.testing.assert_array_equal(host, 2 * np.arange(8, dtype=np.float32))
    assert fake.launches[-1][1:3] == ((1, 1, 1), (8, 1, 1))
