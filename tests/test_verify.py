"""The IR verifier: one test per kind of error, each checking the message and location."""
from __future__ import annotations

import pytest
from ir_samples import buf, builder, every_op_kernel

import kaio
from kaio import dtypes as dt
from kaio.ir import Block, BufType, Loc, Op
from kaio.ir.attrs import AttrError
from kaio.passes import verify
from kaio.passes.verify import IRVerifyError


def _kernel(fill):
    """A kernel (x: In[f32], y: Region[f32], c: Atomic[i32], n: i32) plus ops from ``fill``."""
    b = builder("bad", [("x", buf(dt.f32)), ("y", buf(dt.f32, 1, "region")),
                        ("c", buf(dt.i32, 1, "atomic")), ("n", dt.i32)])
    x, y, c, n = b.block.args
    b.loc = Loc("bad.py", 7, 2)
    i = b.special("thread_idx", 0)
    f = b.load(x, [i])
    fill(b, x, y, c, n, i, f)
    return b.finish()


def _fails(fill, match):
    k = _kernel(fill)
    with pytest.raises(IRVerifyError, match=match) as info:
        verify.run(k)
    return info.value


def _rejected(fill, match):
    """Attributes are typed: a wrong key or value fails where the op is built or changed."""
    with pytest.raises(AttrError, match=match):
        _kernel(fill)


def test_valid_kernels_pass():
    verify.run(every_op_kernel())
    verify.run(_kernel(lambda b, x, y, c, n, i, f: b.store(y, [i], f)))


def test_error_is_a_compile_error_with_location_and_kernel():
    e = _fails(lambda b, x, y, c, n, i, f: b.op("frobnicate", [f], [dt.f32]), "unknown opcode")
    assert isinstance(e, kaio.CompileError)
    assert (e.kernel, e.file, e.line, e.col) == ("bad", "bad.py", 7, 2)
    assert "'frobnicate'" in str(e)


def test_operand_count():
    _fails(lambda b, x, y, c, n, i, f: b.op("add", [f], [dt.f32]), "expected 2 operands, got 1")


def test_binary_dtype_mismatch():
    _fails(lambda b, x, y, c, n, i, f: b.op("add", [f, i], [dt.f32]),
           "operands must have one dtype, got f32 and i32")


def test_binary_result_type():
    _fails(lambda b, x, y, c, n, i, f: b.op("mul", [i, i], [dt.i64]), "result type must be i32")


def test_arith_on_bool():
    def fill(b, x, y, c, n, i, f):
        t = b.cmp("lt", i, n)
        b.op("add", [t, t], [dt.bool_])
    _fails(fill, "operands must be int/uint/float, got bool")


def test_cmp_result_must_be_bool():
    _fails(lambda b, x, y, c, n, i, f: b.op("cmp", [i, n], [dt.i32], {"pred": "lt"}),
           "result type must be bool")


def test_cmp_predicate():
    _rejected(lambda b, x, y, c, n, i, f: b.op("cmp", [i, n], [dt.bool_], {"pred": "approx"}),
              "'cmp': attribute pred = 'approx' must be one of eq, ne, lt")
    _fails(lambda b, x, y, c, n, i, f: b.op("cmp", [i, n], [dt.bool_]), "missing attribute 'pred'")


def test_select_condition_bool():
    _fails(lambda b, x, y, c, n, i, f: b.op("select", [i, f, f], [dt.f32]),
           r"condition \(operand 0\) must be bool, got i32")


def test_shift_on_float():
    _fails(lambda b, x, y, c, n, i, f: b.op("shl", [f, f], [dt.f32]), "must be int/uint, got f32")


def test_bitwise_on_float():
    _fails(lambda b, x, y, c, n, i, f: b.op("xor", [f, f], [dt.f32]),
           "must be int/uint/bool, got f32")


def test_fma_on_int():
    _fails(lambda b, x, y, c, n, i, f: b.op("fma", [i, i, i], [dt.i32]), "must be float, got i32")


