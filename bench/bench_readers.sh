#!/bin/sh
# bench_readers.sh - the readers on long traces: `ampdiag info` of one trace, `compare` and `plot`
# of two (fp32 and fp16), at 1k, 10k and 100k steps, as `ampdiag run` writes them by default
# (tensor records every step, histograms every 50). The traces are made quickly: a 1000-step
# `ampdiag run` of the default mlp per precision, replayed by bench/trace_replay to the length
# (its records again at later steps, continuously; see trace_replay.c). Each command keeps its
# best of REPS runs; wall time with `date +%s%N`, CPU time (user + system, its threads and the
# gnuplot processes it waits for) and the largest resident set of the command or a gnuplot
# process from /usr/bin/time; "chart data" is the bytes of plot's data files (*.dat, *.bin).
# Usage: bench/bench_readers.sh [AMPDIAG [REPS [STEPS...]]]  (default ./ampdiag 3 1000 10000
# 100000). Prints a Markdown table.
set -eu
AMPDIAG=${1:-./ampdiag}
REPS=${2:-3}
[ $# -ge 2 ] && shift 2 || shift $#
STEPS=${*:-1000 10000 100000}
REPLAY=${REPLAY:-$(dirname "$AMPDIAG")/bench/trace_replay}
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench_readers.sh: needs /usr/bin/time (Debian package 'time')" >&2; exit 3; }
[ -x "$REPLAY" ] || { echo "bench_readers.sh: no $REPLAY (make bench/trace_replay)" >&2; exit 3; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in fp32 fp16; do
    "$AMPDIAG" run --precision $p --steps 1000 --progress none -o "$tmp/t-$p.h5" > /dev/null
done
# one command, best of REPS: "wall_s cpu_s maxrss_MiB"
measure() {
    : > "$tmp/m"
    rep=0
    while [ $rep -lt "$REPS" ]; do
        t0=$(date +%s%N)
        "$TIME" -f "%U %S %M" -o "$tmp/cpu" "$@" > /dev/null 2> "$tmp/err" || {
            cat "$tmp/err" >&2; exit 3; }
        t1=$(date +%s%N)
        echo "$(( (t1 - t0) / 1000 )) $(tail -1 "$tmp/cpu")" >> "$tmp/m"
        rep=$((rep + 1))
    done
    awk 'NR == 1 || $1 < w { w = $1 } NR == 1 || $2 + $3 < c { c = $2 + $3 }
         NR == 1 || $4 < m { m = $4 }
         END { printf "%.2f s / %.2f s / %.0f MiB", w / 1e6, c, m / 1024 }' "$tmp/m"
}
echo "| steps | traces (2) | info: wall / CPU / max RSS | compare | plot | chart data |"
echo "|---|---|---|---|---|---|"
for n in $STEPS; do
    for p in fp32 fp16; do
        "$REPLAY" "$tmp/t-$p.h5" "$n" "$tmp/r-$p.h5"
    done
    size=$(du -cb "$tmp/r-fp32.h5" "$tmp/r-fp16.h5" | awk 'END { printf "%.1f MB", $1 / 1e6 }')
    info=$(measure "$AMPDIAG" info "$tmp/r-fp32.h5")
    cmp=$(measure "$AMPDIAG" compare "$tmp/r-fp32.h5" "$tmp/r-fp16.h5")
    rm -rf "$tmp/plot"
    plot=$(measure "$AMPDIAG" plot "$tmp/r-fp32.h5" "$tmp/r-fp16.h5" -o "$tmp/plot")
    data=$(du -cb "$tmp"/plot/*.dat "$tmp"/plot/*.bin | awk 'END { printf "%.2f MB", $1 / 1e6 }')
    echo "| $n | $size | $info | $cmp | $plot | $data |"
done
echo
echo "(best of $REPS; $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); load average"
echo " $(cut -d' ' -f1-3 /proc/loadavg) at the end)"
