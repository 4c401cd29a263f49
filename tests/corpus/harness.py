#!/usr/bin/env python3
"""harness.py - `make check-advice`'s measure of the advice (issue 26, item 7): configurations
nobody tuned the rules to (gen.py), each with a ground truth from FP32 runs over an lr grid,
compare's single-shot advice re-run as given, and `ampdiag tune`, judged by runs only.
Standard library only; the cases that need numpy, h5py or scikit-learn (real data sets, scaled
initial weights, per-example losses) go through data.py with the first Python that has them,
and are skipped without it.

  harness.py --ampdiag PATH -o DIR [--seed S] [-n N] [--first K] [--family mlp|transformer]
             [-j J] [--cases FILE] [--ids ID,...] [--tap] [--known FILE] [--write-known FILE]
             [--keep] [--python PY]

DIR keeps one folder per configuration (DIR/cfg/ID/result.json once it is done): a run that is
stopped resumes where it was, a configuration at a time. DIR/results.json holds every
configuration, its ground truth, the advice, the re-run and tune's result; DIR/summary.txt the
table. See docs/advice-corpus.md for the definitions; in short:

  initial eval   a run of 1 step at lr 0 with an evaluation after it (the weights are the
                 initial ones: `ampdiag run` records no evaluation at step 0)
  learns         the run completed, its final eval loss is finite and below the initial one by
                 more than the band, and its accuracy is above chance by more than 2 binomial
                 standard errors (chance: the validation set's most common class where the data
                 is a file; 1/classes for the embedded synthetic sets)
  band           paired where possible: 2 standard errors of the per-example differences of
                 the two runs' validation losses (FP32 forward of the saved weights, checked
                 against ampdiag's own eval loss); else 2 * sqrt(se_a^2 + se_b^2) from the
                 traces' eval loss standard errors (unpaired, wider). Between two different
                 runs, at least the seed band: 2 standard deviations of the eval losses of the
                 ground truth's lr with the configuration's seed and S+100, S+200
  ground truth   the best (lowest eval loss) FP32 run that learns, over lr GRID plus the
                 configuration's own lr, everything else as configured (16-bit settings off)
  broken         the configuration as given does not learn (diverges, NaN, no progress) or
                 is worse than the ground truth beyond the band; else healthy
  fixed          the re-run learns and is not worse than the ground truth beyond the band
  harmed         a healthy configuration whose re-run does not learn or is worse than the
                 configuration's own run beyond the band
  decided        compare's advice claims a fix (recommendation.claim.decided: a 16-bit run
                 failed or lost to FP32 at the same lr, the verdict removes that cost's
                 mechanism, the advice changes nothing no run measured, the baseline is a
                 yardstick: docs/recommendations.md); elsewhere compare is undecided on the
                 configuration: run tune
  false verif.   tune exits 0 (verified) but its run does not learn or is worse than the
                 ground truth beyond the band
"""
import argparse
import concurrent.futures
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import adapter  # noqa: E402
import gen  # noqa: E402

GRID = [1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]
SEED_OFFSETS = (100, 200)  # the ground truth's lr again with --seed S+100 and S+200: the seed band
SYNTHETIC = {  # rows of the validation set and classes of the embedded data sets (--help)
    "blobs": (512, 10), "blobs-raw": (512, 10), "blobs-tiny": (512, 10), "blobs-valraw": (512, 10),
    "tokens": (256 * 32, 64)}
PAIRED_OPS = {"linear", "relu", "gelu", "layernorm", "softmax_ce"}
FP32_ONLY_DROP = {"--precision", "--loss-scale", "--optim-state", "--ftz", "--fp32-layers", "--scale-init",
                  "--scale-growth", "--scale-backoff", "--scale-growth-interval", "--scale-min",
                  "--scale-hysteresis"}
TIMEOUT = 1800
QUIET = ["--progress", "none"]
NO_STATS = ["--trace-every", "0", "--hist-every", "0"]


def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


PAIRED_WINSOR = None  # ampdiag's constant of that name, read at start (ampdiag_constant)


def ampdiag_constant(ampdiag, name):
    """A named constant of ampdiag's rules as a number, from the table `ampdiag help rules
    --format md` prints (a row "| `NAME` | value | ..."; a value in % is a share): the judge
    uses the tool's own definition of a figure, never a copy of it."""
    out = subprocess.run([ampdiag, "help", "rules", "--format", "md"], capture_output=True, text=True).stdout
    m = re.search(r"^\| `%s` \| ([^|]+?) \|" % re.escape(name), out, re.M)
    if not m:
        raise SystemExit("harness: ampdiag help rules names no constant %s" % name)
    v = m.group(1).strip()
    return float(v[:-1]) / 100 if v.endswith("%") else float(v)


class Ctx:
    def __init__(self, a):
        global PAIRED_WINSOR
        self.ampdiag = os.path.abspath(a.ampdiag)
        PAIRED_WINSOR = ampdiag_constant(self.ampdiag, "PAIRED_WINSOR")
        self.out = os.path.abspath(a.out)
        self.keep = a.keep
        self.py, self.sk = find_python(a.python)
        self.offers = run_offers(self.ampdiag)
        self.env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        self.lock = threading.Lock()


def find_python(explicit):
    """The Python for data.py: of $AMPDIAG_PYTHON, the source tree's .venv and python3
    (tests/find_python.sh's order), the first with numpy, h5py and scikit-learn, else the first
    with numpy and h5py: (py or None, has scikit-learn)."""
    cands = [explicit] if explicit else [os.environ.get("AMPDIAG_PYTHON"),
                                         os.path.join(os.environ.get("srcdir", "."), ".venv/bin/python"), "python3"]
    first = None
    for c in cands:
        if not c:
            continue
        try:
            if subprocess.run([c, os.path.join(HERE, "data.py"), "check", "sklearn"],
                              capture_output=True).returncode == 0:
                return c, True
            if first is None and subprocess.run([c, os.path.join(HERE, "data.py"), "check"],
                                                capture_output=True).returncode == 0:
                first = c
        except OSError:
            pass
    return first, False


def run_offers(ampdiag):
    h = subprocess.run([ampdiag, "run", "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", h)) | {"-o", "-s"}


def argv_of(options):
    out = []
    for o, v in options:
        out.append(o)
        if v is not None:
            out.append(str(v))
    return out


