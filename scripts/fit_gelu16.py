"""Derive the constants of the 16-bit exact GELU (kernels/ml/gelu16.py) and measure it.

    python3 scripts/fit_gelu16.py            # prints the constants and the measured errors

The kernel computes y = x Phi(x) for an f16/bf16 x as P = Phi(-|x|) = 2^E, with
E = L(min(|x|, AMAX)) - C x^2 (x^2 exact in f32 for a 16-bit x; C = log2(e)/2 rounded to f32).
Two near-minimax fits (Lawson's iteratively reweighted least squares on Chebyshev nodes, float64;
reference values from mpmath at 80 bits), each rounded to f32:

- ``L(a) = log2 Phi(-a) + C a^2`` on [0, AMAX], absolute error (an error dE in the exponent is a
  relative error dE ln 2 of P). The f32-rounded C is used, so its rounding is fitted too.
  f16: AMAX = 6, degree 7 (beyond 5.8, |y| < 2^-25 rounds to 0); bf16: AMAX = 13.75, degree 9
  (beyond 13.6, |y| < 2^-134 rounds to 0).
- ``2^f`` on |f| <= 1/2, degree 4, relative error (the exponential after E = n + f).

Needs numpy and mpmath (development only; kaio itself imports neither).
"""
from __future__ import annotations

import numpy as np
from fit_erf_f32 import _cheb, _fit

#: the per-dtype fit of L: (AMAX, degree)
L_FITS = {"f16": (6.0, 7), "bf16": (13.75, 9)}
EXP2_DEGREE = 4
C32 = float(np.float32(np.log2(np.e) / 2))


def _f32(cs):
    return [float(np.float32(c)) for c in cs]


def fit_l(amax: float, degree: int) -> list:
    """L's coefficients (lowest degree first, f32 values) on [0, amax]."""
    import mpmath
    mpmath.mp.prec = 80
    a = _cheb(0.0, amax, 1500)
    half = mpmath.mpf(1) / 2
    lg = np.array([float(mpmath.log(half * mpmath.erfc(mpmath.mpf(v) / mpmath.sqrt(2)), 2))
                   for v in a])
    return _f32(_fit(a, lg + C32 * a * a, np.ones_like(a), degree))


def fit_exp2(degree: int = EXP2_DEGREE) -> list:
    """2^f on |f| <= 1/2, relative error (lowest degree first, f32 values)."""
    f = _cheb(-0.5, 0.5, 1000)
    return _f32(_fit(f, np.exp2(f), np.exp2(-f), degree))


def measure(name: str):
    """(log2 of the f32 y's max relative error for |x| <= AMAX where |y| >= 2^-126, max error
    of the 16-bit result in its ulps) over every finite 16-bit input, on kaio's reference
    backend (beyond AMAX the result underflows the 16-bit type: tests/test_gelu16.py)."""
    import kaio.kernels.ml.gelu16 as gelu16
    from kaio.kernels.ml import elementwise as ew
    x = gelu16.all_finite(name)
    y32 = gelu16.gelu16_f32(x, name).astype(np.float64)
    y = ew.gelu(x).astype(np.float64)
    ref = gelu16.reference(x)
    big = (np.abs(ref) >= 2.0 ** -126) & (np.abs(x.astype(np.float64)) <= L_FITS[name][0])
    rel = np.abs(y32 - ref)[big] / np.abs(ref[big])
    return np.log2(rel.max()), (np.abs(y - ref) / gelu16.ulp16(ref, name)).max()


def main():
    import kaio.kernels.ml.gelu16 as gelu16
    same = True
    for name, (amax, degree) in L_FITS.items():
        cl = fit_l(amax, degree)
        print(f"{name}: AMAX = {amax}, L = [" + ", ".join(c.hex() for c in cl) + "]")
        same &= gelu16.L_FITS[name] == (amax, tuple(cl))
    ce = fit_exp2()
    print("EXP2 = [" + ", ".join(c.hex() for c in ce) + "]")
    same &= gelu16.EXP2 == tuple(ce) and gelu16.C32 == C32
    print("kaio.kernels.ml.gelu16 holds these constants:", same)
    for name in L_FITS:
        rel, ulps = measure(name)
        print(f"{name}: f32 y within 2^{rel:.2f} relative (|x| <= AMAX, |y| >= 2^-126); "
              f"{name} result within {ulps:.5f} ulp of x Phi(x)")


if __name__ == "__main__":
    main()
