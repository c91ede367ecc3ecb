"""Value stages: code before the final write that folds values into ``acc`` (dtype T). Loads
with affine and non-affine indices, guards, loops, local arrays and global atomics are
barrier-free (so they may sit under a thread-dependent guard); shared memory with barriers,
tree reductions, warp operations and block reductions sit in uniform control flow, with racy
edits (missing or misplaced barriers, unguarded trees, half-warp partials, divergent barriers)
recorded in ``Gen.mutations``."""
from __future__ import annotations

from .source import SHARED, Gen

#: indices into x (any index is legal on an In buffer; the load clamps it)
READ_FORMS = ["g", "t", "g * g", "(g * g + 3) % 7", "g // 3", "g ^ 3", "nx - 1 - g", "3 * g - t",
              "g + P", "g * P", "IDX"]


def read_index(g: Gen) -> str:
    form = g.pick(READ_FORMS)
    if "P" in form:
        form = form.replace("P", g.param())
    if form == "IDX":
        form = g.idx_read("g")
    return form


# --- barrier-free stages --------------------------------------------------------------------
def load(g: Gen) -> None:
    op = g.pick(["+", "-", "*"] if g.is_float else ["+", "-", "^", "&"])
    g.emit(f"acc = acc {op} {g.xread(read_index(g))}")


def loop(g: Gen) -> None:
    j = g.fresh("j")
    bound = g.pick(["2", "3", "4", "P % 4", "nx % 3"])
    if "P" in bound:
        bound = bound.replace("P", g.param())
    body_index = g.pick([f"g + {j}", f"g * {j}", f"{j} * {j} + t", f"(g + {j}) % 5", f"t - {j}"])
    kind = g.pick(["for", "for", "step", "down", "while", "break"])
    if kind == "for":
        header = f"for {j} in range({bound}):"
    elif kind == "step":
        header = f"for {j} in range(1, {bound} + 2, 2):"
    elif kind == "down":
        header = f"for {j} in range({bound}, -1, -1):"
    else:
        g.emit(f"{j} = 0")
        header = f"while {j} < {bound}:"
    with g.block(header, "while loop" if kind in ("while", "break") else "loop"):
        g.emit(f"acc = acc + {g.xread(body_index)}")
        if kind == "break":
            with g.block(f"if {g.xread('g + ' + j)} > 0:"):
                g.emit(f"{j} = {j} + 1")
                g.emit("break")
        if kind in ("while", "break"):
            g.emit(f"{j} = {j} + 1")


def local(g: Gen) -> None:
    g.features.add("local")
    loc = g.fresh("loc")
    g.emit(f"{loc} = kaio.local_array({g.T}, 4)")
    with g.block("for q in range(4):"):
        g.emit(f"{loc}[q] = {g.xread('g + q')}")
    g.emit(f"acc = acc + {loc}[t % 4]")


#: atomic op -> its commuting family (add and sub commute with each other, no two others do)
FAMILY = {"add": "add", "sub": "add", "min": "min", "max": "max", "and": "and", "or": "or",
          "xor": "xor"}


def atomic(g: Gen) -> None:
    """A global atomic on h (its final contents are compared across backends)."""
    g.features.add("atomic")
    g.uses.add("h")
    a = g.atomic_dtype
    floaty = a.startswith("f")
    ops = ["add", "min", "max"] if floaty else ["add", "sub", "min", "max", "and", "or", "xor"]
    op = g.pick(ops)
    # atomics of different kinds on h do not commute (min then and, add then max...): every
    # atomic of a kernel stays in the family of its first, so h has one defined final value
    if g.atomic_family and FAMILY[op] != g.atomic_family:
        op = g.atomic_family
    g.atomic_family = FAMILY[op]
    if floaty and op == "add":
        g.tolerant = True
    H = g.atomic_len
    # a square index stays non-affine without wrapping: g * g is negative past g = 46340, and
    # the wide launches of narrow-index kernels reach that (an index of -3, a generator error)
    index = g.pick(["0", f"g % {H}", f"t % {H}", f"{g.idx_read('g')} % {H}",
                    f"((g % 4096) * (g % 4096)) % {H}"])
    value = g.pick([f"{a}(1)", f"{a}(g)", f"{a}({g.xread('g')})"])
    g.emit(f"kaio.atomic_{op}(h, {index}, {value})")


