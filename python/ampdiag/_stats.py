"""Tensor statistics of ampdiag's /tensors records, computed where the tensor is.

Two ways, with the same definitions as libampdiag's ampdiag_tstats (include/ampdiag.h,
traces/FORMAT.md) and so the same counts:

* ``torch``: on the tensor's device with torch operations. Every count of a record is a
  difference of counts of |x| at least a few float32 bit patterns (zero, inf, NaN, the
  underflow, subnormal and overflow limits of FP16, BF16, E4M3, E5M2 and float32's smallest
  normal), so one ``torch.bucketize`` of the signed bits gives each value's rank among them (its
  sign included) and one ``index_add_`` counts the ranks; the FP16/BF16 thresholds are found,
  when this module is first used, by bisection with torch's own round-to-nearest-even casts
  (``x.to(torch.float16)``, ``x.to(torch.bfloat16)``), so a count says what that cast does.
  Extremes, the smallest non-zero magnitude and the float64 sums take a few more reductions.
  Nothing waits for the device (``torch.bincount`` would, once per call): the records of a step
  leave the device together (record_len() numbers each).
* ``lib``: for float32 tensors in CPU memory, libampdiag's fused one-pass kernel
  (``ampdiag_tstats_compute``) on the tensor's own memory; faster on the CPU.

Tensors of other floating dtypes are read as their float32 values (exact for FP16 and BF16).
"""
import ctypes
import math
import struct

import torch

from . import _lib

__all__ = ["thresholds", "record_torch", "unpack", "tstats", "hist", "merge", "lost_masks", "lost_counts_lib"]

FLT_INF_BITS = 0x7F800000

_thr = None
_bounds = {}
_lut = {}


