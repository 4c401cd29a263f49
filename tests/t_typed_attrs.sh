#!/bin/sh
# t_typed_attrs.sh - the settings the rules read are typed attributes (optimizer_eps,
# optimizer_state_format, scaler_min_scale, ...; traces/FORMAT.md): a trace that has only
# them (no "hyperparameters" / "scaler" text, as a trainer writing through the public API
# would leave it) gets the same findings and the same verdict as ampdiag's own trace, and so
# does an older trace that has only the text. Checked on the scenarios whose rules read those
# settings (AdamW eps in FP16 state; the scaler's floor). Needs h5py to edit the attributes
# ($AMPDIAG_PYTHON, the source tree's .venv, python3); SKIP without it.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import h5py'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with h5py"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_typed.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
# strip FILE OUT MODE: a copy without the text settings (typed) or without the typed ones (text)
strip() {
    cp "$1" "$2" && "$py" - "$2" "$3" <<'PY'
import sys, h5py
path, mode = sys.argv[1], sys.argv[2]
with h5py.File(path, "r+") as f:
    for k in list(f.attrs):
        typed = k.startswith("optimizer_") or k.startswith("scaler_")
        if (mode == "typed" and k in ("hyperparameters", "scaler")) or (mode == "text" and typed):
            del f.attrs[k]
PY
}
# the findings, the verdict and its reasons: what must not depend on how the settings are stored
view() {
    "$AMPDIAG" info --format json "$1" | "$py" -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d["findings"], sort_keys=True))'
    "$AMPDIAG" compare --format json "$2" "$1" | "$py" -c 'import json,sys; d=json.load(sys.stdin); r=d.get("recommendation", d); print(json.dumps(r, sort_keys=True)[:100000])'
}
"$AMPDIAG" run --steps 100 --progress none -o "$T/base.h5" >/dev/null 2>&1
for sc in fp16-adam-eps fp16-scale-collapse; do
    "$AMPDIAG" run --scenario $sc --steps 120 --progress none -o "$T/$sc.h5" >/dev/null 2>&1
    ok $? "$sc: run"
    strip "$T/$sc.h5" "$T/$sc-typed.h5" typed && strip "$T/$sc.h5" "$T/$sc-text.h5" text
    ok $? "$sc: copies with only the typed settings and with only the text ones"
    view "$T/$sc.h5" "$T/base.h5" >"$T/$sc.view"
    view "$T/$sc-typed.h5" "$T/base.h5" >"$T/$sc-typed.view"
    view "$T/$sc-text.h5" "$T/base.h5" >"$T/$sc-text.view"
    cmp -s "$T/$sc.view" "$T/$sc-typed.view"
    ok $? "$sc: typed settings alone give the same findings and verdict"
    cmp -s "$T/$sc.view" "$T/$sc-text.view"
    ok $? "$sc: text settings alone (an older trace) give the same findings and verdict"
done
# the rules did read them: without either, the verdicts change
strip "$T/fp16-adam-eps-typed.h5" "$T/none.h5" text
view "$T/none.h5" "$T/base.h5" >"$T/none.view"
! cmp -s "$T/fp16-adam-eps.view" "$T/none.view"
ok $? "fp16-adam-eps: with neither the typed nor the text settings the report differs (the rule reads them)"
grep -q '"scaler_min_scale"' "$T/fp16-scale-collapse.view" || "$AMPDIAG" info --format json "$T/fp16-scale-collapse.h5" | grep -q '"scaler_min_scale":1'
ok $? "fp16-scale-collapse: the trace holds scaler_min_scale 1"
echo "1..$n"
exit $failed
