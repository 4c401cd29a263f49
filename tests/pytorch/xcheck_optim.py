#!/usr/bin/env python3
"""xcheck_optim.py - ampdiag's FP32 training against PyTorch, step by step.

The default mlp (mlp.py: fc1..fc4 with ReLU, softmax cross-entropy) is built in PyTorch with
the weights of a weights file, trained on the same data in the same order (ampdiag run --shuffle
off), and the per-step training losses are compared with the /steps losses of ampdiag's trace.
Prints TAP.

It also checks that PyTorch itself gives the values tests/t_layers.c and tests/t_scaler.c
hold ampdiag to (ReLU's backward at NaN; GradScaler's float32 scale at its floor).

usage: xcheck_optim.py AMPDIAG WORKDIR
"""
import os
import sys

import h5py
import torch

from common import Tap, batches, run_ampdiag, save_weights
from mlp import MLP, layer_shapes, make_data

STEPS = 50
BATCH = 64
TOL = 1e-4  # relative, per step (the goal for 50 steps)
CONFIGS = [
    ("adamw", ["--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0.01"]),
    ("sgd", ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--weight-decay", "0.001"]),
]


def torch_losses(model, opt, x, y):
    out = []
    for xb, yb in batches(x, y, STEPS, BATCH):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def main():
    ampdiag, work = sys.argv[1], sys.argv[2]
    torch.manual_seed(3)
    torch.set_num_threads(1)
    data = os.path.join(work, "xcheck-data.h5")
    x, y = make_data(data)
    shapes = layer_shapes(ampdiag, data, work)
    tap = Tap()
    for name, args in CONFIGS:
        model = MLP(shapes)
        w0 = os.path.join(work, "w0-%s.h5" % name)
        save_weights(model, w0)
        trace = os.path.join(work, "xcheck-%s.h5" % name)
        run_ampdiag(ampdiag, "run", "--precision", "fp32", "--data", data, "--init-from", w0, "--shuffle", "off",
                    "--steps", STEPS, "--batch", BATCH, "--progress", "none", "--overwrite", "-o", trace, *args)
        with h5py.File(trace, "r") as f:
            mine = [float(v) for v in f["steps"]["loss"]]
        p = {k: float(args[args.index(k) + 1]) for k in args if k.startswith("--") and k != "--optimizer"}
        if name == "adamw":
            opt = torch.optim.AdamW(model.parameters(), lr=p["--lr"], weight_decay=p["--weight-decay"])
        else:
            opt = torch.optim.SGD(model.parameters(), lr=p["--lr"], momentum=p["--momentum"],
                                  weight_decay=p["--weight-decay"])
        theirs = torch_losses(model, opt, x, y)
        rel = [abs(a - b) / abs(b) for a, b in zip(mine, theirs)]
        worst = max(rel) if len(mine) == STEPS else float("inf")
        tap.ok(len(mine) == STEPS and worst <= TOL,
               "FP32 %s: %d steps of ampdiag's losses within %g relative of PyTorch's "
               "(worst %.2e at step %d; first %.6f / %.6f, last %.6f / %.6f)" %
               (name, STEPS, TOL, worst, rel.index(worst) if rel else -1, mine[0], theirs[0], mine[-1], theirs[-1]))
    # the constants tests/t_layers.c and tests/t_scaler.c hold PyTorch to: ReLU's backward at
    # NaN, -inf, inf, -1 with upstream gradients 2, 3, 5, 7; GradScaler's float32 scale after 165
    # and 166 backoffs from 2^16
    xin = torch.tensor([float("nan"), float("-inf"), float("inf"), -1.0], requires_grad=True)
    torch.relu(xin).backward(torch.tensor([2.0, 3.0, 5.0, 7.0]))
    g = xin.grad.tolist()
    tap.ok(g[0] == 2.0 and g[1] == 0.0 and g[2] == 5.0 and g[3] == 0.0,
           "PyTorch's ReLU backward passes the gradient where the input is NaN or > 0: %s "
           "(tests/t_layers.c expects [2, 0, 5, 0])" % g)
    scale = torch.full((1,), 65536.0)
    tracker = torch.zeros(1, dtype=torch.int32)
    found = torch.ones(1)
    seq = []
    for _ in range(166):
        torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2000)
        seq.append(scale.item())
    tap.ok(seq[164] == 2.0 ** -149 and seq[165] == 0.0,
           "GradScaler's float32 scale: %g after 165 backoffs, %g after 166 (tests/t_scaler.c expects 2^-149 and 0)"
           % (seq[164], seq[165]))
    return tap.plan()


if __name__ == "__main__":
    sys.exit(main())
