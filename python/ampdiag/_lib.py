"""ctypes binding to libampdiag: the trace writer and the tensor statistics.

libampdiag (include/ampdiag.h, include/ampdiag_trace.h) is the one writer of the trace format;
this module only declares its functions and structures and turns its error codes into Python
exceptions. The library is found, in this order, at:

1. ``$AMPDIAG_LIB`` (a path to ``libampdiag.so``);
2. the one built into the package (``ampdiag/libampdiag.so``: ``pip install ./python`` compiles it,
   python/setup.py);
3. the build tree this package sits in, or was installed from (``<source tree>/.libs/libampdiag.so``
   after ``make``);
4. the installed one the package was built against (``pkg-config ampdiag`` at install time), then
   the system's (``ctypes.util.find_library("ampdiag")``, ``libampdiag.so.0`` in the dynamic
   linker's path and in ``/usr/local/lib``).
"""
import ctypes
import ctypes.util
import math
import os
import sys

__all__ = [
    "AmpdiagError", "LibraryNotFound", "Tstats", "Hist", "StepRecord", "TraceWriter", "lib",
    "library_path", "KINDS", "EVENTS", "STATUSES", "HIST_BINS",
]

HIST_BINS = 281
KINDS = {"activation": 0, "activation_grad": 1, "weight": 2, "weight_grad": 3, "update": 4}
EVENTS = {"nan_forward": 0, "inf_forward": 1, "nan_backward": 2, "inf_backward": 3, "overflow": 4,
          "scale_backoff": 5, "scale_growth": 6, "skipped_step": 7, "clipped": 8, "loss_spike": 9,
          "divergence": 10, "stop": 11, "note": 12, "no_loss_scaling": 13, "hidden_scaler": 14}
STATUSES = {"running": 0, "complete": 1, "diverged": 2, "interrupted": 3}
_KEEP_STATUS = -1  # AMPDIAG_STATUS_UNKNOWN: close keeps the status last set


class LibraryNotFound(OSError):
    """libampdiag could not be loaded."""


class AmpdiagError(RuntimeError):
    """A libampdiag call failed; ``code`` is its negative AMPDIAG_TRACE_E* code and ``io`` says
    whether it was an I/O or resource failure (ampdiag exits 3 for those, 2 for bad input)."""

    def __init__(self, message, code, io=False):
        super().__init__(message)
        self.code = code
        self.io = io


class Tstats(ctypes.Structure):
    """struct ampdiag_tstats: one tensor's statistics (ampdiag.h)."""
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "count", "n_nan", "n_posinf", "n_neginf", "n_zero", "n_neg", "n_pos",
        # the what-if counts, one row per format of the table (ampdiag.h: whatif[5][3])
        "fp32_overflow", "fp32_underflow", "fp32_subnormal",
        "fp16_overflow", "fp16_underflow", "fp16_subnormal",
        "bf16_overflow", "bf16_underflow", "bf16_subnormal",
        "e4m3_overflow", "e4m3_underflow", "e4m3_subnormal",
        "e5m2_overflow", "e5m2_underflow", "e5m2_subnormal")] + \
        [(n, ctypes.c_float) for n in ("min", "max", "absmax", "absmin_nz")] + \
        [("sum", ctypes.c_double), ("sumsq", ctypes.c_double)]

    COUNTS = ("count", "n_nan", "n_posinf", "n_neginf", "n_zero", "n_neg", "n_pos",
              "fp32_subnormal",
              "fp16_overflow", "fp16_underflow", "fp16_subnormal",
              "bf16_overflow", "bf16_underflow", "bf16_subnormal",
              "e4m3_overflow", "e4m3_underflow", "e4m3_subnormal",
              "e5m2_overflow", "e5m2_underflow", "e5m2_subnormal")

    def as_dict(self):
        return {n: getattr(self, n) for n, _ in self._fields_}

    def finite(self):
        return self.count - self.n_nan - self.n_posinf - self.n_neginf


