"""16-byte accesses of 2-D (row-major) global buffers (kaio.backends.vector_access): accesses
``x[r, base + G*c + 0 .. G-1]`` with one row value group under "pointer 16-byte aligned and
``shape[1] % G == 0``", and fall back to scalar accesses otherwise (views with odd offsets, rows of
odd length). Both emitters; run on the PTX simulator (which faults on a misaligned v4 access) and
on the host through LLVM (where an ``align 16`` access at a misaligned address faults), and the
register-resident row ops (kaio.kernels.ml.norms) that the grouping is for."""

import dataclasses
import os
import re
import subprocess
import tempfile

import llvm_host
import numpy as np
import pytest
from ptx_sim import Machine
from test_ptx import PTXAS, ptxas

import kaio
import kaio.kernels as K
from kaio import f16, f32
from kaio.backends import vector_access
from kaio.backends.ptx import emit_ptx
from kaio.backends.targets import emit
from kaio.kernels.ml import norms
from kaio.passes import target_pipeline
from kaio.regions import blocked, rows_per_block


# --- kernels ------------------------------------------------------------------------------------
def _scale_rows(T, G):
    """y = 2x, each thread two chunks of G contiguous columns (the rows_per_block(vec=G) layout)."""
    @kaio.kernel
    def scale_rows(x: kaio.In[T, 2], y: kaio.Out[T, rows_per_block(vec=G)]):
        row, t, nt, n = kaio.block_idx.x, kaio.thread_idx.x, kaio.block_dim.x, x.shape[1]
        for k in kaio.static_range(2):
            c = G * t + G * nt * k
            if c + G <= n:
                for j in kaio.static_range(G):
                    y[row, c + j] = x[row, c + j] * T(2.0)
    return scale_rows


scale_f32, scale_f16 = _scale_rows(f32, 4), _scale_rows(f16, 8)


@kaio.kernel
def chunk_sums(x: kaio.In[f32, 2], s: kaio.Out[f32, rows_per_block()]):
    """s[r, t] = x[r, 4t] + ... + x[r, 4t + 3]: 2-D loads only, on rows of any length."""
    row, t, n = kaio.block_idx.x, kaio.thread_idx.x, x.shape[1]
    if 4 * t + 4 <= n and t < s.shape[1]:
        acc = f32(0.0)
        for j in kaio.static_range(4):
            acc += x[row, 4 * t + j]
        s[row, t] = acc


@kaio.kernel
def two_rows(x: kaio.In[f32, 2], s: kaio.Out[f32, rows_per_block()]):
    """Four neighbouring columns, but from two rows: not one chunk."""
    row, t = kaio.block_idx.x, kaio.thread_idx.x
    if 4 * t + 4 <= x.shape[1] and t < s.shape[1] and row + 1 < x.shape[0]:
        s[row, t] = (x[row, 4 * t] + x[row, 4 * t + 1] + x[row + 1, 4 * t + 2]
                     + x[row + 1, 4 * t + 3])


def _groups(kernel, consts=None):
    groups = vector_access.plan_kernel(target_pipeline(kernel.specialize_ir(consts or {}), 32))
    return sorted((g.kind, g.buf.name, len(g.ops), len(g.lead))
                  for g in {id(g): g for g in groups.values()}.values())


def _predicated(kernel):
    """``kernel``'s options with the ``version_aligned`` pass off: each vector group is emitted
    both ways under its alignment predicate (what the count tests below describe)."""
    return dataclasses.replace(kernel.options, disabled_passes={"version_aligned"})


def _sim(kernel, args, grid, block, misalign=0, consts=None):
    ptx, abi = emit_ptx(target_pipeline(kernel.specialize_ir(consts or {}), 32), "sm_90",
                        version_aligned=True)    # as compiled: one copy per alignment
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    Machine(ptx).launch(args, abi, (grid, 1, 1), (block, 1, 1), 0, misalign=misalign)
    return args


