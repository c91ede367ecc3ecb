"""The reference backend's race sanitizer: planted races are caught with the right threads,
lines and kind; race-free kernels raise nothing."""
from __future__ import annotations

import numpy as np
import pytest
from reference_kit import at, buf, build, gid_guard, guarded, run

import kaio
from kaio import dtypes as dt
from kaio import f32, i32
from kaio.backends.reference import ReferenceBackend


def _neighbour_write_kernel():
    """Raw y: thread g writes y[g] (line 10) and y[g + 1] (line 11)."""
    def body(b, ix, y):
        g, guard = gid_guard(b, ix, ix.sub(b.shape(y, 0), 1))
        with guard:
            b.loc = at(10)
            b.store(y, [g], b.const(1.0, dt.f32))
            b.loc = at(11)
            b.store(y, [ix.add(g, 1)], b.const(2.0, dt.f32))
    return build("neighbour", [("y", buf(dt.f32, "raw"))], body)


def test_neighbour_write_is_a_write_write_race():
    y = np.zeros(64, np.float32)
    with pytest.raises(kaio.RaceError) as ei:
        run(_neighbour_write_kernel(), 1, 64, y)
    e = ei.value
    assert e.kind == "write/write" and e.buffer == "y" and e.kernel == "neighbour"
    # lockstep: every thread runs line 10 before line 11, so thread 1 wrote y[1] first
    assert e.index == (1,) and e.threads == (1, 0) and e.lines == (10, 11)
    msg = str(e)
    assert "write/write" in msg and "'y'" in msg and "(1,)" in msg and "kern.py:10" in msg
    assert (y == 0).all()  # the launch failed: nothing copied back


def test_sanitizer_off_runs_the_racy_kernel():
    y = np.zeros(8, np.float32)
    run(_neighbour_write_kernel(), 1, 8, y, sanitize=False)
    np.testing.assert_array_equal(y, [1] + [2] * 7)


def test_read_of_neighbours_element_written_by_it():
    """y[g] = y[g + 1] + 1 in place: thread g reads what thread g + 1 writes."""
    def body(b, ix, y):
        g, guard = gid_guard(b, ix, ix.sub(b.shape(y, 0), 1))
        with guard:
            b.loc = at(20)
            v = b.load(y, [ix.add(g, 1)])
            b.loc = at(21)
            b.store(y, [g], b.binary("add", v, b.const(1.0, dt.f32)))
    k = build("shift_inplace", [("y", buf(dt.f32, "raw"))], body)
    with pytest.raises(kaio.RaceError) as ei:
        run(k, 2, 32, np.zeros(64, np.float32))
    e = ei.value
    assert e.kind == "read/write" and e.index == (1,)
    assert e.threads == (0, 1) and e.lines == (20, 21)


def _reduction(barrier_after_store=True, barrier_in_loop=True):
    def body(b, ix, x, out):
        t = b.special("thread_idx", 0)
        sh = b.shared_array(dt.f32, (64,), name="partial")
        b.loc = at(30)
        b.store(sh, [t], b.load(x, [ix.global_linear_id()]))
        if barrier_after_store:
            b.barrier()
        for s in (32, 16, 8, 4, 2, 1):
            with guarded(b, b.cmp("lt", t, ix.const(s))):
                b.loc = at(31)
                v = b.load(sh, [ix.add(t, s)])
                b.loc = at(32)
                b.store(sh, [t], b.binary("add", b.load(sh, [t]), v))
            b.loc = at(1)
            if barrier_in_loop:
                b.barrier()
        with guarded(b, b.cmp("eq", t, ix.const(0))):
            b.store(out, [b.special("block_idx", 0)], b.load(sh, [t]))
    return build("reduce", [("x", buf(dt.f32)), ("out", buf(dt.f32, "out"))], body)


def test_shared_reduction_with_barriers_is_race_free():
    x = np.random.default_rng(0).standard_normal(64 * 8).astype(np.float32)
    out = np.zeros(8, np.float32)
    run(_reduction(), 8, 64, x, out)
    np.testing.assert_allclose(out, x.reshape(8, 64).sum(1), rtol=1e-5, atol=1e-5)


def test_missing_barrier_after_shared_store():
    x = np.ones(64 * 2, np.float32)
    with pytest.raises(kaio.RaceError) as ei:
        run(_reduction(barrier_after_store=False), 2, 64, x, np.zeros(2, np.float32))
    e = ei.value
    assert e.kind == "read/write" and e.buffer == "partial"
    assert e.index == (32,) and e.threads == (32, 0) and e.lines == (30, 31)
    assert "shared memory" in str(e)


def test_missing_barrier_inside_the_tree():
    x = np.ones(64, np.float32)
    with pytest.raises(kaio.RaceError) as ei:
        run(_reduction(barrier_in_loop=False), 1, 64, x, np.zeros(1, np.float32))
    e = ei.value
    # step s=16: thread 0 reads partial[16], which thread 16 wrote at step s=32
    assert e.kind == "read/write" and e.index == (16,) and e.threads == (16, 0)
    assert e.lines == (32, 31)


