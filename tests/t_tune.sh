#!/bin/sh
# t_tune.sh - `ampdiag tune`, the advice settled by measurement. A learning rate so high that the
# ReLUs die is never raised: the LR range test (from the same initial weights) and FP32 runs around
# its suggestion measure one that learns, the best FP32 run is the yardstick and a 16-bit run
# within its paired band is verified; a divergent lr and one far too low are found the same way;
# a healthy run's lr is measured on both sides and kept when it is the best. The options the advice
# names for every run are tested and kept where they measure better (FP32 optimizer state,
# standardised inputs); those for the recommended run (dynamic loss scaling) are run with it. No
# configuration is run twice; tune.json lists every run and why; nothing that learns: exit 1.
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
    python3 -c 'import json,re,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"
}
tune() { # name args...
    name=$1
    shift
    "$AMPDIAG" tune -o "$T/$name" -j 2 "$@" >"$T/$name.out" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}
# every run tune made has a reason, and no configuration (precision, lr, options) was run twice
every_run_once() {
    j "$T/$1/tune.json" 'all(r["why"] and r["why_id"] for r in d["runs"]) and len(set((r["precision"], round(r["lr"], 12), r["options"], r["range_test"]) for r in d["runs"])) == len(d["runs"])'
}

# dead units: AdamW lr 0.3 kills the ReLUs; the history says the lr is too high, the range test
# and the runs around it find one that learns
tune dead --optimizer adamw --lr 0.3 --steps 300 --precisions fp32,bf16
ok "$(cat "$T/dead.rc")" "dead units: tune exits 0 (verified)"
j "$T/dead/tune.json" 'd["format"] == "ampdiag-tune" and d["format_version"] == 2 and d["rounds"][0]["lr_advice"] == "lower" and "too high" in d["rounds"][0]["lr_text"] and d["rounds"][0]["precision"] == "undecided"'
ok $? "dead units: round 1 is undecided (FP32 does not learn) and lowers the lr (too high), never raises it"
j "$T/dead/tune.json" 'any(r["range_test"] and r["why_id"] == "lrfind" for r in d["runs"]) and any(n["id"] == "lrfind_result" for n in d["notes"])'
ok $? "dead units: the LR range test was run (FP32 does not learn) and its suggestion noted"
j "$T/dead/tune.json" 'd["verified"] and d["lr"] < 0.3 and d["eval_loss"] < 0.8 * d["first_fp32_eval_loss"] and d["yardstick"]["lr"] < 0.3'
ok $? "dead units: a lower lr measured: verified, eval loss well below the first run's"
every_run_once dead
ok $? "dead units: every run has its reason, none was run twice"
grep -q '^Verified: ' "$T/dead.out"
ok $? "dead units: the text report says what was verified"

# divergence far above the stable lr: SGD lr 20
tune div --scenario lr-diverge --steps 200 --precisions fp32,fp16
ok "$(cat "$T/div.rc")" "lr 1000x too high: tune exits 0 (verified)"
j "$T/div/tune.json" 'd["rounds"][0]["lr"] == 20 and [r["status"] for r in d["runs"] if r["round"] == "round-1" and r["precision"] == "fp32"] == ["diverged"] and d["verified"] and d["lr"] <= 0.5 and d["eval_loss"] < 0.5 * d["runs"][0]["initial_eval_loss"]'
ok $? "lr 1000x too high: a stable lr found by measurement, its run verified"
every_run_once div
ok $? "lr 1000x too high: every run has its reason, none was run twice"

# healthy: the lr measured on both sides; the best kept; a 16-bit precision verified
tune ok --steps 300 --precisions fp32,fp16,bf16
ok "$(cat "$T/ok.rc")" "healthy: tune exits 0 (verified)"
j "$T/ok/tune.json" 'd["rounds"][0]["lr_advice"] == "keep" and d["verified"] and d["precision"] in ("fp16", "bf16") and not any(r["range_test"] for r in d["runs"])'
ok $? "healthy: lr kept by the advice, no range test, a 16-bit precision verified"
j "$T/ok/tune.json" 'sorted(r["lr"] for r in d["runs"] if r["precision"] == "fp32")[0] < 1e-3 < sorted(r["lr"] for r in d["runs"] if r["precision"] == "fp32")[-1] and d["yardstick"]["eval_loss"] == min(r["eval_loss"] for r in d["runs"] if r["precision"] == "fp32" and r["learns"] and r["healthy"])'
ok $? "healthy: FP32 measured below and above the lr given; the yardstick is the best FP32 run"
test -s "$T/ok/tune.md" && grep -q '^\*\*Verified\*\*' "$T/ok/tune.md"
ok $? "healthy: the Markdown report says it was verified"

