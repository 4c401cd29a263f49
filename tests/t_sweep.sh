#!/bin/sh
# t_sweep.sh - `ampdiag sweep`: runs each precision (and learning rate) into DIR as child
# processes, in parallel with -j, then compares them (text on stdout, DIR/report.md,
# DIR/report.json); bad options are refused (exit 2) and a run that refuses its options fails
# the sweep with its log shown.

AMPDIAG=${AMPDIAG:-./ampdiag}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

T=$(mktemp -d "${TMPDIR:-/tmp}/t_sweep.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT

n=0
failed=0
ok() {
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi
}
diag() { sed 's/^/# /' "$@"; }

"$AMPDIAG" sweep --precisions fp16,fp32 --lrs 0.001,0.003 -j 2 -o "$T/sw" --steps 60 \
    --trace-every 10 --hist-every 30 --eval-every 30 >"$T/out.txt" 2>"$T/err.txt"
st=$?
ok $st "sweep of 2 precisions x 2 learning rates with -j 2 exits 0"
[ $st -eq 0 ] || diag "$T/err.txt"
for f in run-fp32-lr0.001 run-fp32-lr0.003 run-fp16-lr0.001 run-fp16-lr0.003; do
    [ -s "$T/sw/$f.h5" ] && [ -f "$T/sw/$f.log" ]
    ok $? "$f.h5 and its log written"
done
head -1 "$T/out.txt" | grep -q '^Verdict:'
ok $? "the text report goes to stdout, verdict first"
grep -Eq '^\| (final eval loss|final-window training loss) \|' "$T/sw/report.md"
ok $? "report.md written"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$T/sw/report.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
runs = d["runs"]
assert len(runs) == 4, len(runs)
assert runs[d["baseline"]]["precision"] == "fp32", "the fp32 run is the baseline"
assert sorted(r["lr"] for r in runs) == [0.001, 0.001, 0.003, 0.003]
assert d["recommendation"]["lr"]["verdict"] == "pick", d["recommendation"]["lr"]
assert d["recommendation"]["lr"]["suggested"] in (0.001, 0.003)
EOF
    ok $? "report.json: 4 runs, fp32 baseline, the lr picked among those tried"
else
    echo "ok $((n = n + 1)) # SKIP python3 not found"
fi
grep -q 'run-fp16-lr0.003 done' "$T/err.txt"
ok $? "progress lines on stderr"

"$AMPDIAG" sweep --precisions fp32,fp16 -o "$T/pl" --steps 30 --trace-every 5 --plots >/dev/null 2>"$T/err.txt"
st=$?
[ $st -eq 0 ] && grep -q '](charts/loss.png)\|`charts/loss.png`' "$T/pl/report.md" && [ -f "$T/pl/charts/loss.gp" ]
ok $? "--plots: charts (or their scripts) in DIR/charts, linked from report.md relative to it (exit $st)"
[ $st -eq 0 ] || diag "$T/err.txt"

"$AMPDIAG" sweep --precisions fp32,fp17 -o "$T/bad" >/dev/null 2>"$T/err.txt"
[ $? -eq 2 ] && grep -q "fp17" "$T/err.txt"
ok $? "--precisions with an unknown format: exit 2, named"
"$AMPDIAG" sweep --precisions fp32 >/dev/null 2>"$T/err.txt"
[ $? -eq 2 ] && grep -q -- "-o DIR" "$T/err.txt"
ok $? "no output directory: exit 2"
"$AMPDIAG" sweep --precisions fp32 --precision fp16 -o "$T/bad" >/dev/null 2>"$T/err.txt"
[ $? -eq 2 ]
ok $? "--precision is refused (the sweep sets it)"
"$AMPDIAG" sweep --precisions fp32 -o "$T/bad2" --model nosuchmodel --steps 5 >/dev/null 2>"$T/err.txt"
st=$?
[ $st -eq 2 ] && grep -q "the run-fp32 run would be refused (exit 2): no run started" "$T/err.txt" &&
    grep -q "nosuchmodel" "$T/err.txt" && [ ! -e "$T/bad2/run-fp32.h5" ]
ok $? "a run that refuses its options: exit 2 before any run starts, the run's message shown (exit $st)"
[ $st -eq 2 ] || diag "$T/err.txt"
"$AMPDIAG" sweep --precisions fp32,bf16 --lrs 0.01 -o "$T/dry" --dry-run --steps 5 >"$T/dry.txt" 2>&1
[ $? -eq 0 ] && grep -q -- "--precision bf16 --lr 0.01 -o $T/dry/run-bf16-lr0.01.h5" "$T/dry.txt" && [ ! -d "$T/dry" ]
ok $? "--dry-run prints the run commands and runs nothing"

echo "1..$n"
exit $failed