def guarded(g: Gen) -> None:
    """A thread-, parameter- or data-dependent ``if`` around barrier-free stages."""
    cond = g.pick(["t < 5", "g % 2 == 0", "t >= nt // 2", "P > 0", "P == 0",
                   f"{g.xread('g')} > 0", "g < n"]).replace("P", "p")
    if "p" in cond.split():
        g.uses.add("p")
    g.features.add("guard")
    with g.block(f"if {cond}:"):
        g.pick(BARRIER_FREE)(g)
    if g.chance(0.3):
        with g.block("else:"):
            g.pick(BARRIER_FREE)(g)


BARRIER_FREE = [load, loop, local, atomic]


# --- stages with barriers or warp ops (uniform control flow only) --------------------------
def shared(g: Gen) -> None:
    """Write a shared array at a thread index, barrier, read another thread's element."""
    g.features.add("shared")
    sh = g.fresh("sh")
    g.emit(f"{sh} = kaio.shared_array({g.T}, {SHARED})")
    top = "nt"
    if g.chance(0.2):   # every element initialised by a block-stride loop first
        with g.block(f"for q in range(t, {SHARED}, nt):", "block-stride loop"):
            g.emit(f"{sh}[q] = {g.lit(0)}", "block-stride loop")
        g.emit("kaio.sync()")
        top = str(SHARED)
    w, wguard, wlab = g.pick([
        ("t", None, ("shared exchange",)), ("t", None, ("shared exchange",)),
        ("nt - 1 - t", None, ("shared exchange",)), ("t ^ 1", "(t ^ 1) < nt", ("bit-op index",)),
        ("t + 1", f"t + 1 < {SHARED}", ("shared write shift",)),
        ("2 * t", f"2 * t < {SHARED}", ("shared write shift",)),
        ("t // 2", None, ("division index",)), ("0", None, ("shared constant write",)),
        ("0", "t == 0", ("single writer",)), ("t % 8", None, ("modulo index",))])
    if w in ("t + 1", "2 * t", "t // 2", "0", "t % 8") and not (w == "0" and wguard):
        collide = w in ("t // 2", "0", "t % 8")
        g.mutations.append("shared write collision" if collide else "shared write shift")
    missing = g.mutate("missing barrier", 0.2)
    misplaced = not missing and g.mutate("misplaced barrier", 0.1)
    if misplaced:
        g.emit("kaio.sync()")
    if wguard:
        with g.block(f"if {wguard}:"):
            g.emit(f"{sh}[{w}] = {g.val(1)}", *wlab)
    else:
        g.emit(f"{sh}[{w}] = {g.val(1)}", *wlab)
    if not (missing or misplaced):
        g.emit("kaio.sync()")
    r, rlab = g.pick([("t", ()), ("t + 1", ()), ("t - 1", ()), ("nt - 1 - t", ()), ("0", ()),
                      ("(t + 3) % nt", ("modulo index",)), ("t ^ 1", ("bit-op index",)),
                      ("t // 2", ("division index",))])
    rlab = rlab or ("shared exchange",)
    with g.block(f"if {r} >= 0 and {r} < {top}:"):
        g.emit(f"acc = acc + {sh}[{r}]", *rlab)
    if g.chance(0.3):   # a second phase: this thread's element updated in place
        if not g.mutate("missing barrier", 0.3):
            g.emit("kaio.sync()")
        with g.block(f"if t < {SHARED}:"):
            g.emit(f"{sh}[t] = {sh}[t] + acc", "shared update")


