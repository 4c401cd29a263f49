#!/usr/bin/env python3
"""tune_example.py - a training script that `ampdiag tune` can tune (docs/pytorch.md, "tune on
your own script"): a small MLP on synthetic data (labels from a random teacher network; no
download), on the CPU, a few seconds a run.

By hand it trains with its own options (and traces with --trace PATH):

    python examples/pytorch/tune_example.py --precision bf16 --lr 3e-3 --trace run.h5

Under tune, each configuration runs it with AMPDIAG_TUNE_* variables that tune_config() applies
(precision, lr, clip, loss scaler, FP32 modules, steps, seed) and the trace tune reads:

    ampdiag tune -o tuned -- python examples/pytorch/tune_example.py --lr 1.5

The lines that opt in are marked "tune:". --labels random makes labels that nothing can learn;
--fc1-scale 1e6 makes the first layer's outputs overflow FP16 (what --fp32-search finds).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # the package of this source tree
import ampdiag.torch  # noqa: E402

F = torch.nn.functional


class MLP(torch.nn.Module):
    def __init__(self, d_in=32, hidden=128, classes=4, fc1_scale=1.0):
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, hidden)
        # fc1_scale != 1: fc1's weights that much larger and a LayerNorm after it (inputs in raw
        # units: fc1's outputs overflow FP16's 65504 when it is large, the rest is normalised)
        self.norm1 = torch.nn.LayerNorm(hidden) if fc1_scale != 1.0 else torch.nn.Identity()
        self.act1 = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(hidden, hidden)
        self.act2 = torch.nn.GELU()
        self.head = torch.nn.Linear(hidden, classes)
        with torch.no_grad():  # near-uniform predictions at the start: the initial loss is ln(classes)
            self.head.weight.mul_(0.01)
            self.head.bias.zero_()
            self.fc1.weight.mul_(fc1_scale)
            self.fc1.bias.mul_(fc1_scale)

    def forward(self, x):
        return self.head(self.act2(self.fc2(self.act1(self.norm1(self.fc1(x))))))


def make_data(labels, n_train=2048, n_val=512, d_in=32, classes=4):
    """Inputs N(0, 1); labels the argmax of a random teacher network (learnable), or drawn at
    random (nothing to learn). The same data in every run (its own generator)."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n_train + n_val, d_in, generator=g)
    if labels == "random":
        y = torch.randint(0, classes, (n_train + n_val,), generator=g)
    else:
        w1 = torch.randn(d_in, 64, generator=g) / d_in ** 0.5
        w2 = torch.randn(64, classes, generator=g) / 8.0
        y = (torch.tanh(x @ w1) @ w2).argmax(1)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def evaluate(model, val, cfg):
    """The validation set's per-example losses (in float32) and correct predictions."""
    x, y = val
    model.eval()
    with torch.no_grad(), cfg.autocast("cpu"):
        logits = model(x).float()
    model.train()
    per = F.cross_entropy(logits, y, reduction="none")
    return per, (logits.argmax(1) == y).double()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16", "bf16"))
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--clip", type=float, default=0.0, help="clip_grad_norm_'s max_norm (0: none)")
    ap.add_argument("--scaler", default="dynamic", choices=("dynamic", "none"), help="fp16's GradScaler")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--labels", default="teacher", choices=("teacher", "random"))
    ap.add_argument("--fc1-scale", type=float, default=1.0,
                    help="fc1's weights times this, a LayerNorm after it (1e6: fc1 overflows FP16)")
    ap.add_argument("--eval-every", type=int, default=0, help="also evaluate every N steps (0: at the end)")
    ap.add_argument("--trace", default=None, help="trace into this file (under ampdiag tune: tune's)")
    args = ap.parse_args()

    # tune: the script's own settings, overridden by what ampdiag tune sets (nothing, by hand)
    cfg = ampdiag.torch.tune_config(precision=args.precision, lr=args.lr, steps=args.steps, clip=args.clip,
                                    scaler=args.scaler, seed=args.seed, eval_every=args.eval_every)
    torch.manual_seed(cfg.seed)
    train, val = make_data(args.labels)
    model = MLP(fc1_scale=args.fc1_scale)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)  # tune: cfg.lr
    scaler = cfg.scaler("cpu")                               # tune: the GradScaler (or a disabled one)
    x, y = train
    g = torch.Generator().manual_seed(cfg.seed + 1)
    yv = val[1]
    data = {"model": "tune_example mlp", "data": "synthetic, %s labels" % args.labels, "data_classes": 4,
            "data_val_rows": len(yv), "data_val_chance": float(torch.bincount(yv).max()) / len(yv)}
    with cfg.trace(model, opt, scaler, path=args.trace, attrs=data) as tracer:
        per, correct = evaluate(model, val, cfg)  # tune: the initial evaluation, what learning is measured against
        tracer.eval(per.mean(), correct.mean(), examples=per, example_metric=correct, initial=True)
        for t in range(cfg.steps):
            idx = torch.randint(0, len(y), (args.batch,), generator=g)
            with cfg.autocast("cpu"):                        # tune: autocast's dtype
                loss = F.cross_entropy(model(x[idx]), y[idx])
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            cfg.clip(model.parameters())                     # tune: clip_grad_norm_(max_norm) when set
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            tracer.step(loss)
            if cfg.evaluating(t):
                per, correct = evaluate(model, val, cfg)
                tracer.eval(per.mean(), correct.mean(), examples=per, example_metric=correct)
    print("%s lr %g: eval loss %.4f, accuracy %.1f%%%s" % (cfg.precision, cfg.lr, float(per.mean()),
                                                         100 * float(correct.mean()),
                                                         " -> " + tracer.path if tracer.path else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
