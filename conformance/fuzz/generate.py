"""The seeded kernel generator: kernel ``index`` of seed ``seed`` is always the same kernel,
whatever else is generated, so any kernel can be regenerated from its number alone.

A kernel: a value dtype T, a partitioned output ``y`` (Region or Out, under one of the six
partitions), an In buffer ``x`` and, when used, an index buffer ``idx``, a scalar ``p`` and an
Atomic buffer ``h``; 0-3 value stages (:mod:`.stages`) folding values into ``acc``; then the
write of ``y`` (:mod:`.writes`)."""
from __future__ import annotations

import functools
import random

from .case import Case, Param
from .launches import counterexample, launches
from .source import Gen
from .stages import BARRIER_FREE, UNIFORM, divergent, guarded
from .writes import WRITERS

PARTITIONS = tuple(WRITERS)
DTYPES = (["f32"] * 6 + ["i32"] * 4 + ["f16", "f16", "bf16", "f64", "f64", "u32", "u32", "i64", "i64",
                                      "i16", "u8", "i8", "u16", "u64"])
ATOMIC_DTYPES = ("i32", "i32", "u32", "i64", "u64", "f32", "f32", "f64")


def rng_for(seed: int, index: int) -> random.Random:
    return random.Random(f"kaio-fuzz:{seed}:{index}")


def _partition_text(g: Gen) -> str:
    r = g.rnd
    if g.part == "elementwise":
        return r.choice(["", ", elementwise()"])
    if g.part == "blocked":
        g.k = r.choice([1, 2, 2, 3, 4])
        return f", blocked({g.k})"
    if g.part == "grid_stride":
        return ", grid_stride()"
    if g.part == "rows":
        return ", rows()"
    if g.part == "rows_per_block":
        return f", rows_per_block({r.choice([32, 64, 128])})"
    sizes = [2, 4, 8, 16]
    while True:
        g.tile = (r.choice(sizes), r.choice(sizes))
        if not g.needs.warp or g.tile[0] * g.tile[1] >= 32:
            return f", tiles({g.tile[0]}, {g.tile[1]})"


def _geometry(g: Gen) -> None:
    r = g.rnd
    if g.part == "tiles":
        g.geom, g.ydims = "2d", 2
    elif g.part == "elementwise":
        g.geom = "2d" if r.random() < 0.2 else "1d"
        g.ydims = 2 if r.random() < 0.2 else 1
    elif g.part in ("rows", "rows_per_block"):
        g.ydims = 2
        g.geom = "2d" if g.part == "rows_per_block" and r.random() < 0.15 else "1d"


def _stages(g: Gen) -> None:
    r = g.rnd
    for _ in range(r.choice([0, 1, 1, 2, 2, 3])):
        roll = r.random()
        if roll < 0.35:
            r.choice(BARRIER_FREE)(g)
        elif roll < 0.5:
            guarded(g)
        else:
            r.choice(UNIFORM)(g)
    if r.random() < 0.04:
        divergent(g)


def _prelude(g: Gen) -> list:
    T = g.T
    if g.geom == "1d":
        ids = ["t = kaio.thread_idx.x", "nt = kaio.block_dim.x", "g = kaio.global_id()"]
    else:
        ids = ["t = kaio.thread_idx.y * kaio.block_dim.x + kaio.thread_idx.x",
               "nt = kaio.block_dim.x * kaio.block_dim.y",
               "g = (kaio.block_idx.y * kaio.grid_dim.x + kaio.block_idx.x) * nt + t"]
    shapes = ["n = y.shape[0]"] + (["m = y.shape[1]"] if g.ydims == 2 else []) + ["nx = x.shape[0]"]
    if "idx" in g.uses:
        shapes.append("ni = idx.shape[0]")
    return ["    " + s for s in ids + shapes + [f"acc = {T}(0)"]]


def generate(seed: int, index: int, launch_count: int = 4) -> Case:
    """Kernel ``index`` of the run seeded ``seed``."""
    r = rng_for(seed, index)
    g = Gen(r, r.choice(DTYPES), r.choice(PARTITIONS))
    g.intent = "out" if r.random() < 0.35 else "region"
    g.atomic_dtype = r.choice(ATOMIC_DTYPES)
    g.atomic_len = r.choice([1, 4, 7])
    _geometry(g)
    _stages(g)
    part = _partition_text(g)   # after the stages: tiles must fit a warp when they use warp ops
    WRITERS[g.part](g)
    name = f"k{index}"
    params = [Param("x", "in", g.T)]
    sig = [f"x: kaio.In[{g.T}]"]
    if "idx" in g.uses:
        params.append(Param("idx", "idx", "i32"))
        sig.append("idx: kaio.In[i32]")
    if "p" in g.uses:
        params.append(Param("p", "scalar", "i32"))
        sig.append("p: i32")
    yt = f"{g.T}, 2" if g.ydims == 2 else g.T
    if g.ydims == 2 and part.startswith(", elementwise"):
        part = ""
    intent = "Out" if g.intent == "out" else "Region"
    params.append(Param("y", g.intent, g.T, g.ydims))
    sig.append(f"y: kaio.{intent}[{yt}{part}]")
    if "h" in g.uses:
        params.append(Param("h", "atomic", g.atomic_dtype))
        sig.append(f"h: kaio.Atomic[{g.atomic_dtype}]")
    prelude = _prelude(g)
    head = ["@kaio.kernel", f"def {name}({', '.join(sig)}):"]
    offset = len(head) + len(prelude)
    source = "\n".join(head + prelude + g.lines) + "\n"
    labels = {line + offset: lab for line, lab in g.labels.items()}
    features = set(g.features) | {f"partition:{g.part}", f"dtype:{g.T}", f"intent:{g.intent}",
                                  f"geometry:{g.geom}"}
    return Case(index, name, g.part, g.T, params, source, launches(g, launch_count),
                tuple(sorted(features)), tuple(g.mutations), labels, g.tolerant,
                functools.partial(counterexample, g))


HEADER = """\
# Generated by kaio.conformance.fuzz (seed {seed}); do not edit.
import kaio
from kaio import bf16, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64  # noqa: F401
from kaio.regions import blocked, elementwise, grid_stride, rows, rows_per_block, tiles  # noqa: F401
"""


def module_text(seed: int, cases: list) -> tuple[str, dict]:
    """The text of a module holding ``cases``, and each kernel's first line in it."""
    text = HEADER.format(seed=seed)
    first = {}
    for c in cases:
        text += "\n\n"
        first[c.name] = text.count("\n") + 1
        text += c.source
    return text, first
