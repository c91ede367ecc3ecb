"""The fast path of a repeated call (kaio.launch._BoundLaunch.fast and .recent): a call whose arguments
match one of the recent plans of its launch configuration goes straight to the backend, without
even the plan lookup; a call that changes the signature (a dtype, a shape, a numpy array for a
device array, a freed array, a scalar's type or range) or the backend's settings takes the
checked path and raises exactly what it raises there."""
from __future__ import annotations

import ctypes
import threading

import ml_dtypes
import numpy as np
import pytest
from test_cuda_runtime_fake import _arg, fake, scale_impl  # noqa: F401 (the fixture)
from test_launch_checks import saxpy  # a Region: y = a * x + y
from test_launch_plan_cache import _cold, _dev, counted_calls, full_checks  # noqa: F401 (the fixture)

import kaio
from kaio import config


@pytest.fixture
def lookups(monkeypatch):
    """Counts the launches that reached the plan lookup (LaunchChecks.planned)."""
    return counted_calls(monkeypatch, "planned")


def _forget(kernel):
    """Forget the kernel's bound launch configurations and their recent plans (a freed array's
    address may come back, and with it another test's plan), and every plan."""
    kernel._forget_plans()
    _cold(kernel)


def test_a_repeated_call_skips_the_plan_lookup(reference, lookups):
    _forget(saxpy)
    x, y = _dev(8, 2.0), _dev(8, 1.0)
    for _ in range(3):
        saxpy[(1,), (8,)](1.0, x, y)
        saxpy[1, 8]  # the same configuration written otherwise: bound once more
        saxpy(1.0, x, y)
    assert lookups == ["saxpy", "saxpy"]  # once per launch configuration
    np.testing.assert_array_equal(y.to_host(), np.full(8, 13.0, np.float32))
    assert saxpy[(1,), (8,)] is saxpy[(1,), (8,)]
    with pytest.raises(kaio.LaunchError, match="grid must be an int"):
        saxpy[True, 8]  # True == 1 and hashes alike: it must not find a bound [1, 8]
    z = _dev(8, 0.0)
    for step in range(4):  # two signatures in turn (swapped buffers): both stay on the fast path
        saxpy[(1,), (8,)](1.0, x, (y, z)[step % 2])
    assert lookups == ["saxpy", "saxpy", "saxpy"]
    np.testing.assert_array_equal(z.to_host(), np.full(8, 4.0, np.float32))


def test_a_changed_signature_on_the_fast_path_is_checked_again(reference, full_checks, lookups):  # noqa: F811
    _forget(saxpy)
    x, y = _dev(8, 1.0), _dev(8, 0.0)
    run = saxpy[(1,), (8,)]
    run(1.0, x, y)
    run(1.0, x, y)
    assert full_checks == ["saxpy"] and lookups == ["saxpy"]
    freed = _dev(8)
    run(1.0, x, freed)
    freed.free()
    bad = {
        "dtype": (lambda: run(1.0, _dev(8, dtype=np.float64), y), TypeError, "expects dtype f32"),
        "shape": (lambda: run(1.0, x, _dev(16)), kaio.LaunchError, "8 elements would be left unowned"),
        "freed array": (lambda: run(1.0, x, freed), Exception, "freed|released|null|0x0"),
        "scalar type": (lambda: run(True, x, y), TypeError, "expects a f32 scalar"),
        "scalar range": (lambda: run(1e39, x, y), ValueError, "overflows"),
    }
    expected = 1.0 * 2  # y after the two launches above
    for what, (launch, error, match) in bad.items():
        checked, looked = len(full_checks), len(lookups)
        with pytest.raises(error, match=match):
            launch()
        assert len(lookups) == looked + 1, what  # the checked path: the plan lookup ...
        # ... and every check, or for a known signature its scalars' (LaunchChecks.planned)
        assert len(full_checks) == checked + (what != "scalar range"), what
        run(1.0, x, y)                           # the good signature: still the fast path
        expected += 1.0
        assert len(lookups) == looked + 1, what
    np.testing.assert_array_equal(y.to_host(), np.full(8, expected, np.float32))
    host = np.zeros(8, np.float32)  # a numpy array where a device array was: checked, copied
    checked = len(full_checks)
    run(3.0, x, host)
    run(3.0, x, host)
    assert len(full_checks) == checked + 2  # numpy arrays have no signature: checked every time
    np.testing.assert_array_equal(host, np.full(8, 6.0, np.float32))
    run(float("nan"), x, y)  # a NaN is a valid f32 the guard leaves to the checks
    assert np.isnan(y.to_host()).all()


