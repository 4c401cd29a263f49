"""mlp.py - ampdiag's default mlp in PyTorch, with its data and weights, for the tests that
check ampdiag against PyTorch (xcheck_optim.py, xcheck_tracer.py).

The mlp is fc1..fc4 (Linear) with relu1..relu3 (ReLU) between them and softmax cross-entropy,
named as ampdiag names its layers. The data is a small HDF5 classification file (x, y, x_val,
y_val) that `ampdiag run --data` reads; with `--shuffle off` ampdiag takes batches of B
consecutive rows, wrapping at the end (src/train/data.c), as common.batches() does.
"""
import os

import h5py
import numpy as np
import torch

from common import run_ampdiag

NAMES = ("fc1", "fc2", "fc3", "fc4")


def make_data(path, n=1024, d=32, k=10, seed=7):
    """Gaussian blobs in d features, k classes: n training rows and 128 validation rows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, (k, d)).astype(np.float32)
    y = rng.integers(0, k, n).astype(np.int32)
    x = (centres[y] + rng.normal(0, 2.0, (n, d))).astype(np.float32)
    yv = rng.integers(0, k, 128).astype(np.int32)
    xv = (centres[yv] + rng.normal(0, 2.0, (128, d))).astype(np.float32)
    with h5py.File(path, "w") as f:
        f["x"], f["y"], f["x_val"], f["y_val"] = x, y, xv, yv
    return x, y


def layer_shapes(ampdiag, data, work):
    """Names and weight shapes of the mlp's linear layers, from a weights file that
    `ampdiag run --save-weights` writes (one step on the data)."""
    w = os.path.join(work, "shapes.h5")
    run_ampdiag(ampdiag, "run", "--data", data, "--steps", "1", "--progress", "none", "--trace-every", "0",
                "--overwrite", "-o", os.path.join(work, "shapes-trace.h5"), "--save-weights", w)
    with h5py.File(w, "r") as f:
        return [(name, f[name]["weight"].shape) for name in NAMES]


class MLP(torch.nn.Module):
    def __init__(self, shapes):
        super().__init__()
        for i, (name, s) in enumerate(shapes):
            self.add_module(name, torch.nn.Linear(s[1], s[0]))
            if i + 1 < len(shapes):
                self.add_module("relu%d" % (i + 1), torch.nn.ReLU())

    def forward(self, x):
        for m in self.children():
            x = m(x)
        return x
