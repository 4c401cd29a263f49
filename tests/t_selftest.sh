#!/bin/sh
# t_selftest.sh - `ampdiag selftest` from the command line: its CPU parts, its device parts
# (SKIP where no GPU backend can run here: built without CUDA, or no GPU or driver), exit codes,
# and --device checked up front by run, sweep, tune and lrfind.
AMPDIAG=${AMPDIAG:-./ampdiag}
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
skip() { n=$((n+1)); echo "ok $n # SKIP $1"; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

$AMPDIAG selftest --help | grep -q 'usage: ampdiag selftest' ; t $? "selftest --help prints its usage"
$AMPDIAG --help | grep -q '^  selftest' ; t $? "ampdiag --help lists selftest"
$AMPDIAG selftest --steps 0 2>/dev/null; [ $? -eq 2 ] ; t $? "selftest --steps 0 exits 2"
$AMPDIAG selftest extra 2>/dev/null; [ $? -eq 2 ] ; t $? "selftest with an argument exits 2"
err=$($AMPDIAG selftest --device tpu 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$err" | grep -q -- '--device tpu: unknown device' ; t $? "selftest --device tpu exits 2: unknown device"
: > "$tmp/file"
$AMPDIAG selftest -s 1 -o "$tmp/file" >/dev/null 2>&1; [ $? -eq 2 ] ; t $? "selftest -o FILE (not a folder) exits 2"

# the CPU parts, and the device parts skipped or run
out=$($AMPDIAG selftest -s 2 -o "$tmp/runs"); rc=$?
[ $rc -eq 0 ] ; t $? "plain selftest exits 0"
echo "$out" | grep -q '^ok   cpu rounding: bf16 ftz: 2^24 float32 patterns.*: 0 differ$' ; t $? "selftest checks the CPU's rounding"
[ "$(echo "$out" | grep -c '^ok   run: .* on cpu: 2 steps')" -eq 6 ] ; t $? "selftest runs the 6 cases on the CPU"
echo "$out" | grep -q '^ok   repeat: mlp fp16 on ' ; t $? "selftest repeats a run bit for bit"
[ -f "$tmp/runs/cpu-transformer-bf16.h5" ] ; t $? "-o keeps the runs' traces"
if echo "$out" | grep -q '^skip device parts: not run: '; then
    t 0 "without a usable device the output says the device parts were skipped"
else
    echo "$out" | grep -q '^ok   run: mlp fp32 on cuda against cpu' ; t $? "with a device its runs are compared"
fi

# the comparison itself, with the CPU backend standing in for the device
out=$($AMPDIAG selftest -s 2 --device cpu); rc=$?
[ $rc -eq 0 ] && [ "$(echo "$out" | grep -c '^ok   run: .* on cpu against cpu: 2 steps .*largest loss difference 0 ')" -eq 6 ]
t $? "selftest --device cpu compares 6 runs, each the same as the CPU's"
echo "$out" | grep -q '^ok   statistics: cpu against cpu: ' ; t $? "selftest --device cpu compares the statistics"

# a GPU: what runs here depends on the machine
err=$($AMPDIAG selftest -s 2 --device cuda 2>&1 >"$tmp/cuda.out"); rc=$?
if [ $rc -eq 2 ] && echo "$err" | grep -Eq -- '--device cuda: the cuda backend (cannot run here|is not built)'; then
    skip "no GPU backend here: $err"
    for c in run sweep tune lrfind; do
        e=$($AMPDIAG $c --device cuda -o "$tmp/$c" --steps 2 2>&1 >/dev/null); r=$?
        [ $r -eq 2 ] && echo "$e" | grep -q "^ampdiag $c: --device cuda: the cuda backend" ; t $? "$c --device cuda exits 2 before any run, saying why"
    done
    [ ! -e "$tmp/sweep/run-fp32.h5" ] ; t $? "sweep started no run"
else
    [ $rc -eq 0 ] && grep -q '^ok   device check: cuda: ' "$tmp/cuda.out" ; t $? "selftest --device cuda passes on this GPU"
fi
e=$($AMPDIAG run --device cuda:x -o "$tmp/x.h5" 2>&1 >/dev/null); r=$?
[ $r -eq 2 ] && echo "$e" | grep -Eq -- "--device cuda:x: (expected cuda or cuda:N|the cuda backend is not built)" ; t $? "run --device cuda:x exits 2"
e=$($AMPDIAG run --device cpu:1 -o "$tmp/x.h5" 2>&1 >/dev/null); r=$?
[ $r -eq 2 ] && echo "$e" | grep -q -- "--device cpu:1: the cpu backend has no device number" ; t $? "run --device cpu:1 exits 2"

echo "1..$n"
exit $fail
