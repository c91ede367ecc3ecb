"""Racy twins in the tests: a kernel function whose racy line is marked ``# RACE``."""
from __future__ import annotations

import inspect

import pytest

import kaio


def rejected_at_race_line(fn, match: str):
    """Compile ``fn`` (a fresh kernel object) and assert the race checker rejects it with a
    message matching ``match`` at the line marked ``# RACE``; returns the CompileError."""
    with pytest.raises(kaio.CompileError, match=match) as ei:
        kaio.kernel(fn).specialize_ir({})
    lines = inspect.getsource(fn).splitlines()
    assert ei.value.line == fn.__code__.co_firstlineno + next(
        k for k, s in enumerate(lines) if "# RACE" in s), str(ei.value)
    return ei.value