def test_changed_settings_leave_the_fast_path(reference, lookups, monkeypatch):
    _forget(saxpy)
    x, y = _dev(8, 1.0), _dev(8, 0.0)
    saxpy(1.0, x, y)
    saxpy(1.0, x, y)
    assert lookups == ["saxpy"]
    monkeypatch.setenv("KAIO_CHECKED", "1")  # the compile options change: another Compiled
    config.reload()
    try:
        saxpy(1.0, x, y)
        assert lookups == ["saxpy", "saxpy"]
        assert saxpy.compile().options.checked
    finally:
        monkeypatch.delenv("KAIO_CHECKED")
        config.reload()
    np.testing.assert_array_equal(y.to_host(), np.full(8, 3.0, np.float32))


@kaio.kernel
def _scale(a: kaio.f32, x: kaio.In[kaio.f32], y: kaio.Out[kaio.f32]):
    for i in y.owned():
        y[i] = a * x[i]


def test_cuda_fast_path_packs_each_signature_and_thread_apart(fake, lookups):  # noqa: F811
    """On the (fake) CUDA driver, which reads the parameters as the GPU would: two signatures
    in turn, each with its own scalar per launch, from two threads."""
    pytest.importorskip("kaio.backends.ptx")
    fake.kernels["_scale"] = scale_impl
    pairs = [(kaio.to_device(np.arange(32, dtype=np.float32) + k), kaio.device_array(32, kaio.f32))
             for k in range(2)]
    run = _scale[(1,), (32,)]
    for step in range(6):
        x, y = pairs[step % 2]
        run(float(step), x, y)
        np.testing.assert_array_equal(y.to_host(), np.float32(step) * x.to_host())
    assert len(lookups) == 2  # one plan per pair, then the fast path
    errors = []

    def other_thread():
        try:
            x, y = pairs[0]
            run(7.0, x, y)
            np.testing.assert_array_equal(y.to_host(), np.float32(7.0) * x.to_host())
        except Exception as e:  # reported by the main thread
            errors.append(e)
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert not errors and len(lookups) == 2
    x, y = pairs[0]
    run(0.5, x, y)  # this thread's buffer still holds its own pointers
    np.testing.assert_array_equal(y.to_host(), np.float32(0.5) * x.to_host())


def test_backend_launch_tries_the_last_plan_first(reference, monkeypatch):
    """Backend.launch with the same launch shape objects: the last plan's guard, no signature;
    a changed argument is checked as ever."""
    signatures = counted_calls(monkeypatch, "signature")
    be, compiled = kaio.get_backend(), saxpy.compile()
    grid, block = (1,), (8,)
    x, y = _dev(8, 1.0), _dev(8, 0.0)
    for _ in range(3):
        be.launch(compiled, grid, block, [1.0, x, y])
    assert len(signatures) == 1
    with pytest.raises(TypeError, match="expects dtype f32"):
        be.launch(compiled, grid, block, [1.0, _dev(8, dtype=np.float64), y])
    with pytest.raises(ValueError, match="overflows"):
        be.launch(compiled, grid, block, [1e39, x, y])
    with pytest.raises(TypeError, match="expects a f32 scalar"):
        be.launch(compiled, grid, block, [True, x, y])
    be.launch(compiled, grid, block, [1.0, x, y])
    np.testing.assert_array_equal(y.to_host(), np.full(8, 4.0, np.float32))


