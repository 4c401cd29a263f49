#!/usr/bin/env python3
"""Mutation campaign against the trace reader (make check-hostile; docs/fuzzing.md).

From the reference traces (traces/*.h5) and the scenario traces of the fuzz corpus
(fuzz/corpus/trace/*.h5), make N mutated traces: byte flips, truncations, and edits through
h5py (wrong dtypes, ranks and extents, NaN / negative / huge counts and steps, unterminated,
overlong and control-byte strings, enum values out of range, attributes of the wrong type or
size, missing datasets, rows naming layers that do not exist, strings filling their field with
no NUL, tables stored contiguous, deflated twice or checksummed (read by HDF5, not the chunk
reader), chunks that inflate far beyond their size). Run `info` (also with every table read
through HDF5: AMPDIAG_NO_CHUNK_READER), `compare` (against a good trace) and `plot` (data and
scripts only: gnuplot is kept off PATH) on each, with a limit of CPU time, and count: exit codes, deaths by a signal, sanitizer reports (in ampdiag's code or in
HDF5's), runs over the time limit, and stderr holding anything from HDF5. The program under
test is AMPDIAG (an ASan/UBSan build for the real campaign).

Passes (exit 0) when every run exits 0, 1, 2 or 3 within the limit, with no sanitizer report
and nothing from HDF5 on stderr; otherwise exit 1, with the offending files kept in --keep.

usage: hostile_campaign.py --ampdiag PATH [-n 3000] [--seed 1] [--jobs 1] [--timeout 10 (CPU s)]
                           [--keep DIR] [--srcdir .]
"""

import argparse
import concurrent.futures as cf
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
import zlib

import h5py
import numpy as np

TABLES = ["layers", "steps", "tensors", "histograms", "events", "eval"]
ROOT_ATTRS = ["format", "format_version", "status", "precision", "model", "tool_version",
              "loss_scale", "lr", "batch", "eval_metric", "grad_stats", "scaler"]
HUGE_INTS = [2**63 - 1, -2**63, 2**53 + 1, -(2**53) - 1, 2**32, -1, 0, 2**31 - 1, -2**31]
ODD_FLOATS = [np.nan, np.inf, -np.inf, -0.0, 1e308, -1e308, 5e-324, 65520.0, -1.0]
ODD_TEXT = [b"\x1b[31mred\x1b[0m\x07", b"\xff\xfe\xc3", b"a" * 200, b"\x00hidden",
            b"%s%n%x", b"\n\r\t", b"\xe2\x80\xae" * 10]


# ------------------------------------------------------------------------------ mutations

def flip_bytes(data, rng):
    b = bytearray(data)
    for _ in range(rng.choice([1, 2, 4, 8, 32])):
        i = rng.randrange(len(b))
        b[i] = rng.randrange(256) if rng.random() < 0.7 else b[i] ^ (1 << rng.randrange(8))
    return bytes(b)


def truncate(data, rng):
    return data[:rng.randrange(1, len(data))]


def odd_int(rng, dtype):
    v = rng.choice(HUGE_INTS)
    info = np.iinfo(dtype)
    return min(max(v, info.min), info.max)


