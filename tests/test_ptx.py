"""PTX code generator: every IR op x dtype assembles with ptxas for sm_80 and sm_90, and the
instructions that carry semantics (rounding modes, no contraction, .nc loads, shuffles...)
appear where they must.

ptxas is the validator here (no GPU needed); scripts/ptx_smoke.py runs kernels on a GPU.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import kaio
from kaio import dtypes as dt
from kaio import f32, i32
from kaio.backends.abi import kernel_abi, ptx_version_for
from kaio.backends.ptx import emit_ptx
from kaio.ir import BufType, Builder, Loc, Param
from kaio.ir.ops import MATH_FNS

PTXAS = shutil.which("ptxas") or ("/usr/local/bin/ptxas" if os.path.exists("/usr/local/bin/ptxas") else None)
ARCHS = ("sm_80", "sm_90")
INTS = [t for t in dt.ALL if t.is_int]
FLOATS = [t for t in dt.ALL if t.is_float]
SCALARS = [t for t in dt.ALL]


# --- helpers ---------------------------------------------------------------------------------
def kernel(name, params, body, pipeline=True):
    """Build a kernel: params = [(name, type)], body(b, *args) fills it."""
    b = Builder.for_kernel(name, [(n, t, Param(n, "buffer" if isinstance(t, BufType) else "scalar"))
                                  for n, t in params])
    body(b, *b.kernel.args)
    k = b.finish()
    if pipeline:
        from kaio.passes import target_pipeline
        k = target_pipeline(k, 32)
    return k


def gbuf(t, intent="region", ndim=1):
    return BufType(t, ndim, "global", intent)


def tid(b):
    return b.special("thread_idx", 0)


def ptxas(ptx: str, arch: str) -> None:
    if PTXAS is None:
        pytest.skip("ptxas not found (install the CUDA toolkit to validate PTX)")
    if arch == "sm_90" and ".target sm_90a" in ptx:     # wgmma kernels target sm_90a
        arch = "sm_90a"
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([PTXAS, f"-arch={arch}", src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    assert r.returncode == 0, f"ptxas -arch={arch} failed:\n{r.stderr}\n{_numbered(ptx)}"


def _numbered(ptx):
    return "\n".join(f"{i + 1:4} {line}" for i, line in enumerate(ptx.splitlines()))


def assemble(k, **kw) -> dict:
    """Emit for every arch, assemble each; returns arch -> PTX text."""
    out = {}
    for arch in ARCHS:
        ptx, _ = emit_ptx(k, arch, **kw)
        ptxas(ptx, arch)
        out[arch] = ptx
    return out


def body_lines(ptx):
    return [ln.strip() for ln in ptx.splitlines() if ln.startswith("\t") and not ln.strip().startswith("//")]


# --- ABI and versions --------------------------------------------------------------------------
def test_abi_flattens_buffers_into_pointer_and_extents():
    k = kernel("abi", [("a", dt.f16), ("flag", dt.bool_), ("x", gbuf(dt.f32, "in", 2)),
                       ("y", gbuf(dt.i8, "out", 3))], lambda b, *a: None, pipeline=False)
    abi = kernel_abi(k)
    assert [(p.name, p.kind, p.dtype, p.size, p.ir_param_index, p.dim) for p in abi.params] == [
        ("a", "scalar", "f16", 2, 0, None), ("flag", "scalar", "u8", 1, 1, None),
        ("x_ptr", "pointer", "u64", 8, 2, None), ("x_n0", "extent", "i32", 4, 2, 0),
        ("x_n1", "extent", "i32", 4, 2, 1), ("y_ptr", "pointer", "u64", 8, 3, None),
        ("y_n0", "extent", "i32", 4, 3, 0), ("y_n1", "extent", "i32", 4, 3, 1),
        ("y_n2", "extent", "i32", 4, 3, 2)]
    ptx, abi2 = emit_ptx(k, "sm_80")
    assert abi2 == abi
    assert re.search(r"\.param \.b16 a,\s*\.param \.u8 flag,\s*\.param \.u64 x_ptr", ptx)


def test_ptx_versions():
    assert ptx_version_for("sm_80") == "7.0"
    assert ptx_version_for("sm_86") == "7.1"
    assert ptx_version_for("sm_89") == "7.8"
    assert ptx_version_for("sm_90") == "7.8"
    assert ptx_version_for("sm_90", driver_version=12040) == "7.8"
    assert ptx_version_for("sm_80", "12.0") == "7.0"
    with pytest.raises(ValueError, match="too old"):
        ptx_version_for("sm_90", driver_version=(11, 4))
    with pytest.raises(ValueError, match="sm_75"):
        ptx_version_for("sm_75")
    with pytest.raises(ValueError, match="not supported"):
        emit_ptx(kernel("e", [], lambda b: None, pipeline=False), "sm_70")


# --- scalar ops x dtypes -----------------------------------------------------------------------
def _binops(t):
    if t.is_bool:
        return ["and", "or", "xor", "min", "max"]
    if t.is_int:
        return ["add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr"]
    return ["add", "sub", "mul", "div", "rem", "min", "max"]


def _unops(t):
    return ["not"] if t.is_bool else (["neg", "not", "abs"] if t.is_int else ["neg", "abs"])


@pytest.mark.parametrize("t", SCALARS, ids=str)
def test_arithmetic_compare_select_every_dtype(t):
    def body(b, x, y, out, flags):
        i = tid(b)
        a, c = b.load(x, [i]), b.load(y, [i])
        acc = a
        for opc in _binops(t):
            acc = b.binary(opc, acc, c)
        for opc in _unops(t):
            acc = b.unary(opc, acc)
        if t.is_float:
            acc = b.fma(acc, a, c)
        for pred in ("eq", "ne", "lt", "le", "gt", "ge"):
            acc = b.select(b.cmp(pred, acc, c), acc, a)
            b.store(flags, [i], b.cmp(pred, a, c))
        b.store(out, [i], acc)
        b.store(out, [b.binary("add", i, b.const(1, dt.i32))], b.const(1, t))
    k = kernel(f"arith_{t}", [("x", gbuf(t, "in")), ("y", gbuf(t, "in")), ("out", gbuf(t)),
                              ("flags", gbuf(dt.bool_))], body)
    ptx = assemble(k)
    if t.is_float and t.bits >= 32:
        text = ptx["sm_80"]
        assert f"add.rn.{t}" in text and f"mul.rn.{t}" in text and f"div.rn.{t}" in text
        assert f"fma.rn.{t}" in text and f"setp.neu.{t}" in text
    if t.name == "bf16":
        assert "fma.rn.bf16" in ptx["sm_80"] and "add.rn.bf16" not in ptx["sm_80"]
        assert "add.rn.bf16" in ptx["sm_90"]
    if t.is_int and t.bits < 32:
        assert f"bfe.{'s' if t.is_signed else 'u'}32" in ptx["sm_80"]  # re-truncation after wrap


def test_mul_add_is_never_contracted_and_fma_is_explicit():
    def body(b, x, out):
        i = tid(b)
        a = b.load(x, [i])
        b.store(out, [i], b.binary("add", b.binary("mul", a, a), a))
        b.store(out, [b.binary("add", i, b.const(1, dt.i32))], b.fma(a, a, a))
    ptx = assemble(kernel("contract", [("x", gbuf(dt.f32, "in")), ("out", gbuf(dt.f32))], body))["sm_90"]
    lines = body_lines(ptx)
    assert any(ln.startswith("mul.rn.f32") for ln in lines)
    assert any(ln.startswith("add.rn.f32") for ln in lines)
    assert sum(ln.startswith("fma.rn.f32") for ln in lines) == 1
    assert "ld.global.nc.f32" in ptx and "st.global.f32" in ptx


def test_shift_amounts_are_clamped_in_64_bit():
    def body(b, x, out):
        i = tid(b)
        a = b.load(x, [i])
        b.store(out, [i], b.binary("shr", b.binary("shl", a, a), a))
    ptx = assemble(kernel("shift64", [("x", gbuf(dt.i64, "in")), ("out", gbuf(dt.i64))], body))["sm_80"]
    assert "min.u64" in ptx and "shl.b64" in ptx and "shr.s64" in ptx


@pytest.mark.parametrize("src", SCALARS, ids=str)
def test_casts_from_every_dtype_to_every_dtype(src):
    def body(b, x, *outs):
        i = tid(b)
        a = b.load(x, [i])
        for dst, o in zip(SCALARS, outs):
            b.store(o, [i], b.cast(a, dst))
    params = [("x", gbuf(src, "in"))] + [(f"o_{d}", gbuf(d, "out")) for d in SCALARS]
    ptx = assemble(kernel(f"cast_{src}", params, body))["sm_80"]
    if src.is_float:
        assert "cvt.rzi.s32" in ptx and "cvt.rzi.u64" in ptx   # saturating, NaN -> 0
    if src.name == "f64":
        assert "cvt.rn.f32.f64" in ptx and "cvt.rz.f32.f64" in ptx   # bf16 via round-to-odd
    if src.name == "f32":
        assert "cvt.f64.f32" in ptx and "cvt.rn.f16.f32" in ptx


@pytest.mark.parametrize("pair", [(dt.i32, dt.f32), (dt.f32, dt.u32), (dt.u64, dt.f64),
                                  (dt.f64, dt.i64), (dt.i16, dt.f16), (dt.bf16, dt.u16),
                                  (dt.f16, dt.bf16), (dt.u8, dt.i8)], ids=str)
def test_bitcasts(pair):
    src, dst = pair

    def body(b, x, out):
        i = tid(b)
        b.store(out, [i], b.bitcast(b.load(x, [i]), dst))
    assemble(kernel("bitcast", [("x", gbuf(src, "in")), ("out", gbuf(dst, "out"))], body))


# --- math -------------------------------------------------------------------------------------
@pytest.mark.parametrize("fast", [False, True], ids=["accurate", "fast"])
@pytest.mark.parametrize("t", FLOATS, ids=str)
def test_every_math_function(t, fast):
    def body(b, x, y, out, flags):
        i = tid(b)
        a, c = b.load(x, [i]), b.load(y, [i])
        for k, (fn, arity) in enumerate(MATH_FNS.items()):
            r = b.math(fn, *([a, c][:arity]), fast=fast)
            j = b.binary("add", i, b.const(k, dt.i32))
            b.store(flags if r.type is dt.bool_ else out, [j], r)
    ptx = assemble(kernel(f"math_{t}", [("x", gbuf(t, "in")), ("y", gbuf(t, "in")),
                                        ("out", gbuf(t)), ("flags", gbuf(dt.bool_))], body))["sm_80"]
    if t.name == "f32":
        assert "sqrt.rn.f32" in ptx or fast
        assert ("ex2.approx.f32" in ptx) == fast
        assert "cvt.rmi.f32.f32" in ptx and "cvt.rni.f32.f32" in ptx and "testp.notanumber.f32" in ptx
        if fast:
            assert "tanh.approx.f32" in ptx and "sin.approx.f32" in ptx and "lg2.approx.f32" in ptx


def test_kernel_wide_fast_math():
    def body(b, x, out):
        i = tid(b)
        a = b.load(x, [i])
        b.store(out, [i], b.binary("div", b.math("exp", a), a))
    from kaio.passes import target_pipeline
    raw = kernel("fastk", [("x", gbuf(dt.f32, "in")), ("out", gbuf(dt.f32))], body, pipeline=False)
    k = target_pipeline(raw, 32, fast_math=True)   # kernel-wide: math stays, marked fast
    assert "ex2.approx.ftz.f32" in assemble(k, fast_math=True)["sm_90"]   # the reduced exp2
    assert "div.full.f32" in emit_ptx(k, "sm_90", fast_math=True)[0]
    slow = assemble(target_pipeline(raw, 32))["sm_90"]   # portable exp: expanded to IR
    assert "ex2.approx" not in slow and "div.rn.f32" in slow


# --- memory, atomics, arrays ------------------------------------------------------------------
@pytest.mark.parametrize("t", INTS + FLOATS, ids=str)
def test_atomics_every_kind_global_and_shared(t):
    kinds = ["exch", "cas", "add", "sub", "min", "max", *(("and", "or", "xor") if t.is_int else ())]

    def body(b, g, out):
        i = tid(b)
        s = b.shared_array(t, (64,))
        v = b.load(out, [i])
        for buf in (g, s):
            for kind in kinds:
                vals = (v, v) if kind == "cas" else (v,)
                v = b.atomic(kind, buf, [i], *vals)
        b.store(out, [i], v)
    ptx = assemble(kernel(f"atom_{t}", [("g", gbuf(t, "atomic")), ("out", gbuf(t))], body))
    text80 = ptx["sm_80"]
    if t.name in ("f32", "f64", "i32", "u32", "u64"):
        assert f"atom.global.add.{'s32' if t.name == 'i32' else t.name}" in text80
    if t.name == "f16":
        assert "atom.global.add.noftz.f16" in text80
    if t.name == "bf16":
        assert "atom.global.add.noftz.bf16" in ptx["sm_90"]
        assert "atom.global.add.noftz.bf16" not in text80
    if t.bits <= 16 or t.is_float:
        assert "atom.global.cas.b32" in text80 or "atom.global.cas.b64" in text80


def test_nd_indexing_shared_local_dynamic_arrays_and_barrier():
    def body(b, x, y, out):
        i = tid(b)
        j = b.special("thread_idx", 1)
        k = b.special("thread_idx", 2)
        sm = b.shared_array(dt.f32, (4, 8))
        loc = b.local_array(dt.f64, (2, 3))
        dyn = b.dyn_shared(dt.f32)
        v = b.load(x, [i, j, k])
        b.store(sm, [i, j], v)
        b.store(dyn, [i], v)
        b.store(loc, [i, j], b.cast(v, dt.f64))
        b.barrier()
        w = b.binary("add", b.load(sm, [j, i]), b.load(dyn, [b.shape(dyn, 0)]))
        w = b.binary("add", w, b.cast(b.load(loc, [j, i]), dt.f32))
        b.store(out, [i, j], b.binary("add", w, b.cast(b.shape(x, 2), dt.f32)))
        b.store(y, [i], b.load(y, [j]))
    ptx = assemble(kernel("arrays", [("x", gbuf(dt.f32, "in", 3)), ("y", gbuf(dt.u8, "raw")),
                                     ("out", gbuf(dt.f32, "out", 2))], body))["sm_80"]
    assert "bar.sync 0" in ptx and ".extern .shared .align 16 .b8 dyn_smem[]" in ptx
    assert re.search(r"\.shared \.align 16 \.b8 arr\d+\[128\]", ptx)
    assert re.search(r"\.local \.align 16 \.b8 arr\d+\[48\]", ptx)
    assert "ld.global.nc.f32" in ptx and "mad.lo.s64" in ptx and "%dynamic_smem_size" in ptx
    assert "ld.global.u8" in ptx and "ld.global.nc.u8" not in ptx   # raw buffers are writable


# --- warp ops ---------------------------------------------------------------------------------
@pytest.mark.parametrize("t", SCALARS, ids=str)
def test_shuffles_every_mode(t):
    def body(b, x, out):
        i = tid(b)
        v = b.load(x, [i])
        for mode in ("idx", "up", "down", "xor"):
            v = b.shuffle(mode, v, b.const(1, dt.i32))
        b.store(out, [i], v)
    ptx = assemble(kernel(f"shfl_{t}", [("x", gbuf(t, "in")), ("out", gbuf(t))], body))["sm_80"]
    assert re.search(r"shfl\.sync\.up\.b32 %\w+, %\w+, %r\d+, 0, %r\d+;", ptx)
    assert re.search(r"shfl\.sync\.bfly\.b32 %\w+, %\w+, %r\d+, 0x1f, %r\d+;", ptx)
    assert "shl.b32" in ptx and "min.u32" in ptx   # member mask of a possibly partial warp
    if t.bits == 64:
        assert ptx.count("shfl.sync.idx.b32") == 2


def test_vote_ballot_and_lowered_reductions():
    def body(b, x, out, bits):
        i = tid(b)
        v = b.load(x, [i])
        p = b.cmp("gt", v, b.const(0.0, dt.f32))
        both = b.binary("and", b.vote("any", p), b.vote("all", p))
        b.store(bits, [i], b.ballot(both))
        s = b.binary("add", b.warp_reduce("sum", v), b.block_reduce("max", v))
        b.store(out, [i], b.binary("add", s, b.cast(b.special("lane_id"), dt.f32)))
        b.store(out, [b.special("warp_size")], v)
    ptx = assemble(kernel("warp", [("x", gbuf(dt.f32, "in")), ("out", gbuf(dt.f32)),
                                   ("bits", gbuf(dt.u64))], body))["sm_90"]
    for s in ("vote.sync.any.pred", "vote.sync.all.pred", "vote.sync.ballot.b32", "cvt.u64.u32",
              "shfl.sync.down.b32", "shfl.sync.idx.b32", "bar.sync 0", "%laneid"):
        assert s in ptx, s


# --- control flow -------------------------------------------------------------------------------
def test_if_with_results_for_with_permuted_carries_while_and_nesting():
    def body(b, x, out):
        i = tid(b)
        n = b.shape(x, 0)
        zero, one = b.const(0, dt.i32), b.const(1, dt.i32)
        fa, fb = b.const(1.0, dt.f32), b.const(2.0, dt.f32)
        # for with carried values that swap each iteration (parallel-move hazard)
        op, body_blk, iv, (p, q) = b.for_(zero, n, one, inits=[fa, fb])
        with b.at(body_blk):
            with b.if_(b.cmp("lt", iv, i), [dt.f32]) as (then, els, res):
                with b.at(then):
                    b.yield_(b.binary("add", p, b.load(x, [iv])))
                with b.at(els):
                    b.yield_(p)
            b.yield_(q, res[0])
        s, t2 = op.results
        # runtime-signed step: counts down from n to 0
        mstep = b.unary("neg", b.binary("add", b.binary("and", i, zero), one))
        op2, blk2, iv2, (acc,) = b.for_(n, zero, mstep, inits=[s])
        with b.at(blk2):
            b.yield_(b.binary("add", acc, b.cast(iv2, dt.f32)))
        # while: halve until < 1
        wop, before, after = b.while_([op2.results[0], zero])
        with b.at(before):
            v, c = before.args
            b.condition(b.cmp("ge", v, fa), v, c)
        with b.at(after):
            v, c = after.args
            b.yield_(b.binary("mul", v, b.const(0.5, dt.f32)), b.binary("add", c, one))
        b.store(out, [i], b.binary("add", wop.results[0], t2))
    ptx = assemble(kernel("control", [("x", gbuf(dt.f32, "in")), ("out", gbuf(dt.f32))], body))["sm_80"]
    assert re.search(r"@%p\d+ bra \$L_endfor", ptx) and "$L_while" in ptx and "bra.uni" in ptx


def test_source_locations_become_loc_directives_and_comments(tmp_path):
    src = tmp_path / "user_kernel.py"
    src.write_text("def k(x, y):\n    y[i] = x[i] * 2.0\n")
    b = Builder.for_kernel("locs", [("x", gbuf(dt.f32, "in"), Param("x", "buffer")),
                                    ("y", gbuf(dt.f32), Param("y", "buffer"))])
    x, y = b.kernel.args
    with b.located(Loc(str(src), 2, 4)):
        i = tid(b)
        b.store(y, [i], b.binary("mul", b.load(x, [i]), b.const(2.0, dt.f32)))
    ptx = assemble(b.finish())["sm_90"]
    assert f'.file 1 "{src}"' in ptx
    assert ".loc 1 2 5" in ptx
    assert "// user_kernel.py:2: y[i] = x[i] * 2.0" in ptx


def test_unknown_op_is_a_clear_error():
    b = Builder.for_kernel("bad", [])
    b.op("frobnicate")
    with pytest.raises(NotImplementedError, match="kernel 'bad'.*frobnicate"):
        emit_ptx(b.finish(), "sm_90")


# --- kernels written in Python (once the frontend is in place) ------------------------------------
def _frontend_kernels():
    @kaio.kernel
    def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
        for i in y.owned():
            y[i] = a * x[i] + y[i]

    @kaio.kernel
    def rowsum(x: kaio.In[f32, 2], out: kaio.Region[f32]):
        for r in out.owned():
            acc = 0.0
            for c in range(x.shape[1]):
                acc += x[r, c]
            out[r] = acc

    @kaio.kernel
    def blocksum(x: kaio.In[f32], out: kaio.Atomic[f32], n: i32):
        i = kaio.global_id()
        v = x[i] if i < n else 0.0
        s = kaio.block_sum(v)
        if kaio.thread_idx.x == 0:
            kaio.atomic_add(out, 0, s)
    return [saxpy, rowsum, blocksum]


def test_frontend_kernels_assemble():
    try:
        kernels = _frontend_kernels()
        irs = [k.specialize_ir({}) for k in kernels]
    except (ImportError, NotImplementedError, AttributeError) as e:
        pytest.skip(f"frontend not available yet: {e}")
    from kaio.passes import target_pipeline
    for k in irs:
        ptx = assemble(target_pipeline(k, 32))["sm_80"]
        assert ".loc" in ptx


# --- numerics, executed by the single-thread PTX simulator (tests/ptx_sim.py) -------------------
def _smoke_module():
    import importlib.util
    pytest.importorskip("cuda.bindings.driver", reason="scripts/ptx_smoke.py imports cuda-python")
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts",
                        "ptx_smoke.py")
    spec = importlib.util.spec_from_file_location("ptx_smoke", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _SimDevice:
    """The smoke script's device interface, running the emitted PTX in the simulator."""

    def launch(self, k, arch, args, grid, block, shared=0):
        from ptx_sim import Machine
        ptx, abi = emit_ptx(k, arch)
        Machine(ptx).launch(args, abi, grid, block, shared)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", ["saxpy_f32", "elementwise_f16", "elementwise_bf16",
                                  "int8_wrap_div_shift", "loops_for_while", "casts_nan_inf_saturate",
                                  "block_reduce_shared", "shuffles_vote_ballot",
                                  "partial_warp_reduce_ballot",
                                  "arrays_shared_dyn_local_3d"])
