"""A Hugging Face TrainerCallback that traces a transformers.Trainer run into an ampdiag trace.

    from ampdiag.hf import AmpdiagTrainerCallback
    trainer = Trainer(model=model, args=TrainingArguments(..., fp16=True), ...)
    trainer.add_callback(AmpdiagTrainerCallback("run.h5", trainer))
    trainer.train()

A thin wrapper of ampdiag.torch.Tracer: at on_train_begin the tracer is attached to the model and
the optimizer the Trainer passes, and to the GradScaler of the trainer's Accelerator (give the
trainer to see it: with fp16=True, Accelerate scales the loss); on_step_end records a step (once
per optimizer step, after gradient accumulation) with the loss of the model's outputs
(``outputs.loss``, averaged over the step's forward passes); on_evaluate records an evaluation
from the metrics (``eval_loss`` and, when given, ``metric``, e.g. "eval_accuracy"); the trace is
closed at on_train_end. Other keyword arguments go to the Tracer (trace_every, layers, ...).

Without transformers installed the class derives from ``object`` (so that it can be driven by
hand).
"""
import math

from . import torch as _at

try:
    from transformers import TrainerCallback as _Base
except ImportError:  # pragma: no cover - depends on what is installed
    _Base = object

__all__ = ["AmpdiagTrainerCallback"]


def _scaler_of(trainer):
    acc = getattr(trainer, "accelerator", None)
    return getattr(acc, "scaler", None) if acc is not None else None


class AmpdiagTrainerCallback(_Base):
    def __init__(self, path, trainer=None, metric=None, **tracer_kwargs):
        self.path = path
        self.trainer = trainer
        self.metric = metric
        self.kwargs = tracer_kwargs
        self.tracer = None

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        kw = dict(self.kwargs)
        steps = getattr(state, "max_steps", 0)
        if steps and steps > 0:
            kw.setdefault("steps", steps)
        kw.setdefault("wrapper", getattr(self.trainer, "model_wrapped", None))  # DDP: per-rank traces
        self.tracer = _at.Tracer(self.path, model, optimizer, _scaler_of(self.trainer), **kw)

    def on_step_end(self, args, state, control, **kwargs):
        if self.tracer is not None:
            self.tracer.step()

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.tracer is None or not metrics or "eval_loss" not in metrics:
            return
        metric = metrics.get(self.metric, math.nan) if self.metric else math.nan
        self.tracer.eval(float(metrics["eval_loss"]), float(metric))

    def on_train_end(self, args, state, control, **kwargs):
        if self.tracer is not None:
            self.tracer.close("complete")
