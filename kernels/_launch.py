"""Small helpers shared by the library's kernels: dtypes by name and launch shapes."""
from __future__ import annotations

import kaio

#: the activation dtypes the ML ops accept (storage); math is f32 inside the kernels (f64 for
#: f64 arrays, which the torch ops take for gradcheck)
FLOAT_DTYPES = {"f32": kaio.f32, "f16": kaio.f16, "bf16": kaio.bf16, "f64": kaio.f64}

BLOCK = 256


def kdtype(name: str):
    """kaio dtype for a short name ('f32', 'f16', 'bf16')."""
    try:
        return FLOAT_DTYPES[name]
    except KeyError:
        raise ValueError(f"unsupported dtype {name!r}; use one of {', '.join(FLOAT_DTYPES)}") from None


def acc_dtype(name: str):
    """The dtype the ML kernels compute in for activations of dtype ``name``: f64 for f64,
    f32 for the rest."""
    return kaio.f64 if name == "f64" else kaio.f32


def np_dtype(name: str):
    """numpy storage dtype for a short name."""
    return kdtype(name).storage_np


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def reduction_grid(n: int, block: int = BLOCK, max_blocks: int = 1024) -> int:
    """Blocks for a grid-stride reduction over n items: enough to fill a GPU, capped so the
    per-block partials stay few (they are summed on the host)."""
    return max(1, min(cdiv(n, block), max_blocks))


def exact_threads_block(n: int, limit: int = BLOCK) -> int:
    """Largest block size <= limit dividing n, so that a launch of exactly n threads exists
    (used with the grid-stride partition when the stride must equal n)."""
    for b in range(min(limit, n), 0, -1):
        if n % b == 0:
            return b
    return 1

