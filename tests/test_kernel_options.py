"""``@kaio.kernel(max_registers=N)``: the cap reaches every code path (kaio's PTX, the LLVM
nvptx64 PTX, AMD's LLVM attributes), ptxas honours it, it is part of the cached IR, and bad
values are refused when the kernel is defined."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import numpy as np
import pytest
from test_ptx import PTXAS

import kaio
from kaio import f32
from kaio.backends import llvm_compile, targets
from kaio.backends.reference import ReferenceBackend


def _heavy():
    @kaio.kernel(max_registers=24)
    def heavy(x: kaio.In[f32], y: kaio.Region[f32]):
        """Enough live values that ptxas would use more than 24 registers uncapped."""
        for i in y.owned():
            a = x[i]
            s = 0.0
            for k in kaio.static_range(24):
                s += kaio.math.sqrt(a + f32(k)) * f32(k + 1)
            y[i] = s
    return heavy


def _ptxas_registers(ptx: str) -> int:
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([PTXAS, "-arch=sm_90", "-v", src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return int(re.search(r"Used (\d+) registers", r.stderr).group(1))


def test_cap_in_options_and_in_both_ptx_paths():
    k = _heavy()
    assert k.options.max_registers == 24
    assert k.compile(ReferenceBackend()).options.max_registers == 24   # part of the cache key
    ptx = k.emit("ptx", "sm_90")
    assert re.search(r"\)\n\.maxnreg 24\n\{", ptx)
    llvm_ptx = k.emit("ptx", "nvptx64-sm_90")       # LLVM writes .maxnreg from nvvm.maxnreg
    assert re.search(r"\n\.maxnreg 24\n", llvm_ptx)
    assert '"nvvm.maxnreg"="24"' in k.emit("llvm", "nvptx64-sm_90")
    assert '"amdgpu-num-vgpr"="24"' in k.emit("llvm", "gfx942")
    if PTXAS is None:
        pytest.skip("ptxas not found")
    assert _ptxas_registers(ptx) <= 24 and _ptxas_registers(llvm_ptx) <= 24


def test_capped_kernel_still_computes(backend):
    k = _heavy()
    x = np.linspace(0, 3, 300).astype(np.float32)
    y = np.zeros_like(x)
    k(x, y)
    want = sum(np.sqrt(x.astype(np.float64) + j) * (j + 1) for j in range(24))
    np.testing.assert_allclose(y, want, rtol=1e-5)


@pytest.mark.parametrize("bad", [8, 256, 32.0, "32", True])
def test_bad_cap_refused_at_definition(bad):
    with pytest.raises(ValueError, match="max_registers must be an int in 16..255"):
        @kaio.kernel(max_registers=bad)
        def k(y: kaio.Region[f32]):
            for i in y.owned():
                y[i] = 1.0


def test_amd_code_object_respects_the_cap():
    """On AMD the cap is the amdgpu-num-vgpr attribute, which LLVM treats as a request bounded by
    its own occupancy model (a 54-VGPR kernel capped at 24 comes out at 48 with spills): the
    capped code object uses fewer VGPRs than the uncapped one."""
    from kaio.backends import codeobject
    try:
        llvm_compile.find_linker()
    except kaio.CompileError as e:
        pytest.skip(f"no AMD linker: {e}")

    @kaio.kernel
    def wide(x: kaio.In[f32], y: kaio.Region[f32]):
        for i in y.owned():
            v = kaio.local_array(f32, 48)
            for k in kaio.static_range(48):
                v[k] = kaio.math.sqrt(x[i] + f32(k))
            s = 0.0
            for k in kaio.static_range(48):
                s += v[k] * v[47 - k]
            y[i] = s

    free = codeobject.kernels(targets.emit(wide.specialize_ir(), "hsaco", "gfx90a"))
    capped = codeobject.kernels(targets.emit(wide.specialize_ir(), "hsaco", "gfx90a", max_registers=24))
    (f,), (c,) = free.values(), capped.values()
    assert c.vgpr_count < f.vgpr_count and c.vgpr_spill_count > f.vgpr_spill_count
