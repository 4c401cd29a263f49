#!/bin/sh
# bench_gpu.sh - the GPU rows of `make bench`: steps/s of `ampdiag run --device DEVICE` for the
# mlp and transformer presets in fp32, fp16 and bf16, with tensor tracing off (--trace-every 0)
# and on every step, measured as bench_run.sh measures the CPU (best of REPS interleaved runs,
# the fixed cost of a 1-step run subtracted); then the statistics' GB/s (bench_gpu_stats).
# Without a device backend that can run here it prints that the rows were not measured.
# Usage: bench/bench_gpu.sh [AMPDIAG [DEVICE [REPS]]]   (default ./ampdiag cuda 3)
set -eu
AMPDIAG=${1:-./ampdiag}
DEVICE=${2:-cuda}
REPS=${3:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$AMPDIAG" run --device "$DEVICE" --steps 1 --trace-every 0 --eval-every 0 --progress none \
        -o "$tmp/probe.h5" > /dev/null 2> "$tmp/probe.err"; then
    echo "GPU rows: not measured ($(cat "$tmp/probe.err"))"
    exit 0
fi
steps_for() { case $1 in mlp) echo 2000 ;; *) echo 500 ;; esac; }
batch_for() { case $1 in mlp) echo 64 ;; *) echo 8 ;; esac; }
best() { awk -v k="$1" '$1 == k && (b == "" || $2 < b) { b = $2 } END { print b }' "$2"; }
echo "| model (batch) on $DEVICE | precision | trace off | every step | tracing cost |"
echo "|---|---|---|---|---|"
for model in mlp transformer; do
    n=$(steps_for $model); b=$(batch_for $model)
    for p in fp32 fp16 bf16; do
        log="$tmp/$model-$p.txt"
        : > "$log"
        rep=0
        while [ $rep -lt "$REPS" ]; do
            for cfg in "off 0 $n" "e1 1 $n" "fixed 0 1"; do
                set -- $cfg
                t0=$(date +%s%N)
                "$AMPDIAG" run --device "$DEVICE" --model $model --precision $p --steps $3 --batch $b \
                    --trace-every $2 --hist-every 100 --eval-every 0 --progress none -o "$tmp/r.h5" \
                    --overwrite > /dev/null
                t1=$(date +%s%N)
                echo "$1 $(( (t1 - t0) / 1000 ))" >> "$log"
            done
            rep=$((rep + 1))
        done
        fx=$(best fixed "$log")
        off=$(awk -v t="$(best off "$log")" -v f="$fx" 'BEGIN { print (t - f) / 1e6 }')
        e1=$(awk -v t="$(best e1 "$log")" -v f="$fx" 'BEGIN { print (t - f) / 1e6 }')
        rate() { awk -v n="$n" -v t="$1" 'BEGIN { printf "%.0f steps/s", n / t }'; }
        echo "| $model ($b) | $p | $(rate "$off") | $(rate "$e1") |" \
             "$(awk -v t="$e1" -v b="$off" 'BEGIN { printf "%+.1f%%", (t / b - 1) * 100 }') |"
    done
done
echo
echo "(wall time of the command less that of a 1-step run, best of $REPS interleaved runs)"
