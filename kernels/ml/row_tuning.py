"""Which kernel and launch shape the row ops (softmax, rmsnorm, layernorm) run, per shape: the
candidates, and :mod:`kaio.autotune` choosing among them.

The first candidate -- the default, what runs untuned (reference backend, ``KAIO_AUTOTUNE=0``,
fewer than :data:`TUNE_MIN_ELEMENTS` elements) -- is the measured table of kernels/ml/norms.py:
the register-resident kernel with :func:`norms.resident_plan`'s threads and columns per thread,
16-byte chunks where the row allows (:func:`norms.resident_vec`) and :func:`norms.resident_regs`'s
register cap; the three-pass kernel at kaio's launch shape for rows over 32768 columns. The
others, for rows that fit in registers: every columns-per-thread power of two from the chunk width
to 32 whose block has 64 to 1024 threads, each under register caps of 64 and 40 (40 only up to
16 columns: at 32 it spills), and the three-pass kernel with 256 and 1024 threads; for wider rows
the three-pass kernel with 512 and 1024 threads; f64 rows (torch's gradcheck) the three-pass
kernel only. Each candidate's output is compared with the
default's before it is timed (:data:`CHECK`: two of the ops' tolerances, since both are checked
against the same float64 reference).
"""
from __future__ import annotations

import functools

from kaio.autotune import Autotuner, Config

from . import norms

#: row ops with fewer elements take the default untimed: their kernels take a few microseconds
#: and tuning each small shape would cost more compiles than it could save
TUNE_MIN_ELEMENTS = 1 << 20
#: register caps tried for the resident kernels (the table's is tried first)
CAPS = (64, 40)
#: (atol, rtol) between two candidates' outputs, by output dtype: twice the cases' tolerances
CHECK = {"f32": (2e-6, 2e-5), "f16": (2.0 ** -13, 2e-3), "bf16": (2.0 ** -13, 1.6e-2)}
#: softmax outputs are ~1/cols: a small atol (f16 subnormals are spaced 6e-8)
SOFTMAX_ATOL = {"f32": 1e-9, "f16": 1.2e-7, "bf16": 1e-9}
#: position of the output among each op's kernel arguments
OUT_INDEX = {"softmax": 1, "rmsnorm": 2, "layernorm": 3}


def resident_config(threads: int, per: int, vec: int, regs: int) -> Config:
    return Config(f"resident {threads}x{per} v{vec} r{regs}", kind="resident", threads=threads,
                  per=per, vec=vec, regs=regs)


def three_pass_config(threads: int | None) -> Config:
    """The general kernel; ``threads`` None: kaio's launch shape (256 threads per row)."""
    return Config("3-pass" + ("" if threads is None else f" {threads}"), kind="general", threads=threads)


