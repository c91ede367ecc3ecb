"""Canonical scalar constants: integers wrapped to their dtype, floats rounded to it.

Constants in the IR are Python scalars in canonical form (see the ``const`` op): an ``int`` in
the dtype's range, a ``float`` exactly representable in the dtype, a ``bool``. These helpers
produce that form exactly: numpy narrows doubles to f32/f16 correctly, but its (ml_dtypes')
f64 -> bf16 cast goes through f32 and rounds twice, so bf16 and non-float inputs are rounded
here from exact rationals.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .. import dtypes as dt

#: precision p (bits incl. the implicit one), minimum and maximum normal exponent
_FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127),
            "f64": (53, -1022, 1023)}


def round_to(x, t: dt.DType) -> float:
    """``x`` (int, float or Fraction) rounded to float dtype ``t`` (RNE, overflow to inf)."""
    if isinstance(x, float):
        if not math.isfinite(x) or t.name == "f64":
            return x
        if t.name in ("f32", "f16"):  # numpy narrows a double directly, correctly rounded
            with np.errstate(over="ignore"):
                return float(np.array(x).astype(t.storage_np))
    p, emin, emax = _FORMATS[t.name]
    r = Fraction(x)
    if r == 0:
        return x if isinstance(x, float) else 0.0  # keeps the sign of a float zero
    a = abs(r)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if a < Fraction(2) ** e:
        e -= 1
    q = max(e, emin) - (p - 1)                    # exponent of one unit in the last place
    m = round(a / Fraction(2) ** q)               # Fraction rounding: half to even
    if m == 0:
        return -0.0 if r < 0 else 0.0
    v = m * Fraction(2) ** q
    if v > (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax:
        out = math.inf
    else:
        out = float(v)
    return -out if r < 0 else out


def wrap(v: int, t: dt.DType) -> int:
    """``v`` wrapped to integer dtype ``t`` (two's complement)."""
    if t.is_bool:
        return bool(v & 1)
    v &= (1 << t.bits) - 1
    if t.is_signed and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def canonical(value, t: dt.DType):
    """``value`` (a Python or numpy scalar) as a canonical constant of dtype ``t``."""
    if t.is_bool:
        return bool(value)
    if t.is_float:
        exact = float(value) if isinstance(value, (float, np.floating)) else int(value)
        return round_to(exact, t)
    return wrap(int(value), t)


def representable(value, t: dt.DType) -> bool:
    """Whether ``value`` already is a canonical constant of dtype ``t``."""
    if t.is_float:
        return isinstance(value, float) and (math.isnan(value) or round_to(value, t) == value)
    if t.is_bool:
        return isinstance(value, bool)
    return isinstance(value, int) and not isinstance(value, bool) and \
        t.min_value() <= value <= t.max_value()
