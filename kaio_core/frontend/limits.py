"""Resource limits every kaio target shares, checked when a kernel is lowered (so a kernel that
cannot run anywhere fails at compile time, at the line that crosses the limit, instead of in
ptxas, the AMD linker or a numpy allocation of the reference backend)."""
from __future__ import annotations

from ..errors import CompileError

#: static shared memory of one block on every target: NVIDIA allows 48 KiB of static
#: ``.shared`` per kernel (more only as dynamic shared memory, opted in at launch); AMD's LDS
#: has 64 KiB per work-group
MAX_STATIC_SHARED = 48 * 1024


def check_static_shared(kernel) -> None:
    """CompileError at the ``kaio.shared_array`` whose bytes take the kernel's static shared
    memory past :data:`MAX_STATIC_SHARED` (arrays counted in program order)."""
    total = 0
    for op in kernel.walk():
        if op.opcode != "shared_array":
            continue
        n = op.attrs["dtype"].itemsize
        for s in op.attrs["shape"]:
            n *= s
        total += n
        if total > MAX_STATIC_SHARED:
            before = total - n
            what = (f"this shared array needs {n:,} bytes" if not before else
                    f"this shared array needs {n:,} bytes, on top of {before:,} in the arrays before it")
            raise CompileError.at(
                op.loc, f"{what}; a block has at most {MAX_STATIC_SHARED:,} bytes (48 KiB) of static "
                        "shared memory on every kaio target", kernel=kernel.name,
                hint="use smaller tiles, or kaio.dynamic_shared(dtype) sized at launch "
                     "(k[grid, block, shared_bytes], up to the device's limit)")
