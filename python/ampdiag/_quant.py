"""ctypes binding to libampdiag's block-scaled quantisation what-if (ampdiag.h,
``ampdiag_quant_whatif``): MX, NVFP4, FP8 blockwise and FP8 current scaling, counted on the CPU
for a float32 tensor, with the same scheme list syntax as ``ampdiag run --whatif``.

    specs = parse("mxfp8,nvfp4")                 # what to count
    stats = whatif(array_f32, rows, cols, specs)  # one dict per spec (see QStats)

docs/numerics.md ("Block formats") defines every scheme and field.
"""
import ctypes
import math

from . import _lib

__all__ = ["QSpec", "QStats", "parse", "default_list", "whatif", "spec_name", "SCHEMES", "RULES", "DIRS",
           "FORMATS", "QHIST_BINS", "available"]

QHIST_BINS = 32
SCHEMES = ("current", "mx", "nvfp4", "blockwise")
RULES = ("floor", "rceil", "e4m3", "fp32", "pow2")
DIRS = ("tensor", "rowwise", "columnwise", "tile")
FORMATS = ("fp32", "fp16", "bf16", "e4m3", "e5m2", "e2m1", "e2m3", "e3m2", "e8m0")  # ampdiag_format


class QSpec(ctypes.Structure):
    """struct ampdiag_qspec."""
    _fields_ = [("elem", ctypes.c_int), ("scheme", ctypes.c_int), ("rule", ctypes.c_int), ("dir", ctypes.c_int),
                ("block", ctypes.c_int), ("kinds", ctypes.c_uint)]

    def applies_to(self, kind):
        """Whether the recipe quantises tensors of this kind (an index of _lib.KINDS)."""
        return bool(self.kinds & (1 << kind))


class QStats(ctypes.Structure):
    """struct ampdiag_qstats."""
    _fields_ = [("spec", QSpec), ("computed", ctypes.c_int), ("scale", ctypes.c_float)] + \
        [(n, ctypes.c_uint64) for n in ("count", "nonfinite", "saturated", "flushed", "subnormal", "poisoned",
                                        "blocks", "zero_blocks", "nonfinite_blocks", "scale_clamped",
                                        "scale_underflow", "scale_subnormal")] + \
        [("scale_emin", ctypes.c_int32), ("scale_emax", ctypes.c_int32),
         ("scale_hist", ctypes.c_uint64 * QHIST_BINS),
         ("sig_sq", ctypes.c_double), ("err_sq", ctypes.c_double), ("max_rel_err", ctypes.c_double),
         ("disagree", ctypes.c_uint64), ("disagree_sq", ctypes.c_double)]

    COUNTS = ("count", "nonfinite", "saturated", "flushed", "subnormal", "poisoned", "blocks", "zero_blocks",
              "nonfinite_blocks", "scale_clamped", "scale_underflow", "scale_subnormal", "disagree")

    def as_dict(self):
        d = {n: getattr(self, n) for n, _ in self._fields_ if n not in ("spec", "scale_hist")}
        d["scale_hist"] = list(self.scale_hist)
        d["format"] = FORMATS[self.spec.elem]
        d["scheme"] = SCHEMES[self.spec.scheme]
        d["rule"] = RULES[self.spec.rule]
        d["direction"] = DIRS[self.spec.dir]
        d["block"] = self.spec.block
        d["name"] = spec_name(self.spec)
        d["sqnr_db"] = sqnr_db(self.sig_sq, self.err_sq)
        return d


def sqnr_db(sig_sq, err_sq):
    """10 log10(signal / error) in dB: +inf without error, NaN without signal."""
    if not sig_sq > 0:
        return math.nan
    return 10.0 * math.log10(sig_sq / err_sq) if err_sq > 0 else math.inf


_declared = None


