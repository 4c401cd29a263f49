#!/bin/sh
# advice.sh - `make check-advice`: the measure of the advice before recommendation work is
# resolved (docs/advice-corpus.md). Three sections, each printed as it runs:
#   1. the hand-written cases the rules were written from (14 checks): `ampdiag tune` follows
#      compare's advice and every case must end verified, the scenarios that lose their way
#      (an lr far too low, an evaluation that alone overflows FP16) within the noise band of a
#      healthy run;
#   2. the failures of issue 26 reproduced with data of their own (tests/corpus/cases.json),
#      each expected outcome a TAP line, TODO while tests/corpus/known-failures.txt lists it;
#   3. the corpus nobody tuned to: N generated configurations (tests/corpus/gen.py), each with
#      a ground truth from FP32 runs over an lr grid, compare's single-shot advice re-run and
#      `ampdiag tune`, judged by runs (tests/corpus/harness.py): the summary table of issue
#      26's goals, DIR/results.json with every configuration.
# Exit status 0 when section 1 passes, section 2 has no unexpected result and section 3 meets
# the four goals (false verifications 0, healthy configurations harmed 0, compare fixes >= 90 %
# of the broken it decides, tune >= 97 % of the broken an FP32 lr fixes).
#
#   tests/advice.sh [--seed S] [-n N] [-j J] [-o DIR] [--sections 1,2,3]
#     (make check-advice ADVICE_FLAGS='--seed 7 -n 300 -j 2 -o advice-results')
# -o DIR keeps the corpus's results and resumes from them (default: a temporary folder, removed
# at the end); N defaults to 200, S to 1, J to 2. About 10 s per configuration and job on two
# cores (docs/advice-corpus.md has the measured figures).
AMPDIAG=${AMPDIAG:-./ampdiag}
HERE=$(cd "$(dirname "$0")" && pwd)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
seed=1
count=200
jobs=2
out=""
sections=1,2,3
while [ $# -gt 0 ]; do
    case $1 in
    --seed) seed=$2; shift 2 ;;
    -n) count=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --sections) sections=$2; shift 2 ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "advice.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$seed$count$jobs" in *[!0-9]*) echo "advice.sh: --seed, -n and -j take integers" >&2; exit 2 ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/advice.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
failed=0
want() { case ",$sections," in *",$1,"*) return 0 ;; esac; return 1; }

# ------------------------------------------------------------------ 1. the hand-written cases
if want 1; then
echo "# section 1: the hand-written cases"
n=0
case_() { # name args...
    name=$1
    shift
    n=$((n + 1))
    if "$AMPDIAG" tune -o "$T/$name" -j "$jobs" "$@" >"$T/$name.out" 2>"$T/$name.err"; then
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
fi

# ------------------------------------------------------------------ 2 and 3: the harness
if ! command -v python3 >/dev/null 2>&1; then
    echo "# sections 2 and 3 need python3 (the harness is standard-library Python): not run"
    exit $failed
fi
if want 2; then
    echo "# section 2: the failures of issue 26 (tests/corpus/cases.json)"
    python3 "$HERE/corpus/harness.py" --ampdiag "$AMPDIAG" -o "$T/cases" -n 0 -j "$jobs" --tap \
        --cases "$HERE/corpus/cases.json" --known "$HERE/corpus/known-failures.txt" || failed=1
fi
if want 3; then
    echo "# section 3: the corpus (seed $seed, $count configurations, -j $jobs)"
    python3 "$HERE/corpus/harness.py" --ampdiag "$AMPDIAG" -o "${out:-$T/corpus}" --seed "$seed" -n "$count" \
        -j "$jobs" || failed=1
    [ -z "$out" ] || echo "# every configuration: $out/results.json; the table: $out/summary.txt"
fi
exit $failed