def test_math_on_int_and_predicate_type():
    _fails(lambda b, x, y, c, n, i, f: b.op("math", [i], [dt.i32], {"fn": "sqrt"}),
           "math sqrt must be float, got i32")
    _fails(lambda b, x, y, c, n, i, f: b.op("math", [f], [dt.f32], {"fn": "isnan"}),
           "result type must be bool")
    _rejected(lambda b, x, y, c, n, i, f: b.op("math", [f], [dt.f32], {"fn": "sqrtt"}),
              "attribute fn = 'sqrtt' must be one of sqrt")
    _fails(lambda b, x, y, c, n, i, f: b.op("math", [f], [dt.f32], {"fn": "pow"}),
           "expected 2 operands")


def test_bitcast_width():
    _fails(lambda b, x, y, c, n, i, f: b.op("bitcast", [f], [dt.i64]),
           "bitcast needs two non-bool dtypes of one bit width, got f32 -> i64")


def test_load_needs_buffer():
    _fails(lambda b, x, y, c, n, i, f: b.op("load", [n, i], [dt.i32]),
           "operand 0 must be a buffer, got i32")


def test_index_count():
    _fails(lambda b, x, y, c, n, i, f: b.op("load", [x, i, i], [dt.f32]),
           "has 1 dimensions but 2 indices")


def test_index_must_be_integer():
    _fails(lambda b, x, y, c, n, i, f: b.op("load", [x, f], [dt.f32]),
           "index 0 must be int/uint, got f32")


def test_store_value_dtype():
    _fails(lambda b, x, y, c, n, i, f: b.op("store", [y, i, i]),
           "must have the element dtype f32, got i32")


def test_store_to_read_only():
    _fails(lambda b, x, y, c, n, i, f: b.store(x, [i], f), r"read-only \(intent 'in'\)")


def test_atomic_to_read_only_and_bad_op():
    _fails(lambda b, x, y, c, n, i, f: b.atomic("add", x, [i], f), "read-only")
    _rejected(lambda b, x, y, c, n, i, f: b.atomic("mul", c, [i], i), "op = 'mul' must be one of")
    _fails(lambda b, x, y, c, n, i, f: b.op("atomic", [c, i, i], [dt.i32], {"op": "cas"}),
           "expected 4 operands")


def test_special_axis():
    _rejected(lambda b, x, y, c, n, i, f: b.special("block_idx", 3), "axis = 3 must be an int in 0..2")
    _rejected(lambda b, x, y, c, n, i, f: b.special("lane_id", 0), "'lane_id' has no attribute 'axis'")
    _fails(lambda b, x, y, c, n, i, f: b.shape(x, 1), "axis 1 is out of range for a 1-d buffer")


def test_region_count():
    _fails(lambda b, x, y, c, n, i, f: b.op("if", [b.cmp("lt", i, n)], [], regions=[Block()]),
           "expected 2 regions, got 1")


def test_if_with_results_needs_yields():
    def fill(b, x, y, c, n, i, f):
        with b.if_(b.cmp("lt", i, n), [dt.f32]) as (then, other, (r,)):
            with b.at(then):
                b.yield_(f)
    _fails(fill, "else-region must end in 'yield' of \\(f32\\)")


def test_if_yield_types():
    def fill(b, x, y, c, n, i, f):
        with b.if_(b.cmp("lt", i, n), [dt.f32]) as (then, other, (r,)):
            with b.at(then):
                b.yield_(i)
            with b.at(other):
                b.yield_(f)
    _fails(fill, r"then-region yields \(i32\) but \(f32\) is expected")


def test_for_body_yields_carried_types():
    def fill(b, x, y, c, n, i, f):
        op, body, iv, (acc,) = b.for_(i, n, i, [f])
        with b.at(body):
            b.yield_(iv)
    _fails(fill, r"loop body yields \(i32\) but \(f32\) is expected")


def test_for_bounds_types():
    def fill(b, x, y, c, n, i, f):
        op, body, iv, _ = b.for_(i, b.cast(n, dt.i64), i)
    _fails(fill, "upper bound must be i32 like the lower bound, got i64")