# following the advice must give a healthy run: eval loss within the noise band of a healthy
# baseline (the default AdamW FP32 run, as many steps) or better
TR="--trace-every 5 --hist-every 25"
"$AMPDIAG" run --steps 300 $TR --progress none -o "$T/healthy.h5" >/dev/null 2>&1
healthy_band() { # name: the verified run is complete, finite, not worse than the healthy run
    "$AMPDIAG" compare "$T/healthy.h5" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$T/$1/tune.json")" \
        --format json >"$T/$1-healthy.json" 2>/dev/null &&
        j "$T/$1-healthy.json" '(d["runs"][1]["gap"]["within_band"] or d["runs"][1]["gap"]["relative"] < 0) and d["runs"][1]["status"] == "complete" and d["runs"][1]["stability"]["forward_nonfinite_step"] is None and d["runs"][1]["eval"]["loss"] is not None'
}

# a baseline that never learns: SGD without momentum at lr 1e-6; the range test and the runs
# around its suggestion find an lr that learns as well as a healthy run
tune low --scenario lr-too-low --precisions fp32,bf16 $TR
ok "$(cat "$T/low.rc")" "lr too low: tune exits 0 (verified)"
j "$T/low/tune.json" 'd["rounds"][0]["lr_advice"] == "raise" and any(r["range_test"] for r in d["runs"]) and d["lr"] > 1e-3'
ok $? "lr too low: round 1 says raise; the range test and the search settle an lr above 1e-3"
healthy_band low
ok $? "lr too low: the advice followed trains: complete, finite, eval loss within the band of a healthy run"

# nothing learns around the range test's suggestion (10 steps: too few for the bracket's lrs to
# get beyond the noise): the search goes toward the run whose final eval loss is the lowest, a
# decade at a time, until one learns
tune toward --optimizer sgd --momentum 0 --lr 1e-6 --steps 10 --eval-every 10 --precisions fp32,bf16 $TR
ok "$(cat "$T/toward.rc")" "nothing learns in the bracket: tune exits 0 (verified)"
j "$T/toward/tune.json" 'not any(r["learns"] for r in d["runs"] if r["why_id"] == "lr_bracket") and [abs(r["lr"] / min((b for b in d["runs"] if b["why_id"] == "lr_bracket"), key=lambda b: b["eval_loss"])["lr"] - 10) < 1e-6 and r["learns"] for r in d["runs"] if r["why_id"] == "lr_toward"] == [True] and d["verified"]'
ok $? "nothing learns in the bracket: the next lr is 10x the bracket's run with the lowest eval loss, and it learns"

# standardised inputs rejected at the lr given (AdamW lr 16.2 diverges with them too) are tried
# again at the lr the search measured best without them, kept there, and the lr measured again
tune again --optimizer adamw --lr 16.2 --data synthetic:blobs-raw --steps 300 --precisions fp32,bf16 $TR
ok "$(cat "$T/again.rc")" "a remedy rejected at a bad lr: tune exits 0 (verified)"
j "$T/again/tune.json" '[(r["options"], abs(r["lr"] - min((b for b in d["runs"] if b["precision"] == "fp32" and b["options"] == "" and b["learns"] and b["why_id"] != "remedy_again"), key=lambda b: b["eval_loss"])["lr"]) < 1e-9 * r["lr"]) for r in d["runs"] if r["why_id"] == "remedy_again"] == [("--standardize on", True)] and d["verified"] and "--standardize on" in d["verification"] and d["eval_loss"] < 0.1 * min(r["eval_loss"] for r in d["runs"] if r["options"] == "" and r["learns"])'
ok $? "a remedy rejected at a bad lr: tried again at the best lr measured without it, kept, verified with it (eval loss 10x lower)"

