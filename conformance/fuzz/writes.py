"""The final stage of every generated kernel: writes to the partitioned buffer ``y``, one family
of templates per partition. Each template writes the idiomatic, race-free form or, with some
probability, a racy edit of it (off-by-one, wrong stride, swapped axes, ...), recorded in
``Gen.mutations``; lines that use a construct the checker may not understand carry a label
(``unsigned index``, ``warp_size in index``, ...) naming the likely cause of a rejection."""
from __future__ import annotations

from .source import Gen


def store(g: Gen, idx: str, *labels: str) -> None:
    """``y[idx] = value``, with a Region read-back or an Out re-read, or (mutation) a read of
    an Out element before this thread wrote it, or a read of the neighbour's element."""
    if g.intent == "region" and g.ydims == 1 and g.mutate("neighbour read", 0.08):
        with g.block(f"if {idx} + 1 >= 0 and {idx} + 1 < n:"):   # >= 0: a narrow index wraps
            g.emit(f"acc = acc + y[{idx} + 1]", "neighbour read")
    v = g.val()
    if "acc" not in v:   # every value computed before stays live (dead loads would be removed)
        v = f"(acc + {v})" if g.chance(0.5) else f"({v} - acc)"
    if g.intent == "out":
        if g.mutate("out read before write", 0.06):
            g.emit(f"y[{idx}] = y[{idx}] + {v}", *labels, "out read")
            return
        g.emit(f"y[{idx}] = {v}", *labels)
        if g.chance(0.3):
            g.emit(f"y[{idx}] = y[{idx}] * {g.lit(2)}", *labels, "out re-read")
    elif g.chance(0.5):
        g.emit(f"y[{idx}] = y[{idx}] + {v}", *labels)
    else:
        g.emit(f"y[{idx}] = {v}", *labels)


def owned(g: Gen) -> None:
    if g.ydims == 1:
        with g.block("for i in y.owned():"):
            store(g, "i", "owned()")
    elif g.chance(0.7):
        with g.block("for r, c in y.owned():"):
            store(g, "r, c", "owned()")
    else:
        with g.block("for rc in y.owned():"):
            store(g, "rc", "owned()", "index tuple")


# --- elementwise ----------------------------------------------------------------------------
#: (index of the thread's element g, labels, mutation or None, needs warp-multiple blocks)
EW_FORMS = [
    ("g", ("global id",), None, False),
    ("g + 1", ("off-by-one",), "off-by-one", False),
    ("g - 1", ("off-by-one",), "off-by-one", False),
    ("n - 1 - g", ("reversed",), "reversed", False),
    ("2 * g", ("wrong stride",), "wrong stride", False),
    ("g * g", ("square index",), "square", False),
    ("g // 2", ("division index",), "wrong stride", False),
    ("g + p", ("param offset",), "param offset", False),
    ("(g // kaio.warp_size) * kaio.warp_size + g % kaio.warp_size", ("warp_size in index",), None, False),
    ("(g // 32) * 32 + g % 32", ("division index",), None, False),
    ("g - g % 32 + kaio.lane_id()", ("lane_id in index",), None, True),
    ("g % n", ("modulo index",), None, False),
    ("(g * 2) % n", ("modulo index",), "modulo", False),
    ("(g >> 1 << 1) + (g & 1)", ("bit-op index",), None, False),
    ("g ^ 1", ("bit-op index",), "xor", False),
    ("min(g, n - 1)", ("min/max index",), None, False),
    ("idx[min(g, ni - 1)]", ("data-dependent index",), "data-dependent", False),
    ("g if x[min(g, nx - 1)] > 0 else (g // 2) * 2 + g % 2", ("select index",), None, False),
]


