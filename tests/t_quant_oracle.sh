#!/bin/sh
# t_quant_oracle.sh - the block-scaled what-if of libampdiag (ampdiag_quant_whatif: MX, NVFP4,
# FP8 blockwise and current scaling) against an independent implementation written from the
# specifications with numpy and ml_dtypes (tests/quant/oracle.py), on stratified tensors with
# every edge (tests/quant/check_oracle.py: every count equal, the sums of squares to 1e-12).
# Python: $AMPDIAG_PYTHON, else the source tree's .venv, else python3; SKIP where none has numpy
# and ml_dtypes (scripts/install-deps.sh --with-torch installs them), or without the shared
# library in the build tree.
srcdir=${srcdir:-.}
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import numpy, ml_dtypes; ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with numpy and ml_dtypes (pip install ml_dtypes; scripts/install-deps.sh --with-torch)"
    exit 0
fi
if [ ! -f .libs/libampdiag.so ]; then
    echo "1..0 # SKIP no shared libampdiag in the build tree (.libs/libampdiag.so: configured --disable-shared?)"
    exit 0
fi
AMPDIAG_LIB=$(pwd)/.libs/libampdiag.so
PYTHONPATH="$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
export AMPDIAG_LIB PYTHONPATH
exec "$py" "$srcdir/tests/quant/check_oracle.py"
