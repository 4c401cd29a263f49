#!/bin/sh
# t_long_trace.sh - the readers on long traces, made from the reference traces by
# bench/trace_replay (their records again at later steps).
# 1. 30000 steps (more chart columns than a chart draws, histograms sampled, /tensors read from
#    its stored chunks): info and compare print exactly what ampdiag printed before its loader
#    kept chart columns instead of every record (tests/long/, written by that version; a change
#    of the reports made on purpose rewrites them with this script's commands, saying so).
# 2. 100000 steps with a single-step spike (loss x 1000, fc1 activations x 2^20 at one step):
#    plot's data stays small (rows per block bounded by the chart columns) and the spike, the
#    skipped steps and the NaN events all show in it.
# (Rewritten with the reports' evidence as data: figures under their names, findings, text
# wrapped at COLUMNS=100; every number as before. Rewritten again when compare gained its claim:
# the text's "Claim:" line, the JSON's recommendation.claim and its item; the rest as before.)
export COLUMNS=100
AMPDIAG=${AMPDIAG:-./ampdiag}
REPLAY=${REPLAY:-./bench/trace_replay}
S=${srcdir:-.}
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
AMPDIAG=$(abs "$AMPDIAG"); REPLAY=$(abs "$REPLAY"); S=$(cd "$S" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_long_trace.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

# ---------------------------------------------------------------- 1. the same findings
"$REPLAY" "$S/traces/v1-fp32-complete.h5" 30000 long-fp32.h5 &&
    "$REPLAY" "$S/traces/v1-fp16-diverged.h5" 30000 long-fp16.h5 ; t $? "30000-step traces written"
for p in fp32 fp16; do
    "$AMPDIAG" info long-$p.h5 | sed 's/ended [0-9TZ:-]*/ended -/; s/^\( *\)[0-9]\{4\}-[0-9-]*T[0-9:]*Z$/\1-/' > info-$p.txt
    diff "$S/tests/long/info-$p.txt" info-$p.txt > info-$p.diff ; t $? "info of the $p trace as before"
    [ -s info-$p.diff ] && head -20 info-$p.diff | sed 's/^/# /'
done
"$AMPDIAG" compare long-fp32.h5 long-fp16.h5 > compare.txt
diff "$S/tests/long/compare.txt" compare.txt > compare.diff ; t $? "compare (text) as before"
[ -s compare.diff ] && head -20 compare.diff | sed 's/^/# /'
"$AMPDIAG" compare --format json long-fp32.h5 long-fp16.h5 > compare.json
cmp -s "$S/tests/long/compare.json" compare.json ; t $? "compare --format json as before"
AMPDIAG_NO_LIBDEFLATE=1 "$AMPDIAG" compare --format json long-fp32.h5 long-fp16.h5 > compare-zlib.json
cmp -s "$S/tests/long/compare.json" compare-zlib.json ; t $? "... also with the chunks inflated by zlib"

# ---------------------------------------------------------------- 2. a spike in 100000 steps
spike=61234
"$REPLAY" "$S/traces/v1-fp16-diverged.h5" 100000 spike.h5 --spike $spike ; t $? "100000-step trace with a spike at $spike written"
"$AMPDIAG" plot spike.h5 -o charts --no-draw > /dev/null ; t $? "plot --no-draw"
# the rows of data block $2 (0-based, blocks end with two empty lines) of file $1
block() { awk -v b="$2" 'BEGIN { k = 0 } /^$/ { e++; if (e == 2) k++; next } { e = 0 } !/^#/ && k == b' "$1"; }
rows=$(block charts/loss.dat 0 | wc -l)
[ "$rows" -gt 1000 ] && [ "$rows" -le $((4 * 2048)) ] ; t $? "loss.dat: $rows rows for 100000 steps (chart columns: at most 4 x 2048)"
top=$(block charts/loss.dat 0 | awk '$2 != "NaN" && (m == "" || $2 > m) { m = $2; s = $1 } END { print s }')
[ "$top" = $spike ] ; t $? "loss.dat: the largest loss is the spike's step ($top)"
rows=$(block charts/layer-ranges-activation.dat 0 | wc -l)
[ "$rows" -gt 500 ] && [ "$rows" -le $((6 * 1024)) ] ; t $? "layer-ranges-activation.dat: $rows rows for fc1 (at most 6 x 1024)"
top=$(block charts/layer-ranges-activation.dat 0 | awk '$2 != "NaN" && (m == "" || $2 > m) { m = $2; s = $1 } END { print s }')
[ "$top" = $spike ] ; t $? "layer-ranges-activation.dat: fc1's largest |x| is the spike's step ($top)"
skips=$(block charts/loss-marks.dat 0 | awk '$1 != "NaN"' | wc -l)
[ "$skips" -gt 500 ] && [ "$skips" -le 2048 ] ; t $? "loss-marks.dat: skipped steps marked, one per column ($skips)"
nans=$(block charts/loss-marks.dat 1 | awk '$1 != "NaN"' | wc -l)
[ "$nans" -gt 500 ] && [ "$nans" -le 2048 ] ; t $? "loss-marks.dat: NaN events marked, one per column ($nans)"
bytes=$(du -cb charts/*.dat charts/*.bin | awk 'END { print $1 }')
[ "$bytes" -lt 2000000 ] ; t $? "chart data: $bytes bytes"

echo "1..$n"
exit $fail
