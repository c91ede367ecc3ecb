"""The LLVM IR emitter: instruction patterns per target, and execution of the emitted IR on
this CPU (one call per thread) against numpy references."""
from __future__ import annotations

import copy
import ctypes
import math
import os
import re
import shutil
import subprocess

import llvm_host
import llvm_kernels as K
import numpy as np
import pytest
from ir_samples import every_op_kernel

from kaio import dtypes as dt
from kaio.backends import llvm_compile, targets
from kaio.backends.llvm import emit_llvm, float_literal, int_literal
from kaio.backends.llvm_targets import TARGETS, get_target
from kaio.errors import CompileError

GPU_TARGETS = ("gfx90a", "gfx942", "nvptx64-sm_80", "nvptx64-sm_90")


def llvm_text(kernel, target, fast=False):
    return targets.emit(kernel, "llvm", target, fast_math=fast)


def mul_add_kernel(fused: bool, dtype=dt.f32):
    b, (x, y) = K.builder("muladd", [("x", K.buf(dtype)), ("y", K.buf(dtype, "out"))])
    i = K.gid(b)
    v = b.load(x, [i])
    r = b.fma(v, v, v) if fused else b.binary("add", b.binary("mul", v, v), v)
    b.store(y, [i], r)
    return b.finish()


# --- patterns in the LLVM IR -------------------------------------------------------------------
@pytest.mark.parametrize("target", GPU_TARGETS)
def test_every_op_emits_and_verifies(target):
    text = llvm_text(every_op_kernel(), target)
    assert f'target triple = "{get_target(target).triple}"' in text
    llvm_compile.optimized_module(text, target, opt_level=0)   # raises unless LLVM verifies it


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_no_fast_math_flags_and_no_contraction(target):
    text = llvm_text(mul_add_kernel(False), target)
    flagged = [ln for ln in text.splitlines() if re.search(r"\bf(mul|add|sub|div)\b", ln)
               and re.search(r"\b(fast|contract|reassoc|afn|nnan|ninf|nsz|arcp)\b", ln)]
    assert flagged == []
    asm = targets.emit(mul_add_kernel(False), "asm", target)
    fused = r"\bv_(fma|fmac|mad|mac)_f32" if target.startswith("gfx") else r"\bfma\.rn\.f32"
    assert not re.search(fused, asm), "fmul + fadd was contracted into an fma"
    asm_fma = targets.emit(mul_add_kernel(True), "asm", target)
    assert re.search(fused, asm_fma), "an explicit IR fma must stay fused"


def test_integer_division_and_shift_guards():
    text = llvm_text(K.intops(), "gfx90a")
    # every sdiv/srem divides by a select (the safe divisor), never by the raw operand
    for ln in text.splitlines():
        m = re.search(r"= (sdiv|srem|udiv|urem) i32 (\S+), (%\w+)", ln)
        if m:
            assert re.search(rf"{re.escape(m.group(3))} = select i1", text), ln
    assert "icmp eq i32" in text and "-2147483648" in text            # INT_MIN / -1 guard
    assert re.search(r"icmp uge i32 %\w+, 32", text)                    # shift clamp
    assert not re.search(r"\b(nsw|nuw)\b", text)                         # wrapping arithmetic


def test_casts_and_compares_use_the_ir_semantics():
    text = llvm_text(K.casts(), "gfx942")
    assert "@llvm.fptosi.sat.i32.f32" in text and "@llvm.fptoui.sat.i8.f32" in text
    assert "fptrunc float" in text and "to bfloat" in text and "to half" in text
    assert "fcmp une float" in text                                      # to bool: != 0 (NaN true)
    b, (x, y) = K.builder("cmps", [("x", K.buf(dt.f32)), ("y", K.buf(dt.bool_, "out", 2))])
    i = K.gid(b)
    v = b.load(x, [i])
    for r, pred in enumerate(("eq", "ne", "lt", "le", "gt", "ge")):
        b.store(y, [K.c32(b, r), i], b.cmp(pred, v, v))
    text = llvm_text(b.finish(), "gfx90a")
    for p in ("oeq", "une", "olt", "ole", "ogt", "oge"):
        assert f"fcmp {p} float" in text