def test_cuda_compiled_guard_refuses_what_its_plan_was_not_checked_for(fake, lookups):  # noqa: F811
    """The CUDA backend compiles a plan's guard and launch into one function
    (kaio.backends.cuda_planned.PlannedLaunch): every argument change the plan was not checked for
    leaves it for the checked path, which raises what it raises there; the good signature stays
    on it."""
    pytest.importorskip("kaio.backends.ptx")
    fake.kernels["_scale"] = scale_impl
    x = kaio.to_device(np.arange(32, dtype=np.float32))
    y = kaio.device_array(32, kaio.f32)
    run = _scale[(1,), (32,)]
    run(2.0, x, y)
    run(3.0, x, y)
    assert len(lookups) == 1 and run.bound.recent[0][2].__code__.co_filename == "<kaio planned launch>"
    freed = kaio.device_array(32, kaio.f32)
    run(1.0, x, freed)
    freed.free()
    bad = {
        "dtype": (lambda: run(1.0, kaio.device_array(32, kaio.f64), y), TypeError, "expects dtype f32"),
        "shape": (lambda: run(1.0, x, kaio.device_array(64, kaio.f32)), kaio.LaunchError, "unowned"),
        "freed array": (lambda: run(1.0, x, freed), Exception, "freed|released|null|0x0"),
        "scalar type": (lambda: run(True, x, y), TypeError, "expects a f32 scalar"),
        "scalar range": (lambda: run(1e39, x, y), ValueError, "overflows"),
        "argument count": (lambda: run(1.0, x), TypeError, "missing argument"),
        "more arguments": (lambda: run(1.0, x, y, y), TypeError, "argument"),
    }
    for what, (launch, error, match) in bad.items():
        launched = len(fake.launches)
        with pytest.raises(error, match=match):
            launch()
        assert len(fake.launches) == launched, what
        looked = len(lookups)
        run(4.0, x, y)
        assert len(lookups) == looked, what      # still the fast path
        np.testing.assert_array_equal(y.to_host(), 4.0 * np.arange(32, dtype=np.float32))


def test_cuda_fast_path_leaves_a_graph_capture_to_the_full_path(fake, lookups):  # noqa: F811
    """A plan launched before a capture: inside ``kaio.graph()`` its launches go to the graph's
    stream and are counted (the full path), also after a capture whose body raised; outside,
    the fast path again."""
    pytest.importorskip("kaio.backends.ptx")
    from kaio.backends.runtime import captures
    fake.kernels["_scale"] = scale_impl
    x = kaio.to_device(np.arange(32, dtype=np.float32))
    y = kaio.device_array(32, kaio.f32)
    run = _scale[(1,), (32,)]
    run(1.0, x, y)
    run(1.0, x, y)
    with pytest.raises(RuntimeError, match="body"):
        with kaio.graph():
            raise RuntimeError("body")
    assert captures[0] == 0
    with kaio.graph() as g:
        for a in (2.0, 3.0):
            run(a, x, y)
    assert g.launches == 2 and [launch[4] for launch in fake.launches[-2:]] == [g.stream.handle] * 2
    run(5.0, x, y)
    assert fake.launches[-1][4] is None and captures[0] == 0 and len(lookups) == 1
    np.testing.assert_array_equal(y.to_host(), 5.0 * np.arange(32, dtype=np.float32))
    g.replay()
    g.synchronize()
    np.testing.assert_array_equal(y.to_host(), 3.0 * np.arange(32, dtype=np.float32))


def test_a_launch_spy_sees_repeated_cuda_launches(fake, lookups):  # noqa: F811
    """benchmarks/ml_kaio.LaunchSpy replaces the backend's _launch_planned: the plans kept
    before it (compiled guard and launch, which never call it) are dropped, and launches while
    it spies go through it; afterwards the compiled launch again."""
    import os
    import sys
    pytest.importorskip("kaio.backends.ptx")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import ml_kaio
    fake.kernels["_scale"] = scale_impl
    x = kaio.to_device(np.arange(32, dtype=np.float32))
    y = kaio.device_array(32, kaio.f32)
    run = _scale[(1,), (32,)]
    run(1.0, x, y)
    run(1.0, x, y)
    with ml_kaio.LaunchSpy() as spy:
        run(2.0, x, y)
        run(3.0, x, y)
    assert [a[0] for *_, a in spy.launches] == [2.0, 3.0] and spy.output() is y
    run(4.0, x, y)
    run(5.0, x, y)  # the plan's second launch: compiled again (kaio.launch._second_launch)
    assert run.bound.recent[0][2].__code__.co_filename == "<kaio planned launch>"
    np.testing.assert_array_equal(y.to_host(), 5.0 * np.arange(32, dtype=np.float32))


