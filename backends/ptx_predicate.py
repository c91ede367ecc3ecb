"""If-conversion by predication: small ``if`` bodies become guarded straight-line instructions.

The PTX renderer emits every ``if`` as branches:

    @!%p bra $L_else_1;   <then>   bra.uni $L_endif_2;   $L_else_1:   <else>   $L_endif_2:
    @!%p bra $L_endif_1;  <then>   $L_endif_1:                        (no else, no results)

When both bodies are short straight-line code (no labels, branches, barriers, warp-synchronous
``.sync`` instructions, and no instruction that already carries a guard), this pass rewrites them
as ``@%p <then>`` and ``@!%p <else>`` and drops the branches. A guarded-off instruction has no
effect (a guarded-off load does not touch memory), so each thread does exactly what the branch
form did; what changes is that ptxas sees one basic block and can schedule across it: loads
guarded by bounds checks (``if j < n: v = x[j]``) issue back to back instead of one per
round trip. Nested ifs convert innermost first; an outer body that then holds guarded
instructions stays as branches.

Measured slower than branches on the H200 for the kernels tried (see ``ENABLED``), so it is off
by default and kept for experiments: ``kaio.backends.ptx_predicate.ENABLED = True``.
"""
from __future__ import annotations

import re

#: bodies with more instructions than this keep their branches (a skipped branch is cheaper
#: than many guarded-off instructions when the condition is uniform)
MAX_INSTRUCTIONS = 24

#: off by default: measured slower on the H200 (benchmarks/softmax_variants.py, 2026-11-30:
#: the register-resident softmax took 0.166-0.411 ms predicated against 0.091-0.101 ms with
#: branches; ptxas schedules the branch form better). Tests switch it on.
ENABLED = False

_BRA_NEG = re.compile(r"^\t@!(%p\d+) bra (\$L_(?:else|endif)_\d+);$")
_BRA_UNI = re.compile(r"^\tbra\.uni (\$L_endif_\d+);$")
_UNSAFE = ("bar.", "barrier", ".sync", "membar", "fence", "ret", "exit", "bra", "call")


def _instruction(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(("//", ".loc", "$"))


def _plain(body: list[str]) -> bool:
    """Straight-line, unguarded, no synchronisation."""
    for ln in body:
        s = ln.strip()
        if s.startswith("$") or s.startswith("@"):
            return False
        if _instruction(ln) and any(u in s.split()[0] for u in _UNSAFE):
            return False
    return True


def _guard(body: list[str], guard: str) -> list[str]:
    return [f"\t{guard} {ln.strip()}" if _instruction(ln) else ln for ln in body]


def predicate_small_ifs(lines: list[str]) -> list[str]:
    """The renderer's lines with every eligible ``if`` predicated (see the module docstring)."""
    out = list(lines)
    i = 0
    while i < len(out):
        m = _BRA_NEG.match(out[i])
        if not m:
            i += 1
            continue
        pred, target = m.groups()
        rewritten = _rewrite(out, i, pred, target)
        if rewritten is None:
            i += 1
            continue
        end, new = rewritten
        out[i:end + 1] = new
        i += 1
    return out


def _rewrite(lines: list[str], at: int, pred: str, target: str):
    """(index of the last line replaced, replacement) for the if starting at ``at``, or None."""
    try:
        t_end = lines.index(target + ":", at + 1)
    except ValueError:
        return None
    if "_endif_" in target:                                  # no else
        then = lines[at + 1:t_end]
        if not _plain(then) or sum(map(_instruction, then)) > MAX_INSTRUCTIONS:
            return None
        return t_end, _guard(then, f"@{pred}")
    jump = _BRA_UNI.match(lines[t_end - 1])                 # then ... bra.uni $L_endif; $L_else:
    if not jump:
        return None
    endif = jump.group(1)
    try:
        e_end = lines.index(endif + ":", t_end + 1)
    except ValueError:
        return None
    then, other = lines[at + 1:t_end - 1], lines[t_end + 1:e_end]
    if not (_plain(then) and _plain(other)) or \
            sum(map(_instruction, then + other)) > MAX_INSTRUCTIONS:
        return None
    return e_end, _guard(then, f"@{pred}") + _guard(other, f"@!{pred}")
