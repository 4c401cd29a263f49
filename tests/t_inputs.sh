#!/bin/sh
# t_inputs.sh - what users name on the command line, checked before any work starts: paths
# longer than the system takes are bad input (exit 2, the path shortened in the message) for
# every command; an output directory that is a file is bad input, one that cannot be created an
# I/O error (exit 3); data and weights files that point to other files (an external link, a
# soft link, external raw storage, a virtual dataset) are refused with exit 2 naming the
# object, and nothing of the other file is read. The HDF5 files are made with h5py ($AMPDIAG_PYTHON,
# the source tree's .venv, or python3); those checks SKIP without it.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
T=$(mktemp -d "${TMPDIR:-/tmp}/t_inputs.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
# cmd... -> rc in $rc, stderr in $T/err
try() { "$AMPDIAG" "$@" >"$T/out" 2>"$T/err"; rc=$?; }

# 1. a 5000-character path, in every place a command takes one
L=$T/$(printf '%05000d' 0)
P="--progress none"
for c in "info $L.h5" "compare $L.h5 $L.h5" "plot $L.h5 -o $T/p" "run -o $L.h5 --steps 2 $P" \
    "run --data $L.h5 -o $T/r.h5 --steps 2 $P" "run --init-from $L.h5 -o $T/r.h5 --steps 2 $P" \
    "run --save-weights $L.h5 -o $T/r.h5 --steps 2 $P" "sweep -o $L --steps 2" "tune -o $L --steps 2"; do
    try $c
    words=$(echo "$c" | cut -d' ' -f1,2 | sed "s|$T/||g" | cut -c1-24)
    len=$(wc -c <"$T/err")
    ok $([ "$rc" -eq 2 ] && grep -q "file name too long" "$T/err" && [ "$len" -lt 600 ] && echo 0 || echo 1) \
        "a 5000-character path ($words...): exit 2, 'file name too long', a short message (exit $rc, $len bytes)"
done
[ ! -e "$T/r.h5" ]
ok $? "no run started on a refused path"

# 2. output directories
: >"$T/afile"
try sweep -o "$T/afile/sub" --steps 2
ok $([ $rc -eq 2 ] && grep -q "is not a directory" "$T/err" && echo 0 || echo 1) "sweep -o under a file: exit 2 (exit $rc)"
try tune -o "$T/afile" --steps 2
ok $([ $rc -eq 2 ] && grep -q "is not a directory" "$T/err" && echo 0 || echo 1) "tune -o a file: exit 2 (exit $rc)"
if [ "$(id -u)" -ne 0 ]; then
    mkdir "$T/ro" && chmod 555 "$T/ro"
    try tune -o "$T/ro/x" --steps 2
    ok $([ $rc -eq 3 ] && grep -q "Permission denied" "$T/err" && echo 0 || echo 1) "tune -o in a read-only directory: exit 3 (exit $rc)"
else
    skip "root writes into read-only directories"
fi

# 3. data and weights files that point elsewhere
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import numpy, h5py'
if [ -z "$py" ]; then
    for i in 1 2 3 4 5 6 7 8 9 10 11 12 13; do skip "no Python with numpy and h5py"; done
    echo "1..$n"
    exit $failed
fi
"$AMPDIAG" run --steps 2 --progress none -o "$T/w.h5" --save-weights "$T/weights.h5" >/dev/null 2>&1
"$py" - "$T" <<'PY'
import sys, os, h5py, numpy as np
T = sys.argv[1]
secret = os.path.join(T, "secret.h5")
rng = np.random.default_rng(1)
x = rng.standard_normal((64, 20)).astype("f4"); y = (np.arange(64) % 10).astype("i4")
with h5py.File(secret, "w") as f:
    f["x"] = x; f["y"] = y
open(os.path.join(T, "raw.bin"), "wb").write(x.tobytes())
def data(name, how):
    with h5py.File(os.path.join(T, name), "w") as f:
        f["y"] = y
        if how == "elink":
            f["x"] = h5py.ExternalLink(secret, "/x")
        elif how == "soft":
            f["real"] = x
            f["x"] = h5py.SoftLink("/real")
        elif how == "external":
            f.create_dataset("x", shape=x.shape, dtype="f4", external=[(os.path.join(T, "raw.bin"), 0, x.nbytes)])
        elif how == "vds":
            lay = h5py.VirtualLayout(shape=x.shape, dtype="f4")
            lay[:] = h5py.VirtualSource(secret, "x", shape=x.shape)
            f.create_virtual_dataset("x", lay)
for how in ("elink", "soft", "external", "vds"):
    data("data-%s.h5" % how, how)
# weights: the first layer's weight as an external link to the saved weights
src = os.path.join(T, "weights.h5")
with h5py.File(src, "r") as s, h5py.File(os.path.join(T, "w-elink.h5"), "w") as f:
    names = []
    s.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    for i, n in enumerate(sorted(names)):
        if i == 0:
            f[n] = h5py.ExternalLink(src, "/" + n)
        else:
            f[n] = s[n][...]
PY
for how in elink soft external vds; do
    try run --data "$T/data-$how.h5" -o "$T/d-$how.h5" --steps 2 --progress none
    case $how in elink) what="is an external link" ;; soft) what="is a soft link" ;;
        external) what="keeps its data in external files" ;; vds) what="is a virtual dataset" ;; esac
    ok $([ $rc -eq 2 ] && grep -q "/x $what" "$T/err" && echo 0 || echo 1) \
        "--data whose /x $what: exit 2, named (exit $rc: $(head -c 160 "$T/err"))"
    [ ! -e "$T/d-$how.h5" ]
    ok $? "--data $how: no trace written"
done
try run --init-from "$T/w-elink.h5" -o "$T/i.h5" --steps 2 --progress none
ok $([ $rc -eq 2 ] && grep -q "is an external link" "$T/err" && echo 0 || echo 1) \
    "--init-from with an external link: exit 2, named (exit $rc: $(head -c 160 "$T/err"))"
# truncated files: corrupt contents are bad input (exit 2), not an I/O failure
head -c 3000 "$T/secret.h5" >"$T/dcut.h5"
try run --data "$T/dcut.h5" -o "$T/dc.h5" --steps 2 --progress none
ok $([ $rc -eq 2 ] && grep -q "corrupt or truncated" "$T/err" && echo 0 || echo 1) "a truncated data file: exit 2 (exit $rc)"
head -c 3000 "$T/weights.h5" >"$T/wcut.h5"
try run --init-from "$T/wcut.h5" -o "$T/wc.h5" --steps 2 --progress none
ok $([ $rc -eq 2 ] && grep -q "corrupt or truncated" "$T/err" && echo 0 || echo 1) "a truncated weights file: exit 2 (exit $rc)"
try run --init-from "$T/weights.h5" -o "$T/i2.h5" --steps 2 --progress none
ok $rc "--init-from the same weights stored in the file: accepted (exit $rc)"
try run --data "$T/secret.h5" -o "$T/s.h5" --steps 2 --progress none
ok $rc "--data stored in the file: accepted (exit $rc)"
echo "1..$n"
exit $failed
