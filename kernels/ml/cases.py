"""Registry entries for the ML ops: inputs, references, sizes and tolerances.

Tolerances compare against float64 references computed from the *same* (already rounded)
inputs, so they only have to cover the kernel's own rounding:

- f32 outputs of elementwise math: kaio's portable exp/erf/tanh are within a few ulp (2^-23
  each), plus a handful of f32 roundings -> rtol 1e-6 with atol 1e-7 near zero;
- f16 outputs: one final rounding is at most half an ulp, 2^-11 ~ 4.9e-4 relative, plus the f32
  error above -> rtol 1e-3 (about 2 ulp) and atol 2^-14 for subnormal-range results;
- bf16 outputs: half an ulp is 2^-8 ~ 3.9e-3 -> rtol 8e-3 (about 2 ulp), atol 2^-14;
- row reductions in f32 over n columns: each of B threads (256 to 1024) sums n/B terms then a
  fixed tree of B partials: relative error <= (n/B + log2 B) * 2^-24 of the sum of |terms|
  (~2e-6 at n = 8192, B = 256), so rtol 1e-5 for f32 outputs.
"""
import numpy as np

from .._bench import empty, launcher, up
from .._launch import np_dtype
from ..registry import KernelCase, Tolerance, register
from . import attention, elementwise, gemm, norms, quant

_OUT_TOL = {
    "f32": (1e-7, 1e-6),
    "f16": (2.0 ** -14, 1e-3),
    "bf16": (2.0 ** -14, 8e-3),
}
_ROW_TOL_F32 = (1e-6, 1e-5)


def _tol(dt: str, f32=(1e-7, 1e-6), why="") -> Tolerance:
    atol, rtol = _OUT_TOL[dt] if dt != "f32" else f32
    return Tolerance(atol=atol, rtol=rtol, why=why or f"{dt} output rounding plus f32 math error")


def _itemsize(dt):
    return np.dtype(np_dtype(dt)).itemsize


# --- elementwise -------------------------------------------------------------------------------
def _vec_inputs(dt, nargs):
    def make(size, seed):
        g = np.random.default_rng(seed)
        arrs = [g.uniform(-6.0, 6.0, size).astype(np_dtype(dt)) for _ in range(nargs)]
        return {"x": arrs[0], **({"gate": arrs[1]} if nargs > 1 else {})}
    return make


_GELU_WHY = ("f32 GELU: 1 + erf(x/sqrt 2) cancels for x < 0 and keeps ~2^-23 absolute error, "
             "so y has absolute error <= 0.5 |x| 2^-23 <= 3.6e-7 for the |x| <= 6 inputs used")
for _dt in ("f32", "f16", "bf16"):
    suffix = "" if _dt == "f32" else f"_{_dt}"
    n_bytes = _itemsize(_dt)
    register(KernelCase(
        name=f"ml/silu_gate{suffix}", group="ml",
        make_inputs=_vec_inputs(_dt, 2),
        run=lambda i: {"y": elementwise.silu_gate(i["x"], i["gate"])},
        reference=lambda i: {"y": elementwise.silu_gate_ref(i["x"], i["gate"])},
        default_size=1 << 24, small_size=1 << 14, tolerance=_tol(_dt),
        flops=lambda n: 5.0 * n, bytes=lambda n, b=n_bytes: 3.0 * b * n,
        bench=lambda i, d=_dt: launcher(elementwise.silu_gate_kernel(d), *up(i, "x", "gate"),
                                        empty(i["x"].shape, i["x"].dtype)),
        description="x * sigmoid(x) * gate"))
    register(KernelCase(
        name=f"ml/gelu_exact{suffix}", group="ml",
        make_inputs=_vec_inputs(_dt, 1),
        run=lambda i: {"y": elementwise.gelu(i["x"])},
        reference=lambda i: {"y": elementwise.gelu_exact_ref(i["x"])},
        default_size=1 << 24, small_size=1 << 14,
        tolerance=_tol(_dt, f32=(4e-7, 1e-6), why=_GELU_WHY),
        flops=lambda n: 5.0 * n, bytes=lambda n, b=n_bytes: 2.0 * b * n,
        bench=lambda i, d=_dt: launcher(elementwise.gelu_exact_kernel(d), *up(i, "x"),
                                        empty(i["x"].shape, i["x"].dtype)),
        description="0.5 x (1 + erf(x / sqrt 2))"))
    register(KernelCase(
        name=f"ml/gelu_tanh{suffix}", group="ml",
        make_inputs=_vec_inputs(_dt, 1),
        run=lambda i: {"y": elementwise.gelu(i["x"], approximate="tanh")},
        reference=lambda i: {"y": elementwise.gelu_tanh_ref(i["x"])},
        default_size=1 << 24, small_size=1 << 14, tolerance=_tol(_dt),
        flops=lambda n: 9.0 * n, bytes=lambda n, b=n_bytes: 2.0 * b * n,
        bench=lambda i, d=_dt: launcher(elementwise.gelu_tanh_kernel(d), *up(i, "x"),
                                        empty(i["x"].shape, i["x"].dtype)),
        description="x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3)))"))


