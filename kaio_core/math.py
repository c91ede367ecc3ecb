"""kaio.math: math functions usable inside kernels.

Each takes and returns the float dtype of its argument (integers are not silently converted:
cast first). ``fast=True`` selects the target's hardware approximation where one exists; the
default is kaio's portable implementation, bit-identical on every target.
"""
from __future__ import annotations

from .ir.ops import MATH_FNS
from .lang import Intrinsic

_EXTRA = ("abs", "min", "max", "fma")

for _name in (*MATH_FNS, *_EXTRA):
    globals()[_name] = Intrinsic(f"math.{_name}", f"kaio.math.{_name}")

FUNCTIONS = {n: globals()[n] for n in (*MATH_FNS, *_EXTRA)}
__all__ = list(FUNCTIONS)

# constants: plain Python floats, weakly typed like any literal
pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")
nan = float("nan")
