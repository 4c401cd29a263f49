#!/bin/sh
# t_consistency.sh - one trace tells one story: `ampdiag run`'s closing summary, `ampdiag info`,
# `ampdiag compare` and `ampdiag plot` read every trace through one loader and one set of
# findings, so every figure they share must be the same in all of them: the loss scale (initial,
# minimum and its step, final, backoffs, growths), skipped steps, divergence, lost-update
# fractions, FP16 activation headroom, the first NaN/inf in the forward pass (step, layer), the
# eval loss and accuracy, and the labels of the runs. Checked on the reference traces and on
# scenario runs that exercise each figure (healthy, forward overflow, scale collapse, a
# learning rate that diverges, lost updates).

AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP python3 is needed to read the JSON"
    exit 0
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/t_consistency.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT

R="--overwrite --progress none"
run() { # name args...: the trace T/name.h5 and its summary T/name.summary
    name=$1
    shift
    "$AMPDIAG" run "$@" $R -o "$T/$name.h5" >"$T/$name.summary" 2>"$T/$name.err" ||
        echo "$name" >>"$T/failed-runs"
}

run healthy-fp32 --scenario healthy --precision fp32 --steps 200 &
run healthy-fp16 --scenario healthy --steps 200 &
wait
run overflow --scenario fp16-forward-overflow --steps 30 &
run collapse --scenario fp16-scale-collapse --steps 40 &
wait
run diverge --scenario lr-diverge --precision fp16 --steps 40 &
run lost --scenario bf16-pure-lost-updates --steps 60 &
wait

RUNS="healthy-fp32 healthy-fp16 overflow collapse diverge lost"
if [ -f "$T/failed-runs" ]; then
    echo "Bail out! ampdiag run failed for: $(cat "$T/failed-runs")"
    exit 1
fi

# info for every trace, compare over all of them (the reference traces too), plot of them
paths=""
for r in $RUNS; do
    "$AMPDIAG" info --format json "$T/$r.h5" >"$T/$r.info.json" || echo "info $r" >>"$T/failed"
    paths="$paths $T/$r.h5"
done
for f in v1-fp32-complete v1-fp16-diverged v1-cutoff; do
    cp "$srcdir/traces/$f.h5" "$T/$f.h5" && chmod u+w "$T/$f.h5"
    "$AMPDIAG" info --format json "$T/$f.h5" >"$T/$f.info.json" || echo "info $f" >>"$T/failed"
done
"$AMPDIAG" compare $paths --format json >"$T/compare.json" 2>"$T/compare.err"
[ $? -le 1 ] || echo "compare" >>"$T/failed"
"$AMPDIAG" compare "$T/v1-fp32-complete.h5" "$T/v1-fp16-diverged.h5" "$T/v1-cutoff.h5" \
    --format json >"$T/compare-ref.json" 2>"$T/compare-ref.err"
[ $? -le 1 ] || echo "compare of the reference traces" >>"$T/failed"
"$AMPDIAG" plot $paths -o "$T/charts" >"$T/plot.out" 2>&1 || echo "plot" >>"$T/failed"
if [ -f "$T/failed" ]; then
    echo "Bail out! a command failed: $(cat "$T/failed")"
    cat "$T/compare.err" "$T/plot.out" | sed 's/^/# /'
    exit 1
fi

T="$T" RUNS="$RUNS" python3 - <<'EOF'
import json, math, os, re, sys

T = os.environ["T"]
runs = os.environ["RUNS"].split()
n = 0
failed = 0

def ok(cond, desc, why=""):
    global n, failed
    n += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n, desc))
    if not cond:
        failed = 1
        for line in str(why).splitlines():
            print("# " + line)

def load(p):
    with open(p) as f:
        return json.load(f)

def scale(v):
    """A loss scale as the text outputs print it: 2^k for powers of two, else %g."""
    m, e = math.frexp(v)
    return "2^%d" % (e - 1) if v > 0 and math.isfinite(v) and m == 0.5 else "%g" % v

def pct(v):
    """A share as the text outputs print it (msg_pct)."""
    if v == 0:
        return "0%"
    return ("%.2g%%" if abs(v) < 1e-4 else "%.3g%%") % (100 * v)

def g(v, digits):
    if v is None:
        return "nan"
    return "%.*g" % (digits, v)

# 1. info and compare hold the same findings for every trace (compare in one invocation over
#    the scenario traces, and over the reference traces)
for comp, names in (("compare.json", runs),
                    ("compare-ref.json", ["v1-fp32-complete", "v1-fp16-diverged", "v1-cutoff"])):
    c = load(os.path.join(T, comp))
    byp = {os.path.basename(r["path"])[:-3]: r for r in c["runs"]}
    for name in names:
        info = load(os.path.join(T, name + ".info.json"))
        cr = byp.get(name)
        ok(cr is not None and cr["findings"] == info["findings"],
           "%s: info and compare report the same findings" % name,
           "info:    %s\ncompare: %s" % (info["findings"], cr and cr["findings"]))
        # info's own sections agree with its findings
        f = info["findings"]
        ls = info["loss_scale"]
        ok(ls is None or all(ls[k] == f["loss_scale"][k] for k in
                             ("initial", "min", "final", "backoffs", "growths", "overflows_at_min")),
           "%s: info's loss-scale section is its findings'" % name)
        ok(info["skipped"]["count"] == f["skipped"]["count"] and
           info["skipped"]["first_step"] == f["skipped"]["first_step"],
           "%s: info's skipped section is its findings'" % name)
        ok(cr is None or (cr["stability"]["loss_scale"]["backoffs"] == f["loss_scale"]["backoffs"] and
                          cr["stability"]["loss_scale"]["min"] == f["loss_scale"]["min"] and
                          cr["stability"]["skipped"] == f["skipped"]["count"] and
                          cr["updates"]["lost_fraction"] == f["updates"]["lost_fraction"]),
           "%s: compare's stability and update sections are its findings'" % name)

