"""Fixed-width integers in the race checker: when a value's polynomial is its machine value.

Every integer IR value of type T gets a polynomial that equals the value it holds at run time,
read as an integer in T's range (signed or unsigned). Constants, thread geometry, shapes and
parameters are exact. An ``add``/``sub``/``mul``/``neg``/``shl`` or an integer cast keeps the
exact polynomial of its result only when :meth:`Fits.check` proves that polynomial lies in T's
range at that point of the kernel (then no wrap happened); otherwise the result is an opaque
symbol bounded by T's range. Comparisons and loop bounds of exact values are then exact facts,
so unreachability (a contradiction among the facts) is proved with the same arithmetic.

The proof of a range uses the facts that hold where the op runs (guards, loop ranges), the
bounds of every symbol, and what every valid launch guarantees (:func:`geometry_facts`):

- a block has at most 1024 threads, ``grid.y`` and ``grid.z`` at most 65535 blocks
  (``kaio.launch`` checks both; :func:`kaio.regions.affine.geometry_bounds`);
- every global id fits in i32: on each axis ``block_idx * block_dim + thread_idx <= 2**31 - 1``,
  and the linear global id of a thread (what partitions use) too, i.e. at most ``2**31`` threads
  in all (checked at launch);
- buffer extents are at most ``2**31 - 1`` (checked at launch);
- what each partition's ``check_launch`` guarantees (``Partition.launch_facts``).
"""
from __future__ import annotations

from .affine import I32_MAX, MAX_BLOCK_THREADS, Poly, Prover, bounds, trivially_nonneg


def type_range(t) -> tuple[int, int]:
    """The integers a value of integer type ``t`` can hold."""
    return int(t.min_value()), int(t.max_value())


def geometry_facts(math) -> tuple[list, list]:
    """Facts (``p >= 0``) every valid launch guarantees about the thread geometry, written with
    ``math`` (a :class:`kaio.regions.affine.SymMath`): (per-axis global ids, which searches use;
    the products over all axes, which only :meth:`Fits.nonneg`'s one-step check uses)."""
    axes = [I32_MAX - math.global_id(a) for a in range(3)]
    products = [MAX_BLOCK_THREADS - math.block_threads(), I32_MAX - math.global_linear_id(),
                I32_MAX + 1 - math.total_threads()]
    return axes, products


def range_facts(symbols, table) -> list:
    """``s - lo >= 0`` and ``hi - s >= 0`` for the bounded symbols among ``symbols``."""
    out = []
    for s in sorted(symbols):
        info = table.info.get(s)
        if info is None:
            continue
        if info.lo is not None and info.lo != 0:  # s >= 0 the prover already knows
            out.append(Poly.sym(s) - info.lo)
        if info.hi is not None:
            out.append(info.hi - Poly.sym(s))
    return out


class Fits:
    """Proves that a polynomial stays inside an integer type's range where an op runs."""

    def __init__(self, table, pins: dict, launch: list, products: list = (), budget: int = 150):
        self.table, self.launch, self.products = table, list(launch), list(products)
        self.prover = Prover(table, pin=pins, budget=budget)
        self.cache: dict = {}

    def check(self, p: Poly, t, facts: list) -> bool:
        """True when ``p`` provably lies in the range of integer type ``t`` under ``facts``."""
        lo, hi = type_range(t)
        if p.is_const:
            return lo <= p.value <= hi
        blo, bhi = bounds(p, self.table)
        goals = ([] if blo >= lo else [p - lo]) + ([] if bhi <= hi else [hi - p])
        return all(self.nonneg(g, facts) for g in goals)

    def nonneg(self, goal: Poly, facts: list) -> bool:
        """``goal >= 0`` from the facts, the launch guarantees and the symbols' bounds."""
        key = (goal.key(), tuple(f.key() for f in facts))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        pv = self.prover
        allf = list(facts) + self.launch
        allf += self.table.all_facts(goal.symbols().union(*(f.symbols() for f in allf)))
        allf += range_facts(goal.symbols().union(*(f.symbols() for f in allf)), self.table)
        g = pv.pinned(goal)
        # a launch fact often dominates the goal term by term (g - f has only non-negative
        # terms once the extents are shifted to 1 + e): cheaper than a search, and a search
        # cannot scale a fact by a quotient of extents
        ok = (any(trivially_nonneg(pv.pinned(g - f), self.table) for f in self.launch + self.products)
              or pv.nonneg(g, allf))
        self.cache[key] = ok
        return ok
