"""Packed f16x2 / bf16x2 arithmetic (kaio.backends.half_pairs, kaio.backends.ptx_packed): pairs of
identical 16-bit float ops on neighbouring lanes of a 16-byte group become one packed PTX
instruction. Checked: the PTX holds the packed instructions (and ptxas sm_80/sm_90 take it);
run by tests/ptx_sim.py on aligned and misaligned views (the scalar fallback), the results are
bit-identical to the same kernel emitted without pairing and to the reference backend, with
inf, NaN, subnormals and signed zeros among the inputs."""


import re

import llvm_host
import numpy as np
import pytest
from ptx_sim import Machine
from reference_kit import run_ref_with
from test_ptx import ptxas

import kaio
from kaio import bf16, f16, f32
from kaio import dtypes as dt
from kaio.backends import half_pairs
from kaio.backends.ptx import emit_ptx
from kaio.backends.targets import emit
from kaio.passes import full_tiles, target_pipeline
from kaio.regions import blocked

BF16 = dt.bf16.storage_np
NP = {"f16": np.float16, "bf16": BF16}
T = {"f16": f16, "bf16": bf16}


def _kernels(name):
    H = T[name]

    @kaio.kernel
    def axpy(a: H, x: kaio.In[H], y: kaio.Region[H, blocked(8)]):
        for i in y.owned():
            y[i] = a * x[i] + y[i]

    @kaio.kernel
    def signs(x: kaio.In[H], y: kaio.Region[H, blocked(8)]):
        for i in y.owned():
            a, b = x[i], y[i]
            y[i] = max(a, b) - abs(-b) * min(a, H(0.5))

    @kaio.kernel
    def fused(x: kaio.In[H], y: kaio.Region[H, blocked(8)]):
        for i in y.owned():
            a = x[i]
            y[i] = kaio.math.fma(a, y[i], a)

    @kaio.kernel
    def narrow(x: kaio.In[H], y: kaio.Out[H, blocked(8)]):
        for i in y.owned():
            y[i] = H(f32(x[i]) * 0.3)

    return {"axpy": axpy, "signs": signs, "fused": fused, "narrow": narrow}


KERNELS = {n: _kernels(n) for n in NP}
#: (kernel, name) -> packed instructions expected per 8-element group, by arch
EXPECT = {
    "axpy": {"f16": ["mul.rn.f16x2", "add.rn.f16x2"], "bf16": ["fma.rn.bf16x2"] * 2},
    "signs": {"f16": ["max.f16x2", "xor.b32", "and.b32", "min.f16x2", "mul.rn.f16x2",
                      "sub.rn.f16x2"],
              "bf16": ["max.bf16x2", "xor.b32", "and.b32", "min.bf16x2", "fma.rn.bf16x2",
                       "fma.rn.bf16x2"]},
    "fused": {"f16": ["fma.rn.f16x2"], "bf16": ["fma.rn.bf16x2"]},
    "narrow": {"f16": ["cvt.rn.f16x2.f32"], "bf16": ["cvt.rn.bf16x2.f32"]},
}


def _lowered(k):
    return target_pipeline(k.specialize_ir(), 32)


def _ptx(k, arch, paired=True, monkeypatch=None):
    if not paired:
        monkeypatch.setattr(half_pairs, "plan_kernel", lambda kernel, groups: ({}, set()))
    try:
        return emit_ptx(_lowered(k), arch)
    finally:
        if not paired:
            monkeypatch.undo()


def _ops(ptx):
    return [ln.split()[0] for ln in (s.strip() for s in ptx.splitlines())
            if ln and not ln.startswith(("//", ".", "@", "$", "{", "}", "mov"))]


@pytest.mark.parametrize("name", NP)
@pytest.mark.parametrize("kname", EXPECT)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_has_packed_instructions_and_assembles(name, kname, arch):
    ptx, _ = _ptx(KERNELS[name][kname], arch)
    ops = _ops(ptx)
    want = list(EXPECT[kname][name])
    if name == "bf16" and arch == "sm_90":      # sm_90 has add/sub/mul.rn.bf16x2
        want = {"axpy": ["mul.rn.bf16x2", "add.rn.bf16x2"],
                "signs": [w for w in want if w != "fma.rn.bf16x2"] + ["mul.rn.bf16x2",
                                                                     "sub.rn.bf16x2"]
                }.get(kname, want)
    for w in set(want):     # four words per group, one packed instruction each
        assert ops.count(w) == 4 * want.count(w), (w, ops.count(w))
    # no scalar 16-bit arithmetic or rounding is left in the full tile (the tail loop keeps it)
    packed = sum(ops.count(w) for w in set(want))
    assert packed == 4 * len(want)
    ptxas(ptx, arch)