def _offset(a: np.ndarray, shift: int) -> np.ndarray:
    """A copy of ``a`` (any shape) whose data pointer is ``shift`` elements past 16 bytes."""
    raw = np.zeros(a.size + 16, a.dtype)
    o = (-(raw.ctypes.data // a.itemsize)) % (16 // a.itemsize) + shift
    v = raw[o:o + a.size].reshape(a.shape)
    assert v.ctypes.data % 16 == a.itemsize * shift
    v[...] = a
    return v


# --- grouping and predicates --------------------------------------------------------------------
def test_2d_chunks_of_one_row_group():
    assert _groups(scale_f32) == [("load", "x", 4, 1)] * 2 + [("store", "y", 4, 1)] * 2
    assert _groups(scale_f16) == [("load", "x", 8, 1)] * 2 + [("store", "y", 8, 1)] * 2
    assert _groups(chunk_sums) == [("load", "x", 4, 1)]


def test_neighbours_from_two_rows_do_not_group():
    assert _groups(two_rows) == []
    assert ".v4" not in emit(two_rows.specialize_ir(), "ptx", "sm_90", two_rows.options)


def test_the_predicate_tests_the_row_length_once():
    ptx = emit(chunk_sums.specialize_ir(), "ptx", "sm_90", _predicated(chunk_sums))
    assert len(re.findall(r"and\.b32 %r\d+, %r\d+, 3;", ptx)) == 1
    assert len(re.findall(r"setp\.eq\.and\.u32 %p\d+, %r\d+, 0, %p\d+", ptx)) == 1
    assert re.search(r"@%p\d+ ld\.global\.nc\.v4\.f32", ptx)
    assert len(re.findall(r"@!%p\d+ ld\.global\.nc\.f32", ptx)) == 4
    ir = emit(scale_f16.specialize_ir(), "llvm", "nvptx64-sm_90", scale_f16.options)
    assert len(re.findall(r"and i32 %\S+, 7\n", ir)) == 2      # x and y, each once
    assert len(re.findall(r"load <8 x half>, ptr addrspace\(1\) %\w+, align 16", ir)) == 2
    assert len(re.findall(r"store <8 x half> %\w+, ptr addrspace\(1\) %\w+, align 16", ir)) == 2


# --- correctness: aligned, offset views, rows of odd length -------------------------------------
@pytest.mark.parametrize("kernel, G, dtype", [(scale_f32, 4, np.float32), (scale_f16, 8, np.float16)])
def test_scale_rows_on_ptx_sim_and_host(kernel, G, dtype):
    rng = np.random.default_rng(1)
    for cols in (G, 5 * G, 16 * G):
        x = rng.standard_normal((3, cols)).astype(dtype)
        want = x * dtype(2.0)
        block = -(-cols // (2 * G))
        for misalign in (0, 4, 12):
            _, y = _sim(kernel, [x, np.zeros_like(x)], 3, block, misalign)
            assert y.tobytes() == want.tobytes(), (cols, misalign)
        for shift in (0, 1, 3):
            xo, yo = _offset(x, shift), _offset(np.zeros_like(x), shift)
            llvm_host.run_on_host(kernel.specialize_ir(), [xo, yo], (3, 1, 1), (block, 1, 1))
            assert yo.tobytes() == want.tobytes(), (cols, shift)


def test_rows_of_odd_length_fall_back_to_scalar_loads():
    """Row r starts r * cols * 4 bytes in: with cols not a multiple of 4 most rows are not
    16-byte aligned (the simulator and the host fault on a v4 access there)."""
    rng = np.random.default_rng(2)
    for cols in (4, 8, 9, 10, 11, 37):
        x = rng.standard_normal((5, cols)).astype(np.float32)
        want = x[:, :cols // 4 * 4].reshape(5, -1, 4).astype(np.float64).sum(axis=2)
        for misalign in (0, 4):
            _, s = _sim(chunk_sums, [x, np.zeros((5, cols // 4), np.float32)], 5, 16, misalign)
            np.testing.assert_allclose(s, want, rtol=1e-6)
        s = np.zeros((5, cols // 4), np.float32)
        llvm_host.run_on_host(chunk_sums.specialize_ir(), [x, s], (5, 1, 1), (16, 1, 1))
        np.testing.assert_allclose(s, want, rtol=1e-6)


def test_the_chunked_partition_refuses_rows_of_odd_length():
    with pytest.raises(kaio.LaunchError, match="not a multiple of 4"):
        scale_f32[(2,), (4,)](np.zeros((2, 10), np.float32), np.zeros((2, 10), np.float32))


# --- the register-resident row ops --------------------------------------------------------------
OPS = ["softmax", "rmsnorm", "layernorm"]
DTS = ["f32", "f16", "bf16"]


def _resident(op, dt, cols=8192):
    vec = norms.resident_vec(dt, dt, cols)
    threads, per = norms.resident_plan(cols, vec)
    kernel = getattr(norms, f"{op}_resident_kernel")(dt, dt, vec=vec)
    return kernel, vec, threads, per


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("target", ["sm_90", "nvptx64-sm_90"])
def test_resident_row_ops_move_16_bytes(op, dt, target):
    kernel, vec, _, per = _resident(op, dt)
    ptx = emit(kernel.specialize_ir({"PER": per}), "ptx", target, kernel.options)
    chunks = per // vec
    inputs = {"softmax": 1, "rmsnorm": 2, "layernorm": 3}[op]     # x, w, b
    assert len(re.findall(r"ld\.global\.nc\.v4\.\w+", ptx)) == chunks * inputs
    assert len(re.findall(r"st\.global\.v4\.\w+", ptx)) == chunks


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("op", OPS)
def test_resident_row_ops_fit_64_registers_without_spills(op, dt):
    """Two 512-thread blocks per SM at 8192 columns: at most 64 registers, nothing spilled."""
    kernel, _, threads, per = _resident(op, dt)
    assert (threads, per) == (512, 16)
    ptx = emit(kernel.specialize_ir({"PER": per}), "ptx", "sm_90", kernel.options)
    ptxas(ptx, "sm_90")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([PTXAS, "-arch=sm_90", "-v", src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    regs = int(re.search(r"Used (\d+) registers", r.stderr).group(1))
    assert regs <= 64 and "0 bytes spill stores, 0 bytes spill loads" in r.stderr, r.stderr


def _row_inputs(op, dt, rows, cols, seed):
    g = np.random.default_rng(seed)
    st = kaio.dtypes.from_name(dt).storage_np
    x = g.normal(0, 4, (rows, cols)).astype(np.float32).astype(st)
    w = g.uniform(0.5, 1.5, cols).astype(np.float32).astype(st)
    b = g.normal(size=cols).astype(np.float32).astype(st)
    return {"rmsnorm": [x, w], "layernorm": [x, w, b], "softmax": [x]}[op], \
        {"rmsnorm": [1e-6], "layernorm": [1e-5], "softmax": []}[op]


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("op", OPS)
def test_resident_row_ops_on_ptx_sim_aligned_and_offset(op, dt):
    """The chunked kernels as kaio's PTX, in the simulator, on aligned and offset buffers (the
    scalar fallback), within the op's tolerance of the float64 reference."""
    cols = 64
    kernel, vec, threads, per = _resident(op, dt, cols)
    assert vec > 1
    args, extra = _row_inputs(op, dt, 3, cols, 5)
    case = K.get(f"ml/{op}" + ("" if dt == "f32" else f"_{dt}"))
    ref = {"y": getattr(norms, f"{op}_ref")(*args, *extra)}
    for misalign in (0, 4):
        out = _sim(kernel, [*args, np.zeros_like(args[0]), *extra], 3, threads, misalign,
                   {"PER": per})
        ok, ratio = case.check({"y": out[len(args)]}, ref)
        assert ok, (misalign, ratio)


# --- 1-byte elements: sixteen per access (int8 tensors) -----------------------------------------
@kaio.kernel
def add_i8(x: kaio.In[kaio.i8], y: kaio.Region[kaio.i8, blocked(16)]):
    for i in y.owned():
        y[i] = x[i] + y[i]


@kaio.kernel
def max_u8(x: kaio.In[kaio.u8], y: kaio.Region[kaio.u8, blocked(16)]):
    for i in y.owned():
        y[i] = max(x[i], y[i])


@pytest.mark.parametrize("kernel, fill", [(add_i8, "sign"), (max_u8, "zero")])
def test_sixteen_byte_accesses_split_and_pack_words(kernel, fill):
    ptx = emit(kernel.specialize_ir(), "ptx", "sm_90", _predicated(kernel))
    assert len(re.findall(r"@%p\d+ ld\.global\.nc\.v4\.b32", ptx)) == 1
    assert len(re.findall(r"@%p\d+ ld\.global\.v4\.b32", ptx)) == 1
    assert len(re.findall(r"@%p\d+ st\.global\.v4\.b32", ptx)) == 1
    # one prmt per byte (ptxas makes a bfe two instructions): byte b, then its sign or zeros
    sel = {"sign": "|".join(f"0x{8 + b:x}{8 + b:x}{8 + b:x}{b}" for b in range(4)),
           "zero": "|".join(f"0x444{b}" for b in range(4))}[fill]
    assert len(re.findall(rf"@%p\d+ prmt\.b32 %r\d+, %r\d+, 0, ({sel});", ptx)) == 32
    assert not re.search(r"@%p\d+ bfe\.", ptx)
    assert len(re.findall(r"@!%p\d+ st\.global\.[su]8", ptx)) == 16
    ptxas(ptx, "sm_90")
    ir = emit(kernel.specialize_ir(), "llvm", "nvptx64-sm_90", kernel.options)
    assert len(re.findall(r"load <16 x i8>, ptr addrspace\(1\) %\w+, align 16", ir)) == 2


@pytest.mark.parametrize("kernel, dtype", [(add_i8, np.int8), (max_u8, np.uint8)])
def test_byte_groups_run_on_aligned_and_offset_buffers(kernel, dtype):
    """Negative i8 / u8 >= 128 values check the sign / zero extension of every byte."""
    rng = np.random.default_rng(4)
    ref = (lambda a, b: a + b) if dtype == np.int8 else np.maximum
    for n in (16, 40, 203):
        info = np.iinfo(dtype)
        x, y = (rng.integers(info.min, info.max + 1, n).astype(dtype) for _ in range(2))
        grid, block = blocked(16).launch_shape((n,))
        for misalign in (0, 3, 8):
            got_x, got_y = _sim(kernel, [x, y], grid[0], block[0], misalign)
            assert got_y.tobytes() == ref(x, y).tobytes() and got_x.tobytes() == x.tobytes()
        for shift in (0, 1, 7):
            xo, yo = _offset(x, shift), _offset(y, shift)
            llvm_host.run_on_host(kernel.specialize_ir(), [xo, yo], grid, block)
            assert yo.tobytes() == ref(x, y).tobytes(), (n, shift)


@pytest.mark.parametrize("out_dt", ["f32", "f16"])
def test_dequantize_int8_rows_move_16_bytes_and_match_numpy(out_dt):
    from kaio.kernels.ml import quant
    kernel = quant.dequantize_rows_kernel(out_dt)
    for target in ("sm_90", "nvptx64-sm_90"):
        ptx = emit(kernel.specialize_ir(), "ptx", target, kernel.options)
        # a thread's chunk is one 16-byte store (a warp's store: 512 contiguous bytes) fed by one
        # narrow q load: 4 int8 in a b32 word for f32, 8 in a v2.b32 for f16; f32's loop is
        # unrolled by 4 (kaio.passes.unroll), its four word loads first
        words = re.findall(r"ld\.global\.nc\.(v2\.)?b32\s+(%r\d+|\{[^}]*\}), \[", ptx)
        stores = re.findall(r"st\.global\.v4", ptx)
        assert len(stores) == (5 if out_dt == "f32" else 1), target
        assert [w[0] for w in words if w[0] or out_dt == "f32"][:len(stores)] == \
            ["" if out_dt == "f32" else "v2."] * len(stores), target
        assert not re.search(r"ld\.global\.nc\.v4", ptx), target
    rng = np.random.default_rng(6)
    # (2, 80) on 3 threads: 20 or 10 chunks a row, so the unrolled loop's remainder runs too
    for shape, threads in (((3, 64), 2), ((2, 80), 3)):
        q = rng.integers(-128, 128, shape, dtype=np.int8)
        scale = rng.uniform(0.001, 0.05, shape[0]).astype(np.float32)
        od = np.float32 if out_dt == "f32" else np.float16
        want = (q.astype(np.float32) * scale[:, None]).astype(od)
        for misalign in (0, 4):
            _, _, y = _sim(kernel, [q, scale, np.zeros(q.shape, od)], shape[0], threads, misalign)
            assert y.tobytes() == want.tobytes(), (shape, misalign)
        y = _offset(np.zeros(q.shape, od), 1)
        llvm_host.run_on_host(kernel.specialize_ir(), [_offset(q, 3), scale, y], (shape[0], 1, 1),
                              (threads, 1, 1))
        assert y.tobytes() == want.tobytes(), shape


@pytest.mark.parametrize("shape", [(3, 64), (64, 100), (2, 16)])
def test_host_dequantize_picks_the_row_kernel_for_rows_of_16(shape, reference):
    from kaio.kernels.ml import quant
    want = quant.dequantize_rows_kernel if shape[1] % 16 == 0 else quant.dequantize_kernel
    assert quant.dequantize_launch("f32", shape) is want("f32")
    rng = np.random.default_rng(8)
    q = rng.integers(-128, 128, shape, dtype=np.int8)
    scale = rng.uniform(0.001, 0.05, shape[0]).astype(np.float32)
    y = quant.dequantize(q, scale)
    assert y.tobytes() == (q.astype(np.float32) * scale[:, None]).astype(np.float32).tobytes()


@pytest.mark.parametrize("dt_name, vec", [("f32", 4), ("f16", 8)])
def test_row_addresses_are_computed_once_for_chunks_in_branches(dt_name, vec):
    """The resident row kernels read and write a row in chunks, each chunk in its own
    ``if c + V <= n``: the row's 64-bit offset (``mul.wide.s32`` of the i32 row and row length)
    is computed once per buffer before the first branch, not once per chunk (ptxas does not
    hoist it out of a branch). x and y: two, for PER / V = 4 chunks each."""
    k = norms.rmsnorm_resident_kernel(dt_name, dt_name, vec=vec, regs=64)
    ptx = emit(k.specialize_ir({"PER": 4 * vec}), "ptx", "sm_90", _predicated(k))
    assert len(re.findall(r"mul\.wide\.s32 %rd\d+, %r\d+, %r\d+;", ptx)) == 2
    assert "mul.lo.s64" not in ptx
    ptxas(ptx, "sm_90")


def test_a_body_with_vector_groups_is_emitted_once_per_alignment():
    """As compiled (the ``version_aligned`` pass on): one uniform branch on "every grouped
    buffer is aligned" selects a copy of the body with the 16-byte accesses alone or one with
    the scalar accesses alone; nothing is left predicated off (it would still issue), the
    block's shared arrays are declared once, and both copies run right on the simulator (the
    resident rmsnorm: shared memory, a barrier, x, w and y grouped)."""
    k = norms.rmsnorm_resident_kernel("f16", "f16", vec=8, regs=64)
    ptx = emit(k.specialize_ir({"PER": 16}), "ptx", "sm_90", k.options)
    assert len(re.findall(r"@!%p\d+ bra \$L_unaligned_\d+;", ptx)) == 1
    assert not re.search(r"@!?%p\d+ (ld|st)\.global", ptx)       # no access under a predicate
    vector, scalar = ptx.split("\n$L_unaligned_")
    assert len(re.findall(r"ld\.global\.nc\.v4\.b32", vector)) == 4     # x twice, w twice
    assert len(re.findall(r"st\.global\.v4\.b32", vector)) == 2
    assert not re.search(r"\.v4\.", scalar) and len(re.findall(r"ld\.global\.nc\.b16", scalar)) == 32
    predicated = emit(k.specialize_ir({"PER": 16}), "ptx", "sm_90", _predicated(k))
    shared = [re.findall(r"^\s*\.shared .*", text, re.M) for text in (ptx, predicated)]
    assert shared[0] == shared[1] and shared[0]                  # declared once
    assert len(re.findall(r"@!%p\d+ ld\.global\.nc\.b16", predicated)) == 32
    ptxas(ptx, "sm_90")
    rng = np.random.default_rng(12)
    for cols, threads in ((128, 8), (96, 8)):     # 96: the second chunk of some threads is past n
        x = rng.standard_normal((3, cols)).astype(np.float16)
        w = rng.standard_normal(cols).astype(np.float16)
        want = norms.rmsnorm_ref(x, w, 1e-6)
        for misalign in (0, 2):
            got = _sim(k, [x, w, np.zeros_like(x), np.float32(1e-6)], 3, threads, misalign,
                       consts={"PER": 16})[2]
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2, atol=2e-3)
