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
lim=$($AMPDIAG formats)
echo "$lim" | grep -Eq '^fp16 +65504 +6.1035156e-05 +5.9604645e-08 +0.000488281 +65520 +2.9802322e-08 +6.1005354e-05 +1/5/10 +15 +inf$' ; t $? "formats lists the FP16 limits"
echo "$lim" | grep -Eq '^e4m3 +448 +0.015625 +0.001953125 +0.0625 +464.00003 +0.0009765625 +0.014648438 +1/4/3 +7 +NaN$' ; t $? "formats lists the E4M3 row (max 448, overflow above 464 to NaN)"
echo "$lim" | grep -Eq '^e5m2 +57344 +6.1035156e-05 +1.5258789e-05 +0.125 +61440 +7.6293945e-06 +5.3405762e-05 +1/5/2 +15 +inf$' ; t $? "formats lists the E5M2 row (max 57344, overflow at 61440 to inf)"
[ "$(echo "$lim" | grep -Ec '^(fp32|fp16|bf16|e4m3|e5m2|e2m1|e2m3|e3m2|e8m0) ')" = 9 ] ; t $? "formats lists the nine rows of the table"
echo "$lim" | grep -Eq '^e2m1 +6 +1 +0.5 +0.25 +7 +0.25 +0.75 +1/2/1 +1 +max$' ; t $? "formats lists the E2M1 row (max 6, saturating from 7)"
echo "$lim" | grep -Eq '^e3m2 +28 +0.25 +0.0625 +0.125 +30 +0.03125 +0.21875 +1/3/2 +3 +max$' ; t $? "formats lists the E3M2 row (max 28, saturating from 30)"
echo "$lim" | grep -Eq '^e8m0 +1.7014118e\+38 +5.8774718e-39 +5.8774718e-39 .* 0/8/0 +127 +NaN$' ; t $? "formats lists the E8M0 scale (2^-127 .. 2^127, unsigned)"
out=$($AMPDIAG formats 464 464.1 -500 61440 -inf 2e-3)
echo "$out" | grep -Eq '^value +fp16 +bits +bf16 +bits +e4m3 +bits +e5m2 +bits$' ; t $? "the value table has a column group per format"
echo "$out" | grep -Eq '^464 +464 +0x5f40 +464 +0x43e8 +448 +0x7e +448 +0x5f$' ; t $? "464 ties to 448 in E4M3 (0x7e) and rounds to 448 in E5M2"
echo "$out" | grep -Eq '^464.100006 .* nan +0x7f OVERFLOW +448 +0x5f$' ; t $? "464.1 overflows E4M3 to NaN 0x7f"
echo "$out" | grep -Eq '^-500 .* nan +0xff OVERFLOW +-512 +0xe0$' ; t $? "-500: E4M3 NaN 0xff (sign kept), E5M2 -512"
echo "$out" | grep -Eq '^61440 .* +inf +0x7c OVERFLOW$' ; t $? "61440 overflows E5M2 to inf 0x7c"
echo "$out" | grep -Eq '^-inf .* nan +0xff inf +-inf +0xfc inf$' ; t $? "-inf becomes NaN in E4M3 (no inf), -inf in E5M2"
echo "$out" | grep -Eq '^0.00200000009 .* 0.001953125 +0x01 subnormal +0.001953125 +0x18$' ; t $? "2e-3 is the E4M3 subnormal 0x01, a normal in E5M2"
out=$($AMPDIAG formats --ftz 2e-3)
echo "$out" | grep -Eq '^0.00200000009 .* 0 +0x00 UNDERFLOW +0.001953125 +0x18$' ; t $? "--ftz flushes the E4M3 subnormal"
out=$($AMPDIAG formats 7 6.9 0.25 -inf)
echo "$out" | grep -Eq '^value +e2m1 +bits +e2m3 +bits +e3m2 +bits$' ; t $? "a second table for the MX element formats"
echo "$out" | grep -Eq '^7 +.* 6 +0x07 SATURATED +7 +0x1e +7 +0x17$' ; t $? "7 saturates E2M1 to 6 (0x07) and is exact in E2M3 and E3M2"
echo "$out" | grep -Eq '^6.9000001 +.* 6 +0x07 +7 +0x1e +7 +0x17$' ; t $? "6.9 rounds to 6 in E2M1 without saturating"
echo "$out" | grep -Eq '^0.25 +.* 0 +0x00 UNDERFLOW +0.25 +0x02 subnormal +0.25 +0x04$' ; t $? "0.25 ties to 0 in E2M1"
echo "$out" | grep -Eq '^-inf +.* -6 +0x0f inf +-7.5 +0x3f inf +-28 +0x3f inf$' ; t $? "-inf saturates the MX elements"
out=$($AMPDIAG formats --whatif mxfp8,mxfp8:rceil,mxfp4,nvfp4,fp8-current-e4m3 500 1 0.01 1e-3 1e-5 -3 0)
echo "$out" | grep -Eq '^value +mxfp8-e4m3:floor@row +mxfp8-e4m3:rceil@row +mxfp4-e2m1:floor@row +nvfp4:e4m3@row +fp8-current-e4m3:fp32$' ; t $? "--whatif: a column per scheme (the directions a 1-D tensor has)"
echo "$out" | grep -Eq '^500 +448 +512 +384 +500.000015 +499.999962$' ; t $? "--whatif: 500 saturates under OCP's floor rule (448), not under NVIDIA's round-up (512)"
echo "$out" | grep -Eq '^0.00100000005 +0.001953125 +0 FLUSHED ' ; t $? "--whatif: 1e-3 flushes under the round-up rule only"
echo "$out" | grep -Eq '^mxfp8-e4m3:floor@row +1 +0\.\.0 +1 +1 +2 +19.66 +1$' ; t $? "--whatif: the floor rule's block: scale 2^0, 1 flushed, 1 saturated, 2 subnormal, SQNR 19.66 dB"
echo "$out" | grep -Eq '^nvfp4:e4m3@row +1 +8\.\.8 +5 +0 +0 +43.98 +1 +tensor scale 5.37599993$' ; t $? "--whatif: NVFP4's block scale 2^8 (448) and its tensor scale 2688/500"
echo "$out" | grep -q 'columnwise or 2-D scheme(s) left out' ; t $? "--whatif on a 1-D tensor says what it left out"
out=$($AMPDIAG formats --whatif mxfp8 --shape 2x32 $(seq 1 64))
echo "$out" | grep -Eq '^mxfp8-e4m3:floor@col +32 ' ; t $? "--shape 2x32: 32 columnwise blocks"
$AMPDIAG formats --whatif mxfp9 1 2>/dev/null; [ $? -eq 2 ] ; t $? "--whatif with an unknown scheme exits 2"
err=$($AMPDIAG formats --whatif mxfp8 --shape 3x4 1 2 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$err" | grep -q 'does not fit' ; t $? "--shape larger than the values exits 2"
$AMPDIAG formats --shape 2xq 1 2>/dev/null; [ $? -eq 2 ] ; t $? "a bad --shape exits 2"
$AMPDIAG formats --whatif mxfp8 2>/dev/null; [ $? -eq 2 ] ; t $? "--whatif without values exits 2"
echo "1..$n"
exit $fail
