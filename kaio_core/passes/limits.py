"""Resource limits every kaio target shares, checked when a kernel is lowered (so a kernel that
cannot run anywhere fails at compile time, at the line that crosses the limit, instead of in
ptxas, the AMD linker or a numpy allocation of the reference backend)."""
from __future__ import annotations

from ..errors import CompileError

#: static ``.shared`` memory NVIDIA allows a kernel without opting in; kaio's PTX path places
#: a kernel's shared arrays in dynamic shared memory (opted in at load) when they need more
MAX_STATIC_SHARED = 48 * 1024
#: the most shared memory one block may use, per target (NVIDIA: the opt-in maximum of the
#: architecture; AMD: 64 KiB of LDS per work-group; the LLVM NVIDIA path: 48 KiB of static
#: shared memory, not yet moved to dynamic)
SHARED_LIMIT = {"sm_80": 166912, "sm_86": 101376, "sm_87": 166912, "sm_89": 101376,
                "sm_90": 232448, "sm_90a": 232448, "llvm": 48 * 1024, "amd": 64 * 1024}
#: the PTX header comment giving the bytes of dynamic shared memory a kernel's own shared arrays
#: take there (written by the PTX emitter, read by the CUDA loader)
DYN_SHARED_MARK = "kaio-shared-arrays-in-dynamic-shared-bytes:"
#: what the frontend lets through: the largest limit of any target (each target checks its own)
MAX_SHARED = max(SHARED_LIMIT.values())


def shared_layout(kernel) -> tuple[dict, int]:
    """({shared_array op's result id: byte offset}, total bytes): the kernel's shared arrays in
    program order, each 16-byte aligned (kaio.mma.shared_tile 1024; then the total has 1024
    bytes of slack for aligning the window's base) (how kaio's PTX path lays them out in dynamic shared
    memory when the total passes :data:`MAX_STATIC_SHARED`)."""
    offsets, total, swizzled = {}, 0, False
    for op in kernel.walk():
        if op.opcode == "shared_array":
            if op.attrs.get("swizzle"):         # kaio.mma.shared_tile: 1024-byte aligned
                total = -(-total // 1024) * 1024
                swizzled = True
            offsets[op.results[0].id] = total
            total += -(-_nbytes(op) // 16) * 16
    # the dynamic window's base is aligned at run time for swizzled tiles: room for the shift
    return offsets, total + (1024 if swizzled else 0)


def _nbytes(op) -> int:
    n = op.attrs["dtype"].itemsize
    for s in op.attrs["shape"]:
        n *= s
    return n


def check_static_shared(kernel, limit: int = MAX_SHARED, where: str = "any kaio target") -> None:
    """CompileError at the ``kaio.shared_array`` whose bytes take the kernel's shared memory
    past ``limit`` (arrays counted in program order)."""
    total = 0
    for op in kernel.walk():
        if op.opcode != "shared_array":
            continue
        n = _nbytes(op)
        total += n
        if total > limit:
            before = total - n
            what = (f"this shared array needs {n:,} bytes" if not before else
                    f"this shared array needs {n:,} bytes, on top of {before:,} in the arrays before it")
            raise CompileError.at(
                op.loc, f"{what}; a block has at most {limit:,} bytes ({limit // 1024} KiB) of "
                        f"shared memory on {where}", kernel=kernel.name,
                hint="use smaller tiles, or kaio.dynamic_shared(dtype) sized at launch "
                     "(k[grid, block, shared_bytes], up to the device's limit)")
