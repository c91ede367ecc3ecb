"""Helpers shared by the feature kernels: case construction, special values, exact rounding."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from kaio import semantics

from ..case import ConformanceCase
from ..rules import BITWISE

BLOCK = 64


def feature(name: str, make, run, expected, *, vs_numpy=BITWISE, rule=None,
            width_dependent=False, description="", native_math_rule=None) -> ConformanceCase:
    """A fixed-size feature case named ``feature/<name>``; ``make()`` builds its inputs."""
    return ConformanceCase(
        name=f"feature/{name}", group=f"feature/{name.split('_')[0]}",
        make_inputs=lambda size: make(), run=run,
        expected=expected if width_dependent else (lambda inputs, warp: expected(inputs)),
        vs_numpy=vs_numpy, rule=rule, native_math_rule=native_math_rule,
        width_dependent=width_dependent, fixed_size=True, description=description)


def grid_for(n: int, block: int = BLOCK) -> int:
    return max(1, -(-n // block))


def int_specials(t) -> list[int]:
    """Edges of an integer dtype plus small values of both signs."""
    lo, hi = t.min_value(), t.max_value()
    vals = {0, 1, 2, 3, 7, 100, hi, hi - 1, hi // 2, lo, lo + 1, lo // 2 if lo else 5}
    if lo < 0:
        vals |= {-1, -2, -3, -7, -100}
    return sorted(v for v in vals if lo <= v <= hi)


def float_specials(t) -> list[float]:
    """Signed zeros, the smallest denormal, the smallest normal, ordinary values, the largest
    finite value, infinities and NaN, in the dtype."""
    fi = np.finfo(np.float32) if t.name == "bf16" else np.finfo(t.storage_np)
    tiny = float(fi.tiny)
    if t.name == "bf16":   # bf16 shares f32's exponent range
        den = 2.0 ** -133
        big = float(np.array(3.3895313892515355e38).astype(t.storage_np))
    else:
        den = float(fi.smallest_subnormal)
        big = float(fi.max)
    vals = [0.0, -0.0, den, -den, tiny, -tiny, 1.0, -1.0, 0.5, 1.5, -2.5, 3.0, 0.1, -7.25,
            100.0, big, -big, float("inf"), float("-inf"), float("nan")]
    return vals


def to_dtype(vals, t) -> np.ndarray:
    """Values (Python floats or ints) as an array of the dtype's storage type."""
    if t.is_float:
        return np.asarray(semantics.round_f64(t, np.asarray(vals, dtype=np.float64)))
    return np.array([int(v) for v in vals], dtype=t.storage_np)


def pairs(vals) -> tuple[list, list]:
    """Every ordered pair of ``vals``, as two lists."""
    a = [x for x in vals for _ in vals]
    b = [y for _ in vals for y in vals]
    return a, b


def wrap(v: int, t) -> int:
    """A Python int wrapped to the integer dtype (two's complement)."""
    v &= (1 << t.bits) - 1
    if t.is_signed and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


#: (precision bits, smallest normal exponent, largest exponent) of each float format
FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127),
           "f64": (53, -1022, 1023)}


def round_fraction(q: Fraction, t):
    """The exact rational ``q`` rounded to nearest-even in float dtype ``t`` (denormals and
    overflow to infinity included), as a value of the dtype's storage type."""
    p, emin, emax = FORMATS[t.name]
    neg, a = q < 0, abs(q)
    if a == 0:
        return np.array(-0.0 if neg else 0.0).astype(t.storage_np)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - p + 1)
    m = a / quantum
    r = m.numerator // m.denominator
    rest = m - r
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and r % 2 == 1):
        r += 1
    v = r * quantum
    x = float("inf") if v >= Fraction(2) ** (emax + 1) else float(v)
    return np.array(-x if neg else x).astype(t.storage_np)
