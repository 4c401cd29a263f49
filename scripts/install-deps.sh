#!/bin/sh
# Install what ampdiag needs to build, test, draw charts and make its man page (help2man) on
# Debian/Ubuntu (run as root, or with sudo available). Non-interactive; does nothing when every
# package is already there.
set -eu
PKGS="build-essential autoconf automake libtool pkg-config libhdf5-dev hdf5-tools libopenblas-dev gnuplot-nox time help2man"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
