#!/bin/sh
# t_tune_script.sh - `ampdiag tune -o DIR -- CMD ARGS`: tune's closed loop on the user's own
# training script (docs/pytorch.md, "tune on your own script"), run on
# examples/pytorch/tune_example.py (a small MLP on synthetic data, CPU):
#   - tests/pytorch/test_tune_config.py: ampdiag.torch.tune_config() without variables gives the
#     script's defaults; with them it applies what tune set (the environment contract);
#   - an lr 500x too high (--lr 1.5): round 1 does not learn, the LR range test and the lr search
#     run the script with AMPDIAG_TUNE_LR (and the range test's schedule and steps), and a run
#     that learns is verified; tune.json lists every run with its command and variables;
#   - --fp32-search on a first layer whose outputs overflow FP16 (--fc1-scale 1e6): the smallest set
#     of modules kept in FP32 for fp16 to pass is found (fc1), through AMPDIAG_TUNE_FP32_LAYERS;
#   - labels nothing can learn (--labels random): exit 1, "nothing learns", nothing verified;
#   - a candidate whose command fails is a failed candidate, not the end of tune: fp16 killed by
#     SIGABRT before any trace, bf16 raising mid-run (exit 1, its trace interrupted); tune goes on,
#     verifies FP32 and tune.json says of each how it ended, what trace it left and its log;
#   - bad usage, exit 2 before any work: nothing after '--', a command not found, an option of
#     ampdiag run's a script cannot be told, a precision autocast has not, an unknown launcher;
#     and an FP32 baseline that fails (killed, exit 4, exit 0 without a trace): exit 2 naming the
#     command, how it ended and the end of its log, nothing else run.
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
if d["verified"]:
    v = [r for r in runs if r["verified"]][0]
    want = " ".join("%s=%s" % kv for kv in v["env"].items() if kv[0] != "AMPDIAG_TUNE_TRACE") + " " + cmd
    need(d.get("reproduce") == want, "reproduce %r, not %r" % (d.get("reproduce"), want))
    need("lr=%s" % v["env"]["AMPDIAG_TUNE_LR"] in (d.get("pytorch") or ""), "pytorch %r" % d.get("pytorch"))
else:
    need(d.get("reproduce") is None and d.get("pytorch") is None, "no reproduce/pytorch when nothing is verified")
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
check 'grep -q "^In PyTorch terms: torch.autocast(device_type, dtype=torch.bfloat16); the optimizer.s lr=0.00[0-9]*\.$" "$T/high.out" || grep -q "^In PyTorch terms: no autocast (FP32); the optimizer.s lr=0.00[0-9]*\.$" "$T/high.out"' \
    "lr too high: the verified configuration in PyTorch terms"
check 'grep -q "^Run it again .*: AMPDIAG_TUNE_PRECISION=[bf][fp][13][26] AMPDIAG_TUNE_LR=0.00[0-9]* $py $EX --lr 1.5$" "$T/high.out"' \
    "lr too high: the command line that runs it again, with its variables"
check '[ -s "$T/high/round-1/run-fp32.log" ] && grep -q "fp32 lr 1.5: eval loss" "$T/high/round-1/run-fp32.log"' \
    "the command's output is in DIR/round-1/run-fp32.log"
[ $rc -eq 0 ] || sed 's/^/# /' "$T/high.err" | tail -20

# --- --fp32-search: fc1's outputs overflow FP16 (--fc1-scale 1e6): fp16 fails, fp16 with fc1 alone
# in FP32 passes, and the search finds that set (its 4 layers with parameters: fc1, norm1 (the
# LayerNorm), fc2, head; every one in FP32 first, then the prefix fc1,norm1, then fc1)
"$AMPDIAG" tune -o "$T/search" --precisions fp32,fp16 --fp32-search --rounds 1 -j 2 -- "$py" "$EX" --fc1-scale 1e6 \
    >"$T/search.out" 2>"$T/search.err"
rc=$?
check '[ $rc -eq 0 ]' "fp32-search: exit 0 ($rc)"
out=$("$py" - "$T/search" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1] + "/tune.json"))
s = d["fp32_search"]
bad = []
if not (s and s["found"] and s["layers"] == "fc1" and s["precision"] == "fp16"):
    bad.append("fp32_search %r" % (s,))
