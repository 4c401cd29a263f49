#!/usr/bin/env python3
"""test_tracer.py - the PyTorch tracer (python/ampdiag/torch.py): records against values this
test computes itself, what-if counts against torch's and numpy's casts, a training script killed
with SIGKILL, fp32 / bf16 autocast / fp16 autocast + GradScaler traces read by ampdiag info,
compare and plot, GradScaler skipping steps on FP16 overflow, the compute column read by compare,
and the library search. Prints TAP.

usage: test_tracer.py AMPDIAG WORKDIR   (python/ on PYTHONPATH, AMPDIAG_LIB set or a built tree)
"""
import copy
import json
import math
import os
import re
import struct
import subprocess
import sys

import h5py
import numpy as np
import torch

from common import KINDS, Tap

import ampdiag
import ampdiag.torch
from ampdiag import _lib, _stats

AMPDIAG, WORK = sys.argv[1], sys.argv[2]
TAP = Tap()
ok = TAP.ok


def path(name):
    return os.path.join(WORK, name)


def run(*args, **kw):
    return subprocess.run([AMPDIAG] + list(args), capture_output=True, text=True, **kw)


def read_trace(p):
    with h5py.File(p, "r", swmr=True) as f:
        layers = f["layers"][:]
        names = [n.decode() for n in layers["name"]]
        kmap = {v: k for k, v in h5py.check_enum_dtype(f["tensors"].dtype["kind"]).items()}
        cmap = {v: k for k, v in h5py.check_enum_dtype(f["events"].dtype["code"]).items()}
        tens = {}
        for r in f["tensors"][:]:
            tens[(int(r["step"]), names[r["layer"]], kmap[r["kind"]])] = r
        events = [(int(e["step"]), cmap[e["code"]], float(e["value"]), e["message"].decode()) for e in f["events"][:]]
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        return {"layers": layers, "names": names, "tensors": tens, "steps": f["steps"][:], "events": events,
                "attrs": attrs, "evals": f["eval"][:], "hists": f["histograms"][:]}


# ---------------------------------------------------------------------- what-if counts


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def edge_values():
    """Values on and next to every threshold of the records, both signs."""
    v = []
    for b in (0, 1, 0x8000, 0x7F8000, 0x800000, 0x33000000, 0x387FE000, 0x38800000, 0x477FF000,
              0x7F7F8000, 0x7F7FFFFF, 0x7F800000):
        for d in (-1, 0, 1):
            if 0 <= b + d <= 0x7F800000:
                v += [f32(b + d), -f32(b + d)]
    return v + [math.nan]


def cast_counts(x):
    """The what-if counts by definition, from casts: numpy's float16 and torch's bfloat16."""
    a = x.float().numpy()
    fin = np.isfinite(a)
    out = {}
    with np.errstate(over="ignore"):
        h = a.astype(np.float16).astype(np.float32)
    b = x.float().to(torch.bfloat16).float().numpy()
    for name, r, tiny in (("fp16", h, 2.0 ** -14), ("bf16", b, 2.0 ** -126)):
        out[name + "_overflow"] = int(np.sum(fin & np.isinf(r)))
        out[name + "_underflow"] = int(np.sum((a != 0) & (r == 0)))
        out[name + "_subnormal"] = int(np.sum((r != 0) & (np.abs(r) < tiny)))
    return out


