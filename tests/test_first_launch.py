"""A kernel's first launch in a fresh process (issue 15, section 4): what the warm path and the
first launch's checks compute, and that each piece of it is done once and stays exact."""
from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest
from test_warm_cache import _Stub, _triple

import kaio
from kaio import warm
from kaio.cache import CompileCache, set_default_cache
from kaio.regions import bounds


# --- launch-time index bounds: ints, exactly ---------------------------------------------------
def _truncated(x, y):
    """The kernel's division: truncation toward zero, computed exactly with Fractions."""
    q = Fraction(x) / Fraction(y)
    return int(q)   # int() of a Fraction truncates toward zero


@pytest.mark.parametrize("x", [7, -7, 2**62 + 1, -(2**62 + 1), 0])
@pytest.mark.parametrize("y", [2, -2, 3, -3, 2**31 - 1])
def test_bounds_div_rem_truncate_exactly_in_ints(x, y):
    env = {"n": x, "m": y}
    div = ((1, 1, ("div", ((1, 1, "n"),), ((1, 1, "m"),))),)
    rem = ((1, 1, ("rem", ((1, 1, "n"),), ((1, 1, "m"),))),)
    q = bounds.evaluate(div, env)
    r = bounds.evaluate(rem, env)
    # ints throughout (a launch checks its bounds with int arithmetic, not Fractions)
    assert type(q) is int and type(r) is int
    assert q == _truncated(x, y)
    assert r == x - y * _truncated(x, y)


def test_bounds_keep_fractions_where_a_coefficient_is_one():
    env = {"n": 7, "grid_dim.x": 3}
    half = ((1, 2, "n"), (-1, 1))            # n / 2 - 1
    assert bounds.evaluate(half, env) == Fraction(5, 2)
    nested = ((1, 1, ("div", ((1, 2, "n"),), ((1, 1, "grid_dim.x"),))),)   # (n/2) div 3
    assert bounds.evaluate(nested, env) == 1
    with pytest.raises(ZeroDivisionError):
        bounds.evaluate(((1, 1, ("div", ((1, 1, "n"),), ((0, 1),))),), env)


def test_launch_refuses_a_short_buffer_through_int_bounds():
    rec = bounds.IndexBound("x", 0, "load", "i", 3,
                            upper=(bounds.LaunchExpr("n - 1", ((-1, 1), (1, 1, "n"))),))
    env = {"n": 10, "x.shape[0]": 9}
    with pytest.raises(Exception, match="needs a length of at least 10, but it has 9"):
        bounds.check("k", (rec,), env)
    bounds.check("k", (rec,), dict(env, **{"x.shape[0]": 10}))


# --- the warm key: a function's source lines ---------------------------------------------------
def _module(tmp_path, name: str, text: str):
    import importlib.util
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


SRC = '''
import kaio
from kaio import f32


@kaio.kernel
def k1(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = x[i] + 1.0


@kaio.kernel
def k2(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = x[i] * 2.0
'''


@pytest.fixture
def opened(monkeypatch) -> list:
    """The files kaio.warm opens (its source reads), in order."""
    got = []
    real_open = builtins.open

    def counting(file, *a, **k):
        got.append(os.fspath(file))
        return real_open(file, *a, **k)
    monkeypatch.setattr(warm, "open", counting, raising=False)
    monkeypatch.setattr(warm, "_LINES", {})
    return got


def test_kernels_of_one_file_read_it_once(tmp_path, opened):
    mod, path = _module(tmp_path, "two_kernels", SRC)
    a = warm.function_print(mod.k1.fn)
    b = warm.function_print(mod.k2.fn)
    assert a != b
    assert opened.count(str(path)) == 1
    # the same print again, read from memory while the file is unchanged
    assert warm.function_print(mod.k1.fn) == a and opened.count(str(path)) == 1