def test_smoke_cases_in_simulator(case, arch):
    """The GPU smoke kernels (scripts/ptx_smoke.py) run on the simulator, checked against numpy
    (the math cases are covered faster by test_math_special_values_in_simulator)."""
    import warnings
    smoke = _smoke_module()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ok, msg = smoke.CASES[case](_SimDevice(), arch)
    assert ok, msg


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_atomics_in_simulator(arch):
    ok, msg = _smoke_module().CASES["atomics"](_SimDevice(), arch)
    assert ok, msg


_SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-30, -1e-30, 1e30, -1e30, 0.5, -0.5,
             1.0, -1.0, 2.0, 88.0, -100.0, 3.14159, 1e6, -7.25, 1e-5]
_Y = [1.0, -1.0, 2.0, 0.5, -2.0, 3.0, 0.0, -0.0, math.inf, -math.inf, math.nan, 1.5, -3.0, 7.0,
      0.25, 1e-3, 10.0, -0.5, 2.5, 100.0]
_MATH_REF = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "atan": np.arctan,
    "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh, "expm1": np.expm1,
    "log1p": np.log1p, "erf": lambda a: np.array([math.erf(v) if not math.isnan(v) else v for v in a]),
    "sqrt": np.sqrt, "rsqrt": lambda a: 1 / np.sqrt(a), "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "rint": np.rint, "pow": np.power, "atan2": np.arctan2,
    "copysign": np.copysign, "fmod": np.fmod}


