"""Build the ampdiag Python package with the part of libampdiag it needs.

``pip install ./python`` (from the ampdiag source tree) and ``pip wheel ./python`` run this
through setuptools (pyproject.toml). The package loads libampdiag with ctypes; this script
provides it in one of three ways, chosen by the environment variable ``AMPDIAG_BUILD_LIB``:

``bundle``
    compile libampdiag_base, the trace writer and reader and the tensor statistics (the C sources
    of ``src/numerics``, ``src/util`` and ``src/trace`` with ``include/``: see Makefile.am and
    docs/ARCHITECTURE.md) into ``ampdiag/libampdiag.so`` inside the package, linked against the
    system's HDF5 found through ``pkg-config hdf5`` (plus zlib, libdl, pthreads). The sources use
    no ``config.h``: everything configure finds for them is a library on the link line.
``system``
    use the libampdiag that ``make install`` installed, found through ``pkg-config ampdiag``
    (its ``libdir`` is recorded in the package).
``none``
    install the Python code alone (then ``AMPDIAG_LIB`` must name a libampdiag.so at run time).
``auto`` (the default)
    ``bundle`` where pkg-config finds HDF5, else ``system`` where it finds ampdiag, else stop
    with a message that names every way out.

Installing from a source tree also records that tree, so that a library built there later
(``make``: ``.libs/libampdiag.so``) is found too.
"""
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
# the C sources: the repository this folder sits in, or their copy in an sdist (csrc/)
C_FOLDERS = ("src/numerics", "src/util", "src/trace")


def _source_root():
    for root in (os.path.dirname(HERE), os.path.join(HERE, "csrc")):
        if os.path.isfile(os.path.join(root, "include", "ampdiag_trace.h")) and \
                all(os.path.isdir(os.path.join(root, d)) for d in C_FOLDERS):
            return root
    return None


ROOT = _source_root()
HOW = os.environ.get("AMPDIAG_BUILD_LIB", "auto").strip().lower() or "auto"

WAYS_OUT = """ways out:
  - install a C compiler, pkg-config and HDF5's development files, then pip install again
    (Debian/Ubuntu: apt-get install gcc pkg-config libhdf5-dev zlib1g-dev);
  - or build and install ampdiag's library first (./configure && make && make install, so that
    'pkg-config ampdiag' finds it), then pip install again (AMPDIAG_BUILD_LIB=system);
  - or install the Python code alone (AMPDIAG_BUILD_LIB=none pip install ./python) and point
    AMPDIAG_LIB at a libampdiag.so when you run it."""


class BuildError(Exception):
    pass


