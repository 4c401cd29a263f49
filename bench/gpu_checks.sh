#!/bin/sh
# gpu_checks.sh - every GPU check and benchmark of the project in one run, for a GPU machine lent
# for a few minutes (bench/gpu_bundle.sh packs what it needs). Each part has a time limit and
# writes its output to OUT (at most 7 files); a part that fails is reported and the next one runs.
#   1. the statistics kernels against a plain read of the same memory (bench_gpu_kernels)
#   2. numfmt.h on the device against CUDA's conversions, every float32 (t_cuda_numfmt)
#   3. every backend operation against the CPU's portable code (t_backend_ops: TAP)
#   4. ampdiag selftest --device cuda (format check, statistics, runs against the CPU)
#   6. the statistics through the backend: GB/s, and many small tensors one by one and batched
#   7. steps/s of ampdiag run on the GPU, tracing off and every step (bench_gpu.sh)
#   8. the PyTorch tracer's cost on the GPU: resnet18, a small BERT (bench_gpu_tracer.py)
#   5. last (the slowest): compute-sanitizer memcheck of a traced transformer run and of the
#      statistics, where the machine has compute-sanitizer
# Usage: gpu_checks.sh BUNDLE OUT [PARTS (default 12345678)]
set -u
B=$(cd "${1:?usage: gpu_checks.sh BUNDLE OUT [PARTS]}" && pwd)
OUT=${2:?usage: gpu_checks.sh BUNDLE OUT [PARTS]}
PARTS=${3:-12345678}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export AMPDIAG_LIB="$B/lib/libampdiag.so.0" PYTHONUNBUFFERED=1
cd "$B"
part() { case $PARTS in *"$1"*) echo "=== $1 $2 ($(date +%T))"; return 0 ;; *) return 1 ;; esac; }
lim() { t=$1; shift; timeout "$t" "$@"; rc=$?; [ $rc -eq 0 ] || echo "=== exit $rc: $*"; return 0; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
part 1 kernels && lim 60 bin/bench_gpu_kernels 268435456 10 2>&1 | tee "$OUT/kernels.md"
part 2 numfmt && lim 60 bin/t_cuda_numfmt 2>&1
if part 3 backend_ops; then
    export srcdir=.
    lim 120 bin/t_backend_ops > "$OUT/backend_ops.tap" 2>&1
    grep -E '^not ok|^Bail|^1\.\.' "$OUT/backend_ops.tap"
    grep -c '^ok' "$OUT/backend_ops.tap"
    sed -n '/under test: cuda/,$p' "$OUT/backend_ops.tap" | grep -E 'gemm|attention|tstats|whatif|count_at|many' | cut -c1-160
fi
part 4 selftest && lim 150 bin/ampdiag selftest --device cuda > "$OUT/selftest.txt" 2>&1 && tail -25 "$OUT/selftest.txt"
part 6 stats && lim 60 bin/bench_gpu_stats cuda 67108864 5 2>&1 | tee "$OUT/stats.md"
part 7 runs && lim 150 sh bench/bench_gpu.sh bin/ampdiag cuda 2 2>&1 | tee "$OUT/runs.md"
part 8 torch && lim 200 python3 python/bench/bench_gpu_tracer.py --steps 15 --rounds 2 2>&1 | tee "$OUT/torch.md"
if part 5 memcheck && command -v compute-sanitizer > /dev/null; then
    lim 150 compute-sanitizer --tool memcheck --leak-check no bin/ampdiag run --device cuda --model transformer \
        --steps 2 --trace-every 1 --hist-every 1 --eval-every 0 --progress none -o "${TMPDIR:-/tmp}/gpu_checks_san.h5" --overwrite \
        > "$OUT/memcheck.txt" 2>&1
    tail -5 "$OUT/memcheck.txt"
    lim 90 compute-sanitizer --tool memcheck bin/bench_gpu_stats cuda 1000003 1 >> "$OUT/memcheck.txt" 2>&1
    tail -3 "$OUT/memcheck.txt"
fi
echo "=== done ($(date +%T))"
