"""Fuzz kernels must have one defined result, or the differential compares garbage: the
reference sanitizer reports a read of shared memory no thread of the block wrote (the fuzz
classes such kernels ``shared-uninit`` and leaves them out of the differential), and the
generator keeps every global atomic of a kernel in one commuting family (an atomic_min and an
atomic_and on one element from two threads give an order-dependent result)."""
from __future__ import annotations

import re
import tempfile

import numpy as np
import pytest

import kaio
from kaio import f32, i32
from kaio.backends.reference import ReferenceBackend, UninitializedReadError
from kaio.conformance.fuzz.generate import generate
from kaio.conformance.fuzz.run import Options, run_batch
from kaio.conformance.fuzz.stages import FAMILY
from kaio.conformance.targets import using
from kaio.regions import checker


@kaio.kernel
def half_written(x: kaio.In[f32], y: kaio.Out[f32]):
    t = kaio.thread_idx.x
    sh = kaio.shared_array(f32, 64)
    if 2 * t < 64:
        sh[2 * t] = x[t]
    kaio.sync()
    y[t] = sh[t]          # odd t: an element no thread wrote


@kaio.kernel
def fully_written(x: kaio.In[f32], y: kaio.Out[f32]):
    t = kaio.thread_idx.x
    nt = kaio.block_dim.x
    sh = kaio.shared_array(f32, 64)
    sh[t] = x[t]
    kaio.sync()
    v = sh[nt - 1 - t]
    kaio.sync()
    sh[t] = v + f32(1)    # a later interval still sees the earlier writes
    kaio.sync()
    y[t] = sh[(t + 1) % nt]


@kaio.kernel
def counters_uninit(y: kaio.Out[i32]):
    t = kaio.thread_idx.x
    cnt = kaio.shared_array(i32, 4)
    kaio.atomic_add(cnt, t % 4, i32(1))     # never set to 0 first
    kaio.sync()
    y[t] = cnt[t % 4]


def _run(k, n, *args, sanitize=True):
    # one block; the ownership proof (thread_idx for global_id) is not what is tested here
    with checker.disabled(), using(ReferenceBackend(sanitize=sanitize, check_uninit_shared=True), "test"):
        k[(1,), (n,)](*args)


def test_read_of_unwritten_shared_element_is_reported():
    x, y = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    with pytest.raises(UninitializedReadError) as ei:
        _run(half_written, 32, x, y)
    assert ei.value.buffer == "sh" and ei.value.index == (1,)
    assert "before any thread of the block wrote it" in str(ei.value)
    _run(half_written, 32, x, y, sanitize=False)   # without the sanitizer: poison, no error


def test_uninitialised_shared_reads_are_reported_only_when_asked():
    x, y = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    with checker.disabled(), using(ReferenceBackend(sanitize=True), "test"):
        half_written[(1,), (32,)](x, y)


def test_written_shared_memory_raises_nothing_across_barriers():
    x, y = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    _run(fully_written, 32, x, y)
    np.testing.assert_array_equal(y, 31 - np.roll(np.arange(32), -1) + 1)


def test_atomic_on_unwritten_shared_counter_is_reported():
    with pytest.raises(UninitializedReadError) as ei:
        _run(counters_uninit, 8, np.zeros(8, np.int32))
    assert ei.value.buffer == "cnt"


def test_fuzz_kernels_reading_unwritten_shared_memory_are_classed_shared_uninit():
    """Kernels of seed 1 that mismatched on both GPU paths (k39: writes sh[2 * t], reads sh[t];
    k2044: writes sh[0] only, reads sh[t // 2]) are not differential mismatches."""
    opts = Options(count=0, seed=1, backends=("reference", "reference-plain"),
                   directory=tempfile.mkdtemp())
    records = {r["name"]: r for r in run_batch((opts, [39, 2044]))}
    for name in ("k39", "k2044"):
        assert records[name]["cls"] == "shared-uninit", records[name]
        assert "reference-plain" not in records[name]["diff"]


def _h_ops(source: str) -> set:
    return set(re.findall(r"kaio\.atomic_(\w+)\(h,", source))


@pytest.mark.parametrize("index", [607, 3313, 3399, 5478, 7736, 8160])
def test_mixed_atomics_that_mismatched_are_one_family_now(index):
    ops = _h_ops(generate(1, index, 4).source)
    assert ops and len({FAMILY[o] for o in ops}) == 1, ops


def test_generated_atomics_on_h_commute():
    seen = 0
    for i in range(600):
        source = generate(5, i, 4).source
        ops = _h_ops(source)
        seen += len(re.findall(r"kaio\.atomic_\w+\(h,", source)) > 1
        assert len({FAMILY[o] for o in ops}) <= 1, (i, ops)
    assert seen >= 5   # kernels with several atomics on h are still generated


def test_rejected_clean_kernels_that_mismatch_are_listed_as_interesting():
    """The differential runs rejected-clean kernels too; their mismatches must reach the
    report's ``interesting`` list (not only the capped false-positive examples)."""
    from kaio.conformance.fuzz.report import Summary
    s = Summary(Options(count=2, seed=1))
    base = {"partition": "elementwise", "dtype": "f32", "features": [], "mutations": [],
            "verdict": "rejected", "kind": "ownership", "cause": ["x"], "message": "", "ran": 2}
    bad = {"cuda": {"identical": 1, "close": 0, "mismatch": 1, "error": 0, "launches": 2}}
    good = {"cuda": {"identical": 2, "close": 0, "mismatch": 0, "error": 0, "launches": 2}}
    s.add({**base, "index": 1, "name": "k1", "cls": "rejected-clean", "diff": bad})
    s.add({**base, "index": 2, "name": "k2", "cls": "rejected-clean", "diff": good})
    assert [r["name"] for r in s.interesting] == ["k1"]
    assert s.fp_causes["x"] == 2 and s.mismatches == 1
