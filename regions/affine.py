"""Symbolic index arithmetic and the prover behind the race checker.

Index expressions become :class:`Poly` -- polynomials with rational coefficients over named
symbols (thread/block ids, block/grid extents, shapes, params, loop counters, and *atoms* that
stand for non-affine subterms such as ``x // 4`` or ``min(a, b)``). Products of symbols are
allowed, so ``block_idx.x * block_dim.x + thread_idx.x`` is exact.

Facts are polynomials known to be ``>= 0`` (from loop ranges, guards, thread geometry and atom
definitions). :meth:`Prover.nonneg` proves ``goal >= 0`` by eliminating one symbol at a time:
``goal - lam * fact`` with ``lam >= 0`` chosen to cancel the symbol (a Fourier-Motzkin step with
polynomial multipliers), until what is left is a sum of non-negative terms. Every step keeps
``goal >= goal'`` so a proof is sound; failing to find one only means "not proven".
"""
from __future__ import annotations

import math
from dataclasses import field
from fractions import Fraction

from ..ir.indexmath import IndexMath
from ..options import MAX_BLOCK_THREADS
from ..records import frozen, record


class Poly:
    """A polynomial: {monomial (sorted tuple of symbol names): coefficient}."""

    __slots__ = ("t",)

    def __init__(self, terms=None):
        self.t = {m: c for m, c in (terms or {}).items() if c != 0}

    @staticmethod
    def const(c) -> "Poly":
        return Poly({(): c})

    @staticmethod
    def sym(name: str) -> "Poly":
        return Poly({(name,): 1})

    # --- arithmetic -------------------------------------------------------------------
    def __add__(self, o):
        o = _p(o)
        t = dict(self.t)
        for m, c in o.t.items():
            t[m] = t.get(m, 0) + c
        return Poly(t)

    __radd__ = __add__

    def __neg__(self):
        return Poly({m: -c for m, c in self.t.items()})

    def __sub__(self, o):
        return self + (-_p(o))

    def __rsub__(self, o):
        return _p(o) - self

    def __mul__(self, o):
        o = _p(o)
        t: dict = {}
        for m1, c1 in self.t.items():
            for m2, c2 in o.t.items():
                m = tuple(sorted(m1 + m2))
                t[m] = t.get(m, 0) + c1 * c2
        return Poly(t)

    __rmul__ = __mul__

    def __eq__(self, o):
        return isinstance(o, Poly) and self.t == o.t

    def __hash__(self):
        return hash(self.key())

    def key(self):
        return tuple(sorted(self.t.items()))

    # --- inspection -------------------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return all(m == () for m in self.t)

    @property
    def value(self):
        return self.t.get((), 0)

    def symbols(self) -> set:
        return {s for m in self.t for s in m}

    def linear_in(self, s):
        """(coefficient, rest) if self = coefficient*s + rest with s absent from both; else None."""
        coef, rest = {}, {}
        for m, c in self.t.items():
            k = m.count(s)
            if k == 0:
                rest[m] = c
            elif k == 1:
                mm = list(m)
                mm.remove(s)
                coef[tuple(mm)] = c
            else:
                return None
        return Poly(coef), Poly(rest)

    def subst(self, s, val: "Poly") -> "Poly":
        if s not in self.symbols():
            return self
        out = Poly()
        for m, c in self.t.items():
            term = Poly.const(c)
            for x in m:
                term = term * (val if x == s else Poly.sym(x))
            out = out + term
        return out

    def div_exact(self, d: "Poly", integral: bool = False):
        """self / d when d is a single term dividing every term (None otherwise)."""
        if len(d.t) != 1:
            return None
        (dm, dc), = d.t.items()
        out = {}
        for m, c in self.t.items():
            rest = list(m)
            for s in dm:
                if s not in rest:
                    return None
                rest.remove(s)
            q = Fraction(c) / Fraction(dc)
            if integral and q.denominator != 1:
                return None
            out[tuple(rest)] = int(q) if q.denominator == 1 else q
        return Poly(out)

    def evaluate(self, env):
        """The value at ``env`` (symbol -> number): an int where everything is one."""
        total = 0
        for m, c in self.t.items():
            v = c
            for s in m:
                v *= env[s]
            total += v
        return total

    def __repr__(self):
        return render(self)