@pytest.mark.parametrize("t", [dt.f32, dt.f64, dt.bf16], ids=str)
def test_math_special_values_in_simulator(t):
    """Accurate math on IEEE special values and ordinary ones: within 1 ulp for f32/bf16
    (f64: the documented few-ulp bounds), NaN where numpy gives NaN, signed zeros kept."""
    import warnings

    from ptx_sim import Machine
    fns = list(_MATH_REF)
    n = len(_SPECIALS)

    def body(b, x_, y_, o_):
        i = tid(b)
        a, c = b.load(x_, [i]), b.load(y_, [i])
        for k, fn in enumerate(fns):
            v = b.math(fn, *([a, c][:MATH_FNS[fn]]))
            b.store(o_, [b.binary("add", i, b.const(k * n, dt.i32))], v)
    k = kernel(f"mathsim_{t}", [("x", gbuf(t, "in")), ("y", gbuf(t, "in")), ("o", gbuf(t, "out"))], body)
    st = t.storage_np
    x, y = np.array(_SPECIALS).astype(st), np.array(_Y).astype(st)
    out = np.zeros(len(fns) * n, st)
    ptx, abi = emit_ptx(k, "sm_80")
    Machine(ptx).launch([x, y, out], abi, (1,), (n,))
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    bad = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        for j, fn in enumerate(fns):
            want = _MATH_REF[fn](xd, yd) if MATH_FNS[fn] == 2 else _MATH_REF[fn](xd)
            got = out[j * n:(j + 1) * n].astype(np.float64)
            wr = want.astype(st).astype(np.float64)
            ulp = np.abs(np.spacing(want.astype(st))).astype(np.float64)
            tol = 1 if t.bits < 64 else (256 if fn in ("pow", "erf", "asin", "acos", "tan") else 8)
            for i in range(n):
                g, w, r = got[i], want[i], wr[i]
                if math.isnan(w) or math.isnan(g):
                    ok = math.isnan(w) and math.isnan(g)
                elif g == r:
                    ok = w != 0 or math.copysign(1, g) == math.copysign(1, w)
                else:
                    ok = math.isfinite(w) and abs(g - w) <= tol * max(ulp[i], np.finfo(st).smallest_subnormal)
                if not ok:
                    bad.append(f"{fn}({xd[i]!r}{', ' + repr(yd[i]) if MATH_FNS[fn] == 2 else ''}) "
                               f"= {g!r}, want {w!r}")
    assert not bad, "\n".join(bad[:30])


