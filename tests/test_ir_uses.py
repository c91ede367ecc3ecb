"""Use-lists, typed attributes and kernel copies: the IR invariants passes rely on.

- every value knows its users; building ops, assigning operands and erasing keep that right, and
  a replacement touches only the users, so passes are linear in the kernel's size (measured here
  by counting the ops the passes visit, never by timing);
- attributes are typed per opcode: a wrong key or value is refused where it is written;
- ``clone_kernel`` is a complete deep copy (the target pipeline works on one).
"""
from __future__ import annotations

import dataclasses

import pytest
from ir_samples import buf, builder, every_op_kernel

import kaio
from kaio import dtypes as dt
from kaio.ir import Op, parse_kernel, print_kernel
from kaio.ir.attrs import AttrError
from kaio.ir.core import Block
from kaio.ir.rewrite import clone_kernel, detach, erase
from kaio.passes import expand_math, target_pipeline, verify
from kaio.passes.verify import IRVerifyError


def _chain(n: int):
    """``y[i] = f_n(...f_1(x[i]))``: ``n`` portable math calls in one straight-line block."""
    b = builder("chain", [("x", buf(dt.f32)), ("y", buf(dt.f32, 1, "raw"))])
    x, y = b.block.args
    i = b.special("thread_idx", 0)
    v = b.load(x, [i])
    for k in range(n):
        v = b.math(("exp", "sin", "log")[k % 3], v)
    b.store(y, [i], v)
    return b.finish()


# --- use-lists ---------------------------------------------------------------------------------
def test_users_follow_construction_assignment_and_erasure():
    b = builder("u", [("y", buf(dt.i32, 1, "region"))])
    (y,) = b.block.args
    i = b.special("thread_idx", 0)
    s = b.binary("add", i, i)                  # two uses by one op: listed once
    st = b.store(y, [i], s)
    assert i.users == (s.owner, st) and s.users == (st,) and y.users == (st,)
    st.operands = [y, s, s]                    # assigning operands moves the op between users
    assert i.users == (s.owner,) and s.users == (st,)
    assert s.replace_all_uses_with(i) == 2 and i.users == (s.owner, st) and not s.is_used
    erase(s.owner)                             # leaves the IR: no longer a user of i
    assert i.users == (st,)
    verify.run(b.finish())


def test_replacement_skips_kept_users_and_moving_keeps_uses():
    b = builder("u", [("y", buf(dt.i32, 1, "region"))])
    (y,) = b.block.args
    i = b.special("thread_idx", 0)
    lane = b.special("lane_id")
    a, st = b.binary("add", i, i).owner, b.store(y, [i], i)
    assert i.replace_all_uses_with(lane, keep=(a,)) == 2 and i.users == (a,)
    detach(a)
    assert i.users == (a,)                     # detached to be placed elsewhere: still a user
    b.block.ops.insert(0, a)
    a.parent = b.block
    with pytest.raises(IRVerifyError, match="not defined before this use"):
        verify.run(b.finish())                 # (it was placed before i: the verifier says so)
    assert st.operands == (y, lane, lane)


def test_operands_are_values_and_read_only():
    b = builder("u", [("n", dt.i32)])
    (n,) = b.block.args
    op = b.op("add", [n, n], [dt.i32])
    with pytest.raises(TypeError):
        op.operands[0] = n                     # a tuple: only assignment (which keeps use-lists)
    with pytest.raises(TypeError, match="is not an IR value"):
        Op("add", [n, 3], [dt.i32])


def test_verifier_finds_a_user_outside_the_kernel():
    b = builder("u", [("n", dt.i32)])
    (n,) = b.block.args
    Op("neg", [n], [dt.i32])                   # built, never placed, never erased
    with pytest.raises(IRVerifyError, match="lists a user 'neg' that is not in the kernel"):
        verify.run(b.finish())


def test_erasing_a_used_op_is_refused():
    b = builder("u", [("y", buf(dt.i32, 1, "region"))])
    (y,) = b.block.args
    i = b.special("thread_idx", 0)
    b.store(y, [i], i)
    with pytest.raises(ValueError, match="still used by store"):
        erase(i.owner)


def test_frontend_trial_lowering_leaves_no_users():
    """The frontend lowers loop bodies once in a throwaway block to learn types; those ops must
    not stay users of the kernel's values (the verifier checks use-lists on every kernel)."""
    @kaio.kernel
    def acc(x: kaio.In[kaio.f32], y: kaio.Out[kaio.f32]):
        for i in y.owned():
            s = 0.0
            for k in range(4):
                s = s + x[i] * k
            y[i] = s

    k = acc.specialize_ir({})
    verify.run(k)
    (x, y) = k.args
    assert all(u.opcode in ("load", "shape") for u in x.users)


# --- passes touch only what they change ------------------------------------------------------
class _Visits:
    """Counts op visits while active -- ops yielded by walks (every whole-kernel scan goes
    through Block.walk) and reads of an op's operands (what every pass does to an op it looks
    at) -- so a pass's work can be compared across kernel sizes without timing it."""

    def __init__(self, monkeypatch):
        self.n = 0
        walk, operands = Block.walk, Op.operands

        def counted_walk(blk):
            for op in walk(blk):
                self.n += 1
                yield op

        def counted_operands(op):
            self.n += 1
            return operands.fget(op)
        monkeypatch.setattr(Block, "walk", counted_walk)
        monkeypatch.setattr(Op, "operands", property(counted_operands, operands.fset))

    def count(self, fn, *args):
        self.n = 0
        fn(*args)
        return self.n


