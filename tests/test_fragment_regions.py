"""Fragment stores into Regions (kaio.mma.store under kaio.regions.warp_tiles): the corpus of
tests/race_corpus/fragments.py (accepted kernels run clean under the sanitizer with ownership
checks at warp widths 32 and 64 and match numpy; racy ones are rejected at their line and, forced
through unchecked, really misbehave), the partition's owner maps and launch checks."""
from __future__ import annotations

import numpy as np
import pytest
from race_corpus import fragments as corpus
from race_corpus.rejects import rejected_at_race_line

import kaio
from kaio import f32
from kaio.backends.reference import ReferenceBackend
from kaio.backends.reference.errors import OwnershipError
from kaio.backends.reference.fragments import FragmentError
from kaio.regions import WarpTiles, checker, warp_tiles
from kaio.regions.partitions import owner_map


def _caller(width, ownership=True):
    be = ReferenceBackend(warp_size=width, sanitize=True, check_ownership=ownership)

    def call(k, *args, grid=None, block=None):
        be.launch(be.compile(k.specialize_ir({})), grid, block, list(args))
    return call


@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("variant", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(corpus.GOOD))
def test_good_fragment_kernel_runs_clean_and_matches_numpy(name, variant, width):
    corpus.GOOD[name](variant, _caller(width))


@pytest.mark.parametrize("name", sorted(corpus.GOOD))
def test_good_fragment_kernel_is_proved_at_both_widths(name):
    ir = kaio.kernel(corpus.KERNELS[name].fn).specialize_ir({})
    assert ir.proved_warp_widths[1] == (32, 64)


@pytest.mark.parametrize("name", sorted(corpus.BAD))
def test_bad_fragment_kernel_rejected_at_its_line(name):
    e = rejected_at_race_line(corpus.KERNELS[name].fn, r"kaio\.mma\.store|owned by warps")
    buffer = corpus.BAD[name][0]
    assert e.kernel == name and e.hint, str(e)
    if buffer is not None:
        assert f"'{buffer}'" in e.bare_message, str(e)


_EXPECT = {"race": kaio.RaceError, "ownership": OwnershipError, "fragment": FragmentError,
           "frontend": kaio.CompileError}


@pytest.mark.parametrize("ownership", [True, False])
@pytest.mark.parametrize("name", sorted(corpus.BAD))
def test_bad_fragment_kernel_misbehaves_without_the_checker(name, ownership):
    """With the ownership check off, the "race" kernels conflict between two warps; with it on,
    they are first caught storing into another warp's tile."""
    _, (grid, block), make_args, expect, width = corpus.BAD[name]
    if expect == "ownership" and not ownership:
        pytest.skip("an ownership violation without a conflict on this launch")
    want = _EXPECT[expect]
    if expect == "race" and ownership:
        want = OwnershipError
    with checker.disabled(), pytest.raises(want) as ei:
        _caller(width, ownership)(corpus.KERNELS[name], *make_args(), grid=grid, block=block)
    if expect in ("race", "ownership"):
        assert ei.value.buffer == "C"
    if want is OwnershipError and name != "thread_partition":
        assert "belongs to the warp whose lane 0 is" in str(ei.value)


# --- the partition --------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("part, shape, grid", [
    (WarpTiles(32, 32, 16, 16), (40, 70), (3, 2, 1)),
    (WarpTiles(128, 128, 64, 32), (130, 200), (2, 2, 1)),
    (WarpTiles(64, 16, 16, 16), (64, 16), (1, 1, 1)),
])
def test_each_element_has_one_owning_warp_at_its_origin(part, shape, grid, width):
    """Owners are warps, named by their lane 0: the warp ``w`` of block (bx, by) owns exactly the
    tile at (by*bm + (w // (bn/wn))*wm, bx*bn + (w % (bn/wn))*wn); the reference backend's owner
    map (the partition's IR, interpreted) agrees with the enumeration."""
    from kaio.backends.reference.ownership import owner_map as ref_owner_map
    block = part.launch_block(width)
    part.check_launch(shape, grid, block, buffer="C", kernel="k", warp_size=width)
    owners = owner_map(part, shape, grid, block, warp=width)
    assert (owners >= 0).all() and (owners % width == 0).all()
    T, per_row = block[0], part.bn // part.wn
    for r in range(shape[0]):
        for c in range(shape[1]):
            bx, by = c // part.bn, r // part.bm
            w = (r % part.bm) // part.wm * per_row + (c % part.bn) // part.wn
            assert owners[r, c] == (by * grid[0] + bx) * T + w * width
    ref = ref_owner_map(part, shape, grid, block, ReferenceBackend(width, sanitize=False).launch)
    np.testing.assert_array_equal(ref.reshape(shape), owners)


