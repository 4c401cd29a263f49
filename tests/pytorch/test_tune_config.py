"""test_tune_config.py - ampdiag.torch.tune_config(), the environment contract of `ampdiag tune --
CMD` (docs/pytorch.md, "tune on your own script"): without AMPDIAG_TUNE_* variables the script's
own defaults, unchanged; with them, what tune set, applied (autocast's dtype, the GradScaler and
its init_scale, the lr, clip_grad_norm_'s max_norm, the FP32 modules, the schedule, the steps,
the seed); cfg.trace() writes the trace tune reads, with the initial evaluation (step -1) and the
per-example losses. TAP on stdout; argv: ampdiag, a temporary directory.
"""
import math
import os
import re
import sys
import warnings

import h5py
import torch

from common import Tap

import ampdiag.torch  # noqa: E402  (common put the source tree's package first)

tap = Tap()
tmp = sys.argv[2]
for k in [k for k in os.environ if k.startswith("AMPDIAG_TUNE_")]:
    del os.environ[k]


def with_env(**env):
    for k in [k for k in os.environ if k.startswith("AMPDIAG_TUNE_")]:
        del os.environ[k]
    for k, v in env.items():
        os.environ["AMPDIAG_TUNE_" + k] = str(v)


# 1. no variables: the script's defaults, unchanged
cfg = ampdiag.torch.tune_config(precision="bf16", lr=0.02, steps=77, clip=0.0, scaler=False, seed=5)
tap.ok(not cfg.under_tune and cfg.trace_path is None, "no variables: not under tune, no trace path")
tap.ok((cfg.precision, cfg.lr, cfg.steps, cfg.max_norm, cfg.seed) == ("bf16", 0.02, 77, None, 5),
       "no variables: precision, lr, steps, max_norm, seed are the defaults given (%r)" % (cfg,))
tap.ok(cfg.dtype is torch.bfloat16 and cfg.autocast("cpu").fast_dtype == torch.bfloat16,
       "no variables: autocast with the script's dtype")
tap.ok(not cfg.scaler("cpu").is_enabled(), "no variables: bf16 with scaler=False: a disabled GradScaler")
d = ampdiag.torch.tune_config()
tap.ok((d.precision, d.lr, d.steps, d.max_norm, d.fp32_layers, d.loss_scale) == ("fp32", None, None, None, [], "none"),
       "tune_config() with nothing: fp32, the lr/steps left to the script, no clip, no FP32 modules, no scaler")
tap.ok(not d.autocast("cpu")._enabled, "fp32: autocast disabled")
m = torch.nn.Linear(3, 2)
tr = d.trace(m, torch.optim.SGD(m.parameters(), lr=0.1))
tap.ok(tr.path is None and tr.step(1.0) is None and tr.eval(1.0, initial=True) is None,
       "outside tune without a path: cfg.trace() is a tracer that does nothing")
f16 = ampdiag.torch.tune_config(precision="fp16", scale_init=1024.0)
s = f16.scaler("cpu")
tap.ok(s.is_enabled() and s.get_scale() == 1024.0, "fp16 by default: an enabled GradScaler at the init_scale given")

# 2. the variables tune sets override them
trace = os.path.join(tmp, "cfg.h5")
with_env(TRACE=trace, PRECISION="fp16", LR="0.00125", STEPS="12", SEED="9", CLIP="0.5", LOSS_SCALE="dynamic",
         SCALE_INIT="256", FP32_LAYERS="head,nosuch", OPTIM_STATE="fp32", TRACE_EVERY="1", HIST_EVERY="0")
cfg = ampdiag.torch.tune_config(precision="fp32", lr=0.3, steps=100, clip=0.0, scaler=False, seed=1)
tap.ok(cfg.under_tune and cfg.trace_path == trace, "under tune: the trace path is AMPDIAG_TUNE_TRACE")
tap.ok((cfg.precision, cfg.lr, cfg.steps, cfg.seed, cfg.max_norm) == ("fp16", 0.00125, 12, 9, 0.5),
       "under tune: precision, lr, steps, seed, max_norm from the variables (%r)" % (cfg,))
s = cfg.scaler("cpu")
tap.ok(s.is_enabled() and s.get_scale() == 256.0, "LOSS_SCALE=dynamic SCALE_INIT=256 over scaler=False: "
       "an enabled GradScaler(init_scale=256)")
with_env(PRECISION="fp16", LOSS_SCALE="none")
tap.ok(not ampdiag.torch.tune_config(scaler=True).scaler("cpu").is_enabled(), "LOSS_SCALE=none: a disabled scaler")
with_env(PRECISION="fp16", LOSS_SCALE="128")
s = ampdiag.torch.tune_config().scaler("cpu")
tap.ok(s.is_enabled() and s.get_scale() == 128.0 and s.get_growth_interval() >= 2 ** 30,
       "LOSS_SCALE=128: a static scale (a GradScaler at 128 that does not grow)")
with_env(PRECISION="fp64")
try:
    ampdiag.torch.tune_config()
    tap.ok(False, "PRECISION=fp64 refused")
except ValueError as e:
    tap.ok("fp64" in str(e), "PRECISION=fp64 refused: %s" % e)

# 3. cfg.trace() under tune: FP32 modules, clip, the trace tune reads with the initial evaluation
with_env(TRACE=trace, PRECISION="bf16", LR="0.01", STEPS="6", SEED="3", CLIP="0.25", FP32_LAYERS="head,nosuch",
         OPTIM_STATE="fp32", TRACE_EVERY="1", HIST_EVERY="0")
