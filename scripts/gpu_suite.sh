#!/usr/bin/env bash
# The GPU suite for an NVIDIA machine (the H200 lent through the device tool).
#
#   scripts/gpu_suite.sh          install, kaio info, CUDA runtime tests, launch overhead
#   scripts/gpu_suite.sh full     ... and then every test in tests/ (cuda-parametrized ones included)
#
# Logs go to $OUT (the device tool's output folder; /tmp/kaio_gpu_out when unset): summary.txt plus one
# log per step, at most 7 files. Every step runs even when an earlier one failed; the exit
# status is 1 if any step failed. Each step has its own time limit so the whole run fits in the
# device tool's 10 minutes per command.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kaio_gpu_out}"
mkdir -p "$OUT"
export KAIO_CACHE_DIR="$(mktemp -d)"   # a cold compile cache: the run also exercises the disk cache
export PYTHONUNBUFFERED=1
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
failed=0

step() {  # step NAME SECONDS CMD...
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    echo "== $name: $*" >> "$SUMMARY"
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    [ $rc -ne 0 ] && failed=1
    echo "   rc=$rc  ($((SECONDS - t0)) s)$([ $rc -eq 124 ] && echo '  TIMED OUT')" >> "$SUMMARY"
    # the last pytest line (pass/fail counts) goes into the summary
    grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$OUT/$name.log" | tail -1 | sed 's/^/   /' >> "$SUMMARY"
}

step install 150 python3 -m pip install --no-deps --no-build-isolation -e .
if ! python3 -c "import kaio.backends.cuda, kaio.cli" 2>/dev/null; then
    # offline machine without `wheel`: map the folders into one `kaio` package by symlinks
    SHIM="$(mktemp -d)"; mkdir "$SHIM/kaio"
    for f in "$PWD"/kaio_core/*; do ln -s "$f" "$SHIM/kaio/"; done
    for d in backends regions kernels conformance; do ln -s "$PWD/$d" "$SHIM/kaio/$d"; done
    export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
    echo "   install failed: using a symlink shim on PYTHONPATH ($SHIM)" >> "$SUMMARY"
fi
{ echo "== environment"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
  python3 -c "import sys, numpy, cuda.bindings; print(sys.version.split()[0], 'numpy', numpy.__version__, 'cuda.bindings', cuda.bindings.__version__)" 2>&1
} >> "$SUMMARY"
step info 60 python3 -m kaio.cli info
step cuda_runtime 240 python3 -m pytest -q -rs -p no:cacheprovider tests/test_cuda_runtime.py tests/test_cuda_runtime_fake.py
step launch_overhead 90 python3 scripts/bench_launch_overhead.py
if [ "${1:-}" = "full" ]; then
    step full_suite 420 python3 -m pytest -q -rs -p no:cacheprovider tests
fi
echo "failed_steps=$failed" >> "$SUMMARY"
cat "$SUMMARY"
exit $failed
