"""The race corpus: idiomatic race-free kernels must compile and run clean under the sanitizer
(matching numpy); racy kernels must be rejected naming the buffer and line, and (checker
disabled) must actually misbehave under the reference backend where the race is dynamic; and
random affine kernels: whatever the checker accepts never races."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from race_corpus import bad, good, randgen
from race_corpus.sanitizing import sanitizing

import kaio
from kaio.backends.reference import ReferenceBackend
from kaio.backends.reference.errors import (
    DivergentBarrierError,
    OwnershipError,
    UninitializedReadError,
)
from kaio.regions import checker


@pytest.fixture
def sanitized():
    with sanitizing(ownership=True) as backend:  # races, and any touch of a non-owned element
        yield backend


def test_corpus_sizes():
    assert len(good.CASES) >= 20 and len(bad.CASES) >= 20


@pytest.mark.parametrize("name", sorted(good.CASES))
def test_good_kernel_compiles(name):
    k = good.KERNELS[name]
    ir = kaio.kernel(k.fn).specialize_ir({})  # a fresh object: never a cached unchecked IR
    assert ir.name == name


@pytest.mark.parametrize("variant", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(good.CASES))
def test_good_kernel_runs_clean_and_matches_numpy(name, variant, sanitized):
    good.CASES[name](variant)  # raises RaceError on any conflict; asserts the numpy reference


def _race_line(k) -> int:
    src, first = inspect.getsourcelines(k.fn)
    return first + next(i for i, line in enumerate(src) if "# RACE" in line)


@pytest.mark.parametrize("name", sorted(bad.CASES))
def test_bad_kernel_rejected_naming_buffer_and_line(name):
    k = kaio.kernel(bad.KERNELS[name].fn)
    buffer = bad.CASES[name][0]
    with pytest.raises(kaio.CompileError) as ei:
        k.specialize_ir({})
    e = ei.value
    assert e.line == _race_line(k), str(e)
    assert e.file == inspect.getsourcefile(k.fn)
    assert e.kernel == name
    if buffer is not None:
        assert f"'{buffer}'" in e.bare_message, str(e)
    assert e.hint, str(e)
    assert f"{e.line} |" in str(e) and "^" in str(e)  # the source line with a caret


_EXPECT = {"race": kaio.RaceError, "barrier": DivergentBarrierError, "ownership": OwnershipError,
           "uninit": UninitializedReadError, "frontend": kaio.CompileError}


@pytest.mark.parametrize("name", sorted(bad.CASES))
def test_bad_kernel_misbehaves_without_the_checker(name, sanitized):
    buffer, launch, make_args, expect = bad.CASES[name]
    k = kaio.kernel(bad.KERNELS[name].fn)
    with checker.disabled():
        with pytest.raises(_EXPECT[expect]) as ei:
            k[launch](*make_args())
    if expect in ("race", "ownership"):
        assert ei.value.buffer == buffer


@pytest.mark.parametrize("name", sorted(n for n, c in bad.CASES.items() if c[3] == "ownership"))
def test_ownership_violations_are_no_conflict_on_their_launch(name, sanitized):
    """These write elements other threads own but never touch on this launch: without the
    ownership check the sanitizer sees no conflict; the static checker still rejects them."""
    buffer, launch, make_args, _ = bad.CASES[name]
    k = kaio.kernel(bad.KERNELS[name].fn)
    sanitized.check_ownership = False
    with checker.disabled():
        k[launch](*make_args())


# --- random affine kernels: the checker's verdict against the sanitizer ----------------------
_aff = st.builds(randgen.Affine, st.sampled_from(["gid", "tid"]), st.sampled_from([0, 1, 2, -1]),
                 st.sampled_from([0, 1, 2]), st.sampled_from([-1, 0, 1, 2]))
_tid_aff = st.builds(randgen.Affine, st.just("tid"), st.sampled_from([0, 1, 2, -1]), st.just(0),
                     st.sampled_from([-1, 0, 1, 2, 8]))
_spec = st.builds(
    randgen.Spec, st.sampled_from(sorted(randgen.PARTS)), st.sampled_from([0, 0, 1, 2, 3]), _aff,
    st.one_of(st.none(), _aff), st.one_of(st.none(), st.sampled_from([2, 5])),
    st.one_of(st.none(), st.tuples(_tid_aff, _tid_aff, st.booleans(),
                                   st.one_of(st.none(), st.sampled_from([1, 4, 8])))))


def checker_verdict(spec) -> bool:
    try:
        checker.check(randgen.build(spec))
        return True
    except kaio.CompileError:
        return False


def sanitizer_races(spec) -> bool:
    """Whether any valid launch races or touches an element its thread does not own."""
    be = ReferenceBackend(sanitize=True, check_ownership=True)
    part = randgen.PARTS[spec.part]
    for grid, block in randgen.LAUNCHES:
        for n in randgen.sizes_for(spec.part, grid, block):
            part.check_launch((n,), grid, block, buffer="y", kernel="rand")
            k = randgen.build(spec)
            try:
                be.launch(be.compile(k), grid, block, [np.zeros(n, np.float32)])
            except (kaio.RaceError, DivergentBarrierError):
                return True
    return False


STATS = {"tried": 0, "accepted": 0, "racing": 0}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_spec)
def test_checker_accepts_only_race_free_random_kernels(spec):
    accepted = checker_verdict(spec)
    races = sanitizer_races(spec)
    STATS["tried"] += 1
    STATS["accepted"] += accepted
    STATS["racing"] += races
    assert not (accepted and races), f"checker accepted a racing kernel: {spec}"


@pytest.mark.parametrize("spec, verdict", [
    (randgen.Spec("elementwise", 0, randgen.Affine("gid", 1, 0, 0), None, None, None), True),
    (randgen.Spec("elementwise", 0, randgen.Affine("gid", 1, 0, 0), randgen.Affine("gid", 1, 0, 1),
                  None, None), False),
    (randgen.Spec("blocked", 2, randgen.Affine("gid", 2, 1, 0), None, None, None), True),
    (randgen.Spec("blocked", 3, randgen.Affine("gid", 2, 1, 0), None, None, None), False),
    (randgen.Spec("grid_stride", 0, randgen.Affine("gid", 1, 0, 0), randgen.Affine("gid", 1, 0, 0),
                  None, None), True),
    (randgen.Spec("elementwise", 0, randgen.Affine("gid", 1, 0, 0), None, None,
                  (randgen.Affine("tid", 1, 0, 0), randgen.Affine("tid", 1, 0, 1), True, None)), True),
    (randgen.Spec("elementwise", 0, randgen.Affine("gid", 1, 0, 0), None, None,
                  (randgen.Affine("tid", 1, 0, 0), randgen.Affine("tid", 1, 0, 1), False, None)), False),
    (randgen.Spec("elementwise", 0, randgen.Affine("gid", 1, 0, 0), None, None,
                  (randgen.Affine("tid", 2, 0, 0), randgen.Affine("tid", 2, 0, 1), False, None)), True),
])
def test_random_grammar_fixed_points(spec, verdict):
    """Anchors for the generator: known verdicts, and the sanitizer agrees on the racy ones."""
    assert checker_verdict(spec) is verdict
    if not verdict:
        assert sanitizer_races(spec)
    else:
        assert not sanitizer_races(spec)
