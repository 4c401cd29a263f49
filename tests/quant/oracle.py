"""An independent implementation of ampdiag's block-scaled what-if, written from the
specifications (docs/numerics.md, "Block formats"), with numpy and ml_dtypes only:

* element rounding: ml_dtypes' float8_e4m3fn, float8_e5m2, float6_e2m3fn, float6_e3m2fn and
  float4_e2m1fn casts (round to nearest even), with the saturation of the recipes applied by
  clipping to +-max first; "saturated" from the definition (the nearest value of the format
  extended by one step beyond its largest value is that step);
* E8M0 scales: OCP MX v1.0 section 6.3 (floor) and NVIDIA's round-up rule (cuDNN / cuBLAS
  block scaling, Transformer Engine's float_to_e8m0), from the exponent of the float32 values
  (numpy.frexp);
* NVFP4: Transformer Engine's reference arithmetic in float32 numpy scalars;
* FP8 blockwise and current scaling: Transformer Engine's compute_scale_from_amax.

Blocks are found by numbering every value's block, and the amax of each block with
numpy.maximum.at over the |x| bit patterns; nothing here shares code with the C library.
"""
import math

import ml_dtypes
import numpy as np

F32 = np.float32
INF_BITS = 0x7F800000
FLT_MAX = F32(np.finfo(np.float32).max)

# element formats: ml_dtypes type, largest value, smallest normal, exponent of the largest binade
ELEM = {
    "e4m3": (ml_dtypes.float8_e4m3fn, 448.0, 2.0 ** -6, 8, 3),
    "e5m2": (ml_dtypes.float8_e5m2, 57344.0, 2.0 ** -14, 15, 2),
    "e2m3": (ml_dtypes.float6_e2m3fn, 7.5, 1.0, 2, 3),
    "e3m2": (ml_dtypes.float6_e3m2fn, 28.0, 0.25, 4, 2),
    "e2m1": (ml_dtypes.float4_e2m1fn, 6.0, 1.0, 2, 1),
}
BLOCK = {"mx": 32, "nvfp4": 16, "blockwise": 128, "current": 0}


def abs_bits(x):
    return x.view(np.uint32) & np.uint32(0x7FFFFFFF)


def round_elem(v, fmt):
    """v (float32 array) rounded to the element format with saturation; and which saturated."""
    typ, mx, _, emax, m = ELEM[fmt]
    a = np.abs(v.astype(np.float64))
    # the format extended by one step beyond its largest value: the largest value's binade is
    # [2^emax, 2^(emax+1)) with steps of 2^(emax - m); its code is odd when its last mantissa
    # bit is 1: (max / step) odd
    step = 2.0 ** (emax - m)
    virt = mx + step
    odd = int(round(mx / step)) % 2 == 1
    d1, d2 = a - mx, virt - a
    sat = (a > mx) & ((d2 < d1) | ((d2 == d1) & odd))
    q = np.clip(v, F32(-mx), F32(mx)).astype(typ).astype(np.float32)
    return q, sat


