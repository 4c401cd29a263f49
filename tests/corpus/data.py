#!/usr/bin/env python3
"""data.py - the parts of the advice corpus that need numpy and h5py (scikit-learn for its
data sets): real data sets exported to ampdiag's --data layout, scaled initial weights, and
per-example evaluation losses of saved weights (the paired noise band).

The harness (tests/corpus/harness.py, standard library only) calls this file as a separate
process with the first Python that has the modules (tests/find_python.sh's order), so the
corpus runs without them: the cases that need them are skipped and say so.

  data.py check                          exit 0 when numpy, h5py (and, for `check sklearn`,
                                         scikit-learn) import
  data.py make RECIPE.json OUT.h5        write a data set (DESIGN.md section 1: /x float32
                                         [N, D], /y int32 [N], optional /x_val /y_val; or
                                         /tokens, /tokens_val int32 [N, 33]) and OUT.h5.json
                                         with its facts (rows, features, classes, chance)
  data.py scale-init LAYERS.json IN.h5 FACTOR OUT.h5
                                         the weights of IN.h5 with every linear weight and
                                         embedding table multiplied by FACTOR
  data.py eval DATA.h5 LAYERS.json W.h5 ...
                                         for each W.h5, W.h5.losses.json: the per-example
                                         softmax cross-entropy of the validation rows in FP32
                                         (mlp-form models only: linear, relu, gelu, layernorm)

  data.py examples TRACE.h5 OUT.json   the per-example losses a trace recorded itself
                                         (/eval_examples, traces/FORMAT.md): {"initial": the
                                         initial evaluation's (step -1), "final": the last
                                         evaluation's, "accuracy0", "accuracy"}, by validation
                                         row; null lists when the trace has none

RECIPE (JSON): {"source": "digits"|"wine"|"breast_cancer"|"text", "prep": "raw"|"std",
"scale": S, "order": "shuffled"|"shipped"|"sorted", "val": "split"|"auto"|"oneclass"|"tiny",
"seed": N}: prep std standardises each feature with the training rows' mean and standard
deviation; scale multiplies the features after that; order is the row order of the file
(shuffled by seed, as shipped, or stably sorted by label); val: split holds out the last 20 %
of the rows as /x_val, /y_val; auto writes no /x_val (ampdiag holds out the last 10 % of /x
itself); oneclass holds out the last 20 % and keeps only its most common class in /x_val;
tiny holds out 4 rows. Text: /usr/share/common-licenses/GPL-3 (Debian's base-files) by
characters, the 63 most frequent as tokens 1..63 and every other character as 0, rows of 33
tokens, the last 10 % of the rows as /tokens_val.
"""
import json
import math
import os
import sys

TEXT_FILE = "/usr/share/common-licenses/GPL-3"
ROW_TOKENS = 33  # ctx 32 plus the next token, as synthetic:tokens


def need(sklearn=False):
    import numpy  # noqa: F401
    import h5py  # noqa: F401
    if sklearn:
        import sklearn.datasets  # noqa: F401


def _write_atomic(path, fill):
    """Write an HDF5 file through a temporary name beside it (parallel workers may race)."""
    import h5py
    tmp = "%s.tmp%d" % (path, os.getpid())
    with h5py.File(tmp, "w") as f:
        fill(f)
    os.replace(tmp, path)


def _facts_write(path, facts):
    tmp = "%s.json.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(facts, f, indent=1, sort_keys=True)
    os.replace(tmp, path + ".json")


def _majority(y):
    import numpy as np
    if len(y) == 0:
        return 0.0, []
    counts = np.bincount(np.asarray(y, dtype=np.int64))
    return float(counts.max()) / float(len(y)), [int(c) for c in np.nonzero(counts)[0]]


