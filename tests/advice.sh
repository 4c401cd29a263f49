#!/bin/sh
# advice.sh - `make check-advice`: the longer check run before resolving recommendation work.
# For each case, `ampdiag tune` follows compare's advice and re-runs it; every case must end
# verified (healthy against FP32 at the advised lr, eval loss not worse than the first baseline
# beyond the noise band). Prints TAP; minutes on two cores.
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
case_ mlp-healthy --steps 500
case_ transformer-healthy --model transformer --steps 300
case_ mlp-dead-units --optimizer adamw --lr 0.3 --steps 500 --precisions fp32,bf16
case_ lr-diverge --scenario lr-diverge --steps 300 --precisions fp32,fp16
case_ tail-underflow --scenario fp16-tail-underflow --precisions fp32,fp16
case_ sgd-healthy --optimizer sgd --lr 0.05 --steps 500
echo "1..$n"
exit $failed
