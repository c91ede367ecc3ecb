"""Full-tile versioning (kaio.passes.full_tiles) and the vector accesses it enables: which loops
it rewrites, that results are bit-identical to the loops as written (reference backend with the
pass off, and the emitted PTX run by tests/ptx_sim.py), that 16-byte accesses appear for
blocked(4k) Regions, and that a load never moves above a store to its own element."""
from __future__ import annotations

import numpy as np
import pytest
from reference_kit import lowered_with, run_ref_with
from test_ptx import ptxas

import kaio
from kaio import f32, i32
from kaio.backends.ptx import emit_ptx
from kaio.passes import full_tiles
from kaio.regions import blocked

I32_MAX = 2**31 - 1


def lowered(k, on=True):
    return lowered_with(full_tiles, k, on)


def run_ref(k, args, grid, block, on=True):
    """Launch on the reference backend (sanitizer on); copies of the arrays after."""
    return run_ref_with(full_tiles, k, args, grid, block, on)


def run_sim(k, args, grid, block, misalign=0):
    from ptx_sim import Machine
    ptx, abi = emit_ptx(lowered(k), "sm_90", version_aligned=True)   # as compiled
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    Machine(ptx).launch(args, abi, (grid, 1, 1), (block, 1, 1), 0, misalign=misalign)
    return [a for a in args if isinstance(a, np.ndarray)]


def same_bits(a, b):
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (x, y)