def _p(x) -> Poly:
    return x if isinstance(x, Poly) else Poly.const(x)


def render(p: Poly, names=None) -> str:
    """Readable text: ``thread_idx.x + 1``."""
    names = names or {}
    if not p.t:
        return "0"
    parts = []
    for m, c in sorted(p.t.items(), key=lambda mc: (-len(mc[0]), mc[0])):
        body = " * ".join(names.get(s, s) for s in m)
        mag = abs(c)
        text = body if body and mag == 1 else f"{mag}" + (f" * {body}" if body else "")
        parts.append(("-" if c < 0 else "+", text))
    out = ("-" if parts[0][0] == "-" else "") + parts[0][1]
    for sign, text in parts[1:]:
        out += f" {sign} {text}"
    return out


# --- proof obligations a partition states about an index ----------------------------------
@frozen
class Eq:
    """``p == 0``."""
    p: Poly


@frozen
class Nonneg:
    """``p >= 0``."""
    p: Poly


@frozen
class Divides:
    """``p == d * q`` for some integer ``q >= 0``."""
    d: Poly
    p: Poly


# --- symbols ------------------------------------------------------------------------------
@record
class SymInfo:
    """What the prover knows about a symbol."""

    name: str
    nonneg: bool = False     # >= 0
    positive: bool = False   # >= 1 (block and grid extents)
    lo: int | None = None    # bounds on every valid launch (None: unbounded), see .widths
    hi: int | None = None
    uniform: bool = False    # same value in every thread of a block
    rank: int = 0            # definition order: later symbols are eliminated first
    loops: tuple = ()        # ids of the loops enclosing its definition (iteration-dependent)
    facts: list = field(default_factory=list)
    atom: tuple | None = None  # (op, a, b) for div/rem/min/max atoms
    rng: tuple | None = None   # an atom's result type range (part of its identity)


AXES = "xyz"
GEOMETRY = {"thread_idx": "tid", "block_idx": "bid", "block_dim": "bdim", "grid_dim": "gdim"}

#: launch limits (kaio.launch): threads per block; grid.y and grid.z; i32 ids and extents
GRID_YZ_MAX = 65535
I32_MAX = 2**31 - 1


def geometry_bounds(kind: str, axis: str) -> tuple[int, int]:
    """(lo, hi) of a thread-geometry symbol on every valid launch."""
    grid_max = I32_MAX if axis == "x" else GRID_YZ_MAX
    return {"thread_idx": (0, MAX_BLOCK_THREADS - 1), "block_dim": (1, MAX_BLOCK_THREADS),
            "block_idx": (0, grid_max - 1), "grid_dim": (1, grid_max)}[kind]


class SymMath(IndexMath):
    """IndexMath over polynomials: partitions' ``owned_affine`` run on it."""

    def __init__(self, table: "SymbolTable", shape_of, warp: int | None = None):
        self.table = table
        self.shape_of = shape_of  # (buf, axis) -> Poly
        self.warp = warp          # the warp width of this proof (None: the kernel never reads it)

    def warp_size(self):
        if self.warp is None:
            raise ValueError("a per-warp partition is proved at a fixed warp width")
        return Poly.const(self.warp)

    def const(self, v): return Poly.const(int(v))
    def _v(self, x): return x if isinstance(x, Poly) else Poly.const(int(x))
    def add(self, a, b): return self._v(a) + self._v(b)
    def sub(self, a, b): return self._v(a) - self._v(b)
    def mul(self, a, b): return self._v(a) * self._v(b)
    def div(self, a, b): return self.table.atom("div", self._v(a), self._v(b))
    def rem(self, a, b): return self.table.atom("rem", self._v(a), self._v(b))
    def min(self, a, b): return self.table.atom("min", self._v(a), self._v(b))
    def max(self, a, b): return self.table.atom("max", self._v(a), self._v(b))

    def special(self, name, axis):
        return self.table.geometry(name, axis)

    def shape(self, buf, axis):
        return self.shape_of(buf, axis)

    def linearize(self, index, shape):
        out = index[0]
        for i, s in zip(index[1:], shape[1:]):
            out = out * s + i
        return out