def test_a_forwarding_backend_wrapper_sees_repeated_cuda_launches(fake, lookups):  # noqa: F811
    """conformance.targets.Recorder forwards every other attribute to the CUDA backend it wraps:
    its repeated calls take the generic path, through its own _launch_planned, so it records
    every launch (the compiled CUDA launch would skip it)."""
    pytest.importorskip("kaio.backends.ptx")
    from kaio.conformance.targets import Recorder, using
    fake.kernels["_scale"] = scale_impl
    x = kaio.to_device(np.arange(32, dtype=np.float32))
    y = kaio.device_array(32, kaio.f32)
    recorder = Recorder(kaio.get_backend())
    with using(recorder, "fast-path-test"):
        run = _scale[(1,), (32,)]
        for a in (1.0, 2.0, 3.0):
            run(a, x, y)
    assert len(recorder.log) == 3 and len(lookups) == 1
    np.testing.assert_array_equal(y.to_host(), 3.0 * np.arange(32, dtype=np.float32))


@kaio.kernel
def _nothing():
    pass


@kaio.kernel
def _mixed(a: kaio.f16, b: kaio.bf16, c: kaio.bool_, d: kaio.i8, y: kaio.Out[kaio.f32]):
    for i in y.owned():
        v = kaio.f32(a) + kaio.f32(b) + kaio.f32(d)
        if c:
            v = v + 1.0
        y[i] = v


def _mixed_impl(driver, params, grid, block):
    """_mixed as the fake runs it, reading each scalar's bits from its parameter slot."""
    a = np.array(_arg(params, 0, ctypes.c_uint16), np.uint16).view(np.float16)
    b = np.array(_arg(params, 1, ctypes.c_uint16), np.uint16).view(ml_dtypes.bfloat16)
    c, d = _arg(params, 2, ctypes.c_uint8), _arg(params, 3, ctypes.c_int8)
    yp, n = _arg(params, 4, ctypes.c_uint64), _arg(params, 5, ctypes.c_int32)
    v = np.float32(a) + np.float32(b) + np.float32(d) + np.float32(c)
    driver.write(yp, np.full(n, v, np.float32).tobytes())


def _compiles(monkeypatch) -> list:
    """Counts the functions the CUDA planned launch compiles from source."""
    from kaio.backends.cuda_planned import PlannedLaunch
    made = []
    original = PlannedLaunch._compile

    def counted(env, lines):
        made.append(lines[0])
        return original(env, lines)
    monkeypatch.setattr(PlannedLaunch, "_compile", staticmethod(counted))
    return made


def test_cuda_fast_path_launches_with_its_configuration(fake, lookups, monkeypatch):  # noqa: F811
    """A configuration's shared bytes and stream reach the compiled launch (a stream's handle
    looked up per launch, the default stream passed as None, which cuda.bindings takes without
    building a CUstream); ``k.on(stream)`` written in a loop compiles its launch once; above
    48 KiB of dynamic shared memory the generic path opts the function in first."""
    pytest.importorskip("kaio.backends.ptx")
    made = _compiles(monkeypatch)
    fake.kernels["_scale"] = scale_impl
    x = kaio.to_device(np.arange(32, dtype=np.float32))
    y = kaio.device_array(32, kaio.f32)
    want = np.arange(32, dtype=np.float32)
    run = _scale[(1,), (32,), 1024]
    for a in (1.0, 2.0, 3.0):
        run(a, x, y)
    assert run.bound.fast.__code__.co_filename == "<kaio planned launch>" and len(lookups) == 1
    assert [launch[3:] for launch in fake.launches[-2:]] == [(1024, None)] * 2
    np.testing.assert_array_equal(y.to_host(), 3.0 * want)
    s = kaio.Stream()
    on_s = _scale[(1,), (32,), 0, s]
    for a in (4.0, 5.0):
        on_s(a, x, y)
    assert fake.launches[-1][3:] == (0, s.handle) and len(lookups) == 2
    _scale.on(s)(6.0, x, y)  # kaio's launch shape: a plan of its own (whose launcher is made
    _scale.on(s)(6.5, x, y)  # at its second launch, and its function compiled at its third)
    _scale.on(s)(6.75, x, y)
    compiled = len(made)
    for a in (7.0, 8.0):  # a new configuration each time, with that plan: nothing compiled
        _scale.on(s)(a, x, y)
    assert len(made) == compiled and fake.launches[-1][4] == s.handle
    np.testing.assert_array_equal(y.to_host(), 8.0 * want)
    big = _scale[(1,), (32,), 60 * 1024]
    for a in (1.5, 2.5):
        big(a, x, y)
    assert big.bound.fast.__code__.co_filename != "<kaio planned launch>"
    assert fake.launches[-1][3] == 60 * 1024 and 60 * 1024 in fake.func_attrs.values()
    np.testing.assert_array_equal(y.to_host(), 2.5 * want)


