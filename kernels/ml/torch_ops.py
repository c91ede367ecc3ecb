"""The ML ops as PyTorch custom operators with autograd: ``torch.ops.kaio.rmsnorm`` and friends.

Importing this module (it needs torch: ``pip install kaio[torch]``) registers, with
``torch.library``, in the ``kaio`` namespace:

=====================================================  =========================================
op                                                     gradients (kaio kernels, backward.py)
=====================================================  =========================================
``rmsnorm(x, weight, eps=1e-6)``                       x, weight
``layernorm(x, weight, bias, eps=1e-5)``               x, weight, bias
``softmax(x)`` (last dimension)                        x (from the output)
``silu_gate(x, gate)``                                 x, gate
``gelu(x, approximate='none')`` ('none' or 'tanh')     x
=====================================================  =========================================

and their ``*_backward`` ops. The norms and softmax work over the last dimension of any shape.
Each op takes torch tensors and returns new ones: the tensors' memory is handed to the kaio
kernel as it is (no copy; non-contiguous inputs are made contiguous first, as torch's own ops
do), CUDA tensors are computed on torch's current stream (``.on(stream)`` /
``kernel[grid, block, 0, stream]``), CPU tensors on kaio's reference backend. The kaio backend
in use must match the tensors' device: CUDA tensors need the ``cuda`` backend (ROCm ones ``hip``),
CPU tensors ``reference`` (``kaio.set_backend``). f32, f16, bf16 and f64 (for gradcheck).

Every op has a fake (meta) implementation, so ``torch.compile`` traces through it as one opaque
node, and ``torch.library.opcheck`` passes on it (tests/test_torch_ops.py). The functions below
are the Python entry points (``kaio.kernels.ml.torch_ops.rmsnorm(x, w)``), the same as
``torch.ops.kaio.rmsnorm``.
"""
import torch

import kaio.kernels.ml.backward as B  # by full name: see attention.py
import kaio.kernels.ml.elementwise as E
import kaio.kernels.ml.norms as norms
from kaio.backends.runtime import DeviceArray, current

from .._launch import np_dtype

_DT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64"}


# --- handing torch tensors to kaio -------------------------------------------------------------
def _dt(op: str, *tensors) -> str:
    t = tensors[0]
    dt = _DT.get(t.dtype)
    if dt is None:
        raise TypeError(f"kaio::{op} takes float32, float16, bfloat16 or float64 tensors, got {t.dtype}")
    for other in tensors[1:]:
        if other.dtype != t.dtype or other.device != t.device:
            raise TypeError(f"kaio::{op}: every tensor must be {t.dtype} on {t.device}; got "
                            f"{other.dtype} on {other.device}")
    return dt


def _view(t: torch.Tensor) -> DeviceArray:
    """A kaio array over a contiguous tensor's memory (no copy; it keeps the tensor alive)."""
    rt = current()
    want = int(t.__dlpack_device__()[0])
    if want != rt.dlpack_device:
        where = "cuda (or hip for ROCm)" if t.is_cuda else "reference"
        raise RuntimeError(f"kaio torch ops: a {t.device} tensor needs kaio's {where} backend, the "
                           f"current one is {rt.name}; call kaio.set_backend(...)")
    if t.is_cuda and t.device.index != getattr(rt, "device", t.device.index):
        raise RuntimeError(f"kaio torch ops: the tensor is on {t.device}, kaio's current device is "
                           f"{rt.device}; call kaio.set_device({t.device.index}) (or use "
                           f"`with kaio.device({t.device.index}):`)")
    dtype = np_dtype(_DT[t.dtype])
    return DeviceArray(tuple(t.shape), dtype, runtime=rt, _ptr=t.data_ptr() if t.numel() else 0, _owner=t)


def _stream(t: torch.Tensor):
    """torch's current stream for a CUDA tensor (kaio launches there), None on the CPU."""
    return torch.cuda.current_stream(t.device) if t.is_cuda else None


def _new(like: torch.Tensor, dt: str):
    acc = torch.float64 if dt == "f64" else torch.float32
    return lambda shape: _view(torch.empty(shape, dtype=acc, device=like.device))


