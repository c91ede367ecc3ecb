"""Exact GELU for f16/bf16 results: y = x Phi(x) from one exponential, portable (IEEE f32 ops).

The f32 exact GELU computes 0.5 x (1 + erf(x / sqrt 2)) with kaio.math.erf, ~40 operations
accurate to 0.8 f32 ulp, which a 16-bit result does not need: with half the bytes to move,
that erf set the cost of the f16/bf16 kernels (H200 2026-12-01: +60% over tanh-GELU). And for
x < 0 the sum 1 + erf cancels: the f32 erf's absolute error ~2^-24 becomes a relative error
2^-24 / Phi(x) of y, so an erf of 16-bit accuracy would be wrong there. Here Phi is computed
without the cancellation, from the lower tail P = Phi(-|x|) = 1 - Phi(|x|):

    P = 2^E,  E = L(min(|x|, AMAX)) - C x^2,  y = x P (x < 0) or x (1 - P) (x >= 0)

- x is a 16-bit value, so x^2 is exact in f32 (at most 22 significant bits); C = log2(e)/2
  rounded to f32, and L(a) ~ log2 Phi(-a) + C a^2 is a polynomial (degree 7 for f16 on [0, 6],
  9 for bf16 on [0, 13.75]) fitted by scripts/fit_gelu16.py with that rounded C;
- 2^E: E is clamped to -151, s = E + SHIFT rounds it to the integer n (1.5 2^23 + 151 puts n + 151
  in s's low bits), f = E - n exactly (|f| <= 1/2), 2^f by a degree-4 polynomial whose
  coefficients carry 2^-24, times the float whose exponent field is s's low bits (n + 151, so the
  scale is 2^(n + 24); n = -151 gives the field 0, the value 0.0): P = p 2^n rounded once, also
  where it is subnormal in f32;
- beyond AMAX (clamped argument of L) y underflows the 16-bit format: f16 |y| < 2^-25 beyond 5.8,
  bf16 |y| < 2^-134 beyond 13.6; huge |x| (x^2 = inf for bf16) reach E = -151: P = 0, y = x
  (x > 0) or -0; NaN stays NaN (y = x q), +-inf give inf and NaN as the float64 formula does.

Measured over every finite f16 and bf16 input (scripts/fit_gelu16.py, tests/test_gelu16.py):
the f32 y is within 2^-17.1 relative (f16 fit) and 2^-14.7 (bf16 fit) for |x| <= AMAX wherever
|y| >= 2^-126, so the rounded result is within 0.509 (f16) and 0.504 (bf16) ulp of x Phi(x): the
correctly rounded value except within a hundredth of an ulp of a tie. (The f32 erf formula it
replaces was 1.9 f16 ulp and 255 bf16 ulp off in the lower tail, from the cancellation.) About
25 f32 operations (SASS, sm_90: docs/performance.md), none of them a division or a hardware
approximation, so the reference backend, kaio's PTX and the LLVM path give the same bits.
"""
import numpy as np

import kaio

from .._launch import kdtype, np_dtype

#: log2(e) / 2 rounded to f32 (the fits of L use this value, so its rounding is fitted away)
C32 = float.fromhex("0x1.715476p-1")
#: per result dtype: (AMAX, coefficients of L lowest degree first), from scripts/fit_gelu16.py
L_FITS = {
    "f16": (6.0, tuple(float.fromhex(h) for h in (
        "-0x1.ffff62p-1", "-0x1.26b864p+0", "0x1.0d3140p-2", "-0x1.ba0aa0p-5", "0x1.16c9b6p-7",
        "-0x1.e7de6cp-11", "0x1.025e3cp-14", "-0x1.ec8c6cp-20"))),
    "bf16": (13.75, tuple(float.fromhex(h) for h in (
        "-0x1.0002d0p+0", "-0x1.269c08p+0", "0x1.0c8146p-2", "-0x1.b7b7dcp-5", "0x1.1841eap-7",
        "-0x1.04cb0ep-10", "0x1.503254p-14", "-0x1.19611ep-18", "0x1.114c20p-23",
        "-0x1.d1bfbcp-30"))),
}
#: 2^f on |f| <= 1/2 (relative error 2^-18.6), lowest degree first
EXP2 = tuple(float.fromhex(h) for h in (
    "0x1.ffffe8p-1", "0x1.62e0dcp-1", "0x1.ec06dcp-3", "0x1.ca1440p-5", "0x1.3997bcp-7"))
