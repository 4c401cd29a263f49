#!/usr/bin/env python3
"""test_models.py - the PyTorch tracer on the real models its users train, where the packages are
installed (each part is skipped without its package): torchvision's resnet18 in FP32, BF16
autocast, FP16 autocast with and without a GradScaler; a transformers BERT in an own loop (FP16
without a scaler, attention scores on) and under the HF Trainer with the callback made in
Trainer(callbacks=[...]); Lightning in 16-true (FP16 weights, no scaler) and with torch.compile. Random initialisation, synthetic data, nothing downloaded; the CPU, a few steps.
What is checked is what the traces hold (names, events, scales, lr, clip, accuracy) and that
ampdiag info and compare read them. Prints TAP.

usage: test_models.py AMPDIAG WORKDIR   (python/ on PYTHONPATH, AMPDIAG_LIB set or a built tree)
"""
import importlib.util
import logging
import math
import os
import subprocess
import sys
import warnings

import torch

from common import Tap

import ampdiag.torch
from test_evidence import read, codes

AMPDIAG, WORK = sys.argv[1], sys.argv[2]
TAP = Tap()
ok, skip = TAP.ok, TAP.skip
F = torch.nn.functional
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def path(name):
    return os.path.join(WORK, name)


def have(mod):
    return importlib.util.find_spec(mod) is not None


def ampdiag_run(*args):
    return subprocess.run([AMPDIAG] + list(args), capture_output=True, text=True)


def warned(ws):
    return [str(w.message) for w in ws if issubclass(w.category, ampdiag.torch.AmpdiagWarning)]


# ---------------------------------------------------------------------- torchvision


def test_resnet18():
    if not have("torchvision"):
        skip("torchvision is not installed (pip install torchvision)")
        return
    import torchvision

    def run(name, dtype, scaler):
        torch.manual_seed(0)
        m = torchvision.models.resnet18(num_classes=10)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            with ampdiag.torch.trace(path(name), m, opt, scaler, overwrite=True, trace_every=2, steps=3,
                                     attrs={"model": "resnet18", "data": "synthetic"}) as tr:
                for i in range(3):
                    g = torch.Generator().manual_seed(i)
                    x, y = torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g)
                    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                        loss = F.cross_entropy(m(x), y)
                    if scaler is not None:
                        scaler.scale(loss).backward()
                        scaler.step(opt)
                        scaler.update()
                    else:
                        loss.backward()
                        opt.step()
                    opt.zero_grad()
                    tr.step(loss)
        return read(path(name)), warned(ws)
    runs = {"fp32": run("resnet-fp32.h5", None, None), "bf16": run("resnet-bf16.h5", torch.bfloat16, None),
            "fp16": run("resnet-fp16.h5", torch.float16, torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)),
            "fp16-noscaler": run("resnet-fp16-noscaler.h5", torch.float16, None)}
    t, _ = runs["fp32"]
    convs = [n for n in t["names"] if n.endswith("conv1") or n.endswith("conv2")]
    left = t["attrs"].get("layers_left_out", "")
    ok(t["names"][:3] == ["conv1", "bn1", "maxpool"] and "fc" in t["names"] and "loss" in t["names"] and
       len(convs) == 17 and not any("relu" in n for n in t["names"]) and left.startswith("9 parameterless"),
       "resnet18: layers named as PyTorch names them (conv1, bn1, maxpool, layer1.0.conv1 ... fc, and the loss), "
       "the 9 ReLU modules left out (%s...)" % left[:60])
    ev = {k: [e[1] for e in v[0]["events"] if e[1] in ("no_loss_scaling", "hidden_scaler")] for k, v in runs.items()}
    ok(ev == {"fp32": [], "bf16": [], "fp16": [], "fp16-noscaler": ["no_loss_scaling"]} and
       any("GradScaler" in w for w in runs["fp16-noscaler"][1]) and not runs["fp16"][1],
       "resnet18 in fp32, bf16, fp16 with and without a GradScaler: only the scaler-less fp16 run is warned and "
       "records no_loss_scaling (%s)" % ev)
    st = runs["fp16"][0]["steps"]
    ok(runs["fp16"][0]["attrs"]["precision"] == "fp16" and st["loss_scale"][0] == 65536.0 and
       runs["bf16"][0]["attrs"]["precision"] == "bf16" and runs["fp16"][0]["compute"][0] == "fp16",
       "... precision and compute formats from autocast, the GradScaler's scale (%s)" % list(st["loss_scale"]))
    files = [path("resnet-%s.h5" % k) for k in ("fp32", "bf16", "fp16", "fp16-noscaler")]
    infos = [ampdiag_run("info", f) for f in files]
    cmp = ampdiag_run("compare", *files)
    ok(all(r.returncode == 0 for r in infos) and "no_loss_scaling" in infos[3].stdout and cmp.returncode == 0,
       "ampdiag info reads the four traces (and lists the no_loss_scaling event), compare reads them together "
       "(exit %d%s)" % (cmp.returncode, (": " + cmp.stderr.strip()[:200]) if cmp.returncode else ""))