def _pkg_config(*args):
    """pkg-config's output split into words, or None when it fails or is missing."""
    exe = os.environ.get("PKG_CONFIG", "pkg-config")
    try:
        r = subprocess.run([exe] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
    except OSError:
        return None
    return shlex.split(r.stdout) if r.returncode == 0 else None


def _system_library():
    """The installed libampdiag pkg-config names (its path), or None."""
    libdir = _pkg_config("--variable=libdir", "ampdiag")
    if not libdir:
        return None
    for name in ("libampdiag.so.0", "libampdiag.so", "libampdiag.0.dylib", "libampdiag.dylib"):
        p = os.path.join(libdir[0], name)
        if os.path.exists(p):
            return p
    return None


def _c_sources():
    out = []
    for d in C_FOLDERS:
        full = os.path.join(ROOT, d)
        out += sorted(os.path.join(d, f) for f in os.listdir(full) if f.endswith(".c"))
    return out


def _plan():
    """(mode, detail): "bundle" with the HDF5 flags, "system" with the library path, "none"."""
    if HOW not in ("auto", "bundle", "system", "none"):
        raise BuildError("AMPDIAG_BUILD_LIB=%s: expected auto, bundle, system or none" % HOW)
    if HOW == "none":
        return "none", None
    if HOW in ("auto", "bundle"):
        cflags = _pkg_config("--cflags", "hdf5")
        libs = _pkg_config("--libs", "hdf5")
        if ROOT is not None and cflags is not None and libs is not None:
            return "bundle", (cflags, libs)
        if HOW == "bundle":
            why = "the C sources are not here (%s)" % os.path.dirname(HERE) if ROOT is None else \
                "pkg-config finds no HDF5 ('pkg-config --cflags --libs hdf5' failed)"
            raise BuildError("ampdiag: cannot build libampdiag: %s.\n%s" % (why, WAYS_OUT))
    lib = _system_library()
    if lib is not None:
        return "system", lib
    if HOW == "system":
        raise BuildError("ampdiag: AMPDIAG_BUILD_LIB=system, but 'pkg-config ampdiag' names no installed "
                         "libampdiag (after make install, add its lib/pkgconfig to PKG_CONFIG_PATH).\n%s"
                         % WAYS_OUT)
    why = "pkg-config finds no HDF5 to build libampdiag with ('pkg-config --cflags --libs hdf5' failed)" \
        if ROOT is not None else "the C sources are not next to this package"
    raise BuildError("ampdiag: no libampdiag for the package: %s, and 'pkg-config ampdiag' names no "
                     "installed one.\n%s" % (why, WAYS_OUT))


def _build_info(mode, lib):
    """The text of ampdiag/_build_info.py: what the package was built with."""
    tree = os.path.dirname(HERE) if ROOT == os.path.dirname(HERE) else None
    return ('"""Written by setup.py: where this installation of the package finds libampdiag."""\n'
            "BUILD = %r          # bundle: ampdiag/libampdiag.so; system: SYSTEM_LIB; none\n"
            "SYSTEM_LIB = %r     # the installed libampdiag pkg-config named\n"
            "SOURCE_TREE = %r    # the source tree installed from (its .libs/libampdiag.so after make)\n"
            % (mode, lib, tree))


class BuildPy(build_py):
    """Writes ampdiag/_build_info.py into the build (the source tree keeps none)."""

    def run(self):
        super().run()
        mode, detail = _plan()
        target = os.path.join(self.build_lib, "ampdiag", "_build_info.py")
        self.mkpath(os.path.dirname(target))
        with open(target, "w") as f:
            f.write(_build_info(mode, detail if mode == "system" else None))


class BuildLib(build_ext):
    """Compiles libampdiag_base into ampdiag/libampdiag.so (mode bundle; nothing otherwise), one
    compiler per source file at a time on every core."""

    def get_ext_filename(self, fullname):
        # a plain shared library loaded with ctypes, not a Python extension module
        return os.path.join(*fullname.split(".")) + (".dylib" if sys.platform == "darwin" else ".so")

    def build_extensions(self):
        mode, _ = _plan()
        if mode != "bundle":
            stale = self.get_ext_fullpath(self.extensions[0].name)  # from an earlier bundle build
            if os.path.exists(stale):
                os.remove(stale)
            self.extensions = []
            return
        super().build_extensions()

    def build_extension(self, ext):
        cflags, libs = _plan()[1]
        sources = [os.path.join(ROOT, s) for s in _c_sources()]
        target = self.get_ext_fullpath(ext.name)
        self.mkpath(os.path.dirname(target))
        self.mkpath(self.build_temp)
        # as Makefile.am builds libampdiag_base: C11, the statistics kernels vectorised, never
        # fast-math (the exact rounding and the NaN counts depend on it)
        args = ["-std=c11", "-O2", "-fno-fast-math", "-fno-math-errno", "-ftree-vectorize",
                "-fvect-cost-model=dynamic"] + cflags
        macros = [("_DEFAULT_SOURCE", None), ("_POSIX_C_SOURCE", "200809L")]
        incs = [os.path.join(ROOT, "include"), os.path.join(ROOT, "src")]
        link = libs + ["-lz", "-ldl", "-lpthread", "-lm"]
        if sys.platform.startswith("linux"):
            # export only ampdiag_* (as libtool's -export-symbols-regex does for libampdiag)
            vs = os.path.join(self.build_temp, "libampdiag.map")
            with open(vs, "w") as f:
                f.write("{ global: ampdiag_*; local: *; };\n")
            link.append("-Wl,--version-script=" + vs)

        def compile_one(src):
            return self.compiler.compile([src], output_dir=self.build_temp, macros=macros, include_dirs=incs,
                                         extra_postargs=args)[0]

        try:
            jobs = max(1, min(len(sources), os.cpu_count() or 1))
            if jobs > 1:
                from concurrent.futures import ThreadPoolExecutor
                with ThreadPoolExecutor(jobs) as pool:
                    objs = list(pool.map(compile_one, sources))
            else:
                objs = [compile_one(s) for s in sources]
            self.compiler.link_shared_object(objs, target, extra_postargs=link, target_lang="c")
        except Exception as e:  # a compiler or linker failure: say what would help
            raise BuildError("ampdiag: building libampdiag failed (%s).\n%s" % (e, WAYS_OUT))


class SDist(sdist):
    """An sdist of this folder carries the C sources it builds (csrc/)."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        if ROOT is None:
            return
        for d in C_FOLDERS + ("include",):
            src = os.path.join(ROOT, d)
            for f in sorted(os.listdir(src)):
                if f.endswith((".c", ".h")):
                    dst = os.path.join(base_dir, "csrc", d)
                    os.makedirs(dst, exist_ok=True)
                    shutil.copy2(os.path.join(src, f), dst)


cmdclass = {"build_py": BuildPy, "build_ext": BuildLib, "sdist": SDist}

try:  # the library is not a Python extension module: the wheel is for any Python 3 on this platform
    try:
        from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

    class BdistWheel(_bdist_wheel):
        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = BdistWheel
except ImportError:
    pass

try:
    setup(cmdclass=cmdclass, ext_modules=[Extension("ampdiag.libampdiag", sources=[])])
except BuildError as e:
    sys.stderr.write("\n%s\n\n" % e)
    sys.exit(1)
