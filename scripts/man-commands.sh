#!/bin/sh
# man-commands.sh AMPDIAG INCLUDE - the help2man include file of the man page: INCLUDE
# (docs/ampdiag.x: description, exit status, examples, see also) with its line @COMMAND_LIST@
# replaced by the commands `AMPDIAG --help` lists (a .TP entry each) and @COMMAND_OPTIONS@ by a
# subsection per command holding its --help, each line longer than 73 columns wrapped (a
# subsection's text is indented by 7: the page fits 80 columns) with its continuation under the
# description it continues; roff-escaped, not filled.
set -eu
ampdiag=$1
include=$2
W=73
help=$("$ampdiag" --help)
cmds=$(printf '%s\n' "$help" | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
[ -n "$cmds" ] || { echo "man-commands.sh: '$ampdiag --help' lists no commands" >&2; exit 1; }

# roff: backslashes, then dashes (\- is a minus: options stay copyable), then a leading . or '
roff() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\\&'/"; }

# wrap: --help's text reflowed to W columns. A line continues the one before when it is
# indented to the column where that one's description starts (after its first gap of
# two or more spaces), or when both start in column 1 (a paragraph); each logical line is then
# broken at spaces, its continuations under that column.
wrap() {
    awk -v W="$W" '
    function spaces(k,   s) { s = ""; while (k-- > 0) s = s " "; return s }
    function leadof(s) { match(s, /^ */); return RLENGTH }
    function hangof(s,   lead, rest) {
        lead = leadof(s); rest = substr(s, lead + 1)
        if (match(rest, /[^ ]  +[^ ]/) && lead + RSTART + RLENGTH - 2 <= 2 * W / 3)
            return lead + RSTART + RLENGTH - 2
        return lead
    }
    function flush(   s, i, cut, head, tail) {
        if (!have) return
        s = cur
        while (length(s) > W) {
            cut = 0
            for (i = W + 1; i > curhang + 1; i--)
                if (substr(s, i, 1) == " ") { cut = i; break }
            if (!cut) break
            head = substr(s, 1, cut - 1); sub(/ +$/, "", head)
            print head
            tail = substr(s, cut + 1); sub(/^ +/, "", tail)
            s = spaces(curhang) tail
        }
        print s
        have = 0
    }
    {
        if ($0 ~ /^ *$/) { flush(); print ""; next }
        lead = leadof($0)
        cont = have && ((lead == curhang && curhang > curlead) ||
                        (lead == 0 && curlead == 0))
        if (cont) { t = substr($0, lead + 1); cur = cur " " t; next }
        flush()
        cur = $0; have = 1; curlead = lead; curhang = hangof($0)
    }
    END { flush() }'
}

list=$(mktemp) opts=$(mktemp)
trap 'rm -f "$list" "$opts"' EXIT
printf '%s\n' "$help" | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\)  *\(.*\)/\1\t\2/p' |
    while IFS="$(printf '\t')" read -r c what; do
        printf '.TP\n.B %s\n' "$c"
        printf '%s\n' "$what" | roff
    done >"$list"
for c in $cmds; do
    printf '.SS "ampdiag %s"\n.nf\n' "$c"
    "$ampdiag" "$c" --help | wrap | roff
    printf '.fi\n'
done >"$opts"
awk -v list="$list" -v opts="$opts" '
    $0 == "@COMMAND_LIST@" { while ((getline l < list) > 0) print l; next }
    $0 == "@COMMAND_OPTIONS@" { while ((getline l < opts) > 0) print l; next }
    { print }' "$include"
