#!/bin/sh
# t_cli.sh - the command-line conventions every command shares (src/cli/cli.c): unknown options
# named with the closest one, missing values named, short options, "--", `ampdiag help CMD`,
# unknown commands, the refusal to replace an output without --overwrite, --version, the exit
# status after SIGINT / SIGTERM (130 / 143, traces marked interrupted) and the man page.
AMPDIAG=${AMPDIAG:-./ampdiag}
case $AMPDIAG in /*) ;; *) AMPDIAG=$(pwd)/$AMPDIAG ;; esac
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_cli.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
# run ampdiag ARGS...: exit status in $rc, stdout in $out, stderr in $err
a() { "$AMPDIAG" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; out=$(cat "$tmp/out"); err=$(cat "$tmp/err"); }
# steps of a trace, from info's JSON counts
steps_of() { "$AMPDIAG" info --format json "$1" | sed -n 's/.*"counts":{[^}]*"steps":\([0-9]*\).*/\1/p'; }
status_of() { "$AMPDIAG" info --format json "$1" | sed -n 's/.*"trace_format_version":[0-9]*,"status":"\([a-z]*\)".*/\1/p'; }

# unknown options: exit 2, named, with the closest known option when there is one
a run --step 10
[ $rc -eq 2 ] && [ "$err" = "ampdiag run: unknown option '--step'; did you mean '--steps'?" ] ; t $? "run --step: exit 2, did you mean '--steps'? ($rc: $err)"
a sweep --precisions fp32 -o "$tmp/sw" --dry-run --optimiser sgd
[ $rc -eq 2 ] && [ "$err" = "ampdiag sweep: unknown option '--optimiser'; did you mean '--optimizer'?" ] ; t $? "sweep: run's options are suggested too ($err)"
a compare x.h5 --fial-on nan
[ $rc -eq 2 ] && [ "$err" = "ampdiag compare: unknown option '--fial-on'; did you mean '--fail-on'?" ] ; t $? "compare --fial-on: transposed letters suggest --fail-on ($err)"
a info --bogus x.h5
[ $rc -eq 2 ] && [ "$err" = "ampdiag info: unknown option '--bogus' (see ampdiag info --help)" ] ; t $? "info --bogus: exit 2, no far-fetched suggestion ($err)"
a run -steps 5
[ $rc -eq 2 ] && echo "$err" | grep -q "unknown option '-steps'; did you mean '--steps'?" ; t $? "run -steps (one dash): named, not read as -s teps ($err)"
a plot -q x.h5 -o "$tmp/p"
[ $rc -eq 2 ] && [ "$err" = "ampdiag plot: unknown option '-q' (see ampdiag plot --help)" ] ; t $? "plot -q: an unknown short option ($err)"
a --verison
[ $rc -eq 2 ] && [ "$err" = "ampdiag: unknown option '--verison'; did you mean '--version'?" ] ; t $? "ampdiag --verison: did you mean '--version'? ($err)"
a run --stepsX=3
[ $rc -eq 2 ] && echo "$err" | grep -q "unknown option '--stepsX'" ; t $? "no abbreviations or extensions of long names: --stepsX is unknown ($err)"
a run --ste 3
[ $rc -eq 2 ] && echo "$err" | grep -q "unknown option '--ste'; did you mean '--steps'?" ; t $? "an abbreviation is refused with the option it abbreviates ($err)"

# missing values and values where none is taken
a run --steps
[ $rc -eq 2 ] && [ "$err" = "ampdiag run: option '--steps' (-s) needs a value" ] ; t $? "run --steps: needs a value, named with its short form ($err)"
a run -s
[ $rc -eq 2 ] && [ "$err" = "ampdiag run: option '--steps' (-s) needs a value" ] ; t $? "run -s: the same message ($err)"
a info x.h5 --format
[ $rc -eq 2 ] && [ "$err" = "ampdiag info: option '--format' needs a value" ] ; t $? "info --format: needs a value ($err)"
a run --ftz=1
[ $rc -eq 2 ] && [ "$err" = "ampdiag run: option '--ftz' takes no value (got '--ftz=1')" ] ; t $? "run --ftz=1: takes no value ($err)"

