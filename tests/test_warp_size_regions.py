"""``kaio.warp_size`` and ``kaio.lane_id()`` in indices (issue 12): the race checker proves a kernel
that reads the warp width once per GPU width (32 and 64), with the width a constant and the lane
id ``linear thread id % width``; a target of another width proves it again at its own. Accepted
idioms run on the reference backend at 32 and 64 lanes against numpy; their racy twins stay
rejected; a literal 32 in warp-level code warns."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import kaio
from kaio import f32
from kaio.backends.reference import ReferenceBackend

BLOCK, BLOCKS = 256, 3


def _launch(kernel, width, *args, block=BLOCK, blocks=BLOCKS):
    be = ReferenceBackend(warp_size=width, sanitize=True)
    be.launch(be.compile(kernel.specialize_ir({})), (blocks, 1, 1), (block, 1, 1), list(args))


def _x(n=BLOCK * BLOCKS):
    return np.random.default_rng(5).integers(-8, 9, n).astype(np.float32)   # exact f32 sums


# --- accepted idioms, checked against numpy at both widths ------------------------------------
@kaio.kernel
def warp_partials(x: kaio.In[f32], out: kaio.Raw[f32]):
    part = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    acc = kaio.warp_sum(x[kaio.global_id()])
    if t % kaio.warp_size == 0:
        part[t // kaio.warp_size] = acc
    kaio.sync()
    if t == 0:
        s = 0.0
        for w in range(kaio.block_dim.x // kaio.warp_size):
            s = s + part[w]
        out[kaio.block_idx.x] = s


@kaio.kernel
def lane_partials(x: kaio.In[f32], out: kaio.Raw[f32]):
    warp_tot = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    v = kaio.warp_sum(x[kaio.global_id()])
    if kaio.lane_id() == 0:
        warp_tot[t // kaio.warp_size] = v
    kaio.sync()
    if t == 0:
        s = 0.0
        for w in range(kaio.block_dim.x // kaio.warp_size):
            s = s + warp_tot[w]
        out[kaio.block_idx.x] = s


@kaio.kernel
def block_scan(x: kaio.In[f32], y: kaio.Region[f32]):
    """Inclusive scan of each block: shuffle-up scan per warp, the warp totals scanned by thread
    0, added back. Each warp's last lane writes its total; warp k reads the total of k - 1."""
    warp_tot = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    lane = kaio.lane_id()
    w = kaio.warp_size
    v = x[g]
    off = 1
    while off < w:
        u = kaio.shuffle_up(v, off)
        if lane >= off:
            v = v + u
        off = off * 2
    if lane == w - 1:
        warp_tot[t // w] = v
    kaio.sync()
    if t == 0:
        s = 0.0
        for k in range(kaio.block_dim.x // w):
            s = s + warp_tot[k]
            warp_tot[k] = s
    kaio.sync()
    if t >= w:
        v = v + warp_tot[t // w - 1]
    y[g] = v


@kaio.kernel
def exclusive_offsets(x: kaio.In[f32], out: kaio.Raw[f32]):
    """tot[0] = 0 by thread 0 and tot[k + 1] = warp k's total by its last lane, in one phase."""
    tot = kaio.shared_array(f32, 65)
    t = kaio.thread_idx.x
    v = kaio.warp_sum(x[kaio.global_id()])
    if t == 0:
        tot[0] = 0.0
    if kaio.lane_id() == kaio.warp_size - 1:
        tot[t // kaio.warp_size + 1] = v
    kaio.sync()
    out[kaio.global_id()] = tot[t // kaio.warp_size]


def _warp_sums(x, w):
    return x.reshape(-1, w).sum(axis=1)


@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("kernel", [warp_partials, lane_partials], ids=["t%w", "lane"])
def test_per_warp_partials_are_accepted_and_sum_the_block(kernel, width):
    x, out = _x(), np.zeros(BLOCKS, np.float32)
    _launch(kernel, width, x, out)
    np.testing.assert_array_equal(out, x.reshape(BLOCKS, BLOCK).sum(axis=1))


@pytest.mark.parametrize("width", [32, 64])
def test_block_scan_with_warp_size_is_accepted_and_scans(width):
    x, y = _x(), np.zeros(BLOCK * BLOCKS, np.float32)
    _launch(block_scan, width, x, y)
    np.testing.assert_array_equal(y, np.cumsum(x.reshape(BLOCKS, BLOCK), axis=1).ravel())


@pytest.mark.parametrize("width", [32, 64])
def test_exclusive_warp_offsets_plus_one_are_accepted(width):
    x, out = _x(), np.zeros(BLOCK * BLOCKS, np.float32)
    _launch(exclusive_offsets, width, x, out)
    sums = _warp_sums(x, width).reshape(BLOCKS, -1)
    prev = np.concatenate([np.zeros((BLOCKS, 1), np.float32), sums[:, :-1]], axis=1)
    np.testing.assert_array_equal(out, np.repeat(prev.ravel(), width))


def test_a_lane_guard_needs_a_1d_launch():
    """lane_id() counts linear thread ids, so `lane == 0` with `thread_idx.x // warp_size` is
    proved for 1-D blocks only (two rows of a 32 x 2 block are two warps that both write [0])."""
    k = lane_partials.specialize_ir({})
    assert k.attrs["launch_dims"] == 1


# --- racy twins stay rejected ---------------------------------------------------------------------
def _compile(src_kernel):
    return src_kernel.specialize_ir({})


def test_partials_with_a_half_warp_guard_are_rejected():
    @kaio.kernel
    def half(x: kaio.In[f32], out: kaio.Raw[f32]):
        part = kaio.shared_array(f32, 64)
        t = kaio.thread_idx.x
        acc = kaio.warp_sum(x[kaio.global_id()])
        if t % 16 == 0:
            part[t // kaio.warp_size] = acc
        kaio.sync()
        out[kaio.global_id()] = part[0]

    with pytest.raises(kaio.CompileError, match=r"part\[t // kaio.warp_size\].*warp_size = 32"):
        _compile(half)


def test_a_wider_stride_than_the_warp_is_rejected_at_32():
    @kaio.kernel
    def wide(x: kaio.In[f32], out: kaio.Raw[f32]):
        part = kaio.shared_array(f32, 64)
        t = kaio.thread_idx.x
        acc = kaio.warp_sum(x[kaio.global_id()])
        if kaio.lane_id() == 0:
            part[t // 64] = acc   # right at 64 lanes; at 32, warps 0 and 1 both write [0]
        kaio.sync()
        out[kaio.global_id()] = part[0]

    with pytest.raises(kaio.CompileError, match=r"warp_size = 32 on NVIDIA") as ei:
        _compile(wide)
    assert ei.value.warp_size == 32


def test_a_missing_lane_guard_is_rejected():
    @kaio.kernel
    def unguarded(x: kaio.In[f32], out: kaio.Raw[f32]):
        warp_tot = kaio.shared_array(f32, 64)
        t = kaio.thread_idx.x
        v = kaio.warp_sum(x[kaio.global_id()])
        warp_tot[t // kaio.warp_size] = v
        kaio.sync()
        out[kaio.global_id()] = warp_tot[0]

    with pytest.raises(kaio.CompileError, match="two threads.*warp_size = 32"):
        _compile(unguarded)


def test_an_offset_by_one_that_meets_a_read_is_rejected():
    @kaio.kernel
    def shifted(x: kaio.In[f32], out: kaio.Raw[f32]):
        tot = kaio.shared_array(f32, 65)
        t = kaio.thread_idx.x
        v = kaio.warp_sum(x[kaio.global_id()])
        if kaio.lane_id() == 0:
            tot[t // kaio.warp_size + 1] = v     # warp k writes [k + 1] ...
            out[kaio.global_id()] = tot[t // kaio.warp_size]   # ... while warp k + 1 reads it
        kaio.sync()

    with pytest.raises(kaio.CompileError, match="between the same two barriers.*warp_size = 32"):
        _compile(shifted)


def test_lane_0_partials_are_rejected_when_the_only_bound_is_a_literal():
    """``lane == 0`` does not bound ``t`` at all without the width: the old opaque lane id."""
    from kaio.regions import checker
    with checker.disabled():
        k = lane_partials.specialize_ir({})
    with pytest.raises(kaio.CompileError, match="two threads"):
        checker._check_at(k, None)


def test_a_target_of_another_width_proves_the_kernel_again():
    """A guard of `t % min(warp_size, 32) == 0` with `t // 32` is race-free at 32 and 64 lanes;
    at 16, threads 0 and 16 both write [0]: the reference backend at 16 lanes refuses it."""
    @kaio.kernel
    def fixed32(x: kaio.In[f32], out: kaio.Raw[f32]):
        part = kaio.shared_array(f32, 64)
        t = kaio.thread_idx.x
        acc = kaio.warp_sum(x[kaio.global_id()])
        if t % min(kaio.warp_size, 32) == 0:
            part[t // 32] = acc
        kaio.sync()
        out[kaio.global_id()] = part[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kaio.WarpWidthWarning)
        k = _compile(fixed32)
    for width in (32, 64):
        ReferenceBackend(warp_size=width).compile(k)
    with pytest.raises(kaio.CompileError, match="warp_size = 16"):
        ReferenceBackend(warp_size=16).compile(k)
    ReferenceBackend(warp_size=16).compile(lane_partials.specialize_ir({}))   # the generic one


# --- the literal-32 warning ----------------------------------------------------------------
def _warnings_of(kernel):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        _compile(kernel)
    return [w for w in got if issubclass(w.category, kaio.KaioWarning)]


def test_a_literal_32_in_warp_code_warns_at_its_line():
    @kaio.kernel
    def literal(x: kaio.In[f32], out: kaio.Raw[f32]):
        part = kaio.shared_array(f32, 32)
        t = kaio.thread_idx.x
        acc = kaio.warp_sum(x[kaio.global_id()])
        if t % 32 == 0:
            part[t // 32] = acc
        kaio.sync()
        out[kaio.global_id()] = part[t & 31]

    got = _warnings_of(literal)
    assert [w.category for w in got] == [kaio.WarpWidthWarning] * 3
    texts = [str(w.message) for w in got]
    assert "`t % 32`" in texts[0] and "`t // 32`" in texts[1] and "`t & 31`" in texts[2]
    for w, text in zip(got, texts):
        assert w.filename == __file__ and f"{__file__}:{w.lineno}:" in text
        assert "hint: use kaio.warp_size (64 on AMD gfx9)" in text
    assert "part[t // 32] = acc" in texts[1] and "^^^^^^^" in texts[1]


def test_no_warning_without_warp_operations_or_with_warp_size():
    @kaio.kernel
    def tiles32(x: kaio.In[f32], out: kaio.Raw[f32]):
        t = kaio.thread_idx.x
        out[kaio.global_id()] = x[(t // 32) * 32 + t % 32]   # a tile of 32, no warp in sight

    assert _warnings_of(tiles32) == []
    assert _warnings_of(warp_partials) == [] and _warnings_of(block_scan) == []


def test_a_32_on_data_does_not_warn():
    @kaio.kernel
    def data32(x: kaio.In[f32], n: kaio.i32, out: kaio.Raw[f32]):
        acc = kaio.warp_sum(x[kaio.global_id()])
        out[kaio.global_id()] = acc + f32(n // 32)

    assert _warnings_of(data32) == []