def edit_values(f, rng):
    """NaN / negative / huge values in counts, steps, floats; strings; enum-like codes."""
    name = rng.choice(TABLES)
    ds = f[name]
    if ds.shape[0] == 0 or ds.dtype.names is None:
        return "values: empty " + name
    rows = ds[...]
    field = rng.choice(ds.dtype.names)
    ft = rows.dtype[field]
    idx = rng.randrange(rows.shape[0]) if rng.random() < 0.7 else slice(None)
    base = ft.base if ft.subdtype else ft
    if base.kind in "iu":
        rows[field][idx] = odd_int(rng, base)
    elif base.kind == "f":
        rows[field][idx] = rng.choice(ODD_FLOATS)
    elif base.kind == "S":
        text = rng.choice(ODD_TEXT)
        rows[field][idx] = (text * (base.itemsize // len(text) + 1))[:base.itemsize] \
            if rng.random() < 0.5 else text[:base.itemsize]
    ds[...] = rows
    return "values: %s.%s" % (name, field)


def retype_table(f, rng):
    """Replace a table by one of another dtype, rank or field set."""
    name = rng.choice(TABLES)
    old = f[name][...]
    del f[name]
    how = rng.randrange(6)
    if how == 0:
        f.create_dataset(name, data=np.zeros(max(1, len(old)), "<f8"))
        return "retype %s: float64" % name
    if how == 1 and old.dtype.names:
        f.create_dataset(name, data=np.stack([old, old], axis=1) if len(old) else
                         np.zeros((1, 2), old.dtype))
        return "retype %s: rank 2" % name
    if how == 2 and old.dtype.names:
        fields = list(old.dtype.names)
        drop = rng.choice(fields)
        dt = np.dtype([(n, old.dtype[n]) for n in fields if n != drop])
        new = np.zeros(len(old), dt)
        for n in dt.names:
            new[n] = old[n]
        f.create_dataset(name, data=new, maxshape=(None,), chunks=True)
        return "retype %s: without %s" % (name, drop)
    if how == 3 and old.dtype.names:
        # every field to a different type: ints to floats, floats to strings, enums to u1
        spec = []
        for n in old.dtype.names:
            t = old.dtype[n]
            if t.subdtype:
                spec.append((n, "<f4", (rng.choice([1, 280, 282, 4096]),)))
            elif t.kind in "iu":
                spec.append((n, rng.choice(["<f8", "u1", "S8", "<i2", ">i8"])))
            elif t.kind == "f":
                spec.append((n, rng.choice(["S16", "<i8", "<f2"])))
            else:
                spec.append((n, rng.choice(["<f8", "S1", "S4096"])))
        f.create_dataset(name, data=np.zeros(max(1, len(old)), np.dtype(spec)))
        return "retype %s: every field" % name
    if how == 4:
        f.create_dataset(name, data=np.array(["vlen", "strings"], dtype=h5py.string_dtype()))
        return "retype %s: vlen strings" % name
    f.create_group(name)
    return "retype %s: a group" % name


def resize_table(f, rng):
    name = rng.choice(TABLES)
    ds = f[name]
    n = rng.choice([0, 1, ds.shape[0] + 1, ds.shape[0] * 7 + 3, 100000, 2**33])
    try:
        ds.resize((n,))
    except (TypeError, ValueError, OSError):
        return "resize %s: refused by h5py" % name
    return "resize %s to %d" % (name, n)


def drop_table(f, rng):
    name = rng.choice(TABLES)
    del f[name]
    if rng.random() < 0.3:
        f[name] = h5py.SoftLink("/nowhere")
        return "soft link %s" % name
    if rng.random() < 0.3:
        f[name] = h5py.ExternalLink("/etc/passwd", "/x")
        return "external link %s" % name
    return "missing %s" % name


def edit_attr(f, rng):
    name = rng.choice(ROOT_ATTRS)
    if name in f.attrs and rng.random() < 0.2:
        del f.attrs[name]
        return "attr %s deleted" % name
    how = rng.randrange(9)
    values = [np.int64(rng.choice(HUGE_INTS)), np.float64(rng.choice(ODD_FLOATS)),
              "vlen-" + "x" * rng.choice([0, 10, 70000]), np.bytes_(rng.choice(ODD_TEXT)),
              np.arange(5), np.array([b"a", b"b"]), np.array([], "i4"),
              np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]),
              np.bool_(True)]
    f.attrs[name] = values[how]
    return "attr %s: kind %d" % (name, how)


def many_attrs(f, rng):
    n = rng.choice([100, 1100])
    for i in range(n):
        f.attrs["extra%05d" % i] = "v%d" % i
    return "attrs: %d more" % n