def elementwise(g: Gen) -> None:
    if g.ydims == 2:
        return elementwise_2d(g)
    kind = g.pick(["owned", "form", "form", "form", "typed", "early", "affine", "carried", "param_guard",
                   "wrap_guard"])
    if kind == "owned":
        return owned(g)
    if kind == "early":
        with g.block("if g >= n:", "early return"):
            g.emit("return")
        return store(g, "g", "early return")
    if kind == "typed":
        return typed_index(g)
    if kind == "affine":
        return random_affine(g)
    if kind == "carried":
        g.emit("j = g")
        with g.block("for k in range(2):"):
            g.emit("j = j ^ 5")
        with g.block("if j >= 0 and j < n:"):
            return store(g, "j", "loop-carried index")
    if kind == "wrap_guard":
        return wrap_guard(g)
    if kind == "param_guard":
        g.uses.add("p")
        with g.block("if p == 0 and g + p < n:", "param guard"):
            return store(g, "g + p", "param guard")
    forms = [f for f in EW_FORMS if g.needs.warp or not f[3]]
    form, labels, mutation, _ = g.pick(forms)
    if mutation:
        g.mutations.append(mutation)
    if "p" in form:
        g.uses.add("p")
    if "idx" in form:
        g.uses.add("idx")
    g.emit(f"j = {form}", *labels)
    guard = "g < n and j >= 0 and j < n" if g.chance(0.5) else "j >= 0 and j < n"
    with g.block(f"if {guard}:"):
        store(g, "j", *labels)


def random_affine(g: Gen) -> None:
    """``a*g + b*t + c*jj + d*p + e`` with random coefficients (jj a loop variable): racy
    unless it is exactly ``g`` (or ``p`` is 0 on every launch)."""
    a, b, e = g.pick([-1, 0, 1, 1, 2]), g.pick([-1, 0, 0, 1]), g.pick([-1, 0, 0, 1, 2])
    c = g.pick([0, 0, 1, 2]) if g.chance(0.4) else None
    d = g.pick([1, -1, 2]) if g.chance(0.25) else 0
    terms = f"{a} * g + {b} * t" + (f" + {c} * jj" if c is not None else "")
    terms += f" + {d} * {g.param()}" if d else ""
    if (a, b, c or 0, e) != (1, 0, 0, 0) or d:
        g.mutations.append("random affine")
    if c is not None:
        with g.block(f"for jj in range({g.pick([1, 2, 3])}):", "loop"):
            g.emit(f"j = {terms} + {e}")
            with g.block("if j >= 0 and j < n:"):
                store(g, "j", "random affine")
        return
    g.emit(f"j = {terms} + {e}")
    with g.block("if j >= 0 and j < n:"):
        store(g, "j", "random affine")


#: conditions that never hold in unbounded integers, but do in i32 for a large p
WRAP_GUARDS = ["p > 0 and g + p < 0", "p > 1 and g * p < 0", "p > 0 and (p << 1) < 0",
               "p > 0 and p + p < p"]


def wrap_guard(g: Gen) -> None:
    """The thread's element, plus a neighbour's under a condition that only i32 wrap-around
    makes true (a launch with p = 2**31 - 1 takes it)."""
    g.uses.add("p")
    g.needs.extreme_p = True
    g.mutations.append("wrap guard")
    with g.block("if g < n:"):
        store(g, "g", "global id")
    with g.block(f"if {g.pick(WRAP_GUARDS)}:", "wrap guard"):
        with g.block("if g + 1 < n:"):
            store(g, "g + 1", "wrap guard")


def typed_index(g: Gen) -> None:
    """The thread's element through an index of another integer type."""
    ty = g.pick(["u32", "i64", "u64", "i16", "u16", "i8", "u8"])
    label = {"u32": "unsigned index", "u64": "unsigned index", "i64": "64-bit index"}.get(ty, "narrow index")
    # enough threads that the index wraps: 8-bit always, 16-bit sometimes (a larger launch)
    wrap = {"i8": 256, "u8": 256, "i16": 65536, "u16": 65536}.get(ty, 0)
    if wrap and (wrap <= 256 or g.chance(0.5)):
        g.needs.big = wrap
    g.emit(f"j = {ty}(g)", label)
    if ty.startswith("u"):
        guard = f"j < {ty}(n)"
    else:
        guard = "j >= 0 and j < n"
    with g.block(f"if {guard}:", label):
        store(g, "j", label)


def elementwise_2d(g: Gen) -> None:
    kind = g.pick(["owned", "div", "div", "swapped"])
    if kind == "owned":
        return owned(g)
    with g.block("if g < n * m:"):
        if kind == "swapped" and g.mutate("swapped axes", 1.0):
            return store(g, "g % n, g // n", "swapped axes")
        store(g, "g // m, g % m", "division index")


