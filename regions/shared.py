"""Shared memory: within one barrier interval, no two threads of a block may touch one element
unless both only read (or both use atomics).

For every pair of accesses to one shared array in the same interval, or in two intervals one of
which may follow the other with no barrier between (see :mod:`.walk` for how intervals are
formed across if/for/while), thread 2's copy of the access gets its own symbols (thread ids,
loop counters of loops it may be at a different iteration of, loaded data) while
block-uniform values of the same iteration stay shared. For each way two threads can differ
(``tid'.a > tid.a`` or ``tid'.a < tid.a`` on some axis a, the axes before it in (z, y, x)
order equal) the prover must show some index component differs. Accesses are assumed in
bounds (the reference backend checks bounds).

All ``dynamic_shared`` arrays of a kernel are views of one allocation, so they form one group and
are compared by the bytes they touch (``[i * size, i * size + size)``), not by element index:
an f64 view's element ``t`` overlaps the f32 view's elements ``2t`` and ``2t + 1``.
"""
from __future__ import annotations

import dataclasses
import itertools

from ..errors import CompileError
from .affine import Poly
from .diagnose import index_text, shared_collision, unproved

_ids = itertools.count()


def check(checker) -> None:
    """Raise CompileError for the first shared-memory pair that may race."""
    walk = checker.walk
    groups: dict = {}
    for acc in walk.accesses:
        if acc.buf.type.space != "shared":
            continue
        key = "dyn" if acc.buf.owner is not None and getattr(acc.buf.owner, "opcode", "") == "dyn_shared" \
            else acc.buf.id
        groups.setdefault((key, walk.find(acc.interval)), []).append(acc)
    pairs = [(a1, a2) for accs in groups.values() for i, a1 in enumerate(accs) for a2 in accs[i:]]
    for c1, c2 in walk.concurrent_classes():  # e.g. the code before a loop, and its iterations
        for key in dict.fromkeys(k for k, c in groups if c == c1):
            pairs += [(a1, a2) for a1 in groups[key, c1] for a2 in groups.get((key, c2), ())]
    for a1, a2 in pairs:
        kinds = {a1.kind, a2.kind}
        if kinds == {"load"} or kinds == {"atomic"}:
            continue
        if a1 is a2 and a1.op.opcode == "mma_copy":   # one collective copy: disjoint elements
            continue
        if not checker.prove_all(lambda pv, a1=a1, a2=a2: _disjoint(checker, pv, a1, a2),
                                 *((a2, a1) if a2.kind != "load" else (a1, a2))):
            _report(checker, a1, a2)


def _spans(a1, a2, idx1, idx2) -> list:
    """Per index component, the (first, last) units each access touches: elements, or bytes
    for two views of the dynamic shared allocation whose element sizes differ."""
    s1, s2 = a1.buf.type.dtype.itemsize, a2.buf.type.dtype.itemsize
    if s1 == s2:
        return [((i1, i1), (i2, i2)) for i1, i2 in zip(idx1, idx2)]
    (i1,), (i2,) = idx1, idx2   # dynamic_shared views are 1-D
    return [((i1 * s1, i1 * s1 + (s1 - 1)), (i2 * s2, i2 * s2 + (s2 - 1)))]


class _Primer:
    """Renames thread 2's non-shared symbols s -> s' (copying their facts and definitions)."""

    def __init__(self, table, a1, a2):
        self.table = table
        self.segs = {k for k, v in a1.segs.items() if a2.segs.get(k) == v}
        self.cache: dict = {}
        self.suffix = f"'{next(_ids)}"

    def shared(self, s) -> bool:
        info = self.table.info.get(s)
        return info is not None and info.uniform and all(lp in self.segs for lp in info.loops)

    def name(self, s) -> str:
        if self.shared(s):
            return s
        if s not in self.cache:
            new = s + self.suffix
            self.cache[s] = new
            if new not in self.table.info:
                info = self.table.info[s]
                self.table.info[new] = dataclasses.replace(info, name=new, uniform=False, facts=[], atom=None)
                self.table.info[new].facts = [self.poly(f) for f in info.facts]
                if info.atom is not None:
                    op, a, b = info.atom
                    self.table.info[new].atom = (op, self.poly(a), self.poly(b))
        return self.cache[s]

    def poly(self, p: Poly) -> Poly:
        return Poly({tuple(sorted(self.name(s) for s in m)): c for m, c in p.t.items()})


