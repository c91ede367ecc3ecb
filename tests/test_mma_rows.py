"""Whole rows of accumulators: kaio.mma.row_max / row_sum (an m x 8 accumulator per row),
their broadcast by kaio.mma.apply, and kaio.mma.to_a (an f32 accumulator, or a 16-column slice
of it, as an f16/bf16 A fragment), on every target.

The test kernel is attention's shape without the exponential: ``S = A B``, ``P = S - rowmax(S)``
(the maximum broadcast along the rows), ``O = P V`` with P converted to an A in registers, and
``rowsum(P) + rowmax(S)``. Small integers make every value exact on every target (sums of
integers, f16/bf16 holding them exactly), so a misplaced lane or register shows as a wrong
number against numpy.
"""
import re

import numpy as np
import pytest
from test_mma import _sim
from test_mma_llvm import _sim_llvm
from test_ptx import ptxas

import kaio
from kaio import bf16, f16, f32, i32
from kaio.backends.reference import ReferenceBackend
from kaio.conformance.features.fragments import _minus, _plus  # the row broadcast's element fns


def _rows_kernel(n: int, dtype, sliced: bool):
    """Each warp a 32 x n score tile; P's first 16 * (n // 16) columns multiply V, in one
    to_a (``sliced`` False) or one 16-column to_a per k step."""
    kn = n // 16 * 16

    @kaio.kernel
    def rows(A: kaio.In[f16, 2], B: kaio.In[f16, 2], V: kaio.In[dtype, 2], O: kaio.Raw[f32, 2],
             M: kaio.Raw[f32, 2], L: kaio.Raw[f32, 2]):
        warp = kaio.thread_idx.x // kaio.warp_size
        row0 = (kaio.block_idx.x * (kaio.block_dim.x // kaio.warp_size) + warp) * 32
        s = kaio.mma.fill(f32, 0.0, m=32, n=n)
        s = kaio.mma.mma(kaio.mma.load_a(A, row0, 0, m=32), kaio.mma.load_b(B, 0, 0, n=n), s)
        mx = kaio.mma.row_max(s)
        p = kaio.mma.apply(_minus, s, row0, 0, mx)
        o = kaio.mma.fill(f32, 0.0, m=32, n=16)
        if sliced:
            for kk in kaio.static_range(kn // 16):
                pa = kaio.mma.to_a(p, dtype, col0=kk * 16, k=16)
                o = kaio.mma.mma(pa, kaio.mma.load_b(V, kk * 16, 0, n=16), o)
        else:
            o = kaio.mma.mma(kaio.mma.to_a(p, dtype, k=kn), kaio.mma.load_b(V, 0, 0, k=kn, n=16), o)
        kaio.mma.store(O, row0, 0, o)
        kaio.mma.store(M, row0, 0, mx)
        kaio.mma.store(L, row0, 0, kaio.mma.apply(_plus, kaio.mma.row_sum(p), row0, 0, mx))
    return rows


CASES = {(16, "f16", False), (24, "f16", False), (32, "f16", True), (32, "bf16", False)}
ROWS = {c: _rows_kernel(c[0], {"f16": f16, "bf16": bf16}[c[1]], c[2]) for c in CASES}


def _data(n, name, seed=0, warps=2):
    """A, B, V of small integers (|P| <= 128: exact in bf16 too) and the exact results."""
    g = np.random.default_rng(seed)
    rows = 32 * warps
    a = g.integers(-2, 3, (rows, 16)).astype(np.float16)
    b = g.integers(-2, 3, (16, n)).astype(np.float16)
    v32 = g.integers(-3, 4, (n // 16 * 16, 16)).astype(np.float32)
    v = v32.astype(np.float16 if name == "f16" else bf16.storage_np)
    s = a.astype(np.float32) @ b.astype(np.float32)
    mx = s.max(axis=1, keepdims=True)
    p = s - mx
    want = (p[:, :v32.shape[0]] @ v32, np.repeat(mx, 8, 1), np.repeat(p.sum(1, keepdims=True) + mx, 8, 1))
    outs = [np.zeros((rows, 16), np.float32), np.zeros((rows, 8), np.float32),
            np.zeros((rows, 8), np.float32)]
    return [a, b, v, *outs], want


def _check(args, want):
    for got, exp in zip(args[3:], want):
        np.testing.assert_array_equal(got, exp)


# --- reference backend: both warp widths -------------------------------------------------------
@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_and_to_a_on_every_warp_width(width, case):
    args, want = _data(case[0], case[1])
    be = ReferenceBackend(warp_size=width)
    be.launch(be.compile(ROWS[case].specialize_ir({})), (1, 1, 1), (2 * width, 1, 1), args)
    _check(args, want)


@kaio.func
def _by_column(x, r, c):
    """Row r: 1e8, 1, -1e8, 1, 0, ... (the sum depends on the order of the additions)."""
    v = f32(0.0)
    if c == 0:
        v = f32(1e8)
    elif c == 2:
        v = f32(-1e8)
    elif c % 2 == 1 and c < 4:
        v = f32(1.0)
    return v + f32(r)


@kaio.kernel
def summed(L: kaio.Raw[f32, 2]):
    acc = kaio.mma.apply(_by_column, kaio.mma.fill(f32, 0.0, n=16), 0, 0)
    kaio.mma.store(L, 0, 0, kaio.mma.row_sum(acc))


@pytest.mark.parametrize("width", [32, 64])
def test_reference_row_sum_adds_in_ascending_column_order(width):
    """((1e8 + 1) - 1e8) + 1 + 0 ... = 1 in f32 for row 0 (a pairwise sum gives 2 or 0)."""
    out = np.zeros((16, 8), np.float32)
    be = ReferenceBackend(warp_size=width)
    be.launch(be.compile(summed.specialize_ir({})), (1, 1, 1), (width, 1, 1), [out])
    want = np.zeros(16, np.float32)
    for r in range(16):
        row = (np.array([1e8, 1, -1e8, 1] + [0] * 12, np.float32) + np.float32(r)).astype(np.float32)
        t = row[0]
        for x in row[1:]:
            t = np.float32(t + x)
        want[r] = t
    np.testing.assert_array_equal(out, np.repeat(want[:, None], 8, 1))
    assert out[0, 0] == 1.0


# --- PTX: assembled, and executed in the simulator ---------------------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    for k in ROWS.values():
        ptxas(k.emit("ptx", arch), arch)


def test_ptx_converts_in_registers():
    """to_a is packing only on mma.sync's layout (cvt.rn.f16x2.f32, no shuffle); a row
    reduction is two butterfly shuffles per 8-row half of each m16 tile (2 x 2 x 2 per call)."""
    ptx = ROWS[32, "f16", True].emit("ptx", "sm_80")
    assert ptx.count("cvt.rn.f16x2.f32") == 2 * 2 * 4          # 2 m-tiles, 2 k16 slices, 4 words
    assert ptx.count("shfl.sync.bfly.b32") == 2 * 8 and "shfl.sync.idx" not in ptx


@pytest.mark.parametrize("case", [(24, "f16", False), (32, "f16", True), (32, "bf16", False)])
def test_ptx_runs_exactly(case):
    args, want = _data(case[0], case[1], seed=3)
    _sim(ROWS[case], args, (1, 1, 1), (64, 1, 1))
    _check(args, want)


# --- the lane moves against both schemes' layouts (tests/test_mma_llvm.py's model) -------------
def test_lane_moves_match_the_layouts():
    """What the LLVM emitter reads from where, checked against element_coords: to_a's source
    (nvvm: slot ``(a // 4) * 4 + (a // 2 % 2) * 2 + a % 2`` of the same lane; mfma16: lane ``16
    (r // 4) + c``, slot ``r % 4``), the broadcast's (nvvm: the same slot; mfma16: lane ``l &
    ~8``) and the row reductions' xor partners (the same rows at every slot)."""
    from test_mma_llvm import _coords

    from kaio.ir.types import frag_type
    acc2, acc1 = (frag_type("acc", "m16n8k16", kaio.f32, (1, n)) for n in (2, 1))
    a1 = frag_type("a", "m16n8k16", f16)
    for scheme, xors in (("nvvm", (1, 2)), ("mfma16", (1, 2, 4, 8))):
        (ra, ca, _), (rw, cw, vw), (rn, cn, _) = (_coords(scheme, t) for t in (a1, acc2, acc1))
        lanes = np.arange(ra.shape[0])
        for e in range(ra.shape[1]):
            if scheme == "nvvm":
                src, slot = lanes, (e // 4) * 4 + (e // 2 % 2) * 2 + e % 2
            else:
                src = 16 * ((lanes % 16) // 4) + 4 * (lanes // 16) + e
                slot = lanes % 4
            np.testing.assert_array_equal(rw[src, slot], ra[:, e])
            np.testing.assert_array_equal(cw[src, slot], ca[:, e])
        for e in range(rw.shape[1]):
            src = lanes if scheme == "nvvm" else lanes & ~8
            k = (e // 4 // 2) * 4 + e % 4 if scheme == "nvvm" else e % 4
            np.testing.assert_array_equal(rn[src, k], rw[:, e])
            np.testing.assert_array_equal(cn[src, k], cw[:, e] % 8)
            for x in xors:
                np.testing.assert_array_equal(rw[lanes ^ x, e], rw[:, e])
        # the lanes a lane exchanges with hold, between them, every column of its rows
        for lane in lanes:
            group = [lane ^ m for m in range(2 ** len(xors))]
            for e in range(rw.shape[1]):
                held = {int(cw[g, f]) for g in group for f in range(rw.shape[1])
                        if rw[g, f] == rw[lane, e] and vw[g, f]}
                assert held == set(range(16)), (scheme, lane, e)


# --- LLVM: nvptx64 executed, AMD code objects built --------------------------------------------
@pytest.mark.parametrize("case", [(24, "f16", False), (32, "f16", True)])
def test_nvvm_runs_exactly(case):
    args, want = _data(case[0], case[1], seed=4)
    _sim_llvm(ROWS[case], args, (1, 1, 1), (64, 1, 1))
    _check(args, want)


@pytest.mark.parametrize("cpu", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("case", [(24, "f16", False), (32, "f16", True)])
def test_amd_code_objects_build(cpu, case):
    """MFMA's accumulator is held transposed against A, so to_a and the broadcast of a lone
    n-tile move elements between lanes (ds_bpermute); the row reductions exchange over the 16
    lanes of a row group."""
    k = ROWS[case]
    head = k.emit("report", cpu).splitlines()[0]
    assert f"[{cpu}] ok:" in head and re.search(r"spills\(s/v\)=0/0", head), head
    asm = k.emit("asm", cpu)
    assert "v_mfma_f32_16x16x16" in asm and "ds_bpermute" in asm


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_rows_and_to_a_exact(case):
    """On the device (kaio's PTX or the NVVM path, whichever is configured)."""
    from kaio import backends as be
    from kaio.showcase import pick_backend
    previous = be._current
    kaio.set_backend(pick_backend(None))
    try:
        args, want = _data(case[0], case[1], seed=5, warps=4)
        ROWS[case][(2, 1, 1), (64, 1, 1)](*args)
        _check(args, want)
    finally:
        be._current = previous


def test_conformance_row_is_bitwise_on_both_warp_widths():
    from kaio.conformance.cases import all_cases, select
    from kaio.conformance.rules import BITWISE
    from kaio.conformance.runner import Options, run_suite
    (case,) = select(all_cases(), ["feature/fragment_rows"])
    assert case.rule is BITWISE
    rep = run_suite(Options(["reference", "reference-w64"], cases=[case], log=lambda m: None))
    assert rep.failing == [] and {c.status for c in rep.rows[0].cells.values()} <= {"identical"}


# --- what is refused, at the user's line ------------------------------------------------------
@kaio.kernel
def _to_a_int(A: kaio.In[kaio.i8, 2], C: kaio.Raw[f32, 2]):
    acc = kaio.mma.fill(i32, 0)
    kaio.mma.store(C, 0, 0, kaio.mma.mma(kaio.mma.to_a(acc, f16), kaio.mma.load_b(A, 0, 0), acc))


@kaio.kernel
def _to_a_unaligned(C: kaio.Raw[f32, 2]):
    acc = kaio.mma.fill(f32, 0.0, n=32)
    a = kaio.mma.to_a(acc, f16, col0=8, k=16)
    kaio.mma.store(C, 0, 0, kaio.mma.mma(a, kaio.mma.load_b(C, 0, 0), acc))


@kaio.kernel
def _to_a_odd(C: kaio.Raw[f32, 2]):
    acc = kaio.mma.fill(f32, 0.0, n=24)
    a = kaio.mma.to_a(acc, f16)
    kaio.mma.store(C, 0, 0, kaio.mma.mma(a, kaio.mma.load_b(C, 0, 0), acc))


@kaio.kernel
def _broadcast_other_rows(C: kaio.Raw[f32, 2]):
    acc = kaio.mma.fill(f32, 0.0, m=32, n=16)
    mx = kaio.mma.row_max(kaio.mma.fill(f32, 0.0, m=16, n=16))
    kaio.mma.store(C, 0, 0, kaio.mma.apply(_minus, acc, 0, 0, mx))


@kaio.kernel
def _row_max_int(C: kaio.Raw[i32, 2]):
    kaio.mma.store(C, 0, 0, kaio.mma.row_max(kaio.mma.fill(i32, 0)))


@pytest.mark.parametrize("k,line,match", [
    (_to_a_int, "kaio.mma.to_a(acc, f16)", "takes an f32 accumulator"),
    (_to_a_unaligned, "col0=8", "multiples of 16"),
    (_to_a_odd, "kaio.mma.to_a(acc, f16)", "multiples of 16"),
    (_broadcast_other_rows, "kaio.mma.apply(_minus", "combines accumulators of one type"),
    (_row_max_int, "kaio.mma.row_max", "takes an f32 accumulator"),
])
def test_misuse_is_refused_at_the_call(k, line, match):
    with pytest.raises(kaio.CompileError, match=match) as e:
        k.specialize_ir({})
    assert line in str(e.value)


def test_fragment_types_are_one_object_however_asked_for():
    """mma_apply's row broadcast is checked by identity (``arg is row_frag(acc)``): a 16-row
    accumulator's row fragment (tiles (1, 1), given) must be the very type a fill makes without
    ``tiles``, and a pickled or copied type the interned one (the conformance's cells for the
    fused attention and fragment_rows failed in its build workers on the H200 when they were
    distinct objects)."""
    from kaio.ir.types import broadcasts_over, frag_type, row_frag
    plain = frag_type("acc", "m16n8k16", f32)
    assert frag_type("acc", "m16n8k16", f32, (1, 1)) is plain
    assert frag_type("acc", "m16n8k16", f32, [1, 1]) is plain
    wide = frag_type("acc", "m16n8k16", f32, (1, 4))
    assert row_frag(wide) is plain and broadcasts_over(plain, wide)
    assert frag_type("acc", "m16n8k16", f32, [2, 4]) is frag_type("acc", "m16n8k16", f32, (2, 4))
    import copy
    import pickle
    assert pickle.loads(pickle.dumps(wide)) is wide and copy.deepcopy(plain) is plain


def test_an_ir_pickled_to_a_build_worker_still_verifies():
    """The conformance builds in worker processes: the kernel's IR arrives pickled, and the
    row broadcast of the fused attention and the fragment_rows feature must verify there."""
    import pickle

    from kaio.conformance.features import fragments
    from kaio.passes import verify
    ir = pickle.loads(pickle.dumps(fragments.fragment_rows.specialize_ir({})))
    verify.run(ir)
