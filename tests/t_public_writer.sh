#!/bin/sh
# t_public_writer.sh - a trace written by another program through the public API alone,
# following traces/FORMAT.md, gets every finding and every rule ampdiag's own traces get:
# tests/t_public_writer (it includes only include/ampdiag*.h) copies traces of `ampdiag run`
# record by record (the /quant rows too) with only the root attributes FORMAT.md documents (typed settings, no
# "hyperparameters" / "scaler" text, nothing ampdiag writes for itself), and `info` (everything
# but the file name and the attribute list) and `compare`'s verdict must read the same for the
# copy as for the original, on the scenarios whose rules read those settings, the FP8 findings
# included. Needs a Python ($AMPDIAG_PYTHON, the source tree's .venv, python3) to pick the JSON
# apart; SKIP without.
AMPDIAG=${AMPDIAG:-./ampdiag}
COPY=${COPY:-./tests/t_public_writer}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "${srcdir:-.}/tests/find_python.sh"
# the checks that edit or write traces need h5py (and numpy): with the first Python that has
# them, SKIP where none has; the others need only json
find_python 'import h5py, numpy'
pyh5=$py
find_python 'import json'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_public_writer.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
# the keys where two views differ, a diag line each (at most 20; false when any): a whole-line
# diff of one-line JSON says nothing, and cut short it left a line without its newline, breaking
# the TAP stream. A number may differ in its last bits: the public API takes statistics, and a
# record's mean and rms go back through sum = mean * n and sumsq = rms^2 * n, exact to rounding
# (ampdiag_trace.h; t_trace checks 2 ulps); a figure derived from them (the update/weight
# ratio) then moves by an ulp in about one run in four.
keydiff() {
    "$py" - "$1" "$2" <<'EOF' >"$1.keydiff"
import json, sys
def near(a, b):
    return (isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool) and
            abs(a - b) <= 4e-16 * max(abs(a), abs(b)))
def walk(a, b, path):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            walk(a.get(k), b.get(k), path + "." + k)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, "%s[%d]" % (path, i))
    elif json.dumps(a) != json.dumps(b) and not near(a, b):  # (1 == 1.0 and 0.0 == -0.0: not as text)
        print("%s: %.200s | copy: %.200s" % (path, json.dumps(a), json.dumps(b)))
A, B = open(sys.argv[1]).readlines(), open(sys.argv[2]).readlines()
if len(A) != len(B):
    print("%d lines | copy: %d lines (a command of the view failed: its stderr follows)" % (len(A), len(B)))
for la, lb in zip(A, B):
    try:
        walk(json.loads(la), json.loads(lb), "")
    except ValueError as e:
        print("not JSON (%s): %.200s | copy: %.200s" % (e, la, lb))
EOF
    r=$?
    head -n 20 "$1.keydiff" | sed 's/^/# /'
    [ $r -eq 0 ] && [ ! -s "$1.keydiff" ]
}

# what must not depend on who wrote the trace: info without the file name and the attributes,
# and compare's verdict against a baseline
view() { # TRACE BASELINE (the commands' stderr to TRACE.view.err)
    exec 3>&2 2>"$1.view.err"
    "$AMPDIAG" info --format json "$1" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
for k in ("file", "attributes", "repaired"):
    d.pop(k, None)
print(json.dumps(d, sort_keys=True))'
    "$AMPDIAG" compare --format json "$2" "$1" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps(d["recommendation"], sort_keys=True))
print(json.dumps(d["runs"][1]["fp8"], sort_keys=True))'
    exec 2>&3 3>&-
}
"$AMPDIAG" run --steps 100 --progress none -o "$T/base.h5" >/dev/null 2>&1
ok $? "baseline run"
for sc in healthy fp16-adam-eps fp16-scale-collapse bf16-pure-lost-updates fp16-grad-underflow; do
    "$AMPDIAG" run --scenario $sc --steps 120 --progress none -o "$T/$sc.h5" >/dev/null 2>&1
    ok $? "$sc: run"
    "$COPY" "$T/$sc.h5" "$T/$sc-copy.h5"
    ok $? "$sc: copied through the public API"
    view "$T/$sc.h5" "$T/base.h5" >"$T/$sc.view"
    view "$T/$sc-copy.h5" "$T/base.h5" >"$T/$sc-copy.view"
    if keydiff "$T/$sc.view" "$T/$sc-copy.view"; then r=0; else
        r=1
        cat "$T/$sc.h5.view.err" "$T/$sc-copy.h5.view.err" 2>/dev/null | head -n 10 | sed 's/^/# stderr: /'
    fi
    ok $r "$sc: the copy gets the same info, FP8 findings and verdict"
done
grep -q '"hurt_count"' "$T/healthy.view" && grep -q '"amax_history": 1024' "$T/healthy.view"
ok $? "the views hold the FP8 findings (so they were compared)"
grep -q '"counted": \["mxfp8", "nvfp4"' "$T/healthy.view" && grep -q '"stay_bf16"' "$T/healthy.view" &&
    grep -q '"normal_sqnr_db"' "$T/healthy.view"
ok $? "... and the recipes' plans and /quant figures (the /quant rows were copied)"
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
# the comparison can fail: a copy without the typed settings reads differently
if [ -n "$pyh5" ]; then
    "$pyh5" - "$T/fp16-adam-eps-copy.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r+") as f:
    for k in list(f.attrs):
        if k.startswith("optimizer_") or k.startswith("fp8_"):
            del f.attrs[k]
PY
    ok $? "the optimizer_* and fp8_* attributes removed from a copy (h5py)"
    view "$T/fp16-adam-eps-copy.h5" "$T/base.h5" >"$T/stripped.view"
    ! keydiff "$T/fp16-adam-eps.view" "$T/stripped.view" >/dev/null
    ok $? "without the optimizer_* and fp8_* attributes the copy reads differently (the check can fail)"
else
    skip "no Python with h5py and numpy to strip a copy's attributes"
    skip "no Python with h5py and numpy: the check that the comparison can fail"
fi
# the h5py example of FORMAT.md, as it stands there, writes a version 2 trace that info reads
"$py" - "${srcdir:-.}/traces/FORMAT.md" "$T/example.py" <<'PY'
import sys
s = open(sys.argv[1]).read()
i = s.index("## Writing a trace with h5py")
a = s.index("```python", i) + len("```python")
open(sys.argv[2], "w").write(s[a:s.index("```", a)])
PY
if [ -n "$pyh5" ]; then
    "$pyh5" -c 'import os, runpy, sys; os.chdir(sys.argv[1]); runpy.run_path("example.py")' "$T" &&
        "$AMPDIAG" info --format json "$T/minimal.h5" >"$T/minimal.json" &&
        "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
w = d["what_if"]
sys.exit(0 if d["trace_format_version"] == 2 and w["e4m3"]["all"]["overflow"] == 1 and
         w["e5m2"]["all"]["overflow"] == 1 and w["e4m3"]["hurt_most"][0]["layer"] == "fc1" else 1)' "$T/minimal.json"
    ok $? "FORMAT.md's h5py example writes a version 2 trace whose FP8 rows info reads (70000 overflows E4M3 and E5M2)"
else
    skip "no Python with h5py and numpy for FORMAT.md's example"
fi
echo "1..$n"
exit $failed
