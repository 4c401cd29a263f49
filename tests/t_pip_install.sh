#!/bin/sh
# t_pip_install.sh - the install of docs/pytorch.md ("Install") on a fresh clone: `pip install
# ./python` in a new virtual environment, without a prior `make`, builds libampdiag into the
# package (python/setup.py) and a training script traced there writes a trace `ampdiag info`
# reads; a wheel built from python/ does the same in another environment; the other ways
# python/setup.py provides the library (an installed one named by pkg-config; the build tree of
# the clone it was installed from, as after `make && pip install ./python`) are found at run
# time; a build that cannot be done and a library that cannot be found say every way out.
#
# No network: the environments are made without pip (python -m venv --without-pip) and see the
# torch of the Python the tests use through a .pth file; pip runs as `pip --python ENV install
# --no-index --no-build-isolation` (the build uses that Python's setuptools instead of fetching
# one). SKIP without a Python with torch and h5py, a pip that installs into another environment
# (--python, pip 22.3), setuptools that builds wheels, or HDF5 known to pkg-config.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
. "$srcdir/tests/find_python.sh"
find_python 'import torch, h5py'
if [ -z "$py" ]; then
    echo "1..0 # SKIP no Python with torch and h5py (scripts/install-deps.sh --with-torch)"
    exit 0
fi
if ! "$py" -c '
import setuptools, pip
assert tuple(int(x) for x in pip.__version__.split(".")[:2]) >= (22, 3)
try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel
' >/dev/null 2>&1; then
    echo "1..0 # SKIP $py has no pip >= 22.3 with setuptools that builds wheels"
    exit 0
fi
if ! pkg-config --exists hdf5 2>/dev/null; then
    echo "1..0 # SKIP pkg-config finds no HDF5 (the package builds libampdiag against it)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/t_pip_install.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$T"' EXIT
# nothing from the network, no pip configuration of this machine, no cache left behind
export PIP_CONFIG_FILE=/dev/null PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL AMPDIAG_LIB AMPDIAG_BUILD_LIB PYTHONPATH
n=0
ok() { # ok COND-STATUS MESSAGE
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
show() { sed 's/^/# /' "$1" | tail -n "${2:-15}"; }

# ---------------------------------------------------------------- the sources setup.py compiles
# libampdiag_base (Makefile.am, src/trace/trace.mk) is every .c file of src/numerics, src/util and
# src/trace: setup.py compiles exactly those folders' .c files
"$py" - "$srcdir" >"$T/sources.out" 2>&1 <<'EOF'
import os, re, sys
root = sys.argv[1]
listed = set()
for mk in ("Makefile.am", "src/trace/trace.mk"):
    text = open(os.path.join(root, mk)).read().replace("\\\n", " ")
    for m in re.finditer(r"^libampdiag_base_la_SOURCES\s*\+?=(.*)$", text, re.M):
        listed |= {w for w in m.group(1).split() if w.endswith(".c")}
folders = ("src/numerics", "src/util", "src/trace")
found = {d + "/" + f for d in folders for f in os.listdir(os.path.join(root, d)) if f.endswith(".c")}
print("listed %d, in the folders %d; only listed: %s; only in the folders: %s"
      % (len(listed), len(found), sorted(listed - found), sorted(found - listed)))
sys.exit(0 if listed == found and listed else 1)
EOF
ok $? "setup.py's sources (every .c of src/numerics, src/util, src/trace) are libampdiag_base's: $(cat "$T/sources.out")"

# ---------------------------------------------------------------- a fresh clone
# the files of the repository the package needs, no build products (no .libs, no python/build)
C="$T/clone"
mkdir -p "$C/python/ampdiag" "$C/include" "$C/src/numerics" "$C/src/util" "$C/src/trace"
cp "$srcdir"/python/pyproject.toml "$srcdir"/python/setup.py "$srcdir"/python/README.md "$C/python/" &&
    for f in "$srcdir"/python/ampdiag/*.py; do
        case $f in */_build_info.py) ;; *) cp "$f" "$C/python/ampdiag/" ;; esac
    done &&
    cp "$srcdir"/include/*.h "$C/include/" &&
    for d in src/numerics src/util src/trace; do cp "$srcdir/$d"/*.c "$srcdir/$d"/*.h "$C/$d/" || exit 1; done ||
    { echo "Bail out! copying the sources"; exit 1; }

site=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
setup_site=$("$py" -c 'import os, setuptools; print(os.path.dirname(os.path.dirname(setuptools.__file__)))')
newenv() { # newenv DIR: a virtual environment without pip that sees torch (and setuptools to build)
    "$py" -m venv --without-pip "$1" >"$T/venv.out" 2>&1 || { show "$T/venv.out"; return 1; }
    sp=$(echo "$1"/lib/python3*/site-packages)
    printf '%s\n%s\n' "$site" "$setup_site" >"$sp/_torch_from_tests.pth"
}
pipin() { # pipin ENV ARGS...: pip of the tests' Python installing into ENV, offline
    e=$1
    shift
    "$py" -m pip --python "$e/bin/python" install --no-index --no-build-isolation "$@"
}
cat >"$T/train.py" <<'EOF'
import sys, torch
import ampdiag, ampdiag.torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with ampdiag.torch.trace(sys.argv[1], model, opt, trace_every=1) as tracer:
    for step in range(5):
        x = torch.randn(32, 8)
        loss = torch.nn.functional.cross_entropy(model(x), (x.sum(1) > 0).long())
        loss.backward()
        opt.step()
        opt.zero_grad()
        tracer.step(loss)