# --- row ops -----------------------------------------------------------------------------------
def _row_inputs(dt, with_bias):
    def make(size, seed):
        rows, cols = size
        g = np.random.default_rng(seed)
        d = np_dtype(dt)
        out = {"x": g.normal(0.0, 2.0, (rows, cols)).astype(d),
               "w": g.uniform(0.5, 1.5, cols).astype(d)}
        if with_bias:
            out["b"] = g.uniform(-0.5, 0.5, cols).astype(d)
        return out
    return make


_ROW_WHY = "f32 row sums (strided, then a 256- to 1024-way tree) plus the output dtype's rounding"
for _dt in ("f32", "f16", "bf16"):
    suffix = "" if _dt == "f32" else f"_{_dt}"
    b = _itemsize(_dt)
    tol = _tol(_dt, f32=_ROW_TOL_F32, why=_ROW_WHY)
    register(KernelCase(
        name=f"ml/rmsnorm{suffix}", group="ml", make_inputs=_row_inputs(_dt, False),
        run=lambda i: {"y": norms.rmsnorm(i["x"], i["w"], eps=1e-6)},
        reference=lambda i: {"y": norms.rmsnorm_ref(i["x"], i["w"], 1e-6)},
        default_size=(4096, 8192), small_size=(6, 300), tolerance=tol,
        flops=lambda s: 4.0 * s[0] * s[1], bytes=lambda s, b=b: 2.0 * b * s[0] * s[1],
        bench=lambda i, d=_dt: launcher(norms.row_kernel("rmsnorm", d, d, i["x"].shape),
                                        *up(i, "x", "w"),
                                        empty(i["x"].shape, i["x"].dtype), 1e-6),
        description="one block per row (held in registers up to 32768 columns), block_sum of squares"))
    register(KernelCase(
        name=f"ml/layernorm{suffix}", group="ml", make_inputs=_row_inputs(_dt, True),
        run=lambda i: {"y": norms.layernorm(i["x"], i["w"], i["b"], eps=1e-5)},
        reference=lambda i: {"y": norms.layernorm_ref(i["x"], i["w"], i["b"], 1e-5)},
        default_size=(4096, 8192), small_size=(6, 300), tolerance=tol,
        flops=lambda s: 7.0 * s[0] * s[1], bytes=lambda s, b=b: 2.0 * b * s[0] * s[1],
        bench=lambda i, d=_dt: launcher(norms.row_kernel("layernorm", d, d, i["x"].shape),
                                        *up(i, "x", "w", "b"),
                                        empty(i["x"].shape, i["x"].dtype), 1e-5),
        description="one block per row (held in registers up to 32768 columns), two-pass mean/variance"))
    register(KernelCase(
        name=f"ml/softmax{suffix}", group="ml", make_inputs=_row_inputs(_dt, False),
        run=lambda i: {"y": norms.softmax(i["x"])},
        reference=lambda i: {"y": norms.softmax_ref(i["x"])},
        default_size=(4096, 8192), small_size=(6, 300),
        tolerance=_tol(_dt, f32=(1e-9, 1e-5), why=_ROW_WHY + "; exp within a few ulp"),
        flops=lambda s: 5.0 * s[0] * s[1], bytes=lambda s, b=b: 2.0 * b * s[0] * s[1],
        bench=lambda i, d=_dt: launcher(norms.row_kernel("softmax", d, d, i["x"].shape),
                                        *up(i, "x"),
                                        empty(i["x"].shape, i["x"].dtype)),
        description="max-subtracted, one block per row (held in registers up to 32768 columns)"))


