#!/bin/sh
# t_tune_script.sh - `ampdiag tune -o DIR -- CMD ARGS`: tune's closed loop on the user's own
# training script (docs/pytorch.md, "tune on your own script"), run on
# examples/pytorch/tune_example.py (a small MLP on synthetic data, CPU):
#   - tests/pytorch/test_tune_config.py: ampdiag.torch.tune_config() without variables gives the
#     script's defaults; with them it applies what tune set (the environment contract);
#   - an lr 500x too high (--lr 1.5): round 1 does not learn, the LR range test and the lr search
#     run the script with AMPDIAG_TUNE_LR (and the range test's schedule and steps), and a run
#     that learns is verified; tune.json lists every run with its command and variables;
#   - labels nothing can learn (--labels random): exit 1, "nothing learns", nothing verified;
#   - bad usage, exit 2 before any work: nothing after '--', a command not found, an option of
#     ampdiag run's a script cannot be told, a precision autocast has not, the Slurm launcher; and
#     a command that fails or writes no trace: exit 3 naming its log.
# SKIP without a Python with torch, numpy and h5py, or without the shared libampdiag.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import torch, numpy, h5py'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with torch, numpy and h5py (scripts/install-deps.sh --with-torch)"
    exit 0
fi
if [ ! -f .libs/libampdiag.so ]; then
    echo "1..0 # SKIP no shared libampdiag in the build tree (.libs/libampdiag.so: configured --disable-shared?)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_tune_script.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
AMPDIAG_LIB=$(pwd)/.libs/libampdiag.so
PYTHONPATH="$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
export AMPDIAG_LIB PYTHONPATH
EX="$srcdir/examples/pytorch/tune_example.py"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; }
check() { if eval "$1"; then ok "$2"; else notok "$2"; fi; }

# --- the environment contract (Python unit checks), renumbered into this stream
"$py" "$srcdir/tests/pytorch/test_tune_config.py" "$AMPDIAG" "$T" >"$T/cfg.tap" 2>&1
cfg_rc=$?
while IFS= read -r line; do
    case $line in
    "ok "* | "not ok "*)
        n=$((n + 1))
        echo "$line" | sed "s/^\(not \)\{0,1\}ok [0-9]*/\1ok $n/"
        ;;
    1..*) ;;
    *) echo "# $line" ;;
    esac
done <"$T/cfg.tap"
check '[ $cfg_rc -eq 0 ]' "test_tune_config.py exited 0 ($cfg_rc)"

# a check of DIR/tune.json in Python: prints "ok" or what failed
json_check() {
    "$py" - "$@" <<'EOF'
import json, math, sys
d = json.load(open(sys.argv[1] + "/tune.json"))
what = sys.argv[2]
runs = d["runs"]
cmd = sys.argv[3]
bad = []
def need(c, msg):
    if not c:
        bad.append(msg)
for r in runs:
    env = r.get("env") or {}
    need(r.get("command") == cmd, "run %s: command %r" % (r["path"], r.get("command")))
    need(env.get("AMPDIAG_TUNE_TRACE") == r["path"], "run %s: AMPDIAG_TUNE_TRACE %r" % (r["path"], env.get("AMPDIAG_TUNE_TRACE")))
    need(env.get("AMPDIAG_TUNE_PRECISION") == r["precision"], "run %s: PRECISION %r" % (r["path"], env.get("AMPDIAG_TUNE_PRECISION")))
    need(r.get("exit_status") == 0 and r.get("log", "").endswith(".log"), "run %s: exit status/log" % r["path"])
    if r["round"] == "round-1":
        need("AMPDIAG_TUNE_LR" not in env, "round-1 sets no lr (the script's own)")
    else:
        need(abs(float(env.get("AMPDIAG_TUNE_LR", "nan")) - r["lr"]) <= 1e-6 * r["lr"],
             "run %s: AMPDIAG_TUNE_LR %r vs its lr %r" % (r["path"], env.get("AMPDIAG_TUNE_LR"), r["lr"]))
    if r["range_test"]:
        need(env.get("AMPDIAG_TUNE_SCHEDULE", "").startswith("range:") and env.get("AMPDIAG_TUNE_STEPS") == "100",
             "the range test's schedule and steps: %r" % env)
need(d["command"] == cmd, "top-level command %r" % d.get("command"))
need(any(r["range_test"] for r in runs), "a range test run")
if what == "fixed":
    need(d["verified"] is True and d["verification_id"] == "verified", "verified: %r" % d["verification"])
    v = [r for r in runs if r["verified"]]
    need(len(v) == 1 and v[0]["path"] == d["run"], "one verified run, the one named")
    if v:
        v = v[0]
        need(v["learns"] is True and v["eval_loss"] < v["initial_eval_loss"] and v["healthy"],
             "the verified run learns: eval %r from %r" % (v["eval_loss"], v["initial_eval_loss"]))
        need(v["lr"] < 0.1, "the verified lr %r is far below the 1.5 given" % v["lr"])
    r1 = [r for r in runs if r["round"] == "round-1"]
    need(len(r1) == 2 and all(r["learns"] is False and abs(r["lr"] - 1.5) < 1e-9 for r in r1),
         "round 1 at the script's own lr 1.5 does not learn")
else:
    need(d["verified"] is False and d["verification_id"] == "nothing_learns" and d["run"] is None,
         "not verified, nothing learns: %r" % d["verification"])
    need(not any(r["learns"] for r in runs), "no run learns")
print("ok" if not bad else "; ".join(bad))
EOF
}