def opt_get(options, name, default=None):
    for o, v in options:
        if o == name:
            return v
    return default


def opt_set(options, name, value):
    out = [list(o) for o in options if o[0] != name]
    out.append([name, value])
    return out


class Config:
    """One configuration's runs in DIR/cfg/ID; each run's summary is cached beside it."""

    def __init__(self, ctx, cfg):
        self.ctx, self.cfg = ctx, cfg
        self.d = os.path.join(ctx.out, "cfg", cfg["id"])
        os.makedirs(self.d, exist_ok=True)
        self.notes = []

    # ------------------------------------------------------------------ running
    def sh(self, argv, log):
        with open(os.path.join(self.d, log), "w") as f:
            try:
                return subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, env=self.ctx.env,
                                      timeout=TIMEOUT, cwd=self.d).returncode
            except subprocess.TimeoutExpired:
                f.write("\nharness: timed out after %d s\n" % TIMEOUT)
                return 124

    def info(self, trace):
        p = subprocess.run([self.ctx.ampdiag, "info", trace, "--format", "json"], capture_output=True, text=True,
                           env=self.ctx.env)
        if p.returncode != 0:
            return None
        try:
            return json.loads(p.stdout)
        except ValueError:
            return None

    def summarise(self, name, rc, trace, weights):
        s = {"name": name, "rc": rc, "trace": trace, "weights": weights if weights and os.path.exists(weights) else None}
        inf = self.info(trace) if os.path.exists(trace) else None
        if inf is None:
            s.update(status="failed", eval_loss=None, eval_se=None, eval_acc=None)
        else:
            e = inf.get("eval") or {}
            s.update(status=inf["status"], eval_loss=e.get("loss"), eval_se=e.get("loss_se"), eval_acc=e.get("metric"),
                     eval_step=e.get("last_step"), steps=inf["counts"]["steps"], lr=inf["attributes"].get("lr"),
                     precision=inf["attributes"].get("precision"),
                     standardize=inf["attributes"].get("standardize") == "on",
                     command_line=inf["attributes"].get("command_line"),
                     layers=[{"name": L["name"], "op": L["op"]} for L in inf["layers"]])
        try:
            with open(os.path.join(self.d, name + ".log")) as f:
                s["warnings"] = [ln.strip() for ln in f if ": warning: " in ln][:5]
        except OSError:
            s["warnings"] = []
        return s

    def run(self, name, options, stats=True, weights=True):
        """`ampdiag run` with options into NAME.h5 (NAME.w.h5 for the weights); cached."""
        cache = os.path.join(self.d, name + ".json")
        if os.path.exists(cache):
            return json.load(open(cache))
        trace = os.path.join(self.d, name + ".h5")
        w = os.path.join(self.d, name + ".w.h5") if weights else None
        argv = [self.ctx.ampdiag, "run"] + argv_of(options) + ["-o", trace, "--overwrite"] + QUIET
        if not stats:
            argv += NO_STATS
        if w:
            argv += ["--save-weights", w]
        rc = self.sh(argv, name + ".log")
        s = self.summarise(name, rc, trace, w)
        s["options"] = options
        json.dump(s, open(cache, "w"), indent=1)
        return s

    # ------------------------------------------------------------------ the configuration
    def prepare(self):
        """The run options with the model file, data and initial weights in place; or a reason
        to skip."""
        cfg, ctx = self.cfg, self.ctx
        opts = [list(o) for o in cfg["options"]]
        for o, _ in opts:
            if o not in ctx.offers:
                raise SystemExit("harness: %s: `ampdiag run --help` offers no %s" % (cfg["id"], o))
        if "spec" in cfg["model"]:
            p = os.path.join(self.d, "model.txt")
            with open(p, "w") as f:
                f.write("\n".join(cfg["model"]["spec"]) + "\n")
            opts = opt_set(opts, "--model", p)
        data = cfg["data"]
        self.facts = None
        if "synthetic" in data:
            opts.append(["--data", "synthetic:" + data["synthetic"]])
            n, k = SYNTHETIC[data["synthetic"]]
            self.facts = {"n_val": n, "chance": 1.0 / k, "chance_source": "1/classes", "file": None}
        else:
            rec = data["recipe"]
            if not ctx.py:
                return None, "needs a Python with numpy and h5py (tests/corpus/data.py)"
            if rec["source"] != "text" and not ctx.sk:
                return None, "needs scikit-learn (python3-sklearn) for the %s data set" % rec["source"]
            path = self.data_file(rec)
            if path is None:
                return None, "tests/corpus/data.py could not make the %s data set" % rec["source"]
            facts = json.load(open(path + ".json"))
            opts.append(["--data", path])
            n = facts["targets_val"] if facts["kind"] == "tokens" else facts["n_val"]
            self.facts = {"n_val": n, "chance": facts["chance"], "chance_source": "majority class of the validation set",
                          "file": path, "val_classes": facts.get("val_classes")}
        if cfg.get("init_scale", 1.0) != 1.0:
            if not ctx.py:
                return None, "needs a Python with numpy and h5py for scaled initial weights"
            base = self.run("init-default", self.base_options(opts) + [["--lr", "0"], ["--steps", "1"]],
                            stats=False)
            out = os.path.join(self.d, "init-scaled.w.h5")
            if base["weights"] and not os.path.exists(out):
                lj = os.path.join(self.d, "layers.json")
                json.dump(base.get("layers") or [], open(lj, "w"))
                subprocess.run([ctx.py, os.path.join(HERE, "data.py"), "scale-init", lj, base["weights"],
                                repr(cfg["init_scale"]), out], check=False)
            if not os.path.exists(out):
                return None, "could not write the scaled initial weights"
            opts.append(["--init-from", out])
        return opts, None

    def data_file(self, rec):
        key = "-".join("%s=%s" % (k, rec[k]) for k in sorted(rec))
        key = re.sub(r"[^A-Za-z0-9_.=+-]", "_", key)
        ddir = os.path.join(self.ctx.out, "data")
        os.makedirs(ddir, exist_ok=True)
        path = os.path.join(ddir, key + ".h5")
        with self.ctx.lock:  # one maker per data set; others wait for it
            if not (os.path.exists(path) and os.path.exists(path + ".json")):
                subprocess.run([self.ctx.py, os.path.join(HERE, "data.py"), "make", json.dumps(rec), path],
                               capture_output=True)
        return path if os.path.exists(path) and os.path.exists(path + ".json") else None

    @staticmethod
    def base_options(opts):
        """Model, data, initialisation, batch and seed: what every run of it shares."""
        keep = {"--model", "--data", "--init-from", "--batch", "--seed"}
        return [o for o in opts if o[0] in keep]

    @staticmethod
    def fp32_options(opts, lr):
        out = [o for o in opts if o[0] not in FP32_ONLY_DROP and o[0] != "--lr"]
        return out + [["--precision", "fp32"], ["--lr", "%.6g" % lr]]

    # ------------------------------------------------------------------ measures
    def per_example(self, runs):
        """Per-example validation losses for the runs that saved weights (paired band)."""
        # a run that standardised its inputs saw other inputs than data.py's file holds: data.py
        # cannot evaluate its weights; the losses it recorded itself (/eval_examples: its initial
        # and its last evaluation, by validation row, the rows data.py evaluates) stand in
        for r in runs:
            if r and (r.get("standardize") or not self.paired_ok):
                self.trace_examples(r)
        if not self.paired_ok:  # data.py cannot evaluate these (the embedded synthetic sets): each run's
            return              # own recorded losses pair it with its step 0 and with the other runs
        runs = [r for r in runs if r and not r.get("standardize")]
        todo = [r for r in runs if r.get("weights") and not os.path.exists(r["weights"] + ".losses.json")]
        if todo:
            subprocess.run([self.ctx.py, os.path.join(HERE, "data.py"), "eval", self.facts["file"], self.layers_json]
                           + [r["weights"] for r in todo], capture_output=True, env=self.ctx.env)
        for r in runs:
            if r and r.get("weights") and os.path.exists(r["weights"] + ".losses.json"):
                r["_losses"] = json.load(open(r["weights"] + ".losses.json"))["losses"]

    def first_error(self, name):
        try:
            with open(os.path.join(self.d, name + ".log")) as f:
                return next((ln.strip() for ln in f if ln.startswith("ampdiag")), "exit 2")
        except OSError:
            return "exit 2"

    def healthy_run(self, r):
        return r is not None and r["rc"] == 0 and r["status"] == "complete" and finite(r["eval_loss"])

    def diff(self, a, b, winsor=False):
        """(delta = a - b of the eval loss, band, paired?). winsor: the per-example differences
        winsorized at PAIRED_WINSOR on each side, as ampdiag's own learning test does
        (docs/recommendations.md: one example whose initial loss is huge neither makes nor
        hides the decrease); the delta is then their winsorized mean."""
        la, lb = a.get("_losses"), b.get("_losses")
        if la and lb and len(la) == len(lb) and all(v is not None for v in la + lb):
            d = [x - y for x, y in zip(la, lb)]
            n = len(d)
            k = int(PAIRED_WINSOR * n) if winsor else 0
            if 2 * k + 2 <= n and k > 0:
                d = sorted(d)
                d = [d[k]] * k + d[k:n - k] + [d[n - k - 1]] * k
            m = sum(d) / n
            sd = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
            return m, 2 * sd / math.sqrt(n), True
        sa = a["eval_se"] if finite(a.get("eval_se")) else 0.0
        sb = b["eval_se"] if finite(b.get("eval_se")) else 0.0
        return a["eval_loss"] - b["eval_loss"], 2 * math.sqrt(sa * sa + sb * sb), False

    def trace_examples(self, r):
        if not self.ctx.py or not r.get("trace") or "_losses0" in r:
            return
        out = os.path.join(self.d, r["name"] + ".examples.json")
        if not os.path.exists(out) and os.path.exists(r["trace"]):
            subprocess.run([self.ctx.py, os.path.join(HERE, "data.py"), "examples", r["trace"], out],
                           capture_output=True, env=self.ctx.env)
        try:
            ex = json.load(open(out))
        except (OSError, ValueError):
            return
        fin, ini = ex.get("final"), ex.get("initial")
        if fin and None not in fin and finite(r.get("eval_loss")) and \
                abs(sum(fin) / len(fin) - r["eval_loss"]) <= 1e-3 * max(1.0, abs(r["eval_loss"])):
            r["_losses"] = fin
        if ini and None not in ini:
            r["_losses0"], r["_acc0"] = ini, ex.get("accuracy0")

    def init_for(self, r):
        """The initial evaluation a run is judged against: the same initial weights evaluated on
        the inputs the run saw (a run that standardised its inputs starts from another loss than
        one on the raw inputs: its own step 0, measured by a run at lr 0 with --standardize on).
        On data data.py cannot evaluate (the embedded synthetic sets), a run's own step 0 too
        where its trace recorded it: the same initial weights on the same inputs, paired."""
        l0 = r.get("_losses0")
        if not r.get("standardize") and (self.init.get("_losses") or not (r.get("_losses") and l0 and len(l0) > 1)):
            return self.init
        if l0 and len(l0) > 1:  # its own step 0, recorded in its trace
            n, m = len(l0), sum(l0) / len(l0)
            sd = math.sqrt(sum((v - m) ** 2 for v in l0) / (n - 1))
            return {"name": r["name"] + " at step 0", "rc": 0, "status": "complete", "eval_loss": m,
                    "eval_se": sd / math.sqrt(n), "eval_acc": r.get("_acc0"),
                    "_losses": l0 if r.get("_losses") else None}
        if getattr(self, "init_std", None) is None:
            self.init_std = self.run("init-std", self.base_options(self.opts) + [
                ["--standardize", "on"], ["--lr", "0"], ["--steps", "1"], ["--eval-every", "1"]], stats=False,
                weights=False)
            self.init_std["standardize"] = True
        return self.init_std

    def learns(self, r):
        """(learns?, why)"""
        if r is None:
            return False, "no run"
        if r["rc"] != 0:
            return False, "ampdiag run exited %d" % r["rc"]
        if r["status"] != "complete":
            return False, "status %s" % r["status"]
        if not finite(r["eval_loss"]):
            return False, "eval loss %s" % r["eval_loss"]
        init = self.init_for(r)
        if not self.healthy_run(init):
            return False, "no initial evaluation to judge it against (%s)" % init["status"]
        d, band, paired = self.diff(r, init, winsor=True)
        if not d < -band:
            return False, "eval loss %.4g from %.4g at step 0: no decrease beyond the %s band %.3g" % (
                r["eval_loss"], init["eval_loss"], "paired" if paired else "unpaired", band)
        c, n = self.facts["chance"], self.facts["n_val"]
        if finite(r.get("eval_acc")):
            lim = c + 2 * math.sqrt(max(c * (1 - c), 1e-12) / max(n, 1))
            if r["eval_acc"] <= lim:
                return False, "accuracy %.3f not above chance %.3f (+2 SE: %.3f)" % (r["eval_acc"], c, lim)
        return True, "eval loss %.4g from %.4g (%s band %.3g)" % (r["eval_loss"], init["eval_loss"],
                                                                  "paired" if paired else "unpaired", band)

    def judge(self, r, ref, what):
        """A run against a reference: {learns, why, worse, delta, band, ...}. The band is the
        larger of the sampling band (paired, else unpaired) and the seed band of the ground
        truth; worse_sampling_only says what the sampling band alone would say."""
        ok, why = self.learns(r)
        out = {"learns": ok, "why": why, "eval_loss": r and r.get("eval_loss"), "eval_acc": r and r.get("eval_acc"),
               "against": what}
        if ok and ref is not None and not self.learns(ref)[0]:
            out.update(worse=False, worse_sampling_only=False, delta=None, band=None, against=what + " (not learning)")
        elif ok and ref is not None:
            d, band, paired = self.diff(r, ref)
            full = max(band, self.seed_band or 0.0)
            out.update(worse=d > full, worse_sampling_only=d > band, delta=d, band=full, band_sampling=band,
                       band_seed=self.seed_band, paired=paired)
            if d > full:
                out["why"] = "eval loss %.4g vs %s %.4g: +%.3g beyond the band %.3g (%s %.3g, seeds %.3g)" % (
                    r["eval_loss"], what, ref["eval_loss"], d, full, "paired" if paired else "unpaired", band,
                    self.seed_band or 0.0)
        else:
            out.update(worse=not ok, worse_sampling_only=not ok, delta=None, band=None)
        return out

    # ------------------------------------------------------------------ the stages
    def process(self):
        done = os.path.join(self.d, "result.json")
        if os.path.exists(done):
            return json.load(open(done))
        t0 = time.time()
        cfg = self.cfg
        res = {"id": cfg["id"], "config": cfg}
        opts, skip = self.prepare()
        if skip:
            res.update(skipped=skip)
            json.dump(res, open(done, "w"), indent=1)
            return res
        self.opts, self.init_std = opts, None
        lr = float(opt_get(opts, "--lr"))
        prec = opt_get(opts, "--precision", "fp32")
        # the initial evaluation: one step at lr 0, evaluated after it
        self.init = self.run("init", self.base_options(opts) + [["--lr", "0"], ["--steps", "1"],
                                                                ["--eval-every", "1"]], stats=False)
        if self.init["rc"] == 2:  # ampdiag refused the configuration (bad input): not a case
            res.update(skipped="ampdiag run refused it: %s" % self.first_error("init"))
            json.dump(res, open(done, "w"), indent=1)
            return res
        layers = self.init.get("layers") or []
        self.layers_json = os.path.join(self.d, "layers.json")
        json.dump(layers, open(self.layers_json, "w"))
        self.paired_ok = bool(self.ctx.py and self.facts.get("file") and layers and
                              all(L["op"] in PAIRED_OPS for L in layers))
        # the ground truth: FP32 over the lr grid and the configuration's own lr
        grid = sorted(set(GRID) | {lr})
        gt_runs = [self.run("gt-lr%.6g" % g, self.fp32_options(opts, g), stats=False) for g in grid]
        orig = self.run("orig", opts)
        self.per_example([self.init, orig] + gt_runs)
        if self.paired_ok:  # the FP32 forward of data.py must agree with ampdiag's own evaluation
            chk = [r for r in [self.init] + gt_runs if self.healthy_run(r) and r.get("_losses")]
            bad = [r["name"] for r in chk if abs(sum(r["_losses"]) / len(r["_losses"]) - r["eval_loss"]) >
                   1e-3 * max(1.0, abs(r["eval_loss"]))]
            if bad or not chk or not self.init.get("_losses"):
                self.paired_ok = False
                self.notes.append("per-example losses disagree with ampdiag's eval loss (%s): unpaired band" %
                                  ",".join(bad) or "none")
                for r in [self.init, orig] + gt_runs:
                    r.pop("_losses", None)
        grid_out, best = [], None
        for g, r in zip(grid, gt_runs):
            ok, why = self.learns(r)
            grid_out.append({"lr": g, "status": r["status"], "eval_loss": r["eval_loss"], "eval_acc": r["eval_acc"],
                             "learns": ok})
            if ok and (best is None or r["eval_loss"] < best[1]["eval_loss"]):
                best = (g, r)
        gt = best[1] if best else None
        # the seed band: the ground truth's lr with two other seeds
        self.seed_band, seeds = None, []
        if gt is not None:
            s0 = int(opt_get(opts, "--seed", "1"))
            for k in SEED_OFFSETS:
                r = self.run("gt-seed%d" % (s0 + k), opt_set(self.fp32_options(opts, best[0]), "--seed", str(s0 + k)),
                             stats=False, weights=False)
                seeds.append(r["eval_loss"])
            vals = [gt["eval_loss"]] + [v for v in seeds if finite(v)]
            m = sum(vals) / len(vals)
            self.seed_band = 2 * math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
            if len(vals) < 3:
                self.notes.append("the ground truth's lr gives a non-finite eval loss with another seed")
        res["initial"] = {"eval_loss": self.init["eval_loss"], "eval_se": self.init["eval_se"],
                          "eval_acc": self.init["eval_acc"]}
        res["chance"] = {"accuracy": self.facts["chance"], "source": self.facts["chance_source"],
                         "n_val": self.facts["n_val"]}
        res["paired"] = self.paired_ok
        res["ground_truth"] = {"grid": grid_out, "lr": best[0] if best else None,
                               "eval_loss": gt["eval_loss"] if gt else None, "learns": gt is not None,
                               "seed_eval_losses": seeds, "seed_band": self.seed_band}
        # the label
        j = self.judge(orig, gt, "ground truth")
        res["orig"] = dict(j, status=orig["status"], warnings=orig.get("warnings", []))
        res["label"] = "healthy" if j["learns"] and not j["worse"] else "broken"
        res["label_why"] = j["why"] if res["label"] == "broken" else "learns, within the band of the ground truth"
        # compare's single-shot advice, re-run exactly as given
        traces = [orig["trace"]]
        if prec != "fp32":
            base = self.run("base-fp32", opt_set(opts, "--precision", "fp32"))
            traces = [base["trace"], orig["trace"]]
        cj = os.path.join(self.d, "compare.json")
        with open(cj, "w") as f:
            crc = subprocess.run([self.ctx.ampdiag, "compare"] + traces + ["--format", "json"], stdout=f,
                                 stderr=subprocess.DEVNULL, env=self.ctx.env).returncode
        comp = {"rc": crc}
        try:
            report = json.load(open(cj))
        except ValueError:
            report = None
        if report is None:
            comp.update(decided=False, why="compare exited %d without a report" % crc)
        else:
            rec = report["recommendation"]
            adv = adapter.run_options_from_compare(report, opts, self.ctx.offers)
            comp.update(decided=adv["decided"], why=adv["why"], changes=adv["changes"],
                        unappliable=adv["unappliable"], verdict=rec["precision"]["verdict"],
                        lr_verdict=rec["lr"]["verdict"], lr_suggested=rec["lr"]["suggested"],
                        clip=rec["clip"]["value"] if rec.get("clip") else None,
                        remedies=[[m["option"], m["value"]] for m in rec.get("remedies") or []],
                        reasons=rec["precision"].get("reasons", [])[:3], lr_text=rec["lr"].get("text"),
                        precision_confidence=next((x.get("confidence") for x in rec.get("decisions") or []
                                                   if x.get("what") == "precision"), None),
                        claim=(rec.get("claim") or {}).get("claim"),
                        claimed=bool((rec.get("claim") or {}).get("decided")),
                        claim_text=(rec.get("claim") or {}).get("text"))
            if adv["decided"] and not adv["unappliable"]:
                if not adv["changes"]:
                    rr = orig
                    comp["rerun"] = "the configuration as given (the advice changes nothing)"
                else:
                    rr = self.run("advised", adv["options"], stats=False)
                    comp["rerun"] = argv_of([o for o in adv["options"] if o[0] not in ("--data", "--init-from")])
                self.per_example([rr])
                comp["result"] = self.judge(rr, gt, "ground truth")
                comp["vs_orig"] = self.judge(rr, orig, "the configuration's run")
        res["compare"] = comp
        # ampdiag tune on the configuration
        res["tune"] = self.tune(opts, lr, prec, gt, orig)
        # the outcome
        out = {}
        broken = res["label"] == "broken"
        if comp.get("decided") and "result" in comp:
            r = comp["result"]
            if broken:
                out["compare_fixed"] = r["learns"] and not r["worse"]
            else:
                v = comp["vs_orig"]
                out["compare_harmed"] = not v["learns"] or v["worse"]
                out["compare_harmed_sampling"] = not v["learns"] or v["worse_sampling_only"]
        elif comp.get("decided") and broken:  # advice that cannot be followed fixes nothing
            out["compare_fixed"] = False
        t = res["tune"]
        if t.get("verified"):
            tr = t["result"]
            good = tr["learns"] and not tr["worse"]
            out["false_verification"] = not good
            out["false_verification_sampling"] = not (tr["learns"] and not tr["worse_sampling_only"])
            if broken:
                out["tune_fixed"] = good
            else:
                out["tune_harmed"] = not t["vs_orig"]["learns"] or t["vs_orig"]["worse"]
                out["tune_harmed_sampling"] = not t["vs_orig"]["learns"] or t["vs_orig"]["worse_sampling_only"]
        elif broken:
            out["tune_fixed"] = False
        res["outcome"] = out
        res["notes"] = self.notes
        res["seconds"] = round(time.time() - t0, 1)
        json.dump(res, open(done, "w"), indent=1)
        if not self.ctx.keep:
            for fn in os.listdir(self.d):
                if fn.endswith(".h5"):
                    os.remove(os.path.join(self.d, fn))
            shutil.rmtree(os.path.join(self.d, "tune"), ignore_errors=True)
        return res

    def tune(self, opts, lr, prec, gt, orig):
        tdir = os.path.join(self.d, "tune")
        cache = os.path.join(self.d, "tune.result.json")
        if os.path.exists(cache):
            return json.load(open(cache))
        precs = ["fp32", "fp16", "bf16"] + ([prec] if prec not in ("fp32", "fp16", "bf16") else [])
        rest = [o for o in opts if o[0] not in ("--precision", "--lr")]
        argv = [self.ctx.ampdiag, "tune", "-o", tdir, "--precisions", ",".join(precs), "--lr", "%.6g" % lr] + \
            argv_of(rest)
        rc = self.sh(argv, "tune.log")
        out = {"rc": rc, "precisions": precs}
        try:
            tj = json.load(open(os.path.join(tdir, "tune.json")))
        except (OSError, ValueError):
            tj = None
        if tj is None:
            out.update(verified=False, why="tune exited %d without tune.json" % rc)
        else:
            out.update(verified=bool(tj["verified"]) and rc == 0, why=tj.get("verification"), run=tj.get("run"),
                       rounds=[{"lr": r["lr"], "verdict": r["verdict"], "lr_text": r.get("lr_text")}
                               for r in tj.get("rounds", [])],
                       remedies_applied=tj.get("remedies_applied"))
            if tj.get("run"):
                path = tj["run"] if os.path.isabs(tj["run"]) else os.path.join(self.d, tj["run"])
                r = self.summarise("tune-run", 0, path, None)
                if self.paired_ok and r.get("command_line"):
                    r = self.rerun_for_weights(r)
                self.per_example([r])
                out["run_precision"], out["run_lr"] = r.get("precision"), r.get("lr")
                out["result"] = self.judge(r, gt, "ground truth")
                out["vs_orig"] = self.judge(r, orig, "the configuration's run")
        json.dump(out, open(cache, "w"), indent=1)
        return out

    def rerun_for_weights(self, r):
        """tune keeps no weights: run its command line again with --save-weights (the runs are
        deterministic; the eval loss must come out the same, else no per-example losses)."""
        argv = shlex.split(r["command_line"])
        if not argv or os.path.basename(argv[0]) != "ampdiag":
            return r
        a = [self.ctx.ampdiag]
        skip = False
        for i, t in enumerate(argv[1:], 1):
            if skip:
                skip = False
                continue
            if t in ("-o", "--out", "--save-weights"):
                skip = True
                continue
            a.append(t)
        again = os.path.join(self.d, "tune-again.h5")
        w = os.path.join(self.d, "tune-again.w.h5")
        self.sh(a + ["-o", again, "--save-weights", w] + NO_STATS, "tune-again.log")
        s = self.summarise("tune-again", 0, again, w)
        if finite(s["eval_loss"]) and finite(r["eval_loss"]) and s["eval_loss"] == r["eval_loss"]:
            r = dict(r, weights=s["weights"])
        else:
            self.notes.append("tune's run did not reproduce (%s vs %s): unpaired band" % (s["eval_loss"], r["eval_loss"]))
        return r


