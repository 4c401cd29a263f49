"""Tensor statistics of ampdiag's /tensors records, computed where the tensor is.

Two ways, with the same definitions as libampdiag's ampdiag_tstats (include/ampdiag.h,
traces/FORMAT.md) and so the same counts:

* ``torch``: on the tensor's device with torch operations. Every count of a record is a count of
  float32 bit patterns between thresholds (zero, the FP16/BF16 underflow, subnormal and overflow
  limits, inf, NaN; both signs), so one ``torch.bucketize`` of the bits and one ``bincount`` give
  all twenty classes; the thresholds are found, when this module is first used, by bisection with
  torch's own round-to-nearest-even casts (``x.to(torch.float16)``, ``x.to(torch.bfloat16)``), so
  a count says what that cast does. Extremes, the smallest non-zero magnitude and the float64 sums
  take a few more reductions. Only the record (RECORD_LEN numbers) leaves the device.
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
NCLASS = 10  # per sign: zero, bf16 underflow, bf16 subnormal, fp16 underflow, fp16 subnormal,
#              normal, fp16 overflow, fp16+bf16 overflow, inf, NaN

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


def _class_starts():
    """Sorted int32 starts of the 20 classes over the signed bit pattern (negative numbers first:
    as int32, -|x| has the pattern |x| - 2^31)."""
    t = thresholds()
    h_unf, h_norm, h_ovf = t["fp16"]
    b_unf, b_norm, b_ovf = t["bf16"]
    pos = [0, 1, b_unf + 1, b_norm, h_unf + 1, h_norm, h_ovf, b_ovf, FLT_INF_BITS, FLT_INF_BITS + 1]
    if pos != sorted(pos) or len(set(pos)) != len(pos):
        raise RuntimeError("ampdiag: unexpected FP16/BF16 thresholds from torch's casts: %r" % (t,))
    return [p - 2 ** 31 for p in pos] + pos


# The OCP FP8 classes by |x|'s float32 bit pattern (the constants of numfmt.h, from the OFP8
# definition: torch's float8_e4m3fn cast saturates where OCP's E4M3 overflows, so they are not
# taken from torch's casts): 0 < |x| <= UNF flushes, < NORM is subnormal, >= OVF overflows.
# Boundaries for bucketize: 1 (non-zero), UNF + 1, NORM, OVF, inf.
_FP8_BOUNDS = {
    "e4m3": [1, 0x3A800000 + 1, 0x3C700000, 0x43E80001, FLT_INF_BITS],
    "e5m2": [1, 0x37000000 + 1, 0x38600000, 0x47700000, FLT_INF_BITS],
}
_fp8_on = {}
FLT_MIN_NORMAL_BITS = 0x00800000
RECORD_LEN = 2 * 10 + 5 + 7  # record_torch(): class counts, extremes and sums, FP8 counts


def _fp8_counts(u):
    """[e4m3 overflow, underflow, subnormal, e5m2 overflow, underflow, subnormal, float32
    subnormals] of the bit patterns u (int32), as a float64 vector on u's device."""
    a = u & 0x7FFFFFFF
    out = []
    for fmt in ("e4m3", "e5m2"):
        b = _fp8_on.get((u.device, fmt))
        if b is None:
            b = torch.tensor(_FP8_BOUNDS[fmt], dtype=torch.int32, device=u.device)
            _fp8_on[(u.device, fmt)] = b
        c = torch.bincount(torch.bucketize(a, b, right=True), minlength=6)
        out += [c[4], c[1], c[2]]  # overflow (finite), underflow, subnormal
    out.append(((a > 0) & (a < FLT_MIN_NORMAL_BITS)).sum())
    return torch.stack(out).to(torch.float64)


def _starts_on(device):
    b = _bounds.get(device)
    if b is None:
        b = torch.tensor(_class_starts(), dtype=torch.int32, device=device)
        _bounds[device] = b
    return b


def _as_f32(x):
    x = x.detach()
    if x.dtype != torch.float32:
        x = x.float()
    return x.reshape(-1)


def record_torch(x, with_hist=False):
    """The record of tensor x as a float64 vector on x's device (unpack() reads it): 20 class
    counts, the finite min and max, the smallest non-zero |x| bits minus one, the sum and the sum
    of squares of the finite values. With with_hist, also its 281-bin histogram (int64)."""
    xf = _as_f32(x)
    u = xf.view(torch.int32)
    idx = torch.bucketize(u, _starts_on(xf.device), right=True)  # 1..20
    counts = torch.bincount(idx, minlength=2 * NCLASS + 1)[1:]
    inf = math.inf
    lo = torch.nan_to_num(xf, nan=inf, posinf=inf, neginf=inf).min()
    hi = torch.nan_to_num(xf, nan=-inf, posinf=-inf, neginf=-inf).max()
    z = torch.nan_to_num(xf, nan=0.0, posinf=0.0, neginf=0.0)
    s = z.sum(dtype=torch.float64)
    ss = torch.linalg.vector_norm(z, dtype=torch.float64)
    amin = (((u & 0x7FFFFFFF) - 1) & 0x7FFFFFFF).min()
    vec = torch.cat([counts.to(torch.float64),
                     torch.stack([lo.double(), hi.double(), amin.double(), s, ss * ss]),
                     _fp8_counts(u)])
    if not with_hist:
        return vec, None
    return vec, _hist_torch(xf, idx)


def _hist_torch(xf, idx):
    lut = _lut.get(xf.device)
    if lut is None:
        v = [0] * (2 * NCLASS + 1)
        for sign, base in ((1, 1), (0, 1 + NCLASS)):  # idx 1..10 negative, 11..20 positive
            v[base + 0] = 277                      # zero
            v[base + 8] = 279 if sign else 278     # -inf / +inf
            v[base + 9] = 280                      # NaN
        lut = torch.tensor(v, dtype=torch.int64, device=xf.device)
        _lut[xf.device] = lut
    _, e = torch.frexp(xf)  # x = m 2^e, 0.5 <= |m| < 1: floor(log2|x|) = e - 1
    special = lut[idx]
    b = torch.where(special > 0, special, e.to(torch.int64) + 148)
    return torch.bincount(b, minlength=_lib.HIST_BINS)


def unpack(row):
    """A Tstats from one record_torch() vector (a sequence of 32 floats on the host)."""
    c = [int(v) for v in row[:2 * NCLASS]]
    neg, pos = c[:NCLASS], c[NCLASS:]
    both = [a + b for a, b in zip(neg, pos)]
    s = _lib.Tstats()
    s.count = sum(c)
    s.n_nan = both[9]
    s.n_posinf = pos[8]
    s.n_neginf = neg[8]
    s.n_zero = both[0]
    s.n_neg = sum(neg[1:8])
    s.n_pos = sum(pos[1:8])
    s.fp16_overflow = both[6] + both[7]
    s.fp16_underflow = both[1] + both[2] + both[3]
    s.fp16_subnormal = both[4]
    s.bf16_overflow = both[7]
    s.bf16_underflow = both[1]
    s.bf16_subnormal = both[2]
    f8 = [int(v) for v in row[2 * NCLASS + 5:2 * NCLASS + 12]]
    (s.e4m3_overflow, s.e4m3_underflow, s.e4m3_subnormal,
     s.e5m2_overflow, s.e5m2_underflow, s.e5m2_subnormal, s.fp32_subnormal) = f8
    lo, hi, amin, sm, ss = (float(v) for v in row[2 * NCLASS:2 * NCLASS + 5])
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