# --- vectorised access ------------------------------------------------------------------------------
def _vec4_kernel(t=dt.f32, base_kind="mul"):
    def body(b, x, y):
        i = tid(b)
        base = (b.binary("mul", i, b.const(4, dt.i32)) if base_kind == "mul"
                else b.binary("add", i, b.const(4, dt.i32)))
        vals = []
        for j in (2, 0, 3, 1):      # any order: grouped by offset
            idx = base if j == 0 else b.binary("add", base, b.const(j, dt.i32))
            vals.append((j, b.load(x, [idx])))
        for j, v in sorted(vals, key=lambda p: p[0]):
            idx = base if j == 0 else b.binary("add", base, b.const(j, dt.i32))
            b.store(y, [idx], b.binary("add", v, v))
    return kernel(f"vec4_{t}_{base_kind}", [("x", gbuf(t, "in")), ("y", gbuf(t, "out"))], body)


@pytest.mark.parametrize("t", [dt.f32, dt.i32, dt.u32], ids=str)
def test_vectorised_v4_load_and_store(t):
    ptx = assemble(_vec4_kernel(t))["sm_80"]
    mt = {"f32": "f32", "i32": "s32", "u32": "u32"}[t.name]
    assert re.search(rf"@%p\d+ ld\.global\.nc\.v4\.{mt} \{{", ptx)
    assert re.search(rf"@%p\d+ st\.global\.v4\.{mt} \[", ptx)
    assert re.search(rf"@!%p\d+ ld\.global\.nc\.{mt} %\w+, \[%rd\d+\+12\]", ptx)   # unaligned fallback


