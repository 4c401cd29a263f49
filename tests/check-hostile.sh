#!/bin/sh
# check-hostile.sh - `make check-hostile`: the mutation campaign of tests/hostile_campaign.py
# against this build's ampdiag (docs/fuzzing.md; build it with ASan/UBSan for the real
# campaign). HOSTILE_N mutated traces (3000), HOSTILE_JOBS at a time (1), HOSTILE_SEED (1).
# Needs a Python with numpy and h5py: $AMPDIAG_PYTHON, else the source tree's .venv, else
# python3; exits 77 (skipped) where none has them.
AMPDIAG=${AMPDIAG:-./ampdiag}
srcdir=${srcdir:-.}
py=""
for c in "${AMPDIAG_PYTHON:-}" "$srcdir/.venv/bin/python" python3; do
    [ -n "$c" ] || continue
    if "$c" -c 'import numpy, h5py' >/dev/null 2>&1; then
        py=$c
        break
    fi
done
if [ -z "$py" ]; then
    echo "check-hostile: skipped: no Python with numpy and h5py (scripts/install-deps.sh --with-torch)"
    exit 77
fi
exec nice -n 10 "$py" "$srcdir/tests/hostile_campaign.py" --ampdiag "$AMPDIAG" --srcdir "$srcdir" \
    -n "${HOSTILE_N:-3000}" --jobs "${HOSTILE_JOBS:-1}" --seed "${HOSTILE_SEED:-1}" \
    --keep hostile-failures --report hostile-report.json