def bad_rows(f, rng):
    """Rows naming a layer or kind that does not exist, unsorted or duplicate steps."""
    name = rng.choice(["tensors", "histograms", "events", "steps", "eval"])
    ds = f[name]
    if ds.shape[0] == 0:
        return "rows: empty " + name
    rows = ds[...]
    how = rng.randrange(4)
    if how == 0 and "layer" in rows.dtype.names:
        rows["layer"][rng.randrange(len(rows))] = rng.choice([-7, 10**6, 2**31 - 1, -2**31])
    elif how == 1 and "step" in rows.dtype.names:
        rows["step"] = rows["step"][::-1]
    elif how == 2 and "step" in rows.dtype.names:
        rows["step"] = rows["step"][0]
    elif "step" in rows.dtype.names:
        rows["step"][-1] = -1  # a fill row in the middle when more follow
        if len(rows) > 2:
            rows["step"][len(rows) // 2] = -1
    ds[...] = rows
    return "rows: %s kind %d" % (name, how)


def enum_out_of_range(f, rng):
    """Rewrite the kind / code column as a plain u1 with values past the enum."""
    name = rng.choice(["tensors", "histograms", "events"])
    old = f[name][...]
    col = "code" if name == "events" else "kind"
    spec = [(n, "u1" if n == col else old.dtype[n]) for n in old.dtype.names]
    new = np.zeros(len(old), np.dtype(spec))
    for n in old.dtype.names:
        new[n] = old[n] if n != col else rng.choice([5, 13, 200, 255])
    del f[name]
    f.create_dataset(name, data=new, maxshape=(None,), chunks=True)
    return "enum: %s.%s out of range" % (name, col)


def full_strings(f, rng):
    """Strings that fill their field with no NUL, in the table's own string type (NUL-terminated
    UTF-8, which HDF5 copies without converting)."""
    name = rng.choice(["layers", "steps", "events"])
    rows = f[name][...]
    cols = [n for n in rows.dtype.names if rows.dtype[n].kind == "S"]
    if not len(rows) or not cols:
        return "full strings: none in " + name
    for n in cols:
        rows[n][rng.randrange(len(rows))] = b"x" * rows.dtype[n].itemsize
    f[name].write_direct(rows)
    return "full strings: " + name


def restore_layout(f, rng):
    """A table stored so that HDF5 itself reads it, not the chunk reader: contiguous, deflated
    twice, or deflated with a Fletcher-32 checksum; same record type and rows."""
    name = rng.choice(TABLES)
    d = f[name]
    rows, tid = d[...], d.id.get_type()
    del f[name]
    how = rng.randrange(3)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    n = len(rows)
    if how == 0:
        space = h5py.h5s.create_simple((n,))
    else:
        space = h5py.h5s.create_simple((n,), (h5py.h5s.UNLIMITED,))
        dcpl.set_chunk((rng.choice([1, 7, 64, 1024]),))
        dcpl.set_shuffle()
        dcpl.set_deflate(4)
        if how == 1:
            dcpl.set_deflate(1)
        else:
            dcpl.set_fletcher32()
    ds = h5py.h5d.create(f.id, name.encode(), tid, space, dcpl=dcpl)
    if n:
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, rows, mtype=tid)
    return "layout %s: %s" % (name, ["contiguous", "deflated twice", "deflate + fletcher32"][how])


def deflate_bomb(f, rng):
    """A chunk replaced by a small stream that inflates far beyond the chunk's size."""
    name = rng.choice(["tensors", "steps", "histograms", "layers"])
    d = f[name]
    if d.chunks is None or d.compression != "gzip" or d.shape[0] == 0:
        return "bomb: %s not deflated" % name
    size = rng.choice([1, 16]) << 20
    d.id.write_direct_chunk((0,), zlib.compress(b"\0" * size, 9), 0)
    return "bomb: %s chunk 0 inflates to %d MiB" % (name, size >> 20)


H5PY_EDITS = [edit_values, edit_values, retype_table, resize_table, drop_table, edit_attr,
              edit_attr, many_attrs, bad_rows, enum_out_of_range, full_strings, restore_layout,
              deflate_bomb]


