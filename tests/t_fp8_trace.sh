#!/bin/sh
# t_fp8_trace.sh - the FP8 what-if counts of an FP32 run's trace against an independent count:
# a run starts from saved weights (--init-from), so its step-0 weight records hold exactly
# those weights; PyTorch casts each layer's weights to float8_e4m3fn and float8_e5m2 and counts
# the values that flush to zero and that come out subnormal, and every count must equal the
# trace's e4m3_* / e5m2_* fields; then `info` names the tensors FP8 would hurt. Needs a Python
# with torch, numpy and h5py ($AMPDIAG_PYTHON, the source tree's .venv, python3); SKIP without.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import torch, numpy, h5py; torch.float8_e4m3fn'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with torch (float8), numpy and h5py"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_fp8_trace.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
"$AMPDIAG" run --steps 20 --progress none -o "$T/a.h5" --save-weights "$T/w.h5" >/dev/null 2>&1 &&
"$AMPDIAG" run --steps 1 --init-from "$T/w.h5" --progress none -o "$T/b.h5" >/dev/null 2>&1 ||
    { echo "Bail out! ampdiag run failed"; exit 1; }
"$AMPDIAG" info "$T/b.h5" >"$T/info.txt" 2>&1 || { echo "Bail out! ampdiag info failed"; exit 1; }
"$AMPDIAG" info --format json "$T/b.h5" >"$T/info.json" 2>&1 || { echo "Bail out! ampdiag info --format json failed"; exit 1; }
exec "$py" - "$T" <<'PY'
import sys, json, h5py, numpy as np, torch
T = sys.argv[1]
n = 0
failed = 0
def ok(cond, msg):
    global n, failed
    n += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n, msg))
    failed |= not cond
# the weights as saved: one float32 dataset per parameter, /<layer>/<param>
params = {}
def keep(k, o):
    if isinstance(o, h5py.Dataset):
        params[k] = o[...]
    return None  # (visititems stops at the first value returned)
with h5py.File(T + "/w.h5", "r") as f:
    f.visititems(keep)
by_layer = {}
for k, v in params.items():
    by_layer.setdefault(k.split("/")[0], []).append(v.ravel())
fmts = {"e4m3": (torch.float8_e4m3fn, 2.0 ** -6), "e5m2": (torch.float8_e5m2, 2.0 ** -14)}
with h5py.File(T + "/b.h5", "r", swmr=True) as f:
    layers = [x.decode() if isinstance(x, bytes) else x for x in f["layers"]["name"]]
    kinds = h5py.check_enum_dtype(f["tensors"].dtype["kind"])
    wk = kinds["weight"]
    rows = f["tensors"][...]
checked = 0
for r in rows[(rows["step"] == 0) & (rows["kind"] == wk)]:
    name = layers[r["layer"]]
    x = torch.from_numpy(np.concatenate(by_layer[name]).astype(np.float32))
    ok(int(r["count"]) == x.numel(), "%s weights: %d values in the record and in the file" % (name, x.numel()))
    for fmt, (dt, min_normal) in fmts.items():
        y = x.to(dt).to(torch.float32)
        under = int(((x != 0) & (y == 0)).sum())
        sub = int(((y != 0) & (y.abs() < min_normal)).sum())
        over = int((x.abs() > torch.finfo(dt).max * (1 + 2.0 ** -4)).sum())  # none in weights
        got = (int(r[fmt + "_underflow"]), int(r[fmt + "_subnormal"]), int(r[fmt + "_overflow"]))
        ok(got == (under, sub, over), "%s weights, %s: flush %d, subnormal %d, overflow %d as counted by casting (trace %s)"
           % (name, fmt, under, sub, over, got))
    checked += 1
ok(checked >= 4, "%d weight records checked" % checked)
info = json.load(open(T + "/info.json"))
w = info["what_if"]
ok("e4m3" in w and "e5m2" in w and w["e4m3"]["all"]["values"] == w["fp16"]["all"]["values"],
   "info JSON has the e4m3 and e5m2 what-if counts over the same values as fp16")
hurt = w["e4m3"]["hurt_most"]
ok(len(hurt) >= 1 and all(h["overflow_fraction"] + h["underflow_fraction"] >= 1e-3 for h in hurt) and
   all(hurt[i]["overflow_fraction"] + hurt[i]["underflow_fraction"] >= hurt[i + 1]["overflow_fraction"] + hurt[i + 1]["underflow_fraction"] for i in range(len(hurt) - 1)),
   "info JSON names the tensors unscaled E4M3 would hurt most, largest first (%s)" % [(h["layer"], h["kind"]) for h in hurt])
txt = open(T + "/info.txt").read()
ok("e4m3 (unscaled) would hurt most:" in txt and hurt[0]["layer"] in txt, "info's text names them too")
print("1..%d" % n)
sys.exit(1 if failed else 0)
PY
