"""No internal exceptions, ever (issue 16): each input that once crashed the compiler or the
reference backend with a Python error is now a CompileError at the kernel's line, or gives the
documented result."""
from __future__ import annotations

import linecache

import ml_dtypes
import numpy as np
import pytest

import kaio
from kaio.errors import KernelRuntimeError

_count = [0]


def make(body: str, params: str = ""):
    """A kernel ``k(y: Raw[dtype], <params>)`` whose body is ``body`` (its first line is line 3
    of the kernel's source)."""
    _count[0] += 1
    src = f"@kaio.kernel\ndef k({params}):\n    " + body.strip().replace("\n", "\n    ") + "\n"
    name = f"<no_internal_errors {_count[0]}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns = {"kaio": kaio}
    exec(compile(src, name, "exec"), ns)
    return ns["k"]


def run1(body: str, dtype: str = "f32", n: int = 1):
    """Run ``body`` on one thread with ``y: Raw[dtype]`` of ``n`` elements; returns y."""
    k = make(body, f"y: kaio.Raw[kaio.{dtype}]")
    y = np.zeros(n, getattr(kaio, dtype).storage_np)
    k[1, 1](y)
    return y


def compile_error(body: str, dtype: str = "f32", line: int = 3) -> kaio.CompileError:
    with pytest.raises(kaio.CompileError) as info:
        run1(body, dtype)
    assert info.value.line == line, str(info.value)
    return info.value


# --- constant folding and literal casts ------------------------------------------------------
@pytest.mark.parametrize("expr, want", [
    ("1.0 % 0.0", np.nan),                  # math.fmod raised "math domain error"
    ("kaio.math.inf % 2.0", np.nan),
    ("-7.5 % 0.0", np.nan),
    ("1.0 / 0.0", np.inf),                  # IEEE division, as the IR does at run time
    ("-1.0 / 0.0", -np.inf),
    ("0.0 / 0.0", np.nan),
    ("-1.0 // 0.0", -np.inf),
    ("7.5 // 2.0", 3.0),
    ("-7.5 % 2.0", -1.5),
])
def test_float_constant_folding_follows_ieee(expr, want):
    y = run1(f"y[0] = {expr}")
    np.testing.assert_array_equal(y, np.array([want], np.float32))


def test_folded_floor_division_of_floats_is_a_float():
    # math.floor made 7.5 // 2.0 the int 3, which could then index a buffer
    e = compile_error("y[7.5 // 2.0] = 1.0")
    assert "index 3.0 is not an integer" in e.bare_message


@pytest.mark.parametrize("expr, dtype, want", [
    ("kaio.i32(kaio.math.nan)", "i32", 0),             # raised ValueError
    ("kaio.i32(kaio.math.inf)", "i32", 2**31 - 1),     # raised OverflowError
    ("kaio.i32(-kaio.math.inf)", "i32", -2**31),
    ("kaio.i32(1e20)", "i32", 2**31 - 1),              # was "does not fit": casts saturate
    ("kaio.u8(-3.5)", "u8", 0),
    ("kaio.i64(-2.9)", "i64", -2),
    ("kaio.u16(kaio.math.nan)", "u16", 0),
])
def test_literal_float_to_int_casts_saturate_like_the_run_time_cast(expr, dtype, want):
    y = run1(f"y[0] = {expr}", dtype)
    assert int(y[0]) == want


def test_literal_casts_agree_with_run_time_casts():
    k = make("y[0] = kaio.i32(a)\ny[1] = kaio.i32(b)\ny[2] = kaio.i32(c)\ny[3] = kaio.i32(d)",
             "y: kaio.Raw[kaio.i32], a: kaio.f32, b: kaio.f32, c: kaio.f32, d: kaio.f32")
    run_time = np.zeros(4, np.int32)
    k[1, 1](run_time, float("nan"), float("inf"), -float("inf"), 1e20)
    folded = run1("y[0] = kaio.i32(kaio.math.nan)\ny[1] = kaio.i32(kaio.math.inf)\n"
                  "y[2] = kaio.i32(-kaio.math.inf)\ny[3] = kaio.i32(1e20)", "i32", 4)
    np.testing.assert_array_equal(folded, run_time)