# --- (a) an lr 500x too high: tune measures the lr, verifies a configuration that learns
"$AMPDIAG" tune -o "$T/high" --precisions fp32,bf16 --rounds 1 -j 2 -- "$py" "$EX" --lr 1.5 \
    >"$T/high.out" 2>"$T/high.err"
rc=$?
check '[ $rc -eq 0 ]' "lr too high: exit 0 ($rc)"
check 'grep -q "^Verified: .* learns (eval loss" "$T/high.out"' "lr too high: Verified, a run that learns"
out=$(json_check "$T/high" fixed "$py $EX --lr 1.5")
check '[ "$out" = ok ]' "lr too high: tune.json: every run with its command and variables, the verified one learns ($out)"
check '[ -s "$T/high/round-1/run-fp32.log" ] && grep -q "fp32 lr 1.5: eval loss" "$T/high/round-1/run-fp32.log"' \
    "the command's output is in DIR/round-1/run-fp32.log"
[ $rc -eq 0 ] || sed 's/^/# /' "$T/high.err" | tail -20

# --- (b) labels nothing can learn: exit 1, nothing verified, with the evidence
"$AMPDIAG" tune -o "$T/random" --precisions fp32,bf16 --rounds 1 -j 2 -- "$py" "$EX" --labels random \
    >"$T/random.out" 2>"$T/random.err"
rc=$?
check '[ $rc -eq 1 ]' "random labels: exit 1 ($rc)"
check 'grep -q "^NOT verified: nothing learns: none of the [0-9]* FP32 runs" "$T/random.out" && ! grep -q "^Verified" "$T/random.out"' \
    "random labels: NOT verified, nothing learns"
out=$(json_check "$T/random" none "$py $EX --labels random")
check '[ "$out" = ok ]' "random labels: tune.json: not verified, no run learns ($out)"

# --- (c) bad usage: exit 2 before any work, naming what is wrong
usage() { # expected-substring description args...
    want=$1
    what=$2
    shift 2
    "$AMPDIAG" tune -o "$T/bad" "$@" >"$T/bad.out" 2>"$T/bad.err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q -- "$want" "$T/bad.err" && [ ! -e "$T/bad" ]; then
        ok "$what: exit 2, nothing made"
    else
        notok "$what: exit $rc: $(cat "$T/bad.err")"
    fi
}
usage "nothing after '--'" "no command after --" --
usage "no_such_command_x: command not found on PATH" "a command not found" -- no_such_command_x train.py
usage "./no/such/script: no such executable file" "a path that is no executable" -- ./no/such/script
usage "model: not for a command after '--'" "an option of run's a script cannot be told" --model mlp -- "$py" "$EX"
usage "'bf16-pure' is not for a command after '--'" "a precision autocast has not" --precisions fp32,bf16-pure -- "$py" "$EX"
usage "runs locally only" "the Slurm launcher" --launcher slurm -- "$py" "$EX"

# a command that fails and leaves no trace, and one that ignores the variables: exit 3, its log named
"$AMPDIAG" tune -o "$T/fail" -- "$py" -c 'import sys; print("boom"); sys.exit(4)' >"$T/fail.out" 2>"$T/fail.err"
rc=$?
check '[ $rc -eq 3 ] && grep -q "failed (exit 4) and left no trace; its log is $T/fail/round-1/run-fp32.log" "$T/fail.err" && grep -q boom "$T/fail/round-1/run-fp32.log"' \
    "a command that fails: exit 3, its log named ($rc)"
"$AMPDIAG" tune -o "$T/notrace" -- "$py" -c 'pass' >"$T/nt.out" 2>"$T/nt.err"
rc=$?
check '[ $rc -eq 3 ] && grep -q "ended (exit 0) without writing $T/notrace/round-1/run-fp32.h5: does it call ampdiag.torch.tune_config()" "$T/nt.err"' \
    "a command that writes no trace: exit 3, says how to opt in ($rc)"
check '"$AMPDIAG" tune --help | grep -q -- "-- CMD ARGS"' "ampdiag tune --help names -- CMD"
echo "1..$n"
