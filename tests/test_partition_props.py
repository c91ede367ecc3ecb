"""Every partition states its owned set twice: ``owned_spec`` (loops in i32 IR: the owner maps of
the sanitizer and ``for i in y.owned()`` run it) and ``owned_affine`` (the obligations the race
checker proves, over exact integers), plus ``launch_facts`` (what the checker assumes of every
launch). These properties tie them together for every registered partition:

- on small shapes and launches, a thread's in-bounds owned set from ``owned_spec`` is exactly
  the set of in-bounds indices meeting ``owned_affine`` (through the checker's own SymMath);
- on any launch ``check_launch`` accepts, up to the i32 limits, ``owned_spec``'s i32 arithmetic
  never wraps (so the i32 loops mean what the exact obligations say), and ``launch_facts`` hold.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import kaio
from kaio.regions import PARTITIONS, Blocked, Elementwise, GridStride, PerBlock, RowsPerBlock, Tiles
from kaio.regions.affine import Divides, Eq, Nonneg, Poly, SymbolTable, SymMath
from kaio.regions.partitions import NumericMath, owned_indices

I32_MAX = 2**31 - 1
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


class _Buf:
    """What owned_spec / owned_affine read of a buffer: its rank (shapes come from the ctx)."""

    def __init__(self, ndim):
        self.id = 0

        class type:  # noqa: N801
            static_shape = None
        type.ndim = ndim
        self.type = type


def _partition(cls, small: bool):
    """A strategy for instances of a registered partition class, from its int fields."""
    hi = 6 if small else I32_MAX

    def field(f):   # a bool flag, an optional int (None: the tile is the block), an int
        if f.type in (bool, "bool"):
            return st.booleans()
        ints = st.integers(1, 1024 if f.name == "block" else hi)
        return st.one_of(st.none(), ints) if "None" in str(f.type) else ints
    return st.builds(cls, **{f.name: field(f) for f in dataclasses.fields(cls)})


PARTS = sorted(PARTITIONS.items())


def _ndim(part, draw):
    return part.ndim or draw(st.integers(1, 3))


def _launch(draw, small: bool):
    """(grid, block): a 1-D launch half the time (several partitions need one)."""
    one_d = draw(st.booleans())
    if small:
        grid = tuple(draw(st.integers(1, 3)) if a == 0 or not one_d else 1 for a in range(3))
        block = tuple(draw(st.integers(1, 4)) if a == 0 or not one_d else 1 for a in range(3))
        return grid, block
    gmax = (I32_MAX, 65535, 65535)
    grid = tuple(draw(st.one_of(st.integers(1, 4), st.integers(1, gmax[a]))) if a == 0 or not one_d else 1
                 for a in range(3))
    block = [draw(st.sampled_from([1, 2, 3, 32, 256, 1024])) if a == 0 or not one_d else 1 for a in range(3)]
    while math.prod(block) > 1024:
        block[block.index(max(block))] //= 2
    return grid, tuple(block)


def _accepted(part, shape, grid, block) -> bool:
    try:
        part.check_launch(shape, grid, block, buffer="y", kernel="k")
        return True
    except kaio.LaunchError:
        return False


# --- owned_spec == owned_affine on small launches -------------------------------------------
def _geometry(grid, block, tid, bid) -> dict:
    env = {}
    for a, ax in enumerate("xyz"):
        env[f"thread_idx.{ax}"], env[f"block_idx.{ax}"] = tid[a], bid[a]
        env[f"block_dim.{ax}"], env[f"grid_dim.{ax}"] = block[a], grid[a]
    return env


def _value(p: Poly, env, table):
    """p at env (numpy arrays allowed); atoms (div/rem/min/max) evaluated as the IR does."""
    total = 0
    for m, c in p.t.items():
        term = c
        for s in m:
            if s not in env:
                op, a, b = table.info[s].atom
                x, y = _value(a, env, table), _value(b, env, table)
                q = np.fix(x / y).astype(np.int64) if op in ("div", "rem") else None
                env[s] = {"div": q, "rem": x - y * q if q is not None else None,
                          "min": np.minimum(x, y), "max": np.maximum(x, y)}[op]
            term = term * env[s]
        total = total + term
    return total


def _holds(ob, env, table):
    if isinstance(ob, Eq):
        return _value(ob.p, env, table) == 0
    if isinstance(ob, Nonneg):
        return _value(ob.p, env, table) >= 0
    assert isinstance(ob, Divides), ob
    p, d = _value(ob.p, env, table), _value(ob.d, env, table)
    return (p % d == 0) & (p // d >= 0) if np.all(d > 0) else p == 0


@st.composite
def small_case(draw, cls):
    part = draw(_partition(cls, small=True))
    ndim = _ndim(part, draw)
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    grid, block = _launch(draw, small=True)
    assume(_accepted(part, shape, grid, block))
    return part, shape, grid, block


def _spec_matches_affine(part, shape, grid, block):
    buf = _Buf(len(shape))
    table = SymbolTable()
    ctx = SymMath(table, lambda b, axis: Poly.const(shape[axis]))
    # registered like the checker's index symbols, so obligations may hold div/rem atoms of them
    index = [table.add(f"i{a}") for a in range(len(shape))]
    obligations = part.owned_affine(ctx, buf, index)
    grids = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
    for bid in np.ndindex(*grid):
        for tid in np.ndindex(*block):
            env = _geometry(grid, block, tid, bid)
            env.update({f"i{a}": grids[a].astype(np.int64) for a in range(len(shape))})
            owned = np.ones(shape, dtype=bool)
            for ob in obligations:
                owned &= _holds(ob, env, table)
            spec = {ix for ix in owned_indices(part, NumericMath(shape, grid, block, tid, bid), buf)
                    if all(0 <= i < s for i, s in zip(ix, shape))}
            affine = {tuple(int(i) for i in ix) for ix in zip(*np.nonzero(owned))}
            assert spec == affine, (part, shape, grid, block, tid, bid, sorted(spec ^ affine)[:4])


@SETTINGS
@given(st.sampled_from(PARTS).flatmap(lambda nc: small_case(nc[1])))
def test_owned_spec_and_owned_affine_agree(case):
    _spec_matches_affine(*case)


# --- no i32 wrap in owned_spec, launch facts hold, on accepted launches up to the limits -----
class _I32Math(NumericMath):
    """NumericMath that fails on any intermediate value outside i32 (where the IR would wrap)."""

    def _ok(self, v):
        assert -I32_MAX - 1 <= v <= I32_MAX, f"i32 wrap: {v}"
        return v

    def add(self, a, b): return self._ok(a + b)
    def sub(self, a, b): return self._ok(a - b)
    def mul(self, a, b): return self._ok(a * b)
    def div(self, a, b): return self._ok(int(a / b) if b else 0)


def _corners(grid, block):
    """The threads with each id at 0 or at its largest value, on every axis."""
    for bid in np.ndindex(*[2 if g > 1 else 1 for g in grid]):
        for tid in np.ndindex(*[2 if b > 1 else 1 for b in block]):
            yield (tuple(t * (b - 1) for t, b in zip(tid, block)),
                   tuple(t * (g - 1) for t, g in zip(bid, grid)))


def _spec_never_wraps(part, shape, grid, block):
    buf = _Buf(len(shape))
    for tid, bid in _corners(grid, block):
        ctx = _I32Math(shape, grid, block, tid, bid)
        spec = part.owned_spec(ctx, buf)
        ivs = []
        for lb, ub, step in spec.ranges:
            if step > 0 and ub > lb:   # the increment after the last iteration stays in i32
                last = lb + (ub - 1 - lb) // step * step
                ctx._ok(last + step)
                ivs.append((lb, last))
            else:
                ivs.append((lb, lb))
        for pick in np.ndindex(*[2] * len(ivs)):
            spec.index(*[iv[k] for iv, k in zip(ivs, pick)])


def _launch_facts_hold(part, shape, grid, block):
    table = SymbolTable()
    ctx = SymMath(table, lambda b, axis: Poly.const(shape[axis]))
    facts = part.launch_facts(ctx, _Buf(len(shape)))
    for tid, bid in _corners(grid, block):
        env = _geometry(grid, block, tid, bid)
        for f in facts:
            assert _value(f, dict(env), table) >= 0, (part, f)


@st.composite
def big_case(draw, cls):
    part = draw(_partition(cls, small=False))
    ndim = _ndim(part, draw)
    grid, block = _launch(draw, small=False)
    assume(math.prod(grid) * math.prod(block) <= 2**31)   # kaio.launch: linear ids fit in i32
    threads = grid[0] * block[0]
    near = st.sampled_from([1, threads, threads * getattr(part, "k", 1), I32_MAX - threads, I32_MAX])
    shape = tuple(draw(st.one_of(st.integers(1, I32_MAX), near.map(lambda v: max(1, min(v, I32_MAX)))))
                  for _ in range(ndim))
    assume(_accepted(part, shape, grid, block))
    return part, shape, grid, block


@SETTINGS
@given(st.sampled_from(PARTS).flatmap(lambda nc: big_case(nc[1])))
def test_owned_spec_i32_arithmetic_never_wraps_on_accepted_launches(case):
    _spec_never_wraps(*case)


@SETTINGS
@given(st.sampled_from(PARTS).flatmap(lambda nc: big_case(nc[1])))
def test_launch_facts_hold_on_accepted_launches(case):
    _launch_facts_hold(*case)


@pytest.mark.parametrize("part, shape, grid, block", [
    (Blocked(4), (100,), (2**21, 1, 1), (256, 1, 1)),            # g*4 + 4 past 2**31 - 1
    (GridStride(), (2**31 - 100,), (1, 1, 1), (256, 1, 1)),      # i + G past it
    (RowsPerBlock(), (2, 2**31 - 100), (2, 1, 1), (256, 1, 1)),  # column + B past it
    (Tiles(2**30, 4), (4, 4), (1, 2, 1), (4, 4, 1)),             # (grid.y + 1) * th
    (Elementwise(), (2**16, 2**15), (2**23, 1, 1), (256, 1, 1)),  # 2**31 elements
    (PerBlock(), (4,), (2**31 - 1, 2, 1), (1, 1, 1)),            # the linear block id
])
def test_launches_on_which_a_partitions_i32_arithmetic_wraps_are_refused(part, shape, grid, block):
    with pytest.raises(kaio.LaunchError, match=r"i32 index arithmetic needs .* <= 2\*\*31 - 1"):
        part.check_launch(shape, grid, block, buffer="y", kernel="k")
