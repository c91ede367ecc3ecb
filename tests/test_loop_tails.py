"""Loops with barriers and shared accesses after the body's last barrier (regions/walk.py: a
loop's iterations start in a head interval that follows the code before the loop and, over a
back edge, the body's last interval; the code after the loop follows that last interval).

Racy tails (fragment loads, plain loads, tile copies meeting the next iteration's head) are in
the race corpus (race_corpus/bad.py, ``tail_*``). Here: the reported kernel itself, the
accepted twins that end the body with ``kaio.sync()`` run on the sanitizing reference backend
against numpy, and kernels the old model (a loop's last interval joined with the code before
it) refused although no two of their phases can meet."""
from __future__ import annotations

import numpy as np
import pytest
from race_corpus.rejects import rejected_at_race_line
from race_corpus.sanitizing import sanitizing

import kaio
from kaio import f16, f32, i32
from kaio.regions import checker


@pytest.fixture
def sanitized():
    with sanitizing(ownership=True) as backend:
        yield backend


def test_fragment_loads_after_the_last_barrier_are_rejected_naming_the_array():
    """Iteration i + 1's writes of S (before its barrier) meet a slower warp's fragment loads
    of iteration i (after the barrier); accepted before fragment loads counted as accesses."""
    @kaio.kernel(block=(64,))
    def racy_tail(A: kaio.In[f16, 2], out: kaio.Raw[f32, 2], n: kaio.i32):
        S = kaio.shared_array(f16, 256)
        t = kaio.thread_idx.x
        w = t // kaio.warp_size
        acc = kaio.mma.fill(f32, 0.0)
        for _i in range(n):
            for j in range(4):
                S[t + 64 * j] = A[(t + 64 * j) // 16, (t + 64 * j) % 16]
            kaio.sync()
            acc = kaio.mma.mma(kaio.mma.load_a(S, 0, 0, ld=16), kaio.mma.load_b(S, 0, 8 * w, ld=16), acc)
        kaio.mma.store(out, 0, 8 * w, acc)

    with pytest.raises(kaio.CompileError) as ei:
        racy_tail.specialize_ir({})
    e = ei.value
    assert e.buffer == "S" and e.kind == "shared-race", str(e)
    assert "fragment load from `S`" in e.bare_message and "next iteration" in e.bare_message
    assert "end the loop body with kaio.sync()" in e.hint


# --- the twins of the corpus's racy tails: a barrier ends the body -------------------------
@kaio.kernel
def tail_fragment_loads_synced(A: kaio.In[f16, 2], out: kaio.Raw[f32, 2], n: i32):
    S = kaio.shared_array(f16, 256)
    t = kaio.thread_idx.x
    w = t // kaio.warp_size
    acc = kaio.mma.fill(f32, 0.0)
    for _i in range(n):
        for k in range(t, 256, kaio.block_dim.x):
            S[k] = A[k // 16, k % 16]
        kaio.sync()
        acc = kaio.mma.mma(kaio.mma.load_a(S, 0, 0, ld=16), kaio.mma.load_b(S, 0, 8 * w, ld=16), acc)
        kaio.sync()
    kaio.mma.store(out, 0, 8 * w, acc)


@kaio.kernel
def tail_copy_tile_synced(A: kaio.In[f16, 2], out: kaio.Raw[f32, 2], n: i32):
    S = kaio.shared_array(f16, (16, 16))
    t = kaio.thread_idx.x
    w = t // kaio.warp_size
    acc = kaio.mma.fill(f32, 0.0)
    kaio.mma.copy_tile(S, A, 0, 0)
    kaio.sync()
    for i in range(n):
        if t == 1:
            S[0, 0] = S[0, 0] + f16(1.0)
        kaio.sync()
        acc = kaio.mma.mma(kaio.mma.load_a(S, 0, 0), kaio.mma.load_b(S, 0, 8 * w), acc)
        kaio.sync()
        kaio.mma.copy_tile(S, A, 0, 16 * (i % 2))
        kaio.sync()
    kaio.mma.store(out, 0, 8 * w, acc)


def _tiles(seed):
    return np.random.default_rng(seed).integers(-2, 3, (16, 32)).astype(np.float16)


def _warp_cols(out, want):
    """The columns the launch's warps store (8 each; 64 threads: 2 warps of 32 or 1 of 64)."""
    cols = 8 * (64 // kaio.get_backend().warp_size)
    np.testing.assert_array_equal(out[:, :cols], want[:, :cols])
    assert not out[:, cols:].any()


@pytest.mark.parametrize("n", [0, 1, 3])
def test_fragment_loads_then_a_barrier_accepted_and_exact(n, sanitized):
    a = _tiles(n)
    out = np.zeros((16, 16), np.float32)
    kaio.kernel(tail_fragment_loads_synced.fn)[(1,), (64,)](a, out, n)
    s = a[:, :16].astype(np.float64)
    _warp_cols(out, n * (s @ s))


@pytest.mark.parametrize("n", [0, 1, 3])
def test_tile_copy_then_a_barrier_accepted_and_exact(n, sanitized):
    a = _tiles(n + 10)
    out = np.zeros((16, 16), np.float32)
    kaio.kernel(tail_copy_tile_synced.fn)[(1,), (64,)](a, out, n)
    s, want = a[:, :16].astype(np.float64), np.zeros((16, 16))
    for i in range(n):
        s[0, 0] += 1
        want += s @ s
        s = a[:, 16 * (i % 2):16 * (i % 2) + 16].astype(np.float64)
    _warp_cols(out, want)


def tail_plain_load_synced(x: kaio.In[f32], y: kaio.Out[f32], n: i32):
    S = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    s = f32(0.0)
    for i in range(n):
        if t < 64:
            S[t] = x[g] * f32(i)
        kaio.sync()
        s += S[63 - t % 64]
        kaio.sync()
    if g < y.shape[0]:
        y[g] = s


# --- what the old model refused: the code before a loop never meets its tail ---------------
def sync_first(x: kaio.In[f32], y: kaio.Out[f32], n: i32):
    """The body starts with its barrier: the tail's reads follow it, never the prologue."""
    S = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    if t < 64:
        S[t] = x[g]
    s = f32(0.0)
    for _i in range(n):
        kaio.sync()
        s += S[63 - t % 64]
    if g < y.shape[0]:
        y[g] = s


def reverse_in_place(x: kaio.In[f32], y: kaio.Out[f32], n: i32):
    """The prologue writes S[t], each tail S[63 - t]: two writes the barriers keep apart."""
    S = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    if t < 64:
        S[t] = x[g]
    for _i in range(n):
        kaio.sync()
        v = S[t % 64]
        kaio.sync()
        if t < 64:
            S[63 - t] = v
    kaio.sync()
    if g < y.shape[0]:
        y[g] = S[t % 64]


def barrier_in_test(x: kaio.In[f32], y: kaio.Out[f32], n: i32):
    """A while test with barriers (a block reduction): the exit follows the test, not the
    body's head after it, so the reads after the loop meet neither the head's writes nor
    (a barrier ends the body) the tail's."""
    S = kaio.shared_array(f32, 64)
    R = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    if t < 64:
        S[t] = x[g]
        R[t] = 0.0
    k = n
    kaio.sync()
    while kaio.block_max(f32(k)) > 0.0:
        if t < 64:
            S[t] = S[t] * 2.0
        kaio.sync()
        if t < 64:
            R[t] = R[t] + S[63 - t]
        kaio.sync()
        k -= 1
    if g < y.shape[0]:
        y[g] = S[63 - t % 64] + R[t % 64]


def _reverse_blocks(x):
    return x.reshape(-1, 64)[:, ::-1].reshape(-1)


def _sim_barrier_in_test(x, n):
    """numpy: per block, the while loop of barrier_in_test."""
    s, r = x.reshape(-1, 64).copy(), np.zeros((x.size // 64, 64), np.float32)
    for _ in range(n):
        s = s * 2
        r = r + s[:, ::-1]
    return (s[:, ::-1] + r).reshape(-1)


CASES = {
    "tail_plain_load_synced": lambda x, n: (n * (n - 1) / 2) * _reverse_blocks(x),
    "sync_first": lambda x, n: n * _reverse_blocks(x),
    "reverse_in_place": lambda x, n: _reverse_blocks(x) if n % 2 else x,
    "barrier_in_test": _sim_barrier_in_test,
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("blocks, n", [(1, 0), (2, 1), (3, 4)])
def test_accepted_and_clean_under_the_sanitizer(name, blocks, n, sanitized):
    fn = globals()[name]
    x = np.random.default_rng(blocks).integers(-3, 6, 64 * blocks).astype(np.float32)
    y = np.zeros_like(x)
    kaio.kernel(fn)[(blocks,), (64,)](x, y, n)
    np.testing.assert_allclose(y, CASES[name](x, n), rtol=1e-6)


def racy_test_read(x: kaio.In[f32], y: kaio.Out[f32]):
    """The while test reads S before its barriers; the tail writes S after the body's last
    barrier: thread 63 - t writes what thread t's next test reads."""
    S = kaio.shared_array(f32, 64)
    t = kaio.thread_idx.x
    g = kaio.global_id()
    if t < 64:
        S[t] = x[g]
    kaio.sync()
    while kaio.block_max(S[t % 64]) > 0.0:  # RACE
        kaio.sync()
        if t < 64:
            S[63 - t] = S[63 - t] - 1.0
    if g < y.shape[0]:
        y[g] = S[t % 64]


def test_a_while_test_reading_what_the_tail_writes_is_rejected(sanitized):
    e = rejected_at_race_line(racy_test_read, "shared array 'S'")
    assert "next iteration" in e.bare_message
    with checker.disabled(), pytest.raises(kaio.RaceError):
        kaio.kernel(racy_test_read)[(1,), (64,)](np.ones(64, np.float32), np.zeros(64, np.float32))
