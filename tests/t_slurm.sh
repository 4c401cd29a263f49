#!/bin/sh
# t_slurm.sh - `ampdiag sweep --launcher slurm` and `ampdiag tune --launcher slurm` against a real
# Slurm (make check-slurm; tests/slurm_cluster.sh starts munged, slurmctld and slurmd on this
# machine from the installed packages, and stops them). Each round of configurations is one job
# array; the reports are the same as with --launcher local (text, Markdown, JSON, compared
# byte for byte but the step times (tests/untimed.sh), each run from a directory of its own with
# the same relative -o); -j N limits the array's tasks at once; a script written by --emit and
# submitted by hand gives the same traces; a run that fails is named with its log; tune on a
# PyTorch script (`tune -- CMD --launcher slurm`: SKIP without torch) gives the local reports and
# stops with exit 2 when its baseline fails on its node; SIGTERM cancels the array and the run
# marks its trace interrupted. SKIP only where the daemons cannot
# start (Slurm not installed, or not runnable here).
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
AMP=$(cd "$(dirname "$AMPDIAG")" && pwd)/$(basename "$AMPDIAG")
T=$(mktemp -d "${TMPDIR:-/tmp}/t_slurm.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
SC="$T/cluster"
mkdir -p "$SC" || exit 1
. "$srcdir/tests/slurm_cluster.sh"
trap 'slurm_stop; rm -rf "$T"' EXIT
if ! slurm_start; then
    echo "1..0 # SKIP Slurm's daemons cannot start here: $slurm_why"
    exit 0
fi
export AMPDIAG_SLURM_POLL=0.5 AMPDIAG_SLURM_SETTLE=20
n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
diag() { sed 's/^/# /' "$@"; }
# the queue is empty within s seconds
drained() {
    i=0
    while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $i -lt $(($1 * 2)) ]; do sleep 0.5; i=$((i + 1)); done
    [ -z "$(squeue -h -o %i 2>/dev/null)" ]
}
# same NAME...: sweep's reports in $T/local/out and $T/slurm/out are the same files, but the step
# times (this machine's at the time: tests/untimed.sh)
. "$srcdir/tests/untimed.sh"
same() {
    for f in "$@"; do
        untimed "$T/local/$f" >"$T/same-a" && untimed "$T/slurm/$f" >"$T/same-b" &&
            cmp -s "$T/same-a" "$T/same-b" || { echo "# $f differs:"; diff "$T/same-a" "$T/same-b" | head -5 | diag; return 1; }
    done
}

SWEEP="--precisions fp32,fp16,bf16 --lrs 0.001,0.003 --steps 60 --trace-every 10 --hist-every 30 --eval-every 30"
for L in local slurm; do
    mkdir -p "$T/$L"
    # shellcheck disable=SC2086
    (cd "$T/$L" && "$AMP" sweep $SWEEP -o out --launcher $L >sweep.txt 2>sweep.err)
    echo $? >"$T/$L/sweep.rc"
done
[ "$(cat "$T/local/sweep.rc")" = 0 ] && [ "$(cat "$T/slurm/sweep.rc")" = 0 ]
ok $? "sweep of 3 precisions x 2 lrs, --launcher local and --launcher slurm: exit 0"
diag "$T/slurm/sweep.err"
job=$(sed -n 's/.*submitted job array \([0-9]*\) (6 tasks.*/\1/p' "$T/slurm/sweep.err")
[ -n "$job" ] && grep -q '^#SBATCH --array=0-5$' "$T/slurm/out/ampdiag-sweep.sbatch" &&
    [ "$(ls "$T/slurm/out" | grep -c "^slurm-${job}_[0-5].out$")" -eq 6 ] &&
    [ "$(cat "$T"/slurm/out/run-*.exit | tr -d '\n')" = 000000 ]
ok $? "the slurm sweep was one job array of 6 tasks (job $job), each left exit status 0"
same sweep.txt out/report.md out/report.json
ok $? "the slurm sweep's reports (stdout, report.md, report.json) are the local sweep's"

TUNE="--precisions fp32,fp16 --lr 0.05 --rounds 2 --steps 60 --trace-every 10 --eval-every 30"
for L in local slurm; do
    # shellcheck disable=SC2086
    (cd "$T/$L" && "$AMP" tune $TUNE -o tune --launcher $L >tune.txt 2>tune.err)
    echo $? >"$T/$L/tune.rc"
