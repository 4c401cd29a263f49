#!/bin/sh
# docs-generated.sh AMPDIAG SRCDIR [--write]: the generated parts of the documentation, from the
# message table and the constants (src/messages/, src/analysis/evidence.c):
#   docs/glossary.md                 all of it: `ampdiag help terms --format md`
#   docs/recommendations.md          between its BEGIN/END generated markers:
#                                    `ampdiag help rules --format md`
# Without --write: exit 1 (naming the file and the first differing line) when a file differs
# from what this ampdiag writes; with --write (`make docs`): rewrite them.
AMPDIAG=$1; S=$2; W=$3
[ -x "$AMPDIAG" ] && [ -d "$S/docs" ] || { echo "usage: docs-generated.sh AMPDIAG SRCDIR [--write]" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/docs-generated.XXXXXX") || exit 3
trap 'rm -rf "$tmp"' EXIT
rc=0
"$AMPDIAG" help terms --format md > "$tmp/glossary.md" || exit 3
"$AMPDIAG" help rules --format md > "$tmp/rules.md" || exit 3
R="$S/docs/recommendations.md"
begin='<!-- BEGIN generated: ampdiag help rules --format md -->'
end='<!-- END generated -->'
grep -qxF "$begin" "$R" && grep -qxF "$end" "$R" || { echo "$R: no generated markers" >&2; exit 1; }
# the page with the generated part put between its markers
awk -v b="$begin" -v e="$end" -v g="$tmp/rules.md" '
$0 == b { print; while ((getline l < g) > 0) print l; skip = 1; next }
$0 == e { skip = 0 }
!skip { print }' "$R" > "$tmp/recommendations.md"
for f in glossary.md recommendations.md; do
    if [ "$W" = --write ]; then
        cmp -s "$tmp/$f" "$S/docs/$f" || { cp "$tmp/$f" "$S/docs/$f" && echo "docs/$f rewritten"; }
    elif ! cmp -s "$tmp/$f" "$S/docs/$f"; then
        echo "docs/$f differs from what this ampdiag writes (make docs rewrites it):"
        diff "$S/docs/$f" "$tmp/$f" | head -10
        rc=1
    fi
done
exit $rc