# --- blocked(k) ---------------------------------------------------------------------------
def blocked(g: Gen) -> None:
    k = g.k
    kind = g.pick(["owned", "loop", "loop", "carried", "break", "while", "static", "minbound", "reversed",
                   "unsigned"])
    if kind == "owned":
        return owned(g)
    trips = k
    base = f"g * {k}"
    extra = ()
    if g.mutate("overrun", 0.2):
        trips, extra = k + 1, ("overrun",)
    elif k > 1 and g.mutate("wrong stride", 0.15):
        base, extra = f"g * {g.pick([k - 1, k + 1])}", ("wrong stride",)
    if kind == "loop":
        with g.block(f"for jj in range({trips}):"):
            g.emit(f"i = {base} + jj")
            with g.block("if i < n:"):
                store(g, "i", "blocked loop", *extra)
    elif kind == "carried":
        g.emit(f"i = {base}")
        with g.block(f"for _jj in range({trips}):"):
            with g.block("if i < n:"):
                store(g, "i", "carried index", *extra)
            g.emit("i += 1")
    elif kind == "break":
        with g.block(f"for jj in range({trips}):"):
            g.emit(f"i = {base} + jj")
            with g.block("if i >= n:", "break"):
                g.emit("break")
            store(g, "i", "break", *extra)
    elif kind == "while":
        g.emit("jj = 0")
        with g.block(f"while jj < {trips} and {base} + jj < n:", "while loop"):
            store(g, f"{base} + jj", "while loop", *extra)
            g.emit("jj += 1")
    elif kind == "static":
        with g.block(f"for jj in kaio.static_range({trips}):"):
            with g.block(f"if {base} + jj < n:"):
                store(g, f"{base} + jj", "static_range", *extra)
    elif kind == "minbound":
        with g.block(f"for i in range({base}, min({base} + {trips}, n)):", "min/max bound"):
            store(g, "i", "min/max bound", *extra)
    elif kind == "reversed":
        with g.block(f"for jj in range({trips}):"):
            g.emit(f"i = {base} + ({trips} - 1 - jj)")
            with g.block("if i < n:"):
                store(g, "i", "reversed blocked loop", *extra)
    else:
        with g.block(f"for jj in range({trips}):"):
            g.emit(f"i = u32(g) * u32({k}) + u32(jj)" if base == f"g * {k}" else f"i = u32({base} + jj)",
                   "unsigned index")
            with g.block("if i < u32(n):", "unsigned index"):
                store(g, "i", "unsigned index", *extra)


# --- grid_stride ----------------------------------------------------------------------------
def grid_stride(g: Gen) -> None:
    kind = g.pick(["owned", "for", "for", "while", "unsigned", "blockexpr"])
    if kind == "owned":
        return owned(g)
    stride, start, extra = "kaio.grid_dim.x * kaio.block_dim.x", "g", ()
    if g.mutate("wrong stride", 0.2):
        stride, extra = g.pick(["kaio.block_dim.x", "kaio.grid_dim.x"]), ("wrong stride",)
    elif g.chance(0.15):
        stride, extra = "2 * kaio.grid_dim.x * kaio.block_dim.x", ("double stride",)
    elif g.mutate("off-by-one", 0.1):
        start, extra = "g + 1", ("off-by-one",)
    if kind == "for":
        with g.block(f"for i in range({start}, n, {stride}):"):
            store(g, "i", "grid-stride loop", *extra)
    elif kind == "while":
        g.emit(f"i = {start}")
        with g.block("while i < n:", "while loop"):
            store(g, "i", "while loop", *extra)
            g.emit(f"i += {stride}")
    elif kind == "unsigned":
        with g.block(f"for i in range(u32({start}), u32(n), u32({stride})):", "unsigned index"):
            store(g, "i", "unsigned index", *extra)
    else:
        offset = " + 1" if start != "g" else ""
        with g.block(f"for i in range(kaio.block_idx.x * kaio.block_dim.x + t{offset}, n, {stride}):",
                     "block offset"):
            store(g, "i", "block offset", *extra)


