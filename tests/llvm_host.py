"""Run a kernel's LLVM IR on this CPU, one call per thread (tests only).

The emitter retargeted to the host (kaio.backends.llvm_targets.host_target) is JIT-compiled by
llvmlite; thread and block ids live in module globals set before each call. This executes the
emitter's target-independent lowering -- integer semantics, casts, control flow, memory,
atomics, the portable math -- without a GPU. Kernels with barriers or warp operations cannot
run serially and are not accepted.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import itertools

import numpy as np

from kaio.backends import llvm_compile
from kaio.backends.abi import kernel_abi
from kaio.backends.llvm import emit_llvm
from kaio.backends.llvm_targets import host_target
from kaio.ir.types import BufType
from kaio.passes import target_pipeline

_CT = {"u8": ctypes.c_uint8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "u16": ctypes.c_uint16,
       "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64, "u64": ctypes.c_uint64,
       "f32": ctypes.c_float, "f64": ctypes.c_double}
_SERIAL_ONLY = ("barrier", "shuffle", "vote", "ballot", "lane_id", "warp_reduce", "block_reduce")


def _bf16_bits(x: float) -> int:
    return int(np.asarray(x, dtype=np.float64).astype(_BF16).view(np.uint16))


def _as_xmm(bits: int) -> float:
    # a __bf16 result travels in the low 16 bits of xmm0: return a float with that bit pattern
    return float(np.uint32(bits).view(np.float32))


_BF16 = None
_RUNTIME = []


def _install_runtime(llvm) -> None:
    """Soft-float helpers the JIT may call: half conversions from libgcc, bf16 truncation
    (missing from older libgcc) as Python callbacks."""
    global _BF16
    if _RUNTIME:
        return
    from kaio import dtypes as dt
    _BF16 = dt.bf16.np
    llvm.load_library_permanently(ctypes.util.find_library("gcc_s") or "libgcc_s.so.1")
    for name, arg in (("__truncsfbf2", ctypes.c_float), ("__truncdfbf2", ctypes.c_double)):
        cb = ctypes.CFUNCTYPE(ctypes.c_float, arg)(lambda x: _as_xmm(_bf16_bits(x)))
        _RUNTIME.append(cb)
        llvm.add_symbol(name, ctypes.cast(cb, ctypes.c_void_p).value)


def host_module(kernel):
    """(execution engine, entry address, lowered kernel) for ``kernel`` on this CPU."""
    for op in kernel.walk():
        if op.opcode in _SERIAL_ONLY:
            raise ValueError(f"kernel '{kernel.name}' uses {op.opcode}: it cannot run one thread at a time")
    t = host_target()
    llvm = llvm_compile._llvm()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    _install_runtime(llvm)
    k = target_pipeline(kernel, t.warp_size)
    mod = llvm.parse_assembly(emit_llvm(k, t))
    mod.verify()
    tm = llvm.Target.from_triple(t.triple).create_target_machine(cpu=t.cpu, features=t.features, opt=2)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
    pb.getModulePassManager().run(mod, pb)
    ee = llvm.create_mcjit_compiler(mod, tm)
    ee.finalize_object()
    return ee, ee.get_function_address(kernel_abi(k).entry), k


def run_on_host(kernel, args: list, grid, block) -> list:
    """Run ``kernel`` over ``grid`` x ``block`` serially; numpy buffers in ``args`` are
    updated in place (they are the results)."""
    flat = []
    for a, v in zip(args, kernel.args):
        if isinstance(v.type, BufType):
            flat.append(a.ctypes.data)
            flat.extend(int(s) for s in a.shape)
        else:
            flat.append(int(a) if v.type.is_bool else a.item() if isinstance(a, np.generic) else a)
    run_flat(kernel, flat, grid, block)
    return args


def run_flat(kernel, flat: list, grid, block) -> None:
    """Run ``kernel`` with its flat ABI arguments (pointers are host addresses)."""
    ee, addr, k = host_module(kernel)
    abi = kernel_abi(k)
    fn = ctypes.CFUNCTYPE(None, *[_CT[p.dtype] for p in abi.params])(addr)
    cell = {(s, ax): ctypes.c_int32.from_address(ee.get_global_value_address(f"__kaio_{s}_{ax}"))
            for s in ("thread_idx", "block_idx", "block_dim", "grid_dim") for ax in "xyz"}
    for ax, g, b in zip("xyz", grid, block):
        cell["grid_dim", ax].value, cell["block_dim", ax].value = g, b
    for bz, by, bx in itertools.product(range(grid[2]), range(grid[1]), range(grid[0])):
        cell["block_idx", "x"].value, cell["block_idx", "y"].value, cell["block_idx", "z"].value = bx, by, bz
        for tz, ty, tx in itertools.product(range(block[2]), range(block[1]), range(block[0])):
            cell["thread_idx", "x"].value = tx
            cell["thread_idx", "y"].value = ty
            cell["thread_idx", "z"].value = tz
            fn(*flat)
