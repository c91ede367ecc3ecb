"""High-precision constants for the math library, computed at import from first principles.

Everything here is derived with Python integers, :mod:`fractions` and :mod:`decimal` (no
third-party package, no hard-coded digit strings): pi by Machin's formula, logarithms by
``Decimal.ln``, the bits of 2/pi for Payne-Hanek reduction, Taylor coefficients as exact
rationals. ``split(v, bits)`` gives the head/tail pairs used for Cody-Waite reduction and
double-double arithmetic; every float returned is the correctly rounded value (``float`` of
a Fraction rounds to nearest even).
"""
from __future__ import annotations

import decimal
from fractions import Fraction
from functools import lru_cache

_PREC = 80   # decimal digits used for every derived constant (far beyond two doubles)


def _ctx() -> decimal.Context:
    return decimal.Context(prec=_PREC + 10)


def pi_fixed(bits: int) -> int:
    """floor(pi * 2^bits), by Machin's formula pi = 16 atan(1/5) - 4 atan(1/239)."""
    guard = 32
    one = 1 << (bits + guard)

    def arctan_inv(q: int) -> int:
        total, term, k, sign = 0, one // q, 1, 1
        while term:
            total += sign * (term // k)
            term //= q * q
            k, sign = k + 2, -sign
        return total
    return (16 * arctan_inv(5) - 4 * arctan_inv(239)) >> guard


@lru_cache(maxsize=None)
def exact(name: str) -> Fraction:
    """A named constant as a Fraction accurate to about 2^-260 relative."""
    c = _ctx()
    pi = Fraction(pi_fixed(300), 1 << 300)
    if name == "pi":
        return pi
    if name == "pi_2":
        return pi / 2
    if name == "pi_4":
        return pi / 4
    if name == "2_pi":
        return 2 / pi
    if name == "ln2":
        return Fraction(c.ln(decimal.Decimal(2)))
    if name == "ln10":
        return Fraction(c.ln(decimal.Decimal(10)))
    if name == "log2e":
        return 1 / exact("ln2")
    if name == "log10_2":
        return exact("ln2") / exact("ln10")
    if name == "log10e":
        return 1 / exact("ln10")
    if name == "2_sqrtpi":
        return 2 / Fraction(c.sqrt(_dec(pi)))
    raise KeyError(name)


def _dec(f: Fraction) -> decimal.Decimal:
    c = _ctx()
    return c.divide(decimal.Decimal(f.numerator), decimal.Decimal(f.denominator))


def round_bits(v: Fraction, bits: int) -> float:
    """``v`` rounded to a float with at most ``bits`` significant bits (nearest)."""
    if v == 0:
        return 0.0
    e = abs(v).numerator.bit_length() - abs(v).denominator.bit_length()
    scale = Fraction(2) ** (bits - 1 - e)
    return float(Fraction(round(v * scale)) / scale)


def split(v: Fraction, bits: int = 53, parts: int = 2) -> tuple[float, ...]:
    """``parts`` floats whose sum approximates ``v``: each of the first ``parts-1`` has at most
    ``bits`` significant bits (so products with small integers are exact), the last is the
    correctly rounded remainder."""
    out = []
    rest = Fraction(v)
    for _ in range(parts - 1):
        h = round_bits(rest, bits)
        out.append(h)
        rest -= Fraction(h)
    out.append(float(rest))
    return tuple(out)


def dd(name: str) -> tuple[float, float]:
    """A named constant as a double-double (hi, lo): hi correctly rounded, lo the rest."""
    return split(exact(name), 53, 2)


@lru_cache(maxsize=None)
def two_over_pi_chunks(n: int = 48, width: int = 24) -> tuple[int, ...]:
    """2/pi = sum_j c_j 2^(-width (j+1)), c_j integers of ``width`` bits (Payne-Hanek table)."""
    bits = width * n + 64
    v = (1 << (2 * bits + 1)) // pi_fixed(bits)          # floor(2/pi * 2^bits)
    mask = (1 << width) - 1
    return tuple((v >> (bits - width * (j + 1))) & mask for j in range(n))


def factorial_inv(n: int) -> Fraction:
    f = 1
    for k in range(2, n + 1):
        f *= k
    return Fraction(1, f)


def dec_exp(x: Fraction) -> Fraction:
    return Fraction(_ctx().exp(_dec(x)))


def dec_erf(x: Fraction) -> Fraction:
    """erf(x) to ~_PREC digits by its Taylor series (used only for table generation)."""
    c = decimal.Context(prec=_PREC + 40)
    xd = c.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))
    x2 = c.multiply(xd, xd)
    term = xd           # (-1)^n x^(2n+1) / n!
    total = xd
    n = 0
    eps = decimal.Decimal(10) ** (-(_PREC + 30))
    while True:
        n += 1
        term = c.divide(c.multiply(c.minus(term), x2), n)
        add = c.divide(term, 2 * n + 1)
        total = c.add(total, add)
        if abs(add) < eps:
            break
    return Fraction(total) * exact("2_sqrtpi")


def dec_atan(x: Fraction) -> Fraction:
    """atan(x) for 0 <= x <= 1 to ~_PREC digits: two argument halvings
    (atan x = 2 atan(x / (1 + sqrt(1 + x^2)))) then the alternating series."""
    c = decimal.Context(prec=_PREC + 20)
    xd = _dec(x)
    for _ in range(2):
        xd = c.divide(xd, c.add(1, c.sqrt(c.add(1, c.multiply(xd, xd)))))
    x2 = c.multiply(xd, xd)
    term, total, k = xd, xd, 0
    eps = decimal.Decimal(10) ** (-(_PREC + 15))
    while abs(term) > eps:
        k += 1
        term = c.multiply(c.minus(term), x2)
        total = c.add(total, c.divide(term, 2 * k + 1))
    return Fraction(c.multiply(total, 4))
