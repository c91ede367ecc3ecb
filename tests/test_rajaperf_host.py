"""``kaio rajaperf``'s host side at large sizes: the chunked, threaded set-up formulas, glibc
rand() and checksum give the same bits as the one-expression forms they replaced (written out
here as they were), each weight chunk is computed once, and the runner reports set-up times."""
import time

import numpy as np
import pytest

from kaio.kernels.rajaperf import _domain, _host, _rand, runner
from kaio.kernels.rajaperf import checksum as ck


def _scalar_rand(seed: int, n: int) -> np.ndarray:
    """glibc rand() one value at a time (srand(0) seeds 1, as glibc does)."""
    r = [seed or 1]
    for i in range(1, 31):
        r.append(16807 * r[i - 1] % 2147483647)
    r += r[:3]
    for k in range(34, 344 + n):
        r.append((r[k - 31] + r[k - 3]) & 0xFFFFFFFF)
    return np.array(r[344:], dtype=np.int64) >> 1


# --- the implementations before the chunked ones, verbatim in what they compute --------------
def _old_real(f, n):
    i = np.arange(n, dtype=np.float64)
    return f * (i + 1.1) / (i + 1.12345)


def _old_rand_sign(f, n, rand):
    i = np.arange(n, dtype=np.float64)
    sign = np.where(rand[:n] / ck.RAND_MAX < 0.5, -1.0, 1.0)
    return sign * f * (i + 1.1) / (i + 1.12345)


def _old_ints(n, rand):
    r = rand[:n + 2] / ck.RAND_MAX
    v = np.where(r[:n] < 0.5, -1, 1).astype(np.int32)
    v[int(n * r[n])] = -58
    v[int(n * r[n + 1])] = 19
    return v


