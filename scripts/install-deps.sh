#!/bin/sh
# Install what ampdiag needs to build, test, draw charts and make its man page (help2man) on
# Debian/Ubuntu (run as root, or with sudo available). Non-interactive; does nothing when every
# package is already there.
#
#   scripts/install-deps.sh                 the Debian packages
#   scripts/install-deps.sh --with-torch    also a Python virtual environment .venv (or $VENV)
#                                           with PyTorch (CPU use; its Linux wheel pulls NVIDIA
#                                           libraries, several GB), numpy and h5py, for the tests
#                                           that check ampdiag against PyTorch (tests/t_pytorch.sh)
#                                           and the PyTorch tracer (tests/t_pytorch_tracer.sh), with
#                                           lightning, transformers, accelerate and torchvision
#                                           (about 300 MB more on disk) for the tests of its
#                                           integrations and real models, setuptools (the
#                                           offline test of pip install ./python builds with it),
#                                           and ml_dtypes (the OCP FP8/FP6/FP4/E8M0 element types
#                                           of the block-format oracle, tests/t_quant_oracle.sh)
#   scripts/install-deps.sh --with-sklearn  also Debian's python3-sklearn, python3-h5py (and numpy)
#                                           for the advice corpus's real data sets (scikit-learn's
#                                           digits, wine and breast cancer), scaled initial weights
#                                           and per-example losses (tests/t_advice_corpus.sh, make
#                                           check-advice; docs/advice-corpus.md)
#   scripts/install-deps.sh --with-slurm    also Slurm and munge (slurm-wlm, munge) for
#                                           make check-slurm, which starts a one-node cluster of
#                                           its own (tests/t_slurm.sh; docs/cluster.md)
#   scripts/install-deps.sh --with-blis     also BLIS (libblis-dev), to build with
#                                           ./configure --with-blas=blis (docs/benchmarks.md)
set -eu
with_torch=0
with_slurm=0
with_sklearn=0
with_blis=0
for a in "$@"; do
    case $a in
    --with-torch) with_torch=1 ;;
    --with-slurm) with_slurm=1 ;;
    --with-sklearn) with_sklearn=1 ;;
    --with-blis) with_blis=1 ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "install-deps: unknown option '$a' (see --help)" >&2; exit 2 ;;
    esac
done
PKGS="build-essential autoconf automake libtool pkg-config libhdf5-dev zlib1g-dev hdf5-tools libopenblas-dev gnuplot-nox time help2man"
[ $with_torch -eq 0 ] || PKGS="$PKGS python3 python3-venv"
[ $with_slurm -eq 0 ] || PKGS="$PKGS slurm-wlm munge"
[ $with_sklearn -eq 0 ] || PKGS="$PKGS python3 python3-numpy python3-h5py python3-sklearn"
[ $with_blis -eq 0 ] || PKGS="$PKGS libblis-dev"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
else
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "install-deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
if [ $with_torch -eq 1 ]; then
    venv=${VENV:-.venv}
    mods="torch, numpy, h5py, lightning, transformers, accelerate, torchvision, setuptools, ml_dtypes"
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import $mods" 2>/dev/null; then
        echo "install-deps: $venv has $mods"
    else
        echo "install-deps: installing $mods into $venv (several GB)"
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        "$venv/bin/python" -m pip install -q --upgrade pip
        "$venv/bin/python" -m pip install -q torch numpy h5py lightning transformers accelerate torchvision "setuptools>=70.1" ml_dtypes
        "$venv/bin/python" -c "import $mods; print('install-deps: torch', torch.__version__)"
    fi
fi
