#!/bin/sh
# t_layering.sh - the one-way dependencies between the folders of src/ (docs/ARCHITECTURE.md).
#
# Every #include "..." in src/**/*.{c,h,cu} and kernels/* is resolved the way the compiler does
# (the including file's folder, then include/, then src/, then the top of the tree: the -I order
# of Makefile.am) and the folder
# of the header it names must be one that src/layering.txt lets the including folder use (its
# own folder, include/ and config.h are always allowed). The installed headers in include/ may
# include only each other. A header that resolves nowhere (other than config.h) is reported
# too: the check cannot place it. Lines are matched as text, so an #include inside a comment or
# an #if 0 block counts as well.
#
# Then the table itself must be one-way (no cycle), and the checker is run on mutated copies of
# the tree to show that it reports what it should (and nothing on an allowed include).
#
# Usage: t_layering.sh (TAP, from `make check`), or t_layering.sh --check DIR [TABLE] to list the
# violations of the tree at DIR (exit 1 when there are any).

srcdir=${srcdir:-.}
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
diag() { sed '/^$/d; s/^/# /'; }

# layering_check DIR TABLE: print one line per violation in the tree at DIR ("file:line: ...");
# exit status 1 when there is one, 2 when the table cannot be read.
layering_check() {
    ( cd "$1" || exit 2
      [ -r "$2" ] || { echo "cannot read the layering table $2" >&2; exit 2; }
      { find src include kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null \
          | LC_ALL=C sort; } \
      | LC_ALL=C awk -v table="$2" '
        function exists(p,   l, r) { r = (getline l < p); if (r >= 0) close(p); return r >= 0 }
        # a/b/../c -> a/c; "" when the path leaves the tree
        function normalize(p,   parts, k, i, out, top) {
            k = split(p, parts, "/"); top = 0
            for (i = 1; i <= k; i++) {
                if (parts[i] == "" || parts[i] == ".") continue
                if (parts[i] == "..") { if (top == 0) return ""; top--; continue }
                out[++top] = parts[i]
            }
            p = ""
            for (i = 1; i <= top; i++) p = p (i > 1 ? "/" : "") out[i]
            return p
        }
        # the folder a path belongs to: "numerics" for src/numerics/..., "include" for include/...,
        # "kernels" for kernels/... (the device code, a folder of the top of the tree), "" for a
        # file directly in src/
        function folder(p,   parts, k) {
            k = split(p, parts, "/")
            if (parts[1] == "include") return "include"
            if (parts[1] == "kernels" && k >= 2) return "kernels"
            if (parts[1] == "src" && k >= 3) return parts[2]
            return ""
        }
        function may_use(f, g) { return f == g || g == "include" || star[f] || ((f, g) in allowed) }
        function uses(f,   s, i) {
            if (star[f]) return "every folder"
            s = ""
            for (i = 1; i <= nk; i++) if ((f, order[i]) in allowed) s = s (s == "" ? "" : " ") order[i]
            return s == "" ? "nothing but itself and include/" : s
        }
        function report(msg) { print msg; bad = 1 }
        BEGIN {
            while ((r = (getline line < table)) > 0) {
                sub(/#.*/, "", line)
                if (line !~ /:/) { if (line ~ /[^ \t]/) { print table ": not \"folder: folders\": " line; bad = 1 } continue }
                name = line; sub(/:.*/, "", name); gsub(/[ \t]/, "", name)
                rest = line; sub(/^[^:]*:/, "", rest)
                if (!(name in known)) order[++nk] = name
                known[name] = 1
                k = split(rest, deps, /[ \t]+/)
                for (i = 1; i <= k; i++) {
                    if (deps[i] == "") continue
                    if (deps[i] == "*") star[name] = 1; else allowed[name, deps[i]] = 1
                }
            }
            if (r < 0) { print "cannot read " table; exit 2 }
            close(table)
            for (key in allowed) {
                split(key, kv, SUBSEP)
                if (!(kv[2] in known)) report(table ": " kv[1] " uses " kv[2] ", which has no line of its own")
            }
        }
        {
            file = $0; f = folder(file)
            if (f == "") { report(file ": outside the folders of src/ (each file belongs to a folder of src/layering.txt)"); next }
            if (f != "include" && !(f in known)) { report(file ": folder src/" f "/ has no line in src/layering.txt"); next }
            dir = file; sub(/\/[^\/]*$/, "", dir)
            lineno = 0
            while ((r = (getline line < file)) > 0) {
                lineno++
                if (line !~ /^[ \t]*#[ \t]*include[ \t]*"/) continue
                q = line; sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", q); sub(/".*/, "", q)
                where = file ":" lineno ": #include \"" q "\""
                if (q == "config.h") {
                    if (f == "include") report(where ": an installed header may not include config.h")
                    continue
                }
                target = ""
                c = normalize(dir "/" q);    if (c != "" && exists(c)) target = c
                if (target == "") { c = normalize("include/" q); if (c ~ /^include\// && exists(c)) target = c }
                if (target == "") { c = normalize("src/" q);     if (c ~ /^src\// && exists(c)) target = c }
                if (target == "") { c = normalize(q);            if (c ~ /^kernels\// && exists(c)) target = c }
                if (target == "") { report(where ": resolves to no header in the tree (searched " dir "/, include/, src/, kernels/)"); continue }
                g = folder(target)
                if (f == "include") {
                    if (g != "include") report(where ": the installed header includes " target ", which is not installed")
                    continue
                }
                if (g == "") { report(where ": " target " is outside the folders of src/"); continue }
                if (!may_use(f, g))
                    report(where ": " f " may not include " target " (folder " g "); " f " may use " uses(f))
            }
            if (r < 0) report(file ": cannot read")
            close(file)
        }
        END { exit bad ? 1 : 0 }' )
}

if [ "$1" = --check ]; then
    dir=${2:-$srcdir}
    layering_check "$dir" "${3:-src/layering.txt}"
    exit $?
fi

table=src/layering.txt
[ -r "$srcdir/$table" ] || { echo "Bail out! no $srcdir/$table"; exit 1; }

# ---------------------------------------------------------------- the tree as it is
out=$(layering_check "$srcdir" "$table"); rc=$?
[ -n "$out" ] && echo "$out" | diag
[ $rc -eq 0 ] && [ -z "$out" ] ; t $? "every #include \"...\" in src/, kernels/ and include/ keeps to src/layering.txt"
nfiles=$(cd "$srcdir" && find src include kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | wc -l)
nincl=$(cd "$srcdir" && find src include kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
    -exec grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' {} + | wc -l)
[ "$nfiles" -ge 40 ] && [ "$nincl" -ge 60 ] ; t $? "the check saw the tree ($nfiles files, $nincl quoted includes)"

# every folder of src/ that holds a source file has a line in the table
missing=
for d in $(cd "$srcdir/src" && find . -mindepth 2 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) \
               | sed 's|^\./||; s|/.*||' | LC_ALL=C sort -u); do
    grep -q "^$d:" "$srcdir/$table" || missing="$missing $d"
done
[ -z "$missing" ] ; t $? "every folder of src/ with sources has a line in $table${missing:+ (missing:$missing)}"

# the table is one-way: tsort fails on a cycle ("*" = every other folder)
folders=$(sed 's/#.*//' "$srcdir/$table" | sed -n 's/^[[:space:]]*\([a-z0-9_]*\):.*/\1/p')
edges() {  # "user used" pairs of the table $1
    sed 's/#.*//' "$1" | awk -v all="$folders" '
        /:/ { f = $0; sub(/:.*/, "", f); gsub(/[ \t]/, "", f); d = $0; sub(/^[^:]*:/, "", d)
              print f, f
              k = split(d, a, /[ \t]+/)
              for (i = 1; i <= k; i++) {
                  if (a[i] == "*") { m = split(all, b, /[ \t\n]+/); for (j = 1; j <= m; j++) if (b[j] != "" && b[j] != f) print f, b[j] }
                  else if (a[i] != "") print f, a[i] } }'
}
edges "$srcdir/$table" | tsort > /dev/null 2>&1 ; t $? "$table has no cycle"

# ---------------------------------------------------------------- the checker can fail
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_layering.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT

# mutate FILE TEXT: a fresh copy of the tree in $tmp/tree with TEXT appended to FILE (created
# when absent); sets $line to the line number TEXT got
mutate() {
    rm -rf "$tmp/tree" && mkdir -p "$tmp/tree" &&
    (cd "$srcdir" && find src include kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name layering.txt \) \
        | while read -r p; do mkdir -p "$tmp/tree/$(dirname "$p")" && cp "$p" "$tmp/tree/$p" || exit 1; done) || return 1
    mkdir -p "$tmp/tree/$(dirname "$1")" && touch "$tmp/tree/$1" &&
    line=$(($(wc -l < "$tmp/tree/$1") + 1)) && printf '%s\n' "$2" >> "$tmp/tree/$1"
}
# expect_report FILE TEXT PATTERN DESCRIPTION: the mutation is reported, by a line that names
# FILE:line and matches PATTERN, and is the only report
expect_report() {
    mutate "$1" "$2" || { t 1 "$4 (could not copy the tree)"; return; }
    out=$(layering_check "$tmp/tree" "$table"); rc=$?
    echo "$out" | diag
    [ $rc -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "^$1:$line: $3" ; t $? "$4"
}

expect_report src/numerics/numfmt.c '#include "train/train.h"' \
    '#include "train/train.h": numerics may not include src/train/train.h (folder train); numerics may use nothing but itself' \
    'mutation: numerics/numfmt.c including train/train.h is reported with file, line and include'
expect_report src/analysis/analyze.h '  #  include "model/model.h"' \
    '#include "model/model.h": analysis may not include src/model/model.h (folder model)' \
    'mutation: an analysis header including model/model.h (spaced "# include") is reported'
expect_report src/trace/trace.c '#include "../train/tracer.h"' \
    '#include "../train/tracer.h": trace may not include src/train/tracer.h' \
    'mutation: a relative path (trace.c including ../train/tracer.h) is resolved and reported'
expect_report src/backend/cuda/numfmt_check.cu '#include "model/layers.h"' \
    '#include "model/layers.h": backend may not include src/model/layers.h' \
    'mutation: a .cu file of backend/cuda/ including model/layers.h is reported'
expect_report kernels/bodies.h '#include "backend/backend.h"' \
    '#include "backend/backend.h": kernels may not include src/backend/backend.h (folder backend)' \
    'mutation: the device code (kernels/bodies.h) including backend/backend.h is reported'
expect_report src/report/report.c '#include "cli/cli.h"' \
    '#include "cli/cli.h": report may not include src/cli/cli.h' \
    'mutation: report including cli/cli.h (upwards) is reported'
expect_report include/ampdiag_trace.h '#include "trace/trace_internal.h"' \
    '#include "trace/trace_internal.h": the installed header includes src/trace/trace_internal.h' \
    'mutation: an installed header including a private one is reported'
expect_report src/util/util.c '#include "nosuch.h"' \
    '#include "nosuch.h": resolves to no header' \
    'mutation: an include that resolves to nothing is reported'
mutate src/sandbox/toy.c '#include "util/util.h"' || t 1 "copy"
out=$(layering_check "$tmp/tree" "$table"); rc=$?
echo "$out" | diag
[ $rc -eq 1 ] && [ "$out" = 'src/sandbox/toy.c: folder src/sandbox/ has no line in src/layering.txt' ] ; t $? "mutation: a new folder without a line in the table is reported, by name"

# allowed includes are not reported: a same-folder header without a prefix, a public header,
# config.h, and a header of a folder the table allows
mutate src/train/optim.c '#include "scaler.h"
#include "ampdiag_trace.h"
#include "config.h"
#include "numerics/numfmt.h"
#include "../model/model.h"
#include "trace/trace_internal.h"' || t 1 "copy"
out=$(layering_check "$tmp/tree" "$table"); rc=$?
echo "$out" | diag
[ $rc -eq 0 ] && [ -z "$out" ] ; t $? "allowed includes (same folder unprefixed, include/, config.h, numerics, model, trace from train) are not reported"

# the table is what decides: an unchanged tree with a table that takes away model's right to use
# backend is reported where model includes backend/
mutate src/util/util.c '' || t 1 "copy"
sed 's/^model:.*/model: numerics util/' "$srcdir/$table" > "$tmp/tree/$table"
out=$(layering_check "$tmp/tree" "$table"); rc=$?
echo "$out" | diag
[ $rc -eq 1 ] && echo "$out" | grep -q '^src/model/model.h:[0-9]*: #include "backend/backend.h": model may not include src/backend/backend.h (folder backend); model may use numerics util$' ; t $? "a table where model may not use backend: model.h's include of backend/backend.h is reported"
# a misspelt folder in the table is reported
sed 's/^model:.*/model: backend numerics utils/' "$srcdir/$table" > "$tmp/tree/$table"
out=$(layering_check "$tmp/tree" "$table"); rc=$?
echo "$out" | diag
[ $rc -eq 1 ] && echo "$out" | grep -q '^src/layering.txt: model uses utils, which has no line of its own$' ; t $? "a table naming a folder that has no line (utils) is reported"
# and a cycle in the table is caught
sed 's/^numerics:.*/numerics: cli/' "$srcdir/$table" > "$tmp/cycle.txt"
edges "$tmp/cycle.txt" | tsort > /dev/null 2>&1; [ $? -ne 0 ] ; t $? "a table where numerics uses cli (a cycle) fails the cycle check"

echo "1..$n"
exit $fail
