#!/bin/sh
# bench_run.sh - steps/s of `ampdiag run` for the mlp and transformer presets in fp32, fp16 and
# bf16, with tensor tracing off (--trace-every 0: step records only), every 10 steps, and every
# step; the cost of tracing is measured against tracing off in the same run of this script.
# Usage: bench/bench_run.sh [AMPDIAG]   (default ./ampdiag). Prints a Markdown table.
set -eu
AMPDIAG=${1:-./ampdiag}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
steps_for() { case $1 in mlp) echo 1000 ;; *) echo 100 ;; esac; }
batch_for() { case $1 in mlp) echo 64 ;; *) echo 8 ;; esac; }
echo "| model (batch) | precision | trace off | every 10 steps | every step | tracing cost (every 10 / every step) |"
echo "|---|---|---|---|---|---|"
for model in mlp transformer; do
    n=$(steps_for $model); b=$(batch_for $model)
    for p in fp32 fp16 bf16; do
        line="| $model ($b) | $p"
        base=""
        c10=""
        c1=""
        for te in 0 10 1; do
            best=""
            for rep in 1 2 3; do
                t0=$(now)
                "$AMPDIAG" run --model $model --precision $p --steps $n --batch $b --trace-every $te \
                    --hist-every 100 --eval-every 0 --progress none \
                    -o "$tmp/r.h5" --overwrite > /dev/null
                t1=$(now)
                t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
                if [ -z "$best" ] || [ "$(awk -v t="$t" -v b="$best" 'BEGIN { print (t < b) }')" = 1 ]; then best=$t; fi
            done
            line="$line | $(awk -v n="$n" -v t="$best" 'BEGIN { printf "%.0f", n / t }') steps/s"
            if [ $te = 0 ]; then base=$best; fi
            cost=$(awk -v t="$best" -v b="$base" 'BEGIN { printf "%+.0f%%", (t / b - 1) * 100 }')
            if [ $te = 10 ]; then c10=$cost; fi
            if [ $te = 1 ]; then c1=$cost; fi
        done
        echo "$line | $c10 / $c1 |"
    done
done
echo
echo "(wall time of the whole command, best of 3, including start-up and writing the trace;"
echo " $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))"