def test_no_vectorisation_without_a_provable_multiple_of_4():
    ptx = assemble(_vec4_kernel(base_kind="add"))["sm_80"]
    assert ".v4." not in ptx


@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "misaligned-view"])
def test_vectorised_access_values_in_simulator(offset):
    """Both the v4 path and the scalar fallback (pointer not 16-byte aligned) give the values."""
    from ptx_sim import Machine
    k = _vec4_kernel()
    ptx, abi = emit_ptx(k, "sm_90")
    x = np.arange(40, dtype=np.float32) * 1.5
    y = np.zeros(40, np.float32)
    m = Machine(ptx)
    if offset:   # shift every buffer by 4 bytes so the alignment test fails
        orig = m.launch

        def shifted(args, abi_, grid, block, shared=0):
            return orig(args, abi_, grid, block, shared, misalign=4)
        m.launch = shifted
    m.launch([x, y], abi, (1,), (10,))
    assert np.array_equal(y, x + x)


# --- differential: PTX (simulated) vs the reference interpreter ----------------------------------
def _random_values(t, n, seed):
    r = np.random.default_rng(seed)
    if t.is_bool:
        return r.integers(0, 2, n).astype(np.bool_)
    if t.is_int:
        wide = np.uint64 if t.name == "u64" else np.int64
        v = r.integers(t.min_value(), t.max_value(), n, endpoint=True, dtype=wide)
        return v.astype(t.storage_np)
    v = np.concatenate([r.standard_normal(n - 8) * 50, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3, 7.5, -2.0]])
    return v.astype(t.storage_np)


