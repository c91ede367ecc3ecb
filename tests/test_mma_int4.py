"""kaio.mma.load_b_int4: B fragments unpacked from signed int4 weights packed two per byte along
K (the W4A16 layout). Small random integers keep every sum exact, so a misplaced nibble, lane or
register changes the result; each kernel runs on every available backend (the reference in CI),
in the PTX simulator on kaio's PTX and the LLVM nvptx path, and builds for gfx90a / gfx942.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from test_mma import _sim
from test_mma_llvm import _sim_llvm

import kaio
from kaio import f32


def pack(q: np.ndarray) -> np.ndarray:
    """[K, N] int4 values -> [K/2, N] bytes (low nibble: even k)."""
    return ((q[0::2] & 15) | ((q[1::2] & 15) << 4)).astype(np.uint8)


@kaio.kernel
def global_f16(x: kaio.In[kaio.f16, 2], p: kaio.In[kaio.u8, 2], y: kaio.Raw[f32, 2]):
    """y[16, 16] = x[16, K] @ int4 weights read straight from global memory."""
    acc = kaio.mma.fill(f32, 0.0, m=16, n=16)
    for k0 in range(0, x.shape[1], 32):
        a0 = kaio.mma.load_a(x, 0, k0, m=16, k=16)
        a1 = kaio.mma.load_a(x, 0, k0 + 16, m=16, k=16)
        acc = kaio.mma.mma(a0, kaio.mma.load_b_int4(p, k0 // 2, 0, kaio.f16, k=16, n=16), acc)
        acc = kaio.mma.mma(a1, kaio.mma.load_b_int4(p, k0 // 2 + 8, 0, kaio.f16, n=16), acc)
    kaio.mma.store(y, 0, 0, acc)


@kaio.kernel(block=(64,))
def shared_bf16(x: kaio.In[kaio.bf16, 2], p: kaio.In[kaio.u8, 2], y: kaio.Raw[f32, 2]):
    """Two warps, each a 16 x 16 column block of y: the packed tile staged in shared memory by
    copy_tile (rows padded to 48 bytes), a 32-deep K step as one k=32 fragment."""
    ps = kaio.shared_array(kaio.u8, (16, 48))
    warp = kaio.thread_idx.x // kaio.warp_size
    acc = kaio.mma.fill(f32, 0.0, m=16, n=16)
    for k0 in range(0, x.shape[1], 32):
        kaio.mma.copy_tile(ps, p, k0 // 2, 0, cols=32)
        kaio.sync()
        a = kaio.mma.load_a(x, 0, k0, m=16, k=32)
        acc = kaio.mma.mma(a, kaio.mma.load_b_int4(ps, 0, 16 * warp, kaio.bf16, k=32, n=16), acc)
        kaio.sync()
    kaio.mma.store(y, 0, 16 * warp, acc)


@kaio.kernel
def flat_i8(x: kaio.In[kaio.f16, 2], p: kaio.In[kaio.i8], y: kaio.Raw[f32, 2], ld: kaio.i32):
    """The packed weights as a flat i8 buffer with ld= (bytes are bytes: i8 reads as u8)."""
    acc = kaio.mma.fill(f32, 0.0, m=16, n=8)
    for k0 in range(0, x.shape[1], 16):
        a = kaio.mma.load_a(x, 0, k0, m=16, k=16)
        acc = kaio.mma.mma(a, kaio.mma.load_b_int4(p, k0 // 2, 8, kaio.f16, ld=ld), acc)
    kaio.mma.store(y, 0, 0, acc)


def _data(seed, k, n, xdtype):
    g = np.random.default_rng(seed)
    q = g.integers(-8, 8, (k, n))
    x = g.integers(-3, 4, (16, k)).astype(np.float32).astype(xdtype)
    return q, x, x.astype(np.float32) @ q.astype(np.float32)


CASES = {
    "global_f16": lambda: _case_global(),
    "shared_bf16": lambda: _case_shared(),
    "flat_i8": lambda: _case_flat(),
}


def _case_global():
    q, x, want = _data(1, 64, 16, np.float16)
    y = np.zeros((16, 16), np.float32)
    return global_f16, [x, pack(q), y], (1, 1, 1), (32, 1, 1), y, want


def _case_shared():
    q, x, want = _data(2, 96, 32, kaio.bf16.storage_np)
    y = np.zeros((16, 32), np.float32)
    return shared_bf16, [x, pack(q), y], (1, 1, 1), (64, 1, 1), y, want


def _case_flat():
    q, x, _ = _data(3, 48, 24, np.float16)
    want = x.astype(np.float32) @ q[:, 8:16].astype(np.float32)
    y = np.zeros((16, 8), np.float32)
    return flat_i8, [x, pack(q).view(np.int8).ravel(), y, 24], (1, 1, 1), (32, 1, 1), y, want


@pytest.mark.parametrize("name", sorted(CASES))
def test_int4_b_fragments_exact_on_every_backend(backend, name):
    k, args, grid, block, y, want = CASES[name]()
    k[grid[:1], block[:1]](*args)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_int4_b_fragments_in_the_ptx_simulator(arch, name):
    k, args, grid, block, y, want = CASES[name]()
    _sim(k, args, grid, block, arch=arch)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_int4_b_fragments_on_the_llvm_nvptx_path(name):
    k, args, grid, block, y, want = CASES[name]()
    _sim_llvm(k, args, grid, block)
    np.testing.assert_array_equal(y, want)


def test_kaio_ptx_unpacks_without_conversions():
    """Per register: one byte load, shl + lop3 + xor + one exact fma.f16x2 (no cvt); from a
    shared tile of static shape the byte addresses are immediate offsets of one base."""
    ptx = shared_bf16.emit("ptx", "sm_90")
    assert "lop3.b32" in ptx and "fma.rn.bf16x2" in ptx and "cvt.rn.bf16" not in ptx
    loads = re.findall(r"ld\.shared\.u8 %r\d+, \[(%r\d+)\+?(\d*)\]", ptx)
    assert len(loads) == 2 * 2 * 2          # k=32 (two k16 tiles) x n=16 (two n8 tiles) x 2 regs
    assert len({base for base, _ in loads}) == 1


@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_int4_b_fragments_build_for_amd(target, name):
    k = CASES[name]()[0]
    report = k.emit("report", target)
    head = report.splitlines()[0]
    assert f"[{target}] ok:" in head and "error" not in report, report
    assert re.search(r"v_mfma_f32_16x16x16_?(f16|bf16)", k.emit("asm", target))


def test_refusals_name_the_call():
    with pytest.raises(kaio.CompileError, match="unpacks bytes .* holds f16"):
        @kaio.kernel
        def wrong_buffer(p: kaio.In[kaio.f16, 2], y: kaio.Raw[f32, 2]):
            b = kaio.mma.load_b_int4(p, 0, 0, kaio.f16)
            kaio.mma.store(y, 0, 0, kaio.mma.mma(kaio.mma.load_a(p, 0, 0), b,
                                                 kaio.mma.fill(f32, 0.0)))
        wrong_buffer.emit("ir")
    with pytest.raises(kaio.CompileError, match="f16 or bf16 B fragments"):
        @kaio.kernel
        def wrong_dtype(p: kaio.In[kaio.u8, 2], y: kaio.Raw[f32, 2]):
            b = kaio.mma.load_b_int4(p, 0, 0, kaio.f32)
            kaio.mma.store(y, 0, 0, kaio.mma.mma(b, b, kaio.mma.fill(f32, 0.0)))
        wrong_dtype.emit("ir")
