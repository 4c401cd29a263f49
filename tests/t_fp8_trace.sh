#!/bin/sh
# t_fp8_trace.sh - the FP8 what-if counts of an FP32 run's trace (/whatif, traces/FORMAT.md)
# against an independent count. A run starts from saved weights (--init-from), so its weight
# records at step k hold exactly the weights that runs of k steps from the same start save
# (--save-weights; the runs are deterministic). PyTorch casts each layer's weights, as they are
# (unscaled) and multiplied by the scale Transformer Engine's delayed scaling would use (float32
# max / the largest amax of the history before the step, / 2^margin; 1 before any history),
# to float8_e4m3fn and float8_e5m2, and counts the values that flush to zero, come out
# subnormal and overflow; every count and every scale must equal the trace's rows, for the
# default recipe (history 1024, margin 0) and another (history 2, margin -2: scales 4 times larger, so
# that values overflow). Then `info` names
# the tensors FP8 would hurt, and a version 1 copy of the trace (the FP8 counts as /tensors fields)
# reads the same. Needs a Python with torch, numpy and h5py ($AMPDIAG_PYTHON, the
# source tree's .venv, python3); SKIP without.
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
K=5 # steps of the traced runs
run() { "$AMPDIAG" run --progress none --trace-every 1 "$@" >/dev/null 2>&1 || { echo "Bail out! ampdiag run $* failed"; exit 1; }; }
run --steps 20 -o "$T/a.h5" --save-weights "$T/w0.h5"
k=1
while [ $k -lt $K ]; do
    run --steps $k --init-from "$T/w0.h5" -o "$T/s$k.h5" --save-weights "$T/w$k.h5"
    k=$((k + 1))
done
run --steps $K --init-from "$T/w0.h5" -o "$T/b.h5"
run --steps $K --init-from "$T/w0.h5" -o "$T/c.h5" --fp8-amax-history 2 --fp8-margin -2
"$AMPDIAG" info "$T/b.h5" --what-if fp8 >"$T/info.txt" 2>&1 || { echo "Bail out! ampdiag info failed"; exit 1; }
"$AMPDIAG" info "$T/b.h5" >"$T/info-plain.txt" 2>&1 || { echo "Bail out! ampdiag info failed"; exit 1; }
"$AMPDIAG" info --format json "$T/b.h5" >"$T/info.json" 2>&1 || { echo "Bail out! ampdiag info --format json failed"; exit 1; }
"$AMPDIAG" info --format json "$T/c.h5" >"$T/info-c.json" 2>&1 || { echo "Bail out! ampdiag info --format json failed"; exit 1; }
"$AMPDIAG" compare "$T/b.h5" "$T/c.h5" --what-if fp8 >"$T/compare.txt" 2>&1 || { echo "Bail out! ampdiag compare failed"; exit 1; }
"$AMPDIAG" compare "$T/b.h5" "$T/c.h5" >"$T/compare-plain.txt" 2>&1 || { echo "Bail out! ampdiag compare failed"; exit 1; }
"$AMPDIAG" compare --format json "$T/b.h5" "$T/c.h5" >"$T/compare.json" 2>&1 || { echo "Bail out! ampdiag compare --format json failed"; exit 1; }
"$py" - "$T" $K "$AMPDIAG" <<'PY'
import sys, json, h5py, numpy as np, torch
T, K, AMPDIAG = sys.argv[1], int(sys.argv[2]), sys.argv[3]
n = 0
failed = 0
def ok(cond, msg):
    global n, failed
    n += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n, msg))
    failed |= not cond

def weights(path):
    """{layer: float32 vector of all its parameters, in the trace's order (weight, bias)}"""
    params = {}
    def keep(k, o):
        if isinstance(o, h5py.Dataset):
            params[k] = o[...]
    with h5py.File(path, "r") as f:
        f.visititems(keep)
    by_layer = {}
    for k in sorted(params):  # /<layer>/<param>
        by_layer.setdefault(k.split("/")[0], []).append(params[k].ravel())
    return {l: torch.from_numpy(np.concatenate(v).astype(np.float32)) for l, v in by_layer.items()}

