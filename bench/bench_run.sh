#!/bin/sh
# bench_run.sh - steps/s of `ampdiag run` for the mlp and transformer presets in fp32, fp16 and
# bf16, with tensor tracing off (--trace-every 0: step records only), every 10 steps, every step
# (statistics on the tracer thread, the default on 2+ cores) and every step inline
# (--trace-threads 0). The cost of tracing is measured against tracing off in the same run of
# this script; the configurations are interleaved and each keeps its best of REPS runs, so that
# a slow spell of a shared machine does not land on one column only. The last column is the CPU
# time (user + system, both threads) of the every-step run against that of tracing off. The fixed
# cost of a command (start-up, data, closing the trace), measured as a 1-step run with tracing
# off, is subtracted from every wall time, so that the rates and costs are per training step.
# Wall times are read with `date +%s%N` (microseconds; /usr/bin/time's are hundredths of a
# second, 1.4% of an mlp run); CPU times come from /usr/bin/time.
# Usage: bench/bench_run.sh [AMPDIAG [REPS]]   (default ./ampdiag 5). Prints a Markdown table.
set -eu
AMPDIAG=${1:-./ampdiag}
REPS=${2:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench_run.sh: needs /usr/bin/time (Debian package 'time')" >&2; exit 3; }
steps_for() { case $1 in mlp) echo 1000 ;; *) echo 300 ;; esac; }
batch_for() { case $1 in mlp) echo 64 ;; *) echo 8 ;; esac; }
# best (smallest) value of column $2 among lines starting with key $1 in file $3
best() { awk -v k="$1" -v c="$2" '$1 == k && (b == "" || $c < b) { b = $c } END { print b }' "$3"; }
pct() { awk -v t="$1" -v b="$2" 'BEGIN { printf "%+.1f%%", (t / b - 1) * 100 }'; }
echo "| model (batch) | precision | trace off | every 10 steps | every step | every step, inline | tracing cost (every 10 / every step / inline) | CPU time, every step |"
echo "|---|---|---|---|---|---|---|---|"
for model in mlp transformer; do
    n=$(steps_for $model); b=$(batch_for $model)
    for p in fp32 fp16 bf16; do
        log="$tmp/$model-$p.txt"
        : > "$log"
        rep=0
        while [ $rep -lt "$REPS" ]; do
            for cfg in "off 0 1 $n" "e10 10 1 $n" "e1 1 1 $n" "inl 1 0 $n" "fixed 0 1 1"; do
                set -- $cfg
                t0=$(date +%s%N)
                "$TIME" -f "%U %S" -o "$tmp/cpu" "$AMPDIAG" run --model $model --precision $p --steps $4 \
                    --batch $b --trace-every $2 --trace-threads $3 --hist-every 100 --eval-every 0 \
                    --progress none -o "$tmp/r.h5" --overwrite > /dev/null
                t1=$(date +%s%N)
                echo "$1 $(( (t1 - t0) / 1000 )) $(cat "$tmp/cpu")" >> "$log"
            done
            rep=$((rep + 1))
        done
        awk '{ print $1, $2 / 1e6, $3 + $4 }' "$log" > "$log.2"
        fx=$(best fixed 2 "$log.2")
        sub() { awk -v t="$1" -v f="$fx" 'BEGIN { print t - f }'; }
        off=$(sub "$(best off 2 "$log.2")"); e10=$(sub "$(best e10 2 "$log.2")")
        e1=$(sub "$(best e1 2 "$log.2")"); inl=$(sub "$(best inl 2 "$log.2")")
        cpu_off=$(best off 3 "$log.2"); cpu_e1=$(best e1 3 "$log.2")
        rate() { awk -v n="$n" -v t="$1" 'BEGIN { printf "%.0f steps/s", n / t }'; }
        echo "| $model ($b) | $p | $(rate "$off") | $(rate "$e10") | $(rate "$e1") | $(rate "$inl") |" \
             "$(pct "$e10" "$off") / $(pct "$e1" "$off") / $(pct "$inl" "$off") | $(pct "$cpu_e1" "$cpu_off") |"
    done
done
echo
echo "(wall time of the command less that of a 1-step run, best of $REPS interleaved runs;"
echo " $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))"
