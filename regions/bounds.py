"""How far each buffer access reaches, derived at compile time from the race checker's walk and
checked before every launch (:func:`check`).

An :class:`IndexBound` says that an access to a global buffer parameter has, along one axis, an
index at most (and at least) some expressions over values known at launch: shapes, integer
scalar arguments, grid and block extents. saxpy's ``x[i]`` under ``if i < y.shape[0]`` reaches
``y.shape[0] - 1``, so a launch with ``len(x) < len(y)``, which would read past the end of
``x`` on a GPU, is refused before anything is copied; an index that can reach -1 (``x[c - 1]``
with ``c`` from 0) is refused the same way.

A bound is found by eliminating, one Fourier-Motzkin step at a time, the symbols that are not
known at launch (thread ids, loop counters, ...) from the index with the facts that hold where
the access runs (the checker's facts and the steps its prover takes): ``index = bound -
sum(lam * fact) - rest`` with every ``lam``, fact and ``rest`` >= 0, which is the proof. An
access keeps the few bounds it finds that no other one implies, and a launch uses the tightest.
Where none is found (indices loaded from memory, loop-carried values) nothing is recorded and
the kernel launches as before; where the buffer's own extent bounds the index (``if i <
x.shape[0]``) nothing needs checking. The records are the typed kernel attribute
``index_bounds``, so the IR text form shows them.
"""
from __future__ import annotations

from fractions import Fraction

from ..errors import LaunchError
from ..ir.attrs import StructAttr, register
from ..records import frozen
from .affine import AXES, Poly, render, simplify, trivially_nonneg

#: bounds kept per access and direction; search steps and depth spent finding them
_MAX_BOUNDS, _BUDGET, _DEPTH = 4, 256, 8
_EXTENTS = tuple(f"{k}.{a}" for k in ("block_dim", "grid_dim") for a in AXES)


@frozen
class LaunchExpr(StructAttr):
    """A polynomial over launch-time values: ``terms`` are ``(numerator, denominator,
    factor, ...)``, a factor the name of a launch value (``n``, ``y.shape[0]``, ``grid_dim.x``)
    or an atom ``(op, terms, terms)`` for ``div``/``rem``/``min``/``max``; ``text`` is how
    messages show it."""

    text: str
    terms: tuple

    def __post_init__(self):  # the IR parser gives lists
        object.__setattr__(self, "terms", _freeze(self.terms))


def _freeze(v):
    return tuple(_freeze(x) for x in v) if isinstance(v, (list, tuple)) else v


@frozen
class IndexBound(StructAttr):
    """An access (``kind``: load, store or atomic) to ``buffer[index]`` at source ``line``
    whose index along ``axis`` is at most every expression of ``upper`` and at least every
    expression of ``lower``, on launches where every expression of ``when`` is >= 0 (on
    others the access never runs)."""

    buffer: str
    axis: int
    kind: str
    index: str
    line: int
    upper: tuple = ()
    lower: tuple = ()
    when: tuple = ()

    def __post_init__(self):
        for f in ("upper", "lower", "when"):
            object.__setattr__(self, f, tuple(getattr(self, f)))


register("launch_expr", LaunchExpr)
register("index_bound", IndexBound)


# --- compile time ----------------------------------------------------------------------------
def index_bounds(c) -> tuple:
    """The :class:`IndexBound` records of the kernel that checker ``c``
    (:class:`kaio.regions.checker.Checker`, after its run) accepted."""
    from .diagnose import index_text  # lazy: import time, ~1-4 ms; compile time only
    names = _LaunchNames(c)
    pv = c.prover(c.level)   # its pins and launch facts
    out, seen, memo = [], set(), {}
    for acc in c.walk.accesses:
        buf = c.names.get(acc.buf.id)   # parameters only
        if buf is None or acc.buf.type.space != "global":
            continue
        index = [pv.pinned(simplify(i, c.table)) for i in acc.index]
        facts = _facts(pv, c.table, acc.facts, index)
        if facts is None:  # contradictory facts: the access never runs
            continue
        facts_key = tuple(f.key() for f in facts)

        def lowest(p, facts=facts, facts_key=facts_key):  # accesses under one guard share these
            got = memo.get((p.key(), facts_key))
            if got is None:
                got = memo[p.key(), facts_key] = _lowest(p, facts, c.table, names)
            return got

        for axis, i in enumerate(index):
            upper = [-e for e in lowest(-i)]
            lower = lowest(i)
            last = c.walk.shape(acc.buf, axis) - 1
            if any(_signs_nonneg(last - b, c.table) for b in upper):
                upper = []  # within its own extent on every launch: nothing to check
            if any(_signs_nonneg(e, c.table) for e in lower):
                lower = []
            key = (buf, axis, tuple(b.key() for b in upper), tuple(b.key() for b in lower))
            if (upper or lower) and key not in seen:
                seen.add(key)
                line = acc.op.loc.line if acc.op.loc is not None else 0
                out.append(IndexBound(buf, axis, acc.kind, index_text(acc, c.names), line,
                                      tuple(names.expr(b) for b in upper),
                                      tuple(names.expr(b) for b in lower),
                                      _reachable(pv, acc.facts, lowest, c.table, names)))
    return tuple(out)


