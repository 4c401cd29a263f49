#!/usr/bin/env python3
"""test_integrations.py - the thin wrappers of the PyTorch tracer: the Lightning Callback
(ampdiag.lightning), the Hugging Face TrainerCallback (ampdiag.hf) and a loop prepared by
Accelerate. Each is driven by a fake trainer object (always) and by the real package where it is
installed (else that part is skipped). Prints TAP.

usage: test_integrations.py AMPDIAG WORKDIR
"""
import importlib.util
import math
import os
import subprocess
import sys
import types
import warnings

import h5py
import torch

from common import Tap

import ampdiag.hf
import ampdiag.lightning

AMPDIAG, WORK = sys.argv[1], sys.argv[2]
TAP = Tap()
ok = TAP.ok
skip = TAP.skip


def path(name):
    return os.path.join(WORK, name)


def have(mod):
    return importlib.util.find_spec(mod) is not None


def summary(p):
    with h5py.File(p, "r", swmr=True) as f:
        return {"steps": f["steps"][:], "evals": f["eval"][:], "names": [n.decode() for n in f["layers"]["name"]],
                "compute": [c.decode() for c in f["layers"]["compute"]],
                "attrs": {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()},
                "tensors": len(f["tensors"])}


def info_ok(p):
    return subprocess.run([AMPDIAG, "info", p], capture_output=True).returncode == 0


def tiny():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def batch(i):
    g = torch.Generator().manual_seed(i)
    x = torch.randn(8, 4, generator=g)
    return x, (x.sum(1) > 0).long()


# ---------------------------------------------------------------------- Lightning


def test_lightning_fake():
    """The callback's logic on a stand-in trainer: gradient accumulation over 2 batches, a
    GradScaler in the precision plugin, validation metrics, the sanity check."""
    model = tiny()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    trainer = types.SimpleNamespace(optimizers=[opt], max_steps=5, global_step=0, sanity_checking=False,
                                    callback_metrics={},
                                    strategy=types.SimpleNamespace(precision_plugin=types.SimpleNamespace(scaler=scaler)))
    cb = ampdiag.lightning.AmpdiagCallback(path("lightning-fake.h5"), overwrite=True, trace_every=2)
    cb.on_train_start(trainer, model)
    trainer.sanity_checking = True
    trainer.callback_metrics = {"val_loss": torch.tensor(9.0)}
    cb.on_validation_epoch_end(trainer, model)  # the sanity check: not recorded
    trainer.sanity_checking = False
    for i in range(10):
        x, y = batch(i)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss / 2).backward()
        if i % 2 == 1:
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            trainer.global_step += 1
        cb.on_train_batch_end(trainer, model, {"loss": loss}, (x, y), i)
        if i == 5:
            trainer.callback_metrics = {"val_loss": torch.tensor(0.5), "val_acc": torch.tensor(0.75)}
            cb.on_validation_epoch_end(trainer, model)
    cb.on_train_end(trainer, model)
    s = summary(path("lightning-fake.h5"))
    ok(len(s["steps"]) == 5 and list(s["steps"]["loss_scale"]) == [256.0] * 5 and s["attrs"]["precision"] == "fp16"
       and s["attrs"]["loss_scale"] == "dynamic" and s["attrs"]["status"] == "complete",
       "Lightning callback (stand-in trainer): one step record per optimizer step (5 of 10 batches), the "
       "precision plugin's GradScaler (scale 256), precision fp16 from autocast, closed complete")
    ok(len(s["evals"]) == 1 and s["evals"][0]["step"] == 2 and s["evals"][0]["loss"] == 0.5 and
       s["evals"][0]["metric"] == 0.75, "... an eval record from callback_metrics (the sanity check left out)")
    model2 = tiny()
    cb2 = ampdiag.lightning.AmpdiagCallback(path("lightning-exc.h5"), overwrite=True)
    t2 = types.SimpleNamespace(optimizers=[torch.optim.SGD(model2.parameters(), lr=0.1)], max_steps=-1,
                               global_step=0)
    cb2.on_train_start(t2, model2)
    cb2.on_exception(t2, model2, RuntimeError("boom"))
    ok(summary(path("lightning-exc.h5"))["attrs"]["status"] == "interrupted",
       "Lightning callback: on_exception closes the trace as interrupted")