def _run_both(k, args, n):
    from ptx_sim import Machine

    from kaio.backends.reference.backend import ReferenceBackend
    ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    ReferenceBackend(sanitize=False).launch(k, (1,), (n,), ref)
    out = {}
    for arch in ARCHS:
        sim = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        ptx, abi = emit_ptx(k, arch)
        Machine(ptx).launch(sim, abi, (1,), (n,))
        out[arch] = sim
    return ref, out


def _equal(a, b):
    """Bitwise equal, except that any NaN equals any NaN."""
    if a.dtype.kind == "f" or a.dtype == dt.bf16.storage_np:
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        both_nan = np.isnan(fa) & np.isnan(fb)
        same = (a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}")) | both_nan
        return bool(same.all()), np.flatnonzero(~same)
    same = a == b
    return bool(same.all()), np.flatnonzero(~same)


@pytest.mark.parametrize("src", SCALARS, ids=str)
def test_casts_match_reference_interpreter(src):
    n = 40
    k = kernel(f"dcast_{src}", [("x", gbuf(src, "in"))] + [(f"o_{d}", gbuf(d, "out")) for d in SCALARS],
               lambda b, x, *outs: [b.store(o, [tid(b)], b.cast(b.load(x, [tid(b)]), d))
                                    for d, o in zip(SCALARS, outs)])
    x = _random_values(src, n, 1)
    args = [x] + [np.zeros(n, d.storage_np) for d in SCALARS]
    ref, sims = _run_both(k, args, n)
    for arch, sim in sims.items():
        for d, r, s in zip(SCALARS, ref[1:], sim[1:]):
            ok, bad = _equal(s, r)
            assert ok, f"{arch} cast {src}->{d}: x={x[bad[:4]]} ptx={s[bad[:4]]} reference={r[bad[:4]]}"


