"""Automatic coarsening (kaio.frontend.coarsen): when kaio picks the launch shape of an
elementwise kernel, its default Regions get k elements per thread; results are unchanged."""
from __future__ import annotations

import re

import numpy as np
import pytest

import kaio
from kaio import f16, f32, f64
from kaio.backends.targets import emit
from kaio.regions import Coarsened, Elementwise, blocked


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


@kaio.kernel
def scale64(x: kaio.In[f64], y: kaio.Out[f64]):
    for i in y.owned():
        y[i] = 2.0 * x[i]


@kaio.kernel
def halve16(x: kaio.In[f16], y: kaio.Out[f16]):
    for i in y.owned():
        y[i] = f16(f32(x[i]) * 0.5)


@kaio.kernel
def clamp_exp(x: kaio.In[f32], y: kaio.Out[f32], lo: f32):
    for i in y.owned():
        v = kaio.math.exp(x[i])
        for j in kaio.static_range(2):
            v = max(v, lo + f32(j))
        y[i] = v


@kaio.kernel
def uses_thread_id(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[i] + f32(kaio.thread_idx.x)


@kaio.kernel
def uses_global_id(x: kaio.In[f32], y: kaio.Out[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[g] = x[g]


@kaio.func
def twice(v):
    return v + v


@kaio.kernel
def calls_func(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = twice(x[i])


@kaio.func
def four_times(v):          # calls another device function, which is read too
    return twice(twice(v))


@kaio.kernel
def calls_nested_func(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = four_times(x[i])


@kaio.func
def plus_lane(v):
    return v + f32(kaio.lane_id())


@kaio.func
def via_plus_lane(v):
    return plus_lane(v) * 2.0


@kaio.kernel
def calls_thread_dependent_func(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = via_plus_lane(x[i])


@kaio.func
def bits_plus_one(v):
    return kaio.bitcast(kaio.bitcast(v, kaio.i32) + 1, f32)


@kaio.kernel
def calls_bitcast_func(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = bits_plus_one(x[i])


@kaio.kernel
def explicit_partition(x: kaio.In[f32], y: kaio.Out[f32, blocked(2)]):
    for i in y.owned():
        y[i] = x[i]


@kaio.kernel
def two_d(x: kaio.In[f32, 2], y: kaio.Out[f32, 2]):
    for r, c in y.owned():
        y[r, c] = x[r, c]


@kaio.kernel(disabled_passes=("coarsen",))
def switched_off(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[i]


@pytest.mark.parametrize("kernel, k", [(saxpy, 8), (clamp_exp, 8), (halve16, 16), (calls_func, 8),
                                       (calls_nested_func, 8), (calls_bitcast_func, 8)])
def test_elementwise_kernels_are_coarsened(kernel, k):
    assert kernel.coarsening() == k
    part = kernel.specialize_ir({}, coarsen=True).params[-1 if kernel is not clamp_exp else 1].partition
    assert part == Coarsened(k)
    # an explicit launch keeps the partition the kernel was written against
    assert kernel.specialize_ir({}).params[-1 if kernel is not clamp_exp else 1].partition == Elementwise()


@pytest.mark.parametrize("kernel", [uses_thread_id, uses_global_id, calls_thread_dependent_func,
                                    explicit_partition, two_d, switched_off, scale64])
def test_kernels_that_may_depend_on_their_thread_are_not(kernel):
    assert kernel.coarsening() is None


@pytest.mark.parametrize("n", [1, 7, 8, 1000, 4099])
def test_coarsened_and_explicit_launches_agree_with_numpy(backend, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y0 = rng.standard_normal(n).astype(np.float32)
    want = np.float32(2.5) * x + y0
    y = y0.copy()
    saxpy(2.5, x, y)                                   # kaio's shape: coarsened
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    y = y0.copy()
    saxpy[(-(-n // 128),), (128,)](2.5, x, y)          # the user's shape: one element per thread
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_device_function_kernels_coarsened_agree_with_numpy(backend):
    """Kernels whose @kaio.func helpers are elementwise get kaio's coarsening, same results."""
    x = np.random.default_rng(3).standard_normal(1003).astype(np.float32)
    y = np.zeros_like(x)
    calls_nested_func(x, y)
    np.testing.assert_array_equal(y, 4 * x)
    calls_bitcast_func(x, y)
    np.testing.assert_array_equal(y, (x.view(np.int32) + 1).view(np.float32))


def test_coarsened_launch_uses_k_times_fewer_threads():
    part = Coarsened(8)
    grid, block = part.launch_shape((1 << 20,))
    assert grid[0] * block[0] == (1 << 20) // 8
    assert Elementwise().launch_shape((1 << 20,))[0][0] * 256 == 1 << 20


@pytest.mark.parametrize("kernel, loads", [(saxpy, 4), (clamp_exp, 2), (calls_nested_func, 2)])
def test_coarsened_ptx_moves_16_bytes_per_access(kernel, loads):
    """Even a body of ~100 ops after math expansion (exp) is copied k times in full tiles."""
    for target in ("sm_90", "nvptx64-sm_90"):
        ptx = emit(kernel.specialize_ir({}, coarsen=True), "ptx", target, kernel.options)
        assert len(re.findall(r"ld\.global(\.nc)?\.v4\.(f|b)32", ptx)) == loads, target
        assert len(re.findall(r"st\.global\.v4\.(f|b)32", ptx)) == 2, target
        assert ".v4" not in emit(kernel.specialize_ir({}), "ptx", target, kernel.options)


def test_coarsened_f16_kernel_moves_two_16_byte_chunks_per_buffer():
    """k = 16 2-byte elements per thread: exactly two v4 loads of x and two v4 stores of y."""
    for target in ("sm_90", "nvptx64-sm_90"):
        ptx = emit(halve16.specialize_ir({}, coarsen=True), "ptx", target, halve16.options)
        assert len(re.findall(r"ld\.global(\.nc)?\.v4\.b32", ptx)) == 2, target
        assert len(re.findall(r"st\.global\.v4\.b32", ptx)) == 2, target
        assert ".v4" not in emit(halve16.specialize_ir({}), "ptx", target, halve16.options)


@pytest.mark.parametrize("n", [1, 7, 8, 1000, 4099])
def test_coarsened_f16_launch_agrees_with_numpy(backend, n):
    assert halve16.coarsening() == 16                  # kaio's shape: 16 elements per thread
    x = np.random.default_rng(n).standard_normal(n).astype(np.float16)
    y = np.zeros(n, np.float16)
    halve16(x, y)
    assert y.tobytes() == (x.astype(np.float32) * np.float32(0.5)).astype(np.float16).tobytes()


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_definition_time_names_in_annotations_do_not_block_coarsening(dt):
    """kaio.kernels.ml's silu_gate is made by a factory whose ``dt`` appears only in an
    annotation (evaluated at definition, so no closure variable of the kernel)."""
    from kaio.kernels.ml.elementwise import silu_gate_kernel
    kernel = silu_gate_kernel(dt)
    assert kernel.coarsening() == 16
    ptx = emit(kernel.specialize_ir({}, coarsen=True), "ptx", "sm_90", kernel.options)
    assert len(re.findall(r"ld\.global\.nc\.v4\.b32", ptx)) == 4       # x and gate, 32 bytes each
    assert len(re.findall(r"st\.global\.v4\.b32", ptx)) == 2


@kaio.kernel
def shifted(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i + 1] = x[i]


def test_a_racy_map_is_refused_under_the_partition_it_was_written_for():
    with pytest.raises(kaio.CompileError, match=r"under the elementwise\(\) partition"):
        shifted(np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_bitcast_of_a_uniform_value_stays_uniform():
    """A bitcast of a scalar (here 2^n built by a shift, inside an exp expansion) must not turn
    into a one-element array: the partial tile of a coarsened GELU then stored the wrong lane."""
    from kaio import semantics
    got = semantics.bitcast(kaio.i32, f32, np.int32(0x3F800000))
    assert np.ndim(got) == 0 and got == np.float32(1.0)


@pytest.mark.parametrize("n", [87, 700, 1003])
def test_library_gelu_on_sizes_that_leave_a_partial_tile(n):
    from kaio.kernels.ml import elementwise
    x = np.linspace(-4, 4, n).astype(np.float32)
    for approximate, ref in (("none", elementwise.gelu_exact_ref), ("tanh", elementwise.gelu_tanh_ref)):
        np.testing.assert_allclose(elementwise.gelu(x, approximate=approximate), ref(x),
                                   rtol=2e-6, atol=2e-6)