W = [weights("%s/w%d.h5" % (T, k)) for k in range(K)]  # the weights each step starts from
# (format, torch dtype, max finite, smallest normal, overflow: |y| above (e4m3) / from (e5m2))
FMTS = {"e4m3": (torch.float8_e4m3fn, 448.0, 2.0 ** -6, lambda a: a > 464.0),
        "e5m2": (torch.float8_e5m2, 57344.0, 2.0 ** -14, lambda a: a >= 61440.0)}

def cast_counts(x, fmt, scale):
    dt, _, min_normal, over = FMTS[fmt]
    v = x * torch.tensor(scale, dtype=torch.float32)  # float32 product, as TE scales
    y = v.to(dt).to(torch.float32)                      # (torch saturates: overflow counted apart)
    return (int(over(v.abs().double()).sum()), int(((x != 0) & (y == 0)).sum()),
            int(((y != 0) & (y.abs() < min_normal)).sum()))

def delayed_scale(fmt, amaxes, margin, prev):
    """TE's delayed scaling, amax_compute_algo "max", in float32 (independent of ampdiag)"""
    if not amaxes or max(amaxes) <= 0:
        return prev
    s = np.float32(np.float32(FMTS[fmt][1]) / np.float32(max(amaxes)))
    return float(np.float32(s / np.float32(2.0 ** margin)))

def read(path):
    with h5py.File(path, "r", swmr=True) as f:
        layers = [x.decode() if isinstance(x, bytes) else x for x in f["layers"]["name"]]
        kinds = h5py.check_enum_dtype(f["whatif"].dtype["kind"])
        scal = h5py.check_enum_dtype(f["whatif"].dtype["scaling"])
        fmts = {(x.decode() if isinstance(x, bytes) else x): int(i) for i, x in zip(f["formats"]["index"], f["formats"]["name"])}
        return (dict(f.attrs), layers, kinds, scal, fmts, f["whatif"][...])

with h5py.File(T + "/b.h5", "r", swmr=True) as f:
    ok(int(f.attrs["format_version"]) == 2 and "e4m3_underflow" not in f["tensors"].dtype.names,
       "the trace is version 2: no FP8 fields in /tensors, the counts are in /whatif")

def check(path, hist, margin):
    attrs, layers, kinds, scal, fmts, rows = read(path)
    ok(int(attrs["fp8_amax_history"]) == hist and int(attrs["fp8_margin"]) == margin and
       attrs["fp8_amax_compute_algo"] in (b"max", "max"), "%s: the recipe is in the attributes (history %d, margin %d)" % (path[-4:], hist, margin))
    wrows = rows[rows["kind"] == kinds["weight"]]
    checked = bad = 0
    worst = []
    for fmt in FMTS:
        for li, name in enumerate(layers):
            if name not in W[0]:
                continue
            prev = 1.0
            for s in range(K):
                x = W[s][name]
                amax = [float(W[j][name].abs().max()) for j in range(max(0, s - hist), s)]
                sc = delayed_scale(fmt, amax, margin, prev)
                prev = sc
                for scaling, want_scale in (("none", 1.0), ("delayed", sc)):
                    r = wrows[(wrows["step"] == s) & (wrows["layer"] == li) & (wrows["format"] == fmts[fmt]) &
                              (wrows["scaling"] == scal[scaling])]
                    if scaling == "none" and margin != 0:
                        continue
                    want = cast_counts(x, fmt, want_scale)
                    got = (int(r["overflow"][0]), int(r["underflow"][0]), int(r["subnormal"][0])) if len(r) == 1 else None
                    good = len(r) == 1 and float(r["scale"][0]) == want_scale and got == want and int(r["count"][0]) == x.numel()
                    checked += 1
                    if not good:
                        bad += 1
                        if bad <= 5:
                            print("# %s step %d %s %s: trace scale %s counts %s, by casting scale %r counts %s" %
                                  (name, s, fmt, scaling, r["scale"] if len(r) else None, got, want_scale, want))
                    if scaling == "delayed" and s == K - 1:
                        worst.append("%s %s scale %.6g: %d flush, %d subnormal, %d overflow" % (name, fmt, sc, *want[1:], want[0]))
    for w_ in worst[:4]:
        print("# " + w_)
    ok(checked >= 4 * K * 2 and bad == 0, "%s: %d weight rows (overflow, flush, subnormal; steps 0-%d, e4m3 and e5m2, unscaled%s and delayed) equal PyTorch's casts, scale included"
       % (path[-4:], checked, K - 1, "" if margin == 0 else " not checked"))
    # every traced kind but the update has delayed rows for both formats, with a scale > 0
    d = rows[rows["scaling"] == scal["delayed"]]
    kset = {int(k) for k in d["kind"]}
    ok(kset == {kinds[k] for k in ("activation", "activation_grad", "weight", "weight_grad")} and (d["scale"] > 0).all(),
       "%s: delayed rows for activations, weights and their gradients (not updates)" % path[-4:])

