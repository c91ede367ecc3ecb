"""The NVIDIA compile-and-validate columns of the conformance report (sm_80, sm_86, sm_89, kaio's
PTX and the LLVM path): ptxas -v's report parsed and held to the kernel's limits, features a target
lacks shown as "not available on this target", a missing ptxas never passing, the per-vendor
summary line. The subset here is small; `kaio conformance` builds every case."""
from __future__ import annotations

import numpy as np
import pytest

import kaio
from kaio import f16, f32
from kaio.conformance import nvidia
from kaio.conformance.amd import BuildResult, build
from kaio.conformance.cases import ConformanceCase
from kaio.conformance.render import _cell_text, markdown
from kaio.conformance.rules import rel
from kaio.conformance.runner import Options, _compile_cell, run_suite, vendor_summary
from kaio.conformance.targets import COMPILE_ONLY, TargetInfo, parse_targets
from kaio.ir import print_kernel
from kaio.options import KernelOptions

COLUMNS = ["sm_80", "sm_80-llvm", "sm_86", "sm_86-llvm", "sm_89", "sm_89-llvm"]
SUBSET = ["rajaperf/DAXPY", "ml/rmsnorm", "feature/shared_memory", "feature/warp_ops"]
needs_ptxas = pytest.mark.skipif(nvidia.find_ptxas() is None, reason="ptxas not installed")

# ptxas 13.0's -v report for a kernel that spills (text as ptxas prints it)
PTXAS_V = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other' for 'sm_86'
ptxas info    : Function properties for other
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 7 registers, used 0 barriers, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'heavy' for 'sm_86'
ptxas info    : Function properties for heavy
    96 bytes stack frame, 40 bytes spill stores, 44 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 6144 bytes smem, 380 bytes cmem[0]
