"""Expand portable math: every ``math`` op whose function is not exact (``MATH_EXACT``) and not
``fast`` becomes its inline IR implementation from :mod:`kaio.mathlib`, and so does every float
``rem`` (C fmod: exact, but no target has an instruction for it).

After this pass a backend sees only exact math ops (sqrt, floor, ceil, trunc, rint, copysign,
isnan/isinf/isfinite) and ``fast`` ones, so the portable results are bit-identical on every
target that implements the basic IEEE operations. A ``fast`` f32 exp becomes exact IR around a
``fast`` exp2 of a reduced argument (:mod:`kaio.mathlib.hwexp`). A ``fast`` op that the target has no
approximation for is emitted by the backend from :func:`library_code`: the same library code.
"""
from __future__ import annotations

from contextlib import contextmanager

from .. import mathlib
from ..ir.builder import Builder
from ..ir.core import Block
from ..ir.ops import MATH_EXACT
from ..ir.rewrite import discard, expand_in_place


def needs_expansion(op) -> bool:
    if op.opcode == "rem":
        return op.results[0].type.is_float
    if op.opcode != "math" or op.attrs["fn"] in MATH_EXACT:
        return False
    return not _is_fast(op) or _fast_expands(op)


def _is_fast(op) -> bool:
    return bool(op.attrs.get("fast", False))


def _fast_expands(op) -> bool:
    """A ``fast`` op with a library form around the target's instruction (f32 exp: range
    reduction + fast exp2); what it leaves is ``fast`` and never expanded again."""
    return _is_fast(op) and mathlib.expands_fast(op.attrs["fn"], op.operands[0].type)


def _expand(b, op):
    fn = "fmod" if op.opcode == "rem" else op.attrs["fn"]
    if op.opcode == "math" and _fast_expands(op):
        return mathlib.expand_fast(b, fn, *op.operands)
    return mathlib.expand(b, fn, *op.operands)


def clear_fast(kernel):
    """Portable mode: drop the ``fast`` flag of every op (math calls, and division where a
    frontend set it), so each is expanded or emitted as its correctly rounded form."""
    for op in kernel.walk():
        op.attrs.pop("fast", None)
    return kernel


def run(kernel, fast_math: bool = False):
    """Replace portable math ops in place; returns the kernel. With ``fast_math`` (a kernel-wide
    fast-math compilation) ``math`` ops are marked ``fast`` instead, for the target's
    approximations."""
    if fast_math:
        for op in kernel.walk():
            if op.opcode == "math" and needs_expansion(op):
                op.attrs["fast"] = True
    # one sweep per block, the results' users found by use-lists: linear in the kernel's size
    expand_in_place(kernel.body, needs_expansion, lambda b, op: [_expand(b, op)])
    return kernel


@contextmanager
def library_code(op):
    """``(block, value)``: ``op`` (a ``math`` op, or a float ``rem``) as :mod:`kaio.mathlib`
    computes it, in a block of its own that a backend emits in place of ``op`` (its ops read
    ``op``'s operands; ``value`` is the result). The block's ops leave the IR afterwards."""
    b = Builder(Block(), op.loc)
    value = _expand(b, op)
    try:
        yield b.block, value
    finally:
        for o in reversed(b.block.ops):     # users before what they use
            discard(o)