# ---------------------------------------------------------------------- cases and reporting
def check_case(res, expect):
    """Each expected outcome of a case of the issue: (name, held?, detail)."""
    c, t, o = res.get("compare", {}), res.get("tune", {}), res.get("outcome", {})
    out = []
    for e in expect:
        if e == "compare-undecided":
            out.append((e, c.get("decided") is False, "verdict %s: %s" % (c.get("verdict"), c.get("why"))))
        elif e == "compare-fixes":
            r = c.get("result") or {}
            ok = bool(c.get("decided")) and r.get("learns") and not r.get("worse")
            out.append((e, bool(ok), "advice %s; re-run: %s" % (c.get("changes"), r.get("why") or c.get("why"))))
        elif e == "compare-lr-not-raised":
            out.append((e, c.get("lr_verdict") != "raise", "lr %s: %s" % (c.get("lr_verdict"), c.get("lr_text"))))
        elif e == "compare-lr-kept":
            out.append((e, c.get("lr_verdict") in ("keep", "keep-use-master-weights", None) or not c.get("decided"),
                        "lr %s: %s" % (c.get("lr_verdict"), c.get("lr_text"))))
        elif e == "clip-sane":
            v = c.get("clip")
            out.append((e, v is None or (finite(v) and v > 0), "clip %s" % v))
        elif e == "tune-no-false-verification":
            out.append((e, not o.get("false_verification"), "tune: %s" % ((t.get("result") or {}).get("why")
                                                                         or t.get("why"))))
        elif e == "tune-fixes":
            out.append((e, bool(o.get("tune_fixed")), "tune verified %s: %s" % (t.get("verified"), t.get("why"))))
        elif e == "broken":
            out.append((e, res.get("label") == "broken", "label %s: %s" % (res.get("label"), res.get("label_why"))))
        else:
            raise SystemExit("harness: unknown expectation '%s'" % e)
    return out


