#!/usr/bin/env python3
"""gen.py - the seeded generator of the advice corpus (issue 26, item 7): configurations of
`ampdiag run`, broken and healthy, that no rule was written from. Standard library only.

  gen.py [--seed S] [-n N] [--first K]     print configurations K .. K+N-1 of seed S, one JSON
                                           object a line

Configuration i of seed S depends only on (S, i): a larger N extends a corpus, never changes
it. Each configuration is:

  {"id": "s<S>-<i>", "seed": S, "index": i,
   "model": {"name": ..., "preset": "mlp"|"transformer"} or {"name": ..., "spec": [lines]},
   "data": {"synthetic": NAME} or {"recipe": {...}} (tests/corpus/data.py),
   "init_scale": F (1: ampdiag's initialisation; else every linear weight and embedding
                    table of it multiplied by F, through --init-from),
   "options": [[OPTION, VALUE], ...] (the options of `ampdiag run`, precision and lr
              included; checked against `ampdiag run --help` by the harness),
   "tags": [...]}   what departs from a sane setup (reporting only: the labels come from
                    runs, never from the tags)

What is drawn, and how often (per configuration, independently):
  model      mlp preset 40 %, mlp spec (1-4 hidden layers of width 16-256, relu or gelu,
             optionally a layer norm) 42 %, transformer spec (d_model 16-64, 1-2 blocks, 1-4
             heads) 15 %, transformer preset 3 %
  data       mlp: synthetic blobs 30 %, blobs-raw (x 1e5) 3 %, blobs-tiny (x 1e-6) 3 %,
             blobs-valraw 2 %, digits 26 %, wine 14 %, breast cancer 22 % (scikit-learn);
             transformer: synthetic tokens 60 %, a text (tests/corpus/data.py) 40 %
  file data  standardised 70 % (else as shipped); input scale 1 70 %, else one of 1e-6, 1e-4,
             1e-2, 1e2, 1e3, 1e4, 1e5; rows shuffled 90 %, sorted by label 6 % (then
             always ampdiag's own split), as shipped 4 %; validation: the last 20 % 85 %, ampdiag's own split (the last 10 %) 7 %,
             one class only 4 %, 4 rows 4 %
  optimizer  AdamW 50 %, SGD 20 %, SGD with momentum 0.9 30 %
  lr         65 % near a sane lr (SANE_LR by model family and optimizer, x 10^U(-0.5, 0.5)),
             35 % log-uniform in 1e-6..100
  precision  fp32 25 %, fp16 30 %, bf16 30 %, bf16-pure 15 %
  loss scale fp16: its default (dynamic) 60 %, none 25 %, static 1, 128 or 65536 15 %;
             bf16 / bf16-pure: none 85 %, dynamic 15 %
  state      AdamW or momentum: optimizer state fp32 80 %, fp16 12 %, bf16 8 %
  init       x1 85 %, else x 0.01, 0.1, 3 or 10
  clip       off 85 %, else 0.1, 1 or 10
  ftz        5 % of the 16-bit runs
  steps      mlp 300 (200 or 500 a fifth each); transformer spec 150, preset 100
  batch      64 70 %, 32 or 128 (mlp); the default (transformer)
  seed       1..5
"""
import argparse
import json
import math
import random
import sys

GEN_VERSION = 1  # raised whenever a change to this file changes the configurations of a seed
# near-sane learning rates, by model family and optimizer (about where the FP32 lr grid's best
# runs of the first corpora fell)
SANE_LR = {("mlp", "adamw"): 3e-3, ("mlp", "sgd"): 0.3, ("mlp", "momentum"): 0.03,
           ("transformer", "adamw"): 1e-2, ("transformer", "sgd"): 3.0, ("transformer", "momentum"): 0.1}
TABLES = {"digits": (64, 10), "wine": (13, 3), "breast_cancer": (30, 2)}
BLOBS = (32, 10)


def pick(r, weighted):
    """One of [(weight, value), ...]."""
    t = r.random() * sum(w for w, _ in weighted)
    for w, v in weighted:
        t -= w
        if t < 0:
            return v
    return weighted[-1][1]


def fmt(x):
    """A number as an option value: short, exact enough."""
    return "%.3g" % x


def gen_data(r, transformer, tags):
    if transformer:
        if r.random() < 0.6:
            return {"synthetic": "tokens"}, None
        return {"recipe": {"source": "text"}}, None
    src = pick(r, [(30, "blobs"), (3, "blobs-raw"), (3, "blobs-tiny"), (2, "blobs-valraw"),
                   (26, "digits"), (14, "wine"), (22, "breast_cancer")])
    if src.startswith("blobs"):
        if src != "blobs":
            tags.append("data-" + src)
        return {"synthetic": src}, BLOBS
    rec = {"source": src, "seed": 0}
    rec["prep"] = "std" if r.random() < 0.7 else "raw"
    if rec["prep"] == "raw":
        tags.append("inputs-raw")
    rec["scale"] = 1.0 if r.random() < 0.7 else r.choice([1e-6, 1e-4, 1e-2, 1e2, 1e3, 1e4, 1e5])
    if rec["scale"] != 1.0:
        tags.append("inputs-x%g" % rec["scale"])
    rec["order"] = pick(r, [(90, "shuffled"), (6, "sorted"), (4, "shipped")])
    rec["val"] = pick(r, [(85, "split"), (7, "auto"), (4, "oneclass"), (4, "tiny")])
    if rec["order"] == "sorted":  # ampdiag's own split of sorted rows: a one-class validation set
        rec["val"] = "auto"       # (an explicit one would hold classes the training rows lack)
    if rec["order"] == "sorted":
        tags.append("sorted-labels")
    if rec["val"] != "split":
        tags.append("val-" + rec["val"])
    return {"recipe": rec}, TABLES[src]