print(ampdiag.library_path())
EOF
traced() { # traced ENV NAME: the script's traced run in ENV, outside the clone; prints the library path
    (cd "$T" && "$1/bin/python" "$T/train.py" "$T/$2.h5") 2>"$T/$2.err"
}
info_ok() { "$AMPDIAG" info "$T/$1.h5" 2>&1 | grep -q "complete, 5 steps"; }

# ---------------------------------------------------------------- the user's command
newenv "$T/env1" || { echo "Bail out! python -m venv"; exit 1; }
(cd "$C" && pipin "$T/env1" ./python) >"$T/pip1.out" 2>&1
rc=$?
[ $rc -eq 0 ] || show "$T/pip1.out" 30
ok $rc "pip install ./python in a fresh clone (no make) into a new virtual environment"
lib=$(traced "$T/env1" run1) || show "$T/run1.err"
case $lib in "$T"/env1/lib/python3*/site-packages/ampdiag/libampdiag.so) r=0 ;; *) r=1 ;; esac
info_ok run1 || r=1
ok $r "a training script traced there (outside the clone) uses the package's own libampdiag ($lib); ampdiag info reads its trace"

# ---------------------------------------------------------------- a wheel
"$py" -m pip wheel --no-index --no-build-isolation --no-deps -w "$T/wheels" "$C/python" >"$T/wheel.out" 2>&1
rc=$?
whl=$(ls "$T"/wheels/ampdiag-*.whl 2>/dev/null | head -n 1)
[ $rc -eq 0 ] && [ -n "$whl" ] || { show "$T/wheel.out" 30; rc=1; }
"$py" -c 'import sys, zipfile; n = zipfile.ZipFile(sys.argv[1]).namelist(); sys.exit(0 if "ampdiag/libampdiag.so" in n else 1)' "$whl" 2>/dev/null || rc=1
ok $rc "pip wheel ./python: $(basename "${whl:-no wheel}") holds ampdiag/libampdiag.so"
newenv "$T/env2" && pipin "$T/env2" "$whl" >"$T/pip2.out" 2>&1
rc=$?
[ $rc -eq 0 ] || show "$T/pip2.out"
lib=$(traced "$T/env2" run2) || rc=1
case $lib in "$T"/env2/lib/python3*/site-packages/ampdiag/libampdiag.so) ;; *) rc=1 ;; esac
info_ok run2 || rc=1
ok $rc "the wheel installed into another environment traces a run with its own libampdiag ($lib)"

