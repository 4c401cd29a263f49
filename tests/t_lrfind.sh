#!/bin/sh
# t_lrfind.sh - `ampdiag lrfind`, the learning-rate range test: its suggestion on the default
# mlp lies where the loss falls, and a run at the suggested lr (the advice followed) trains.
AMPDIAG=${AMPDIAG:-./ampdiag}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP python3 is needed to read the JSON"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_lrfind.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
j() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"; }

"$AMPDIAG" lrfind -o "$T/lf.h5" --progress none --format json >"$T/lf.json" 2>"$T/lf.err"
ok $? "lrfind on the default mlp: exit 0 (a suggestion)"
j "$T/lf.json" 'd["format"] == "ampdiag-lrfind" and d["format_version"] == 1 and d["steps"] == 100 and d["lr_min"] < d["valley"] < d["diverged_at_lr"] < d["lr_max"]'
ok $? "the valley lies between the first lr and where the smoothed loss passed 4x its minimum"
j "$T/lf.json" '1e-4 <= d["valley"] <= 1e-2 and 1e-4 <= d["steepest"] <= 1e-1 and d["minimum"] > 0'
ok $? "valley, steepest and minimum/10 within the range where this model trains"
lr=$(python3 -c 'import json,sys; print("%.3g" % json.load(open(sys.argv[1]))["valley"])' "$T/lf.json")
"$AMPDIAG" run --lr "$lr" --steps 300 --progress none -o "$T/follow.h5" >"$T/follow.out" 2>&1
"$AMPDIAG" info --format json "$T/follow.h5" >"$T/follow.json" 2>/dev/null
j "$T/follow.json" 'd["status"] == "complete" and d["findings"]["first_nonfinite_forward"] is None and d["loss"]["last"] < 0.5 * d["loss"]["first"] and d["eval"]["metric"] > 0.5'
ok $? "the advice followed: a run at the valley lr ($lr) trains (loss halves, eval accuracy > 50%)"
"$AMPDIAG" lrfind -o "$T/x.h5" --lr 0.1 >/dev/null 2>"$T/u1.err"
[ $? -eq 2 ] && grep -q -- '--lr is set by lrfind' "$T/u1.err"
ok $? "--lr is refused (lrfind sets it)"
"$AMPDIAG" lrfind -o "$T/x.h5" --lr-min 1 --lr-max 0.1 >/dev/null 2>"$T/u2.err"
[ $? -eq 2 ] && grep -q -- '--lr-min 1 must be below --lr-max 0.1' "$T/u2.err"
ok $? "--lr-min above --lr-max is refused"
echo "1..$n"
exit $failed