def run_pair(ctx, case):
    """Two configurations' runs compared with each other (runs of different models): compare
    must be undecided."""
    d = os.path.join(ctx.out, "cfg", case["id"])
    done = os.path.join(d, "result.json")
    if os.path.exists(done):
        return json.load(open(done))
    traces, notes = [], []
    for k, sub in enumerate(case["pair"]):
        c = Config(ctx, dict(sub, id="%s/%d" % (case["id"], k)))
        opts, skip = c.prepare()
        if skip:
            res = {"id": case["id"], "config": case, "skipped": skip}
            json.dump(res, open(done, "w"), indent=1)
            return res
        r = c.run("orig", opts)
        traces.append(r["trace"])
    cj = os.path.join(d, "compare.json")
    with open(cj, "w") as f:
        subprocess.run([ctx.ampdiag, "compare"] + traces + ["--format", "json"], stdout=f, stderr=subprocess.DEVNULL,
                       env=ctx.env)
    try:
        rep = json.load(open(cj))
        rec = rep["recommendation"]
        comp = {"decided": rec["precision"]["verdict"] != "undecided", "verdict": rec["precision"]["verdict"],
                "why": rec["precision"].get("text"), "notes": rep.get("notes", [])[:3]}
    except (OSError, ValueError, KeyError):
        comp = {"decided": None, "why": "compare gave no report"}
    res = {"id": case["id"], "config": case, "compare": comp, "notes": notes}
    json.dump(res, open(done, "w"), indent=1)
    return res


