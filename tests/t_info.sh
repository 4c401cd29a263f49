#!/bin/sh
# t_info.sh - `ampdiag info` on the reference traces (text and JSON, values worked out by hand
# from tests/trace_synth.h) and its exit status on bad input (2) and on a failed write (3).
AMPDIAG=${AMPDIAG:-./ampdiag}
T=${srcdir:-.}/traces
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_info.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT

$AMPDIAG --help | grep -q '^  info ' ; t $? "ampdiag --help lists info"
$AMPDIAG info --help | grep -q '^usage: ampdiag info TRACE.h5' ; t $? "info --help prints its usage"

# fp32, complete: 60 steps, loss 2.5 * 0.97^step, fc1 activations hold +70000 and -1e5 from
# step 40 (2 values x 20 steps = 40 fp16 overflows of 60 x 3 x 128 = 23040 activation values;
# headroom log2(65504 / 1e5) = -0.61 binades)
# COLUMNS: lines as long as they are (the default wraps at 100 columns: checked at the end)
export COLUMNS=300
out=$($AMPDIAG info "$T/v1-fp32-complete.h5"); rc=$?
[ $rc -eq 0 ] ; t $? "fp32 trace: exit 0"
echo "$out" | grep -q 'v1-fp32-complete.h5: complete, 60 steps (0..59), fp32$' ; t $? "fp32: status, steps, precision"
echo "$out" | grep -Eq '^  first training loss +2\.5 \(step 0\)$' &&
echo "$out" | grep -Eq '^  final training loss \(last step\) +0\.41445 \(step 59\)$' &&
echo "$out" | grep -Eq '^  lowest training loss +0\.41445 \(step 59\)$' ; t $? "fp32: loss first -> last, min (figures by name)"
echo "$out" | grep -Eq '^  final eval loss +1\.41, accuracy 79\.5% at step 59 \(3 evaluations\)$' ; t $? "fp32: last evaluation"
echo "$out" | grep -Eq '^  loss scale +none' ; t $? "fp32: no loss scaling"
echo "$out" | grep -Eq '^events +32: clipped 32$' ; t $? "fp32: 32 clipped-step events"
echo "$out" | grep -A2 '^fp16 overflow headroom' | grep -Eq '^  fc1 +activation +-0\.6 +1e\+05 +40 +overflows$' ; t $? "fp32: fc1 activation has the least fp16 overflow headroom (-0.6, step 40)"
echo "$out" | grep -A2 '^bf16 overflow headroom' | grep -Eq '^  fc1 +activation +\+111\.4 ' ; t $? "fp32: ... and 111.4 binades in bf16"
echo "$out" | grep -Eq '^  fp16 +activation +23040 +40 \(0\.174%\) +0 +0$' ; t $? "fp32: what-if fp16: 40 of 23040 activation values overflow"
echo "$out" | grep -Eq '^  bf16 +all +115200 +0 +0 +0$' ; t $? "fp32: what-if bf16: nothing out of range"
echo "$out" | grep -q '^lost-update share with FP16 weights, lost-update share with BF16 weights: not recorded in this trace$' ; t $? "fp32: a reference trace has no lost_if_* fields: says so"

# a trace with the what-if lost-update counts: bf16 autocast (FP32 master weights) on updates far
# below BF16's resolution
$AMPDIAG run --scenario bf16-pure-lost-updates --precision bf16 --steps 10 --progress none -o "$tmp/lu.h5" >/dev/null 2>&1 ; t $? "a bf16 run of scenario bf16-pure-lost-updates"
out=$($AMPDIAG info "$tmp/lu.h5")
echo "$out" | grep -Eq '^lost-update share with FP16 weights: [0-9.]+% \([0-9]+ of [0-9]+ non-zero update values\)$' &&
echo "$out" | grep -Eq '^lost-update share with BF16 weights: (9[0-9]|100)(\.[0-9]+)?% \([0-9]+ of [0-9]+ non-zero update values\)$' ; t $? "lu: lost-update shares with FP16 / BF16 weights (over 90% with bf16)"
$AMPDIAG info "$tmp/lu.h5" --format json > "$tmp/lu.json" ; t $? "lu: --format json exits 0"

