#!/usr/bin/env python3
"""test_dist.py - per-rank traces of data-parallel training (python/ampdiag/dist.py): runs
tests/pytorch/dist_train.py under ``python -m torch.distributed.run --nproc_per_node 2`` on the
CPU with gloo and reads the traces back with h5py (and `ampdiag info`). Prints TAP.

* DDP: one trace per rank (run.rank0.h5, run.rank1.h5) with rank, world_size, dist_backend,
  grad_reduce_dtype and sharding; the step records line up; the weight-gradient records and the
  gradient norm are the same bits on both ranks (they are read after the all-reduce), so are the
  weights (replicas), while each rank's activations and loss are its own batch's.
* FSDP2: the same training sharded: the same losses per rank as DDP, each rank's weight and
  gradient records cover its shard (the counts add up to the layer), and the shards together
  give DDP's weight sums of squares and gradient norm.
* A NaN in rank 1's batch: rank 1's trace holds the first non-finite record (fc1's activation at
  step 3, nan_forward, its skip reason); rank 0's activations stay finite and its first
  non-finite records are the reduced weight gradients; both skip step 3 only.
* Rank 1's replica perturbed before step 2: fc1's weight records differ across the ranks from
  step 2 on and agree before; every other weight and every weight gradient still agree.
* Accelerate's and Lightning's DDP (the tracer given the prepared model as wrapper; the
  Lightning callback): the same per-rank traces as the plain DDP run.
* Rank 1 stops before step 3: both traces hold steps 0..2, neither says complete, and rank 1's
  stop event names its error at step 2 while rank 0's is at step 3.
* Reading the ranks together (`ampdiag info` / `compare --format json` of a group: the rank-0
  trace or a glob): the poisoned run names rank 1, step 3, fc1's activations first (rank 0's own
  first the fc2 weight gradient), the perturbed one fc1's replicas from step 2, the stopped one
  rank 1 at step 2; the FSDP2 run merged from its shards is the DDP run (gradient norms, update
  ratio, the weights' values), with no shard missing.

usage: test_dist.py AMPDIAG WORKDIR   (python/ on PYTHONPATH, AMPDIAG_LIB set or a built tree)
"""
import json
import math
import os
import subprocess
import sys

import h5py

from common import Tap

AMPDIAG, WORK = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
TAP = Tap()
ok = TAP.ok
STEPS = 6
PARAMS = {"fc1": 8 * 16 + 16, "fc2": 16 * 4 + 4}


def torchrun(*scenarios):
    # torch.distributed.run makes a torchelastic_* directory in TMPDIR per launch and leaves it:
    # under WORK, which the test removes
    tmp = os.path.join(WORK, "tmp")
    os.makedirs(tmp, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", TMPDIR=tmp)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
           os.path.join(HERE, "dist_train.py"), WORK] + list(scenarios)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return p.returncode, p.stdout + p.stderr


def read(name, rank):
    p = os.path.join(WORK, "%s.rank%d.h5" % (name, rank))
    with h5py.File(p, "r", swmr=True) as f:  # swmr: a trace cut off by a kill is still marked open
        names = [n.decode() for n in f["layers"]["name"]]
        kmap = {v: k for k, v in h5py.check_enum_dtype(f["tensors"].dtype["kind"]).items()}
        cmap = {v: k for k, v in h5py.check_enum_dtype(f["events"].dtype["code"]).items()}
        tens = {}
        for r in f["tensors"][:]:
            tens[(int(r["step"]), names[r["layer"]], kmap[r["kind"]])] = r
        events = [(int(e["step"]), names[e["layer"]] if e["layer"] >= 0 else None, cmap[e["code"]],
                   e["message"].decode()) for e in f["events"][:]]
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        return {"path": p, "names": names, "tensors": tens, "steps": f["steps"][:], "events": events,
                "attrs": attrs}


FIELDS = ("count", "n_nan", "n_posinf", "n_neginf", "n_zero", "n_neg", "n_pos", "min", "max", "absmax",
          "absmin_nz", "mean", "rms")


def same(a, b):
    """Two records hold the same statistics (bit for bit; NaN equals NaN)."""
    for k in FIELDS:
        x, y = a[k], b[k]
        if not (x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))):
            return False
    return True