def gen_model(r, tags):
    kind = pick(r, [(40, "mlp"), (42, "mlp-spec"), (15, "tf-spec"), (3, "transformer")])
    if kind == "mlp":
        return {"name": "mlp", "preset": "mlp"}, False
    if kind == "transformer":
        tags.append("transformer")
        return {"name": "transformer", "preset": "transformer"}, True
    if kind == "tf-spec":
        d = r.choice([16, 32, 64])
        heads = r.choice([h for h in (1, 2, 4) if d % h == 0])
        layers = r.choice([1, 2])
        tags.append("transformer")
        return {"name": "tf-d%d-l%d-h%d" % (d, layers, heads),
                "spec": ["transformer", "d_model %d" % d, "layers %d" % layers, "heads %d" % heads]}, True
    depth = r.choice([1, 2, 3, 4])
    width = r.choice([16, 64, 128, 256])
    act = "gelu" if r.random() < 0.3 else "relu"
    ln = r.random() < 0.3
    return {"name": "mlp-w%d-d%d-%s%s" % (width, depth, act, "-ln" if ln else ""),
            "depth": depth, "width": width, "act": act, "ln": ln}, False


def mlp_spec(m, features, classes):
    lines = ["input %d" % features]
    for k in range(m["depth"]):
        lines.append("linear fc%d %d" % (k + 1, m["width"]))
        if k == 0 and m["ln"]:
            lines.append("layernorm ln1")
        lines.append(m["act"])
    lines += ["linear fc%d %d" % (m["depth"] + 1, classes), "loss softmax_ce"]
    return lines


def config(seed, index):
    r = random.Random("ampdiag-corpus:%d:%d" % (seed, index))
    tags = []
    model, transformer = gen_model(r, tags)
    data, shape = gen_data(r, transformer, tags)
    if "depth" in model:  # an mlp spec: its input and output widths come from the data
        model = {"name": model["name"], "spec": mlp_spec(model, *shape)}
    opt = [["--model", model["name"]]]
    optimizer = pick(r, [(50, "adamw"), (20, "sgd"), (30, "momentum")])
    if optimizer == "adamw":
        opt.append(["--optimizer", "adamw"])
    else:
        opt += [["--optimizer", "sgd"], ["--momentum", "0.9" if optimizer == "momentum" else "0"]]
    sane = SANE_LR[("transformer" if transformer else "mlp", optimizer)]
    if r.random() < 0.65:
        lr = sane * 10 ** r.uniform(-0.5, 0.5)
    else:
        lr = 10 ** r.uniform(-6, 2)
        f = lr / sane
        if f > 10 or f < 0.1:
            tags.append("lr-x%s" % fmt(10 ** round(math.log10(f))))
    opt.append(["--lr", fmt(lr)])
    prec = pick(r, [(25, "fp32"), (30, "fp16"), (30, "bf16"), (15, "bf16-pure")])
    opt.append(["--precision", prec])
    if prec != "fp32":
        tags.append(prec)
    if prec == "fp16":
        ls = pick(r, [(60, None), (25, "none"), (15, "static")])
        if ls == "static":
            ls = "static:%d" % r.choice([1, 128, 65536])
    elif prec != "fp32":
        ls = "dynamic" if r.random() < 0.15 else None
    else:
        ls = None
    if ls:
        opt.append(["--loss-scale", ls])
        tags.append("loss-scale-" + ls)
    if optimizer != "sgd":
        st = pick(r, [(80, "fp32"), (12, "fp16"), (8, "bf16")])
        if st != "fp32":
            opt.append(["--optim-state", st])
            tags.append("state-" + st)
    init = 1.0 if r.random() < 0.85 else r.choice([0.01, 0.1, 3.0, 10.0])
    if init != 1.0:
        tags.append("init-x%g" % init)
    if r.random() < 0.15:
        c = r.choice([0.1, 1.0, 10.0])
        opt.append(["--clip", fmt(c)])
        tags.append("clip-%g" % c)
    if prec != "fp32" and r.random() < 0.05:
        opt.append(["--ftz", None])
        tags.append("ftz")
    if not transformer:
        steps = pick(r, [(60, 300), (20, 200), (20, 500)])
        batch = pick(r, [(70, 64), (15, 32), (15, 128)])
        opt.append(["--batch", str(batch)])
    else:
        steps = 100 if model.get("preset") == "transformer" else 150
    opt.append(["--steps", str(steps)])
    opt.append(["--seed", str(r.randint(1, 5))])
    return {"id": "s%d-%04d" % (seed, index), "seed": seed, "index": index, "model": model, "data": data,
            "init_scale": init, "options": opt, "tags": tags}


def main(argv):
    ap = argparse.ArgumentParser(description="the advice corpus's configurations, one JSON a line")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--first", type=int, default=0)
    a = ap.parse_args(argv)
    for i in range(a.first, a.first + a.n):
        sys.stdout.write(json.dumps(config(a.seed, i), sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
