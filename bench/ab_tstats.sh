#!/bin/sh
# ab_tstats.sh REV [N] [REPS] - the fused statistics pass of this tree against that of git
# revision REV, on the same data, interleaved call by call in one process (bench/ab_tstats.c):
# gradient-like, then weight-like data. Run from the source tree; needs git, cc, nm, objcopy.
# The build uses CFLAGS (default -O2) and the flags the library's kernels are built with.
set -e
[ $# -ge 1 ] || { echo "usage: bench/ab_tstats.sh REV [N] [REPS]" >&2; exit 2; }
rev=$1 n=${2:-67108864} reps=${3:-21}
cc=${CC:-cc}
flags="-std=c11 ${CFLAGS:--O2} -ftree-vectorize -fvect-cost-model=dynamic"
T=$(mktemp -d "${TMPDIR:-/tmp}/ab_tstats.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir "$T/old"
git archive "$rev" include src/numerics | tar -x -C "$T/old"
$cc $flags -I"$T/old/include" -I"$T/old/src" -c "$T/old/src/numerics/tstats.c" -o "$T/old.o"
# the older revision's functions become old_*
nm --defined-only -g "$T/old.o" | awk '{ printf "--redefine-sym %s=old_%s\n", $3, $3 }' > "$T/syms"
objcopy $(cat "$T/syms") "$T/old.o"
for f in src/numerics/tstats.c src/numerics/numfmt.c bench/ab_tstats.c; do
    $cc $flags -Iinclude -Isrc -c "$f" -o "$T/$(basename "$f" .c).o"
done
$cc -o "$T/ab" "$T/ab_tstats.o" "$T/tstats.o" "$T/numfmt.o" "$T/old.o" -lm
"$T/ab" "$n" "$reps" 0
"$T/ab" "$n" "$reps" 1
