#!/usr/bin/env python3
"""Check ampdiag's block-scaled what-if against torch's own casts on a device.

For stratified tensors (values at and around the FP8 boundaries, block amax spread over many
binades, NaN and inf inside blocks, zeros, float32 subnormals, ragged blocks), every scheme that
torch can cast is computed twice:

* by ampdiag on the CPU: ampdiag_quant_values (each value's decoded value) and
  ampdiag_quant_whatif (the counts), libampdiag's public C functions through ctypes;
* by torch on --device: the scales with torch float32 arithmetic as the recipes define them
  (docs/numerics.md, "Block formats"), the elements with torch's own casts on that device
  (torch.float8_e4m3fn, torch.float8_e5m2; torch.float4_e2m1fn_x2 where torch can cast to it),
  the E8M0 scales checked with torch.float8_e8m0fnu where torch has it.

Schemes whose element format torch cannot cast (FP6; FP4 where float4_e2m1fn_x2 has no cast) are
reported as not checked. Every mismatching value or count is printed; the exit status is 1 if
there is any (2 for bad usage, 3 when libampdiag or torch cannot be loaded), 0 otherwise.

Usage: python3 tests/gpu/check_casts.py [--device cuda|cpu] [--lib PATH/libampdiag.so] [--quick]
Run from the source tree after `make` (it finds python/ampdiag and .libs/libampdiag.so there).
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import numpy as np
    import torch
except ImportError as e:
    print("check_casts: needs torch and numpy: %s" % e)
    sys.exit(3)

ELEM = {  # name: (torch dtype name, max, min normal, emax_elem, saturation threshold)
    "e4m3": ("float8_e4m3fn", 448.0, 2.0 ** -6, 8, 464.0),
    "e5m2": ("float8_e5m2", 57344.0, 2.0 ** -14, 15, 61440.0),
    "e2m1": ("float4_e2m1fn_x2", 6.0, 1.0, 2, 7.0),
}


def sat_mask(v, fmt):
    """Saturated: rounding without an upper bound would go beyond the largest value (E4M3:
    beyond 464, the tie 464 goes to 448; E5M2 and E2M1: from the tie on)."""
    thr = ELEM[fmt][4]
    a = v.abs()
    return (a > thr) if fmt == "e4m3" else (a >= thr)


def cast_elem(v, fmt):
    """torch's cast of v (float32, saturated by clamping first as the recipes' satfinite casts
    do) to the element format and back to float32; None when torch cannot cast to it here."""
    name, mx = ELEM[fmt][0], ELEM[fmt][1]
    dt = getattr(torch, name, None)
    if dt is None:
        return None
    c = v.clamp(-mx, mx)
    try:
        if fmt == "e2m1":
            return None if not _fp4_castable(v.device) else _fp4_roundtrip(c)
        return c.to(dt).to(torch.float32)
    except (RuntimeError, NotImplementedError, TypeError):
        return None


_fp4 = {}


def _fp4_castable(dev):
    if dev.type not in _fp4:
        try:
            torch.zeros(4, device=dev).to(torch.float4_e2m1fn_x2)
            _fp4[dev.type] = True
        except Exception:  # noqa: BLE001  (NotImplementedError, RuntimeError: no cast kernel)
            _fp4[dev.type] = False
    return _fp4[dev.type]


def _fp4_roundtrip(c):
    return c.to(torch.float4_e2m1fn_x2).to(torch.float32)


def f32(x, dev):
    return torch.tensor(x, dtype=torch.float32, device=dev)


# ---------------------------------------------------------------------------- torch schemes

def blocks_rowwise(x2, b):
    """[R, C] -> [R, nb, b] padded with zeros (zeros do not change an amax)."""
    R, C = x2.shape
    nb = -(-C // b)
    pad = nb * b - C
    if pad:
        x2 = torch.cat([x2, torch.zeros(R, pad, dtype=x2.dtype, device=x2.device)], 1)
    return x2.reshape(R, nb, b), C


def unblock(y, C):
    R = y.shape[0]
    return y.reshape(R, -1)[:, :C]


def mx_torch(x2, fmt, rule):
    """MX rowwise on a [R, C] float32 tensor: (decoded float64, q float32, v float32, E8M0 exps)."""
    _, mx, _, emax, _ = ELEM[fmt]
    xb, C = blocks_rowwise(x2, 32)
    amax = xb.abs().amax(-1, keepdim=True)  # NaN propagates: a NaN or inf block gets the NaN scale
    bad = ~torch.isfinite(amax)
    a = torch.where(bad, torch.zeros_like(amax), amax)
    if rule == "floor":
        m, e = torch.frexp(a)
        E = torch.where(a > 0, e - 1 - emax, torch.full_like(e, -127))
    else:
        d = a * (torch.ones((), dtype=torch.float32, device=x2.device) / mx)  # amax x fl(1/max), float32
        m, e = torch.frexp(d)
        E = torch.where(d > 0, torch.where(m == 0.5, e - 1, e), torch.full_like(e, -127))
    E = E.clamp(-127, 127)
    inv = torch.ldexp(torch.ones_like(a), (-E).to(torch.int32))
    v = (xb * inv).to(torch.float32)
    q = cast_elem(v, fmt)
    if q is None:
        return None
    dq = q.double() * torch.ldexp(torch.ones_like(a, dtype=torch.float64), E.to(torch.int32))
    dq = torch.where(bad, torch.full_like(dq, math.nan), dq)
    return unblock(dq, C), unblock(q, C), unblock(v, C), E.reshape(-1), bad.reshape(-1)


def te_scale(amax, mx, rule):
    """Transformer Engine's compute_scale_from_amax in float32 (amax: non-NaN, inf kept)."""
    one = torch.ones_like(amax)
    s = torch.where((amax > 0) & torch.isfinite(amax), (one * mx) / torch.where(amax > 0, amax, one), one)
    s = torch.where(torch.isinf(s), torch.full_like(s, np.finfo(np.float32).max), s)
    if rule == "pow2":
        s = (s.view(torch.int32) & torch.tensor(-8388608, dtype=torch.int32, device=s.device)).view(torch.float32)
    return s


