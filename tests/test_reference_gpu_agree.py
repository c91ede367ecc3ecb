"""The reference backend and the GPU backends agree bit for bit on the IR's edge cases
(signed zeros in min/max, NaN in min/max and compares, saturating float->int casts, f16/bf16
rounding, shifts past the width). Runs on every GPU backend present; skipped without one."""
from __future__ import annotations

import numpy as np
import pytest

import kaio
from kaio import bf16, f16, f32, i32, u8

SPECIALS = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, -2.5, 3e9, -3e9, 255.5, 65504.0,
                     1e-40, 0.1], np.float32)


@kaio.kernel
def edge_cases(x: kaio.In[f32], y: kaio.In[f32], s: kaio.In[i32], mn: kaio.Raw[f32],
               mx: kaio.Raw[f32], lt: kaio.Raw[i32], ne: kaio.Raw[i32], ci: kaio.Raw[i32],
               cu: kaio.Raw[u8], h: kaio.Raw[f16], b: kaio.Raw[bf16], sh: kaio.Raw[i32]):
    i = kaio.global_id(0)
    if i < x.shape[0]:
        mn[i] = min(x[i], y[i])
        mx[i] = max(x[i], y[i])
        lt[i] = kaio.i32(x[i] < y[i])
        ne[i] = kaio.i32(x[i] != y[i])
        ci[i] = kaio.i32(x[i])
        cu[i] = kaio.u8(x[i])
        h[i] = kaio.f16(x[i]) + kaio.f16(y[i])
        b[i] = kaio.bf16(x[i]) * kaio.bf16(y[i])
        sh[i] = (s[i] << s[i]) + (s[i] >> (s[i] + 30))


def _run():
    n = len(SPECIALS) ** 2
    x = np.repeat(SPECIALS, len(SPECIALS))
    y = np.tile(SPECIALS, len(SPECIALS))
    s = (np.arange(n) % 40 - 5).astype(np.int32)
    outs = [np.zeros(n, t) for t in (np.float32, np.float32, np.int32, np.int32, np.int32, np.uint8,
                                     f16.np, bf16.np, np.int32)]
    edge_cases[-(-n // 64), 64](x, y, s, *outs)
    return [_bits(o) for o in outs]


def _bits(o):
    """Bits to compare: exact, except that every NaN counts as one value. NaN payloads are not
    part of kaio's promise (vendors produce different canonical NaNs); signed zeros are."""
    bits = o.view(f"u{o.itemsize}").copy()
    if o.dtype.kind == "f" or o.dtype.name == "bfloat16":
        bits[np.isnan(o.astype(np.float32))] = 0x7FFF
    return bits


def _on(name):
    from kaio import backends as be
    previous = be._current
    kaio.set_backend(name)
    try:
        return _run()
    finally:
        be._current = previous


@pytest.mark.gpu
@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_gpu_matches_reference_bitwise(target):
    from kaio.backends import availability
    ok, why = availability(target)
    if not ok:
        pytest.skip(f"{target}: {why}")
    names = ["min", "max", "lt", "ne", "f32->i32", "f32->u8", "f16 add", "bf16 mul", "shifts"]
    for name, ref, got in zip(names, _on("reference"), _on(target)):
        np.testing.assert_array_equal(got, ref, err_msg=f"{target} differs from reference: {name}")


def test_reference_edge_cases_are_what_the_ir_says():
    """The same kernel on the reference backend, checked against the IR rules directly."""
    mn, mx, lt, ne, ci, cu, h, b, sh = _on("reference")
    x = np.repeat(SPECIALS, len(SPECIALS)).astype(np.float64)
    y = np.tile(SPECIALS, len(SPECIALS)).astype(np.float64)
    both_zero = (x == 0) & (y == 0)
    mnf = mn.view(np.float32)
    assert (np.signbit(mnf[both_zero]) == (np.signbit(x) | np.signbit(y))[both_zero]).all()
    one_nan = np.isnan(x) ^ np.isnan(y)
    np.testing.assert_array_equal(mnf[one_nan], np.where(np.isnan(x), y, x)[one_nan].astype(np.float32))
    assert (ne.astype(bool) == (x != y)).all() and (lt.astype(bool) == (x < y)).all()
    want_ci = np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x, posinf=3e9, neginf=-3e9)),
                                               -2**31, 2**31 - 1)).astype(np.int64)
    np.testing.assert_array_equal(ci.view(np.int32), want_ci)
    want_cu = np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x, posinf=1e9, neginf=-1e9)),
                                               0, 255))
    np.testing.assert_array_equal(cu, want_cu.astype(np.uint8))