def _reachable(pv, guards, lowest, table, names) -> tuple:
    """Conditions over launch values (each ``>= 0``) without which the access never runs: a
    guard or loop fact ``g >= 0`` with ``g <= u`` needs ``u >= 0`` (``i < n`` with ``i >= 0``
    needs ``n >= 1``), so an access to an empty buffer's elements is not checked."""
    out: dict = {}
    for g in guards:
        for e in lowest(-pv.pinned(g)):
            if not _signs_nonneg(-e, table):
                out.setdefault((-e).key(), -e)
    return tuple(names.expr(u) for u in list(out.values())[:2 * _MAX_BOUNDS])


class _LaunchNames:
    """Which of the checker's symbols are values known at launch, under which name: extents,
    parameters' shapes (``y.shape[0]``), integer scalar parameters, and div/rem/min/max atoms
    of those."""

    def __init__(self, c):
        self.table = c.table
        self.names = dict(zip(_EXTENTS, _EXTENTS))
        self.is_known: dict = {}
        params = {v.id: p.name for p, v in zip(c.kernel.params, c.kernel.args)}
        for s, (buf, axis) in c.table.shapes.items():   # keyed by buffer value: parameters only
            if buf.id in params:
                self.names[s] = f"{params[buf.id]}.shape[{axis}]"
        for p, v in zip(c.kernel.params, c.kernel.args):
            if not v.is_buffer and v.type.is_int and p.name in c.table.info:
                self.names[p.name] = p.name

    def name(self, s: str) -> str | None:
        return self.names.get(s)

    def known(self, s: str) -> bool:
        got = self.is_known.get(s)
        if got is None:
            atom = getattr(self.table.info.get(s), "atom", None)
            got = self.is_known[s] = self.name(s) is not None or atom is not None and all(
                self.known(x) for x in atom[1].symbols() | atom[2].symbols())
        return got

    def terms(self, p: Poly) -> tuple:
        def factor(s):
            atom = getattr(self.table.info.get(s), "atom", None)
            return self.name(s) if atom is None else (atom[0], self.terms(atom[1]), self.terms(atom[2]))
        return tuple((Fraction(k).numerator, Fraction(k).denominator, *map(factor, m))
                     for m, k in sorted(p.t.items()))

    def expr(self, p: Poly) -> LaunchExpr:
        return LaunchExpr(render(p, self.names), self.terms(p))


def _facts(pv, table, facts, index) -> list | None:
    """The facts the prover would use for ``index`` (pinned), or None when they contradict."""
    facts = list(facts) + pv.extra
    facts += table.all_facts({s for p in list(facts) + index for s in p.symbols()})
    facts = [pv.pinned(f) for f in facts]
    if any(f.is_const and f.value < 0 for f in facts):
        return None
    return [f for f in facts if not f.is_const]


def _lowest(p: Poly, facts: list, table, names: _LaunchNames) -> list:
    """Polynomials ``e`` over launch-time values with ``p >= e``: subtract ``lam * fact``
    (``lam >= 0``) to cancel one unknown symbol at a time, innermost first, with every fact that
    can and that does not bring back a symbol already cancelled (Fourier-Motzkin): whenever what
    is left is ``e`` plus terms that are >= 0 by their signs, ``e`` is a bound, and cancelling
    those terms too may give a tighter one (``i - 1 >= -1``, and ``>= 0`` under ``i >= 1``).
    A bound that another one implies (``e2 - e >= 0`` by its signs) is dropped."""
    found: dict = {}
    left = [_BUDGET]

    def visit(q: Poly, gone: frozenset, depth: int) -> None:
        if left[0] <= 0:
            return
        left[0] -= 1
        e = Poly({m: k for m, k in q.t.items() if all(names.known(s) for s in m)})
        if _signs_nonneg(q - e, table):
            found.setdefault(e.key(), e)
        if depth == 0:
            return
        info = table.info
        unknown = sorted((s for s in (q - e).symbols() if not names.known(s)),
                         key=lambda s: (-info[s].rank if s in info else 0, s))
        for s in unknown:
            lin = q.linear_in(s)
            if lin is None:
                continue
            stepped = False
            for f in facts:
                flin = f.linear_in(s)
                if flin is None or not flin[0].t or f.symbols() & gone:
                    continue
                lam = lin[0].div_exact(flin[0])
                if lam is not None and trivially_nonneg(lam, table):
                    stepped = True
                    visit(q - lam * f, gone | {s}, depth - 1)
            if stepped:  # like the prover: one symbol per step, the innermost it can cancel
                return

    visit(p, frozenset(), _DEPTH)
    best = [e for e in found.values()
            if not any(o is not e and _signs_nonneg(o - e, table) for o in found.values())]
    return best[:_MAX_BOUNDS]