def sumsq(r):
    return float(r["rms"]) ** 2 * int(r["count"])


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def nonfinite(r):
    return r["n_nan"] + r["n_posinf"] + r["n_neginf"] > 0


def first_nonfinite(tr):
    """The first record holding NaN/inf in execution order: by step, the forward pass (layers in
    /layers order), then the backward pass (activation gradients, then weight gradients, layers
    in reverse)."""
    for t in range(STEPS):
        order = [(n, "activation") for n in tr["names"]]
        for n in reversed(tr["names"]):
            order += [(n, "activation_grad"), (n, "weight_grad")]
        for n, k in order:
            r = tr["tensors"].get((t, n, k))
            if r is not None and nonfinite(r):
                return t, n, k
    return None


def ampdiag_json(*args):
    """`ampdiag ARGS --format json`: (exit status, the JSON or {}, stderr)."""
    p = subprocess.run([AMPDIAG] + list(args) + ["--format", "json"], capture_output=True, text=True)
    try:
        return p.returncode, json.loads(p.stdout), p.stderr
    except ValueError:
        return p.returncode, {}, p.stderr


def rank_finding(ranks, fid):
    """The first rank finding of an id in a run's ranks object, its figures' values by name."""
    for f in (ranks or {}).get("findings", []):
        if f["id"] == fid:
            v = {k: x["value"] for k, x in f["figures"].items()}
            v.update(layer=f["layer"], kind=f["kind"])
            return v
    return None


def check_attrs(tr, rank, sharding):
    a = tr["attrs"]
    ok(a.get("rank") == rank and a.get("world_size") == 2 and a.get("dist_backend") == "gloo" and
       a.get("sharding") == sharding and a.get("grad_reduce_dtype") == "fp32",
       "%s: rank %d of 2, gloo, %s, gradients reduced in fp32 (%s)" % (
           os.path.basename(tr["path"]), rank, sharding,
           {k: a.get(k) for k in ("rank", "world_size", "dist_backend", "sharding", "grad_reduce_dtype")}))


def lined_up(name, ranks):
    steps = [list(map(int, tr["steps"]["step"])) for tr in ranks]
    ok(all(s == list(range(STEPS)) for s in steps) and all(tr["attrs"]["status"] == "complete" for tr in ranks),
       "%s: both ranks complete, step records 0..%d on each (%s)" % (name, STEPS - 1, steps))


# ---------------------------------------------------------------------- the runs
rc, out = torchrun("ddp", "fsdp", "poison", "perturb", "accelerate", "lightning")
if not ok(rc == 0, "torchrun --nproc_per_node 2 (gloo): ddp, fsdp, poison, perturb, accelerate, lightning ran "
          "(exit %d)" % rc):
    for line in out.splitlines()[-40:]:
        print("# " + line)
    sys.exit(TAP.plan())

# ---------------------------------------------------------------------- DDP
ddp = [read("ddp", r) for r in (0, 1)]
ok(not os.path.exists(os.path.join(WORK, "ddp.h5")), "no rank wrote the path as given (ddp.h5): one trace per rank")
for r in (0, 1):
    check_attrs(ddp[r], r, "replicated")
lined_up("ddp", ddp)
wg = [(t, n) for t in range(STEPS) for n in PARAMS]
ok(all(same(ddp[0]["tensors"][(t, n, "weight_grad")], ddp[1]["tensors"][(t, n, "weight_grad")]) for t, n in wg),
   "ddp: every weight_grad record is the same on both ranks (read after the all-reduce)")
g0, g1 = list(ddp[0]["steps"]["grad_norm"]), list(ddp[1]["steps"]["grad_norm"])
ok(g0 == g1 and all(math.isfinite(x) and x > 0 for x in g0), "ddp: the gradient norms are the same on both ranks")
ok(all(same(ddp[0]["tensors"][(t, n, "weight")], ddp[1]["tensors"][(t, n, "weight")]) for t, n in wg),
   "ddp: the replicas' weight records agree at every step")
