"""kaio.conformance.fuzz: random kernels, numbers instead of anecdotes.

A seeded generator (:mod:`.generate`) writes kernels as Python source: every partition, affine
indices of thread ids, loop variables and a scalar parameter (some racy on purpose: off-by-one,
wrong stride, swapped axes), non-affine and data-dependent indices, guards on ids, parameters
and data, for/while loops, shared memory with (missing, misplaced) barriers, atomics, warp
operations, dtypes from i8 to f64. Each kernel comes with random valid launches.

For every kernel, :mod:`.classify` compares the static checker's verdict with the reference
sanitizer (races and ownership) over those launches; :mod:`.differential` runs the accepted,
clean ones on other backends and compares bit for bit; :mod:`.run` spreads the work over
processes and :mod:`.report` counts. One command (docs/testing.md):

    python3 -m kaio.conformance.fuzz --count 10000 --seed 1 --backends reference,cuda,cuda-llvm --out DIR
"""
from .generate import generate
from .run import Options, run

__all__ = ["Options", "generate", "run"]
