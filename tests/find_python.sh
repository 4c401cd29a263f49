# find_python.sh - sourced by the tests that need a Python with some modules: find_python CODE
# sets py to the first of $AMPDIAG_PYTHON, the source tree's .venv (scripts/install-deps.sh
# --with-torch makes it) and python3 that runs CODE (e.g. 'import torch, h5py') without error,
# or to "" when none does (the test then reports SKIP). A relative path is made absolute.
find_python() {
    py=""
    for c in "${AMPDIAG_PYTHON:-}" "${srcdir:-.}/.venv/bin/python" python3; do
        [ -n "$c" ] || continue
        if "$c" -c "$1" >/dev/null 2>&1; then
            # an absolute path: tests cd elsewhere before running it
            case $c in
            /*) ;;
            */*) c="$(cd "$(dirname "$c")" && pwd)/$(basename "$c")" ;;
            esac
            py=$c
            return 0
        fi
    done
    return 0 # (py is "": the caller reports SKIP)
}