# fp16, diverged: scale 2^16, backoffs after the skipped steps 12 and 25, growth after 30,
# NaN loss at the last step
out=$($AMPDIAG info "$T/v1-fp16-diverged.h5"); rc=$?
[ $rc -eq 0 ] ; t $? "fp16 trace: exit 0 (a diverged run is data, not an error)"
echo "$out" | grep -q 'v1-fp16-diverged.h5: diverged after 40 steps (0..39), fp16$' ; t $? "fp16: diverged"
echo "$out" | grep -Eq '^  final training loss \(last step\) +nan \(step 39\)$' &&
echo "$out" | grep -Eq '^  lowest training loss +0\.860896 \(step 35\)$' &&
echo "$out" | grep -Eq '^  final-window training loss +inf \(1 steps with a non-finite loss\)$' ; t $? "fp16: NaN loss at the end, min before"
echo "$out" | grep -Eq '^  loss scale +2\^16 initial, lowest 2\^14 \(step 26\), final 2\^15; 2 backoffs, 1 growths$' ; t $? "fp16: loss scale summary"
echo "$out" | grep -Eq '^  skipped steps +2 \(5%\), 2 after calibration; first at step 12: inf in fc2 weight_grad$' ; t $? "fp16: skipped steps with the first reason"
echo "$out" | grep -Eq '^events +8: nan_forward 1, inf_backward 2, scale_backoff 2, scale_growth 1, loss_spike 1, divergence 1$' ; t $? "fp16: events by code"
echo "$out" | grep -Eq '^non-finite +1 NaN, 2 \+inf, 0 -inf values recorded$' ; t $? "fp16: non-finite values"

# cut off: flushed every 8 steps, killed after 30: 24 steps on disk
out=$($AMPDIAG info "$T/v1-cutoff.h5"); rc=$?
[ $rc -eq 0 ] ; t $? "cut-off trace: exit 0"
echo "$out" | grep -q "v1-cutoff.h5: cut off (status still 'running'.*), 24 steps up to the last flush (0..23), bf16" ; t $? "cut-off: says so, 24 steps"

# JSON
for f in v1-fp32-complete v1-fp16-diverged v1-cutoff; do
    $AMPDIAG info "$T/$f.h5" --format json > "$tmp/$f.json"; t $? "$f: --format json exits 0"
done
grep -q '"status":"complete","cut_off":false' "$tmp/v1-fp32-complete.json" ; t $? "json: status and cut_off"
grep -q '"backoffs":2,"growths":1' "$tmp/v1-fp16-diverged.json" ; t $? "json: loss scale backoffs and growths"
grep -q '"status":"running","cut_off":true' "$tmp/v1-cutoff.json" ; t $? "json: cut off"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp" <<'EOF'
import json, math, sys
d = sys.argv[1]
a = json.load(open(d + "/v1-fp32-complete.json"))
b = json.load(open(d + "/v1-fp16-diverged.json"))
c = json.load(open(d + "/v1-cutoff.json"))
checks = [
    a["counts"] == {"layers": 3, "steps": 60, "tensors": 900, "histograms": 90, "events": 32, "evals": 3},
    a["what_if"]["fp16"]["activation"]["overflow"] == 40,
    a["what_if"]["fp16"]["activation"]["values"] == 23040,
    a["what_if"]["bf16"]["all"]["overflow"] == 0,
    a["headroom"]["fp16"]["overflow"][0]["layer"] == "fc1",
    abs(a["headroom"]["fp16"]["overflow"][0]["binades"] - math.log2(65504 / 1e5)) < 1e-6,
    a["headroom"]["fp16"]["overflow"][0]["step"] == 40,
    a["attributes"]["seed"] == 1234 and a["attributes"]["precision"] == "fp32",
    a["loss"]["first"] == 2.5 and a["eval"]["count"] == 3,
    b["loss"]["last"] is None and b["loss"]["nonfinite"] == 1,
    b["skipped"] == {"count": 2, "fraction": 0.05, "first_step": 12, "first_reason": "inf in fc2 weight_grad"},
    b["loss_scale"]["initial"] == 65536 and b["loss_scale"]["min"] == 16384 and b["loss_scale"]["final"] == 32768,
    b["events"]["by_code"]["scale_backoff"] == 2 and b["events"]["list"][0]["layer"] == "fc2",
    b["nonfinite"] == {"nan": 1, "posinf": 2, "neginf": 0},
    c["cut_off"] is True and c["counts"]["steps"] == 24 and c["counts"]["tensors"] == 240,
    a["lost_if_weights"] is None and b["lost_if_weights"] is None,
]
try:
    u = json.load(open(d + "/lu.json"))["lost_if_weights"]
    checks += [u["bf16_fraction"] > 0.9, u["fp16"] < u["bf16"] <= u["nonzero_updates"],
               abs(u["bf16_fraction"] - u["bf16"] / u["nonzero_updates"]) < 1e-12]