def _signs_nonneg(p: Poly, table) -> bool:
    """``p >= 0`` because every coefficient and every symbol is (the cheap half of
    :func:`trivially_nonneg`, which these large polynomials of extents make slow)."""
    return all(k >= 0 for k in p.t.values()) and all(
        getattr(table.info.get(s), "nonneg", False) for s in p.symbols())


# --- launch time -----------------------------------------------------------------------------
def symbols(e: LaunchExpr) -> set:
    """The launch values an expression reads."""
    return _symbols(e.terms)


def _symbols(terms) -> set:
    out = set()
    for _, _, *factors in terms:
        for f in factors:
            out |= {f} if isinstance(f, str) else _symbols(f[1]) | _symbols(f[2])
    return out


def evaluate(terms, env: dict):
    """The value of a :class:`LaunchExpr`'s terms for the launch values ``env`` (name -> int):
    an int, or a Fraction where a coefficient is one (ints otherwise: a launch's checks do
    this once per signature, and Fractions cost 10x); ZeroDivisionError for a div/rem atom
    by zero."""
    total = 0
    for num, den, *factors in terms:
        v = num if den == 1 else Fraction(num, den)
        for f in factors:
            v *= env[f] if isinstance(f, str) else _atom(f, env)
        total += v
    return total


def _atom(f, env):
    op, a, b = f
    x, y = evaluate(a, env), evaluate(b, env)
    if op in ("div", "rem"):
        if type(x) is int and type(y) is int:
            q = abs(x) // abs(y)   # truncation, as the kernel divides (exact for any size)
            q = -q if (x < 0) != (y < 0) else q
        else:
            q = int(x / y)  # Fractions divide exactly; int() truncates
        return q if op == "div" else x - y * q
    return min(x, y) if op == "min" else max(x, y)


def launch_env(grid, block, shapes: dict, scalars: dict) -> dict:
    """The launch values by name: extents, ``name.shape[k]`` for ``shapes[name]``, scalars."""
    env = {f"{k}.{a}": n for k, dims in (("block_dim", block), ("grid_dim", grid))
           for a, n in zip(AXES, dims)}
    for name, shape in shapes.items():
        env.update({f"{name}.shape[{k}]": s for k, s in enumerate(shape)})
    env.update(scalars)
    return env


def check(kernel: str, records, env: dict) -> None:
    """Raise :class:`LaunchError` when on this launch (``env``: :func:`launch_env`) an access
    of ``records`` (the kernel's :class:`IndexBound` list) reaches past the end of its buffer
    or before its start."""
    for bd in records:
        if any(_tightest((w,), env, min) < (0, "") for w in bd.when):
            continue  # the access cannot run on this launch
        top = _tightest(bd.upper, env, min)
        have = env[f"{bd.buffer}.shape[{bd.axis}]"]
        axis = "" if bd.axis == 0 else f" along axis {bd.axis}"
        access = f"{_VERB[bd.kind]} {bd.buffer}[{bd.index}] (line {bd.line})"
        if top is not None and top[0] >= have:
            raise LaunchError(
                f"kernel '{kernel}': buffer '{bd.buffer}' is too short{axis}: the kernel {access} up "
                f"to index {top[0]} (`{top[1]}` on this launch), so it needs a length of at least "
                f"{top[0] + 1}, but it has {have}; nothing was copied or launched")
        bottom = _tightest(bd.lower, env, max)
        if bottom is not None and bottom[0] < 0:
            raise LaunchError(
                f"kernel '{kernel}': the kernel {access} down to index {bottom[0]}{axis} "
                f"(`{bottom[1]}` on this launch), before the start of '{bd.buffer}'; nothing was "
                f"copied or launched")


_VERB = {"load": "reads", "store": "writes", "atomic": "updates"}


def _tightest(exprs, env, pick):
    """(the tightest of ``exprs`` on this launch as an int, its text), or None."""
    got = []
    for e in exprs:
        try:
            got.append((evaluate(e.terms, env), e.text))
        except ZeroDivisionError:
            continue
    if not got:
        return None
    v, text = pick(got, key=lambda vt: vt[0])
    return (v.__floor__() if pick is min else v.__ceil__()), text
