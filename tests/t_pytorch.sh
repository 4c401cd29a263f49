#!/bin/sh
# t_pytorch.sh - ampdiag's numerics against PyTorch's (tests/pytorch/*.py): FP32 AdamW and SGD
# losses step by step from the same weights and batches. Needs a Python with torch, numpy and
# h5py: $AMPDIAG_PYTHON, else the .venv that `scripts/install-deps.sh --with-torch` makes in the
# source tree, else python3; SKIP where none has them.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import torch, numpy, h5py'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with torch, numpy and h5py (scripts/install-deps.sh --with-torch)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_pytorch.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
"$py" "$srcdir/tests/pytorch/xcheck_optim.py" "$AMPDIAG" "$T"