# --- rows -----------------------------------------------------------------------------------
def rows(g: Gen) -> None:
    kind = g.pick(["owned", "loop", "loop", "while", "stride"])
    if kind == "owned":
        return owned(g)
    if kind == "stride":
        with g.block("for r in range(g, n, kaio.grid_dim.x * kaio.block_dim.x):", "grid-stride rows"):
            with g.block("for c in range(m):"):
                store(g, "r, c", "grid-stride rows")
        return
    row, extra = "g", ()
    if g.mutate("off-by-one", 0.15):
        row, extra = "g + 1", ("off-by-one",)
    swapped = g.mutate("swapped axes", 0.15)
    with g.block(f"if {row} < n:"):
        if kind == "loop":
            with g.block("for c in range(m):"):
                if swapped:
                    with g.block(f"if c < n and {row} < m:"):
                        store(g, f"c, {row}", "swapped axes", *extra)
                else:
                    store(g, f"{row}, c", "row loop", *extra)
        else:
            g.emit("c = 0")
            with g.block("while c < m:", "while loop"):
                store(g, f"{row}, c", "while loop", *extra)
                g.emit("c += 1")


# --- rows_per_block -------------------------------------------------------------------------
def rows_per_block(g: Gen) -> None:
    kind = g.pick(["owned", "loop", "loop", "while", "one"])
    if kind == "owned":
        return owned(g)
    row, extra = "kaio.block_idx.x", ()
    if g.mutate("off-by-one", 0.12):
        row, extra = "kaio.block_idx.x + 1", ("off-by-one",)
    start, step = "t", "nt"
    if kind == "one" and g.mutate("whole row per thread", 1.0):
        with g.block(f"if t == 0 and {row} < n:"):
            with g.block("for c in range(m):"):
                store(g, f"{row}, c", "whole row per thread", *extra)
        return
    if g.mutate("wrong stride", 0.2):
        start, step = g.pick([("t", "1"), ("0", "1"), ("t", "nt // 2 + 1")])
        extra += ("wrong stride",)
    with g.block(f"if {row} < n:"):
        if kind == "loop":
            with g.block(f"for c in range({start}, m, {step}):", "block-stride loop"):
                store(g, f"{row}, c", "block-stride loop", *extra)
        else:
            g.emit(f"c = {start}")
            with g.block("while c < m:", "while loop"):
                store(g, f"{row}, c", "while loop", *extra)
                g.emit(f"c += {step}")


# --- tiles(th, tw) --------------------------------------------------------------------------
def tiles(g: Gen) -> None:
    th, tw = g.tile
    kind = g.pick(["owned", "one", "one", "loops"])
    if kind == "owned":
        return owned(g)
    ty, tx = "kaio.thread_idx.y", "kaio.thread_idx.x"
    by, bx = "kaio.block_idx.y", "kaio.block_idx.x"
    if kind == "one":
        r, c = f"{by} * {th} + {ty}", f"{bx} * {tw} + {tx}"
        extra = ()
        if g.mutate("off-by-one", 0.15):
            c, extra = c + " + 1", ("off-by-one",)
        elif g.mutate("swapped axes", 0.12):
            r, c, extra = f"{by} * {th} + {tx}", f"{bx} * {tw} + {ty}", ("swapped axes",)
        elif th != tw and g.mutate("swapped tile sizes", 0.12):
            r, c, extra = f"{by} * {tw} + {ty}", f"{bx} * {th} + {tx}", ("swapped tile sizes",)
        g.emit(f"r = {r}")
        g.emit(f"c = {c}")
        with g.block("if r < n and c < m:"):
            store(g, "r, c", "tile element", *extra)
        return
    sy, sx, extra = "kaio.block_dim.y", "kaio.block_dim.x", ()
    if g.mutate("wrong stride", 0.2):
        sy, sx = g.pick([("1", sx), (sy, "1")])
        extra = ("wrong stride",)
    with g.block(f"for lr in range({ty}, {th}, {sy}):", "block-stride loop"):
        with g.block(f"for lc in range({tx}, {tw}, {sx}):", "block-stride loop"):
            g.emit(f"r = {by} * {th} + lr")
            g.emit(f"c = {bx} * {tw} + lc")
            with g.block("if r < n and c < m:"):
                store(g, "r, c", "block-stride loop", *extra)


WRITERS = {"elementwise": elementwise, "blocked": blocked, "grid_stride": grid_stride, "rows": rows,
           "rows_per_block": rows_per_block, "tiles": tiles}
