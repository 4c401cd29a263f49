"""TAP test: the PyTorch tracer's block-scaled what-if (Tracer(whatif=...), /quant rows): the rows
of a traced CPU run read back with h5py, against ampdiag_quant_whatif on the same tensors
(weights before each update, taken independently), with the tensors' 2-D shapes; the default
list on the histogram steps; "none"; a bad list refused naming the item.
Usage: test_whatif.py AMPDIAG TMPDIR"""
import copy
import os
import subprocess
import sys

import h5py
import numpy as np
import torch

import ampdiag.torch
from ampdiag import _quant

AMPDIAG, TMP = sys.argv[1], sys.argv[2]
n = 0
failed = 0


def ok(cond, msg):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n, msg))
    return cond


if not _quant.available():
    print("1..0 # SKIP libampdiag has no ampdiag_quant_whatif")
    sys.exit(0)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
path = os.path.join(TMP, "whatif.h5")
weights = []
with ampdiag.torch.trace(path, model, opt, trace_every=1, hist_every=2, overwrite=True,
                         whatif="mxfp8,nvfp4,fp8-current", whatif_every=1) as tr:
    for i in range(3):
        weights.append([copy.deepcopy(p.detach()) for p in model.parameters()])
        x, y = torch.randn(24, 64), torch.randint(0, 10, (24,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        tr.step(loss)
f = h5py.File(path, "r")
q = f["quant"][:]
names = [l["name"].decode() for l in f["layers"][:]]
ok(f.attrs["quant_schemes"].decode().startswith("mxfp8-e4m3:floor@row") and int(f.attrs["quant_every"]) == 1,
   "root attributes: quant_schemes %s, quant_every 1" % f.attrs["quant_schemes"].decode())
kinds = {"activation": 0, "activation_grad": 1, "weight": 2, "weight_grad": 3}
seen = set((int(r["step"]), names[int(r["layer"])], int(r["kind"])) for r in q)
ok(all((s, "0", k) in seen for s in range(3) for k in kinds.values()),
   "every step has rows for the first linear layer's activations, gradients, weights and weight gradients")
specs = _quant.parse("mxfp8,nvfp4,fp8-current")
li = names.index("0")
bad = 0
for step in range(3):
    w = torch.cat([t.reshape(-1) for t in weights[step][:2]]).numpy()
    want = _quant.whatif(w, 48, 64, specs)
    for s, g in zip(specs, want):
        rows = [r for r in q if int(r["step"]) == step and int(r["layer"]) == li and int(r["kind"]) == 2 and
                int(r["scheme"]) == s.scheme and int(r["format"]) == s.elem and int(r["direction"]) == s.dir]
        if len(rows) != 1:
            bad += 1
            continue
        r = rows[0]
        bad += int(r["count"]) != g.count or int(r["flushed"]) != g.flushed or int(r["blocks"]) != g.blocks or \
            int(r["disagree"]) != g.disagree or abs(float(r["err_sq"]) - g.err_sq) > 1e-12 * max(g.err_sq, 1e-300)
ok(bad == 0, "the weight rows of 3 steps equal ampdiag_quant_whatif on the weights before each update "
   "(a 48 x 64 matrix and its bias: %d mismatches)" % bad)
act = [r for r in q if int(r["step"]) == 0 and int(r["layer"]) == li and int(r["kind"]) == 0 and
       int(r["scheme"]) == 1 and int(r["direction"]) == 1]
ok(len(act) == 1 and int(act[0]["count"]) == 24 * 48 and int(act[0]["blocks"]) == 24 * 2,
   "the activation [24, 48] has 24 x 2 rowwise MX blocks of 32 (the last of 16 values)")
tiles = [r for r in q if int(r["direction"]) == 3]
ok(tiles and all(int(r["kind"]) == 2 for r in tiles), "2-D tiles (NVFP4 16x16) for weights only")
rc = subprocess.run([AMPDIAG, "info", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
ok(rc.returncode == 0, "ampdiag info reads the trace")
f.close()

# the default list, on the histogram steps
path2 = os.path.join(TMP, "whatif2.h5")
with ampdiag.torch.trace(path2, model, opt, trace_every=1, hist_every=2, overwrite=True) as tr:
    for i in range(3):
        loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 64)), torch.randint(0, 10, (8,)))
        loss.backward()
        opt.step()
        opt.zero_grad()
        tr.step(loss)
with h5py.File(path2, "r") as f2:
    q2 = f2["quant"][:]
    steps = sorted(set(int(r["step"]) for r in q2))
    ok(steps == [0, 2] and f2.attrs["quant_schemes"].decode() == _quant.default_list().replace("mxfp8", "mxfp8-e4m3:floor").replace("nvfp4@row", "nvfp4:e4m3@row"),
       "by default %s on the histogram steps (0 and 2)" % _quant.default_list())
path3 = os.path.join(TMP, "whatif3.h5")
with ampdiag.torch.trace(path3, model, opt, trace_every=1, overwrite=True, whatif="none") as tr:
    loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 64)), torch.randint(0, 10, (8,)))
    loss.backward()
    opt.step()
    opt.zero_grad()
    tr.step(loss)
with h5py.File(path3, "r") as f3:
    ok(len(f3["quant"]) == 0 and "quant_schemes" not in f3.attrs, "whatif='none': no rows")
try:
    ampdiag.torch.Tracer(os.path.join(TMP, "bad.h5"), model, opt, whatif="mxfp8@diag", overwrite=True)
    ok(False, "a bad whatif list is refused")
except ValueError as e:
    ok("mxfp8@diag" in str(e), "a bad whatif list is refused naming the item: %s" % e)
print("1..%d" % n)
sys.exit(1 if failed else 0)
