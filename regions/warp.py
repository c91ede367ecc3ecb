"""The warp width in the race checker's proof, and the warning for a literal 32 that stands for it.

``kaio.warp_size`` is a launch constant known per target: 32 on NVIDIA (and RDNA), 64 on AMD
gfx90a/gfx942, and whatever power of two up to 64 the reference backend is built with (1 on the
host test target). The frontend pipeline, where the checker runs, is target-independent, so a
kernel that reads the width (``kaio.warp_size`` or ``kaio.lane_id()``) is proved once per GPU
width in :data:`WARP_WIDTHS`, with the width a constant and ``lane_id()`` exactly ``linear
thread id % width`` (warps are runs of consecutive linear thread ids on every target). It
compiles only if every proof holds. A target of another width (the reference backend at 16,
say) proves it once more at its own width before it lowers the kernel (:func:`check_width`). A
kernel that reads neither is proved once: nothing in it depends on the width.
"""
from __future__ import annotations

import warnings

from ..errors import CompileError, WarpWidthWarning, source_excerpt
from .diagnose import expr_text

#: the warp widths of the GPUs kaio targets (NVIDIA and RDNA 32, AMD gfx9 64), proved in the
#: frontend; other widths are proved by the target that runs at them
WARP_WIDTHS = (32, 64)

_WIDTH_OPS = ("lane_id", "warp_size")
#: ops whose presence marks a kernel as warp-level code (for the literal-32 warning)
_WARP_OPS = ("lane_id", "warp_size", "shuffle", "vote", "ballot", "warp_reduce")
_NAMES = {32: "NVIDIA", 64: "AMD gfx9"}


def widths(kernel) -> tuple:
    """The warp widths to prove ``kernel`` at: :data:`WARP_WIDTHS`, or ``(None,)`` (one proof,
    lanes opaque) when the kernel never reads the width and no partition of it is per-warp."""
    if any(op.opcode in _WIDTH_OPS for op in kernel.body.walk()):
        return WARP_WIDTHS
    if any(getattr(p.partition, "per_warp", False) for p in kernel.params):
        return WARP_WIDTHS   # (warps own its elements: kaio.regions.warp_tiles)
    return (None,)


def at_width(err: CompileError, width) -> CompileError:
    """``err`` (a rejection by the proof at ``width``) saying which width it failed at."""
    if width is None or not isinstance(err, CompileError):
        return err
    where = f" on {_NAMES[width]}" if width in _NAMES else " (a reference-backend width)"
    err.bare_message += f" [with kaio.warp_size = {width}{where}: a kernel must be race-free at " \
                        "every warp width it may run at]"
    err.args = (err._format(),)
    err.warp_size = width
    return err


def common_bounds(per_width: list) -> tuple:
    """The index-bound records every width's proof found (a bound found at one width only may
    not hold at another, and a launch checks every record)."""
    first, rest = per_width[0], [set(r) for r in per_width[1:]]
    return tuple(r for r in first if all(r in s for s in rest))


# --- the warning -----------------------------------------------------------------------------
_LITERALS = {"div": (32, "//"), "rem": (32, "%"), "and": (31, "&"), "shr": (5, ">>")}


def warn_literal_widths(kernel) -> None:
    """Warn (:class:`kaio.WarpWidthWarning`) at each ``x // 32``, ``x % 32``, ``x & 31`` or
    ``x >> 5`` whose ``x`` depends on thread ids, in a kernel that uses warp operations: there
    the 32 is almost surely the warp width, which is 64 on AMD gfx9. Kernels without warp
    operations never warn (a 32 there is a tile size)."""
    ops = list(kernel.body.walk())
    if not any(op.opcode in _WARP_OPS for op in ops):
        return
    for op in ops:
        lit = _LITERALS.get(op.opcode)
        if lit is None or len(op.operands) != 2 or not op.result.type.is_int:
            continue
        x, c = op.operands
        if _const(c) == lit[0] and _on_thread_ids(x):
            names = {v.id: p.name for p, v in zip(kernel.params, kernel.args)}
            _warn(kernel, op, f"`{expr_text(op.result, names)}`")


def _const(v):
    op = v.owner
    return op.attrs.get("value") if getattr(op, "opcode", None) == "const" else None


def _on_thread_ids(v, depth: int = 0) -> bool:
    op = v.owner
    k = getattr(op, "opcode", None)
    if k in ("thread_idx", "lane_id"):
        return True
    if k is None or depth > 12 or k in ("load", "atomic", "shuffle", "vote", "ballot", "warp_reduce"):
        return False
    return any(_on_thread_ids(a, depth + 1) for a in op.operands if not a.is_buffer)


def _warn(kernel, op, what: str) -> None:
    loc = op.loc
    msg = (f"in kernel '{kernel.name}': {what} on a thread id in warp-level code: the literal "
           "stands for the warp width, which is a launch constant of the target (32 on NVIDIA, "
           "64 on AMD gfx9), so the kernel may compute wrong results on 64-wide wavefronts")
    if loc is not None:
        ex = source_excerpt(loc.file, loc.line, loc.col, loc.end_col)
        msg = f"{loc.file}:{loc.line}:{loc.col + 1}: {msg}" + (f"\n{ex}" if ex else "")
    msg += "\nhint: use kaio.warp_size (64 on AMD gfx9)"
    warnings.warn_explicit(msg, WarpWidthWarning, loc.file if loc else "<kaio>",
                           loc.line if loc else 0)
