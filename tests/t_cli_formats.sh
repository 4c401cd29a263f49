#!/bin/sh
# t_cli_formats.sh - `ampdiag` dispatch, --help, exit codes, and `ampdiag formats` values.
AMPDIAG=${AMPDIAG:-./ampdiag}
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }

$AMPDIAG --help | grep -q '^  formats' ; t $? "ampdiag --help lists the formats command"
$AMPDIAG --version | grep -q '^ampdiag [0-9]' ; t $? "ampdiag --version prints the version"
$AMPDIAG nosuch 2>/dev/null; [ $? -eq 2 ] ; t $? "an unknown command exits 2"
$AMPDIAG 2>/dev/null; [ $? -eq 2 ] ; t $? "no command exits 2"
$AMPDIAG formats --help | grep -q 'usage: ampdiag formats' ; t $? "formats --help prints its usage"
$AMPDIAG formats --bogus 2>/dev/null; [ $? -eq 2 ] ; t $? "formats: an unknown option exits 2"
err=$($AMPDIAG formats 1 abc 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$err" | grep -q "'abc' is not a number" ; t $? "formats: a bad value exits 2 naming it"
out=$($AMPDIAG formats 65520 65519 1e-8 1e-7)
echo "$out" | grep -Eq '^65520 +inf +0x7c00 OVERFLOW' ; t $? "65520 overflows FP16 to inf (0x7c00)"
echo "$out" | grep -Eq '^65519 +65504 +0x7bff' ; t $? "65519 rounds to 65504 (0x7bff)"
echo "$out" | grep -Eq '^9.99999994e-09 +0 +0x0000 UNDERFLOW' ; t $? "1e-8 underflows FP16 to 0"
echo "$out" | grep -Eq '^1.00000001e-07 +1.1920929e-07 +0x0002 subnormal' ; t $? "1e-7 becomes the FP16 subnormal 0x0002"
out=$($AMPDIAG formats --ftz 1e-7)
echo "$out" | grep -Eq '^1.00000001e-07 +0 +0x0000 UNDERFLOW' ; t $? "--ftz flushes the FP16 subnormal to 0"
$AMPDIAG formats | grep -Eq '^fp16 +65504 +6.1035156e-05 +5.9604645e-08 +0.000488281 +65520 +2.9802322e-08' ; t $? "formats lists the FP16 limits"
echo "1..$n"
exit $fail