def shared_loop(g: Gen) -> None:
    """The exchange repeated in a loop: the second barrier separates one iteration's reads from
    the next one's writes."""
    g.features.add("shared")
    sh = g.fresh("sl")
    g.emit(f"{sh} = kaio.shared_array({g.T}, {SHARED})")
    trips = g.pick(["2", "3", "P % 3 + 1"])
    if "P" in trips:
        trips = trips.replace("P", g.param())
    with g.block(f"for it in range({trips}):"):
        g.emit(f"{sh}[t] = acc", "shared loop")
        g.emit("kaio.sync()")
        with g.block("if t + 1 < nt:"):
            g.emit(f"acc = acc + {sh}[t + 1]", "shared loop")
        if not g.mutate("missing barrier", 0.3):
            g.emit("kaio.sync()")


def tree(g: Gen) -> None:
    """Tree reduction in shared memory (power-of-two blocks)."""
    g.features.add("shared")
    g.needs.pow2 = True
    tr = g.fresh("tr")
    g.emit(f"{tr} = kaio.shared_array({g.T}, {SHARED})")
    g.emit(f"{tr}[t] = acc", "tree")
    g.emit("kaio.sync()")
    guard = "t < s"
    if g.mutate("unguarded tree", 0.15):
        guard = "t + s < nt"
    sync = not g.mutate("missing barrier", 0.15)
    if g.chance(0.6):
        g.emit("s = nt // 2")
        with g.block("while s > 0:", "tree loop"):
            with g.block(f"if {guard}:"):
                g.emit(f"{tr}[t] = {tr}[t] + {tr}[t + s]", "tree loop")
            if sync:
                g.emit("kaio.sync()")
            g.emit("s = s // 2")
    else:
        with g.block("for kk in kaio.static_range(6):"):
            g.emit("s = 32 >> kk")
            with g.block(f"if {guard} and t + s < nt:"):
                g.emit(f"{tr}[t] = {tr}[t] + {tr}[t + s]", "tree loop")
            if sync:
                g.emit("kaio.sync()")
    if not sync:
        g.emit("kaio.sync()")
    g.emit(f"acc = acc + {tr}[0]", "read after barrier loop")


def warp(g: Gen) -> None:
    """Warp operations on a value, in uniform control flow (blocks a multiple of 32)."""
    g.features.add("warp")
    g.needs.warp = True
    W = "f32" if g.is_float else "i32"
    w = g.fresh("w")
    g.emit(f"{w} = {W}(acc)")
    for _ in range(g.rnd.randint(1, 2)):
        op = g.pick(["warp_sum", "warp_max", "warp_min", "shuffle_xor", "shuffle", "shuffle_up",
                     "shuffle_down", "vote", "ballot"])
        if op.startswith("warp_"):
            g.emit(f"{w} = kaio.{op}({w})")
        elif op == "shuffle_xor":
            g.emit(f"{w} = kaio.shuffle_xor({w}, {g.pick([1, 2, 16])})")
        elif op == "shuffle":
            src = f"(kaio.lane_id() * {g.pick([3, 5, 1])} + {g.pick([0, 1, 7])}) % kaio.warp_size"
            g.emit(f"{w} = kaio.shuffle({w}, {src})")
        elif op in ("shuffle_up", "shuffle_down"):
            g.emit(f"{w} = kaio.{op}({w}, {g.pick([1, 3, 8])})")
        elif op == "vote":
            vote = g.pick(["vote_any", "vote_all"])
            g.emit(f"acc = acc + ({g.lit(1)} if kaio.{vote}({w} > 0) else {g.lit(2)})")
        else:
            g.emit(f"acc = acc + {g.T}(kaio.ballot({w} > 0) & 255)")
    g.emit(f"acc = acc + {g.T}({w})")
    if g.chance(0.35):
        warp_partials(g, w, W)


