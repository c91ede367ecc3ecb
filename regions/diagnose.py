"""What the race checker says when it rejects an access: the index as the user wrote it, and
where possible two concrete threads that collide on one element in a small launch."""
from __future__ import annotations

import itertools
from fractions import Fraction

from ..ir.core import Block
from .affine import AXES
from .partitions import owner_map
from .widths import type_range

_INFIX = {"add": ("+", 1), "sub": ("-", 1), "mul": ("*", 2), "div": ("//", 2), "rem": ("%", 2),
          "and": ("&", 0), "or": ("|", 0), "xor": ("^", 0), "shl": ("<<", 0), "shr": (">>", 0)}


def expr_text(v, param_names: dict, top: bool = True, depth: int = 0) -> str:
    """Readable text of an IR index value: ``i + 1``, ``thread_idx.x * 2``."""
    owner = v.owner
    if isinstance(owner, Block) or owner is None:
        return param_names.get(v.id) or v.name or "?"
    if (not top and v.name) or depth > 6:
        return v.name or "..."
    op = owner
    k = op.opcode
    sub = [expr_text(a, param_names, False, depth + 1) for a in op.operands]
    if k == "const":
        return str(op.attrs["value"])
    if k in ("thread_idx", "block_idx", "block_dim", "grid_dim"):
        return f"{k}.{AXES[op.attrs.get('axis', 0)]}"
    if k in ("lane_id", "warp_size"):   # as the user writes them
        return "kaio.lane_id()" if k == "lane_id" else "kaio.warp_size"
    if k == "shape":
        return f"{sub[0]}.shape[{op.attrs['axis']}]"
    if k == "load":
        return f"{sub[0]}[{', '.join(sub[1:])}]"
    if k == "cast":
        return sub[0]
    if k in _INFIX:
        sym, prec = _INFIX[k]
        parts = []
        for a, text in zip(op.operands, sub):
            inner = a.owner if not isinstance(a.owner, Block) else None
            if inner is not None and inner.opcode in _INFIX and _INFIX[inner.opcode][1] < prec and not a.name:
                text = f"({text})"
            parts.append(text)
        return f"{parts[0]} {sym} {parts[1]}"
    if k in ("min", "max", "neg", "abs", "select", "math"):
        return f"{k}({', '.join(sub)})"
    return v.name or k


def index_text(access, param_names) -> str:
    """The access's index as the user wrote it (a named variable shows its definition too)."""
    n = access.buf.type.ndim
    parts = []
    for v in access.op.operands[1:1 + n]:
        full = expr_text(v, param_names)
        if v.name and not isinstance(v.owner, Block) and v.owner is not None:
            parts.append(v.name if len(full) > 40 or full == v.name else f"{v.name} (= {full})")
        else:
            parts.append(full)
    return ", ".join(parts)


# --- concrete search ----------------------------------------------------------------------
SMALL_SHAPES = {1: (16,), 2: (4, 8), 3: (2, 3, 4)}
SMALL_LAUNCHES = [((2, 1, 1), (8, 1, 1)), ((1, 1, 1), (16, 1, 1)), ((4, 1, 1), (4, 1, 1)),
                  ((2, 2, 1), (4, 4, 1)), ((1, 1, 1), (4, 4, 1)), ((4, 1, 1), (8, 1, 1)),
                  ((16, 1, 1), (4, 1, 1)),
                  ((1, 2, 2), (4, 2, 1)), ((1, 1, 1), (4, 3, 2))]   # planes on z (3-d tiles)


def small_launches(walk, launches) -> list:
    """The small (grid, block) launches to search; a declared block (``@kaio.kernel(block=...)``)
    is the only block a launch may have, so it replaces theirs, on a few small grids."""
    block = walk.kernel.attrs.get("block")
    if block is None:
        return list(launches)
    return [(g, tuple(block)) for g in ((1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 2, 1))]


