"""kaio's ML ops as torch custom ops (kaio.kernels.ml.torch_ops): forward and backward against
torch's own ops, gradcheck in f64, opcheck (fake impls, autograd registration) and torch.compile.
CPU tensors run on the reference backend, so these run in CI when torch is installed (CPU torch
is enough); the gpu-marked ones run the same on CUDA tensors, on torch's streams. Skipped
without torch."""
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import kaio  # noqa: E402
from kaio.kernels.ml import torch_ops as T  # noqa: E402

# (op, kaio call, torch call, number of float inputs); inputs: x [.., n], then weight, bias / gate
OPS = {
    "rmsnorm": (lambda x, w: T.rmsnorm(x, w, 1e-6), lambda x, w: F.rms_norm(x, x.shape[-1:], w, 1e-6), 2),
    "layernorm": (lambda x, w, b: T.layernorm(x, w, b, 1e-5),
                  lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5), 3),
    "softmax": (T.softmax, lambda x: torch.softmax(x, -1), 1),
    "silu_gate": (T.silu_gate, lambda x, g: F.silu(x) * g, 2),
    "gelu_exact": (T.gelu, F.gelu, 1),
    "gelu_tanh": (lambda x: T.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh"), 1),
}
TOL = {torch.float32: (2e-5, 2e-5), torch.float64: (1e-12, 1e-12), torch.bfloat16: (3e-2, 3e-2),
       torch.float16: (4e-3, 4e-3)}


def _inputs(op, shape, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = shape[-1]
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 2
    rest = {"rmsnorm": [torch.rand(n, generator=g, dtype=torch.float64) + 0.5],
            "layernorm": [torch.rand(n, generator=g, dtype=torch.float64) + 0.5,
                          torch.randn(n, generator=g, dtype=torch.float64)],
            "silu_gate": [torch.randn(shape, generator=g, dtype=torch.float64)]}.get(op, [])
    return [t.to(device=device, dtype=dtype).requires_grad_() for t in [x, *rest]]


def _check_op(op, shape, dtype, device):
    ours, theirs, _ = OPS[op]
    a = _inputs(op, shape, dtype, device)
    b = [t.detach().clone().requires_grad_() for t in a]
    y, want = ours(*a), theirs(*b)
    assert y.dtype == dtype and y.shape == want.shape and y.device == want.device
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(y, want, atol=atol, rtol=rtol)
    g = torch.randn(want.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    g = g.to(device=device, dtype=dtype)
    y.backward(g)
    want.backward(g)
    scale = shape[0] if op in ("rmsnorm", "layernorm") else 1  # weight grads sum over rows
    for i, (ga, gb) in enumerate(zip(a, b)):
        s = scale if i else 1
        torch.testing.assert_close(ga.grad, gb.grad, atol=atol * 4 * s, rtol=rtol * 4,
                                   msg=lambda m, i=i: f"{op} grad of input {i}: {m}")


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_and_backward_match_torch_on_cpu(op, dtype, reference):
    _check_op(op, (3, 2, 40), dtype, "cpu")


@pytest.mark.parametrize("op", list(OPS))
def test_gradcheck_f64_on_cpu(op, reference):
    ours, _, _ = OPS[op]
    assert torch.autograd.gradcheck(ours, tuple(_inputs(op, (2, 5), torch.float64, "cpu")))


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "softmax", "silu_gate", "gelu"])
def test_opcheck(op, reference):
    # fake impls, schema, autograd registration and dispatch, as torch checks a custom op
    x, *rest = _inputs("gelu" if op == "gelu" else op, (3, 6), torch.float32, "cpu")
    args = {"rmsnorm": (x, *rest, 1e-6), "layernorm": (x, *rest, 1e-5), "softmax": (x,),
            "silu_gate": (x, *rest), "gelu": (x, "tanh")}[op]
    torch.library.opcheck(getattr(torch.ops.kaio, op), args)


