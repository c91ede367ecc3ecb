"""A CI slice of the fuzzer (kaio.conformance.fuzz): generated kernels, the static checker's
verdict against the reference sanitizer. No kernel may be accepted and race, nothing may raise
a non-kaio exception, every generated kernel must be valid and in bounds; and the slice must
really contain accepted and rejected, racy and clean kernels under every partition, so that it
cannot pass by generating only trivial kernels."""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from kaio.conformance.fuzz import Options, generate, run
from kaio.conformance.fuzz.differential import compare
from kaio.conformance.fuzz.generate import PARTITIONS
from kaio.conformance.fuzz.launches import counterexample
from kaio.conformance.fuzz.report import FAILING
from kaio.conformance.fuzz.source import Gen
from kaio.regions import checker

# generated warp-level kernels spell the warp width as 32 on purpose (kaio warns, the fuzzer runs
# them at that width); the warning itself is tested in tests/test_warp_size_regions.py
pytestmark = pytest.mark.filterwarnings("ignore::kaio.errors.WarpWidthWarning")

SLICE = 120


@pytest.fixture(scope="module")
def summary():
    # reference-plain: the clean kernels again without the sanitizer, through the same
    # differential code the GPU backends use
    return run(Options(count=SLICE, seed=20261201, jobs=1, launches=3,
                       backends=("reference", "reference-plain")))


def _show(summary, cls):
    return "\n\n".join(f"{r['name']}: {r['detail']}\n{r.get('source', '')}"
                       for r in summary.interesting if r["cls"] == cls)


@pytest.mark.parametrize("cls", FAILING)
def test_no_kernel_in_a_failing_class(summary, cls):
    assert summary.counts[cls] == 0, _show(summary, cls)


def test_slice_is_not_vacuous(summary):
    assert summary.total == SLICE
    for part in PARTITIONS:
        c = summary.by_partition[part]
        accepted = c["accepted-clean"] + c["accepted-racy"]
        rejected = c["rejected-clean"] + c["rejected-racy"]
        clean = c["accepted-clean"] + c["rejected-clean"]
        assert accepted and rejected and c["rejected-racy"] and clean, (part, dict(c))
    for feature in ("shared", "warp", "atomic", "guard", "block reduction", "dynamic shared"):
        assert summary.features[feature] > 0, feature
    assert summary.counts["no-launch"] <= SLICE // 20, dict(summary.counts)


def test_differential_machinery_agrees_with_itself(summary):
    d = summary.diff["reference-plain"]
    assert d["kernels"] == summary.counts["accepted-clean"] + summary.counts["rejected-clean"] > 0
    assert d["launches"] == d["identical"] > 0 and d["mismatch"] == d["error"] == 0


def test_generation_is_deterministic_per_kernel():
    a, b = generate(5, 123), generate(5, 123)
    assert a.source == b.source and [x.text() for x in a.launches] == [x.text() for x in b.launches]
    assert generate(5, 124).source != a.source


def test_known_verdicts_by_construction(summary):
    """Racy edits the generator records are mostly seen racy; its idiomatic kernels mostly
    accepted: the labels mean what they say."""
    mutated, plain = summary.mutated["mutated"], summary.mutated["unmutated"]
    assert mutated["rejected-racy"] > mutated["accepted-clean"], dict(mutated)
    assert plain["accepted-clean"] > plain["rejected-racy"], dict(plain)


def test_compare_bitwise_nan_and_out_poison():
    a = np.array([1.0, np.nan, -0.0], np.float32)
    assert compare(a, a.copy(), "f32", False, False) == "identical"
    assert compare(a, np.array([1.0, np.nan, 0.0], np.float32), "f32", False, False) == "mismatch"
    # an Out element the reference never wrote (NaN poison) is not compared
    assert compare(np.array([np.nan, 2], np.float32), np.array([7, 2], np.float32), "f32", True, False) == \
        "identical"
    near = np.array([1.0 + 1e-7], np.float32)
    assert compare(np.array([1.0], np.float32), near, "f32", False, True) == "close"
    assert compare(np.array([5], np.int32), np.array([6], np.int32), "i32", False, False) == "mismatch"


def test_counterexample_launch_from_a_rejection_message():
    g = Gen(random.Random(1), "f32", "grid_stride")
    msg = ("store to Region 'y' ...; e.g. with a buffer of shape (16,), grid=(2, 1, 1), "
           "block=(8, 1, 1): thread 0 writes [1], which thread 1 owns")
    launch = counterexample(g, msg)
    assert launch.grid == (2, 1, 1) and launch.block == (8, 1, 1) and launch.shapes["y"] == (16,)
    assert counterexample(g, "no example here") is None


def test_a_checker_that_accepts_everything_is_caught():
    """The harness itself: with the checker off, racy kernels are 'accepted' and the slice
    must report them as soundness bugs (so a zero above means something)."""
    with checker.disabled():
        s = run(Options(count=30, seed=20261201, jobs=1, launches=2))
    assert s.counts["accepted-racy"] > 0 and s.failed
    assert "source" in next(r for r in s.interesting if r["cls"] == "accepted-racy")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not found (the CUDA toolkit)")
def test_clean_kernels_assemble_on_both_nvidia_paths():
    """kaio's PTX and the LLVM nvptx64 path's PTX of generated kernels pass ptxas (sm_90)."""
    s = run(Options(count=20, seed=20261202, jobs=1, launches=2,
                    backends=("reference", "cuda-compile", "cuda-llvm-compile")))
    for name in ("cuda-compile", "cuda-llvm-compile"):
        d = s.diff[name]
        assert d["compiled"] == d["kernels"] > 0 and d["error"] == 0, (name, dict(d), s.interesting)
