"""W8A8 with the row quantization inside the matmul (kaio.kernels.ml.quant_project), and the
quantized attention's projection and timing pipeline built on it: bit for bit the two launches
(quantize_rows, then the W8A8 matmul) on the reference backend at 32- and 64-lane warps with the
sanitizer, in the PTX simulator, through ptxas, refused where its shared memory does not fit
(the callers keep the two launches), and on the GPU at the benchmark shape."""

import numpy as np
import pytest
from test_mma import _sim
from test_ptx import ptxas

import kaio
from kaio import backends as be
from kaio.backends.reference.backend import ReferenceBackend
from kaio.config import settings
from kaio.kernels.ml import attention, quant, quant_project


def _inputs(m, k, n, seed=0):
    g = np.random.default_rng(seed)
    x = g.normal(0, 1, (m, k)).astype(np.float32)
    x[min(3, m - 1)] = 0.0                          # a zero row: scale 1, all zeros
    b = g.integers(-127, 128, (k, n)).astype(np.int8)
    sb = g.uniform(0.001, 0.02, n).astype(np.float32)
    return x, b, sb


def _two_launches(x, b, sb):
    """quantize_rows then int8_matmul on the reference backend (what the kernel replaces)."""
    xq, sx = quant.quantize_rows(x)
    return quant.int8_matmul(xq, b, sx, sb)


@pytest.mark.parametrize("warp_size", [32, 64])
@pytest.mark.parametrize("m,k,n,tile", [(33, 37, 20, "64x64"), (65, 136, 40, "64x64"),
                                        *[(70, 96, 136, t) for t in quant_project.TILES]])
def test_bit_for_bit_the_two_launches(reference, warp_size, m, k, n, tile):
    """Ragged M, N (edge tiles), K no multiple of the 32-deep slices or of the 8 threads of a
    row (zero-padded panels), a zero row; every tiling at 70 x 136."""
    x, b, sb = _inputs(m, k, n, seed=k)
    c = np.full((m, n), np.nan, np.float32)
    rb = ReferenceBackend(warp_size=warp_size, sanitize=True)
    grid, block = quant_project.launch_config(m, n, warp_size, tile)
    rb.launch(rb.compile(quant_project.kernel(k, warp_size, tile).specialize_ir({})), (*grid, 1),
              (*block, 1), [x, b, sb, quant_project.bits(c)])
    np.testing.assert_array_equal(c, _two_launches(x, b, sb))


def test_launch_and_the_bits_view_of_device_arrays(reference):
    x, b, sb = _inputs(40, 64, 72, seed=5)
    c = kaio.device_array((40, 72), np.float32)
    quant_project.launch(40, 72, 64)(kaio.to_device(x), kaio.to_device(b), kaio.to_device(sb),
                                     quant_project.bits(c))
    np.testing.assert_array_equal(c.to_host(), _two_launches(x, b, sb))


