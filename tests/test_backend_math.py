"""Math in the backends, checked against the IR's semantics (the reference interpreter):

- float min/max (plain and atomic): a NaN operand loses and -0 is below +0 (docs/ir.md) in
  kaio's PTX (run by tests/ptx_sim.py, which models PTX ``min``/``max`` as the ISA states) and in
  the LLVM emitter (JIT-compiled for this CPU by tests/llvm_host.py);
- the exact float remainder (``rem``, ``math.fmod``), kaio.mathlib's loop on every backend:
  bit-identical to C fmod on divisors down to the smallest subnormal and on huge quotients;
- a ``fast`` function a target has no instruction for is the library's portable code there
  (same bits as the reference), and the instruction tables only name real functions;
- the renderers' dispatch tables (kaio.ir.ops.handler_table) cover every IR opcode a lowered
  kernel can hold.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from kaio import dtypes as dt
from kaio.backends import llvm_math, llvm_targets, ptx_math
from kaio.backends.ptx import emit_ptx
from kaio.ir import BufType, Builder, Param
from kaio.ir.ops import MATH_FNS, SPECS
from kaio.passes import target_pipeline

FLOATS = [dt.f32, dt.f64, dt.f16, dt.bf16]
ARCHS = ("sm_80", "sm_90")
INF, NAN = math.inf, math.nan


def _ids(v):
    return v.name if isinstance(v, dt.DType) else str(v)


def _kernel(name, bufs, body):
    """A one-lane-per-element kernel over 1-d global buffers ``bufs`` = [(name, dtype, intent)];
    ``body(b, i, *args)`` fills it. Returns the kernel after the target pipeline."""
    b = Builder.for_kernel(name, [(n, BufType(t, 1, "global", intent), Param(n, "buffer"))
                                  for n, t, intent in bufs])
    body(b, b.special("thread_idx", 0), *b.kernel.args)
    return target_pipeline(b.finish(), 32)


def _reference(k, args, n):
    from kaio.backends.reference import ReferenceBackend
    out = [a.copy() for a in args]
    ReferenceBackend(sanitize=False).launch(k, (1,), (n,), out)
    return out


def _ptx_sim(k, args, n, arch):
    from ptx_sim import Machine
    out = [a.copy() for a in args]
    ptx, abi = emit_ptx(k, arch)
    Machine(ptx).launch(out, abi, (1,), (n,))
    return out


def _host(k, args, n):
    llvm_host = pytest.importorskip("llvm_host")
    out = [a.copy() for a in args]
    with np.errstate(all="ignore"):
        llvm_host.run_on_host(k, out, (1, 1, 1), (n, 1, 1))
    return out


def _same_bits(got, want) -> np.ndarray:
    """Elementwise: identical bit patterns, or both NaN (payloads are not specified)."""
    ut = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    with np.errstate(invalid="ignore"):
        nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
    return (got.view(ut) == want.view(ut)) | nan


def _assert_same(got, want, what, inputs):
    ok = _same_bits(got, want)
    bad = np.flatnonzero(~ok)[:5]
    assert ok.all(), [(what, *(float(a[i]) for a in inputs), float(got[i]), float(want[i]))
                      for i in bad]


# --- min / max ---------------------------------------------------------------------------------
GRID = [0.0, -0.0, NAN, INF, -INF, 1.0, -1.0, 2.5, -2.5, 1e-40]


def _minmax_case(t):
    xs, ys = (g.ravel() for g in np.meshgrid(GRID, GRID))
    x, y = xs.astype(t.storage_np), ys.astype(t.storage_np)

    def body(b, i, xb, yb, out, amin, amax):
        n = b.const(len(x), dt.i32)
        a, c = b.load(xb, [i]), b.load(yb, [i])
        b.store(out, [i], b.binary("min", a, c))
        b.store(out, [b.binary("add", i, n)], b.binary("max", a, c))
        b.atomic("min", amin, [i], c)
        b.atomic("max", amax, [i], c)
    k = _kernel(f"minmax_{t.name}", [("x", t, "in"), ("y", t, "in"), ("out", t, "raw"),
                                     ("amin", t, "atomic"), ("amax", t, "atomic")], body)
    return k, [x, y, np.zeros(2 * len(x), t.storage_np), x.copy(), x.copy()], len(x)


def _check_minmax(got, want, x, y):
    n = len(x)
    for what, g, w in (("min", got[2][:n], want[2][:n]), ("max", got[2][n:], want[2][n:]),
                       ("atomic min", got[3], want[3]), ("atomic max", got[4], want[4])):
        _assert_same(g, w, what, (x, y))


@pytest.mark.parametrize("t", FLOATS, ids=_ids)
def test_reference_minmax_is_the_ir_semantics(t):
    """The reference itself, against docs/ir.md written out: the NaN operand loses (NaN only
    when both are), -0 < +0, and atomics combine the same way."""
    k, args, n = _minmax_case(t)
    out = _reference(k, args, n)
    x, y = (a.astype(np.float64) for a in args[:2])

    def want(is_min):
        r = np.where(np.isnan(x), y, np.where(np.isnan(y), x, np.minimum(x, y) if is_min
                                              else np.maximum(x, y)))
        zeros = (x == 0) & (y == 0)
        neg = (np.signbit(x) | np.signbit(y)) if is_min else (np.signbit(x) & np.signbit(y))
        return np.where(zeros, np.where(neg, -0.0, 0.0), r).astype(t.storage_np)
    _check_minmax(out, [None, None, np.concatenate([want(True), want(False)]), want(True),
                        want(False)], args[0], args[1])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("t", FLOATS, ids=_ids)
def test_ptx_minmax_matches_reference(t, arch):
    k, args, n = _minmax_case(t)
    _check_minmax(_ptx_sim(k, args, n, arch), _reference(k, args, n), args[0], args[1])


@pytest.mark.parametrize("t", FLOATS, ids=_ids)
def test_llvm_minmax_matches_reference(t):
    k, args, n = _minmax_case(t)
    _check_minmax(_host(k, args, n), _reference(k, args, n), args[0], args[1])


def test_llvm_minmax_intrinsics_order_signed_zeros():
    """llvm.minnum/maxnum and atomicrmw fmin/fmax leave the order of -0 and +0 open: the
    emitter uses minimumnum/maximumnum, and a compare-and-swap loop around them for atomics."""
    from kaio.backends.llvm import emit_llvm
    k, _, _ = _minmax_case(dt.f32)
    for target in ("gfx942", "nvptx64-sm_90"):
        text = emit_llvm(k, target)
        assert "@llvm.minimumnum.f32" in text and "@llvm.maximumnum.f32" in text
        assert "minnum" not in text and "maxnum" not in text
        assert "atomicrmw fmin" not in text and "atomicrmw fmax" not in text
        assert text.count("cmpxchg") == 2


# --- fmod / float rem --------------------------------------------------------------------------
def _fmod_inputs(t):
    fi = np.finfo(np.float32 if t is dt.bf16 else t.storage_np)
    den = 2.0 ** -133 if t is dt.bf16 else float(fi.smallest_subnormal)
    big = float(np.float32(3.3895313892515355e38)) if t is dt.bf16 else float(fi.max)
    pairs = [(1.0, 0.1), (big, den), (-big, 3 * den), (big, 0.1), (-3.5, den), (7 * den, 2 * den),
             (2.5, -0.75), (1e4, 3.0), (-0.0, 1.0), (0.0, -0.0), (INF, 1.0), (1.0, INF),
             (NAN, 1.0), (1.0, NAN), (-5.5, 2.0), (den, big), (float(fi.tiny), den)]
    x, y = (np.array(v, np.float64).astype(t.storage_np) for v in zip(*pairs))
    return x, y


def _fmod_case(t):
    x, y = _fmod_inputs(t)
    k = _kernel(f"rem_{t.name}", [("x", t, "in"), ("y", t, "in"), ("z", t, "raw")],
                lambda b, i, xb, yb, z: b.store(z, [i], b.binary("rem", b.load(xb, [i]),
                                                                 b.load(yb, [i]))))
    with np.errstate(all="ignore"):
        want = np.fmod(x.astype(np.float64), y.astype(np.float64)).astype(t.storage_np)  # exact
    return k, [x, y, np.zeros_like(x)], want


@pytest.mark.parametrize("t", FLOATS, ids=_ids)
def test_fmod_exact_on_reference_and_llvm(t):
    """Extreme exponent gaps (the largest value by the smallest subnormal: ~2100 steps in f64),
    quotients that round across an integer (fmod(1, 0.1)), signed zeros and specials."""
    k, args, want = _fmod_case(t)
    n = len(want)
    _assert_same(_reference(k, args, n)[2], want, "reference", args[:2])
    _assert_same(_host(k, args, n)[2], want, "llvm host", args[:2])


@pytest.mark.parametrize("t", [dt.f32, dt.f16], ids=_ids)
def test_fmod_exact_in_ptx_simulator(t):
    """The same loop in kaio's PTX (f64 is covered in test_ptx.py); the largest gaps are left
    out here because the simulator runs each instruction in Python."""
    k, args, want = _fmod_case(t)
    keep = np.abs(np.log2(np.abs(args[0].astype(np.float64)) + 1e-300)
                  - np.log2(np.abs(args[1].astype(np.float64)) + 1e-300)) < 60
    keep |= ~np.isfinite(args[0].astype(np.float64) * args[1].astype(np.float64))
    args = [a[keep] for a in args]
    out = _ptx_sim(k, args, len(args[0]), "sm_90")
    _assert_same(out[2], want[keep], "ptx", args[:2])


def test_float_rem_has_no_frem_and_needs_the_target_pipeline():
    from kaio.backends.llvm import emit_llvm
    k, _, _ = _fmod_case(dt.f32)
    assert "frem" not in emit_llvm(k, "gfx942")
    b = Builder.for_kernel("raw_rem", [(n, BufType(dt.f32, 1, "global", "raw"), Param(n, "buffer"))
                                       for n in ("x", "z")])
    x, z = b.kernel.args
    i = b.special("thread_idx", 0)
    b.store(z, [i], b.binary("rem", b.load(x, [i]), b.load(x, [i])))
    with pytest.raises(NotImplementedError, match="target_pipeline"):
        emit_ptx(b.finish(), "sm_90")


# --- fast functions without an instruction --------------------------------------------------------
def _fast_case(fn, t):
    arity = MATH_FNS[fn]
    rng = np.random.default_rng(11)
    xs = [np.concatenate([rng.uniform(-4, 4, 60), [0.0, -0.0, INF, NAN]]).astype(t.storage_np)
          for _ in range(arity)]

    def body(fast):
        def f(b, i, *bufs):
            b.store(bufs[-1], [i], b.math(fn, *[b.load(a, [i]) for a in bufs[:-1]], fast=fast))
        return f
    bufs = [(f"x{j}", t, "in") for j in range(arity)] + [("y", t, "out")]
    fast = _kernel(f"fast_{fn}", bufs, body(True))
    portable = _kernel(f"portable_{fn}", bufs, body(False))
    return fast, portable, [*xs, np.zeros_like(xs[0])]


@pytest.mark.parametrize("fn, t", [("atan", dt.f32), ("erf", dt.f32), ("fmod", dt.f32),
                                    ("exp", dt.f64), ("expm1", dt.f16)], ids=str)
def test_fast_without_ptx_instruction_is_the_library_code(fn, t):
    assert not ptx_math.has_native(fn, dt.f32 if t.bits == 16 else t, fast=True)
    fast, portable, args = _fast_case(fn, t)
    assert "approx" not in emit_ptx(fast, "sm_90")[0]
    n = len(args[0])
    _assert_same(_ptx_sim(fast, args, n, "sm_90")[-1], _reference(portable, args, n)[-1], fn, args[:-1])


@pytest.mark.parametrize("fn, t", [("tanh", dt.f32), ("atan2", dt.f32), ("exp", dt.f64),
                                    ("log", dt.bf16)], ids=str)
def test_fast_without_llvm_instruction_is_the_library_code(fn, t):
    """The host target has no fast table, so every fast function runs the library there; amdgcn
    has no tanh approximation, so its fast tanh is the library code too."""
    fast, portable, args = _fast_case(fn, t)
    n = len(args[0])
    _assert_same(_host(fast, args, n)[-1], _reference(portable, args, n)[-1], fn, args[:-1])
    if fn == "tanh":
        from kaio.backends.llvm import emit_llvm
        text = emit_llvm(fast, "gfx942")
        assert "tanh" not in llvm_targets.get_target("gfx942").fast_f32
        assert not any(f"@llvm.amdgcn.{i}" in text for i in ("exp2", "log", "sin", "rsq"))


def test_instruction_tables_name_real_functions():
    fns = set(MATH_FNS)
    assert all(set(table) <= fns for table in ptx_math.FAST.values())
    assert set(ptx_math.EXACT) | set(ptx_math.TESTP) <= fns
    assert set(llvm_math.EXACT_UNARY) | set(llvm_math.EXACT_BINARY) | set(llvm_math.CLASSES) <= fns
    for t in llvm_targets.TARGETS.values():
        assert set(t.fast_f32) <= fns, t.name


# --- dispatch tables -----------------------------------------------------------------------------
def test_renderer_tables_cover_every_lowered_opcode():
    """handler_table builds the PTX and LLVM tables from their ``op_`` methods: every opcode but
    the reductions (lowered before codegen) and the terminators (read by their parent op)."""
    from kaio.backends import llvm, ptx
    left = {"warp_reduce", "block_reduce", "yield", "condition"}
    assert set(SPECS) - set(ptx._HANDLERS) == left
    assert set(SPECS) - set(llvm._HANDLERS) == left      # kaio.mma too: backends/llvm_mma.py