def test_whatif():
    thr = _stats.thresholds()
    ok(thr["fp16"] == (0x33000000, 0x387FE000, 0x477FF000) and thr["bf16"] == (0x8000, 0x7F8000, 0x7F7F8000),
       "the thresholds torch's casts give are FORMAT.md's: FP16 underflow <= 2^-25, normal >= 2^-14 - 2^-25, "
       "overflow >= 65520; BF16 <= 2^-134, >= 2^-126 - 2^-134, >= 2^128 - 2^119")
    g = torch.Generator().manual_seed(5)
    xs = {"edges": torch.tensor(edge_values(), dtype=torch.float32),
          "gradient-like": torch.randn(50000, generator=g) * torch.exp2(torch.randint(-40, 20, (50000,), generator=g)),
          "bf16 tensor": (torch.randn(3000, generator=g) * 1e-5).to(torch.bfloat16),
          "fp16 tensor": (torch.randn(3000, generator=g) * 1e3).to(torch.float16)}
    for name, x in xs.items():
        want = cast_counts(x)
        vec, _ = _stats.record_torch(x)
        got_t = _stats.unpack(vec.tolist())
        got_l, _ = _stats.tstats(x)
        bad = [k for k in want if getattr(got_t, k) != want[k] or getattr(got_l, k) != want[k]]
        ok(not bad, "%s (%d values): what-if counts of the torch and lib statistics equal the casts' %s%s"
           % (name, x.numel(), want, (" MISMATCH " + str(bad)) if bad else ""))
    x = xs["gradient-like"]
    x[::997] = math.inf
    x[1::991] = -math.nan
    x[2::983] = -0.0
    vec, hv = _stats.record_torch(x, True)
    t, th = _stats.unpack(vec.tolist()), hv.tolist()
    lst, lh = _stats.tstats(x, True)
    same = all(getattr(t, k) == getattr(lst, k) for k in _lib.Tstats.COUNTS) and \
        [t.min, t.max, t.absmax, t.absmin_nz] == [lst.min, lst.max, lst.absmax, lst.absmin_nz] and \
        abs(t.sum - lst.sum) <= 1e-9 * abs(lst.sum) + 1e-300 and abs(t.sumsq - lst.sumsq) <= 1e-9 * lst.sumsq and \
        th == list(lh.bin)
    ok(same, "with inf, NaN and -0 mixed in: the torch record and histogram equal libampdiag's (n_nan %d, "
       "n_posinf %d, n_zero %d)" % (t.n_nan, t.n_posinf, t.n_zero))
    z = torch.tensor([-0.0, 0.0, 3.0])
    s = _stats.unpack(_stats.record_torch(z)[0].tolist())
    s2 = _stats.unpack(_stats.record_torch(torch.tensor([-0.0, 5.0]))[0].tolist())
    ok(math.copysign(1, s.min) < 0 and s.max == 3.0 and math.copysign(1, s2.min) < 0,
       "-0 orders below +0 in min, as in libampdiag")


# ---------------------------------------------------------------------- records


def np_stats(a):
    a = np.asarray(a, dtype=np.float32).ravel()
    fin = a[np.isfinite(a)]
    nz = np.abs(fin[fin != 0])
    out = {"count": a.size, "n_zero": int(np.sum(a == 0)), "n_neg": int(np.sum(fin < 0)),
           "n_pos": int(np.sum(fin > 0)), "min": float(fin.min()), "max": float(fin.max()),
           "absmax": float(np.abs(fin).max()), "absmin_nz": float(nz.min()) if nz.size else math.nan,
           "mean": float(fin.astype(np.float64).mean()), "rms": float(np.sqrt(np.mean(fin.astype(np.float64) ** 2)))}
    out.update(cast_counts(torch.from_numpy(a)))
    return out


