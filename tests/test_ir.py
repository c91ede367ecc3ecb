"""IR text form: printer/parser round trips (every op, nested regions, special floats) and
parse errors."""
from __future__ import annotations

import math

import pytest
from ir_samples import buf, builder, every_op_kernel

from kaio import dtypes as dt
from kaio.ir import Loc, ParseError, parse_kernel, print_kernel
from kaio.ir import ops as O
from kaio.ir.rewrite import detach, erase, inline_region, insert_before
from kaio.ir.scalars import canonical
from kaio.passes import verify


def _structure(k):
    """A comparable summary: (opcode, attrs, result types, operand positions, regions)."""
    ids = {}

    def num(v):
        return ids.setdefault(v.id, len(ids))

    def block(b):
        return ([(num(a), str(a.type)) for a in b.args],
                [(op.opcode, repr(op.attrs), [str(r.type) for r in op.results],
                  [num(v) for v in op.operands], [num(r) for r in op.results],
                  [block(r) for r in op.regions], op.loc) for op in b.ops])

    return k.name, [(p.name, p.kind, p.partition) for p in k.params], block(k.body)


@pytest.mark.parametrize("with_locs", [True, False])
def test_round_trip_every_op(with_locs):
    k = every_op_kernel(fragments=True)
    assert {op.opcode for op in k.walk()} == set(O.SPECS), "the sample must cover every opcode"
    text = print_kernel(k, with_locs=with_locs)
    k2 = parse_kernel(text)
    verify.run(k2)
    assert print_kernel(k2, with_locs=with_locs) == text
    if with_locs:
        assert _structure(k2) == _structure(k)


def test_round_trip_preserves_names_and_attrs():
    k = every_op_kernel()
    k.attrs["launch_dims"] = 2
    k2 = parse_kernel(print_kernel(k))
    assert k2.attrs == {"launch_dims": 2} and k2.loc == k.loc == Loc("sample.py", 1, 0)
    fors = [op for op in k2.walk() if op.opcode == "for"]
    assert fors[0].attrs == {"owned": "y"} and fors[0].regions[0].args[0].name == "it"
    assert [p.name for p in k2.params] == ["x", "y", "c", "n", "a"]
    assert k2.param_value("n").type is dt.i32


@pytest.mark.parametrize("dtype", [dt.f16, dt.bf16, dt.f32, dt.f64])
def test_special_float_constants_round_trip(dtype):
    values = [math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324 if dtype is dt.f64 else 2.0 ** -24,
              1.0000001, 1e300 if dtype is dt.f64 else 65504.0, -1.5e-7]
    b = builder("floats", [("y", buf(dtype, 1, "region"))])
    (y,) = b.block.args
    i = b.special("thread_idx", 0)
    for v in values:
        b.store(y, [i], b.const(v, dtype))
    k = b.finish()
    k2 = parse_kernel(print_kernel(k))
    got = [op.attrs["value"] for op in k2.walk() if op.opcode == "const"]
    assert len(got) == len(values)
    for g, v in zip(got, values):
        assert isinstance(g, float)
        if math.isnan(v):
            assert math.isnan(g)
        else:
            want = canonical(v, dtype)
            assert g == want and math.copysign(1, g) == math.copysign(1, v), (g, v)


def test_int_constants_round_trip_extremes():
    b = builder("ints", [("y", buf(dt.u64, 1, "region")), ("z", buf(dt.i64, 1, "region"))])
    y, z = b.block.args
    i = b.special("thread_idx", 0)
    b.store(y, [i], b.const(2**64 - 1, dt.u64))
    b.store(z, [i], b.const(-2**63, dt.i64))
    k2 = parse_kernel(print_kernel(b.finish()))
    assert [op.attrs["value"] for op in k2.walk() if op.opcode == "const"] == [2**64 - 1, -2**63]


