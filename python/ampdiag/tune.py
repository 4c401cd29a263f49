"""What ``ampdiag tune -o DIR -- CMD ARGS`` tells a training script, and how it applies it
(docs/pytorch.md, "tune on your own script").

tune runs the script once per configuration with environment variables AMPDIAG_TUNE_*; the script
opts in with a few lines, giving its own defaults, which are what it gets outside tune (no
variables set: a script runs unchanged by hand):

    cfg = ampdiag.torch.tune_config(precision=args.precision, lr=args.lr, steps=args.steps,
                                    clip=args.clip, scaler=args.scaler, seed=args.seed)
    torch.manual_seed(cfg.seed)
    model = cfg.apply(Net())                         # the modules tune keeps in FP32
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    scaler = cfg.scaler("cpu")                       # a GradScaler (disabled when none is used)
    with cfg.trace(model, opt, scaler) as tracer:   # the trace tune reads (outside tune: none,
        tracer.eval(val_loss, initial=True)          #   unless path= is given)
        for step in range(cfg.steps):
            with cfg.autocast("cpu"):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt); cfg.clip(model.parameters())
            scaler.step(opt); scaler.update(); opt.zero_grad()
            tracer.step(loss)
        tracer.eval(val_loss, accuracy, examples=per_example_losses)

The variables (all optional; a value tune does not set is the script's own):

AMPDIAG_TUNE_TRACE        the trace to write (set by tune for every run: "under tune")
AMPDIAG_TUNE_PRECISION    fp32 | fp16 | bf16: autocast off, or autocast with that dtype
AMPDIAG_TUNE_LR           the learning rate
AMPDIAG_TUNE_STEPS        the number of training steps
AMPDIAG_TUNE_SEED         the seed
AMPDIAG_TUNE_CLIP         clip_grad_norm_'s max_norm (0: no clipping)
AMPDIAG_TUNE_LOSS_SCALE   dynamic (a GradScaler) | none (no scaler) | S (a GradScaler starting at S
                          that does not grow: a static scale)
AMPDIAG_TUNE_SCALE_INIT   GradScaler(init_scale=...)
AMPDIAG_TUNE_FP32_LAYERS  module names (comma-separated; fnmatch patterns) run in FP32 under autocast
AMPDIAG_TUNE_OPTIM_STATE  fp32: the optimizer state in FP32 (PyTorch's optimizers hold it in the
                          parameters' dtype: applied when they are FP32, else warned "not applied")
AMPDIAG_TUNE_SCHEDULE     range:MIN_LR (the LR range test: exponentially from MIN_LR to the lr over
                          the steps) | cosine:W[:MIN] (W warm-up steps, then cosine decay) |
                          constant: set on the optimizer before each step (over the script's own
                          scheduler, if any)
AMPDIAG_TUNE_EVAL_EVERY, AMPDIAG_TUNE_TRACE_EVERY, AMPDIAG_TUNE_HIST_EVERY   as ampdiag run's
"""
import fnmatch
import math
import os
import warnings

import torch

PREFIX = "AMPDIAG_TUNE_"
PRECISIONS = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}
_KNOWN = {"TRACE", "PRECISION", "LR", "STEPS", "SEED", "CLIP", "LOSS_SCALE", "SCALE_INIT", "FP32_LAYERS",
          "OPTIM_STATE", "SCHEDULE", "EVAL_EVERY", "TRACE_EVERY", "HIST_EVERY"}


def _env(name):
    v = os.environ.get(PREFIX + name)
    return v if v not in (None, "") else None


def _num(name, conv, default):
    v = _env(name)
    if v is None:
        return default
    try:
        return conv(v)
    except ValueError:
        raise ValueError("ampdiag.torch.tune_config: %s%s=%r is not a number" % (PREFIX, name, v)) from None


class _NullTracer:
    """What cfg.trace() gives outside tune when no path is given: every call does nothing."""
    path = None

    def step(self, loss=None):
        return None

    def eval(self, *args, **kwargs):
        return None

    def event(self, *args, **kwargs):
        return None

    def flush(self):
        return None

    def close(self, status="complete"):
        return None

    def __enter__(self):
        return self

    def __exit__(self, etype, exc, tb):
        return False