def test_atomics_do_not_race_but_mixing_with_plain_reads_does():
    def body(b, ix, cnt, seen):
        g, guard = gid_guard(b, ix, b.shape(seen, 0))
        with guard:
            b.loc = at(40)
            b.atomic("add", cnt, [ix.const(0)], ix.const(1))
            b.loc = at(41)
            b.store(seen, [g], b.load(cnt, [ix.const(0)]))
    k = build("mixed", [("cnt", buf(dt.i32, "raw")), ("seen", buf(dt.i32, "out"))], body)
    with pytest.raises(kaio.RaceError) as ei:
        run(k, 1, 32, np.zeros(1, np.int32), np.zeros(32, np.int32))
    e = ei.value
    assert e.kind == "read/write" and e.buffer == "cnt" and e.lines == (40, 41)
    assert e.threads[1] == 0 and e.threads[0] != 0

    def only_atomics(b, ix, cnt, seen):
        g, guard = gid_guard(b, ix, b.shape(seen, 0))
        with guard:
            b.store(seen, [g], b.atomic("add", cnt, [ix.const(0)], ix.const(1)))
    k = build("atomics", [("cnt", buf(dt.i32, "atomic")), ("seen", buf(dt.i32, "out"))],
              only_atomics)
    cnt, seen = np.zeros(1, np.int32), np.zeros(300, np.int32)
    run(k, 3, 128, cnt, seen)
    assert cnt[0] == 300
    np.testing.assert_array_equal(seen, np.arange(300))


def test_two_lanes_of_one_store_on_one_element():
    def body(b, ix, y):
        g, guard = gid_guard(b, ix, b.shape(y, 0))
        with guard:
            b.loc = at(50)
            b.store(y, [ix.div(g, 2)], g)
    k = build("halves", [("y", buf(dt.i32, "raw"))], body)
    with pytest.raises(kaio.RaceError) as ei:
        run(k, 1, 16, np.zeros(16, np.int32))
    assert ei.value.kind == "write/write" and ei.value.threads == (0, 1)
    assert ei.value.lines == (50, 50)


def test_race_across_batches_is_caught(monkeypatch):
    from kaio.backends.reference import backend
    monkeypatch.setattr(backend, "LANES_PER_BATCH", 32)  # one block per batch

    def body(b, ix, y):
        g, guard = gid_guard(b, ix, ix.sub(b.shape(y, 0), 1))
        with guard:
            b.loc = at(10)
            b.store(y, [g], b.const(1.0, dt.f32))
            with guarded(b, b.cmp("eq", b.special("thread_idx", 0), ix.const(31))):
                b.loc = at(11)  # the last thread of a block also writes the next block's first
                b.store(y, [ix.add(g, 1)], b.const(2.0, dt.f32))
    k = build("edge", [("y", buf(dt.f32, "raw"))], body)
    with pytest.raises(kaio.RaceError) as ei:
        run(k, 4, 32, np.zeros(128, np.float32))
    e = ei.value
    assert e.index == (32,) and e.threads == (31, 32) and e.lines == (11, 10)


def test_no_false_alarms_on_race_free_kernels():
    # each thread re-reads and rewrites only its own element, several times
    def body(b, ix, y):
        g, guard = gid_guard(b, ix, b.shape(y, 0))
        with guard:
            op, blk, iv, () = b.for_(ix.const(0), ix.const(3), ix.const(1))
            with b.at(blk):
                b.store(y, [g], b.binary("add", b.load(y, [g]), b.const(1.0, dt.f32)))
                b.yield_()
    k = build("own", [("y", buf(dt.f32, "region"))], body)
    y = np.zeros(1000, np.float32)
    run(k, 4, 256, y)
    assert (y == 3).all()

    # everybody reads a shared read-only element and one broadcast element of a Raw buffer
    def body2(b, ix, x, r, out):
        g, guard = gid_guard(b, ix, b.shape(out, 0))
        with guard:
            b.store(out, [g], b.binary("add", b.load(x, [ix.const(0)]), b.load(r, [ix.const(0)])))
    k = build("bcast", [("x", buf(dt.f32)), ("r", buf(dt.f32, "raw")), ("out", buf(dt.f32, "out"))],
              body2)
    out = np.zeros(500, np.float32)
    run(k, 2, 256, np.ones(1, np.float32), np.full(1, 2, np.float32), out)
    assert (out == 3).all()


def test_sanitize_flag_from_environment(monkeypatch):
    monkeypatch.setenv("KAIO_SANITIZE", "1")
    be = ReferenceBackend()
    with pytest.raises(kaio.RaceError):
        be.launch(be.compile(_neighbour_write_kernel()), 1, 8, [np.zeros(8, np.float32)])
    monkeypatch.setenv("KAIO_SANITIZE", "0")
    be = ReferenceBackend()
    be.launch(be.compile(_neighbour_write_kernel()), 1, 8, [np.zeros(8, np.float32)])


