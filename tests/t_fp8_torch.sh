#!/bin/sh
# t_fp8_torch.sh - ampdiag's float32 -> FP8 conversions against PyTorch's float8_e4m3fn and
# float8_e5m2 casts (tests/pytorch/fp8_casts.py writes torch's casts of a sample of float32
# patterns, tests/t_fp8_torch compares). Needs a Python with torch and numpy: $AMPDIAG_PYTHON,
# else the .venv that `scripts/install-deps.sh --with-torch` makes in the source tree, else
# python3; SKIP where none has them.
srcdir=${srcdir:-.}
CHECK=${T_FP8_TORCH:-./tests/t_fp8_torch}
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import torch, numpy; torch.float8_e4m3fn, torch.float8_e5m2'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with torch (float8 dtypes) and numpy (scripts/install-deps.sh --with-torch)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_fp8_torch.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
"$py" "$srcdir/tests/pytorch/fp8_casts.py" "$T/casts.bin" || { echo "Bail out! tests/pytorch/fp8_casts.py failed"; exit 1; }
"$CHECK" "$T/casts.bin"
