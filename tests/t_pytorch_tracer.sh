#!/bin/sh
# t_pytorch_tracer.sh - the PyTorch tracer (python/ampdiag): tests/pytorch/test_tracer.py (records
# against values computed by hand, what-if counts against casts, SIGKILL, fp32/bf16/fp16 traces
# read by info, compare and plot, GradScaler skips), tests/pytorch/xcheck_tracer.py (a traced
# PyTorch run of the default mlp against `ampdiag run`, in FP32 and in an FP16 overflow),
# tests/pytorch/xcheck_transformer.py (the transformer preset, the same way) and
# tests/pytorch/test_integrations.py (the Lightning, Hugging Face and Accelerate wrappers; the
# real packages where installed). Python as in t_pytorch.sh: $AMPDIAG_PYTHON,
# else the source tree's .venv, else python3; SKIP where none has torch, numpy and h5py. The
# package is taken from the source tree, libampdiag from the build tree.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import torch, numpy, h5py'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with torch, numpy and h5py (scripts/install-deps.sh --with-torch)"
    exit 0
fi
if [ ! -f .libs/libampdiag.so ]; then
    echo "1..0 # SKIP no shared libampdiag in the build tree (.libs/libampdiag.so: configured --disable-shared?)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_pytorch_tracer.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
AMPDIAG_LIB=$(pwd)/.libs/libampdiag.so
PYTHONPATH="$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
export AMPDIAG_LIB PYTHONPATH
# one TAP stream from the scripts (their plans summed; other output as comments)
SCRIPTS="test_tracer xcheck_tracer xcheck_transformer test_integrations"
rcs=""
for s in $SCRIPTS; do
    "$py" "$srcdir/tests/pytorch/$s.py" "$AMPDIAG" "$T" >"$T/$s.tap" 2>&1
    rcs="$rcs $?"
done
n=0
for s in $SCRIPTS; do
    f="$T/$s.tap"
    while IFS= read -r line; do
        case $line in
        "ok "* | "not ok "*)
            n=$((n + 1))
            echo "$line" | sed "s/^\(not \)\{0,1\}ok [0-9]*/\1ok $n/"
            ;;
        1..*) ;;
        *) echo "# $line" ;;
        esac
    done <"$f"
done
if [ -n "$(echo "$rcs" | tr -d " 0")" ]; then
    n=$((n + 1))
    echo "not ok $n - the test scripts exited$rcs"
fi
echo "1..$n"
