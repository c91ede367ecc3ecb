"""The ML ops' backward kernels (kaio.kernels.ml.backward) against their float64 numpy
references on the reference backend, in every activation dtype, with no torch involved; and the
references themselves against finite differences of the forward references, so a wrong formula
cannot hide behind a kernel that matches it."""
import numpy as np
import pytest

from kaio.kernels.ml import backward as B
from kaio.kernels.ml import elementwise as E
from kaio.kernels.ml import norms

DTYPES = ["f32", "f16", "bf16", "f64"]
#: (atol, rtol) per activation dtype: f32 math (a few ulp per op, row sums of up to 300 terms)
#: and the output's one rounding (half an ulp of f16/bf16, about 2 ulp allowed); f64 math for f64
TOL = {"f32": (1e-6, 1e-5), "f16": (2.0 ** -14, 2e-3), "bf16": (2.0 ** -12, 1.6e-2),
       "f64": (1e-14, 1e-12)}


def _np(dt):
    from kaio.kernels._launch import np_dtype
    return np_dtype(dt)


def _close(got, want, dt, scale=1.0):
    atol, rtol = TOL[dt]
    got = np.asarray(got, np.float64)
    err = np.abs(got - want) - (atol * scale + rtol * np.abs(want))
    assert err.max() <= 0, f"{dt}: worst excess {err.max():.3g} (max |err| {np.abs(got - want).max():.3g})"


def _rows(dt, shape=(5, 300), seed=0):
    g = np.random.default_rng(seed)
    d = _np(dt)
    return (g.normal(0, 2, shape).astype(d), g.uniform(0.5, 1.5, shape[1]).astype(d),
            g.normal(0, 1, shape).astype(d))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(5, 300), (40, 77)])  # 40 rows: two chunks of CHUNK_ROWS
def test_rmsnorm_backward(dt, shape, reference):
    x, w, g = _rows(dt, shape)
    dx, dw = B.rmsnorm_backward(x, w, g, 1e-6)
    rx, rw = B.rmsnorm_backward_ref(x, w, g, 1e-6)
    assert dx.dtype == x.dtype and dw.dtype == w.dtype and dw.shape == w.shape
    _close(dx, rx, dt)
    _close(dw, rw, dt, scale=shape[0])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(5, 300), (40, 77)])
def test_layernorm_backward(dt, shape, reference):
    x, w, g = _rows(dt, shape)
    dx, dw, db = B.layernorm_backward(x, w, g, 1e-5)
    rx, rw, rb = B.layernorm_backward_ref(x, w, g, 1e-5)
    _close(dx, rx, dt)
    _close(dw, rw, dt, scale=shape[0])
    _close(db, rb, dt, scale=shape[0])


