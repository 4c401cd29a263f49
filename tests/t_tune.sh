#!/bin/sh
# t_tune.sh - `ampdiag tune`, the closed loop: advice that is followed and the resulting run
# checked. A learning rate so high that the ReLUs die (the loss stays at its first value) must
# be lowered, never raised, and the next round must train; a learning rate 1000x too high must
# be brought down in one round (not 10x at a time) and the result verified; a healthy run keeps
# its lr and its recommended precision is verified by a run of it. Exit status 0 = verified.
AMPDIAG=${AMPDIAG:-./ampdiag}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP python3 is needed to read the JSON"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_tune.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
j() { # FILE 'python expression over d'
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"
}
tune() { # name args...
    name=$1
    shift
    "$AMPDIAG" tune -o "$T/$name" -j 2 "$@" >"$T/$name.out" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}

# dead units: AdamW lr 0.3 kills the ReLUs
tune dead --optimizer adamw --lr 0.3 --steps 300 --precisions fp32,bf16
ok "$(cat "$T/dead.rc")" "dead units: tune exits 0 (verified)"
j "$T/dead/tune.json" 'd["format"] == "ampdiag-tune" and d["format_version"] == 1 and d["rounds"][0]["lr_advice"] == "lower" and "units died" in d["rounds"][0]["lr_text"] and abs(d["rounds"][1]["lr"] - 0.03) < 1e-9'
ok $? "dead units: round 1 lowers the lr x0.1 (units died), never raises it; round 2 runs at 0.03"
j "$T/dead/tune.json" 'd["verified"] and d["eval_loss"] < 0.8 * d["first_fp32_eval_loss"]'
ok $? "dead units: the advice followed trains: verified, eval loss well below the first run's"
grep -q '^Verified: bf16 at lr 0.03' "$T/dead.out"
ok $? "dead units: the text report says what was verified"

# divergence far above the stable lr: SGD lr 20
tune div --scenario lr-diverge --steps 200 --precisions fp32,fp16
ok "$(cat "$T/div.rc")" "lr 1000x too high: tune exits 0 (verified)"
j "$T/div/tune.json" 'd["rounds"][0]["lr"] == 20 and d["rounds"][0]["lr_advice"] == "lower" and d["rounds"][1]["lr"] <= 0.05 and d["verified"]'
ok $? "lr 1000x too high: lowered to <= 0.05 in one round (no 10x cap), and the result verified"
j "$T/div/tune.json" 'd["rounds"][-1]["dir"].endswith("/verify") and d["rounds"][-1]["precision"] == "bf16"'
ok $? "lr 1000x too high: bf16, predicted from the traces, was run beside fp32 to verify it"

# healthy: keep the lr, verify the precision in the same round
tune ok --steps 300 --precisions fp32,fp16,bf16
ok "$(cat "$T/ok.rc")" "healthy: tune exits 0 (verified)"
j "$T/ok/tune.json" 'len(d["rounds"]) == 1 and d["rounds"][0]["lr_advice"] == "keep" and d["verified"]'
ok $? "healthy: one round, lr kept, verified by its own run"
test -s "$T/ok/tune.md" && grep -q '^\*\*Verified\*\*' "$T/ok/tune.md"
ok $? "healthy: the Markdown report says it was verified"

# usage
"$AMPDIAG" tune --steps 10 >/dev/null 2>"$T/u1.err"
[ $? -eq 2 ] && grep -q 'no output directory' "$T/u1.err"
ok $? "no -o DIR: exit 2 with a message"
"$AMPDIAG" tune -o "$T/u2" --precision fp16 >/dev/null 2>"$T/u2.err"
[ $? -eq 2 ] && grep -q -- '--precisions' "$T/u2.err"
ok $? "--precision is refused and --precisions named"
"$AMPDIAG" tune -o "$T/u3" --rounds 0 >/dev/null 2>"$T/u3.err"
[ $? -eq 2 ] && grep -q -- '--rounds' "$T/u3.err"
ok $? "--rounds 0 is refused"

echo "1..$n"
exit $failed