done
[ "$(cat "$T/local/tune.rc")" = "$(cat "$T/slurm/tune.rc")" ] && [ "$(cat "$T/local/tune.rc")" -le 1 ] &&
    [ -s "$T/slurm/tune/round-1/ampdiag-sweep.sbatch" ]
ok $? "tune --launcher slurm exits as tune --launcher local ($(cat "$T/local/tune.rc") $(cat "$T/slurm/tune.rc")), its rounds job arrays"
[ "$(cat "$T/slurm/tune.rc")" -le 1 ] || diag "$T/slurm/tune.err"
rounds=$(cd "$T/slurm/tune" && ls -d round-* verify 2>/dev/null | tr '\n' ' ')
files="tune.txt tune/tune.md tune/tune.json"
for r in $rounds; do files="$files tune/$r/report.json"; done
# shellcheck disable=SC2086
same $files
ok $? "tune's reports (stdout, tune.md, tune.json, each round's report: $rounds) are the local tune's"

(cd "$T/slurm" && "$AMP" sweep --precisions fp32,fp16 -o j2 --steps 30 --trace-every 10 --launcher slurm -j 1 \
    >j2.txt 2>j2.err)
st=$?
[ $st -eq 0 ] && grep -q '^#SBATCH --array=0-1%1$' "$T/slurm/j2/ampdiag-sweep.sbatch" && [ -s "$T/slurm/j2.txt" ]
ok $? "-j 1: the array runs one task at a time (--array=0-1%1), and the sweep compares them (exit $st)"

# --emit, then submitted by hand
(cd "$T/slurm" && "$AMP" sweep --precisions fp32,fp16 -o em --steps 30 --trace-every 10 --launcher slurm \
    --emit emit >em.txt 2>em.err)
st=$?
[ $st -eq 0 ] && [ ! -e "$T/slurm/em/run-fp32.h5" ] && drained 5
ok $? "--emit writes the script and submits nothing (exit $st)"
(cd "$T/slurm" && sbatch -W emit/ampdiag-sweep.sbatch >/dev/null 2>sb.err)
st=$?
(cd "$T/slurm" && "$AMP" compare em/run-fp32.h5 em/run-fp16.h5 >em-compare.txt 2>/dev/null)
(cd "$T/local" && "$AMP" sweep --precisions fp32,fp16 -o em --steps 30 --trace-every 10 >em-local.txt 2>/dev/null)
untimed "$T/slurm/em-compare.txt" >"$T/em-a" && untimed "$T/local/em-local.txt" >"$T/em-b"
[ $st -eq 0 ] && cmp -s "$T/em-a" "$T/em-b"
ok $? "the emitted script submitted by hand (sbatch -W) runs the array; compare reads its traces as the local sweep (exit $st)"
[ $st -eq 0 ] || diag "$T/slurm/sb.err"

# a run its options refuse is refused before anything is submitted (sweep checks every run first)
(cd "$T/slurm" && "$AMP" sweep --precisions fp32,fp16 -o bad --model nosuchmodel --steps 5 --launcher slurm \
    >bad.txt 2>bad.err)
st=$?
[ $st -eq 2 ] && grep -q "nosuchmodel" "$T/slurm/bad.err" && grep -q "no run started" "$T/slurm/bad.err" &&
    [ ! -e "$T/slurm/bad/ampdiag-sweep.sbatch" ]
ok $? "a run that refuses its options: exit 2 before any job is submitted, the option named (exit $st)"
[ $st -eq 2 ] || diag "$T/slurm/bad.err"
# a run that fails in its array task (the program on the nodes exits 2): its log shown
printf '#!/bin/sh\necho "a task that fails on its node (test)" >&2\nexit 2\n' >"$T/fail-exe.sh"
chmod +x "$T/fail-exe.sh"
(cd "$T/slurm" && AMPDIAG_SLURM_EXE="$T/fail-exe.sh" "$AMP" sweep --precisions fp32,fp16 -o bad2 --steps 5 \
    --launcher slurm >bad2.txt 2>bad2.err)
st=$?
[ $st -eq 2 ] && grep -q "run-fp32 failed (exit 2)" "$T/slurm/bad2.err" &&
    grep -q "a task that fails on its node" "$T/slurm/bad2.err" && grep -q "2 of 2 runs failed: no comparison" "$T/slurm/bad2.err"
ok $? "a run that fails in its array task: exit 2, its log shown (exit $st)"
[ $st -eq 2 ] || diag "$T/slurm/bad2.err"

