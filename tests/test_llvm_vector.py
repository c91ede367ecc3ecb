"""Vectorised global accesses on the LLVM path (kaio.backends.vector_access groups emitted by
kaio.backends.llvm): one 16-byte access per group when the buffer is 16-byte aligned, the four
scalar accesses otherwise. Checked in the LLVM IR, the nvptx64 PTX (ptxas), the gfx942
assembly and code object, and by running the IR on this CPU with aligned and offset views (an
``align 16`` vector access on a misaligned host address faults, so a wrong predicate crashes)."""
from __future__ import annotations

import re
import shutil
import subprocess

import llvm_host
import numpy as np
import pytest
from test_amdgpu import build_and_validate, needs_lld
from test_coarsen import saxpy, scale64  # the elementwise kernels coarsening is about

import kaio
from kaio import i32
from kaio.backends.targets import emit
from kaio.regions import Coarsened


@kaio.kernel
def axpy_i32(a: i32, x: kaio.In[i32], y: kaio.Region[i32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


def coarse(kernel):
    return kernel.specialize_ir({}, coarsen=True)


def llvm_ir(kernel, target, coarsen=True):
    ir = kernel.specialize_ir({}, coarsen=coarsen)
    return emit(ir, "llvm", target, kernel.options)


@pytest.mark.parametrize("target", ["nvptx64-sm_90", "gfx942"])
def test_groups_become_vector_accesses_under_one_predicate_per_buffer(target):
    text = llvm_ir(saxpy, target)
    # 8 elements per thread: two chunks each of x loads, y loads and y stores
    assert len(re.findall(r"load <4 x float>, ptr addrspace\(1\) %\w+, align 16", text)) == 4
    assert len(re.findall(r"store <4 x float> %\w+, ptr addrspace\(1\) %\w+, align 16", text)) == 2
    # the fallback keeps the scalar accesses, each at its own alignment
    assert len(re.findall(r"load float, ptr addrspace\(1\) %\w+, align 4", text)) >= 16
    # one alignment predicate per buffer, in the entry block (before the first branch)
    entry = text[text.index("entry:"):text.index(" br ")]
    assert entry.count("ptrtoint ptr addrspace(1) %x_ptr") == 1
    assert entry.count("ptrtoint ptr addrspace(1) %y_ptr") == 1
    assert text.count("ptrtoint") == 2
    # no groups without coarsening, nor for 8-byte elements (no predicate either)
    for other in (llvm_ir(saxpy, target, coarsen=False), llvm_ir(scale64, target)):
        assert "<4 x" not in other and "ptrtoint" not in other


def test_nvptx_ptx_has_v4_accesses_and_assembles(tmp_path):
    ptx = emit(coarse(saxpy), "ptx", "nvptx64-sm_90", saxpy.options)
    assert len(re.findall(r"ld\.global\.nc\.v4\.[bf]32", ptx)) == 2        # x: readonly, noalias
    assert len(re.findall(r"ld\.global\.v4\.[bf]32", ptx)) == 2             # y
    assert len(re.findall(r"st\.global\.v4\.[bf]32", ptx)) == 2
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas (CUDA toolkit) not installed")
    src = tmp_path / "saxpy.ptx"
    src.write_text(ptx)
    p = subprocess.run(["ptxas", "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_gfx942_asm_has_dwordx4_accesses():
    assert "<4 x float>" in llvm_ir(saxpy, "gfx942")
    asm = emit(coarse(saxpy), "asm", "gfx942", saxpy.options)
    assert "global_load_dwordx4" in asm and "global_store_dwordx4" in asm


@needs_lld
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("kernel", [saxpy, axpy_i32])
def test_vectorised_code_objects_validate(kernel, arch):
    ir = coarse(kernel)
    assert "<4 x" in emit(ir, "llvm", arch, kernel.options)
    _, rep = build_and_validate(ir, arch)
    assert rep.ok, rep.errors


def _offset(a: np.ndarray, shift: int) -> np.ndarray:
    """A copy of ``a`` whose data pointer is ``4 * shift`` bytes past a 16-byte boundary."""
    raw = np.zeros(a.size + 8, a.dtype)
    o = (-(raw.ctypes.data // a.itemsize)) % 4 + shift
    v = raw[o:o + a.size]
    assert v.ctypes.data % 16 == 4 * shift
    v[:] = a
    return v


SHIFTS = (0, 1, 2, 3)       # 16-byte aligned, then 4, 8 and 12 bytes past


@pytest.mark.parametrize("kernel, dtype, a", [(saxpy, np.float32, 2.5), (axpy_i32, np.int32, -3)])
def test_vectorised_kernel_runs_on_aligned_and_offset_views(kernel, dtype, a):
    ir = coarse(kernel)
    assert "<4 x" in emit(ir, "llvm", "nvptx64-sm_90", kernel.options)
    rng = np.random.default_rng(5)
    for n in (7, 8, 12, 1000, 1027):
        grid, block = Coarsened(8).launch_shape((n,))
        x0 = rng.integers(-1000, 1000, n).astype(dtype)
        y0 = rng.standard_normal(n).astype(dtype) if dtype == np.float32 else x0[::-1] * 7
        for shift in SHIFTS:
            x, y = _offset(x0, shift), _offset(y0, shift)
            llvm_host.run_on_host(ir, [dtype(a), x, y], grid, block)
            assert np.array_equal(y, (dtype(a) * x0 + y0).astype(dtype)), (n, shift)
            assert np.array_equal(x, x0)


@pytest.mark.parametrize("name", ["saxpy8", "reread4", "tiled_dot"])
def test_full_tile_kernels_on_host_match_the_reference(name):
    """Groups from kaio.passes.full_tiles, one inside a grid-stride loop with a carried sum;
    reread4 reads back what it stored (its y loads must not group), bit-identical to the
    reference backend without the pass."""
    import test_full_tiles as T
    kernel = getattr(T, name)
    n = 203
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    args, grid, block = {"saxpy8": ([1.7, x, y], 4, 8), "reread4": ([x, y, np.zeros_like(x)], 2, 32),
                         "tiled_dot": ([x, y, np.zeros(6, np.float32)], 2, 3)}[name]
    assert "load <4 x float>" in emit(kernel.specialize_ir(), "llvm", "gfx942", kernel.options)
    want = T.run_ref(kernel, args, grid, block, on=False)
    for shift in SHIFTS:
        got = [_offset(a, shift) if isinstance(a, np.ndarray) else np.float32(a) for a in args]
        llvm_host.run_on_host(kernel.specialize_ir(), got, (grid, 1, 1), (block, 1, 1))
        T.same_bits([a for a in got if isinstance(a, np.ndarray)], want)
