#!/bin/sh
# t_regress.sh - the inputs that once crashed, corrupted memory or hung a reader (found by the
# fuzz targets and the mutation campaign, docs/fuzzing.md), read again by the normal build:
#   fuzz/regress/trace/*       info (text and JSON), compare against a good trace, plot
#   fuzz/regress/model_spec/*  run --model FILE
#   fuzz/regress/data/*        run --data FILE (an MLP and a transformer)
#   fuzz/regress/weights/*     run --init-from FILE (the model of fuzz/fuzz_weights.c)
#   fuzz/regress/cli/*         ampdiag with the file's lines as arguments
# Each run must end by itself within the time limit with exit 0, 1, 2 or 3 (no signal), and
# print nothing from HDF5 on stderr (no error stack, no "HDF5: infinite loop closing library").
# The limit is CPU time (AMPDIAG_REGRESS_SECONDS, default 30 s: a hang that spins), so that a
# loaded machine does not fail the test; a wall-clock limit 20 times as long catches a run that
# waits forever.
AMPDIAG=${AMPDIAG:-./ampdiag}
S=${srcdir:-.}
R=$(cd "$S/fuzz/regress" && pwd) || { echo "Bail out! no $S/fuzz/regress"; exit 1; }
LIMIT=${AMPDIAG_REGRESS_SECONDS:-30}
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_regress.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
case $AMPDIAG in /*) ;; *) AMPDIAG=$(pwd)/$AMPDIAG ;; esac
TIMEOUT=$(command -v timeout) && TIMEOUT="$TIMEOUT -s KILL $((20 * LIMIT))"
GOOD=$(cd "$S/traces" && pwd)/v1-fp32-complete.h5
# the model fuzz/fuzz_weights.c reads weights into (FUZZ_WEIGHTS_SPEC there)
printf 'input 32\nlinear fc1 3\nrelu\nlayernorm\nlinear fc2 10\nloss softmax_ce\n' > "$tmp/wmodel.txt"

# what HDF5 prints by itself: an error stack, or the complaint of its shutdown at exit
HDF5_NOISE='HDF5-DIAG|^HDF5:|^ *#[0-9]{3}: |^ *(major|minor): |infinite loop closing library'

# check NAME ARGS...: run ampdiag in $tmp/work with the time limit; gnuplot is kept off PATH
# (plot writes its data and scripts); judge exit status and stderr
check() {
    what=$1; shift
    rm -rf "$tmp/work"; mkdir "$tmp/work"
    (cd "$tmp/work" && ulimit -t "$LIMIT" && PATH=/nonexistent exec $TIMEOUT "$AMPDIAG" "$@") \
        >/dev/null 2>"$tmp/err"
    rc=$?
    why=""
    [ $rc -le 3 ] || why="exit $rc (signal, or the CPU or wall time limit)"
    if grep -Eq "$HDF5_NOISE" "$tmp/err"; then why="$why HDF5 on stderr"; fi
    if grep -Eq 'Sanitizer|runtime error:' "$tmp/err"; then why="$why sanitizer report"; fi
    [ -z "$why" ] ; t $? "$what: exit $rc${why:+ -- $why}"
    [ -z "$why" ] || sed 's/^/# /' "$tmp/err" | head -20
    grep -q "no such file" "$tmp/err" && echo "# (the input was not found: a path error in this test?)"
}

count=0
for f in "$R"/trace/*; do
    [ -f "$f" ] || continue
    count=$((count+1)); b=$(basename "$f")
    check "trace $b: info" info "$f"
    check "trace $b: info --format json" info --format json "$f"
    check "trace $b: compare" compare "$GOOD" "$f" --fail-on nan,divergence
    check "trace $b: plot" plot "$f" -o plots
done
for f in "$R"/model_spec/*; do
    [ -f "$f" ] || continue
    count=$((count+1)); b=$(basename "$f")
    check "model spec $b: run" run --model "$f" --steps 1 --batch 2 --progress none -o out.h5
done
for f in "$R"/data/*; do
    [ -f "$f" ] || continue
    count=$((count+1)); b=$(basename "$f")
    check "data $b: run (mlp)" run --data "$f" --steps 1 --batch 2 --progress none -o out.h5
    check "data $b: run (transformer)" run --model transformer --data "$f" --steps 1 --batch 2 \
        --progress none -o out2.h5
done
for f in "$R"/weights/*; do
    [ -f "$f" ] || continue
    count=$((count+1)); b=$(basename "$f")
    check "weights $b: run --init-from" run --model "$tmp/wmodel.txt" --init-from "$f" --steps 1 \
        --batch 2 --progress none -o out.h5
done
for f in "$R"/cli/*; do
    [ -f "$f" ] || continue
    count=$((count+1)); b=$(basename "$f")
    # one argument per line (as fuzz/fuzz_cli.c reads its input)
    set --
    while IFS= read -r line || [ -n "$line" ]; do set -- "$@" "$line"; done < "$f"
    check "cli $b" "$@"
done
[ $count -gt 0 ] ; t $? "fuzz/regress holds regression files ($count)"

echo "1..$n"
exit $fail