class Hist(ctypes.Structure):
    """struct ampdiag_hist: the 281-bin exponent histogram."""
    _fields_ = [("bin", ctypes.c_uint64 * HIST_BINS)]


class StepRecord(ctypes.Structure):
    """struct ampdiag_trace_step: one /steps row."""
    _fields_ = [("step", ctypes.c_int64), ("loss", ctypes.c_double), ("loss_scale", ctypes.c_double),
                ("grad_norm", ctypes.c_double), ("clip_coef", ctypes.c_double),
                ("skipped", ctypes.c_int32), ("skip_reason", ctypes.c_char * 96),
                ("lr", ctypes.c_double), ("update_ratio", ctypes.c_double),
                ("nonfinite_grads", ctypes.c_uint64), ("wall_ms", ctypes.c_double)]


class TracedRow(ctypes.Structure):
    """struct ampdiag_trace_traced: one /traced row (which step has full records, and why)."""
    _fields_ = [("step", ctypes.c_int64), ("reason", ctypes.c_int32), ("event_step", ctypes.c_int64),
                ("cadence", ctypes.c_int32), ("record_ms", ctypes.c_double), ("step_ms", ctypes.c_double)]


class RankInfo(ctypes.Structure):
    """struct ampdiag_trace_rank: one rank of a distributed run."""
    _fields_ = [("rank", ctypes.c_int64), ("world_size", ctypes.c_int64), ("backend", ctypes.c_char_p),
                ("reduce_dtype", ctypes.c_char_p), ("sharding", ctypes.c_char_p)]


class _Options(ctypes.Structure):
    """struct ampdiag_trace_options."""
    _fields_ = [("flush_every_steps", ctypes.c_uint), ("flush_seconds", ctypes.c_double),
                ("overwrite", ctypes.c_int), ("compact_on_close", ctypes.c_int),
                ("background", ctypes.c_int)]


def _build_info():
    """What setup.py recorded at install time (an empty dict in the source tree)."""
    try:
        from . import _build_info as b
    except ImportError:
        return {}
    return {k: getattr(b, k, None) for k in ("BUILD", "SYSTEM_LIB", "SOURCE_TREE")}


def _candidates():
    env = os.environ.get("AMPDIAG_LIB")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    info = _build_info()
    out = [os.path.join(here, "libampdiag.dylib" if sys.platform == "darwin" else "libampdiag.so")]
    root = os.path.dirname(os.path.dirname(here))  # <source tree>/python/ampdiag -> <source tree>
    trees = [root] if os.path.exists(os.path.join(root, "include", "ampdiag_trace.h")) else []
    if info.get("SOURCE_TREE") and info["SOURCE_TREE"] not in trees:
        trees.append(info["SOURCE_TREE"])
    out += [os.path.join(t, ".libs", "libampdiag.so") for t in trees]
    if info.get("SYSTEM_LIB"):
        out.append(info["SYSTEM_LIB"])
    found = ctypes.util.find_library("ampdiag")
    if found:
        out.append(found)
    out += ["libampdiag.so.0", "/usr/local/lib/libampdiag.so.0", "/usr/local/lib64/libampdiag.so.0"]
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))], False


WAYS_OUT = (
    "ways out: (1) from the ampdiag source tree, 'pip install ./python' builds libampdiag into the package "
    "(it needs a C compiler, pkg-config and HDF5's development files: apt-get install gcc pkg-config "
    "libhdf5-dev zlib1g-dev); (2) or './configure && make && make install' installs libampdiag where the "
    "dynamic linker finds it (or where 'pkg-config ampdiag' names it when pip installs the package); "
    "(3) or set AMPDIAG_LIB to the path of a libampdiag.so (a build tree's is .libs/libampdiag.so after make)")


_lib = None
_lib_path = None