@pytest.mark.parametrize("stage", ["expand_math", "target_pipeline"])
def test_passes_scale_linearly_with_the_kernel(monkeypatch, stage):
    """8x the math ops is about 8x the ops visited (it was 64x when every replacement walked
    the whole kernel: 8x the ops to replace, each walking an 8x larger kernel)."""
    run = {"expand_math": lambda k: expand_math.run(clone_kernel(k)),
           "target_pipeline": lambda k: target_pipeline(k, 32)}[stage]
    small, large = _chain(6), _chain(48)
    visits = _Visits(monkeypatch)
    ratio = visits.count(run, large) / visits.count(run, small)
    assert 6 <= ratio <= 10, ratio


# --- typed attributes --------------------------------------------------------------------------
def test_attrs_are_checked_when_built_and_when_written():
    b = builder("a", [("n", dt.i32)])
    (n,) = b.block.args
    with pytest.raises(AttrError, match="'cmp' has no attribute 'prd'"):
        b.op("cmp", [n, n], [dt.bool_], {"prd": "lt"})
    op = b.op("cmp", [n, n], [dt.bool_], {"pred": "lt"})
    with pytest.raises(AttrError, match="pred = 'less' must be one of"):
        op.attrs["pred"] = "less"
    with pytest.raises(AttrError):
        op.attrs.update(pred=3)
    assert op.attrs == {"pred": "lt"}
    k = b.finish()
    with pytest.raises(AttrError, match="kernel has no attribute 'grid'"):
        k.attrs["grid"] = [256, 1, 1]
    k.attrs["block"] = [32, 8, 1]   # the declared block shape: stored as a tuple
    assert k.attrs["block"] == (32, 8, 1)
    with pytest.raises(AttrError, match="block = .* must be a non-empty list of positive ints"):
        k.attrs["block"] = [32, 0, 1]
    k.attrs["launch_dims"] = 2
    with pytest.raises(AttrError, match="launch_dims = 4 must be an int in 1..3"):
        k.attrs["launch_dims"] = 4


def test_alloc_attrs_are_a_dtype_and_a_tuple():
    b = builder("a")
    s = b.shared_array(dt.f16, [4, 8])
    assert s.owner.attrs == {"dtype": dt.f16, "shape": (4, 8)}
    text = print_kernel(b.finish())
    assert "shared_array {dtype = f16, shape = [4, 8]}" in text
    (op,) = parse_kernel(text).body.ops
    assert op.attrs["dtype"] is dt.f16 and op.attrs["shape"] == (4, 8)


def test_parser_reports_a_badly_typed_attr_with_its_line():
    text = "kernel @k() params {} {\n  %a = const {value = 1} : i32\n  %b = lane_id {axis = 0} : i32\n}"
    with pytest.raises(kaio.ir.ParseError, match="line 3: 'lane_id' has no attribute 'axis'"):
        parse_kernel(text)


# --- copies ------------------------------------------------------------------------------------
def test_clone_kernel_is_a_complete_independent_copy():
    k = every_op_kernel()
    k.attrs["launch_dims"] = 1
    k.params[1] = dataclasses.replace(k.params[1], partition=kaio.regions.blocked(4))
    c = clone_kernel(k)
    verify.run(c)
    assert print_kernel(c) == print_kernel(k)
    old = {id(op) for op in k.walk()}
    assert not any(id(op) in old for op in c.walk())
    assert not any(id(u) in old for v in c.args for u in v.users)     # use-lists are the copy's
    assert all(u.parent is not None for v in k.args for u in v.users)
    assert c.attrs == k.attrs and c.attrs is not k.attrs
    assert c.params == k.params and c.params[1] is not k.params[1]
    assert c.params[1].partition == kaio.regions.blocked(4)
    alloc = next(op for op in c.walk() if op.opcode == "shared_array")
    assert alloc.attrs["dtype"] is dt.f32                            # dtypes keep their identity
    # changing the copy leaves the original as it was
    before = print_kernel(k)
    target_pipeline(c, 32)
    next(op for op in c.walk() if op.opcode == "for").attrs["unrolled"] = 2
    c.attrs["launch_dims"] = 3
    assert print_kernel(k) == before
    verify.run(k)


def _unnamed(k) -> str:
    """The kernel's text with every value numbered (names are hints; the parser turns printed,
    made-unique names into new hints, so only a copy through text renames values)."""
    for op in k.walk():
        for v in [*op.results, *(a for r in op.regions for a in r.args)]:
            v.name = None
    return print_kernel(k)


@pytest.mark.parametrize("kernel", [every_op_kernel, lambda: _chain(3)])
def test_clone_matches_a_print_and_parse_copy_through_the_pipeline(kernel):
    """The target pipeline used to copy kernels by printing and re-parsing them; the clone
    gives the same lowered IR, value names aside."""
    k = kernel()
    assert _unnamed(target_pipeline(k, 64)) == \
        _unnamed(target_pipeline(parse_kernel(print_kernel(k)), 64))


def test_clone_refuses_a_value_from_outside_the_kernel():
    other = builder("o", [("n", dt.i32)])
    b = builder("k", [("m", dt.i32)])
    b.unary("neg", other.block.args[0])
    with pytest.raises(ValueError, match="not defined in the kernel being copied"):
        clone_kernel(b.finish())
