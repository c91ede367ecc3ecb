#!/usr/bin/env bash
# One call on the GPU machine: install kaio, run the GPU tests, smoke tests and benchmarks,
# writing every log under $OUT. Usage: scripts/device_run.sh [quick|full]
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kaio_out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KAIO_CACHE_DIR="$(mktemp -d)"
mode="${1:-quick}"
log() { echo "== $* ($(date +%T))" | tee -a "$OUT/summary.txt"; }
run() {  # run NAME LIMIT CMD...
    local name=$1 limit=$2; shift 2
    log "$name: $*"
    timeout --kill-after=5 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "   rc=$rc; $(grep -E '[0-9]+ (passed|failed)' "$OUT/$name.log" | tail -1)" | tee -a "$OUT/summary.txt"
    tail -5 "$OUT/$name.log" | sed 's/^/   | /' >> "$OUT/summary.txt"
}
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || log "pip install failed"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$OUT/summary.txt" 2>&1
run info 60 python3 -m kaio.cli info
run ptx_smoke 90 python3 scripts/ptx_smoke.py
run llvm_smoke 90 python3 scripts/llvm_nvptx_smoke.py
if [ "$mode" = quick ]; then
    run gpu_tests 240 python3 -m pytest -q -x -m "gpu or cuda" -p no:cacheprovider tests
    run bench 150 python3 benchmarks/bench_gpu.py --quick --out "$OUT"
else
    run gpu_tests 200 python3 -m pytest -q -m "gpu or cuda" -p no:cacheprovider tests
    run suite_cuda 300 env KAIO_BACKEND=cuda python3 -m pytest -q -n 8 -p no:cacheprovider tests
    run suite_llvm 300 env KAIO_BACKEND=cuda KAIO_CUDA_CODEGEN=llvm python3 -m pytest -q -n 8 -p no:cacheprovider tests
    run conformance 240 python3 -m kaio.conformance --target reference,cuda,cuda-llvm,gfx90a,gfx942 --out "$OUT/conformance"
    run bench 200 python3 benchmarks/bench_gpu.py --out "$OUT"
fi
cat "$OUT/summary.txt"
