"""The ML ops of kaio.kernels: every case at its CI size on the reference backend against its
float64 numpy reference, plus the properties the references alone would not catch (packing
layout, stability on huge logits, widths that are not multiples of the block, failing checks)."""
import numpy as np
import pytest

import kaio
import kaio.kernels as K
from kaio.kernels import Tolerance, compare, ml
from kaio.kernels.ml import quant

ML_CASES = [c.name for c in K.cases("ml")]


def test_registry_has_the_nine_ops_in_three_dtypes():
    names = set(ML_CASES)
    for op in ("silu_gate", "gelu_exact", "gelu_tanh", "rmsnorm", "layernorm", "softmax"):
        assert {f"ml/{op}", f"ml/{op}_f16", f"ml/{op}_bf16"} <= names
    for op in ("dequantize_int8", "int8_matmul_w8a8", "int4_matmul_w4a16", "quantized_attention",
               "quantized_attention_causal"):
        assert f"ml/{op}" in names
    for c in K.cases("ml"):
        assert c.tolerance.why, f"{c.name} gives no reason for its tolerance"
        assert c.tolerance.exact or c.tolerance.rtol <= 1e-2, f"{c.name}: tolerance too loose"


@pytest.mark.parametrize("name", ML_CASES)
def test_case_matches_reference(name, reference):
    case = K.get(name)
    inputs = case.make_inputs(case.small_size, seed=0)
    before = {k: np.copy(v) for k, v in inputs.items() if isinstance(v, np.ndarray)}
    outputs = case.run(inputs)
    ok, ratio = case.check(outputs, case.reference(inputs))
    assert ok, f"{name}: worst error is {ratio:.3g} x its tolerance ({case.tolerance.describe()})"
    for k, v in before.items():  # run() must leave its inputs alone
        np.testing.assert_array_equal(inputs[k], v)


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "softmax"])
def test_row_ops_wide_rows_not_a_multiple_of_the_block(op, reference):
    case = K.get(f"ml/{op}")
    inputs = case.make_inputs((3, 4099), seed=5)
    ok, ratio = case.check(case.run(inputs), case.reference(inputs))
    assert ok, ratio


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "softmax"])
def test_row_ops_give_the_same_bits_at_warp_width_32_and_64(op, reference):
    # block reductions combine in a fixed order, so AMD's 64-lane waves match NVIDIA's 32
    from kaio.backends.reference import ReferenceBackend
    from kaio.kernels.ml import norms
    kernel = getattr(norms, f"{op}_kernel")("f32", "f32")
    g = np.random.default_rng(7)
    x = g.normal(0, 3, (3, 1000)).astype(np.float32)
    w, b = g.uniform(0.5, 1.5, 1000).astype(np.float32), g.normal(size=1000).astype(np.float32)
    args = {"rmsnorm": [x, w], "layernorm": [x, w, b], "softmax": [x]}[op]
    extra = {"rmsnorm": [1e-6], "layernorm": [1e-5], "softmax": []}[op]
    outs = []
    for width in (32, 64):
        backend = ReferenceBackend(warp_size=width)
        compiled = backend.compile(kernel.specialize_ir({}))
        y = np.empty_like(x)
        backend.launch(compiled, (3, 1, 1), (256, 1, 1), [*args, y, *extra])
        outs.append(y)
    np.testing.assert_array_equal(outs[0], outs[1])


def _row_args(op, dt, rows, cols, seed):
    """Inputs of row op ``op`` (the kernel's arguments before ``y``, and the ones after)."""
    g = np.random.default_rng(seed)
    x = g.normal(0, 4, (rows, cols)).astype(np.float32)
    w, b = g.uniform(0.5, 1.5, cols).astype(np.float32), g.normal(size=cols).astype(np.float32)
    if dt != "f32":
        x, w, b = (a.astype(kaio.dtypes.from_name(dt).storage_np) for a in (x, w, b))
    return ({"rmsnorm": [x, w], "layernorm": [x, w, b], "softmax": [x]}[op],
            {"rmsnorm": [1e-6], "layernorm": [1e-5], "softmax": []}[op])


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("cols", [1, 200, 257, 1000, 8192])
@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "softmax"])
def test_register_resident_row_ops_agree_with_the_general_kernels(backend, op, dt, cols):
    """The host row ops hold rows of up to 32768 columns in registers. Rows a multiple of
    16 / itemsize long (200, 1000, 8192) are held in 16-byte chunks per thread, so each thread
    sums its columns in another order than the general kernel (which strides by one column):
    both must be within the op's registered tolerance of the float64 reference. Other rows
    (1, 257) keep the one-column stride: the same bits as the general kernel at the same block
    size."""
    from kaio.kernels.ml import norms
    args, extra = _row_args(op, dt, 3, cols, cols)
    vec = norms.resident_vec(dt, dt, cols)
    assert vec == (1 if cols in (1, 257) else 4 if dt == "f32" else 8)
    threads, per = norms.resident_plan(cols, vec)
    assert threads * per >= cols and per <= norms.RESIDENT_MAX_PER and per % vec == 0
    want = np.empty_like(args[0])
    getattr(norms, f"{op}_kernel")(dt, dt)[(3,), (threads,)](*args, want, *extra)
    got = getattr(norms, op)(*args, *extra)
    if vec == 1:
        assert got.tobytes() == want.tobytes()
        return
    case = K.get(f"ml/{op}" + ("" if dt == "f32" else f"_{dt}"))
    ref = {"y": getattr(norms, f"{op}_ref")(*args, *extra)}
    for y in (got, want):
        ok, ratio = case.check({"y": y}, ref)
        assert ok, (ratio, case.tolerance.describe())


