"""Probe of Hopper's wgmma for kaio's GEMM (measurement only, not library code): a hand-built
PTX GEMM (sm_90a) whose shared tiles use the 128-byte swizzle, cp.async copies S - 2 K-steps
ahead, two consumer warp groups of m64nBNk16. Prints, per shared-memory descriptor convention,
whether the product is right and its TFLOP/s next to torch.matmul (cuBLAS), so the library's
codegen can take the convention that works and a tiling that pays. Needs torch and an sm_90 GPU.
"""
import sys

import numpy as np
import torch
from cuda.bindings import driver as cu


def chk(r):
    err = r[0] if isinstance(r, tuple) else r
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA error {err}")
    return r[1] if isinstance(r, tuple) and len(r) == 2 else r


def ptx(BN=256, S=4, b_kmajor=False, lbo_b=None, sbo_b=None, wg=2):
    """The GEMM's PTX: block tile (64 * wg) x BN x 64, S stages."""
    BM, BK = 64 * wg, 64
    T = 128 * wg
    a_bytes, b_bytes = BM * BK * 2, BK * BN * 2
    stage = a_bytes + b_bytes
    nacc = BN // 2
    L = []
    e = L.append
    e(".version 8.0\n.target sm_90a\n.address_size 64\n")
    e(".extern .shared .align 1024 .b8 smem[];")
    e(".visible .entry gemm(.param .u64 pA, .param .u64 pB, .param .u64 pC, .param .u32 pM, "
      ".param .u32 pN, .param .u32 pK)")
    e(f".maxntid {T}, 1, 1\n{{")
    e(".reg .pred p<8>;\n.reg .b32 r<100>;\n.reg .b64 rd<100>;")
    e(f".reg .f32 f<{nacc}>;")
    e("ld.param.u64 rd1, [pA]; ld.param.u64 rd2, [pB]; ld.param.u64 rd3, [pC];")
    e("ld.param.u32 r1, [pM]; ld.param.u32 r2, [pN]; ld.param.u32 r3, [pK];")
    e("cvta.to.global.u64 rd1, rd1; cvta.to.global.u64 rd2, rd2; cvta.to.global.u64 rd3, rd3;")
    e("mov.u32 r4, %tid.x; mov.u32 r5, %ctaid.x; mov.u32 r6, %ctaid.y;")   # t, bn, bm
    e("mov.u32 r7, smem; add.u32 r7, r7, 1023; and.b32 r7, r7, -1024;")     # aligned base
    for i in range(nacc):
        e(f"mov.f32 f{i}, 0f00000000;")
    e("shr.u32 r8, r3, 6;")                                                 # KT = K / 64
    # copy of K-step in r20 (k-step index) into slot r21: issued by every thread
    copy = []
    c = copy.append
    c("mul.lo.u32 r22, r21, %d; add.u32 r22, r22, r7;" % stage)             # slot base
    c("shl.b32 r23, r20, 6;")                                               # k0
    for i in range(BM * 8 // T):                                            # A: BM rows x 8 chunks
        c(f"add.u32 r24, r4, {i * T}; shr.u32 r25, r24, 3; and.b32 r26, r24, 7;")   # r, ch
        c("and.b32 r27, r25, 7; xor.b32 r27, r27, r26; shl.b32 r27, r27, 4;")
        c("shl.b32 r28, r25, 7; add.u32 r28, r28, r27; add.u32 r28, r28, r22;")     # smem
        c(f"mad.lo.u32 r29, r6, {BM}, r25; mul.lo.u32 r29, r29, r3; add.u32 r29, r29, r23;")
        c("shl.b32 r30, r26, 3; add.u32 r29, r29, r30; mul.wide.u32 rd10, r29, 2; "
          "add.u64 rd10, rd10, rd1;")
        c("cp.async.cg.shared.global [r28], [rd10], 16;")
    if not b_kmajor:            # B row-major K x N: atoms of 8 k x 64 n, swizzled by k
        for i in range(BK * BN // 8 // T):
            c(f"add.u32 r24, r4, {i * T}; shr.u32 r25, r24, {int(np.log2(BN // 8))}; "
              f"and.b32 r26, r24, {BN // 8 - 1};")                          # k, nchunk
            c("shr.u32 r31, r26, 3; and.b32 r32, r26, 7; and.b32 r27, r25, 7; "
              "xor.b32 r27, r27, r32; shl.b32 r27, r27, 4;")
            c(f"mul.lo.u32 r28, r31, {BK * 128}; shl.b32 r33, r25, 7; add.u32 r28, r28, r33; "
              f"add.u32 r28, r28, r27; add.u32 r28, r28, r22; add.u32 r28, r28, {a_bytes};")
            c(f"add.u32 r29, r23, r25; mul.lo.u32 r29, r29, r2; mad.lo.u32 r34, r5, {BN}, 0; "
              "add.u32 r29, r29, r34; shl.b32 r30, r26, 3; add.u32 r29, r29, r30;")
            c("mul.wide.u32 rd10, r29, 2; add.u64 rd10, rd10, rd2;")
            c("cp.async.cg.shared.global [r28], [rd10], 16;")
    else:                       # B given N x K (K-major), the same layout as A
        for i in range(BN * 8 // T):
            c(f"add.u32 r24, r4, {i * T}; shr.u32 r25, r24, 3; and.b32 r26, r24, 7;")
            c("and.b32 r27, r25, 7; xor.b32 r27, r27, r26; shl.b32 r27, r27, 4;")
            c(f"shl.b32 r28, r25, 7; add.u32 r28, r28, r27; add.u32 r28, r28, r22; "
              f"add.u32 r28, r28, {a_bytes};")
            c(f"mad.lo.u32 r29, r5, {BN}, r25; mul.lo.u32 r29, r29, r3; add.u32 r29, r29, r23;")
            c("shl.b32 r30, r26, 3; add.u32 r29, r29, r30; mul.wide.u32 rd10, r29, 2; "
              "add.u64 rd10, rd10, rd2;")
            c("cp.async.cg.shared.global [r28], [rd10], 16;")
    c("cp.async.commit_group;")
    copy = "\n".join(copy)
    # prologue: K-steps 0 .. S-3
    for s in range(S - 2):
        e(f"mov.u32 r20, {s}; mov.u32 r21, {s};")
        e(f"setp.lt.u32 p1, r20, r8; @!p1 bra SKIP{s};")
        e(copy.replace("cp.async.commit_group;", ""))
        e(f"SKIP{s}: cp.async.commit_group;")
    e("mov.u32 r10, 0;")                                                    # i
    e("shr.u32 r11, r4, 7;")                                                # warp group
    e("setp.eq.u32 p2, r4, r4;")
    e("LOOP:")
    e(f"cp.async.wait_group {S - 3};")
    e("fence.proxy.async.shared::cta;")
    e("bar.sync 0;")
    e(f"add.u32 r20, r10, {S - 2}; rem.u32 r21, r20, {S};")
    e("setp.lt.u32 p1, r20, r8; @!p1 bra NOCOPY;")
    e(copy.replace("cp.async.commit_group;", ""))
    e("NOCOPY: cp.async.commit_group;")
    e(f"rem.u32 r12, r10, {S}; mul.lo.u32 r12, r12, {stage}; add.u32 r12, r12, r7;")   # slot
    e("mad.lo.u32 r13, r11, 8192, r12;")                                    # A of my group
    e(f"add.u32 r14, r12, {a_bytes};")                                      # B
    e("wgmma.fence.sync.aligned;")
    regs = "{" + ", ".join(f"f{i}" for i in range(nacc)) + "}"
    sw = 1 << 62
    for kk in range(4):
        e(f"add.u32 r40, r13, {kk * 32}; and.b32 r40, r40, 262143; shr.u32 r40, r40, 4; "
          "cvt.u64.u32 rd40, r40;")
        e(f"or.b64 rd40, rd40, {sw | (1 << 16) | ((1024 >> 4) << 32)};")
        if b_kmajor:
            e(f"add.u32 r41, r14, {kk * 32};")
            bdesc = sw | (1 << 16) | ((1024 >> 4) << 32)
        else:
            e(f"add.u32 r41, r14, {kk * 2048};")
            bdesc = sw | ((lbo_b >> 4) << 16) | ((sbo_b >> 4) << 32)
        e("and.b32 r41, r41, 262143; shr.u32 r41, r41, 4; cvt.u64.u32 rd41, r41;")
        e(f"or.b64 rd41, rd41, {bdesc};")
        e(f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.f16.f16 {regs}, rd40, rd41, p2, 1, 1, "
          f"0, {0 if b_kmajor else 1};")
    e("wgmma.commit_group.sync.aligned;")
    e("wgmma.wait_group.sync.aligned 1;")
    e("add.u32 r10, r10, 1; setp.lt.u32 p3, r10, r8; @p3 bra LOOP;")
    e("wgmma.wait_group.sync.aligned 0;")
    # epilogue: warp w of group g, lane l: rows g*64 + w*16 + l/4 (+8), cols 8j + 2(l%4)
    e("and.b32 r50, r4, 127; shr.u32 r51, r50, 5; and.b32 r52, r4, 31;")
    e(f"mad.lo.u32 r53, r6, {BM}, 0; mad.lo.u32 r53, r11, 64, r53; mad.lo.u32 r53, r51, 16, r53; "
      "shr.u32 r54, r52, 2; add.u32 r53, r53, r54;")                       # row
    e(f"mad.lo.u32 r55, r5, {BN}, 0; and.b32 r56, r52, 3; shl.b32 r56, r56, 1; "
      "add.u32 r55, r55, r56;")                                             # col
    e("mad.lo.u32 r57, r53, r2, r55; mul.wide.u32 rd50, r57, 4; add.u64 rd50, rd50, rd3;")
    e("shl.b32 r58, r2, 5; cvt.u64.u32 rd51, r58;")                         # 8 rows in bytes
    for j in range(BN // 8):
        e(f"st.global.v2.f32 [rd50+{32 * j}], {{f{4 * j}, f{4 * j + 1}}};")
        e(f"add.u64 rd52, rd50, rd51; st.global.v2.f32 [rd52+{32 * j}], {{f{4 * j + 2}, f{4 * j + 3}}};")
    e("ret;\n}")
    return "\n".join(L), stage * S + 1024, T, BM


def build(src):
    chk(cu.cuInit(0))
    mod = chk(cu.cuModuleLoadData(src.encode() + b"\0"))
    return chk(cu.cuModuleGetFunction(mod, b"gemm"))


def launch(fn, smem, T, BM, BN, A, B, C, M, N, K, stream):
    args = [np.array([A.data_ptr()], np.uint64), np.array([B.data_ptr()], np.uint64),
            np.array([C.data_ptr()], np.uint64), np.array([M], np.uint32),
            np.array([N], np.uint32), np.array([K], np.uint32)]
    ptrs = np.array([a.ctypes.data for a in args], np.uint64)
    chk(cu.cuLaunchKernel(fn, N // BN, M // BM, 1, T, 1, 1, smem, stream, ptrs.ctypes.data, 0))


def main():
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    variants = [
        ("B K-major (NT), BN=256", dict(b_kmajor=True)),
        ("B N-major LBO=BK*128 SBO=1024", dict(lbo_b=64 * 128, sbo_b=1024)),
        ("B N-major LBO=1024 SBO=BK*128", dict(lbo_b=1024, sbo_b=64 * 128)),
    ]
    for n in (4096, 8192):
        M = N = K = n
        torch.manual_seed(0)
        A = torch.randn(M, K, device="cuda", dtype=torch.float16)
        B = torch.randn(K, N, device="cuda", dtype=torch.float16)
        Bt = B.t().contiguous()
        ref = (A.float() @ B.float()) if n == 4096 else None
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(3):
            torch.matmul(A, B)
        ev0.record()
        for _ in range(20):
            torch.matmul(A, B)
        ev1.record()
        torch.cuda.synchronize()
        tc = ev0.elapsed_time(ev1) / 20
        fl = 2.0 * M * N * K
        print(f"n={n} cuBLAS f16: {tc * 1e3:.1f} us {fl / tc / 1e9:.1f} TFLOP/s", flush=True)
        for name, kw in variants:
            for S, BN in ((4, 256), (5, 128), (3, 256)):
                kw2 = kw
                try:
                    src, smem, T, BM = ptx(BN=BN, S=S, **kw2)
                    fn = build(src)
                    chk(cu.cuFuncSetAttribute(
                        fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem))
                    nreg = chk(cu.cuFuncGetAttribute(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn))
                    C = torch.zeros(M, N, device="cuda", dtype=torch.float32)
                    Bin = Bt if kw2.get("b_kmajor") else B
                    launch(fn, smem, T, BM, BN, A, Bin, C, M, N, K, stream)
                    torch.cuda.synchronize()
                    err = float((C - ref).abs().max() / ref.abs().max()) if ref is not None else float("nan")
                    for _ in range(2):
                        launch(fn, smem, T, BM, BN, A, Bin, C, M, N, K, stream)
                    ev0.record()
                    for _ in range(20):
                        launch(fn, smem, T, BM, BN, A, Bin, C, M, N, K, stream)
                    ev1.record()
                    torch.cuda.synchronize()
                    t = ev0.elapsed_time(ev1) / 20
                    print(f"  {name} S={S} BN={BN}: err {err:.2e} regs {nreg} {t * 1e3:.1f} us "
                          f"{fl / t / 1e9:.1f} TFLOP/s = {tc / t:.2f}x cuBLAS", flush=True)
                except Exception as ex:     # report and go on: this is a probe
                    print(f"  {name} S={S} BN={BN}: FAILED {type(ex).__name__}: {ex}", flush=True)
                    if "ILLEGAL" in str(ex) or "LAUNCH_FAILED" in str(ex):
                        sys.exit(1)


def versus_library(dtype: str = "f16", sizes=(4096, 8192)):
    """cuBLAS, this probe (N-major B, S=4; f16 only) and the library's warp-group GEMM (its two
    tilings launched directly, and ``kaio.kernels.ml.gemm.gemm`` as users call it: the
    autotuner's pick), interleaved three times per size (clocks drift under a sustained tensor
    load: the same kernel measured apart differs by up to 14% on this machine)."""
    from kaio.kernels.ml import gemm as G
    torch.zeros(1, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    tdt = torch.float16 if dtype == "f16" else torch.bfloat16
    if dtype == "f16":
        src, smem, T, BM = ptx(BN=256, S=4, lbo_b=64 * 128, sbo_b=1024)
        fn = build(src)
        chk(cu.cuFuncSetAttribute(
            fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem))
    for n in sizes:
        A = torch.randn(n, n, device="cuda", dtype=tdt)
        B = torch.randn(n, n, device="cuda", dtype=tdt)
        C = torch.empty(n, n, device="cuda", dtype=torch.float32)
        lib = {}
        for tile in ("wg128x256x64_s4", "wg128x128x64_s5"):
            kern = G.gemm_kernel(dtype, "f32", False, False, tile)
            grid, block = G.launch_config(n, n, tile)
            lib[tile] = kern[grid, block, 0, torch.cuda.current_stream()]
        cases = {"cuBLAS": lambda A=A, B=B: torch.matmul(A, B)}
        if dtype == "f16":
            cases["probe"] = lambda A=A, B=B, C=C, n=n: launch(fn, smem, T, BM, 256, A, B, C, n,
                                                              n, n, stream)
        cases.update({
            "kaio": lambda A=A, B=B, C=C, f=lib["wg128x256x64_s4"]: f(A, B, C, 1.0, 0.0),
            "kaio_s5": lambda A=A, B=B, C=C, f=lib["wg128x128x64_s5"]: f(A, B, C, 1.0, 0.0),
            "library": lambda A=A, B=B, C=C: G.gemm(A, B, C)})
        for name in list(cases):        # warm up (the library call autotunes here)
            try:
                cases[name]()
            except Exception as e:      # one case failing must not hide the others
                print(f"{dtype} n={n} {name}: {type(e).__name__}: {e}", flush=True)
                del cases[name]
        torch.cuda.synchronize()
        for rnd in range(3):
            for name, f in cases.items():
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(20):
                    f()
                e1.record()
                torch.cuda.synchronize()
                t = e0.elapsed_time(e1) / 20
                print(f"{dtype} n={n} round {rnd} {name:7s} {t * 1e3:8.1f} us "
                      f"{2.0 * n ** 3 / t / 1e9:6.1f} TFLOP/s", flush=True)


if __name__ == "__main__":
    if "--vs-library" in sys.argv:
        versus_library("bf16" if "--bf16" in sys.argv else "f16")
    else:
        main()
