"""kaio.mma fragments on the LLVM paths (kaio.backends.llvm_mma): NVVM mma intrinsics on
nvptx64, MFMA on gfx90a/gfx942.

- the lane layouts: a numpy model of each matrix instruction (written from the PTX ISA's and
  AMD's operand tables, independently of the module) fed through the module's own element
  mapping and multiply plan must reconstruct ``C + A @ B`` exactly, for single and multi-tile
  fragments (the lone n-tile padding on AMD included);
- the LLVM IR of every op, the NVVM PTX assembled by ptxas for sm_80 and sm_90, and the AMD
  code objects built and validated for gfx90a and gfx942 (they cannot execute here);
- the NVVM PTX *executed* in tests/ptx_sim.py (mma.sync from the ISA's tables) on integer data,
  so every sum is exact and any misplaced lane or element shows;
- GPU runs (``KAIO_CUDA_CODEGEN=llvm``) against the reference backend, for the lead's H200.
"""
import re

import numpy as np
import pytest
from test_mma import DTYPES, GEMM, branch_result, gemm_bt_accumulate, shared_tiles
from test_ptx import ptxas

import kaio
from kaio import f16, f32
from kaio.backends import llvm_mma as M
from kaio.backends.abi import kernel_abi
from kaio.backends.reference import ReferenceBackend
from kaio.backends.targets import get_target
from kaio.ir.types import frag_type

AMD = ["gfx90a", "gfx942"]
NV = ["sm_80", "sm_90"]


# --- the kernels -------------------------------------------------------------------------------
def _warp_tile(dtype, n):
    @kaio.kernel
    def warp_tile(A: kaio.In[dtype, 2], B: kaio.In[dtype, 2], C: kaio.Raw[f32, 2]):
        """Each warp a 32 x n tile of C (a 2 x n/8 grid of instruction tiles), k = 32 per step."""
        nw = kaio.block_dim.x // kaio.warp_size
        warp = kaio.thread_idx.x // kaio.warp_size
        row0 = kaio.block_idx.x * 32
        col0 = (kaio.block_idx.y * nw + warp) * n
        acc = kaio.mma.fill(f32, 0.0, m=32, n=n)
        for k0 in range(0, A.shape[1], 32):
            a = kaio.mma.load_a(A, row0, k0, m=32, k=32)
            b = kaio.mma.load_b(B, k0, col0, k=32, n=n)
            acc = kaio.mma.mma(a, b, acc)
        kaio.mma.store(C, row0, col0, acc)
    return warp_tile


WARP_TILE = {(d, n): _warp_tile(DTYPES[d][0], n) for d in DTYPES for n in (8, 16, 24)}


@kaio.kernel
def staged_edge(A: kaio.In[f16, 2], BT: kaio.In[f16, 2], C: kaio.Raw[f16, 2], alpha: f32,
                beta: f32):
    """C = alpha * A @ BT.T + beta * C for any M, N, K: one warp per block, a 32 x 16 tile of C;
    A's and BT's tiles staged in shared memory by copy_tile (zeros past the edges), BT read
    transposed; the store skips what lies outside C."""
    As = kaio.shared_array(f16, (32, 32))
    Bs = kaio.shared_array(f16, (16, 32))
    row0 = kaio.block_idx.x * 32
    col0 = kaio.block_idx.y * 16
    acc = kaio.mma.fill(f32, 0.0, m=32, n=16)
    for k0 in range(0, A.shape[1], 32):
        kaio.mma.copy_tile(As, A, row0, k0)
        kaio.mma.copy_tile(Bs, BT, col0, k0)
        kaio.sync()
        a = kaio.mma.load_a(As, 0, 0, m=32, k=32)
        b = kaio.mma.load_b(Bs, 0, 0, trans=True, k=32, n=16)
        acc = kaio.mma.mma(a, b, acc)
        kaio.sync()
    kaio.mma.store(C, row0, col0, acc, alpha=alpha, beta=beta)


