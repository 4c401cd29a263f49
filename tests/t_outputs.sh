#!/bin/sh
# t_outputs.sh - what a command will write is checked before any work, and nothing but a regular
# file is ever replaced: `--overwrite` (run -o, --save-weights, lrfind) refuses a device node, a
# FIFO, a socket, a symbolic link and a directory with exit 2 naming the path, as it refuses ''
# and a file that cannot be created (/proc/version); sweep, tune and lrfind check their outputs
# and the runs they would start (sweep --dry-run as well) before any run; every exit 2 says why
# (lrfind --steps 5, a model too large names its file, the list of synthetic sets printed line
# by line); a batch larger than the data is said before the first step. Where a check used to come only after training, the
# test also asserts that no trace was written. The devices it offers are its own (never the
# system's: a build with the defect, run as root, would replace them).
AMPDIAG=${AMPDIAG:-./ampdiag}
case $AMPDIAG in /*) ;; *) AMPDIAG=$(pwd)/$AMPDIAG ;; esac
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
T=$(mktemp -d "${TMPDIR:-/tmp}/t_outputs.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
cd "$T" || { echo "Bail out! cd $T"; exit 1; }
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
# a CMD...: exit status in $rc, stderr in $err (one line per message line)
a() { "$AMPDIAG" "$@" >out.txt 2>err.txt; rc=$?; err=$(cat err.txt); }
# refused WHAT NEEDLE: exit 2, stderr holds NEEDLE (fixed string), no trace written
refused() {
    [ $rc -eq 2 ] && grep -qF -- "$2" err.txt && [ ! -e run.h5 ] && [ ! -e lrfind.h5 ]
    ok $? "$1: exit 2 before any work, saying so ($err)"
}
P="-s 2 --progress none"

# 1. --overwrite never replaces what is not a regular file
mkfifo fifo
mkdir adir
ln -s target.h5 alink
if command -v python3 >/dev/null 2>&1 &&
    python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' sock 2>/dev/null; then
    have_sock=1
else
    have_sock=0
fi
# (never the system's /dev/null: a build with this defect, run as root, would replace it. A
# device node of the test's own, made where the test may: /dev/null's numbers, in its folder.)
if mknod nulldev c 1 3 2>/dev/null; then
    a run -o nulldev --overwrite $P
    refused "run -o DEVICE --overwrite" "'nulldev' is a character device: only a regular file is ever replaced"
    [ -c nulldev ]
    ok $? "the device node is still a device node"
    a run -o run.h5 --save-weights nulldev --overwrite $P
    refused "run --save-weights DEVICE --overwrite" "--save-weights 'nulldev' is a character device"
else
    skip "cannot make a device node here (not root)"
    skip "cannot make a device node here (not root)"
    skip "cannot make a device node here (not root)"
fi
a run -o fifo --overwrite $P
refused "run -o FIFO --overwrite" "'fifo' is a FIFO"
[ -p fifo ]
ok $? "the FIFO is still a FIFO"
if [ $have_sock -eq 1 ]; then
    a run -o sock --overwrite $P
    refused "run -o SOCKET --overwrite" "'sock' is a socket"
else
    skip "no python3 to make a socket"
fi
a run -o alink --overwrite $P
refused "run -o SYMLINK --overwrite" "'alink' is a symbolic link"
[ -L alink ] && [ ! -e target.h5 ]
ok $? "the link is still a link and nothing was written through it"
a run -o adir $P
refused "run -o DIR" "'adir' is a directory, not a file name"
a run -o adir --overwrite $P
refused "run -o DIR --overwrite (not exit 3 after training)" "'adir' is a directory"
a run -o '' $P
refused "run -o ''" "'': an empty file name"
a run -o run.h5 --save-weights fifo --overwrite $P
refused "run --save-weights FIFO --overwrite" "--save-weights 'fifo' is a FIFO"
a run -o run.h5 --save-weights adir --overwrite $P
refused "run --save-weights DIR --overwrite" "--save-weights 'adir' is a directory"
a run -o run.h5 --save-weights '' $P
refused "run --save-weights ''" "--save-weights '': an empty file name"
if [ -f /proc/version ]; then
    a run -o run.h5 --save-weights /proc/version $P
    refused "run --save-weights /proc/version" "--save-weights '/proc/version' exists (use --overwrite"
    a run -o run.h5 --save-weights /proc/version --overwrite $P
    refused "run --save-weights /proc/version --overwrite" "cannot create files in '/proc'"
else
    skip "no /proc/version"
    skip "no /proc/version"
fi
a run -o nodir/run.h5 $P
refused "run -o in a missing directory" "cannot create files in 'nodir'"
# a regular file is replaced with --overwrite, and kept without it
a run -o run.h5 --save-weights w.h5 $P
ok $([ $rc -eq 0 ] && [ -f run.h5 ] && [ -f w.h5 ] && echo 0 || echo 1) "run writes a trace and weights (exit $rc)"
a run -o run.h5 --save-weights w.h5 --overwrite $P
ok $([ $rc -eq 0 ] && echo 0 || echo 1) "... and replaces both with --overwrite (exit $rc)"
rm -f run.h5 w.h5

# 2. lrfind: its own messages, its outputs checked before the run
a lrfind --steps 5
[ $rc -eq 2 ] && echo "$err" | grep -q "^ampdiag lrfind: --steps '5': expected an integer in \[10, "
ok $? "lrfind --steps 5: exit 2 saying why ($err)"
: >lrfind.h5
a lrfind -s 20 --progress none
[ $rc -eq 2 ] && [ "$err" = "ampdiag lrfind: -o 'lrfind.h5' exists (use --overwrite to replace it)" ]
ok $? "lrfind onto an existing trace: the message names lrfind ($err)"
rm -f lrfind.h5
a lrfind -s 20 --save-weights adir --overwrite --progress none
refused "lrfind --save-weights DIR" "ampdiag lrfind: --save-weights 'adir' is a directory"
a lrfind -s 20 -o fifo --overwrite --progress none
refused "lrfind -o FIFO --overwrite" "ampdiag lrfind: -o 'fifo' is a FIFO"
a lrfind -s 20 --dry-run
[ $rc -eq 0 ] && grep -q '^ampdiag run .*--dry-run' out.txt && grep -q '^dry run: ' out.txt && [ ! -e lrfind.h5 ]
ok $? "lrfind --dry-run: the run's command, checked, nothing written (exit $rc)"

# 3. sweep: -o '', the runs checked before any starts, --dry-run too, its own files
a sweep -o '' $P
refused "sweep -o ''" "''"
a sweep --dry-run -o sw --steps 2 --optimizer adam
[ $rc -eq 2 ] && grep -q -- "--optimizer 'adam'" err.txt && grep -q "no run started" err.txt && [ ! -e sw ]
ok $? "sweep --dry-run with an option value every run would refuse: exit 2, nothing made ($err)"
a sweep --dry-run -o sw --steps 2 --batch 100000
[ $rc -eq 0 ] && grep -q -- "--batch 100000 is larger than the 4096 training rows" err.txt && [ ! -e sw ]
ok $? "sweep --dry-run with a --batch larger than the data: said up front"
a sweep --dry-run -o sw --steps 2 --model nosuch.txt
refused "sweep --dry-run --model MISSING" "nosuch.txt"
a sweep --dry-run -o sw --steps 2
[ $rc -eq 0 ] && [ "$(grep -c '^ampdiag run ' out.txt)" -eq 3 ] && [ ! -e sw ]
ok $? "sweep --dry-run of good options: the three commands, nothing made (exit $rc)"
a sweep -o sw --steps 2 --optimizer adam
[ $rc -eq 2 ] && [ ! -e sw/run-fp32.h5 ] && grep -q "no run started" err.txt
ok $? "sweep with an option value every run refuses: exit 2 before any run ($err)"
mkdir sw2 && mkfifo sw2/report.md
TO=""; command -v timeout >/dev/null 2>&1 && TO="timeout 300"
$TO "$AMPDIAG" sweep -o sw2 --steps 2 >out.txt 2>err.txt; rc=$?; err=$(cat err.txt)
refused "sweep -o DIR holding a FIFO where its report goes" "'sw2/report.md' is a FIFO"
[ ! -e sw2/run-fp32.h5 ]
ok $? "... before any run"
a sweep -o sw3 --steps 2 --save-weights w.h5
refused "sweep --save-weights" "every run of the sweep would write the same file"

# 4. tune
a tune -o '' $P
refused "tune -o ''" "'': an empty directory name"
a tune -o tn --dry-run $P
refused "tune --dry-run" "--dry-run: tune"

# 5. every exit 2 says why
a run --batch 100000 --dry-run $P -o run.h5
[ $rc -eq 0 ] && grep -q "^ampdiag run: warning: --batch 100000 is larger than the 4096 training rows of synthetic:blobs: every step repeats rows (a step is 24.4 passes over them)" err.txt
ok $? "run --batch larger than the data: a warning before any step ($err)"
a run --batch 5000 -s 1 --progress lines -o run.h5
[ $rc -eq 0 ] && [ "$(grep -n 'warning: --batch 5000' err.txt | cut -d: -f1)" = 2 ] &&
    "$AMPDIAG" info run.h5 | grep -q "batch 5000 is larger"
ok $? "... said before the first step and kept in the trace's notes (exit $rc)"
rm -f run.h5
printf 'input 32\nlinear fc1 65536\nlinear fc2 65536\nlinear fc3 10\nloss softmax_ce\n' >big.txt
a run --model big.txt $P -o run.h5
refused "a model too large" "--model big.txt: model too large"
a run --data synthetic:blob $P -o run.h5
lines=$(wc -l <err.txt)
long=$(awk 'length > 100' err.txt | wc -l)
[ $rc -eq 2 ] && ! grep -qF '\x0a' err.txt && [ "$lines" -ge 5 ] && [ "$long" -eq 0 ] &&
    grep -q '^  synthetic:blobs ' err.txt && grep -q "^ampdiag run: --data synthetic:blob: unknown synthetic set" err.txt
ok $? "--data synthetic:blob: the sets listed line by line ($lines lines, $long over 100 characters)"
a run --dry-run --precision fp16 --steps 3
[ $rc -eq 0 ] && grep -q "^dry run: model mlp (4 layers with parameters, 0.14M params), data .*, fp16, 3 steps of 64 -> run-fp16.h5" out.txt &&
    [ ! -e run-fp16.h5 ]
ok $? "run --dry-run: says what would run, writes nothing (exit $rc)"

# 6. plot writes only into regular files, without waiting on a FIFO
mkdir pl && mkfifo pl/loss.dat
"$AMPDIAG" run -o run.h5 $P >/dev/null 2>&1
if command -v timeout >/dev/null 2>&1; then TO="timeout 300"; else TO=""; fi
$TO "$AMPDIAG" plot run.h5 -o pl --no-draw >out.txt 2>err.txt
rc=$?
[ $rc -eq 3 ] && grep -q "pl/loss.dat': is a FIFO, not a regular file" err.txt && [ -p pl/loss.dat ]
ok $? "plot into a directory holding a FIFO: refused, not blocked (exit $rc)"

echo "1..$n"
exit $failed
