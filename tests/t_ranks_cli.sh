#!/bin/sh
# t_ranks_cli.sh - `ampdiag info`, `compare` and `plot` of a distributed run's rank traces
# (src/analysis/ranks.h), on the synthetic per-rank traces tests/t_ranks writes (--write DIR):
# a rank-0 trace read with its siblings (a note on stderr), a glob in quotes, --alone; the ranks
# object of info's and compare's JSON (the rank, step and layer named), the rank findings first
# in text and Markdown, --fail-on a rank finding, the ranks chart; groups that are not one run
# (exit 2, the file named). python3 (standard library) checks the JSON.
AMPDIAG=${AMPDIAG:-./ampdiag}
WRITER=${T_RANKS:-./tests/t_ranks}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP python3 is needed to check the JSON"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_ranks_cli.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT

n=0
failed=0
ok() { # status description
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi
}
diag() { sed 's/^/# /' "$@"; }
# jcheck FILE 'python expression over d (the JSON)' description
jcheck() {
    python3 - "$1" "$2" >"$T/jcheck.out" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
def fig(f, k): return f["figures"][k]["value"]
def first(l, id): return next((f for f in l if f["id"] == id), None)
ok = eval(sys.argv[2])
sys.exit(0 if ok else 1)
EOF
    st=$?
    ok $st "$3"
    [ $st -eq 0 ] || diag "$T/jcheck.out"
}

"$WRITER" --write "$T"
ok $? "the synthetic rank traces written (tests/t_ranks --write)"

# ------------------------------------------------------------------ info
"$AMPDIAG" info --format json "$T/repl.rank0.h5" >"$T/repl.json" 2>"$T/repl.err"
ok $? "info of rank 0's trace: exit 0"
grep -q "is rank 0 of 3: read with the 2 other rank traces beside it" "$T/repl.err"
ok $? "info says on stderr that rank 0 is read with its siblings"
jcheck "$T/repl.json" 'd["ranks"]["world_size"] == 3 and d["ranks"]["read"] == 3 and d["ranks"]["sharding"] == "replicated" and [r["rank"] for r in d["ranks"]["ranks"]] == [0, 1, 2]' \
    "info JSON: a ranks object with the 3 ranks, replicated"
jcheck "$T/repl.json" 'd["evidence"][0]["id"] == "rank_first_nonfinite" and fig(d["evidence"][0], "rank") == 1 and fig(d["evidence"][0], "step") == 6 and d["evidence"][0]["layer"] == "fc1" and d["evidence"][0]["kind"] == "activation"' \
    "info JSON: the first finding names rank 1, step 6, fc1 activations"
jcheck "$T/repl.json" 'first(d["ranks"]["findings"], "rank_replica_divergence")["layer"] == "fc2" and fig(first(d["ranks"]["findings"], "rank_replica_divergence"), "first_step") == 4 and fig(first(d["ranks"]["findings"], "rank_skip_disagreement"), "rank") == 2 and d["ranks"]["ranks"][0]["first_nonfinite"] == {"step": 6, "layer": "fc2", "kind": "weight_grad", "phase": "backward"}' \
    "info JSON: fc2's replicas differ from step 4, rank 2 skipped alone, rank 0's own first NaN is the reduced fc2 weight_grad"
"$AMPDIAG" info "$T/repl.rank0.h5" >"$T/repl.txt" 2>/dev/null
grep -q "^ranks  *3 of 3 ranks" "$T/repl.txt" && grep -q "^  rank 1 .*first NaN/inf at step 6: fc1 activation" "$T/repl.txt" &&
    grep -q "^  - fp32: NaN/inf first on rank 1, at step 6 in fc1 activations" "$T/repl.txt"
ok $? "info text: a ranks section, a line per rank, the rank findings"
"$AMPDIAG" info --format json --alone "$T/repl.rank0.h5" >"$T/alone.json" 2>"$T/alone.err"
jcheck "$T/alone.json" 'd["ranks"] is None and d["attributes"]["rank"] == 0' "info --alone: rank 0's trace by itself (no ranks object)"
"$AMPDIAG" info --format json "$T/shard.rank*.h5" >"$T/shard.json" 2>"$T/shard.err"
ok $? "info of a glob in quotes: exit 0"
"$AMPDIAG" info --format json "$T/shard-whole.h5" >"$T/whole.json" 2>/dev/null
python3 - "$T/shard.json" "$T/whole.json" >"$T/cmp.out" 2>&1 <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("fp16", "bf16")
same = all(a["what_if"][k]["all"] == b["what_if"][k]["all"] for k in keys) and a["nonfinite"] == b["nonfinite"]
same = same and a["headroom"] == b["headroom"] and a["lost_updates"] == b["lost_updates"]
print(a["headroom"]["fp16"]["overflow"][:1], b["headroom"]["fp16"]["overflow"][:1])
sys.exit(0 if same else 1)
EOF
ok $? "info of the sharded ranks: what-if totals, headroom and lost updates are the whole run's"
[ $? -eq 0 ] || diag "$T/cmp.out"