@pytest.mark.parametrize("body, message", [
    ("y[0] = kaio.f32(None)", "None is not a value"),              # raised TypeError
    ("y[0] = kaio.f32(3 ** 100000)", "constant expression overflows"),  # raised OverflowError
    ("y[0] = kaio.f32(3 ** 1000)", "does not fit in f32"),
    ("y[0] = 2 ** 10 ** 9", "constant expression overflows"),      # would run for minutes
    ("y[0] = 1 << 10 ** 9", "constant expression overflows"),
    ("y[0] = y[0] + 10 ** 40", "literal (an integer of about 41 digits) overflows f32"),
    ("y[0] = True + True", "arithmetic (+) on bool values"),       # folded to 2
    ("y[0] = True * 3", "arithmetic (*) on bool values"),
    ("y[0] = 2 ** True", "arithmetic (**) on bool values"),
    ("y[0] = 1 << True", "arithmetic (<<) on bool values"),
    ("y[0] = kaio.f32(1 < 2 < None)", "None is not a number"),       # raised TypeError
    ("y[0] = kaio.f32(None == None)", "None is not a number"),       # folded to True
    ("y[0] = kaio.math.abs(None)", "None is not a value"),            # raised TypeError
    ("y[0] = kaio.math.min(None, 1.0)", "None is not a value"),
    ("y[0] = kaio.f32(kaio.math.abs(True))", "kaio.math.abs of bool values"),  # folded to 1
    ("y[0] = kaio.f32(kaio.math.max(True, 2))", "kaio.math.max of bool values"),
])
def test_compile_errors_at_the_line(body, message):
    dtype = "i32" if "True" in body or "<<" in body or "10 ** 9" in body else "f32"
    e = compile_error(body, dtype)
    assert message in e.bare_message


def test_bool_bitwise_literals_still_fold():
    y = run1("y[0] = kaio.i32(True ^ False)\ny[1] = kaio.i32(True & False)", "i32", 2)
    np.testing.assert_array_equal(y, [1, 0])


# --- scalar parameters -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_16_bit_float_remainder_of_two_scalar_parameters(dtype):
    k = make("i = kaio.global_id()\nif i < 50:\n    y[i] = a % b",
             f"y: kaio.Raw[kaio.{dtype}], a: kaio.{dtype}, b: kaio.{dtype}")
    st = getattr(kaio, dtype).storage_np
    y = np.zeros(64, st)
    k[2, 32](y, st.type(7.5), st.type(-2.0))
    want = np.where(np.arange(64) < 50, np.fmod(np.float32(7.5), np.float32(-2.0)), 0).astype(st)
    np.testing.assert_array_equal(y.astype(np.float32), want.astype(np.float32))
    assert dtype != "bf16" or y.dtype == ml_dtypes.bfloat16


# --- resource limits -------------------------------------------------------------------------
def test_huge_shared_array_is_a_compile_error_at_its_line():
    # was accepted: ptxas failed later, and the reference backend died allocating it
    e = compile_error("s = kaio.shared_array(kaio.f32, 10**12)\ns[0] = 1.0\ny[0] = s[0]")
    # the frontend's limit is the largest any target allows (sm_90: 227 KiB); each target then
    # holds a kernel to its own (tests/test_gemm.py: test_shared_limits_are_per_target)
    assert "4,000,000,000,000 bytes" in e.bare_message and "232,448" in e.bare_message
    assert "dynamic_shared" in e.hint


def test_shared_arrays_are_counted_together():
    e = compile_error("a = kaio.shared_array(kaio.f32, (64, 64))\n"
                      "b = kaio.shared_array(kaio.f64, 27100)\nb[0] = 1.0\ny[0] = kaio.f32(b[0])",
                      line=4)
    assert "on top of 16,384" in e.bare_message


