"""16-byte accesses for 2-byte element types (kaio.backends.vector_access with n = 8): eight
neighbouring f16 / bf16 / i16 / u16 accesses become one ``v4.b32`` access (PTX: split into or
packed from halves) or one ``<8 x T>`` access (LLVM), under the per-buffer alignment predicate
with the eight scalar accesses as fallback. Checked in the PTX (ptxas), the LLVM IR, the gfx942
assembly, and by running the PTX (tests/ptx_sim.py) and the LLVM IR (host JIT) on aligned views
and views offset by 1..7 elements against numpy."""
from __future__ import annotations

import dataclasses
import re

import llvm_host
import numpy as np
import pytest
from test_full_tiles import run_sim
from test_ptx import ptxas

import kaio
from kaio import bf16, f16, f32, i16, u16
from kaio import dtypes as dt
from kaio.backends import vector_access
from kaio.backends.targets import emit
from kaio.passes import target_pipeline
from kaio.regions import blocked

BF16 = dt.bf16.storage_np


@kaio.kernel
def fma_f16(x: kaio.In[f16], y: kaio.Region[f16, blocked(8)]):
    for i in y.owned():
        y[i] = f16(f32(x[i]) * 0.5 + f32(y[i]))


@kaio.kernel
def fma_bf16(x: kaio.In[bf16], y: kaio.Region[bf16, blocked(8)]):
    for i in y.owned():
        y[i] = bf16(f32(x[i]) * 0.5 + f32(y[i]))


@kaio.kernel
def axpy_i16(x: kaio.In[i16], y: kaio.Region[i16, blocked(8)]):
    for i in y.owned():
        y[i] = x[i] * 3 - y[i]


@kaio.kernel
def max_u16(x: kaio.In[u16], y: kaio.Region[u16, blocked(8)]):
    for i in y.owned():
        y[i] = max(x[i], y[i])


@kaio.kernel
def f16_blocked4(x: kaio.In[f16], y: kaio.Out[f16, blocked(4)]):
    """Tiles of four 2-byte elements: 8 bytes, no 16-byte group."""
    for i in y.owned():
        y[i] = x[i]


def _sum8(step):
    """Each thread sums eight neighbours from ``step * g``: with step 4 the base is only known to
    be a multiple of 4 and the eight may straddle 16 bytes; with step 8 they are one chunk."""
    @kaio.kernel
    def sum8(x: kaio.In[f16], out: kaio.Out[f32]):
        g = kaio.global_id()
        if g < out.shape[0]:
            s = f32(0.0)
            for j in kaio.static_range(8):
                s += f32(x[step * g + j])
            out[g] = s
    return sum8


def _f16_ref(x, y):
    return (x.astype(np.float32) * np.float32(0.5) + y.astype(np.float32)).astype(x.dtype)


CASES = {
    "f16": (fma_f16, np.float16, _f16_ref),
    "bf16": (fma_bf16, BF16, _f16_ref),
    "i16": (axpy_i16, np.int16, lambda x, y: (x * np.int16(3) - y).astype(np.int16)),
    "u16": (max_u16, np.uint16, np.maximum),
}


def _inputs(dtype, n, rng):
    if dtype == np.int16:       # negative values check the sign extension of both halves
        return (rng.integers(-1000, 1000, n).astype(dtype), rng.integers(-1000, 1000, n).astype(dtype))
    if dtype == np.uint16:      # values >= 2**15 check the zero extension
        return rng.integers(0, 1 << 16, n).astype(dtype), rng.integers(0, 1 << 16, n).astype(dtype)
    return (rng.standard_normal(n).astype(np.float32).astype(dtype),
            rng.standard_normal(n).astype(np.float32).astype(dtype))


def _launch(n):
    grid, block = blocked(8).launch_shape((n,))
    return grid[0], block[0]


@pytest.mark.parametrize("name", CASES)
def test_eight_2_byte_accesses_form_one_group(name):
    kernel = CASES[name][0]
    groups = vector_access.plan_kernel(target_pipeline(kernel.specialize_ir(), 32))
    kinds = sorted((g.kind, g.buf.name, len(g.ops)) for g in {id(g): g for g in groups.values()}.values())
    assert kinds == [("load", "x", 8), ("load", "y", 8), ("store", "y", 8)]