def share(num, den):
    return "%d/%d (%s)" % (num, den, "%.0f%%" % (100.0 * num / den) if den else "-")


def summarise(results, elapsed, jobs):
    done = [r for r in results if "label" in r]
    skipped = [r for r in results if "skipped" in r]
    broken = [r for r in done if r["label"] == "broken"]
    healthy = [r for r in done if r["label"] == "healthy"]
    # compare decides on a configuration where its advice claims a fix (recommendation.claim: a
    # cost of a precision observed at the baseline's lr, advice that changes nothing no run
    # measured); its precision verdict alone is also counted, as before round 6
    decided = [r for r in broken if r["compare"].get("claimed")]
    undecided_b = [r for r in broken if not r["compare"].get("claimed")]
    cfix = [r for r in decided if r["outcome"].get("compare_fixed")]
    pdecided = [r for r in broken if r["compare"].get("decided")]
    pfix = [r for r in pdecided if r["outcome"].get("compare_fixed")]
    claims = {}
    for r in broken:
        k = r["compare"].get("claim") or "none"
        c = claims.setdefault(k, [0, 0])
        c[0] += bool(r["outcome"].get("compare_fixed"))
        c[1] += 1
    hclaimed = [r for r in healthy if r["compare"].get("claimed")]
    fixable = [r for r in broken if r["ground_truth"]["learns"]]
    tfix = [r for r in broken if r["outcome"].get("tune_fixed")]
    tfix_f = [r for r in fixable if r["outcome"].get("tune_fixed")]
    charm = [r for r in healthy if r["outcome"].get("compare_harmed")]
    thamr = [r for r in healthy if r["outcome"].get("tune_harmed")]
    fv = [r for r in done if r["outcome"].get("false_verification")]
    fv_s = [r for r in done if r["outcome"].get("false_verification_sampling")]
    charm_s = [r for r in healthy if r["outcome"].get("compare_harmed_sampling")]
    tharm_s = [r for r in healthy if r["outcome"].get("tune_harmed_sampling")]
    secs = [r["seconds"] for r in done if "seconds" in r]
    paired = [r for r in done if r.get("paired")]
    # compare's advice split by the confidence of its precision decision: observed (a run in that
    # precision was given) or a hypothesis (predicted from another precision's trace)
    by_conf = {}
    for conf in ("observed", "hypothesis"):
        dc = [r for r in pdecided if r["compare"].get("precision_confidence") == conf]
        hc = [r for r in healthy if r["compare"].get("decided") and r["compare"].get("precision_confidence") == conf]
        by_conf[conf] = {"fixed": [len([r for r in dc if r in pfix]), len(dc)],
                         "harmed": [len([r for r in hc if r in charm]), len(hc)]}
    g = {
        "configurations": len(results), "judged": len(done), "skipped": len(skipped),
        "broken": len(broken), "healthy": len(healthy),
        "broken_without_any_lr_that_learns": len(broken) - len(fixable),
        "compare_undecided_on_broken": len(undecided_b),
        "compare_fixed": [len(cfix), len(decided)],
        "compare_fixed_precision_decided": [len(pfix), len(pdecided)],
        "compare_claims_on_broken": claims,
        "compare_claims_fix_on_healthy": [len(hclaimed), len(healthy)],
        "tune_fixed": [len(tfix), len(broken)], "tune_fixed_fixable": [len(tfix_f), len(fixable)],
        "healthy_harmed_by_compare": [len(charm), len(healthy)],
        "healthy_harmed_by_tune": [len(thamr), len(healthy)],
        "false_verifications": len(fv),
        "sampling_band_only": {"false_verifications": len(fv_s), "healthy_harmed_by_compare": len(charm_s),
                               "healthy_harmed_by_tune": len(tharm_s)},
        "paired_band": len(paired),
        "compare_by_precision_confidence": by_conf,
        "seconds_per_configuration": round(sum(secs) / len(secs), 1) if secs else None,
        "wall_seconds": round(elapsed, 1), "jobs": jobs,
        "ids": {"false_verifications": [r["id"] for r in fv], "harmed_by_compare": [r["id"] for r in charm],
                "harmed_by_tune": [r["id"] for r in thamr],
                "broken_not_fixed_by_compare": [r["id"] for r in decided if r not in cfix],
                "broken_not_fixed_by_tune": [r["id"] for r in broken if r not in tfix]},
    }
    g["goals"] = {
        "false_verifications == 0": len(fv) == 0,
        "healthy harmed == 0": not charm and not thamr,
        "compare fixes >= 90% of the broken it decides": bool(decided) and len(cfix) >= 0.9 * len(decided),
        "tune fixes >= 97% of the broken an lr of the grid fixes": bool(fixable) and len(tfix_f) >= 0.97 * len(fixable),
    }
    lines = ["advice corpus: %d configurations (%d judged, %d skipped: %s)" % (
        len(results), len(done), len(skipped),
        "; ".join(sorted({r["skipped"] for r in skipped})) or "none"),
        "  broken %d, healthy %d (%d broken where no lr of the grid learns in FP32)" % (
            len(broken), len(healthy), len(broken) - len(fixable)),
        "",
        "  %-58s %s" % ("measure", "value"),
        "  %-58s %s" % ("compare's advice fixes (broken it claims to fix)", share(len(cfix), len(decided))),
        "  %-58s %d" % ("compare undecided on broken (claims no fix)", len(undecided_b)),
        "  %-58s %s" % ("  its claims on broken: fixed/claimed", ", ".join(
            "%s %d/%d" % (k, v[0], v[1]) for k, v in sorted(claims.items()))),
        "  %-58s %s" % ("compare claims a fix on healthy", share(len(hclaimed), len(healthy))),
        "  %-58s %s" % ("compare's advice fixes (broken, precision decided)", share(len(pfix), len(pdecided))),
        "  %-58s %s; %s" % ("  its precision observed: fixes; healthy harmed",
                            share(*by_conf["observed"]["fixed"]), share(*by_conf["observed"]["harmed"])),
        "  %-58s %s; %s" % ("  its precision a hypothesis: fixes; healthy harmed",
                            share(*by_conf["hypothesis"]["fixed"]), share(*by_conf["hypothesis"]["harmed"])),
        "  %-58s %s" % ("tune fixes (all broken)", share(len(tfix), len(broken))),
        "  %-58s %s" % ("tune fixes (broken that an FP32 lr of the grid fixes)", share(len(tfix_f), len(fixable))),
        "  %-58s %s" % ("healthy made worse by compare's advice", share(len(charm), len(healthy))),
        "  %-58s %s" % ("healthy made worse by tune", share(len(thamr), len(healthy))),
        "  %-58s %d" % ("false verifications (tune)", len(fv)),
        "  %-58s %d, %d, %d" % ("the same three with the sampling band alone (no seeds)", len(charm_s), len(tharm_s),
                                len(fv_s)),
        "  %-58s %d of %d" % ("comparisons with the paired band", len(paired), len(done)),
        "",
        "  goals: " + "; ".join("%s: %s" % (k, "met" if v else "NOT met") for k, v in g["goals"].items()),
        "  time: %.0f s wall with -j %d; %s s per configuration (one job)" % (elapsed, jobs,
                                                                               g["seconds_per_configuration"]),
    ]
    for k in ("false_verifications", "harmed_by_compare", "harmed_by_tune"):
        if g["ids"][k]:
            lines.append("  %s: %s" % (k, " ".join(g["ids"][k])))
    return g, "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description="measure compare's and tune's advice on a generated corpus")
    ap.add_argument("--ampdiag", required=True)
    ap.add_argument("-o", "--out", required=True, help="results directory (resumed when it exists)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--family", choices=("mlp", "transformer"),
                    help="only configurations of this model family (the first N of them)")
    ap.add_argument("--cases", help="also these hand-written cases with expected outcomes (cases.json; -n 0 for "
                    "the cases alone)")
    ap.add_argument("--ids", help="only these configuration ids (comma-separated)")
    ap.add_argument("--tap", action="store_true", help="print TAP: one test per configuration (and case)")
    ap.add_argument("--known", help="known failures: lines 'ID reason' (TAP TODO while they fail)")
    ap.add_argument("--write-known", metavar="FILE",
                    help="write the lines that fail now as a known-failures list (to review, never to hide a "
                         "regression)")
    ap.add_argument("--keep", action="store_true", help="keep the traces and tune's folders")
    ap.add_argument("--python", help="the Python for data.py (default: as tests/find_python.sh)")
    a = ap.parse_args(argv)
    if not (os.path.isfile(a.ampdiag) and os.access(a.ampdiag, os.X_OK)):
        sys.stderr.write("harness: --ampdiag %s: not an executable file\n" % a.ampdiag)
        return 2
    if a.n < 0 or a.first < 0 or a.jobs < 1:
        sys.stderr.write("harness: -n and --first must be >= 0, -j >= 1\n")
        return 2
    ctx = Ctx(a)
    os.makedirs(ctx.out, exist_ok=True)
    man = os.path.join(ctx.out, "manifest.json")
    me = {"seed": a.seed, "family": a.family, "ampdiag": ctx.ampdiag, "grid": GRID, "seed_offsets": list(SEED_OFFSETS),
          "generator": gen.GEN_VERSION}
    if os.path.exists(man) and json.load(open(man)) != me:
        sys.stderr.write("harness: %s holds results of another seed, grid or ampdiag: use another -o\n" % ctx.out)
        return 2
    json.dump(me, open(man, "w"))
    if a.family:  # the first N configurations of that model family, from --first on
        items, i = [], a.first
        while len(items) < a.n:
            c = gen.config(a.seed, i)
            if ("transformer" in c["tags"]) == (a.family == "transformer"):
                items.append(c)
            i += 1
    else:
        items = [gen.config(a.seed, i) for i in range(a.first, a.first + a.n)]
    if a.cases:
        items += json.load(open(a.cases))
    if a.ids:
        want = set(a.ids.split(","))
        items = [c for c in items if c["id"] in want]
    known = {}
    if a.known and os.path.exists(a.known):
        for ln in open(a.known):
            ln = ln.strip()
            if ln and not ln.startswith("#"):
                k, _, why = ln.partition(" ")
                known[k] = why.strip()
    if not ctx.py:
        sys.stderr.write("harness: no Python with numpy and h5py: real data sets, scaled initial weights and the "
                         "paired band are skipped\n")
    t0 = time.time()
    results = [None] * len(items)
    tap_n = [0]
    failed = [0]
    out_lock = threading.Lock()

    def emit(i, res):
        c = items[i]
        with out_lock:
            if a.tap:
                report_tap(c, res, known, tap_n, failed)
            else:
                sys.stderr.write("[%d/%d] %s: %s\n" % (sum(r is not None for r in results), len(items), c["id"],
                                                       res.get("skipped") or res.get("label", "") + " " +
                                                       json.dumps(res.get("outcome", {}), sort_keys=True)))

    def work(i):
        c = items[i]
        if "pair" in c:
            return run_pair(ctx, c)
        return Config(ctx, c).process()

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        futs = {ex.submit(work, i): i for i in range(len(items))}
        for f in concurrent.futures.as_completed(futs):
            i = futs[f]
            results[i] = f.result()
            emit(i, results[i])
    elapsed = time.time() - t0
    corpus = [r for r, c in zip(results, items) if "expect" not in c]
    g, text = summarise(corpus, elapsed, a.jobs)
    with open(os.path.join(ctx.out, "results.json"), "w") as f:
        json.dump({"seed": a.seed, "grid": GRID, "summary": g, "results": results}, f, indent=1)
    with open(os.path.join(ctx.out, "summary.txt"), "w") as f:
        f.write(text)
    if a.write_known:
        with open(a.write_known, "w") as f:
            for c, r in zip(items, results):
                for key, why in failing_lines(c, r):
                    f.write("%s %s\n" % (key, why))
    if a.tap:
        print("1..%d" % tap_n[0])
        sys.stdout.write("".join("# " + ln + "\n" for ln in text.splitlines()))
        return 1 if failed[0] else 0
    sys.stdout.write(text)
    return 0 if all(g["goals"].values()) else 1


