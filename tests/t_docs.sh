#!/bin/sh
# t_docs.sh - the documentation that is generated from the code is what this build writes:
# docs/glossary.md (`ampdiag help terms --format md`) and the reference part of
# docs/recommendations.md (`ampdiag help rules --format md`: every constant, finding and rule's
# words); `make docs` rewrites them. Also: `ampdiag help terms` wraps at 100 columns when not
# on a terminal, and every threshold in the rules' words is printed from its constant.
AMPDIAG=${AMPDIAG:-./ampdiag}
S=${srcdir:-.}
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
out=$(sh "$S/scripts/docs-generated.sh" "$AMPDIAG" "$S" 2>&1); rc=$?
[ $rc -eq 0 ] ; t $? "docs/glossary.md and docs/recommendations.md's reference are what ampdiag writes"
[ $rc -eq 0 ] || echo "$out" | sed 's/^/# /'
wide=$(COLUMNS= "$AMPDIAG" help terms | awk 'length($0) > 100' | head -2)
[ -z "$wide" ] ; t $? "ampdiag help terms: no line over 100 columns${wide:+: $wide}"
"$AMPDIAG" help terms | grep -q '^  FP16 flush share without loss scaling$' ; t $? "help terms defines the figures by name"
"$AMPDIAG" help rules | grep -q '^| `SKIP_RATE_MAX` | 1 in 500 |' ; t $? "help rules prints a constant in its style (1 in 500)"
"$AMPDIAG" help rules | grep -q '^| `skips_above_limit` | .*`SKIP_RATE_MAX`.*more than 1 in 500' ; t $? "... and a finding with the constants it is judged against, printed in its words"
"$AMPDIAG" help rules | grep -q '{K\.' ; [ $? -ne 0 ] ; t $? "no constant left unprinted in the rules' words"
"$AMPDIAG" help terms --format xml > /dev/null 2>&1 ; [ $? -eq 2 ] ; t $? "help terms --format xml: exit 2"
echo "1..$n"
exit $fail