except Exception:
    checks.append(False)
bad = [i for i, ok in enumerate(checks) if not ok]
sys.exit(1 if bad else 0)
EOF
    t $? "json: parses, and holds the expected values"
else
    echo "ok $((n=n+1)) # SKIP python3 not found: JSON not parsed"
fi

# bad input: exit 2 with a message naming the file
printf 'step,loss\n0,2.3\n' > "$tmp/text.h5"
err=$($AMPDIAG info "$tmp/text.h5" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$err" | grep -q "text.h5' is not an HDF5 file" ; t $? "a text file: exit 2, named"
err=$($AMPDIAG info "$tmp/nope.h5" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$err" | grep -q "nope.h5': no such file" ; t $? "a missing file: exit 2, named"
$AMPDIAG info "$tmp" 2>/dev/null; [ $? -eq 2 ] ; t $? "a directory: exit 2"
head -c 20000 "$T/v1-fp32-complete.h5" > "$tmp/cut.h5"
err=$($AMPDIAG info "$tmp/cut.h5" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$err" | grep -q "cut.h5' is truncated" ; t $? "a truncated copy: exit 2, says truncated"
$AMPDIAG info 2>/dev/null; [ $? -eq 2 ] ; t $? "no trace: exit 2"
$AMPDIAG info "$T/v1-cutoff.h5" "$T/v1-cutoff.h5" 2>/dev/null; [ $? -eq 2 ] ; t $? "two traces: exit 2"
$AMPDIAG info "$T/v1-cutoff.h5" --format xml 2>/dev/null; [ $? -eq 2 ] ; t $? "--format xml: exit 2"
$AMPDIAG info "$T/v1-cutoff.h5" --top -1 2>/dev/null; [ $? -eq 2 ] ; t $? "--top -1: exit 2"
$AMPDIAG info "$T/v1-cutoff.h5" --bogus 2>/dev/null; [ $? -eq 2 ] ; t $? "an unknown option: exit 2"
$AMPDIAG info "$T/v1-cutoff.h5" --top 0 --format=json >/dev/null ; t $? "--format=json and --top 0 accepted"

# without COLUMNS, not on a terminal: no line wider than 100 columns (the traces' own long names
# aside: a word longer than a line stands alone)
for f in v1-fp32-complete v1-fp16-diverged v1-cutoff; do
    COLUMNS= $AMPDIAG info "$T/$f.h5" > "$tmp/$f.txt"
done
COLUMNS= $AMPDIAG run --scenario fp16-forward-overflow --precision fp16 --steps 20 --progress none -o "$tmp/ov.h5" > "$tmp/ov-run.txt" 2>&1
COLUMNS= $AMPDIAG info "$tmp/ov.h5" > "$tmp/ov.txt"
wide=$(cat "$tmp"/*.txt | awk 'length($0) > 100' | grep -v '/' | head -3)
[ -z "$wide" ] ; t $? "info and the run summary wrap at 100 columns when not on a terminal${wide:+: $wide}"
wide=$(for f in v1-fp32-complete v1-fp16-diverged; do COLUMNS=70 $AMPDIAG info "$T/$f.h5"; done | awk 'length($0) > 70' | grep -v / | head -3)
[ -z "$wide" ] ; t $? "... and at \$COLUMNS (70), tables included${wide:+: $wide}"

# I/O failure writing the output: exit 3
if [ -w /dev/full ]; then
    $AMPDIAG info "$T/v1-fp32-complete.h5" > /dev/full 2>/dev/null; [ $? -eq 3 ] ; t $? "output to a full device: exit 3"
else
    echo "ok $((n=n+1)) # SKIP /dev/full not writable"
fi

echo "1..$n"
exit $fail
