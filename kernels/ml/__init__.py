"""ML ops written in kaio's kernel language (the set KAIO showcases, at real sizes).

Host entry points take and return numpy arrays:

- :func:`silu_gate`, :func:`gelu` (exact or tanh) -- elementwise, f32/f16/bf16;
- :func:`rmsnorm`, :func:`layernorm`, :func:`softmax` -- one block per row, any width;
- :func:`dequantize`, :func:`int8_matmul` (W8A8), :func:`int4_matmul` (W4A16),
  :func:`quantize_rows`, :func:`pack_int4` -- quantized ops;
- :func:`quantized_attention` -- int8 projections + scaled dot-product attention.

Gradients of the first six: :mod:`kaio.kernels.ml.backward` (kaio kernels, numpy entry points);
as torch custom ops with autograd: ``import kaio.kernels.ml.torch_ops`` (needs torch;
docs/interop.md).
"""
from . import cases  # noqa: F401  (registers the library cases)
from .attention import quantized_attention
from .elementwise import gelu, silu_gate
from .norms import layernorm, rmsnorm, softmax
from .quant import dequantize, int4_matmul, int8_matmul, pack_int4, quantize_rows, unpack_int4

__all__ = ["silu_gate", "gelu", "rmsnorm", "layernorm", "softmax", "dequantize", "int8_matmul",
           "int4_matmul", "quantize_rows", "pack_int4", "unpack_int4", "quantized_attention"]