@kaio.kernel
def staged_other(AT: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
    """C = AT.T @ B from shared memory: A read transposed (AT is K x M), B as it is, with three
    n-tiles (on NVIDIA: ldmatrix .trans for A, x4 + x2 for B)."""
    As = kaio.shared_array(f16, (32, 32))
    Bs = kaio.shared_array(f16, (32, 24))
    kaio.mma.copy_tile(As, AT, 0, 0)
    kaio.mma.copy_tile(Bs, B, 0, 0)
    kaio.sync()
    a = kaio.mma.load_a(As, 0, 0, trans=True, m=32, k=32)
    b = kaio.mma.load_b(Bs, 0, 0, k=32, n=24)
    kaio.mma.store(C, 0, 0, kaio.mma.mma(a, b, kaio.mma.fill(f32, 0.0, m=32, n=24)))


def _ints(shape, npdt, g, lo=-3, hi=4):
    return g.integers(lo, hi, shape).astype(np.float32).astype(npdt)


def _staged_case(seed=5, m=40, n=20, k=40):
    g = np.random.default_rng(seed)
    a, bt = _ints((m, k), np.float16, g), _ints((n, k), np.float16, g)
    c0 = _ints((m, n), np.float16, g, -20, 21)
    want = (0.5 * (a.astype(np.float64) @ bt.T.astype(np.float64)) - 2.0 * c0).astype(np.float16)
    return a, bt, c0, want, ((m + 31) // 32, (n + 15) // 16, 1)


# --- 1. the lane layouts against models of the instructions ------------------------------------
def _nvvm_hw(a, b, c):
    """mma.sync.m16n8k16 for 32 lanes: a (32, 8), b (32, 4), c (32, 4) per-lane registers, as the
    PTX ISA tabulates them (groupID = lane >> 2, threadID_in_group = lane % 4): a0 a1 at (gid,
    2 tig + 0/1), a2 a3 eight rows down, a4..a7 the same eight columns right; b0 b1 at (2 tig +
    0/1, gid), b2 b3 eight rows down; c0 c1 at (gid, 2 tig + 0/1), c2 c3 eight rows down."""
    A, B, C = np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8))
    for lane in range(32):
        gid, tig = lane >> 2, lane % 4
        for i in range(8):
            A[gid + (8 if i in (2, 3, 6, 7) else 0), 2 * tig + i % 2 + (8 if i >= 4 else 0)] = a[lane, i]
        for i in range(4):
            B[2 * tig + i % 2 + (8 if i >= 2 else 0), gid] = b[lane, i]
            C[gid + (8 if i >= 2 else 0), 2 * tig + i % 2] = c[lane, i]
    D = C + A @ B
    return np.array([[D[(lane >> 2) + (8 if i >= 2 else 0), 2 * (lane % 4) + i % 2]
                      for i in range(4)] for lane in range(32)])


