"""The loop model of the shared-memory check against the sanitizer: random kernels with a loop
holding barriers and shared accesses before it, in each segment of its body and after it.
On this grammar the model is exact: the checker accepts a kernel exactly when the reference
sanitizer sees no race at any trip count (0 to 3). The model before (a loop's tail joined with
the code before and after it) refused race-free ones, e.g. a write of the thread's own element
before the body's barrier and a read of another thread's element after the loop."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from race_corpus.irkit import buf, kernel

import kaio
from kaio import dtypes as dt
from kaio.backends.reference import ReferenceBackend
from kaio.regions import checker

THREADS = 8
#: an access: (kind, index) with kind 'r' (load) or 'w' (store), index 'own' (t) or 'rev'
#: (block_dim.x - 1 - t: another thread's element)
_access = st.tuples(st.sampled_from("rw"), st.sampled_from(["own", "rev"]))
_segment = st.lists(_access, max_size=2)
_spec = st.fixed_dictionaries({
    "pre": _segment,
    "body": st.lists(_segment, min_size=2, max_size=3),   # segments between barriers
    "post": _segment,
    "trips": st.sampled_from(["param", "const"]),         # n trips (may be 0) or 2
    # for: range(trips); while: a test with accesses around a barrier (left > 0, uniform)
    "loop": st.sampled_from(["for", "while"]),
    "test": st.lists(_segment, min_size=2, max_size=2),
})


def _build(spec):
    bld, m, v = kernel("loop", [("out", buf("raw"), None), ("n", dt.i32, None)])
    S = bld.shared_array(dt.f32, (64,), name="S")
    t = m.special("thread_idx", 0)
    rev = m.sub(m.sub(m.special("block_dim", 0), t), 1)

    def emit(seg):
        for kind, idx in seg:
            i = t if idx == "own" else rev
            if kind == "r":
                bld.load(S, [i])
            else:
                bld.store(S, [i], bld.const(1.0, dt.f32))

    def emit_body(left=()):
        for k, seg in enumerate(spec["body"]):
            if k:
                bld.barrier()
            emit(seg)
        bld.yield_(*left)

    emit(spec["pre"])
    trips = v["n"] if spec["trips"] == "param" else m.const(2)
    if spec["loop"] == "for":
        _, body, _, _ = bld.for_(m.const(0), trips, m.const(1), iv_name="i")
        with bld.at(body):
            emit_body()
    else:   # while (accesses; sync(); accesses; left > 0): ...; left -= 1
        # (a barrier, not a block reduction: launched unlowered, as here, the reference's
        # block_reduce op is no barrier to its sanitizer; kernels get lower_reductions' three)
        _, test, body = bld.while_([trips])
        with bld.at(test):
            emit(spec["test"][0])
            bld.barrier()
            emit(spec["test"][1])
            bld.condition(bld.cmp("gt", test.args[0], m.const(0)), test.args[0])
        with bld.at(body):
            emit_body([m.sub(body.args[0], 1)])
    emit(spec["post"])
    return bld.finish()


def _accepted(k) -> bool:
    try:
        checker.check(k)
        return True
    except kaio.CompileError:
        return False


def _races(k, trips) -> bool:
    be = ReferenceBackend(sanitize=True)
    try:
        be.launch(k, (1, 1, 1), (THREADS, 1, 1), [np.zeros(1, np.float32), trips])
        return False
    except kaio.RaceError:
        return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_spec)
def test_accepted_exactly_when_no_trip_count_races(spec):
    k = _build(spec)
    assert _accepted(k) is not any(_races(k, n) for n in (0, 1, 2, 3)), spec