def test_cuda_fast_path_follows_the_backend_settings_and_context(fake, lookups, monkeypatch):  # noqa: F811
    """The compiled launch checks the current backend and settings itself (inline, without
    the calls): another backend or new settings leave it for the checked path. Its thread's
    context is made current on a thread's first launch, and again where another context was
    made current since (once the process has more than one)."""
    pytest.importorskip("kaio.backends.ptx")
    from kaio import backends
    from kaio.backends import cuda_driver
    fake.kernels["_scale"] = scale_impl
    x = kaio.to_device(np.arange(32, dtype=np.float32))
    y = kaio.device_array(32, kaio.f32)
    want = np.arange(32, dtype=np.float32)
    run = _scale[(1,), (32,)]
    run(1.0, x, y)
    run(2.0, x, y)
    assert len(lookups) == 1 and len(fake.launches) == 2
    be = kaio.get_backend()
    backends.set_backend("reference")  # the CUDA plan must not launch: the reference one runs
    try:
        with pytest.raises(TypeError, match="device array of the cuda backend|another backend|cuda"):
            run(3.0, x, y)
    finally:
        backends.set_backend("cuda")
    assert len(fake.launches) == 2
    config.reload()  # new settings: checked again (a lookup), then the fast path once more
    run(4.0, x, y)
    run(5.0, x, y)
    assert len(lookups) == 3 and len(fake.launches) == 4
    made = cuda_driver.contexts_made[0]
    try:
        cuda_driver.contexts_made[0] = 2
        cuda_driver.current_context.current = other = object()  # another context made current
        run(6.0, x, y)
        assert cuda_driver.current_context.current is be.ctx is not other
        cuda_driver.contexts_made[0] = 1  # one context: a thread's first launch makes it current
        seen = []

        def other_thread():
            run(7.0, x, y)
            seen.append(cuda_driver.current_context.current)
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    finally:
        cuda_driver.contexts_made[0] = made
    assert seen == [be.ctx] and len(lookups) == 3 and len(fake.launches) == 6
    np.testing.assert_array_equal(y.to_host(), 7.0 * want)


def test_cuda_fast_path_of_a_kernel_without_arguments(fake, lookups):  # noqa: F811
    pytest.importorskip("kaio.backends.ptx")
    fake.kernels["_nothing"] = lambda fake, params, grid, block: None
    run = _nothing[2, 32]
    for _ in range(3):
        run()
    assert len(lookups) == 1 and run.bound.fast.__code__.co_filename == "<kaio planned launch>"
    with pytest.raises(TypeError, match="argument"):
        run(1.0)
    assert len(fake.launches) == 3 and fake.launches[-1][1:3] == ((2, 1, 1), (32, 1, 1))