class SymbolTable:
    """All symbols of one checker run, their facts, and the atoms for non-affine subterms."""

    def __init__(self):
        self.info: dict[str, SymInfo] = {}
        self.atoms: dict = {}
        self.shapes: dict = {}   # symbol -> (buffer Value, axis)
        self.shifted: dict = {}  # trivially_nonneg's memo (a symbol's sign never changes)
        self.rank = 0
        for kind, short in GEOMETRY.items():
            for ax in AXES:
                lo, hi = geometry_bounds(kind, ax)
                self.add(f"{kind}.{ax}", uniform=short != "tid", lo=lo, hi=hi)
        for a in AXES:  # ids are below their extents
            for idn, dim in (("thread_idx", "block_dim"), ("block_idx", "grid_dim")):
                self.info[f"{idn}.{a}"].facts.append(Poly.sym(f"{dim}.{a}") - Poly.sym(f"{idn}.{a}") - 1)

    def add(self, name, **kw) -> Poly:
        self.rank += 1
        info = self.info[name] = SymInfo(name, rank=self.rank, **kw)
        if info.lo is not None and info.lo >= 1:
            info.positive = True
        if info.positive or info.lo is not None and info.lo >= 0:
            info.nonneg = True
        return Poly.sym(name)

    def fresh(self, hint, **kw) -> Poly:
        name = f"{hint}#{self.rank + 1}"
        return self.add(name, **kw)

    def geometry(self, name, axis) -> Poly:
        return Poly.sym(f"{name}.{AXES[axis]}")

    def shape(self, buf, axis: int, label: str) -> Poly:
        """The extent of one buffer *value* on an axis. The symbol is keyed by the value's
        identity: two buffers that share a name (a parameter and a ``dynamic_shared`` array
        inside a ``@kaio.func``) never share a length. ``label`` only makes it readable."""
        st = buf.type.static_shape
        if st is not None:
            return Poly.const(st[axis])
        name = f"{label}.shape[{axis}]#{buf.id}"
        if name not in self.info:
            self.add(name, uniform=True, lo=0, hi=I32_MAX)
            self.shapes[name] = (buf, axis)
        return Poly.sym(name)

    def all_facts(self, symbols) -> list:
        """Facts attached to these symbols and, transitively, to symbols they mention."""
        seen, todo, out = set(), sorted(symbols, reverse=True), []
        while todo:  # sorted everywhere: the prover's search must not depend on hash order
            s = todo.pop()
            if s in seen or s not in self.info:
                continue
            seen.add(s)
            for f in self.info[s].facts:
                out.append(f)
                todo.extend(sorted(f.symbols(), reverse=True))
        return out

    def is_uniform(self, p: Poly) -> bool:
        return all(self.info[s].uniform for s in p.symbols())

    def atom(self, op, a: Poly, b: Poly, rng: tuple = (-I32_MAX - 1, I32_MAX)) -> Poly:
        """``a op b`` for div/rem/min/max of values of an integer type whose range is ``rng``
        (i32 by default): folded when constant, else one symbol per distinct (op, a, b, range)
        carrying the facts that bound it. The range is part of the key because a signed
        ``MIN // -1`` wraps differently at each width."""
        if a.is_const and b.is_const:
            x, y = a.value, b.value
            if op in ("div", "rem") and y == 0:
                return self.opaque(op, uniform=True, lo=rng[0], hi=rng[1])
            if op == "div":
                q = int(Fraction(x) / Fraction(y))
                return Poly.const(q if rng[0] <= q <= rng[1] else rng[0])  # MIN // -1 == MIN
            if op == "rem":
                return Poly.const(x - y * int(Fraction(x) / Fraction(y)))
            return Poly.const(min(x, y) if op == "min" else max(x, y))
        if op == "div" and b == Poly.const(1):
            return a
        key = (op, a.key(), b.key(), rng)
        if key in self.atoms:
            return self.atoms[key]
        uniform = self.is_uniform(a) and self.is_uniform(b)
        nonneg_a, nonneg_b = trivially_nonneg(a, self), trivially_nonneg(b - 1, self)
        name = f"{op}({render(a)}, {render(b)})"
        if name in self.info:  # the same text at another width
            name += f"#{self.rank + 1}"
        lo, hi = _atom_bounds(op, a, b, self, nonneg_a, nonneg_b, rng)
        sym = self.add(name, uniform=uniform, lo=lo, hi=hi,
                       nonneg=op in ("div", "rem") and nonneg_a and nonneg_b)
        info = self.info[name]
        info.loops = tuple(sorted({lp for s in a.symbols() | b.symbols() for lp in self.info[s].loops}))
        info.atom, info.rng = (op, a, b), rng
        if op == "min":
            info.facts += [a - sym, b - sym]
        elif op == "max":
            info.facts += [sym - a, sym - b]
        elif nonneg_a and nonneg_b and len(b.t) == 1:  # x >= 0, d >= 1: floor semantics
            if op == "div":   # d*q <= x <= d*q + d - 1
                info.facts += [a - b * sym, b * sym + b - 1 - a]
            else:             # 0 <= r <= d - 1 and x == d*q + r
                q = self.atom("div", a, b, rng)
                link = a - b * q - sym
                info.facts += [b - 1 - sym, link, -link]
        self.atoms[key] = sym
        return sym

    def opaque(self, hint, uniform=False, loops=(), lo=None, hi=None) -> Poly:
        p = self.fresh(hint, uniform=uniform, lo=lo, hi=hi)
        self.info[next(iter(p.symbols()))].loops = tuple(loops)
        return p


