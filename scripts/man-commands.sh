#!/bin/sh
# man-commands.sh AMPDIAG - the COMMANDS section of the man page, as a help2man include file
# (--include): one subsection per command that `AMPDIAG --help` lists under "Commands:",
# holding that command's --help verbatim (roff-escaped, not filled).
set -eu
ampdiag=$1
cmds=$("$ampdiag" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
[ -n "$cmds" ] || { echo "man-commands.sh: '$ampdiag --help' lists no commands" >&2; exit 1; }
printf '%s\n' '[COMMANDS]' \
    "Each command's options, as \\fBampdiag\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR prints them."
for c in $cmds; do
    help=$("$ampdiag" "$c" --help)
    printf '.SS "ampdiag %s"\n.nf\n' "$c"
    # backslashes, then dashes (\- is a minus: options stay copyable), then a leading . or '
    printf '%s\n' "$help" | sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\\&'/"
    printf '.fi\n'
done