# ---------------------------------------------------------------------- transformers


def bert_config(transformers):
    return transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=32, num_labels=2,
                                   attn_implementation="sdpa")


def bert_data(n=32, t=12):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 64, (n, t), generator=g)
    return ids, (ids[:, 0] > 32).long()


def test_bert_loop():
    if not have("transformers"):
        skip("transformers is not installed (pip install transformers)")
        return
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(bert_config(transformers))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids, labels = bert_data()
    losses = []
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        with ampdiag.torch.trace(path("bert-fp16.h5"), model, opt, overwrite=True, trace_every=1,
                                 attention_scores=True) as tr:
            for i in range(3):
                with torch.autocast("cpu", dtype=torch.float16):
                    out = model(input_ids=ids[8 * i:8 * i + 8], labels=labels[8 * i:8 * i + 8])
                out.loss.backward()
                opt.step()
                opt.zero_grad()
                losses.append(out.loss.item())
                tr.step()  # the loss of the model's output
    t = read(path("bert-fp16.h5"))
    sc = "bert.encoder.layer.0.attention.self.scores"
    r = t["tensors"].get((0, sc, "activation"))
    i = t["names"].index(sc) if sc in t["names"] else -1
    ok(r is not None and int(r["count"]) == 8 * 4 * 12 * 12 and t["ops"][i] == "attention_scores" and
       t["compute"][i] == "fp16" and float(r["absmax"]) > 0,
       "BERT (transformers %s, SDPA) in an own loop with attention_scores=True: %s records the logits of its SDPA "
       "call (%s values, max |logit| %s, computed in %s)" % (transformers.__version__, sc, r["count"] if r is not None
                                                            else None, r["absmax"] if r is not None else None,
                                                            t["compute"][i] if i >= 0 else None))
    ok(all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(t["steps"]["loss"], losses)) and len(t["steps"]) == 3 and
       [e[1] for e in codes(t, "no_loss_scaling")] == ["no_loss_scaling"] and warned(ws) and
       "loss" in t["names"] and not any(n.endswith(("dropout", "intermediate_act_fn")) for n in t["names"]),
       "... step() takes the loss of the model's output, FP16 without a scaler is warned and recorded, the loss is "
       "a layer, Dropout and the GELU left out (%s)" % t["attrs"].get("layers_left_out", "")[:70])


def test_hf_trainer():
    if not (have("transformers") and have("accelerate")):
        skip("transformers / accelerate are not installed (pip install transformers accelerate)")
        return
    import transformers
    import ampdiag.hf
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(bert_config(transformers))
    ids, labels = bert_data(48)
    data = [{"input_ids": ids[i], "labels": labels[i]} for i in range(32)]
    evald = [{"input_ids": ids[i], "labels": labels[i]} for i in range(32, 48)]
    steps = 4
    args = transformers.TrainingArguments(output_dir=path("hf-trainer"), max_steps=steps, per_device_train_batch_size=4,
                                          learning_rate=1e-3, lr_scheduler_type="linear", max_grad_norm=1.0,
                                          report_to=[], use_cpu=True, logging_strategy="no", save_strategy="no",
                                          eval_strategy="steps", eval_steps=steps, disable_tqdm=True)
    cb = ampdiag.hf.AmpdiagTrainerCallback(path("hf-trainer.h5"), overwrite=True, trace_every=2)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, eval_dataset=evald, callbacks=[cb])
    # On the CPU Accelerate runs fp16=True without a GradScaler (and without autocast); one is put in
    # its place so that the loop scales the loss as on a GPU (Accelerator.backward scales with it,
    # the AcceleratedOptimizer steps and updates it): the callback was given neither the trainer
    # nor the scaler.
    trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    eval_loss = [e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e]
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids[32:48]).logits
    acc = float((logits.argmax(1) == labels[32:48]).float().mean())
    t = read(path("hf-trainer.h5"))
    st = t["steps"]
    want_lr = [1e-3 * (1 - s / steps) for s in range(steps)]
    ok(st["loss_scale"][0] == 1024.0 and t["attrs"]["loss_scale"] == "dynamic" and
       all(math.isfinite(v) and v < 10 for v in st["grad_norm"]),
       "HF Trainer (transformers %s), the callback made in Trainer(callbacks=[...]): it finds the Accelerator's "
       "GradScaler (loss_scale %s, attribute %s) and records unscaled gradient norms (%s)"
       % (transformers.__version__, list(st["loss_scale"]), t["attrs"]["loss_scale"],
          ["%.3g" % v for v in st["grad_norm"]]))
    ok(t["attrs"]["lr"] == 1e-3 and all(abs(a - b) <= 1e-12 for a, b in zip(st["lr"], want_lr)) and
       t["attrs"]["clip"] == 1.0,
       "... the configured lr (%s, want 0.001), the linear schedule's lr of every step (%s), the clip (max_grad_norm "
       "%s)" % (t["attrs"]["lr"], ["%.6g" % v for v in st["lr"]], t["attrs"]["clip"]))
    import h5py
    with h5py.File(path("hf-trainer.h5"), "r") as f:
        ev = f["eval"][:]
    ok(len(ev) == 1 and abs(float(ev[0]["metric"]) - acc) < 1e-9 and eval_loss and
       abs(float(ev[0]["loss"]) - eval_loss[-1]) < 1e-9, "... the evaluation's accuracy, counted by the callback without compute_metrics (%s, want %s)"
       % (ev[0]["metric"] if len(ev) else None, acc))


