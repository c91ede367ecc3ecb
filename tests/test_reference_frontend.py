"""The reference backend through ``@kaio.kernel`` (frontend + passes + interpreter)."""
from __future__ import annotations

import numpy as np
import pytest

import kaio
from kaio import f32, i32
from kaio.backends.reference import DivergentBarrierError, OutOfBoundsError


@pytest.fixture(autouse=True)
def reference_backend(monkeypatch):
    from kaio import backends as be
    monkeypatch.setenv("KAIO_SANITIZE", "1")
    monkeypatch.setattr(be, "_instances", {})  # a fresh instance sees the environment
    previous = be._current
    kaio.set_backend("reference")
    yield
    be._current = previous


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


def test_saxpy_end_to_end():
    rng = np.random.default_rng(0)
    x = rng.random(3000, dtype=np.float32)
    y = rng.random(3000, dtype=np.float32)
    want = np.float32(2.0) * x + y
    saxpy(2.0, x, y)
    np.testing.assert_array_equal(y, want)


@kaio.kernel
def block_sums(x: kaio.In[f32], out: kaio.Raw[f32]):
    s = kaio.block_sum(x[kaio.global_id(0)])
    if kaio.thread_idx.x == 0:
        out[kaio.block_idx.x] = s


def test_block_sum_uses_the_fixed_tree():
    x = np.random.default_rng(1).standard_normal(256 * 6).astype(np.float32)
    out = np.zeros(6, np.float32)
    block_sums[6, 256](x, out)
    from test_passes import tree_reduce  # the documented order, modelled independently
    want = [tree_reduce(row, lambda a, b: np.float32(a) + np.float32(b)) for row in x.reshape(6, 256)]
    np.testing.assert_array_equal(out, np.array(want, np.float32))


@kaio.kernel
def histogram(k: kaio.In[i32], h: kaio.Atomic[i32]):
    i = kaio.global_id(0)
    if i < k.shape[0]:
        kaio.atomic_add(h, k[i], 1)


def test_atomic_histogram_end_to_end():
    keys = np.random.default_rng(2).integers(0, 10, 5000).astype(np.int32)
    h = np.zeros(10, np.int32)
    histogram[20, 256](keys, h)
    np.testing.assert_array_equal(h, np.bincount(keys, minlength=10))


@kaio.kernel
def reverse_in_block(x: kaio.In[f32], y: kaio.Raw[f32]):
    sh = kaio.shared_array(f32, 128)
    t = kaio.thread_idx.x
    sh[t] = x[t]
    kaio.sync()
    y[t] = sh[127 - t]


@kaio.kernel
def reverse_no_sync(x: kaio.In[f32], y: kaio.Raw[f32]):
    sh = kaio.shared_array(f32, 128)
    t = kaio.thread_idx.x
    sh[t] = x[t]
    y[t] = sh[127 - t]


def test_shared_memory_with_and_without_barrier():
    x = np.arange(128, dtype=np.float32)
    y = np.zeros(128, np.float32)
    reverse_in_block[1, 128](x, y)
    np.testing.assert_array_equal(y, x[::-1])
    y[:] = 0
    # the static checker or, failing that, the sanitizer must reject the missing barrier
    with pytest.raises((kaio.RaceError, kaio.CompileError)) as ei:
        reverse_no_sync[1, 128](x, y)
    assert "kaio.sync()" in str(ei.value)
    assert (y == 0).all()


@kaio.kernel
def racy_neighbour(y: kaio.Raw[f32]):
    i = kaio.global_id(0)
    if i + 1 < y.shape[0]:
        y[i + 1] = 1.0
        y[i] = 2.0


def test_raw_neighbour_race_names_source_lines():
    with pytest.raises(kaio.RaceError) as ei:
        racy_neighbour[1, 64](np.zeros(64, np.float32))
    e = ei.value
    assert e.kind == "write/write" and e.threads == (0, 1)
    assert "y[i + 1] = 1.0" in str(e) and "y[i] = 2.0" in str(e)
    assert e.lines[1] == e.lines[0] + 1


@kaio.kernel
def sync_in_branch(y: kaio.Raw[f32]):
    t = kaio.thread_idx.x
    if t < 16:
        kaio.sync()
    y[t] = 1.0


def test_divergent_sync_is_rejected():
    """Statically (CompileError) or at run time (DivergentBarrierError)."""
    y = np.zeros(32, np.float32)
    with pytest.raises((DivergentBarrierError, kaio.CompileError)) as ei:
        sync_in_branch[1, 32](y)
    assert "kaio.sync()" in str(ei.value) or "divergent" in str(ei.value)
    assert (y == 0).all()


@kaio.kernel
def gather(x: kaio.In[f32], idx: kaio.In[i32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[idx[i]]


def test_out_of_bounds_gather_end_to_end():
    x = np.ones(4, np.float32)
    y = np.zeros(3, np.float32)
    with pytest.raises(OutOfBoundsError) as ei:
        gather(x, np.array([0, 9, 1], np.int32), y)
    assert ei.value.buffer == "x" and ei.value.index == (9,)
    assert "y[i] = x[idx[i]]" in str(ei.value)
    assert (y == 0).all()


@kaio.kernel
def loop_vars_after_loops(n: i32, out: kaio.Raw[i32]):
    i = -7
    for i in range(n):  # noqa: B007 (the value after the loop is the point)
        pass
    out[0] = i
    j = 100
    for j in range(2, n, 3):
        if j > 10:
            break
    out[1] = j
    k = 0
    for k in range(n):
        k = k * 2
    out[2] = k
    m = 5
    for m in range(n, 0, -2):  # noqa: B007 (the value after the loop is the point)
        pass
    out[3] = m


def _python_loop_vars(n):
    i = -7
    for i in range(n):  # noqa: B007 (the value after the loop is the point)
        pass
    j = 100
    for j in range(2, n, 3):
        if j > 10:
            break
    k = 0
    for k in range(n):
        k = k * 2
    m = 5
    for m in range(n, 0, -2):  # noqa: B007 (the value after the loop is the point)
        pass
    return [i, j, k, m]


@pytest.mark.parametrize("n", [0, 1, 5, 20])
def test_range_loop_variable_keeps_its_last_value_like_python(backend, n):
    """Bound before the loop, a range variable holds its last value after it (the old value when
    the loop does not run, the value at `break`, a value the body assigned to it)."""
    out = np.zeros(4, np.int32)
    loop_vars_after_loops[1, 1](n, out)
    assert out.tolist() == _python_loop_vars(n)


@kaio.kernel
def loop_var_rebinds_other_kinds(n: i32, out: kaio.Raw[f32]):
    i = 2.5                      # a float before the loop: the loop rebinds the name, as Python
    for i in range(n):
        out[i] = f32(i)
    out[n] = 7.0


def test_loop_variable_rebinding_a_float_name_still_compiles(backend):
    out = np.zeros(4, np.float32)
    loop_var_rebinds_other_kinds[1, 1](3, out)
    assert out.tolist() == [0.0, 1.0, 2.0, 7.0]
