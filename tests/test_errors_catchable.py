"""Errors people can catch (issue 16): argument errors are kaio errors *and* the matching
built-in, ``True`` is no number, hints name the parameter that was passed, and a CompileError's
traceback starts at the user's call."""
from __future__ import annotations

import os
import traceback

import numpy as np
import pytest

import kaio
from kaio import f32, i32


@kaio.kernel
def scale(x: kaio.In[f32], y: kaio.In[f32], out: kaio.Out[f32], a: f32, n: i32, flag: kaio.bool_):
    for i in out.owned():
        out[i] = x[i] * a + y[i] + kaio.f32(n) if flag else x[i]


def _args(**over):
    args = dict(x=np.ones(8, np.float32), y=np.ones(8, np.float32), out=np.zeros(8, np.float32),
                a=2.0, n=1, flag=True)
    args.update(over)
    return args


@pytest.mark.parametrize("over, cls, builtin", [
    (dict(a="2"), kaio.ArgumentTypeError, TypeError),                     # a str for an f32
    (dict(x=[1.0] * 8), kaio.ArgumentTypeError, TypeError),               # a list for a buffer
    (dict(x=np.ones(8, np.float64)), kaio.ArgumentTypeError, TypeError),  # the wrong dtype
    (dict(n=2**31), kaio.ArgumentValueError, ValueError),                 # out of i32's range
    (dict(a=1e39), kaio.ArgumentValueError, ValueError),                  # overflows f32
    (dict(x=np.ones((2, 4), np.float32)), kaio.ArgumentValueError, ValueError),  # rank
    (dict(out=np.zeros(16, np.float32)[::2]), kaio.ArgumentValueError, ValueError),  # strides
])
def test_argument_errors_are_kaio_errors_and_builtins(over, cls, builtin):
    with pytest.raises(cls) as info:
        scale(**_args(**over))
    assert isinstance(info.value, kaio.KaioError) and isinstance(info.value, builtin)
    assert "kernel 'scale'" in str(info.value)


@pytest.mark.parametrize("call", [
    lambda: scale(np.ones(8, np.float32)),                                # missing arguments
    lambda: scale(*_args().values(), 1),                                  # one too many
    lambda: scale(**_args(), z=1),                                        # no such parameter
])
def test_binding_errors_are_argument_type_errors(call):
    with pytest.raises(kaio.ArgumentTypeError) as info:
        call()
    assert isinstance(info.value, TypeError) and isinstance(info.value, kaio.KaioError)


@pytest.mark.parametrize("param, want", [("n", "i32"), ("a", "f32")])
@pytest.mark.parametrize("value", [True, False, np.bool_(True)])
def test_bool_is_refused_for_numeric_parameters(param, want, value):
    with pytest.raises(kaio.ArgumentTypeError,
                       match=f"kernel 'scale': parameter '{param}' expects a {want} scalar, got bool"):
        scale(**_args(**{param: value}))


def test_bool_parameter_still_takes_bools():
    out = np.zeros(8, np.float32)
    scale(**_args(out=out, flag=np.bool_(False)))
    np.testing.assert_array_equal(out, np.ones(8, np.float32))
    scale(**_args(out=out, flag=True))
    np.testing.assert_array_equal(out, np.full(8, 4.0, np.float32))


@pytest.mark.parametrize("which", ["x", "y"])
def test_non_contiguous_hint_names_the_parameter_passed(which):
    strided = np.ones(16, np.float32)[::2]
    with pytest.raises(kaio.ArgumentValueError) as info:
        scale(**_args(**{which: strided}))
    msg = str(info.value)
    assert f"parameter '{which}'" in msg and f"np.ascontiguousarray({which})" in msg
    other = "y" if which == "x" else "x"
    assert f"ascontiguousarray({other})" not in msg


# --- tracebacks ------------------------------------------------------------------------------
def _bad_kernel():
    @kaio.kernel
    def bad(y: kaio.Out[f32]):
        for i in y.owned():
            y[i] = 1.5 // "s"
    return bad


def _kaio_frames(exc) -> list[str]:
    """The traceback frames of ``exc`` that lie in kaio's own source tree."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(kaio.__file__)))
    tests = os.path.dirname(os.path.abspath(__file__))
    return [f"{fr.filename}:{fr.name}" for fr in traceback.extract_tb(exc.__traceback__)
            if os.path.abspath(fr.filename).startswith(root)
            and not os.path.abspath(fr.filename).startswith(tests)]


def _compile_error(call):
    try:
        call()
    except kaio.CompileError as e:
        return e
    raise AssertionError("no CompileError")


@pytest.mark.parametrize("how", ["call", "launch", "ir", "compile", "emit"])
def test_compile_error_traceback_starts_at_the_users_call(how):
    bad = _bad_kernel()
    y = np.zeros(4, np.float32)
    call = {"call": lambda: bad(y), "launch": lambda: bad[1, 4](y), "ir": lambda: bad.ir,
            "compile": lambda: bad.compile("reference"), "emit": lambda: bad.emit("ir")}[how]
    e = _compile_error(call)
    frames = _kaio_frames(e)
    assert len(frames) <= 2, frames  # the property getter (ir) and kaio's entry point
    assert e.__cause__ is None and e.__suppress_context__
    assert e.line == bad.fn.__code__.co_firstlineno + 3  # the message still points at the line
    assert traceback.extract_tb(e.__traceback__)[0].name == "_compile_error"


def test_decoration_error_traceback_is_short():
    def annotate_nothing():
        @kaio.kernel
        def bad(y):
            pass
    e = _compile_error(annotate_nothing)
    assert len(_kaio_frames(e)) <= 2, _kaio_frames(e)


def test_internal_frames_setting_keeps_the_whole_traceback(monkeypatch):
    monkeypatch.setenv("KAIO_INTERNAL_FRAMES", "1")
    bad = _bad_kernel()
    e = _compile_error(lambda: bad(np.zeros(4, np.float32)))
    assert len(_kaio_frames(e)) > 4
