#!/bin/sh
# t_install.sh - the installed libampdiag as a user gets it: build tests/install/example.c
# against it through pkg-config, dynamically and statically (libampdiag.a with
# `pkg-config --static --libs`), run both; the shared library exports only ampdiag_* symbols
# and depends on no BLAS.
#
# Run by `make check` on a staged install (make install DESTDIR=tests/stage, see Makefile.am)
# and by `make installcheck` (so by `make distcheck`) on the real one. The environment says
# where: AMPDIAG_INSTALL_DESTDIR (may be empty), AMPDIAG_INSTALL_LIBDIR, _INCLUDEDIR and _BINDIR
# (the configured $(libdir), $(includedir), $(bindir)), CC and LDFLAGS (the library's own link
# flags: a library built with -fsanitize=... needs the sanitizer runtime in the program too).
srcdir=${srcdir:-.}
CC=${CC:-cc}
LDFLAGS=${LDFLAGS:-}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
D=${AMPDIAG_INSTALL_DESTDIR:-}
libdir=$D${AMPDIAG_INSTALL_LIBDIR:?AMPDIAG_INSTALL_LIBDIR is not set}
includedir=$D${AMPDIAG_INSTALL_INCLUDEDIR:?AMPDIAG_INSTALL_INCLUDEDIR is not set}
bindir=$D${AMPDIAG_INSTALL_BINDIR:?AMPDIAG_INSTALL_BINDIR is not set}
n=0; fail=0
t() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
skip() { n=$((n+1)); echo "ok $n # SKIP $1"; }
diag() { sed '/^$/d; s/^/# /'; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_install.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT

[ -r "$libdir/pkgconfig/ampdiag.pc" ] || { echo "Bail out! no $libdir/pkgconfig/ampdiag.pc (is it installed?)"; exit 1; }
# Under DESTDIR the .pc file names the final paths: use a copy whose absolute prefix, exec_prefix,
# libdir and includedir are moved under DESTDIR (variables built from others follow them).
if [ -n "$D" ]; then
    mkdir "$tmp/pc" && sed -e "s|^prefix=/|prefix=$D/|" -e "s|^exec_prefix=/|exec_prefix=$D/|" \
        -e "s|^libdir=/|libdir=$D/|" -e "s|^includedir=/|includedir=$D/|" \
        "$libdir/pkgconfig/ampdiag.pc" > "$tmp/pc/ampdiag.pc"
    PKG_CONFIG_PATH=$tmp/pc
else
    PKG_CONFIG_PATH=$libdir/pkgconfig
fi
export PKG_CONFIG_PATH
$PKG_CONFIG --exists ampdiag ; t $? "pkg-config finds ampdiag in $libdir/pkgconfig"
[ "$($PKG_CONFIG --variable=libdir ampdiag)" = "$libdir" ] ; t $? "ampdiag.pc's libdir is the installed library's folder"
cflags=$($PKG_CONFIG --cflags ampdiag)
libs=$($PKG_CONFIG --libs ampdiag)
slibs=$($PKG_CONFIG --static --libs ampdiag)
echo "cflags: $cflags" | diag; echo "libs: $libs" | diag; echo "static libs: $slibs" | diag
$PKG_CONFIG --print-requires-private ampdiag | grep -q '^hdf5' ; t $? "ampdiag.pc: Requires.private: hdf5"
echo " $slibs " | grep -q -- ' -lhdf5_hl .* -lhdf5 \| -lhdf5 .* -lhdf5_hl ' ; t $? "pkg-config --static --libs names hdf5_hl and hdf5"
echo " $libs " | grep -q -- '-lhdf5' ; [ $? -ne 0 ] ; t $? "pkg-config --libs (dynamic) does not name HDF5 (libampdiag.so brings its own)"

# which files the installed libampdiag.la says exist
la=$libdir/libampdiag.la
[ -r "$la" ] && shared=$(sed -n "s/^dlname='\(.*\)'/\1/p" "$la") && static=$(sed -n "s/^old_library='\(.*\)'/\1/p" "$la")
[ -n "$shared$static" ] ; t $? "libampdiag.la names a shared or a static library"
warn="-std=c11 -Wall -Wextra -Werror"

# ---------------------------------------------------------------- dynamic
if [ -n "$shared" ]; then
    so=$libdir/$shared
    # shellcheck disable=SC2086
    $CC $warn -o "$tmp/ex_dyn" "$srcdir/tests/install/example.c" $cflags $LDFLAGS $libs > "$tmp/cc.log" 2>&1
    rc=$?; diag < "$tmp/cc.log"; [ $rc -eq 0 ] ; t $? "example.c compiles (-Werror) and links with pkg-config --cflags --libs"
    LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/ex_dyn" "$tmp/dyn.h5" 2>&1 | diag
    [ -s "$tmp/dyn.h5" ] && LD_LIBRARY_PATH=$libdir "$tmp/ex_dyn" "$tmp/dyn.h5" > /dev/null 2>&1 ; t $? "the dynamic example writes a trace and reads every value back"
    LD_LIBRARY_PATH=$libdir ldd "$tmp/ex_dyn" 2>/dev/null | grep -q "libampdiag\.so.* => $libdir/" ; t $? "... with the installed libampdiag.so"

    # exports: only ampdiag_* (and the linker's markers)
    nm -D --defined-only "$so" > "$tmp/nm.txt" 2>&1 ; t $? "nm -D --defined-only $shared"
    exports() { awk 'NF >= 3 { print $3 }' "$1" | sed 's/@.*//' | grep -v -x '_init\|_fini\|_edata\|__bss_start\|_end'; }
    others=$(exports "$tmp/nm.txt" | grep -v '^ampdiag_')
    [ -z "$others" ] || echo "$others" | head -20 | diag
    [ -z "$others" ] ; t $? "libampdiag.so exports only ampdiag_* symbols ($(exports "$tmp/nm.txt" | wc -l) of them)"
    grep -q ' T ampdiag_trace_create$' "$tmp/nm.txt" && grep -q ' T ampdiag_tstats_compute$' "$tmp/nm.txt" ; t $? "... among them ampdiag_trace_create and ampdiag_tstats_compute"
    # the same filter on a library that exports other names reports them (the check can fail)
    hdf5so=$($PKG_CONFIG --variable=libdir hdf5 2>/dev/null)/libhdf5.so
    [ -r "$hdf5so" ] || hdf5so=$(echo $($PKG_CONFIG --libs-only-L hdf5) | sed 's/^-L//; s/ .*//')/libhdf5.so
    if [ -r "$hdf5so" ]; then
        nm -D --defined-only "$hdf5so" > "$tmp/nm-hdf5.txt" 2>/dev/null
        exports "$tmp/nm-hdf5.txt" | grep -v '^ampdiag_' | grep -q -x 'H5Fcreate' ; t $? "negative control: the export filter reports H5Fcreate in libhdf5.so"
    else
        skip "negative control of the export filter: libhdf5.so not found"
    fi

    # no BLAS: neither a direct dependency nor one of its dependencies
    blas='blas\|lapack\|gfortran'
    readelf -d "$so" > "$tmp/readelf.txt" 2>&1 ; t $? "readelf -d $shared"
    grep NEEDED "$tmp/readelf.txt" | diag
    grep NEEDED "$tmp/readelf.txt" | grep -q -i "$blas" ; [ $? -ne 0 ] ; t $? "libampdiag.so needs no BLAS (readelf -d)"
    LD_LIBRARY_PATH=$libdir ldd "$so" > "$tmp/ldd.txt" 2>&1 ; t $? "ldd $shared"
    grep -q -i "$blas" "$tmp/ldd.txt" ; [ $? -ne 0 ] ; t $? "... nor do the libraries it loads (ldd)"
    if [ -x "$bindir/ampdiag" ] && readelf -d "$bindir/ampdiag" > "$tmp/readelf-bin.txt" 2>&1; then
        grep NEEDED "$tmp/readelf-bin.txt" | grep -q -i "$blas" ; t $? "negative control: the same check finds the BLAS the installed ampdiag program needs"
    else
        skip "negative control of the BLAS check: no $bindir/ampdiag"
    fi
else
    skip "no shared libampdiag installed (--disable-shared)"
fi

# ---------------------------------------------------------------- static
if [ -n "$static" ]; then
    [ -r "$libdir/$static" ] ; t $? "$static is installed"
    # the link line of pkg-config --static, with libampdiag.a itself instead of the .so
    slibs_a=$(echo " $slibs " | sed 's/ -lampdiag / -l:libampdiag.a /')
    # shellcheck disable=SC2086
    $CC $warn -o "$tmp/ex_static" "$srcdir/tests/install/example.c" $cflags $LDFLAGS $slibs_a > "$tmp/cc.log" 2>&1
    rc=$?; diag < "$tmp/cc.log"; [ $rc -eq 0 ] ; t $? "example.c links against libampdiag.a with pkg-config --static --libs"
    readelf -d "$tmp/ex_static" > "$tmp/readelf-static.txt" 2>&1 && ! grep NEEDED "$tmp/readelf-static.txt" | grep -q libampdiag ; t $? "... and needs no libampdiag.so"
    "$tmp/ex_static" "$tmp/static.h5" 2>&1 | diag
    [ -s "$tmp/static.h5" ] && "$tmp/ex_static" "$tmp/static.h5" > /dev/null 2>&1 ; t $? "the static example writes a trace and reads every value back"
    # without the private libraries the same link fails (what Libs.private/Requires.private are for);
    # no $LDFLAGS here: with a sanitizer runtime, ld would stop at libm before the HDF5 symbols
    libs_a=$(echo " $libs " | sed 's/ -lampdiag / -l:libampdiag.a /')
    # shellcheck disable=SC2086
    $CC $warn -o "$tmp/ex_bad" "$srcdir/tests/install/example.c" $cflags $libs_a > "$tmp/cc-bad.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && grep -q 'undefined reference to .H5' "$tmp/cc-bad.log" ; t $? "negative control: linking libampdiag.a with pkg-config --libs (no --static) fails on HDF5 symbols"
else
    skip "no libampdiag.a installed (--disable-static)"
fi

echo "1..$n"
exit $fail