# short options, --opt=V, --opt V, positionals among options, --
a run -s 3 --progress none -o "$tmp/s1.h5"
[ $rc -eq 0 ] && [ "$(steps_of "$tmp/s1.h5")" = 3 ] ; t $? "run -s 3: 3 steps (exit $rc)"
a run -s2 --progress=none -o"$tmp/s2.h5"
[ $rc -eq 0 ] && [ "$(steps_of "$tmp/s2.h5")" = 2 ] ; t $? "run -s2 -oFILE --progress=none: 2 steps (exit $rc)"
a run --steps=4 --progress none --out "$tmp/s4.h5"
[ $rc -eq 0 ] && [ "$(steps_of "$tmp/s4.h5")" = 4 ] ; t $? "run --steps=4 --out FILE: 4 steps (exit $rc)"
a info --top 1 "$tmp/s1.h5" --format json
[ $rc -eq 0 ] && echo "$out" | grep -q '^{"format":"ampdiag-info"' ; t $? "info: options before and after the trace"
(cd "$tmp" && "$AMPDIAG" run -s 2 --progress none -o -x.h5 >/dev/null 2>&1) && [ -f "$tmp/-x.h5" ] ; t $? "-o takes a value that begins with '-'"
(cd "$tmp" && "$AMPDIAG" info -- -x.h5 >/dev/null 2>"$tmp/err") ; t $? "info -- -x.h5: the trace named -x.h5 is read ($(cat "$tmp/err"))"
(cd "$tmp" && "$AMPDIAG" info -x.h5 >/dev/null 2>"$tmp/err"); rc=$?
[ $rc -eq 2 ] && grep -q "unknown option '-x'" "$tmp/err" ; t $? "... and without -- it is an (unknown) option"
a formats -65520 --ftz -1e-7
[ $rc -eq 0 ] && echo "$out" | grep -Eq '^-65520 +-inf +0xfc00 OVERFLOW' && echo "$out" | grep -Eq '^-1.00000001e-07 +-0 +0x8000 UNDERFLOW' ; t $? "formats: negative numbers are values, --ftz among them"
a sweep --precisions fp32,fp16 -o "$tmp/dry" --dry-run -s5 --seed=3 -j2
[ $rc -eq 0 ] && echo "$out" | grep -q -- "^ampdiag run --steps 5 --seed 3 --precision fp16 " ; t $? "sweep passes run's options on (-s5 as --steps 5) ($out)"
a sweep --precisions fp32 -o "$tmp/dry" --dry-run extra
[ $rc -eq 2 ] && echo "$err" | grep -q "unexpected argument 'extra'" ; t $? "sweep: a stray argument is refused"

