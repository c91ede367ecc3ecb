"""Expand portable math: every ``math`` op whose function is not exact (``MATH_EXACT``) and not
``fast`` becomes its inline IR implementation from :mod:`kaio.mathlib`.

After this pass a backend sees only exact math ops (sqrt, floor, ceil, trunc, rint, copysign,
isnan/isinf/isfinite) and ``fast`` ones, so the portable results are bit-identical on every
target that implements the basic IEEE operations.
"""
from __future__ import annotations

from ..ir.ops import MATH_EXACT
from ..ir.rewrite import expand_in_place


def needs_expansion(op) -> bool:
    return (op.opcode == "math" and op.attrs["fn"] not in MATH_EXACT
            and not op.attrs.get("fast", False))


def run(kernel, fast_math: bool = False):
    """Replace portable math ops in place; returns the kernel. With ``fast_math`` (a kernel-wide
    fast-math compilation) they are marked ``fast`` instead, for the target's approximations."""
    from .. import mathlib
    if fast_math:
        for op in kernel.walk():
            if needs_expansion(op):
                op.attrs["fast"] = True
        return kernel
    # one sweep per block, the results' users found by use-lists: linear in the kernel's size
    expand_in_place(kernel.body, needs_expansion,
                    lambda b, op: [mathlib.expand(b, op.attrs["fn"], *op.operands)])
    return kernel