def test_shared_arrays_up_to_48_kib_compile_and_run():
    y = run1("t = kaio.global_id()\na = kaio.shared_array(kaio.f32, (64, 64))\n"
             "b = kaio.shared_array(kaio.f64, 4096)\nb[4095 - t] = 2.5\na[63 - t, 63] = 1.0\n"
             "y[t] = a[63 - t, 63] + kaio.f32(b[4095 - t])")
    assert y[0] == 3.5


# --- the reference backend's watchdog and run-time range steps -------------------------------
def test_endless_loop_is_stopped_by_the_watchdog_at_its_line(monkeypatch, reference):
    monkeypatch.setenv("KAIO_REF_MAX_ITERATIONS", "1000")
    k = make("i = kaio.global_id()\nwhile True:\n    pass\ny[i] = 1.0", "y: kaio.Raw[kaio.f32]")
    with pytest.raises(KernelRuntimeError, match="ran 1,000 iterations without ending") as info:
        k[1, 32](np.zeros(32, np.float32))
    assert info.value.line == 4 and "KAIO_REF_MAX_ITERATIONS" in str(info.value)


@pytest.mark.parametrize("loop", ["while m < n:", "for j in range(n):", "for j in range(0, n, s):"])
def test_watchdog_budget_is_per_loop_and_configurable(monkeypatch, loop, reference):
    # a body no pass turns into a closed form
    k = make(f"i = kaio.global_id()\nc = 0\nm = 0\n{loop}\n    c = (c * 7 + 1) % 1009\n"
             "    m += 1\ny[i] = c",
             "y: kaio.Raw[kaio.i32], n: kaio.i32, s: kaio.i32")

    def want(n):
        c = 0
        for _ in range(n):
            c = (c * 7 + 1) % 1009
        return c
    y = np.zeros(4, np.int32)
    monkeypatch.setenv("KAIO_REF_MAX_ITERATIONS", "100")
    k[1, 4](y, 50, 1)
    assert (y == want(50)).all()
    # (a budget counts the iterations as run: the unroll pass may run 4 or 8 at once)
    with pytest.raises(KernelRuntimeError, match="watchdog") as info:
        k[1, 4](y, 2000, 1)
    assert info.value.line == 6
    monkeypatch.setenv("KAIO_REF_MAX_ITERATIONS", "0")  # no limit
    k[1, 4](y, 2000, 1)
    assert (y == want(2000)).all()


@pytest.mark.parametrize("start, stop", [(0, 10), (10, 0)])
def test_run_time_range_step_of_zero_raises_on_the_reference(start, stop, reference):
    # it ran no iteration (start < stop), or forever (start > stop), silently
    k = make("i = kaio.global_id()\nc = 0\nfor j in range(a, b, s):\n    c += 1\ny[i] = c",
             "y: kaio.Raw[kaio.i32], a: kaio.i32, b: kaio.i32, s: kaio.i32")
    y = np.zeros(8, np.int32)
    with pytest.raises(KernelRuntimeError, match=r"range\(\) step is 0 at run time") as info:
        k[1, 8](y, start, stop, 0)
    assert info.value.line == 5


def test_per_thread_range_step_of_zero_raises_only_where_a_thread_runs_it(reference):
    k = make("i = kaio.global_id()\nc = 0\nif i < 4:\n    for j in range(0, 6, 2 - i):\n"
             "        c += 1\ny[i] = c", "y: kaio.Raw[kaio.i32]")
    y = np.zeros(8, np.int32)
    with pytest.raises(KernelRuntimeError, match="step is 0"):
        k[1, 8](y)  # thread 2 runs the loop with step 0
    k2 = make("i = kaio.global_id()\nc = 0\nif i < 2:\n    for j in range(0, 6, 2 - i):\n"
              "        c += 1\ny[i] = c", "y: kaio.Raw[kaio.i32]")
    k2[1, 8](y)
    np.testing.assert_array_equal(y, [3, 6, 0, 0, 0, 0, 0, 0])  # threads 2..7 skip the loop
