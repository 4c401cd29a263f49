#!/bin/sh
# t_pytorch_evidence.sh - what the PyTorch tracer (python/ampdiag) catches of its users' failures:
# tests/pytorch/test_evidence.py (FP16 without a GradScaler, a GradScaler not given to the tracer,
# skipped steps, step() without a loss, lr and clip, the loss and the attention scores as layers,
# pass-through leaves, torch.compile; small models in own loops) and tests/pytorch/test_models.py
# (real models where installed: torchvision's resnet18, a transformers BERT in an own loop and
# under the HF Trainer, Lightning with and without torch.compile; random init, synthetic data,
# nothing downloaded). Python as in t_pytorch_tracer.sh; SKIP where none has torch, numpy and
# h5py. The package is taken from the source tree, libampdiag from the build tree.
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
T=$(mktemp -d "${TMPDIR:-/tmp}/t_pytorch_evidence.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
AMPDIAG_LIB=$(pwd)/.libs/libampdiag.so
PYTHONPATH="$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export AMPDIAG_LIB PYTHONPATH HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HF_DATASETS_OFFLINE
# one TAP stream from the scripts (their plans summed; other output as comments)
SCRIPTS="test_evidence test_models"
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
