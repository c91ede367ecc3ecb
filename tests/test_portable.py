"""Portable mode (``@kaio.kernel(portable=True)``, ``KAIO_PORTABLE=1``): only correctly rounded
operations and kaio's portable math library, whatever fast_math or ``fast=True`` ask for.

Checked on the generated code of both NVIDIA paths and the AMD path (no approximation
instruction, no contraction of a separate multiply and add, IEEE division), and on the
reference interpreter (the portable kernel computes what the non-fast one does, bit for bit).
"""
import re

import numpy as np
import pytest

import kaio
from kaio import config, f32
from kaio.options import CompileOptions, KernelOptions


def _body(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = kaio.math.exp(x[i]) / (x[i] * x[i] + 1.0) + kaio.math.tanh(x[i], fast=True)


def _muladd(a: kaio.In[f32], b: kaio.In[f32], c: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = a[i] * b[i] + c[i]


APPROX = re.compile(r"\.approx|div\.full|ex2\.|lg2\.|tanh\.")


@pytest.fixture
def env_portable(monkeypatch):
    def set_(value):
        monkeypatch.setenv("KAIO_PORTABLE", value)
        config.reload()
    yield set_
    monkeypatch.delenv("KAIO_PORTABLE", raising=False)
    config.reload()


def test_fast_kernel_emits_approximations_portable_does_not():
    fast = kaio.kernel(fast_math=True)(_body)
    port = kaio.kernel(fast_math=True, portable=True)(_body)
    assert APPROX.search(fast.emit("ptx", "sm_90"))          # the control: fast is fast
    ptx = port.emit("ptx", "sm_90")
    assert not APPROX.search(ptx), APPROX.search(ptx)
    assert "div.rn.f32" in ptx
    llvm_ptx = port.emit("ptx", "nvptx64-sm_90")             # the LLVM path's PTX
    assert not APPROX.search(llvm_ptx)
    assert "div.rn.f32" in llvm_ptx


def test_llvm_ir_has_no_fast_math_flags_or_approximate_intrinsics():
    port = kaio.kernel(fast_math=True, portable=True)(_body)
    for target in ("nvptx64-sm_90", "gfx942"):
        ll = port.emit("llvm", target)
        assert not re.search(r"\b(fast|contract|afn|reassoc|arcp|nnan|ninf)\b", ll), target
        assert not re.search(r"approx|ex2|tanh|llvm\.exp|rcp", ll), target
    fast_ll = kaio.kernel(fast_math=True)(_body).emit("llvm", "nvptx64-sm_90")
    assert re.search(r"approx|ex2|tanh", fast_ll)            # the control


def test_no_contraction_of_separate_mul_and_add():
    k = kaio.kernel(portable=True)(_muladd)
    ptx = k.emit("ptx", "sm_90")
    assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx and "fma" not in ptx
    llvm_ptx = k.emit("ptx", "nvptx64-sm_90")
    assert "fma" not in llvm_ptx and "mul.rn.f32" in llvm_ptx and "add.rn.f32" in llvm_ptx
    ll = k.emit("llvm", "gfx942")
    assert "fmul float" in ll and "fadd float" in ll and "fma" not in ll


def test_portable_result_bit_identical_to_non_fast_on_reference():
    x = np.linspace(-6, 6, 301, dtype=np.float32)
    plain = kaio.kernel(_body_slow)
    port = kaio.kernel(fast_math=True, portable=True)(_body)
    fast = kaio.kernel(fast_math=True)(_body)
    ys = {}
    for name, k in (("plain", plain), ("port", port), ("fast", fast)):
        y = np.zeros_like(x)
        k(x, y)
        ys[name] = y
    np.testing.assert_array_equal(ys["port"].view(np.uint32), ys["plain"].view(np.uint32))
    assert not np.array_equal(ys["fast"].view(np.uint32), ys["plain"].view(np.uint32))


def _body_slow(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = kaio.math.exp(x[i]) / (x[i] * x[i] + 1.0) + kaio.math.tanh(x[i])


def test_env_switch_and_cache_key(env_portable):
    k = kaio.kernel(fast_math=True)(_body)
    assert APPROX.search(k.emit("ptx", "sm_90"))
    env_portable("1")
    assert not APPROX.search(k.emit("ptx", "sm_90"))
    assert CompileOptions("sm_90", 32, "ptx").portable
    # a kernel that says portable=False keeps its fast math under KAIO_PORTABLE=1
    off = kaio.kernel(fast_math=True, portable=False)(_body)
    assert APPROX.search(off.emit("ptx", "sm_90"))


def test_options_fields():
    o = CompileOptions("sm_90", 32, "ptx", fast_math=True, portable=True)
    assert o.fast_math is False and o.key()["portable"] is True
    on = CompileOptions("sm_90", 32, "ptx", portable=False).with_kernel(
        KernelOptions(fast_math=True, portable=True))
    assert on.portable and not on.fast_math
    assert CompileOptions("sm_90", 32, "ptx", portable=False).key() != o.key()


def test_portable_cost_script_on_the_reference(tmp_path, monkeypatch):
    """benchmarks/portable_cost.py (device step portable-cost) on the CPU: a fast-math kernel
    is found changed and timed both ways, a plain one has the same code."""
    import json
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import portable_cost

    from kaio import backends
    monkeypatch.setattr(backends, "_current", backends._current)   # the script selects one
    rc = portable_cost.main(["--backend", "reference", "--quick", "--out", str(tmp_path),
                             "--kernel", "silu_gate", "DAXPY"])
    rows = {r["case"]: r for r in json.loads((tmp_path / "portable_cost.json").read_text())["rows"]}
    assert rc == 0
    assert rows["rajaperf/DAXPY"]["changed"] == []
    assert rows["ml/silu_gate"]["changed"] == ["silu_gate"]
    assert rows["ml/silu_gate"]["portable_ms"] > 0 and rows["ml/silu_gate"]["max_rel_diff"] < 1e-5
    assert "same code" in (tmp_path / "portable_cost.md").read_text()
