"""Language-feature kernels: each dtype and op, casts, control flow, shared memory, atomics,
warp ops, block reductions, math over special values, matrix fragments, checked mode and the
per-block partition.

Each module exposes ``cases() -> list[ConformanceCase]``; their inputs are fixed (the same at
every ``--size``), chosen to hit the edges: integer wrap, division truncation, shifts past the
width, signed zeros, denormals, infinities, NaN, huge and tiny arguments, atomic collisions.
Integer division by zero and MIN // -1 are left out: the IR leaves them unspecified.
"""
from __future__ import annotations

from . import arith, atomics, casts, control, fragments, mathfns, memory, modes, warp

MODULES = (arith, casts, control, memory, atomics, warp, mathfns, fragments, modes)


def cases():
    out = []
    for m in MODULES:
        out += m.cases()
    return out
