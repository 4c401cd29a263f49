#!/bin/sh
# t_readme.sh - what README.md shows is what the program does.
#
#   1. README's two commands (the code blocks after "<!-- setup -->" and "<!-- tests -->") are
#      there and are the ones .ci/run runs (it reads them from README the same way).
#   2. README's session (the code block after "<!-- session -->") runs, command by command in
#      order, in an empty directory holding only a link named ampdiag to this build: every
#      command exits 0.
#   3. Every sample output in README.md and docs/*.md (a code block after
#      "<!-- output of: COMMAND -->") is what COMMAND prints now: the session's own output where
#      COMMAND is one of its commands, else COMMAND run in the session's directory afterwards.
#      Compared line by line: the text exactly; each number within 5% (or one unit of its last
#      digit) of the one shown, since runs on another CPU (other BLAS kernels) train a little
#      differently; durations and file sizes, and the line saying how long training waited for
#      the tracer thread (it depends on the machine's cores), not at all. AMPDIAG_SAMPLES_EXACT=1
#      compares the numbers exactly.
#
# `tests/t_readme.sh --write` (make readme-samples) rewrites the sample blocks from the outputs
# of this build: run it after a change that changes what they show, and review the diff.
# Needs gnuplot (the session draws charts): SKIP without it.
srcdir=${srcdir:-.}
AMPDIAG=${AMPDIAG:-./ampdiag}
write=0
[ "${1:-}" = "--write" ] && write=1
case $AMPDIAG in /*) ;; *) AMPDIAG=$(pwd)/$AMPDIAG ;; esac
S=$(cd "$srcdir" && pwd) || { echo "Bail out! no srcdir"; exit 1; }
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "1..0 # SKIP gnuplot is needed for README's session (scripts/install-deps.sh installs it)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_readme.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
AMPDIAG_PLOTS_DIR=${AMPDIAG_PLOTS_DIR:-$S/plots}
export AMPDIAG_PLOTS_DIR
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }

# block FILE MARKER: the lines of the code block that follows the first line starting MARKER
block() {
    awk -v m="$2" 'index($0, m) == 1 { want = 1; next }
        want && /^```/ { if (inb) exit; inb = 1; next }
        inb { print }' "$1"
}

# 1. the two commands
block "$S/README.md" "<!-- setup" >"$T/setup.txt"
block "$S/README.md" "<!-- tests" >"$T/tests.txt"
grep -q 'scripts/install-deps.sh' "$T/setup.txt" && grep -q './configure' "$T/setup.txt" &&
    grep -q 'make' "$T/setup.txt" && grep -q './ampdiag run' "$T/setup.txt" && grep -q '^make check' "$T/tests.txt" &&
    grep -q 'readme_block .*<!-- setup' "$S/.ci/run" && grep -q 'readme_block .*<!-- tests' "$S/.ci/run"
ok $? "README's set-up and test commands are there, and .ci/run runs them as README shows them"

# 2. the session
W=$T/session
mkdir "$W" && ln -s "$AMPDIAG" "$W/ampdiag"
block "$S/README.md" "<!-- session" | grep -v '^[[:space:]]*\(#.*\)\{0,1\}$' >"$T/session.txt"
k=0
while IFS= read -r cmd; do
    k=$((k + 1))
    (cd "$W" && sh -c "$cmd") >"$T/out.$k" 2>"$T/err.$k" </dev/null
    rc=$?
    [ $rc -eq 0 ]
    ok $? "session command $k: $cmd (exit $rc)"
    [ $rc -eq 0 ] || sed 's/^/# /' "$T/err.$k" | head -10
done <"$T/session.txt"
[ $k -ge 4 ]
ok $? "README's session has commands ($k)"

# 3. the samples: for each file, the markers' commands, the blocks' line ranges and contents
normalize() { # FILE: the comparable text (durations and sizes masked, the tracer's wait line out)
    sed -e 's/[0-9][0-9]*:[0-9][0-9]:[0-9][0-9]/H:MM:SS/g' -e 's/([0-9.]* [KMG]B)/(SIZE)/g' \
        -e '/tensor statistics on a second thread; training waited/d' "$1"
}
# compare EXPECTED ACTUAL: 0 when alike (see the top), else 1 with the first difference printed
compare() {
    normalize "$1" >"$1.n"
    normalize "$2" >"$2.n"
    awk -v exact="${AMPDIAG_SAMPLES_EXACT:-0}" -v act="$2.n" '
        function skel(s) { gsub(/[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/, "#", s); return s }
        function nums(s, a,   k) {
            k = 0
            while (match(s, /[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/)) {
                a[++k] = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
            }
            return k
        }
        function unit(x,   d) { d = index(x, "."); if (!d || x ~ /[eE]/) return 0; return 10 ^ -(length(x) - d) }
        function close_enough(x, y,   m, d) {
            if (x == y) return 1
            if (exact) return 0
            m = (x + 0 > y + 0 ? x + 0 : y + 0); d = x - y; if (d < 0) d = -d
            return d <= 0.05 * m + unit(x)
        }
        {
            if ((getline b < act) <= 0) { print "# line " NR ": the output ends here: " $0; bad = 1; exit }
            if (skel($0) != skel(b)) { print "# line " NR " shown:   " $0; print "# line " NR " printed: " b; bad = 1; exit }
            nx = nums($0, X); nums(b, Y)
            for (i = 1; i <= nx; i++)
                if (!close_enough(X[i], Y[i])) {
                    print "# line " NR ", number " i ": shown " X[i] ", printed " Y[i]; print "#   " b; bad = 1; exit
                }
        }
        END {
            if (!bad && (getline b < act) > 0) { print "# the output goes on: " b; bad = 1 }
            exit bad
        }' "$1.n"
}
for f in "$S/README.md" "$S"/docs/*.md; do
    awk '/^<!-- output of: .* -->$/ { cmd = $0; sub(/^<!-- output of: /, "", cmd); sub(/ -->$/, "", cmd); want = 1; next }
        want && /^```/ { if (!inb) { inb = 1; start = NR; next } print start "\t" NR "\t" cmd; want = 0; inb = 0 }' \
        "$f" >"$T/marks"
    [ -s "$T/marks" ] || continue
    name=${f#"$S"/}
    j=0
    : >"$T/edits"
    while IFS="$(printf '\t')" read -r start end cmd; do
        j=$((j + 1))
        sed -n "$((start + 1)),$((end - 1))p" "$f" >"$T/want"
        i=$(grep -nxF -- "$cmd" "$T/session.txt" | head -1 | cut -d: -f1)
        if [ -n "$i" ]; then
            cp "$T/out.$i" "$T/got"
        else
            (cd "$W" && sh -c "$cmd") >"$T/got" 2>/dev/null </dev/null
        fi
        if [ $write -eq 1 ]; then
            cp "$T/got" "$T/new.$j"
            printf '%s\t%s\t%s\n' "$start" "$end" "$j" >>"$T/edits"
            continue
        fi
        compare "$T/want" "$T/got"
        ok $? "$name: the sample after 'output of: $cmd' is what it prints"
    done <"$T/marks"
    if [ $write -eq 1 ] && [ -s "$T/edits" ]; then
        # replace each block's lines (from the last, so that the earlier line numbers hold)
        sort -t "$(printf '\t')" -k1,1nr "$T/edits" | while IFS="$(printf '\t')" read -r start end j; do
            { head -n "$start" "$f"; cat "$T/new.$j"; tail -n "+$end" "$f"; } >"$T/rewrite" && cp "$T/rewrite" "$f"
        done
        echo "# rewrote the samples of $name"
    fi
done

echo "1..$n"
exit $failed