def _data(name, n, rng):
    x = rng.standard_normal(n).astype(np.float32) * 4
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 6e-8, -3e-5, 65504.0, 1e-40, 3e38],
                       np.float32)
    x[:: max(1, n // len(special))][:len(special)] = special[:len(x[:: max(1, n // len(special))])]
    with np.errstate(over="ignore"):       # 3e38 rounds to inf in f16
        return x.astype(NP[name])


def _run(ptx_abi, args, n, misalign):
    ptx, abi = ptx_abi
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    grid, block = blocked(8).launch_shape((n,))
    Machine(ptx).launch(args, abi, (grid[0], 1, 1), (block[0], 1, 1), 0, misalign=misalign)
    return [a for a in args if isinstance(a, np.ndarray)]


def _same(a, b):
    """Bit-identical, except that any NaN matches any NaN (payloads are not specified)."""
    ua, ub = a.view(np.uint16), b.view(np.uint16)
    nan = np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32))
    bad = np.nonzero((ua != ub) & ~nan)[0]
    assert bad.size == 0, (bad[:5], a[bad[:5]], b[bad[:5]])


@pytest.mark.parametrize("name", NP)
@pytest.mark.parametrize("kname", EXPECT)
@pytest.mark.parametrize("misalign", [0, 1])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_packed_results_are_bit_identical(name, kname, misalign, arch, monkeypatch):
    rng = np.random.default_rng(7)
    n = 56                       # six full tiles and a partial one (the scalar tail)
    x, y = _data(name, n, rng), _data(name, n, rng)[::-1].copy()
    k = KERNELS[name][kname]
    args = ([np.array(0.75, NP[name])[()]] if kname == "axpy" else []) + [x, y]
    packed = _run(_ptx(k, arch), args, n, misalign)
    scalar = _run(_ptx(k, arch, paired=False, monkeypatch=monkeypatch), args, n, misalign)
    assert "x2" in _ptx(k, arch)[0]
    for p, s in zip(packed, scalar):
        assert p.tobytes() == s.tobytes()     # the scalar emission's bits, NaNs included
    if misalign == 0:
        ref = run_ref_with(full_tiles, k, args, *[v[0] for v in blocked(8).launch_shape((n,))])
        for p, r in zip(packed, ref):
            _same(p, r)


def test_a_value_used_before_its_partner_is_emitted_scalar():
    """Lane 0's product is read (widened for z) before lane 1's product exists: the pair would
    emit lane 0 late, so the multiplies stay scalar; the results are still right."""
    @kaio.kernel
    def widen(x: kaio.In[f16], y: kaio.Out[f16, blocked(8)], z: kaio.Out[f32, blocked(8)]):
        for i in y.owned():
            a = x[i] * f16(2.0)
            z[i] = f32(a)
            y[i] = a
    ptx, _ = emit_ptx(_lowered(widen), "sm_90")
    assert "mul.rn.f16x2" not in ptx and ptx.count("mul.rn.f16 ") == 9   # 8 in a tile, 1 in the tail
    n = 24
    x = np.linspace(-3, 3, n).astype(np.float16)
    y, z = np.zeros(n, np.float16), np.zeros(n, np.float32)
    out = _run((ptx, _), [x, y, z], n, 0)
    assert out[1].tobytes() == (x * np.float16(2)).tobytes()
    assert out[2].tobytes() == (x * np.float16(2)).astype(np.float32).tobytes()


# --- the LLVM path: a 16-bit store group of casts from f32 narrows as one <8 x float> -------
@pytest.mark.parametrize("name, vty", [("f16", "half"), ("bf16", "bfloat")])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_llvm_narrows_a_store_group_in_one_vector_fptrunc(name, vty, arch):
    k = KERNELS[name]["narrow"]
    ir = k.specialize_ir()
    text = emit(ir, "llvm", f"nvptx64-{arch}", k.options)
    assert len(re.findall(rf"fptrunc <8 x float> %\w+ to <8 x {vty}>", text)) == 1
    ptx = emit(ir, "ptx", f"nvptx64-{arch}", k.options)
    assert len(re.findall(rf"cvt\.rn\.{name}x2\.f32", ptx)) >= 4   # (LLVM pairs some of the fallback)
    ptxas(ptx, arch)


@pytest.mark.parametrize("name", NP)
def test_llvm_vector_narrowing_runs_bit_identical_on_host(name):
    k = KERNELS[name]["narrow"]
    rng = np.random.default_rng(5)
    n = 56
    x = _data(name, n, rng)
    grid, block = blocked(8).launch_shape((n,))
    y = np.zeros(n, NP[name])
    llvm_host.run_on_host(k.specialize_ir(), [x, y], (grid[0], 1, 1), (block[0], 1, 1))
    want = (x.astype(np.float32) * np.float32(0.3)).astype(NP[name])
    _same(y, want)


# --- the library's 16-bit kernels: their stores narrow in pairs ---------------------------------
def _library():
    from kaio.kernels.ml import elementwise as ew
    return {"gelu_exact": ew.gelu_exact_kernel, "gelu_tanh": ew.gelu_tanh_kernel,
            "silu_gate": ew.silu_gate_kernel}