l0, l1 = list(ddp[0]["steps"]["loss"]), list(ddp[1]["steps"]["loss"])
a0 = [ddp[0]["tensors"][(t, "fc1", "activation")] for t in range(STEPS)]
a1 = [ddp[1]["tensors"][(t, "fc1", "activation")] for t in range(STEPS)]
ok(all(x != y for x, y in zip(l0, l1)) and all(not same(x, y) for x, y in zip(a0, a1)) and
   all(int(x["count"]) == 4 * 16 for x in a0 + a1),
   "ddp: each rank's loss and activations are its own batch's (4 rows, fc1 output 64 values)")
info = subprocess.run([AMPDIAG, "info", "--format", "json", ddp[1]["path"]], capture_output=True, text=True)
try:
    attrs = json.loads(info.stdout).get("attributes", {})
except ValueError:
    attrs = {}
ok(info.returncode == 0 and attrs.get("rank") == 1 and attrs.get("sharding") == "replicated",
   "ampdiag info reads rank 1's trace and shows its rank attributes (exit %d)" % info.returncode)

# ---------------------------------------------------------------------- FSDP2
fsdp = [read("fsdp", r) for r in (0, 1)]
for r in (0, 1):
    check_attrs(fsdp[r], r, "sharded")
lined_up("fsdp", fsdp)
worst = max(rel(float(x), float(y)) for r in (0, 1) for x, y in zip(fsdp[r]["steps"]["loss"], ddp[r]["steps"]["loss"]))
ok(worst < 1e-5, "fsdp: each rank's losses are its DDP losses (the same training; worst rel. diff %.2g)" % worst)
counts = {n: [int(fsdp[r]["tensors"][(0, n, "weight")]["count"]) for r in (0, 1)] for n in PARAMS}
gcounts = {n: [int(fsdp[r]["tensors"][(0, n, "weight_grad")]["count"]) for r in (0, 1)] for n in PARAMS}
ok(all(sum(counts[n]) == PARAMS[n] and 0 < counts[n][0] < PARAMS[n] for n in PARAMS) and gcounts == counts,
   "fsdp: each rank's weight and weight_grad records are its shard; the shards add up to the layer (%s)" % counts)
worst = max(rel(sum(sumsq(fsdp[r]["tensors"][(t, n, k)]) for r in (0, 1)), sumsq(ddp[0]["tensors"][(t, n, k)]))
            for t in range(STEPS) for n in PARAMS for k in ("weight", "weight_grad"))
ok(worst < 1e-4, "fsdp: the shards' sums of squares of weights and gradients are DDP's (worst rel. diff %.2g)" % worst)
worst = max(rel(math.hypot(float(a), float(b)), float(c)) for a, b, c in
            zip(fsdp[0]["steps"]["grad_norm"], fsdp[1]["steps"]["grad_norm"], ddp[0]["steps"]["grad_norm"]))
ok(worst < 1e-5 and list(fsdp[0]["steps"]["grad_norm"]) != list(fsdp[1]["steps"]["grad_norm"]),
   "fsdp: grad_norm is each rank's shard's; together they give DDP's norm (worst rel. diff %.2g)" % worst)
rc, d, err = ampdiag_json("compare", fsdp[0]["path"], ddp[0]["path"])
runs = d.get("runs") or [{}, {}]
fr, dr = runs[0].get("ranks") or {}, runs[1].get("ranks") or {}
ok(rc == 0 and fr.get("sharding") == "sharded" and fr.get("shard_group") == 2 and dr.get("shard_group") == 1 and
   fr.get("merged_steps", {}).get("count") == STEPS and not rank_finding(fr, "rank_missing"),
   "fsdp: ampdiag reads the shards as one run (both ranks hold one copy), every step merged, no shard missing")
gf, gd = runs[0].get("grad_norm", {}), runs[1].get("grad_norm", {})
ok(gf.get("count") == gd.get("count") and rel(gf.get("median", 0), gd.get("median", 1)) < 1e-5 and
   rel(gf.get("p99", 0), gd.get("p99", 1)) < 1e-5,
   "fsdp: the merged run's gradient norms (the shards' together) are the DDP run's (%s vs %s)" %
   (gf.get("median"), gd.get("median")))
