"""f32 exp on the hardware exp2, after an exact-enough range reduction (``fast=True`` exp).

e^x = 2^f * 2^n with n = rint(x log2 e) and f = x log2 e - n, so the hardware instruction
(PTX ``ex2.approx``, AMD ``v_exp_f32``) only sees |f| <= 1/2, where its error is its stated
relative bound, instead of ``ex2(x log2 e)`` whose error grows with |x| (the rounding of
x log2 e is amplified by the exponent). The ops, as IR (the ``math exp2 fast`` one is the
hardware instruction; every other op is exact IEEE arithmetic, so the reference backend -- which
computes that exp2 in f64 and rounds it -- differs from a GPU by the instruction's error alone):

    s = fma(x, L2E_hi, SHIFT)        rint(x L2E_hi) + SHIFT, on the integer grid (s < 2^24)
    s = min(max(s, SHIFT - 126), SHIFT + 127)   n clamped so 2^n stays a normal number
    m = SHIFT - s                    -n, exact
    f = fma(x, L2E_lo, fma(x, L2E_hi, m))       x log2 e - n: |f| <= 1/2 + 2^-20 unclamped
    y = exp2_fast(f) * bits_as_f32(bits(s) << 23)   2^n from s's low bits (SHIFT = 1.5 2^23 + 127)

8 arithmetic instructions and the exp2. The final product rounds once, so results between the
clamps' reach and the format's limits come out right too: n = 127 with f up to 1 covers the top
binade and overflows to inf by rounding; n = -126 with f down to -24 rounds subnormal results
once. NaN passes through f (min/max drop it from s only); +-inf give f = +-inf (L2E_lo has
L2E_hi's sign), so exp2 gives inf or 0. Error analysis and measurements: docs/mathlib.md.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import dtypes as dt
from .constants import exact

#: log2 e as an f32 head and an f32 tail (same sign: fma(+-inf, tail, +-inf) stays +-inf)
L2E_HI = float(np.float32(float(exact("log2e"))))
L2E_LO = float(np.float32(float(exact("log2e") - Fraction(L2E_HI))))
#: s = x log2e + SHIFT lands on the integers (ulp 1 in [2^23, 2^24)); its low 9 bits are n + 127
SHIFT = 1.5 * 2 ** 23 + 127
assert L2E_LO > 0 and L2E_HI > 0


def exp_hw_f32(m, x):
    """e^x for an f32 value ``x`` (``m`` an f32 :class:`~kaio.mathlib.ctx.F64` context) from the
    target's fast exp2 on a reduced argument; see the module docstring."""
    s = m.fma(x, L2E_HI, SHIFT)
    s = m.min(m.max(s, SHIFT - 126), SHIFT + 127)
    f = m.fma(x, L2E_LO, m.fma(x, L2E_HI, m.sub(SHIFT, s)))
    # ftz: a subnormal f gives 1 either way, and f < -126 only where n = -126, so the exp2's
    # result (subnormal or 0) times 2^-126 rounds to 0 either way: the flushing form (on sm_90
    # one MUFU.EX2, without the FSETP and two FMULs that handle subnormal results) is the same
    e = m.b.math("exp2", f, fast=True, ftz=True)
    p = m.from_bits(m.iop("shl", m.bits(s), 23))
    return m.mul(e, p)


def can_expand(fn: str, t) -> bool:
    """Whether a ``fast`` ``math`` op is expanded here instead of going to the backend's
    approximation table: exp on f32, and on f16/bf16 through f32 (widened exactly, the f32 result
    rounded once)."""
    return fn == "exp" and t in (dt.f32, dt.f16, dt.bf16)
