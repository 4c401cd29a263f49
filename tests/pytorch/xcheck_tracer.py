#!/usr/bin/env python3
"""xcheck_tracer.py - the PyTorch tracer (python/ampdiag/torch.py) against `ampdiag run`.

The default mlp (mlp.py) is trained by `ampdiag run` (FP32, AdamW, --shuffle off) and by PyTorch
from the same weights on the same batches, traced by ampdiag.torch. The two traces must agree:
the losses step by step (1e-4 relative over 50 steps), the learning rate and the gradient norm,
and the step-0 records of every layer both have, kind by kind: the counts exactly (the what-if
counts within a handful: a value that sits on an FP16/BF16 threshold in one run can fall on
the other side in the other, whose arithmetic rounds differently), the extremes and the rms to
1e-4 relative, the mean and the smallest non-zero |x| to 1e-4 of the rms. Prints TAP.

usage: xcheck_tracer.py AMPDIAG WORKDIR
"""
import math
import os
import subprocess
import sys

import h5py
import numpy as np
import torch

from mlp import MLP, batches, layer_shapes, make_data, save_weights

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ampdiag.torch  # noqa: E402

STEPS = 50
BATCH = 64
LR, WD = 1e-3, 0.01
TOL = 1e-4
HANDFUL = 4  # what-if counts: values on a threshold (see above)
KINDS = ["activation", "activation_grad", "weight", "weight_grad", "update"]
EXACT = ["count", "n_nan", "n_posinf", "n_neginf", "n_zero", "n_neg", "n_pos", "lost_updates"]
WHATIF = ["fp16_overflow", "fp16_underflow", "fp16_subnormal", "bf16_overflow", "bf16_underflow",
          "bf16_subnormal"]
VALUES = ["min", "max", "absmax", "absmin_nz", "mean", "rms"]

n_tests = 0
failed = 0


def ok(cond, msg):
    global n_tests, failed
    n_tests += 1
    failed |= not cond
    print("%s %d - %s" % ("ok" if cond else "not ok", n_tests, msg))
    sys.stdout.flush()


def records(path, step):
    with h5py.File(path, "r", swmr=True) as f:
        names = [n.decode() for n in f["layers"]["name"]]
        kinds = h5py.check_enum_dtype(f["tensors"].dtype["kind"])
        kname = {v: k for k, v in kinds.items()}
        out = {}
        for r in f["tensors"][:]:
            if r["step"] == step:
                out[(names[r["layer"]], kname[r["kind"]])] = r
        steps = f["steps"][:]
    return out, steps


def rel(a, b):
    a, b = float(a), float(b)
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def main():
    ampdiag_bin, work = sys.argv[1], sys.argv[2]
    torch.manual_seed(3)
    torch.set_num_threads(1)
    data = os.path.join(work, "data.h5")
    x, y = make_data(data)
    model = MLP(layer_shapes(ampdiag_bin, data, work))
    w0 = os.path.join(work, "w0.h5")
    save_weights(model, w0)
    theirs = os.path.join(work, "ampdiag-run.h5")
    subprocess.run([ampdiag_bin, "run", "--precision", "fp32", "--data", data, "--init-from", w0, "--shuffle", "off",
                    "--steps", str(STEPS), "--batch", str(BATCH), "--optimizer", "adamw", "--lr", str(LR),
                    "--weight-decay", str(WD), "--progress", "none", "--overwrite", "-o", theirs],
                   check=True, stdout=subprocess.DEVNULL)
    mine = os.path.join(work, "pytorch.h5")
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD)
    with ampdiag.torch.trace(mine, model, opt, overwrite=True, trace_every=10, steps=STEPS) as tr:
        for xb, yb in batches(x, y, STEPS, BATCH):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            tr.step(loss)
    a, sa = records(theirs, 0)
    b, sb = records(mine, 0)
    la, lb = sa["loss"], sb["loss"]
    worst = max(rel(p, q) for p, q in zip(la, lb)) if len(la) == len(lb) == STEPS else math.inf
    ok(worst <= TOL, "%d step losses of the traced PyTorch run within %g relative of ampdiag run's (worst %.2e)"
       % (STEPS, TOL, worst))
    gw = max(rel(p, q) for p, q in zip(sa["grad_norm"], sb["grad_norm"]))
    ok(gw <= TOL, "gradient norms agree (worst %.2e relative; step 0: %.6g / %.6g)"
       % (gw, sa["grad_norm"][0], sb["grad_norm"][0]))
    ok(all(v == LR for v in sb["lr"]) and not any(sb["skipped"]) and all(v == 1.0 for v in sb["loss_scale"]),
       "lr %g, no skipped step, loss scale 1 in every step record" % LR)
    ratio = rel(sa["update_ratio"][0], sb["update_ratio"][0])
    ok(ratio <= 1e-3, "step 0 update/weight ratio %.6g / %.6g" % (sa["update_ratio"][0], sb["update_ratio"][0]))
    common = sorted(set(a) & set(b))
    want = {(n, k) for n in ("fc1", "fc2", "fc3", "fc4") for k in KINDS} | \
           {("relu%d" % i, k) for i in (1, 2, 3) for k in ("activation", "activation_grad")}
    ok(want <= set(common), "step 0: both traces have records of every linear layer (5 kinds) and every ReLU "
       "(activation, activation_grad): %d in common" % len(common))
    for key in common:
        ra, rb = a[key], b[key]
        bad_exact = [f for f in EXACT if int(ra[f]) != int(rb[f])]
        bad_whatif = [f for f in WHATIF if abs(int(ra[f]) - int(rb[f])) > HANDFUL]
        diff_whatif = sum(abs(int(ra[f]) - int(rb[f])) for f in WHATIF)
        # the mean and the smallest |x| against the rms: a mean near 0 (a gradient's) or a value
        # that cancelled to near 0 keeps no relative precision between two orders of summation
        dev = {f: rel(ra[f], rb[f]) for f in VALUES if f not in ("mean", "absmin_nz")}
        for f in ("mean", "absmin_nz"):
            dev[f] = abs(float(ra[f]) - float(rb[f])) / max(float(ra["rms"]), 1e-30)
        worst_f = max(dev, key=dev.get)
        worst_v = dev[worst_f]
        ok(not bad_exact and not bad_whatif and worst_v <= TOL,
           "step 0 %s %s: counts equal%s, what-if counts within %d (off by %d in all), values within %g "
           "(worst %s %.1e)" % (key[0], key[1], "" if not bad_exact else " EXCEPT " + ",".join(
               "%s %d/%d" % (f, ra[f], rb[f]) for f in bad_exact), HANDFUL, diff_whatif, TOL, worst_f, worst_v))
    print("1..%d" % n_tests)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