ptxas info    : Compile time = 8.770 ms
"""


def test_parse_ptxas_reads_the_named_entry():
    info = nvidia.parse_ptxas(PTXAS_V, "heavy")
    assert (info.registers, info.spill_stores, info.spill_loads, info.stack_bytes,
            info.smem_bytes, info.barriers) == (32, 40, 44, 96, 6144, 1)
    other = nvidia.parse_ptxas(PTXAS_V, "other")
    assert (other.registers, other.smem_bytes, other.stack_bytes) == (7, 0, 8)
    with pytest.raises(ValueError, match="no report for entry 'missing'"):
        nvidia.parse_ptxas(PTXAS_V, "missing")


def test_limits_are_the_kernels_declared_ones():
    info = nvidia.PtxasInfo(registers=40, smem_bytes=1024)
    assert nvidia.limit_errors(info, KernelOptions()) == []
    assert nvidia.limit_errors(info, KernelOptions(max_registers=40)) == []
    assert "max_registers=32" in nvidia.limit_errors(info, KernelOptions(max_registers=32))[0]
    big = nvidia.PtxasInfo(registers=20, smem_bytes=48 * 1024 + 16)
    assert "static shared memory" in nvidia.limit_errors(big, None)[0]
    # 80 registers x 1024 threads = 81920 > 65536: a block of that shape could never launch
    fat = nvidia.PtxasInfo(registers=80)
    assert nvidia.limit_errors(fat, KernelOptions(block=256)) == []
    assert "the launch would fail" in nvidia.limit_errors(fat, KernelOptions(block=1024))[0]


def test_target_names_and_cli_parsing():
    assert set(COLUMNS) <= set(COMPILE_ONLY)
    assert parse_targets("sm_89,sm_80,sm_86") == ["sm_80", "sm_86", "sm_89"]
    assert parse_targets("reference,cuda,cuda-llvm,sm_80-llvm,gfx942")[-2:] == ["sm_80-llvm", "gfx942"]
    with pytest.raises(ValueError, match="sm_75"):
        parse_targets("sm_75")


def test_compile_cell_statuses():
    ok = BuildResult("k", "sm_80", True, lds_bytes=512, registers=24)
    cell = _compile_cell([ok])
    assert cell.status == "compiled" and cell.detail.startswith("compiled and validated")
    assert "24 registers" in cell.detail
    refused = BuildResult("m", "sm_80-llvm", False, ["CompileError: kaio.mma fragments are not "
                                                     "supported on target nvptx64-sm_80 yet"],
                          unavailable=True)
    cell = _compile_cell([ok, refused])
    assert cell.status == "not-available" and "not available on this target" in cell.detail
    broken = BuildResult("b", "sm_80", False, ["ptxas -arch=sm_80 failed: syntax error"])
    assert _compile_cell([refused, broken]).status == "failing"     # a real failure wins


def test_unavailable_is_only_a_targets_refusal():
    assert nvidia.unavailable("kaio.mma fragments are not supported on target nvptx64-sm_80 yet")
    assert nvidia.unavailable("ptxas: Feature 'wgmma' requires .target sm_90a or higher")
    assert not nvidia.unavailable("ptxas -arch=sm_80 failed: Unknown symbol '%r1'")
    assert not nvidia.unavailable("42 registers, above the kernel's max_registers=32")


def test_vendor_summary_line():
    def info(name, kind, arch, ok=True):
        return TargetInfo(name, kind, 32, ok, "" if ok else "no CUDA device",
                          {"arch": arch})
    infos = {"cuda": info("cuda", "execute", "sm_90 (cc 9.0)"),
             "cuda-llvm": info("cuda-llvm", "execute", "sm_90 (cc 9.0)"),
             **{c: info(c, "compile", c.split("-")[0]) for c in COLUMNS},
             "gfx90a": info("gfx90a", "compile", "gfx90a"), "gfx942": info("gfx942", "compile", "gfx942")}
    got = vendor_summary(["cuda", "cuda-llvm", *COLUMNS, "gfx90a", "gfx942"], infos)
    assert got == {"NVIDIA": "executed on sm_90, compiled for sm_80/86/89",
                   "AMD": "compiled for gfx90a/gfx942"}
    infos["cuda"] = info("cuda", "execute", "", ok=False)
    got = vendor_summary(["cuda", "sm_80"], infos)
    assert got["NVIDIA"] == "compiled for sm_80, not run: cuda (no CUDA device)"


def test_missing_ptxas_never_passes(monkeypatch):
    monkeypatch.setattr(nvidia, "find_ptxas", lambda: None)
    rep = run_suite(Options(["reference", "sm_80", "sm_80-llvm"], kernels=["rajaperf/DAXPY"],
                            log=lambda m: None))
    for col in ("sm_80", "sm_80-llvm"):
        cell = rep.rows[0].cells[col]
        assert cell.status == "not-run" and cell.detail.startswith("ptxas not available")
        assert rep.header["targets"][col]["available"] is False
    assert "ptxas not available" in rep.header["vendors"]["NVIDIA"]


@needs_ptxas
def test_nvidia_columns_compile_and_validate_a_subset():
    rep = run_suite(Options(["reference", *COLUMNS], kernels=SUBSET, log=lambda m: None))
    assert len(rep.rows) == len(SUBSET) and rep.failing == []
    for r in rep.rows:
        for col in COLUMNS:
            c = r.cells[col]
            assert c.status == "compiled", (r.kernel, col, c.detail)
            assert c.detail.startswith("compiled and validated")
            assert c.build and all(b["ok"] and b["registers"] > 0 for b in c.build)
    rms = next(r for r in rep.rows if r.kernel == "ml/rmsnorm")
    assert all(b["lds_bytes"] > 0 for b in rms.cells["sm_86"].build)     # its block reduction
    assert rep.header["vendors"] == {"NVIDIA": "compiled for sm_80/86/89"}
    for col in COLUMNS:
        assert rep.header["targets"][col]["device"]["driver"].startswith(("ptxas", "llvmlite"))
    d = rep.as_dict()
    md = markdown(d)
    assert "- **NVIDIA**: compiled for sm_80/86/89" in md and "## Compile-only columns" in md
    texts = [_cell_text(r["cells"][col]) for r in d["rows"] for col in COLUMNS]
    assert all(t.startswith("compiled and validated (") and "identical" not in t for t in texts)


@kaio.kernel(max_registers=32)
def capped_saxpy(a: f32, x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = a * x[i] + 1.0


@needs_ptxas
@pytest.mark.parametrize("column", COLUMNS)
def test_declared_register_cap_is_checked(column):
    ir = print_kernel(capped_saxpy.specialize_ir({}))
    r = build(ir, column, KernelOptions(max_registers=32))
    assert r.ok and 0 < r.registers <= 32, r.errors


@kaio.kernel
def mma_tile(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
    acc = kaio.mma.fill(f32, 0.0)
    acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), acc)
    kaio.mma.store(C, 0, 0, acc)


@kaio.kernel
def mma_tile_i8(A: kaio.In[kaio.i8, 2], B: kaio.In[kaio.i8, 2], C: kaio.Raw[kaio.i32, 2]):
    acc = kaio.mma.fill(kaio.i32, 0)
    acc = kaio.mma.mma(kaio.mma.load_a(A, 0, 0), kaio.mma.load_b(B, 0, 0), acc)
    kaio.mma.store(C, 0, 0, acc)


def _mma_case(int8=False) -> ConformanceCase:
    k, npdt, out = (32, np.int8, np.int32) if int8 else (16, np.float16, np.float32)

    def make_inputs(size):
        g = np.random.default_rng(0)
        return {"A": g.integers(-4, 4, (16, k)).astype(npdt),
                "B": g.integers(-4, 4, (k, 8)).astype(npdt)}

    def run(inputs):
        c = np.zeros((16, 8), out)
        (mma_tile_i8 if int8 else mma_tile)[1, 32](inputs["A"], inputs["B"], c)
        return {"C": c}

    return ConformanceCase(
        name="test/mma_tile" + ("_i8" if int8 else ""), group="test", make_inputs=make_inputs,
        run=run, expected=lambda i, w: {"C": i["A"].astype(out) @ i["B"].astype(out)},
        vs_numpy=rel(0.0, "small integers: exact"), fixed_size=True)


@needs_ptxas
def test_fragments_compile_on_every_nvidia_column():
    """f16 (m16n8k16) and int8 (m16n8k32) fragments: mma.sync on kaio's PTX path and the NVVM
    mma intrinsics on the LLVM one, compiled and validated on every sm_8x column (gfx90a, which
    has no int8 MFMA lowering, refuses that row: tests/test_mma_llvm.py)."""
    rep = run_suite(Options(["reference", "sm_80", "sm_80-llvm", "sm_89-llvm"],
                            cases=[_mma_case(int8=True), _mma_case()], log=lambda m: None))
    for row in rep.rows:
        assert row.cells["reference"].status == "identical"
        for col in ("sm_80", "sm_80-llvm", "sm_89-llvm"):
            assert row.cells[col].status == "compiled", (col, row.cells[col].detail)
    assert rep.failing == []


def test_shared_memory_is_held_to_kaios_plan(monkeypatch):
    """ptxas's static shared memory must equal kaio's plan (what the AMD columns hold LDS to);
    a disagreement fails the build (ptxas stood in for by a report of 16 bytes too many)."""
    ir = print_kernel(capped_saxpy.specialize_ir({}))       # no shared arrays: the plan is 0 B
    monkeypatch.setattr(nvidia, "assemble",
                        lambda ptx, arch, entry: nvidia.PtxasInfo(registers=10, smem_bytes=16))
    r = build(ir, "sm_86", KernelOptions(max_registers=32))
    assert not r.ok and "kaio's shared-memory plan is 0 B" in r.errors[0] and not r.unavailable