def _L():
    global _declared
    L = _lib.lib()
    if _declared is not L:
        sig = {
            "ampdiag_qspec_parse": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(QSpec), ctypes.c_size_t,
                                                   ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p, ctypes.c_size_t]),
            "ampdiag_qspec_default": (ctypes.c_char_p, []),
            "ampdiag_qspec_name": (ctypes.c_int, [ctypes.POINTER(QSpec), ctypes.c_char_p, ctypes.c_size_t]),
            "ampdiag_quant_whatif": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t,
                                                    ctypes.c_float, ctypes.c_size_t, ctypes.POINTER(QSpec),
                                                    ctypes.POINTER(QStats)]),
        }
        for name, (res, args) in sig.items():
            f = getattr(L, name)  # AttributeError: a libampdiag without the block what-if
            f.restype = res
            f.argtypes = args
        _declared = L
    return L


def available():
    """Whether the loaded libampdiag has the block what-if."""
    try:
        _L()
        return True
    except (AttributeError, _lib.LibraryNotFound):
        return False


MAX_SPECS = 256


def parse(text):
    """The --whatif list syntax (docs/numerics.md) -> a tuple of QSpec; ValueError naming the item."""
    buf = (QSpec * MAX_SPECS)()
    n = ctypes.c_size_t(0)
    err = ctypes.create_string_buffer(256)
    if _L().ampdiag_qspec_parse(text.encode("utf-8"), buf, MAX_SPECS, ctypes.byref(n), err, len(err)) != 0:
        raise ValueError("--whatif %s" % err.value.decode("utf-8", "replace"))
    return tuple(buf[i] for i in range(n.value))


def default_list():
    return _L().ampdiag_qspec_default().decode()


def spec_name(spec):
    buf = ctypes.create_string_buffer(64)
    _L().ampdiag_qspec_name(ctypes.byref(spec), buf, len(buf))
    return buf.value.decode()


def whatif(values, rows, cols, specs, amax=-1.0):
    """Count specs on values (a C-contiguous float32 buffer: numpy array or anything with the buffer
    protocol, n values: a rows x cols matrix then a 1-D tail; rows = cols = 0 for a 1-D tensor).
    amax: the largest |x| of the non-NaN values (inf included), or negative to let the library find
    it. Returns the QStats structures, one per spec (computed = 0 where not applicable)."""
    import numpy as np
    x = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    specs = list(specs)
    arr = (QSpec * max(1, len(specs)))(*specs)
    out = (QStats * max(1, len(specs)))()
    rc = _L().ampdiag_quant_whatif(x.ctypes.data if x.size else None, x.size, rows, cols, float(amax), len(specs),
                                   arr, out)
    if rc != 0:
        raise ValueError("ampdiag_quant_whatif refused the tensor (%d values, %d x %d) or a spec" % (x.size, rows, cols))
    return [out[i] for i in range(len(specs))]


def append(writer, step, layer, kind, q):
    """A /quant row through a _lib.TraceWriter (kind: a name of _lib.KINDS or its number)."""
    L = _L()
    f = getattr(L, "ampdiag_trace_append_quant")
    if f.argtypes is None:
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.POINTER(QStats)]
    k = _lib.KINDS[kind] if isinstance(kind, str) else int(kind)
    _lib._check(f(writer._h(), step, layer, k, ctypes.byref(q)))


def matrix_shape(shape, first_param_shape=None):
    """(rows, cols) of a tensor for the block directions: an activation or its gradient [..., F]
    is rows = prod(...) x cols = F; a layer's parameters (first_param_shape given) are its first
    parameter as a [out, prod(rest)] matrix when it has 2 or more dimensions, then a 1-D tail.
    (0, 0): a 1-D tensor."""
    if first_param_shape is not None:
        s = tuple(first_param_shape)
        if len(s) >= 2 and s[0] > 1:
            cols = 1
            for d in s[1:]:
                cols *= int(d)
            return int(s[0]), cols
        return 0, 0
    s = tuple(shape)
    if len(s) >= 2 and s[-1] > 1:
        rows = 1
        for d in s[:-1]:
            rows *= int(d)
        if rows > 1:
            return rows, int(s[-1])
    return 0, 0
