#!/bin/sh
# t_pytorch_dist.sh - per-rank traces of distributed PyTorch training (python/ampdiag/dist.py):
# tests/pytorch/test_dist.py runs tests/pytorch/dist_train.py under `torch.distributed.run
# --nproc_per_node 2` on the CPU with gloo (DDP, FSDP2, a NaN in one rank's batch, one rank's
# replica perturbed, a rank that stops early) and checks what each rank's trace holds. Python as
# in t_pytorch.sh: $AMPDIAG_PYTHON, else the source tree's .venv, else python3; SKIP where none
# has torch (with torch.distributed and gloo) and h5py. The package is taken from the source
# tree, libampdiag from the build tree.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "${srcdir:-.}/tests/find_python.sh"
find_python 'import h5py, torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available()'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with torch (torch.distributed, gloo) and h5py (scripts/install-deps.sh --with-torch)"
    exit 0
fi
if [ ! -f .libs/libampdiag.so ]; then
    echo "1..0 # SKIP no shared libampdiag in the build tree (.libs/libampdiag.so: configured --disable-shared?)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_pytorch_dist.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
AMPDIAG_LIB=$(pwd)/.libs/libampdiag.so
PYTHONPATH="$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
export AMPDIAG_LIB PYTHONPATH
"$py" "$srcdir/tests/pytorch/test_dist.py" "$AMPDIAG" "$T"
