#!/bin/sh
# t_fulldisk.sh - a run that runs out of room: on a full filesystem (a small tmpfs the test
# mounts, where it may: root and a kernel that allows it; otherwise those checks SKIP) and under
# a file-size limit (ulimit -f, always), `ampdiag run` ends with exit 3 and a message, never a
# signal; the trace keeps every record up to the last successful flush and opens in `info`; a
# run that fails before its first flush leaves no file; a run that fits but whose compaction
# would not still completes.
AMPDIAG=${AMPDIAG:-./ampdiag}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
case $AMPDIAG in /*) ;; *) AMPDIAG=$PWD/$AMPDIAG ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/t_fulldisk.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
M="$T/fs"
mounted=0
cleanup() { [ $mounted -eq 1 ] && umount "$M" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
steps_of() { # trace -> number of step records (info's JSON)
    "$AMPDIAG" info --format json "$1" 2>/dev/null |
        sed -n 's/.*"counts":{[^}]*"steps":\([0-9]*\).*/\1/p'
}
RUN="run --steps 300 --flush-every 100 --flush-seconds 1000 --progress none --trace-every 1"

# 1. a file-size limit: writes fail with EFBIG (SIGXFSZ is ignored), exit 3
(ulimit -f 400 && exec "$AMPDIAG" $RUN -o "$T/limit.h5") >"$T/limit.out" 2>"$T/limit.err"
rc=$?
ok $([ $rc -eq 3 ] && echo 0 || echo 1) "ulimit -f: exit 3, not a signal (exit $rc)"
grep -q "File too large" "$T/limit.err"
ok $? "ulimit -f: the message names the failure ($(head -c 200 "$T/limit.err"))"
"$AMPDIAG" info "$T/limit.h5" >"$T/limit.info" 2>&1
rc=$?
ok $rc "ulimit -f: the trace opens in info (exit $rc)"
s=$(steps_of "$T/limit.h5")
ok $([ "${s:-0}" -ge 100 ] && [ $((s % 100)) -eq 0 ] && echo 0 || echo 1) \
    "ulimit -f: whole flush windows kept ($s step records)"
grep -q "cut off" "$T/limit.info"
ok $? "ulimit -f: info says the trace was cut off"

# 2. a full filesystem
mkdir -p "$M"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=8k tmpfs "$M" 2>/dev/null; then
    mounted=1
else
    for i in 1 2 3 4 5 6 7 8 9 10 11; do skip "cannot mount a small tmpfs here (needs root)"; done
    echo "1..$n"
    exit $failed
fi
fill() { # SIZE: a fresh tmpfs of that size; runs the run into it
    umount "$M" && mount -t tmpfs -o size="$1" tmpfs "$M" || return 1
    "$AMPDIAG" $RUN -o "$M/t.h5" >"$T/fs.out" 2>"$T/fs.err"
}
fill 8k
rc=$?
ok $([ $rc -eq 3 ] && echo 0 || echo 1) "8 KB filesystem: exit 3 (exit $rc)"
grep -q "No space left on device" "$T/fs.err" && grep -q "held no record and was removed" "$T/fs.err"
ok $? "8 KB: the message says why and that the empty trace was removed ($(head -c 200 "$T/fs.err"))"
[ ! -e "$M/t.h5" ] && [ -z "$(ls -A "$M")" ]
ok $? "8 KB: no file left behind"

fill 100k
rc=$?
ok $([ $rc -eq 3 ] && echo 0 || echo 1) "100 KB filesystem: exit 3, not a signal (exit $rc)"
grep -q "No space left on device" "$T/fs.err"
ok $? "100 KB: the message names the failure"
"$AMPDIAG" info "$M/t.h5" >"$T/fs.info" 2>&1
rc=$?
ok $rc "100 KB: the trace opens in info (exit $rc)"
s=$(steps_of "$M/t.h5")
ok $([ "${s:-0}" -ge 100 ] && [ $((s % 100)) -eq 0 ] && echo 0 || echo 1) \
    "100 KB: the records up to the last successful flush are kept ($s step records)"
[ "$(ls -A "$M")" = "t.h5" ]
ok $? "100 KB: no temporary file left ($(ls -A "$M" | tr '\n' ' '))"

# room for the trace but not for the compacted copy made at close: the run completes
fill 600k
rc=$?
ok $([ $rc -eq 0 ] && echo 0 || echo 1) "600 KB filesystem: the run completes (exit $rc)"
"$AMPDIAG" info "$M/t.h5" >"$T/fs.info" 2>&1 && grep -q "complete, 300 steps" "$T/fs.info"
ok $? "600 KB: info reads a complete 300-step trace"
[ "$(ls -A "$M")" = "t.h5" ]
ok $? "600 KB: no temporary file left ($(ls -A "$M" | tr '\n' ' '))"
echo "1..$n"
exit $failed