def test_long_rows_take_the_two_launches(reference):
    """Panels past MAX_SHARED (K = 2048: 64 x 2064 + 2048 x 80 bytes) are not offered."""
    assert quant_project.shared_bytes(512) == 64 * 528 + 512 * 80
    assert quant_project.fits(512) and not quant_project.fits(2048)
    assert quant_project.launch(64, 64, 2048) is None


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    """K = 512, eight 32 x 16 warp tiles: 16 k32 slices x (2 x 2) instruction tiles of mma,
    the weight panel by cp.async, three xor shuffles per pass of 32 rows, 64 of the row's
    values per thread and pass loaded once (2 passes; the quotient pass reuses them), four
    neighbouring columns a 16-byte load (with the scalar form for an unaligned x), the output
    as 16 i32 stores per thread."""
    ptx = quant_project.kernel(512, 32).emit("ptx", arch)
    assert ptx.count("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == 16 * 4
    assert "cp.async.cg.shared.global" in ptx and "ldmatrix" in ptx
    assert ptx.count("shfl.sync.bfly") == 3 * 2
    assert ptx.count("ld.global.nc.v4.f32") == 2 * 16           # x: 4 columns a load
    assert ptx.count("ld.global.nc.f32") == 2 * 64 + 4          # x unaligned, sb per n8 pair
    assert ptx.count("st.global") == 16
    ptxas(ptx, arch)


@pytest.mark.parametrize("tile", [t for t in quant_project.TILES if t != quant_project.DEFAULT_TILE])
def test_wide_tilings_assemble(tile):
    """The wide tilings at the attention's K = 512: one pass of 32 rows (64 values a thread),
    the whole 32 x BN warp row's k32 slices (BN / 8 instruction tiles per slice)."""
    bm, bn, wm, wn = quant_project.TILES[tile]
    ptx = quant_project.kernel(512, 32, tile).emit("ptx", "sm_90")
    assert ptx.count("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == 16 * (wm // 16) * (wn // 8)
    assert ptx.count("shfl.sync.bfly") == 3 * max(1, bm // 32)
    assert quant_project.fits(512, tile)
    ptxas(ptx, "sm_90")


@pytest.mark.parametrize("k,tile,n", [(64, "64x64", 24), (72, "64x64", 24), (64, "32x128", 136)])
def test_ptx_exact_in_the_simulator(reference, k, tile, n):
    """K = 64: x's rows by 16-byte loads; K = 72: element loads, a zero-padded slice; the
    library's wide tiling with an edge column block."""
    x, b, sb = _inputs(20, k, n, seed=2)
    c = np.zeros((20, n), np.float32)
    grid, block = quant_project.launch_config(20, n, 32, tile)
    _sim(quant_project.kernel(k, 32, tile), [x, b, sb, quant_project.bits(c)], (*grid, 1),
         (*block, 1))
    np.testing.assert_array_equal(c, _two_launches(x, b, sb))


def test_amd_code_object_builds():
    """gfx942 (int8 MFMA) at K = 32; at K = 512 the panels pass its 64 KiB of LDS (the library
    then keeps the two launches), and gfx90a has no int8 fragments at all."""
    import re
    head = quant_project.kernel(32, 64).emit("report", "gfx942").splitlines()[0]
    assert "[gfx942] ok:" in head and re.search(r"spills\(s/v\)=0/0", head), head
    with pytest.raises(kaio.CompileError, match="64 KiB"):
        quant_project.kernel(512, 64).emit("report", "gfx942")


def _attn_inputs(s=33, dm=24, d=8, seed=3):
    g = np.random.default_rng(seed)
    x = g.normal(0, 1, (s, dm)).astype(np.float32)
    w = [g.integers(-127, 128, (dm, d), dtype=np.int8) for _ in range(3)]
    sc = [np.full(d, 0.01, np.float32) * g.uniform(0.5, 1.5, d).astype(np.float32) for _ in range(3)]
    return x, w, sc


def test_projection_is_one_launch_and_the_same_as_two(reference, monkeypatch):
    x, w, sc = _attn_inputs()
    one = np.full((33, 24), np.nan, np.float32)
    p1 = attention.projection(x, *w, *sc, one)
    assert p1.launches == 1
    p1()
    monkeypatch.setattr(quant_project, "launch", lambda m, n, k, tile=None: None)   # e.g. the LLVM path
    two = np.full((33, 24), np.nan, np.float32)
    p2 = attention.projection(x, *w, *sc, two)
    assert p2.launches == 2
    p2()
    np.testing.assert_array_equal(one, two)


def test_device_pipeline_replays_a_graph(reference):
    """On device arrays the pipeline's launches (the quantizing projection and the fused
    attention: two at S = 33, whose 33 keys are one chunk) are captured once; each call
    replays them and reads what the arrays hold then."""
    x, w, sc = _attn_inputs()
    dev = [kaio.to_device(a) for a in (x, *w, *sc)]
    launch = attention.device_pipeline(*dev, causal=True)
    if settings().checked:          # KAIO_CHECKED=1: checked launches are not captured
        assert launch.graph is None
    else:
        assert launch.graph is not None and launch.launches == launch.graph.launches == 2
    launch()
    want = attention.quantized_attention(x, *w, *sc, causal=True)
    np.testing.assert_array_equal(launch.output.to_host(), want)
    x2 = (x[::-1] * 2).copy()
    dev[0].copy_from_host(x2)
    launch()
    np.testing.assert_array_equal(launch.output.to_host(),
                                  attention.quantized_attention(x2, *w, *sc, causal=True))
    np.testing.assert_allclose(want, attention.quantized_attention_ref(x, *w, *sc, causal=True),
                               rtol=1e-4, atol=1e-5)
    plain = attention.device_pipeline(*dev, causal=True, graph=False)
    assert plain.graph is None
    plain()
    np.testing.assert_array_equal(plain.output.to_host(), launch.output.to_host())


def test_the_breakdown_script_times_the_new_pipeline(reference, capsys):
    """scripts/attention_breakdown.py (the device step attn-breakdown) runs on the reference
    backend at the small size and names the quantizing projection and both whole-pipeline
    forms."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "attention_breakdown.py"
    spec = importlib.util.spec_from_file_location("attention_breakdown", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--backend", "reference", "--small"]) == 0
    out = capsys.readouterr().out
    assert "| quantizing W8A8 projection [32, 48]" in out
    assert "whole pipeline, 2 launches" in out and "graph replay" in out


@pytest.mark.gpu
def test_on_gpu_at_the_attention_shape():
    """1024 x 512 f32 rows against the [512, 384] concatenated weights on the device: bit for
    bit the two launches there."""
    from kaio.showcase import pick_backend
    previous = be._current
    kaio.set_backend(pick_backend(None))
    try:
        x, b, sb = _inputs(1024, 512, 384, seed=9)
        launch = quant_project.launch(1024, 384, 512)
        if launch is None:      # the LLVM nvptx path: 73 KiB of shared memory past its 48 KiB
            pytest.skip("the quantizing projection needs kaio's PTX path (dynamic shared memory)")
        c = kaio.device_array((1024, 384), np.float32)
        launch(kaio.to_device(x), kaio.to_device(b), kaio.to_device(sb), quant_project.bits(c))
        np.testing.assert_array_equal(c.to_host(), _two_launches(x, b, sb))
    finally:
        be._current = previous


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_graph_replayed_attention_pipeline_on_gpu(causal):
    """The timing pipeline at the benchmark shape (S = 1024, Dm = 512, D = 128) replayed from
    its graph: what the host path computes, bit for bit, after the inputs change too."""
    from kaio.kernels import REGISTRY
    from kaio.showcase import pick_backend
    previous = be._current
    kaio.set_backend(pick_backend(None))
    try:
        case = REGISTRY["ml/quantized_attention"]
        inp = case.make_inputs(case.default_size, 0)
        names = ("x", "wq", "wk", "wv", "sq", "sk", "sv")
        dev = [kaio.to_device(inp[n]) for n in names]
        launch = attention.device_pipeline(*dev, causal=causal)
        assert launch.graph is not None
        for x in (inp["x"], (inp["x"][::-1] * 1.5).copy()):
            dev[0].copy_from_host(x)
            launch()
            kaio.synchronize()
            host = attention.quantized_attention(x, *(inp[n] for n in names[1:]), causal=causal)
            np.testing.assert_array_equal(launch.output.to_host(), host)
        # the registry's tolerance is stated for its inputs (the second set scales the scores
        # by 2.25: the f32 exp's absolute error grows with them)
        ok, worst = case.check({"o": attention.quantized_attention(*(inp[n] for n in names),
                                                                    causal=causal)},
                               {"o": attention.quantized_attention_ref(*(inp[n] for n in names),
                                                                       causal=causal)})
        assert ok, worst
    finally:
        be._current = previous