def test_amdgcn_target_table_in_the_ir():
    text = llvm_text(K.shared_reverse(), "gfx90a")
    assert "define amdgpu_kernel void @shared_reverse(" in text
    assert '"amdgpu-flat-work-group-size"="1,1024"' in text and '"denormal-fp-math-f32"="ieee,ieee"' in text
    assert re.search(r'fence syncscope\("workgroup"\) release\s+call void @llvm.amdgcn.s.barrier\(\)\s+'
                     r'fence syncscope\("workgroup"\) acquire', text)
    assert "internal addrspace(3) global [256 x float]" in text
    assert "ptr addrspace(1) noalias readonly %x_ptr" in text and "ptr addrspace(1) noalias %out_ptr" in text
    dyn = llvm_text(K.shared_reverse(True), "gfx90a")
    assert "@__kaio_dyn_shared = external addrspace(3) global [0 x i8]" in dyn
    loc = llvm_text(K.local_and_half(), "gfx90a")
    assert re.search(r"alloca \[8 x i32\], align 16, addrspace\(5\)", loc)
    at = llvm_text(K.atomics(), "gfx90a")
    assert 'atomicrmw add ptr addrspace(1) %' in at and 'syncscope("agent") monotonic' in at
    assert "atomicrmw fadd" in at and "atomicrmw umin" in at and "cmpxchg" in at
    w = llvm_text(K.warp_ops(), "gfx90a")
    assert "@llvm.amdgcn.ds.bpermute" in w and "@llvm.amdgcn.ballot.i64" in w
    assert "and i32 %" in w and ", 63" in w                                # wave64 lane masks
    s = llvm_text(K.saxpy(), "gfx90a")
    assert "@llvm.amdgcn.implicitarg.ptr()" in s and "i64 12" in s    # hidden_group_size_x


def test_nvptx_target_table_in_the_ir():
    text = llvm_text(K.shared_reverse(), "nvptx64-sm_90")
    assert "define ptx_kernel void @shared_reverse(" in text
    assert "@llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)" in text
    assert "@llvm.nvvm.read.ptx.sreg.tid.x()" in text
    w = llvm_text(K.warp_ops(), "nvptx64-sm_80")
    # the member mask is computed once (full warps: -1; the last, partial warp: its lanes)
    mask = re.search(r"(%v\d+) = select i1 %v\d+, i32 -1, i32 %v\d+", w).group(1)
    assert f"@llvm.nvvm.shfl.sync.idx.i32(i32 {mask}," in w
    assert f"@llvm.nvvm.vote.ballot.sync(i32 {mask}," in w
    assert "syncscope" not in llvm_text(K.atomics(), "nvptx64-sm_80")
    ptx = targets.emit(K.shared_reverse(), "ptx", "nvptx64-sm_90")
    assert ".target sm_90" in ptx and "bar.sync" in ptx


@pytest.mark.parametrize("target", ["gfx90a", "nvptx64-sm_90"])
def test_datalayout_matches_llvm(target):
    tm = llvm_compile.target_machine(target)
    assert str(tm.target_data) == get_target(target).datalayout


def test_fast_math_selects_hardware_approximations():
    k = K.math_kernel(dt.f32, fast=True)
    amd = llvm_text(k, "gfx90a")
    assert "@llvm.amdgcn.exp2.f32" in amd and "@llvm.amdgcn.sin.f32" in amd
    nv = llvm_text(k, "nvptx64-sm_90")
    assert "@llvm.nvvm.ex2.approx.f" in nv and "@llvm.nvvm.lg2.approx.f" in nv
    portable = llvm_text(K.math_kernel(dt.f32), "gfx90a")
    assert "@llvm.amdgcn.exp2" not in portable and "@llvm.sqrt.f32" in portable


def test_unlowered_reduction_is_a_clear_error():
    b, (x, y) = K.builder("wr", [("x", K.buf(dt.f32)), ("y", K.buf(dt.f32, "out"))])
    i = K.gid(b)
    b.store(y, [i], b.warp_reduce("sum", b.load(x, [i])))
    with pytest.raises(CompileError, match="target_pipeline"):
        emit_llvm(b.finish(), "gfx90a")