rc1, i1, _ = ampdiag_json("info", fsdp[0]["path"])
rc2, i2, _ = ampdiag_json("info", ddp[0]["path"])
v1 = i1.get("what_if", {}).get("fp16", {}).get("weight", {}).get("values")
v2 = i2.get("what_if", {}).get("fp16", {}).get("weight", {}).get("values")
u1 = i1.get("figures", {}).get("update_weight_ratio", {}).get("value")
u2 = i2.get("figures", {}).get("update_weight_ratio", {}).get("value")
ok(rc1 == rc2 == 0 and v1 == v2 == STEPS * sum(PARAMS.values()) and u1 is not None and u2 is not None and
   rel(u1, u2) < 1e-4,
   "fsdp: the merged weights hold every parameter at every step, and the update/weight ratio is DDP's (%s vs %s)" %
   (u1, u2))

# ---------------------------------------------------------------------- a NaN in rank 1's batch
po = [read("poison", r) for r in (0, 1)]
lined_up("poison", po)
f1, f0 = first_nonfinite(po[1]), first_nonfinite(po[0])
ok(f1 == (3, "fc1", "activation"), "poison: rank 1's first non-finite record is fc1's activation at step 3 (%s)" % (f1,))
ok(any(e[0] == 3 and e[1] == "fc1" and e[2] == "nan_forward" for e in po[1]["events"]) and
   po[1]["steps"]["skip_reason"][3].decode() == "nan in fc1 activation (forward)" and
   math.isnan(po[1]["steps"]["loss"][3]),
   "poison: rank 1 has the NaN loss, the nan_forward event on fc1 and the skip reason at step 3")
fwd0 = [po[0]["tensors"][(3, n, k)] for n in PARAMS for k in ("activation", "activation_grad")]
ok(f0 is not None and f0[0] == 3 and f0[2] == "weight_grad" and not any(nonfinite(r) for r in fwd0) and
   math.isfinite(po[0]["steps"]["loss"][3]) and "weight_grad" in po[0]["steps"]["skip_reason"][3].decode(),
   "poison: rank 0's loss and its own activations and their gradients stay finite; its first non-finite "
   "records are the all-reduced weight gradients (%s; %s)" % (f0, po[0]["steps"]["skip_reason"][3].decode()))
sk = [list(map(int, tr["steps"]["skipped"])) for tr in po]
ok(sk[0] == sk[1] == [0, 0, 0, 1, 0, 0], "poison: both ranks' GradScalers skip step 3, and only it (%s)" % sk)
ok(all(math.isfinite(tr["steps"]["loss"][t]) for tr in po for t in (4, 5)), "poison: the skip kept both ranks finite after")
rc, d, err = ampdiag_json("compare", po[0]["path"])
run = (d.get("runs") or [{}])[0]
ranks = run.get("ranks") or {}
f = rank_finding(ranks, "rank_first_nonfinite")
ok(rc == 0 and "is rank 0 of 2" in err and f is not None and (f["rank"], f["step"], f["layer"], f["kind"], f["phase"]) ==
   (1, 3, "fc1", "activation", "forward") and run["evidence"][0]["id"] == "rank_first_nonfinite",
   "poison: ampdiag compare of rank 0's trace reads both ranks and names rank 1, step 3, fc1's activations first "
   "(exit %d; %s)" % (rc, f))
r0 = (ranks.get("ranks") or [{}])[0]
ok(r0.get("first_nonfinite") == {"step": 3, "layer": "fc2", "kind": "weight_grad", "phase": "backward"} and
   f is not None and f["ranks_affected"] == 2 and f["identified"] == 1,
   "poison: rank 0's own first non-finite record is the reduced fc2 weight gradient at step 3 (%s)" %
   r0.get("first_nonfinite"))

# ---------------------------------------------------------------------- rank 1's replica perturbed
pe = [read("perturb", r) for r in (0, 1)]
lined_up("perturb", pe)
w = [[pe[r]["tensors"][(t, "fc1", "weight")] for t in range(STEPS)] for r in (0, 1)]
ok(all(same(w[0][t], w[1][t]) for t in (0, 1)) and all(not same(w[0][t], w[1][t]) for t in range(2, STEPS)),
   "perturb: fc1's weight records agree at steps 0-1 and differ across ranks from step 2 on")
d = float(w[1][2]["mean"]) - float(w[0][2]["mean"])
ok(abs(d - 1e-3 * 128 / 144) < 1e-7,
   "perturb: rank 1's fc1 mean (weight and bias) is the other's + 1e-3 * 128/144 at step 2 (%.6g)" % d)