def close_to(rec, want, tol=1e-5):
    bad = []
    for k, v in want.items():
        r = float(rec[k])
        if isinstance(v, int):
            if int(rec[k]) != v:
                bad.append("%s %s != %s" % (k, rec[k], v))
        elif not (r == v or (math.isnan(r) and math.isnan(v)) or abs(r - v) <= tol * max(abs(v), 1e-30)):
            bad.append("%s %r != %r" % (k, r, v))
    return bad


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 5)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def test_records(stats):
    torch.manual_seed(11)
    net = Net()
    with torch.no_grad():
        net.fc1.weight[0, :3] = 0.0  # weights at 0: an update of 1e-13 survives in FP32 and BF16, not in FP16
    ref = copy.deepcopy(net)
    x = torch.randn(8, 6)
    y = torch.randint(0, 3, (8,))
    lr = 1e-13  # too small to change a weight of about 0.1: the updates of the others are lost
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    p = path("records-%s.h5" % stats)
    tr = ampdiag.torch.Tracer(p, net, opt, trace_every=1, hist_every=1, overwrite=True, stats=stats,
                              layers="leaves", patch=False)  # the model's layers alone (no loss layer)
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    tr.step(loss)
    tr.eval(0.75, 0.5, 0.01)
    tr.close()
    # the same step by hand on the copy
    h1 = ref.fc1(x)
    h1.retain_grad()
    r1 = torch.relu(h1)
    r1.retain_grad()
    out = ref.fc2(r1)
    out.retain_grad()
    loss_ref = torch.nn.functional.cross_entropy(out, y)
    loss_ref.backward()
    T = read_trace(p)
    ok(T["names"] == ["fc1", "act", "fc2"] and [op.decode() for op in T["layers"]["op"]] == ["linear", "relu", "linear"]
       and list(T["layers"]["params"]) == [35, 0, 18] and T["layers"]["shape"][0] == b"[5, 6]" and
       [c.decode() for c in T["layers"]["compute"]] == ["fp32"] * 3,
       "layers: the leaves as PyTorch names them (fc1, act, fc2), ops, shapes, parameters, compute fp32")
    st = T["steps"][0]
    gn = math.sqrt(sum(float((q.grad.double() ** 2).sum()) for q in ref.parameters()))
    ok(len(T["steps"]) == 1 and abs(st["loss"] - loss_ref.item()) <= 1e-6 and st["loss_scale"] == 1 and
       abs(st["grad_norm"] - gn) <= 1e-5 * gn and st["clip_coef"] == 1 and st["skipped"] == 0 and st["lr"] == lr and
       st["nonfinite_grads"] == 0 and st["wall_ms"] > 0,
       "step record: loss %.6f, grad_norm %.6g (by hand %.6g), lr, scale 1, not skipped" % (st["loss"], st["grad_norm"], gn))
    tens = T["tensors"]
    cases = [("fc1", "activation", h1), ("act", "activation", r1), ("fc2", "activation", out),
             ("fc1", "activation_grad", h1.grad), ("act", "activation_grad", r1.grad), ("fc2", "activation_grad", out.grad),
             ("fc1", "weight_grad", torch.cat([ref.fc1.weight.grad.ravel(), ref.fc1.bias.grad.ravel()])),
             ("fc2", "weight_grad", torch.cat([ref.fc2.weight.grad.ravel(), ref.fc2.bias.grad.ravel()])),
             ("fc1", "weight", torch.cat([ref.fc1.weight.ravel(), ref.fc1.bias.ravel()])),
             ("fc2", "weight", torch.cat([ref.fc2.weight.ravel(), ref.fc2.bias.ravel()]))]
    for name, kind, t in cases:
        rec = tens.get((0, name, kind))
        bad = ["missing"] if rec is None else close_to(rec, np_stats(t.detach().numpy()))
        ok(not bad, "stats=%s: %s %s: every field equals numpy's on the tensor computed by hand%s"
           % (stats, name, kind, "" if not bad else ": " + "; ".join(bad)))
    # the update of fc1: lost where the weight is not 0; kept in FP32 and BF16 at the three zeros
    w_before = torch.cat([ref.fc1.weight.ravel(), ref.fc1.bias.ravel()]).detach()
    g = torch.cat([ref.fc1.weight.grad.ravel(), ref.fc1.bias.grad.ravel()])
    w_after = torch.cat([net.fc1.weight.ravel(), net.fc1.bias.ravel()]).detach()
    d = (w_after - w_before).numpy()
    meant = (g != 0).numpy()
    rec = tens[(0, "fc1", "update")]
    nz0 = int(((w_before == 0) & (g != 0)).sum())
    want_lost = int(meant.sum()) - nz0
    lost16 = int(np.sum(meant & (((w_before.numpy().astype(np.float16).astype(np.float32) + d).astype(np.float16))
                                 == w_before.numpy().astype(np.float16))))
    ok(rec["lost_updates"] == want_lost and rec["lost_if_fp16"] == lost16 == int(meant.sum()) and
       rec["lost_if_bf16"] == want_lost and int(rec["n_zero"]) == d.size - nz0 and nz0 == 3,
       "fc1 update (lr 1e-13): lost %d of %d (all but the 3 weights at 0), if FP16 %d (all: 1e-13 flushes), "
       "if BF16 %d" % (rec["lost_updates"], int(meant.sum()), rec["lost_if_fp16"], rec["lost_if_bf16"]))
    ok(not close_to(rec, {k: v for k, v in np_stats(d).items()}),
       "stats=%s: fc1 update record: the statistics of w_after - w_before" % stats)
    hs = T["hists"]
    hrow = [h for h in hs if h["layer"] == 0 and h["kind"] == 0]
    want_h = np.zeros(281, dtype=np.int64)
    for v in h1.detach().numpy().ravel():
        want_h[277 if v == 0 else int(math.floor(math.log2(abs(v)))) + 149] += 1
    ok(len(hs) == 12 and len(hrow) == 1 and list(hrow[0]["bins"]) == list(want_h),
       "histograms: one per record (12), fc1's activation binned by floor(log2|x|) as by hand")
    ev = T["evals"]
    ok(len(ev) == 1 and ev[0]["step"] == 0 and ev[0]["loss"] == 0.75 and ev[0]["metric"] == 0.5 and
       ev[0]["loss_se"] == 0.01, "eval record: step 0, loss, metric, loss_se")
    a = T["attrs"]
    ok(a["status"] == "complete" and a["precision"] == "fp32" and a["optimizer"] == "sgd" and a["loss_scale"] == "none"
       and a["grad_stats"] == "scaled" and a["batch"] == 8 and a["lr"] == lr,
       "attributes: complete, precision fp32, optimizer sgd, loss_scale none, grad_stats scaled, batch 8")
    r = run("info", p)
    ok(r.returncode == 0 and "1 step" in r.stdout, "ampdiag info reads it")
    return T