def corpus_failures(res):
    """What fails the goals that must hold at 0 in a configuration's result."""
    o, bad = res.get("outcome", {}), []
    if o.get("false_verification"):
        bad.append("false verification: %s" % res["tune"]["result"]["why"])
    if o.get("compare_harmed"):
        bad.append("compare's advice harmed a healthy configuration: %s" % res["compare"]["vs_orig"]["why"])
    if o.get("tune_harmed"):
        bad.append("tune harmed a healthy configuration: %s" % res["tune"]["vs_orig"]["why"])
    return bad


def clean(text):
    """A detail without this machine's paths (the trace a tune report names)."""
    return re.sub(r" ?\([^()]*/[^()]*\.h5\)", "", text or "")


def failing_lines(c, res):
    """(known-failures key, reason) of each line that fails now."""
    if "skipped" in res:
        return []
    if "expect" in c:
        return [("%s:%s" % (c["id"], name), clean(detail)) for name, ok, detail in check_case(res, c["expect"])
                if not ok]
    bad = corpus_failures(res)
    return [(c["id"], clean("; ".join(bad)))] if bad else []


def report_tap(c, res, known, tap_n, failed):
    """One TAP line per goal that must hold at 0 (corpus) or per expected outcome (case)."""
    def line(ok, name, detail, todo):
        tap_n[0] += 1
        s = "%s %d - %s" % ("ok" if ok else "not ok", tap_n[0], name)
        if todo is not None:
            s += " # TODO %s" % todo
        elif not ok:
            failed[0] = 1
        print(s)
        if not ok or todo is not None:
            print("# " + clean(detail))
        sys.stdout.flush()
    if "skipped" in res:
        tap_n[0] += 1
        print("ok %d - %s # SKIP %s" % (tap_n[0], c["id"], res["skipped"]))
        return
    if "expect" in c:
        for name, ok, detail in check_case(res, c["expect"]):
            key = "%s:%s" % (c["id"], name)
            line(ok, "%s: %s" % (c["id"], name), detail, known.get(key) if key in known else None)
        return
    todo = known.get(c["id"])
    bad = corpus_failures(res)
    name = "%s (%s; %s): no false verification, no healthy run harmed" % (
        c["id"], res["label"], ",".join(c.get("tags", [])) or "sane")
    line(not bad, name, "; ".join(bad) or "holds now", todo)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
