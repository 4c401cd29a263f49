"""common.py - what the PyTorch test scripts of this folder share: the package from the source
tree on the import path, TAP output, running `ampdiag`, reading traces, weights files, and the
comparison of two traces' step-0 tensor records (xcheck_tracer.py, xcheck_transformer.py).
"""
import math
import os
import subprocess
import sys

import h5py
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

KINDS = ["activation", "activation_grad", "weight", "weight_grad", "update"]
EXACT = ["count", "n_nan", "n_posinf", "n_neginf", "n_zero", "n_neg", "n_pos", "lost_updates"]
WHATIF = ["fp16_overflow", "fp16_underflow", "fp16_subnormal", "bf16_overflow", "bf16_underflow",
          "bf16_subnormal"]
VALUES = ["min", "max", "absmax", "absmin_nz", "mean", "rms"]


class Tap:
    """Numbered TAP lines; plan() prints the plan and gives the exit status."""

    def __init__(self):
        self.n = 0
        self.failed = False

    def ok(self, cond, msg):
        self.n += 1
        self.failed |= not cond
        print("%s %d - %s" % ("ok" if cond else "not ok", self.n, msg))
        sys.stdout.flush()
        return cond

    def skip(self, msg):
        self.n += 1
        print("ok %d # SKIP %s" % (self.n, msg))

    def plan(self):
        print("1..%d" % self.n)
        return 1 if self.failed else 0


def run_ampdiag(ampdiag, *args, **kw):
    """ampdiag with these arguments; raises when it fails (a test needs its output)."""
    return subprocess.run([ampdiag] + [str(a) for a in args], check=True, stdout=subprocess.DEVNULL, **kw)


def save_weights(model, path):
    """The model's parameters as a weights file `ampdiag run --init-from` reads: the parameter
    `a.b.weight` at /a.b/weight."""
    with h5py.File(path, "w") as f:
        for name, p in model.named_parameters():
            layer, param = name.rsplit(".", 1)
            f[layer + "/" + param] = p.detach().numpy()


def batches(x, y, steps, batch):
    """The batches of `ampdiag run --shuffle off`: B consecutive rows, wrapping at the end
    (src/train/data.c); y as int64."""
    n = x.shape[0]
    pos = 0
    for _ in range(steps):
        rows = [(pos + i) % n for i in range(batch)]
        pos = (pos + batch) % n
        yield torch.from_numpy(x[rows]), torch.from_numpy(y[rows]).long()


def records(path, step):
    """{(layer name, kind): /tensors row} of one step, and the /steps table."""
    with h5py.File(path, "r", swmr=True) as f:
        names = [n.decode() for n in f["layers"]["name"]]
        kname = {v: k for k, v in h5py.check_enum_dtype(f["tensors"].dtype["kind"]).items()}
        out = {}
        for r in f["tensors"][:]:
            if r["step"] == step:
                out[(names[r["layer"]], kname[r["kind"]])] = r
        return out, f["steps"][:]


def rel(a, b):
    a, b = float(a), float(b)
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def worst_rel(xs, ys):
    """The largest relative difference of two equally long sequences (inf when their lengths
    differ)."""
    if len(xs) != len(ys) or not len(xs):
        return math.inf
    return max(rel(p, q) for p, q in zip(xs, ys))


def compare_record(tap, key, ra, rb, tol, handful, slack=None, tols=None, note=""):
    """One TAP line: records ra and rb of the same layer and kind agree: the counts exactly, the
    what-if counts within `handful`, the extremes and the rms within tol relative, the mean and the
    smallest non-zero |x| within tol of the rms (a mean near 0, or a value that cancelled to near
    0, keeps no relative precision between two orders of summation). slack {field: n} and tols
    {field: tol} loosen single fields where the caller knows why (note says it). Returns how far
    the what-if counts were off in all."""
    slack, tols = slack or {}, tols or {}
    bad_exact = [f for f in EXACT if abs(int(ra[f]) - int(rb[f])) > slack.get(f, 0)]
    bad_whatif = [f for f in WHATIF if abs(int(ra[f]) - int(rb[f])) > slack.get(f, handful)]
    diff_whatif = sum(abs(int(ra[f]) - int(rb[f])) for f in WHATIF)
    dev = {f: rel(ra[f], rb[f]) for f in VALUES if f not in ("mean", "absmin_nz")}
    for f in ("mean", "absmin_nz"):
        dev[f] = abs(float(ra[f]) - float(rb[f])) / max(float(ra["rms"]), 1e-30)
    over = [f for f in VALUES if dev[f] > tols.get(f, tol)]
    worst_f = max(dev, key=dev.get)
    loose = [f for f in EXACT if int(ra[f]) != int(rb[f])]
    tap.ok(not bad_exact and not bad_whatif and not over,
           "step 0 %s %s: counts equal%s%s, what-if counts within %d (off by %d in all%s), values within %g "
           "(worst %s %.1e%s)%s" % (
               key[0], key[1], "" if not loose else " but " + ",".join(
                   "%s %d/%d" % (f, ra[f], rb[f]) for f in loose),
               "" if not bad_exact else " (allowed: %s)" % slack, handful, diff_whatif,
               "" if not bad_whatif else "; " + ",".join("%s %d/%d" % (f, ra[f], rb[f]) for f in bad_whatif),
               tol, worst_f, dev[worst_f], "" if not over else "; over: " + ",".join(over),
               " (" + note + ")" if note else ""))
    return diff_whatif