class TuneConfig:
    """The configuration of this run: the script's defaults, overridden by what ``ampdiag tune``
    set (tune_config()). Attributes: ``under_tune``, ``trace_path``, ``precision``, ``lr``,
    ``steps``, ``seed``, ``max_norm`` (None: no clipping), ``loss_scale`` ("dynamic", "none" or a
    static scale), ``scale_init``, ``fp32_layers`` (list), ``optim_state``, ``schedule``,
    ``eval_every``, ``trace_every``, ``hist_every``, ``applied`` (what was set, by name)."""

    def __init__(self, precision="fp32", lr=None, steps=None, clip=None, scaler=None, scale_init=65536.0,
                 seed=None, eval_every=None, trace_every=10, hist_every=50):
        self.trace_path = _env("TRACE")
        self.under_tune = self.trace_path is not None
        self.applied = {k[len(PREFIX):]: v for k, v in os.environ.items() if k.startswith(PREFIX) and v != ""}
        self.precision = (_env("PRECISION") or precision or "fp32").lower()
        if self.precision not in PRECISIONS:
            raise ValueError("ampdiag.torch.tune_config: precision %r: expected fp32, fp16 or bf16" % self.precision)
        self.lr = _num("LR", float, lr)
        self.steps = _num("STEPS", int, steps)
        self.seed = _num("SEED", int, seed)
        mn = _num("CLIP", float, clip)
        self.max_norm = mn if mn and mn > 0 else None
        ls = _env("LOSS_SCALE")
        if ls is None:  # the script's own: True/"dynamic" a GradScaler, False/"none" none, a number static
            ls = ("dynamic" if self.precision == "fp16" else "none") if scaler is None else scaler
            ls = {True: "dynamic", False: "none"}.get(ls, ls) if isinstance(ls, bool) else ls
        self.loss_scale = str(ls).lower()
        if self.loss_scale not in ("dynamic", "none"):
            try:
                float(self.loss_scale)
            except ValueError:
                raise ValueError("ampdiag.torch.tune_config: loss scale %r: expected dynamic, none or a number"
                                 % (ls,)) from None
        self.scale_init = _num("SCALE_INIT", float, scale_init)
        fl = _env("FP32_LAYERS")
        self.fp32_layers = [n.strip() for n in fl.split(",") if n.strip()] if fl else []
        self.optim_state = _env("OPTIM_STATE")
        self.schedule = _env("SCHEDULE")
        self.eval_every = _num("EVAL_EVERY", int, eval_every)
        self.trace_every = _num("TRACE_EVERY", int, trace_every)
        self.hist_every = _num("HIST_EVERY", int, hist_every)
        self._applied_to = set()
        unknown = sorted(k for k in self.applied if k not in _KNOWN)
        if unknown:
            warnings.warn("ampdiag.torch.tune_config: %s not applied by ampdiag.torch (the script may read "
                          "cfg.applied[NAME] itself)" % ", ".join(PREFIX + k for k in unknown), stacklevel=3)

    def __repr__(self):
        return ("TuneConfig(under_tune=%r, precision=%r, lr=%r, steps=%r, max_norm=%r, loss_scale=%r, "
                "scale_init=%r, fp32_layers=%r)" % (self.under_tune, self.precision, self.lr, self.steps,
                                                   self.max_norm, self.loss_scale, self.scale_init,
                                                   self.fp32_layers))

    @property
    def dtype(self):
        """autocast's dtype (None for fp32: autocast off)."""
        return PRECISIONS[self.precision]

    def autocast(self, device_type="cpu"):
        """torch.autocast with this run's dtype (disabled for fp32)."""
        if self.dtype is None:
            return torch.autocast(device_type, enabled=False)
        return torch.autocast(device_type, dtype=self.dtype)

    @property
    def uses_scaler(self):
        return self.precision == "fp16" and self.loss_scale != "none"

    def scaler(self, device="cpu"):
        """A torch.amp.GradScaler: enabled for fp16 with a loss scale (init_scale from
        AMPDIAG_TUNE_SCALE_INIT, or the static scale, which then does not grow), disabled otherwise
        (its scale/step/update pass through: the loop is the same either way)."""
        if not self.uses_scaler:
            return torch.amp.GradScaler(device, enabled=False)
        if self.loss_scale == "dynamic":
            return torch.amp.GradScaler(device, init_scale=self.scale_init)
        # a static scale: never grows (backs off only on an overflow, as GradScaler must)
        return torch.amp.GradScaler(device, init_scale=float(self.loss_scale), growth_interval=2 ** 31 - 1)

    def clip(self, parameters):
        """clip_grad_norm_(parameters, max_norm) when this run clips; returns the total norm (None
        when it does not clip). Call it after scaler.unscale_(optimizer)."""
        if self.max_norm is None:
            return None
        return torch.nn.utils.clip_grad_norm_(parameters, self.max_norm)

    def apply(self, model):
        """Keep the modules named by AMPDIAG_TUNE_FP32_LAYERS in FP32 under autocast (their forward
        runs with autocast off, on inputs cast to float32). Returns model. Once per model."""
        if not self.fp32_layers or id(model) in self._applied_to:
            return model
        self._applied_to.add(id(model))
        names = [n.replace("_orig_mod.", "") for n, _ in model.named_modules()]
        hit = set()
        for (name, m), clean in zip(model.named_modules(), names):
            if not clean:
                continue
            pats = [p for p in self.fp32_layers if clean == p or fnmatch.fnmatchcase(clean, p)]
            if pats:
                hit.update(pats)
                _keep_fp32(m)
        missing = [p for p in self.fp32_layers if p not in hit]
        if missing:
            warnings.warn("ampdiag.torch: AMPDIAG_TUNE_FP32_LAYERS: no module named %s: not applied"
                          % ", ".join(missing), stacklevel=2)
        return model

    def _optim_state(self, optimizer):
        if self.optim_state is None or optimizer is None:
            return
        params = [p for g in getattr(optimizer, "param_groups", []) for p in g["params"]]
        want = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}.get(self.optim_state.lower())
        if want is not None and params and all(p.dtype == want for p in params):
            return  # PyTorch's optimizers hold their state in the parameters' dtype: already so
        warnings.warn("ampdiag.torch: AMPDIAG_TUNE_OPTIM_STATE=%s: not applied (the optimizer holds its "
                      "state in the parameters' dtype, %s)" % (self.optim_state,
                                                               ", ".join(sorted({str(p.dtype) for p in params}))),
                      stacklevel=3)

    def _schedule(self, optimizer):
        if self.schedule is None or optimizer is None or self.schedule == "constant":
            return
        base = self.lr if self.lr is not None else optimizer.param_groups[0]["lr"]
        total = self.steps or 0
        kind, _, rest = self.schedule.partition(":")
        if kind == "range":
            mn = float(rest)

            def lr_at(t):
                return mn * (base / mn) ** (t / (total - 1)) if total > 1 else base
        elif kind == "cosine":
            parts = rest.split(":") if rest else []
            warm = int(parts[0]) if parts and parts[0] else total // 20
            mn = float(parts[1]) if len(parts) > 1 else base * 0.1

            def lr_at(t):  # as ampdiag run's (src/train/optim.c schedule_lr)
                if warm > 0 and t < warm:
                    return base * (t + 1) / warm
                span = total - warm
                if span <= 0:
                    return base
                p = min((t - warm) / span, 1.0)
                return mn + 0.5 * (base - mn) * (1.0 + math.cos(math.pi * p))
        else:
            raise ValueError("ampdiag.torch.tune_config: AMPDIAG_TUNE_SCHEDULE=%r: expected range:MIN_LR, "
                             "cosine[:W[:MIN]] or constant" % self.schedule)
        count = [0]

        def pre_hook(opt, args, kwargs):
            lr = lr_at(count[0])
            for g in opt.param_groups:
                g["lr"] = lr
            count[0] += 1

        optimizer.register_step_pre_hook(pre_hook)

    def trace(self, model, optimizer=None, scaler=None, path=None, **kwargs):
        """The tracer of this run: under tune an ampdiag.torch.Tracer on AMPDIAG_TUNE_TRACE (with
        this run's precision, steps, max_norm, trace_every, hist_every and the seed as an
        attribute); outside tune one on ``path`` when given, else a tracer that does nothing.
        Also applies the FP32 modules, the schedule and the optimizer-state check."""
        from .torch import Tracer
        self.apply(model)
        self._optim_state(optimizer)
        target = self.trace_path or path
        if target is None:
            return _NullTracer()
        self._schedule(optimizer)  # before the tracer's own optimizer hooks: it records the lr set
        attrs = dict(kwargs.pop("attrs", None) or {})
        if self.seed is not None:
            attrs.setdefault("seed", self.seed)
        if self.fp32_layers:
            attrs.setdefault("fp32_layers", ",".join(self.fp32_layers))
        if self.under_tune:
            attrs.setdefault("tune", " ".join("%s=%s" % kv for kv in sorted(self.applied.items())
                                              if kv[0] != "TRACE"))
        kw = dict(precision=self.precision, steps=self.steps, clip=self.max_norm, trace_every=self.trace_every,
                  hist_every=self.hist_every, overwrite=self.under_tune, attrs=attrs)
        kw.update(kwargs)
        return Tracer(target, model, optimizer, scaler, **kw)

    def evaluating(self, step):
        """Whether to evaluate after step (0-based) given eval_every (None/0: at the end only)."""
        last = self.steps is not None and step == self.steps - 1
        return last or bool(self.eval_every and (step + 1) % self.eval_every == 0)


def _keep_fp32(module):
    forward = module.forward

    def fp32_forward(*args, **kwargs):
        dev = next((a.device.type for a in args if isinstance(a, torch.Tensor)), "cpu")
        with torch.autocast(dev, enabled=False):
            args = tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
            return forward(*args, **kwargs)

    module.forward = fp32_forward


def tune_config(**defaults):
    """This run's configuration: the script's own defaults (precision, lr, steps, clip, scaler,
    scale_init, seed, eval_every, trace_every, hist_every), overridden by the AMPDIAG_TUNE_*
    variables ``ampdiag tune -- CMD`` sets (none: the defaults, unchanged)."""
    return TuneConfig(**defaults)


__all__ = ["TuneConfig", "tune_config"]