def _mfma16_hw(a, b, c):
    """v_mfma_f32_16x16x16 (f16 / bf16_1k) for 64 lanes, each operand 4 values per lane: A's
    element (i, k) sits in lane i + 16 * (k // 4), item k % 4; B's (k, j) in lane j + 16 * (k // 4),
    item k % 4; C/D's (i, j) in lane j + 16 * (i // 4), item i % 4."""
    A = np.array([[a[i + 16 * (k // 4), k % 4] for k in range(16)] for i in range(16)])
    B = np.array([[b[j + 16 * (k // 4), k % 4] for j in range(16)] for k in range(16)])
    C = np.array([[c[j + 16 * (i // 4), i % 4] for j in range(16)] for i in range(16)])
    D = C + A @ B
    out = np.zeros((64, 4))
    for i in range(16):
        for j in range(16):
            out[j + 16 * (i // 4), i % 4] = D[i, j]
    return out


_HW = {"nvvm": (_nvvm_hw, 8, 4, 4), "mfma16": (_mfma16_hw, 4, 4, 4)}


def _coords(scheme, t):
    """(rows, cols, valid), each (W, E): the module's mapping for every lane at once."""
    W = M.WARP[scheme]
    lanes = np.arange(W)
    els = M.element_coords(scheme, t, lanes, M.NumpyLanes())
    rows = np.stack([np.broadcast_to(r, (W,)) for r, _, _ in els], axis=1)
    cols = np.stack([np.broadcast_to(c, (W,)) for _, c, _ in els], axis=1)
    valid = np.stack([np.ones(W, bool) if v is None else v for _, _, v in els], axis=1)
    return rows, cols, valid


def _distribute(scheme, t, mat):
    rows, cols, valid = _coords(scheme, t)
    return np.where(valid, mat[np.where(valid, rows, 0), np.where(valid, cols, 0)], 0.0)


def _gather(scheme, t, regs):
    rows, cols, valid = _coords(scheme, t)
    out = np.full(t.dims, np.nan)
    out[rows[valid], cols[valid]] = regs[valid]
    return out


@pytest.mark.parametrize("scheme", ["nvvm", "mfma16"])
@pytest.mark.parametrize("role", ["a", "b", "acc"])
@pytest.mark.parametrize("tiles", [(1, 1), (1, 2), (2, 3), (3, 1)])
def test_lane_mapping_covers_each_element_once(scheme, role, tiles):
    """Every matrix element of a fragment is held by exactly one (lane, element) that is not
    padding, and the vector length is what the LLVM type says."""
    t = frag_type(role, "m16n8k16", f16 if role != "acc" else f32, tiles)
    rows, cols, valid = _coords(scheme, t)
    assert rows.shape == (M.WARP[scheme], M.lane_length(scheme, t))
    hits = np.zeros(t.dims, int)
    np.add.at(hits, (rows[valid], cols[valid]), 1)
    assert (hits == 1).all()
    # padding exists only for a lone 16 x 8 n-tile on AMD (B and the accumulator)
    lone = scheme == "mfma16" and role != "a" and tiles[1] % 2 == 1
    assert (not valid.all()) == lone
    if lone:   # exactly half of the lone tile's MFMA operand: the lanes with lane % 16 >= 8
        assert (~valid).sum() == 64 * 4 // 2 * tiles[0]


@pytest.mark.parametrize("scheme", ["nvvm", "mfma16"])
@pytest.mark.parametrize("tm,tk,tn", [(1, 1, 1), (1, 1, 2), (2, 2, 3), (1, 3, 4), (2, 1, 1)])
def test_instruction_models_reconstruct_the_product(scheme, tm, tk, tn):
    """The module's element mapping and multiply plan, run through models of the instructions,
    give exactly C + A @ B (integers: every sum exact)."""
    hw, na, nb, nc = _HW[scheme]
    ta, tb, tc = (frag_type(r, "m16n8k16", d, s) for r, d, s in
                  (("a", f16, (tm, tk)), ("b", f16, (tk, tn)), ("acc", f32, (tm, tn))))
    g = np.random.default_rng(tm * 100 + tk * 10 + tn)
    A, B, C = (g.integers(-4, 5, t.dims).astype(np.float64) for t in (ta, tb, tc))
    a, b, c = (_distribute(scheme, t, x) for t, x in ((ta, A), (tb, B), (tc, C)))
    for pa, pb, pc in M.mma_plan(scheme, ta, tb, tc):
        c[:, pc * nc:(pc + 1) * nc] = hw(a[:, pa * na:(pa + 1) * na], b[:, pb * nb:(pb + 1) * nb],
                                         c[:, pc * nc:(pc + 1) * nc])
    np.testing.assert_array_equal(_gather(scheme, tc, c), C + A @ B)
    # the plan: each (A tile, B tile) pair once per accumulator piece, kk ascending
    plan = M.mma_plan(scheme, ta, tb, tc)
    assert len(plan) == len(M.pieces(scheme, tc)) * tk
    kks = [pa % tk for pa, _, _ in plan]
    assert kks == sorted(kks)


def test_lone_n_tile_wastes_half_an_mfma_and_pairs_do_not():
    t3 = frag_type("acc", "m16n8k16", f32, (1, 3))
    assert [(p.c0, p.cols) for p in M.pieces("mfma16", t3)] == [(0, 16), (16, 8)]
    assert M.lane_length("mfma16", t3) == 8 and M.lane_length("nvvm", t3) == 12


# --- 2. LLVM IR, ptxas, AMD code objects --------------------------------------------------------
def _llvm(k, target, **consts):
    t = get_target(target)
    return t.run(k.specialize_ir(consts), t.options(k.options), until="llvm")["llvm"]


@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_nvvm_ir_of_each_op(name):
    ir = _llvm(WARP_TILE[name, 16], "nvptx64-sm_80")
    intr = "llvm.nvvm.mma.m16n8k16.row.col." + ("bf16" if name == "bf16" else "f32.f32")
    # (2 x 2 A tiles) x (2 x 2 B tiles) -> 2 x 2 accumulator tiles: 8 instructions per step,
    # in each of the loop bodies kaio.passes.unroll leaves
    bodies, rest = divmod(ir.count(f"call {{float, float, float, float}} @{intr}("), 8)
    assert bodies >= 1 and rest == 0
    assert "phi <16 x float>" in ir                       # the accumulator, loop-carried
    assert "@llvm.nvvm.read.ptx.sreg.laneid" in ir
    ety = "half" if name == "f16" else "bfloat"
    # per lane and step: A 4 tiles x 8 elements, B 4 tiles x 4
    assert ir.count(f"load {ety}, ptr addrspace(1)") == bodies * (32 + 16)
    assert ir.count("store float") == 16                  # 4 tiles x 4 elements, each masked
    assert ir.count("br i1") >= 16


@pytest.mark.parametrize("target", AMD)
def test_mfma_ir_pairs_n_tiles(target):
    ir16 = _llvm(WARP_TILE["f16", 16], target)
    ir24 = _llvm(WARP_TILE["bf16", 24], target)
    n16 = ir16.count("call <4 x float> @llvm.amdgcn.mfma.f32.16x16x16f16(")
    n24 = ir24.count("call <4 x float> @llvm.amdgcn.mfma.f32.16x16x16bf16.1k(")
    # per loop body (kaio.passes.unroll may leave several): n = 16 is one paired MFMA per (row
    # tile, k tile), 4; n = 24 a pair and a lone tile, 8; a 32 x 16 accumulator is two MFMA
    # operands (8 floats per lane)
    bodies = n16 // 4
    assert bodies >= 1 and n16 == 4 * bodies and n24 == 8 * bodies
    assert "phi <8 x float>" in ir16
    assert "phi <16 x float>" in ir24                     # 2 row tiles x 2 operands x 4 floats
    assert "mbcnt" in ir16


def test_copy_tile_and_scaled_store_ir():
    ir = _llvm(staged_edge, "nvptx64-sm_90")
    assert "udiv i32" in ir and "urem i32" in ir          # the block-strided copy
    assert "phi half [ 0xH0000" in ir                     # zero fill outside the source
    assert "fcmp une float" in ir                         # beta != 0 decides the read
    assert "fptrunc float" in ir
    # cp.async where the run-time test allows, and every barrier waits for the copies
    assert ir.count("call void @llvm.nvvm.cp.async.cg.shared.global.16.s(") == 2
    ptx = staged_edge.emit("ptx", "nvptx64-sm_90")
    assert ptx.count("cp.async.wait_all") == ptx.count("bar.sync") == 2
    amd = _llvm(staged_edge, "gfx942")                    # AMD: element copies only
    assert "cp.async" not in amd and "udiv i32" in amd


@pytest.mark.parametrize("arch", NV)
@pytest.mark.parametrize("kernel", ["gemm_bf16_f16", "warp_tile_f16_24", "warp_tile_bf16_16",
                                    "gemm_bt_accumulate", "shared_tiles", "staged_edge",
                                    "staged_other"])
def test_nvvm_ptx_assembles(arch, kernel):
    k = _KERNELS[kernel]
    ptx = k.emit("ptx", f"nvptx64-{arch}")
    assert "mma.sync.aligned.m16n8k16.row.col.f32." in ptx
    ptxas(ptx, arch)


_KERNELS = {"gemm_bf16_f16": GEMM["bf16", f16], "warp_tile_f16_24": WARP_TILE["f16", 24],
            "warp_tile_bf16_16": WARP_TILE["bf16", 16], "gemm_bt_accumulate": gemm_bt_accumulate,
            "shared_tiles": shared_tiles, "staged_edge": staged_edge, "staged_other": staged_other}


@pytest.mark.parametrize("target", AMD)
@pytest.mark.parametrize("kernel", sorted(_KERNELS))
def test_amd_code_objects_build_and_validate(target, kernel):
    report = _KERNELS[kernel].emit("report", target)
    head = report.splitlines()[0]
    assert f"[{target}] ok:" in head and "error" not in report, report
    assert re.search(r"lds=\d+B sgpr=\d+ vgpr=\d+ agpr=\d+ spills\(s/v\)=0/0", head), head
    asm = _KERNELS[kernel].emit("asm", target)
    assert re.search(r"v_mfma_f32_16x16x16_?(f16|bf16)", asm)


def test_gfx1100_refuses_fragments_at_the_op():
    with pytest.raises(kaio.CompileError, match="not supported on target gfx1100") as e:
        WARP_TILE["f16", 16].emit("llvm", "gfx1100")
    assert "fill" in str(e.value)     # the first fragment op's source line is shown


# --- 3. the NVVM PTX executed in the PTX simulator ---------------------------------------------
def _split_vector_load(m) -> str:
    """``ld.space.vN.bW {r0, ..}, [base+off]`` -> N scalar loads (the simulator has none)."""
    space, bits, regs, base, off = m.group(1), int(m.group(2)), m.group(3).split(","), m.group(4), \
        int(m.group(5) or 0)
    return "\n".join(f"ld.{space}.b{bits} {r.strip()}, [{base}+{off + i * bits // 8}];"
                     for i, r in enumerate(regs))


def _sim_llvm(k, args, grid, block, arch="sm_80", **consts):
    """Compile ``k`` on the LLVM nvptx64 path, assemble it, and run it in tests/ptx_sim.py.
    LLVM's PTX is normalised to the simulator's dialect: parameters renamed to the ABI's names,
    whitespace single, each mma.sync on one line."""
    from ptx_sim import Machine
    t = get_target(f"nvptx64-{arch}")
    arts = t.run(k.specialize_ir(consts), t.options(k.options), until="ptx")
    ptxas(arts["ptx"], arch)
    abi = kernel_abi(arts["lowered"])
    ptx = re.sub(rf"\b{abi.entry}_param_(\d+)\b", lambda m: abi.params[int(m.group(1))].name,
                 arts["ptx"])
    ptx = re.sub(r"[ \t]+", " ", ptx)
    ptx = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)U\b", r"\1", ptx)      # LLVM's unsigned immediates
    ptx = re.sub(r"ld\.(\w+)\.v\d\.b(\d+) \{([^}]*)\}, \[(%\w+)(?:\+(\d+))?\];", _split_vector_load, ptx)
    ptx = re.sub(r"(mma\.sync[.\w]+)\s*\n((?:\s*\{[^}]*\},?\s*\n?)+)",
                 lambda m: m.group(1) + " " + " ".join(m.group(2).split()), ptx)
    Machine(ptx).launch(args, abi, grid, block)


@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_nvvm_single_tiles_run_exactly(name):
    dt, npdt = DTYPES[name]
    g = np.random.default_rng(21)
    a, b = _ints((32, 32), npdt, g), _ints((32, 16), npdt, g)
    c = np.zeros((32, 16), np.float32)
    _sim_llvm(GEMM[name, f32], [a, b, c], (2, 1, 1), (64, 1, 1))
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize("key", [("f16", 16), ("bf16", 24), ("f16", 8)])
def test_nvvm_warp_tiles_run_exactly(key):
    name, n = key
    _, npdt = DTYPES[name]
    g = np.random.default_rng(22)
    a, b = _ints((32, 64), npdt, g), _ints((64, 2 * n), npdt, g)
    c = np.zeros((32, 2 * n), np.float32)
    _sim_llvm(WARP_TILE[key], [a, b, c], (1, 1, 1), (64, 1, 1))
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_nvvm_transposed_accumulated_shared_and_branch_tiles_run_exactly():
    g = np.random.default_rng(23)
    a, bt = _ints((16, 32), np.float16, g), _ints((8, 32), np.float16, g)
    c0 = _ints((16, 8), np.float32, g, -50, 50)
    c = np.zeros((16, 8), np.float32)
    _sim_llvm(gemm_bt_accumulate, [a, bt, c0, c], (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(c, c0 + a.astype(np.float32) @ bt.T.astype(np.float32))
    b = bt.T[:16].copy()
    c1 = np.zeros(128, np.float32)
    _sim_llvm(shared_tiles, [a[:, :16].copy(), b, c1], (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(c1.reshape(16, 8), a[:, :16].astype(np.float32) @ b.astype(np.float32))
    prod = a[:, :16].astype(np.float32) @ b.astype(np.float32)
    for scale_k, want in ((1, 2 * prod), (0, prod - 1)):
        c2 = np.zeros((16, 8), np.float32)
        _sim_llvm(branch_result, [a[:, :16].copy(), b, c2, scale_k], (1, 1, 1), (32, 1, 1),
                  "sm_90", twice=True)
        np.testing.assert_array_equal(c2, want)


def test_ldmatrix_where_shared_tiles_allow_it():
    """2-d shared arrays with 16-byte rows and column origins that are multiples of 8 load by
    ldmatrix (each pattern: A as is and transposed, B as is and transposed, x4 and x2); 1-d
    shared memory and global buffers element by element."""
    def calls(ir):
        return sorted(re.findall(r"call \{[^}]*\} @llvm\.nvvm\.ldmatrix\.sync\.aligned\.m8n8\.(\S+)\(", ir))
    # A^T (2 x 2 tiles): 4 x4.trans; B (k x n, 2 k-tiles of 3 n-tiles): a x4.trans and a x2.trans each
    assert calls(_llvm(staged_other, "nvptx64-sm_80")) == ["x2.trans.b16"] * 2 + ["x4.trans.b16"] * 6
    # A (2 x 2 tiles) and B held n x k (2 k-tiles of 2 n-tiles): untransposed x4 only
    assert calls(_llvm(staged_edge, "nvptx64-sm_80")) == ["x4.b16"] * 6
    for k in (shared_tiles, GEMM["f16", f32]):
        assert "ldmatrix" not in _llvm(k, "nvptx64-sm_80")


def test_nvvm_ldmatrix_patterns_run_exactly():
    g = np.random.default_rng(24)
    at, b = _ints((32, 32), np.float16, g), _ints((32, 24), np.float16, g)
    c = np.zeros((32, 24), np.float32)
    _sim_llvm(staged_other, [at, b, c], (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(c, at.T.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize("k", [40, 36])
def test_nvvm_copy_tile_and_scaled_edge_store_run_exactly(k):
    """M, N, K not multiples of the tile: copy_tile's zero fill and the store's mask; K = 40
    takes cp.async (rows of whole 16-byte chunks), K = 36 the element copy."""
    a, bt, c0, want, grid = _staged_case(k=k)
    c = c0.copy()
    _sim_llvm(staged_edge, [a, bt, c, 0.5, -2.0], grid, (32, 1, 1))
    np.testing.assert_array_equal(c, want)
    ref = c0.copy()
    be = ReferenceBackend(warp_size=32)
    be.launch(be.compile(staged_edge.specialize_ir({})), grid, (32, 1, 1), [a, bt, ref, 0.5, -2.0])
    np.testing.assert_array_equal(ref, want)


def test_nvvm_copy_wait_pipeline_waits_by_group_and_runs_exactly():
    """kaio.mma.copy_wait(pending=1) in a three-stage pipeline (tests/test_gemm.py): each
    copy_tile commits a cp.async group, the wait is wait_group 1, barriers do not wait_all."""
    from test_gemm import _pipeline
    k = _pipeline(1)
    ir = _llvm(k, "nvptx64-sm_80")
    assert "call void @llvm.nvvm.cp.async.wait.group(i32 1)" in ir
    assert "cp.async.wait.all" not in ir
    assert ir.count("call void @llvm.nvvm.cp.async.commit.group()") == ir.count(
        "call void @llvm.nvvm.cp.async.cg.shared.global.16.s(")
    a = (np.arange(16 * 96) % 7).reshape(16, 96).astype(np.float16)
    b = (np.arange(16 * 8) % 5).reshape(16, 8).astype(np.float16)
    c = np.zeros((16, 8), np.float32)
    _sim_llvm(k, [a, b, c], (1, 1, 1), (32, 1, 1))
    want = sum(a[:, j:j + 16].astype(np.float32) for j in range(0, 96, 16)) @ b.astype(np.float32)
    np.testing.assert_array_equal(c, want)
    assert "cp.async" not in _llvm(k, "gfx90a")      # element copies: complete at once


# --- int8 (m16n8k32) on nvptx64: NVVM mma .s8 ------------------------------------------------------
def test_int8_lane_mapping_reconstructs_the_product():
    """m16n8k32's table (PTX ISA: a_i at (gid + 8 ((i / 4) % 2), 4 tig + i % 4 + 16 (i / 8)),
    b_i at (4 tig + i % 4 + 16 (i / 4), gid)) through the module's mapping, exact in int64."""
    ta, tb, tc = (frag_type(r, "m16n8k32", d, s) for r, d, s in
                  (("a", kaio.i8, (2, 2)), ("b", kaio.i8, (2, 3)), ("acc", kaio.i32, (2, 3))))
    g = np.random.default_rng(40)
    A, B, C = (g.integers(-128, 128, t.dims).astype(np.float64) for t in (ta, tb, tc))
    a, b, c = (_distribute("nvvm", t, x) for t, x in ((ta, A), (tb, B), (tc, C)))

    def hw(a, b, c):
        Am, Bm, Cm = np.zeros((16, 32)), np.zeros((32, 8)), np.zeros((16, 8))
        for lane in range(32):
            gid, tig = lane >> 2, lane % 4
            for i in range(16):
                row = gid + (8 if i in (4, 5, 6, 7, 12, 13, 14, 15) else 0)
                Am[row, 4 * tig + i % 4 + (16 if i >= 8 else 0)] = a[lane, i]
            for i in range(8):
                Bm[4 * tig + i % 4 + (16 if i >= 4 else 0), gid] = b[lane, i]
            for i in range(4):
                Cm[gid + (8 if i >= 2 else 0), 2 * tig + i % 2] = c[lane, i]
        D = Cm + Am @ Bm
        return np.array([[D[(ln >> 2) + (8 if i >= 2 else 0), 2 * (ln % 4) + i % 2] for i in range(4)]
                         for ln in range(32)])
    for pa, pb, pc in M.mma_plan("nvvm", ta, tb, tc):
        c[:, pc * 4:pc * 4 + 4] = hw(a[:, pa * 16:pa * 16 + 16], b[:, pb * 8:pb * 8 + 8],
                                     c[:, pc * 4:pc * 4 + 4])
    np.testing.assert_array_equal(_gather("nvvm", tc, c), C + A @ B)


def test_int8_fragments_run_exactly_and_amd_refuses_them():
    """tests/test_mma_int8.py's kernels on the LLVM path, in the simulator: wrapping i32
    accumulation, warp tiles from shared, transposed A, 1-d C, the dequantising store."""
    from test_mma_int8 import (
        _dequant_case,
        _ints,
        _wrap,
        accumulate,
        dequant_store,
        shared_k_by_n,
        shared_warp_tiles,
    )
    for arch in NV:
        ptxas(accumulate.emit("ptx", f"nvptx64-{arch}"), arch)
    a, b = _ints((32, 64), 1), _ints((64, 16), 2)
    c0 = np.random.default_rng(3).integers(-2**31, 2**31, (32, 16)).astype(np.int32)
    c0[0, 0] = 2**31 - 1                       # wraps
    c = np.zeros_like(c0)
    _sim_llvm(accumulate, [a, b, c0, c], (2, 1, 1), (64, 1, 1))
    np.testing.assert_array_equal(c, _wrap(c0.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)))
    a, bt = _ints((32, 64), 4), _ints((16, 64), 5)
    c = np.zeros((32, 16), np.int32)
    _sim_llvm(shared_warp_tiles, [a, bt, c], (1, 1, 1), (64, 1, 1))
    np.testing.assert_array_equal(c, 7 + a.astype(np.int64) @ bt.T.astype(np.int64))
    at, b = _ints((32, 16), 6), _ints((32, 8), 7)
    c1 = np.zeros(128, np.int32)
    _sim_llvm(shared_k_by_n, [at, b, c1], (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(c1.reshape(16, 8), at.T.astype(np.int64) @ b.astype(np.int64))
    args, want = _dequant_case(21)
    _sim_llvm(dequant_store, args, (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(args[-1], want)
    with pytest.raises(kaio.CompileError, match="m16n8k32"):
        accumulate.emit("llvm", "gfx90a")


def _mfma_i8_hw(a, b, c):
    """v_mfma_i32_16x16x32_i8 for 64 lanes, 8 bytes of A and B and 4 i32 of C per lane: A's
    (i, k) in lane i + 16 * (k // 8), byte k % 8; B's (k, j) in lane j + 16 * (k // 8), byte
    k % 8; C/D's (i, j) in lane j + 16 * (i // 4), item i % 4."""
    A = np.array([[a[i + 16 * (k // 8), k % 8] for k in range(32)] for i in range(16)])
    B = np.array([[b[j + 16 * (k // 8), k % 8] for j in range(16)] for k in range(32)])
    C = np.array([[c[j + 16 * (i // 4), i % 4] for j in range(16)] for i in range(16)])
    D = C + A @ B
    return np.array([[D[4 * (ln // 16) + i, ln % 16] for i in range(4)] for ln in range(64)])


@pytest.mark.parametrize("tn", [1, 2, 3])
def test_mfma_int8_lane_mapping_reconstructs_the_product(tn):
    ta, tb, tc = (frag_type(r, "m16n8k32", d, s) for r, d, s in
                  (("a", kaio.i8, (2, 2)), ("b", kaio.i8, (2, tn)), ("acc", kaio.i32, (2, tn))))
    g = np.random.default_rng(41 + tn)
    A, B, C = (g.integers(-128, 128, t.dims).astype(np.float64) for t in (ta, tb, tc))
    a, b, c = (_distribute("mfma16", t, x) for t, x in ((ta, A), (tb, B), (tc, C)))
    for pa, pb, pc in M.mma_plan("mfma16", ta, tb, tc):
        c[:, pc * 4:pc * 4 + 4] = _mfma_i8_hw(a[:, pa * 8:pa * 8 + 8], b[:, pb * 8:pb * 8 + 8],
                                              c[:, pc * 4:pc * 4 + 4])
    np.testing.assert_array_equal(_gather("mfma16", tc, c), C + A @ B)


def test_gfx942_int8_code_objects_build_and_validate():
    from test_mma_int8 import accumulate, dequant_store, shared_k_by_n, shared_warp_tiles
    for k in (accumulate, dequant_store, shared_warp_tiles, shared_k_by_n):
        head = k.emit("report", "gfx942").splitlines()[0]
        assert "[gfx942] ok:" in head, head
        assert "v_mfma_i32_16x16x32_i8" in k.emit("asm", "gfx942")


# --- 4. on the GPU: the LLVM NVIDIA path against the reference ----------------------------------
@pytest.fixture
def llvm_cuda(monkeypatch):
    """The cuda backend with KAIO_CUDA_CODEGEN=llvm (the conftest reloads the settings)."""
    from kaio import backends as be
    monkeypatch.setenv("KAIO_CUDA_CODEGEN", "llvm")
    previous = be._current
    kaio.set_backend("cuda")
    yield
    be._current = previous


def _on_reference(k, grid, block, args):
    be = ReferenceBackend(warp_size=32)
    be.launch(be.compile(k.specialize_ir({})), grid, block, args)


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("key", sorted(WARP_TILE))
def test_gpu_llvm_warp_tiles_match_the_reference(llvm_cuda, key):
    name, n = key
    _, npdt = DTYPES[name]
    g = np.random.default_rng(31)
    a = g.standard_normal((64, 96)).astype(np.float32).astype(npdt)
    b = g.standard_normal((96, 4 * n)).astype(np.float32).astype(npdt)
    c, ref = np.zeros((64, 4 * n), np.float32), np.zeros((64, 4 * n), np.float32)
    WARP_TILE[key][(2, 2), 64](a, b, c)
    _on_reference(WARP_TILE[key], (2, 2, 1), (64, 1, 1), [a, b, ref])
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = 96 * 2.0**-24 * (np.abs(a64) @ np.abs(b64))
    assert (np.abs(c - a64 @ b64) <= 2 * bound + 1e-30).all()
    assert (np.abs(c - ref) <= 3 * bound + 1e-30).all()


@pytest.mark.gpu
@pytest.mark.cuda
def test_gpu_llvm_copy_tile_and_scaled_edge_store(llvm_cuda):
    a, bt, c0, want, grid = _staged_case(seed=7, m=72, n=52, k=72)
    c = c0.copy()
    staged_edge[grid[:2], 32](a, bt, c, 0.5, -2.0)
    np.testing.assert_array_equal(c, want)          # integers: exact on any matrix unit


@pytest.mark.gpu
@pytest.mark.cuda
def test_gpu_llvm_int8_fragments_wrap_and_dequantize(llvm_cuda):
    from test_mma_int8 import _dequant_case, _ints, _wrap, accumulate, dequant_store
    a, b = _ints((64, 128), 11), _ints((128, 32), 12)
    c0 = np.random.default_rng(13).integers(-2**31, 2**31, (64, 32)).astype(np.int32)
    c = np.zeros_like(c0)
    accumulate[4, 64](a, b, c0, c)
    np.testing.assert_array_equal(c, _wrap(c0.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)))
    args, want = _dequant_case(22)
    dequant_store[1, 32](*args)
    np.testing.assert_array_equal(args[-1], want)
