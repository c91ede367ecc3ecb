"""If-conversion by predication in the PTX backend (kaio.backends.ptx_predicate, off by default:
measured slower): which ifs it rewrites, and that kernels full of small ifs give the reference
interpreter's bits when their PTX runs in tests/ptx_sim.py."""
from __future__ import annotations

import re

import numpy as np
import pytest
from test_ptx import ptxas

import kaio
from kaio import f32, i32
from kaio.backends import ptx_predicate as P
from kaio.backends.ptx import emit_ptx
from kaio.backends.reference import ReferenceBackend
from kaio.passes import target_pipeline


def _lines(text: str) -> list[str]:
    rows = [ln.strip() for ln in text.strip().splitlines()]
    return [ln if ln.endswith(":") else "\t" + ln + ";" for ln in rows]


def test_if_without_else_is_guarded():
    out = P.predicate_small_ifs(_lines("""
        setp.lt.s32 %p1, %r1, %r2
        @!%p1 bra $L_endif_1
        ld.global.f32 %f1, [%rd1]
        add.f32 %f2, %f1, %f1
        $L_endif_1:
        mov.f32 %f3, %f0"""))
    assert out == ["\tsetp.lt.s32 %p1, %r1, %r2;", "\t@%p1 ld.global.f32 %f1, [%rd1];",
                   "\t@%p1 add.f32 %f2, %f1, %f1;", "\tmov.f32 %f3, %f0;"]


def test_if_else_with_results_is_guarded_both_ways():
    out = P.predicate_small_ifs(_lines("""
        @!%p2 bra $L_else_1
        mov.f32 %f5, %f1
        bra.uni $L_endif_2
        $L_else_1:
        mov.f32 %f5, %f2
        $L_endif_2:"""))
    assert out == ["\t@%p2 mov.f32 %f5, %f1;", "\t@!%p2 mov.f32 %f5, %f2;"]


@pytest.mark.parametrize("body", [
    "bar.sync 0",                                  # a barrier: never under a guard
    "shfl.sync.bfly.b32 %r3, %r4, 1, 31, -1",       # warp-synchronous
    "@%p7 ld.global.f32 %f1, [%rd1]",              # already guarded
])
def test_unsafe_bodies_keep_their_branches(body):
    lines = _lines(f"""
        @!%p1 bra $L_endif_1
        {body}
        $L_endif_1:""")
    assert P.predicate_small_ifs(lines) == lines


def test_long_bodies_keep_their_branches():
    lines = _lines("@!%p1 bra $L_endif_1\n" + "add.s32 %r1, %r1, 1\n" * (P.MAX_INSTRUCTIONS + 1)
                   + "$L_endif_1:")
    assert P.predicate_small_ifs(lines) == lines


def test_nested_ifs_convert_innermost_only():
    out = P.predicate_small_ifs(_lines("""
        @!%p1 bra $L_endif_1
        add.s32 %r1, %r1, 1
        @!%p2 bra $L_endif_2
        add.s32 %r2, %r2, 1
        $L_endif_2:
        $L_endif_1:"""))
    assert out == _lines("""
        @!%p1 bra $L_endif_1
        add.s32 %r1, %r1, 1
        @%p2 add.s32 %r2, %r2, 1
        $L_endif_1:""")


# --- whole kernels ----------------------------------------------------------------------------------
@kaio.kernel
def guarded(x: kaio.In[f32], y: kaio.Out[f32], lim: i32):
    """Bounds-guarded loads into a local array, an if/else with a result, a nested if."""
    v = kaio.local_array(f32, 4)
    for i in y.owned():
        for k in kaio.static_range(4):
            j = i * 4 + k
            v[k] = -1.0
            if j < x.shape[0]:
                v[k] = x[j]
        s = 0.0
        for k in kaio.static_range(4):
            if v[k] > 0.0:
                s += v[k]
                if v[k] > 1.0:
                    s += 100.0
            else:
                s -= 0.5
        y[i] = s if i < lim else -s


def _run(n_x, lim):
    x = np.random.default_rng(n_x).standard_normal(n_x).astype(np.float32) * 2
    y = np.zeros(5, np.float32)
    k = guarded.specialize_ir()
    want = y.copy()
    ReferenceBackend(sanitize=True).launch(k, (1, 1, 1), (5, 1, 1), [x, want, lim])
    return k, x, y, want


@pytest.fixture
def predication():
    saved, P.ENABLED = P.ENABLED, True
    yield
    P.ENABLED = saved


@pytest.mark.parametrize("n_x,lim", [(20, 3), (13, 5), (3, 0)])
def test_kernel_with_small_ifs_bit_identical_in_simulator(n_x, lim, predication):
    from ptx_sim import Machine
    k, x, y, want = _run(n_x, lim)
    lowered = target_pipeline(k, 32)
    ptx, abi = emit_ptx(lowered, "sm_90")
    ptxas(ptx, "sm_90")
    body = ptx[ptx.index("{"):]
    assert len(re.findall(r"@%p\d+ ld\.global\.nc\.f32", body)) == 4   # guarded bounds-checked loads
    Machine(ptx).launch([x, y, lim], abi, (1, 1, 1), (5, 1, 1))
    assert y.tobytes() == want.tobytes()
    P.ENABLED = False
    branchy, _ = emit_ptx(lowered, "sm_90")
    assert branchy.count(" bra ") == body.count(" bra ") + 8   # 4 guarded loads, 4 inner ifs