def test_op_after_result_free_op_is_not_swallowed():
    """`barrier` then `%v = ...` on the next line: the %v is not barrier's operand."""
    text = """kernel @k(%y: buf<i32, 1, global, region>) params {y = {kind = "buffer"}} {
  barrier
  %t = thread_idx {axis = 0} : i32
  store %y, %t, %t
  %u = lane_id : i32
}
"""
    k = parse_kernel(text)
    assert [op.opcode for op in k.walk()] == ["barrier", "thread_idx", "store", "lane_id"]
    assert k.body.ops[0].operands == ()
    assert print_kernel(k) == text


@pytest.mark.parametrize("text, message", [
    ("kernel @k() params {} {\n  %a = add %b, %b : i32\n}", "undefined value %b"),
    ("kernel @k() params {} {\n  %a = const {value = ?} : i32\n}", "unexpected character"),
    ("kernel @k() params {} {\n  %a, %b = lane_id : i32\n}", "2 results but 1 types"),
    ("kernel @k() params {} {\n  barrier\n}\nextra", "trailing text"),
    ("kernel @k() params {} {\n  barrier\n", "unexpected end"),
    ("kernel @k() params {} {\n  %a = const {value = ]} : i32\n}", "bad attribute value"),
    ("kernel @k() params {} {\n  = barrier\n}", "expected an opcode"),
    ("kernel @k() params {} {\n  %a = lane_id : i32\n  store %a, \n}", "expected an operand"),
    ("kernel @k() params {} {\n  %a = lane_id : i33\n}", "unknown dtype"),
    ("kernel @k(%n: i32) params {} {\n}", "no entry in the params table"),
    ("kernel @k() params {} {\n  barrier loc(3:4)\n}", "quoted file name"),
])
def test_parse_errors(text, message):
    with pytest.raises((ParseError, ValueError), match=message):
        parse_kernel(text)


def test_parse_error_names_line():
    with pytest.raises(ParseError, match="line 3"):
        parse_kernel("kernel @k() params {} {\n  barrier\n  %a = add %zz, %zz : i32\n}")


def test_region_values_are_scoped_in_parser():
    text = """kernel @k(%c: bool) params {c = {kind = "scalar"}} {
  if %c () {
    %v = lane_id : i32
  } () {
  }
  %w = add %v, %v : i32
}"""
    with pytest.raises(ParseError, match="undefined value %v"):
        parse_kernel(text)


def test_rewrite_helpers():
    b = builder("rw", [("y", buf(dt.i32, 1, "region"))])
    (y,) = b.block.args
    i = b.special("thread_idx", 0)
    one = b.const(1, dt.i32)
    s = b.binary("add", i, one)
    with b.if_(b.const(True, dt.bool_), [dt.i32]) as (then, other, (r,)):
        with b.at(then):
            b.yield_(b.binary("mul", s, s))
        with b.at(other):
            b.yield_(s)
    b.store(y, [i], r)
    k = b.finish()
    lane = b.op("lane_id", [], [dt.i32]).result
    detach(lane.owner)                          # moved, not erased: it keeps its uses
    insert_before(s.owner, [lane.owner])
    assert i.replace_all_uses_with(lane) == 2  # the add and the store's index
    assert not i.is_used and set(lane.users) == {s.owner, k.body.ops[-1]}
    if_op = r.owner
    (val,) = inline_region(if_op, if_op.regions[0])
    r.replace_all_uses_with(val)
    erase(if_op)
    assert s.users == (val.owner,)              # the else-branch's yield left with the if
    verify.run(k)
    assert [op.opcode for op in k.walk()] == ["thread_idx", "const", "lane_id", "add", "const",
                                               "mul", "store"]


def test_docs_ir_example_parses_and_verifies():
    """docs/ir.md's text-form example is real IR."""
    from pathlib import Path
    doc = (Path(__file__).parent.parent / "docs" / "ir.md").read_text()
    examples = [b.split("```")[0] for b in doc.split("```\nkernel ")[1:]]
    assert examples
    for body in examples:
        k = parse_kernel("kernel " + body)
        verify.run(k)
        assert parse_kernel(print_kernel(k)) is not None
