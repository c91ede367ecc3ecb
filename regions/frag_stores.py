"""Fragment stores into Region/Out buffers: ``kaio.mma.store`` is one warp's write of a tile.

A partition that gives elements to threads cannot own such a write, so a fragment store is
proved only against a per-warp partition (:class:`kaio.regions.warp_tiles.WarpTiles`): the
accumulator is exactly the warp tile (``wm x wn``) and its origin ``(row0, col0)`` is exactly
the current warp's, proved like any index from the facts where the store runs. Warps own
disjoint tiles, so two warps never store (or, with ``beta=``, read) one element. Every store
into one buffer uses one fragment type, so each element goes through the same lane of the
owning warp every time. Plain loads and stores of a per-warp buffer are refused by the checker
(:meth:`kaio.regions.checker.Checker.region_access`): which lane holds an element is the
target's choice.
"""
from __future__ import annotations

import math
from fractions import Fraction

from .affine import Eq
from .diagnose import index_text

_DECLARE = ("declare it kaio.Region[T, 2, kaio.regions.warp_tiles((BM, BN), (WM, WN))] (block tiles "
            "of BM x BN, one WM x WN tile per warp) or kaio.Raw")


def _primitive(p):
    """``p`` divided by the gcd of its integer coefficients (``p == 0`` exactly when it is).
    The prover rounds an integral goal ``X + k >= 0`` by less than 1, so ``-16 q >= 0`` (a row of
    warps left out of an origin: ``q = (w // 4)``, known ``< 1``) proves only as ``-q >= 0``."""
    coeffs = [c for m, c in p.t.items() if m != ()]
    if not coeffs or any(Fraction(c).denominator != 1 for c in coeffs):
        return p
    g = math.gcd(*(int(c) for c in coeffs))
    return p if g <= 1 else Fraction(1, g) * p


def is_per_warp(part) -> bool:
    return getattr(part, "per_warp", False)


def check(c) -> None:
    """Prove every fragment store of checker ``c``'s walk (raises CompileError)."""
    first = {}   # buffer id -> the fragment type of its first store
    for acc in c.walk.frag_stores:
        part = c.partition(acc.buf)
        name = c.names.get(acc.buf.id, acc.buf.name)
        what = f"kaio.mma.store into {'Out' if acc.buf.type.intent == 'out' else 'Region'} '{name}'"
        if not is_per_warp(part):
            c.error(acc, f"{what} under the {part.spec()} partition: a fragment store is one "
                         f"warp's write of a whole tile, but {part.spec()} gives elements to threads",
                    _DECLARE, "fragment-partition")
        ftype = acc.op.operands[-1].type
        rows, cols = ftype.dims
        if (rows, cols) != (part.wm, part.wn):
            c.error(acc, f"{what}: the accumulator is {rows} x {cols}, but {part.spec()} gives each "
                         f"warp a {part.wm} x {part.wn} tile",
                    f"store one accumulator of the warp tile's size (kaio.mma.fill(..., m={part.wm}, "
                    f"n={part.wn})), or declare the partition with the warp tile you store",
                    "fragment-size")
        if first.setdefault(acc.buf.id, ftype) is not ftype:
            c.error(acc, f"{what}: an accumulator of type {ftype}, but another store into '{name}' "
                         f"stores {first[acc.buf.id]}; a target may spread the two over the warp's "
                         "lanes differently, so two lanes would write one element",
                    "store one fragment type into each per-warp buffer", "fragment-type")
        obligations = part.store_obligations(c.math, acc.index)

        def prove(pv, obligations=obligations, acc=acc):
            return all(pv.eq_zero(_primitive(ob.p), acc.facts) for ob in obligations
                       if isinstance(ob, Eq))

        if c.prove_all(prove, acc):
            continue
        per_row = part.bn // part.wn
        c.error(acc, f"{what} at tile origin `{index_text(acc, c.names)}` is not provably the "
                     f"current warp's tile under {part.spec()}: warp w = thread_idx.x // "
                     f"kaio.warp_size of block (bx, by) owns the {part.wm} x {part.wn} tile at "
                     f"(by*{part.bm} + (w // {per_row})*{part.wm}, bx*{part.bn} + "
                     f"(w % {per_row})*{part.wn}), and no other warp may store there",
                f"compute the origin from the warp index, `w = kaio.thread_idx.x // "
                f"kaio.warp_size`: row0 = kaio.block_idx.y * {part.bm} + (w // {per_row}) * "
                f"{part.wm}, col0 = kaio.block_idx.x * {part.bn} + (w % {per_row}) * {part.wn} "
                f"(the same for every lane of the warp)", "fragment-origin")


def plain_access_error(c, acc, name, text) -> None:
    """A plain load/store/atomic of a per-warp buffer: refused (raises)."""
    part = c.partition(acc.buf)
    verb = {"load": "read of", "store": "store to", "atomic": "atomic update of"}[acc.kind]
    c.error(acc, f"{verb} '{name}' at index `{text}`: under {part.spec()} its elements are owned by "
                 "warps, and only kaio.mma.store (the warp's whole tile) may write or read them",
            "write the warp's tile with kaio.mma.store(buf, row0, col0, acc) (alpha=/beta= for an "
            "epilogue), or keep per-thread results in a buffer with a per-thread partition",
            "fragment-plain")
