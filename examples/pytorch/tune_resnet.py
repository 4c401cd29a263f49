#!/usr/bin/env python3
"""tune_resnet.py - torchvision's resnet18 (random initial weights, 10 classes) on synthetic
32x32 images, on the CPU: a real model for `ampdiag tune -- CMD` (docs/pytorch.md, "tune on your
own script"). No download: each class is a fixed random image (its template, smoothed), an
example is its class's template under noise, the same data in every run.

    python examples/pytorch/tune_resnet.py --precision bf16 --trace run.h5       # by hand
    ampdiag tune -o tuned --precisions fp32,bf16 -- python examples/pytorch/tune_resnet.py

The lines that opt in to tune are marked "tune:" (as in tune_example.py).
"""
import argparse
import os
import sys

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # the package of this source tree
import ampdiag.torch  # noqa: E402

F = torch.nn.functional


def make_data(noise, n_train=1024, n_val=256, classes=10):
    """Class templates (random, smoothed 4x4 blocks) plus Gaussian noise; a generator of its own."""
    g = torch.Generator().manual_seed(1234)
    templates = F.interpolate(torch.randn(classes, 3, 8, 8, generator=g), size=32, mode="bilinear")
    y = torch.randint(0, classes, (n_train + n_val,), generator=g)
    x = templates[y] + noise * torch.randn(n_train + n_val, 3, 32, 32, generator=g)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def evaluate(model, val, cfg):
    """Each validation example's loss (float32) and whether it was predicted right."""
    x, y = val
    model.eval()
    with torch.no_grad(), cfg.autocast("cpu"):
        logits = model(x).float()
    model.train()
    return F.cross_entropy(logits, y, reduction="none"), (logits.argmax(1) == y).double()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16", "bf16"))
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--noise", type=float, default=2.0, help="the noise's standard deviation (templates ~1)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trace", default=None, help="trace into this file (under ampdiag tune: tune's)")
    args = ap.parse_args()

    # tune: the script's own settings, overridden by what ampdiag tune sets (nothing, by hand)
    cfg = ampdiag.torch.tune_config(precision=args.precision, lr=args.lr, steps=args.steps, seed=args.seed)
    torch.manual_seed(cfg.seed)
    train, val = make_data(args.noise)
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)  # tune: cfg.lr
    scaler = cfg.scaler("cpu")                               # tune: a GradScaler for fp16 (else disabled)
    x, y = train
    g = torch.Generator().manual_seed(cfg.seed + 1)
    attrs = {"model": "resnet18", "data": "synthetic 32x32, 10 classes", "data_classes": 10,
             "data_val_rows": len(val[1]), "data_val_chance": float(torch.bincount(val[1]).max()) / len(val[1])}
    with cfg.trace(model, opt, scaler, path=args.trace, attrs=attrs) as tracer:  # tune: the trace
        per, correct = evaluate(model, val, cfg)  # tune: the initial evaluation
        tracer.eval(per.mean(), correct.mean(), examples=per, example_metric=correct, initial=True)
        for t in range(cfg.steps):
            idx = torch.randint(0, len(y), (args.batch,), generator=g)
            with cfg.autocast("cpu"):                        # tune: autocast's dtype
                loss = F.cross_entropy(model(x[idx]), y[idx])
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            cfg.clip(model.parameters())                     # tune: clip_grad_norm_ when set
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            tracer.step(loss)
            if cfg.evaluating(t):
                per, correct = evaluate(model, val, cfg)
                tracer.eval(per.mean(), correct.mean(), examples=per, example_metric=correct)
    print("%s lr %g: eval loss %.4f, accuracy %.1f%%" % (cfg.precision, cfg.lr, float(per.mean()),
                                                       100 * float(correct.mean())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