# help
nc=0
for c in $("$AMPDIAG" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p'); do
    "$AMPDIAG" help "$c" >"$tmp/h1"; r1=$?
    "$AMPDIAG" "$c" --help >"$tmp/h2"; r2=$?
    "$AMPDIAG" "$c" -h >"$tmp/h3"; r3=$?
    [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $r3 -eq 0 ] && [ -s "$tmp/h1" ] && cmp -s "$tmp/h1" "$tmp/h2" && cmp -s "$tmp/h1" "$tmp/h3" &&
        grep -q "usage: ampdiag $c" "$tmp/h1"
    t $? "help $c prints what $c --help and $c -h print"
    nc=$((nc + 1))
done
[ $nc -eq 9 ] ; t $? "--help lists the 9 commands ($nc)"
# not on a terminal and without COLUMNS: no help line wider than 100 columns
wide=$(for c in "" $("$AMPDIAG" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p'); do
    COLUMNS= "$AMPDIAG" $c --help; done | awk 'length($0) > 100' | head -2)
[ -z "$wide" ] ; t $? "every --help fits 100 columns${wide:+: $wide}"
"$AMPDIAG" help terms | grep -q '^Terms:' && "$AMPDIAG" help rules | grep -q '^### Findings' ; t $? "help terms and help rules: the glossary and the rules' reference"
a help
[ $rc -eq 0 ] && [ "$out" = "$("$AMPDIAG" --help)" ] && echo "$out" | grep -q '^Usage: ampdiag COMMAND' ; t $? "help: the global help on stdout"
a help nosuch
[ $rc -eq 2 ] && [ -z "$out" ] && echo "$err" | grep -q "unknown command 'nosuch'" ; t $? "help nosuch: exit 2 ($err)"
a help swep
[ $rc -eq 2 ] && echo "$err" | grep -q "unknown command 'swep'; did you mean 'sweep'?" ; t $? "help swep: did you mean 'sweep'? ($err)"
a comapre a.h5
[ $rc -eq 2 ] && [ "$err" = "ampdiag: unknown command 'comapre'; did you mean 'compare'?" ] ; t $? "ampdiag comapre: did you mean 'compare'? ($err)"
a nosuch
[ $rc -eq 2 ] && [ "$err" = "ampdiag: unknown command 'nosuch' (see ampdiag --help)" ] ; t $? "ampdiag nosuch: exit 2 ($err)"

# an existing output is not replaced; the message names --overwrite
a run -s 2 --progress none -o "$tmp/s1.h5"
[ $rc -eq 2 ] && [ "$err" = "ampdiag run: '$tmp/s1.h5' exists (use --overwrite to replace it)" ] && [ "$(steps_of "$tmp/s1.h5")" = 3 ] ; t $? "run -o EXISTING: exit 2, names --overwrite, the file untouched ($err)"
a run -s 2 --progress none -o "$tmp/w.h5" --save-weights "$tmp/s2.h5"
[ $rc -eq 2 ] && echo "$err" | grep -q -- "--save-weights '$tmp/s2.h5' exists (use --overwrite to replace it)" && [ ! -f "$tmp/w.h5" ] ; t $? "run --save-weights EXISTING: refused before training ($err)"
a run -s 2 --progress none -o "$tmp/s1.h5" --overwrite
[ $rc -eq 0 ] && [ "$(steps_of "$tmp/s1.h5")" = 2 ] ; t $? "... and replaced with --overwrite"

# --version
a --version
[ $rc -eq 0 ] && echo "$out" | grep -Eq '^ampdiag [0-9]+\.[0-9]+\.[0-9]+$' && [ "$out" = "$("$AMPDIAG" version)" ] ; t $? "--version: ampdiag X.Y.Z ($out)"

# SIGINT / SIGTERM: the step is finished, the trace closed and marked interrupted, then exit
# 128 + the signal. stop PID SIG FILE: signal PID once FILE exists (the writer is running)
# and again each second until it exits (a signal before the handler is set is lost or fatal:
# wait a second after FILE appears), then its exit status in $rc. The waits are long (10 and
# 5 minutes) so that a loaded machine does not fail the test; each ends as soon as it can.
stop() {
    i=0
    while [ ! -f "$3" ] && [ $i -lt 600 ] && kill -0 "$1" 2>/dev/null; do sleep 1; i=$((i + 1)); done
    sleep 1
    i=0
    while kill -0 "$1" 2>/dev/null && [ $i -lt 300 ]; do
        if [ $i -eq 0 ] || [ $i -eq 30 ]; then kill -s "$2" "$1" 2>/dev/null; fi
        sleep 1; i=$((i + 1))
    done
    kill -0 "$1" 2>/dev/null && kill -s KILL "$1"
    wait "$1"; rc=$?
}
"$AMPDIAG" run --steps 10000000 --progress none -o "$tmp/int.h5" >/dev/null 2>&1 &
stop $! INT "$tmp/int.h5"
[ $rc -eq 130 ] && [ "$(status_of "$tmp/int.h5")" = interrupted ] ; t $? "run + SIGINT: exit 130, the trace marked interrupted (exit $rc, $(status_of "$tmp/int.h5"))"
"$AMPDIAG" sweep --precisions fp32,fp16 -j 2 -o "$tmp/sig" --steps 10000000 >/dev/null 2>"$tmp/sweep.err" &
pid=$!
while [ ! -f "$tmp/sig/run-fp16.h5" ] && kill -0 $pid 2>/dev/null; do sleep 1; done
stop $pid TERM "$tmp/sig/run-fp32.h5"
[ $rc -eq 143 ] && [ "$(status_of "$tmp/sig/run-fp32.h5")" = interrupted ] && [ "$(status_of "$tmp/sig/run-fp16.h5")" = interrupted ] &&
    grep -q "interrupted by signal 15" "$tmp/sweep.err"
t $? "sweep + SIGTERM: passed to the runs, both traces interrupted, exit 143 (exit $rc)"

# the man page (built when configure found help2man): every command's options in it
if [ -f ampdiag.1 ]; then
    grep -q '^\.SH COMMANDS' ampdiag.1 && grep -q '^\.SS "ampdiag sweep"' ampdiag.1 && grep -q 'scale\\-growth\\-interval' ampdiag.1 &&
        grep -q '^\.SH SYNOPSIS' ampdiag.1
    t $? "ampdiag.1: synopsis, and a COMMANDS section with each command's --help"
    grep -q '^\.SH "EXIT STATUS"' ampdiag.1 && grep -q '^\.SH EXAMPLES' ampdiag.1 && grep -q '^\.SH "SEE ALSO"' ampdiag.1 &&
        grep -q '^\.SH DESCRIPTION' ampdiag.1 && grep -q 'answers one question with evidence' ampdiag.1
    t $? "ampdiag.1: a description, exit status, examples and see also (docs/ampdiag.x)"
    if command -v man >/dev/null 2>&1; then
        MANWIDTH=80 man -l ampdiag.1 2>"$tmp/man.err" >"$tmp/man.txt"
        grep -q 'ampdiag run' "$tmp/man.txt" && ! grep -q . "$tmp/man.err"
        t $? "man -l ampdiag.1 renders it without warnings ($(head -c 300 "$tmp/man.err"))"
        wide=$(awk 'length > 80' "$tmp/man.txt" | wc -l)
        [ "$wide" -eq 0 ] && [ "$(wc -l <"$tmp/man.txt")" -gt 200 ]
        t $? "MANWIDTH=80: every line of the page within 80 columns ($wide wider)"
    fi
else
    n=$((n + 1)); echo "ok $n # SKIP no ampdiag.1 (configure found no help2man)"
fi

echo "1..$n"
exit $fail
