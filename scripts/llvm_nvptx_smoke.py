#!/usr/bin/env python
"""Run the LLVM path's nvptx64 retarget on an NVIDIA GPU and compare with numpy.

This executes the target-independent part of the AMD code generator (the same LLVM IR emitter,
only the small per-target table differs) on real hardware. For each sample kernel of
tests/llvm_kernels.py it emits PTX through LLVM's NVPTX backend, loads it with the CUDA driver
(cuda.bindings.driver), launches it, copies every buffer back and compares with the numpy
reference. Prints one PASS/FAIL line per kernel; exits 1 if any fails, 2 if no GPU.

    python scripts/llvm_nvptx_smoke.py            # all samples
    python scripts/llvm_nvptx_smoke.py saxpy loops
"""
from __future__ import annotations

import copy
import ctypes
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import llvm_kernels as K  # noqa: E402

from kaio.backends import targets  # noqa: E402
from kaio.backends.abi import kernel_abi  # noqa: E402
from kaio.ir.types import BufType  # noqa: E402

_CT = {"u8": ctypes.c_uint8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "u16": ctypes.c_uint16,
       "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64, "u64": ctypes.c_uint64,
       "f32": ctypes.c_float, "f64": ctypes.c_double}


def check(result, what):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else rest


def setup():
    from cuda.bindings import driver as cu
    check(cu.cuInit(0), "cuInit")
    dev = check(cu.cuDeviceGet(0), "cuDeviceGet")
    A = cu.CUdevice_attribute
    major = check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "attr")
    ctx = check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    name = check(cu.cuDeviceGetName(64, dev), "cuDeviceGetName")
    name = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
    return cu, ("nvptx64-sm_90" if major >= 9 else "nvptx64-sm_80"), name


def run_sample(cu, target, s):
    kernel = s.build()
    ptx = targets.emit(kernel, "ptx", target)
    abi = kernel_abi(kernel)
    module = check(cu.cuModuleLoadData(ptx.encode() + b"\0"), "cuModuleLoadData")
    fn = check(cu.cuModuleGetFunction(module, abi.entry.encode()), "cuModuleGetFunction")
    args = s.inputs(np.random.default_rng(7))
    orig = copy.deepcopy(args)
    flat, dev = [], []
    for a, v in zip(args, kernel.args):
        if isinstance(v.type, BufType):
            ptr = int(check(cu.cuMemAlloc(max(a.nbytes, 1)), "cuMemAlloc"))
            check(cu.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")
            dev.append((a, ptr))
            flat += [ptr, *a.shape]
        else:
            flat.append(int(a) if v.type.is_bool else a)
    cargs = [_CT[p.dtype](x) for p, x in zip(abi.params, flat)]
    ptrs = (ctypes.c_void_p * len(cargs))(*[ctypes.addressof(c) for c in cargs])
    grid, block = s.launch_shape()
    check(cu.cuLaunchKernel(fn, *grid, *block, s.shared_bytes, 0, ctypes.addressof(ptrs), 0),
          "cuLaunchKernel")
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    for a, ptr in dev:
        check(cu.cuMemcpyDtoH(a.ctypes.data, ptr, a.nbytes), "cuMemcpyDtoH")
        check(cu.cuMemFree(ptr), "cuMemFree")
    check(cu.cuModuleUnload(module), "cuModuleUnload")
    return K.check(s, orig, dict(enumerate(args)), warp=32)


def main(argv) -> int:
    try:
        cu, target, gpu = setup()
    except Exception as e:  # no driver / no GPU: not a failure of the code under test
        print(f"SKIP: no usable CUDA device ({e})")
        return 2
    names = argv or [s.name for s in K.SAMPLES]
    print(f"LLVM nvptx64 retarget on {gpu} ({target}), {len(names)} kernels")
    failed = 0
    for name in names:
        t0 = time.perf_counter()
        try:
            fails = run_sample(cu, target, K.BY_NAME[name])
        except Exception as e:  # report and keep going: one broken kernel must not hide others
            fails = [f"{type(e).__name__}: {e}"]
        dt_ms = (time.perf_counter() - t0) * 1e3
        print(f"{'PASS' if not fails else 'FAIL'} {name} ({dt_ms:.0f} ms)")
        for f in fails:
            print("    " + f)
        failed += bool(fails)
    print(f"{len(names) - failed}/{len(names)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