# both neighbours of the best measured, one ending within the best's noise band (AdamW 3.2e-4 and
# 1e-3 on blobs: 0.2956 and 0.2960): the search goes a step past it (a plateau) instead of
# stopping, where no run lies within a step past it yet
tune plateau --optimizer adamw --lr 3.16228e-4 --data synthetic:blobs --steps 200 --precisions fp32,bf16 $TR
ok "$(cat "$T/plateau.rc")" "a plateau beside the best: tune exits 0 (verified)"
j "$T/plateau/tune.json" '(lambda F, P: d["verified"] and len(P) == 1 and abs(P[0]["lr"] - 10 ** -2.5) < 1e-8 and any(abs(b["lr"] * 10 ** 0.5 - P[0]["lr"]) < 1e-5 * P[0]["lr"] and not any(b["lr"] < c["lr"] < P[0]["lr"] for c in F) for b in F))([b for b in d["runs"] if b["precision"] == "fp32" and b["why_id"] != "lr_plateau"], [r for r in d["runs"] if r["why_id"] == "lr_plateau"])'
ok $? "a plateau beside the best: an lr a step past the neighbour within the band (1e-3 -> 3.2e-3), none measured between"

# the given lr diverges three decades above the range test's suggestion (SGD with momentum at 1.8
# on the transformer): beside the best, the search goes half-way in log toward the run on that
# side, at most a decade a round (0.00137 -> 0.0137 -> 0.137, then sqrt(0.137 x 1.8) = 0.496),
# not one sqrt(10) a round, which ran out of rounds a decade short of the best (corpus s8-0131)
tune far --model transformer --optimizer sgd --momentum 0.9 --lr 1.8 --steps 100 --precisions fp32,bf16 $TR
ok "$(cat "$T/far.rc")" "a given lr far above the range test's: tune exits 0 (verified)"
j "$T/far/tune.json" '(lambda F: d["verified"] and d["lr"] > 0.01 and any(abs(b["lr"] * 10 - c["lr"]) < 1e-5 * c["lr"] and c["why_id"] == "lr_neighbour" for b in F for c in F) and any(abs((b["lr"] * 1.8) ** 0.5 - c["lr"]) < 1e-5 * c["lr"] and 10 ** 0.5 < 1.8 / b["lr"] < 100 and c["why_id"] == "lr_neighbour" for b in F for c in F))([r for r in d["runs"] if r["precision"] == "fp32" and r["options"] == ""])'
ok $? "a given lr far above: a decade a round toward it, then half-way in log (0.137 -> 0.496), verified above 0.01"
every_run_once far
ok $? "a given lr far above: no configuration run twice"

# a sharp valley: SGD with momentum on the transformer, the best lr (0.1) beside a neighbour that
# diverges (0.316): the search measures half-way between them (10^(1/4) up) before it settles
tune cliff --model transformer --optimizer sgd --momentum 0.9 --lr 0.1 --steps 100 --precisions fp32,bf16 $TR
ok "$(cat "$T/cliff.rc")" "a cliff beside the best: tune exits 0 (verified)"
j "$T/cliff/tune.json" 'any(r["why_id"] == "lr_cliff" and any(b["learns"] and abs(b["lr"] - r["lr"] / 10 ** 0.25) < 1e-6 * b["lr"] for b in d["runs"] if b["precision"] == "fp32" and b["options"] == r["options"]) and any(not c["learns"] and abs(c["lr"] - r["lr"] * 10 ** 0.25) < 1e-6 * c["lr"] for c in d["runs"] if c["precision"] == "fp32" and c["options"] == r["options"]) for r in d["runs"]) and d["verified"]'
ok $? "a cliff beside the best: FP32 half-way (in log) between the best that learns and a neighbour that does not"
every_run_once cliff
ok $? "a cliff beside the best: no configuration run twice"

# an lr 300x too low that learns a little (AdamW on the transformer, 60 steps): the best is the
# top of what was measured, so the search goes a decade at a time (not sqrt(10)) and reaches the
# lr that learns best within the rounds
tune edge --model transformer --optimizer adamw --lr 1e-5 --steps 60 --precisions fp32,bf16 $TR
ok "$(cat "$T/edge.rc")" "an lr far too low at the edge of the search: tune exits 0 (verified)"
j "$T/edge/tune.json" 'any(r["why_id"] == "lr_neighbour" and any(abs(r["lr"] - 10 * b["lr"]) < 1e-6 * r["lr"] for b in d["runs"] if b["precision"] == "fp32" and b["learns"]) for r in d["runs"]) and d["verified"] and d["lr"] >= 100 * 1e-5'
ok $? "an lr far too low: a decade past the best at the edge; verified at 100x the lr given or more"