# --- kernels ------------------------------------------------------------------------------------
@kaio.kernel
def saxpy8(a: f32, x: kaio.In[f32], y: kaio.Region[f32, blocked(8)]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


@kaio.kernel
def scale4_i32(x: kaio.In[i32], y: kaio.Region[i32, blocked(4)]):
    for i in y.owned():
        y[i] = x[i] * 3 - y[i]


@kaio.kernel
def reread4(x: kaio.In[f32], y: kaio.Region[f32, blocked(4)], z: kaio.Region[f32, blocked(4)]):
    """Reads back the element it just stored: that load must stay after its store."""
    for i in y.owned():
        y[i] = x[i] * 2.0
        z[i] = y[i] + 1.0


@kaio.kernel
def window_sum(start: i32, x: kaio.In[f32], out: kaio.Raw[f32]):
    """A hand-written fixed-length window with a carried float sum (order matters)."""
    t = kaio.global_id()
    s0 = start + 5 * t
    acc = 0.0
    for j in range(s0, min(s0 + 5, x.shape[0])):
        acc = acc * 0.5 + x[j]
    out[t] = acc


@kaio.kernel
def tiled_dot(x: kaio.In[f32], y: kaio.In[f32], out: kaio.Raw[f32]):
    """Grid-stride over tiles of eight (the loop variable is a multiple of 8)."""
    acc = 0.0
    n = x.shape[0]
    for base in range(8 * kaio.global_id(), n, 8 * kaio.grid_dim.x * kaio.block_dim.x):
        for i in range(base, min(base + 8, n)):
            acc += x[i] * y[i]
    out[kaio.global_id()] = acc


@kaio.kernel
def tiled_dot_step12(x: kaio.In[f32], y: kaio.In[f32], out: kaio.Raw[f32]):
    """Tiles of eight from element 2 on: the loop variable is not a multiple of 4."""
    acc = 0.0
    n = x.shape[0]
    for base in range(2 + 12 * kaio.global_id(), n, 12 * kaio.grid_dim.x * kaio.block_dim.x):
        for i in range(base, min(base + 8, n)):
            acc += x[i] * y[i]
    out[kaio.global_id()] = acc


# --- structure ----------------------------------------------------------------------------------
def test_versioned_loop_structure():
    k = lowered(saxpy8)
    ifs = [op for op in k.walk() if op.opcode == "if"]
    assert len(ifs) == 1
    then, other = ifs[0].regions
    assert not any(op.opcode == "for" for op in then.walk())
    assert sum(op.opcode == "store" for op in then.walk()) == 8
    loops = [op for op in other.walk() if op.opcode == "for"]
    assert len(loops) == 1 and loops[0].attrs["unrolled"] == 1
    off = lowered(saxpy8, on=False)
    assert not any(op.opcode == "if" for op in off.walk())


def test_loops_left_alone():
    @kaio.kernel
    def long_tile(x: kaio.In[f32], y: kaio.Region[f32, blocked(32)]):
        for i in y.owned():
            y[i] = x[i]

    @kaio.kernel
    def nested_loop(x: kaio.In[f32], y: kaio.Region[f32, blocked(4)]):
        for i in y.owned():
            s = 0.0
            for j in range(3):
                s += x[i] * j
            y[i] = s
    for k in (long_tile, nested_loop):
        assert not any(op.opcode == "if" for op in lowered(k).walk()), k.name


# --- bit-identical results ----------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 8, 37, 64, 100])
def test_saxpy8_bit_identical(n):
    r = np.random.default_rng(n)
    x = r.standard_normal(n).astype(np.float32)
    y = r.standard_normal(n).astype(np.float32)
    grid, block = 2, 8               # 128 elements of capacity: partial and empty tiles too
    want = run_ref(saxpy8, [1.7, x, y], grid, block, on=False)
    same_bits(run_ref(saxpy8, [1.7, x, y], grid, block), want)
    same_bits(run_sim(saxpy8, [1.7, x, y], grid, block), want)
    same_bits(run_sim(saxpy8, [1.7, x, y], grid, block, misalign=4), want)   # scalar fallback
    assert np.array_equal(want[1], (np.float32(1.7) * x + y).astype(np.float32))


@pytest.mark.parametrize("n", [4, 13, 32])
def test_int_tiles_bit_identical(n):
    x = np.arange(n, dtype=np.int32) * 7 - 50
    y = np.arange(n, dtype=np.int32)[::-1].copy()
    want = run_ref(scale4_i32, [x, y], 1, 8, on=False)
    same_bits(run_sim(scale4_i32, [x, y], 1, 8), want)
    assert np.array_equal(want[1], x * 3 - y)


@pytest.mark.parametrize("start,n,threads", [(0, 23, 8), (3, 40, 8), (I32_MAX - 2, 8, 1)])
def test_window_with_carried_value_and_wrapping_end(start, n, threads):
    """``start + 5`` wraps past I32_MAX in the last case: the loop as written runs no
    iteration there, and so must the versioned one."""
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    out = np.full(threads, -1.0, np.float32)
    want = run_ref(window_sum, [start, x, out], 1, threads, on=False)
    same_bits(run_ref(window_sum, [start, x, out], 1, threads), want)
    same_bits(run_sim(window_sum, [start, x, out], 1, threads), want)
    if start > n:
        assert want[1][0] == 0.0


# --- vector accesses ----------------------------------------------------------------------------
def _then_ptx(k):
    ptx, _ = emit_ptx(lowered(k), "sm_90")
    ptxas(ptx, "sm_90")
    head = ptx.index("bra $L_else")
    return ptx, ptx[head:ptx.index("$L_else", head + 10)]


def test_blocked8_saxpy_is_six_16_byte_accesses_loads_first():
    ptx, full = _then_ptx(saxpy8)
    code = [ln.strip() for ln in full.splitlines() if ".v4." in ln]
    assert [c.split()[1] for c in code] == ["ld.global.nc.v4.f32", "ld.global.v4.f32",
                                            "ld.global.nc.v4.f32", "ld.global.v4.f32",
                                            "st.global.v4.f32", "st.global.v4.f32"]
    assert "+16]" in code[2] and "+16]" in code[5]           # the second chunk
    scalar = [ln.strip() for ln in full.splitlines() if ".global.f32" in ln or ".global.nc.f32" in ln]
    assert len(scalar) == 24 and all(ln.startswith("@!%p") for ln in scalar)   # fallback only


def test_int_tiles_vectorised():
    _, full = _then_ptx(scale4_i32)
    assert "ld.global.nc.v4.s32" in full and "ld.global.v4.s32" in full and "st.global.v4.s32" in full


def test_load_of_a_just_stored_element_is_not_moved():
    _, full = _then_ptx(reread4)
    assert "ld.global.v4.f32" not in full            # y's loads each follow their own store
    for n in (4, 9, 16):
        x = np.arange(n, dtype=np.float32) + 0.5
        y, z = np.zeros(n, np.float32), np.zeros(n, np.float32)
        got = run_sim(reread4, [x, y, z], 1, 4)
        assert np.array_equal(got[1], x * 2) and np.array_equal(got[2], x * 2 + 1)


def test_vector_plan_alias_rules():
    """Direct checks of kaio.backends.vector_access.plan on hand-built blocks."""
    from kaio import dtypes as dt
    from kaio.backends import vector_access
    from kaio.ir.builder import Builder
    from kaio.ir.types import BufType

    def block(order):
        """order: ('l'|'s', offset) accesses of one region buffer at base 4*tid + offset."""
        b = Builder.for_kernel("k", [("y", BufType(dt.f32, 1, "global", "region"), None)])
        y = b.kernel.body.args[0]
        base = b.binary("mul", b.special("thread_idx", 0), b.const(4, dt.i32))
        v = b.const(1.0, dt.f32)
        for kind, off in order:
            idx = base if off == 0 else b.binary("add", base, b.const(off, dt.i32))
            if kind == "l":
                b.load(y, [idx])
            else:
                b.store(y, [idx], v)
        return b.kernel.body

    loads = [("l", k) for k in range(4)]
    stores = [("s", k) for k in range(4)]
    kinds = lambda blk: sorted({g.kind for g in vector_access.plan(blk).values()})   # noqa: E731
    assert kinds(block(loads + stores)) == ["load", "store"]
    # a store to another element between the loads: the loads may still move up
    assert kinds(block([("l", 0), ("s", 5), ("l", 1), ("l", 2), ("l", 3)])) == ["load"]
    # a store to element 2 before the load of element 2: that load cannot move up
    assert kinds(block([("l", 0), ("l", 1), ("s", 2), ("l", 2), ("l", 3)])) == []
    # a load of element 1 between the stores, after the store of element 1 would be sunk past it
    assert kinds(block([("s", 0), ("s", 1), ("l", 1), ("s", 2), ("s", 3)])) == []
    # ... but a load of element 3 before the store of element 3 is fine
    assert kinds(block([("s", 0), ("s", 1), ("l", 3), ("s", 2), ("s", 3)])) == ["store"]


def test_loop_variable_multiple_of_4_vectorises():
    _, full = _then_ptx(tiled_dot)
    assert full.count("ld.global.nc.v4.f32") == 4
    _, full12 = _then_ptx(tiled_dot_step12)
    assert ".v4." not in full12                      # start 2: not provably a multiple of 4


@pytest.mark.parametrize("kern", [tiled_dot, tiled_dot_step12])
@pytest.mark.parametrize("n", [5, 64, 203])
def test_tiled_dot_bit_identical(kern, n):
    r = np.random.default_rng(n)
    x, y = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    out = np.zeros(6, np.float32)
    want = run_ref(kern, [x, y, out], 2, 3, on=False)
    same_bits(run_ref(kern, [x, y, out], 2, 3), want)
    same_bits(run_sim(kern, [x, y, out], 2, 3), want)
    same_bits(run_sim(kern, [x, y, out], 2, 3, misalign=4), want)
    if kern is tiled_dot:   # covers every element once (the other skips some, by design)
        assert abs(float(want[2].astype(np.float64).sum()) - float(x.astype(np.float64) @ y)) < 1e-4 * n


# --- random access sequences: the vector plan's alias rules against in-order semantics -------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ACCESS = st.lists(st.tuples(st.sampled_from(["load", "store"]), st.integers(0, 7)),
                   min_size=1, max_size=24)


