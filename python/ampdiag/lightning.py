"""A Lightning Callback that traces a LightningModule's training into an ampdiag trace.

    from ampdiag.lightning import AmpdiagCallback
    trainer = lightning.Trainer(precision="16-mixed", callbacks=[AmpdiagCallback("run.h5")])

It is a thin wrapper of ampdiag.torch.Tracer: the tracer is attached at on_train_start to the
LightningModule, the trainer's first optimizer and the GradScaler of the precision plugin (for
"16-mixed"); a step is recorded at every optimizer step (on_train_batch_end when the trainer's
global_step advanced), with the loss the training_step returned; evaluations come from the
trainer's callback_metrics at the end of each validation epoch (``eval_loss`` / ``eval_metric``
name the metrics, default "val_loss" and "val_acc", else another val*acc* key); the trace is closed at on_train_end, and as
interrupted at on_exception. Other keyword arguments go to the Tracer (trace_every, layers, ...).

Without Lightning installed the class derives from ``object`` (so that it can be driven by hand).
"""
import math

from . import torch as _at

try:  # Lightning 2.x, then the older package name
    from lightning.pytorch import Callback as _Base
except ImportError:  # pragma: no cover - depends on what is installed
    try:
        from pytorch_lightning import Callback as _Base
    except ImportError:
        _Base = object

__all__ = ["AmpdiagCallback"]


def _scaler_of(trainer):
    for owner in (getattr(trainer, "strategy", None), trainer):
        plugin = getattr(owner, "precision_plugin", None)
        if plugin is not None and getattr(plugin, "scaler", None) is not None:
            return plugin.scaler
    return None


def _value(v):
    if v is None:
        return math.nan
    return float(v.item()) if hasattr(v, "item") else float(v)


class AmpdiagCallback(_Base):
    def __init__(self, path, eval_loss="val_loss", eval_metric="val_acc", **tracer_kwargs):
        super().__init__()
        self.path = path
        self.eval_loss = eval_loss
        self.eval_metric = eval_metric
        self.kwargs = tracer_kwargs
        self.tracer = None
        self._global_step = None

    def on_train_start(self, trainer, pl_module):
        opts = getattr(trainer, "optimizers", None) or [None]
        steps = getattr(trainer, "max_steps", -1)
        kw = dict(self.kwargs)
        if steps and steps > 0:
            kw.setdefault("steps", steps)
        kw.setdefault("wrapper", getattr(getattr(trainer, "strategy", None), "model", None))  # DDP: per-rank traces
        self.tracer = _at.Tracer(self.path, pl_module, opts[0], _scaler_of(trainer), **kw)
        self._global_step = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.tracer is None or trainer.global_step == self._global_step:
            return  # accumulating gradients: no optimizer step yet
        self._global_step = trainer.global_step
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        self.tracer.step(loss)

    def on_validation_epoch_end(self, trainer, pl_module):
        if self.tracer is None or getattr(trainer, "sanity_checking", False):
            return
        m = getattr(trainer, "callback_metrics", {}) or {}
        if self.eval_loss in m:
            key = self.eval_metric
            if key not in m:  # another name for the validation accuracy: val_accuracy, val/acc, ...
                key = next((k for k in sorted(m) if k.startswith("val") and "acc" in k), key)
            self.tracer.eval(_value(m[self.eval_loss]), _value(m.get(key)))

    def on_train_end(self, trainer, pl_module):
        if self.tracer is not None:
            self.tracer.close("complete")

    def on_exception(self, trainer, pl_module, exception):
        if self.tracer is not None:
            self.tracer._close_quietly("interrupted", exception)
