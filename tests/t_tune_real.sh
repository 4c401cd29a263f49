#!/bin/sh
# t_tune_real.sh - `ampdiag tune -o DIR -- python examples/pytorch/tune_resnet.py`: tune's closed
# loop on a real model, torchvision's resnet18 (random initial weights, 10 classes, synthetic
# 32x32 images, batch 16, 40 steps, CPU; no download), in fp32 and bf16, without and with
# --fp32-search. The FP32 baseline learns on any machine (its eval loss falls from about 2.5 to
# about 0.1), so tune reaches a verdict: the test asserts tune's exit status against its verdict
# (0 and "Verified:" with a run that learns, is healthy and lies within the yardstick's band; or
# 1 and "NOT verified:" with each failed candidate's reason) and that tune.json lists every run
# it made (each command's log on disk is one run of tune.json) with why it was made, its command,
# variables, exit status and trace; with --fp32-search, the search's result (no layer where bf16
# passes as it is). SKIP without a Python with torch, torchvision, numpy and h5py, or without the
# shared libampdiag.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import torch, torchvision, numpy, h5py'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with torch, torchvision, numpy and h5py (scripts/install-deps.sh --with-torch)"
    exit 0
fi
if [ ! -f .libs/libampdiag.so ]; then
    echo "1..0 # SKIP no shared libampdiag in the build tree (.libs/libampdiag.so: configured --disable-shared?)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_tune_real.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
AMPDIAG_LIB=$(pwd)/.libs/libampdiag.so
PYTHONPATH="$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
export AMPDIAG_LIB PYTHONPATH
EX="$srcdir/examples/pytorch/tune_resnet.py"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; }
check() { if eval "$1"; then ok "$2"; else notok "$2"; fi; }

# DIR's tune.json checked in Python: prints "ok" or what failed
json_check() { # dir rc command search
    "$py" - "$@" <<'EOF'
import glob, json, os, sys
d_, rc, cmd, search = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "search"
d = json.load(open(os.path.join(d_, "tune.json")))
bad = []
def need(c, msg):
    if not c:
        bad.append(msg)
runs = d["runs"]
# every command tune ran left its log: each is one run of tune.json, and nothing else is
logs = sorted(glob.glob(os.path.join(d_, "*", "run-*.log")))
need(sorted(r["log"] for r in runs) == logs, "the runs' logs %r vs on disk %r" % (sorted(r["log"] for r in runs), logs))
for r in runs:
    e = r.get("env") or {}
    need(r["why"] and r["why_id"] and r["round"] and r["command"] == cmd, "run %s: why/round/command" % r["path"])
    need(e.get("AMPDIAG_TUNE_TRACE") == r["path"] and e.get("AMPDIAG_TUNE_PRECISION") == r["precision"],
         "run %s: its variables %r" % (r["path"], e))
    need(r["failed"] or (r["exit_status"] == 0 and r["trace"] == "complete" and r["status"] == "complete"),
         "run %s: exit %r, trace %r" % (r["path"], r["exit_status"], r["trace"]))
    need(r["failed"] == (r["failure"] is not None), "run %s: failed and failure agree" % r["path"])
r1 = {r["precision"]: r for r in runs if r["round"] == "round-1"}
need(set(r1) == {"fp32", "bf16"}, "round 1: fp32 and bf16 (%r)" % sorted(r1))
b = r1.get("fp32")
need(b and b["learns"] is True and b["healthy"] and b["eval_loss"] < 0.5 * b["initial_eval_loss"],
     "the FP32 baseline learns: eval %r from %r" % (b and b["eval_loss"], b and b["initial_eval_loss"]))
y = [r for r in runs if r["yardstick"]]
need(len(y) == 1 and y[0]["precision"] == "fp32" and y[0]["learns"] and y[0]["healthy"], "one FP32 yardstick")
need(d["verification_id"] in ("verified", "not_verified"), "a verdict on the candidates: %r" % d["verification_id"])
if d["verified"]:
    v = [r for r in runs if r["verified"]]
    need(rc == 0 and len(v) == 1 and v[0]["path"] == d["run"] and v[0]["learns"] and v[0]["healthy"],
         "exit 0 and one verified run that learns and is healthy")
    if v and not v[0]["yardstick"]:
        yl = d["fp32_eval_loss"]
        need(v[0]["eval_loss"] <= yl * (1 + d["noise_band"]), "the verified run within the band: %r vs %r +-%r"
             % (v[0]["eval_loss"], yl, d["noise_band"]))
    need(d["reproduce"] and d["reproduce"].endswith(" " + cmd) and d["pytorch"], "reproduce/pytorch")
else:
    need(rc == 1 and d["run"] is None and d["failed_candidates"] and
         all(" at lr " in f for f in d["failed_candidates"]), "exit 1, each failed candidate with its reason")
s = d["fp32_search"]
if search:
    need(s and s["precision"] == "bf16" and s["text"].startswith("--fp32-search: bf16 at lr"), "fp32_search %r" % (s,))
    if s and s["found"]:
        f = [r for r in runs if r["path"] == s["run"]]
        need(len(f) == 1 and f[0]["precision"] == "bf16" and f[0]["learns"] and f[0]["healthy"],
             "the search's run passes: %r" % f)
        need(s["runs"] == 0 if not s["layers"] else s["runs"] > 0, "runs of the search %r for layers %r"
             % (s["runs"], s["layers"]))
else:
    need(s is None, "no fp32_search without --fp32-search")
print("ok" if not bad else "; ".join(bad))
EOF
}

for mode in plain search; do
    opt=""
    [ $mode = search ] && opt=--fp32-search
    # shellcheck disable=SC2086
    "$AMPDIAG" tune -o "$T/$mode" --precisions fp32,bf16 --rounds 1 -j 2 $opt -- "$py" "$EX" \
        >"$T/$mode.out" 2>"$T/$mode.err"
    rc=$?
    if [ $rc -eq 0 ]; then want="^Verified: "; else want="^NOT verified: "; fi
    check '[ $rc -le 1 ] && grep -q "$want" "$T/$mode.out"' \
        "resnet18 ${opt:-(no --fp32-search)}: exit $rc with its verdict ($(sed -nE 's/^(Verified|NOT verified): (.{0,40}).*/\1: \2/p' "$T/$mode.out" | head -1))"
    [ $rc -le 1 ] || sed 's/^/# /' "$T/$mode.err" | tail -20
    out=$(json_check "$T/$mode" $rc "$py $EX" $mode)
    check '[ "$out" = ok ]' "resnet18 ${opt:-(no --fp32-search)}: tune.json lists every run it made, why, its command, variables and trace; the verdict's evidence ($out)"
    grep "^  \|^Verified\|^NOT\|^--fp32-search\|^the yardstick" "$T/$mode.out" | sed 's/^/# /'
done
# the traces are resnet18's, as PyTorch names its modules
"$AMPDIAG" info --format json "$T/plain/round-1/run-bf16.h5" >"$T/info.json" 2>/dev/null
out=$("$py" - "$T/info.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
names = [l["name"] for l in d.get("layers", [])]
a = d.get("attributes", {})
ok = {"conv1", "layer4.1.conv2", "fc"} <= set(names) and a.get("model") == "resnet18" and d.get("precision", a.get("precision")) == "bf16"
print("ok" if ok else "layers %r, attributes %r" % (names[:5], {k: a.get(k) for k in ("model", "precision")}))
EOF
)
check '[ "$out" = ok ]' "the bf16 trace is resnet18's (conv1 ... layer4.1.conv2, fc), autocast bf16 ($out)"
echo "1..$n"