def test_a_configuration_indexed_in_a_loop_is_found_by_identity(reference):
    """``k[grid, block]`` written in a loop indexes with one constant tuple: found by identity
    (no hashing), and only where it was a plain configuration; any other object is looked up
    and checked as ever."""
    _forget(saxpy)
    x, y = _dev(8, 1.0), _dev(8, 0.0)
    config = (1, 8)
    run = saxpy[config]
    assert saxpy._last_config == (config, run) and saxpy[config] is run
    assert (run.kernel, run.grid, run.block, run.shared, run.stream) == (saxpy, (1, 1, 1), (8, 1, 1), 0, None)
    assert saxpy[tuple([1, 8])] is run  # an equal tuple: the same configuration, by hash
    with pytest.raises(kaio.LaunchError, match="grid must be an int"):
        saxpy[True, 8]
    s = kaio.Stream()
    streamed = (1, 8, 0, s)
    assert saxpy[streamed] is not saxpy[streamed]  # not kept: it would keep the stream alive
    assert saxpy._last_config[0] is not streamed
    for _ in range(3):
        saxpy[config](1.0, x, y)
    np.testing.assert_array_equal(y.to_host(), np.full(8, 3.0, np.float32))


def test_the_guard_compares_each_arrays_launch_key(reference, lookups):
    """A plan's guard compares an array's (runtime, address, shape, dtype) as one tuple
    (``DeviceArray._launch_key``): another array object over the same memory with the same
    shape and dtype takes the fast path; freeing an array changes its key, so its plans miss."""
    from kaio.backends.runtime import DeviceArray
    _forget(saxpy)
    x, y = _dev(8, 1.0), _dev(8, 0.0)
    run = saxpy[(1,), (8,)]
    run(1.0, x, y)
    same = DeviceArray(y.shape, y.dtype, runtime=y.runtime, _ptr=y.ptr, _owner=y)
    assert same._launch_key == y._launch_key and same._launch_key is not y._launch_key
    run(1.0, x, same)
    assert lookups == ["saxpy"]
    np.testing.assert_array_equal(y.to_host(), np.full(8, 2.0, np.float32))
    z = _dev(8, 0.0)
    run(1.0, x, z)
    z.free()
    assert z._launch_key == (z.runtime, 0, (8,), np.dtype(np.float32))
    with pytest.raises(Exception, match="freed|released|null|0x0"):
        run(1.0, x, z)
    assert lookups == ["saxpy"] * 3


def test_cuda_fast_path_writes_every_kind_of_scalar(fake, lookups):  # noqa: F811
    """The compiled launch writes f16 (packed with struct), bf16 (its bits through a view),
    bool and i8 scalars into its buffer: each launch's values reach the kernel."""
    pytest.importorskip("kaio.backends.ptx")
    fake.kernels["_mixed"] = _mixed_impl
    y = kaio.device_array(64, kaio.f32)
    run = _mixed[(2,), (32,)]
    for a, b, c, d in [(0.5, 2.0, True, -3), (1.5, -0.25, False, 7), (-2.0, 8.0, True, 0)]:
        run(a, b, c, d, y)
        np.testing.assert_array_equal(y.to_host(), np.full(64, a + b + d + c, np.float32))
    assert len(lookups) == 1 and run.bound.fast.__code__.co_filename == "<kaio planned launch>"
    with pytest.raises(ValueError, match="range"):
        run(0.5, 2.0, True, 300, y)   # out of i8's range: the checked path refuses it


@pytest.mark.gpu
@pytest.mark.cuda
def test_repeated_launches_on_a_gpu(monkeypatch):
    """On an NVIDIA GPU through cuda.bindings: the compiled launch on the default stream (passed
    as None) and on a stream, every kind of scalar changing per launch, and from a new thread
    (its first launch makes the context current)."""
    from kaio import backends
    monkeypatch.setattr(backends, "_current", backends._current)
    kaio.set_backend("cuda")
    _mixed._forget_plans()
    y = kaio.device_array(64, kaio.f32)
    s = kaio.Stream()
    runs = [_mixed[(2,), (32,)], _mixed[(2,), (32,), 0, s]]
    for step, (a, b, c, d) in enumerate([(0.5, 2.0, True, -3), (1.5, -0.25, False, 7)] * 2):
        run = runs[step % 2]
        run(a, b, c, d, y)
        s.synchronize()
        kaio.synchronize()
        np.testing.assert_array_equal(y.to_host(), np.full(64, a + b + d + c, np.float32))
    assert all(r.bound.fast.__code__.co_filename == "<kaio planned launch>" for r in runs)
    seen = []

    def other_thread():
        try:
            runs[0](4.0, 1.0, False, 1, y)
            kaio.synchronize()
            seen.append(y.to_host()[0])
        except Exception as e:  # reported by the main thread
            seen.append(e)
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert seen == [6.0]


