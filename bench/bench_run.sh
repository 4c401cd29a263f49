#!/bin/sh
# bench_run.sh - what tracing costs a training step, in wall time and in CPU time (all threads):
# `ampdiag run` of the mlp and transformer presets in fp32, fp16 and bf16, with tensor tracing
# off (--trace-every 0: the per-step evidence only), at the default budget (--trace-budget 5: full
# records at the cadence the tracer picks from its own measured cost), every 10 steps and every
# step (statistics on the tracer thread, the default on 2+ cores), and every step inline
# (--trace-threads 0). With CORES=1 every command runs pinned to one core (taskset -c 0), as on
# a busy machine where the tracer's threads find no idle core: the cost in wall time then
# approaches the cost in CPU time.
# The configurations are interleaved and each keeps its best of REPS runs (wall and CPU time
# separately), so that a slow spell of a shared machine does not land on one column only. The
# fixed cost of a command (start-up, data, closing the trace), measured as a 1-step run with the
# same options, is subtracted from each configuration's time, so that rates and ratios are per
# training step; the last column gives what tracing adds to that fixed cost (a traced command
# allocates the tracer's buffers, starts its threads and reads more back for its summary).
# Wall times are read with `date +%s%N` (microseconds); CPU times (user + system, all threads)
# come from /usr/bin/time (hundredths of a second: runs are long enough for that).
# Usage: [CORES=1|2] [PRECISIONS="fp32 fp16 bf16"] bench/bench_run.sh [AMPDIAG [REPS]]
# (default ./ampdiag 5). Prints a Markdown table: each traced configuration as wall / CPU time
# per step relative to tracing off (1.05x: 5% more).
set -eu
AMPDIAG=${1:-./ampdiag}
REPS=${2:-5}
PRECISIONS=${PRECISIONS:-fp32 fp16 bf16}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench_run.sh: needs /usr/bin/time (Debian package 'time')" >&2; exit 3; }
CORES=${CORES:-2}
PIN=""
if [ "$CORES" = 1 ]; then
    command -v taskset >/dev/null || { echo "bench_run.sh: CORES=1 needs taskset (util-linux)" >&2; exit 3; }
    PIN="taskset -c 0"
fi
steps_for() { case $1 in mlp) echo ${MLP_STEPS:-3000} ;; *) echo ${TF_STEPS:-600} ;; esac; }
batch_for() { case $1 in mlp) echo 64 ;; *) echo 8 ;; esac; }
# best (smallest) value of column $2 among lines starting with key $1 in file $3
best() { awk -v k="$1" -v c="$2" '$1 == k && (b == "" || $c < b) { b = $c } END { print b }' "$3"; }
ratio() { awk -v t="$1" -v b="$2" 'BEGIN { printf "%.2fx", t / b }'; }
echo "| model (batch) | precision | cores | tracing off: steps/s (CPU ms/step) | budget 5%: wall / CPU | every 10 steps: wall / CPU | every step: wall / CPU | every step inline: wall / CPU | fixed CPU cost of a traced command: budget / every step |"
echo "|---|---|---|---|---|---|---|---|---|"
for model in mlp transformer; do
    n=$(steps_for $model); b=$(batch_for $model)
    for p in $PRECISIONS; do
        log="$tmp/$model-$p.txt"
        : > "$log"
        rep=0
        while [ $rep -lt "$REPS" ]; do
            # name, tracing options, steps
            for cfg in "off|--trace-every 0|$n" "bud|--trace-budget 5|$n" "e10|--trace-every 10|$n" \
                       "e1|--trace-every 1|$n" "inl|--trace-every 1 --trace-threads 0|$n" \
                       "off1|--trace-every 0|1" "bud1|--trace-budget 5|1" "e101|--trace-every 10|1" \
                       "e11|--trace-every 1|1" "inl1|--trace-every 1 --trace-threads 0|1"; do
                name=${cfg%%|*}; rest=${cfg#*|}; topt=${rest%%|*}; steps=${rest#*|}
                t0=$(date +%s%N)
                # shellcheck disable=SC2086
                $PIN "$TIME" -f "%U %S" -o "$tmp/cpu" "$AMPDIAG" run --model $model --precision $p --steps $steps \
                    --batch $b $topt --hist-every 100 --eval-every 0 --progress none -o "$tmp/r.h5" --overwrite > /dev/null
                t1=$(date +%s%N)
                echo "$name $(( (t1 - t0) / 1000 )) $(cat "$tmp/cpu")" >> "$log"
            done
            rep=$((rep + 1))
        done
        awk '{ print $1, $2 / 1e6, $3 + $4 }' "$log" > "$log.2"
        # per-step wall and CPU seconds of a configuration (its best run less the best 1-step run
        # with the same options)
        wall() { awk -v t="$(best "$1" 2 "$log.2")" -v f="$(best "${1}1" 2 "$log.2")" 'BEGIN { print t - f }'; }
        cpu() { awk -v t="$(best "$1" 3 "$log.2")" -v f="$(best "${1}1" 3 "$log.2")" 'BEGIN { print t - f }'; }
        fixed=$(awk -v a="$(best bud1 3 "$log.2")" -v b="$(best e11 3 "$log.2")" -v o="$(best off1 3 "$log.2")" \
            'BEGIN { printf "+%.0f / +%.0f ms", a * 1000 - o * 1000, b * 1000 - o * 1000 }')
        off=$(wall off); coff=$(cpu off)
        cost() { echo "$(ratio "$(wall "$1")" "$off") / $(ratio "$(cpu "$1")" "$coff")"; }
        rate=$(awk -v n="$n" -v t="$off" -v c="$coff" 'BEGIN { printf "%.0f (%.3f)", n / t, c / n * 1000 }')
        echo "| $model ($b) | $p | $CORES | $rate | $(cost bud) | $(cost e10) | $(cost e1) | $(cost inl) | $fixed |"
    done
done
echo
echo "(wall and CPU time per step relative to tracing off, from each command's time less that of a 1-step"
echo " run with the same options; the fixed cost: 1-step runs against tracing off, to the hundredth of a second;"
echo " best of $REPS interleaved runs; CORES=$CORES of $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'),"
echo " load average $(cut -d' ' -f1-3 /proc/loadavg) at the end)"
