#!/bin/sh
# t_format_axis.sh - a format added to the format table reaches every report without touching
# them: a trace gets a dummy 8-bit format "dummy8" (a /formats row) and /whatif rows for it (the
# unscaled E4M3 rows with a quarter of each tensor's values overflowing), as a later tracer
# would write them. The reader, the findings, info (text and JSON), compare (text, Markdown,
# JSON) and plot must show it as a what-if column of its own, with its counts, by name: a
# format the reports never heard of. Needs a Python with h5py; SKIP without.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
. "$srcdir/tests/find_python.sh"
find_python 'import h5py, numpy'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with h5py and numpy"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_format_axis.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
export COLUMNS=1000 OPENBLAS_NUM_THREADS=1
"$AMPDIAG" run --steps 6 --progress none -o "$T/a.h5" >/dev/null 2>&1 &&
    "$AMPDIAG" run --steps 6 --precision bf16 --progress none -o "$T/b.h5" >/dev/null 2>&1 ||
    { echo "Bail out! ampdiag run failed"; exit 1; }
cp "$T/a.h5" "$T/plain.h5"
"$py" - "$T/a.h5" <<'PY' || { echo "Bail out! cannot add the dummy format"; exit 1; }
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    fm = f["formats"]
    rows = fm[:]
    e4 = int(rows["index"][rows["name"] == b"e4m3"][0])
    new = rows[rows["name"] == b"e4m3"][0].copy()
    new["index"] = rows["index"].max() + 1
    new["name"] = b"dummy8"
    new["max_finite"] = 240.0
    fm.resize((len(rows) + 1,))
    fm[len(rows)] = new
    w = f["whatif"]
    old = w[:]
    add = old[(old["format"] == e4) & (old["scaling"] == 0)].copy()
    add["format"] = new["index"]
    add["overflow"] = add["count"] // 4
    w.resize((len(old) + len(add),))
    w[len(old):] = add
    print(len(add), "dummy8 rows", file=sys.stderr)
PY
"$AMPDIAG" info --format json "$T/a.h5" > "$T/info.json" &&
    "$AMPDIAG" info --what-if dummy8 "$T/a.h5" > "$T/info.txt" &&
    "$AMPDIAG" info "$T/a.h5" > "$T/info-plain.txt" &&
    "$AMPDIAG" compare --format json "$T/a.h5" "$T/b.h5" > "$T/compare.json" &&
    "$AMPDIAG" compare --what-if dummy8 "$T/a.h5" "$T/b.h5" > "$T/compare.txt" &&
    "$AMPDIAG" compare --format md --what-if dummy8 "$T/a.h5" "$T/b.h5" > "$T/compare.md" &&
    "$AMPDIAG" plot --what-if dummy8 --no-draw "$T/a.h5" -o "$T/charts" > "$T/plot.txt" ||
    { echo "Bail out! a command failed"; exit 1; }
"$py" - "$T" <<'PY'
import json, os, sys
T = sys.argv[1]
n = 0; failed = 0
def ok(c, what):
    global n, failed
    n += 1
    print(("ok" if c else "not ok") + " %d - %s" % (n, what))
    failed |= not c
info = json.load(open(T + "/info.json"))
wi = info["what_if"].get("dummy8", {})
ok(wi and wi["all"]["values"] > 0 and abs(wi["all"]["overflow"] / wi["all"]["values"] - 0.25) < 0.01,
   "info JSON: the dummy8 column sums its rows (a quarter of the values overflow)")
hurt = [e for e in info["evidence"] if e["id"] == "whatif_hurt" and e["format"] == "dummy8"]
ok(len(hurt) >= 1 and all(abs(h["figures"]["overflow_share"]["value"] - 0.25) < 0.01 for h in hurt),
   "info JSON: whatif_hurt findings name dummy8 (%d)" % len(hurt))
txt = open(T + "/info.txt").read()
ok("dummy8 (unscaled) would hurt most:" in txt and any(l.split()[:1] == ["dummy8"] for l in txt.splitlines()),
   "info --what-if dummy8: its table rows and the tensors it would hurt")
plain = open(T + "/info-plain.txt").read()
ok("would hurt most" not in plain and "dummy8" in plain and "--what-if" in plain,
   "info without --what-if: one line names dummy8 and the option")
cj = json.load(open(T + "/compare.json"))
cell = cj["runs"][0]["layers"][0]["kinds"]["weight"]["what_if"]
ok("dummy8" in cell and cell["dummy8"]["overflow"] > 0, "compare JSON: the cells have the dummy8 counts")
ok(all("dummy8" not in L["kinds"].get("weight", {}).get("what_if", {}) for L in cj["runs"][1]["layers"]),
   "... only in the trace that has them")
md = open(T + "/compare.md").read()
ok("dummy8 overflow" in md, "compare --format md --what-if dummy8: a dummy8 column in the ranges table")
ct = open(T + "/compare.txt").read()
ok("dummy8 (unscaled) would hurt most:" in ct, "compare's text names the tensors dummy8 would hurt")
charts = sorted(os.listdir(T + "/charts"))
ok("dummy8-heatmap-fp32.gp" in charts and any(c.startswith("dummy8-heatmap-fp32-") and c.endswith(".bin") for c in charts),
   "plot --what-if dummy8: a heatmap of its own, with its data (%s)" % [c for c in charts if "dummy8" in c][:3])
gp = open(T + "/charts/dummy8-heatmap-fp32.gp").read()
ok("would flush to zero in DUMMY8" in gp and "overflow in DUMMY8" in gp, "... its panels name the format")
lr = open(T + "/charts/layer-ranges-weight_grad.gp").read()
ok("DUMMY8: > 240" in lr, "... and its overflow band is on the range chart (240 is in range)")
print("1..%d" % n)
sys.exit(failed)
PY