@pytest.mark.parametrize("t", SCALARS, ids=str)
def test_arithmetic_matches_reference_interpreter(t):
    n = 40

    def body(b, x, y, out, flags):
        i = tid(b)
        a, c = b.load(x, [i]), b.load(y, [i])
        j = 0
        for opc in _binops(t) + _unops(t) + (["fma"] if t.is_float else []):
            r = (b.unary(opc, a) if opc in _unops(t) else b.fma(a, c, a) if opc == "fma"
                 else b.binary(opc, a, c))
            b.store(out, [b.binary("add", i, b.const(j * n, dt.i32))], r)
            j += 1
        for p, pred in enumerate(("eq", "ne", "lt", "le", "gt", "ge")):
            b.store(flags, [b.binary("add", i, b.const(p * n, dt.i32))], b.cmp(pred, a, c))
        b.store(flags, [b.binary("add", i, b.const(6 * n, dt.i32))],
                b.cmp("eq", b.select(b.cmp("lt", a, c), a, c), a))
    nops = len(_binops(t)) + len(_unops(t)) + (1 if t.is_float else 0)
    k = kernel(f"darith_{t}", [("x", gbuf(t, "in")), ("y", gbuf(t, "in")), ("out", gbuf(t, "out")),
                               ("flags", gbuf(dt.bool_, "out"))], body)
    x, y = _random_values(t, n, 2), _random_values(t, n, 3)
    if t.is_int:   # division by zero and INT_MIN / -1 are unspecified: keep divisors safe
        y = np.where((y == 0) | (y.astype(np.int64) == -1), 3, y).astype(t.storage_np)
        y[:3] = np.array([1, 2, t.bits + 3], dtype=np.int64).astype(t.storage_np)  # shift amounts too
    args = [x, y, np.zeros(nops * n, t.storage_np), np.zeros(7 * n, np.bool_)]
    ref, sims = _run_both(k, args, n)
    names = _binops(t) + _unops(t) + (["fma"] if t.is_float else [])
    for arch, sim in sims.items():
        for j, opc in enumerate(names):
            ok, bad = _equal(sim[2][j * n:(j + 1) * n], ref[2][j * n:(j + 1) * n])
            assert ok, (f"{arch} {opc}.{t}: x={x[bad[:4]]} y={y[bad[:4]]} "
                        f"ptx={sim[2][j * n + bad[:4]]} reference={ref[2][j * n + bad[:4]]}")
        ok, bad = _equal(sim[3], ref[3])
        assert ok, f"{arch} compares/select on {t}: flag positions {bad[:6]}"