def test_same_records(a, b):
    """The torch statistics and libampdiag's give the same trace (sums to rounding)."""
    ta, tb = a["tensors"], b["tensors"]
    bad = []
    for key in ta:
        ra, rb = ta[key], tb.get(key)
        if rb is None:
            bad.append("%s missing" % (key,))
            continue
        for f in ra.dtype.names:
            x, y = float(ra[f]), float(rb[f])
            if not (x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-12 * max(abs(x), abs(y))):
                bad.append("%s %s %r/%r" % (key, f, x, y))
    ok(len(ta) == len(tb) == 12 and not bad and
       [list(h["bins"]) for h in a["hists"]] == [list(h["bins"]) for h in b["hists"]],
       "stats=torch and stats=lib write the same 12 records and histograms%s" % ("" if not bad else ": " + "; ".join(bad[:4])))


# ---------------------------------------------------------------------- precisions


class CNN(torch.nn.Module):
    """A small CNN on 8x8 images, with the loss inside (as Hugging Face models have it) and a
    layer kept in FP32 by hand ("big": its output reaches 1e6, beyond FP16)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.relu1 = torch.nn.ReLU(inplace=True)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.relu2 = torch.nn.ReLU(inplace=True)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.flat = torch.nn.Flatten()
        self.big = Big()
        self.fc = torch.nn.Linear(16, 4)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, y):
        h = self.flat(self.pool(self.relu2(self.conv2(self.relu1(self.conv1(x))))))
        logits = self.fc(self.big(h) * 1e-6)
        return {"loss": self.loss(logits, y), "logits": logits}


class Big(torch.nn.Module):
    def forward(self, x):
        with torch.autocast(x.device.type, enabled=False):
            return x.float() * 1e6


def train_cnn(p, precision, steps=12, init_scale=2.0 ** 16, seed=0):
    torch.manual_seed(seed)
    model = CNN()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=4) if precision == "fp16" else None
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(64, 1, 8, 8, generator=g)
    ys = (xs.mean(dim=(1, 2, 3)) > 0).long() + 2 * (xs[:, 0, 0, 0] > 0).long()
    with ampdiag.torch.trace(p, model, opt, scaler, overwrite=True, trace_every=2, hist_every=4, steps=steps,
                             attrs={"model": "cnn", "data": "random 8x8"}) as tr:
        for t in range(steps):
            idx = torch.arange(16) + 16 * (t % 4)
            with torch.autocast("cpu", dtype=dt, enabled=dt is not None):
                out = model(xs[idx], ys[idx])
            if scaler:
                scaler.scale(out["loss"]).backward()
                scaler.step(opt)
                scaler.update()
            else:
                out["loss"].backward()
                opt.step()
            opt.zero_grad()
            tr.step()  # the loss from the model's output
            if t % 6 == 5:
                with torch.no_grad():
                    model.eval()
                    ev = model(xs, ys)
                    model.train()
                tr.eval(ev["loss"], float((ev["logits"].argmax(1) == ys).float().mean()))
    return read_trace(p)


def rss_peak():
    """This process's peak resident set size so far, bytes (Linux: ru_maxrss in kilobytes)."""
    import resource
    v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return v if sys.platform == "darwin" else v * 1024


