#!/usr/bin/env bash
# One call on the GPU machine: install kaio, run the GPU tests, smoke tests and benchmarks,
# writing every log under $OUT. Usage: scripts/device_run.sh STEP... where STEP is one of
#   probe     the image's Python, pip packages of interest (mpi4py, nvmath, ...), ncu, mpiexec
#   fir-fmad  kaio rajaperf FIR with its CUDA twin built with -fmad=false (checksum without contraction)
#   smoke     kaio info, PTX and LLVM-nvptx smoke tests
#   gpu       the gpu/cuda-marked tests
#   suite     the whole test suite with KAIO_BACKEND=cuda (kaio's PTX), host-only simulator tests left out
#   suite-llvm  the whole test suite with KAIO_BACKEND=cuda KAIO_CUDA_CODEGEN=llvm
#   showcase  kaio showcase --all at default sizes on CUDA
#   conformance  the conformance report: reference (w32, w64), cuda, cuda-llvm executed; sm_80/86/89 (both paths), gfx90a, gfx942 compiled
#   conformance-portable  the same report with --portable (KAIO_PORTABLE=1): every executed cell must be
#             bit-identical to the interpreter apart from the named order-dependent cases; under conformance_portable/
#   portable-cost  benchmarks/portable_cost.py: each library kernel, default vs portable mode (portable_cost.md)
#   bench     benchmarks/bench_gpu.py (kaio vs CUDA C++ vs Triton vs torch/cuBLAS)
#   ml        kaio bench --ml: the library's ML ops vs Triton vs torch, GB/s against the copy
#   before    the conformance report of the tree in .baseline/ (an exported earlier commit:
#             git archive REV | tar -x -C .baseline), then the current tree's, compared cell by cell
#   cuda-core scripts/bench_cuda_core.py (kaio's launch path vs NVIDIA's cuda.core)
#   fuzz      24,000 generated kernels (>10,000 compared): checker vs sanitizer, differential reference/cuda/cuda-llvm
#   resident  benchmarks/bench_resident.py: Jacobi-1D with numpy arguments, in kaio.resident, and manual
#   startup   benchmarks/bench_startup.py: import kaio, and a kernel's first launch in a fresh process,
#             cold and from the warm disk cache (saxpy, softmax; startup.md, with where the time goes);
#             the same with --backend stub
#   startup-installed  the same with kaio installed as a wheel installs it (pip install --target: the warm
#             key stamps its RECORD, not every source file), then on the libcuda stub (stub-driver, gcc)
#   gemm-ncu  Nsight Compute on two GEMM tilings (stall reasons, occupancy, memory): scripts/profile_gemm.py
#   gemm-ablation  scripts/gemm_ablation.py: the GEMM's K loop with the copies, then the barriers taken out
#   gemm-sol  Nsight Compute speed-of-light, memory (L2/DRAM throughput) and tensor-pipe use of the
#             best tilings at 4096^3 (scripts/profile_gemm.py)
#   gemm-stalls  Nsight Compute stall reasons, tensor-pipe and shared-memory use of the 128x256x64 GEMM tiling
#   gpu-llvm  the gpu/cuda-marked tests with KAIO_CUDA_CODEGEN=llvm (the LLVM nvptx path)
#   attn-breakdown  scripts/attention_breakdown.py: each launch of the quantized attention alone
#   attn-ncu  Nsight Compute (speed of light, warp stall reasons, occupancy) of the quantized
#             attention's kernels, each launched once (scripts/attention_breakdown.py --once)
#   wgmma-probe  scripts/wgmma_probe.py: a hand-built sm_90a wgmma GEMM per shared-memory descriptor
#             convention (right or not, TFLOP/s vs cuBLAS): the convention kaio's codegen takes
#   mma-peak  benchmarks/mma_peak.py: register-resident mma.sync m16n8k16 rate, kaio and an nvcc twin
#             (the ceiling of an mma.sync GEMM on this GPU; cuBLAS uses wgmma)
#   gelu-sweep  benchmarks/gelu_sweep.py: both GELUs per elements-per-thread, exp form, vs Triton
#   gemm-quick  kaio bench --gemm at 4096^3 f16 only, every tiling, no quantized rows
#   gemm-short  the same with the quantized rows (W8A8, W4A16, quantized attention)
#   gemm      kaio bench --gemm (the library GEMM on the tensor cores vs cuBLAS; quantized rows)
#   w4a16-wg    the same for the warp-group tilings (W4_TILES=comma list) and the best mma.sync one
#   wg-tests    the GPU tests of register-A group_mma, the warp-group GEMM and the quantized matmuls
#   w4a16-ncu   Nsight Compute on one W4A16 tiling (W4_NCU, default wg64x64x128_s4)
#   w4a16-stalls  its warp stall reasons and instruction count
#   gemm-w4a16  kaio bench --gemm --w4a16-tiles: int4_matmul_w4a16 at 256x4096x4096 per tiling
#             (each checked against numpy first) vs cuBLAS f16; bench_gemm.md under w4a16/
#   attention the fused attention (kernels/ml/flash_attention.py) and quantized_attention on the
#             GPU against numpy (tests/test_flash_attention.py, the ml cases' default size)
#   attention-quant  the same plus the quantizing W8A8 projection (kernels/ml/quant_project.py,
#             tests/test_quant_project.py: bit for bit the two launches at 1024 x 512 x 384)
#   checked   benchmarks/bench_checked.py (saxpy and softmax, checked mode vs unchecked)
#   fastexp   scripts/measure_fast_exp.py: ex2.approx.f32 and kaio's fast exp against float64
#   rowsweep  benchmarks/row_ops_sweep.py: the resident row ops' launch shapes and register caps
#   rajaperf  kaio rajaperf, variants kaio,kaio_graph,cuda (the suite's Base_CUDA forms, nvcc):
#             default size, then --sizefact 64 (reps x0.2); files under rajaperf/, geomeans in the summary
#   autotune  benchmarks/autotune_rows.py: the autotuner tunes the row ops at kaio bench --ml's
#             shapes and prints what each candidate took (autotune_rows.md); warms the compile cache for ml
#   rajaperf-x64  only the 64x size (reps x0.05), every port, with a longer limit than `rajaperf`
#   rajaperf-x64a / rajaperf-x64b  the same in two halves, for separate calls: Stream, Basic, Lcals
#             (22 ports) / Polybench, Apps (16 ports); files x64a / x64b under rajaperf/
#   rajaperf-fir  FIR and DEL_DOT_VEC_2D alone at 64x (kaio, kaio_graph, cuda)
#   ml-gelu   kaio bench --ml for the two GELUs only (every dtype and shape), 80 s of cases
#   ml-short  kaio bench --ml, dequantize and the 16-bit-heavy ops first, 110 s of cases
#   roofline  kaio bench --plot: every library kernel against the measured copy and matrix rate
#             (roofline.png + roofline.json in logs.tgz; redraw with --data if matplotlib is absent)
#   examples  examples/*.py at their default sizes on CUDA (tests/test_examples.py -m gpu, output shown)
#   interop   torch custom ops (fwd/bwd vs torch, gradcheck f64, streams, inductor), DLPack round trips
#             with torch and CuPy, torch/CuPy streams (also in `gpu`; this step runs only them)
#   torch-ops benchmarks/torch_ops_bench.py: torch.ops.kaio.* vs torch's own ops, forward and fwd+bwd
#   blas-overhead  benchmarks/blas_overhead.py: kaio.blas.gemm's host call cost (64^3 f16, f32, device
#             arrays, one stream) through each cuBLAS binding (ctypes, nvmath-python) and the ctypes
#             code before (stream set per call), torch.matmul for scale; kaio info's binding line;
#             then the cuBLAS GPU tests of tests/test_blas.py over both bindings
#   mpi       tests/test_mpi.py + tests/test_devices.py, then examples/jacobi_mpi.py under mpiexec: 2 ranks
#             sharing GPU 0 (4096^2, checked bit for bit against one process, halos by CUDA IPC and
#             through the host), and 1 and 2 ranks of 16384^2 per rank (time per step, both ways);
#             needs mpi4py and mpiexec in the image
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kaio_out}"; mkdir -p "$OUT"
FINAL="$OUT"; OUT="$(mktemp -d)/kaio_logs"; mkdir -p "$OUT"   # everything is packed into one tarball at the end
export PYTHONUNBUFFERED=1 KAIO_CACHE_DIR="$(mktemp -d)"
# the suites leave out tests that only run kaio's PTX simulator or ptxas, or pin the reference
# backend themselves (minutes each, no GPU involved: CI runs them on every stop)
HOST_ONLY="not simulator and not ptx_assembles and not fused_matches_float64_at_ragged_shapes"
log() { echo "== $* ($(date +%T))" | tee -a "$OUT/summary.txt"; }
run() {  # run NAME LIMIT CMD...
    local name=$1 limit=$2; shift 2
    log "$name: $*"
    timeout --kill-after=5 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "   rc=$rc; $(grep -E '[0-9]+ (passed|failed)' "$OUT/$name.log" | tail -1)" | tee -a "$OUT/summary.txt"
    grep -E '^(FAILED|ERROR) ' "$OUT/$name.log" | head -40 | sed 's/^/   /' >> "$OUT/summary.txt"
}
collect() {
    cp "$OUT/summary.txt" "$FINAL/"
    for f in "$OUT"/*.md "$OUT"/conformance/*.md "$OUT"/conformance/*.json; do [ -f "$f" ] && cp "$f" "$FINAL/"; done
    tar czf "$FINAL/logs.tgz" -C "$(dirname "$OUT")" kaio_logs
}
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || log "pip install failed"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$OUT/summary.txt" 2>&1
for step in "$@"; do
  case "$step" in
    probe) run probe 60 bash -c 'python3 -VV; python3 -m pip list 2>/dev/null | grep -iE "mpi|nvmath|cuda|torch|triton|numpy|llvmlite|cupy|pathfinder"; command -v mpiexec ncu nvcc; ls /usr/local/cuda/lib64 | grep -E "cublas|cufft" | head; nproc' ;;
    fir-fmad) run fir_fmad 120 env COLUMNS=200 KAIO_RAJAPERF_NVCC_FLAGS=-fmad=false python3 -m kaio.cli rajaperf --backend cuda --variants kaio,cuda --kernels FIR --outdir "$OUT/rajaperf_fir" ;;
    smoke) run info 60 python3 -m kaio.cli info
           run ptx_smoke 120 python3 scripts/ptx_smoke.py
           run llvm_smoke 120 python3 scripts/llvm_nvptx_smoke.py ;;
    gpu) run gpu_tests 300 python3 -m pytest -q -n 12 -m "gpu or cuda" -rf -p no:cacheprovider tests ;;
    gpu-llvm) run gpu_tests_llvm 300 env KAIO_CUDA_CODEGEN=llvm python3 -m pytest -q -n 12 -m "gpu or cuda" -rf -p no:cacheprovider tests ;;
    attn-breakdown) run attention_breakdown 150 python3 scripts/attention_breakdown.py ;;
    attn-ncu) NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
              run attn_ncu 240 "$NCU" --section SpeedOfLight --section WarpStateStats --section Occupancy \
                  --section MemoryWorkloadAnalysis --launch-count 6 \
                  -k regex:"attention_partial|attention_combine|matmul_w8a8_quantizing" \
                  python3 scripts/attention_breakdown.py --once ;;
    wgmma-probe) run wgmma_probe 150 python3 scripts/wgmma_probe.py ;;
    mma-peak) run mma_peak 120 python3 benchmarks/mma_peak.py ;;
    gelu-sweep) run gelu_sweep 150 python3 benchmarks/gelu_sweep.py ;;
    gemm-quick) run bench_gemm_quick 200 python3 -m kaio.cli bench --gemm --sizes 4096 --dtypes f16 --no-quant --out "$OUT/gemm_quick" ;;
    gemm-short) run bench_gemm_short 240 python3 -m kaio.cli bench --gemm --sizes 4096 --dtypes f16 --out "$OUT/gemm_short" ;;
    suite) run suite_cuda 540 env KAIO_BACKEND=cuda python3 -m pytest -q -n 14 -rf -p no:cacheprovider -k "$HOST_ONLY" tests ;;
    suite-llvm) run suite_llvm 540 env KAIO_BACKEND=cuda KAIO_CUDA_CODEGEN=llvm python3 -m pytest -q -n 14 -rf -p no:cacheprovider -k "$HOST_ONLY" tests ;;
    showcase) run showcase 300 python3 -m kaio.cli showcase --all --size default ;;
    conformance) run conformance 280 python3 -m kaio.conformance --target reference,reference-w64,cuda,cuda-llvm,sm_80,sm_86,sm_89,sm_80-llvm,sm_86-llvm,sm_89-llvm,gfx90a,gfx942 --out "$OUT/conformance" ;;
    bench) run bench 240 python3 benchmarks/bench_gpu.py --out "$OUT" ;;
    gemm-stalls) NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
              run gemm_stalls 200 "$NCU" --metrics smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg \
                  -k regex:gemm python3 scripts/profile_gemm.py 128x256x64_w64x64 ;;
    gemm-ablation) run gemm_ablation 200 python3 scripts/gemm_ablation.py ;;
    gemm-sol) NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
              run gemm_sol 200 "$NCU" --section SpeedOfLight --section MemoryWorkloadAnalysis --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__cycles_elapsed.avg.per_second \
                  -k regex:gemm python3 scripts/profile_gemm.py 256x128x64_w64x64_s3 128x256x32_w64x64_s3 ;;
    gemm) run bench_gemm 300 python3 -m kaio.cli bench --gemm --out "$OUT" ;;
    w4a16-wg) run bench_w4a16_wg 300 python3 -m kaio.cli bench --gemm --w4a16-tiles --out "$OUT/w4a16_wg" \
                  --tiles "${W4_TILES:-s4_64x128x64_w64x32,wg64x64x128_s4,wg64x128x128_s4,wg64x128x128_s3,wg128x64x128_s4}" ;;
    wg-tests) run wg_tests 300 python3 -m pytest -q -rf -p no:cacheprovider -k "cuda or gpu" \
                  tests/test_mma_register_a.py tests/test_group_mma.py tests/test_quant_mma.py ;;
    w4a16-ncu) NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
              run w4a16_ncu 200 "$NCU" --section SpeedOfLight --section WarpStateStats --section Occupancy \
                  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second \
                  -k regex:matmul_w4a16 --launch-skip 2 --launch-count 1 python3 scripts/profile_w4a16.py ${W4_NCU:-wg64x64x128_s4} ;;
    w4a16-stalls) NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
              run w4a16_stalls 200 "$NCU" --metrics smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg \
                  -k regex:matmul_w4a16 --launch-skip 2 --launch-count 1 python3 scripts/profile_w4a16.py ${W4_NCU:-wg64x64x128_s4} ;;
    gemm-w4a16) run bench_w4a16 420 python3 -m kaio.cli bench --gemm --w4a16-tiles --out "$OUT/w4a16" ;;
    attention) run attention_gpu 240 python3 -m pytest -q -rf -p no:cacheprovider -m gpu tests/test_flash_attention.py \
                   tests/test_kernels_ml.py -k "attention" ;;
    attention-quant) run attention_quant_gpu 240 python3 -m pytest -q -rf -p no:cacheprovider -m gpu \
                   tests/test_quant_project.py tests/test_flash_attention.py tests/test_kernels_ml.py -k "attention" ;;
    gemm-ncu) NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
              run gemm_ncu 200 "$NCU" --section SpeedOfLight --section WarpStateStats --section Occupancy \
                  --section MemoryWorkloadAnalysis -k regex:gemm python3 scripts/profile_gemm.py ;;
    ml) run bench_ml 280 python3 -m kaio.cli bench --ml --out "$OUT" --time-limit 230 ;;
    resident) run bench_resident 200 python3 benchmarks/bench_resident.py ;;
    startup) run startup 200 python3 benchmarks/bench_startup.py --backend cuda --runs 7 --out "$OUT"
             run startup_stub 120 python3 benchmarks/bench_startup.py --backend stub --runs 7
             sed -n '/^|/p' "$OUT/startup.md" 2>/dev/null | sed 's/^/   /' >> "$OUT/summary.txt" ;;
    startup-installed) mkdir -p "$OUT/startup_installed"
             run startup_installed 200 python3 benchmarks/bench_startup.py --backend cuda --installed --runs 7 --out "$OUT/startup_installed"
             run startup_stub_driver 120 python3 benchmarks/bench_startup.py --backend stub-driver --installed --runs 7
             sed -n '/^|/p' "$OUT/startup_installed/startup.md" 2>/dev/null | sed 's/^/   /' >> "$OUT/summary.txt" ;;
    launch) run launch_overhead 120 python3 scripts/bench_launch_overhead.py ;;
    fastexp) run fast_exp 120 python3 scripts/measure_fast_exp.py ;;
    rowsweep) run row_ops_sweep 240 python3 benchmarks/row_ops_sweep.py --out "$OUT" ;;
    autotune) run autotune_rows 240 python3 benchmarks/autotune_rows.py --out "$OUT" ;;
    variants) run softmax_variants 200 python3 benchmarks/softmax_variants.py --out "$OUT" ;;
    before) CONF="--target reference,reference-w64,cuda,cuda-llvm,gfx90a,gfx942"
            python3 -m pip install -q --no-deps --no-build-isolation -e .baseline > "$OUT/install_baseline.log" 2>&1
            (cd /tmp && run conformance_before 280 python3 -m kaio.conformance $CONF --out "$OUT/conformance_before")
            python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1
            run conformance_after 280 python3 -m kaio.conformance $CONF --out "$OUT/conformance"
            run conformance_compare 30 python3 scripts/compare_conformance.py \
                "$OUT/conformance_before/conformance.json" "$OUT/conformance/conformance.json" ;;
    cuda-core) run cuda_core 200 python3 scripts/bench_cuda_core.py "$OUT" ;;
    fuzz) run fuzz 570 python3 -m kaio.conformance.fuzz --count 24000 --seed 1 --backends reference,cuda,cuda-llvm --out "$OUT/fuzz" --time-limit 540 ;;
    checked) run bench_checked 200 python3 benchmarks/bench_checked.py --out "$OUT" ;;
    conformance-portable) run conformance_portable 280 python3 -m kaio.conformance --portable --target reference,reference-w64,cuda,cuda-llvm,sm_80,sm_86,sm_89,sm_80-llvm,sm_86-llvm,sm_89-llvm,gfx90a,gfx942 --out "$OUT/conformance_portable" ;;
    portable-cost) run portable_cost 280 python3 benchmarks/portable_cost.py --out "$OUT" ;;
    rajaperf) RP="python3 -m kaio.cli rajaperf --backend cuda --variants kaio,kaio_graph,cuda --outdir $OUT/rajaperf"
              run rajaperf_default 80 env COLUMNS=200 $RP --outfile default --time-limit 45
              run rajaperf_x64 170 env COLUMNS=200 $RP --outfile x64 --sizefact 64 --repfact 0.2 --time-limit 130
              grep "geomean" "$OUT/rajaperf_default.log" "$OUT/rajaperf_x64.log" 2>/dev/null \
                  | sed 's/^/   /' >> "$OUT/summary.txt" ;;
    rajaperf-x64) run rajaperf_x64 330 env COLUMNS=200 python3 -m kaio.cli rajaperf --backend cuda \
                      --variants kaio,kaio_graph,cuda --outdir "$OUT/rajaperf" --outfile x64 --sizefact 64 \
                      --repfact 0.05 --time-limit 290
                  grep "geomean" "$OUT/rajaperf_x64.log" | sed 's/^/   /' >> "$OUT/summary.txt" ;;
    rajaperf-x64a|rajaperf-x64b) half=${step#rajaperf-x64}
                  if [ "$half" = a ]; then groups="Stream Basic Lcals"; else groups="Polybench Apps"; fi
                  run "rajaperf_x64$half" 330 env COLUMNS=200 python3 -m kaio.cli rajaperf --backend cuda \
                      --variants kaio,kaio_graph,cuda --outdir "$OUT/rajaperf" --outfile "x64$half" --sizefact 64 \
                      --repfact 0.05 --time-limit 290 --kernels $groups
                  grep "geomean" "$OUT/rajaperf_x64$half.log" | sed 's/^/   /' >> "$OUT/summary.txt" ;;
    rajaperf-fir) run rajaperf_fir 120 env COLUMNS=200 python3 -m kaio.cli rajaperf --backend cuda \
                      --variants kaio,kaio_graph,cuda --outdir "$OUT/rajaperf_fir" --outfile x64 --sizefact 64 \
                      --repfact 0.05 -k FIR DEL_DOT_VEC_2D ;;
    ml-gelu) run bench_ml_gelu 130 python3 -m kaio.cli bench --ml --out "$OUT/ml_gelu" --time-limit 80 \
                  --ops gelu_exact,gelu_tanh ;;
    ml-short) run bench_ml 160 python3 -m kaio.cli bench --ml --out "$OUT" --time-limit 110 \
                  --ops dequantize_int8,gelu_tanh,rmsnorm,softmax,gelu_exact,layernorm,silu_gate ;;
    roofline) run roofline 240 python3 -m kaio.cli bench --plot "$OUT/roofline.png" ;;
    examples) run examples 300 python3 -m pytest -q -s -rf -p no:cacheprovider -m gpu tests/test_examples.py ;;
    interop) run interop 280 python3 -m pytest -q -rf -p no:cacheprovider -m "gpu or cuda" tests/test_torch_ops.py tests/test_interop.py ;;
    blas-overhead) run blas_info 60 env COLUMNS=200 python3 -m kaio.cli info
                   run blas_overhead 200 python3 benchmarks/blas_overhead.py --out "$OUT"
                   grep -E "^(\||nvmath - ctypes|rule|default binding)" "$OUT/blas_overhead.log" \
                       | sed 's/^/   /' >> "$OUT/summary.txt"
                   run blas_tests 200 python3 -m pytest -q -rf -p no:cacheprovider tests/test_blas.py tests/test_blas_bindings.py ;;
    torch-ops) run torch_ops_bench 240 python3 benchmarks/torch_ops_bench.py --out "$OUT" ;;
    mpi) export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # Open MPI refuses root otherwise
         run mpi_tests 120 python3 -m pytest -q -rf -p no:cacheprovider tests/test_mpi.py tests/test_devices.py
         if python3 -c "import mpi4py" 2>/dev/null && command -v mpiexec >/dev/null; then
           J="env KAIO_BACKEND=cuda mpiexec"
           JAC="python3 examples/jacobi_mpi.py"; BIG="--rows-per-rank 16384 --cols 16384 --steps 30"
           run jacobi_mpi_check 75 $J -n 2 $JAC --n 4096 --steps 20 --check      # limits: < 600 s in all
           run jacobi_mpi_check_host 75 $J -n 2 $JAC --n 4096 --steps 20 --check --transport host
           run jacobi_mpi_1rank 75 $J -n 1 $JAC $BIG
           run jacobi_mpi_2ranks 100 $J -n 2 $JAC $BIG
           run jacobi_mpi_2ranks_host 100 $J -n 2 $JAC $BIG --transport host
           grep -hE "^(jacobi_mpi|time per step|check)" "$OUT"/jacobi_mpi_*.log | sed 's/^/   /' >> "$OUT/summary.txt"
         else log "mpi: mpi4py or mpiexec missing in this image (pip install mpi4py mpich)"; fi ;;
  esac
  collect   # after every step, so a call cut short by the device's time limit still returns logs
done
cat "$OUT/summary.txt"
