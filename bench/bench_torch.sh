#!/bin/sh
# bench_torch.sh - ampdiag's training step against PyTorch eager on one CPU thread
# (bench/bench_torch.py says what is measured and how). Finds a Python with torch as the tests do
# (AMPDIAG_PYTHON, the source tree's .venv, python3) and says "skipped" without one.
# Usage: bench/bench_torch.sh [AMPDIAG [ROUNDS]]   (default ./ampdiag 5)
set -eu
srcdir=${srcdir:-$(dirname "$0")/..}
. "$srcdir/tests/find_python.sh"
find_python 'import torch'
if [ -z "$py" ]; then
    echo "bench_torch.sh: no Python with torch (AMPDIAG_PYTHON, .venv or python3): skipped"
    exit 0
fi
exec "$py" "$srcdir/bench/bench_torch.py" "$@"