def _declare(L):
    P = ctypes.c_void_p
    sig = {
        "ampdiag_version": (ctypes.c_char_p, []),
        "ampdiag_trace_errmsg": (ctypes.c_char_p, []),
        "ampdiag_trace_err_is_io": (ctypes.c_int, [ctypes.c_int]),
        "ampdiag_tstats_init": (None, [ctypes.POINTER(Tstats)]),
        "ampdiag_tstats_compute": (None, [P, ctypes.c_size_t, ctypes.POINTER(Tstats), ctypes.POINTER(Hist)]),
        "ampdiag_tstats_merge": (None, [ctypes.POINTER(Tstats), ctypes.POINTER(Tstats)]),
        "ampdiag_hist_merge": (None, [ctypes.POINTER(Hist), ctypes.POINTER(Hist)]),
        "ampdiag_trace_options_init": (None, [ctypes.POINTER(_Options)]),
        "ampdiag_trace_create": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_Options), ctypes.POINTER(P)]),
        "ampdiag_trace_set_attr_str": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_char_p]),
        "ampdiag_trace_set_attr_double": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_double]),
        "ampdiag_trace_set_attr_int": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_int64]),
        "ampdiag_trace_add_layer_compute": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                                           ctypes.c_uint64, ctypes.c_char_p]),
        "ampdiag_trace_append_step": (ctypes.c_int, [P, ctypes.POINTER(StepRecord)]),
        "ampdiag_trace_append_tensor": (ctypes.c_int, [P, ctypes.c_int64, ctypes.c_int, ctypes.c_int,
                                                       ctypes.POINTER(Tstats), ctypes.c_uint64]),
        "ampdiag_trace_append_update": (ctypes.c_int, [P, ctypes.c_int64, ctypes.c_int, ctypes.POINTER(Tstats),
                                                       ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]),
        "ampdiag_trace_append_hist": (ctypes.c_int, [P, ctypes.c_int64, ctypes.c_int, ctypes.c_int,
                                                     ctypes.POINTER(Hist)]),
        "ampdiag_trace_append_event": (ctypes.c_int, [P, ctypes.c_int64, ctypes.c_int, ctypes.c_int,
                                                      ctypes.c_double, ctypes.c_char_p]),
        "ampdiag_trace_append_eval_se": (ctypes.c_int, [P, ctypes.c_int64, ctypes.c_double, ctypes.c_double,
                                                        ctypes.c_double]),
        "ampdiag_trace_flush": (ctypes.c_int, [P]),
        "ampdiag_trace_set_status": (ctypes.c_int, [P, ctypes.c_int]),
        "ampdiag_trace_close": (ctypes.c_int, [P, ctypes.c_int]),
    }
    for name, (res, args) in sig.items():
        f = getattr(L, name)  # AttributeError: a libampdiag older than this package
        f.restype = res
        f.argtypes = args
    for name, (res, args) in _OPTIONAL.items():  # newer functions, used where present
        f = getattr(L, name, None)
        if f is not None:
            f.restype = res
            f.argtypes = args


_OPTIONAL = {
    "ampdiag_trace_append_traced": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(TracedRow)]),
    "ampdiag_trace_set_rank": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(RankInfo)]),
    "ampdiag_event_name": (ctypes.c_char_p, [ctypes.c_int]),
    "ampdiag_trace_update_attr_double": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double]),
    "ampdiag_trace_append_eval_examples": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64,
                                                          ctypes.POINTER(ctypes.c_double),
                                                          ctypes.POINTER(ctypes.c_double), ctypes.c_size_t]),
    "ampdiag_update_lost_counts": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                          ctypes.POINTER(ctypes.c_uint64)]),
}


def event_known(code):
    """Whether the loaded libampdiag writes this event code."""
    f = getattr(lib(), "ampdiag_event_name", None)
    return f is not None and f(int(code)) is not None


def has(name):
    """Whether the loaded libampdiag has this function (of the optional ones)."""
    return getattr(lib(), name, None) is not None