def test_precisions():
    runs = {}
    before = rss_peak()
    for prec in ("fp32", "bf16", "fp16"):
        runs[prec] = train_cnn(path("cnn-%s.h5" % prec), prec)
    after = rss_peak()
    # peak memory on the CPU: the process's peak RSS at each trace's close (this process), in bytes
    pm = [T["attrs"].get("peak_memory_bytes") for T in runs.values()]
    ok(all(T["attrs"].get("peak_memory_source") == "ru_maxrss" for T in runs.values()) and
       all(isinstance(v, float) and before <= v <= after for v in pm) and pm == sorted(pm),
       "peak memory on the CPU: source ru_maxrss, the process's peak RSS at each close in bytes, between the "
       "peak before the runs and after (%d <= %s <= %d), never decreasing" % (before, pm, after))
    comp = {p: dict(zip(T["names"], (c.decode() for c in T["layers"]["compute"]))) for p, T in runs.items()}
    ok(comp["bf16"]["conv1"] == "bf16" and comp["fp16"]["fc"] == "fp16" and comp["bf16"]["big"] == "fp32" and
       comp["fp16"]["loss"] == "fp32" and comp["fp32"]["conv2"] == "fp32",
       "compute column: conv/linear bf16 / fp16 under autocast, the loss and the layer kept in FP32 fp32 (%s)"
       % comp["bf16"])
    ok([T["attrs"]["precision"] for T in runs.values()] == ["fp32", "bf16", "fp16"] and
       runs["fp16"]["attrs"]["loss_scale"] == "dynamic" and "init=65536" in runs["fp16"]["attrs"]["scaler"],
       "precision attributes fp32, bf16, fp16 (seen from autocast); the fp16 run's loss scaling is dynamic")
    T = runs["fp16"]
    growth = [e for e in T["events"] if e[1] == "scale_growth"]
    scales = list(T["steps"]["loss_scale"])
    ok(len(growth) >= 2 and scales[0] == 65536 and scales[5] == 131072 and growth[0][2] == 131072,
       "fp16 run: GradScaler's growth every 4 steps recorded as scale_growth events and in loss_scale (%s)"
       % scales[:9])
    files = [path("cnn-%s.h5" % p) for p in runs]
    for p in files:
        r = run("info", p)
        ok(r.returncode == 0 and "12 steps" in r.stdout, "ampdiag info %s: exit %d" % (os.path.basename(p), r.returncode))
    r = run("compare", *files, "--format", "json")
    okc = r.returncode == 0
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j, okc = None, False
    ok(okc, "ampdiag compare of the three runs: exit %d%s" % (r.returncode, "" if okc else " " + r.stderr[-300:]))
    r2 = run("compare", *files)
    ok(r2.returncode == 0 and "fp16" in r2.stdout, "ampdiag compare (text)")
    row = re.search(r"^peak memory +(.*)$", r2.stdout, re.M)
    jr = j["runs"] if j else []
    ok(row and row.group(1).count(" MiB (RSS)") == 3 and "peak resident set size" in r2.stdout and len(jr) == 3 and
       all(x["peak_memory_source"] == "ru_maxrss" and x["figures"]["peak_memory_bytes"]["value"] == v and
           x["figures"]["peak_memory_bytes"]["unit"] == "bytes" for x, v in zip(jr, pm)),
       "compare: a peak memory row with its source per run (%s) and what it is under the table, JSON "
       "peak_memory_source and the figure "
       "peak_memory_bytes equal to the attributes" % (row.group(1).strip() if row else None))
    rec = json.dumps((j or {}).get("recommendation", {"x": "RSS"}))
    ok(not re.search("peak memory|RSS|ru_maxrss", rec) and "peak memory" not in r2.stdout.split("\nApply")[0],
       "compare: the CPU's peak RSS is in no verdict, item or advice")
    # advice in PyTorch's terms: the traces' writer is ampdiag.torch
    R = j["recommendation"] if j else {}
    lines, dec = R.get("apply", []), R.get("decisions", [])
    both = all(d["apply"]["pytorch"] for d in dec if d["apply"]["ampdiag"])
    ok(R.get("vocabulary") == "pytorch" and lines and both and any("torch." in a for a in lines) and
       not any(" --" in a for a in lines) and "\nApply      in PyTorch" in r2.stdout and
       "\nmedian step time " in r2.stdout,
       "compare on torch traces: advice in PyTorch's terms (%s), none in ampdiag's options; the median step time"
       % lines)
    r3 = run("plot", *files, "-o", path("plots"))
    pngs = [f for f in os.listdir(path("plots")) if f.endswith(".png")] if os.path.isdir(path("plots")) else []
    ok(r3.returncode == 0 and "loss.png" in pngs, "ampdiag plot: exit %d, %d charts" % (r3.returncode, len(pngs)))
    # the layer kept in FP32 reaches 1e6: the FP32 baseline alone would predict an FP16 overflow there;
    # with the bf16 run's compute column, compare knows autocast keeps it in FP32 (12 steps do not
    # show learning, so both verdicts are undecided: the evidence against FP16 is what differs)
    alone = run("compare", files[0])
    both = run("compare", files[0], files[1])
    said = "big activations reach"
    ok("\npeak memory" not in alone.stdout, "compare of one run: no peak memory row (nothing to compare it with)")
    ok(said in alone.stdout and said not in both.stdout and "forward overflow: big" in alone.stdout and
       "forward overflow" not in both.stdout and both.returncode == 0,
       "compare: the fp32 run alone names 'big' (1e6 > 65504) as an FP16 overflow; with the bf16 run, whose "
       "compute column says autocast keeps it in FP32, it does not")
    return runs


