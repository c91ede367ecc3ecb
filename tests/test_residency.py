"""kaio.resident: numpy arguments kept on the device inside a scope (issue 15, section 5).

Every test runs on the backend in use (the reference in CI, the GPU in the device run); the
transfer counters (kaio.backends.runtime.transfer_stats) show which copies happened.
"""
import numpy as np
import pytest
from test_cuda_runtime_fake import fake, scale_impl  # noqa: F401 (the fixture)
from test_launch_plan_cache import counted_calls

import kaio
from kaio import f32, f64
from kaio.backends.runtime import transfer_stats


@kaio.kernel
def jacobi_1d(a: kaio.In[f64], b: kaio.Region[f64]):
    """The RAJAPerf JACOBI_1D update on the interior: b[i] = (a[i-1] + a[i] + a[i+1]) / 3."""
    for i in b.owned():
        if i > 0 and i < b.shape[0] - 1:
            b[i] = 0.3333333333333333 * (a[i - 1] + a[i] + a[i + 1])


def _manual(a0, steps):
    a, b = a0.copy(), a0.copy()
    for _ in range(steps):
        b[1:-1] = 0.3333333333333333 * (a[:-2] + a[1:-1] + a[2:])
        a[1:-1] = 0.3333333333333333 * (b[:-2] + b[1:-1] + b[2:])
    return a, b


def _start(n=1000, seed=0):
    return np.random.default_rng(seed).standard_normal(n)


def test_a_scope_keeps_arrays_on_the_device_and_brings_them_back(backend):
    a0 = _start()
    a, b = a0.copy(), a0.copy()
    stats = transfer_stats()
    stats.reset()
    with kaio.resident(a, b):
        for _ in range(10):
            jacobi_1d(a, b)
            jacobi_1d(b, a)
        inside = stats.snapshot()
    after = stats.snapshot()
    want_a, want_b = _manual(a0, 10)
    np.testing.assert_allclose(a, want_a, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(b, want_b, rtol=1e-14, atol=1e-15)
    # two copies in (on entry), none per launch; two back on exit (both were written)
    assert (inside["htod_copies"], inside["dtoh_copies"]) == (2, 0), inside
    assert (after["htod_copies"], after["dtoh_copies"]) == (2, 2), after


def test_without_a_scope_every_launch_copies_and_the_result_is_the_same(backend):
    a0 = _start(seed=1)
    a, b = a0.copy(), a0.copy()
    for _ in range(3):
        jacobi_1d(a, b)
        jacobi_1d(b, a)
    a2, b2 = a0.copy(), a0.copy()
    with kaio.resident(a2, b2):
        for _ in range(3):
            jacobi_1d(a2, b2)
            jacobi_1d(b2, a2)
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)


def test_host_copies_are_stale_inside_until_fetched_and_push_updates_the_device(backend):
    a0 = _start(seed=2)
    a, b = a0.copy(), np.zeros_like(a0)
    with kaio.resident(a, b) as scope:
        jacobi_1d(a, b)
        assert not b[1:-1].any()                 # the host copy is stale inside the scope
        scope.fetch(b)
        np.testing.assert_allclose(b[1:-1], _manual(a0, 1)[1][1:-1], rtol=1e-14)
        a[:] = 1.0                               # changed on the host ...
        scope.push(a)                            # ... and sent to the device
        stats = transfer_stats()
        stats.reset()
        jacobi_1d(a, b)
    np.testing.assert_allclose(b[1:-1], 1.0, rtol=1e-15)
    np.testing.assert_array_equal(a, 1.0)        # In only: not copied back, and unchanged
    assert stats.snapshot()["dtoh_copies"] == 1  # b only


def test_results_are_copied_back_when_the_block_raises(backend):
    a0 = _start(seed=3)
    a, b = a0.copy(), np.zeros_like(a0)
    with pytest.raises(RuntimeError, match="boom"):
        with kaio.resident(a, b):
            jacobi_1d(a, b)
            raise RuntimeError("boom")
    np.testing.assert_allclose(b[1:-1], _manual(a0, 1)[1][1:-1], rtol=1e-14)


def test_a_failed_launch_inside_still_leaves_the_earlier_results(backend):
    a0 = _start(seed=4)
    a, b = a0.copy(), np.zeros_like(a0)
    with pytest.raises(kaio.errors.KaioError):
        with kaio.resident(a, b):
            jacobi_1d(a, b)
            jacobi_1d(a, np.zeros(5, np.float32))   # wrong dtype: refused before launch
    np.testing.assert_allclose(b[1:-1], _manual(a0, 1)[1][1:-1], rtol=1e-14)


def test_views_of_resident_arrays_and_bad_arguments_are_refused():
    a, b = _start(seed=5), np.zeros(1000)
    with pytest.raises(kaio.errors.ArgumentValueError, match="view of an array resident"):
        with kaio.resident(a, b):
            jacobi_1d(a[:500], b[:500])
    with pytest.raises(kaio.errors.ArgumentTypeError, match="not a numpy array"):
        kaio.resident([1.0, 2.0])
    with pytest.raises(kaio.errors.ArgumentValueError, match="C-contiguous"):
        kaio.resident(np.zeros((4, 4))[:, 1])
    with pytest.raises(kaio.errors.ArgumentValueError, match="not resident"):
        with kaio.resident(a) as scope:
            scope.fetch(b)


def test_nested_scopes_and_arrays_outside_them(backend):
    a0 = _start(seed=6)
    a, b, c = a0.copy(), np.zeros_like(a0), np.zeros_like(a0)
    with kaio.resident(a):
        with kaio.resident(b):
            jacobi_1d(a, b)          # both mirrored (a from the outer scope)
            jacobi_1d(a, c)          # c is not resident: copied in and out as usual
        np.testing.assert_allclose(b[1:-1], _manual(a0, 1)[1][1:-1], rtol=1e-14)  # inner exit
    np.testing.assert_allclose(c[1:-1], b[1:-1], rtol=0)


