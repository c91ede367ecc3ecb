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
#: the entry points, each imported from its module on first use (``kaio.kernels.ml.softmax``
#: imports norms.py only); the library cases (cases.py) register through kaio.kernels.cases()
__all__ = ["silu_gate", "gelu", "rmsnorm", "layernorm", "softmax", "dequantize", "int8_matmul",
           "int4_matmul", "quantize_rows", "pack_int4", "unpack_int4", "quantized_attention"]


def __getattr__(name: str):
    """An entry point of ``__all__``, or a submodule the package used to import (cases.py
    imports them all), on first use; plain imports: ``from . import m`` would ask this
    function again."""
    if name in ("silu_gate", "gelu"):
        import kaio.kernels.ml.elementwise as m  # lazy: import time, ~10 ms
    elif name in ("rmsnorm", "layernorm", "softmax"):
        import kaio.kernels.ml.norms as m  # lazy: import time, ~25 ms (with the autotuner)
    elif name in ("dequantize", "int8_matmul", "int4_matmul", "quantize_rows", "pack_int4",
                  "unpack_int4"):
        import kaio.kernels.ml.quant as m  # lazy: import time, ~25 ms
    elif name == "quantized_attention":
        import kaio.kernels.ml.attention as m  # lazy: import time, ~120 ms (GEMM tiles, ports)
    elif not name.startswith("__"):
        import kaio.kernels.ml.cases  # noqa: F401  # lazy: import time, ~120 ms (every ML module)
        if name in globals():
            return globals()[name]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(m, name)