def test_source_edit_below_a_kernel_keeps_its_print_and_an_edit_in_it_changes_it(tmp_path):
    mod, path = _module(tmp_path, "edited", SRC)
    a1, a2 = warm.function_print(mod.k1.fn), warm.function_print(mod.k2.fn)
    st = os.stat(path)
    text = path.read_text()
    # k2's body edited (same length: only the mtime tells): k1's lines are the same, k2's not
    path.write_text(text.replace("x[i] * 2.0", "x[i] * 3.0"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert warm.function_print(mod.k1.fn) == a1
    assert warm.function_print(mod.k2.fn) != a2


def test_source_lines_split_where_python_counts_lines(tmp_path):
    # CRLF line ends: the function's lines are the same lines Python numbered
    mod, path = _module(tmp_path, "crlf", SRC)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    code = mod.k2.fn.__code__
    got = warm._source(code, list(warm._codes(code)))
    assert got.startswith(b"@kaio.kernel\r\ndef k2(") and got.endswith(b"y[i] = x[i] * 2.0\r\n")


# --- the compiler's fingerprint: hashed once per stamp of kaio's files -------------------------
def test_compiler_fingerprint_is_kept_under_the_package_stamp(tmp_path, monkeypatch):
    from kaio import cache as kc
    disk = kc.CompileCache(tmp_path / "c", disk=True)
    monkeypatch.setattr(kc, "_default", disk)
    hashed = []
    real = kc._hash_compiler_sources

    def counting():
        hashed.append(1)
        return real()
    monkeypatch.setattr(kc, "_hash_compiler_sources", counting)
    stamp = ["one"]
    monkeypatch.setattr(kc, "stamp_source", lambda: stamp[0])

    def fresh():   # what a new process computes
        monkeypatch.setattr(kc, "_FINGERPRINT", None)
        disk.clear_memory()
        return kc.compiler_fingerprint()
    first = fresh()
    assert len(hashed) == 1 and len(first) == 64
    assert fresh() == first and len(hashed) == 1     # read back: the sources not hashed again
    stamp[0] = "two"                                 # a file of kaio changed
    assert fresh() == first and len(hashed) == 2
    # a damaged entry is refused by the cache's checks (and deleted), then hashed again
    stamp[0] = "one"
    key = "p" + __import__("hashlib").sha256(b"kaio compiler fingerprint one").hexdigest()[1:]
    path = disk.path(key)
    data = path.read_bytes()
    path.write_bytes(data[:-1] + (b"1" if data.endswith(b"0") else b"0"))
    assert fresh() == first and len(hashed) == 3 and disk.stats["corrupt"] == 1


def test_warm_sets_the_fingerprints_stamp():
    from kaio import cache as kc
    assert kc.stamp_source is warm.package_stamp


# --- the package stamp: started at import kaio, in a thread ------------------------------------
_PREFETCHED = r'''
import json, os, sys, threading
import kaio
from kaio import warm
pre = warm._PREFETCH
started = pre is not None and pre[1].name == "kaio-package-stamp"
stamp = warm.package_stamp()
print(json.dumps({"started": started, "pid_ok": pre is None or pre[0] == os.getpid(),
                  "same": stamp == warm._stamp(warm._stamp_roots())[0],
                  "alive": [t.name for t in threading.enumerate() if t.name == "kaio-package-stamp"]}))
'''


def _child(code: str, **env) -> dict:
    """The JSON a fresh Python process running ``code`` prints last (``env``: more variables;
    the disk cache on unless given)."""
    e = dict(os.environ)
    e.pop("KAIO_CACHE_DISABLE", None)
    e.update(env)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_checkout_stamps_kaio_in_a_thread_from_import(tmp_path):
    got = _child(_PREFETCHED, KAIO_CACHE_DIR=str(tmp_path))
    # this checkout (an editable install) is stamped file by file: in the thread, and the
    # stamp it leaves is the one computed in the process's own thread
    assert got["started"] and got["pid_ok"] and got["same"]
    assert got["alive"] == []          # joined: done by the time the stamp was needed


def test_no_stamp_thread_without_a_disk_cache(tmp_path):
    got = _child(_PREFETCHED, KAIO_CACHE_DISABLE="1")
    assert not got["started"] and got["same"]


def test_a_forked_child_computes_its_own_stamp(monkeypatch):
    import threading
    done = threading.Thread(target=lambda: None)
    done.start()
    done.join()
    # a stamp a thread of another process (the parent, before a fork) would have left
    monkeypatch.setattr(warm, "_PREFETCH", (os.getpid() + 1, done, [("the parent's", None)]))
    monkeypatch.setattr(warm, "_STAMP", None)
    monkeypatch.setattr(warm, "_COVERED", None)
    assert warm.package_stamp() == warm._stamp(warm._stamp_roots())[0]
    monkeypatch.setattr(warm, "_PREFETCH", (os.getpid(), done, [("this process's", None)]))
    monkeypatch.setattr(warm, "_STAMP", None)
    assert warm.package_stamp() == "this process's"


# --- the frontend reads a kernel's source without tokenize --------------------------------------
FUNCS = '''
import kaio
from kaio import f32


def outer(scale):
    @kaio.kernel
    def nested(x: kaio.In[f32], y: kaio.Region[f32]):
        for i in y.owned():
            y[i] = max(x[i] * scale,
                       0.0
                       )   # the call's closing line has no code of its own
        # a trailing comment
    return nested


@kaio.func
def helper(v):
    f = lambda t: t + 1.0  # noqa: E731
    return f(v)


def plain(a,
          b):
    return (a +
            b)
'''


def test_frontend_source_lines_match_inspect_without_tokenize(tmp_path, monkeypatch):
    import inspect
    import tokenize

    from kaio.frontend import diagnostics
    mod, _ = _module(tmp_path, "funcs", FUNCS)
    fns = [mod.outer(2.0).fn, mod.helper.fn, mod.plain]
    want = {fn: inspect.getsourcelines(fn) for fn in fns}

    def no_tokenize(*a, **k):
        raise AssertionError("tokenize used")
    monkeypatch.setattr(tokenize, "_tokenize", no_tokenize, raising=False)
    monkeypatch.setattr(tokenize, "generate_tokens", no_tokenize)
    for fn in fns:
        lines, first, _, module = diagnostics._source_lines(fn, fn.__code__)
        wlines, wfirst = want[fn]
        assert first == wfirst
        # the same lines, up to the lines after the last code inspect's block also holds
        assert lines == wlines[:len(lines)] and "".join(wlines[len(lines):]).strip(" \n#") in (
            "", "a trailing comment")
        assert module.body[0].name == fn.__name__


def test_frontend_source_falls_back_to_inspect(tmp_path):
    from kaio.frontend import diagnostics
    ns = {}
    exec(compile("def made(x):\n    return x\n", "<made>", "exec"), ns)   # no file
    assert diagnostics._source_lines(ns["made"], ns["made"].__code__) is None
    mod, path = _module(tmp_path, "moved", FUNCS)
    path.write_text("\n\n\n" + path.read_text())   # edited after import: lines moved
    assert diagnostics._source_lines(mod.plain, mod.plain.__code__) is None


# --- a process's first compile imports and prepares only what the kernel needs ----------------
_COLD = r'''
import json, sys, tokenize
sys.path.insert(0, sys.argv[1])
import numpy as np
import kaio
import coldk
kaio.set_backend("reference")
x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
coldk.saxpy(2.0, x, y)
assert (y == 2.0).all()
after_saxpy = sorted(m for m in sys.modules if m.startswith("kaio.mathlib."))
coldk.sines(x, y)
assert np.allclose(y, np.sin(1.0))
print(json.dumps({"saxpy": after_saxpy,
                  "sines": sorted(m for m in sys.modules if m.startswith("kaio.mathlib.")),
                  "tokenize_regexes": tokenize._compile.cache_info().currsize}))
'''

COLDK = '''
import kaio
from kaio import f32


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


@kaio.kernel
def sines(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = kaio.math.sin(x[i])
'''


def test_a_first_compile_imports_only_the_math_it_uses(tmp_path):
    (tmp_path / "coldk.py").write_text(COLDK)
    got = _child(_COLD.replace("sys.argv[1]", repr(str(tmp_path))), KAIO_CACHE_DISABLE="1")
    assert got["saxpy"] == ["kaio.mathlib.ctx"]          # no math: no family of the library
    assert "kaio.mathlib.trig" in got["sines"] and "kaio.mathlib.hyper" not in got["sines"]
    assert got["tokenize_regexes"] == 0                   # the frontend never tokenized a file


def test_a_library_kernels_source_is_covered_by_the_package_stamp(tmp_path, opened):
    from kaio.kernels.ml.norms import softmax_kernel
    lib = softmax_kernel("f32", "f32")
    assert warm._stamped(lib.fn.__code__.co_filename)
    warm.function_print(lib.fn)
    assert opened == []         # kaio's own file: the stamp (path, size, mtime) stands for it
    mod, path = _module(tmp_path, "user_kernels", SRC)
    assert not warm._stamped(str(path))
    warm.function_print(mod.k1.fn)
    assert opened == [str(path)]   # a user's file: its lines are read and hashed


# --- a cold compile prints the kernel once -------------------------------------------------------
def test_the_warm_entry_points_to_the_key_build_computed(tmp_path, monkeypatch):
    disk = CompileCache(tmp_path / "c", disk=True)
    set_default_cache(disk)
    try:
        printed = []
        real = warm.print_kernel
        monkeypatch.setattr(warm, "print_kernel", lambda k: printed.append(k) or real(k))
        compiled = kaio.kernel(_triple).compile(_Stub())
        entries = [json.loads(disk.get(k)) for k in disk.stored_keys() if k.startswith("w")]
        assert len(entries) == 1 and entries[0]["key"] == compiled.artifacts.cache_key
        assert disk.get(entries[0]["key"]) == compiled.artifacts["ptx"]
        assert printed == []     # the key build computed, not the kernel printed again
    finally:
        set_default_cache(None)


# --- the scalars' ranges without finfo ----------------------------------------------------------
def test_float_ranges_are_finfos_without_calling_it(monkeypatch):
    """A launch's scalar checks read each float dtype's range: the values finfo gives, from a
    table (a process's first finfo call is ~0.07 ms of its first launch)."""
    import ml_dtypes
    import numpy as np

    from kaio import dtypes as dt
    want = {"f16": np.finfo(np.float16).max, "bf16": ml_dtypes.finfo(ml_dtypes.bfloat16).max,
            "f32": np.finfo(np.float32).max, "f64": np.finfo(np.float64).max}

    def refused(np_dtype):
        raise AssertionError(f"finfo({np_dtype}) called")
    monkeypatch.setattr(dt, "_finfo", refused)
    for name, m in want.items():
        t = dt.from_name(name)
        assert type(t.max_value()) is float and t.max_value() == float(m), name
        assert t.min_value() == -float(m), name


# --- the signature's parameter types without the tokenizer --------------------------------------
def test_signature_types_read_as_the_ir_grammar_reads_them(monkeypatch):
    """kaio.ir.sigjson reads dtypes and plain global buffers without the IR tokenizer, each the
    type the IR text's grammar gives (other types still go through it)."""
    from kaio import dtypes as dt
    from kaio.ir import sigjson
    from kaio.ir.parser import _Parser
    from kaio.ir.types import BufType, frag_type, type_str
    plain = [*dt.ALL, *(BufType(t, n, "global", i) for t in (dt.f32, dt.bf16, dt.i8, dt.bool_)
                        for n in (1, 2, 3) for i in ("in", "region", "out", "atomic", "raw"))]
    other = [BufType(dt.f32, 1, "shared", "scratch", (32,)), frag_type("a", "m16n8k16", dt.f16)]
    want = {type_str(t): _Parser(type_str(t)).type() for t in plain + other}
    assert all(want[type_str(t)] == t for t in plain + other)
    parsed = []

    class Counted(_Parser):
        def type(self):
            parsed.append(self.toks[0][1])
            return super().type()
    monkeypatch.setattr(sigjson, "_Parser", Counted)
    for text, t in want.items():
        got = sigjson._arg_type(text)
        assert got == t and type(got) is type(t), text
    assert parsed == ["buf", "frag"]      # only the types outside the plain forms
    with pytest.raises(ValueError, match="unknown dtype"):
        sigjson._arg_type("buf<f99, 1, global, in>")   # not a plain form: the grammar's error
    assert parsed[-1] == "buf"


# --- the CUDA parameter buffer ------------------------------------------------------------------
def test_cuda_parameter_buffers_are_addressed_bytearrays():
    """kaio.backends.cuda.ArgPacker's buffers are bytearrays (no ctypes array type made per
    size on a first launch): the pointer array at its address points at each parameter's slot,
    where the packed values are, and neither can be resized while the packer holds them."""
    import ctypes
    import struct

    from kaio.backends.abi import AbiParam, KernelABI
    from kaio.backends.cuda import ArgPacker
    abi = KernelABI("k", [AbiParam("a", "scalar", "f32", 4, 4, 0), AbiParam("x", "pointer", "u64", 8, 8, 1),
                          AbiParam("x_n", "extent", "i32", 4, 4, 1, 0),
                          AbiParam("c", "scalar", "f16", 2, 2, 2)])
    packer = ArgPacker(abi)
    assert type(packer.buffer) is bytearray
    packer.pack([1.5, 0xDEADBEEF00, 77, 0.25])
    slots = struct.unpack("4P", ctypes.string_at(packer.address, 4 * struct.calcsize("P")))
    got = [struct.unpack(code, ctypes.string_at(at, struct.calcsize(code)))[0]
           for at, code in zip(slots, ("=f", "=Q", "=i", "=e"))]
    assert got == [1.5, 0xDEADBEEF00, 77, 0.25]
    assert [s - slots[0] for s in slots] == packer.offsets == [0, 8, 16, 20]
    with pytest.raises(BufferError):
        packer.buffer.extend(b"x")
    buffer, keep, address = packer.new_buffer()   # another thread's: its own memory
    assert address != packer.address and struct.unpack("P", ctypes.string_at(address, 8))[0] \
        == ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    assert ArgPacker(KernelABI("none", [])).address == 0   # no parameters: kernelParams NULL


# --- a target's compile options, built once -----------------------------------------------------
@pytest.mark.parametrize("env", [{}, {"KAIO_CHECKED": "1"}, {"KAIO_PORTABLE": "1"}])
def test_target_options_are_one_construction_of_the_same_options(env, monkeypatch):
    """Target.options builds its CompileOptions once (each construction is a few hundredths of
    a millisecond of a first launch), equal to the target's base options with the kernel's
    applied (CompileOptions.with_kernel) and the overrides replaced, as before."""
    from dataclasses import replace

    from kaio import config
    from kaio.backends.targets import get_target
    from kaio.options import SWITCHABLE_PASSES, CompileOptions, KernelOptions
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    config.reload()
    try:
        kernels = [None, KernelOptions(), KernelOptions(fast_math=True, max_registers=64),
                   KernelOptions(checked=False, portable=False, fast_math=True),
                   KernelOptions(checked=True, portable=True, fast_math=True,
                                 disabled_passes=frozenset(list(SWITCHABLE_PASSES)[:1]))]
        made = []
        real = CompileOptions.__post_init__
        for name in ("sm_90", "gfx942", "reference-w32"):
            t = get_target(name)
            for kopts in kernels:
                for fields in ({}, {"ptx_version": "8.0"}, {"fast_math": True}, {"warp_size": 32}):
                    base = CompileOptions(target=t.name, warp_size=t.warp_size, codegen=t.codegen)
                    want = replace(base.with_kernel(kopts), **fields)
                    monkeypatch.setattr(CompileOptions, "__post_init__",
                                        lambda self: made.append(1) or real(self))
                    got = t.options(kopts, **fields)
                    monkeypatch.setattr(CompileOptions, "__post_init__", real)
                    assert got == want and got.key() == want.key(), (name, kopts, fields)
                    assert made == [1]
                    made.clear()
    finally:
        monkeypatch.undo()
        config.reload()
