"""The ceiling a mma.sync GEMM can reach on this GPU: register-resident m16n8k16 f16 -> f32
products, no memory traffic in the loop, written in kaio and (for the same instruction stream
from nvcc) in CUDA C++ with inline PTX.

    python3 benchmarks/mma_peak.py [--blocks-per-sm 1,2] [--iters 4096]

Each warp holds a 64 x 64 warp tile (32 independent m16n8k16 accumulators, as the library
GEMM's largest tilings) and multiplies it ``iters`` times; 8 warps per block, ``blocks-per-sm``
blocks per SM. TFLOP/s = 2 * 16 * 8 * 16 * 32 * iters * warps / time. Compare with cuBLAS's
rate at 4096^3 (``kaio bench --gemm``): the gap between the two is what Hopper's wgmma (not
expressible with mma.sync) buys, and bounds what kaio's mma.sync GEMM can reach.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import kaio
from kaio import f16, f32

HERE = os.path.dirname(os.path.abspath(__file__))
WARPS = 8
WM = WN = 64


@kaio.kernel(block=(WARPS * 32,))
def mma_loop(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2], iters: kaio.i32):
    """C[warp tile] = iters * (A[0:64, 0:16] @ B[0:16, 0:64]), from registers only."""
    warp = kaio.block_idx.x * (kaio.block_dim.x // kaio.warp_size) + kaio.thread_idx.x // kaio.warp_size
    a = kaio.mma.load_a(A, 0, 0, m=WM, k=16)
    b = kaio.mma.load_b(B, 0, 0, k=16, n=WN)
    acc = kaio.mma.fill(f32, 0.0, m=WM, n=WN)
    for _ in range(iters):
        acc = kaio.mma.mma(a, b, acc)
    kaio.mma.store(C, warp * WM, 0, acc)


CUDA_SRC = r"""
extern "C" __global__ void __launch_bounds__(256) mma_loop_cu(const unsigned *a, const unsigned *b,
                                                              float *c, int iters) {
    // the same stream kaio emits: 4 x 8 m16n8k16 tiles per warp, operands in registers
    unsigned ar[4][4], br[8][2];
    float acc[4][8][4];
    int lane = threadIdx.x & 31;
    for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) ar[i][j] = a[(i * 4 + j) * 32 + lane];
    for (int i = 0; i < 8; ++i) for (int j = 0; j < 2; ++j) br[i][j] = b[(i * 2 + j) * 32 + lane];
    for (int i = 0; i < 4; ++i) for (int j = 0; j < 8; ++j) for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;
    for (int it = 0; it < iters; ++it)
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 8; ++j)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                             "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                             : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                             : "r"(ar[i][0]), "r"(ar[i][1]), "r"(ar[i][2]), "r"(ar[i][3]),
                               "r"(br[j][0]), "r"(br[j][1]));
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    float s = 0.f;
    for (int i = 0; i < 4; ++i) for (int j = 0; j < 8; ++j) for (int r = 0; r < 4; ++r) s += acc[i][j][r];
    c[warp * 32 + lane] = s;
}
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="mma_peak.py", description=__doc__.splitlines()[0])
    p.add_argument("--blocks-per-sm", default="1,2", help="comma-separated blocks per SM")
    p.add_argument("--iters", type=int, default=4096, help="warp-tile products per warp")
    args = p.parse_args(argv)
    kaio.set_backend("cuda")
    import torch
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    g = np.random.default_rng(0)
    A = kaio.to_device(g.uniform(-1, 1, (WM, 16)).astype(np.float16))
    B = kaio.to_device(g.uniform(-1, 1, (16, WN)).astype(np.float16))
    flop_per_warp = 2.0 * WM * WN * 16 * args.iters
    sys.path.insert(0, HERE)
    from bench_gpu import timed

    cu = None
    try:
        import cupy
        src = os.path.join(tempfile.mkdtemp(), "mma_peak.cu")
        with open(src, "w") as f:
            f.write(CUDA_SRC)
        cubin = src.replace(".cu", ".cubin")
        subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-cubin", "-o", cubin, src], check=True)
        cu = cupy.RawModule(path=cubin).get_function("mma_loop_cu")
    except Exception as e:          # no nvcc/CuPy: the kaio row alone
        print(f"CUDA C++ twin not built: {e}")
    print("| kernel | blocks/SM | warps | ms | TFLOP/s |")
    print("|---|---|---|---|---|")

    def row(name, bps, warps, ms):
        print(f"| {name} | {bps} | {warps} | {ms:.3f} | {flop_per_warp * warps / ms / 1e9:.1f} |")

    for bps in (int(x) for x in args.blocks_per_sm.split(",")):
        blocks = sms * bps
        warps = blocks * WARPS
        C = kaio.device_array((warps * WM, WN), np.float32)
        k = mma_loop[(blocks,), (WARPS * 32,)]
        row("kaio mma_loop", bps, warps, timed(lambda k=k, C=C: k(A, B, C, args.iters), reps=5, rounds=5))
        C.to_host()     # a fault surfaces here rather than in the next row
        if cu is not None:
            ops = [cupy.asarray(g.integers(0, 2**16, 16 * 32, dtype=np.uint32) & 0x3C003C00) for _ in "ab"]
            ops += [cupy.empty(warps * 32, cupy.float32), np.int32(args.iters)]
            row("nvcc mma.sync twin", bps, warps,
                timed(lambda n=blocks, o=tuple(ops): cu((n,), (256,), o), reps=5, rounds=5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