# --- quantized ---------------------------------------------------------------------------------
def _dequant_inputs(size, seed):
    rows, cols = size
    g = np.random.default_rng(seed)
    return {"q": g.integers(-128, 128, (rows, cols), dtype=np.int8),
            "scale": g.uniform(0.001, 0.05, rows).astype(np.float32)}


register(KernelCase(
    name="ml/dequantize_int8", group="ml", make_inputs=_dequant_inputs,
    run=lambda i: {"y": quant.dequantize(i["q"], i["scale"])},
    reference=lambda i: {"y": quant.dequantize_ref(i["q"], i["scale"])},
    default_size=(4096, 4096), small_size=(64, 100),
    tolerance=Tolerance(rtol=2.0 ** -24, why="one f32 product of exact operands: half an ulp"),
    flops=lambda s: 1.0 * s[0] * s[1], bytes=lambda s: 5.0 * s[0] * s[1],
    bench=lambda i: launcher(quant.dequantize_launch("f32", i["q"].shape), *up(i, "q", "scale"),
                             empty(i["q"].shape, np.float32)),
    description="per-channel scales"))


def _w8a8_inputs(size, seed):
    m, k, n = size
    g = np.random.default_rng(seed)
    return {"a": g.integers(-127, 128, (m, k), dtype=np.int8),
            "b": g.integers(-127, 128, (k, n), dtype=np.int8),
            "sa": g.uniform(0.001, 0.02, m).astype(np.float32),
            "sb": g.uniform(0.001, 0.02, n).astype(np.float32)}


register(KernelCase(
    name="ml/int8_matmul_w8a8", group="ml", make_inputs=_w8a8_inputs,
    run=lambda i: {"c": quant.int8_matmul(i["a"], i["b"], i["sa"], i["sb"])},
    reference=lambda i: {"c": quant.int8_matmul_ref(i["a"], i["b"], i["sa"], i["sb"])},
    default_size=(2048, 4096, 2048), small_size=(16, 64, 24),
    tolerance=Tolerance(rtol=4 * 2.0 ** -24,
                        why="exact int32 sum, then three f32 roundings (cast, two scales): "
                            "3 half-ulps, with margin"),
    flops=lambda s: 2.0 * s[0] * s[1] * s[2],
    bytes=lambda s: float(s[0] * s[1] + s[1] * s[2] + 4 * s[0] * s[2]),
    bench=lambda i: launcher(quant.w8a8_launch(i["a"].shape[0], i["b"].shape[1]),
                             *up(dict(i, sa=i["sa"].reshape(-1, 1)), "a", "b", "sa", "sb"),
                             empty((i["a"].shape[0], i["b"].shape[1]), np.float32)),
    description="int8 x int8 -> int32 accumulate, per-row/per-col scales"))


