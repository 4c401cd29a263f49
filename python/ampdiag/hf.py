"""A Hugging Face TrainerCallback that traces a transformers.Trainer run into an ampdiag trace.

    from ampdiag.hf import AmpdiagTrainerCallback
    trainer = Trainer(model=model, args=TrainingArguments(..., fp16=True), ...,
                      callbacks=[AmpdiagTrainerCallback("run.h5")])
    trainer.train()

(or ``trainer.add_callback(AmpdiagTrainerCallback("run.h5", trainer))``). A thin wrapper of
ampdiag.torch.Tracer: at on_train_begin the tracer is attached to the model and the optimizer the
Trainer passes and to the GradScaler of the trainer's Accelerator. The trainer is the one given,
else the Trainer whose training loop called on_train_begin (so a callback made in
``Trainer(callbacks=[...])`` sees the scaler too); the AcceleratedOptimizer holds the same scaler.
on_step_end records a step (once per optimizer step, after gradient accumulation) with the loss
of the step's forward passes: as the trainer's compute_loss returned it (the callback wraps the
trainer's compute_loss while training), else the model's ``outputs.loss``, averaged over the
step's forward passes. The clip is the trainer's ``max_grad_norm``. on_evaluate records an
evaluation from the metrics: ``eval_loss`` and ``metric`` (default: ``eval_accuracy`` or another
``eval_acc*`` key, else the accuracy the callback counts itself in the evaluation's forward passes,
argmax of the logits against the labels); the trace is closed at on_train_end. Other keyword
arguments go to the Tracer (trace_every, layers, attention_scores, ...).

Without transformers installed the class derives from ``object`` (so that it can be driven by
hand).
"""
import math
import sys

import torch

from . import _evidence as _ev
from . import torch as _at

try:
    from transformers import TrainerCallback as _Base
except ImportError:  # pragma: no cover - depends on what is installed
    _Base = object

__all__ = ["AmpdiagTrainerCallback"]


def _scaler_of(trainer):
    acc = getattr(trainer, "accelerator", None)
    return getattr(acc, "scaler", None) if acc is not None else None


def _calling_trainer(depth=16):
    """The Trainer whose method is on the caller's stack (the training loop that runs the callbacks),
    or None."""
    try:
        from transformers import Trainer
    except ImportError:  # pragma: no cover - depends on what is installed
        return None
    f = sys._getframe(1)
    while f is not None and depth > 0:
        s = f.f_locals.get("self") if "self" in f.f_code.co_varnames else None
        if isinstance(s, Trainer):
            return s
        f, depth = f.f_back, depth - 1
    return None


class AmpdiagTrainerCallback(_Base):
    def __init__(self, path, trainer=None, metric=None, **tracer_kwargs):
        self.path = path
        self.trainer = trainer
        self.metric = metric
        self.kwargs = tracer_kwargs
        self.tracer = None
        self._acc = [0, 0]  # correct, counted in the evaluation's forward passes
        self._undo = []

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        trainer = self.trainer if self.trainer is not None else _calling_trainer()
        kw = dict(self.kwargs)
        steps = getattr(state, "max_steps", 0)
        if steps and steps > 0:
            kw.setdefault("steps", steps)
        clip = getattr(args, "max_grad_norm", None)
        if isinstance(clip, (int, float)) and clip > 0:
            kw.setdefault("clip", float(clip))
        kw.setdefault("wrapper", getattr(trainer, "model_wrapped", None))  # DDP: per-rank traces
        self.tracer = _at.Tracer(self.path, model, optimizer, _scaler_of(trainer), **kw)
        self._acc = [0, 0]
        if trainer is not None:
            self._wrap_compute_loss(trainer)
        if model is not None:
            h = model.register_forward_hook(_ev.nocompile(self._count_accuracy), with_kwargs=True)
            self._undo.append(h.remove)

    def _wrap_compute_loss(self, trainer):
        """The loss of every training forward pass, as the trainer computes it (a compute_loss of
        a subclass included), handed to the tracer."""
        orig = trainer.compute_loss
        cb = self

        def compute_loss(model, inputs, *args, **kwargs):
            out = orig(model, inputs, *args, **kwargs)
            tr = cb.tracer
            if tr is not None and torch.is_grad_enabled() and getattr(model, "training", False):
                loss = out[0] if isinstance(out, tuple) else out
                if isinstance(loss, torch.Tensor) and loss.numel() == 1:
                    tr.note_loss(loss)
            return out

        trainer.compute_loss = compute_loss

        def undo():
            if trainer.__dict__.get("compute_loss") is compute_loss:
                del trainer.compute_loss
        self._undo.append(undo)

    def _count_accuracy(self, module, args, kwargs, output):
        if module.training:
            return
        labels = kwargs.get("labels")
        logits = getattr(output, "logits", None)
        if logits is None and isinstance(output, dict):
            logits = output.get("logits")
        if labels is None or logits is None:
            return
        c, n = _ev.accuracy_counts(logits, labels, causal=type(module).__name__.endswith("ForCausalLM"))
        self._acc[0] += c
        self._acc[1] += n

    def on_step_end(self, args, state, control, **kwargs):
        if self.tracer is not None:
            self.tracer.step()

    def _metric(self, metrics):
        if self.metric:
            return metrics.get(self.metric, math.nan)
        keys = ["eval_accuracy"] + sorted(k for k in metrics if k.startswith("eval_acc"))
        for k in keys:
            if k in metrics:
                return metrics[k]
        return self._acc[0] / self._acc[1] if self._acc[1] else math.nan

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.tracer is None or self.tracer._closed or not metrics or "eval_loss" not in metrics:
            self._acc = [0, 0]
            return
        metric = self._metric(metrics)
        self._acc = [0, 0]
        self.tracer.eval(float(metrics["eval_loss"]), float(metric))

    def on_train_end(self, args, state, control, **kwargs):
        while self._undo:
            self._undo.pop()()
        if self.tracer is not None:
            self.tracer.close("complete")