def nonnan_amax(xb, dims):
    a = torch.where(torch.isnan(xb), torch.zeros_like(xb), xb.abs())
    for d in sorted(dims, reverse=True):
        a = a.amax(d, keepdim=True)
    return a


def blockwise_torch(x2, fmt, rule, tile):
    mx = ELEM[fmt][1]
    R, C = x2.shape
    if tile:
        nr, nc = -(-R // 128), -(-C // 128)
        xp = torch.zeros(nr * 128, nc * 128, dtype=torch.float32, device=x2.device)
        xp[:R, :C] = x2
        xb = xp.reshape(nr, 128, nc, 128)
        s = te_scale(nonnan_amax(xb, (1, 3)), mx, rule)
    else:
        xb, _ = blocks_rowwise(x2, 128)
        s = te_scale(nonnan_amax(xb, (2,)), mx, rule)
    v = (xb * s).to(torch.float32)
    q = cast_elem(v, fmt)
    if q is None:
        return None
    dq = q.double() * (torch.ones_like(s) / s).double()
    if tile:
        return dq.reshape(nr * 128, nc * 128)[:R, :C], q.reshape(nr * 128, nc * 128)[:R, :C], \
            v.reshape(nr * 128, nc * 128)[:R, :C]
    return unblock(dq, C), unblock(q, C), unblock(v, C)


def current_torch(x, fmt, rule):
    mx = ELEM[fmt][1]
    a = nonnan_amax(x.reshape(1, -1), (1,))
    s = te_scale(a, mx, rule)
    v = (x * s.reshape(())).to(torch.float32)
    q = cast_elem(v, fmt)
    if q is None:
        return None
    return q.double() * (torch.ones_like(s) / s).double().reshape(()), q, v


def nvfp4_torch(x2, amax_t):
    """NVFP4 rowwise (Transformer Engine's reference arithmetic, float32)."""
    xb, C = blocks_rowwise(x2, 16)
    dev = x2.device
    fmax = torch.tensor(np.finfo(np.float32).max, device=dev)
    A = torch.tensor(amax_t, dtype=torch.float32, device=dev)
    s_enc = torch.minimum(torch.tensor(2688.0, device=dev) / A, fmax) if amax_t != 0 else fmax
    if amax_t == 0 or not math.isfinite(amax_t) or float(s_enc) == 0:
        s_enc = torch.tensor(1.0, device=dev)
    s_dec = torch.tensor(1.0, device=dev) / s_enc
    a = nonnan_amax(xb, (2,))
    sdb = torch.minimum((a / 6.0) * s_enc, fmax)
    sb = sdb.clamp(max=448.0).to(torch.float8_e4m3fn).to(torch.float32)
    coef = torch.where(sb > 0, torch.minimum(torch.ones_like(sb) / (sb * s_dec), fmax), torch.zeros_like(sb))
    v = (xb * coef).to(torch.float32)
    q = cast_elem(v, "e2m1")
    if q is None:
        return None
    dq = q.double() * (sb.double() * float(s_dec))
    return unblock(dq, C), unblock(q, C), unblock(v, C)


# ---------------------------------------------------------------------------- tensors

def tensors(quick):
    rng = np.random.default_rng(20251127)
    out = []
    shapes = [(64, 96), (33, 130), (128, 256), (17, 31)] if quick else [(64, 96), (33, 130), (128, 256), (17, 31),
                                                                         (256, 512), (200, 300)]
    for (r, c) in shapes:
        x = rng.standard_normal((r, c)).astype(np.float32)
        x *= (2.0 ** rng.integers(-30, 31, size=(r, 1))).astype(np.float32)
        x *= (2.0 ** rng.integers(-10, 11, size=(r, -(-c // 16)))).repeat(16, 1)[:, :c].astype(np.float32)
        x[rng.integers(0, r, r // 4 + 1), rng.integers(0, c, r // 4 + 1)] *= 1e4
        x[rng.integers(0, r, r // 8 + 1), :] = 0.0
        out.append(("random %dx%d" % (r, c), x))
    # FP8 boundaries: blocks whose amax sets the scale to 1 (448 for MX E4M3 floor), then values at
    # and around the element thresholds
    edges = []
    for b in (448.0, 464.0, 480.0, 57344.0, 61440.0, 2.0 ** -6, 2.0 ** -9, 2.0 ** -10, 2.0 ** -14, 2.0 ** -16, 2.0 ** -17,
              1.0, 1.5, 3.0, 7.0, 6.0):
        for k in range(-3, 4):
            v = np.nextafter(np.float32(b), np.float32(np.inf if k > 0 else 0), dtype=np.float32)
            for _ in range(abs(k) - 1):
                v = np.nextafter(v, np.float32(np.inf if k > 0 else 0), dtype=np.float32)
            edges.append(np.float32(b) if k == 0 else v)
    e = np.array(edges, dtype=np.float32)
    rows = []
    for lead in (448.0, 57344.0, 6.0, 500.0, 1e-3, 1e-30):
        for scale in (1.0, 2.0 ** -20, 2.0 ** 20):
            row = np.concatenate([[lead * scale], (e * scale).astype(np.float32)])
            row = np.concatenate([row, -row])
            rows.append(np.resize(row, 256).astype(np.float32))
    out.append(("fp8 boundaries", np.array(rows, dtype=np.float32)))
    sp = rng.standard_normal((40, 64)).astype(np.float32)
    sp[0, 3] = np.nan
    sp[1, 40] = np.inf
    sp[2, 5] = -np.inf
    sp[3, :] = 0
    sp[4, :] = 1e-40
    sp[5, :] = 2.0 ** -149
    sp[6, :] = np.float32(3e38)
    out.append(("specials", sp))
    return out


# ---------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--lib", default=None, help="libampdiag.so (default: the build tree's .libs)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.lib:
        os.environ["AMPDIAG_LIB"] = args.lib
    elif "AMPDIAG_LIB" not in os.environ and os.path.exists(os.path.join(ROOT, ".libs", "libampdiag.so")):
        os.environ["AMPDIAG_LIB"] = os.path.join(ROOT, ".libs", "libampdiag.so")
    try:
        from ampdiag import _quant
        if not _quant.available():
            raise OSError("libampdiag has no ampdiag_quant_whatif")
    except (ImportError, OSError) as e:
        print("check_casts: cannot load libampdiag: %s" % e)
        return 3
    try:
        dev = torch.device(args.device)
        torch.zeros(1, device=dev)
    except (RuntimeError, AssertionError) as e:
        print("check_casts: device %s: %s" % (args.device, e))
        return 2
    import ctypes
    L = _quant._L()

    def lib_values(x, rows, cols, spec):
        vals = np.empty(x.size, dtype=np.float64)
        st = _quant.QStats()
        rc = L.ampdiag_quant_values(ctypes.c_void_p(x.ctypes.data), x.size, rows, cols, ctypes.c_float(-1.0),
                                    ctypes.byref(spec), ctypes.c_void_p(vals.ctypes.data), ctypes.byref(st))
        if rc != 0:
            raise RuntimeError("ampdiag_quant_values failed")
        return vals, st

    fn = L.ampdiag_quant_values
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_float,
                   ctypes.POINTER(_quant.QSpec), ctypes.c_void_p, ctypes.POINTER(_quant.QStats)]

    schemes = [("fp8-current-e4m3:fp32", "current"), ("fp8-current-e5m2:fp32", "current"),
               ("fp8-current-e4m3:pow2", "current"),
               ("mxfp8-e4m3:floor@row", "mx"), ("mxfp8-e4m3:rceil@row", "mx"), ("mxfp8-e5m2:floor@row", "mx"),
               ("mxfp8-e5m2:rceil@row", "mx"), ("mxfp8-e4m3:floor@col", "mx"), ("mxfp4-e2m1:floor@row", "mx"),
               ("mxfp4-e2m1:rceil@row", "mx"), ("nvfp4:e4m3@row", "nvfp4"),
               ("fp8-block-e4m3:pow2@row", "block"), ("fp8-block-e4m3:fp32@row", "block"),
               ("fp8-block-e4m3:pow2@2d", "block"), ("fp8-block-e5m2:pow2@col", "block")]
    print("check_casts: torch %s on %s (%s); libampdiag %s, kernel %s" % (
        torch.__version__, dev, torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU", _lib_path(),
        L.ampdiag_quant_impl().decode() if _declare_impl(L) else "?"))
    bad = 0
    compared = 0
    unchecked = {}
    e8m0_checked = 0
    for tname, xnp in tensors(args.quick):
        R, C = xnp.shape
        x = torch.from_numpy(xnp).to(dev)
        flat = np.ascontiguousarray(xnp.reshape(-1))
        for sname, kind in schemes:
            spec = _quant.parse(sname)[0]
            vals, st = lib_values(flat, R, C, spec)
            fmt = _quant.FORMATS[spec.elem]
            col = spec.dir == 2
            xx = x.t().contiguous() if col else x
            if kind == "current":
                res = current_torch(xx.reshape(-1), fmt, _quant.RULES[spec.rule])
                if res is not None:
                    res = tuple(r.reshape(xx.shape) for r in res)
            elif kind == "mx":
                res = mx_torch(xx, fmt, _quant.RULES[spec.rule])
                if res is not None:
                    dq, q, v, E, nanb = res
                    e8 = getattr(torch, "float8_e8m0fnu", None)
                    if e8 is not None:
                        ok = ~nanb
                        pw = torch.ldexp(torch.ones_like(E, dtype=torch.float32), E.to(torch.int32))[ok]
                        try:
                            codes = pw.to(e8).view(torch.uint8).to(torch.int64)
                            want = (E[ok] + 127).to(torch.int64)
                            nb = int((codes != want).sum())
                            e8m0_checked += int(ok.sum())
                            if nb:
                                bad += nb
                                print("MISMATCH %s %s: %d E8M0 scale codes differ from torch.float8_e8m0fnu" %
                                      (tname, sname, nb))
                        except (RuntimeError, NotImplementedError):
                            pass
                    res = (dq, q, v)
            elif kind == "nvfp4":
                a = xnp[~np.isnan(xnp)]
                amax = float(np.abs(a).max()) if a.size else 0.0
                res = nvfp4_torch(xx, amax)
            else:
                res = blockwise_torch(xx, fmt, _quant.RULES[spec.rule], spec.dir == 3)
            if res is None:
                unchecked[sname] = "torch cannot cast to %s on %s" % (fmt, dev)
                continue
            dq, q, v = res
            if col:
                dq, q, v = dq.t(), q.t(), v.t()
            tdq = dq.double().cpu().numpy().reshape(-1)
            tq = q.float().cpu().numpy().reshape(-1)
            tv = v.float().cpu().numpy().reshape(-1)
            finite = np.isfinite(flat)
            # NaN and inf inputs are not values of the what-if; ampdiag leaves them NaN
            lib_v = np.where(finite, vals, np.nan)
            tor_v = np.where(finite, tdq, np.nan)
            same = (lib_v == tor_v) | (np.isnan(lib_v) & np.isnan(tor_v))
            nd = int((~same).sum())
            compared += flat.size
            use = finite & ~np.isnan(tor_v)
            tsat = int((sat_mask(torch.from_numpy(tv), fmt).numpy() & use).sum())
            tflush = int((use & (flat != 0) & (tor_v == 0)).sum())
            tsub = int((use & (tq != 0) & (np.abs(tq) < ELEM[fmt][2])).sum())
            cnt = [("flushed", st.flushed, tflush), ("saturated", st.saturated, tsat), ("subnormal", st.subnormal, tsub)]
            cbad = [(n_, a_, b_) for n_, a_, b_ in cnt if a_ != b_]
            if nd or cbad:
                bad += nd + len(cbad)
                i = int(np.argmax(~same)) if nd else -1
                print("MISMATCH %s %s: %d of %d decoded values differ%s%s" % (
                    tname, sname, nd, flat.size,
                    (" (first at %d: x=%r ampdiag %r torch %r)" % (i, float(flat[i]), float(lib_v[i]), float(tor_v[i])))
                    if nd else "", "; counts " + ", ".join("%s ampdiag %d torch %d" % c for c in cbad) if cbad else ""))
    for s, why in sorted(unchecked.items()):
        print("not checked: %s (%s)" % (s, why))
    print("check_casts: %d values compared over %d tensors x %d schemes, %d E8M0 scales against torch.float8_e8m0fnu; "
          "%d mismatches" % (compared, len(tensors(args.quick)), len(schemes), e8m0_checked, bad))
    return 1 if bad else 0


def _lib_path():
    from ampdiag import _lib
    try:
        return _lib.library_path()
    except Exception:  # noqa: BLE001
        return "?"


def _declare_impl(L):
    import ctypes
    f = getattr(L, "ampdiag_quant_impl", None)
    if f is None:
        return False
    f.restype = ctypes.c_char_p
    f.argtypes = []
    return True


if __name__ == "__main__":
    sys.exit(main())