# tune on the user's own script (`tune -- CMD`): each round a job array of the command with its
# AMPDIAG_TUNE_* variables; the same reports as --launcher local; an FP32 baseline that fails in
# its array task stops tune with exit 2 (its exit status read back from the task). SKIP without
# a Python with torch (the script's).
. "$srcdir/tests/find_python.sh"
find_python 'import torch, numpy, h5py'
EX="$(cd "$srcdir" && pwd)/examples/pytorch/tune_example.py"
if [ -z "$py" ] || [ ! -f .libs/libampdiag.so ]; then
    for what in "tune -- CMD --launcher slurm: the same reports as local" "tune -- CMD --launcher slurm: the job script" \
        "tune -- CMD --launcher slurm: a baseline that fails: exit 2"; do
        n=$((n + 1))
        echo "ok $n # SKIP $what: no Python with torch, numpy and h5py, or no shared libampdiag"
    done
else
    AMPDIAG_LIB=$(pwd)/.libs/libampdiag.so
    export AMPDIAG_LIB
    for L in local slurm; do
        (cd "$T/$L" && "$AMP" tune -o ts --precisions fp32,bf16 --rounds 1 --steps 60 --launcher $L -- "$py" "$EX" \
            >ts.txt 2>ts.err)
        echo $? >"$T/$L/ts.rc"
    done
    [ "$(cat "$T/local/ts.rc")" = 0 ] && [ "$(cat "$T/slurm/ts.rc")" = 0 ] && grep -q '^Verified: ' "$T/slurm/ts.txt" &&
        same ts.txt ts/tune.md ts/tune.json
    ok $? "tune -- CMD --launcher slurm: exit 0 as local ($(cat "$T/local/ts.rc") $(cat "$T/slurm/ts.rc")), the same reports (text, tune.md, tune.json)"
    [ "$(cat "$T/slurm/ts.rc")" = 0 ] || diag "$T/slurm/ts.err"
    S1="$T/slurm/ts/round-1/ampdiag-sweep.sbatch"
    grep -q "^    export 'AMPDIAG_TUNE_TRACE=ts/round-1/run-bf16.h5' 'AMPDIAG_TUNE_PRECISION=bf16' 'AMPDIAG_TUNE_STEPS=60'$" "$S1" &&
        grep -qF "    set -- '$py' '$EX' ;;" "$S1" && [ "$(cat "$T/slurm/ts/round-1/run-bf16.exit")" = 0 ] &&
        grep -q "submitted job array" "$T/slurm/ts.err"
    ok $? "tune -- CMD --launcher slurm: the job script exports each run's variables and runs the command as given"
    printf 'import os, sys\nif os.environ.get("AMPDIAG_TUNE_PRECISION") == "fp32":\n    print("baseline fails on its node (test)")\n    sys.exit(5)\n' >"$T/bfail.py"
    (cd "$T/slurm" && "$AMP" tune -o bf --launcher slurm -- "$py" "$T/bfail.py" >bf.txt 2>bf.err)
    st=$?
    [ $st -eq 2 ] && grep -q "the FP32 baseline failed: .*: exit 5, no trace. Nothing else was run" "$T/slurm/bf.err" &&
        grep -q "^baseline fails on its node (test)$" "$T/slurm/bf.err" && [ ! -e "$T/slurm/bf/round-1/run-fp16.log" ]
    ok $? "tune -- CMD --launcher slurm: a baseline that fails in its array task: exit 2, its exit status and log (exit $st)"
    [ $st -eq 2 ] || diag "$T/slurm/bf.err"
fi

# SIGTERM while the array runs: the array is cancelled, the run marks its trace interrupted
(cd "$T/slurm" && exec "$AMP" sweep --precisions fp32 -o term --steps 1000000 --trace-every 100 --launcher slurm \
    >term.txt 2>term.err) &
sp=$!
i=0
while ! grep -q "fp32" "$T/slurm/term/run-fp32.log" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.2; i=$((i + 1)); done
sleep 1
kill -TERM $sp
wait $sp
st=$?
i=0
while ! "$AMP" info "$T/slurm/term/run-fp32.h5" 2>/dev/null | head -1 | grep -q interrupted && [ $i -lt 60 ]; do
    sleep 0.5
    i=$((i + 1))
done
[ $st -eq 143 ] && grep -q "cancelling job array" "$T/slurm/term.err" && drained 20 &&
    "$AMP" info "$T/slurm/term/run-fp32.h5" 2>/dev/null | head -1 | grep -q interrupted
ok $? "SIGTERM: exit 143, the array cancelled (scancel), its run's trace marked interrupted (exit $st)"
[ $st -eq 143 ] || diag "$T/slurm/term.err"

echo "1..$n"