def test_torch_compile_keeps_the_op_opaque_in_one_graph(reference):
    x, w = _inputs("rmsnorm", (4, 16), torch.float32, "cpu")
    f = torch.compile(lambda a, c: T.rmsnorm(a, c) * 2.0 + 1.0, backend="aot_eager", fullgraph=True)
    y = f(x, w)
    y.sum().backward()
    want_x, want_w = (t.detach().clone().requires_grad_() for t in (x, w))
    (F.rms_norm(want_x, (16,), want_w, 1e-6) * 2.0 + 1.0).sum().backward()
    torch.testing.assert_close(x.grad, want_x.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w.grad, want_w.grad, atol=1e-5, rtol=1e-5)


def test_zero_copy_and_refusals(reference):
    from kaio.kernels.ml.torch_ops import _view
    x = torch.arange(6, dtype=torch.float32)
    v = _view(x)
    assert v.ptr == x.data_ptr() and v.shape == (6,)  # kaio sees the tensor's own memory
    with pytest.raises(TypeError, match="float32, float16, bfloat16 or float64"):
        T.softmax(torch.arange(4).view(2, 2))
    with pytest.raises(TypeError, match="every tensor must be"):
        T.rmsnorm(torch.ones(2, 3), torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="approximate"):
        T.gelu(x, "erf")


def test_non_contiguous_input_and_3d_shapes(reference):
    x = torch.randn(5, 8, dtype=torch.float64).t()  # a transposed view
    torch.testing.assert_close(T.softmax(x), torch.softmax(x, -1))


class _SideStream:
    """Stands in for a torch.cuda.Stream other than the default one (reference backend)."""
    cuda_stream = 7

    def __init__(self):
        self.launches = 0

    def __cuda_stream__(self):  # kaio reads the handle once per launch on this stream
        self.launches += 1
        return (0, 7)


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])  # resident kernel / general one
def test_row_ops_on_a_side_stream_launch_there(op, dtype, reference, monkeypatch):
    side = _SideStream()
    seen = []
    monkeypatch.setattr(T, "_stream", lambda t: seen.append(1) or side)
    _check_op(op, (3, 2, 40), dtype, "cpu")
    assert seen and side.launches >= 2  # the forward and the backward kernels went to the stream


# --- on the GPU: CUDA tensors, torch's streams ---------------------------------------------------
@pytest.fixture
def cuda():
    """kaio's CUDA backend for CUDA tensors (restored afterwards)."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    from kaio import backends as be
    previous = be._current
    kaio.set_backend("cuda")
    yield
    be._current = previous


@pytest.mark.gpu
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_forward_and_backward_match_torch_on_gpu(op, dtype, cuda):
    _check_op(op, (64, 3, 1000), dtype, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("op", list(OPS))
def test_gradcheck_f64_on_gpu(op, cuda):
    ours, _, _ = OPS[op]
    assert torch.autograd.gradcheck(ours, tuple(_inputs(op, (3, 7), torch.float64, "cuda")))


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["rmsnorm", "silu_gate"])
def test_ops_run_on_torchs_current_stream(op, cuda):
    ours, theirs, _ = OPS[op]
    s = torch.cuda.Stream()
    a = _inputs(op, (512, 4096), torch.float32, "cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        y = ours(*a)
        y.sum().backward()
    s.synchronize()
    b = [t.detach().clone().requires_grad_() for t in a]
    want = theirs(*b)
    want.sum().backward()
    torch.testing.assert_close(y, want, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(a[0].grad, b[0].grad, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_training_step_and_inductor_compile_on_gpu(cuda):
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 256, device="cuda")
    w = torch.nn.Parameter(torch.ones(256, device="cuda"))
    opt = torch.optim.SGD([*lin.parameters(), w], lr=0.1)

    def step(x):
        return T.gelu(lin(T.rmsnorm(x, w)), "tanh").pow(2).mean()

    compiled = torch.compile(step)
    x = torch.randn(32, 256, device="cuda")
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = compiled(x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