def _reversed_write_kernel():
    """y[n - 1 - g] = g under an elementwise partition: no two threads meet, but every thread
    writes an element owned by another."""
    from reference_kit import at as loc_at

    from kaio.ir import BufType, Builder, Param
    from kaio.ir.indexmath import IndexMath
    from kaio.regions import Elementwise
    b = Builder.for_kernel("reversed", [("y", BufType(dt.i32, 1, "global", "region"),
                                         Param("y", "buffer", Elementwise()))], loc=loc_at(60))
    ix = IndexMath(b)
    (y,) = b.kernel.args
    g, guard = gid_guard(b, ix, b.shape(y, 0))
    with guard:
        b.store(y, [ix.sub(ix.sub(b.shape(y, 0), 1), g)], g)
    return b.finish()


def test_ownership_check_is_opt_in_and_names_the_owner(monkeypatch):
    from kaio.backends.reference import OwnershipError
    k = _reversed_write_kernel()
    y = np.zeros(20, np.int32)
    run(k, 1, 32, y)  # race-free: no error without the ownership check
    np.testing.assert_array_equal(y, np.arange(20)[::-1])
    be = ReferenceBackend(sanitize=True, check_ownership=True)
    y[:] = 0
    with pytest.raises(OwnershipError) as ei:
        be.launch(be.compile(k), 1, 32, [y])
    e = ei.value
    assert isinstance(e, kaio.RaceError) and e.kind == "ownership" and e.buffer == "y"
    assert e.index == (19,) and e.threads == (19, 0) and e.lines == (None, 60)
    assert "elementwise()" in str(e) and (y == 0).all()
    monkeypatch.setenv("KAIO_SANITIZE_OWNERSHIP", "1")
    assert ReferenceBackend(sanitize=True).check_ownership


def test_ownership_check_accepts_owned_accesses():
    """saxpy-like in-place update through the partition: every access is by the owner."""
    from kaio.ir import BufType, Builder, Param
    from kaio.ir.indexmath import IndexMath
    from kaio.regions import GridStride
    b = Builder.for_kernel("own_gs", [("y", BufType(dt.f32, 1, "global", "region"),
                                       Param("y", "buffer", GridStride()))])
    ix = IndexMath(b)
    (y,) = b.kernel.args
    spec = GridStride().owned_spec(ix, y)
    lb, ub, step = spec.ranges[0]
    _, body, iv, _ = b.for_(ix._v(lb), ix._v(ub), ix._v(step))
    with b.at(body):
        (i,) = spec.index(iv)
        b.store(y, [i], b.binary("mul", b.load(y, [i]), b.const(2.0, dt.f32)))
    be = ReferenceBackend(sanitize=True, check_ownership=True)
    y = np.arange(1000, dtype=np.float32)
    be.launch(be.compile(b.finish()), 2, 64, [y])
    np.testing.assert_array_equal(y, 2 * np.arange(1000, dtype=np.float32))


def _exchange_kernel(sync: bool):
    """Thread g writes y[g], then (after kaio.sync() or not) reads y[partner] into out[g]:
    partner is within its block (``local``) or the next thread of the grid."""

    @kaio.kernel
    def exchange(y: kaio.Raw[f32], out: kaio.Raw[f32], local: i32):
        t = kaio.thread_idx.x
        b0 = kaio.block_idx.x * kaio.block_dim.x
        g = b0 + t
        y[g] = f32(g)
        if sync:                        # compile-time
            kaio.sync()
        p = (g + 1) % y.shape[0]
        if local != 0:
            p = b0 + (t + 1) % kaio.block_dim.x
        out[g] = y[p]
    return exchange


def _run_exchange(sync, local, grid=2, block=32):
    rb = ReferenceBackend(sanitize=True)
    y = np.zeros(grid * block, np.float32)
    out = np.full(grid * block, np.nan, np.float32)
    rb.launch(rb.compile(_exchange_kernel(sync).specialize_ir({})), (grid, 1, 1), (block, 1, 1),
              [y, out, np.int32(local)])
    return out


def test_a_barrier_orders_global_memory_within_its_block():
    """Threads of one block exchange values through a global buffer across kaio.sync(), as
    CUDA's __syncthreads allows: no race, and every thread reads its neighbour's value."""
    out = _run_exchange(sync=True, local=1)
    g = np.arange(64)
    np.testing.assert_array_equal(out, (g // 32) * 32 + (g % 32 + 1) % 32)


@pytest.mark.parametrize("sync,local", [(False, 1), (True, 0)])
def test_global_exchange_without_a_barrier_or_across_blocks_races(sync, local):
    """Without the barrier the neighbour's write and the read share an interval; across
    blocks (thread 31 of block 0 reads block 1's element) no barrier orders them."""
    with pytest.raises(kaio.RaceError) as ei:
        _run_exchange(sync=sync, local=local)
    assert ei.value.kind == "read/write" and ei.value.buffer == "y"


def test_fenced_records_still_conflict_with_other_blocks_later():
    """Block 0 writes y[g] and passes a barrier (its record fenced); block 1, in a later batch
    of the reference run or the same one, reading y[31] (block 0's) still races."""
    with pytest.raises(kaio.RaceError):
        _run_exchange(sync=True, local=0, grid=4, block=32)