cfg = ampdiag.torch.tune_config(lr=0.5, steps=50)
torch.manual_seed(cfg.seed)
model = torch.nn.Sequential()
model.add_module("body", torch.nn.Linear(8, 16))
model.add_module("head", torch.nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tracer = cfg.trace(model, opt, cfg.scaler("cpu"))
tap.ok(any("nosuch" in str(w.message) and "not applied" in str(w.message) for w in caught),
       "FP32_LAYERS naming no module: warned, not applied")
tap.ok(not any("OPTIM_STATE" in str(w.message) for w in caught),
       "OPTIM_STATE=fp32 with FP32 parameters: already so, no warning")
with cfg.autocast("cpu"):
    h = model.body(x)
    out = model.head(h)
tap.ok(h.dtype == torch.bfloat16 and out.dtype == torch.float32,
       "under bf16 autocast the body runs in bf16, the FP32 module 'head' in float32")
with torch.no_grad(), cfg.autocast("cpu"):
    per = torch.nn.functional.cross_entropy(model(x).float(), y, reduction="none")
tracer.eval(per.mean(), 0.25, examples=per, example_metric=[1.0] * 8 + [0.0] * 24, initial=True)
norms = []
for t in range(cfg.steps):
    with cfg.autocast("cpu"):
        loss = torch.nn.functional.cross_entropy(model(x), y) * 100  # large gradients: clipped
    loss.backward()
    norms.append(float(cfg.clip(model.parameters())))
    opt.step()
    opt.zero_grad()
    tracer.step(loss)
with torch.no_grad(), cfg.autocast("cpu"):
    per1 = torch.nn.functional.cross_entropy(model(x).float(), y, reduction="none")
tracer.eval(per1.mean(), 0.5, examples=per1)
tracer.close()
with h5py.File(trace, "r") as f:
    a = f.attrs
    steps = f["steps"][:]
    ev = f["eval"][:]
    ex = f["eval_examples"][:] if "eval_examples" in f else None
    prec = a["precision"].decode() if isinstance(a["precision"], bytes) else str(a["precision"])
    tap.ok(prec == "bf16" and float(a["lr"]) == 0.01 and float(a["clip"]) == 0.25,
           "the trace: precision bf16, lr 0.01, clip 0.25 as tune set (%s, %s, %s)" % (prec, a["lr"], a["clip"]))
    tap.ok(len(steps) == 6, "the trace: AMPDIAG_TUNE_STEPS=6 steps (%d)" % len(steps))
    tap.ok(list(ev["step"]) == [-1, 5] and abs(ev["loss"][0] - float(per.mean())) < 1e-6,
           "the trace: the initial evaluation at step -1, the last at step 5 (%s)" % list(ev["step"]))
    tap.ok(math.isfinite(ev["loss_se"][0]) and ev["loss_se"][0] > 0, "the initial evaluation's loss_se from its examples")
    tap.ok(ex is not None and len(ex) == 64 and list(ex["step"][:32]) == [-1] * 32
           and abs(ex["loss"][40] - float(per1[8])) < 1e-9 and ex["metric"][0] == 1.0 and math.isnan(ex["metric"][40]),
           "the trace: /eval_examples holds the 32 examples of each evaluation, their losses and metrics")
    coef = list(steps["clip_coef"])
tap.ok(all(n > 0.25 for n in norms) and all(abs(c - 0.25 / n) < 1e-3 * c for c, n in zip(coef, norms)),
       "cfg.clip() clipped to max_norm 0.25: the trace's clip_coef is 0.25 / the norm (norms %.3g..%.3g)"
       % (min(norms), max(norms)))
rc = os.system("%s info %s > %s 2>&1" % (sys.argv[1], trace, os.path.join(tmp, "info.txt")))
info = open(os.path.join(tmp, "info.txt")).read()
tap.ok(rc == 0 and re.search(r"bf16 (learns|does not learn): eval loss [0-9.]+ at step 5 from [0-9.]+ at the start",
                             info) is not None, "ampdiag info judges learning against the evaluation at step -1")

# 4. the schedules tune sets (the LR range test: exponentially from MIN_LR to the lr)
with_env(TRACE=os.path.join(tmp, "range.h5"), LR="10", STEPS="5", SCHEDULE="range:1e-3", TRACE_EVERY="0",
         HIST_EVERY="0")
cfg = ampdiag.torch.tune_config(lr=0.1, steps=50)
m = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(m.parameters(), lr=cfg.lr)
lrs = []
with cfg.trace(m, opt) as tracer:
    for t in range(cfg.steps):
        m(torch.randn(3, 4)).pow(2).mean().backward()
        opt.step()
        lrs.append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        tracer.step(1.0)
want = [1e-3 * (10 / 1e-3) ** (t / 4) for t in range(5)]
tap.ok(all(abs(a - b) <= 1e-9 * b for a, b in zip(lrs, want)), "SCHEDULE=range:1e-3: lr %s" % ["%.3g" % v for v in lrs])
with h5py.File(os.path.join(tmp, "range.h5"), "r") as f:
    rec = list(f["steps"]["lr"])
tap.ok(all(abs(a - b) <= 1e-9 * b for a, b in zip(rec, want)), "the trace records the range test's lr of every step")
with_env()
sys.exit(tap.plan())