# one step: nothing learns at any lr; once the run closest to learning is bracketed within a step
# (sqrt(10)) on both sides, the search halves those gaps (10^(1/4)) before it says nothing learns
tune onestep --optimizer sgd --data synthetic:blobs --lr 1e-4 --steps 1 --eval-every 1 --precisions fp32,bf16
ok "$([ "$(cat "$T/onestep.rc")" -eq 1 ] && echo 0 || echo 1)" "one step, nothing learns: tune exits 1"
j "$T/onestep/tune.json" 'not d["verified"] and any(r["why_id"] == "lr_toward" and any(b is not r and abs(max(r["lr"], b["lr"]) / min(r["lr"], b["lr"]) - 10 ** 0.25) < 1e-4 for b in d["runs"] if b["precision"] == "fp32" and not b["range_test"]) for r in d["runs"])'
ok $? "one step, nothing learns: the gaps around the run closest to learning halved (a run 10^(1/4) from another)"

# an FP16 optimizer state that goes NaN at every lr: FP32 state rejected at the lr given (75,
# diverges either way); once no run ends finite, tried again at the lowest lr tried, kept there
# (it ends finite), and the lr measured again from it in rounds of their own
tune nanstate --optimizer adamw --lr 75 --optim-state fp16 --data synthetic:blobs --steps 300 --precisions fp32,bf16 $TR
ok "$(cat "$T/nanstate.rc")" "NaN at every lr with an FP16 optimizer state: tune exits 0 (verified)"
j "$T/nanstate/tune.json" 'any(r["why_id"] == "remedy_again" and r["options"] == "--optim-state fp32" and abs(r["lr"] - min(b["lr"] for b in d["runs"] if b["precision"] == "fp32" and b["options"] == "" and not b["range_test"])) < 1e-9 * r["lr"] for r in d["runs"]) and all(b["eval_loss"] is None or not b["learns"] and b["eval_loss"] > 1e3 for b in d["runs"] if b["precision"] == "fp32" and b["options"] == "" and not b["range_test"]) and d["verified"] and any(m["option"] == "--optim-state" and m["value"] == "fp32" for m in d["remedies_applied"])'
ok $? "NaN at every lr: FP32 state tried again at the lowest lr tried (no run ended finite), kept, verified with it"
j "$T/nanstate/tune.json" 'len(set(r["name"] for r in d["rounds"])) == len(d["rounds"]) == len(set(r["dir"] for r in d["rounds"])) and len(set(r["path"] for r in d["runs"])) == len(d["runs"])'
ok $? "the lr measured again: every round a directory of its own, no trace written twice"
every_run_once nanstate
ok $? "NaN at every lr: no configuration run twice"

# NaN in the evaluation only: fp16 is ruled out by that cause, bf16 is verified
tune evnan --scenario fp16-eval-overflow --precisions fp32,fp16,bf16 $TR
ok "$(cat "$T/evnan.rc")" "eval overflow: tune exits 0 (verified)"
j "$T/evnan/tune.json" '"first cause of fp16" in d["rounds"][0]["verdict"] and d["precision"] == "bf16" and d["verified"] and d["eval_loss"] is not None'
ok $? "eval overflow: round 1 names the cause; bf16 is verified"
healthy_band evnan
ok $? "eval overflow: the advice followed: complete, finite, eval loss within the band of a healthy run"

# an option for every run, tested and kept: FP32 optimizer state ...
tune eps --scenario fp16-adam-eps --steps 100 --precisions fp32,fp16 $TR
ok "$(cat "$T/eps.rc")" "adam eps: tune exits 0 (verified)"
j "$T/eps/tune.json" 'd["rounds"][0]["precision"] == "undecided" and d["rounds"][0]["remedies"][0]["option"] == "--optim-state" and d["rounds"][0]["remedies"][0]["scope"] == "every-run" and all("--optim-state fp32" in r["command_line"] for r in d["runs"][2:])'
ok $? "adam eps: round 1 names --optim-state fp32 for every run; every later run's command line holds it"
j "$T/eps/tune.json" 'd["verified"] and [(m["option"], m["value"], m["runs"]) for m in d["remedies_applied"]] == [("--optim-state", "fp32", "every")] and "with --optim-state fp32" in d["verification"] and any(n["id"] == "adopted" for n in d["notes"])'
ok $? "adam eps: the remedy measured better and was kept; verified with it, which tune.json names"

