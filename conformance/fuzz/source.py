"""The kernel being written: body lines with indentation, fresh names, per-line labels, and the
random choices every part of the generator shares."""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field

#: shared arrays hold this many elements; launches use at most this many threads per block
SHARED = 64

FLOATS = ("f16", "bf16", "f32", "f64")


@dataclass
class Needs:
    """Constraints the body puts on launches."""

    warp: bool = False        # warp ops: threads per block a multiple of 32
    pow2: bool = False        # tree reductions: threads per block a power of two
    min_threads: int = 1      # threads per block at least this
    big: int = 0              # narrow-int indices: more than this many threads in all
    dynamic: int = 0          # dynamic shared bytes
    extreme_p: bool = False   # some launches with p = 2**31 - 1


@dataclass
class Gen:
    """One kernel under construction. ``T``: the value dtype; ``part``: the partition kind;
    ``geom``: '1d' or '2d' thread geometry (2-D blocks use the linear thread id ``t``)."""

    rnd: random.Random
    T: str
    part: str
    geom: str = "1d"
    ydims: int = 1
    intent: str = "region"    # y is kaio.Region or kaio.Out
    k: int = 1                # blocked(k)
    tile: tuple = (4, 4)      # tiles(th, tw)
    lines: list = field(default_factory=list)
    labels: dict = field(default_factory=dict)
    features: set = field(default_factory=set)
    mutations: list = field(default_factory=list)
    needs: Needs = field(default_factory=Needs)
    uses: set = field(default_factory=set)      # optional params used: 'idx', 'p', 'h'
    atomic_dtype: str = "i32"
    atomic_len: int = 4
    atomic_family: str = ""   # the family (stages.FAMILY) of the kernel's atomics on h
    tolerant: bool = False
    depth: int = 1
    _n: int = 0

    # --- random choices -----------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.rnd.random() < p

    def pick(self, seq):
        return self.rnd.choice(list(seq))

    def mutate(self, label: str, p: float = 0.3) -> bool:
        """With probability ``p``, apply a racy-on-purpose edit named ``label``."""
        if self.rnd.random() < p:
            self.mutations.append(label)
            return True
        return False

    def fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    # --- writing ------------------------------------------------------------------------
    def emit(self, text: str, *labels: str) -> None:
        """One line at the current depth; ``labels`` name the constructs on it (the likely
        cause when the checker rejects this line)."""
        self.lines.append("    " * self.depth + text)
        if labels:
            self.labels[len(self.lines)] = tuple(labels)

    @contextlib.contextmanager
    def block(self, header: str, *labels: str):
        self.emit(header, *labels)
        self.depth += 1
        start = len(self.lines)
        yield
        if len(self.lines) == start:
            self.emit("pass")
        self.depth -= 1

    # --- typed pieces -------------------------------------------------------------------
    @property
    def is_float(self) -> bool:
        return self.T in FLOATS

    def lit(self, v: int) -> str:
        """A literal of the value dtype."""
        return f"{self.T}({v})"

    def xread(self, index: str) -> str:
        """A load of the In buffer x, clamped into bounds (any index is allowed on In)."""
        return f"x[min(max({index}, 0), nx - 1)]"

    def idx_read(self, index: str) -> str:
        """A load of the index buffer idx (values in [0, y.shape[0])), clamped into bounds."""
        self.uses.add("idx")
        return f"idx[min(max({index}, 0), ni - 1)]"

    def param(self) -> str:
        self.uses.add("p")
        return "p"

    def val(self, depth: int = 2) -> str:
        """A value expression of dtype T over acc, x and the thread ids."""
        r = self.rnd
        if depth <= 0 or r.random() < 0.3:
            other = self.pick(["t", "g + 1", "g * 3 + 1", "nx - 1 - g"])
            return self.pick(["acc", "acc", self.xread("g"), self.xread(other), self.lit(r.randint(1, 3)),
                              f"{self.T}(t)"])
        a, b = self.val(depth - 1), self.val(depth - 1)
        ops = ["+", "-", "*", "min", "max"]
        if not self.is_float:
            ops += ["&", "^", "|"]
        op = r.choice(ops)
        if op in ("min", "max"):
            return f"{op}({a}, {b})"
        return f"({a} {op} {b})"