check(T + "/b.h5", 1024, 0)
check(T + "/c.h5", 2, -2)

info = json.load(open(T + "/info.json"))
w = info["what_if"]
ok("e4m3" in w and "e5m2" in w and w["e4m3"]["all"]["values"] == w["fp16"]["all"]["values"],
   "info JSON has the e4m3 and e5m2 what-if counts over the same values as fp16")
hurt = w["e4m3"]["hurt_most"]
ok(len(hurt) >= 1 and all(h["overflow_fraction"] + h["underflow_fraction"] >= 1e-3 for h in hurt) and
   all(hurt[i]["overflow_fraction"] + hurt[i]["underflow_fraction"] >= hurt[i + 1]["overflow_fraction"] + hurt[i + 1]["underflow_fraction"] for i in range(len(hurt) - 1)),
   "info JSON names the tensors unscaled E4M3 would hurt most, largest first (%s)" % [(h["layer"], h["kind"]) for h in hurt])
txt = " ".join(open(T + "/info.txt").read().split()) # unwrapped
ok("e4m3 (unscaled) would hurt most:" in txt and hurt[0]["layer"] in txt, "info's text names them too (--what-if fp8)")
plain = " ".join(open(T + "/info-plain.txt").read().split())
ok("would hurt most" not in plain and
   "the traces also hold what-if counts of e4m3,e5m2,e4m3_delayed,e5m2_delayed: --what-if fp8" in plain,
   "without --what-if, one line says the FP8 what-if counts exist and how to show them")
# the delayed-scaling recipe's findings: computed once, the same in info and compare, text and JSON
f8 = info["fp8"]
ok(f8["recipe"]["amax_history"] == 1024 and f8["recipe"]["margin"] == 0 and f8["recipe"]["formats"] ==
   {"activation": "e4m3", "weight": "e4m3", "activation_grad": "e5m2", "weight_grad": "e5m2"},
   "info JSON: the recipe (history 1024, margin 0, E4M3 forward, E5M2 gradients)")
f8c = json.load(open(T + "/info-c.json"))["fp8"]
wh = [h for h in f8c["hurt"] if h["kind"] == "weight"]
ok(f8c["hurt_count"] >= len(f8c["hurt"]) >= 1 and len(wh) >= 1 and
   all(h["reason"] == "margin" and h["format"] == "e4m3" and h["overflow_fraction"] > 0.01 and
       h["overflow"] == round(h["overflow_fraction"] * h["values"]) for h in wh) and
   all(f8c["hurt"][i]["overflow_fraction"] + f8c["hurt"][i]["underflow_fraction"] >=
       f8c["hurt"][i + 1]["overflow_fraction"] + f8c["hurt"][i + 1]["underflow_fraction"] for i in range(len(f8c["hurt"]) - 1)),
   "margin -2: info names the weights E4M3 would overflow, because of the margin, largest share first (%s)"
   % [(h["layer"], h["kind"], round(h["overflow_fraction"], 4)) for h in f8c["hurt"]])
