"""The quantized matmuls on fragments (kaio.kernels.ml.quant_mma): W8A8 on i8 m16n8k32 with the
scaling epilogue, W4A16 on f16/bf16 m16n8k16 with the exact int4 weights and the group scales
applied by element access (kaio.mma.apply: acc += (x @ q) * s per group; a tiled GEMM over the
tilings quant_mma.W4_TILES: x by cp.async, the packed weights loaded to registers a K-step ahead
and unpacked once per K-step into shared tiles). Exact checks on the reference
backend at ragged shapes (every W4A16 tiling, both warp widths), small cases run exactly in the
PTX simulator (tests/ptx_sim.py) and assembled for sm_80/sm_90, and the library's choice of path
and tiling. The registry cases (tests/test_kernels_ml.py) check them against the numpy
references too, and on a GPU at their default sizes (gpu-marked there)."""

import functools
import re

import numpy as np
import pytest
from test_mma import _sim
from test_ptx import ptxas

import kaio
from kaio import semantics
from kaio.kernels import ml
from kaio.kernels.ml import quant, quant_mma


def _w8a8_inputs(m, k, n, seed=0):
    g = np.random.default_rng(seed)
    return (g.integers(-128, 128, (m, k)).astype(np.int8), g.integers(-128, 128, (k, n)).astype(np.int8),
            g.uniform(0.001, 0.02, m).astype(np.float32), g.uniform(0.001, 0.02, n).astype(np.float32))


def _w8a8_expected(a, b, sa, sb):
    """The kernel's arithmetic in numpy: exact i32 sum, then f32(acc) * sa * sb in f32."""
    acc = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    return acc.astype(np.float32) * sa[:, None] * sb[None, :]


def test_w8a8_fragments_exact_at_ragged_shapes(reference):
    a, b, sa, sb = _w8a8_inputs(37, 200, 45)
    np.testing.assert_array_equal(ml.int8_matmul(a, b, sa, sb), _w8a8_expected(a, b, sa, sb))
    a, b, sa, sb = _w8a8_inputs(130, 64, 129, seed=1)         # two blocks each way
    np.testing.assert_array_equal(ml.int8_matmul(a, b, sa, sb), _w8a8_expected(a, b, sa, sb))


