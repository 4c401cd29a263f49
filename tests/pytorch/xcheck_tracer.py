#!/usr/bin/env python3
"""xcheck_tracer.py - the PyTorch tracer (python/ampdiag/torch.py) against `ampdiag run`.

The default mlp (mlp.py) is trained by `ampdiag run` (FP32, AdamW, --shuffle off) and by PyTorch
from the same weights on the same batches, traced by ampdiag.torch. The two traces must agree:
the losses step by step (1e-4 relative over 50 steps), the learning rate and the gradient norm,
and the step-0 records of every layer both have, kind by kind (common.compare_record): the counts
exactly (the what-if counts within a handful: a value that sits on an FP16/BF16 threshold in one
run can fall on the other side in the other, whose arithmetic rounds differently), the extremes
and the rms to 1e-4 relative, the mean and the smallest non-zero |x| to 1e-4 of the rms.

Then an FP16 overflow: `ampdiag run --precision fp16 --loss-scale dynamic --scale-init 2^40` and
PyTorch's autocast(float16) with GradScaler(init_scale=2^40) from the same weights on the same
batches skip the same steps (each halving the scale) for the same reason, the first non-finite
gradient in backward order. The tracer traces every step there: on a step it does not trace it has
no hooks on the layers' outputs and names the first weight gradient that holds one (fc4's, NaN
where an infinite output gradient met a zero input) where `ampdiag run` names fc4's output
gradient (inf). Prints TAP.

usage: xcheck_tracer.py AMPDIAG WORKDIR
"""
import math
import os
import sys

import torch

from common import KINDS, Tap, batches, compare_record, records, rel, run_ampdiag, save_weights, worst_rel
from mlp import MLP, layer_shapes, make_data

import ampdiag.torch  # noqa: E402  (common puts python/ on the path)

STEPS = 50
BATCH = 64
LR, WD = 1e-3, 0.01
TOL = 1e-4
HANDFUL = 4  # what-if counts: values on a threshold (see above)
FP16_STEPS = 30
FP16_INIT = 2.0 ** 40
tap = Tap()


def torch_run(model, x, y, path, steps, precision, every=10):
    """Train model on the batches of `ampdiag run --shuffle off`, traced into path (tensor records
    every `every` steps): FP32, or FP16 autocast with a GradScaler starting at FP16_INIT."""
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD)
    fp16 = precision == "fp16"
    scaler = torch.amp.GradScaler("cpu", init_scale=FP16_INIT) if fp16 else None
    with ampdiag.torch.trace(path, model, opt, scaler, overwrite=True, trace_every=every, steps=steps,
                             layers="leaves") as tr:
        for xb, yb in batches(x, y, steps, BATCH):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16, enabled=fp16):
                loss = torch.nn.functional.cross_entropy(model(xb), yb)
            if fp16:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            tr.step(loss)


def ampdiag_run(ampdiag_bin, data, w0, path, steps, *extra):
    run_ampdiag(ampdiag_bin, "run", "--data", data, "--init-from", w0, "--shuffle", "off", "--steps", steps,
                "--batch", BATCH, "--optimizer", "adamw", "--lr", LR, "--weight-decay", WD, "--progress", "none",
                "--overwrite", "-o", path, *extra)


def check_fp16_skips(ampdiag_bin, data, shapes, x, y, work):
    model = MLP(shapes)
    w0 = os.path.join(work, "w0-fp16.h5")
    save_weights(model, w0)
    theirs, mine = os.path.join(work, "ampdiag-fp16.h5"), os.path.join(work, "pytorch-fp16.h5")
    ampdiag_run(ampdiag_bin, data, w0, theirs, FP16_STEPS, "--precision", "fp16", "--loss-scale", "dynamic",
                "--scale-init", repr(FP16_INIT))
    torch_run(model, x, y, mine, FP16_STEPS, "fp16", every=1)
    sa, sb = records(theirs, 0)[1], records(mine, 0)[1]
    ska, skb = [int(v) for v in sa["skipped"]], [int(v) for v in sb["skipped"]]
    n = sum(ska)
    tap.ok(ska == skb and n >= 3 and ska[0] == 1,
           "FP16, loss scale 2^40: ampdiag run and GradScaler skip the same %d steps (%s; PyTorch %d)"
           % (n, ",".join(str(t) for t, k in enumerate(ska) if k), sum(skb)))
    tap.ok(list(sa["loss_scale"]) == list(sb["loss_scale"]),
           "the same loss scale in every step record (%g -> %g)" % (sb["loss_scale"][0], sb["loss_scale"][-1]))
    ra = [r.decode() for r, k in zip(sa["skip_reason"], ska) if k]
    rb = [r.decode() for r, k in zip(sb["skip_reason"], skb) if k]
    tap.ok(ra == rb and ra, "the same skip reasons: %s" % sorted(set(rb)))


def main():
    ampdiag_bin, work = sys.argv[1], sys.argv[2]
    torch.manual_seed(3)
    torch.set_num_threads(1)
    data = os.path.join(work, "data.h5")
    x, y = make_data(data)
    shapes = layer_shapes(ampdiag_bin, data, work)
    model = MLP(shapes)
    w0 = os.path.join(work, "w0.h5")
    save_weights(model, w0)
    theirs = os.path.join(work, "ampdiag-run.h5")
    ampdiag_run(ampdiag_bin, data, w0, theirs, STEPS, "--precision", "fp32")
    mine = os.path.join(work, "pytorch.h5")
    torch_run(model, x, y, mine, STEPS, "fp32")
    a, sa = records(theirs, 0)
    b, sb = records(mine, 0)
    worst = worst_rel(sa["loss"], sb["loss"]) if len(sa) == STEPS else math.inf
    tap.ok(worst <= TOL, "%d step losses of the traced PyTorch run within %g relative of ampdiag run's (worst %.2e)"
           % (STEPS, TOL, worst))
    gw = worst_rel(sa["grad_norm"], sb["grad_norm"])
    tap.ok(gw <= TOL, "gradient norms agree (worst %.2e relative; step 0: %.6g / %.6g)"
           % (gw, sa["grad_norm"][0], sb["grad_norm"][0]))
    tap.ok(all(v == LR for v in sb["lr"]) and not any(sb["skipped"]) and all(v == 1.0 for v in sb["loss_scale"]),
           "lr %g, no skipped step, loss scale 1 in every step record" % LR)
    ratio = rel(sa["update_ratio"][0], sb["update_ratio"][0])
    tap.ok(ratio <= 1e-3, "step 0 update/weight ratio %.6g / %.6g" % (sa["update_ratio"][0], sb["update_ratio"][0]))
    common = sorted(set(a) & set(b))
    want = {(n, k) for n in ("fc1", "fc2", "fc3", "fc4") for k in KINDS} | \
           {("relu%d" % i, k) for i in (1, 2, 3) for k in ("activation", "activation_grad")}
    tap.ok(want <= set(common), "step 0: both traces have records of every linear layer (5 kinds) and every ReLU "
           "(activation, activation_grad): %d in common" % len(common))
    for key in common:
        compare_record(tap, key, a[key], b[key], TOL, HANDFUL)
    check_fp16_skips(ampdiag_bin, data, shapes, x, y, work)
    return tap.plan()


if __name__ == "__main__":
    sys.exit(main())
