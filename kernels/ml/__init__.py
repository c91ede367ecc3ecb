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
import importlib

#: the entry points, each imported from its module on first use (``kaio.kernels.ml.softmax``
#: imports norms.py only); the library cases (cases.py) register through kaio.kernels.cases()
_API = {"silu_gate": "elementwise", "gelu": "elementwise", "rmsnorm": "norms",
        "layernorm": "norms", "softmax": "norms", "dequantize": "quant", "int8_matmul": "quant",
        "int4_matmul": "quant", "quantize_rows": "quant", "pack_int4": "quant",
        "unpack_int4": "quant", "quantized_attention": "attention"}

__all__ = list(_API)


def __getattr__(name: str):
    mod = _API.get(name)
    if mod is not None:
        return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    if not name.startswith("__"):   # a submodule not imported yet
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