def _old_checksum(data, chunk, scale=1.0):
    d = np.asarray(data, dtype=np.float64).ravel()
    weights = np.abs(np.sin(np.arange(1, d.size + 1, dtype=np.float64))) + 0.5
    total = np.longdouble(0.0)
    for start in range(0, d.size, chunk):
        total += np.sum((weights[start:start + chunk] * d[start:start + chunk]).astype(np.longdouble))
    return float(total) * scale


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of a few thousand elements and two threads, so that small arrays cross many chunk
    boundaries on the thread pool."""
    monkeypatch.setattr(ck, "_INIT_CHUNK", 1000)
    monkeypatch.setattr(ck, "_CHUNK", 4096)
    monkeypatch.setattr(ck, "_WEIGHTS", {})
    monkeypatch.setattr(_host, "WORKERS", 2)
    return 4096


@pytest.mark.parametrize("seed", [0, 1, 4793, 2**31 - 2])
@pytest.mark.parametrize("n", [1, 3, 31, 1000, 3 * 65536 + 17])
def test_glibc_rand_matches_the_scalar_recurrence(seed, n):
    np.testing.assert_array_equal(_rand._glibc_rand(seed, n), _scalar_rand(seed, n))


def test_glibc_rand_n_and_n_plus_2_share_one_generation(monkeypatch):
    calls = []
    real = _rand._glibc_rand
    monkeypatch.setattr(_rand, "_RAND", {})
    monkeypatch.setattr(_rand, "_glibc_rand", lambda s, n: calls.append(n) or real(s, n))
    a = _rand.glibc_rand(4793, 70000)
    b = _rand.glibc_rand(4793, 70002)
    assert len(calls) == 1
    np.testing.assert_array_equal(b[:70000], a)
    np.testing.assert_array_equal(b, _scalar_rand(4793, 70002))


@pytest.mark.parametrize("n", [0, 1, 999, 1000, 5321])
def test_data_init_is_bit_identical_to_the_one_expression_forms(n, small_chunks):
    rand = _scalar_rand(4793, n + 2)
    d = ck.DataInit()
    np.testing.assert_array_equal(d.real(n), _old_real(0.2, n))
    np.testing.assert_array_equal(d.rand_sign(n), _old_rand_sign(0.1, n, rand))
    np.testing.assert_array_equal(d.rand_value(n), rand[:n] / ck.RAND_MAX)
    zeros = d.const(n, 0.0)
    assert zeros.dtype == np.float64 and not np.signbit(zeros).any() and not zeros.any()
    d.skip(1)       # the fifth call: the sixth, real again, takes 0.1 (0.2 without the skip)
    np.testing.assert_array_equal(d.real(n), _old_real(0.1, n))
    if n:
        np.testing.assert_array_equal(d.ints(n), _old_ints(n, rand))


def test_rand_sign_threshold_is_the_division_test():
    # rand() <= RAND_MAX // 2 exactly where rand()/RAND_MAX < 0.5, at the boundary too
    edge = np.array([ck._HALF - 1, ck._HALF, ck._HALF + 1, ck._HALF + 2], dtype=np.int64)
    np.testing.assert_array_equal(edge <= ck._HALF, edge / ck.RAND_MAX < 0.5)


@pytest.mark.parametrize("n", [1, 4095, 4096, 3 * 4096 + 77])
def test_checksum_is_bit_identical_to_the_sequential_form(n, small_chunks):
    data = np.random.default_rng(n).standard_normal(n) * 1e3
    assert ck.checksum(data) == _old_checksum(data, small_chunks)
    assert ck.checksum(data, 1e-4) == _old_checksum(data, small_chunks, 1e-4)
    assert ck.checksum(data) == ck.checksum(data)       # kept weights give the same bits


def test_each_weight_chunk_is_computed_once(small_chunks, monkeypatch):
    # the earlier code recomputed the weights from 0 to the end of every chunk: quadratic
    evaluated = []
    sin = np.sin
    monkeypatch.setattr(np, "sin", lambda x: evaluated.append(x.size) or sin(x))
    data = np.ones(10 * small_chunks)
    ck.checksum(data)
    ck.checksum(data[:5 * small_chunks])
    assert sum(evaluated) == 10 * small_chunks


def test_weights_past_the_kept_chunks_last_until_trimmed(small_chunks, monkeypatch):
    monkeypatch.setattr(ck, "_KEPT_WEIGHT_CHUNKS", 2)
    data = np.ones(5 * small_chunks)
    first = ck.checksum(data)
    assert sorted(ck._WEIGHTS) == [0, 1, 2, 3, 4]       # the variants of one kernel share them
    ck.trim_weights()
    assert sorted(ck._WEIGHTS) == [0, 1]
    assert ck.checksum(data) == first


def test_in_chunks_keeps_chunk_order(monkeypatch):
    monkeypatch.setattr(_host, "WORKERS", 3)
    assert _host.in_chunks(lambda s, e: (s, e), 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert _host.in_chunks(lambda s, e: (s, e), 3, 4) == [(0, 3)]
    assert _host.in_chunks(lambda s, e: (s, e), 0, 4) == []
    # a chunk that itself works in chunks runs them inline instead of waiting on the pool
    inner = _host.in_chunks(lambda s, e: _host.in_chunks(lambda a, b: b - a, e - s, 2), 12, 4)
    assert inner == [[2, 2]] * 3


def test_runner_reports_set_up_and_host_seconds(tmp_path, reference):
    assert runner.main(["-k", "DAXPY", "--size", "100", "--variants", "numpy",
                        "--outdir", str(tmp_path)]) == 0
    rows = [[c.strip() for c in ln.split(",")]
            for ln in (tmp_path / "RAJAPerf-kernels.csv").read_text().splitlines()[1:]]
    assert rows[0][-2:] == ["Set-up (s)", "Host total (s)"]
    setup, total = map(float, rows[1][-2:])
    assert 0 <= setup <= total


def test_time_limit_counts_the_native_build(tmp_path, reference, capsys, monkeypatch):
    # nvcc's build of the cuda variant counts against --time-limit (the device steps' limits
    # are wall time)
    monkeypatch.setattr(runner.native_mod, "load", lambda: time.sleep(0.3))
    monkeypatch.setattr(runner.native_mod, "why_unavailable", lambda: "test")
    assert runner.main(["-k", "Stream", "--size", "100", "--variants", "numpy,cuda",
                        "--time-limit", "0.2", "--outdir", str(tmp_path)]) == 0
    assert "5 kernels not run" in capsys.readouterr().out


def test_large_runs_keep_freed_memory(tmp_path, reference, monkeypatch):
    applied = []
    monkeypatch.setattr(runner, "keep_freed_memory", lambda: applied.append(True))
    runner.main(["-k", "DAXPY", "--size", "100", "--variants", "numpy", "--outdir", str(tmp_path)])
    assert applied == []
    monkeypatch.setattr(runner, "BIG", 100)
    runner.main(["-k", "DAXPY", "--size", "100", "--variants", "numpy", "--outdir", str(tmp_path)])
    assert applied == [True]


@pytest.mark.parametrize("ndims, spacing", [(2, (0.2, 0.1)), (3, (0.3, 0.2, 0.1))])
@pytest.mark.parametrize("edge", [1, 6, 37])
def test_mesh_positions_are_the_flat_index_formula(ndims, spacing, edge):
    dom = _domain.Domain(edge, ndims)
    idx = np.arange(dom.nnalls)   # the earlier form: coordinates from the flat node index
    want = [idx % dom.jp, (idx // dom.jp) % dom.jp, idx // max(dom.kp, 1)][:ndims]
    for got, w, d in zip(dom.positions(*spacing), want, spacing):
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, w * d)