def test_unknown_target_and_stage():
    with pytest.raises(ValueError, match="unknown LLVM target"):
        get_target("gfx803")
    with pytest.raises(ValueError, match="stage 'hsaco'"):
        targets.emit(K.saxpy(), "hsaco", "nvptx64-sm_90")
    assert set(TARGETS) >= {"gfx90a", "gfx942", "nvptx64-sm_80", "nvptx64-sm_90"}


def test_literals():
    assert float_literal(1.0, dt.f16) == "0xH3C00"
    assert float_literal(1.0, dt.bf16) == "0xR3F80"
    assert float_literal(0.1, dt.f32) == "0x3FB99999A0000000"       # rounded to f32 first
    assert float_literal(0.1, dt.f64) == "0x3FB999999999999A"
    assert float_literal(math.inf, dt.f32) == "0x7FF0000000000000"
    assert int_literal(2**32 - 1, dt.u32) == "-1" and int_literal(-1, dt.u8) == "-1"
    assert int_literal(2**63, dt.u64) == str(-2**63)


# --- execution on this CPU ---------------------------------------------------------------------
SERIAL = ["saxpy", "intops", "casts", "loops", "atomics", "math_f32", "math_f64", "local_half"]


@pytest.mark.parametrize("name", SERIAL)
def test_sample_runs_on_host_and_matches_numpy(name):
    s = K.BY_NAME[name]
    args = s.inputs(np.random.default_rng(1))
    orig = copy.deepcopy(args)
    grid, block = s.launch_shape()
    llvm_host.run_on_host(s.build(), args, grid, block)
    assert K.check(s, orig, dict(enumerate(args)), warp=1) == []


def test_division_by_zero_does_not_trap():
    b, (x, y, out) = K.builder("divz", [("x", K.buf(dt.i32)), ("y", K.buf(dt.i32)),
                                        ("out", K.buf(dt.i32, "out", 2))])
    i = K.gid(b)
    xv, yv = b.load(x, [i]), b.load(y, [i])
    b.store(out, [K.c32(b, 0), i], b.binary("div", xv, yv))
    b.store(out, [K.c32(b, 1), i], b.binary("rem", xv, yv))
    x = np.array([5, -7, 2**31 - 1, -2**31], np.int32)
    out = np.zeros((2, 4), np.int32)
    llvm_host.run_on_host(b.finish(), [x, np.zeros(4, np.int32), out], (1, 1, 1), (4, 1, 1))
    # the value is unspecified by the IR; reaching this line (no SIGFPE) is the test


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-45, 1e-38, 3.4e38,
                    -3.4e38, 88.7, 89.0, -103.0, -104.0, 1e4, -1e4, 1e6, 30.0, 2.0, 1e-7, -2e-7],
                   np.float32)
UNARY = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "atan",
         "asin", "acos", "sinh", "cosh", "tanh", "erf", "sqrt", "rsqrt", "floor", "ceil", "trunc", "rint"]
_NPF = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "rsqrt": lambda v: 1 / np.sqrt(v),
        "erf": np.vectorize(math.erf, otypes=[np.float64])}


def _ulps(got, want):
    """Distance in f32 ulps (NaN vs NaN = 0, NaN vs number = inf)."""
    with np.errstate(over="ignore", invalid="ignore"):
        g, w = got.astype(np.float32), want.astype(np.float32)
    both = np.isnan(g) & np.isnan(w)
    gi = g.view(np.int32).astype(np.int64)
    wi = w.view(np.int32).astype(np.int64)
    gi = np.where(gi < 0, -2**31 - gi, gi)
    wi = np.where(wi < 0, -2**31 - wi, wi)
    d = np.abs(gi - wi).astype(np.float64)
    d[np.isnan(g) != np.isnan(w)] = np.inf
    d[both] = 0
    return d


