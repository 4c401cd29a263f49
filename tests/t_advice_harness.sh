#!/bin/sh
# t_advice_harness.sh - the advice corpus's own parts (tests/corpus/selftest.py): the generator
# is deterministic and uses only options `ampdiag run` offers, the adapter turns compare's JSON
# into the options it names, the bands and the learning criterion give known answers, and
# data.py's FP32 forward reproduces ampdiag's eval loss (SKIP without numpy and h5py).
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP python3 is needed (the harness is standard-library Python)"
    exit 0
fi
exec python3 "$srcdir/tests/corpus/selftest.py" --ampdiag "$AMPDIAG"