def test_overflow_skips():
    T = train_cnn(path("cnn-fp16-overflow.h5"), "fp16", steps=30, init_scale=2.0 ** 40)
    st = T["steps"]
    skipped = [int(s) for s in st["skipped"]]
    backoffs = [e for e in T["events"] if e[1] == "scale_backoff"]
    skips = [e for e in T["events"] if e[1] == "skipped_step"]
    n = sum(skipped)
    reason = st["skip_reason"][0].decode()
    ok(n >= 3 and skipped[0] == 1 and len(backoffs) == n and len(skips) == n and st["loss_scale"][1] == 2.0 ** 39,
       "GradScaler at 2^40 skips %d steps: skipped flags, %d backoff and %d skipped_step events, loss_scale "
       "halves (%g -> %g)" % (n, len(backoffs), len(skips), st["loss_scale"][0], st["loss_scale"][1]))
    ok(reason.startswith("inf in ") or reason.startswith("nan in "),
       "the skip reason names the first layer and tensor in backward order: '%s'" % reason)
    ok(all(math.isinf(g) or math.isnan(g) for g, s in zip(st["grad_norm"], skipped) if s) and
       all(k > 0 for k, s in zip(st["nonfinite_grads"], skipped) if s),
       "skipped steps: non-finite gradient norm and a count of non-finite gradients")
    ok(not [k for k in T["tensors"] if k[0] == 0 and k[2] in ("weight", "update")],
       "a skipped traced step has no weight or update records (as ampdiag run)")
    r = run("info", path("cnn-fp16-overflow.h5"))
    ok(r.returncode == 0 and re.search(r"^  skipped steps +%d " % n, r.stdout, re.M),
       "ampdiag info counts the %d skipped steps" % n)


# ---------------------------------------------------------------------- crash safety