ok(all(same(pe[0]["tensors"][(t, "fc2", "weight")], pe[1]["tensors"][(t, "fc2", "weight")]) for t in range(STEPS)) and
   all(same(pe[0]["tensors"][(t, n, "weight_grad")], pe[1]["tensors"][(t, n, "weight_grad")]) for t, n in wg),
   "perturb: fc2's weights and every weight gradient (all-reduced) still agree across ranks")
rc, d, err = ampdiag_json("compare", os.path.join(WORK, "perturb.rank*.h5"))
ranks = ((d.get("runs") or [{}])[0]).get("ranks") or {}
f = rank_finding(ranks, "rank_replica_divergence")
divs = [g for g in ranks.get("findings", []) if g["id"] in ("rank_replica_divergence", "rank_reduced_grad_mismatch")]
ok(rc == 0 and f is not None and (f["layer"], f["first_step"], f["rank"], f["vs_rank"], f["steps"]) == ("fc1", 2, 1, 0, 4) and
   abs(f["delta_mean"] - 1e-3 * 128 / 144) < 1e-7 and len(divs) == 1,
   "perturb: ampdiag compare of the glob names fc1's replicas from step 2 (rank 1 vs 0, mean +1e-3 * 128/144), "
   "nothing else that must agree (exit %d; %s)" % (rc, f))

# ---------------------------------------------------------------------- Accelerate, Lightning
for name, prefix in (("accelerate", ""), ("lightning", "net.")):
    if os.path.exists(os.path.join(WORK, name + ".skip")):
        TAP.skip("%s is not installed" % name)
        continue
    tr = [read(name, r) for r in (0, 1)]
    for r in (0, 1):
        check_attrs(tr[r], r, "replicated")
    lined_up(name, tr)
    ok(all(list(tr[r]["steps"]["loss"]) == list(ddp[r]["steps"]["loss"]) for r in (0, 1)) and
       list(tr[0]["steps"]["grad_norm"]) == list(ddp[0]["steps"]["grad_norm"]) and
       all(same(tr[r]["tensors"][(t, prefix + n, "weight_grad")], ddp[0]["tensors"][(t, n, "weight_grad")])
           for r in (0, 1) for t, n in wg),
       "%s: the same training as the plain DDP run, each rank's losses, the all-reduced weight gradients on "
       "both ranks" % name)

# ---------------------------------------------------------------------- a rank that stops early
rc, out = torchrun("stop")
ok(rc != 0, "stop: the launcher reports the failed rank (exit %d)" % rc)
st = [read("stop", r) for r in (0, 1)]
ok([list(map(int, tr["steps"]["step"])) for tr in st] == [[0, 1, 2]] * 2 and
   all(tr["attrs"]["status"] != "complete" for tr in st),
   "stop: both traces hold steps 0..2 and neither says complete (%s)" % [tr["attrs"]["status"] for tr in st])
s1 = [e for e in st[1]["events"] if e[2] == "stop"]
s0 = [e for e in st[0]["events"] if e[2] == "stop"]
ok(st[1]["attrs"]["status"] == "interrupted" and len(s1) == 1 and s1[0][0] == 2 and "rank 1 stops" in s1[0][3],
   "stop: rank 1's trace is interrupted, its stop event at step 2 names its error (%s)" % s1)
ok((st[0]["attrs"]["status"] == "running" and not s0) or (st[0]["attrs"]["status"] == "interrupted" and s0 and
                                                           s0[0][0] == 3),
   "stop: rank 0 was stopped in step 3: killed by the launcher (cut off, running) or by the failed "
   "collective (interrupted, its stop event at step 3) (%s %s)" % (st[0]["attrs"]["status"], s0))
rc, d, err = ampdiag_json("info", st[0]["path"])
f = rank_finding(d.get("ranks"), "rank_stopped_early")
ok(rc == 0 and f is not None and (f["rank"], f["stop_step"], f["event"]) == (1, 2, 1) and
   "rank 1 stops" in f.get("message", "") and d.get("status") == "interrupted",
   "stop: ampdiag info of rank 0's trace names rank 1 as the one that stopped first, at step 2, with its error "
   "(exit %d; %s)" % (rc, f))

sys.exit(TAP.plan())
