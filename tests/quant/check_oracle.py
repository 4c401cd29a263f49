"""TAP test: ampdiag_quant_whatif (libampdiag, through python/ampdiag/_quant.py) against the
independent implementation of tests/quant/oracle.py, on stratified tensors with every edge:
zeros and all-zero blocks, float32 subnormals, NaN and inf inside blocks, block amax at and
around every boundary of every element format and scale rule, ragged last blocks and tiles,
1-D tensors, matrices with a 1-D tail. Every count (and max_rel_err, an exactly rounded
quotient) must be equal; the sums of squares (and so the SQNR) equal to 1e-12 relative, the
order of the additions being the only difference.

Usage: check_oracle.py [--quick]   (reports SKIP without numpy or ml_dtypes)
"""
import math
import os
import sys

try:
    import numpy as np
    import ml_dtypes  # noqa: F401  (the oracle's element types)
except ImportError as e:
    print("1..0 # SKIP needs numpy and ml_dtypes (pip install ml_dtypes; scripts/install-deps.sh --with-torch): %s" % e)
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

from ampdiag import _quant  # noqa: E402

F32 = np.float32
EXACT = ("count", "nonfinite", "saturated", "flushed", "subnormal", "poisoned", "blocks", "zero_blocks",
         "nonfinite_blocks", "scale_clamped", "scale_underflow", "scale_subnormal", "scale_emin", "scale_emax",
         "disagree", "max_rel_err")
CLOSE = ("sig_sq", "err_sq", "disagree_sq")
COVER = ("nonfinite", "saturated", "flushed", "subnormal", "poisoned", "zero_blocks", "nonfinite_blocks",
         "scale_clamped", "scale_underflow", "scale_subnormal", "disagree")


def f32(v):
    return np.array(v, dtype=np.float64).astype(np.float32)


def nextup(v, k=1):
    with np.errstate(over="ignore"):
        x = np.array([v], dtype=np.float32)
    for _ in range(abs(k)):
        x = np.nextafter(x, F32(np.inf) if k > 0 else F32(-np.inf))
    return float(x[0])


# ---------------------------------------------------------------------------------- tensors

def boundary_values(fmt):
    """Values at and around every boundary of an element format (as multiples of the unit)."""
    _, mx, mn, emax, m = oracle.ELEM[fmt]
    sub = mn * 2.0 ** -m  # smallest subnormal
    step = 2.0 ** (emax - m)
    pts = [0.0, sub, sub / 2, sub * 1.5, sub * 2.5, mn - sub / 2, mn, mn * 1.5, 1.0, mx, mx - step / 2, mx + step / 2,
           mx + step, 2.0 ** (emax + 1), mx / 2, mx * 0.75]
    out = []
    for p in pts:
        for k in (-2, -1, 0, 1, 2):
            v = nextup(p, k) if p != 0 else (k * 1e-45 if k else 0.0)
            out += [v, -v]
    return [v for v in out if math.isfinite(v)]


def block_of(vals, amax, n):
    """n values: amax first, then vals (cycled), scaled as they are."""
    b = [amax] + [vals[i % len(vals)] for i in range(n - 1)]
    return b[:n]


def edge_tensors(rng):
    """Blocks placing values on the element boundaries after each scheme's scaling."""
    cases = []
    for fmt in ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1"):
        _, mx, _, emax, m = oracle.ELEM[fmt]
        vals = boundary_values(fmt)
        rows = []
        for j in (-130, -126, -100, -20, -3, 0, 5, 60, 110, 120):
            # MX floor: amax = max 2^j gives E = j, so the values * 2^j quantise as they are
            for amax_unit in (mx, 2.0 ** emax, nextup(2.0 ** (emax + 1), -1), nextup(mx + 2.0 ** (emax - m) / 2, 0),
                              nextup(mx + 2.0 ** (emax - m) / 2, 1), nextup(mx, 1), nextup(mx, -1)):
                scale = 2.0 ** j
                a = amax_unit * scale
                if not (0 < a < 3.4e38):
                    continue
                row = block_of([v * scale for v in vals], a, 128)
                rows.append(row)
        x = f32(rows).reshape(-1)
        cases.append(("boundaries-%s" % fmt, x, len(rows), 128))
    return cases