def test_resident_plan_block_sizes_and_the_fallback_width():
    from kaio.kernels.ml import norms
    assert norms.resident_plan(1) == (256, 1) and norms.resident_plan(1000) == (256, 4)
    assert norms.resident_plan(8192) == (512, 16) and norms.resident_plan(16384) == (512, 32)
    assert norms.resident_plan(16385) == (1024, 32) and norms.resident_plan(32768) == (1024, 32)
    assert norms.resident_plan(32769) is None
    # 16-byte chunks: at least one chunk per thread, fewer threads for narrow rows
    assert norms.resident_plan(8192, 8) == (512, 16) and norms.resident_plan(1000, 8) == (128, 8)
    assert norms.resident_plan(64, 4) == (32, 4) and norms.resident_plan(32768, 8) == (1024, 32)


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "softmax"])
def test_row_kernel_picks_resident_up_to_32768_columns_then_the_general_kernel(op):
    """The untuned choice (the first candidate, kernels/ml/row_tuning.py) of row_kernel."""
    from kaio.kernels.ml import norms, row_tuning
    general = getattr(norms, f"{op}_kernel")("f32", "f32")
    for cols, want_general in ((32769, True), (32768, False)):
        default = row_tuning.row_configs("f32", "f32", 2, cols)[0]
        run = norms.launch_for(op, "f32", "f32", (2, cols), default)
        assert (run is general) == want_general, (cols, default)


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "softmax"])
def test_row_ops_widest_resident_and_first_general_widths_match_reference(op, reference):
    """1024 threads x 32 columns (the widest resident row) and one column more (the general
    kernels) both agree with the float64 reference."""
    case = K.get(f"ml/{op}")
    for cols in (20000, 32769):
        inputs = case.make_inputs((1, cols), seed=cols)
        ok, ratio = case.check(case.run(inputs), case.reference(inputs))
        assert ok, (cols, ratio)


def test_softmax_is_stable_on_huge_logits(reference):
    x = np.array([[1e4, 1e4 - 1.0, -1e4, 0.0], [-3e4, -3e4, -3e4, -3e4]], np.float32)
    y = ml.softmax(x)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(y[1], 0.25, rtol=1e-6)
    np.testing.assert_allclose(y[0, :2], [1 / (1 + np.exp(-1.0)), np.exp(-1.0) / (1 + np.exp(-1.0))],
                               rtol=1e-6)


@pytest.mark.parametrize("out_dt", ["f32", "f16", "bf16"])
def test_softmax_exp_form_follows_the_result_dtype(out_dt):
    """16-bit results: the hardware exp2 of (x - max) log2 e, without the fast exp's range
    reduction (whose shift constant 1.5 * 2^23 + 127 is 0f4B40007F in PTX); f32 keeps it. Both
    the general and the register-resident kernels."""
    from kaio.kernels.ml import norms
    kernels = [(norms.softmax_kernel("f32", out_dt), {}),
               (norms.softmax_resident_kernel("f32", out_dt, vec=4), {"PER": 16})]
    for k, consts in kernels:
        ptx = k.emit("ptx", "sm_90", **consts)
        assert "ex2.approx" in ptx
        assert ("0f4B40007F" in ptx) == (out_dt == "f32"), k.name


@pytest.mark.parametrize("out_dt", ["f16", "bf16"])
def test_softmax_16_bit_results_within_an_ulp_of_float64(reference, out_dt):
    """Rows spanning e^0 .. e^-100 (the unreduced exp2's argument error grows with |x - max|):
    every 16-bit probability within one ulp of the float64 softmax."""
    from kaio import dtypes as dt
    from kaio.kernels.ml import norms
    np_out = {"f16": np.float16, "bf16": dt.bf16.storage_np}[out_dt]
    x = -np.linspace(0, 100, 4 * 512).reshape(4, 512).astype(np.float32)
    y = np.empty(x.shape, np_out)
    norms.softmax_kernel("f32", out_dt)(x, y)
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    f32_ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    ulp = f32_ulp * 2.0 ** {"f16": 13, "bf16": 16}[out_dt]
    tiny = 2.0 ** (-24 if out_dt == "f16" else -133)       # the 16-bit format's subnormal step
    assert (np.abs(y.astype(np.float64) - want) <= np.maximum(ulp, tiny)).all()