def test_lightning_real():
    if not have("lightning"):
        skip("lightning is not installed (pip install lightning)")
        return
    import lightning

    class Lit(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = tiny()

        def forward(self, x):
            return self.net(x)

        def training_step(self, b, i):
            x, y = b
            return torch.nn.functional.cross_entropy(self(x), y)

        def validation_step(self, b, i):
            x, y = b
            out = self(x)
            self.log("val_loss", torch.nn.functional.cross_entropy(out, y))
            self.log("val_acc", (out.argmax(1) == y).float().mean())

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    xs = torch.cat([batch(i)[0] for i in range(6)])
    ds = torch.utils.data.TensorDataset(xs, (xs.sum(1) > 0).long())
    data = torch.utils.data.DataLoader(ds, batch_size=8)
    trainer = lightning.Trainer(max_steps=6, accelerator="cpu", precision="bf16-mixed", logger=False,
                                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                                val_check_interval=3, num_sanity_val_steps=0,
                                callbacks=[ampdiag.lightning.AmpdiagCallback(path("lightning.h5"), overwrite=True)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Lit(), data, torch.utils.data.DataLoader(ds, batch_size=16))
    s = summary(path("lightning.h5"))
    ok(len(s["steps"]) == 6 and s["attrs"]["precision"] == "bf16" and s["names"] == ["net.0", "net.2", "loss"]
       and s["compute"][0] == "bf16" and len(s["evals"]) >= 1 and all(math.isfinite(v) for v in s["steps"]["loss"])
       and info_ok(path("lightning.h5")),
       "Lightning %s Trainer (bf16-mixed, 6 steps): 6 step records, layers net.0 and net.2 computing in bf16 (the "
       "ReLU left out) and the loss, %d evals, ampdiag info reads it" % (lightning.__version__, len(s["evals"])))


# ---------------------------------------------------------------------- Hugging Face


def test_hf_fake():
    """The callback driven by hand: a model that returns its loss as Hugging Face models do (a
    dict with "loss"), the metric found without being named; then one whose output has no loss,
    where step() raises instead of recording NaN."""

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = tiny()

        def forward(self, x, labels=None):
            logits = self.net(x)
            out = {"logits": logits}
            if labels is not None:
                out["loss"] = torch.nn.functional.cross_entropy(logits, labels)
            return out

    model = WithLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    cb = ampdiag.hf.AmpdiagTrainerCallback(path("hf-fake.h5"), overwrite=True)
    args, control = types.SimpleNamespace(), types.SimpleNamespace()
    state = types.SimpleNamespace(max_steps=4)
    cb.on_train_begin(args, state, control, model=model, optimizer=opt)
    losses = []
    for i in range(4):
        x, y = batch(i)
        loss = model(x, labels=y)["loss"]
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        cb.on_step_end(args, state, control)
    cb.on_evaluate(args, state, control, metrics={"eval_loss": 0.25, "eval_accuracy": 0.5})
    cb.on_train_end(args, state, control)
    s = summary(path("hf-fake.h5"))
    ok(len(s["steps"]) == 4 and all(abs(a - b) <= 1e-6 * b for a, b in zip(s["steps"]["loss"], losses)) and
       len(s["evals"]) == 1 and s["evals"][0]["metric"] == 0.5 and s["attrs"]["steps_planned"] == 4 and
       s["attrs"]["status"] == "complete",
       "HF callback (stand-in trainer): a step per on_step_end with the loss of the model's output, eval_loss and "
       "eval_accuracy (found without metric=) from on_evaluate, steps_planned from the state")
    model2 = tiny()
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
    cb2 = ampdiag.hf.AmpdiagTrainerCallback(path("hf-fake-noloss.h5"), overwrite=True)
    cb2.on_train_begin(args, state, control, model=model2, optimizer=opt2)
    x, y = batch(0)
    torch.nn.functional.cross_entropy(model2(x), y).backward()
    opt2.step()
    err = None
    try:
        cb2.on_step_end(args, state, control)
    except ValueError as e:
        err = str(e)
    cb2.on_train_end(args, state, control)
    ok(err is not None and "tracer.step(loss)" in err,
       "HF callback: a model whose output holds no loss: step() raises (%r), no step recorded with a NaN loss" % err)


def test_hf_real():
    if not (have("transformers") and have("accelerate")):
        skip("transformers / accelerate are not installed (pip install transformers accelerate)")
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import transformers
    transformers.logging.set_verbosity_error()
    cfg = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16, num_labels=2)
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(cfg)
    g = torch.Generator().manual_seed(3)
    data = [{"input_ids": torch.randint(1, 40, (8,), generator=g), "labels": torch.tensor(i % 2)} for i in range(32)]
    args = transformers.TrainingArguments(output_dir=path("hf-out"), max_steps=6, per_device_train_batch_size=4,
                                          gradient_accumulation_steps=2, learning_rate=1e-3, report_to=[],
                                          use_cpu=True, bf16=True, logging_strategy="no", save_strategy="no",
                                          eval_strategy="steps", eval_steps=3, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, eval_dataset=data[:8])
    trainer.add_callback(ampdiag.hf.AmpdiagTrainerCallback(path("hf.h5"), trainer, overwrite=True, trace_every=3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    s = summary(path("hf.h5"))
    q = "bert.encoder.layer.0.attention.self.query"
    ok(len(s["steps"]) == 6 and all(math.isfinite(v) for v in s["steps"]["loss"]) and q in s["names"] and
       s["compute"][s["names"].index(q)] == "bf16" and s["attrs"]["precision"] == "bf16" and len(s["evals"]) == 2
       and info_ok(path("hf.h5")),
       "transformers %s Trainer (BERT, bf16, 2 micro-batches per step, 6 steps): 6 step records with the "
       "model's loss, %s computing in bf16, 2 evals, ampdiag info reads it" % (transformers.__version__, q))


# ---------------------------------------------------------------------- Accelerate


def test_accelerate():
    if not have("accelerate"):
        skip("accelerate is not installed (pip install accelerate)")
        return
    import accelerate
    import ampdiag.torch
    acc = accelerate.Accelerator(cpu=True, mixed_precision="bf16")
    model = tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt = acc.prepare(model, opt)
    with ampdiag.torch.trace(path("accelerate.h5"), acc.unwrap_model(model), opt, acc.scaler, overwrite=True,
                             trace_every=1) as tr:
        for i in range(5):
            x, y = batch(i)
            with acc.autocast():
                loss = torch.nn.functional.cross_entropy(model(x), y)
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            tr.step(loss)
    s = summary(path("accelerate.h5"))
    ok(len(s["steps"]) == 5 and s["attrs"]["precision"] == "bf16" and s["tensors"] == 5 * (3 + 3 + 2 + 2 + 2) and
       all(v == 1e-2 for v in s["steps"]["lr"]),
       "Accelerate %s (bf16): the AcceleratedOptimizer is unwrapped: lr and weight/update records of every step"
       % accelerate.__version__)


def main():
    torch.set_num_threads(1)
    test_lightning_fake()
    test_lightning_real()
    test_hf_fake()
    test_hf_real()
    test_accelerate()
    return TAP.plan()


if __name__ == "__main__":
    sys.exit(main())