def _atom_bounds(op, a, b, table, nonneg_a, nonneg_b, rng):
    """Bounds of a div/rem/min/max atom from its operands' (the type's range otherwise)."""
    (alo, ahi), (blo, bhi) = bounds(a, table), bounds(b, table)
    lo, hi = rng
    if op in ("min", "max"):
        f = min if op == "min" else max
        lo, hi = max(lo, f(alo, blo)), min(hi, f(ahi, bhi))
    elif op == "div" and nonneg_a and nonneg_b and alo >= 0 and blo >= 1:
        lo, hi = 0, min(hi, ahi)
    elif op == "rem" and b.is_const and b.value != 0:
        d = abs(b.value) - 1
        lo, hi = (0 if nonneg_a else -d), d
    return (None if lo == -_INF else int(lo)), (None if hi == _INF else int(hi))


def bounds(p: Poly, table: SymbolTable) -> tuple:
    """Interval of ``p`` from its symbols' bounds (``-inf``/``inf`` where unbounded)."""
    lo = hi = 0
    for m, c in p.t.items():
        mlo, mhi = 1, 1
        for s in m:
            info = table.info.get(s)
            slo = info.lo if info is not None and info.lo is not None else -_INF
            shi = info.hi if info is not None and info.hi is not None else _INF
            cands = [_mul(x, y) for x in (mlo, mhi) for y in (slo, shi)]
            mlo, mhi = min(cands), max(cands)
        x, y = _mul(c, mlo), _mul(c, mhi)
        lo, hi = lo + min(x, y), hi + max(x, y)
    return lo, hi


_INF = float("inf")