def test_while_before_must_end_in_condition():
    def fill(b, x, y, c, n, i, f):
        op, before, after = b.while_([i])
        with b.at(after):
            b.yield_(after.args[0])
    _fails(fill, "before-region must end in 'condition'")


def test_while_condition_operand_bool():
    def fill(b, x, y, c, n, i, f):
        op, before, after = b.while_([i])
        with b.at(before):
            b.condition(before.args[0], before.args[0])
        with b.at(after):
            b.yield_(after.args[0])
    _fails(fill, "first operand must be a bool")


def test_while_condition_values_match_after_args():
    def fill(b, x, y, c, n, i, f):
        op, before, after = b.while_([i])
        with b.at(before):
            b.condition(b.cmp("lt", before.args[0], n), f)
        with b.at(after):
            b.yield_(after.args[0])
    _fails(fill, "passed values must match the after-region arguments")


def test_while_after_yields_before_types():
    def fill(b, x, y, c, n, i, f):
        op, before, after = b.while_([i])
        with b.at(before):
            b.condition(b.cmp("lt", before.args[0], n), before.args[0])
        with b.at(after):
            b.yield_(f)
    _fails(fill, r"after-region yields \(f32\) but \(i32\) is expected")


def test_use_before_definition():
    def fill(b, x, y, c, n, i, f):
        later = Op("lane_id", [], [dt.i32])
        b.op("add", [i, later.result], [dt.i32])
        b.block.append(later)
    _fails(fill, "operand 1 .* is not defined before this use")


def test_use_of_value_from_inside_a_region():
    def fill(b, x, y, c, n, i, f):
        with b.if_(b.cmp("lt", i, n)) as (then, other, _):
            with b.at(then):
                inner = b.binary("add", f, f)
        b.store(y, [i], inner)
    _fails(fill, "operand 2 .* is not defined before this use")


def test_value_defined_twice():
    def fill(b, x, y, c, n, i, f):
        op = b.op("lane_id", [], [dt.i32])
        twin = b.op("warp_size", [], [dt.i32])
        twin.results[0] = op.results[0]
    _fails(fill, "is defined more than once")


def test_terminator_placement():
    _fails(lambda b, x, y, c, n, i, f: b.yield_(f), "not allowed in the kernel body")

    def fill(b, x, y, c, n, i, f):
        with b.if_(b.cmp("lt", i, n)) as (then, other, _):
            with b.at(then):
                b.yield_()
                b.barrier()
    _fails(fill, "a terminator must be the last op of its region")


def test_constant_must_be_canonical():
    _fails(lambda b, x, y, c, n, i, f: b.op("const", [], [dt.u8], {"value": 300}),
           "value 300 is not a canonical u8 constant")
    _fails(lambda b, x, y, c, n, i, f: b.op("const", [], [dt.f16], {"value": 0.1}),
           "not a canonical f16 constant")


def test_alloc_shape_matches_type():
    def fill(b, x, y, c, n, i, f):
        s = b.shared_array(dt.f32, (4, 4))
        s.owner.attrs["shape"] = [4, 5]
    _fails(fill, r"shape attribute \[4, 5\] does not match")


def test_parameter_kind_matches_type():
    k = _kernel(lambda *a: None)
    k.params[3].kind = "buffer"
    with pytest.raises(IRVerifyError, match="parameter 'n' is declared buffer but has type i32"):
        verify.run(k)


def test_owned_loop_names_a_buffer_parameter():
    def fill(b, x, y, c, n, i, f):
        b.for_(i, n, i, attrs={"owned": "n"})
    _fails(fill, "owned='n' does not name a buffer parameter")


def test_buffer_parameters_are_global():
    b = builder("p", [("s", BufType(dt.f32, 1, "shared", "scratch", (4,)))])
    with pytest.raises(IRVerifyError, match="buffer parameter 's' must be a global buffer"):
        verify.run(b.finish())