def _w4a16_inputs(m, k, n, group, npdt, seed=0):
    g = np.random.default_rng(seed)
    w = g.integers(-8, 8, (k, n)).astype(np.int8)
    x = g.uniform(-1, 1, (m, k)).astype(np.float32).astype(npdt)
    scales = g.uniform(0.005, 0.02, (k // group, n)).astype(np.float32).astype(npdt)
    return x, quant.pack_int4(w), scales


def _w4a16_within_exact_bound(x, packed, scales, group, y, name):
    """|y - x @ (q * s)| within the f32 accumulation's K * 2**-24 * (|x| @ |w|) plus the output's
    one rounding (half an ulp of T)."""
    w = quant.unpack_int4(packed).astype(np.float64) * np.repeat(
        scales.astype(np.float32).astype(np.float64), group, axis=0)
    x64 = x.astype(np.float32).astype(np.float64)
    exact = x64 @ w
    ulp_half = 2.0 ** (-11 if name == "f16" else -8)
    bound = x.shape[1] * 2.0**-24 * (np.abs(x64) @ np.abs(w)) + ulp_half * np.abs(exact) * (1 + 2**-10)
    return (np.abs(y.astype(np.float32).astype(np.float64) - exact) <= bound + 1e-30).all()


#: (m, k, n, group, dtype): M and N no multiple of any tile; K 96 is no multiple of the 64-deep
#: K steps (a zero-filled tail) and group 32 is shorter than them (a scale per packed row);
#: K 256 with group 128 has one scale per K step
_RAGGED = [(70, 96, 136, 32, "f16"), (33, 256, 72, 128, "bf16")]


@functools.lru_cache(maxsize=None)
def _w4a16_tiled(tile, m, k, n, group, name, warp_size=32):
    """(inputs, y) of one tiling on the reference backend at ``warp_size``."""
    from kaio.backends.reference import ReferenceBackend
    npdt = np.float16 if name == "f16" else kaio.bf16.storage_np
    x, packed, scales = _w4a16_inputs(m, k, n, group, npdt, seed=k)
    y = np.zeros((m, n), npdt)
    be = ReferenceBackend(warp_size=warp_size)   # the sanitizer: the exchange test below
    kern = quant_mma.w4a16_kernel(name, warp_size, tile)
    grid, block = quant_mma.w4a16_launch_config(m, n, warp_size, tile)
    be.launch(be.compile(kern.specialize_ir({"group": group})), (*grid, 1), (*block, 1),
              [x, packed, scales, y, *_workspace(tile, m, n)])
    return (x, packed, scales), y


def _workspace(tile, m, n):
    """The split-K tilings' f32 workspace argument (none for the others)."""
    shape = quant_mma.w4a16_workspace(tile, m, n)
    return [] if shape is None else [np.full(shape, np.nan, np.float32)]   # all written first


#: the split-K tilings (two warps per warp tile, each half of every K step)
_SPLIT = [t for t in quant_mma.W4_TILES if len(quant_mma.W4_TILES[t]) > 6]


@pytest.mark.parametrize("tile", list(quant_mma.W4_TILES))
@pytest.mark.parametrize("case", _RAGGED, ids=lambda c: "x".join(map(str, c)))
def test_w4a16_every_tiling_is_exact_at_ragged_shapes(tile, case):
    """Within the exact-weight bound at edge shapes, and bit-identical to the default tiling:
    every tiling accumulates in one order (16-deep slices per group, folded in group order) but
    the split-K ones, which add two halves' sums (their order: :func:`_w4a16_split_model`)."""
    (x, packed, scales), y = _w4a16_tiled(tile, *case)
    assert _w4a16_within_exact_bound(x, packed, scales, case[3], y, case[4])
    if tile not in _SPLIT:
        np.testing.assert_array_equal(y, _w4a16_tiled(quant_mma.W4_DEFAULT, *case)[1])


#: split-K cases (m, k, n, group, dtype): edge tiles both ways; K = 64 and 32 one K step (32:
#: less than one, half 1's slices zero-filled); groups from one slice to four K steps, 128
#: against 384 = 1.5 loop iterations (a group ends mid-iteration: tested at run time)
_SPLIT_CASES = [(20, 64, 40, 64, "bf16"), (9, 32, 24, 16, "f16"), (70, 384, 136, 128, "f16"),
                (33, 512, 72, 256, "bf16"), (65, 192, 130, 32, "bf16")]


@pytest.mark.parametrize("tile", _SPLIT)
@pytest.mark.parametrize("case", _SPLIT_CASES, ids=lambda c: "x".join(map(str, c)))
def test_w4a16_split_k_tilings_are_exact_at_ragged_shapes(tile, case):
    """Each warp's half of the K steps folded where a group ends for its slices, the halves
    added through the workspace: within the exact-weight bound."""
    (x, packed, scales), y = _w4a16_tiled(tile, *case)
    assert _w4a16_within_exact_bound(x, packed, scales, case[3], y, case[4])


def test_w4a16_split_k_exchange_is_race_free_across_the_barrier():
    """The workspace exchange is ordered by the block's barrier (bar.sync; AMD: workgroup
    fences around s_barrier; the reference sanitizer fences a block's global accesses at its
    barriers): clean under the sanitizer with ownership checks, as the K loop's shared tiles
    (the static checker proves those too); the simulator runs it exactly
    (test_w4a16_split_k_ptx_is_exact_in_the_simulator)."""
    from kaio.backends.reference import ReferenceBackend
    tile, (m, k, n, group) = _SPLIT[0], (20, 128, 40, 32)
    x, packed, scales = _w4a16_inputs(m, k, n, group, np.float16)
    be = ReferenceBackend(sanitize=True, check_ownership=True)
    grid, block = quant_mma.w4a16_launch_config(m, n, 32, tile)
    y = np.zeros((m, n), np.float16)
    be.launch(be.compile(quant_mma.w4a16_kernel("f16", 32, tile).specialize_ir({"group": group})),
              (*grid, 1), (*block, 1), [x, packed, scales, y, *_workspace(tile, m, n)])
    assert _w4a16_within_exact_bound(x, packed, scales, group, y, "f16")


def test_w4a16_split_k_is_within_the_bound_on_64_lane_warps():
    case = (70, 96, 136, 32, "f16")
    (x, packed, scales), y = _w4a16_tiled(_SPLIT[0], *case, warp_size=64)
    assert _w4a16_within_exact_bound(x, packed, scales, 32, y, "f16")


def test_w4a16_split_k_takes_groups_its_halves_fold_alike(reference):
    """A group the halves would fold at different slices (48: the fold would depend on the
    warp) is refused by kaio (a fragment op under a warp-dependent branch), and the library
    takes the unsplit tiling for it; the launcher passes the workspace itself."""
    tile = _SPLIT[0]
    assert [g for g in (16, 32, 48, 64, 96, 128, 256) if quant_mma.w4a16_group_ok(g, tile)] == \
        [16, 32, 64, 128, 256]
    with pytest.raises(kaio.CompileError, match="depends on the thread"):
        quant_mma.w4a16_kernel("f16", 32, tile).emit("ptx", "sm_90", group=48)
    split = quant_mma.w4a16_kernel("f16", 32, tile)
    assert quant.w4a16_launch("f16", 256, 4096, 128, tile).kernel is split
    assert quant._w4a16_builds("f16", 32, tile, 128) and not quant._w4a16_builds("f16", 32, tile, 48)
    assert quant.w4a16_launch("f16", 256, 4096, 48).kernel is quant_mma.w4a16_kernel(
        "f16", 32, quant_mma.w4a16_tiles(256, 4096)[0])     # the default, not the split one
    x, packed, scales = _w4a16_inputs(70, 128, 136, 64, kaio.bf16.storage_np)
    y = np.zeros((70, 136), x.dtype)
    quant.w4a16_launch("bf16", 70, 136, 64, tile)(x, packed, scales, y, 64)
    assert _w4a16_within_exact_bound(x, packed, scales, 64, y, "bf16")


@pytest.mark.parametrize("tile", ["64x64x32_w32x32", "64x64x64_w32x32"])
def test_w4a16_group_neither_dividing_nor_spanning_the_k_step(tile):
    """Group 48 against K steps of 32 and 64: a group ends mid-step in some steps and not in
    others (tested at run time per slice); exact-weight bound, the same bits on both."""
    case = (20, 192, 40, 48, "f16")
    (x, packed, scales), y = _w4a16_tiled(tile, *case)
    assert _w4a16_within_exact_bound(x, packed, scales, 48, y, "f16")
    np.testing.assert_array_equal(y, _w4a16_tiled("64x64x32_w32x32", *case)[1])


def test_w4a16_groups_not_of_16_take_the_scalar_kernel(reference):
    """A group that splits an m16n8k16 K-slice cannot be folded per slice: the library uses
    the scalar kernel for it."""
    assert quant_mma.w4a16_group_ok(32) and not quant_mma.w4a16_group_ok(8)
    assert not quant._w4a16_builds("f16", 32, quant_mma.W4_DEFAULT, 8)
    x, packed, scales = _w4a16_inputs(5, 32, 24, 8, np.float16)
    y = ml.int4_matmul(x, packed, scales, group=8).astype(np.float64)
    np.testing.assert_allclose(y, quant.int4_matmul_ref(x, packed, scales, 8), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("tile", ["64x128x32_w32x32", "64x64x64_w32x32"])
def test_w4a16_is_the_same_on_64_lane_warps(tile):
    """64-lane warps (twice the threads, half the packed rows each): the same bits."""
    case = _RAGGED[0]
    np.testing.assert_array_equal(_w4a16_tiled(tile, *case, warp_size=64)[1],
                                  _w4a16_tiled(tile, *case)[1])


def test_w4a16_tilings_fill_the_gpu_first(reference):
    """At the bench shape the warp-group tilings come first (33.3-36.6 us against 51-55 on the H200),
    then the pipelined one making 128 blocks (132 SMs) with the largest tile,
    more rows first (fewer dequantizations per multiply), 64-deep K steps; split-K tilings
    right after their twins (slower on the H200 at the bench shape); small outputs take
    the most blocks, then tiles within 48 KiB of shared memory; the autotuner offers every
    tiling, the default first."""
    order = quant_mma.w4a16_tiles(256, 4096)
    group = [t for t in order if t.startswith("wg")]
    assert order[:4] == ["wg64x64x128_s4", "wg64x128x128_s4", "wg128x64x128_s4",  # warp groups
                         "wg64x128x128_s3"]                                          # first
    assert order[len(group):len(group) + 5] == [
        "s4_64x128x64_w64x32", "s4_64x128x64_w64x32_k2",    # 128 blocks
        "s4_128x64x64_w64x32", "s4_128x64x64_w64x32_k2",    # pipelined next
        "s3_64x128x64_w64x32"]
    assert sorted(order) == sorted(quant_mma.W4_TILES)
    assert quant_mma.w4a16_tiles(20, 136)[:2] == ["s4_64x64x64_w32x32", "64x64x64_w32x32"]
    assert quant_mma.w4a16_tiles(8, 16)[:3] == ["s4_64x64x64_w32x32", "s3_64x128x64_w64x32",
                                                "64x64x64_w32x32"]
    assert quant_mma.w4a16_tiles(4096, 4096)[:2] == ["wg64x64x128_s4",     # 4096 blocks
                                                     "wg64x128x128_s4"]
    key = [[256, 4096], 4096, "f16", 128]
    assert [c.name for c in quant._w4a16_tuner.configs(key)] == order


@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_w4a16_fragments_are_as_exact_as_f32_accumulation(name, reference):
    """The weights are exact (q, scaled in f32 after each group's x @ q): the error is the f32
    accumulation's (K * 2**-24 of sum |x w|) plus the output's one rounding; a weight q * s
    rounded once to T would be off by up to 2**-9 (bf16) / 2**-12 (f16) of a weight, far
    outside this bound."""
    npdt = np.float16 if name == "f16" else kaio.bf16.storage_np
    x, packed, scales = _w4a16_inputs(20, 96, 136, 32, npdt)
    y = ml.int4_matmul(x, packed, scales, group=32).astype(np.float32).astype(np.float64)
    w = quant.unpack_int4(packed).astype(np.float64) * np.repeat(scales.astype(np.float64), 32, axis=0)
    x64 = x.astype(np.float32).astype(np.float64)
    exact = x64 @ w
    ulp_half = 2.0 ** (-11 if name == "f16" else -8)
    bound = 96 * 2.0**-24 * (np.abs(x64) @ np.abs(w)) + ulp_half * np.abs(exact) * (1 + 2**-10)
    assert (np.abs(y - exact) <= bound + 1e-30).all()


def test_w4a16_f32_activations_use_the_scalar_kernel(reference):
    x, packed, scales = _w4a16_inputs(3, 8, 5, 4, np.float32)
    y = ml.int4_matmul(x, packed, scales, group=4)
    np.testing.assert_allclose(y, quant.int4_matmul_ref(x, packed, scales, 4), rtol=1e-6)


def test_fragment_paths_are_chosen_where_they_compile(reference):
    assert quant._compiles(quant_mma.w8a8_kernel(32))
    assert quant._compiles(quant_mma.w4a16_kernel("f16", 32), group=32)
    with pytest.raises(kaio.CompileError, match="m16n8k32"):      # -> the scalar W8A8 there
        quant_mma.w8a8_kernel(64).emit("llvm", "gfx90a")


@pytest.mark.parametrize("tile", list(quant_mma.W8_TILES))
def test_w8a8_tilings_are_exact_at_a_ragged_shape(reference, tile):
    """Both W8A8 tilings, launched as the library does, bit-exact against numpy's arithmetic."""
    a, b, sa, sb = _w8a8_inputs(70, 160, 136, seed=4)
    c = np.zeros((70, 136), np.float32)
    quant_mma.w8a8_kernel(32, tile)[quant_mma.w8a8_launch_config(70, 136, 32, tile)](
        a, b, sa.reshape(-1, 1), sb, c)
    np.testing.assert_array_equal(c, _w8a8_expected(a, b, sa, sb))


def test_w8a8_takes_the_small_tiling_where_the_large_leaves_sms_idle():
    assert quant_mma.w8a8_tile(2048, 2048) == quant_mma.W8_DEFAULT            # 256 blocks
    assert quant_mma.w8a8_tile(1024, 384) == "64x64x128_w32x32"            # 24 -> 96 blocks
    grid, _ = quant_mma.w8a8_launch_config(1024, 384, 32, "64x64x128_w32x32")
    assert grid == (6, 16)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    for tile in quant_mma.W8_TILES:
        ptx = quant_mma.w8a8_kernel(32, tile).emit("ptx", arch)
        assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in ptx and "ldmatrix" in ptx
        assert "cp.async.cg.shared.global" in ptx
        ptxas(ptx, arch)
    for name in ("f16", "bf16"):
        ptx = quant_mma.w4a16_kernel(name, 32).emit("ptx", arch, group=32)
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{name}.{name}.f32" in ptx
        ptxas(ptx, arch)


def test_w8a8_ptx_exact_in_the_simulator():
    a, b, sa, sb = _w8a8_inputs(20, 160, 24, seed=2)
    c = np.zeros((20, 24), np.float32)
    _sim(quant_mma.w8a8_kernel(32), [a, b, sa.reshape(-1, 1), sb, c], (1, 1, 1), (256, 1, 1))
    np.testing.assert_array_equal(c, _w8a8_expected(a, b, sa, sb))


def test_w4a16_ptx_is_exact_in_the_simulator(reference):
    """The default tiling (48 KiB static shared) at the registry's small size, bit for bit the
    m16n8k16 arithmetic (:func:`_w4a16_mma_model`), and within the exact-weight bound of the
    reference backend's result."""
    x, packed, scales = _w4a16_inputs(8, 64, 16, 16, np.float16, seed=3)
    want = _w4a16_mma_model(x, packed, scales, 16)
    y = np.zeros_like(want)
    grid, block = quant_mma.w4a16_launch_config(8, 16)
    _sim(quant_mma.w4a16_kernel("f16", 32), [x, packed, scales, y], (*grid, 1), (*block, 1),
         group=16)
    np.testing.assert_array_equal(y, want)
    assert _w4a16_within_exact_bound(x, packed, scales, 16, ml.int4_matmul(x, packed, scales, 16), "f16")


def _w4a16_mma_model(x, packed, scales, group, halves=1, bk=64):
    """The kernel's arithmetic as the simulator's m16n8k16 defines it (each instruction's sum
    exact, rounded once to f32): per group, tmp = x @ q over its 16-deep slices (q the exact
    int4 weights), then acc = fma(tmp, s, acc) in f32 (kaio.mma.apply's fold, one rounding);
    y = T(acc). The split-K tilings (``halves`` = 2): half h takes the slices of the h-th
    half of every ``bk``-deep K step into its own tmp and acc, folding where a multiple of the
    group lies between a slice's end and its next slice (the first group ending there), and
    y = T(acc_0 + acc_1)."""
    q = quant.unpack_int4(packed).astype(np.float64)
    x64 = x.astype(np.float64)
    accs = []
    for h in range(halves):
        acc = np.zeros((x.shape[0], q.shape[1]), np.float32)
        tmp = np.zeros_like(acc)
        starts = [k0 for k0 in range(0, x.shape[1], 16) if k0 % bk // (bk // halves) == h]
        for k0, nxt in zip(starts, [*starts[1:], x.shape[1] + bk]):
            tmp = (tmp + x64[:, k0:k0 + 16] @ q[k0:k0 + 16]).astype(np.float32)  # exact in f64
            if nxt // group * group >= k0 + 16:
                s = np.broadcast_to(scales[-(-(k0 + 16) // group) - 1].astype(np.float32), acc.shape)
                acc, tmp = semantics.fma(kaio.f32, tmp, s, acc), np.zeros_like(acc)
        accs.append(acc)
    return functools.reduce(np.add, accs).astype(x.dtype)


@pytest.mark.parametrize("tile", ["64x128x64_w32x32", "128x64x64_w32x32"])
def test_w4a16_loop_loads_the_weights_before_the_copy_and_the_mma(tile):
    """In each half of the K loop the packed bytes are loaded (one ld.global.nc.u8 per byte of
    the thread: NR rows x NC columns), then the x tile is copied (cp.async), then the mma, then
    the dequantized tiles stored: the loads' latency hides behind the copy and the mma."""
    RS, NR, NC = quant_mma.w4a16_geometry(tile)[1:]
    ptx = quant_mma.w4a16_kernel("f16", 32, tile).emit("ptx", "sm_90", group=128)
    body = ptx[ptx.index("bar.sync"):]                  # after the prologue's barrier
    half = body[:body.index("bar.sync", body.index("mma.sync"))]
    loads = [i for i in range(len(half)) if half.startswith("ld.global.nc.u8", i)]
    assert len(loads) == NR * NC
    assert loads[-1] < half.index("cp.async") < half.index("mma.sync") < half.rindex("st.shared.b16")


def test_w4a16_deep_tiling_ptx_is_exact_in_the_simulator():
    """A 64-deep tiling (two K steps: the prologue's and the loop's unpacking) with a group
    shorter than the K step (four folds per step, at fixed slices) and N no multiple of the
    tile."""
    tile = "64x64x64_w32x32"
    x, packed, scales = _w4a16_inputs(8, 128, 40, 16, np.float16, seed=4)
    want = _w4a16_mma_model(x, packed, scales, 16)
    y = np.zeros_like(want)
    grid, block = quant_mma.w4a16_launch_config(8, 40, 32, tile)
    _sim(quant_mma.w4a16_kernel("f16", 32, tile), [x, packed, scales, y], (*grid, 1),
         (*block, 1), group=16)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("tile, k, group", [("s4_64x64x64_w32x32", 320, 32),
                                           ("s3_64x128x64_w64x32", 384, 128)])
def test_w4a16_pipelined_tiling_ptx_is_exact_in_the_simulator(tile, k, group):
    """The pipelined tilings (packed bytes staged by cp.async, B fragments unpacked as they
    load, S stages in flight): K = 320 against 4 x 64-deep iterations runs a whole iteration
    and a zero-filled tail, group 32 twice per K step; group 128 against 3 x 64-deep
    iterations ends a group mid-iteration (tested at run time); N no multiple of the tile."""
    x, packed, scales = _w4a16_inputs(8, k, 72, group, np.float16, seed=5)
    want = _w4a16_mma_model(x, packed, scales, group)
    y = np.zeros_like(want)
    grid, block = quant_mma.w4a16_launch_config(8, 72, 32, tile)
    _sim(quant_mma.w4a16_kernel("f16", 32, tile), [x, packed, scales, y], (*grid, 1),
         (*block, 1), group=group)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_w4a16_split_k_builds_for_amd_where_its_stages_fit(target):
    """64 x 128 builds at 64-lane wavefronts (its 54 KiB of stages within the 64 KiB of LDS);
    128 x 64's x stages do not fit, nor does either tiling the LLVM nvptx path's 48 KiB of
    static shared memory: a CompileError, so the library's build check leaves them out."""
    report = quant_mma.w4a16_kernel("f16", 64, _SPLIT[0]).emit("report", target, group=128)
    assert f"[{target}] ok:" in report.splitlines()[0], report
    with pytest.raises(kaio.CompileError, match="64 KiB"):
        quant_mma.w4a16_kernel("f16", 64, _SPLIT[1]).emit("llvm", target, group=128)
    with pytest.raises(kaio.CompileError, match="48 KiB"):
        quant_mma.w4a16_kernel("f16", 32, _SPLIT[0]).emit("ptx", "nvptx64-sm_90", group=128)


@pytest.mark.parametrize("tile, k, group, name", [(_SPLIT[0], 128, 32, "f16"),
                                                 (_SPLIT[1], 64, 64, "bf16")])
def test_w4a16_split_k_ptx_is_exact_in_the_simulator(tile, k, group, name):
    """The split-K tilings on kaio's PTX, bit for bit their arithmetic
    (:func:`_w4a16_mma_model` with two halves): K = 128 two steps with a fold after every
    half's second slice, K = 64 one step and one group; the workspace exchange through global
    memory and a barrier; N no multiple of the tile."""
    npdt = np.float16 if name == "f16" else kaio.bf16.storage_np
    x, packed, scales = _w4a16_inputs(8, k, 72, group, npdt, seed=7)
    want = _w4a16_mma_model(x, packed, scales, group, halves=2)
    y = np.zeros_like(want)
    grid, block = quant_mma.w4a16_launch_config(8, 72, 32, tile)
    _sim(quant_mma.w4a16_kernel(name, 32, tile), [x, packed, scales, y, *_workspace(tile, 8, 72)],
         (*grid, 1), (*block, 1), group=group)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("tile", ["s4_64x128x64_w64x32", *_SPLIT])
def test_w4a16_pipelined_ptx_unpacks_staged_bytes(arch, tile):
    """No unpacking pass through shared memory: the only shared stores are copy_tile's
    element fallback (unaligned sources; the copies are cp.async), the loop loads bytes
    (ld.shared.u8) and converts them with lop3 + fma (no cvt)."""
    ptx = quant_mma.w4a16_kernel("bf16", 32, tile).emit("ptx", arch, group=128)
    loop = ptx[ptx.index("bar.sync"):]
    for block in re.split(r"\n(?=\$L)", loop):
        assert "st.shared" not in block or block.startswith("$L_copy"), block[:200]
    assert "ld.shared.u8" in loop and "lop3.b32" in loop
    assert "cvt.rn.bf16.s32" not in loop and "cp.async.cg.shared.global" in loop
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_fragment_paths_on_the_gpu():
    """On a GPU (either NVIDIA codegen): the tensor-core kernels are the ones launched, W8A8
    bit-exact against numpy's arithmetic at a ragged shape, W4A16 within the f32-accumulation
    bound; the registry's default sizes run in tests/test_kernels_ml.py."""
    from kaio import backends as be
    from kaio.showcase import pick_backend
    previous = be._current
    kaio.set_backend(pick_backend(None))
    try:
        assert quant.w8a8_launch(300, 260).bound.kernel is quant_mma.w8a8_kernel(
            32, quant_mma.w8a8_tile(300, 260))
        a, b, sa, sb = _w8a8_inputs(300, 1000, 260, seed=5)
        np.testing.assert_array_equal(ml.int8_matmul(a, b, sa, sb), _w8a8_expected(a, b, sa, sb))
        launched = quant.w4a16_launch("f16", 100, 300, 64).bound.kernel
        assert any(launched is quant_mma.w4a16_kernel("f16", 32, t) for t in quant_mma.W4_TILES)
        x, packed, scales = _w4a16_inputs(100, 512, 300, 64, np.float16, seed=6)
        y = ml.int4_matmul(x, packed, scales, group=64).astype(np.float64)
        w = quant.unpack_int4(packed).astype(np.float64) * np.repeat(scales.astype(np.float64), 64, axis=0)
        exact = x.astype(np.float64) @ w
        accumulation = 2 * 512 * 2.0**-24 * (np.abs(x.astype(np.float64)) @ np.abs(w))
        bound = accumulation + 2.0**-11 * np.abs(exact) * 1.01
        assert (np.abs(y - exact) <= bound + 2.0**-24).all()
    finally:
        be._current = previous