# ... kept where neither run learns but it ends finite where the run without it diverges: AdamW at
# lr 0.3 with FP16 state goes NaN, with FP32 state it stalls (dead units) but stays finite; the
# search then goes on with the FP32 state
tune nanfix --optimizer adamw --lr 0.3 --optim-state fp16 --steps 300 --precisions fp32,bf16 $TR
ok "$(cat "$T/nanfix.rc")" "a remedy that only removes the NaN: tune exits 0 (verified)"
j "$T/nanfix/tune.json" '[(r["learns"], r["status"], r["eval_loss"] is not None) for r in d["runs"] if r["why_id"] == "remedy"] == [(False, "complete", True)] and [r["status"] for r in d["runs"] if r["why_id"] == "given" and r["precision"] == "fp32"] == ["diverged"] and any(n["id"] == "adopted" and "--optim-state fp32" in n["text"] for n in d["notes"]) and all("--optim-state fp32" in r["options"] for r in d["runs"] if r["why_id"].startswith("lr_")) and d["verified"]'
ok $? "a remedy that only removes the NaN: kept (finite beats diverged), every lr of the search runs with it"

# ... standardised inputs (inputs x 1e5 overflow FP16 in fc1)
tune std --scenario fp16-forward-overflow --steps 150 --precisions fp32,fp16 $TR
ok "$(cat "$T/std.rc")" "forward overflow (inputs x 1e5): tune exits 0 (verified)"
j "$T/std/tune.json" '"--standardize" in [m["option"] for m in d["rounds"][0]["remedies"]] and any(n["id"] == "adopted" and "--standardize on" in n["text"] for n in d["notes"]) and "--standardize on" in d["verification"] and d["verified"]'
ok $? "forward overflow: standardising the inputs is the first remedy, measured better, kept, and verified with it"

# ... and dynamic loss scaling with the suggested initial scale for the recommended fp16 run
tune scale --target sm75 --scenario healthy --loss-scale none --steps 200 --precisions fp32,fp16 $TR
ok "$(cat "$T/scale.rc")" "fp16 without loss scaling on sm75: tune exits 0 (verified)"
j "$T/scale/tune.json" 'any(r["why_id"] == "recommended" and r["precision"] == "fp16" and re.search(r"--loss-scale none .*--loss-scale dynamic --scale-init [0-9]+", r["command_line"]) for r in d["runs"]) and d["verified"] and d["precision"] == "fp16"'
ok $? "fp16 without loss scaling: the recommended fp16 run got --loss-scale dynamic --scale-init S after the options passed on, and was verified"

# a validation set of one class judges nothing: tune says so and exits 1 before measuring
"${AMPDIAG_PYTHON:-python3}" - "$T/oneclass.h5" <<'EOF' 2>/dev/null
import sys
try:
    import h5py, numpy as np
except ImportError:
    sys.exit(1)
r = np.random.default_rng(0)
y = np.sort(r.integers(0, 3, 200))
x = r.normal(size=(200, 8)).astype(np.float32) + y[:, None]
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = x[:180]; f["y"] = y[:180]; f["x_val"] = x[180:]; f["y_val"] = np.full(20, 2)
EOF
if [ -s "$T/oneclass.h5" ]; then
    tune oneclass --data "$T/oneclass.h5" --steps 50 --precisions fp32,bf16
    [ "$(cat "$T/oneclass.rc")" -eq 1 ] && j "$T/oneclass/tune.json" 'not d["verified"] and d["verification_id"] == "cannot_judge" and len(d["runs"]) == 2'
    ok $? "one-class validation set: exit 1, no run can be verified, nothing run past round 1"
else
    n=$((n + 1)); echo "ok $n # SKIP h5py and numpy are needed to write the data file"
fi

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
"$AMPDIAG" tune -o "$T/u4" --target sm60 >/dev/null 2>"$T/u4.err"
[ $? -eq 2 ] && grep -q -- "--target 'sm60'" "$T/u4.err"
ok $? "--target sm60 is refused, named"

echo "1..$n"
exit $failed