def row_configs(dt: str, out_dt: str, rows: int, cols: int) -> list[Config]:
    """The candidates for [rows, cols] rows from ``dt`` to ``out_dt``, the table's choice first."""
    if "f64" in (dt, out_dt):  # torch's gradcheck: the general kernels, untuned
        return [three_pass_config(None)]
    if norms.resident_plan(cols) is None:
        return [three_pass_config(None), three_pass_config(512), three_pass_config(1024)]
    vec = norms.resident_vec(dt, out_dt, cols)
    threads, per = norms.resident_plan(cols, vec)
    out = [resident_config(threads, per, vec, norms.resident_regs(per))]
    chunks = -(-cols // vec)
    p = vec
    while p <= norms.RESIDENT_MAX_PER:
        t = -(-chunks // (p // vec))
        t = -(-t // 32) * 32
        if 64 <= t <= norms.RESIDENT_MAX_THREADS:
            for cap in CAPS:
                c = resident_config(t, p, vec, cap)
                if (cap >= 64 or p <= 16) and c not in out:
                    out.append(c)
        p *= 2
    return out + [three_pass_config(256), three_pass_config(1024)]


@functools.lru_cache(maxsize=None)
def launch_for(op: str, dt: str, out_dt: str, shape: tuple, config: Config):
    """The launch of ``config`` for row op ``op``: a function of the kernel's arguments."""
    rows, _ = shape
    p = config.params
    if p["kind"] == "general":
        k = norms._GENERAL[op](dt, out_dt)
        return k if p["threads"] is None else k[(rows,), (p["threads"],)]
    k = norms._RESIDENT[op](dt, out_dt, vec=p["vec"], regs=p["regs"])[(rows,), (p["threads"],)]
    per = p["per"]
    return lambda *args: k(*args, PER=per)


def _tuner(op: str) -> Autotuner:
    def check(key):
        atol, rtol = CHECK[key[1]]
        return (SOFTMAX_ATOL[key[1]] if op == "softmax" else atol), rtol
    return Autotuner(name=f"kaio.kernels.ml.{op}", configs=lambda key: row_configs(*key),
                     outputs=lambda *args: [args[OUT_INDEX[op]]], check=check,
                     tune_when=lambda key: key[2] * key[3] >= TUNE_MIN_ELEMENTS)


#: one autotuner per row op (their records are named kaio.kernels.ml.softmax, ...)
TUNERS = {op: _tuner(op) for op in OUT_INDEX}


def tuned_launch(op: str, dt: str, out_dt: str, shape):
    """A function of the op's kernel arguments that launches the configuration the autotuner
    picks for this shape (deciding, and tuning if need be, on its first call)."""
    rows, cols = shape
    key, shape, tuner = (dt, out_dt, rows, cols), (rows, cols), TUNERS[op]
    chosen = None

    def launch(*args):
        nonlocal chosen
        if chosen is not None:
            return chosen(*args)
        choice = tuner.choose(key, args, lambda c: launch_for(op, dt, out_dt, shape, c))
        run = launch_for(op, dt, out_dt, shape, choice.config)
        if choice.final:
            chosen = run
        return run(*args)

    return launch


# --- python3 -m kaio.kernels.ml.row_tuning: tune the benchmark's shapes, print what was tried ---
SHAPES = ((4096, 1024), (4096, 8192), (1024, 32768))


def main(argv=None) -> int:
    """Tune softmax, rmsnorm and layernorm at :data:`SHAPES` in f32, f16 and bf16 (again, over any
    cached winner) on device arrays, and print each record (``--out DIR``: also autotune_rows.md)."""
    import argparse
    import os

    import numpy as np

    import kaio
    from kaio import autotune
    from kaio.kernels._launch import np_dtype

    ap = argparse.ArgumentParser(prog="python3 -m kaio.kernels.ml.row_tuning", description=main.__doc__)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="4096x8192 in f32 and f16 only")
    args = ap.parse_args(argv)
    shapes = ((4096, 8192),) if args.quick else SHAPES
    lines = [f"device: {autotune.device_id()}"]
    for rows, cols in shapes:
        for dt in ("f32", "f16") if args.quick else ("f32", "f16", "bf16"):
            g = np.random.default_rng(0)
            x = kaio.to_device(g.normal(0.0, 2.0, (rows, cols)).astype(np_dtype(dt)))
            w = kaio.to_device(g.uniform(0.5, 1.5, cols).astype(np_dtype(dt)))
            b = kaio.to_device(g.uniform(-0.5, 0.5, cols).astype(np_dtype(dt)))
            y = kaio.device_array((rows, cols), np_dtype(dt))
            calls = {"softmax": (x, y), "rmsnorm": (x, w, y, 1e-6), "layernorm": (x, w, b, y, 1e-5)}
            for op, call in calls.items():
                with autotune.fresh(), autotune.choices() as got:
                    norms.row_kernel(op, dt, dt, (rows, cols))(*call)
                kaio.synchronize()
                for _, _, choice in got:
                    text = (autotune.format_record(choice.record) if choice.record else
                            f"{op} {dt} {rows}x{cols}: {choice.config.name} ({choice.source})")
                    print(text, flush=True)
                    lines.append(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "autotune_rows.md"), "w") as f:
            f.write("```\n" + "\n".join(lines) + "\n```\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