# ---------------------------------------------------------------- the installed library (pkg-config)
if [ -f .libs/libampdiag.so.0 ]; then
    mkdir -p "$T/pc"
    printf 'prefix=%s\nlibdir=${prefix}/.libs\nincludedir=${prefix}/include\n\nName: ampdiag\nDescription: test\nVersion: 0.1.0\nLibs: -L${libdir} -lampdiag\n' \
        "$(pwd)" >"$T/pc/ampdiag.pc"
    newenv "$T/env3" && (cd "$C" && AMPDIAG_BUILD_LIB=system PKG_CONFIG_PATH="$T/pc" pipin "$T/env3" ./python) \
        >"$T/pip3.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || show "$T/pip3.out"
    sp=$(echo "$T"/env3/lib/python3*/site-packages)
    [ ! -e "$sp/ampdiag/libampdiag.so" ] || rc=1
    lib=$(traced "$T/env3" run3) || rc=1
    [ "$lib" = "$(pwd)/.libs/libampdiag.so.0" ] && info_ok run3 || rc=1
    ok $rc "AMPDIAG_BUILD_LIB=system: no library compiled; the one 'pkg-config ampdiag' names is used ($lib)"
else
    n=$((n + 1))
    echo "ok $n # SKIP no shared libampdiag in the build tree (configured --disable-shared?)"
fi

# ---------------------------------------------------------------- make && pip install ./python
# the issue's failure: the Python code alone, installed from a tree where make was run; the
# installed package must find that tree's library (it looked only at AMPDIAG_LIB and the system's)
if [ -f .libs/libampdiag.so ]; then
    mkdir -p "$C/.libs" && cp -L .libs/libampdiag.so "$C/.libs/libampdiag.so"
    newenv "$T/env4" && (cd "$C" && AMPDIAG_BUILD_LIB=none pipin "$T/env4" ./python) >"$T/pip4.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || show "$T/pip4.out"
    lib=$(traced "$T/env4" run4) || { rc=1; show "$T/run4.err"; }
    [ "$lib" = "$C/.libs/libampdiag.so" ] && info_ok run4 || rc=1
    ok $rc "make, then pip install ./python (AMPDIAG_BUILD_LIB=none): the installed package finds the tree's .libs/libampdiag.so"
    rm -rf "$C/.libs"
    (cd "$T" && "$T/env4/bin/python" -c '
import ampdiag, ampdiag.torch
try:
    print("loaded", ampdiag.library_path())
except ampdiag.LibraryNotFound as e:
    print(e)
') >"$T/nolib.out" 2>&1
    if grep -q '^loaded' "$T/nolib.out"; then
        n=$((n + 1))
        echo "ok $n # SKIP this system has a libampdiag of its own: $(cat "$T/nolib.out")"
    else
        r=0
        for w in "pip install ./python" "libhdf5-dev" "make install" "AMPDIAG_LIB" "$C/.libs/libampdiag.so (no such file)"; do
            grep -qF "$w" "$T/nolib.out" || { r=1; echo "# missing: $w"; }
        done
        [ $r -eq 0 ] || show "$T/nolib.out"
        ok $r "without any libampdiag, LibraryNotFound lists what it tried and every way out (pip install ./python with HDF5's development files, make install, AMPDIAG_LIB)"
    fi
else
    n=$((n + 2))
    echo "ok $((n - 1)) # SKIP no shared libampdiag in the build tree"
    echo "ok $n # SKIP no shared libampdiag in the build tree"
fi

# ---------------------------------------------------------------- a build that cannot be done
(cd "$C" && AMPDIAG_BUILD_LIB=bundle PKG_CONFIG=false "$py" -m pip wheel --no-index --no-build-isolation \
    --no-deps -w "$T/wheels-x" ./python) >"$T/pip5.out" 2>&1
rc=$?
r=0
[ $rc -ne 0 ] || r=1
for w in "pkg-config finds no HDF5" "ways out" "libhdf5-dev" "make install" "AMPDIAG_BUILD_LIB=none"; do
    grep -qF "$w" "$T/pip5.out" || { r=1; echo "# missing: $w"; }
done
[ $r -eq 0 ] || show "$T/pip5.out" 30
ok $r "without HDF5 for pkg-config, the build stops (exit $rc) and says why and every way out"
echo "1..$n"