def _rows2d(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(-1, x.shape[-1]) if x.dim() else x.reshape(1, 1)


def _row_op(op: str, dt: str, x2: torch.Tensor, *args) -> None:
    """Launch row op ``op`` on torch's current stream: on the default (legacy) stream, kaio's
    default, as the library does (:func:`norms.row_kernel`, autotuned on a GPU); on another stream
    the untuned table's choice (the register-resident kernel when the row fits, else the general
    one) launched on that stream, so the op also works inside CUDA-graph capture."""
    stream = _stream(x2)
    if stream is None or stream.cuda_stream == 0:
        norms.row_kernel(op, dt, dt, tuple(x2.shape))(*args)
        return
    rows, cols = x2.shape
    plan = norms.resident_plan(cols) if dt != "f64" else None
    if plan is None:
        norms._GENERAL[op](dt, dt).on(stream)(*args)
        return
    vec = norms.resident_vec(dt, dt, cols)
    threads, per = norms.resident_plan(cols, vec)
    k = norms._RESIDENT[op](dt, dt, vec=vec, regs=norms.resident_regs(per))
    k[(rows,), (threads,), 0, stream](*args, PER=per)


# --- forward ops -------------------------------------------------------------------------------
@torch.library.custom_op("kaio::rmsnorm", mutates_args=())
def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * weight."""
    dt = _dt("rmsnorm", x, weight)
    x2 = _rows2d(x)
    y = torch.empty_like(x2)
    _row_op("rmsnorm", dt, x2, _view(x2), _view(weight.contiguous()), _view(y), float(eps))
    return y.view(x.shape)


@torch.library.custom_op("kaio::layernorm", mutates_args=())
def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last dimension: (x - mean) / sqrt(var + eps) * weight + bias."""
    dt = _dt("layernorm", x, weight, bias)
    x2 = _rows2d(x)
    y = torch.empty_like(x2)
    _row_op("layernorm", dt, x2, _view(x2), _view(weight.contiguous()), _view(bias.contiguous()),
            _view(y), float(eps))
    return y.view(x.shape)


@torch.library.custom_op("kaio::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension."""
    dt = _dt("softmax", x)
    x2 = _rows2d(x)
    y = torch.empty_like(x2)
    _row_op("softmax", dt, x2, _view(x2), _view(y))
    return y.view(x.shape)


@torch.library.custom_op("kaio::silu_gate", mutates_args=())
def silu_gate(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """silu(x) * gate, elementwise (same shapes)."""
    dt = _dt("silu_gate", x, gate)
    _same_shape("silu_gate", x, gate)
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    E.silu_gate_kernel(dt).on(_stream(x))(_flat(x), _flat(gate), _flat(y))
    return y


@torch.library.custom_op("kaio::gelu", mutates_args=())
def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """GELU, exact (erf) or ``approximate='tanh'``, as torch.nn.functional.gelu."""
    dt = _dt("gelu", x)
    _approx(approximate)
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    k = E.gelu_tanh_kernel(dt) if approximate == "tanh" else E.gelu_exact_kernel(dt)
    k.on(_stream(x))(_flat(x), _flat(y))
    return y


def _flat(t: torch.Tensor) -> DeviceArray:
    return _view(t.contiguous().view(-1))


def _same_shape(op: str, a, b) -> None:
    if a.shape != b.shape:
        raise ValueError(f"kaio::{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} differ")


def _approx(approximate: str) -> None:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"kaio::gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


# --- backward ops (kaio kernels) ---------------------------------------------------------------
@torch.library.custom_op("kaio::rmsnorm_backward", mutates_args=())
def rmsnorm_backward(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dweight) of :func:`rmsnorm`."""
    dt = _dt("rmsnorm_backward", x, weight, grad)
    x2, g2 = _rows2d(x), _rows2d(grad)
    dx, dw = torch.empty_like(x2), torch.empty_like(weight, memory_format=torch.contiguous_format)
    B.rmsnorm_backward_into(dt, _view(x2), _view(weight.contiguous()), _view(g2), eps, _view(dx),
                            _view(dw.view(1, -1)), _new(x, dt), _stream(x))
    return dx.view(x.shape), dw


@torch.library.custom_op("kaio::layernorm_backward", mutates_args=())
def layernorm_backward(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) of :func:`layernorm`."""
    dt = _dt("layernorm_backward", x, weight, grad)
    x2, g2 = _rows2d(x), _rows2d(grad)
    dx = torch.empty_like(x2)
    dwb = torch.empty((2, x2.shape[1]), dtype=weight.dtype, device=weight.device)
    B.layernorm_backward_into(dt, _view(x2), _view(weight.contiguous()), _view(g2), eps, _view(dx),
                              _view(dwb), _new(x, dt), _stream(x))
    return dx.view(x.shape), dwb[0].clone(), dwb[1].clone()


@torch.library.custom_op("kaio::softmax_backward", mutates_args=())
def softmax_backward(grad: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """dx of :func:`softmax` from its output ``y``."""
    dt = _dt("softmax_backward", y, grad)
    y2, g2 = _rows2d(y), _rows2d(grad)
    dx = torch.empty_like(y2)
    B.softmax_backward_into(dt, _view(y2), _view(g2), _view(dx), _stream(y))
    return dx.view(y.shape)


@torch.library.custom_op("kaio::silu_gate_backward", mutates_args=())
def silu_gate_backward(grad: torch.Tensor, x: torch.Tensor,
                       gate: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dgate) of :func:`silu_gate`."""
    dt = _dt("silu_gate_backward", x, gate, grad)
    dx = torch.empty_like(x, memory_format=torch.contiguous_format)
    dgate = torch.empty_like(dx)
    B.silu_gate_backward_into(dt, _flat(x), _flat(gate), _flat(grad), _flat(dx), _flat(dgate), _stream(x))
    return dx, dgate


@torch.library.custom_op("kaio::gelu_backward", mutates_args=())
def gelu_backward(grad: torch.Tensor, x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """dx of :func:`gelu`."""
    dt = _dt("gelu_backward", x, grad)
    _approx(approximate)
    dx = torch.empty_like(x, memory_format=torch.contiguous_format)
    B.gelu_backward_into(dt, _flat(x), _flat(grad), _flat(dx), approximate, _stream(x))
    return dx


# --- fake (meta) implementations: shapes and dtypes only, for torch.compile --------------------
def _like(x, *_):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


for _op in (rmsnorm, layernorm, softmax, silu_gate, gelu):
    _op.register_fake(_like)


@rmsnorm_backward.register_fake
def _(grad, x, weight, eps):
    return _like(x), _like(weight)


@layernorm_backward.register_fake
def _(grad, x, weight, eps):
    return _like(x), _like(weight), _like(weight)


@softmax_backward.register_fake
def _(grad, y):
    return _like(y)


@silu_gate_backward.register_fake
def _(grad, x, gate):
    return _like(x), _like(x)


@gelu_backward.register_fake
def _(grad, x, approximate="none"):
    return _like(x)


# --- autograd ----------------------------------------------------------------------------------
def _save_inputs(ctx, inputs, output):
    ctx.save_for_backward(*[t for t in inputs if isinstance(t, torch.Tensor)])
    ctx.args = [a for a in inputs if not isinstance(a, torch.Tensor)]


def _rmsnorm_bwd(ctx, grad):
    x, weight = ctx.saved_tensors
    dx, dw = rmsnorm_backward(grad, x, weight, *ctx.args)
    return dx, dw, None


def _layernorm_bwd(ctx, grad):
    x, weight, _ = ctx.saved_tensors
    dx, dw, db = layernorm_backward(grad, x, weight, *ctx.args)
    return dx, dw, db, None


def _softmax_save(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_bwd(ctx, grad):
    (y,) = ctx.saved_tensors
    return softmax_backward(grad, y)


def _silu_gate_bwd(ctx, grad):
    x, gate = ctx.saved_tensors
    return silu_gate_backward(grad, x, gate)


def _gelu_bwd(ctx, grad):
    (x,) = ctx.saved_tensors
    return gelu_backward(grad, x, *ctx.args), None


rmsnorm.register_autograd(_rmsnorm_bwd, setup_context=_save_inputs)
layernorm.register_autograd(_layernorm_bwd, setup_context=_save_inputs)
softmax.register_autograd(_softmax_bwd, setup_context=_softmax_save)
silu_gate.register_autograd(_silu_gate_bwd, setup_context=_save_inputs)
gelu.register_autograd(_gelu_bwd, setup_context=_save_inputs)

__all__ = ["rmsnorm", "layernorm", "softmax", "silu_gate", "gelu", "rmsnorm_backward",
           "layernorm_backward", "softmax_backward", "silu_gate_backward", "gelu_backward"]
