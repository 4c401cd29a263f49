#!/bin/sh
# t_sizes.sh - the reading side stays in pieces a reader can hold (docs/ARCHITECTURE.md): in
# src/analysis, src/messages, src/report and src/plot no function is longer than 80 lines (from
# the brace that opens its body at column 0 to the one that closes it) and no file longer than
# 1000 lines. The checker is also run on a made-up file with a long function, to show that it
# reports one.
srcdir=${srcdir:-.}
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }

# long_functions FILE...: "file:line: name (N lines)" for each function body over 80 lines
long_functions() {
    awk '
    FNR == 1 { start = 0 }
    /^\{/ { start = FNR; name = prev; next }
    /^\}/ { if (start) { len = FNR - start + 1; if (len > 80) printf "%s:%d: %s (%d lines)\n", FILENAME, start, name, len; start = 0 } }
    { if ($0 ~ /^[A-Za-z_].*\(/) prev = $0 }
    ' "$@"
}

files=$(ls "$srcdir"/src/analysis/*.[ch] "$srcdir"/src/messages/*.[ch] "$srcdir"/src/report/*.[ch] \
           "$srcdir"/src/plot/*.[ch] 2>/dev/null)
long=$(long_functions $files)
[ -z "$long" ] ; t $? "no function over 80 lines in src/analysis, src/messages, src/report, src/plot"
[ -z "$long" ] || echo "$long" | sed 's/^/# /'
big=$(wc -l $files | awk '$2 != "total" && $1 > 1000 { print $2 " (" $1 " lines)" }')
[ -z "$big" ] ; t $? "no file over 1000 lines there"
[ -z "$big" ] || echo "$big" | sed 's/^/# /'
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_sizes.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
{ echo "static int f(void)"; echo "{"; i=0; while [ $i -lt 85 ]; do echo "    x++;"; i=$((i+1)); done; echo "}"; } > "$tmp/long.c"
long_functions "$tmp/long.c" | grep -q "long.c:2: static int f(void) (87 lines)" ; t $? "the checker reports an 87-line function"
echo "1..$n"
exit $fail
