"""Rewrites of PTX text around known ptxas miscompilations, applied to both NVIDIA paths.

ptxas 13.0 for sm_90 fuses ``min(a, min(b, -c))`` (and ``max``) on integers into one
three-input ``VIMNMX3`` and drops the negation, so the GPU computes ``min(a, min(b, c))``
(found by kaio's fuzzer; tests/test_known_toolchain_bugs.py pins it). ptxas folds every
spelling of the negation it recognises (``neg``, ``sub 0, c``, a zero held in a register) into
the fused instruction, but not ``~c + 1``, which is the same two's-complement value. So on sm_9x
every integer ``neg`` is written as ``not`` then ``add 1``. Measured on the H200 (driver 580.159):
``neg``, ``sub`` and ``selp`` spellings all fail, ``not``+``add`` is correct.
"""
from __future__ import annotations

import re

_NEG = re.compile(r"^(?P<ind>\s*)(?P<pred>@!?%\w+\s+)?neg\.s(?P<bits>16|32|64)\s+"
                  r"(?P<d>%\w+),\s*(?P<a>%\w+);", re.M)


def _not_add_one(m: re.Match) -> str:
    ind, pred, bits, d, a = m["ind"], m["pred"] or "", m["bits"], m["d"], m["a"]
    return f"{ind}{pred}not.b{bits} {d}, {a};\n{ind}{pred}add.s{bits} {d}, {d}, 1;"


def needs_neg_rewrite(arch: str) -> bool:
    """Whether ptxas for ``arch`` ('sm_90', 'nvptx64-sm_90', ...) has the VIMNMX3 bug."""
    return arch.rsplit("-", 1)[-1].startswith("sm_9")   # sm_80/sm_89 measured unaffected


def apply(ptx: str, arch: str) -> str:
    """``ptx`` with the rewrites ``arch`` needs (unchanged for unaffected archs)."""
    if needs_neg_rewrite(arch):
        ptx = _NEG.sub(_not_add_one, ptx)
    return ptx