# 2. the run summary printed the same figures
c = load(os.path.join(T, "compare.json"))
labels = {}
for r in c["runs"]:
    labels[os.path.basename(r["path"])[:-3]] = r["label"]
for name in runs:
    s = " ".join(open(os.path.join(T, name + ".summary")).read().split()) # unwrapped
    f = load(os.path.join(T, name + ".info.json"))["findings"]
    L = f["loss_scale"]
    if L["scaled"]:
        want = "loss scale %s -> %s (min %s at step %d), %d backoffs, %d growths" % (
            scale(L["initial"]), scale(L["final"]), scale(L["min"]), L["min_step"],
            L["backoffs"], L["growths"])
        ok(want in s, "%s: run's summary gives the scale, its minimum and step, backoffs and growths of the findings (%s)" % (name, want), s)
    sk = f["skipped"]["count"]
    want = ("%d skipped steps" % sk) if sk else "no skipped steps"
    ok(want in s, "%s: run's summary: %s" % (name, want), s)
    ok(("diverged from step %s: " % f["divergence_step"] in s) == f["diverged"],
       "%s: run's summary and the findings agree on divergence (%s)" % (name, f["diverged"]), s)
    u = f["updates"]
    if u["nonzero"]:
        want = "lost-update share %s" % pct(u["lost_fraction"])
        ok(want in s, "%s: run's summary: %s" % (name, want), s)
    h = f["fp16_activation_headroom"]
    fh = load(os.path.join(T, name + ".info.json"))["figures"]["fp16_headroom"]
    if fh["value"] is not None or fh["text"] != "-":
        want = "FP16 headroom %s" % fh["text"]
        same = (h is None or fh["kind"] != "activation" or fh["value"] is None or
                abs(fh["value"] - h["binades"]) < 1e-9)
        ok(want in s and same, "%s: run's summary: %s (the activation headroom when it is the least)" %
           (name, want), s)
    nf = f["first_nonfinite_forward"]
    if nf:
        want = "in %s activations from step %d (first in forward order; %d non-finite activation values over " \
               "the traced steps)" % (nf["layer"], nf["step"], nf["values"])
        ok(want in s, "%s: run's summary: first NaN/inf in the forward pass at step %d in %s" % (name, nf["step"], nf["layer"]), s)
    e = f["eval"]
    if e:
        want = "final eval loss %s" % g(e["loss"], 4)
        if e["metric_name"] == "accuracy" and e["metric"] is not None:
            want += ", accuracy %.1f%%" % (100 * e["metric"])
        ok(want in s, "%s: run's summary: %s" % (name, want), s)
    # info's text shows the same accuracy
    # (checked through the JSON above; the text renderer prints the same number)

# 2b. the noise band measures the quantity it judges: 2 standard errors of the baseline's eval
#     loss over its validation examples (recorded by the run); the reference traces, written
#     before loss_se existed, read it as absent and fall back to the training loss's window
info = load(os.path.join(T, "healthy-fp32.info.json"))
se = info["eval"]["loss_se"]
nb = c["noise_band"]
ok(se is not None and se > 0 and nb["source"] == "baseline_eval_standard_error" and
   abs(nb["relative"] - max(0.01, 2 * se / abs(info["eval"]["loss"]))) < 1e-12,
   "noise band = max(1%%, 2 SE / eval loss) of the baseline: %s (SE %s)" % (nb["relative"], se), nb)
cr = load(os.path.join(T, "compare-ref.json"))
ref = load(os.path.join(T, "v1-fp32-complete.info.json"))
ok(ref["eval"]["loss_se"] is None and cr["noise_band"]["source"] == "baseline_final_window",
   "a trace without loss_se: null, and the band from the training loss's final window", cr["noise_band"])

# 3. plot labels the runs as compare does, and counts the same backoffs and growths
gp = open(os.path.join(T, "charts", "loss.gp")).read()
m = re.search(r"array run_title\[\d+\] = \[(.*)\]", gp)
titles = re.findall(r"'([^']*)'", m.group(1)) if m else []
ok(titles == [labels[r] for r in runs], "plot's charts label the runs as compare does: %s" % titles,
   "compare: %s" % [labels[r] for r in runs])
gp = open(os.path.join(T, "charts", "loss-scale.gp")).read()
nb = int(re.search(r"^nbackoff = (\d+)$", gp, re.M).group(1))
ng = int(re.search(r"^ngrowth = (\d+)$", gp, re.M).group(1))
want_b = sum(load(os.path.join(T, r + ".info.json"))["findings"]["loss_scale"]["backoffs"] for r in runs)
want_g = sum(load(os.path.join(T, r + ".info.json"))["findings"]["loss_scale"]["growths"] for r in runs)
ok(nb == want_b and ng == want_g and nb > 0,
   "plot's loss-scale chart counts %d backoffs and %d growths, as the findings do" % (nb, ng),
   "findings: %d backoffs, %d growths" % (want_b, want_g))

print("1..%d" % n)
sys.exit(failed)
EOF
