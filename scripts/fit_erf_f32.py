"""Derive the coefficients of kaio.mathlib's native f32 erf (``hyper.erf_f32``) and measure it.

    python3 scripts/fit_erf_f32.py            # prints the constants and the measured max error

Three weighted near-minimax fits (Lawson's iteratively reweighted least squares on Chebyshev
nodes, float64, reference values from mpmath at 80 bits), each rounded to f32:

- ``p(z) = erf(x)/x - 1`` on z = x^2 in [0, T^2], weight x / erf(x) (the error of x * p relative
  to the result, which is erf(x) = x + x p(z), one fma);
- ``q(t) = log(erfc(T + t))`` on t in [0, 3.92 - T], weight erfc (an error dq in q moves the
  result 1 - e^q by e^q dq, so only its product with erfc matters);
- ``P(r) = (e^r - 1) / r`` on |r| <= ln2 / 2 (the reduced exponential).

Needs numpy, scipy and mpmath (development only; kaio itself imports none of them).
"""
from __future__ import annotations

import numpy as np

T = 0.75            # the switch between the two forms
TOP = 3.92          # erf rounds to 1 in f32 from here on (erfc(3.92) < 2^-25)
DEGREES = (5, 7, 5)


def _cheb(lo, hi, n):
    k = np.arange(n)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n)


def _fit(x, y, w, degree, iters=40):
    v = np.vander(x, degree + 1, increasing=True)
    lw = np.ones_like(x)
    for _ in range(iters):
        sw = np.sqrt(lw) * w
        c, *_ = np.linalg.lstsq(v * sw[:, None], y * sw, rcond=None)
        err = np.abs((v @ c - y) * w)
        lw = lw * err
        lw /= lw.sum()
    return c


def coefficients():
    """(p, q, P) coefficient lists (f32 values as Python floats), lowest degree first, and the
    f32 remainder of q's constant term (kept as a second part)."""
    import mpmath
    mpmath.mp.prec = 80
    x = np.sqrt(_cheb(0.0, T * T, 3000))
    x = np.where(x == 0, 1e-9, x)
    p = np.array([float(mpmath.erf(v) / v) for v in map(mpmath.mpf, x)]) - 1.0
    erf_x = np.array([float(mpmath.erf(v)) for v in map(mpmath.mpf, x)])
    cp = _fit(x * x, p, x / erf_x, DEGREES[0])
    a = _cheb(T, TOP, 3000)
    q = np.array([float(mpmath.log(mpmath.erfc(v))) for v in map(mpmath.mpf, a)])
    erfc_a = np.array([float(mpmath.erfc(v)) for v in map(mpmath.mpf, a)])
    cq = _fit(a - T, q, erfc_a, DEGREES[1])
    r = _cheb(-0.3466, 0.3466, 2000)
    ce = _fit(r, np.expm1(r) / r, np.abs(r) + 1e-3, DEGREES[2])

    def f32(cs):
        return [float(np.float32(c)) for c in cs]
    return f32(cp), f32(cq), f32(ce), float(np.float32(cq[0] - float(np.float32(cq[0]))))


def main():
    cp, cq, ce, q0_lo = coefficients()
    for name, cs in (("ERF_F32_P", cp), ("ERF_F32_Q", cq), ("ERF_F32_EXPM1", ce)):
        print(f"{name} = [" + ", ".join(c.hex() for c in cs) + "]")
    print(f"ERF_F32_Q0_LO = {q0_lo.hex()}")
    import kaio.mathlib.hyper as H
    same = (H.ERF_F32_P, H.ERF_F32_Q, H.ERF_F32_EXPM1, H.ERF_F32_Q0_LO) == (cp, cq, ce, q0_lo)
    print("kaio.mathlib.hyper holds these constants:", same)


if __name__ == "__main__":
    main()