@pytest.mark.parametrize("name", NP)
@pytest.mark.parametrize("op", ["gelu_exact", "gelu_tanh", "silu_gate"])
def test_library_elementwise_kernels_narrow_in_pairs(name, op):
    """Sixteen f32 results per thread (kaio's coarsening of 2-byte buffers): eight cvt.rn.x2 in
    the full tile; the only scalar rounding left is the one-element tail's."""
    k = _library()[op](name)
    ptx, _ = emit_ptx(target_pipeline(k.specialize_ir(coarsen=True), 32), "sm_90",
                      fast_math=k.fast_math)
    assert ptx.count(f"cvt.rn.{name}x2.f32") == 8
    assert ptx.count(f"cvt.rn.{name}.f32") == 1
    ptxas(ptx, "sm_90")


@pytest.mark.parametrize("name", ["f32", *NP])
def test_library_gelu_tanh_exp_form_per_result_dtype(name):
    """16-bit results: the hardware exp2 of the unreduced argument (its rounding error < 2^-17
    relative, inside the result's half ulp), so no range-reduction clamps; f32 keeps kaio's
    range-reduced fast exp. The f32 kernel states four elements per thread (16-byte accesses)."""
    from kaio.kernels.ml import elementwise as ew
    k = ew.gelu_tanh_kernel(name)
    ptx, _ = emit_ptx(target_pipeline(k.specialize_ir(coarsen=True), 32), "sm_90",
                      fast_math=k.fast_math)
    reduced = re.search(r"min\.f32|max\.f32", ptx) is not None
    assert "ex2.approx" in ptx
    assert reduced == (name == "f32")
    if name == "f32":
        assert k.coarsening() is None and k.specialize_ir().params[-1].partition == blocked(4)
    else:
        assert k.coarsening() == 16


@pytest.mark.parametrize("name", NP)
def test_library_gelu_tanh_16_bit_within_half_ulp_of_float64(name):
    """Over the whole useful range (|x| up to 60: e^-2u from far below 2^-126 to overflow), the
    16-bit tanh-GELU rounds the float64 value correctly or to a neighbour at a tie's distance."""
    from kaio.kernels.ml import elementwise as ew
    x = np.concatenate([np.linspace(-60, 60, 2001), np.linspace(-4, 4, 2001)]).astype(NP[name])
    y = ew.gelu(x, approximate="tanh").astype(np.float64)
    v = x.astype(np.float64)        # the reference's 1 + tanh(u) cancels to 0 below x ~ -9
    with np.errstate(over="ignore"):    # e^-2u overflows to inf for x < -9: want = -0, right
        want = v / (1.0 + np.exp(-2.0 * ew.SQRT_2_OVER_PI * (v + 0.044715 * v ** 3)))
    ulp = np.abs(np.spacing(np.abs(want).astype(NP[name]))).astype(np.float64)
    assert (np.abs(y - want) <= 0.5 * ulp * 1.01 + 1e-30).all()


@pytest.mark.parametrize("name", NP)
def test_library_gelu_exact_stays_bitwise(name):
    """gelu_exact's conformance rule is bitwise: the coarsened PTX, run by ptx_sim, matches the
    reference backend bit for bit (aligned: packed roundings; misaligned: the fallback)."""
    k = _library()["gelu_exact"](name)
    ptx_abi = emit_ptx(target_pipeline(k.specialize_ir(coarsen=True), 32), "sm_90")
    n = 44
    x = (np.linspace(-6, 6, n).astype(np.float32)).astype(NP[name])
    ref = run_ref_with(full_tiles, k, [x, np.zeros(n, NP[name])], 1, n)[1]
    for misalign in (0, 1):
        y = np.zeros(n, NP[name])
        ptx, abi = ptx_abi
        args = [x.copy(), y]
        Machine(ptx).launch(args, abi, (1, 1, 1), (8, 1, 1), 0, misalign=misalign)
        assert args[1].tobytes() == ref.tobytes(), misalign


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("codegen", ["ptx", "llvm"])
@pytest.mark.parametrize("name", NP)
@pytest.mark.parametrize("kname", EXPECT)
def test_packed_kernels_on_cuda_match_the_reference(monkeypatch, codegen, name, kname):
    """On an NVIDIA GPU, with kaio's own launch (aligned arrays: the packed path): the same bits
    as the reference backend (any NaN for a NaN), both code generators."""
    from kaio import backends as be
    from kaio.backends.cuda import CudaBackend
    rng = np.random.default_rng(11)
    n = 4096 + 44
    x, y = _data(name, n, rng), _data(name, n, rng)[::-1].copy()
    k = KERNELS[name][kname]
    args = ([np.array(0.75, NP[name])[()]] if kname == "axpy" else []) + [x, y]

    def run():
        a = [v.copy() if isinstance(v, np.ndarray) else v for v in args]
        k(*a)
        return a[-1]
    previous = be._current
    kaio.set_backend("reference")
    try:
        want = run()
    finally:
        be._current = previous
    monkeypatch.setitem(be._instances, "cuda", CudaBackend(codegen=codegen))
    monkeypatch.setattr(be, "_current", "cuda")
    _same(run(), want)
