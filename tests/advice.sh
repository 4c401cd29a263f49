#!/bin/sh
# advice.sh - `make check-advice`: the longer check run before resolving recommendation work.
# For each case, `ampdiag tune` follows compare's advice and re-runs it; every case must end
# verified (healthy against FP32 at the advised lr, eval loss not worse than the first baseline
# beyond the noise band); the scenarios that lose their way (an lr far too low, an evaluation
# that alone overflows FP16) must also end within the noise band of a healthy run. Prints TAP;
# minutes on two cores.
AMPDIAG=${AMPDIAG:-./ampdiag}
T=$(mktemp -d "${TMPDIR:-/tmp}/advice.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
n=0
failed=0
case_() { # name args...
    name=$1
    shift
    n=$((n + 1))
    if "$AMPDIAG" tune -o "$T/$name" -j 2 "$@" >"$T/$name.out" 2>"$T/$name.err"; then
        echo "ok $n - $name: $(tail -1 "$T/$name.out")"
    else
        echo "not ok $n - $name: $(tail -1 "$T/$name.out")"
        sed 's/^/# /' "$T/$name.out"
        failed=1
    fi
}
# the verified run of a case against a healthy FP32 run (default AdamW, 300 steps): complete,
# finite, eval loss within the noise band (as ampdiag compare measures it)
healthy_() { # name
    n=$((n + 1))
    run=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"] or "")' "$T/$1/tune.json" 2>/dev/null)
    if [ -n "$run" ] && "$AMPDIAG" compare "$T/healthy.h5" "$run" --format json >"$T/$1-healthy.json" 2>/dev/null &&
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][1]; sys.exit(0 if r["gap"]["within_band"] and r["status"] == "complete" and r["eval"]["loss"] is not None and r["stability"]["forward_nonfinite_step"] is None else 1)' "$T/$1-healthy.json"; then
        echo "ok $n - $1: within the noise band of a healthy run"
    else
        echo "not ok $n - $1: not within the noise band of a healthy run ($run)"
        failed=1
    fi
}
"$AMPDIAG" run --steps 300 --progress none -o "$T/healthy.h5" >/dev/null 2>&1
printf 'input 32\nlinear fc1 256\nlayernorm ln1\nrelu\nlinear fc2 256\nrelu\nlinear fc3 10\nloss softmax_ce\n' >"$T/ln.txt"
case_ mlp-healthy --steps 500
case_ transformer-healthy --model transformer --steps 300
case_ mlp-dead-units --optimizer adamw --lr 0.3 --steps 500 --precisions fp32,bf16
case_ lr-diverge --scenario lr-diverge --steps 300 --precisions fp32,fp16
case_ tail-underflow --scenario fp16-tail-underflow --precisions fp32,fp16
case_ sgd-healthy --optimizer sgd --lr 0.05 --steps 500
case_ lr-too-low --scenario lr-too-low --precisions fp32,bf16
healthy_ lr-too-low
case_ eval-overflow --scenario fp16-eval-overflow
healthy_ eval-overflow
case_ adam-eps --scenario fp16-adam-eps --precisions fp32,fp16
case_ fwd-overflow --scenario fp16-forward-overflow
case_ fwd-overflow-islands --target sm75 --scenario fp16-forward-overflow --model "$T/ln.txt"
case_ grad-underflow-sm75 --target sm75 --scenario fp16-grad-underflow
echo "1..$n"
exit $failed