class Concrete:
    """Evaluates the walk's polynomials for one small launch."""

    def __init__(self, walk, grid, block, pin_free=0):
        self.walk, self.grid, self.block, self.pin_free = walk, grid, block, pin_free
        self.table = walk.table
        self.base = {}
        params = {v.id for v in walk.kernel.args}
        for name, (buf, axis) in self.table.shapes.items():
            self.base[name] = (SMALL_SHAPES.get(buf.type.ndim, (4,)) if buf.id in params
                               else (16, 16, 16))[axis]
        for p, v in zip(walk.kernel.params, walk.kernel.args):
            if not v.is_buffer and p.name in self.table.info:
                self.base[p.name] = 16
        for a in range(3):
            self.base[f"block_dim.{AXES[a]}"] = block[a]
            self.base[f"grid_dim.{AXES[a]}"] = grid[a]

    def threads(self, bid=(0, 0, 0)):
        for tz in range(self.block[2]):
            for ty in range(self.block[1]):
                for tx in range(self.block[0]):
                    yield (tx, ty, tz), bid

    def blocks(self):
        for bz in range(self.grid[2]):
            for by in range(self.grid[1]):
                for bx in range(self.grid[0]):
                    yield (bx, by, bz)

    def gid(self, tid, bid):
        g, b = self.grid, self.block
        blin = (bid[2] * g[1] + bid[1]) * g[0] + bid[0]
        return blin * b[0] * b[1] * b[2] + (tid[2] * b[1] + tid[1]) * b[0] + tid[0]

    def value(self, s, env):
        if s in env:
            return env[s]
        info = self.table.info.get(s)
        atom = getattr(info, "atom", None)
        if s in self.walk.wrapped:   # fixed-width arithmetic that may wrap: do it
            p, t = self.walk.wrapped[s]
            lo, hi = type_range(t)
            return (int(p.evaluate(_Lazy(self, env))) - lo) % (hi - lo + 1) + lo
        if atom is None:
            return 0
        op, a, b = atom
        x, y = a.evaluate(_Lazy(self, env)), b.evaluate(_Lazy(self, env))
        if op in ("div", "rem"):
            if y == 0:
                return 0
            q = int(Fraction(x) / Fraction(y))   # truncating, as the IR divides
            return q if op == "div" else x - y * q
        return min(x, y) if op == "min" else max(x, y)

    def free(self, polys, known=()) -> set:
        """The symbols of ``polys`` (through atoms' operands) that no launch value fixes."""
        out, todo = set(), [s for p in polys for s in p.symbols()]
        while todo:
            s = todo.pop()
            if s in out or s in self.base or s in known or s.startswith(("thread_idx.", "block_idx.")):
                continue
            atom = getattr(self.table.info.get(s), "atom", None)
            if atom is not None:
                todo += [*atom[1].symbols(), *atom[2].symbols()]
            elif s in self.walk.wrapped:
                todo += list(self.walk.wrapped[s][0].symbols())
            else:
                out.add(s)
        return out

    def unconfirmable(self, access) -> list:
        """Free symbols of the access no concrete run can pick a value for: anything but a loop
        iteration count (loaded data, loop-carried values, results that may have wrapped)."""
        return sorted(s for s in self.free(access.index + access.facts) if s not in self.walk.counters)

    def instances(self, access, tid, bid, fixed=None, limit=6):
        """The index tuples this access touches for one thread: loop iteration counts
        enumerated, every fact (guards, loop tests) checked. Empty when the index depends on
        a value no concrete run determines (:meth:`unconfirmable`)."""
        env = dict(self.base)
        for a in range(3):
            env[f"thread_idx.{AXES[a]}"] = tid[a]
            env[f"block_idx.{AXES[a]}"] = bid[a]
        env.update(fixed or {})
        if not access.index or self.unconfirmable(access):
            return []
        free = sorted(self.free(access.index + access.facts, env))
        if len(free) > 3:
            return []
        out = []
        for vals in itertools.product(range(limit), repeat=len(free)):
            e = dict(env, **dict(zip(free, vals)))
            lazy = _Lazy(self, e)
            if all(f.evaluate(lazy) >= 0 for f in access.facts):
                out.append(tuple(int(i.evaluate(lazy)) for i in access.index))
        return out


class _Lazy(dict):
    def __init__(self, conc, env):
        super().__init__(env)
        self.conc = conc

    def __missing__(self, s):
        v = Fraction(self.conc.value(s, self))
        return int(v) if v.denominator == 1 else v