def _mul(x, y):
    if x == 0 or y == 0:  # 0 * inf: the bound of a term that is 0
        return 0
    return x * y


def simplify(p: Poly, table: SymbolTable) -> Poly:
    """Fold ``d*div(x, d) + rem(x, d)`` back into ``x`` (what unravel-then-linearize leaves)."""
    changed = True
    while changed:
        changed = False
        for m, c in list(p.t.items()):
            for s in m:
                atom = getattr(table.info.get(s), "atom", None)
                if not atom or atom[0] != "rem":
                    continue
                _, x, d = atom
                q = table.atoms.get(("div", x.key(), d.key(), table.info[s].rng))
                if q is None:
                    continue
                rest = list(m)
                rest.remove(s)
                partner = Poly({tuple(rest): c}) * q * d
                if all(p.t.get(pm) == pc for pm, pc in partner.t.items()):
                    p = p - partner - Poly({m: c}) + Poly({tuple(rest): c}) * x
                    changed = True
                    break
            if changed:
                break
    return p


def trivially_nonneg(p: Poly, table: SymbolTable) -> bool:
    """True when p >= 0 follows from symbol signs alone (extents shifted to 1 + e)."""
    if not p.t:
        return True
    if all(c >= 0 for c in p.t.values()):  # fast path: no shifting can make it negative
        return all(getattr(table.info.get(s), "nonneg", False) for s in p.symbols())
    info = table.info
    for s in p.symbols():
        if s not in info or not info[s].nonneg:
            return False
    key = p.key()
    hit = table.shifted.get(key)
    if hit is None:
        hit = table.shifted[key] = _shifted_nonneg(p, info)
    return hit


def _shifted_nonneg(p: Poly, info) -> bool:
    """Whether p has no negative coefficient once every positive symbol s is written 1 + s."""
    out: dict = {}
    for m, c in p.t.items():
        terms = {(): c}
        for s in m:   # m is sorted, so appending keeps every monomial sorted
            if info[s].positive:
                nxt: dict = {}
                for mm, cc in terms.items():
                    nxt[mm + (s,)] = nxt.get(mm + (s,), 0) + cc
                    nxt[mm] = nxt.get(mm, 0) + cc
                terms = nxt
            else:
                terms = {mm + (s,): cc for mm, cc in terms.items()}
        for mm, cc in terms.items():
            out[mm] = out.get(mm, 0) + cc
    return all(c >= 0 for c in out.values())


def _tighten(f: Poly) -> Poly:
    """An integral fact ``g*X + c >= 0`` (``g`` the gcd of its non-constant integer coefficients,
    so ``X`` is an integer) as ``g*X + g*floor(c/g) >= 0``: ``31 - 8n >= 0`` gives ``24 - 8n``
    (n <= 3), what a loop ``range(0, 32, 8)`` means for its iteration count."""
    coefs = [c for m, c in f.t.items() if m != ()]
    if not coefs or not all(Fraction(c).denominator == 1 for c in [*coefs, f.value]):
        return f
    g = math.gcd(*(int(c) for c in coefs))
    c = int(f.value)
    return f if g <= 1 or c % g == 0 else f - (c % g)