# the weight rows of c.h5 checked above: the findings' overflow of a weight tensor is their sum
rows = read(T + "/c.h5")
attrs, layers, kinds, scal, fmts, wr = rows
w0 = wh[0]
sel = wr[(wr["layer"] == layers.index(w0["layer"])) & (wr["kind"] == kinds["weight"]) &
         (wr["format"] == fmts["e4m3"]) & (wr["scaling"] == scal["delayed"])]
ok(int(sel["overflow"].sum()) == w0["overflow"] and int(sel["count"].sum()) == w0["values"],
   "%s weight: the finding's %d overflows of %d values are the sum of its /whatif rows" % (w0["layer"], w0["overflow"], w0["values"]))
cj = json.load(open(T + "/compare.json"))
ok(cj["runs"][0]["fp8"] == info["fp8"] and cj["runs"][1]["fp8"] == f8c, "compare's JSON has each run's fp8 object as info has it")
ct = " ".join(open(T + "/compare.txt").read().split()) # unwrapped
ok(all(h["why"] in ct for h in f8c["hurt"]) and "fp8 recipe (Transformer Engine delayed scaling, amax history 2, margin -2" in ct,
   "compare's text says which tensors the recipe would hurt and why, as the JSON does (--what-if fp8)")
cp = " ".join(open(T + "/compare-plain.txt").read().split())
ok("fp8 recipe (Transformer Engine" not in cp and "--what-if fp8" in cp,
   "compare without --what-if: no FP8 section, one line says it exists")
# a version 1 trace of the same run, as the writers before version 2 made it (FP8 counts as the
# optional /tensors fields e4m3_* / e5m2_*, no /formats or /whatif): info reads the same
# unscaled counts from it
import shutil, subprocess
shutil.copy(T + "/b.h5", T + "/v1.h5")
with h5py.File(T + "/v1.h5", "r+") as f:
    attrs, layers, kinds, scal, fmts, wr = read(T + "/b.h5")
    t = f["tensors"][...]
    fields = [(fm + "_" + c, "<u8") for fm in ("e4m3", "e5m2") for c in ("overflow", "underflow", "subnormal")]
    nt = np.zeros(t.shape, dtype=np.dtype([(x, t.dtype[x]) for x in t.dtype.names] + fields))
    for name in t.dtype.names:
        nt[name] = t[name]
    none = wr[wr["scaling"] == scal["none"]]
    for fm in ("e4m3", "e5m2"):
        r = none[none["format"] == fmts[fm]]  # in the order of the tensor records
        for c in ("overflow", "underflow", "subnormal"):
            nt[fm + "_" + c] = r[c]
    del f["tensors"], f["whatif"], f["formats"]
    f.create_dataset("tensors", data=nt, maxshape=(None,), chunks=True)
    f.attrs["format_version"] = np.int64(1)
v1 = json.loads(subprocess.run([AMPDIAG, "info", "--format", "json", T + "/v1.h5"], capture_output=True, check=True).stdout)
ok(v1["trace_format_version"] == 1 and v1["what_if"]["e4m3"] == info["what_if"]["e4m3"] and
   v1["what_if"]["e5m2"] == info["what_if"]["e5m2"] and v1["fp8"] is None and "e4m3_delayed" not in v1["what_if"],
   "a version 1 trace with the FP8 fields in /tensors reads the same unscaled counts (and no delayed ones)")
print("1..%d" % n)
sys.exit(1 if failed else 0)
PY