def _bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _f(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _first(pred, lo, hi):
    """The smallest bit pattern a in [lo, hi] with pred(a), pred monotone (False then True)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _cast(bits, dtype):
    return torch.tensor([_f(bits)], dtype=torch.float32).to(dtype).float().item()


def thresholds():
    """The class thresholds as |x| float32 bit patterns, from torch's casts:
    {fmt: (underflow_at, normal_from, overflow_from)} for fmt in fp16, bf16, where a value rounds
    to zero when 0 < |x| <= underflow_at, to a normal number when |x| >= normal_from (below:
    a subnormal), and to infinity when |x| >= overflow_from."""
    global _thr
    if _thr is None:
        out = {}
        for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
            fi = torch.finfo(dt)
            unf = _first(lambda a: _cast(a, dt) != 0.0, 1, FLT_INF_BITS) - 1
            norm = _first(lambda a: abs(_cast(a, dt)) >= fi.tiny, 1, FLT_INF_BITS)
            ovf = _first(lambda a: math.isinf(_cast(a, dt)), 1, FLT_INF_BITS)
            out[name] = (unf, norm, ovf)
        _thr = out
    return _thr


# The OCP FP8 classes by |x|'s float32 bit pattern (the constants of numfmt.h, from the OFP8
# definition: torch's float8_e4m3fn cast saturates where OCP's E4M3 overflows, so they are not
# taken from torch's casts): 0 < |x| <= UNF flushes, < NORM is subnormal, >= OVF overflows.
# As thresholds "at least": UNF + 1, NORM, OVF.
_FP8_AT_LEAST = {
    "e4m3": (0x3A800000 + 1, 0x3C700000, 0x43E80001),
    "e5m2": (0x37000000 + 1, 0x38600000, 0x47700000),
}
FLT_MIN_NORMAL_BITS = 0x00800000
_T = None


def _at_least():
    """Every |x| bit pattern t a count of the record is #(|x| >= t) of, sorted and distinct: 1
    (non-zero), inf, the first NaN, float32's smallest normal, and each format's underflow + 1,
    normal and overflow thresholds (FP16 and BF16 from torch's casts, FP8 from the OFP8 spec)."""
    global _T
    if _T is None:
        t = thresholds()
        T = {1, FLT_INF_BITS, FLT_INF_BITS + 1, FLT_MIN_NORMAL_BITS}
        for name in ("fp16", "bf16"):
            unf, norm, ovf = t[name]
            T |= {unf + 1, norm, ovf}
        for v in _FP8_AT_LEAST.values():
            T |= set(v)
        _T = sorted(T)
    return _T


def nbins():
    """Bins of a record's rank counts: the ranks 0..len(T) of a negative value, then of a
    positive one."""
    return 2 * len(_at_least()) + 2


def record_len():
    """Numbers in a record_torch() vector: the rank counts, then min, max, the smallest non-zero
    |x| bits minus one, the sum and the sum of squares."""
    return nbins() + 5


def _edges_on(device):
    """The bucketize boundaries over the signed int32 bit pattern, on device: as int32 a negative
    float is |x| - 2^31, so the ranks of negative values come first, then 0 (+0), then the ranks
    of positive values; a value's bin is how many boundaries are at most its pattern."""
    b = _bounds.get(device)
    if b is None:
        T = _at_least()
        b = torch.tensor([t - 2 ** 31 for t in T] + [0] + T, dtype=torch.int32, device=device)
        _bounds[device] = b
    return b


_ones = {}


def _one(device):
    o = _ones.get(device)
    if o is None:
        o = _ones[device] = torch.ones((), dtype=torch.float64, device=device)
    return o


def _count(idx, nb):
    """How many of idx fall in each of nb bins, as float64 (exact below 2^53), without
    torch.bincount: on a GPU bincount waits for the device (it reads the largest index back to
    size its output), once per call; index_add_ does not."""
    idx = idx.reshape(-1)
    return torch.zeros(nb, dtype=torch.float64, device=idx.device).index_add_(0, idx, _one(idx.device).expand(idx.numel()))


def _as_f32(x):
    x = x.detach()
    if x.dtype != torch.float32:
        x = x.float()
    return x.reshape(-1)


def record_torch(x, with_hist=False):
    """The record of tensor x as a float64 vector on x's device (unpack() reads it): how many
    values have each rank among the thresholds of _at_least() (both signs), the finite min and
    max, the smallest non-zero |x| bits minus one, the sum and the sum of squares of the finite
    values. With with_hist, also its 281-bin histogram (float64 counts). Nothing here waits for
    the device: the record stays there until the tracer copies a step's records back at once."""
    xf = _as_f32(x)
    u = xf.view(torch.int32)
    idx = torch.bucketize(u, _edges_on(xf.device), right=True)
    counts = _count(idx, nbins())
    inf = math.inf
    fin = torch.isfinite(xf)
    lo = torch.where(fin, xf, inf).min()
    hi = torch.where(fin, xf, -inf).max()
    z = torch.where(fin, xf, 0.0)
    s = z.sum(dtype=torch.float64)
    ss = torch.linalg.vector_norm(z, dtype=torch.float64)
    amin = (((u & 0x7FFFFFFF) - 1) & 0x7FFFFFFF).min()
    vec = torch.cat([counts, torch.stack([lo.double(), hi.double(), amin.double(), s, ss * ss])])
    if not with_hist:
        return vec, None
    return vec, _hist_torch(xf, idx)


def _hist_torch(xf, idx):
    """The 281-bin exponent histogram (libampdiag's bins) from the values and their rank bins:
    zeros, infinities and NaNs by their rank, the others by their binary exponent."""
    lut = _lut.get(xf.device)
    if lut is None:
        T = _at_least()
        nt, j_inf = len(T), T.index(FLT_INF_BITS) + 1  # the rank of inf; NaN's is nt
        v = [0] * nbins()
        for neg, base in ((1, 0), (0, nt + 1)):
            v[base + 0] = 277                       # zero
            v[base + j_inf] = 279 if neg else 278   # -inf / +inf
            v[base + nt] = 280                      # NaN
        lut = torch.tensor(v, dtype=torch.int64, device=xf.device)
        _lut[xf.device] = lut
    _, e = torch.frexp(xf)  # x = m 2^e, 0.5 <= |m| < 1: floor(log2|x|) = e - 1
    special = lut[idx]
    b = torch.where(special > 0, special, e.to(torch.int64) + 148)
    return _count(b, _lib.HIST_BINS)


def unpack(row):
    """A Tstats from one record_torch() vector (a sequence of record_len() floats on the host):
    every count is a difference of counts of |x| at least one of the thresholds."""
    T = _at_least()
    nt = len(T)
    c = [int(v) for v in row[:nbins()]]
    neg, pos = c[:nt + 1], c[nt + 1:]

    def at_least(t, only_neg=False):
        j = T.index(t)
        return sum(neg[j + 1:]) + (0 if only_neg else sum(pos[j + 1:]))

    n = sum(c)
    nz, inf_up, nan = at_least(1), at_least(FLT_INF_BITS), at_least(FLT_INF_BITS + 1)
    s = _lib.Tstats()
    s.count = n
    s.n_nan = nan
    s.n_neginf = at_least(FLT_INF_BITS, True) - at_least(FLT_INF_BITS + 1, True)
    s.n_posinf = inf_up - nan - s.n_neginf
    s.n_zero = n - nz
    s.n_neg = at_least(1, True) - at_least(FLT_INF_BITS, True)
    s.n_pos = n - inf_up - s.n_zero - s.n_neg
    fmts = [(name, (t[0] + 1, t[1], t[2])) for name, t in thresholds().items()] + list(_FP8_AT_LEAST.items())
    for name, (unf1, norm, ovf) in fmts:
        above = at_least(unf1)
        setattr(s, name + "_overflow", at_least(ovf) - inf_up)    # finite |x| >= overflow
        setattr(s, name + "_underflow", nz - above)                # 0 < |x| <= underflow
        setattr(s, name + "_subnormal", above - at_least(norm))    # underflow < |x| < normal
    s.fp32_subnormal = nz - at_least(FLT_MIN_NORMAL_BITS)
    lo, hi, amin, sm, ss = (float(v) for v in row[nbins():nbins() + 5])
    if math.isinf(lo):  # no finite value: the identities of merging (ampdiag.h)
        s.min, s.max, s.absmax = math.inf, -math.inf, -math.inf
    else:
        if lo == 0.0:  # -0 orders below +0
            lo = -0.0 if neg[0] else 0.0
        if hi == 0.0:
            hi = 0.0 if pos[0] else -0.0
        s.min, s.max, s.absmax = lo, hi, max(abs(lo), abs(hi))
    a = int(amin) + 1
    s.absmin_nz = math.inf if a >= FLT_INF_BITS else _f(a)
    s.sum, s.sumsq = sm, ss
    return s


def tstats(x, with_hist=False):
    """libampdiag's statistics (and histogram) of a tensor in CPU memory: (Tstats, Hist or None).
    One call into the library; a float32 contiguous tensor is read where it is."""
    if x.dtype != torch.float32 or not x.is_contiguous():
        x = _as_f32(x).contiguous()
    if x.device.type != "cpu":
        raise ValueError("ampdiag: the lib statistics read CPU tensors (this one is on %s)" % x.device)
    s = _lib.Tstats()
    h = _lib.Hist() if with_hist else None
    _lib.lib().ampdiag_tstats_compute(x.data_ptr(), x.numel(), s, h)
    return s, h


def hist_from(vec):
    h = _lib.Hist()
    for i, v in enumerate(vec):
        h.bin[i] = int(v)
    return h


def merge(a, b):
    """a merged with b (libampdiag's ampdiag_tstats_merge), in place into a; returns a."""
    _lib.lib().ampdiag_tstats_merge(ctypes.byref(a), ctypes.byref(b))
    return a


def merge_hist(a, b):
    _lib.lib().ampdiag_hist_merge(ctypes.byref(a), ctypes.byref(b))
    return a


def lost_counts_lib(w_old, d, grad):
    """The three counts of lost_masks() (summed) by libampdiag's ampdiag_update_lost_counts, in
    one pass over float32 contiguous tensors in CPU memory; None when the library lacks it (or
    it fails)."""
    L = _lib.lib()
    if not _lib.has("ampdiag_update_lost_counts"):
        return None
    out = (ctypes.c_uint64 * 3)()
    if L.ampdiag_update_lost_counts(w_old.data_ptr(), d.data_ptr(), grad.data_ptr(), d.numel(), out):
        return None
    return list(out)


def lost_masks(w_old, d, grad):
    """Lost updates, element by element, of the weights w_old (float32) changed by d = w_new - w_old
    (float32), with their gradients grad (float32, 0 where a parameter had none): a [3, n] bool
    tensor whose rows mark the lost updates as stored, if the weights were FP16, if BF16. The update
    is the change the optimizer made (PyTorch does not expose the change it intended); it was meant
    to be non-zero where d != 0 or the gradient is finite and non-zero. Lost: meant to be non-zero,
    but d == 0 (w_new == w_old as stored); if FP16 (BF16): meant to be non-zero, but
    fl(fl(w_old) + d) == fl(w_old), with torch's round-to-nearest-even casts. A few whole-tensor
    operations (the tracer calls it once per layer, on its parameters laid end to end)."""
    out = torch.empty((3,) + tuple(d.shape), dtype=torch.bool, device=d.device)
    stay = torch.eq(d, 0, out=out[0])
    pushed = grad != 0
    pushed.logical_and_(torch.isfinite(grad))
    meant = pushed.logical_or(stay.logical_not())
    stay.logical_and_(pushed)  # row 0: lost
    for row, dt in ((1, torch.float16), (2, torch.bfloat16)):
        wr = w_old.to(dt)
        torch.eq(wr.float().add_(d).to(dt), wr, out=out[row])
        out[row].logical_and_(meant)
    return out