def region_collision(walk, access, partition, shape_ok=None) -> str | None:
    """`thread 3 writes y[4], which thread 4 owns (grid=..., block=...)`, or None."""
    ndim = access.buf.type.ndim
    shape = SMALL_SHAPES[ndim]
    verb = {"load": "reads", "store": "writes", "atomic": "updates"}[access.kind]
    for grid, block in small_launches(walk, SMALL_LAUNCHES):
        try:
            partition.check_launch(shape, grid, block, buffer="?", kernel="?")
            owners = owner_map(partition, shape, grid, block)
        except Exception:
            continue
        conc = Concrete(walk, grid, block)
        for bid in conc.blocks():
            for tid, _ in conc.threads(bid):
                g = conc.gid(tid, bid)
                for idx in conc.instances(access, tid, bid):
                    if all(0 <= i < s for i, s in zip(idx, shape)) and owners[idx] != g:
                        who = f"thread {owners[idx]}" if owners[idx] >= 0 else "no thread"
                        return (f"e.g. with a buffer of shape {shape}, grid={grid}, block={block}: "
                                f"thread {g} {verb} {_elem(idx)}, which {who} owns")
    return None


def shared_collision(walk, a1, a2) -> str | None:
    """`threads 0 and 1 both ... buf[0] ...` inside one block, or None. Both threads are in
    the same iteration of every loop they must share one of (a block-uniform loop whose
    barriers put them in one interval), and each touches an element inside the array."""
    segs = {k for k, v in a1.segs.items() if a2.segs.get(k) == v}
    table = walk.table

    def common(s):
        info = table.info.get(s)
        return info is not None and info.uniform and all(lp in segs for lp in info.loops)

    shape = a1.buf.type.static_shape
    tries = (((1, 1, 1), (8, 1, 1)), ((1, 1, 1), (64, 1, 1)), ((1, 1, 1), (4, 4, 1)))
    for block in dict.fromkeys(b for _, b in small_launches(walk, tries)):   # (one block each)
        conc = Concrete(walk, (1, 1, 1), block)
        if conc.unconfirmable(a1) or conc.unconfirmable(a2):
            return None
        shared_syms = sorted(s for s in conc.free(a1.index + a1.facts) & conc.free(a2.index + a2.facts)
                             if common(s))
        if len(shared_syms) > 2:
            return None
        for vals in itertools.product(range(4), repeat=len(shared_syms)):
            fixed = dict(zip(shared_syms, vals))
            seen: dict = {}
            for tid, bid in conc.threads():
                t = conc.gid(tid, bid)
                for acc in (a1, a2) if a1 is not a2 else (a1,):
                    for idx in conc.instances(acc, tid, bid, fixed=fixed, limit=4):
                        if shape is not None and not all(0 <= i < n for i, n in zip(idx, shape)):
                            continue
                        for (t2, kind2) in seen.get(idx, ()):
                            kinds = {kind2, acc.kind}
                            if t2 != t and kinds != {"load"} and kinds != {"atomic"}:
                                return (f"e.g. with block={block}: threads {t2} ({_VERB[kind2]}) and "
                                        f"{t} ({_VERB[acc.kind]}) touch element {_elem(idx)} between "
                                        "the same two barriers")
                        seen.setdefault(idx, set()).add((t, acc.kind))
    return None


def unproved(walk, *accesses) -> str:
    """Why no example is shown: what the index depends on that no small launch determines."""
    conc = Concrete(walk, (1, 1, 1), (8, 1, 1))
    syms = sorted({s.split("#")[0] for a in accesses for s in conc.unconfirmable(a)})
    what = (f"the index depends on values it does not track ({', '.join(syms)}: loaded data, "
            "loop-carried values or arithmetic that may wrap)" if syms else
            "no two threads were found to collide on small launches")
    return f"the checker could not prove it race-free, and found no concrete collision: {what}"


_VERB = {"load": "reads", "store": "writes", "atomic": "atomic update"}


def _elem(idx) -> str:
    return "[" + ", ".join(map(str, idx)) + "]"