def _w4a16_inputs(size, seed, dt="f16"):
    m, k, n, group = size
    g = np.random.default_rng(seed)
    w = g.integers(-8, 8, (k, n), dtype=np.int8)
    return {"x": g.uniform(-1.0, 1.0, (m, k)).astype(np_dtype(dt)),
            "packed": quant.pack_int4(w),
            "scales": g.uniform(0.005, 0.02, (k // group, n)).astype(np_dtype(dt)),
            "group": group}


register(KernelCase(
    name="ml/int4_matmul_w4a16", group="ml", make_inputs=_w4a16_inputs,
    run=lambda i: {"y": quant.int4_matmul(i["x"], i["packed"], i["scales"], i["group"])},
    reference=lambda i: {"y": quant.int4_matmul_ref(i["x"], i["packed"], i["scales"], i["group"])},
    default_size=(256, 4096, 4096, 128), small_size=(8, 64, 16, 16),
    tolerance=Tolerance(atol=1e-3, rtol=1e-3,
                        why="f16 output: half an ulp is <= 2^-11 relative and 2^-11 absolute "
                            "below 1; the f32 accumulation error (~1e-5 here) is far smaller"),
    flops=lambda s: 2.0 * s[0] * s[1] * s[2],
    bytes=lambda s: float(2 * s[0] * s[1] + s[1] * s[2] // 2 + 2 * s[0] * s[2]),
    bench=lambda i: launcher(quant.w4a16_launch("f16", i["x"].shape[0], i["packed"].shape[1],
                                                i["group"]),
                             *up(i, "x", "packed", "scales"),
                             empty((i["x"].shape[0], i["packed"].shape[1]), i["x"].dtype), i["group"]),
    description="group-wise scales, two nibbles per byte (low first)"))


def _attn_inputs(size, seed):
    s, dm, d = size
    g = np.random.default_rng(seed)

    def w():
        return g.integers(-127, 128, (dm, d), dtype=np.int8)
    return {"x": g.normal(0.0, 1.0, (s, dm)).astype(np.float32),
            "wq": w(), "wk": w(), "wv": w(),
            "sq": np.full(d, 0.02 / np.sqrt(dm), np.float32) * g.uniform(0.5, 1.5, d).astype(np.float32),
            "sk": np.full(d, 0.02 / np.sqrt(dm), np.float32) * g.uniform(0.5, 1.5, d).astype(np.float32),
            "sv": np.full(d, 0.02 / np.sqrt(dm), np.float32) * g.uniform(0.5, 1.5, d).astype(np.float32)}


_ATTN_TOL = Tolerance(atol=1e-5, rtol=1e-4,
                      why="f32 projections (~2e-7), f32 dot products over d, exp of scores with "
                          "~1e-6 absolute error, and a weighted sum over S keys")
for _causal in (False, True):
    register(KernelCase(
        name="ml/quantized_attention" + ("_causal" if _causal else ""), group="ml",
        make_inputs=_attn_inputs,
        run=lambda i, c=_causal: {"o": attention.quantized_attention(
            i["x"], i["wq"], i["wk"], i["wv"], i["sq"], i["sk"], i["sv"], causal=c)},
        reference=lambda i, c=_causal: {"o": attention.quantized_attention_ref(
            i["x"], i["wq"], i["wk"], i["wv"], i["sq"], i["sk"], i["sv"], causal=c)},
        default_size=(1024, 512, 128), small_size=(32, 32, 16), tolerance=_ATTN_TOL,
        flops=lambda s: 2.0 * 3 * s[0] * s[1] * s[2] + 4.0 * s[0] * s[0] * s[2],
        bytes=lambda s: float(4 * s[0] * s[1] + 3 * s[1] * s[2] + 8 * s[0] * s[0] + 4 * s[0] * s[2]),
        bench=lambda i, c=_causal: attention.device_pipeline(
            *up(i, "x", "wq", "wk", "wv", "sq", "sk", "sv"), causal=c),
        description="int8 Q/K/V projections + softmax(QK^T/sqrt d) V"))


# --- the library GEMM on the matrix units (kernels/ml/gemm.py) ---------------------------------
def _gemm_inputs(size, seed, dt="f16"):
    m, n, k = size
    g = np.random.default_rng(seed)
    return {"a": g.uniform(-1.0, 1.0, (m, k)).astype(np_dtype(dt)),
            "b": g.uniform(-1.0, 1.0, (k, n)).astype(np_dtype(dt))}


def _gemm_bench(i):
    a, b = up(i, "a", "b")
    c = empty((a.shape[0], b.shape[1]), np.float32)
    gemm.gemm(a, b, c)                                # tunes the tiling once, outside the timing
    return lambda: gemm.gemm(a, b, c)


for _dt in ("f16", "bf16"):
    register(KernelCase(
        name=f"ml/gemm_{_dt}", group="ml",
        make_inputs=lambda size, seed, dt=_dt: _gemm_inputs(size, seed, dt),
        run=lambda i: {"c": gemm.gemm(i["a"], i["b"])},
        reference=lambda i: {"c": i["a"].astype(np.float64) @ i["b"].astype(np.float64)},
        default_size=(4096, 4096, 4096), small_size=(40, 24, 48),
        tolerance=Tolerance(atol=2e-3, rtol=1e-3,
                            why="exact products, f32 sums in another order on the matrix units: "
                                "the error grows like sqrt(K) * 2^-24 * |A||B| (K = 4096: ~1e-5), "
                                "bounded by 2 K 2^-24 sum|ab| (docs/language.md)"),
        flops=lambda s: 2.0 * s[0] * s[1] * s[2],
        bytes=lambda s, dt=_dt: float(2 * (s[0] * s[2] + s[2] * s[1]) + 4 * s[0] * s[1]),
        bench=_gemm_bench,
        description=f"{_dt} x {_dt} -> f32 on the tensor cores (mma.sync), tiling autotuned"))