lr = [r["lr"] for r in d["runs"] if r["path"] == (s or {}).get("run")]
base = [r for r in d["runs"] if r["precision"] == "fp16" and "AMPDIAG_TUNE_FP32_LAYERS" not in r["env"]
        and lr and abs(r["lr"] - lr[0]) <= 1e-6 * lr[0]]
if not (base and (base[0]["learns"] is not True or not base[0]["healthy"])):
    bad.append("the fp16 run without FP32 layers should fail: %r" % [(r["learns"], r["healthy"]) for r in base])
found = [r for r in d["runs"] if r["path"] == (s or {}).get("run")]
if not (found and found[0]["env"].get("AMPDIAG_TUNE_FP32_LAYERS") == "fc1" and found[0]["learns"] is True
        and found[0]["healthy"]):
    bad.append("the run found: %r" % [(r["env"], r["learns"], r["healthy"]) for r in found])
every = [r for r in d["runs"] if r["round"].startswith("fp32-search-")]
if not any(r["env"].get("AMPDIAG_TUNE_FP32_LAYERS") == "fc1,norm1,fc2,head" for r in every):
    bad.append("no search run with every layer in FP32: %r" % [r["env"].get("AMPDIAG_TUNE_FP32_LAYERS") for r in every])
if not d["verified"] or d["precision"] != "fp16":
    bad.append("verified %r %r" % (d["verified"], d["precision"]))
print("ok" if not bad else "; ".join(bad))
EOF
)
check '[ "$out" = ok ]' "fp32-search: fp16 fails, every layer in FP32 passes, the smallest set found is fc1 ($out)"
check 'grep -q "^--fp32-search: fp16 at lr [0-9.e-]* passes with fc1 in FP32 (1 of its 4 layers with parameters" "$T/search.out"' \
    "fp32-search: the report names the set"
[ $rc -eq 0 ] || sed 's/^/# /' "$T/search.err" | tail -20

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
usage "unknown --launcher 'pbs'" "an unknown launcher" --launcher pbs -- "$py" "$EX"

# --- (d) commands that fail. The test's wrapper of tune_example.py reads the environment contract
# (AMPDIAG_TUNE_PRECISION) and fails as a user's script does: "baseline": the FP32 run is killed
# (os.abort) before any trace; "candidates": fp16 is killed before any trace, bf16 raises at step
# 20 (the tracer's `with` marks its trace interrupted, Python exits 1).
cat >"$T/crashy.py" <<'EOF'
import os, runpy, sys
mode, ex = sys.argv[1], sys.argv[2]
sys.argv = [ex] + sys.argv[3:]
p = os.environ.get("AMPDIAG_TUNE_PRECISION")
if mode == "baseline" and p == "fp32":
    print("the baseline crashes (test)", flush=True)
    os.abort()
if mode == "candidates" and p == "fp16":
    print("fp16 aborts (test)", flush=True)
    os.abort()
if mode == "candidates" and p == "bf16":
    import ampdiag.torch
    step0 = ampdiag.torch.Tracer.step
    def step(self, loss=None):
        if self.t == 20:
            raise RuntimeError("loss is nan at step 20 (test)")
        return step0(self, loss)
    ampdiag.torch.Tracer.step = step
runpy.run_path(ex, run_name="__main__")
EOF
"$AMPDIAG" tune -o "$T/cand" --precisions fp32,fp16,bf16 --rounds 1 -j 2 --steps 60 -- "$py" "$T/crashy.py" candidates "$EX" \
    >"$T/cand.out" 2>"$T/cand.err"
rc=$?
check '[ $rc -eq 0 ] && grep -q "^Verified: fp32 at lr 0.003 " "$T/cand.out"' \
    "candidates that fail: tune goes on, exit 0, FP32 verified, the yardstick itself ($rc)"
check 'grep -qxF "  fp16      lr 0.003      FAILED: killed by signal 6 (SIGABRT), no trace; log $T/cand/round-1/run-fp16.log (it ends: \"fp16 aborts (test)\")" "$T/cand.out" &&
    grep -qxF "  bf16      lr 0.003      FAILED: exit 1, trace incomplete (status interrupted); log $T/cand/round-1/run-bf16.log (it ends: \"RuntimeError: loss is nan at step 20 (test)\")" "$T/cand.out"' \
    "candidates that fail: the report says how each ended, what trace it left, its log and its last line"
out=$("$py" - "$T/cand" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1] + "/tune.json"))
runs = {r["path"].split(sys.argv[1] + "/")[1]: r for r in d["runs"]}
bad = []
def need(c, msg):
    if not c:
        bad.append(msg)