def lib():
    """The loaded libampdiag (ctypes.CDLL); raises LibraryNotFound with what was tried."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    paths, from_env = _candidates()
    tried = []
    for p in paths:
        if os.sep in p and not os.path.exists(p):
            tried.append("%s (no such file)" % p)
            continue
        try:
            L = ctypes.CDLL(p)
        except OSError as e:
            tried.append("%s (%s)" % (p, e))
            continue
        try:
            _declare(L)
        except AttributeError as e:
            tried.append("%s (too old for this package: %s)" % (p, e))
            continue
        _lib, _lib_path = L, p
        return L
    if from_env:
        raise LibraryNotFound("libampdiag not found: AMPDIAG_LIB=%s cannot be loaded (%s); unset AMPDIAG_LIB to "
                              "search the usual places.\n%s" % (paths[0], "; ".join(tried), WAYS_OUT))
    raise LibraryNotFound("libampdiag not found; tried: %s.\n%s" % ("; ".join(tried), WAYS_OUT))


def library_path():
    """The path libampdiag was loaded from (loading it if need be)."""
    lib()
    return _lib_path


def _b(s):
    if s is None:
        return None
    return s.encode("utf-8", "replace") if isinstance(s, str) else bytes(s)


def _check(rc):
    if rc < 0:
        L = lib()
        raise AmpdiagError(L.ampdiag_trace_errmsg().decode("utf-8", "replace"), rc,
                           bool(L.ampdiag_trace_err_is_io(rc)))
    return rc


class TraceWriter:
    """A trace being written: a thin wrapper of libampdiag's ampdiag_trace_writer.

    ``flush_every`` steps / ``flush_seconds`` seconds bound what a killed process loses;
    ``background`` lets a thread of the writer compress and write full batches."""

    def __init__(self, path, overwrite=False, flush_every=10, flush_seconds=2.0, background=False,
                 compact_on_close=True):
        L = lib()
        opt = _Options()
        L.ampdiag_trace_options_init(ctypes.byref(opt))
        opt.flush_every_steps = int(flush_every)
        opt.flush_seconds = float(flush_seconds)
        opt.overwrite = 1 if overwrite else 0
        opt.background = 1 if background else 0
        opt.compact_on_close = 1 if compact_on_close else 0
        w = ctypes.c_void_p()
        _check(L.ampdiag_trace_create(_b(os.fspath(path)), ctypes.byref(opt), ctypes.byref(w)))
        self._w = w
        self._L = L
        self.path = os.fspath(path)

    @property
    def closed(self):
        return self._w is None

    def _h(self):
        if self._w is None:
            raise AmpdiagError("trace '%s' is closed" % self.path, -1)
        return self._w

    def set_attr(self, name, value):
        """A root attribute (before the first record): str, int (bool too) or float."""
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, int):
            _check(self._L.ampdiag_trace_set_attr_int(self._h(), _b(name), value))
        elif isinstance(value, float):
            _check(self._L.ampdiag_trace_set_attr_double(self._h(), _b(name), value))
        else:
            _check(self._L.ampdiag_trace_set_attr_str(self._h(), _b(name), _b(str(value))))

    def update_attr(self, name, value):
        """A new value for a float attribute set before the first record (at any time before
        close: SWMR mode allows it in place). False when this libampdiag cannot."""
        if not has("ampdiag_trace_update_attr_double"):
            return False
        _check(self._L.ampdiag_trace_update_attr_double(self._h(), _b(name), float(value)))
        return True

    def set_rank(self, rank, world_size, backend="", reduce_dtype="", sharding="none"):
        """The root attributes of one rank of a distributed run (traces/FORMAT.md, "Distributed
        runs"), checked by libampdiag: 0 <= rank < world_size, sharding one of replicated,
        sharded, hybrid, none."""
        d = RankInfo(int(rank), int(world_size), _b(backend or ""), _b(reduce_dtype or ""), _b(sharding))
        if has("ampdiag_trace_set_rank"):
            _check(self._L.ampdiag_trace_set_rank(self._h(), ctypes.byref(d)))
            return
        for k, v in (("rank", int(rank)), ("world_size", int(world_size)), ("sharding", sharding),
                     ("dist_backend", backend), ("grad_reduce_dtype", reduce_dtype)):
            if v != "":
                self.set_attr(k, v)

    def add_layer(self, name, op="", shape="", params=0, compute=""):
        return _check(self._L.ampdiag_trace_add_layer_compute(self._h(), _b(name), _b(op), _b(shape),
                                                              int(params), _b(compute or "")))

    def append_tensor(self, step, layer, kind, stats, lost_updates=0):
        _check(self._L.ampdiag_trace_append_tensor(self._h(), step, layer, KINDS[kind] if isinstance(kind, str)
                                                   else kind, ctypes.byref(stats), lost_updates))

    def append_update(self, step, layer, stats, lost_updates, lost_if_fp16, lost_if_bf16):
        _check(self._L.ampdiag_trace_append_update(self._h(), step, layer, ctypes.byref(stats),
                                                   lost_updates, lost_if_fp16, lost_if_bf16))

    def append_hist(self, step, layer, kind, hist):
        if not isinstance(hist, Hist):
            h = Hist()
            for i, v in enumerate(hist):
                h.bin[i] = int(v)
            hist = h
        _check(self._L.ampdiag_trace_append_hist(self._h(), step, layer, KINDS[kind] if isinstance(kind, str)
                                                 else kind, ctypes.byref(hist)))

    def append_traced(self, step, reason, event_step=-1, cadence=0, record_ms=math.nan, step_ms=math.nan):
        """A /traced row (in step order, with the step's tensor records); False where the loaded
        libampdiag predates the table (its readers then take the steps with /tensors rows)."""
        if not has("ampdiag_trace_append_traced"):
            return False
        row = TracedRow(int(step), int(reason), int(event_step), int(cadence), float(record_ms), float(step_ms))
        _check(self._L.ampdiag_trace_append_traced(self._h(), ctypes.byref(row)))
        return True

    def append_event(self, step, layer, code, value=math.nan, message=None):
        """An /events row; a code this libampdiag does not know (older than the package) is
        written as a note whose message starts with the code's name."""
        c = EVENTS[code] if isinstance(code, str) else code
        if not event_known(c):
            name = code if isinstance(code, str) else str(code)
            c, message = EVENTS["note"], "%s: %s" % (name, message or "")
        _check(self._L.ampdiag_trace_append_event(self._h(), step, -1 if layer is None else layer, c,
                                                  float(value), _b(message)))

    def append_step(self, rec):
        _check(self._L.ampdiag_trace_append_step(self._h(), ctypes.byref(rec)))

    def append_eval(self, step, loss, metric=math.nan, loss_se=math.nan):
        _check(self._L.ampdiag_trace_append_eval_se(self._h(), step, float(loss), float(metric), float(loss_se)))

    def append_eval_examples(self, step, losses, metrics=None):
        """The /eval_examples rows of the evaluation at step (-1: the initial one): each validation
        example's loss (and metric). False when this libampdiag is older than the table."""
        f = getattr(self._L, "ampdiag_trace_append_eval_examples", None)
        if f is None:
            return False
        n = len(losses)
        lv = (ctypes.c_double * max(n, 1))(*[float(x) for x in losses])
        mv = None
        if metrics is not None:
            if len(metrics) != n:
                raise ValueError("ampdiag: append_eval_examples: %d losses but %d metrics" % (n, len(metrics)))
            mv = (ctypes.c_double * max(n, 1))(*[float(x) for x in metrics])
        _check(f(self._h(), int(step), lv, mv, n))
        return True

    def flush(self):
        _check(self._L.ampdiag_trace_flush(self._h()))

    def set_status(self, status):
        _check(self._L.ampdiag_trace_set_status(self._h(), STATUSES[status]))

    def close(self, status="complete"):
        """Close with that status (None keeps the last one set); safe to call twice."""
        if self._w is None:
            return
        w, self._w = self._w, None
        _check(self._L.ampdiag_trace_close(w, _KEEP_STATUS if status is None else STATUSES[status]))
