# ruff: noqa: F841, B007  (kernels here are deliberately wrong; unused names are the point)
"""Frontend diagnostics: every kind of error raises kaio.CompileError at the right line, shows
the source line with a caret under the offending code, and carries a hint.

Each kernel marks the line the error must point at with ``# ERR``.
"""
from __future__ import annotations

import inspect

import pytest

import kaio
from kaio import f32, i32, u8
from kaio.frontend import lower_kernel


def helper(v):
    return v


@kaio.func
def recurse(v):
    return recurse(v)  # ERR


@kaio.kernel
def other_kernel(y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = 0.0


def compile_error(k, **consts) -> kaio.CompileError:
    with pytest.raises(kaio.CompileError) as ei:
        lower_kernel(k.fn, k.params, consts)
    return ei.value


def check(k, message: str, hint: str, **consts):
    """Assert the error's line is the kernel's `# ERR` line, with caret, message and hint."""
    e = compile_error(k, **consts)
    lines, first = inspect.getsourcelines(k.fn)
    k_err = next(i for i, line in enumerate(lines) if "# ERR" in line)
    assert e.line == first + k_err, (e.line, str(e))
    assert e.kernel == k.name
    text = str(e)
    assert message in text, text
    assert e.hint and hint in e.hint, e.hint
    src_line = lines[k_err].rstrip("\n")
    assert src_line in text
    caret = text.splitlines()[text.splitlines().index(next(x for x in text.splitlines()
                                                                if x.endswith(src_line))) + 1]
    assert caret.strip() and set(caret.split("|")[-1].strip()) == {"^"}, caret
    return e


# --- unsupported syntax -------------------------------------------------------------------
@kaio.kernel
def uses_list(y: kaio.Out[f32]):
    v = [1, 2]  # ERR


@kaio.kernel
def uses_dict(y: kaio.Out[f32]):
    v = {1: 2}  # ERR


@kaio.kernel
def uses_comprehension(y: kaio.Out[f32]):
    v = [i for i in range(3)]  # ERR


@kaio.kernel
def uses_lambda(y: kaio.Out[f32]):
    f = lambda v: v  # ERR  # noqa: E731


@kaio.kernel
def uses_with(y: kaio.Out[f32]):
    with open("x"):  # ERR
        pass


@kaio.kernel
def uses_try(y: kaio.Out[f32]):
    try:  # ERR
        pass
    except Exception:
        pass


@kaio.kernel
def uses_class(y: kaio.Out[f32]):
    class A:  # ERR
        pass


@kaio.kernel
def uses_string(y: kaio.Out[f32]):
    s = "hello"  # ERR


@kaio.kernel
def uses_fstring(y: kaio.Out[f32]):
    s = f"{1}"  # ERR


@kaio.kernel
def uses_starargs(y: kaio.Out[f32]):
    t = (1.0, 2.0)
    v = kaio.math.max(*t)  # ERR


@kaio.kernel
def uses_bad_keyword(y: kaio.Out[f32]):
    kaio.sync(now=True)  # ERR


@kaio.kernel
def uses_global(y: kaio.Out[f32]):
    global helper  # ERR


def make_nonlocal():
    count = 0

    @kaio.kernel
    def uses_nonlocal(y: kaio.Out[f32]):
        nonlocal count  # ERR
    return uses_nonlocal


@kaio.kernel
def uses_yield(y: kaio.Out[f32]):
    yield 1  # ERR


@kaio.kernel
def uses_del(y: kaio.Out[f32]):
    v = 1
    del v  # ERR


@kaio.kernel
def uses_assert(y: kaio.Out[f32]):
    assert True  # ERR


@kaio.kernel
def uses_for_else(y: kaio.Out[f32]):
    for i in range(3):
        pass
    else:
        y[0] = 1.0  # ERR


@kaio.kernel
def loops_over_tuple(y: kaio.Out[f32]):
    for v in (1, 2):  # ERR
        pass


@kaio.kernel
def uses_is(y: kaio.Out[f32], a: i32):
    b = a is None  # ERR


@kaio.kernel
def uses_slice(x: kaio.In[f32], y: kaio.Out[f32]):
    v = x[1:3]  # ERR


@pytest.mark.parametrize("k, message, hint", [
    (uses_list, "a list is not supported", "local_array"),
    (uses_dict, "a dict is not supported", "separate variables"),
    (uses_comprehension, "a list comprehension is not supported", "loop"),
    (uses_lambda, "a lambda is not supported", "@kaio.func"),
    (uses_with, "`with` is not supported", "context managers"),
    (uses_try, "`try` is not supported", "exceptions"),
    (uses_class, "a class definition is not supported", "outside the kernel"),
    (uses_string, "strings are not supported", "numeric codes"),
    (uses_fstring, "an f-string is not supported", "no strings"),
    (uses_starargs, "*args in calls is not supported", "explicitly"),
    (uses_bad_keyword, "has no keyword argument 'now'", "by position"),
    (uses_global, "`global` is not supported", "parameters"),
    (make_nonlocal(), "`nonlocal` is not supported", "parameters"),
    (uses_yield, "`yield` is not supported", "generators"),
    (uses_del, "`del` is not supported", "stop using it"),
    (uses_assert, "`assert` is not supported", "error code"),
    (uses_for_else, "`for ... else` is not supported", "flag variable"),
    (loops_over_tuple, "must iterate over range(...)", "range"),
    (uses_is, "`is`, `is not`, `in` and `not in` are not supported", "=="),
    (uses_slice, "slices are not supported", "single elements"),
])
def test_unsupported_syntax(k, message, hint):
    check(k, message, hint)


# --- names, types, buffers ----------------------------------------------------------------
@kaio.kernel
def undefined_name(y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = nope  # ERR  # noqa: F821


@kaio.kernel
def stores_wrong_type(x: kaio.In[i32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[i]  # ERR


@kaio.kernel
def changes_type(x: kaio.In[i32], y: kaio.Out[f32]):
    for i in y.owned():
        v = x[i]
        v = y[i] * 2.0  # ERR


@kaio.kernel
def changes_type_in_loop(x: kaio.In[f32], y: kaio.Out[f32], n: i32):
    for i in y.owned():
        acc = n
        for j in range(n):
            acc = x[j]  # ERR


@kaio.kernel
def stores_to_in(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        x[i] = 1.0  # ERR


@kaio.kernel
def calls_python(y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = helper(1.0)  # ERR


@kaio.kernel
def calls_kernel(y: kaio.Out[f32]):
    other_kernel(y)  # ERR


@kaio.kernel
def wrong_arity(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = kaio.math.exp(x[i], 2.0)  # ERR


@kaio.kernel
def dynamic_static_range(y: kaio.Out[f32], n: i32):
    for k in kaio.static_range(n):  # ERR
        pass


@kaio.kernel
def dynamic_shared_shape(y: kaio.Out[f32], n: i32):
    s = kaio.shared_array(f32, n)  # ERR


@kaio.kernel
def returns_value(y: kaio.Out[f32]):
    return 1  # ERR


@kaio.kernel
def int_true_division(x: kaio.In[i32], y: kaio.Out[f32]):
    for i in y.owned():
        v = x[i] / 2  # ERR


@kaio.kernel
def float_literal_with_int(x: kaio.In[i32], y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = x[i] * 1.5  # ERR


@kaio.kernel
def literal_too_big(x: kaio.In[u8], y: kaio.Out[u8]):
    for i in y.owned():
        y[i] = x[i] + 300  # ERR


@kaio.kernel
def maybe_undefined(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        if x[i] > 0.0:
            v = 1.0
        y[i] = v  # ERR


@kaio.kernel
def atomic_on_region(y: kaio.Region[i32]):
    for i in y.owned():
        kaio.atomic_add(y, i, 1)  # ERR


@kaio.kernel
def load_from_atomic(c: kaio.Atomic[i32], y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = c[i]  # ERR


@kaio.kernel
def recursive(y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = recurse(1.0)  # ERR


@kaio.kernel
def math_on_int(x: kaio.In[i32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = kaio.math.sqrt(x[i])  # ERR


@kaio.kernel
def wrong_index_count(x: kaio.In[f32, 2], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[i]  # ERR


@kaio.kernel
def uses_int_builtin(x: kaio.In[f32], y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = int(x[i])  # ERR


@kaio.kernel
def bool_arithmetic(x: kaio.In[f32], y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = (x[i] > 0.0) + (x[i] > 1.0)  # ERR


@kaio.kernel
def non_bool_condition(x: kaio.In[i32], y: kaio.Out[i32]):
    for i in y.owned():
        if x[i]:  # ERR
            y[i] = 1


@kaio.kernel
def owned_on_in(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in x.owned():  # ERR
        pass


@kaio.kernel
def bitcast_widths_differ(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = f32(kaio.bitcast(x[i], kaio.i16))  # ERR


@kaio.kernel
def bitcast_literal(y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = kaio.bitcast(1.5, i32)  # ERR


@pytest.mark.parametrize("k, message, hint", [
    (undefined_name, "undefined name 'nope'", "define it"),
    (bitcast_widths_differ, "kaio.bitcast from f32 to i16: the widths differ", "of one width"),
    (bitcast_literal, "kaio.bitcast of a literal", "kaio.bitcast(kaio.f32(1.5), kaio.i32)"),
    (stores_wrong_type, "has type i32 but f32 is expected", "kaio.f32("),
    (changes_type, "variable 'v' has type i32 but is assigned a f32 value", "keeps one type"),
    (changes_type_in_loop, "variable 'acc' has type i32 but is assigned a f32", "keeps one type"),
    (stores_to_in, "read-only In buffer", "kaio.Region"),
    (calls_python, "not callable in a kernel: decorate it with @kaio.func", "@kaio.func"),
    (calls_kernel, "cannot be called from a kernel", "@kaio.func"),
    (wrong_arity, "takes 1 argument(s) but 2 were given", None),
    (dynamic_static_range, "must be a compile-time integer", "kaio.Const[int]"),
    (dynamic_shared_shape, "must be a compile-time integer", "kaio.Const[int]"),
    (returns_value, "a kernel cannot return a value", "Out or Region"),
    (int_true_division, "true division (/) of i32 values", "//"),
    (float_literal_with_int, "is a float but the expected type is i32", "cast explicitly"),
    (literal_too_big, "literal 300 does not fit in u8", "wider type"),
    (maybe_undefined, "variable 'v' may be undefined here", "every path"),
    (atomic_on_region, "kaio.atomic_add on 'y', a region buffer", "kaio.Atomic"),
    (load_from_atomic, "can only be used through kaio.atomic_* operations", "kaio.atomic_add"),
    (math_on_int, "kaio.math.sqrt takes float arguments, got i32", "kaio.f32("),
    (wrong_index_count, "has 2 dimension(s) but is indexed with 1", "x[i, j]"),
    (uses_int_builtin, "int(...) is not supported", "kaio.i32(x)"),
    (bool_arithmetic, "arithmetic (+) on bool values", "kaio.i32("),
    (non_bool_condition, "condition has type i32, not bool", "x != 0"),
    (owned_on_in, "has no partition", "kaio.Region"),
])
def test_errors(k, message, hint):
    if hint is None:
        e = compile_error(k)
        lines, first = inspect.getsourcelines(k.fn)
        assert e.line == first + next(i for i, line in enumerate(lines) if "# ERR" in line)
        assert message in str(e)
        return
    check(k, message, hint)


def test_caret_spans_the_offending_expression():
    e = compile_error(stores_to_in)
    line = inspect.getsourcelines(stores_to_in.fn)[0][3]
    assert e.col == line.index("x[i]") and e.end_col == line.index("x[i]") + len("x[i]")
    assert e.file == __file__


def test_stored_literal_must_fit_the_buffer_type():
    @kaio.kernel
    def big(y: kaio.Out[i32]):
        for i in y.owned():
            y[i] = 5000000000  # ERR
    e = check(big, "literal 5000000000 (value stored to 'y') does not fit in i32", "wider type")
    line = inspect.getsourcelines(big.fn)[0][3]  # an indented kernel: columns map to the file
    assert (e.col, e.end_col) == (line.index("5000000000"), line.index("5000000000") + 10)


def test_errors_are_compile_errors_with_structured_fields():
    e = compile_error(undefined_name)
    assert isinstance(e, kaio.CompileError)
    assert e.bare_message.startswith("undefined name")
    assert e.file.endswith("test_frontend_errors.py") and e.col > 0


def test_recursion_points_at_the_recursive_call():
    e = compile_error(recursive)
    lines, first = inspect.getsourcelines(recurse.fn)
    assert e.line == first + next(i for i, line in enumerate(lines) if "# ERR" in line)
    assert "recursive call of @kaio.func 'recurse' (recurse -> recurse)" in str(e)
    assert "loop" in e.hint


def test_branches_must_agree_on_a_variable_type():
    @kaio.kernel
    def k(x: kaio.In[f32], y: kaio.Out[f32], n: i32):
        for i in y.owned():
            if x[i] > 0.0:  # ERR
                v = x[i]
            else:
                v = n
            y[i] = 1.0
    check(k, "variable 'v' is f32 on one path and i32 on another", "cast explicitly")


@kaio.func
def no_final_return(v):  # ERR
    if v > 0.0:
        return v


@kaio.kernel
def calls_no_final_return(y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = no_final_return(1.0)


def test_device_function_must_return_on_every_path():
    e = compile_error(calls_no_final_return)
    lines, first = inspect.getsourcelines(no_final_return.fn)
    assert e.line == first + next(i for i, line in enumerate(lines) if "# ERR" in line)
    assert "may end without returning a value" in str(e) and "return" in e.hint


@kaio.kernel
def nested_def(y: kaio.Out[f32]):
    def inner():  # ERR
        pass


@kaio.kernel
def walrus(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = (v := x[i])  # ERR


@kaio.kernel
def shuffle_missing_lane(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = kaio.shuffle_xor(x[i])  # ERR


@kaio.kernel
def not_tuple_unpack(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        a, b = x[i]  # ERR


@pytest.mark.parametrize("k, message, hint", [
    (nested_def, "a nested function is not supported", "@kaio.func"),
    (walrus, "the walrus operator (:=) is not supported", "separate statement"),
    (not_tuple_unpack, "cannot unpack f32 value into 2 names", "only tuples"),
])
def test_more_errors(k, message, hint):
    check(k, message, hint)


def test_intrinsic_arity():
    e = compile_error(shuffle_missing_lane)
    assert "kaio.shuffle_xor() takes 2 argument(s) but 1 were given" in str(e)


@kaio.func
def bad_helper(v):
    return v / 2  # ERR


@kaio.kernel
def calls_bad_helper(x: kaio.In[i32], y: kaio.Out[i32]):
    for i in y.owned():
        y[i] = bad_helper(x[i])


def test_error_inside_device_function_names_the_call_site():
    e = compile_error(calls_bad_helper)
    lines, first = inspect.getsourcelines(bad_helper.fn)
    assert e.line == first + next(i for i, line in enumerate(lines) if "# ERR" in line)
    call_line = inspect.getsourcelines(calls_bad_helper.fn)[1] + 3
    assert f"called at {__file__}:{call_line}" in str(e)
    assert "//" in e.hint


def test_numpy_math_points_to_kaio_math():
    import numpy as np

    @kaio.kernel
    def k(x: kaio.In[f32], y: kaio.Out[f32]):
        for i in y.owned():
            y[i] = np.sqrt(x[i])  # ERR
    check(k, "numpy.sqrt cannot be used in a kernel", "kaio.math.sqrt")


@kaio.kernel
def loop_var_after_loop(y: kaio.Out[i32], n: i32):
    for i in y.owned():
        for j in range(n):
            pass
        y[i] = j  # ERR


def test_loop_variable_is_not_available_after_the_loop():
    """Unbound before the loop, the name would be undefined after an empty loop."""
    check(loop_var_after_loop, "variable 'j' may be undefined here (a loop variable",
          "assign 'j' before the loop")


@kaio.kernel
def uses_print(y: kaio.Out[f32]):
    print(1)  # ERR


def test_python_builtins_are_named():
    check(uses_print, "the Python builtin 'print' cannot be used in a kernel", "range")