def test_launch_checks_name_the_block_the_warps_need():
    part = warp_tiles((128, 128), (64, 32))
    assert part == WarpTiles(128, 128, 64, 32) and part.warps == 8
    assert part.launch_shape((300, 200), warp_size=64) == ((2, 3, 1), (512, 1, 1))
    ok = dict(buffer="C", kernel="k", warp_size=32)
    part.check_launch((300, 200), (2, 3, 1), (256, 1, 1), **ok)
    with pytest.raises(kaio.LaunchError, match=r"needs block=\(256, 1, 1\)"):
        part.check_launch((300, 200), (2, 3, 1), (512, 1, 1), **ok)
    with pytest.raises(kaio.LaunchError, match=r"use at least grid=\(2, 3\)"):
        part.check_launch((300, 200), (2, 2, 1), (256, 1, 1), **ok)
    with pytest.raises(kaio.LaunchError, match="warp width"):
        part.check_launch((300, 200), (2, 3, 1), (256, 1, 1), buffer="C", kernel="k")
    with pytest.raises(kaio.LaunchError, match="2\\*\\*31 - 1"):
        part.check_launch((300, 200), (2, 2**24, 1), (256, 1, 1), **ok)
    for bad in [((128, 128), (48, 32)), ((128, 128), (0, 32)), ((512, 512), (32, 32)), (128, 64)]:
        with pytest.raises(ValueError):
            warp_tiles(*bad) if len(bad) == 2 else warp_tiles(bad)


def test_a_launch_with_the_wrong_block_is_refused_before_it_runs():
    a, b, c = corpus._h(32, 16), corpus._h(16, 32), np.zeros((32, 32), np.float32)
    with pytest.raises(kaio.LaunchError, match=r"4 warps of 32 lanes per block"):
        _caller(32)(corpus.gemm_warp_tiles, a, b, c, 1.0, 0.0, grid=(1, 1), block=(256,))
    assert not c.any()


def test_warp_tiles_is_an_ir_attribute_that_round_trips():
    from kaio.ir import parse_kernel, print_kernel
    ir = kaio.kernel(corpus.gemm_warp_tiles.fn).specialize_ir({})
    text = print_kernel(ir)
    assert "#warp_tiles{bm = 32, bn = 32, wm = 16, wn = 16}" in text
    assert parse_kernel(text).params[2].partition == corpus.WT


def test_plain_reads_and_owned_loops_are_refused():
    """Only kaio.mma.store touches a per-warp buffer: a read (even after the warp's store) is
    refused, since which lane holds an element is the target's choice."""
    @kaio.kernel
    def read_back(C: kaio.Region[f32, 2, corpus.WT], D: kaio.Out[f32, 2, corpus.WT]):
        w = kaio.thread_idx.x // kaio.warp_size
        r0 = kaio.block_idx.y * 32 + (w // 2) * 16
        c0 = kaio.block_idx.x * 32 + (w % 2) * 16
        kaio.mma.store(D, r0, c0, kaio.mma.fill(f32, 1.0, m=16, n=16))
        D[r0, c0] = C[r0, c0]
    with pytest.raises(kaio.CompileError, match="owned by warps") as ei:
        read_back.specialize_ir({})
    assert ei.value.kind == "fragment-plain"




    @kaio.kernel
    def owned_loop(C: kaio.Region[f32, 2, corpus.WT]):
        for r, c in C.owned():
            C[r, c] = 0.0
    with pytest.raises(kaio.CompileError, match="owned by warps") as ei:
        owned_loop.specialize_ir({})
    assert ei.value.kind == "fragment-plain"


def test_the_ptx_of_a_proved_warp_tile_gemm_runs_exactly_in_the_simulator():
    """The partition changes nothing in codegen: the warp-tile GEMM's PTX (mma.sync's layout)
    stores every tile where the proof says, with the beta epilogue (small integers: exact)."""
    from test_mma import _sim
    g = np.random.default_rng(3)
    a = g.integers(-4, 5, (64, 32)).astype(np.float16)
    b = g.integers(-4, 5, (32, 64)).astype(np.float16)
    c0 = g.integers(-8, 8, (64, 64)).astype(np.float32) * 2
    c = c0.copy()
    _sim(corpus.gemm_warp_tiles, [a, b, c, 1.0, 0.5], (2, 2, 1), (128, 1, 1))
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32) + 0.5 * c0)


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("codegen", ["ptx", "llvm"])
@pytest.mark.parametrize("name", sorted(corpus.GOOD))
def test_good_fragment_kernels_on_cuda(monkeypatch, codegen, name):
    """On an NVIDIA GPU, both code generators: the proved kernels launch (the launch checks take
    the CUDA backend's warp width) and match numpy on every shape."""
    from kaio import backends as be
    from kaio.backends.cuda import CudaBackend
    monkeypatch.setitem(be._instances, "cuda", CudaBackend(codegen=codegen))
    monkeypatch.setattr(be, "_current", "cuda")
    for variant in range(3):
        corpus.GOOD[name](variant, lambda k, *args: k(*args))
