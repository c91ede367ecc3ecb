"""Constant folding against numpy: every binary op x dtype (hypothesis for integers, edge
values for floats), unary ops, compares, casts, fma; plus the structural folds."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_samples import buf, builder

from kaio import dtypes as dt
from kaio.ir.ops import BINARY
from kaio.ir.scalars import canonical, round_to
from kaio.passes import constfold, dce, verify
from kaio.passes.constfold import const_value

INT_OPS = BINARY
FLOAT_OPS = ("add", "sub", "mul", "div", "rem", "min", "max")


def fold_many(out_dtype, n, build_one):
    """Build ``y[k] = build_one(b, k)`` for k < n, fold, return the stored constants (None
    where a store's value did not fold)."""
    b = builder("f", [("y", buf(out_dtype, 1, "region"))])
    (y,) = b.block.args
    for k in range(n):
        b.store(y, [b.const(k, dt.i32)], build_one(b, k))
    kern = constfold.run(b.finish())
    verify.run(kern)
    return [const_value(op.operands[-1]) for op in kern.walk() if op.opcode == "store"]


def same(got, want) -> bool:
    if isinstance(want, float):
        return isinstance(got, float) and (
            (math.isnan(got) and math.isnan(want))
            or (got == want and math.copysign(1, got) == math.copysign(1, want)))
    return got == want and type(got) is type(want)


# --- integers ---------------------------------------------------------------------------------
def int_reference(name, t, a, b):
    """numpy's answer under the IR's rules (C division, clamped shifts, wrapping)."""
    A, B = np.array([a], t.np), np.array([b], t.np)
    with np.errstate(all="ignore"):
        if name == "div":
            return int(((A - np.fmod(A, B)) // B)[0]) if b else None
        if name == "rem":
            return int(np.fmod(A, B)[0]) if b else None
        if name in ("shl", "shr"):
            amount = b % (1 << t.bits)  # read as unsigned
            if amount >= t.bits:
                return -1 if name == "shr" and a < 0 else 0
            fn = np.left_shift if name == "shl" else np.right_shift
            return int(fn(A, np.array([amount], t.np))[0])
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum,
              "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
              "xor": np.bitwise_xor}[name]
        return int(fn(A, B)[0])


def int_edges(t):
    lo, hi = t.min_value(), t.max_value()
    return sorted({lo, lo + 1, -1 % (hi + 1) if lo == 0 else -1, 0, 1, 2, 3, hi - 1, hi,
                   t.bits - 1, t.bits, t.bits + 1})


def check_int_pairs(name, t, pairs):
    got = fold_many(t, len(pairs), lambda b, k: b.binary(name, b.const(pairs[k][0], t),
                                                         b.const(pairs[k][1], t)))
    for (a, c), g in zip(pairs, got):
        assert same(g, int_reference(name, t, a, c)), (name, t, a, c, g)


@pytest.mark.parametrize("t", dt.INTS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", INT_OPS)
def test_int_binary_edges(name, t):
    e = int_edges(t)
    check_int_pairs(name, t, [(a, b) for a in e for b in e])


@pytest.mark.parametrize("t", dt.INTS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", INT_OPS)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_int_binary_random(name, t, data):
    ints = st.integers(t.min_value(), t.max_value())
    check_int_pairs(name, t, data.draw(st.lists(st.tuples(ints, ints), min_size=1, max_size=12)))


def test_int_division_by_zero_is_not_folded():
    got = fold_many(dt.i32, 2, lambda b, k: b.binary(("div", "rem")[k], b.const(7, dt.i32),
                                                     b.const(0, dt.i32)))
    assert got == [None, None]


def test_bool_logic():
    pairs = [(a, c) for a in (False, True) for c in (False, True)]
    for name, fn in (("and", np.logical_and), ("or", np.logical_or), ("xor", np.logical_xor)):
        got = fold_many(dt.bool_, 4, lambda b, k, name=name: b.binary(name, b.const(pairs[k][0], dt.bool_),
                                                           b.const(pairs[k][1], dt.bool_)))
        assert got == [bool(fn(a, c)) for a, c in pairs]


# --- floats -----------------------------------------------------------------------------------
def float_edges(t):
    fi_max = t.max_value()
    tiny = {dt.f16: 2.0 ** -24, dt.bf16: 2.0 ** -133, dt.f32: 2.0 ** -149, dt.f64: 5e-324}[t]
    raw = [0.0, -0.0, 1.0, -1.5, 3.0, 1 / 3, -2.5e-3, 7.0, fi_max, -fi_max, tiny, -tiny,
           math.inf, -math.inf, math.nan]
    return [canonical(v, t) for v in raw]


def float_reference(name, t, a, b):
    A, B = np.array([a], t.np), np.array([b], t.np)
    if name in ("min", "max") and a == b == 0:   # signed zeros: min -> -0, max -> +0
        neg = (math.copysign(1, a) < 0) or (math.copysign(1, b) < 0)
        both = (math.copysign(1, a) < 0) and (math.copysign(1, b) < 0)
        return -0.0 if (neg if name == "min" else both) else 0.0
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "rem": np.fmod, "min": np.fmin, "max": np.fmax}[name]
    with np.errstate(all="ignore"):
        return float(fn(A, B)[0])


@pytest.mark.parametrize("t", dt.FLOATS, ids=lambda t: t.name)
@pytest.mark.parametrize("name", FLOAT_OPS)
def test_float_binary_edges(name, t):
    e = float_edges(t)
    pairs = [(a, b) for a in e for b in e]
    got = fold_many(t, len(pairs), lambda b, k: b.binary(name, b.const(pairs[k][0], t),
                                                         b.const(pairs[k][1], t)))
    for (a, c), g in zip(pairs, got):
        assert same(g, float_reference(name, t, a, c)), (name, t, a, c, g)


def test_fast_div_and_approximate_math_are_not_folded():
    def one(b, k):
        x = b.const(2.0, dt.f32)
        if k == 0:
            return b.op("div", [x, x], [dt.f32], {"fast": True}).result
        return b.math(("exp", "sin")[k - 1], x)
    assert fold_many(dt.f32, 3, one) == [None, None, None]


@pytest.mark.parametrize("t", dt.FLOATS, ids=lambda t: t.name)
def test_exact_math_folds(t):
    xs = [canonical(v, t) for v in (2.0, 2.5, -2.5, -0.0, 0.3, -7.75, math.inf, math.nan)]
    fns = {"sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint}
    for fn, ref in fns.items():
        got = fold_many(t, len(xs), lambda b, k, fn=fn: b.math(fn, b.const(xs[k], t)))
        with np.errstate(all="ignore"):
            want = [float(ref(np.array([x], t.np))[0]) for x in xs]
        assert all(same(g, w) for g, w in zip(got, want)), (fn, got, want)
    preds = {"isnan": math.isnan, "isinf": math.isinf, "isfinite": math.isfinite}
    for fn, ref in preds.items():
        got = fold_many(dt.bool_, len(xs), lambda b, k, fn=fn: b.math(fn, b.const(xs[k], t)))
        assert got == [ref(x) for x in xs]


def exact_fma(a, b, c, t):
    """Independent oracle: exact rational a*b + c rounded once."""
    if not all(math.isfinite(v) for v in (a, b, c)):
        with np.errstate(all="ignore"):
            return float(np.float64(a) * np.float64(b) + np.float64(c))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        if a * b == 0 and c == 0:
            return -0.0 if (math.copysign(1, a) * math.copysign(1, b) < 0
                            and math.copysign(1, c) < 0) else 0.0
        return 0.0
    return round_to(exact, t)


@pytest.mark.parametrize("t", dt.FLOATS, ids=lambda t: t.name)
def test_fma_rounds_once(t):
    e = float_edges(t)[:12]
    triples = [(a, b, c) for a in e[:7] for b in e for c in e[:6]]
    got = fold_many(t, len(triples), lambda b, k: b.fma(*(b.const(v, t) for v in triples[k])))
    for (a, b, c), g in zip(triples, got):
        assert same(g, exact_fma(a, b, c, t)), (a, b, c, g)


def test_fma_f32_is_not_mul_then_add():
    # exact a*b + c = 1 + 2^-23 + 2^-24 - 2^-70: just below a tie, so 1 + 2^-23; rounding the
    # sum to f64 first would make it a tie and round to even (1 + 2^-22).
    a, b, c = 2.0 ** -24 * (1 + 2.0 ** -23), 1 - 2.0 ** -23, 1 + 2.0 ** -23
    (g,) = fold_many(dt.f32, 1, lambda bb, k: bb.fma(*(bb.const(v, dt.f32) for v in (a, b, c))))
    assert g == 1 + 2.0 ** -23


# --- unary, compares, casts -----------------------------------------------------------------------
@pytest.mark.parametrize("t", dt.INTS + dt.FLOATS, ids=lambda t: t.name)
def test_unary(t):
    xs = float_edges(t) if t.is_float else int_edges(t)
    names = ("neg", "abs") if t.is_float else ("neg", "abs", "not")
    for name in names:
        got = fold_many(t, len(xs), lambda b, k, name=name: b.unary(name, b.const(xs[k], t)))
        fn = {"neg": np.negative, "abs": np.abs, "not": np.invert}[name]
        with np.errstate(all="ignore"):
            want = [fn(np.array([x], t.np))[0].item() for x in xs]
        want = [float(w) if t.is_float else int(w) for w in want]
        assert all(same(g, w) for g, w in zip(got, want)), (name, got, want)


@pytest.mark.parametrize("t", [dt.i8, dt.u32, dt.i64, dt.f16, dt.bf16, dt.f64], ids=lambda t: t.name)
def test_cmp(t):
    xs = float_edges(t) if t.is_float else int_edges(t)
    pairs = [(a, b) for a in xs for b in xs]
    for pred, fn in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                     ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
        got = fold_many(dt.bool_, len(pairs), lambda b, k, pred=pred: b.cmp(pred, b.const(pairs[k][0], t),
                                                                 b.const(pairs[k][1], t)))
        with np.errstate(all="ignore"):
            assert got == [bool(fn(np.array(a, t.np), np.array(c, t.np))) for a, c in pairs]


@pytest.mark.parametrize("src", dt.FLOATS, ids=lambda t: t.name)
@pytest.mark.parametrize("dst", [dt.i8, dt.u8, dt.i32, dt.u32, dt.i64, dt.u64], ids=lambda t: t.name)
def test_float_to_int_cast_saturates(src, dst):
    xs = [canonical(v, src) for v in (0.0, -0.0, 2.9, -2.9, 255.5, -129.0, 3e9, -3e9, 1e30,
                                      -1e30, math.inf, -math.inf, math.nan)]
    got = fold_many(dst, len(xs), lambda b, k: b.cast(b.const(xs[k], src), dst))
    want = [0 if math.isnan(x) else dst.max_value() if x >= dst.max_value() + 1 else
            dst.min_value() if x <= dst.min_value() - 1 else int(x) for x in xs]
    assert got == want


@pytest.mark.parametrize("src", [dt.i8, dt.u16, dt.i32, dt.u32, dt.i64, dt.f32, dt.f64],
                         ids=lambda t: t.name)
@pytest.mark.parametrize("dst", [dt.f16, dt.f32, dt.f64, dt.i8, dt.u8, dt.i64, dt.bool_],
                         ids=lambda t: t.name)
def test_casts_match_numpy(src, dst):
    if src.is_float:
        xs = [canonical(v, src) for v in (0.0, -0.0, 1.5, -3.25, 70000.5, 1e-8, 100.0)]
    else:
        xs = [v for v in int_edges(src) if abs(v) < 2 ** 24]  # exact through f32 in numpy
    got = fold_many(dst, len(xs), lambda b, k: b.cast(b.const(xs[k], src), dst))
    with np.errstate(all="ignore"):
        if dst.is_float or dst.is_bool or src.is_int:
            want = [np.array([x], src.np).astype(dst.np)[0].item() for x in xs]
        else:  # in-range float -> int: truncation
            want = [int(x) if dst.min_value() <= int(x) <= dst.max_value() else None for x in xs]
    for g, w, x in zip(got, want, xs):
        if w is not None:
            assert same(g, float(w) if dst.is_float else w), (x, g, w)


def test_cast_to_bf16_rounds_once():
    # 1 + 2^-8 + 2^-30 is above the tie between bf16 1.0 and 1.0078125; rounding through f32
    # first (as ml_dtypes' f64 -> bf16 cast does) would lose the 2^-30 and give 1.0.
    x = 1 + 2.0 ** -8 + 2.0 ** -30
    (g,) = fold_many(dt.bf16, 1, lambda b, k: b.cast(b.const(x, dt.f64), dt.bf16))
    assert g == 1.0078125


def test_bitcast_folds_and_keeps_nan_unfolded():
    got = fold_many(dt.u32, 2, lambda b, k: b.bitcast(b.const((1.0, math.nan)[k], dt.f32), dt.u32))
    assert got == [0x3F800000, None]
    (g,) = fold_many(dt.f16, 1, lambda b, k: b.bitcast(b.const(0x8000, dt.u16), dt.f16))
    assert same(g, -0.0)


# --- structural folds and identities ------------------------------------------------------------
def _fold(build, out=dt.i32, extra=()):
    b = builder("s", [("y", buf(out, 1, "region")), ("p", out), *extra])
    build(b, *b.block.args)
    k = dce.run(constfold.run(b.finish()))
    verify.run(k)
    return k


def _ops(k):
    return [op.opcode for op in k.walk()]


def test_int_identities_fold_float_plus_zero_does_not():
    def build(b, y, p):
        i = b.special("thread_idx", 0)
        z, one = b.const(0, dt.i32), b.const(1, dt.i32)
        v = b.binary("add", b.binary("mul", b.binary("sub", p, z), one), z)
        v = b.binary("xor", b.binary("or", b.binary("shl", v, z), z), z)
        b.store(y, [i], b.binary("add", v, b.binary("mul", i, z)))
    k = _fold(build)
    (store,) = [op for op in k.walk() if op.opcode == "store"]
    assert store.operands[-1] is k.body.args[1]

    def fbuild(b, y, p):
        i = b.special("thread_idx", 0)
        b.store(y, [i], b.binary("add", b.binary("mul", p, b.const(0.0, dt.f32)),
                                 b.const(0.0, dt.f32)))
    k = _fold(fbuild, dt.f32)
    assert _ops(k).count("add") == 1 and _ops(k).count("mul") == 1  # -0.0, NaN, inf stay exact

    def one(b, y, p):
        i = b.special("thread_idx", 0)
        b.store(y, [i], b.binary("div", b.binary("mul", p, b.const(1.0, dt.f32)), b.const(1.0, dt.f32)))
    k = _fold(one, dt.f32)
    assert "mul" not in _ops(k) and "div" not in _ops(k)


def test_folding_chains_through_casts_and_compares():
    def build(b, y, p):
        i = b.special("thread_idx", 0)
        big = b.binary("mul", b.const(70000, dt.i32), b.const(70000, dt.i32))  # wraps
        small = b.cast(big, dt.i16)
        c = b.cmp("lt", b.cast(small, dt.i32), b.const(0, dt.i32))
        b.store(y, [i], b.select(c, b.const(1, dt.i32), b.const(2, dt.i32)))
    k = _fold(build)
    want = 2 if np.int16(np.int32(np.int64(70000) * 70000 % 2**32 - 2**32)) >= 0 else 1
    assert _ops(k) == ["thread_idx", "const", "store"]
    assert const_value(k.body.ops[-1].operands[-1]) == want


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_constant_condition_inlines_taken_branch(cond):
    def build(b, y, p):
        i = b.special("thread_idx", 0)
        with b.if_(b.const(cond, dt.bool_), [dt.i32]) as (then, other, (r,)):
            with b.at(then):
                b.store(y, [i], p)
                b.yield_(b.binary("add", p, b.const(1, dt.i32)))
            with b.at(other):
                b.yield_(b.binary("sub", p, b.const(1, dt.i32)))
        b.store(y, [i], r)
    k = _fold(build)
    assert "if" not in _ops(k)
    stores = [op for op in k.walk() if op.opcode == "store"]
    assert len(stores) == (2 if cond else 1)
    assert stores[-1].operands[-1].owner.opcode == ("add" if cond else "sub")


def test_select_on_constant_condition():
    def build(b, y, p):
        i = b.special("thread_idx", 0)
        b.store(y, [i], b.select(b.const(False, dt.bool_), i, p))
    k = _fold(build)
    assert "select" not in _ops(k)
    assert k.body.ops[-1].operands[-1] is k.body.args[1]


@pytest.mark.parametrize("lb, ub, step, folds", [(5, 5, 1, True), (6, 5, 1, True), (0, 5, 1, False),
                                                 (0, 5, -1, True), (5, 0, -1, False),
                                                 (5, 5, 0, False)])
def test_for_with_zero_trip_count_becomes_its_inits(lb, ub, step, folds):
    def build(b, y, p):
        i = b.special("thread_idx", 0)
        op, body, iv, (acc,) = b.for_(b.const(lb, dt.i32), b.const(ub, dt.i32),
                                      b.const(step, dt.i32), [p])
        with b.at(body):
            b.store(y, [i], iv)
            b.yield_(b.binary("add", acc, iv))
        b.store(y, [i], op.results[0])
    k = _fold(build)
    assert ("for" not in _ops(k)) == folds
    if folds:
        assert k.body.ops[-1].operands[-1] is k.body.args[1]


def test_fold_preserves_location():
    b = builder("loc", [("y", buf(dt.i32, 1, "region"))])
    from kaio.ir import Loc
    b.loc = Loc("user.py", 42, 8)
    b.store(b.block.args[0], [b.const(0, dt.i32)],
            b.binary("add", b.const(2, dt.i32), b.const(3, dt.i32)))
    k = constfold.run(b.finish())
    c = k.body.ops[-1].operands[-1].owner
    assert c.opcode == "const" and c.attrs["value"] == 5 and c.loc.line == 42


# --- canonical constants (kaio.ir.scalars) ---------------------------------------------------------
def test_round_to_matches_numpy_single_roundings():
    rng = np.random.default_rng(5)
    h = rng.standard_normal(4000).astype(np.float16)
    h = h[np.isfinite(h)]
    up = np.nextafter(h, np.float16(np.inf))
    mids = (h.astype(np.float64) + up.astype(np.float64)) / 2  # exact ties
    for x in np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)]):
        assert round_to(float(x), dt.f16) == float(np.float16(x))
    f = (rng.standard_normal(4000) * 1e3).astype(np.float32)
    for x in f:  # f32 -> bf16 is a single rounding in ml_dtypes
        assert round_to(float(x), dt.bf16) == float(x.astype(dt.bf16.np))
    assert round_to(2**53 + 1, dt.f64) == 2.0**53 and round_to(2**24 + 3, dt.f32) == 2.0**24 + 4
    assert round_to(2**64 - 1, dt.f32) == 2.0**64 and round_to(70000, dt.f16) == math.inf
    assert round_to(2.0 ** -25, dt.f16) == 0.0 and round_to(-(2.0 ** -25), dt.f16) == -0.0
    assert round_to(3 * 2.0 ** -26, dt.f16) == 2.0 ** -24  # above half the smallest subnormal


def test_canonical_wraps_ints_and_rounds_floats():
    assert canonical(-1, dt.u32) == 2**32 - 1 and canonical(128, dt.i8) == -128
    assert canonical(1.0000001, dt.bf16) == 1.0 and canonical(True, dt.f32) == 1.0
    assert canonical(np.float32(0.1), dt.f64) == float(np.float32(0.1))