# ---------------------------------------------------------------------- Lightning


def test_lightning():
    if not have("lightning"):
        skip("lightning is not installed (pip install lightning)")
        return
    import lightning
    import ampdiag.lightning
    from torch._dynamo.utils import counters

    def backend(gm, example_inputs):
        return gm.forward

    class Lit(lightning.LightningModule):
        def __init__(self, compiled):
            super().__init__()
            body = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(8, 8), torch.nn.ReLU())])
            self.body = torch.compile(body, backend=backend) if compiled else body
            self.head = torch.nn.Linear(8, 2)

        def forward(self, x):
            return self.head(self.body(x))

        def training_step(self, b, i):
            x, y = b
            return F.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=g)
    ds = torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long())
    msgs = []

    class H(logging.Handler):
        def emit(self, record):
            msgs.append(record.getMessage())

    h = H()
    logging.getLogger("torch._dynamo").addHandler(h)

    def fit(name, precision, compiled):
        import torch._dynamo
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        tr = lightning.Trainer(max_steps=8, accelerator="cpu", precision=precision, logger=False,
                               enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                               callbacks=[ampdiag.lightning.AmpdiagCallback(path(name), overwrite=True, trace_every=2)])
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            tr.fit(Lit(compiled), torch.utils.data.DataLoader(ds, batch_size=8))
        return read(path(name)), warned(ws), counters["frames"]["total"]
    try:
        t16, w16, _ = fit("lightning-16.h5", "16-true", False)
        te, _, _ = fit("lightning-eager.h5", "bf16-mixed", False)
        tc, _, frames = fit("lightning-compiled.h5", "bf16-mixed", True)
    finally:
        logging.getLogger("torch._dynamo").removeHandler(h)
    ok(t16["attrs"]["precision"] == "fp16-pure" and
       [e[1] for e in codes(t16, "no_loss_scaling")] == ["no_loss_scaling"] and any("GradScaler" in w for w in w16),
       "Lightning %s, precision 16-true (FP16 weights, no loss scaler; 16-mixed falls back to bf16 on the CPU): "
       "warned and recorded (no_loss_scaling)" % lightning.__version__)
    limit = [m for m in msgs if "recompile_limit" in m or "cache_size_limit" in m]
    ok(tc["names"] == te["names"] and tc["names"][0] == "body.0" and not any("_orig_mod" in n for n in tc["names"]) and
       not limit and len(tc["steps"]) == 8 and list(tc["steps"]["loss"]) == list(te["steps"]["loss"]),
       "Lightning with torch.compile on the module's body: the layers named as without it (%s ...), the same losses, "
       "%d frames compiled, no recompile limit reached (%s)" % (tc["names"][:2], frames, limit[:1]))


def main():
    torch.set_num_threads(1)
    for t in (test_resnet18, test_bert_loop, test_hf_trainer, test_lightning):
        try:
            t()
        except Exception as e:  # one model's failure is a failed test, not a crash of the rest
            import traceback
            traceback.print_exc(file=sys.stdout)
            ok(False, "%s raised %s: %s" % (t.__name__, type(e).__name__, e))
    return TAP.plan()


if __name__ == "__main__":
    sys.exit(main())