# ------------------------------------------------------------------ compare
"$AMPDIAG" compare --format json "$T/repl.rank0.h5" "$T/part.rank*.h5" >"$T/cmp.json" 2>"$T/cmp.err"
ok $? "compare of two groups: exit 0"
jcheck "$T/cmp.json" 'len(d["runs"]) == 2 and d["runs"][0]["ranks"]["read"] == 3 and d["runs"][1]["ranks"]["missing"] == [1] and d["runs"][0]["evidence"][0]["id"] == "rank_first_nonfinite"' \
    "compare JSON: each group one run with its ranks object, the rank findings first"
jcheck "$T/cmp.json" 'fig(first(d["runs"][1]["ranks"]["findings"], "rank_stopped_early"), "rank") == 2 and fig(first(d["runs"][1]["ranks"]["findings"], "rank_stopped_early"), "stop_step") == 4 and fig(first(d["runs"][1]["ranks"]["findings"], "rank_missing"), "rank") == 1' \
    "compare JSON: rank 2 stopped first at step 4, rank 1 is missing"
"$AMPDIAG" compare "$T/repl.rank0.h5" >"$T/cmp.txt" 2>/dev/null
sed -n '/^Ranks/,/^$/p' "$T/cmp.txt" | grep -q "NaN/inf first on rank 1, at step 6"
ok $? "compare text: a Ranks section right after the verdict names rank 1 at step 6"
"$AMPDIAG" compare --format md "$T/repl.rank0.h5" >"$T/cmp.md" 2>/dev/null
grep -q "^### Ranks" "$T/cmp.md" && grep -q "  - fp32: the replicas of fc2 weights differ across ranks from step 4" "$T/cmp.md"
ok $? "compare Markdown: a Ranks section with the rank findings"
"$AMPDIAG" compare --fail-on rank_first_nonfinite "$T/repl.rank0.h5" >/dev/null 2>"$T/fail.err"
s=$?
[ $s -eq 1 ] && grep -q "fail-on rank_first_nonfinite" "$T/fail.err"
ok $? "--fail-on rank_first_nonfinite: exit 1 (got $s)"
"$AMPDIAG" compare --fail-on rank_first_nonfinite "$T/shard.rank0.h5" >/dev/null 2>&1
ok $? "--fail-on rank_first_nonfinite of a finite run: exit 0"

# ------------------------------------------------------------------ not one run
for g in badlr twice plain; do
    "$AMPDIAG" info "$T/$g.rank*.h5" >/dev/null 2>"$T/bad.err"
    s=$?
    [ $s -eq 2 ] && grep -q "$g.rank1.h5" "$T/bad.err"
    ok $? "info of '$g.rank*.h5' (not one run): exit 2 naming $g.rank1.h5 (got $s: $(head -c 200 "$T/bad.err"))"
done
"$AMPDIAG" compare "$T/repl.rank0.h5" "$T/nosuch.rank*.h5" >/dev/null 2>"$T/bad.err"
s=$?
[ $s -eq 2 ] && grep -q "nosuch.rank\*.h5': no file matches" "$T/bad.err"
ok $? "compare with a glob that matches nothing: exit 2 naming it (got $s)"

# ------------------------------------------------------------------ plot
"$AMPDIAG" plot "$T/repl.rank0.h5" -o "$T/charts" --no-draw >"$T/plot.out" 2>&1
s=$?
[ $s -eq 0 ] && [ -f "$T/charts/ranks-fp32.gp" ] && grep -q "^nranks = 3" "$T/charts/ranks-fp32.gp" &&
    grep -q "^npanels = 3" "$T/charts/ranks-fp32.gp" && [ "$(grep -c '^$' "$T/charts/ranks-fp32.dat")" -ge 18 ]
ok $? "plot of the group: the ranks chart, 3 ranks in 3 panels (loss, gradient norm, loss scale) (exit $s)"
if command -v gnuplot >/dev/null 2>&1; then
    "$AMPDIAG" plot "$T/repl.rank0.h5" -o "$T/drawn" >/dev/null 2>&1 && [ -s "$T/drawn/ranks-fp32.png" ] &&
        [ ! -s "$T/drawn/ranks-fp32.log" ]
    ok $? "the ranks chart drawn by gnuplot without a warning"
else
    echo "ok $((n = n + 1)) # SKIP gnuplot not installed"
fi

echo "1..$n"
exit $failed