def _forget(kernel):
    """Forget the kernel's recent plans (another test's arrays may have had these addresses)."""
    kernel._forget_plans()


def test_launches_in_a_scope_take_the_repeated_call_fast_path(backend, monkeypatch):
    """Resident arguments resolve to their mirrors before the fast path: one plan lookup per
    signature, not one per launch, and the write-back still knows what was written."""
    lookups = counted_calls(monkeypatch, "planned")
    _forget(jacobi_1d)
    a0 = _start(seed=7)
    a, b = a0.copy(), a0.copy()
    stats = transfer_stats()
    stats.reset()
    with kaio.resident(a, b):
        for _ in range(5):
            jacobi_1d(a, b)          # a is In only: never marked written
        for _ in range(4):
            jacobi_1d[4, 256](b, a)  # an explicit shape: a bound configuration of its own
        assert stats.snapshot()["htod_copies"] == 2
        with pytest.raises(kaio.errors.ArgumentValueError, match="view of an array resident"):
            jacobi_1d(a[:500], b[:500])   # a view still reaches the checked path and its refusal
        jacobi_1d(a, b)
    assert lookups == ["jacobi_1d"] * 2  # the two signatures (the view is refused before)
    want_a, want_b = _manual(a0, 1)
    for _ in range(4):
        want_a[1:-1] = 0.3333333333333333 * (want_b[:-2] + want_b[1:-1] + want_b[2:])
    want_b[1:-1] = 0.3333333333333333 * (want_a[:-2] + want_a[1:-1] + want_a[2:])
    np.testing.assert_allclose(b, want_b, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(a, want_a, rtol=1e-14, atol=1e-15)
    assert stats.snapshot()["dtoh_copies"] == 2  # both written (a by the second kernel)


def test_the_fast_path_marks_only_written_parameters(backend, monkeypatch):
    """A resident array passed only as ``kaio.In`` is not copied back; one written on the fast
    path is (it would be lost otherwise)."""
    lookups = counted_calls(monkeypatch, "planned")
    _forget(jacobi_1d)
    a0 = _start(seed=8)
    a, b = a0.copy(), np.zeros_like(a0)
    stats = transfer_stats()
    with kaio.resident(a, b):
        for _ in range(3):
            jacobi_1d(a, b)
        stats.reset()
    assert len(lookups) == 1
    assert stats.snapshot()["dtoh_copies"] == 1  # b only
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_allclose(b[1:-1], _manual(a0, 1)[1][1:-1], rtol=1e-14)


@kaio.kernel
def _scale(a: f32, x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = a * x[i]


def test_a_scope_on_the_cuda_driver_launches_through_the_compiled_plan(fake, monkeypatch):  # noqa: F811
    """On the (fake) CUDA driver, which reads the parameters as the GPU would: launches in a
    scope go through the plan's compiled guard and launch (kaio.backends.cuda_planned.PlannedLaunch)
    with the mirrors' addresses, and only y comes back."""
    pytest.importorskip("kaio.backends.ptx")
    fake.kernels["_scale"] = scale_impl
    lookups = counted_calls(monkeypatch, "planned")
    x, y = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    stats = transfer_stats()
    stats.reset()
    run = _scale[(1,), (32,)]
    with kaio.resident(x, y) as scope:
        for step in range(4):
            run(float(step), x, y)
        np.testing.assert_array_equal(scope.fetch(y), 3.0 * x)
        y[:] = 0
    assert len(lookups) == 1 and len(fake.launches) == 4
    assert run.bound.recent[0][2].__code__.co_filename == "<kaio planned launch>"
    np.testing.assert_array_equal(y, 3.0 * x)    # the device's y, copied back over the host's
    s = stats.snapshot()
    assert (s["htod_copies"], s["dtoh_copies"]) == (2, 2)  # in on entry; fetch and exit: y only


def test_an_inner_scope_shares_the_outer_scopes_mirror(backend):
    """An array resident in an outer scope and named again by an inner one keeps one mirror:
    the inner scope neither copies the stale host array in nor frees the mirror on exit."""
    a0 = _start(seed=9)
    a, b = a0.copy(), np.zeros_like(a0)
    stats = transfer_stats()
    stats.reset()
    with kaio.resident(a, b):
        jacobi_1d(a, b)                  # b's mirror holds the step; the host b is stale (zeros)
        with kaio.resident(b):
            jacobi_1d(b, a)              # reads b's mirror: the step, not the host's zeros
        np.testing.assert_allclose(b[1:-1], _manual(a0, 1)[1][1:-1], rtol=1e-14)  # inner exit
        jacobi_1d(a, b)                  # the mirror is still the outer scope's, alive
    want_a, want_b = a0.copy(), np.zeros_like(a0)
    for src, dst in ((want_a, want_b), (want_b, want_a), (want_a, want_b)):
        dst[1:-1] = 0.3333333333333333 * (src[:-2] + src[1:-1] + src[2:])
    np.testing.assert_allclose(a, want_a, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(b, want_b, rtol=1e-14, atol=1e-15)
    assert stats.snapshot()["htod_copies"] == 2  # a and b once, on the outer entry


def test_a_launch_with_too_few_arguments_in_a_scope_says_so(backend):
    a, b = _start(seed=10), np.zeros(1000)
    with kaio.resident(a, b):
        jacobi_1d(a, b)
        with pytest.raises(TypeError, match="missing argument"):
            jacobi_1d(a)
