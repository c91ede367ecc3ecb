"""kaio.resident: numpy arguments kept on the device inside a scope (issue 15, section 5).

Every test runs on the backend in use (the reference in CI, the GPU in the device run); the
transfer counters (kaio.backends.runtime.transfer_stats) show which copies happened.
"""
import numpy as np
import pytest

import kaio
from kaio import f64
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