def h5py_edit(path, rng):
    with h5py.File(path, "r+") as f:
        return rng.choice(H5PY_EDITS)(f, rng)


def mutate(base, out, rng):
    """Write a mutant of base to out; return what was done."""
    kind = rng.random()
    data = open(base, "rb").read()
    if kind < 0.35:
        open(out, "wb").write(flip_bytes(data, rng))
        return "flip"
    if kind < 0.45:
        open(out, "wb").write(truncate(data, rng))
        return "truncate"
    shutil.copyfile(base, out)
    try:
        what = h5py_edit(out, rng)
    except Exception as e:  # h5py cannot edit this base (a cut-off trace): flip bytes instead
        open(out, "wb").write(flip_bytes(data, rng))
        return "flip (h5py: %s)" % type(e).__name__
    if rng.random() < 0.15:
        data = open(out, "rb").read()
        open(out, "wb").write(flip_bytes(data, rng))
        what += " + flip"
    return what


# ------------------------------------------------------------------------------ running

SAN_RE = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|"
                    r"runtime error:")
FRAME_RE = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+)", re.M)
# what HDF5 prints by itself (as tests/t_regress.sh): an error stack, or its shutdown's complaint
HDF5_RE = re.compile(r"HDF5-DIAG|^HDF5:|^ *#\d{3}: |^ *(major|minor): |"
                     r"infinite loop closing library", re.M)


def san_origin(err):
    """'ampdiag' when the first frame past the sanitizer's own is in ampdiag's code."""
    for func, where in FRAME_RE.findall(err):
        if "libsanitizer" in where or func.startswith(("__interceptor", "__asan", "__ubsan",
                                                         "__sanitizer", "__lsan")):
            continue
        if "libhdf5" in where or func.startswith("H5"):
            return "hdf5"
        if "/src/" in where or "/include/" in where:
            return "ampdiag"
    return "other"


