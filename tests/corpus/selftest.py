#!/usr/bin/env python3
"""selftest.py - the advice corpus's own parts checked (tests/t_advice_harness.sh): the
generator is deterministic and uses only options `ampdiag run` offers, the adapter turns
compare's JSON into exactly the options it names (crafted reports and a real one), the bands
and the learning criterion give the known answers, and data.py's FP32 forward reproduces
ampdiag's own eval loss (numpy and h5py needed for that one: SKIP without). Prints TAP.

  selftest.py --ampdiag PATH
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import adapter  # noqa: E402
import gen  # noqa: E402
import harness  # noqa: E402

n = 0
failed = 0


def ok(cond, name, detail=""):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, name))
    if not cond:
        failed = 1
        if detail:
            print("# " + str(detail))


def skip(name, why):
    global n
    n += 1
    print("ok %d - %s # SKIP %s" % (n, name, why))


def report(verdict, lr=None, remedies=(), fp32_layers=(), reasons=("why",)):
    lr = lr or {"verdict": "keep", "suggested": 0.001, "text": "keep"}
    return {"recommendation": {"precision": {"verdict": verdict, "text": verdict, "fp32_layers": list(fp32_layers),
                                             "reasons": list(reasons)},
                               "lr": lr, "remedies": [{"option": o, "value": v, "scope": "recommended"}
                                                      for o, v in remedies],
                               "clip": {"value": 2.5}}}


class Fake(harness.Config):
    """The measures of Config without runs."""

    def __init__(self, init, chance, n_val, seed_band=None):
        self.init, self.facts, self.seed_band = init, {"chance": chance, "n_val": n_val}, seed_band


def run_(name, loss, se, acc, losses=None, status="complete"):
    return {"name": name, "rc": 0, "status": status, "eval_loss": loss, "eval_se": se, "eval_acc": acc,
            "_losses": losses}


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampdiag", required=True)
    a = ap.parse_args(argv)
    amp = os.path.abspath(a.ampdiag)

    # the generator
    c1 = [gen.config(7, i) for i in range(40)]
    c2 = [gen.config(7, i) for i in range(35, 45)]
    ok(c1[35:] == c2[:5] and json.dumps(c1[3]) == json.dumps(gen.config(7, 3)),
       "gen: configuration i of seed S depends only on (S, i)")
    ok(gen.config(7, 3) != gen.config(8, 3), "gen: another seed, other configurations")
    offers = harness.run_offers(amp)
    bad = sorted({o for c in (gen.config(s, i) for s in (1, 26) for i in range(300)) for o, _ in c["options"]
                  if o not in offers})
    ok(not bad and "--lr" in offers and "--optim-state" in offers,
       "gen: 600 configurations use only options `ampdiag run --help` offers", bad)
    mlp = [c for c in (gen.config(1, i) for i in range(300)) if "spec" in c["model"] and
           c["model"]["spec"][0].startswith("input")]
    shapes = {"digits": (64, 10), "wine": (13, 3), "breast_cancer": (30, 2)}
    good = all(c["model"]["spec"][0] == "input %d" % (shapes[c["data"]["recipe"]["source"]][0]
               if "recipe" in c["data"] else 32) and
               c["model"]["spec"][-2].split()[-1] == str(shapes[c["data"]["recipe"]["source"]][1]
                                                         if "recipe" in c["data"] else 10) for c in mlp)
    ok(mlp and good, "gen: mlp specs take their input and output widths from the data (%d specs)" % len(mlp))
    sorted_val = {c["data"]["recipe"]["val"] for c in (gen.config(1, i) for i in range(600))
                  if "recipe" in c["data"] and c["data"]["recipe"].get("order") == "sorted"}
    ok(sorted_val == {"auto"}, "gen: rows sorted by label leave the split to ampdiag (one-class validation)",
       sorted_val)

    # the adapter
    opts = [["--model", "mlp"], ["--lr", "0.001"], ["--precision", "fp16"], ["--loss-scale", "none"]]
    r = adapter.run_options_from_compare(report("undecided", reasons=("the FP32 baseline does not learn",)),
                                         opts, offers)
    ok(not r["decided"] and r["options"] is None and r["why"] == "the FP32 baseline does not learn",
       "adapter: undecided -> no re-run, with compare's first reason")
    r = adapter.run_options_from_compare(report("bf16"), opts, offers)
    ok(r["decided"] and r["options"] == [["--model", "mlp"], ["--lr", "0.001"], ["--precision", "bf16"],
                                         ["--loss-scale", "none"]] and r["changes"] == ["--precision fp16 -> bf16"],
       "adapter: the precision changes, every other option stays as given", r)
    r = adapter.run_options_from_compare(report("fp16", lr={"verdict": "lower", "suggested": 0.0005, "text": ""},
                                                remedies=[("--loss-scale", "dynamic"), ("--scale-init", "131072"),
                                                          ("--optim-state", "fp32")], fp32_layers=["fc1", "ln1"]),
                                         opts, offers)
    want = [["--model", "mlp"], ["--lr", "0.0005"], ["--precision", "fp16"], ["--loss-scale", "dynamic"],
            ["--fp32-layers", "fc1,ln1"], ["--scale-init", "131072"], ["--optim-state", "fp32"]]
    ok(r["options"] == want, "adapter: lr lowered, FP32 layers and every remedy set", r["options"])
    for v in ("keep", "keep-use-master-weights", "unknown"):
        r = adapter.run_options_from_compare(report("bf16", lr={"verdict": v, "suggested": 0.1, "text": ""}), opts,
                                             offers)
        ok(["--lr", "0.001"] in r["options"], "adapter: lr verdict %s keeps the lr as given" % v)
    r = adapter.run_options_from_compare(report("bf16", remedies=[("--standardize-inputs-someday", None)]), opts,
                                         offers)
    ok(r["decided"] and r["unappliable"] == ["--standardize-inputs-someday"],
       "adapter: an option ampdiag run does not offer makes the advice unappliable")
    rep = report("bf16", remedies=[("--standardize", "on")])
    rep["recommendation"]["decisions"] = [
        {"what": "inputs", "option": "--standardize", "option_value": "on", "confidence": "hypothesis"},
        {"what": "clip", "option": "--clip", "option_value": "2.5", "confidence": "hypothesis"},
        {"what": "warmup", "option": None, "option_value": None, "confidence": "hypothesis"},
        {"what": "optimizer_state", "option": "--optim-state", "option_value": "fp32", "confidence": "observed"}]
    r = adapter.run_options_from_compare(rep, opts, offers)
    ok(r["decided"] and ["--standardize", "on"] in r["options"] and ["--optim-state", "fp32"] in r["options"] and
       not any(o[0] == "--clip" for o in r["options"]) and not r["unappliable"],
       "adapter: --standardize on and a decision's run option are set; a clip hypothesis is not", r)
    with tempfile.TemporaryDirectory() as t:
        tr = os.path.join(t, "low.h5")
        p = subprocess.run([amp, "run", "--scenario", "lr-too-low", "--steps", "100", "-o", tr, "--progress",
                            "none"], capture_output=True)
        rep = subprocess.run([amp, "compare", tr, "--format", "json"], capture_output=True, text=True)
        try:
            rj = json.loads(rep.stdout)
            rec = rj["recommendation"]
            given = [["--optimizer", "sgd"], ["--momentum", "0"], ["--lr", "1e-06"], ["--precision", "fp32"]]
            r = adapter.run_options_from_compare(rj, given, offers)
            # a baseline that does not learn: compare names the cause (the lr, raised) but decides no
            # precision ("undecided": tune measures the lr), so the single-shot advice has no re-run
            ok(p.returncode == 0 and rec["lr"]["verdict"] == "raise" and rec["lr"]["suggested"] > 1e-6 and
               rec["precision"]["verdict"] == "undecided" and not r["decided"] and r["options"] is None and
               "does not learn" in r["why"],
               "adapter: compare's real JSON (lr far too low): undecided, the lr raised, no re-run", r)
        except (ValueError, KeyError) as e:
            ok(False, "adapter: compare's real JSON (lr far too low)", e)

    # the measures
    init = run_("init", 2.30, 0.01, 0.10, losses=[2.3, 2.3, 2.3, 2.3])
    f = Fake(init, 0.10, 400)
    d, band, paired = f.diff(run_("a", 1.0, 0.1, 0.9, [1.0, 1.2, 0.8, 1.0]), run_("b", 0.9, 0.1, 0.9,
                                                                                   [0.9, 1.1, 0.7, 0.9]))
    ok(paired and abs(d - 0.1) < 1e-12 and band < 1e-12, "band: paired differences that agree give a zero band")
    d, band, paired = f.diff(run_("a", 1.0, 0.03, 0.9), run_("b", 0.9, 0.04, 0.9))
    ok(not paired and abs(d - 0.1) < 1e-12 and abs(band - 0.1) < 1e-12,
       "band: unpaired 2 * sqrt(0.03^2 + 0.04^2) = 0.1")
    # a run that standardised its inputs is judged against its own step 0 (the same initial
    # weights on the standardised inputs), not against the raw inputs' initial loss
    raw = Fake(run_("init", 0.05, 0.01, 0.10), 0.10, 400)
    raw.init_std = run_("init-std", 0.70, 0.01, 0.10)
    std = dict(run_("s", 0.10, 0.01, 0.95), standardize=True)
    ok(raw.learns(std)[0] and "from 0.7 " in raw.learns(std)[1] and not raw.learns(run_("r", 0.10, 0.01, 0.95))[0],
       "learns: a standardised run from its own step 0, a raw one from the raw step 0", raw.learns(std))
    L = f.learns(run_("r", 1.0, 0.05, 0.5))
    ok(L[0], "learns: loss 2.3 -> 1.0 and accuracy 0.5 over chance 0.1", L)
    L = f.learns(run_("r", 1.0, 0.05, 0.12))
    ok(not L[0] and "chance" in L[1], "learns: not at accuracy 0.12 (chance 0.1 + 2 SE = 0.13)", L)
    L = f.learns(run_("r", 2.28, 0.05, 0.5))
    ok(not L[0] and "no decrease" in L[1], "learns: not when the loss falls less than the band", L)
    L = f.learns(run_("r", float("nan"), 0.05, 0.5))
    ok(not L[0], "learns: never with a NaN eval loss")
    L = f.learns(run_("r", 1.0, 0.05, 0.5, status="diverged"))
    ok(not L[0] and "diverged" in L[1], "learns: never when the run diverged")
    f.seed_band = 0.3
    j = f.judge(run_("r", 1.2, 0.01, 0.6), run_("gt", 1.0, 0.01, 0.7), "ground truth")
    ok(not j["worse"] and j["worse_sampling_only"] and abs(j["band"] - 0.3) < 1e-12,
       "judge: +0.2 is within the seed band 0.3, beyond the sampling band", j)
    j = f.judge(run_("r", 1.4, 0.01, 0.6), run_("gt", 1.0, 0.01, 0.7), "ground truth")
    ok(j["worse"], "judge: +0.4 is beyond the seed band 0.3")
    j = f.judge(run_("r", 1.4, 0.01, 0.6), run_("gt", 2.3, 0.01, 0.1), "ground truth")
    ok(not j["worse"], "judge: a reference that does not learn is never better")

    # summarise: compare decides on a configuration where its advice claims a fix (the claim),
    # and its precision verdict alone is counted beside that
    def res(i, label, claim, decided, fixed):
        return {"id": "x-%d" % i, "label": label, "ground_truth": {"learns": True}, "seconds": 1,
                "compare": {"decided": decided, "claim": claim, "claimed": claim == "fix",
                            "precision_confidence": "observed"},
                "outcome": {"compare_fixed": fixed} if label == "broken" else {}}
    rs = [res(0, "broken", "fix", True, True), res(1, "broken", "fix", True, False),
          res(2, "broken", "no_precision_cost", True, False), res(3, "broken", "untested", True, True),
          res(4, "broken", "none", False, None), res(5, "healthy", "fix", True, None),
          res(6, "healthy", "no_precision_cost", True, None)]
    g, text = harness.summarise(rs, 1.0, 1)
    ok(g["compare_fixed"] == [1, 2] and g["compare_fixed_precision_decided"] == [2, 4] and
       g["compare_undecided_on_broken"] == 3 and g["compare_claims_fix_on_healthy"] == [1, 2] and
       g["compare_claims_on_broken"]["no_precision_cost"] == [0, 1] and
       re.search(r"compare's advice fixes \(broken it claims to fix\) +1/2 \(50%\)", text) is not None,
       "summarise: compare decided where it claims a fix; the precision-decided count beside it", g)

    # data.py's FP32 forward against ampdiag's own evaluation
    py, _ = harness.find_python(None)
    if not py:
        skip("data.py: per-example losses reproduce ampdiag's eval loss", "no Python with numpy and h5py")
    else:
        with tempfile.TemporaryDirectory() as t:
            data = os.path.join(t, "d.h5")
            mk = ("import h5py, numpy as np; r = np.random.default_rng(3); "
                  "f = h5py.File('%s', 'w'); f['x'] = r.normal(size=(300, 12)).astype('f4'); "
                  "f['y'] = r.integers(0, 4, 300).astype('i4'); f.close()" % data)
            subprocess.run([py, "-c", mk], check=False)
            spec = os.path.join(t, "m.txt")
            with open(spec, "w") as fh:
                fh.write("input 12\nlinear fc1 32\nlayernorm\ngelu\nlinear fc2 16\nrelu\nlinear out 4\n"
                         "loss softmax_ce\n")
            tr, w = os.path.join(t, "r.h5"), os.path.join(t, "w.h5")
            subprocess.run([amp, "run", "--model", spec, "--data", data, "--steps", "60", "-o", tr, "--save-weights",
                            w, "--progress", "none"], capture_output=True)
            inf = json.loads(subprocess.run([amp, "info", tr, "--format", "json"], capture_output=True,
                                            text=True).stdout or "null") or {}
            lj = os.path.join(t, "layers.json")
            json.dump([{"name": L["name"], "op": L["op"]} for L in inf.get("layers", [])], open(lj, "w"))
            subprocess.run([py, os.path.join(HERE, "data.py"), "eval", data, lj, w], capture_output=True)
            try:
                got = json.load(open(w + ".losses.json"))
                want = inf["eval"]["loss"]
                ok(len(got["losses"]) == 30 and abs(got["mean"] - want) <= 1e-5 * max(1, abs(want)) and
                   abs(got["accuracy"] - inf["eval"]["metric"]) < 1e-9,
                   "data.py: per-example losses of 30 held-out rows reproduce ampdiag's eval loss %.6g" % want,
                   (got.get("mean"), want))
            except (OSError, ValueError, KeyError, TypeError) as e:
                ok(False, "data.py: per-example losses reproduce ampdiag's eval loss", e)
    print("1..%d" % n)
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
