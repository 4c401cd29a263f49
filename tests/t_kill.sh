#!/bin/sh
# t_kill.sh - crash safety of the trace: runs killed with SIGKILL at random times leave traces
# that all open and keep every record up to the last completed flush. What a kill can lose:
# the window being filled (at most FLUSH steps), the window handed to the background writer
# whose flush had not finished (at most FLUSH more) and the record lag (a step's records are
# written two steps later): at most 2 x FLUSH + 2 steps. The loss is printed per kill and the
# worst loss at the end. KILLS runs (default 10; `make check-kill` runs 100), each killed after
# a random 0.05-1.2 s, flushing every 5 steps. Exit status 0 = all held.
AMPDIAG=${AMPDIAG:-./ampdiag}
KILLS=${KILLS:-10}
FLUSH=5
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
T=$(mktemp -d "${TMPDIR:-/tmp}/t_kill.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
echo "1..$((KILLS * 2 + 1))"
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
worst=0
within=0
seed=$$
i=0
while [ $i -lt "$KILLS" ]; do
    i=$((i + 1))
    seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
    ms=$(( 50 + seed % 1150 ))
    "$AMPDIAG" run --steps 1000000 --flush-every $FLUSH --flush-seconds 1000 --progress bar --trace-every 1 \
        --hist-every 7 -o "$T/k$i.h5" 2>"$T/k$i.err" >/dev/null &
    pid=$!
    sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
    kill -KILL $pid 2>/dev/null
    wait $pid 2>/dev/null
    # the last step the run said it had done (the bar is drawn after each step)
    done_steps=$(tr "\r" "\n" <"$T/k$i.err" | sed -n "s/^step *\([0-9]*\)\/.*/\1/p" | tail -1)
    done_steps=${done_steps:-0}
    if [ ! -f "$T/k$i.h5" ]; then
        # killed before the file existed: nothing to open, nothing lost but the setup
        ok $([ "$done_steps" -eq 0 ] && echo 0 || echo 1) "kill $i after ${ms} ms: no file yet, no step done"
        ok 0 "kill $i: (no trace)"
        continue
    fi
    "$AMPDIAG" info --format json "$T/k$i.h5" >"$T/k$i.json" 2>"$T/k$i.ierr"
    rc=$?
    ok $rc "kill $i after ${ms} ms: the trace opens (info exit $rc)"
    [ $rc -eq 0 ] || head -c 600 "$T/k$i.ierr" | sed 's/^/# /'
    kept=$(sed -n 's/.*"counts":{[^}]*"steps":\([0-9]*\).*/\1/p' "$T/k$i.json")
    kept=${kept:-0}
    lost=$((done_steps - kept))
    [ $lost -gt $worst ] && worst=$lost
    ok $([ $lost -le $((2 * FLUSH + 2)) ] && [ $lost -ge 0 ] && echo 0 || echo 1) \
        "kill $i: $kept step records kept, $done_steps steps reported done: $lost lost (at most $((2 * FLUSH + 2)))"
    [ $lost -le $((FLUSH + 2)) ] && within=$((within + 1))
done
echo "# worst loss over $KILLS kills: $worst steps; $within kills lost at most one window + the lag ($((FLUSH + 2)))"
ok 0 "summary: worst loss $worst steps"
exit $failed