def test_a_first_launch_compiles_only_the_function_the_next_calls_use(fake, monkeypatch):  # noqa: F811
    """k(...) compiles only the guarded function its repeated calls launch through (at the
    signature's second launch: the first takes the full path); Backend.launch's own function is
    compiled once, when it first runs the plan's launcher (a compile() is a quarter
    millisecond)."""
    pytest.importorskip("kaio.backends.ptx")
    from kaio.backends import cuda_planned
    compiled_heads = []
    real = cuda_planned.PlannedLaunch._compile

    def counting(env, lines):
        compiled_heads.append(lines[0])
        return real(env, lines)
    monkeypatch.setattr(cuda_planned.PlannedLaunch, "_compile", staticmethod(counting))
    fake.kernels["_scale"] = scale_impl
    _forget(_scale)
    x, y = kaio.to_device(np.arange(32, dtype=np.float32)), kaio.device_array(32, kaio.f32)
    for step in range(3):
        _scale(float(step + 1), x, y)
        np.testing.assert_array_equal(y.to_host(), np.float32(step + 1) * x.to_host())
    assert compiled_heads == ["def run(args, stream):"]       # the guarded function only
    be, c = kaio.get_backend(), _scale.compile()
    compiled_heads.clear()
    for step in range(3):
        be.launch(c, (1,), (32,), [0.5 * step, x, y])
        np.testing.assert_array_equal(y.to_host(), np.float32(0.5 * step) * x.to_host())
    assert compiled_heads == ["def run(args, shared_bytes, stream):"]   # once


def test_a_plans_fast_function_is_compiled_at_its_second_launch(fake, lookups, monkeypatch):  # noqa: F811
    """kaio.launch._second_launch: a signature's first launch (a fresh process's first launch
    of a kernel) compiles nothing; its second launch, once the plan's guard passed, compiles
    the fast function, puts it in its place and launches through it; another signature, other
    settings or an argument the plan was not checked for compile nothing and take the checked
    path."""
    pytest.importorskip("kaio.backends.ptx")
    made = _compiles(monkeypatch)
    fake.kernels["_scale"] = scale_impl
    _forget(_scale)
    x, y = kaio.to_device(np.arange(32, dtype=np.float32)), kaio.device_array(32, kaio.f32)
    z = kaio.device_array(32, kaio.f32)
    run = _scale[(1,), (32,)]
    run(1.0, x, y)
    assert made == [] and run.bound.fast.__code__.co_filename != "<kaio planned launch>"
    with pytest.raises(ValueError, match="overflows"):
        run(1e39, x, y)             # outside the plan's checked range: refused, nothing compiled
    run(2.0, x, z)                  # another signature: checked, its own plan, nothing compiled
    assert made == [] and len(lookups) == 3
    np.testing.assert_array_equal(z.to_host(), 2.0 * x.to_host())
    run(3.0, x, y)                  # y's plan's second launch: through the retry, compiled now
    assert made == ["def run(args, stream):"] and len(lookups) == 3
    assert run.bound.recent[1][2].__code__.co_filename == "<kaio planned launch>"
    np.testing.assert_array_equal(y.to_host(), 3.0 * x.to_host())
    for a in (4.0, 5.0):            # from now on the compiled function, compiled once
        run(a, x, y)
    assert len(made) == 1 and len(lookups) == 3 and len(fake.launches) == 5
    np.testing.assert_array_equal(y.to_host(), 5.0 * x.to_host())
    config.reload()                 # new settings: the kept plans miss, the checked path runs
    run(6.0, x, z)                  # (z's plan's second launch: its launcher, nothing compiled)
    assert len(made) == 1 and len(lookups) == 4
    np.testing.assert_array_equal(z.to_host(), 6.0 * x.to_host())
