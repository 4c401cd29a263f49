#!/usr/bin/env python3
"""digits_cnn.py - a small CNN on scikit-learn's 8x8 digits, trained three times (FP32, BF16
autocast, FP16 autocast with GradScaler) and traced with ampdiag.torch; then `ampdiag compare`
says which precision to use and `ampdiag plot` draws the charts.

    pip install ./python scikit-learn     # the data ships with scikit-learn: no download
    python examples/pytorch/digits_cnn.py --out digits

writes digits/digits-{fp32,bf16,fp16}.h5, digits/compare.md and digits/plots/*.png. On a machine
with a GPU the runs use it (--device cpu to stay on the CPU). The ampdiag program is taken from
--ampdiag, else from the source tree this script is in (after make), else from PATH.
"""
import argparse
import os
import shutil
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # the package of this source tree
import ampdiag.torch  # noqa: E402


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.relu1 = torch.nn.ReLU()
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.relu2 = torch.nn.ReLU()
        self.pool = torch.nn.MaxPool2d(2)
        self.flat = torch.nn.Flatten()
        self.fc1 = torch.nn.Linear(32 * 4 * 4, 64)
        self.relu3 = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = self.pool(self.relu2(self.conv2(self.relu1(self.conv1(x)))))
        return self.fc2(self.relu3(self.fc1(self.flat(x))))


def digits(device):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target, dtype=torch.long)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(y), generator=g)
    x, y = x[perm].to(device), y[perm].to(device)
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def evaluate(model, val):
    x, y = val
    with torch.no_grad():
        model.eval()
        logits = model(x).float()
        model.train()
    per = torch.nn.functional.cross_entropy(logits, y, reduction="none")
    se = float(per.std() / len(per) ** 0.5)
    return float(per.mean()), float((logits.argmax(1) == y).float().mean()), se


def train(precision, path, args, data, val):
    torch.manual_seed(1)
    dev = torch.device(args.device)
    model = CNN().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(dev.type) if precision == "fp16" else None
    x, y = data
    g = torch.Generator().manual_seed(2)
    with ampdiag.torch.trace(path, model, opt, scaler, overwrite=True, trace_every=args.trace_every,
                             steps=args.steps, attrs={"model": "digits-cnn", "data": "sklearn digits 8x8",
                                                      "seed": 1}) as tracer:
        for t in range(args.steps):
            idx = torch.randint(0, len(y), (args.batch,), generator=g).to(dev)
            with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
                loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            opt.zero_grad(set_to_none=True)
            tracer.step(loss)
            if (t + 1) % 100 == 0 or t + 1 == args.steps:
                with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
                    el, acc, se = evaluate(model, val)
                tracer.eval(el, acc, se)
    print("%s: final eval loss %.4f, accuracy %.1f%% -> %s" % (precision, el, 100 * acc, path))


def find_ampdiag(given):
    if given:
        return given
    tree = os.path.join(HERE, "..", "..", "ampdiag")
    return tree if os.access(tree, os.X_OK) else shutil.which("ampdiag")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="digits")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--trace-every", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--ampdiag", default=None)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    data, val = digits(args.device)
    paths = []
    for precision in ("fp32", "bf16", "fp16"):
        p = os.path.join(args.out, "digits-%s.h5" % precision)
        train(precision, p, args, data, val)
        paths.append(p)
    exe = find_ampdiag(args.ampdiag)
    if not exe:
        print("ampdiag not found (build it, or --ampdiag PATH): run `ampdiag compare %s`" % " ".join(paths))
        return 0
    md = os.path.join(args.out, "compare.md")
    with open(md, "w") as f:
        r = subprocess.run([exe, "compare"] + paths + ["--format", "md", "--plots", "plots"], stdout=f)
    subprocess.run([exe, "compare"] + paths)
    r2 = subprocess.run([exe, "plot"] + paths + ["-o", os.path.join(args.out, "plots")])
    print("compare: %s (exit %d); charts: %s (exit %d)" % (md, r.returncode, os.path.join(args.out, "plots"),
                                                          r2.returncode))
    return 0 if r.returncode == 0 and r2.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