@settings(max_examples=60, deadline=None)
@given(_ACCESS)
def test_random_load_store_sequences_keep_program_order(seq):
    """A thread touches y[8t + off] in a random order of loads and stores (each store writes a
    value that depends on everything loaded so far); every loaded value is also written out.
    The PTX (with whatever 16-byte groups the plan forms, aligned and misaligned) must give the
    reference interpreter's results exactly."""
    from test_ptx import gbuf, kernel, tid

    from kaio import dtypes as dt
    from kaio.backends.reference import ReferenceBackend

    def body(b, y, out):
        t = tid(b)
        base = b.binary("mul", t, b.const(8, dt.i32))
        acc = b.const(1.0, dt.f32)
        nloads = sum(1 for kind, _ in seq if kind == "load")
        k = 0
        for kind, off in seq:
            idx = base if off == 0 else b.binary("add", base, b.const(off, dt.i32))
            if kind == "load":
                v = b.load(y, [idx])
                acc = b.binary("add", b.binary("mul", acc, b.const(0.5, dt.f32)), v)
                slot = b.binary("add", b.binary("mul", t, b.const(max(nloads, 1), dt.i32)),
                                b.const(k, dt.i32))
                b.store(out, [slot], v)
                k += 1
            else:
                b.store(y, [idx], b.binary("add", acc, b.const(float(off), dt.f32)))

    k = kernel("seq", [("y", gbuf(dt.f32, "raw")), ("out", gbuf(dt.f32, "raw"))], body)
    nthreads = 3
    nloads = max(1, sum(1 for kind, _ in seq if kind == "load"))
    y0 = np.arange(8 * nthreads, dtype=np.float32) * 1.25 - 3.0
    out0 = np.zeros(nthreads * nloads, np.float32)
    ref = [y0.copy(), out0.copy()]
    ReferenceBackend(sanitize=False).launch(k, (1, 1, 1), (nthreads, 1, 1), ref)
    from ptx_sim import Machine
    ptx, abi = emit_ptx(k, "sm_90")
    for misalign in (0, 4):
        sim = [y0.copy(), out0.copy()]
        Machine(ptx).launch(sim, abi, (1, 1, 1), (nthreads, 1, 1), 0, misalign=misalign)
        same_bits(sim, ref)
