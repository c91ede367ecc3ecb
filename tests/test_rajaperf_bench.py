"""Every RAJAPerf port's device-resident closure (``case.bench``) on the reference backend: it
launches on device arrays only, its outputs match the numpy reference, and ``reset`` restores
the set-up data of kernels that update in place (so each timed pass starts from the same data).
"""
import numpy as np
import pytest

import kaio.kernels as K
from kaio.kernels._bench import Resident
from kaio.kernels.rajaperf import _case

PORTS = sorted(c.name.split("/", 1)[1] for c in K.cases() if c.name.startswith("rajaperf/"))


def test_every_port_has_a_resident_closure():
    missing = [n for n in PORTS if K.get(f"rajaperf/{n}").bench is None]
    assert missing == []
    assert len(PORTS) >= 38


@pytest.mark.parametrize("name", PORTS)
def test_closure_matches_reference(name, reference):
    case = K.get(f"rajaperf/{name}")
    inputs = case.make_inputs(case.small_size, 0)
    res = case.bench(inputs)
    assert isinstance(res, Resident)
    res()
    ok, worst = case.check(res.outputs(), case.reference(inputs))
    assert ok, f"{name}: {worst:.3g} of the tolerance"


@pytest.mark.parametrize("name", [n for n in PORTS if _case.SUITE[n].carry is not None])
def test_reps_carry_and_reset_restores(name, reference):
    # in-place kernels: three launches equal three reference reps; reset() brings back the
    # set-up data, so the next three launches give the same result again
    case = K.get(f"rajaperf/{name}")
    inputs = case.make_inputs(case.small_size, 0)
    res = case.bench(inputs)
    expected = case.checksum(_case.after_reps(name, inputs, reps=3))
    for _ in range(2):
        res.reset()
        for _ in range(3):
            res()
        got = case.checksum(res.outputs())
        assert got == pytest.approx(expected, rel=1e-11, abs=1e-14)
    assert case.checksum(_case.after_reps(name, inputs, reps=1)) != pytest.approx(expected, rel=1e-9)


def test_outputs_are_copies_not_views(reference):
    case = K.get("rajaperf/DAXPY")
    inputs = case.make_inputs(case.small_size, 0)
    y0 = inputs["y"].copy()
    res = case.bench(inputs)
    res()
    res.outputs()["y"][:] = 7.0
    np.testing.assert_array_equal(inputs["y"], y0)         # the set-up data is untouched
    assert not np.all(res.outputs()["y"] == 7.0)
