#!/bin/sh
# t_check_casts.sh - tests/gpu/check_casts.py on the CPU (--quick): ampdiag's block-scaled
# what-if against torch's own float8 (and, where torch has them, E8M0 and FP4) casts. On a GPU
# machine run `python3 tests/gpu/check_casts.py --device cuda` by hand. SKIP without torch and
# numpy or without the shared library.
srcdir=${srcdir:-.}
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import torch, numpy; torch.float8_e4m3fn, torch.float8_e5m2'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with torch (float8 dtypes) and numpy"
    exit 0
fi
if [ ! -f .libs/libampdiag.so ]; then
    echo "1..0 # SKIP no shared libampdiag in the build tree"
    exit 0
fi
out=$(AMPDIAG_LIB="$(pwd)/.libs/libampdiag.so" OMP_NUM_THREADS=1 "$py" "$srcdir/tests/gpu/check_casts.py" --device cpu --quick 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
echo "1..1"
if [ $rc -eq 0 ] && echo "$out" | grep -q ' 0 mismatches$'; then
    echo "ok 1 - the what-if's decoded values and counts equal torch's casts on the CPU ($(echo "$out" | tail -1 | sed 's/^check_casts: //'))"
else
    echo "not ok 1 - check_casts.py --device cpu reported mismatches (exit $rc)"
    exit 1
fi