def test_groups_need_eight_neighbours_from_a_multiple_of_8():
    def vector(kernel):
        ptx = emit(kernel.specialize_ir(), "ptx", "sm_90", kernel.options)
        ir = emit(kernel.specialize_ir(), "llvm", "gfx942", kernel.options)
        assert (".v4" in ptx) == ("<8 x half>" in ir)
        assert (".v2.b32" in ptx) == ("<4 x half>" in ir)
        assert ("setp.eq.u64" in ptx) == (".v4" in ptx or ".v2.b32" in ptx)
        return "16" if ".v4" in ptx else "8" if ".v2.b32" in ptx else None
    assert vector(_sum8(8)) == "16"
    assert vector(_sum8(4)) == "8"      # 4 suffices for 4-byte types: two narrow 8-byte groups
    assert vector(f16_blocked4) == "8"  # 8-byte tiles: narrow groups


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_has_one_v4_access_per_group_and_assembles(name, arch):
    kernel = CASES[name][0]
    unversioned = dataclasses.replace(kernel.options, disabled_passes={"version_aligned"})
    ptx = emit(kernel.specialize_ir(), "ptx", arch, unversioned)
    assert len(re.findall(r"@%p\d+ ld\.global\.nc\.v4\.b32", ptx)) == 1      # x
    assert len(re.findall(r"@%p\d+ ld\.global\.v4\.b32", ptx)) == 1          # y
    assert len(re.findall(r"@%p\d+ st\.global\.v4\.b32", ptx)) == 1
    # eight scalar fallbacks per group, under the negated predicate
    assert len(re.findall(r"@!%p\d+ ld\.global\.nc\.[bsu]16", ptx)) == 8
    assert len(re.findall(r"@!%p\d+ st\.global\.[bsu]16", ptx)) == 8
    if name in ("f16", "bf16"):
        # 2 loads x 4 words, and the 4 packed roundings' halves (the scalar fallback's);
        # the stored words are those roundings' (kaio.backends.half_pairs)
        assert len(re.findall(r"mov\.b32 \{%h\d+, %h\d+\}, %r\d+", ptx)) == 12
        assert len(re.findall(rf"cvt\.rn\.{name}x2\.f32 %r\d+, %f\d+, %f\d+", ptx)) == 4
        assert len(re.findall(r"mov\.b32 %r\d+, \{%h\d+, %h\d+\}", ptx)) == 0
    else:
        sel = "0x9910|0xbb32" if name == "i16" else "0x4410|0x4432"   # sign / zero fill
        assert len(re.findall(rf"@%p\d+ prmt\.b32 %r\d+, %r\d+, 0, ({sel});", ptx)) == 16
        assert len(re.findall(r"prmt\.b32 %r\d+, %r\d+, %r\d+, 0x5410", ptx)) == 4
    ptxas(ptx, arch)


@pytest.mark.parametrize("name", CASES)
def test_ptx_runs_on_aligned_and_offset_views(name):
    """ptx_sim faults on a misaligned v4 access, so a wrong predicate fails loudly."""
    kernel, dtype, ref = CASES[name]
    assert ".v4.b32" in emit(kernel.specialize_ir(), "ptx", "sm_90", kernel.options)
    rng = np.random.default_rng(7)
    for n in (5, 8, 24, 203):
        x, y = _inputs(dtype, n, rng)
        grid, block = _launch(n)
        for misalign in (0, 2, 6, 14):          # bytes past a 256-byte boundary
            got_x, got_y = run_sim(kernel, [x, y], grid, block, misalign=misalign)
            assert got_y.tobytes() == ref(x, y).tobytes(), (n, misalign)
            assert got_x.tobytes() == x.tobytes()


@pytest.mark.parametrize("name, vty", [("f16", "half"), ("bf16", "bfloat"), ("i16", "i16"),
                                       ("u16", "i16")])
@pytest.mark.parametrize("target", ["nvptx64-sm_90", "gfx942"])
def test_llvm_ir_has_8_wide_accesses(name, vty, target):
    kernel = CASES[name][0]
    text = emit(kernel.specialize_ir(), "llvm", target, kernel.options)
    assert len(re.findall(rf"load <8 x {vty}>, ptr addrspace\(1\) %\w+, align 16", text)) == 2
    assert len(re.findall(rf"store <8 x {vty}> %\w+, ptr addrspace\(1\) %\w+, align 16", text)) == 1
    assert len(re.findall(rf"load {vty}, ptr addrspace\(1\) %\w+, align 2", text)) >= 16
    assert text.count("ptrtoint") == 2


def test_nvptx64_and_gfx942_code_moves_16_bytes():
    ir = fma_f16.specialize_ir()
    ptx = emit(ir, "ptx", "nvptx64-sm_90", fma_f16.options)
    assert re.search(r"ld\.global\.nc\.v4\.b32", ptx) and re.search(r"st\.global\.v4\.b32", ptx)
    ptxas(ptx, "sm_90")
    asm = emit(ir, "asm", "gfx942", fma_f16.options)
    assert "global_load_dwordx4" in asm and "global_store_dwordx4" in asm


