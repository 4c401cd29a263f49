#!/bin/sh
# t_launch.sh - the launcher of sweep's and tune's rounds (src/cli/launch.c) where no Slurm
# runs: --launcher is checked, --emit needs slurm, --dry-run with slurm prints the job script,
# --emit writes one job array whose tasks each run one configuration (the script is run here by
# hand, task by task, as Slurm would, and its runs and exit status files checked), and a missing
# sbatch is a clear exit 2. The real Slurm is tests/t_slurm.sh (make check-slurm).
AMPDIAG=${AMPDIAG:-./ampdiag}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
T=$(mktemp -d "${TMPDIR:-/tmp}/t_launch.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
diag() { sed 's/^/# /' "$@"; }
AMP=$(cd "$(dirname "$AMPDIAG")" && pwd)/$(basename "$AMPDIAG")
. "${srcdir:-.}/tests/untimed.sh"

"$AMPDIAG" sweep --precisions fp32 -o "$T/x" --launcher pbs >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "unknown --launcher 'pbs' (expected local or slurm)" "$T/err"
ok $? "sweep --launcher pbs: exit 2, named"
"$AMPDIAG" tune -o "$T/x" --launcher pbs >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "unknown --launcher 'pbs'" "$T/err"
ok $? "tune --launcher pbs: exit 2, named"
"$AMPDIAG" sweep --precisions fp32 -o "$T/x" --emit "$T/e" >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q -- "--emit writes a Slurm job script" "$T/err" && [ ! -e "$T/e" ]
ok $? "--emit without --launcher slurm: exit 2, nothing written"

"$AMPDIAG" sweep --precisions fp32,bf16 --lrs 0.01 -o "$T/dry" --steps 5 --launcher slurm -j 1 --dry-run \
    >"$T/dry.sh" 2>"$T/err"
st=$?
[ $st -eq 0 ] && grep -q '^#SBATCH --array=0-1%1$' "$T/dry.sh" && grep -q "'--precision' 'bf16' '--lr' '0.01'" "$T/dry.sh" &&
    [ ! -d "$T/dry" ]
ok $? "--dry-run with slurm prints the job script (an array of 2, at most -j 1 at once), runs nothing (exit $st)"

# --emit: the script of a sweep of two configurations, its tasks run here by hand
cd "$T" || exit 1
"$AMP" sweep --precisions fp32,fp16 -o "o ut" --steps 20 --trace-every 5 --launcher slurm --emit em >out.txt 2>err.txt
st=$?
S="$T/em/ampdiag-sweep.sbatch"
[ $st -eq 0 ] && [ -s "$S" ] && [ ! -s out.txt ] && [ ! -e "o ut/run-fp32.h5" ] && grep -q "sbatch em/ampdiag-sweep.sbatch" err.txt
ok $? "--emit writes em/ampdiag-sweep.sbatch, says how to submit it, runs nothing (exit $st)"
[ $st -eq 0 ] || diag err.txt
grep -q '^#SBATCH --array=0-1$' "$S" && grep -q '^#SBATCH --output="o ut/slurm-%A_%a.out"$' "$S" &&
    grep -q "^#SBATCH --chdir=\"$T\"$" "$S"
ok $? "the script: an array of 2 tasks (no limit without -j), output and working directory quoted"
rc0=0 rc1=0
SLURM_ARRAY_TASK_ID=0 sh "$S" || rc0=$?
SLURM_ARRAY_TASK_ID=1 sh "$S" || rc1=$?
SLURM_ARRAY_TASK_ID=2 sh "$S" 2>err2.txt
rc2=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ "$(cat "o ut/run-fp32.exit")" = 0 ] && [ "$(cat "o ut/run-fp16.exit")" = 0 ] &&
    [ -s "o ut/run-fp32.h5" ] && [ -s "o ut/run-fp16.h5" ] && grep -q "precision fp16\|fp16" "o ut/run-fp16.log"
ok $? "its tasks 0 and 1 run fp32 and fp16 into their traces and write exit status 0 ($rc0 $rc1)"
[ $rc2 -eq 2 ] && grep -q "no configuration for array task 2" err2.txt
ok $? "a task beyond the array: exit 2, named"
"$AMP" compare "o ut/run-fp32.h5" "o ut/run-fp16.h5" >cmp.txt 2>/dev/null
"$AMP" sweep --precisions fp32,fp16 -o loc --steps 20 --trace-every 5 >loc.txt 2>/dev/null
# (the step times are this machine's at the time: left out, tests/untimed.sh)
untimed cmp.txt >cmp-u.txt && untimed loc.txt >loc-u.txt && grep -q '^median step time' cmp.txt &&
    cmp -s cmp-u.txt loc-u.txt
ok $? "ampdiag compare of the emitted tasks' traces reads as the local sweep's report (but the step times)"
cd - >/dev/null || exit 1

PATH=/nonexistent "$AMP" sweep --precisions fp32 -o "$T/np" --steps 5 --launcher slurm >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "cannot run sbatch" "$T/err"
ok $? "--launcher slurm without sbatch on PATH: exit 2, said"

echo "1..$n"