def test_int4_packing_is_low_nibble_first_twos_complement():
    w = np.array([[1, -8], [-1, 7], [0, 3], [-2, -5]], np.int8)     # [K=4, N=2]
    packed = quant.pack_int4(w)
    assert packed.dtype == np.uint8 and packed.shape == (2, 2)
    # byte (0, 0) holds k=0 (1 -> 0x1) low and k=1 (-1 -> 0xF) high
    assert packed[0, 0] == 0xF1 and packed[0, 1] == 0x78 and packed[1, 0] == 0xE0
    np.testing.assert_array_equal(quant.unpack_int4(packed), w)
    with pytest.raises(ValueError):
        quant.pack_int4(np.array([[8], [0]]))


def test_int4_matmul_small_exact_values(reference):
    w = np.array([[1, -8], [-1, 7], [2, 3], [-2, -5]], np.int8)
    x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float16)
    scales = np.array([[0.5, 0.25], [2.0, 1.0]], np.float16)           # group = 2
    y = ml.int4_matmul(x, quant.pack_int4(w), scales, group=2)
    expect = [0.5 * (1 - 2) + 2.0 * (6 - 8), 0.25 * (-8 + 14) + 1.0 * (9 - 20)]
    np.testing.assert_array_equal(y.astype(np.float64), [expect])


def test_int8_matmul_accumulates_exactly_in_int32(reference):
    k = 512
    a = np.full((2, k), 127, np.int8)
    b = np.full((k, 3), -127, np.int8)
    c = ml.int8_matmul(a, b, np.ones(2, np.float32), np.ones(3, np.float32))
    np.testing.assert_array_equal(c, np.float32(-127 * 127 * k))


def test_quantize_rows_matches_reference_exactly(reference):
    x = np.random.default_rng(2).normal(0, 3, (5, 77)).astype(np.float32)
    x[3] = 0.0                                      # an all-zero row gets scale 1, q = 0
    q, s = ml.quantize_rows(x)
    q_ref, s_ref = quant.quantize_rows_ref(x)
    np.testing.assert_array_equal(q, q_ref)
    np.testing.assert_array_equal(s, s_ref)
    assert np.abs(q).max() == 127


def test_dequantize_per_channel(reference):
    q = np.array([[-128, 0, 127], [1, 2, 3]], np.int8)
    y = ml.dequantize(q, np.array([0.5, 2.0], np.float32))
    np.testing.assert_array_equal(y, [[-64.0, 0.0, 63.5], [2.0, 4.0, 6.0]])


def test_causal_attention_first_row_attends_only_to_itself(reference):
    case = K.get("ml/quantized_attention_causal")
    inputs = case.make_inputs((8, 16, 8), seed=3)
    out = case.run(inputs)["o"]
    xq, sx = quant.quantize_rows_ref(inputs["x"])
    v = quant.int8_matmul_ref(xq, inputs["wv"], sx, inputs["sv"])
    np.testing.assert_allclose(out[0], v[0], rtol=1e-5, atol=1e-6)   # softmax over one key is 1
    full = K.get("ml/quantized_attention").run(inputs)["o"]
    assert not np.allclose(full[0], v[0], rtol=1e-3)                   # unmasked row 0 mixes keys


def test_attention_device_pipeline_matches_the_host_path(reference):
    # the launch-only pipeline used for timing, run here with numpy arrays as its "device" memory
    case = K.get("ml/quantized_attention_causal")
    inputs = case.make_inputs((24, 16, 8), seed=4)
    names = ("x", "wq", "wk", "wv", "sq", "sk", "sv")
    launch = ml.attention.device_pipeline(*(inputs[n] for n in names), causal=True, alloc=np.empty)
    launch()
    np.testing.assert_array_equal(launch.output, case.run(inputs)["o"])


def test_compare_fails_outside_the_tolerance():
    ref = {"y": np.array([1.0, -2.0, 0.0])}
    tol = Tolerance(atol=1e-6, rtol=1e-3, why="test")
    assert compare({"y": ref["y"] * (1 + 5e-4)}, ref, tol)[0]
    assert not compare({"y": ref["y"] * (1 + 5e-3)}, ref, tol)[0]
    assert not compare({"y": np.array([1.0, -2.0, 1e-5])}, ref, tol)[0]
    assert not compare({"y": np.array([1.0, np.nan, 0.0])}, ref, tol)[0]
    assert not compare({"y": np.zeros(2)}, ref, tol)[0]
    assert not compare({"x": ref["y"]}, ref, tol)[0]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ML_CASES)
def test_case_default_size_on_gpu(name):
    from kaio import backends as be
    from kaio.showcase import pick_backend
    previous = be._current
    kaio.set_backend(pick_backend(None))
    try:
        case = K.get(name)
        inputs = case.make_inputs(case.default_size, seed=0)
        ok, ratio = case.check(case.run(inputs), case.reference(inputs))
        assert ok, f"{name}: worst error {ratio:.3g} x tolerance"
    finally:
        be._current = previous


def test_f32_silu_gate_moves_16_bytes_per_access():
    """blocked(4): full tiles of the f32 SiLU-gate load both inputs and store the output with
    16-byte vector accesses (one element per thread gave 4-byte ones)."""
    ptx = ml.elementwise.silu_gate_kernel("f32").emit("ptx", target="sm_90")
    assert ptx.count("ld.global.nc.v4.f32") == 2 and ptx.count("st.global.v4.f32") == 1