KILL_SCRIPT = r"""
import os, signal, sys, torch
import ampdiag.torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
tr = ampdiag.torch.Tracer(sys.argv[1], model, opt, flush_every=2, overwrite=True)
for t in range(100):
    loss = model(torch.randn(16, 4)).pow(2).mean()
    loss.backward(); opt.step(); opt.zero_grad()
    tr.step(loss)
    if t == 5:
        tr.flush()  # steps 0..5 are on disk now, whatever happens next
    if t == 8:
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sigkill():
    p = path("killed.h5")
    script = path("killed.py")
    with open(script, "w") as f:
        f.write(KILL_SCRIPT)
    r = subprocess.run([sys.executable, script, p], capture_output=True, text=True)
    ok(r.returncode == -9, "the training script was killed by SIGKILL at step 8 (status %d)" % r.returncode)
    info = run("info", p)
    steps = None
    try:
        with h5py.File(p, "r", swmr=True) as f:
            steps = [int(v) for v in f["steps"]["step"]]
            status = f.attrs["status"].decode()
            peak = f.attrs.get("peak_memory_bytes")
    except OSError as e:
        status, peak = str(e), None
    ok(peak is not None and math.isnan(peak) and "peak memory" not in info.stdout,
       "a run killed before its close: peak_memory_bytes still NaN (%r), no peak memory reported" % (peak,))
    ok(info.returncode == 0 and steps is not None and steps[:6] == list(range(6)) and
       steps == list(range(len(steps))) and len(steps) <= 9 and status == "running" and "cut off" in info.stdout,
       "ampdiag info opens the killed run's trace (exit %d): status running (cut off), steps 0..%d kept "
       "(0..5 flushed before the kill)" % (info.returncode, len(steps) - 1 if steps else -1))


def test_eval_before_step():
    """eval(), event() and flush() before the first step (an evaluation of the untrained model)
    must not write the header then: the precision is seen from autocast at the first step."""
    for prec, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        torch.manual_seed(0)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu", enabled=dt == torch.float16)
        x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
        F = torch.nn.functional
        p = path("eval-first-%s.h5" % prec)
        with ampdiag.torch.trace(p, model, opt, scaler, overwrite=True) as tr:
            with torch.no_grad():
                ev0 = float(F.cross_entropy(model(x), y))
            tr.eval(ev0, 0.25)  # no initial=True: before any step all the same
            tr.event("note", "before the first step (test)", 7.0)
            tr.flush()
            for t in range(3):
                with torch.autocast("cpu", dtype=dt):
                    loss = F.cross_entropy(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
                tr.step(loss)
            tr.eval(float(loss.detach()), 0.5)
        T = read_trace(p)
        notes = [e for e in T["events"] if e[1] == "note" and "before the first step" in e[3]]
        ok(T["attrs"]["precision"] == prec and T["attrs"]["autocast"] == "cpu %s" % prec and
           [int(s) for s in T["evals"]["step"]] == [-1, 2] and abs(float(T["evals"]["loss"][0]) - ev0) < 1e-6 and
           len(notes) == 1 and notes[0][0] == 0 and notes[0][2] == 7.0,
           "%s autocast, eval() before the first step: precision %s from autocast (%s), the evaluation of the "
           "untrained model at step -1 (steps %s), the event kept" % (prec, T["attrs"]["precision"], T["attrs"]["autocast"],
                                                                      [int(s) for s in T["evals"]["step"]]))


# ---------------------------------------------------------------------- API


def test_api():
    env = dict(os.environ, AMPDIAG_LIB=path("no-such-lib.so"))
    r = subprocess.run([sys.executable, "-c", "import ampdiag; ampdiag.library_path()"], capture_output=True,
                       text=True, env=env)
    ok(r.returncode != 0 and "LibraryNotFound" in r.stderr and "no-such-lib.so" in r.stderr and "AMPDIAG_LIB" in r.stderr,
       "AMPDIAG_LIB naming a missing file: LibraryNotFound naming it")
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    p = path("interrupted.h5")
    try:
        with ampdiag.torch.trace(p, model, opt, overwrite=True, layers=["fc*"]) as tr:
            for t in range(3):
                loss = model(torch.randn(4, 6)).sum()
                loss.backward()
                opt.step()
                opt.zero_grad()
                tr.step(loss)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    T = read_trace(p)
    ok(T["attrs"]["status"] == "interrupted" and len(T["steps"]) == 3 and T["names"] == ["fc1", "fc2"],
       "context manager: an exception closes the trace as interrupted; layers=['fc*'] selects fc1, fc2")
    try:
        ampdiag.torch.Tracer(path("exists.h5"), model, opt, overwrite=True).close()
        ampdiag.torch.Tracer(path("exists.h5"), model, opt)
        refused = None
    except ampdiag.AmpdiagError as e:
        refused = str(e)
    ok(refused is not None and "exists.h5" in refused, "an existing trace is refused without overwrite: %s" % refused)
    sel = ampdiag.torch.Tracer(path("types.h5"), model, opt, overwrite=True, layers=[torch.nn.ReLU])
    names = [L.name for L in sel.layers]
    sel.close()
    ok(names == ["act"], "layers=[torch.nn.ReLU] selects by type: %s" % names)


def read_traced(p):
    """The /traced rows: (step, reason name, event_step, cadence, record_ms, step_ms)."""
    with h5py.File(p, "r", swmr=True) as f:
        if "traced" not in f:
            return None
        rmap = {v: k for k, v in h5py.check_enum_dtype(f["traced"].dtype["reason"]).items()}
        return [(int(r["step"]), rmap[r["reason"]], int(r["event_step"]), int(r["cadence"]), float(r["record_ms"]),
                 float(r["step_ms"])) for r in f["traced"][:]]


def cadence_loop(p, steps, nan_at=(), **kw):
    """A small model trained for `steps` steps under the tracer (kw); a NaN loss reported at the
    steps of nan_at (the loop skips their update)."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with ampdiag.torch.trace(p, model, opt, overwrite=True, steps=steps, **kw) as tr:
        for t in range(steps):
            x = torch.randn(16, 6)
            loss = model(x).pow(2).mean()
            loss.backward()
            if t in nan_at:
                opt.zero_grad()
                tr.step(torch.tensor(math.nan))
                continue
            opt.step()
            opt.zero_grad()
            tr.step(loss)
    return read_trace(p), read_traced(p)