@pytest.mark.parametrize("fn", UNARY)
def test_portable_math_special_values_f32(fn):
    b, (x, y) = K.builder(f"m_{fn}", [("x", K.buf(dt.f32)), ("y", K.buf(dt.f32, "out"))])
    i = K.gid(b)
    b.store(y, [i], b.math(fn, b.load(x, [i])))
    n = len(SPECIAL)
    out = np.zeros(n, np.float32)
    llvm_host.run_on_host(b.finish(), [SPECIAL.copy(), out], (1, 1, 1), (n, 1, 1))
    with np.errstate(all="ignore"):
        want = _NPF.get(fn, getattr(np, fn, None))(SPECIAL.astype(np.float64))
    ulps = _ulps(out, np.asarray(want))
    assert ulps.max() <= 1, dict(zip(SPECIAL[ulps > 1].tolist(), out[ulps > 1].tolist()))


@pytest.mark.parametrize("dtype", [dt.f32, dt.f64])
def test_trig_of_huge_arguments(dtype):
    """Payne-Hanek reduction: sin/cos/tan stay accurate far beyond 2^20 (numpy's libm reduces
    exactly too)."""
    rng = np.random.default_rng(11)
    top = 38 if dtype is dt.f32 else 307
    x = (10.0 ** rng.uniform(5, top, 512) * rng.choice([-1, 1], 512)).astype(dtype.np)
    x[:4] = [2.0**20, 1e22, -np.finfo(dtype.np).max, 1.0e5]
    b, (xb, out) = K.builder("trig", [("x", K.buf(dtype)), ("out", K.buf(dtype, "out", 2))])
    i = K.gid(b)
    v = b.load(xb, [i])
    for r, fn in enumerate(("sin", "cos", "tan")):
        b.store(out, [K.c32(b, r), i], b.math(fn, v))
    res = np.zeros((3, x.size), dtype.np)
    llvm_host.run_on_host(b.finish(), [x, res], (2, 1, 1), (256, 1, 1))
    for r, fn in enumerate((np.sin, np.cos, np.tan)):
        want = fn(x.astype(np.float64))
        if dtype is dt.f32:
            assert _ulps(res[r], want).max() <= 1, fn
        else:
            err = np.abs(res[r] - want) / np.spacing(np.abs(want))
            assert err.max() <= 4, (fn, x[np.argmax(err)], err.max())


@pytest.mark.parametrize("fn", ["atan2", "pow"])
def test_portable_math_binary_special_values_f32(fn):
    b, (x, y, z) = K.builder(f"m_{fn}", [("x", K.buf(dt.f32)), ("y", K.buf(dt.f32)),
                                         ("z", K.buf(dt.f32, "out"))])
    i = K.gid(b)
    b.store(z, [i], b.math(fn, b.load(x, [i]), b.load(y, [i])))
    vals = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0, -3.0], np.float32)
    xs, ys = (a.reshape(-1).copy() for a in np.meshgrid(vals, vals))
    out = np.zeros(xs.size, np.float32)
    llvm_host.run_on_host(b.finish(), [xs, ys, out], (1, 1, 1), (xs.size, 1, 1))
    with np.errstate(all="ignore"):
        want = (np.arctan2 if fn == "atan2" else np.power)(xs.astype(np.float64), ys.astype(np.float64))
    ulps = _ulps(out, want)
    assert ulps.max() <= 1, list(zip(xs[ulps > 1], ys[ulps > 1], out[ulps > 1], want[ulps > 1]))