def test_f64_fmod_with_denormal_and_huge_ratios_in_simulator():
    """Float `%` is exact C fmod. Denormal divisors once made the PTX loop spin forever (its
    exponent-field scaling does not work for denormals): check them, huge quotients, signs."""
    from ptx_sim import Machine

    from kaio.ir.indexmath import IndexMath
    from kaio.passes import target_pipeline
    bt = lambda intent: BufType(dt.f64, 1, "global", intent)  # noqa: E731
    b = Builder.for_kernel("fmod64", [(n, bt(i), Param(n, "buffer"))
                                      for n, i in (("x", "in"), ("y", "in"), ("z", "raw"))])
    x, y, z = b.kernel.args
    g = IndexMath(b).global_linear_id()
    b.store(z, [g], b.binary("rem", b.load(x, [g]), b.load(y, [g])))
    k = target_pipeline(b.finish(), 32)
    xs = np.array([1.0, 1.7e308, -3.5, 1e-300, 5e-324 * 7, 2.5, 1e10, -0.0], np.float64)
    ys = np.array([0.1, 5e-324, 5e-324 * 3, 4.9e-310, 5e-324 * 2, -0.75, 3e-320, 1.0], np.float64)
    out = np.zeros_like(xs)
    ptx, abi = emit_ptx(k, "sm_90")
    Machine(ptx).launch([xs, ys, out], abi, (1, 1, 1), (8, 1, 1))
    want = np.fmod(xs, ys)
    np.testing.assert_array_equal(out.view(np.uint64), want.view(np.uint64))


@pytest.mark.parametrize("src, dst", [("f32", "i64"), ("f32", "u64"), ("f16", "i64"),
                                      ("f64", "i32"), ("f64", "u8")])
def test_float_to_int_casts_guard_nan_where_hardware_does_not(src, dst):
    """On the H200, cvt.rzi gives 0x80...0 for NaN from f64 sources and into 64-bit integers;
    the IR says NaN -> 0, so those casts carry an explicit NaN test."""
    b = Builder.for_kernel("c", [("x", BufType(dt.from_name(src), 1, "global", "in"), Param("x", "buffer")),
                                 ("y", BufType(dt.from_name(dst), 1, "global", "raw"), Param("y", "buffer"))])
    x, y = b.kernel.args
    i = b.special("thread_idx", 0)
    b.store(y, [i], b.cast(b.load(x, [i]), dt.from_name(dst)))
    ptx, _ = emit_ptx(b.finish(), "sm_90")
    assert re.search(r"setp\.nan\.f(32|64)", ptx), ptx