def test_cadence():
    """The cadence (python/ampdiag/_cadence.py): a budget, records after events, the /traced rows."""
    T, R = cadence_loop(path("every.h5"), 40, nan_at=(13,), trace_every=10)
    full = sorted({k[0] for k in T["tensors"]})
    want = [0, 10, 14, 15, 16, 20, 30, 39]
    ok(full == want and R is not None and [r[0] for r in R] == want,
       "trace_every=10 with a NaN loss at step 13: full records at %s (the first, every 10th, the 3 steps after "
       "the event, the last), a /traced row each" % full)
    why = {r[0]: (r[1], r[2], r[3]) for r in R or []}
    ok(why.get(0) == ("first", -1, 10) and why.get(10) == ("every", -1, 10) and why.get(14) == ("after_event", 13, 10)
       and why.get(39) == ("last", -1, 10) and T["attrs"].get("trace_cadence") == "every"
       and T["attrs"].get("trace_after_event") == 3,
       "... their reasons: first, every, after_event (event_step 13), last; cadence 10 (%s)" %
       [why.get(k) for k in (0, 10, 14, 39)])
    T, R = cadence_loop(path("budget.h5"), 300, trace_budget=5)
    rows = R or []
    n = len(rows)
    reasons = {r[1] for r in rows}
    cad = [r[3] for r in rows if r[1] == "cadence" and r[3] > 0]
    measured = [r for r in rows if r[1] == "cadence" and math.isfinite(r[4]) and math.isfinite(r[5])]
    ok(T["attrs"].get("trace_cadence") == "budget" and T["attrs"].get("trace_budget") == 5.0 and
       T["attrs"].get("trace_every") == 0 and 3 <= n < 300 and rows[0][:2] == (0, "first") and
       rows[-1][:2] == (299, "last") and reasons <= {"first", "last", "cadence"} and
       sorted({k[0] for k in T["tensors"]}) == [r[0] for r in rows],
       "trace_budget=5, 300 steps: %d steps recorded in full (the first, the last and on the cadence), each with "
       "its /traced row and tensor records" % n)
    spacing = [b[0] - a[0] for a, b in zip(rows[1:], rows[2:-1])]
    ok(cad and measured and all(r[4] > 0 and r[5] > 0 for r in measured) and
       all(c == max(1, math.ceil(r[4] / (0.05 * r[5]))) for r, c in ((r, r[3]) for r in measured if r[3] > 0)),
       "... the cadence is ceil(record_ms / (5%% x step_ms)) of the measured costs (cadences %s, spacing %s)" %
       (sorted(set(cad))[:6], spacing[:8]))
    T, R = cadence_loop(path("budget0.h5"), 30, nan_at=(7,), trace_budget=0)
    ok([r[:3] for r in R or []] == [(0, "first", -1), (8, "after_event", 7), (9, "after_event", 7),
                                    (10, "after_event", 7), (29, "last", -1)],
       "trace_budget=0: only the first and last steps and the 3 after a NaN at step 7 (%s)" % [r[:3] for r in R or []])
    T, R = cadence_loop(path("none.h5"), 20, nan_at=(5,), trace_every=0)
    ok(not T["tensors"] and not R, "trace_every=0: step records only, events or not")
    try:
        ampdiag.torch.Tracer(path("both.h5"), Net(), None, overwrite=True, trace_every=5, trace_budget=5)
        refused = ""
    except ValueError as e:
        refused = str(e)
    ok("not both" in refused, "trace_every and trace_budget together: ValueError (%s)" % refused)
    r = run("info", path("budget.h5"))
    ok(r.returncode == 0 and "300 steps" in r.stdout, "ampdiag info reads the budget trace (exit %d)" % r.returncode)


def main():
    torch.set_num_threads(1)
    test_whatif()
    test_same_records(test_records("lib"), test_records("torch"))
    test_precisions()
    test_overflow_skips()
    test_sigkill()
    test_eval_before_step()
    test_api()
    test_cadence()
    return TAP.plan()


if __name__ == "__main__":
    sys.exit(main())
