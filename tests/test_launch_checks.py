"""The one checked launch path (kaio.backends.launch_checks): every entry that launches a kernel
refuses a bad launch before anything is copied or launched -- thread ids past i32, buffers shorter
than the kernel's accesses reach, overlapping device arrays / DLPack views /
``__cuda_array_interface__`` objects, partitions' launch conditions -- naming the kernel and what
is wrong."""
from __future__ import annotations

import numpy as np
import pytest

import kaio
from kaio import f32, i32
from kaio.backends import get_backend
from kaio.backends.launch_checks import check_launch
from kaio.regions import blocked, grid_stride, rows, rows_per_block, tiles


@pytest.fixture
def counted():
    """The copy counters, reset; a test asserts nothing was copied."""
    stats = kaio.transfer_stats()
    stats.reset()
    return stats


NOTHING_COPIED = {"htod_copies": 0, "htod_bytes": 0, "dtoh_copies": 0, "dtoh_bytes": 0}


# --- kernels -----------------------------------------------------------------------------------
@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


@kaio.kernel
def gather(idx: kaio.In[i32], x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[idx[i]]        # an index loaded from memory: no bound at compile time


@kaio.kernel
def left_neighbour(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[i - 1]         # thread 0 reads x[-1]


@kaio.kernel
def prefix(n: i32, x: kaio.In[f32], y: kaio.Region[f32, 1]):
    for i in y.owned():
        acc = 0.0
        for j in range(n):
            acc += x[j]         # reaches x[n - 1]: a bound over a scalar argument
        y[i] = acc


@kaio.kernel
def row_shift(x: kaio.In[f32, 2], y: kaio.Out[f32, rows()]):
    for r, c in y.owned():
        y[r, c] = x[r, c + 1]   # the column past the row's end in x, unless x is wider


@kaio.kernel
def first_of(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        if i == 0:
            y[i] = x[0]         # a constant index: runs only when y has elements


@kaio.kernel
def fill(y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = 1.0


@kaio.kernel
def fill_blocked(y: kaio.Out[f32, blocked(1)]):
    for i in y.owned():
        y[i] = 1.0


@kaio.kernel
def fill_grid_stride(y: kaio.Out[f32, grid_stride()]):
    for i in y.owned():
        y[i] = 1.0


@kaio.kernel
def fill_rows(y: kaio.Out[f32, rows()]):
    for r, c in y.owned():
        y[r, c] = 1.0


@kaio.kernel
def fill_rows_per_block(y: kaio.Out[f32, rows_per_block(1)]):
    for r, c in y.owned():
        y[r, c] = 1.0


@kaio.kernel
def fill_tiles(y: kaio.Out[f32, tiles(1, 1)]):
    for r, c in y.owned():
        y[r, c] = 1.0


# --- thread ids past i32 -------------------------------------------------------------------------
ONE_D = ((715827883,), (3,))                 # 2**31 + 1 threads, the fewest a launch can be refused at
TWO_D = ((715827883, 3), (1, 1))
ALL_1D, ALL_2D = ((2**21,), (1024,)), ((2**16, 2**15), (1, 1))   # 2**31 threads: the most allowed
#: (kernel, buffer shape, smallest launch refused, largest launch allowed). blocked and
#: grid_stride compute ``g*k + k`` and ``i + G`` in i32, so their own limit is one thread lower
PER_PARTITION = [
    (fill, (8,), ONE_D, ALL_1D),
    (fill_blocked, (8,), ONE_D, ((2**31 - 1,), (1,))),
    (fill_grid_stride, (1,), ONE_D, ((2**31 - 1,), (1,))),
    (fill_rows, (4, 4), ONE_D, ALL_1D),
    (fill_rows_per_block, (4, 4), TWO_D, ALL_2D),
    (fill_tiles, (3, 4), TWO_D, ALL_2D),
]


@pytest.mark.parametrize("kernel, shape, refused, allowed", PER_PARTITION,
                         ids=[k.name for k, *_ in PER_PARTITION])
def test_thread_ids_past_i32_refused_at_the_boundary_on_every_partition(kernel, shape, refused,
                                                                       allowed, backend, counted):
    y = np.zeros(shape, np.float32)
    with pytest.raises(kaio.LaunchError) as e:
        kernel[refused](y)
    msg = str(e.value)
    assert f"kernel '{kernel.name}'" in msg and "2147483649 threads" in msg and "2**31" in msg
    assert counted.snapshot() == NOTHING_COPIED and not y.any()
    # the largest launch passes every check (it is not run: 2**31 threads)
    compiled = kernel.compile(get_backend())
    grid, block, _ = check_launch(compiled, *allowed, [y])
    assert grid[0] * grid[1] * block[0] * block[1] == (2**31 if allowed in (ALL_1D, ALL_2D) else 2**31 - 1)


def test_the_issue_launch_is_refused(reference):
    """grid=(2**22 + 1,), block=(1024,): thread (2**22, 5) would compute global id 5 in i32."""
    y = np.zeros(16, np.float32)
    with pytest.raises(kaio.LaunchError, match=r"kernel 'fill'.*4294968320 threads.*2\*\*31"):
        fill[(2**22 + 1,), (1024,)](y)


# --- every entry checks ----------------------------------------------------------------------------
def _short_x():
    return np.ones(3, np.float32), np.ones(8, np.float32)


def test_call_refuses_a_short_buffer_before_any_copy(backend, counted):
    x, y = _short_x()
    with pytest.raises(kaio.LaunchError) as e:
        saxpy(2.0, x, y)
    msg = str(e.value)
    assert "kernel 'saxpy'" in msg and "buffer 'x' is too short" in msg
    assert "at least 8" in msg and "it has 3" in msg and "x[i]" in msg
    assert counted.snapshot() == NOTHING_COPIED
    np.testing.assert_array_equal(y, np.ones(8, np.float32))
    saxpy(2.0, np.arange(8, dtype=np.float32), y)    # equal lengths launch
    np.testing.assert_array_equal(y, 2 * np.arange(8, dtype=np.float32) + 1)
    saxpy(2.0, np.arange(9, dtype=np.float32), y)    # and a longer x


def test_bound_launch_and_stream_refuse(backend, counted):
    x, y = _short_x()
    with pytest.raises(kaio.LaunchError, match="buffer 'x' is too short"):
        saxpy[(1,), (8,)](2.0, x, y)
    with pytest.raises(kaio.LaunchError, match="buffer 'x' is too short"):
        saxpy[(1,), (8,), 0, kaio.Stream()](2.0, x, y)
    assert counted.snapshot() == NOTHING_COPIED


def test_graph_capture_refuses(backend):
    short, ones = kaio.to_device(np.ones(3, np.float32)), kaio.to_device(np.ones(8, np.float32))
    dy = kaio.to_device(np.ones(8, np.float32))
    saxpy(1.0, ones, dy)        # compiled (and dy = 2) before capturing
    with pytest.raises(kaio.LaunchError, match="buffer 'x' is too short"):
        with kaio.graph():
            saxpy(2.0, short, dy)
    with pytest.raises(kaio.LaunchError, match="'x' and 'y' share memory"):
        with kaio.graph():
            saxpy(2.0, dy, dy)
    with kaio.graph() as g:       # a good launch is still captured and replayed
        saxpy(2.0, ones, dy)
    g.replay()
    g.synchronize()
    np.testing.assert_array_equal(dy.to_host(), np.full(8, 4, np.float32))


def test_backend_launch_refuses(backend, counted):
    be = get_backend()
    compiled = saxpy.compile(be)
    x, y = _short_x()
    with pytest.raises(kaio.LaunchError, match="buffer 'x' is too short"):
        be.launch(compiled, (1,), (8,), [2.0, x, y])
    with pytest.raises(kaio.LaunchError, match="'y' has 8 elements .* only 4 threads"):
        be.launch(compiled, (1,), (4,), [2.0, np.ones(8, np.float32), y])
    with pytest.raises(kaio.LaunchError, match="'x' and 'y' share memory"):
        be.launch(compiled, (1,), (8,), [2.0, y, y])
    with pytest.raises(kaio.LaunchError, match="2147483649 threads"):
        be.launch(compiled, (715827883,), (3,), [2.0, np.ones(8, np.float32), y])
    with pytest.raises(kaio.LaunchError, match="2 arguments given, the kernel takes 3"):
        be.launch(compiled, (1,), (8,), [2.0, y])
    with pytest.raises(TypeError, match="'a' expects a f32 scalar"):
        be.launch(compiled, (1,), (8,), ["2", np.ones(8, np.float32), y])
    assert counted.snapshot() == NOTHING_COPIED
    np.testing.assert_array_equal(y, np.ones(8, np.float32))
    be.launch(compiled, None, None, [2.0, np.ones(8, np.float32), y])   # the default launch shape
    np.testing.assert_array_equal(y, np.full(8, 3, np.float32))


def test_backend_launch_enforces_the_proofs_launch_dimensionality(reference):
    @kaio.kernel
    def by_x(y: kaio.Region[f32]):
        i = kaio.global_id()
        if i < y.shape[0]:
            y[i] = 1.0
    be = get_backend()
    compiled = by_x.compile(be)
    assert compiled.kernel.attrs["launch_dims"] == 1
    with pytest.raises(kaio.LaunchError, match="assumes a 1-D launch"):
        be.launch(compiled, (1, 2), (8,), [np.zeros(16, np.float32)])


# --- aliasing beyond numpy ---------------------------------------------------------------------
def test_device_arrays_and_dlpack_views_that_overlap_are_refused(reference):
    a = np.arange(16, dtype=np.float32)
    d = kaio.to_device(a)
    with pytest.raises(kaio.LaunchError, match="kernel 'saxpy': parameters 'x' and 'y' share memory"):
        saxpy(1.0, d, d)
    # a DLPack view of a numpy array and the array itself, and two views that overlap
    with pytest.raises(kaio.LaunchError, match="'x' and 'y' share memory"):
        saxpy(1.0, kaio.from_dlpack(a[:8]), a[4:12])
    with pytest.raises(kaio.LaunchError, match="'x' and 'y' share memory"):
        saxpy(1.0, kaio.from_dlpack(a[2:10]), kaio.from_dlpack(a[6:14]))
    np.testing.assert_array_equal(a, np.arange(16, dtype=np.float32))
    saxpy(1.0, kaio.from_dlpack(a[:8]), kaio.from_dlpack(a[8:]))     # adjacent: no overlap
    np.testing.assert_array_equal(a[8:], np.arange(8) + np.arange(8, 16))


def test_gemm_refuses_an_out_overlapping_an_input_through_views(reference):
    """Two device views of one buffer (here DLPack views of one numpy array) overlap although
    they are different objects."""
    base = np.zeros(32, np.float32)
    a = kaio.from_dlpack(base[:16].reshape(4, 4))
    b = kaio.to_device(np.eye(4, dtype=np.float32))
    with pytest.raises(kaio.LaunchError, match="'out' overlaps 'a'"):
        kaio.blas.gemm(a, b, out=kaio.from_dlpack(base[12:28].reshape(4, 4)))
    kaio.blas.gemm(a, b, out=kaio.from_dlpack(base[16:].reshape(4, 4)))   # adjacent: fine


class _CAI:
    """A foreign device array: only ``__cuda_array_interface__`` (what torch and CuPy give)."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False),
                                         "strides": None, "version": 3}


def test_cuda_array_interface_objects_compared_by_address_range(reference):
    # on the reference backend: its device arrays are host memory, which a CAI address is not
    kernel = saxpy.specialize_ir()
    base = 1 << 30
    with pytest.raises(kaio.LaunchError, match="'x' and 'y' share memory"):
        check_launch(kernel, (1,), (8,), [1.0, _CAI(base, 8), _CAI(base + 28, 8)])   # one float
    check_launch(kernel, (1,), (8,), [1.0, _CAI(base, 8), _CAI(base + 32, 8)])       # adjacent
    x = kaio.to_device(np.ones(8, np.float32))  # host memory (reference): never device memory
    check_launch(kernel, (1,), (8,), [1.0, _CAI(x.ptr, 8), x])


@pytest.mark.cuda
def test_cuda_device_array_and_a_view_of_it_refused():
    """On the GPU: a device array and a ``__cuda_array_interface__`` view into it (torch and
    CuPy hand these out), as In and Region: refused before the launch (LLVM marks both
    pointers noalias)."""
    from kaio import backends as be
    previous = be._current
    kaio.set_backend("cuda")
    try:
        d = kaio.to_device(np.arange(16, dtype=np.float32))
        with pytest.raises(kaio.LaunchError, match="'x' and 'y' share memory"):
            saxpy(1.0, d, _CAI(d.ptr + 16, 8))     # y is d[4:12]
        y = kaio.to_device(np.zeros(8, np.float32))
        saxpy(1.0, _CAI(d.ptr + 32, 8), y)
        np.testing.assert_array_equal(y.to_host(), np.arange(8, 16, dtype=np.float32))
    finally:
        be._current = previous


# --- index bounds ----------------------------------------------------------------------------------
def test_unbounded_indices_launch_as_before(reference):
    """x[idx[i]] has no bound at compile time: x is not checked (idx[i] is)."""
    assert {b.buffer for b in gather.specialize_ir().attrs["index_bounds"]} == {"idx"}
    y = np.zeros(4, np.float32)
    gather(np.array([0, 2, 1, 0], np.int32), np.array([5, 6, 7], np.float32), y)
    np.testing.assert_array_equal(y, [5, 7, 6, 5])
    with pytest.raises(kaio.LaunchError, match="buffer 'idx' is too short"):
        gather(np.array([0, 2], np.int32), np.array([5, 6, 7], np.float32), y)


def test_an_index_before_the_start_is_refused(reference):
    with pytest.raises(kaio.LaunchError,
                       match=r"reads x\[i - 1\].* down to index -1.*before the start of 'x'"):
        left_neighbour(np.ones(8, np.float32), np.zeros(8, np.float32))


def test_bound_over_a_scalar_argument(reference):
    x, y = np.arange(5, dtype=np.float32), np.zeros(2, np.float32)
    prefix(5, x, y)
    np.testing.assert_array_equal(y, [10, 10])
    with pytest.raises(kaio.LaunchError,
                       match=r"'x' is too short.*index 5 \(`n - 1`.*at least 6, but it has 5"):
        prefix(6, x, y)


def test_inner_dimension_checked_at_launch(reference):
    """rows() constrains the row; a column past the row's end would be the next row's element."""
    y = np.zeros((3, 4), np.float32)
    with pytest.raises(kaio.LaunchError, match=r"'x' is too short along axis 1.*at least 5, but it has 4"):
        row_shift(np.ones((3, 4), np.float32), y)
    row_shift(np.ones((3, 5), np.float32), y)
    assert (y == 1).all()


def test_accesses_that_cannot_run_are_not_checked(reference):
    """y empty: no thread owns an element, so x[0] never runs and x may be empty too."""
    first_of(np.zeros(0, np.float32), np.zeros(0, np.float32))
    with pytest.raises(kaio.LaunchError, match="'x' is too short"):
        first_of(np.zeros(0, np.float32), np.zeros(2, np.float32))


def test_bounds_are_a_typed_kernel_attribute_in_the_ir_text():
    from kaio.ir import parse_kernel, print_kernel
    k = saxpy.specialize_ir()
    (bound,) = k.attrs["index_bounds"]
    assert (bound.buffer, bound.axis, bound.kind, bound.index) == ("x", 0, "load", "i")
    assert "y.shape[0] - 1" in [e.text for e in bound.upper]
    text = print_kernel(k)
    assert "#index_bound{buffer = \"x\"" in text
    assert parse_kernel(text).attrs["index_bounds"] == k.attrs["index_bounds"]
    with pytest.raises(TypeError, match="index_bounds"):
        k.attrs["index_bounds"] = ("not a bound",)