def amax_sweep():
    """1-D blocks of 32 whose amax walks across the E8M0 and E4M3-scale boundaries (rceil's
    amax x fl(1/max) rounding, floor's binade edges, E8M0's bottom, FLT_MAX)."""
    vals = []
    for fmt in ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1"):
        _, mx, _, emax, _ = oracle.ELEM[fmt]
        for base in (mx, 2.0 ** (emax + 1), mx * 1.0000001, 2.0 ** emax, 6.0 * 448, 448.0, 6.0):
            for j in (-140, -133, -127, -126, -119, -1, 0, 1, 64, 112, 120, 127):
                for k in range(-3, 4):
                    a = nextup(base * 2.0 ** j, k)
                    if 0 < a < 3.4e38:
                        vals.append(a)
    vals.append(float(np.finfo(np.float32).max))
    blocks = []
    for a in vals:
        blocks.append([a] + [a * f for f in (0.5, 0.3, -0.7, 0.01, 1e-3, 1e-6, 0.77)] * 3 + [-a, 0.0, a * 0.125] +
                      [a * 0.999] * 8)
    x = f32([b[:32] for b in blocks]).reshape(-1)
    return ("amax-sweep", x, 0, 0)


def special_tensors(rng):
    cases = []
    # NaN / inf inside blocks, all-zero blocks, float32 subnormals, huge values
    x = rng.standard_normal((40, 96)).astype(np.float32)
    x[0, 5] = np.nan
    x[1, 40] = np.inf
    x[2, 70] = -np.inf
    x[3, :] = 0.0
    x[4, 0:32] = 0.0
    x[5, 33] = np.nan
    x[5, 34] = np.inf
    x[6, :] = 1e-40  # float32 subnormals: E8M0 underflow
    x[7, :16] = 2.0 ** -149
    x[8, :] = np.float32(3e38)
    x[9, 17] = np.float32(np.finfo(np.float32).max)
    x[10:26, 10] = np.nan  # a NaN column (columnwise blocks poisoned)
    x[30, :] *= 1e-30
    x[31, :] *= 1e30
    x[33, :] = np.where(np.arange(96) % 2 == 0, 1e-39, 0.0)
    cases.append(("specials", x.reshape(-1), 40, 96))
    # the whole tensor non-finite / zero
    cases.append(("all-zero", np.zeros(300, np.float32), 10, 30))
    cases.append(("all-nan", np.full(64, np.nan, np.float32), 8, 8))
    cases.append(("inf-amax", np.array([1.0, np.inf, -2.0, 3.0] * 10, np.float32), 0, 0))
    # NVFP4: blocks far below the tensor's amax (the E4M3 block scale subnormal, then zero)
    y = np.ones((16, 64), np.float32)
    y[0, 0] = 1e6
    for r in range(1, 16):
        y[r, :] = np.float32(10.0 ** -r)
    y[2, 16:32] = 0.0
    cases.append(("nvfp4-scale-range", y.reshape(-1), 16, 64))
    # blockwise / current: an amax so small that max / amax overflows float32
    z = np.full(256, 1e-37, np.float32)
    z[:128] = 2.0 ** -149
    cases.append(("tiny-amax", z, 2, 128))
    cases.append(("tiny-tensor", np.full(64, 2.0 ** -148, np.float32), 0, 0))
    return cases


