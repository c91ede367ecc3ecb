"""Argument and launch checks: every bad call fails before anything is copied or launched,
with a message naming kernel, parameter, expected and got; the user's arrays stay untouched."""
from __future__ import annotations

import numpy as np
import pytest

import kaio
from kaio import f16, f32, i8, i32, u32


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


@kaio.kernel
def scale_u8(k: u32, n: i8, y: kaio.Out[f32, 2]):
    for i, j in y.owned():
        y[i, j] = 1.0


@kaio.kernel
def counter(c: kaio.Atomic[i32]):
    kaio.atomic_add(c, 0, 1)


@kaio.kernel
def with_const(n: kaio.Const[int], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = n


def _arrays(n=100):
    return np.arange(n, dtype=np.float32), np.ones(n, np.float32)


def _assert_untouched(y, n=100):
    np.testing.assert_array_equal(y, np.ones(n, np.float32))


def test_wrong_array_dtype_names_kernel_param_expected_got():
    x, y = _arrays()
    with pytest.raises(TypeError) as e:
        saxpy(2.0, x.astype(np.float64), y)
    msg = str(e.value)
    assert "saxpy" in msg and "'x'" in msg and "f32" in msg and "float64" in msg
    _assert_untouched(y)


def test_wrong_ndim():
    x, y = _arrays()
    with pytest.raises(ValueError, match=r"saxpy.*'y'.*1-d.*\(10, 10\)"):
        saxpy(2.0, x, y.reshape(10, 10))


def test_non_contiguous_rejected():
    x = np.arange(200, dtype=np.float32)[::2]
    y = np.ones(100, np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        saxpy(2.0, x, y)
    _assert_untouched(y)


def test_read_only_array_as_region():
    x, y = _arrays()
    y.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        saxpy(2.0, x, y)


def test_read_only_array_as_in_is_fine_for_checks():
    from kaio.backends.launch_checks import check_buffer
    x, _ = _arrays()
    x.setflags(write=False)
    t = saxpy.specialize_ir().args[1].type
    assert check_buffer("saxpy", "x", t, x) == x.shape


def test_scalar_type_and_range():
    x, y = _arrays()
    with pytest.raises(TypeError, match="'a' expects a f32 scalar, got str"):
        saxpy("2", x, y)
    with pytest.raises(ValueError, match=r"'k' is u32 \(range 0\.\.4294967295\) but got -1"):
        scale_u8(-1, 0, np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match=r"'n' is i8 .* got 300"):
        scale_u8(1, 300, np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="'n' expects a i8 scalar, got float"):
        scale_u8(1, 1.5, np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="overflows"):
        saxpy(1e300, x, y)
    _assert_untouched(y)


def test_missing_and_extra_arguments():
    x, y = _arrays()
    with pytest.raises(TypeError, match="missing argument for parameter 'y'"):
        saxpy(2.0, x)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        saxpy(2.0, x, y, y)
    with pytest.raises(TypeError, match="has no parameter 'z'"):
        saxpy(2.0, x, y=y, z=1)
    with pytest.raises(TypeError, match="given twice"):
        saxpy(2.0, x, y, a=3.0)


def test_const_parameter_type_checked():
    with pytest.raises(TypeError, match="constant parameter 'n' expects int, got float"):
        with_const(2.5, np.zeros(4, np.float32))


def test_aliasing_writable_buffers_rejected():
    y = np.ones(100, np.float32)
    with pytest.raises(ValueError, match="share memory"):
        saxpy(2.0, y, y)
    _assert_untouched(y)


def test_not_an_array():
    with pytest.raises(TypeError, match="expects a numpy array or a device array, got list"):
        saxpy(2.0, [1.0, 2.0], np.ones(2, np.float32))


def test_launch_config_validation():
    x, y = _arrays()
    with pytest.raises(kaio.LaunchError, match="1024"):
        saxpy[(1,), (2048,)](2.0, x, y)
    with pytest.raises(kaio.LaunchError, match=">= 1"):
        saxpy[(0,), (128,)](2.0, x, y)
    with pytest.raises(kaio.LaunchError, match="tuple of 1 to 3 ints"):
        saxpy[(1, 1, 1, 1), 128](2.0, x, y)
    with pytest.raises(kaio.LaunchError, match="kernel\\[grid, block\\]"):
        saxpy[4](2.0, x, y)
    with pytest.raises(kaio.LaunchError, match="shared_bytes"):
        saxpy[1, 128, -1](2.0, x, y)
    _assert_untouched(y)


def test_launch_too_small_for_partition_names_buffer_and_shape():
    x, y = _arrays()
    with pytest.raises(kaio.LaunchError) as e:
        saxpy[(1,), (64,)](2.0, x, y)
    msg = str(e.value)
    assert "'y'" in msg and "100 elements" in msg and "64 threads" in msg
    _assert_untouched(y)


def test_explicit_launch_needed_without_region():
    c = np.zeros(1, np.int32)
    with pytest.raises(kaio.LaunchError, match=r"launch it explicitly: counter\[grid, block\]"):
        counter(c)


def test_annotation_errors_are_compile_errors():
    with pytest.raises(kaio.CompileError, match="parameter 'x' has no annotation"):
        @kaio.kernel
        def bad(x):
            pass
    with pytest.raises(TypeError, match="element dtype first"):
        kaio.In[3]
    with pytest.raises(TypeError, match="only Region/Out buffers take a partition"):
        from kaio.regions import elementwise
        kaio.In[f32, elementwise()]


def test_default_launch_shape_from_partition():
    from kaio.regions import Elementwise
    grid, block = Elementwise().launch_shape((1000,))
    assert block == (256, 1, 1) and grid == (4, 1, 1)
    grid, block = Elementwise().launch_shape((3, 1000))
    assert grid[0] * block[0] >= 3000


def test_dtype_promotion_rules():
    from kaio.dtypes import bf16, f64, i64, promote, u8
    assert promote(i32, u32) is u32
    assert promote(i64, u32) is i64
    assert promote(u8, i8) is u8  # equal widths: the unsigned one, as C does for int+unsigned
    assert promote(f16, bf16) is f32
    assert promote(f16, i32) is f16
    assert promote(f32, f64) is f64


def test_compile_cache_never_serves_another_backends_result():
    """Compiled kernels are cached per backend; an entry left by a freed backend whose id a new
    backend reuses (simulated here) must not be returned for the new one."""
    from kaio.backends.reference import ReferenceBackend
    old, new = ReferenceBackend(), ReferenceBackend()
    stale = saxpy.compile(old)
    saxpy._compiled[(id(new), ())] = (old, stale)     # what an id reuse would look like
    fresh = saxpy.compile(new)
    assert fresh is not stale and saxpy.compile(new) is fresh
    assert saxpy.compile(old) is stale
