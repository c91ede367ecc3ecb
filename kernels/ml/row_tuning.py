"""Which kernel and launch shape the row ops (softmax, rmsnorm, layernorm: kernels/ml/norms.py)
run, per shape: the measured table, the candidates, and :mod:`kaio.autotune` choosing among them.

The first candidate -- the default, what runs untuned (reference backend, ``KAIO_AUTOTUNE=0``,
fewer than :data:`TUNE_MIN_ELEMENTS` elements) -- is the measured table: the register-resident
kernel with :func:`resident_plan`'s threads and columns per thread, 16-byte chunks where the row
allows (:func:`resident_vec`) and :func:`resident_regs`'s register cap; the three-pass kernel at
kaio's launch shape for rows over 32768 columns. The others, for rows that fit in registers:
every columns-per-thread power of two from the chunk width to 32 whose block has 64 to 1024
threads, each under register caps of 64 and 40 (40 only up to 16 columns: at 32 it spills), and
the three-pass kernel with 256 and 1024 threads; for wider rows the three-pass kernel with 512
and 1024 threads; f64 rows (torch's gradcheck) the three-pass kernel only. Each candidate's
output is compared with the default's before it is timed (:data:`CHECK`: twice the ops'
tolerances, since both are checked against the same float64 reference). norms.launch_for builds
a candidate's launch; this module imports no kernel.
"""
from __future__ import annotations

from kaio.autotune import Autotuner, Config

from .._launch import kdtype

# --- the measured table: the untuned choice ----------------------------------------------------
#: the resident kernels' register cap where resident_regs has no measurement: capped at 64
#: registers, two 512-thread blocks share an SM
RESIDENT_REGS = 64


def resident_regs(per: int) -> int:
    """The register cap for ``per`` columns per thread. Measured on the H200 (benchmarks/
    row_ops_sweep.py, 2026-12-01 14:17 UTC, 4096x8192): at 16 columns a cap of 40 lets three
    512-thread blocks share an SM, and softmax went 102.4 -> 86.3 us (f32) and 65.9 -> 55.3 us
    (f16), layernorm 104.6 -> 86.4 us (f32), rmsnorm unchanged (81 us); at 32 columns (1024
    threads) 64 stays best (40 spills: softmax f32 111.7 -> 134.3 us)."""
    return 40 if per == 16 else RESIDENT_REGS


def resident_vec(dt: str, out_dt: str, cols: int) -> int:
    """Columns per chunk of the resident kernels: what one 16-byte access moves of the narrower
    of the two dtypes (4 for f32, 8 for f16/bf16), or 1 when ``cols`` is not a multiple."""
    v = 16 // min(kdtype(dt).itemsize, kdtype(out_dt).itemsize)
    return v if cols % v == 0 else 1


#: most columns a thread holds in registers in the resident kernels
RESIDENT_MAX_PER = 32
#: most threads per block the resident kernels use
RESIDENT_MAX_THREADS = 1024


def resident_plan(cols: int, vec: int = 1) -> tuple[int, int] | None:
    """(threads per block, columns per thread) for the register-resident kernels with chunks of
    ``vec`` columns, or None when the row is too wide (more than 1024 * RESIDENT_MAX_PER = 32768
    columns): those take the general kernels. Columns per thread is a power of two and at least
    ``vec``, so few variants are compiled; 256-thread blocks up to 2048 columns, 512 up to 16384
    (on the H200, 512 x 16 was the fastest shape for 8192 columns), 1024 beyond; narrow rows
    with ``vec`` > 1 use fewer threads (down to one warp) rather than idle ones."""
    threads = 256 if cols <= 2048 else 512 if cols <= 512 * RESIDENT_MAX_PER else 1024
    need = max(1, -(-cols // threads))
    per = 1 << (need - 1).bit_length()
    if per > RESIDENT_MAX_PER:
        return None
    if per < vec:
        per = vec
        chunks = -(-cols // per)
        threads = min(threads, max(32, -(-chunks // 32) * 32))
    return threads, per


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
    if resident_plan(cols) is None:
        return [three_pass_config(None), three_pass_config(512), three_pass_config(1024)]
    vec = resident_vec(dt, out_dt, cols)
    threads, per = resident_plan(cols, vec)
    out = [resident_config(threads, per, vec, resident_regs(per))]
    chunks = -(-cols // vec)
    p = vec
    while p <= RESIDENT_MAX_PER:
        t = -(-chunks // (p // vec))
        t = -(-t // 32) * 32
        if 64 <= t <= RESIDENT_MAX_THREADS:
            for cap in CAPS:
                c = resident_config(t, p, vec, cap)
                if (cap >= 64 or p <= 16) and c not in out:
                    out.append(c)
        p *= 2
    return out + [three_pass_config(256), three_pass_config(1024)]


def _tuner(op: str) -> Autotuner:
    def check(key):
        atol, rtol = CHECK[key[1]]
        return (SOFTMAX_ATOL[key[1]] if op == "softmax" else atol), rtol
    return Autotuner(name=f"kaio.kernels.ml.{op}", configs=lambda key: row_configs(*key),
                     outputs=lambda *args: [args[OUT_INDEX[op]]], check=check,
                     tune_when=lambda key: key[2] * key[3] >= TUNE_MIN_ELEMENTS)


#: one autotuner per row op (their records are named kaio.kernels.ml.softmax, ...)
TUNERS = {op: _tuner(op) for op in OUT_INDEX}


def tuned_launch(op: str, dt: str, out_dt: str, shape, launch_for):
    """A function of the op's kernel arguments that launches the configuration the autotuner
    picks for this shape (deciding, and tuning if need be, on its first call);
    ``launch_for(op, dt, out_dt, shape, config)`` builds a candidate's launch (norms.launch_for)."""
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