class Prover:
    """Proves polynomial inequalities from ``>= 0`` facts (see module docstring)."""

    def __init__(self, table: SymbolTable, pin: dict | None = None, extra: list = (),
                 budget: int = 3000):
        self.table = table
        self.pin = {k: _p(v) for k, v in (pin or {}).items()}
        self.extra = list(extra)
        self.budget = budget
        self._alias: dict = {}

    def pinned(self, p: Poly) -> Poly:
        """``p`` under the pins: pinned symbols replaced by their values, and each div/rem/min/
        max atom whose operands mention them by the atom of the pinned operands (equal under
        the pins: ``rem(tx + bx * ty, 32)``, a lane id, is ``rem(tx, 32)`` on a 1-D launch)."""
        for s in p.symbols():
            val = self.pin.get(s) or self._canon(s)
            if val is not None:
                p = p.subst(s, val)
        return p

    def _canon(self, s):
        """The table's atom for ``s``'s operation on its pinned operands, where that is not ``s``
        (also one atom for a thread-2 copy, :mod:`.shared`, and the atom written directly)."""
        if s in self._alias:
            return self._alias[s]
        self._alias[s] = None   # (no atom mentions itself; this only stops a runaway)
        info = self.table.info.get(s)
        base = self.pin.get(s.split("'")[0])   # thread 2's copy of a pinned id or extent
        if base is not None and base.is_const:
            self._alias[s] = base
        elif info is not None and info.atom is not None and self.pin:
            op, a, b = info.atom
            got = self.table.atom(op, self.pinned(a), self.pinned(b),
                                  info.rng or (-I32_MAX - 1, I32_MAX))
            self._alias[s] = None if got == Poly.sym(s) else got
        return self._alias[s]

    def nonneg(self, goal: Poly, facts: list, depth: int = 8) -> bool:
        """Prove ``goal >= 0``. Symbols are integers, so an integral goal ``X + k >= 0`` may be
        relaxed to ``X + k + 1 - eps >= 0`` (X > -k - 1 is the same as X >= -k)."""
        facts = list(facts) + self.extra
        facts += self.table.all_facts(goal.symbols() | {s for f in facts for s in f.symbols()})
        goal = self.pinned(goal)
        if goal.t and all(Fraction(c).denominator == 1 for c in goal.t.values()):
            goal = goal + Fraction(4095, 4096)
        unique: dict = {}
        for f in facts:
            f = _tighten(self.pinned(f))
            unique.setdefault(f.key(), f)
        facts = list(unique.values())
        if any(f.is_const and f.value < 0 for f in facts):
            return True  # contradictory facts: the access is unreachable
        facts = [f for f in facts if not f.is_const]
        self._left = self.budget
        self._memo: dict = {}
        return self._prove(goal, facts, depth)

    def eq_zero(self, p: Poly, facts: list) -> bool:
        p = self.pinned(simplify(p, self.table))
        if not p.t:
            return True
        return self.nonneg(p, facts) and self.nonneg(-p, facts)

    def divides(self, d: Poly, p: Poly, facts: list) -> bool:
        p = self.pinned(simplify(p, self.table))
        d = self.pinned(d)
        if not p.t:
            return True
        q = p.div_exact(d, integral=True)
        if q is not None:
            return self.nonneg(q, facts)
        return False

    def _prove(self, goal: Poly, facts: list, depth: int) -> bool:
        if trivially_nonneg(goal, self.table):
            return True
        if depth == 0 or self._left <= 0:
            return False
        key = (goal.key(), depth)
        if key in self._memo:
            return self._memo[key]
        self._left -= 1
        self._memo[key] = False
        info = self.table.info
        syms = sorted(goal.symbols(), key=lambda s: (-info[s].rank if s in info else 0, s))
        ok = False
        for s in syms:  # eliminate the innermost symbol some fact bounds (Fourier-Motzkin order)
            lin = goal.linear_in(s)
            if lin is None:
                continue
            c, _ = lin
            tried = False
            for f in facts:
                flin = f.linear_in(s)
                if flin is None or not flin[0].t:
                    continue
                lam = self._ratio(c, flin[0])
                if lam is None:
                    continue
                tried = True
                if self._prove(goal - lam * f, facts, depth - 1):
                    ok = True
                    break
            if ok or tried:
                break
        self._memo[key] = ok
        return ok

    def _ratio(self, c: Poly, a: Poly):
        """lam >= 0 with lam * a == c, or None."""
        lam = c.div_exact(a)
        if lam is None and len(a.t) == 1 and len(c.t) >= 1:
            return None
        if lam is None:
            return None
        return lam if trivially_nonneg(lam, self.table) else None
