"""Random valid launches for a generated kernel: small grids and blocks that meet the partition's
launch preconditions and the body's needs, buffer shapes that the launch covers (full and
ragged), scalar values (extremes included) and dynamic shared bytes."""
from __future__ import annotations

import ast
import math
import re

from .case import Launch
from .source import SHARED, Gen

#: scalar values for p: mostly small, sometimes the i32 extremes
P_VALUES = [0, 0, 0, 1, 2, 3, -1, 2**31 - 1, -2**31]


def _ok(g: Gen, threads: int) -> bool:
    n = g.needs
    return (threads <= SHARED and threads >= n.min_threads and (not n.warp or threads % 32 == 0)
            and (not n.pow2 or threads & (threads - 1) == 0))


def _block(g: Gen, stress: bool, flat: bool):
    """A block meeting the needs: 1-D, or 2-D for 2-D geometry (tiles: at most (tw, th));
    the largest allowed for a stress launch. 2-D geometry gets 1-D blocks too (always when
    ``flat``): a kernel whose proof needed a 1-D launch refuses the others."""
    r = g.rnd
    if g.geom == "1d":
        options = [(b, 1, 1) for b in (1, 4, 8, 16, 24, 32, 48, 64) if _ok(g, b)]
    else:
        max_x, max_y = (g.tile[1], g.tile[0]) if g.part == "tiles" else (64, 64)
        options = [(bx, by, 1) for bx in (1, 2, 4, 8, 16, 32, 64) for by in (1, 2, 4, 8, 16)
                   if bx <= max_x and by <= max_y and _ok(g, bx * by)]
        one_d = [b for b in options if b[1] == 1]
        if one_d and not stress and (flat or r.random() < 0.3):
            options = one_d
    if not options:
        return None
    if stress or g.needs.big:
        return max(options, key=lambda b: (math.prod(b), b[1]))
    return r.choice(options)


def _grid(g: Gen, block, stress: bool) -> tuple:
    r = g.rnd
    threads = math.prod(block)
    if g.needs.big:   # more threads than the narrow index type counts, so it wraps
        return (g.needs.big // threads + 1 + r.randint(0, 1), 1, 1)
    if g.part == "tiles" or (g.geom == "2d" and g.part == "elementwise"):
        flat = block[1] == 1 and not stress
        return (r.randint(2 if stress else 1, 3), 1 if flat else r.randint(2 if stress else 1, 3), 1)
    return (r.randint(2 if stress else 1, 4), 1, 1)


def _y_shape(g: Gen, grid, block, stress: bool) -> tuple:
    r = g.rnd
    G = math.prod(grid) * math.prod(block)
    short = 0 if stress else r.choice([0, 0, 1, r.randint(0, G - 1)])
    if g.part == "elementwise":
        if g.ydims == 1:
            return (max(1, G - short),)
        c = r.randint(2 if stress else 1, 8)
        return (max(1, (G - short) // c) if c <= G else 1, min(c, G))
    if g.part == "blocked":
        return (max(1, G * g.k - r.choice([0, r.randint(0, g.k - 1), r.randint(0, G * g.k - 1)])),)
    if g.part == "grid_stride":
        return (2 * G + 3,) if stress else (r.choice([G + r.randint(1, G), 2 * G + 3, r.randint(1, G)]),)
    if g.part == "rows":
        return (max(1, G - short), 5 if stress else r.randint(1, 5))
    if g.part == "rows_per_block":
        return (grid[0] if stress else max(1, grid[0] - r.randint(0, grid[0] - 1)),
                r.randint(2 if stress else 1, 3 * math.prod(block)))
    th, tw = g.tile
    return (grid[1] * th - r.randint(0, th - 1), grid[0] * tw - r.randint(0, tw - 1))


def one(g: Gen, variant: int, stress: bool = False, grid=None, block=None, y=None) -> Launch | None:
    """A random launch (the largest blocks and full buffers when ``stress``); ``grid``,
    ``block``, ``y`` fix those parts (a counterexample the checker printed)."""
    block = block or _block(g, stress, flat=variant == 1)
    if block is None:
        return None
    grid = grid or _grid(g, block, stress)
    y = y or _y_shape(g, grid, block, stress)
    threads = math.prod(grid) * math.prod(block)
    shapes = {"x": (math.prod(y) + g.rnd.randint(0, 4),), "y": y}
    if "idx" in g.uses:
        shapes["idx"] = (threads,)
    if "h" in g.uses:
        shapes["h"] = (g.atomic_len,)
    # launches 0-2 take p = 2, 0, 1 (loops over p run, and p == 0 guards hold), then random
    pv = (2, 0, 1)[variant] if variant < 3 else g.rnd.choice(P_VALUES)
    if g.needs.extreme_p and variant in (0, 3):
        pv = 2**31 - 1
    scalars = {"p": pv} if "p" in g.uses else {}
    return Launch(grid, block, shapes, scalars, g.needs.dynamic, variant)


def launches(g: Gen, count: int) -> list:
    """``count`` launches, the first a stress launch (fewer only when the needs admit no block
    at all)."""
    out = []
    for _ in range(count * 4):
        if len(out) == count:
            break
        launch = one(g, len(out), stress=not out)
        if launch is not None:
            out.append(launch)
    return out


def counterexample(g: Gen, message: str) -> Launch | None:
    """The launch a rejection message gives as its example (``e.g. with a buffer of shape (16,),
    grid=(2, 1, 1), block=(8, 1, 1): ...``), when it is one this kernel can run."""
    found = {k: ast.literal_eval(m.group(1)) for k in ("shape", "grid", "block")
             if (m := re.search(rf"{k}[ =](\([0-9, ]*\))", message))}
    block = found.get("block")
    if block is None or not _ok(g, math.prod(block)):
        return None
    shape = found.get("shape")
    if shape is not None and len(shape) != g.ydims:
        shape = None
    return one(g, 99, grid=found.get("grid"), block=tuple(block), y=shape)