f16, b16 = runs.get("round-1/run-fp16.h5"), runs.get("round-1/run-bf16.h5")
need(f16 and f16["failed"] and f16["exit_status"] == 134 and f16["signal"] == 6 and f16["trace"] == "none"
     and f16["learns"] is None and f16["healthy"] is False and f16["status"] == "failed"
     and f16["failure"].startswith("killed by signal 6 (SIGABRT), no trace; log "), "fp16: %r" % (f16,))
need(b16 and b16["failed"] and b16["exit_status"] == 1 and b16["signal"] is None and b16["trace"] == "incomplete"
     and "status interrupted" in b16["trace_status"] and "RuntimeError: loss is nan" in b16["failure"], "bf16: %r" % (b16,))
for r in (f16, b16):
    need(r and os.path.isfile(r["log"]) and r["log"].endswith(r["precision"] + ".log"), "the log of %r" % (r,))
    need(r and abs(r["lr"] - 0.003) < 1e-12, "a failed run of round 1 has the script's own lr: %r" % (r and r["lr"],))
ok = [r for r in d["runs"] if not r["failed"]]
need(all(r["exit_status"] == 0 and r["signal"] is None and r["trace"] == "complete" for r in ok),
     "the other runs ended with exit 0 and a complete trace")
need(len(ok) >= 3 and any(r["round"].startswith("lr-") for r in ok), "tune went on after round 1: %r" % [r["round"] for r in ok])
fc = d["failed_candidates"]
need(len(fc) == 2 and fc[0].startswith("bf16 at lr 0.003: the command failed: exit 1, trace incomplete")
     and fc[1].startswith("fp16 at lr 0.003: the command failed: killed by signal 6"), "failed_candidates %r" % fc)
need(d["verified"] and d["precision"] == "fp32", "verified %r" % d["verification"])
print("ok" if not bad else "; ".join(bad))
EOF
)
check '[ "$out" = ok ]' "candidates that fail: tune.json: each failed run's exit status, signal, trace, log; counted as failed candidates ($out)"
[ $rc -eq 0 ] || sed 's/^/# /' "$T/cand.err" | tail -20

# an FP32 baseline that fails: exit 2, the command, how it ended and its log's end; nothing else
# run, no report
base_fails() { # dir expected-how expected-log-line description command...
    d=$1 how=$2 line=$3 what=$4
    shift 4
    "$AMPDIAG" tune -o "$T/$d" -- "$@" >"$T/$d.out" 2>"$T/$d.err"
    rc=$?
    if [ $rc -eq 2 ] && grep -qF "the FP32 baseline failed: \`$1 " "$T/$d.err" &&
        grep -qF "(run with AMPDIAG_TUNE_PRECISION=fp32): $how. Nothing else was run" "$T/$d.err" &&
        grep -qxF "$line" "$T/$d.err" && [ ! -e "$T/$d/round-1/run-fp16.log" ] && [ ! -e "$T/$d/round-1/run-bf16.log" ] &&
        [ ! -e "$T/$d/tune.json" ] && [ ! -s "$T/$d.out" ]; then
        ok "$what: exit 2, the command, how it ended, the end of its log; nothing else run"
    else
        notok "$what: exit $rc"
        sed 's/^/# /' "$T/$d.err" | tail -8
    fi
}
base_fails bkill "killed by signal 6 (SIGABRT), no trace" "the baseline crashes (test)" "a baseline killed by SIGABRT" \
    "$py" "$T/crashy.py" baseline "$EX"
base_fails bexit "exit 4, no trace" "boom" "a baseline that exits 4" "$py" -c 'import sys; print("boom"); sys.exit(4)'
base_fails bnone "exit 0, no trace" "Traceback: none (test)" "a baseline that writes no trace" "$py" -c 'print("Traceback: none (test)")'
check 'grep -qF "the FP32 baseline failed: \`$py $T/crashy.py baseline $EX\` (run with" "$T/bkill.err" &&
    grep -qF "Its log $T/bkill/round-1/run-fp32.log ends:" "$T/bkill.err"' "a baseline that fails: its command as run and its log named"
check 'grep -q "does it call ampdiag.torch.tune_config() and write cfg.trace(...)?" "$T/bnone.err"' \
    "a baseline that writes no trace: the message says how a script opts in"
check '"$AMPDIAG" tune --help | grep -q -- "-- CMD ARGS"' "ampdiag tune --help names -- CMD"
echo "1..$n"