# --- PTX from the nvptx64 retarget assembles ----------------------------------------------------
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas (CUDA toolkit) not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", [s.name for s in K.SAMPLES])
def test_nvptx_ptx_assembles_with_ptxas(name, arch, tmp_path):
    ptx = targets.emit(K.BY_NAME[name].build(), "ptx", f"nvptx64-{arch}")
    src = tmp_path / f"{name}.ptx"
    src.write_text(ptx)
    p = subprocess.run(["ptxas", f"-arch={arch}", str(src), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("name", ["saxpy", "casts", "atomics", "local_half"])
def test_nvptx_retarget_is_a_drop_in_for_the_cuda_backend(name):
    """KAIO_CUDA_CODEGEN=llvm swaps kaio's PTX emitter for this path: same ABI, same entry,
    and the PTX declares exactly the ABI's parameters with matching widths."""
    from kaio.backends.abi import kernel_abi
    from kaio.backends.ptx import emit_ptx
    t = targets.get_target("nvptx64-sm_90")
    arts = t.run(K.BY_NAME[name].build(), t.options())
    k, ptx, abi = arts["lowered"], arts["ptx"], kernel_abi(arts["ir"])
    assert abi == emit_ptx(k, "sm_90")[1]
    params = re.findall(r"\.param \.(\w+)(?: \.ptr \.global \.align \d+)? (\w+_param_\d+)", ptx)
    assert [p for _, p in params] == [f"{abi.entry}_param_{i}" for i in range(len(abi.params))]
    width = {"u8": 8, "b8": 8, "u16": 16, "b16": 16, "f32": 32, "u32": 32, "b32": 32, "f64": 64,
             "u64": 64, "b64": 64}
    assert [width[t] for t, _ in params] == [8 * p.size for p in abi.params]


class _FakeCudaDriver:
    """Just enough of cuda.bindings.driver for scripts/llvm_nvptx_smoke.py; a launch runs the
    same kernel on this CPU, decoding the kernelParams array the script built."""

    def __init__(self):
        self.mem, self.kernel = {}, None

    def cuModuleLoadData(self, image):
        assert image.endswith(b"\0") and b".entry" in image
        return 0, "module"

    def cuModuleGetFunction(self, module, name):
        return 0, name

    def cuMemAlloc(self, n):
        buf = ctypes.create_string_buffer(n)
        self.mem[ctypes.addressof(buf)] = buf
        return 0, ctypes.addressof(buf)

    def cuMemcpyHtoD(self, dst, src, n):
        ctypes.memmove(dst, src, n)
        return (0,)

    cuMemcpyDtoH = cuMemcpyHtoD

    def cuMemFree(self, p):
        del self.mem[p]
        return (0,)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        from kaio.backends.abi import kernel_abi
        abi = kernel_abi(self.kernel)
        ptrs = (ctypes.c_void_p * len(abi.params)).from_address(params)
        flat = [llvm_host._CT[p.dtype].from_address(ptrs[i]).value for i, p in enumerate(abi.params)]
        llvm_host.run_flat(self.kernel, flat, (gx, gy, gz), (bx, by, bz))
        return (0,)

    def cuCtxSynchronize(self):
        return (0,)

    def cuModuleUnload(self, m):
        return (0,)


def test_smoke_script_against_a_fake_driver(monkeypatch, capsys):
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "scripts", "llvm_nvptx_smoke.py")
    spec = importlib.util.spec_from_file_location("llvm_nvptx_smoke", path)
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    fake = _FakeCudaDriver()
    monkeypatch.setattr(smoke, "setup", lambda: (fake, "nvptx64-sm_90", "fake GPU"))
    real_run = smoke.run_sample

    def run(cu, target, s):
        fake.kernel = s.build()
        return real_run(cu, target, s)
    monkeypatch.setattr(smoke, "run_sample", run)
    assert smoke.main(["saxpy", "loops", "atomics"]) == 0
    out = capsys.readouterr().out
    assert "3/3 passed" in out and "FAIL" not in out
    assert not fake.mem


def test_llvm_text_does_not_depend_on_the_hash_seed(tmp_path):
    """Snippet temporaries are numbered in the order they appear, so the same kernel gives the
    same LLVM text in every process (it used to follow set order, i.e. PYTHONHASHSEED)."""
    import subprocess
    import sys
    script = ("import sys; sys.path.insert(0, 'tests'); import llvm_kernels as K; "
              "from kaio.backends import targets; "
              "k = K.warp_ops(); "
              "print(targets.emit(k, 'llvm', 'gfx942') + targets.emit(k, 'llvm', 'nvptx64-sm_90'))")
    root = os.path.join(os.path.dirname(__file__), "..")
    texts = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            cwd=root, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
             for seed in ("1", "2", "3")}
    assert len(texts) == 1