def run_one(ampdiag, args, timeout, env):
    """Run with a limit of timeout seconds of CPU time (a loaded machine is no failure), and of
    20 times that of wall time (for a run that waits)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_CPU, (int(timeout + 0.999), int(timeout + 0.999) + 1))
    try:
        p = subprocess.run([ampdiag] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=20 * timeout, env=env, preexec_fn=limit)
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            return None, err, True
        return p.returncode, err, False
    except subprocess.TimeoutExpired as e:
        return None, (e.stderr or b"").decode("utf-8", "replace"), True


def check_file(i, path, what, a):
    work = tempfile.mkdtemp(prefix="hostile-", dir=a.tmp)
    env = dict(os.environ, PATH="/nonexistent")  # plot writes data and scripts, draws nothing
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:allocator_may_return_null=1")
    # HDF5 loses memory of its own on every failed checksum (fuzz/lsan.supp says which)
    env.setdefault("LSAN_OPTIONS", "suppressions=%s:print_suppressions=0" % a.lsan_supp)
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    # info-h5: every table through HDF5's own path (AMPDIAG_NO_CHUNK_READER), as the chunk
    # reader leaves contiguous tables, other filters and odd chunks to it
    cmds = {"info": ["info", path],
            "info-h5": ["info", path],
            "info-json": ["info", "--format", "json", path],
            "compare": ["compare", a.good, path, "--fail-on", "nan,divergence"],
            "plot": ["plot", path, "-o", os.path.join(work, "plots")]}
    if i % 4 != 0:
        del cmds["info-json"]
    results = []
    for name, args in cmds.items():
        run_env = dict(env, AMPDIAG_NO_CHUNK_READER="1") if name == "info-h5" else env
        rc, err, timed_out = run_one(a.ampdiag, args, a.timeout, run_env)
        results.append({"file": i, "what": what, "cmd": name, "rc": rc, "timeout": timed_out,
                        "signal": rc is not None and rc < 0,
                        "sanitizer": san_origin(err) if SAN_RE.search(err) else None,
                        "hdf5_noise": bool(HDF5_RE.search(err)),
                        "stderr": err[-3000:]})
    shutil.rmtree(work, ignore_errors=True)
    return results


def bad(r):
    return bool(r["timeout"] or r["signal"] or r["sanitizer"] or r["hdf5_noise"] or
                r["rc"] not in (0, 1, 2, 3))


def main():
    warnings.simplefilter("ignore")  # numpy's overflow warnings for the odd values written
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampdiag", required=True)
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--srcdir", default=".")
    ap.add_argument("--keep", default="hostile-failures")
    ap.add_argument("--report", default="hostile-report.json")
    a = ap.parse_args()
    a.ampdiag = os.path.abspath(a.ampdiag)
    bases = sorted(os.path.join(a.srcdir, "traces", f) for f in os.listdir(
        os.path.join(a.srcdir, "traces")) if f.endswith(".h5"))
    cdir = os.path.join(a.srcdir, "fuzz", "corpus", "trace")
    bases += sorted(os.path.join(cdir, f) for f in os.listdir(cdir) if f.endswith(".h5"))
    a.lsan_supp = os.path.abspath(os.path.join(a.srcdir, "fuzz", "lsan.supp"))
    a.good = os.path.abspath(os.path.join(a.srcdir, "traces", "v1-fp32-complete.h5"))
    a.tmp = tempfile.mkdtemp(prefix="hostile-campaign-")
    rng = random.Random(a.seed)
    files = []
    for i in range(a.n):
        base = rng.choice(bases)
        path = os.path.join(a.tmp, "m%05d.h5" % i)
        what = mutate(base, path, rng)
        files.append((i, path, "%s <- %s" % (what, os.path.basename(base))))
    print("hostile: %d mutated traces from %d bases; running info, compare, plot (%s)"
          % (len(files), len(bases), a.ampdiag), flush=True)
    results = []
    with cf.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = [ex.submit(check_file, i, p, w, a) for i, p, w in files]
        for k, fu in enumerate(cf.as_completed(futs)):
            results.extend(fu.result())
            if (k + 1) % 250 == 0:
                print("hostile: %d/%d files" % (k + 1, len(files)), flush=True)
    summary = summarize(results, len(files))
    failures = [r for r in results if bad(r)]
    if failures:
        os.makedirs(a.keep, exist_ok=True)
        for r in failures:
            src = os.path.join(a.tmp, "m%05d.h5" % r["file"])
            if os.path.exists(src):
                shutil.copy(src, os.path.join(a.keep, "m%05d.h5" % r["file"]))
    with open(a.report, "w") as f:
        json.dump({"summary": summary, "failures": failures}, f, indent=1)
    print(json.dumps(summary, indent=1))
    for r in failures[:20]:
        print("FAIL file %d (%s) %s: rc=%s timeout=%s sanitizer=%s hdf5_noise=%s\n%s" % (
            r["file"], r["what"], r["cmd"], r["rc"], r["timeout"], r["sanitizer"],
            r["hdf5_noise"], r["stderr"][-1500:]))
    shutil.rmtree(a.tmp, ignore_errors=True)
    return 1 if failures else 0


def summarize(results, nfiles):
    codes = {}
    for r in results:
        key = "timeout" if r["timeout"] else str(r["rc"])
        codes[key] = codes.get(key, 0) + 1
    return {"files": nfiles, "runs": len(results), "exit_codes": codes,
            "signals": sum(r["signal"] for r in results),
            "over_time_limit": sum(r["timeout"] for r in results),
            "sanitizer_ampdiag": sum(r["sanitizer"] == "ampdiag" for r in results),
            "sanitizer_hdf5": sum(r["sanitizer"] == "hdf5" for r in results),
            "sanitizer_other": sum(r["sanitizer"] == "other" for r in results),
            "hdf5_noise_runs": sum(r["hdf5_noise"] for r in results),
            "hdf5_noise_files": len({r["file"] for r in results if r["hdf5_noise"]}),
            "failed_runs": sum(bad(r) for r in results)}


if __name__ == "__main__":
    sys.exit(main())