def _offset(a: np.ndarray, shift: int) -> np.ndarray:
    """A copy of ``a`` whose data pointer is ``shift`` elements past a 16-byte boundary."""
    raw = np.zeros(a.size + 16, a.dtype)
    o = (-(raw.ctypes.data // a.itemsize)) % 8 + shift
    v = raw[o:o + a.size]
    assert v.ctypes.data % 16 == a.itemsize * shift
    v[:] = a
    return v


@pytest.mark.parametrize("name", CASES)
def test_llvm_runs_on_host_on_aligned_and_offset_views(name):
    """An ``align 16`` vector access on a misaligned host address faults."""
    kernel, dtype, ref = CASES[name]
    ir = kernel.specialize_ir()
    assert "<8 x" in emit(ir, "llvm", "nvptx64-sm_90", kernel.options)
    rng = np.random.default_rng(3)
    for n in (7, 16, 203):
        x0, y0 = _inputs(dtype, n, rng)
        grid, block = _launch(n)
        for shift in (0, 1, 3, 7):
            x, y = _offset(x0, shift), _offset(y0, shift)
            llvm_host.run_on_host(ir, [x, y], (grid, 1, 1), (block, 1, 1))
            assert y.tobytes() == ref(x0, y0).tobytes(), (n, shift)
            assert x.tobytes() == x0.tobytes()



# --- narrow groups: 4 or 8 bytes of 1- and 2-byte elements -----------------------------------
@kaio.kernel
def i8_to_f32(x: kaio.In[kaio.i8], y: kaio.Out[f32, blocked(4)]):
    """Four int8 feed one 16-byte f32 store: the int8 side is a narrow 4-byte group."""
    for i in y.owned():
        y[i] = f32(x[i]) * 0.5


@kaio.kernel
def u8_to_f16(x: kaio.In[kaio.u8], y: kaio.Out[f16, blocked(8)]):
    """Eight uint8 feed one 16-byte f16 store: a narrow 8-byte group."""
    for i in y.owned():
        y[i] = f16(x[i])


NARROW = {  # kernel: (input dtype, output dtype, elements per thread, reference, narrow access)
    "i8_to_f32": (i8_to_f32, np.int8, np.float32, 4,
                  lambda x: x.astype(np.float32) * np.float32(0.5), r"@%p\d+ ld\.global\.nc\.b32 %r\d+, \["),
    "u8_to_f16": (u8_to_f16, np.uint8, np.float16, 8, lambda x: x.astype(np.float16),
                  r"@%p\d+ ld\.global\.nc\.v2\.b32 \{%r\d+, %r\d+\}, \["),
    "f16_blocked4": (f16_blocked4, np.float16, np.float16, 4, lambda x: x,
                     r"@%p\d+ ld\.global\.nc\.v2\.b32 \{%r\d+, %r\d+\}, \["),
}


@pytest.mark.parametrize("name", NARROW)
def test_narrow_groups_load_one_word_or_two_and_run_misaligned(name):
    """Where no 16-byte group forms, 1- and 2-byte neighbours still load as one 4- or 8-byte
    access (PTX ``ld.b32`` / ``ld.v2.b32``, LLVM ``<n x T>`` aligned to its size), under the
    same alignment predicate; the simulator faults on a misaligned word or v2 access."""
    kernel, src, out, k, ref, pattern = NARROW[name]
    unversioned = dataclasses.replace(kernel.options, disabled_passes={"version_aligned"})
    ptx = emit(kernel.specialize_ir(), "ptx", "sm_90", unversioned)
    assert len(re.findall(pattern, ptx)) == 1
    assert not re.search(r"ld\.global\.nc\.[bsu]8 %r\d+, \[%rd\d+\];", ptx.split("@!")[0])
    ptxas(ptx, "sm_90")
    width = k * np.dtype(src).itemsize
    ir = emit(kernel.specialize_ir(), "llvm", "nvptx64-sm_90", kernel.options)
    assert re.search(rf"load <{k} x i(8|16)>|load <{k} x half>", ir) and f"align {width}" in ir
    rng = np.random.default_rng(11)
    for n in (5, 32, 203):
        x = (rng.integers(np.iinfo(src).min, np.iinfo(src).max + 1, n).astype(src)
             if src != np.float16 else rng.standard_normal(n).astype(np.float16))
        grid, block = blocked(k).launch_shape((n,))
        for misalign in (0, 1, 2, 4, 8):       # bytes past a 256-byte boundary
            if misalign % np.dtype(src).itemsize:
                continue
            got_x, got_y = run_sim(kernel, [x, np.zeros(n, out)], grid[0], block[0], misalign=misalign)
            assert got_y.tobytes() == ref(x).astype(out).tobytes(), (n, misalign)
        y = np.zeros(n, out)
        llvm_host.run_on_host(kernel.specialize_ir(), [x, y], grid, block)
        assert y.tobytes() == ref(x).astype(out).tobytes(), n