def warp_partials(g: Gen, w: str, W: str) -> None:
    """One value per warp through shared memory, summed by every thread after a barrier."""
    g.features.add("shared")
    part = g.fresh("part")
    g.emit(f"{part} = kaio.shared_array({W}, 2)")
    cond, label = "t % 32 == 0", ("warp partials",)
    if g.chance(0.3):
        cond, label = "kaio.lane_id() == 0", ("lane_id guard",)
    elif g.mutate("half-warp partial", 0.2):
        cond, label = "t % 16 == 0", ("half-warp partial",)
    with g.block(f"if {cond}:", *label):
        g.emit(f"{part}[t // 32] = {w}", *label)
    g.emit("kaio.sync()")
    tot = g.fresh("tot")
    g.emit(f"{tot} = {part}[0]", "warp partials")
    with g.block("for q in range(1, nt // 32):"):
        g.emit(f"{tot} = {tot} + {part}[q]", "warp partials")
    g.emit(f"acc = acc + {g.T}({tot})")


def shared_atomics(g: Gen) -> None:
    """Counters in shared memory: initialise, barrier, atomics, barrier, read."""
    g.features.update({"shared", "atomic"})
    g.needs.min_threads = max(g.needs.min_threads, 4)
    cnt = g.fresh("cnt")
    ty = g.pick(["i32", "u32", "i64"])
    g.emit(f"{cnt} = kaio.shared_array({ty}, 4)")
    with g.block("if t < 4:"):
        g.emit(f"{cnt}[t] = {ty}(0)", "shared atomics")
    if not g.mutate("missing barrier", 0.15):
        g.emit("kaio.sync()")
    g.emit(f"kaio.atomic_{g.pick(['add', 'max', 'or'])}({cnt}, t % 4, {ty}(t + 1))", "shared atomics")
    if not g.mutate("missing barrier", 0.15):
        g.emit("kaio.sync()")
    g.emit(f"acc = acc + {g.T}({cnt}[t % 4])", "shared atomics")


def dynamic(g: Gen) -> None:
    """Dynamic shared memory (sized at launch); sometimes two arrays of different dtypes, which
    alias the same bytes."""
    g.features.add("dynamic shared")
    d = g.fresh("dyn")
    ty = g.pick(["f32", "i32", "f64", "i16"])
    size = {"f32": 4, "i32": 4, "f64": 8, "i16": 2}
    g.emit(f"{d} = kaio.dynamic_shared({ty})")
    g.needs.dynamic = max(g.needs.dynamic, SHARED * size[ty])
    two = g.chance(0.25)
    if two:
        e = g.fresh("dyn")
        ty2 = g.pick([x for x in size if size[x] != size[ty]])
        g.needs.dynamic = max(g.needs.dynamic, SHARED * size[ty2])
        g.emit(f"{e} = kaio.dynamic_shared({ty2})", "two dynamic shared")
        g.mutations.append("dynamic shared aliasing")
    g.emit(f"{d}[t] = {ty}(t)", "dynamic shared")
    if two:
        g.emit(f"{e}[t] = {ty2}(g)", "two dynamic shared")
    g.emit("kaio.sync()")
    with g.block("if t + 1 < nt:"):
        g.emit(f"acc = acc + {g.T}({d}[t + 1])", "dynamic shared")
    if two:
        g.emit(f"acc = acc + {g.T}({e}[t])", "two dynamic shared")


def block_reduce(g: Gen) -> None:
    g.features.add("block reduction")
    W = "f32" if g.is_float else "i32"
    op = g.pick(["block_sum", "block_max", "block_min"])
    g.emit(f"acc = acc + {g.T}(kaio.{op}({W}(acc)))", "block reduction")


def divergent(g: Gen) -> None:
    """A barrier or block reduction under a thread-dependent condition (always a racy edit)."""
    g.mutations.append("divergent barrier")
    cond = g.pick(["t < 16", "g % 2 == 0", f"{g.xread('g')} > 0"])
    with g.block(f"if {cond}:"):
        if g.chance(0.5):
            g.emit("kaio.sync()", "divergent barrier")
        else:
            g.emit(f"acc = acc + {g.T}(kaio.block_sum(f32(acc)))", "divergent barrier")


UNIFORM = [shared, shared, shared_loop, tree, warp, warp, shared_atomics, dynamic, block_reduce]
