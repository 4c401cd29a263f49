#!/bin/sh
# t_tune.sh - `ampdiag tune`, the closed loop: advice that is followed and the resulting run
# checked. A learning rate so high that the ReLUs die (the loss stays at its first value) must
# be lowered, never raised, and the next round must train; a learning rate 1000x too high must
# be brought down in one round (not 10x at a time) and the result verified; a healthy run keeps
# its lr and its recommended precision is verified by a run of it. A learning rate far too low
# is raised by what the update/weight ratio says; an evaluation that alone overflows FP16 leads
# to bf16. The remedies besides lr and precision (FP32 optimizer state, FP32 islands, dynamic
# loss scaling) are applied: the runs' command lines hold them. Exit status 0 = verified.
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

# following the advice must give a healthy run: eval loss within the noise band of a healthy
# baseline (the default AdamW FP32 run, as many steps)
TR="--trace-every 5 --hist-every 25"
"$AMPDIAG" run --steps 300 $TR --progress none -o "$T/healthy.h5" >/dev/null 2>&1
healthy_band() { # name: the verified run's eval loss is within the band of the healthy run's
    "$AMPDIAG" compare "$T/healthy.h5" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$T/$1/tune.json")" \
        --format json >"$T/$1-healthy.json" 2>/dev/null &&
        j "$T/$1-healthy.json" 'd["runs"][1]["gap"]["within_band"] and d["runs"][1]["status"] == "complete" and d["runs"][1]["stability"]["forward_nonfinite_step"] is None and d["runs"][1]["eval"]["loss"] is not None'
}

# a baseline that never learns: SGD without momentum at lr 1e-6; raised x1000 (the cap), then by
# what the ratio says, and the third round trains as well as a healthy run
tune low --scenario lr-too-low --precisions fp32,bf16 $TR
ok "$(cat "$T/low.rc")" "lr too low: tune exits 0 (verified)"
j "$T/low/tune.json" 'd["rounds"][0]["lr_advice"] == "raise" and abs(d["rounds"][1]["lr"] - 1e-3) < 1e-12 and d["rounds"][1]["lr_advice"] == "raise" and 0.02 < d["rounds"][2]["lr"] < 0.1 and d["rounds"][2]["lr_advice"] == "keep" and len(d["rounds"]) == 3'
ok $? "lr too low: 1e-6 -> 1e-3 (x1000) -> the ratio's lr (x1e-3/r), kept there"
healthy_band low
ok $? "lr too low: the advice followed trains: complete, finite, eval loss within the band of a healthy run"

# NaN in the evaluation only: fp16 is ruled out by that cause, bf16 (predicted) is run and
# verified, its evaluation finite
tune evnan --scenario fp16-eval-overflow --precisions fp32,fp16 $TR
ok "$(cat "$T/evnan.rc")" "eval overflow: tune exits 0 (verified)"
j "$T/evnan/tune.json" '"first cause of fp16" in d["rounds"][0]["verdict"] and d["rounds"][0]["precision"] == "bf16" and d["rounds"][-1]["dir"].endswith("/verify") and d["verified"] and d["eval_loss"] is not None'
ok $? "eval overflow: round 1 names the cause and advises bf16; the bf16 run is verified"
healthy_band evnan
ok $? "eval overflow: the advice followed: complete, finite, eval loss within the band of a healthy run"

# remedies besides precision and lr, applied and re-run: FP32 optimizer state for every run ...
tune eps --scenario fp16-adam-eps --steps 100 --precisions fp32,fp16 $TR
ok "$(cat "$T/eps.rc")" "adam eps: tune exits 0 (verified)"
j "$T/eps/tune.json" 'd["rounds"][0]["precision"] == "undecided" and d["rounds"][0]["remedies"][0]["option"] == "--optim-state" and d["rounds"][0]["remedies"][0]["scope"] == "every-run" and d["rounds"][0]["applied"] == [] and all("--optim-state fp32" in r["command_line"] for k in (1, 2) for r in d["rounds"][k]["runs"])'
ok $? "adam eps: round 1 names --optim-state fp32 for every run; every later run's command line holds it"
j "$T/eps/tune.json" 'd["verified"] and [(m["option"], m["value"], m["runs"]) for m in d["remedies_applied"]] == [("--optim-state", "fp32", "every")] and "with --optim-state fp32" in d["verification"]'
ok $? "adam eps: verified with the remedy, which tune.json names"

# ... FP32 islands for the recommended fp16 run (a model whose fc1 overflows and ln1 brings back
# into range; no BF16 on the target) ...
printf 'input 32\nlinear fc1 256\nlayernorm ln1\nrelu\nlinear fc2 256\nrelu\nlinear fc3 10\nloss softmax_ce\n' >"$T/ln.txt"
tune isl --target sm75 --scenario fp16-forward-overflow --model "$T/ln.txt" --steps 100 --precisions fp32,fp16 $TR
ok "$(cat "$T/isl.rc")" "forward overflow, islands: tune exits 0 (verified)"
j "$T/isl/tune.json" 'd["rounds"][-1]["dir"].endswith("/verify") and any(r["precision"] == "fp16" and "--fp32-layers fc1,ln1" in r["command_line"] for r in d["rounds"][-1]["runs"]) and not any(r["precision"] == "fp32" and "--fp32-layers" in r["command_line"] for r in d["rounds"][-1]["runs"]) and d["verified"]'
ok $? "forward overflow, islands: the fp16 run (only) got --fp32-layers fc1,ln1, and it verified"
grep -q '^  applied  --fp32-layers fc1,ln1 (fp16 run)' "$T/isl.out" && grep -q '| --fp32-layers fc1,ln1 (fp16 run) |' "$T/isl/tune.md"
ok $? "forward overflow, islands: the text and Markdown reports say which remedy was applied"

# ... and dynamic loss scaling with the suggested initial scale for an fp16 run that had none
tune scale --target sm75 --scenario fp16-grad-underflow --steps 150 --precisions fp32,fp16 $TR
ok "$(cat "$T/scale.rc")" "grad underflow: tune exits 0 (verified)"
j "$T/scale/tune.json" 'any(r["precision"] == "fp16" and re.search(r"--scenario fp16-grad-underflow .*--loss-scale dynamic --scale-init [0-9]+ ", r["command_line"]) for r in d["rounds"][-1]["runs"]) and d["verified"] and [m["option"] for m in d["remedies_applied"]] == ["--loss-scale", "--scale-init"]'
ok $? "grad underflow: the fp16 run got --loss-scale dynamic --scale-init S after the scenario (which sets none), and it verified"
"$AMPDIAG" info --format json "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$T/scale/tune.json")" >"$T/scale-info.json" 2>/dev/null
j "$T/scale-info.json" 'd["loss_scale"]["scaled"] and d["loss_scale"]["initial"] >= 2**16 and d["loss_scale"]["initial"] == 2**round(__import__("math").log2(d["loss_scale"]["initial"]))'
ok $? "grad underflow: the verified fp16 run scaled its loss, from the suggested power of two"

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