@pytest.mark.parametrize("dt", DTYPES)
def test_softmax_backward(dt, reference):
    x, _, g = _rows(dt)
    y = norms.softmax_ref(x).astype(_np(dt))
    _close(B.softmax_backward(y, g), B.softmax_backward_ref(y, g), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_elementwise_backward(dt, reference):
    r = np.random.default_rng(3)
    x, gate, g = (r.uniform(-6, 6, (7, 129)).astype(_np(dt)) for _ in range(3))
    dx, dgate = B.silu_gate_backward(x, gate, g)
    rx, rgate = B.silu_gate_backward_ref(x, gate, g)
    assert dx.shape == x.shape
    _close(dx, rx, dt, scale=10)  # |g gate| up to 36: absolute error scales with it
    _close(dgate, rgate, dt, scale=10)
    _close(B.gelu_backward(x, g), B.gelu_exact_backward_ref(x, g), dt, scale=10)
    _close(B.gelu_backward(x, g, "tanh"), B.gelu_tanh_backward_ref(x, g), dt, scale=10)


def _numeric_grad(f, x, g, h=1e-6):
    """d/dx of sum(f(x) * g) by central differences, float64."""
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        out[idx] = ((f(xp) - f(xm)) * g).sum() / (2 * h)
    return out


def test_references_are_the_gradients_of_the_forward_references():
    r = np.random.default_rng(1)
    x, w, b, g = r.normal(size=(3, 6)), r.uniform(0.5, 1.5, 6), r.normal(size=6), r.normal(size=(3, 6))
    gate = r.normal(size=(3, 6))

    def same(got, f, at):
        np.testing.assert_allclose(got, _numeric_grad(f, at, g), atol=1e-6)

    rx, rw = B.rmsnorm_backward_ref(x, w, g, 1e-6)
    same(rx, lambda v: norms.rmsnorm_ref(v, w, 1e-6), x)
    same(rw, lambda v: norms.rmsnorm_ref(x, v, 1e-6), w)
    lx, lw, lb = B.layernorm_backward_ref(x, w, g, 1e-5)
    same(lx, lambda v: norms.layernorm_ref(v, w, b, 1e-5), x)
    same(lw, lambda v: norms.layernorm_ref(x, v, b, 1e-5), w)
    same(lb, lambda v: norms.layernorm_ref(x, w, v, 1e-5), b)
    same(B.softmax_backward_ref(norms.softmax_ref(x), g), norms.softmax_ref, x)
    sx, sg = B.silu_gate_backward_ref(x, gate, g)
    same(sx, lambda v: E.silu_gate_ref(v, gate), x)
    same(sg, lambda v: E.silu_gate_ref(x, v), gate)
    same(B.gelu_exact_backward_ref(x, g), E.gelu_exact_ref, x)
    same(B.gelu_tanh_backward_ref(x, g), E.gelu_tanh_ref, x)


@pytest.mark.parametrize("op", ["softmax", "rmsnorm", "layernorm"])
def test_forward_row_ops_take_f64(op, reference):
    # torch's gradcheck runs in f64: the forward kernels compute in f64 for f64 arrays
    x, w, _ = _rows("f64")
    b = w[::-1].copy()
    got = {"softmax": lambda: norms.softmax(x), "rmsnorm": lambda: norms.rmsnorm(x, w),
           "layernorm": lambda: norms.layernorm(x, w, b)}[op]()
    want = {"softmax": lambda: norms.softmax_ref(x), "rmsnorm": lambda: norms.rmsnorm_ref(x, w, 1e-6),
            "layernorm": lambda: norms.layernorm_ref(x, w, b, 1e-5)}[op]()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_forward_elementwise_take_f64(reference):
    x, gate = np.random.default_rng(2).uniform(-6, 6, (2, 1000))
    np.testing.assert_allclose(E.silu_gate(x, gate), E.silu_gate_ref(x, gate), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(E.gelu(x), E.gelu_exact_ref(x), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(E.gelu(x, "tanh"), E.gelu_tanh_ref(x), rtol=1e-13, atol=1e-15)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f32", "bf16", "f64"])
def test_backward_kernels_on_the_gpu(dt):
    import kaio
    from kaio import backends as be
    previous = be._current
    kaio.set_backend("cuda" if be.availability("cuda")[0] else "hip")
    try:
        x, w, g = _rows(dt, (300, 4099), seed=4)  # two chunk rows' worth and an odd width
        dx, dw = B.rmsnorm_backward(x, w, g, 1e-6)
        rx, rw = B.rmsnorm_backward_ref(x, w, g, 1e-6)
        _close(dx, rx, dt)
        _close(dw, rw, dt, scale=300)
        dx, dw, db = B.layernorm_backward(x, w, g, 1e-5)
        rx, rw, rb = B.layernorm_backward_ref(x, w, g, 1e-5)
        _close(dx, rx, dt)
        _close(dw, rw, dt, scale=300)
        _close(db, rb, dt, scale=300)
        y = norms.softmax_ref(x).astype(_np(dt))
        _close(B.softmax_backward(y, g), B.softmax_backward_ref(y, g), dt)
        gate = np.random.default_rng(5).uniform(-6, 6, x.shape).astype(_np(dt))
        sx, sg = B.silu_gate_backward(x, gate, g)
        rsx, rsg = B.silu_gate_backward_ref(x, gate, g)
        _close(sx, rsx, dt, scale=10)
        _close(sg, rsg, dt, scale=10)
        _close(B.gelu_backward(x, g), B.gelu_exact_backward_ref(x, g), dt, scale=10)
        _close(B.gelu_backward(x, g, "tanh"), B.gelu_tanh_backward_ref(x, g), dt, scale=10)
    finally:
        be._current = previous
