"""The race checker's proofs are sound, class by class. Each class of unsound proof has its
adversarial kernel in ``race_corpus/bad.py`` (the corpus tests assert it is rejected) and a benign
twin in ``race_corpus/good.py`` (accepted, and run clean). Here:

- the adversarial kernels really race: with the checker off, the reference sanitizer sees a
  conflict between two threads (its ownership check off, so it is a race, not a stray access);
- per class, a property compares the checker's verdict on generated kernels with an oracle that
  does not use the checker: the IR's own fixed-width semantics (:mod:`kaio.semantics`), or a
  byte-overlap count, or the sanitizer.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from race_corpus import bad
from race_corpus.irkit import buf, kernel
from race_corpus.sanitizing import sanitizing

import kaio
from kaio import dtypes as dt
from kaio import semantics
from kaio.backends.reference import ReferenceBackend
from kaio.regions import checker

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NEW_BAD = ["shadowed_length", "narrow_param_wrap", "narrow_counter_wrap", "wrapped_guard",
           "shift_roundtrip", "dyn_views_overlap"]


def accepted(k) -> bool:
    try:
        checker.check(k)
        return True
    except kaio.CompileError:
        return False


@pytest.fixture
def racing():
    """The reference backend with the sanitizer on and its ownership check off."""
    with sanitizing(ownership=False) as backend:
        yield backend


@pytest.mark.parametrize("name", NEW_BAD)
def test_adversarial_kernels_really_race(name, racing):
    """Rejecting them is right: on the launch in bad.CASES two threads conflict."""
    buffer, launch, make_args, _ = bad.CASES[name]
    k = kaio.kernel(bad.KERNELS[name].fn)
    with checker.disabled(), pytest.raises(kaio.RaceError) as ei:
        k[launch](*make_args())
    assert ei.value.kind in ("write/write", "read/write"), ei.value
    assert ei.value.buffer == buffer


@kaio.kernel
def const_guard(x: kaio.In[kaio.f32], y: kaio.Region[kaio.f32], c: kaio.Const[int]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[g] = x[g]
        if g + c < 0 and 2 * g < y.shape[0]:    # g + c wraps for c = 2**31 - 1 and g >= 1
            y[2 * g] = x[g]


@kaio.kernel
def const_guard_safe(x: kaio.In[kaio.f32], y: kaio.Region[kaio.f32], c: kaio.Const[int]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[g] = x[g]
        if g - c < -c and 2 * g < y.shape[0]:   # g - c never wraps: g < 0, unreachable
            y[2 * g] = x[g]


def test_a_constant_that_wraps_does_not_make_a_branch_unreachable(racing):
    with pytest.raises(kaio.CompileError, match="not provably owned"):
        const_guard.specialize_ir({"c": I32_MAX})
    const_guard_safe.specialize_ir({"c": I32_MAX})   # unreachability is still proved where exact
    with checker.disabled(), pytest.raises(kaio.RaceError):
        kaio.kernel(const_guard.fn)[(1,), (32,)](np.zeros(32, np.float32), np.zeros(32, np.float32),
                                                 I32_MAX)


# --- array lengths come from the value, never its name ----------------------------------------
@SETTINGS
@given(st.permutations(["y", "x", "d"]), st.sampled_from(["y", "x", "d", "v"]),
       st.sampled_from("yxd"), st.sampled_from("yxd"))
def test_verdict_does_not_depend_on_names(params, dyn_name, a, b):
    """``y[g + (len(A) - len(B))]`` is owned exactly when A and B are the same array, whatever the
    parameters and the dynamic shared array are called (names may collide)."""
    py, px = params[:2]
    bld, m, v = kernel("k", [(py, buf("region"), None), (px, buf("in"), None)])
    arrays = {"y": v[py], "x": v[px], "d": bld.dyn_shared(dt.f32, name=dyn_name)}
    length = {k: bld.shape(arr, 0) for k, arr in arrays.items()}
    g = m.global_id(0)
    i = m.add(g, m.sub(length[a], length[b]))   # (g + len(A) first could wrap)
    bld.store(arrays["y"], [i], bld.const(1.0, dt.f32))
    assert accepted(bld.finish()) is (a == b)


# --- narrow integers: exact only where they provably do not wrap ------------------------------
NARROW = [dt.i8, dt.i16, dt.i32]


@st.composite
def linear_expr(draw, depth=0):
    """(build(bld, params) -> Value, evaluate(env, exact) -> int): a tree of add/sub and
    multiplications by small constants over an i8 and an i16 parameter, each node in its own
    type of i8/i16/i32 (operands cast to it). Exactly, every node stays far inside i32."""
    t = draw(st.sampled_from(NARROW))
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(["p", "q", 1, 3, 100]))
        if isinstance(leaf, str):
            return (lambda bld, ps, leaf=leaf: ps[leaf],
                    lambda env, exact, leaf=leaf: env[leaf], {"p": dt.i8, "q": dt.i16}[leaf])
        return (lambda bld, ps, leaf=leaf, t=t: bld.const(leaf, t), lambda env, exact, leaf=leaf: leaf, t)
    op = draw(st.sampled_from(["add", "sub", "mul"]))
    lb, le, lt = draw(linear_expr(depth + 1))
    if op == "mul":
        c = draw(st.sampled_from([2, 3, -1]))
        rb, re, rt = (lambda bld, ps, c=c, t=t: bld.const(c, t)), (lambda env, exact, c=c: c), t
    else:
        rb, re, rt = draw(linear_expr(depth + 1))

    def build(bld, ps):
        a, b = lb(bld, ps), rb(bld, ps)
        a = a if a.type is t else bld.cast(a, t)
        b = b if b.type is t else bld.cast(b, t)
        return bld.binary(op, a, b)

    def evaluate(env, exact):
        a, b = le(env, exact), re(env, exact)
        if not exact:   # what the IR computes: casts and the op wrap in t
            a, b = (int(semantics.cast(dt.i64, t, np.int64(v))) for v in (a, b))
            return int(semantics.binary(op, t, semantics.const(t, a), semantics.const(t, b)))
        return a + b if op == "add" else a - b if op == "sub" else a * b
    return build, evaluate, t


def _corners():
    """Every combination of extreme and small values of p (i8) and q (i16): the tree is linear
    in them, so each of its nodes is largest and smallest at such a corner."""
    vals = {n: sorted({t.min_value(), t.min_value() + 1, -1, 0, 1, t.max_value() - 1, t.max_value()})
            for n, t in (("p", dt.i8), ("q", dt.i16))}
    for p in vals["p"]:
        for q in vals["q"]:
            yield {"p": p, "q": q}


@SETTINGS
@given(linear_expr())
def test_narrow_arithmetic_is_exact_only_where_it_cannot_wrap(tree):
    """``y[g + (e - E)]``, e the tree computed in its fixed-width types (widened to i32) and E
    the same tree in i32 throughout (exact), is accepted only if e never wraps: e == E for every
    parameter value."""
    build, evaluate, _ = tree
    bld, m, v = kernel("k", [("y", buf("region"), None), ("p", dt.i8, None), ("q", dt.i16, None)])
    ps = {n: v[n] for n in "pq"}
    e = build(bld, ps)
    e = e if e.type is dt.i32 else bld.cast(e, dt.i32)
    wide = _widened(build, bld, {n: bld.cast(v[n], dt.i32) for n in "pq"})
    i = m.add(m.global_id(0), bld.binary("sub", e, wide))
    bld.store(v["y"], [i], bld.const(1.0, dt.f32))
    if accepted(bld.finish()):
        for env in _corners():
            assert evaluate(env, False) == evaluate(env, True), env


def _widened(build, bld, wide):
    """The same tree with every node in i32 (no node of these trees can wrap there)."""
    class _Wide:
        def __getattr__(self, name):
            return getattr(bld, name)

        def const(self, value, t):
            return bld.const(value, dt.i32)

        def cast(self, a, t):
            return a

    return build(_Wide(), wide)


# --- i32 wrap in conditions and shifts ---------------------------------------------------------
def _i32(op, *xs):
    return int(semantics.binary(op, dt.i32, *(semantics.const(dt.i32, x) for x in xs)))


def _samples(*points):
    """Global ids to try: the ends, and around every given boundary."""
    out = {0, 1, 2, I32_MAX - 1, I32_MAX}
    for p in points:
        out.update(int(p) + d for d in (-2, -1, 0, 1, 2))
    return sorted(g for g in out if 0 <= g <= I32_MAX)


@SETTINGS
@given(st.sampled_from([1, 2, 3, -1, -2]), st.sampled_from([0, 1, -5, 2**30, I32_MAX, I32_MIN, -I32_MAX]),
       st.sampled_from(["lt", "le", "gt", "ge", "eq"]), st.sampled_from([0, -1, 7, I32_MAX, I32_MIN]))
def test_a_branch_is_proved_unreachable_only_if_no_global_id_reaches_it(a, c, pred, k):
    """``if a*g + c <pred> K: y[2*g + 1] = ...``: the store is never owned, so the kernel is
    accepted only when the guard (evaluated with i32 wrap) is false for every g."""
    bld, m, v = kernel("k", [("y", buf("region"), None)])
    g = m.global_id(0)
    with bld.if_(bld.cmp(pred, m.add(m.mul(g, a), c), m.const(k))) as (then, _, _r):
        with bld.at(then):
            bld.store(v["y"], [m.add(m.mul(g, 2), 1)], bld.const(1.0, dt.f32))
    if accepted(bld.finish()):
        cuts = [(b - c) / a for b in (k, I32_MAX + 1, I32_MIN, 2 * I32_MAX + 2, 2 * I32_MIN)]
        for x in _samples(*cuts):
            value = _i32("add", _i32("mul", x, a), c)
            assert not {"lt": value < k, "le": value <= k, "gt": value > k, "ge": value >= k,
                        "eq": value == k}[pred], (x, value)


@SETTINGS
@given(st.integers(0, 35), st.integers(0, 35), st.booleans(), st.one_of(st.none(), st.integers(1, I32_MAX)))
def test_shifts_are_exact_only_where_they_cannot_wrap(s1, s2, left_first, bound):
    """``y[(g << s1) >> s2]`` (or ``>>`` first), optionally under ``if g < bound``, is accepted
    only if the index is g for every reachable g (i32 shifts)."""
    bld, m, v = kernel("k", [("y", buf("region"), None)])
    g = m.global_id(0)
    first, second = ("shl", "shr") if left_first else ("shr", "shl")
    body = bld.block
    if bound is not None:
        with bld.if_(bld.cmp("lt", g, m.const(bound))) as (then, _, _r):
            body = then
    with bld.at(body):
        i = bld.binary(second, bld.binary(first, g, m.const(s1)), m.const(s2))
        bld.store(v["y"], [i], bld.const(1.0, dt.f32))
    if accepted(bld.finish()):
        top = I32_MAX if bound is None else bound - 1
        for x in _samples(2**(31 - min(s1, 31)), 2**(31 - min(s2, 31)), top):
            if x <= top:
                assert _i32(second, _i32(first, x, s1), s2) == x, x


# --- dynamic shared views: one allocation, compared by bytes ----------------------------------
VIEW_TYPES = [dt.i8, dt.f16, dt.f32, dt.f64]


def _dyn_kernel(views, limit):
    """Two stores to dynamic shared views ``view[a*t + c]`` under ``if t < limit``, in one
    barrier interval, then a barrier."""
    bld, m, v = kernel("k", [("out", buf("raw"), None)])
    t = m.special("thread_idx", 0)
    with bld.if_(bld.cmp("lt", t, m.const(limit))) as (then, _, _r):
        with bld.at(then):
            for k, (dtype, a, c) in enumerate(views):
                arr = bld.dyn_shared(dtype, name=f"v{k}")
                bld.store(arr, [m.add(m.mul(t, a), c)], bld.const(1, dtype))
    bld.barrier()
    return bld.finish()


def _overlap(views, threads) -> bool:
    """Whether two different threads below ``threads`` write a common byte."""
    touched: dict = {}
    for dtype, a, c in views:
        for t in range(threads):
            start = dtype.itemsize * (a * t + c)
            for byte in range(start, start + dtype.itemsize):
                touched.setdefault(byte, set()).add(t)
    return any(len(ts) > 1 for ts in touched.values())


_view = st.tuples(st.sampled_from(VIEW_TYPES), st.sampled_from([0, 1, 2, 3]), st.sampled_from([0, 1, 3, 8]))


@SETTINGS
@given(st.lists(_view, min_size=2, max_size=2), st.sampled_from([1, 2, 3, 8, 64, 1024]))
def test_dynamic_shared_views_are_compared_by_bytes(views, limit):
    """Accepted only if no two threads below ``limit`` (a block has at most 1024) write a common
    byte of the allocation, whatever the views' element types."""
    if accepted(_dyn_kernel(views, limit)):
        assert not _overlap(views, min(limit, 1024)), views


@settings(SETTINGS, max_examples=60)
@given(st.lists(_view, min_size=2, max_size=2), st.sampled_from([1, 2, 3, 8, 32]))
def test_sanitizer_sees_races_between_dynamic_shared_views(views, threads):
    """The sanitizer (the checker's oracle) reports a race exactly when two threads of the block
    write a common byte, through the same view or two views of any element types."""
    be = ReferenceBackend(sanitize=True)
    k = _dyn_kernel(views, threads)
    shared = max(8 * (3 * threads + 9), 8)
    try:
        be.launch(k, (1, 1, 1), (threads, 1, 1), [np.zeros(1, np.float32)], shared_bytes=shared)
        raced = False
    except kaio.RaceError:
        raced = True
    assert raced is _overlap(views, threads), views

