#!/bin/sh
# t_pytorch_whatif.sh - the PyTorch tracer's block-scaled what-if (tests/pytorch/test_whatif.py:
# /quant rows of a traced run against ampdiag_quant_whatif on the same tensors). Python as in
# t_pytorch_tracer.sh; SKIP where none has torch, numpy and h5py, or without the shared library.
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
T=$(mktemp -d "${TMPDIR:-/tmp}/t_pytorch_whatif.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
AMPDIAG_LIB=$(pwd)/.libs/libampdiag.so
PYTHONPATH="$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
export AMPDIAG_LIB PYTHONPATH
"$py" "$srcdir/tests/pytorch/test_whatif.py" "$AMPDIAG" "$T"