def make_table(recipe, out):
    import numpy as np
    import sklearn.datasets as skd
    loaders = {"digits": skd.load_digits, "wine": skd.load_wine, "breast_cancer": skd.load_breast_cancer}
    src = recipe["source"]
    if src not in loaders:
        raise SystemExit("data.py: unknown source '%s'" % src)
    b = loaders[src]()
    x = np.asarray(b.data, dtype=np.float64)
    y = np.asarray(b.target, dtype=np.int64)
    order = recipe.get("order", "shuffled")
    if order == "shuffled":
        p = np.random.default_rng(int(recipe.get("seed", 0))).permutation(len(y))
        x, y = x[p], y[p]
    elif order == "sorted":
        p = np.argsort(y, kind="stable")
        x, y = x[p], y[p]
    elif order != "shipped":
        raise SystemExit("data.py: unknown order '%s'" % order)
    n = len(y)
    val = recipe.get("val", "split")
    if val == "auto":
        nv = max(n // 10, 1)  # ampdiag's own split (src/train/data.c): the last n/10 rows
    elif val in ("split", "oneclass"):
        nv = n // 5
    elif val == "tiny":
        nv = 4
    else:
        raise SystemExit("data.py: unknown val '%s'" % val)
    xtr, ytr, xv, yv = x[:n - nv], y[:n - nv], x[n - nv:], y[n - nv:]
    if val == "oneclass":
        top = np.bincount(yv).argmax()
        xv, yv = xv[yv == top], yv[yv == top]
    if recipe.get("prep", "raw") == "std":
        mu, sd = xtr.mean(axis=0), xtr.std(axis=0)
        sd[sd == 0] = 1.0
        xtr, xv = (xtr - mu) / sd, (xv - mu) / sd
    elif recipe.get("prep", "raw") != "raw":
        raise SystemExit("data.py: unknown prep '%s'" % recipe.get("prep"))
    s = float(recipe.get("scale", 1.0))
    xtr, xv = (xtr * s).astype(np.float32), (xv * s).astype(np.float32)

    def fill(f):
        if val == "auto":
            f["x"] = np.concatenate([xtr, xv])
            f["y"] = np.concatenate([ytr, yv]).astype(np.int32)
        else:
            f["x"], f["y"] = xtr, ytr.astype(np.int32)
            f["x_val"], f["y_val"] = xv, yv.astype(np.int32)
    _write_atomic(out, fill)
    chance, present = _majority(yv)
    _facts_write(out, {"kind": "table", "n_train": int(len(ytr)), "n_val": int(len(yv)), "features": int(x.shape[1]),
                       "classes": int(ytr.max()) + 1, "chance": chance, "val_classes": present,
                       "absmax": float(max(np.abs(xtr).max(), np.abs(xv).max()))})


def make_text(recipe, out):
    import numpy as np
    if not os.path.isfile(TEXT_FILE):
        raise SystemExit("data.py: %s is missing (Debian's base-files)" % TEXT_FILE)
    with open(TEXT_FILE, encoding="utf-8") as f:
        text = f.read()
    freq = {}
    for ch in text:
        freq[ch] = freq.get(ch, 0) + 1
    ranked = sorted(freq, key=lambda c: (-freq[c], c))[:63]
    ids = {c: i + 1 for i, c in enumerate(ranked)}
    toks = np.array([ids.get(c, 0) for c in text], dtype=np.int32)
    rows = len(toks) // ROW_TOKENS
    t = toks[:rows * ROW_TOKENS].reshape(rows, ROW_TOKENS)
    nv = max(rows // 10, 1)
    tr, tv = t[:rows - nv], t[rows - nv:]

    def fill(f):
        f["tokens"], f["tokens_val"] = tr, tv
    _write_atomic(out, fill)
    chance, _ = _majority(tv[:, 1:].reshape(-1))
    _facts_write(out, {"kind": "tokens", "n_train": int(len(tr)), "n_val": int(len(tv)),
                       "targets_val": int(tv[:, 1:].size), "vocab": 64, "ctx": ROW_TOKENS - 1, "chance": chance})


def scale_init(layers_json, src, factor, out):
    import h5py
    layers = json.load(open(layers_json))
    scaled = set()
    for L in layers:
        if L["op"] == "linear":
            scaled.add("%s/weight" % L["name"])
        elif L["op"] == "embedding":
            scaled.update(("%s/wte" % L["name"], "%s/wpe" % L["name"]))
    with h5py.File(src, "r") as f:
        arrays = {}
        f.visititems(lambda name, obj: arrays.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)

    def fill(g):
        for name, a in arrays.items():
            g[name] = (a * float(factor)).astype(a.dtype) if name in scaled else a
    _write_atomic(out, fill)


def _val_rows(path):
    import h5py
    import numpy as np
    with h5py.File(path, "r") as f:
        if "x_val" in f:
            return np.asarray(f["x_val"], dtype=np.float32), np.asarray(f["y_val"], dtype=np.int64)
        x, y = np.asarray(f["x"], dtype=np.float32), np.asarray(f["y"], dtype=np.int64)
    nv = max(len(y) // 10, 1)
    return x[len(y) - nv:], y[len(y) - nv:]


def per_example(layers, weights, x, y):
    """Softmax cross-entropy of each row, FP32, as ampdiag's mlp form computes it
    (docs/model-spec.md); None for a model with another op."""
    import h5py
    import numpy as np
    h = x
    with h5py.File(weights, "r") as f:
        for L in layers:
            op, name = L["op"], L["name"]
            if op == "linear":
                w = np.asarray(f[name]["weight"], dtype=np.float32)
                h = h @ w.T
                if "bias" in f[name]:
                    h = h + np.asarray(f[name]["bias"], dtype=np.float32)
            elif op == "relu":
                h = np.maximum(h, np.float32(0))
            elif op == "gelu":
                h = np.float32(0.5) * h * (np.float32(1) + np.tanh(np.float32(math.sqrt(2 / math.pi)) *
                                                                 (h + np.float32(0.044715) * h * h * h)))
            elif op == "layernorm":
                mu = h.mean(axis=1, keepdims=True)
                var = ((h - mu) ** 2).mean(axis=1, keepdims=True)
                h = (h - mu) / np.sqrt(var + np.float32(1e-5)) * np.asarray(f[name]["weight"], dtype=np.float32) \
                    + np.asarray(f[name]["bias"], dtype=np.float32)
            elif op == "softmax_ce":
                z = h.astype(np.float64)
                m = z.max(axis=1, keepdims=True)
                lse = (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))[:, 0]
                with np.errstate(invalid="ignore"):
                    loss = lse - z[np.arange(len(y)), y]
                    acc = float((z.argmax(axis=1) == y).mean())
                return loss, acc
            else:
                return None
    return None


def evaluate(data, layers_json, weights):
    import json as _j
    layers = _j.load(open(layers_json))
    x, y = _val_rows(data)
    for w in weights:
        r = per_example(layers, w, x, y)
        out = {"losses": None, "accuracy": None, "mean": None}
        if r is not None:
            loss, acc = r
            out = {"losses": [float(v) if math.isfinite(v) else None for v in loss], "accuracy": acc,
                   "mean": float(loss.mean()) if all(map(math.isfinite, loss)) else None}
        tmp = w + ".losses.json.tmp"
        with open(tmp, "w") as f:
            _j.dump(out, f)
        os.replace(tmp, w + ".losses.json")


def trace_examples(trace, out):
    """The per-example losses of a trace's initial and last evaluation (by validation row)."""
    import h5py
    import numpy as np
    res = {"initial": None, "final": None, "accuracy0": None, "accuracy": None}
    try:
        with h5py.File(trace, "r") as f:
            if "eval_examples" in f:
                t = f["eval_examples"][()]
                step, ex = np.asarray(t["step"]), np.asarray(t["example"])
                loss, met = np.asarray(t["loss"], dtype=np.float64), np.asarray(t["metric"], dtype=np.float64)
                for key, acc, sel in (("initial", "accuracy0", step == -1),
                                      ("final", "accuracy", step == (step.max() if len(step) else -1))):
                    if sel.any() and (key == "initial" or step.max() >= 0):
                        o = np.argsort(ex[sel], kind="stable")
                        v = loss[sel][o]
                        res[key] = [float(x) if math.isfinite(x) else None for x in v]
                        m = met[sel][o]
                        res[acc] = float(m.mean()) if np.all(np.isfinite(m)) else None
    except (OSError, KeyError, ValueError):
        pass
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.replace(tmp, out)


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    cmd = argv[1]
    if cmd == "check":
        try:
            need(sklearn=len(argv) > 2 and argv[2] == "sklearn")
        except ImportError as e:
            print("data.py: %s" % e)
            return 1
        return 0
    if cmd == "make" and len(argv) == 4:
        recipe = json.loads(open(argv[2]).read()) if os.path.isfile(argv[2]) else json.loads(argv[2])
        (make_text if recipe["source"] == "text" else make_table)(recipe, argv[3])
        return 0
    if cmd == "scale-init" and len(argv) == 6:
        scale_init(argv[2], argv[3], float(argv[4]), argv[5])
        return 0
    if cmd == "examples" and len(argv) == 4:
        trace_examples(argv[2], argv[3])
        return 0
    if cmd == "eval" and len(argv) >= 5:
        evaluate(argv[2], argv[3], argv[4:])
        return 0
    sys.stderr.write("data.py: bad arguments (see the top of the file)\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