def random_tensors(rng, quick):
    cases = []
    shapes = [(2, 3, 0), (16, 16, 0), (17, 33, 5), (32, 32, 0), (33, 130, 7), (64, 40, 40), (128, 128, 0),
              (129, 257, 3), (3, 1000, 0), (200, 48, 0)]
    if quick:
        shapes = shapes[:6]
    for (r, c, t) in shapes:
        n = r * c + t
        base = rng.standard_normal(n).astype(np.float32)
        # per-row and per-block magnitudes over ~80 binades: block amax all over the formats' ranges
        rowscale = (2.0 ** rng.integers(-40, 41, size=r)).astype(np.float32)
        v = base.copy()
        v[:r * c] *= np.repeat(rowscale, c)
        blk = (2.0 ** rng.integers(-12, 13, size=(n + 15) // 16)).astype(np.float32)
        v *= np.repeat(blk, 16)[:n]
        # outliers, zeros, ties
        idx = rng.integers(0, n, size=max(1, n // 50))
        v[idx] *= np.float32(1e4)
        v[rng.integers(0, n, size=max(1, n // 20))] = 0.0
        cases.append(("random-%dx%d+%d" % (r, c, t), v.astype(np.float32), r, c))
    for n in (1, 15, 16, 17, 31, 33, 127, 129, 1000):
        cases.append(("vector-%d" % n, (rng.standard_normal(n) * 3).astype(np.float32), 0, 0))
    # a weight-like matrix: uniform rows and one row of outliers
    w = (rng.standard_normal((48, 64)) * 0.02).astype(np.float32)
    w[7, ::9] = 5.0
    cases.append(("weight-outliers", w.reshape(-1), 48, 64))
    return cases


# ---------------------------------------------------------------------------------- specs

def all_specs():
    """(scheme, fmt, rule, dir, block) for every valid combination, default blocks and a few others."""
    out = []
    for fmt in ("e4m3", "e5m2"):
        for rule in ("fp32", "pow2"):
            out.append(("current", fmt, rule, "tensor", 0))
            for d in ("rowwise", "columnwise", "tile"):
                out.append(("blockwise", fmt, rule, d, 128))
    for fmt in ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1"):
        for rule in ("floor", "rceil"):
            for d in ("rowwise", "columnwise"):
                out.append(("mx", fmt, rule, d, 32))
    for d in ("rowwise", "columnwise", "tile"):
        out.append(("nvfp4", "e2m1", "e4m3", d, 16))
    # other block lengths (ragged tiles)
    out += [("mx", "e4m3", "floor", "rowwise", 8), ("mx", "e4m3", "floor", "columnwise", 8),
            ("nvfp4", "e2m1", "e4m3", "tile", 4), ("nvfp4", "e2m1", "e4m3", "rowwise", 4),
            ("blockwise", "e4m3", "fp32", "tile", 32), ("blockwise", "e4m3", "fp32", "rowwise", 32)]
    return out


def to_qspec(t):
    scheme, fmt, rule, d, b = t
    return _quant.QSpec(_quant.FORMATS.index(fmt), _quant.SCHEMES.index(scheme), _quant.RULES.index(rule),
                        _quant.DIRS.index(d), b, 0)


# ---------------------------------------------------------------------------------- torchao

def torchao_opinion(cases):
    """MX rowwise (both scale rules, every element format) decoded by torchao against
    ampdiag_quant_values, on the matrices whose rows are whole blocks of 32. (None, why) where
    torchao is not installed; (True|False, what was compared)."""
    try:
        import warnings
        warnings.filterwarnings("ignore")
        import torch
        from torchao.prototype.mx_formats import mx_tensor as mxt
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
    except Exception as e:  # noqa: BLE001  (not installed, or an API this script does not know)
        return None, "not available (%s)" % type(e).__name__
    import ctypes
    L = _quant._L()
    fn = L.ampdiag_quant_values
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_float,
                   ctypes.POINTER(_quant.QSpec), ctypes.c_void_p, ctypes.POINTER(_quant.QStats)]
    elems = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m3": mxt.DTYPE_FP6_E2M3,
             "e3m2": mxt.DTYPE_FP6_E3M2, "e2m1": torch.float4_e2m1fn_x2}
    modes = {"floor": ScaleCalculationMode.FLOOR, "rceil": ScaleCalculationMode.RCEIL}
    values = diffs = 0
    floor_diffs = [0]
    div_diffs = [0]
    inf_diffs = [0]
    big_diffs = [0]
    first = None
    for name, x, rows, cols in cases:
        if rows < 2 or cols % 32 or rows * cols != x.size:
            continue
        xt = torch.from_numpy(np.ascontiguousarray(x).reshape(rows, cols))
        for en, dt in elems.items():
            for rn, mode in modes.items():
                try:
                    sc, lp = mxt.to_mx(xt, dt, 32, mode)
                    got = mxt.to_dtype(lp, sc, dt, 32, torch.float32).double().numpy().reshape(-1)
                except Exception as e:  # noqa: BLE001
                    return None, "torchao %s failed on %s: %s" % (getattr(__import__("torchao"), "__version__", "?"),
                                                                   en, e)
                spec = _quant.QSpec(_quant.FORMATS.index(en), 1, _quant.RULES.index(rn), 1, 32, 0)
                want = np.empty(x.size, dtype=np.float64)
                st = _quant.QStats()
                fn(ctypes.c_void_p(x.ctypes.data), x.size, rows, cols, ctypes.c_float(-1.0), ctypes.byref(spec),
                   ctypes.c_void_p(want.ctypes.data), ctypes.byref(st))
                fin = np.isfinite(x)
                a, b = np.where(fin, want, np.nan), np.where(fin, got, np.nan)
                bad = ~((a == b) | (np.isnan(a) & np.isnan(b)))
                # torchao 0.18 encodes a block whose E8M0 code is 0 (2^-127) with the scale 2^-126
                # (floor: its float32 scale clamped to the smallest normal) or 1 (rceil) and decodes
                # it with 2^-127: those blocks (the scale underflowed) are counted apart
                codes = sc.view(torch.uint8).numpy().reshape(-1).astype(np.int64)
                code0 = np.repeat(codes == 0, 32)[:x.size]
                floor_diffs[0] += int((bad & code0).sum())
                bad &= ~code0
                # a decoded value beyond FLT_MAX (q * d = 2^128 for an amax near FLT_MAX):
                # ampdiag keeps it exactly (in double), torchao dequantises to float32: inf
                big = (np.abs(a) > np.finfo(np.float32).max) & np.isinf(b) & (np.sign(a) == np.sign(b))
                big_diffs[0] += int((bad & big).sum())
                bad &= ~big
                # a block holding an inf: ampdiag gives it the NaN scale (microxcaling); torchao
                # 0.18 gives it a finite scale (254 under rceil, as cvt.rp.satfinite does; inf's
                # exponent less the element's under floor) and flushes its finite values: counted apart
                infb = np.repeat(np.isinf(x).reshape(-1, 32).any(1), 32)[:x.size]
                inf_diffs[0] += int((bad & infb).sum())
                bad &= ~infb
                # torchao's eager fallback (0.18) takes the E8M0 code of amax / max as
                # ceil(log2(amax / max)) in float32: a quotient just above a power of two whose
                # float32 log2 rounds to the integer is not rounded up, where the exact rule
                # (cvt.rp.satfinite.ue8m0x2.f32, which its compiled path and Transformer Engine
                # use, and ampdiag) rounds it up; blocks whose scale differs for that reason are
                # counted apart
                if rn == "rceil":
                    amax = torch.from_numpy(np.abs(np.where(np.isnan(x), np.inf, x)).reshape(-1, 32)
                                            .max(1).astype(np.float32))
                    q = amax / float(oracle.ELEM[en][1])
                    fin_q = torch.isfinite(q) & (q > 0)
                    via_log2 = torch.ceil(torch.log2(q))
                    bits = q.view(torch.int32).long()
                    e = ((bits >> 23) & 0xFF) - 127
                    exact = torch.where((bits & 0x7FFFFF) != 0, e + 1, e).double()
                    norm = fin_q & (((bits >> 23) & 0xFF) > 0)
                    log2_blocks = np.repeat((norm & (via_log2 != exact)).numpy(), 32)[:x.size]
                    div_diffs[0] += int((bad & log2_blocks).sum())
                    bad &= ~log2_blocks
                values += x.size
                if bad.any():
                    diffs += int(bad.sum())
                    if first is None:
                        i = int(np.argmax(bad))
                        first = "%s %s/%s at %d: x=%r ampdiag %r torchao %r" % (name, en, rn, i, float(x[i]),
                                                                                 float(a[i]), float(b[i]))
    import torchao
    what = "torchao %s, %d values of MX rowwise (5 element formats x floor and rceil), %d differ%s; apart: %d " \
        "in blocks whose E8M0 scale is 2^-127 (torchao encodes them with 2^-126 or 1, decodes with 2^-127), %d in rceil " \
        "blocks whose scale torchao takes as ceil(log2(amax / max)) in float32, which does not round up a " \
        "quotient just above a power of two, %d in blocks holding an inf (torchao: a finite scale; ampdiag: NaN), %d " \
        "decoded beyond FLT_MAX (ampdiag: exactly, torchao: inf in float32)" % (
            torchao.__version__, values, diffs, "; first: " + first if first else "", floor_diffs[0], div_diffs[0], inf_diffs[0], big_diffs[0])
    return diffs == 0, what


# ---------------------------------------------------------------------------------- main

def main():
    quick = "--quick" in sys.argv
    if not _quant.available():
        print("1..0 # SKIP libampdiag has no ampdiag_quant_whatif")
        return 0
    rng = np.random.default_rng(20251127)
    cases = edge_tensors(rng) + [amax_sweep()] + special_tensors(rng) + random_tensors(rng, quick)
    specs = all_specs()
    qspecs = [to_qspec(t) for t in specs]
    tests = 0
    failed = 0
    values = 0
    pairs = 0
    mismatches = {}
    cover = {}
    for name, x, rows, cols in cases:
        x = np.ascontiguousarray(x, dtype=np.float32)
        n = x.size
        matrix = rows >= 2 and cols >= 1
        got = _quant.whatif(x, rows, cols, qspecs)
        refs = {}
        bad = []
        for t, g in zip(specs, got):
            scheme, fmt, rule, d, b = t
            if not matrix and d in ("columnwise", "tile"):
                if g.computed:
                    bad.append("%s: computed on a 1-D tensor" % (t,))
                continue
            key = (scheme, fmt, rule, b)
            if key not in refs:
                refs[key] = oracle.count(x, rows, cols, scheme, fmt, rule, "rowwise" if scheme != "current" else "tensor",
                                         b)[1]
            ref = refs[key] if d in ("columnwise", "tile") else None
            want, _ = oracle.count(x, rows, cols, scheme, fmt, rule, d, b, ref_deq=ref)
            gd = g.as_dict()
            for f in COVER:
                cover[f] = cover.get(f, 0) + (want[f] > 0)
            pairs += 1
            values += n
            diffs = []
            if not g.computed:
                diffs.append("not computed")
            for f in EXACT:
                if gd[f] != want[f] and not (isinstance(want[f], float) and math.isnan(want[f]) and math.isnan(gd[f])):
                    diffs.append("%s %r != %r" % (f, gd[f], want[f]))
            for f in CLOSE:
                a, w = gd[f], want[f]
                if not (a == w or abs(a - w) <= 1e-12 * max(abs(a), abs(w))):
                    diffs.append("%s %r != %r" % (f, a, w))
            if list(gd["scale_hist"]) != want["scale_hist"]:
                diffs.append("scale_hist %s != %s" % (gd["scale_hist"][:8], want["scale_hist"][:8]))
            if float(F32(gd["scale"])) != float(F32(want["scale"])):
                diffs.append("scale %r != %r" % (gd["scale"], want["scale"]))
            sq_g, sq_w = _quant.sqnr_db(gd["sig_sq"], gd["err_sq"]), _quant.sqnr_db(want["sig_sq"], want["err_sq"])
            if not (sq_g == sq_w or (math.isnan(sq_g) and math.isnan(sq_w)) or abs(sq_g - sq_w) <= 1e-9):
                diffs.append("sqnr %r != %r dB" % (sq_g, sq_w))
            if diffs:
                bad.append("%s/%s/%s/%s/%d: %s" % (scheme, fmt, rule, d, b, "; ".join(diffs[:4])))
                for df in diffs:
                    mismatches[df.split()[0]] = mismatches.get(df.split()[0], 0) + 1
        tests += 1
        if bad:
            failed += 1
            print("not ok %d - %s (%d values, %dx%d): %d of %d schemes differ from the oracle" %
                  (tests, name, n, rows, cols, len(bad), len(specs)))
            for b_ in bad[:12]:
                print("#   " + b_)
        else:
            print("ok %d - %s (%d values, %dx%d): every scheme equals the oracle" % (tests, name, n, rows, cols))
    # the tensors reach every case: each count is non-zero for some (tensor, scheme)
    tests += 1
    missing = [f for f in COVER if not cover.get(f)]
    if missing:
        failed += 1
        print("not ok %d - the stratified tensors never make these counts non-zero: %s" % (tests, missing))
    else:
        print("ok %d - every count is non-zero somewhere (pairs with it: %s)" %
              (tests, ", ".join("%s %d" % (f, cover[f]) for f in COVER)))
    # a second opinion where torchao is installed: its MX emulation (to_mx, to_dtype), rowwise
    tests += 1
    verdict, detail = torchao_opinion(cases)
    if verdict is None:
        print("ok %d # SKIP torchao's MX emulation: %s" % (tests, detail))
    elif verdict:
        print("ok %d - torchao's MX emulation decodes the same values: %s" % (tests, detail))
    else:
        failed += 1
        print("not ok %d - torchao's MX emulation differs: %s" % (tests, detail))
    # the list syntax and the spec names round-trip
    tests += 1
    names = [_quant.spec_name(s) for s in _quant.parse("all")]
    back = [_quant.spec_name(s) for s in _quant.parse(",".join(names))]
    if names == back and len(names) >= 20:
        print("ok %d - 'all' expands to %d schemes whose names parse back to themselves" % (tests, len(names)))
    else:
        failed += 1
        print("not ok %d - the names of 'all' do not parse back: %s vs %s" % (tests, names, back))
    print("# compared %d (tensor, scheme) pairs over %d values in all; mismatching fields: %s" %
          (pairs, values, mismatches or "none"))
    print("1..%d" % tests)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