#: the lowest exponent kept: the scale's exponent field is n + E_MIN, so n = -E_MIN gives 0.0
E_MIN = 151
SHIFT = 1.5 * 2 ** 23 + E_MIN
#: EXP2 times 2^(127 - E_MIN) (exact): the scale 2^(n + 24) times these is 2^n 2^f
_EXP2_SCALED = tuple(c * 2.0 ** (127 - E_MIN) for c in EXP2)


@kaio.func
def horner(t, coeffs):
    """sum coeffs[k] t^k by Horner's rule with fma (``coeffs`` a tuple of literals)."""
    n = len(coeffs)
    acc = kaio.f32(coeffs[n - 1])
    for k in kaio.static_range(n - 1):
        acc = kaio.math.fma(acc, t, coeffs[n - 2 - k])
    return acc


@kaio.func
def gelu16(v, amax, lcoeffs):
    """x Phi(x) in f32 for ``v``, an f32 holding an f16/bf16 value, with that type's
    ``L_FITS`` entry (``amax``, ``lcoeffs``); see the module docstring."""
    e = kaio.math.fma(v * v, -C32, horner(min(abs(v), amax), lcoeffs))
    e = max(e, -E_MIN * 1.0)
    s = e + SHIFT                                   # rint(e) + SHIFT
    f = e - (s - SHIFT)                             # exact, |f| <= 1/2
    scale = kaio.bitcast(kaio.bitcast(s, kaio.i32) << 23, kaio.f32)
    p = horner(f, _EXP2_SCALED) * scale             # Phi(-|v|)
    q = p if v < 0.0 else 1.0 - p
    return v * q


# --- measurement (scripts/fit_gelu16.py, tests) -------------------------------------------------
def all_finite(name: str) -> np.ndarray:
    """Every finite value of the 16-bit type ``name``, as that type's numpy storage."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    x = bits.view(np.float16) if name == "f16" else bits.view(np_dtype(name))
    return x[np.isfinite(x.astype(np.float32))]


def reference(x: np.ndarray) -> np.ndarray:
    """x Phi(x) in float64, Phi(x) = erfc(-x / sqrt 2) / 2 (no cancellation in either tail)."""
    from math import erfc  # lazy: only measurements use it
    v = x.astype(np.float64)
    return v * 0.5 * np.vectorize(erfc, otypes=[np.float64])(-v * 0.7071067811865476)


def ulp16(v: np.ndarray, name: str) -> np.ndarray:
    """The ulp of the 16-bit type ``name`` at float64 values ``v`` (subnormal spacing below)."""
    bits, emin = {"f16": (11, -14), "bf16": (8, -126)}[name]
    e = np.floor(np.log2(np.maximum(np.abs(v), 2.0 ** emin)))
    return 2.0 ** (e - (bits - 1))


def gelu16_f32(x: np.ndarray, name: str) -> np.ndarray:
    """:func:`gelu16` of 16-bit ``x`` as f32, before the rounding to 16 bits."""
    T = kdtype(name)
    amax, lc = L_FITS[name]

    @kaio.kernel
    def gelu16_wide(x: kaio.In[T], y: kaio.Out[kaio.f32]):
        for i in y.owned():
            y[i] = gelu16(kaio.f32(x[i]), amax, lc)

    y = np.empty(x.shape, np.float32)
    gelu16_wide(x, y)
    return y
