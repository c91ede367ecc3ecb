"""quantized_attention's P V on f16 fragments with split operands (kaio.kernels.ml.attention_mma):
within the split's bound of the float64 product on the reference backend at a ragged shape,
bit-identical to the reference backend in the PTX simulator, ptxas for sm_80/sm_90, and chosen by
the attention pipeline (the registry cases check the whole pipeline against numpy)."""

import numpy as np
import pytest
from test_mma import _sim
from test_ptx import ptxas

from kaio.kernels.ml import attention, attention_mma


def _inputs(m, k, n, seed):
    g = np.random.default_rng(seed)
    return g.uniform(0, 1, (m, k)).astype(np.float32), g.normal(0, 2, (k, n)).astype(np.float32)


def _run(a, b, trans_b=False):
    c = np.full((a.shape[0], b.shape[0] if trans_b else b.shape[1]), np.nan, np.float32)
    attention_mma.matmul_kernel(32, trans_b)[attention_mma.launch_config(*c.shape)](a, b, c)
    return c


def _check(c, a, b, gpu=1):
    """Three split products: each term within ~2**-21 of |a b| (two dropped/rounded low parts),
    plus f32 accumulation over K (doubled for a matrix unit's order); a plain f16 rounding of
    either operand (2**-11) would not be."""
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    err = np.abs(c.astype(np.float64) - a.astype(np.float64) @ b.astype(np.float64))
    assert (err <= (gpu * a.shape[1] * 2.0**-24 + 2.0**-20) * mag).all()
    assert err.max() > 0          # not trivially exact: the bound is what is tested


def test_split_product_is_within_its_bound(reference):
    a, b = _inputs(37, 70, 45, 0)
    _check(_run(a, b), a, b)
    q, k = _inputs(33, 40, 0, 3)[0], np.random.default_rng(4).normal(0, 2, (50, 40)).astype(np.float32)
    _check(_run(q, k, trans_b=True), q, k.T)         # Q K^T: k held as N x K


def test_softmax_of_precomputed_scores_matches_its_own_dot_products(reference):
    """The fragment Q K^T feeding the softmax (precomputed=True) against the softmax kernel's
    scalar f32 dot products (the fallback), within the attention case's tolerance."""
    g = np.random.default_rng(5)
    q, k = (g.normal(0, 2, (40, 16)).astype(np.float32) for _ in range(2))
    scores = attention._scores_kernel()
    p_frag, p_dot = (np.zeros((40, 40), np.float32) for _ in range(2))
    attention.qk_launcher(q, k, p_frag)()
    scores(q, k, p_frag, 0.25, True, True)
    scores(q, k, p_dot, 0.25, True, False)
    np.testing.assert_allclose(p_frag, p_dot, rtol=1e-5, atol=1e-7)


def test_attention_uses_the_fragment_pv(reference):
    p, v = _inputs(20, 20, 8, 1)
    o = np.zeros((20, 8), np.float32)
    attention.pv_launcher(p, v, o)()
    np.testing.assert_array_equal(o, _run(p, v))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    for trans_b in (False, True):
        ptx = attention_mma.matmul_kernel(32, trans_b).emit("ptx", arch)
        assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 2 * 3 * 2 * 4
        assert "ldmatrix" in ptx
        ptxas(ptx, arch)


def test_ptx_in_the_simulator():
    """The simulator's mma rounds each tile's sum once (the reference after every addition), so
    the check is the bound: any misplaced lane, register or split part is far outside it."""
    a, b = _inputs(24, 40, 20, 2)
    c = np.full((24, 20), np.nan, np.float32)
    _sim(attention_mma.matmul_kernel(32), [a, b, c], (1, 1, 1), (32, 4, 1))
    _check(c, a, b, gpu=2)
    bt = np.ascontiguousarray(b.T)
    c2 = np.full((24, 20), np.nan, np.float32)
    _sim(attention_mma.matmul_kernel(32, True), [a, bt, c2], (1, 1, 1), (32, 4, 1), "sm_90")
    _check(c2, a, b, gpu=2)


def test_a_func_returning_a_fragment_twice_is_refused_by_name():
    """Several returns need a placeholder value of the returned type, and a fragment has none
    (this crashed the frontend before: 'FragType' object has no attribute 'bits')."""
    import kaio
    from kaio import f16, f32

    @kaio.func
    def pick(A, first):
        if first:
            return kaio.mma.load_a(A, 0, 0)
        return kaio.mma.load_a(A, 16, 0)

    @kaio.kernel
    def two_returns(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2], first: kaio.i32):
        acc = kaio.mma.mma(pick(A, first > 0), kaio.mma.load_b(B, 0, 0), kaio.mma.fill(f32, 0.0))
        kaio.mma.store(C, 0, 0, acc)

    with pytest.raises(kaio.CompileError, match="returns a matrix fragment from more than one"):
        two_returns.specialize_ir({})