def _disjoint(checker, pv, a1, a2) -> bool:
    pr = _Primer(checker.table, a1, a2)
    idx2 = [pr.poly(p) for p in a2.index]
    facts = list(a1.facts) + [pr.poly(f) for f in a2.facts]
    spans = _spans(a1, a2, a1.index, idx2)
    # iteration counts thread 2 has its own copy of (a loop it may be at another iteration of)
    counters = [(Poly.sym(s), Poly.sym(pr.cache[s])) for s in sorted(checker.walk.counters)
                if s in pr.cache]
    # two distinct threads differ in lexicographic (z, y, x) order: equal on the axes before
    # one, greater or less on it (which a linear id ty * block_dim.x + tx needs)
    same: list = []
    for ax in [a for a in "zyx" if f"thread_idx.{a}" not in pv.pin]:
        t1 = Poly.sym(f"thread_idx.{ax}")
        t2 = pr.poly(t1)
        for case in (t2 - t1 - 1, t1 - t2 - 1):
            if pv.nonneg(-case - 1, facts + same):
                continue  # the guards already rule this ordering out (e.g. `if tid == 0`)
            cf = facts + same + [case]
            if not _apart(pv, spans, cf) and not any(
                    all(_apart(pv, spans, cf + order) for order in ([n2 - n1 - 1], [n1 - n2 - 1],
                                                                    [n2 - n1, n1 - n2]))
                    for n1, n2 in counters):
                return False
        same += [t2 - t1, t1 - t2]
    return True


def _apart(pv, spans, facts) -> bool:
    """Some index component of the two accesses provably differs under ``facts``. The caller
    may split on the order of one loop's iteration counts in the two threads (n' > n, n' < n
    or n' == n, which covers every case): that proves a block-stride loop `for b in range(t,
    N, block_dim.x)` distinct per thread (b' - b = t' - t + block_dim.x * (n' - n), and
    |t' - t| < block_dim.x)."""
    return any(pv.nonneg(lo1 - hi2 - 1, facts) or pv.nonneg(lo2 - hi1 - 1, facts)
               for (lo1, hi1), (lo2, hi2) in spans)


def _what(acc, names, verb) -> str:
    """An access as the message names it: a fragment load or tile copy covers the whole array
    (its operands after the buffer are the tile's origin, or the copy's source)."""
    b = acc.buf.name or "shared"
    if acc.op.opcode == "mma_copy":
        return f"tile copy into `{b}` (kaio.mma.copy_tile)"
    if acc.op.opcode == "mma_load":
        return f"fragment load from `{b}` (kaio.mma.load_*)"
    return f"{verb[acc.kind]} `{b}[{index_text(acc, names)}]`"


def _report(checker, a1, a2):
    names = checker.names
    buf = a1.buf.name or "shared"
    try:  # (the example search compares elements: none for views of different sizes)
        found = (shared_collision(checker.walk, a1, a2)
                 if a1.buf.type.dtype.itemsize == a2.buf.type.dtype.itemsize else None)
    except Exception:  # the example is a courtesy; never mask the real error
        found = None
    blame, other = a2, a1  # the later access in program order is where the race shows
    verb = {"load": "read", "store": "write", "atomic": "atomic update"}
    if a1 is a2:
        msg = (f"shared array '{buf}': the {_what(a1, names, verb)} may touch one element from "
               "two threads of the block (the index is not distinct per thread)")
        hint = (f"partition the writes among the block's threads (index '{buf}' by thread_idx), or let "
                "one thread write: `if kaio.thread_idx.x == 0:`")
    else:
        line = f"line {other.op.loc.line}" if other.op.loc is not None else "elsewhere"
        b2, b1 = blame.buf.name or "shared", other.buf.name or "shared"
        what = (f"shared array '{buf}'" if b1 == b2 else
                f"dynamic shared views '{b2}' and '{b1}' (one allocation)")
        buf = b2
        msg = (f"{what}: the {_what(blame, names, verb)} and the "
               f"{_what(other, names, verb)} ({line}) may touch "
               f"{'one element' if b1 == b2 else 'the same bytes'} from two threads between the same "
               "two barriers")
        hint = ("put kaio.sync() between them, or guard so that the threads touch disjoint elements "
                "(e.g. `if tid < s: buf[tid] += buf[tid + s]`)")
        if any(a2.segs.get(k, v) != v for k, v in a1.segs.items()):   # a barrier between them
            msg += (" (a thread may start the loop's next iteration while a slower one is still "
                    "in the iteration before)")
            hint = ("end the loop body with kaio.sync(), so that an iteration starts only after "
                    "every thread is done with the one before")
    msg += f"; {found or unproved(checker.walk, a1, a2)}"
    err = CompileError.at(blame.op.loc, msg, kernel=checker.kernel.name, hint=hint)
    err.buffer, err.index, err.kind = buf, index_text(blame, names), "shared-race"
    raise err