def block_ids(n, rows, cols, direction, b):
    """Every value's block number, and the number of blocks: the matrix rows x cols (rows >= 2)
    then the tail, blocked as a vector in every direction."""
    matrix = rows >= 2 and cols >= 1
    mr, mc = (rows, cols) if matrix else (0, 0)
    ids = np.empty(n, dtype=np.int64)
    nb = 0
    if mr:
        i = np.repeat(np.arange(mr), mc)
        j = np.tile(np.arange(mc), mr)
        cb = -(-mc // b) if b else 1
        if direction == "tensor":
            ids[:mr * mc] = 0
            nb = 1
        elif direction == "rowwise":
            ids[:mr * mc] = i * cb + j // b
            nb = mr * cb
        elif direction == "columnwise":
            ids[:mr * mc] = (i // b) * mc + j
            nb = -(-mr // b) * mc
        else:
            ids[:mr * mc] = (i // b) * cb + j // b
            nb = -(-mr // b) * cb
    t = n - mr * mc
    if t:
        if direction == "tensor":
            ids[mr * mc:] = 0
            nb = max(nb, 1)
        else:
            ids[mr * mc:] = nb + np.arange(t) // b
            nb += -(-t // b)
    return ids, nb


def e4m3_sat(x):
    """float32 scalar -> E4M3 with saturation (float32 value) and whether it clamped."""
    if x > F32(464.0):  # above 448 + half a step (464 ties to the even 448): beyond 448
        return F32(448.0), True
    return F32(np.array([x], dtype=np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)[0]), False


def scales(scheme, rule, fmt, m_all, m_nn, tensor_amax):
    """Per block: (mul float32, dec float64, counters) from the block amax bit patterns."""
    typ, mx, _, emax, _ = ELEM[fmt]
    nb = len(m_all)
    mul = np.zeros(nb, dtype=np.float32)
    dec = np.zeros(nb, dtype=np.float64)
    c = dict(zero_blocks=0, nonfinite_blocks=int(np.sum(m_all >= INF_BITS)), scale_clamped=0, scale_underflow=0,
             scale_subnormal=0)
    exps = []
    s_enc = F32(1.0)
    if scheme == "nvfp4":
        a = F32(tensor_amax)
        with np.errstate(divide="ignore", over="ignore"):
            s = min(F32(2688.0) / a, FLT_MAX) if a != 0 else FLT_MAX
        s_enc = F32(1.0) if a == 0 or s == 0 else F32(s)
        s_dec = F32(F32(1.0) / s_enc)
    if scheme == "current":
        a = F32(tensor_amax)
        s = F32(1.0)
        if a != 0 and np.isfinite(a):
            with np.errstate(over="ignore"):
                s = F32(F32(mx) / a)
            if np.isinf(s):
                s = FLT_MAX
                c["scale_clamped"] = 1
            if rule == "pow2":
                s = np.array([s], np.float32).view(np.uint32) & np.uint32(0xFF800000)
                s = s.view(np.float32)[0]
        mul[:] = s
        dec[:] = float(F32(F32(1.0) / s))
        if a == 0:
            c["zero_blocks"] = 1
        elif np.isfinite(a):
            exps.append(math.frexp(float(F32(F32(1.0) / s)))[1] - 1)
        return mul, dec, c, exps, s
    for k in range(nb):
        ma, mn = int(m_all[k]), int(m_nn[k])
        if scheme == "mx":
            if ma >= INF_BITS:  # NaN or inf in the block: the scale is NaN
                mul[k], dec[k] = 0, math.nan
                continue
            amax = float(np.uint32(ma).view(np.float32))
            if amax == 0:
                c["zero_blocks"] += 1
                E = -127
            elif rule == "floor":  # X = 2^(floor(log2 amax) - emax_elem), E8M0 from -127
                E = math.frexp(amax)[1] - 1 - emax
                if E < -127:
                    E = -127
                    c["scale_underflow"] += 1
            else:  # X = amax / max rounded up to a power of two, in float32 as the hardware does
                d = float(F32(F32(amax) * F32(F32(1.0) / F32(mx))))
                if d == 0:
                    E = -127
                else:
                    mant, e = math.frexp(d)  # d = mant 2^e, mant in [0.5, 1)
                    E = e - 1 if mant == 0.5 else e
                if d < 2.0 ** -127:
                    c["scale_underflow"] += 1
                E = max(E, -127)
            if amax != 0:
                exps.append(E)
            mul[k] = F32(2.0 ** -E)
            dec[k] = 2.0 ** E
        elif scheme == "nvfp4":
            if mn == 0:
                c["zero_blocks"] += 1
                mul[k], dec[k] = 0, 0
                continue
            a = np.uint32(mn).view(np.float32)
            sdb = min(F32(F32(a / F32(6.0)) * s_enc), FLT_MAX)
            sb, clamped = e4m3_sat(F32(sdb))
            c["scale_clamped"] += clamped
            if sb == 0:
                c["scale_underflow"] += 1
                mul[k], dec[k] = 0, 0
                continue
            if sb < 2.0 ** -6:
                c["scale_subnormal"] += 1
            if mn < INF_BITS:
                exps.append(math.frexp(float(sb))[1] - 1)
            with np.errstate(divide="ignore", over="ignore"):
                mul[k] = min(F32(F32(1.0) / F32(sb * s_dec)), FLT_MAX)
            dec[k] = float(sb) * float(s_dec)
        else:  # blockwise
            s = F32(1.0)
            if mn == 0:
                c["zero_blocks"] += 1
            elif mn < INF_BITS:
                with np.errstate(over="ignore"):
                    s = F32(F32(mx) / np.uint32(mn).view(np.float32))
                if np.isinf(s):
                    s = FLT_MAX
                    c["scale_clamped"] += 1
                if rule == "pow2":
                    s = (np.array([s], np.float32).view(np.uint32) & np.uint32(0xFF800000)).view(np.float32)[0]
                exps.append(math.frexp(float(F32(F32(1.0) / s)))[1] - 1)
            mul[k] = s
            dec[k] = float(F32(F32(1.0) / s))
    return mul, dec, c, exps, (s_enc if scheme == "nvfp4" else F32(1.0))


def count(x, rows, cols, scheme, fmt, rule, direction, block=0, tensor_amax=None, ref_deq=None):
    """What the scheme does to x (float32, 1-D): a dict of the ampdiag_qstats fields; and the
    decoded values (NaN where not counted) for a disagreement count against another."""
    n = x.size
    b = block or BLOCK[scheme]
    ab = abs_bits(x)
    if tensor_amax is None:
        nn = ab[ab <= INF_BITS]
        tensor_amax = float(nn.max().view(np.float32)) if nn.size else 0.0
    ids, nb = block_ids(n, rows, cols, direction, b)
    m_all = np.zeros(nb, dtype=np.uint32)
    m_nn = np.zeros(nb, dtype=np.uint32)
    np.maximum.at(m_all, ids, ab)
    np.maximum.at(m_nn, ids, np.where(ab <= INF_BITS, ab, 0).astype(np.uint32))
    mul, dec, c, exps, scale = scales(scheme, rule, fmt, m_all, m_nn, tensor_amax)
    fin = ab < INF_BITS
    decv = dec[ids]
    pois = fin & np.isnan(decv)
    use = fin & ~pois
    xv = np.where(use, x, F32(0))
    with np.errstate(over="ignore", invalid="ignore"):
        v = (xv * mul[ids]).astype(np.float32)
    q, sat = round_elem(v, fmt)
    _, _, mn_elem, _, _ = ELEM[fmt]
    dq = q.astype(np.float64) * np.where(use, decv, 0.0)
    x64 = x.astype(np.float64)
    e = np.where(use, x64 - dq, 0.0)
    nz = use & (x != 0)
    rel = np.zeros(n)
    rel[nz] = np.abs(e[nz]) / np.abs(x64[nz])
    out = dict(count=n, nonfinite=int(np.sum(~fin)), saturated=int(np.sum(sat & use)),
               flushed=int(np.sum(nz & (dq == 0))), subnormal=int(np.sum(use & (q != 0) & (np.abs(q) < mn_elem))),
               poisoned=int(np.sum(pois)), blocks=nb, sig_sq=float(np.sum(np.where(use, x64 * x64, 0.0))),
               err_sq=float(np.sum(e * e)), max_rel_err=float(rel.max()) if n else 0.0, scale=float(scale))
    out.update(c)
    if direction == "tensor":
        out["blocks"] = 1
        out["nonfinite_blocks"] = int(out["nonfinite"] > 0)
    if exps:
        out["scale_emin"], out["scale_emax"] = min(exps), max(exps)
        hist = [0] * 32
        for ex in exps:
            hist[min(out["scale_emax"] - ex, 31)] += 1
        out["scale_hist"] = hist
    else:
        out["scale_emin"] = out["scale_emax"] = 0
        out["scale_hist"] = [0] * 32
    deq = np.where(use, dq, np.nan)
    out["disagree"], out["disagree_sq"] = 0, 0.0
    if ref_deq is not None:
        both = ~np.isnan(deq) & ~np.isnan(ref_deq)
        diff = both & (deq != ref_deq)
        out["disagree"] = int(np.sum(diff))
        out["disagree_sq"] = float(np.sum((deq[diff] - ref_deq[diff]) ** 2))
    return out, deq
