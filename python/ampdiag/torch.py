"""Trace a PyTorch training run into an ampdiag trace (docs/pytorch.md).

    import ampdiag.torch
    tracer = ampdiag.torch.Tracer("run.h5", model, optimizer, scaler)   # scaler: optional
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        tracer.step(loss)          # after the optimizer step and scaler.update()
    tracer.close()

or ``with ampdiag.torch.trace("run.h5", model, optimizer, scaler) as tracer: ...``.

The tracer writes the records ``ampdiag run`` writes (traces/FORMAT.md) through libampdiag's
trace writer: per step the loss, the loss scale the backward pass ran with, whether GradScaler
skipped the update and the first layer and tensor that held a non-finite value, the unscaled
gradient norm before clipping, the clip coefficient and the learning rate; on traced steps
(every ``trace_every``-th, or as a ``trace_budget`` allows, the first and last, and the
``trace_after_event`` steps after an event: _cadence.py) per layer the statistics of its output (forward hooks), of the
gradient of its output (tensor hooks on the output), of its weights before the update, of its
weight gradients as held (loss-scaled, before unscaling and clipping) and of the update, with
the lost-update counts; the histograms every ``hist_every``-th step; events (non-finite
values, loss-scale backoffs and growths, skipped steps, clipping); evaluations from ``eval()``.
Each layer's compute format under autocast (the dtype of its output) goes to the /layers
``compute`` column.

Beyond the hooks (_evidence.py; docs/pytorch.md, "What the tracer catches"): FP16 without a loss
scaler is warned and recorded (no_loss_scaling), a scaler it was not given is found from the
gradients (hidden_scaler), a step the optimizer did not take is a skipped step, the configured lr
is the root attribute, clip_grad_norm_'s calls, the loss functions and (attention_scores=True)
SDPA's logits are seen through wrappers of those torch functions while a tracer is open, the
parameterless pass-through leaves are left out, and every hook is kept out of torch.compile graphs.
"""
import atexit
import fnmatch
import math
import os
import platform
import re
import sys
import time
import warnings
import weakref

import torch

from . import _evidence as _ev
from . import _cadence, _lib, _quant, _stats
from . import dist as _dist
from ._lib import AmpdiagError, LibraryNotFound

__all__ = ["Tracer", "trace", "tune_config", "TuneConfig", "AmpdiagError", "AmpdiagWarning", "LibraryNotFound"]


class AmpdiagWarning(UserWarning):
    """What the tracer found wrong with the training it traces (FP16 without a loss scaler, a
    scaler it was not given); the same goes into the trace as an event."""

A, AG, W, WG, U = "activation", "activation_grad", "weight", "weight_grad", "update"
_KIND = _lib.KINDS

_OPS = {"Linear": "linear", "LayerNorm": "layernorm", "Embedding": "embedding", "ReLU": "relu",
        "GELU": "gelu", "MultiheadAttention": "attention", "CrossEntropyLoss": "cross_entropy_loss"}

_FMT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def _op_name(module):
    cls = type(module).__name__
    if cls in _OPS:
        return _OPS[cls]
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", cls).lower()[:31]


def _shape_text(shape):
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def _first_tensor(x):
    """The first floating-point tensor of a module's output (a tensor, a tuple/list of them, a
    dict or an object with such attributes such as a Hugging Face ModelOutput)."""
    if isinstance(x, torch.Tensor):
        return x if x.is_floating_point() else None
    if isinstance(x, (tuple, list)):
        for v in x:
            t = _first_tensor(v)
            if t is not None:
                return t
    if isinstance(x, dict):
        for v in x.values():
            t = _first_tensor(v)
            if t is not None:
                return t
    return None


def _unwrap_optimizer(opt):
    """The torch optimizer behind wrappers (Accelerate's AcceleratedOptimizer, Lightning's
    LightningOptimizer) that call its step()."""
    seen = 0
    while opt is not None and seen < 8:
        inner = getattr(opt, "optimizer", None) or getattr(opt, "_optimizer", None)
        if inner is None or inner is opt or not hasattr(inner, "param_groups"):
            break
        opt, seen = inner, seen + 1
    return opt


def _wrapped_scaler(opt):
    """A GradScaler held by an optimizer wrapper (Accelerate's AcceleratedOptimizer keeps the
    Accelerator's as ``scaler``), or None."""
    seen = 0
    while opt is not None and seen < 8:
        s = getattr(opt, "scaler", None)
        if s is not None and hasattr(s, "get_scale") and hasattr(s, "scale"):
            return s
        inner = getattr(opt, "optimizer", None) or getattr(opt, "_optimizer", None)
        if inner is None or inner is opt:
            break
        opt, seen = inner, seen + 1
    return None


def _short_name(name, used):
    """A layer name that fits the trace (63 bytes): long names keep their head and tail."""
    if not name:
        name = "model"
    b = name.encode("utf-8")
    if len(b) <= 63 and name not in used:
        return name
    k = 0
    while True:
        tag = "~%d~" % k if k else "~"
        keep = 63 - len(tag)
        cand = b[:keep // 2].decode("utf-8", "ignore") + tag + b[-(keep - keep // 2):].decode("utf-8", "ignore")
        if cand not in used:
            return cand
        k += 1


def _autocast_state(device_type):
    try:
        on = torch.is_autocast_enabled(device_type)
        dt = torch.get_autocast_dtype(device_type)
    except TypeError:  # torch before 2.4
        if device_type == "cpu":
            on, dt = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()
        else:
            on, dt = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
    return bool(on), dt


class _Layer:
    __slots__ = ("name", "module", "op", "shape", "params", "plist", "compute", "index")

    def __init__(self, name, module):
        self.name = name
        self.module = module
        self.op = _op_name(module)
        self.plist = [p for p in module.parameters(recurse=False)]
        self.params = sum(p.numel() for p in self.plist)
        w = dict(module.named_parameters(recurse=False)).get("weight")
        self.shape = _shape_text((w if w is not None else self.plist[0]).shape) if self.plist else ""
        self.compute = ""
        self.index = -1  # row in /layers, set when the header is written

    @classmethod
    def pseudo(cls, name, op, compute=""):
        """A layer that is no module of the model: the loss, a module's attention scores."""
        L = cls.__new__(cls)
        L.name, L.module, L.op, L.plist, L.params, L.shape = name, None, op, [], 0, ""
        L.compute, L.index = compute, -1
        return L


class _Step:
    """What one step has gathered so far."""

    def __init__(self, t, traced, hist, t0):
        self.t = t
        self.traced = traced
        self.hist = hist
        self.t0 = t0
        self.started = False
        self.recs = {}       # (layer, kind) -> [record]: merged at the end of the step
        self.wgrad = {}      # layer -> [record]: the last backward's weight gradients
        self.order = []      # layers in the order their forward hooks first fired
        self.seen = set()
        self.losses = []     # losses found in the model's outputs
        self.scale = None    # the loss scale of the backward pass (tensor or float)
        self.gnorm = None    # global L2 norm of the gradients as held (scaled), float64 tensor
        self.nonfinite = 0
        self.bad = None      # (layer name, kind, "nan"|"inf", layer index or -1) in backward order
        self.stepped = False
        self.lr = None
        self.saved = False   # the traced parameters were copied before the update (_Flat)
        self.lost = None     # ([layer], counts per layer: host lists, or a device tensor [layers, 3])
        self.batch = None
        self.noted = []      # losses handed over by an integration (Tracer.note_loss)
        self.clip_max = None  # clip_grad_norm_'s max norm and the total norm it measured this step
        self.clip_total = None
        self.hidden = None   # (scale or nan, how): a loss scaler the tracer was not given, seen this step


class _Rec:
    """One tensor's statistics: a device vector (record_torch) or a host Tstats, with an optional
    histogram in the same form."""
    __slots__ = ("vec", "hvec", "st", "h")

    def __init__(self, vec=None, hvec=None, st=None, h=None):
        self.vec, self.hvec, self.st, self.h = vec, hvec, st, h


class _Flat:
    """The traced layers' parameters end to end in one float32 buffer: their copy from before
    optimizer.step(), taken with one _foreach_copy_ (kept between traced steps). After the step,
    each layer's weights, change and gradients are one flat tensor (temporaries the size of the
    largest layer), so that the update analysis is one statistics call per layer and kind and one
    lost-update count per layer, not several operations per parameter tensor."""

    def __init__(self, layers, device):
        self.params, self.segs, off = [], [], 0  # segs: (layer index, offset, count, parameters)
        for li, L in enumerate(layers):
            n = sum(_dist.local(p).numel() for p in L.plist)
            if n:
                self.segs.append((li, off, n, L.plist))
                self.params += L.plist
                off += n
        self.numel = [_dist.local(p).numel() for p in self.params]
        self.old = torch.empty(off, dtype=torch.float32, device=device)
        self.views = [v.view(_dist.local(p).shape) for v, p in zip(self.old.split(self.numel), self.params)]

    def valid(self):
        return [_dist.local(p).numel() for p in self.params] == self.numel

    def save(self):
        """The copy before the step."""
        with torch.no_grad():
            if _foreach_copy is not None:
                _foreach_copy(self.views, [_dist.local(p.detach()) for p in self.params])
            else:
                for v, p in zip(self.views, self.params):
                    v.copy_(_dist.local(p.detach()))

    def _flat(self, ts):
        dev = self.old.device
        t = ts[0].reshape(-1) if len(ts) == 1 else torch.cat([x.reshape(-1) for x in ts])
        return t.to(dev, torch.float32).contiguous()

    def changes(self):
        """Per layer: (layer index, its copy from before the step, the change the step made, its
        gradients), flat float32 tensors (gradients 0 where a parameter has none)."""
        for li, o, n, ps in self.segs:
            old = self.old[o:o + n]
            loc = [_dist.local(p.detach()) for p in ps]
            d = torch.sub(self._flat(loc), old)
            g = self._flat([_dist.local(p.grad.detach()) if p.grad is not None else torch.zeros_like(x)
                            for p, x in zip(ps, loc)])
            yield li, old, d, g


_foreach_copy = getattr(torch, "_foreach_copy_", None)


class Tracer:
    """Traces the training of ``model`` into the ampdiag trace ``path``.

    model      the torch.nn.Module whose forward is called for training
    optimizer  its torch.optim optimizer (wrappers with an ``optimizer`` attribute are unwrapped);
               None: no weight and update records, no learning rate
    scaler     a torch.amp.GradScaler, or None (a disabled one counts as None); an Accelerate
               Accelerator stands for its scaler, and without one the scaler an optimizer wrapper
               holds (AcceleratedOptimizer) is taken. A scaler in use that the tracer was not
               given is found from the gradients (warned, a hidden_scaler event)
    layers     which modules are layers: None = the leaves of model.named_modules() but the
               parameterless pass-through ones (Identity, Dropout, elementwise activations,
               Flatten: named in the layers_left_out attribute and a note); "leaves" = every leaf;
               or a list of names / fnmatch patterns ("encoder.*.attn") and module classes; or a
               function (name, module) -> bool. torch.compile's "_orig_mod." is left out of names
    trace_every  tensor records every N-th step (1: every step; 0: step records only); the first step,
               the last too when ``steps`` is given, and the steps after an event
    trace_budget instead of trace_every (the default, 5, when neither is given): a share of the time
               of an untraced step, percent, that the records may take; the tracer measures what a record costs and chooses the cadence
               (CPU time for a model on the CPU, wall time on a device; docs/tracing-budget.md)
    trace_after_event  steps recorded in full after a step with an event (a non-finite loss or
               gradient, a skipped step, a loss or gradient-norm spike; default 3; 0: none)
    hist_every   histograms every N-th step (0: none)
    clip       the max gradient norm the loop clips to (clip_grad_norm_), for clip_coef and the
               clipped events; None/0: the max norm of the loop's torch.nn.utils.clip_grad_norm_
               calls, where it makes any
    precision  fp32, fp16, bf16 or bf16-pure; None: seen from autocast and the parameters' dtype
    stats      "auto" (libampdiag's kernel for CPU tensors, torch elsewhere), "torch" or "lib"
    updates    record weights and updates (keeps a float32 copy of the traced layers' parameters,
               taken before the optimizer step of each traced step)
    attention_scores  record the range of the attention logits (q k^T * scale, what overflows
               FP16) of every F.scaled_dot_product_attention call and nn.MultiheadAttention, as
               layers "<module>.scores" on traced steps (computed again: it costs a matmul each)
    patch      wrap torch.nn.utils.clip_grad_norm_, the loss functions of torch.nn.functional and
               F.scaled_dot_product_attention while the tracer is open (the clip's max norm, the
               loss as a layer, the attention scores); False leaves torch alone
    whatif     block-scaled what-if (MX, NVFP4, FP8 blockwise and current scaling; the /quant rows):
               the list of ``ampdiag run --whatif`` (None: its default, "mxfp8@row,nvfp4@row";
               "none": off), counted by libampdiag on the CPU (a CUDA tensor is copied to the
               host) for activations, their gradients, weights and weight gradients
    whatif_every  count it every N-th traced step (None: on the histogram steps, hist_every)
    attrs      more root attributes: {"model": "resnet18", "data": "cifar10", "seed": 1, ...}
    wrapper    under torch.distributed, the DistributedDataParallel module around ``model`` when
               ``model`` is the inner module (a DDP given as ``model`` is unwrapped by itself);
               each rank writes its own trace, the rank in its path (ampdiag.dist)
    overwrite  replace an existing trace; flush_every / flush_seconds: what a killed process can
               lose (the trace holds every record up to the last flush)
    peak_memory  record the run's peak memory (root attributes peak_memory_bytes and
               peak_memory_source, written at close): on a CUDA device
               torch.cuda.max_memory_allocated, whose peak the tracer resets when it starts; on a
               CPU the process's peak resident set size (getrusage ru_maxrss, since the process
               started); False: neither (and the CUDA peak is left alone)
    """

    def __init__(self, path, model, optimizer=None, scaler=None, *, layers=None, trace_every=None, hist_every=50,
                 clip=None, precision=None, stats="auto", updates=True, steps=None, attrs=None, overwrite=False,
                 flush_every=100, flush_seconds=2.0, eval_metric="accuracy", attention_scores=False, patch=True,
                 wrapper=None, whatif=None, whatif_every=None, trace_budget=None, trace_after_event=3,
                 peak_memory=True):
        if not isinstance(model, torch.nn.Module):
            raise TypeError("ampdiag.torch.Tracer: model must be a torch.nn.Module, not %s" % type(model).__name__)
        self.dist = _dist.attach(model, wrapper)  # this rank of a distributed run, or None
        if self.dist is not None:
            model, path = self.dist.module, self.dist.path(path)
        if stats not in ("auto", "torch", "lib"):
            raise ValueError("ampdiag.torch.Tracer: stats must be 'auto', 'torch' or 'lib', not %r" % (stats,))
        if trace_every is not None and trace_budget is not None:
            raise ValueError("ampdiag.torch.Tracer: give trace_every or trace_budget, not both")
        if trace_every is None and trace_budget is None:
            trace_budget = 5.0  # as ampdiag run: cheap by default, whatever the model's size
        if (trace_every is not None and int(trace_every) < 0) or int(hist_every) < 0 or int(trace_after_event) < 0:
            raise ValueError("ampdiag.torch.Tracer: trace_every, hist_every and trace_after_event must be >= 0")
        if trace_budget is not None and not (0 <= float(trace_budget) <= 100):
            raise ValueError("ampdiag.torch.Tracer: trace_budget is a percentage, 0 to 100, not %r" % (trace_budget,))
        self.model = model
        self.optimizer = _unwrap_optimizer(optimizer)
        self.scaler = self._given_scaler(scaler, optimizer)
        self.trace_every = int(trace_every) if trace_every is not None else 0
        self.trace_budget = float(trace_budget) if trace_budget is not None else None
        self.trace_after_event = int(trace_after_event)
        self.hist_every = int(hist_every)
        self.clip = float(clip) if clip else 0.0
        self._clip_given = self.clip > 0
        self.attention_scores = bool(attention_scores)
        self._lr_configured = self._configured_lr()
        self.precision = precision
        self.stats_mode = stats
        self.updates = bool(updates)
        self.steps_planned = int(steps) if steps else None
        self.attrs = dict(attrs or {})
        self.eval_metric = eval_metric
        self.left_out = []
        self.layers = self._select(layers)
        self._quant_setup(whatif, whatif_every)
        self._owner = {}
        for li, L in enumerate(self.layers):
            for p in L.plist:
                self._owner[id(p)] = li
        self._params = [p for p in model.parameters() if p.requires_grad]
        self._pnames = {id(p): n for n, p in model.named_parameters()}
        self._device = self._params[0].device if self._params else torch.device("cpu")
        self._peak_source = self._peak_memory_start() if peak_memory else None
        self._autocast = None
        self._flat = None
        self.writer = _lib.TraceWriter(path, overwrite=overwrite, flush_every=flush_every,
                                       flush_seconds=flush_seconds, background=True)
        self.path = self.writer.path
        self._header = False
        self._pending_evals = []
        self._pending_events = []
        self._layer_order = None
        self.t = 0
        self._cad = _cadence.Cadence(None if self.trace_budget is not None else self.trace_every,
                                     (self.trace_budget or 0.0) / 100.0, self.trace_after_event, self.hist_every,
                                     cpu=self._device.type == "cpu")
        self._st = _Step(0, *self._cad.plan(0, self.steps_planned), None)
        self._c0 = self._cad.start()
        self._bw_queued = False
        self._fwd = False
        self._leaf_handles = []
        self._handles = []
        self._closed = False
        self._evidence_init(patch)
        self._install()
        ref = weakref.ref(self)
        self._atexit = lambda: ref() is not None and ref()._close_quietly("interrupted")
        atexit.register(self._atexit)

    # ------------------------------------------------------------------ setup

    def _select(self, spec):
        named = [(_ev.clean_name(n), m) for n, m in self.model.named_modules()]
        if spec is None or (isinstance(spec, str) and spec == "leaves"):
            chosen = [(n, m) for n, m in named if not any(True for _ in m.children())]
            kept = [(n, m) for n, m in chosen if not _ev.is_pass_through(m)]
            if spec is None and kept:  # (a model of nothing but pass-through leaves keeps them)
                self.left_out = [(n, type(m).__name__) for n, m in chosen if _ev.is_pass_through(m)]
                chosen = kept
        elif callable(spec) and not isinstance(spec, type):
            chosen = [(n, m) for n, m in named if spec(n, m)]
        else:
            items = [spec] if isinstance(spec, (str, type)) else list(spec)
            pats = [s for s in items if isinstance(s, str)]
            types = tuple(s for s in items if isinstance(s, type))
            chosen = [(n, m) for n, m in named
                      if (types and isinstance(m, types)) or any(fnmatch.fnmatchcase(n, p) for p in pats)]
        if not chosen:
            raise ValueError("ampdiag.torch.Tracer: no module of the model matches layers=%r" % (spec,))
        used, out = set(), []
        for n, m in chosen:
            name = _short_name(n, used)
            used.add(name)
            out.append(_Layer(name, m))
        return out

    def _install(self):
        # every hook is kept out of torch.compile graphs (_ev.nocompile): dynamo would trace it,
        # guard on the tracer's state and compile again at every step
        nc = _ev.nocompile
        self._handles.append(self.model.register_forward_pre_hook(nc(self._on_forward_start)))
        self._handles.append(self.model.register_forward_hook(nc(self._on_forward_end)))
        if self.optimizer is not None:
            self._handles.append(self.optimizer.register_step_pre_hook(nc(self._on_opt_pre)))
            self._handles.append(self.optimizer.register_step_post_hook(nc(self._on_opt_post)))
        # the end of each backward pass: a hook on a parameter's gradient queues a callback that
        # autograd runs when the pass is over. The first and last parameters suffice (one that
        # takes no part in a step leaves it to the others; with none, _on_opt_pre stands in)
        for p in self._params[:2] + self._params[2:][-2:]:
            self._handles.append(p.register_post_accumulate_grad_hook(nc(self._on_grad_accumulated)))

    def _arm(self):
        if not self._leaf_handles:
            for li, L in enumerate(self.layers):
                if L.module is not None:
                    self._leaf_handles.append(L.module.register_forward_hook(_ev.nocompile(self._leaf_hook(li))))
            self._arm_attention()

    def _disarm(self):
        for h in self._leaf_handles:
            h.remove()
        self._leaf_handles = []

    # ------------------------------------------------------------------ statistics

    def _use_lib(self, x):
        if self.stats_mode == "lib":
            return True
        return self.stats_mode == "auto" and x.device.type == "cpu"

    def _record(self, x, hist):
        """The statistics of x (no autograd: the lib path reads x's memory; the torch path runs
        under no_grad)."""
        if x.numel() == 0:
            return None
        if self._use_lib(x):
            st, h = _stats.tstats(x.detach(), hist)
            return _Rec(st=st, h=h)
        with torch.no_grad():
            vec, hv = _stats.record_torch(x, hist)
        return _Rec(vec=vec, hvec=hv)

    # ------------------------------------------------------------------ block-scaled what-if

    def _quant_setup(self, whatif, whatif_every):
        """The schemes of each kind (QSpec tuples), or None when nothing is counted."""
        if whatif_every is not None and int(whatif_every) < 0:
            raise ValueError("ampdiag.torch.Tracer: whatif_every must be >= 0")
        self.whatif_every = None if whatif_every is None else int(whatif_every)
        self._qplan, self._qrows, self._qnames = None, {}, ""
        text = _quant.default_list() if whatif is None and _quant.available() else whatif
        if text is None or not _quant.available():
            if whatif not in (None, "none"):
                raise LibraryNotFound("ampdiag.torch.Tracer: whatif needs a libampdiag with ampdiag_quant_whatif")
            return
        specs = _quant.parse(text)  # ValueError naming the item
        if specs:
            self._qplan = {k: tuple(q for q in specs if q.applies_to(_KIND[k])) for k in (A, AG, W, WG)}
            self._qnames = ",".join(_quant.spec_name(q) for q in specs)

    def _is_quant(self, st):
        if self._qplan is None or not st.traced:
            return False
        if self.whatif_every is None:
            return st.hist
        return self.whatif_every > 0 and st.t % self.whatif_every == 0

    def _quant_tensor(self, st, li, kind, x):
        """Count the step's schemes for one tensor (the first of a layer and kind in a step)."""
        if not self._is_quant(st) or not self._qplan[kind] or (st.t, li, kind) in self._qrows:
            return
        if kind in (W, WG):
            p0 = self.layers[li].plist[0] if self.layers[li].plist else None
            rows, cols = _quant.matrix_shape(None, tuple(p0.shape) if p0 is not None else ())
        else:
            rows, cols = _quant.matrix_shape(x.shape)
        v = x.detach().reshape(-1).to(torch.float32).cpu().contiguous()
        self._qrows = {k: r for k, r in self._qrows.items() if k[0] == st.t}
        self._qrows[(st.t, li, kind)] = _quant.whatif(v.numpy(), rows, cols, self._qplan[kind])

    def _quant_write(self, t, li, kind):
        for q in self._qrows.pop((t, li, kind), ()):
            if q.computed:
                _quant.append(self.writer, t, self.layers[li].index, kind, q)

    def _quant_attrs(self):
        if self._qplan is None:
            return {}
        return {"quant_schemes": self._qnames,
                "quant_every": self.hist_every if self.whatif_every is None else self.whatif_every}

    # ------------------------------------------------------------------ hooks

    def _on_forward_start(self, module, args):
        self._fwd = torch.is_grad_enabled() and module.training
        if not self._fwd:
            return
        st = self._st
        if not st.started:
            st.started = True
            if st.t0 is None:
                st.t0 = time.perf_counter()
            if self._autocast is None:
                self._autocast = _autocast_state(self._device.type)
            x = _first_tensor(args)
            if x is not None and x.dim() > 0:
                st.batch = int(x.shape[0])
            if st.traced:
                self._arm()

    def _on_forward_end(self, module, args, output):
        if not self._fwd:
            return
        self._fwd = False
        loss = getattr(output, "loss", None)
        if loss is None and isinstance(output, dict):
            loss = output.get("loss")
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            self._st.losses.append(loss.detach())

    def _leaf_hook(self, li):
        def hook(module, args, output):
            st = self._st
            if not st.traced or not self._fwd:
                return
            x = _first_tensor(output)
            if x is None:
                return
            L = self.layers[li]
            if not L.compute:
                L.compute = _FMT.get(x.dtype, "")
            if li not in st.seen:
                st.seen.add(li)
                st.order.append(li)
            r = self._record(x, st.hist)
            if r is not None:
                st.recs.setdefault((li, A), []).append(r)
                self._quant_tensor(st, li, A, x)
            if x.requires_grad:
                x.register_hook(_ev.nocompile(self._grad_hook(li, st)))
        return hook

    def _grad_hook(self, li, st):
        def hook(g):
            if st is self._st and g is not None:
                r = self._record(g, st.hist)
                if r is not None:
                    st.recs.setdefault((li, AG), []).append(r)
                    self._quant_tensor(st, li, AG, g)
        return hook

    def _on_grad_accumulated(self, p):
        if not self._bw_queued:
            self._bw_queued = True
            done = self._on_backward_end if self.dist is None else self.dist.deferred(self._on_backward_end)
            torch.autograd.Variable._execution_engine.queue_callback(done)

    def _scale_now(self):
        if self.scaler is None:
            return 1.0
        s = getattr(self.scaler, "_scale", None)
        return s.detach().clone() if isinstance(s, torch.Tensor) else float(self.scaler.get_scale())

    def _on_backward_end(self):
        self._bw_queued = False
        st = self._st
        with torch.no_grad():
            st.scale = self._scale_now() if self.scaler is not None or self._hidden_scale is None else self._hidden_scale
            held = [(p, _dist.local(p.grad)) for p in self._params if p.grad is not None]
            if not held:
                return
            st.nonfinite, st.bad = 0, None
            if st.traced and all(self._use_lib(g) for _, g in held):
                self._grads_lib(st, held)
            else:
                self._grads_torch(st, held)

    def _grads_lib(self, st, held):
        """Gradients in CPU memory: one pass of libampdiag's kernel per tensor gives the norm, the
        non-finite values and, on traced steps, the weight-gradient records."""
        per = {}
        ss = 0.0
        for p, g in held:
            s, h = _stats.tstats(g, st.traced and st.hist)
            per[id(p)] = _Rec(st=s, h=h)
            ss += s.sumsq
            st.nonfinite += s.n_nan + s.n_posinf + s.n_neginf
        st.gnorm = math.inf if st.nonfinite else math.sqrt(ss)
        if st.nonfinite:
            kinds = {i: ("nan" if r.st.n_nan else "inf") for i, r in per.items()
                     if r.st.n_nan or r.st.n_posinf or r.st.n_neginf}
            self._first_nonfinite(st, held, kinds)
        if st.traced:
            st.wgrad = {}
            for li, L in enumerate(self.layers):
                recs = [per[id(p)] for p in L.plist if id(p) in per and per[id(p)].st.count]
                if recs:
                    st.wgrad[li] = recs

    def _grads_torch(self, st, held):
        """Gradients on a device: the norm from torch's per-tensor norms (one value per tensor
        leaves the device), the records by record_torch."""
        norms = torch._foreach_norm([g for _, g in held])
        if self._device.type == "cpu":  # a value each is cheaper than three more operations
            st.gnorm = math.sqrt(sum(float(n) ** 2 for n in norms))
        else:
            if any(n.dtype != torch.float32 for n in norms):
                norms = [n.float() for n in norms]
            st.gnorm = torch.linalg.vector_norm(torch.stack(norms).double())
        if not math.isfinite(float(st.gnorm)):
            kinds = {}
            for p, g in held:
                n = int((~torch.isfinite(g)).sum())
                if n:
                    st.nonfinite += n
                    kinds[id(p)] = "nan" if bool(torch.isnan(g).any()) else "inf"
            self._first_nonfinite(st, held, kinds)
        if st.traced:
            st.wgrad = {}
            grads = dict((id(p), g) for p, g in held)
            for li, L in enumerate(self.layers):
                recs = [self._record(grads[id(p)], st.hist) for p in L.plist if id(p) in grads]
                recs = [r for r in recs if r is not None]
                if recs:
                    st.wgrad[li] = recs

    def _backward_order(self, st):
        """Layers in the order the backward pass reaches them: the forward order reversed."""
        fwd = st.order if st.order else (self._layer_order or list(range(len(self.layers))))
        rest = [li for li in range(len(self.layers)) if li not in set(fwd)]
        return list(reversed(fwd)) + list(reversed(rest))

    def _first_nonfinite(self, st, held, bad):
        """The first layer and tensor holding a non-finite value, in the order of the backward
        pass (per layer the gradient of its output, then its weight gradients); bad: id(param)
        -> "nan" or "inf" for the parameters whose gradients hold one."""
        for li in self._backward_order(st):
            L = self.layers[li]
            for r in st.recs.get((li, AG), []):
                s = self._host(r)
                if s.n_nan or s.n_posinf or s.n_neginf:
                    st.bad = (L.name, AG, "nan" if s.n_nan else "inf", li)
                    return
            for p in L.plist:
                if id(p) in bad:
                    st.bad = (L.name, WG, bad[id(p)], li)
                    return
        for p, _ in reversed(held):
            if id(p) in bad:
                owner = self._pnames.get(id(p), "?").rsplit(".", 1)[0]
                st.bad = (owner, WG, bad[id(p)], self._owner.get(id(p), -1))
                return

    def _on_opt_pre(self, opt, args, kwargs):
        st = self._st
        st.lr = self._lr()
        if st.gnorm is None:  # no end of a backward pass was seen: the gradients as they are now
            self._on_backward_end()
        self._check_unscaled(st)
        if not (st.traced and self.updates):
            return
        if self._flat is None or not self._flat.valid():
            self._flat = _Flat(self.layers, self._device)
        if self._flat.segs:
            self._flat.save()
            st.saved = True

    def _on_opt_post(self, opt, args, kwargs):
        st = self._st
        st.stepped = True
        self._opt_steps += 1
        if not st.saved:
            return
        st.saved = False
        counts, lis = [], []
        with torch.no_grad():
            for li, old, d, g in self._flat.changes():
                st.recs[(li, W)] = [self._record(old, st.hist)]
                st.recs[(li, U)] = [self._record(d, st.hist)]
                self._quant_tensor(st, li, W, old)
                self._quant_tensor(st, li, WG, g)
                counts.append(self._lost(old, d, g))
                lis.append(li)
        if counts and isinstance(counts[0], torch.Tensor):
            counts = torch.stack(counts)
        st.lost = (lis, counts)

    def _lost(self, old, d, g):
        """The lost-update counts of one layer: 3 numbers on the host (libampdiag) or a device
        tensor (torch)."""
        if self._use_lib(d):
            c = _stats.lost_counts_lib(old, d, g)
            if c is not None:
                return c
        return _stats.lost_masks(old, d, g).sum(dim=1)

    def _lr(self):
        if self.optimizer is None or not self.optimizer.param_groups:
            return math.nan
        lr = self.optimizer.param_groups[0].get("lr", math.nan)
        return float(lr.item() if isinstance(lr, torch.Tensor) else lr)

    # ------------------------------------------------------------------ evidence beyond the hooks
    # (_evidence.py): the scaler from wrappers or found from the gradients, FP16 without one, the
    # configured lr, skipped steps, clip_grad_norm_'s max norm, the loss and attention scores as
    # layers, the parameterless leaves left out

    def _given_scaler(self, scaler, optimizer):
        """The scaler to use: the one given (an Accelerator stands for its own), else the one an
        optimizer wrapper holds; None for a disabled one."""
        src = "given"
        if scaler is not None and hasattr(scaler, "unwrap_model") and hasattr(scaler, "scaler"):
            scaler, src = scaler.scaler, "accelerator"
        if scaler is None:
            scaler, src = _wrapped_scaler(optimizer), "optimizer wrapper"
        enabled = getattr(scaler, "is_enabled", None)
        if scaler is None or (enabled is not None and not enabled()):
            self._scaler_source = None
            return None
        self._scaler_source = src
        return scaler

    def _configured_lr(self):
        """The lr the optimizer was configured with: a scheduler's initial_lr, else the lr now
        (before any step; a scheduler may have changed it by the first step's end)."""
        o = self.optimizer
        if o is None or not o.param_groups:
            return math.nan
        g = o.param_groups[0]
        lr = g.get("initial_lr", g.get("lr", math.nan))
        return float(lr.item() if isinstance(lr, torch.Tensor) else lr)

    def _evidence_init(self, patch):
        self._hidden_scale = None   # the scale of a scaler the tracer was not given, measured
        self._opt_steps = 0
        self._warned = set()
        self._pseudo = {}
        named = [(_ev.clean_name(n), m) for n, m in self.model.named_modules()]
        self._modnames = {id(m): n for n, m in named}
        self._layer_mods = {id(L.module): L.name for L in self.layers if L.module is not None}
        self._mha = [(n, m) for n, m in named if isinstance(m, torch.nn.MultiheadAttention)]
        self._param_ids = {id(p) for p in self.model.parameters()}
        if patch:
            _ev.register(self)

    def note_loss(self, loss):
        """A loss of the current step, from a forward pass whose output does not hold it (for
        integrations: step() without a loss averages those noted)."""
        self._st.noted.append(loss.detach() if isinstance(loss, torch.Tensor) else torch.tensor(float(loss)))

    def _found_loss(self, st):
        src = st.noted or st.losses
        if not src:
            raise ValueError("ampdiag.torch: step() was given no loss and the model's output has none (no `loss` "
                             "attribute or key): pass the step's loss, tracer.step(loss)")
        return torch.stack([x.detach().float().reshape(()) for x in src]).mean()

    def _warn(self, key, message):
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, AmpdiagWarning, stacklevel=4)

    def _skipped(self, st):
        """A step whose gradients were computed but the optimizer did not step: with a scaler
        (GradScaler skips on inf/NaN), with non-finite gradients, or after the optimizer's step
        hooks have been seen to work."""
        if self.optimizer is None or st.gnorm is None or st.stepped:
            return False
        return self.scaler is not None or self._hidden_scale is not None or st.nonfinite > 0 or self._opt_steps > 0

    def _clip_coef(self, st, norm, skipped):
        """clip_grad_norm_'s factor: from the call seen this step (its max norm and the total norm
        it measured), else from the clip option and the unscaled norm."""
        if skipped:
            return 1.0
        if st.clip_max is not None and st.clip_total is not None:
            tot = float(st.clip_total)
            return min(1.0, st.clip_max / (tot + 1e-6)) if math.isfinite(tot) and st.clip_max > 0 else 1.0
        if self.clip > 0 and math.isfinite(norm):
            return min(1.0, self.clip / (norm + 1e-6))
        return 1.0

    def _grad_norm_now(self):
        gs = [p.grad for p in self._params if p.grad is not None]
        if not gs:
            return math.nan
        with torch.no_grad():
            norms = torch._foreach_norm(gs)
            if self._device.type == "cpu":
                return math.sqrt(sum(float(n) ** 2 for n in norms))
            return float(torch.linalg.vector_norm(torch.stack([n.float() for n in norms]).double()))

    def _check_unscaled(self, st):
        """Before the optimizer steps, without a scaler: the gradients' norm now against the one
        at the end of the backward pass. A factor 2^k >= 2 between them is a loss scaler's
        unscale_ (the tracer was not given the scaler). Checked on the first steps, traced steps
        and steps that called clip_grad_norm_ (its total norm is the norm now), and every step
        once such a scaler was found without its object."""
        if self.scaler is not None or st.gnorm is None:
            return
        if not (self._hidden_scale is not None or self._opt_steps < 3 or st.traced or st.clip_total is not None):
            return
        now = float(st.clip_total) if st.clip_total is not None else self._grad_norm_now()
        held = float(st.gnorm)
        if not (math.isfinite(now) and math.isfinite(held) and now > 0 and held > 0):
            return
        e = math.log2(held / now)
        k = round(e)
        if abs(e - k) > 1e-5 or (k < 1 and self._hidden_scale is None):
            return
        scale = 2.0 ** k
        st.scale = scale
        if self._hidden_scale is None:
            st.hidden = (scale, "the gradient norm %.4g at the end of the backward pass is %g times the %.4g the "
                                "optimizer stepped with" % (held, scale, now))
            found = [x for x in _ev.live_scalers() if float(x.get_scale()) == scale]
            if len(found) == 1:
                self.scaler, self._scaler_source = found[0], "found"
        self._hidden_scale = scale

    def _evidence_events(self, st, t, merged):
        """The step's events of what the tracer found: a scaler it was not given, FP16 without one."""
        w = self.writer
        if (self.scaler is None and self._hidden_scale is None and st.hidden is None and self.optimizer is not None
                and st.nonfinite and not st.stepped):
            scale = math.nan
            found = _ev.live_scalers()
            if len(found) == 1:
                self.scaler, self._scaler_source = found[0], "found"
                try:
                    scale = float(found[0].get_scale()) / float(found[0].get_backoff_factor())
                except (AttributeError, TypeError, ZeroDivisionError):
                    pass
            st.hidden = (scale, "the gradients held inf or NaN and the optimizer did not step, as a GradScaler skips")
        if st.hidden is not None and "hidden" not in self._warned:
            scale, how = st.hidden
            self._warn("hidden", "ampdiag.torch: the gradients are scaled by a loss scaler (GradScaler) the tracer was not given "
                                 "(%s); the trace uses the scale found, %g. Pass it: Tracer(path, model, optimizer, "
                                 "scaler)" % (how, scale))
            w.append_event(t, None, "hidden_scaler", scale,
                           "loss scaler not given to the tracer, found (scale %g): pass Tracer(..., scaler=)" % scale)
        if ("fp16" not in self._warned and self.scaler is None and self._hidden_scale is None and st.hidden is None
                and self._infer_precision() in ("fp16", "fp16-pure")):
            zero = count = 0
            for (li, kind), (s, _) in merged.items():
                if kind == WG:
                    zero, count = zero + s.n_zero, count + s.count
            share = zero / count if count else math.nan
            self._warn("fp16", "ampdiag.torch: FP16 without a loss scaler: gradients below 2^-24 flush to zero "
                               "(%s of the traced weight gradients are zero). Use torch.amp.GradScaler, or BF16"
                               % ("%.1f%%" % (100 * share) if count else "untraced"))
            w.append_event(t, None, "no_loss_scaling", share,
                           "FP16 without a GradScaler: gradients below 2^-24 flush to zero (use torch.amp.GradScaler)")

    def _evidence_attrs(self):
        a = {}
        if self.left_out:
            a["layers_left_out"] = self._left_out_line(short=False)
        if self._scaler_source not in (None, "given"):
            a["scaler_source"] = {"accelerator": "the Accelerator's", "optimizer wrapper": "the optimizer wrapper's",
                                  "found": "found: not given to the tracer"}.get(self._scaler_source, "")
        if self.scaler is None and self._hidden_scale is not None:
            a["loss_scale"] = "dynamic"
            a["scaler"] = "init=%g" % self._hidden_scale
            a["scaler_source"] = "measured from the gradients: a scaler not given to the tracer"
        if self.attention_scores:
            a["attention_scores"] = "the logits q k^T * scale (before mask and softmax) as layers <module>.scores"
        return a

    def _left_out_line(self, short):
        counts = {}
        for _, cls in self.left_out:
            counts[cls] = counts.get(cls, 0) + 1
        kinds = ", ".join("%d %s" % (n, c) for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        head = "%d parameterless pass-through modules left out (%s)" % (len(self.left_out), kinds)
        if short:
            return head + "; layers='leaves' keeps them"
        names = ", ".join(n for n, _ in self.left_out)
        return (head + ": " + names)[:16000]

    def _pseudo_layer(self, name, op, compute=""):
        """The row of a layer that is no module (the loss, attention scores), made at first use."""
        li = self._pseudo.get(name)
        if li is not None:
            return li
        L = _Layer.pseudo(_short_name(name, {x.name for x in self.layers}), op, compute)
        self.layers.append(L)
        li = len(self.layers) - 1
        self._pseudo[name] = li
        if self._header:
            L.index = self.writer.add_layer(L.name, L.op, L.shape, L.params, L.compute)
            self._layer_order.append(li)
        return li

    def _add_record(self, st, li, kind, x):
        r = self._record(x, st.hist)
        if r is not None:
            st.recs.setdefault((li, kind), []).append(r)
        if li not in st.seen:
            st.seen.add(li)
            st.order.append(li)

    def _on_clip(self, params, max_norm, norm_type, total):
        """torch.nn.utils.clip_grad_norm_ was called (the wrapper): its max norm and the total norm
        it measured, for this model's parameters."""
        if self._closed or not any(id(p) in self._param_ids for p in params[:4]):
            return
        st = self._st
        st.clip_max = float(max_norm)
        st.clip_total = total.detach() if isinstance(total, torch.Tensor) else float(total)
        if not self._clip_given and not self._header:
            self.clip = float(max_norm)

    def _on_loss(self, name, orig, input, target, args, kwargs, out):
        """A loss function of torch.nn.functional ran (the wrapper): on traced steps of training,
        the per-element losses and the loss's gradient as the layer "loss" (unless a traced layer
        of the model called it: that layer has the records)."""
        st = self._st
        if self._closed or not (st.traced and st.started) or not (torch.is_grad_enabled() and self.model.training):
            return
        if not (isinstance(out, torch.Tensor) and out.requires_grad and out.is_floating_point()):
            return
        if _ev.module_calling(self._layer_mods)[0] is not None:
            return
        li = self._pseudo_layer("loss", name, _FMT.get(out.dtype, ""))
        per = out
        if kwargs.get("reduction", "mean") != "none":
            per = out.detach()
            if not args and "size_average" not in kwargs and "reduce" not in kwargs and isinstance(input, torch.Tensor):
                with torch.no_grad():
                    tgt = target.detach() if isinstance(target, torch.Tensor) else target
                    per = orig(input.detach(), tgt, **dict(kwargs, reduction="none"))
        self._add_record(st, li, A, per.detach())
        out.register_hook(_ev.nocompile(self._grad_hook(li, st)))

    def _on_sdpa(self, query, key, args, kwargs):
        """F.scaled_dot_product_attention ran (the wrapper): with attention_scores, on traced steps
        of training, its logits as the layer "<calling module>.scores"."""
        st = self._st
        if not self.attention_scores or self._closed or not (st.traced and self._fwd):
            return
        m, name = _ev.module_calling(self._modnames)
        if m is None or isinstance(m, torch.nn.MultiheadAttention):  # the module's own hook has it
            return
        li = self._pseudo_layer(name + ".scores" if name else "scores", "attention_scores", _FMT.get(query.dtype, ""))
        for s in _ev.attention_scores_sdpa(query, key, args, kwargs):
            self._add_record(st, li, A, s)

    def _arm_attention(self):
        if not self.attention_scores:
            return
        for name, m in self._mha:
            self._leaf_handles.append(m.register_forward_pre_hook(_ev.nocompile(self._mha_hook(name)),
                                                                  with_kwargs=True))

    def _mha_hook(self, name):
        def hook(module, args, kwargs):
            st = self._st
            if not (st.traced and self._fwd):
                return
            q = args[0] if args else kwargs.get("query")
            dt = q.dtype if isinstance(q, torch.Tensor) else None
            on, adt = _autocast_state(q.device.type) if isinstance(q, torch.Tensor) else (False, None)
            li = self._pseudo_layer(name + ".scores" if name else "scores", "attention_scores",
                                    _FMT.get(adt if on else dt, ""))
            for s in _ev.attention_scores_mha(module, args, kwargs):
                self._add_record(st, li, A, s)
        return hook

    # ------------------------------------------------------------------ the trace

    def _autocast_dtype(self):
        """The 16-bit dtype autocast ran the model in: seen at the start of the forward pass, else
        from the layers' outputs (Accelerate enters autocast inside the model's forward)."""
        on, dt = self._autocast or (False, None)
        if on and dt in (torch.float16, torch.bfloat16):
            return dt
        seen = {L.compute for L in self.layers}
        return torch.float16 if "fp16" in seen else torch.bfloat16 if "bf16" in seen else None

    def _infer_precision(self):
        if self.precision:
            return self.precision
        pd = self._params[0].dtype if self._params else torch.float32
        if pd in (torch.bfloat16, torch.float16):
            return "bf16-pure" if pd == torch.bfloat16 else "fp16-pure"
        dt = self._autocast_dtype()
        return {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(dt, "fp32")

    def _optimizer_attrs(self):
        o = self.optimizer
        if o is None:
            return "", ""
        g = o.param_groups[0] if o.param_groups else {}
        name = type(o).__name__.lower()
        words = []
        betas = g.get("betas")
        if betas is not None:
            words += ["beta1=%g" % float(betas[0]), "beta2=%g" % float(betas[1])]
        for k in ("eps", "momentum", "weight_decay"):
            if k in g and isinstance(g[k], (int, float)):
                words.append("%s=%g" % (k, g[k]))
        p = self._params[0] if self._params else None
        words.append("state=%s" % _FMT.get(p.dtype, str(p.dtype)) if p is not None else "state=fp32")
        return name, " ".join(words)

    def _scaler_attrs(self):
        s = self.scaler
        if s is None:
            return "none", ""
        words = []
        for k, get in (("init", lambda: s._init_scale), ("growth", s.get_growth_factor),
                       ("backoff", s.get_backoff_factor), ("interval", s.get_growth_interval)):
            try:
                words.append("%s=%g" % (k, float(get())))
            except (AttributeError, TypeError):
                pass
        return "dynamic", " ".join(words)

    def _device_attrs(self):
        d = self._device
        if d.type == "cuda":
            try:
                return "cuda", torch.cuda.get_device_name(d)
            except (RuntimeError, AssertionError):
                return "cuda", "cuda"
        return d.type, (platform.processor() or platform.machine() or d.type)

    def _peak_memory_start(self):
        """What the run's peak memory will be measured with (None: nothing here can), the CUDA
        peak reset now."""
        if not _lib.has("ampdiag_trace_update_attr_double"):
            return None  # (a libampdiag too old to write it at close)
        if self._device.type == "cuda":
            try:
                torch.cuda.reset_peak_memory_stats(self._device)
            except (RuntimeError, AssertionError):
                return None
            return "torch.cuda.max_memory_allocated"
        if self._device.type == "cpu":
            try:
                import resource  # noqa: F401  (POSIX only)
            except ImportError:
                return None
            return "ru_maxrss"
        return None

    def _peak_memory_bytes(self):
        """The peak memory so far, bytes, as _peak_source measures it."""
        if self._peak_source == "torch.cuda.max_memory_allocated":
            return float(torch.cuda.max_memory_allocated(self._device))
        import resource
        v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return float(v if sys.platform == "darwin" else v * 1024)  # bytes on macOS, kilobytes elsewhere

    def _write_peak_memory(self):
        if self._peak_source is None or self.writer.closed:
            return
        try:
            self.writer.update_attr("peak_memory_bytes", self._peak_memory_bytes())
        except (AmpdiagError, OSError, RuntimeError, ValueError) as e:
            warnings.warn("ampdiag.torch: the peak memory was not recorded: %s" % e, stacklevel=3)

    def _ensure_header(self):
        if self._header:
            return
        self._header = True
        w = self.writer
        opt_name, hyper = self._optimizer_attrs()
        loss_scale, scaler = self._scaler_attrs()
        device, device_name = self._device_attrs()
        dt = self._autocast_dtype()
        attrs = {
            "precision": self._infer_precision(),
            "model": type(self.model).__name__,
            "optimizer": opt_name,
            "hyperparameters": hyper,
            "lr": self._lr_configured,
            "clip": self.clip,
            "loss_scale": loss_scale,
            "scaler": scaler,
            "device": device,
            "device_name": device_name,
            "command_line": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "eval_metric": self.eval_metric,
            "grad_stats": "scaled",
            "trace_cadence": self._cad.mode,
            "trace_every": self.trace_every,
            "trace_budget": self.trace_budget,
            "trace_after_event": self.trace_after_event,
            "hist_every": self.hist_every,
            "params": sum(p.numel() for p in self.model.parameters()),
            "writer": "ampdiag.torch (torch %s)" % torch.__version__,
            "autocast": ("%s %s" % (self._device.type, _FMT[dt])) if dt is not None else "off",
            "update_stats": "applied change (w_after - w_before)",
        }
        if self.steps_planned:
            attrs["steps_planned"] = self.steps_planned
        if self._peak_source is not None:  # (the value at close: a NaN until then)
            attrs["peak_memory_source"] = self._peak_source
            attrs["peak_memory_bytes"] = math.nan
        attrs.update(self._evidence_attrs())
        if self._st.batch:
            attrs["batch"] = self._st.batch
        attrs.update(self._quant_attrs())
        attrs.update(self.attrs)
        for k, v in attrs.items():
            if v is not None:
                w.set_attr(k, v)
        if self.dist is not None:
            self.dist.write(w)
        order = list(self._st.order)
        order += [li for li in range(len(self.layers)) if li not in set(order)]
        self._layer_order = order
        for li in order:
            L = self.layers[li]
            L.index = w.add_layer(L.name, L.op, L.shape, L.params, L.compute)
        if self.left_out:
            w.append_event(0, None, "note", len(self.left_out), self._left_out_line(short=True))
        for rec in self._pending_evals:
            self._write_eval(rec)
        self._pending_evals = []
        for code, message, value, layer in self._pending_events:  # (at step 0: before it began)
            idx = next((L.index for L in self.layers if L.name == layer), None) if layer is not None else None
            w.append_event(0, idx, code, value, message)
        self._pending_events = []

    def _host(self, r):
        """A record's Tstats (copying a device vector to the host: only in rare paths)."""
        if r.st is None:
            r.st = _stats.unpack(r.vec.cpu().tolist())
            if r.hvec is not None:
                r.h = _stats.hist_from(r.hvec.cpu().tolist())
        return r.st

    def _fetch(self, st):
        """Bring every device record of the step to the host in one transfer; returns the
        lost-update counts {layer: [3 counts]}."""
        lis, counts = st.lost if st.lost is not None else ([], [])
        on_dev = isinstance(counts, torch.Tensor)
        pend = [r for rs in st.recs.values() for r in rs if r.st is None]
        pend += [r for rs in st.wgrad.values() for r in rs if r.st is None]
        parts = [r.vec for r in pend] + [r.hvec.double() for r in pend if r.hvec is not None]
        if on_dev:
            parts.append(counts.double())
        if not parts:
            return dict(zip(lis, counts))
        flat = torch.cat([p.reshape(-1).to(self._device) for p in parts]).cpu().tolist()
        k = 0
        for r in pend:
            r.st = _stats.unpack(flat[k:k + _stats.record_len()])
            k += _stats.record_len()
        for r in pend:
            if r.hvec is not None:
                r.h = _stats.hist_from(flat[k:k + _lib.HIST_BINS])
                k += _lib.HIST_BINS
        if on_dev:
            counts = [[int(v) for v in flat[k + 3 * j:k + 3 * j + 3]] for j in range(len(lis))]
        return dict(zip(lis, counts))

    @staticmethod
    def _merged(recs):
        if len(recs) == 1:
            return recs[0].st, recs[0].h
        s, h = _lib.Tstats(), None
        _lib.lib().ampdiag_tstats_init(s)
        for r in recs:
            _stats.merge(s, r.st)
            if r.h is not None:
                h = _stats.merge_hist(h, r.h) if h is not None else _lib.Hist.from_buffer_copy(r.h)
        return s, h

    def _write_tensors(self, st, lost):
        w, t = self.writer, st.t
        merged = {}
        for key, recs in list(st.recs.items()) + [((li, WG), recs) for li, recs in st.wgrad.items()]:
            if recs:
                merged[key] = self._merged(recs)
        order = self._layer_order
        for kind in (A, AG, WG):
            for li in order:
                if (li, kind) in merged:
                    s, h = merged[(li, kind)]
                    w.append_tensor(t, self.layers[li].index, kind, s)
                    self._quant_write(t, li, kind)
                    if h is not None:
                        w.append_hist(t, self.layers[li].index, kind, h)
        w_ss = u_ss = 0.0
        for li in order:
            if (li, U) not in merged or (li, W) not in merged:
                continue
            idx = self.layers[li].index
            (sw, hw), (su, hu) = merged[(li, W)], merged[(li, U)]
            w.append_tensor(t, idx, W, sw)
            self._quant_write(t, li, W)
            if hw is not None:
                w.append_hist(t, idx, W, hw)
            lo = lost.get(li, [0, 0, 0])
            w.append_update(t, idx, su, lo[0], lo[1], lo[2])
            if hu is not None:
                w.append_hist(t, idx, U, hu)
            w_ss += sw.sumsq
            u_ss += su.sumsq
        return merged, (math.sqrt(u_ss / w_ss) if w_ss > 0 else math.nan)

    def _first_forward_nonfinite(self, st, merged):
        for li in self._layer_order:
            s = merged.get((li, A), (None,))[0]
            if s is not None and (s.n_nan or s.n_posinf or s.n_neginf):
                return li, ("nan" if s.n_nan else "inf")
        return None

    @staticmethod
    def _loss_value(loss):
        if loss is None:
            return math.nan
        if isinstance(loss, torch.Tensor):
            return float(loss.item() if loss.numel() == 1 else loss.detach().float().mean().item())
        return float(loss)

    def step(self, loss=None):
        """End of a training step: call it after the optimizer step (and scaler.update()). loss: the
        step's unscaled training loss (tensor or number); None takes the ``loss`` of the model's
        output (Hugging Face models), averaged over the step's forward passes."""
        if self._closed:
            raise AmpdiagError("ampdiag.torch: step() after close() (trace '%s')" % self.path, -1)
        st = self._st
        now = time.perf_counter()
        if loss is None:
            loss = self._found_loss(st)
        loss_v = self._loss_value(loss)
        skipped = self._skipped(st)
        self._ensure_header()
        lost = self._fetch(st) if st.traced else {}
        w, t = self.writer, st.t
        scale = float(st.scale) if st.scale is not None else (self._scale_f() if self.scaler else 1.0)
        norm = float(st.gnorm) / scale if st.gnorm is not None else math.nan
        if st.nonfinite:
            norm = math.inf  # as ampdiag run: the norm of gradients that hold inf or NaN
        coef = self._clip_coef(st, norm, skipped)
        rec = _lib.StepRecord()
        rec.step, rec.loss, rec.loss_scale, rec.grad_norm, rec.clip_coef = t, loss_v, scale, norm, coef
        rec.skipped = 1 if skipped else 0
        rec.lr = st.lr if st.lr is not None else self._lr()
        rec.nonfinite_grads = st.nonfinite
        rec.update_ratio = math.nan
        merged = {}
        if st.traced:
            merged, ratio = self._write_tensors(st, lost)
            rec.update_ratio = ratio if st.stepped else math.nan
        self._evidence_events(st, t, merged)
        reason = self._events(st, t, loss_v, merged, scale, norm, coef, skipped)
        events = self._cad.events(t, loss_v, norm, st.nonfinite, skipped)
        if skipped:
            rec.skip_reason = reason.encode("utf-8")[:95]
        rec.wall_ms = (now - st.t0) * 1e3 if st.t0 is not None else math.nan
        w.append_step(rec)
        row = self._cad.done(t, st.traced, self._c0, events)
        if row is not None:
            w.append_traced(row.step, row.reason, row.event_step, row.cadence, row.record_ms, row.step_ms)
        self.t += 1
        nxt = _Step(self.t, *self._cad.plan(self.t, self.steps_planned), time.perf_counter())
        self._c0 = self._cad.start()
        self._st = nxt
        if not nxt.traced:
            self._disarm()
        return rec

    def _scale_f(self):
        return float(self.scaler.get_scale()) if self.scaler is not None else 1.0

    def _events(self, st, t, loss_v, merged, scale, norm, coef, skipped):
        """The step's events; returns the skip reason (empty when the gradients were finite)."""
        w = self.writer
        fwd = None
        if not math.isfinite(loss_v):
            fwd = self._first_forward_nonfinite(st, merged) if st.traced else None
            if fwd is not None:
                L = self.layers[fwd[0]]
                w.append_event(t, L.index, "nan_forward" if fwd[1] == "nan" else "inf_forward", loss_v,
                               "%s in %s activation (first in forward order); loss %g" %
                               ("NaN" if fwd[1] == "nan" else "inf", L.name, loss_v))
            else:
                w.append_event(t, None, "nan_forward" if math.isnan(loss_v) else "inf_forward", loss_v,
                               "non-finite loss %g (%s)" % (loss_v, "no layer's output was" if st.traced
                                                            else "not a traced step: the layers were not")
                               + " seen non-finite")
        reason = ""
        if st.nonfinite:
            if fwd is not None:
                reason = "%s in %s activation (forward)" % (fwd[1], self.layers[fwd[0]].name)
            elif st.bad is not None:
                name, kind, what, li = st.bad
                reason = "%s in %s %s" % (what, name, kind)
                idx = self.layers[li].index if li >= 0 else None
                w.append_event(t, idx, "nan_backward" if what == "nan" else "inf_backward", st.nonfinite,
                               "%s (first in backward order); %d non-finite gradient values at scale %g" %
                               (reason, st.nonfinite, scale))
            else:
                reason = "non-finite gradients"
        if self.scaler is not None and st.scale is not None:
            new = self._scale_f()
            if new < scale:
                w.append_event(t, None, "scale_backoff", new, "loss scale %g -> %g" % (scale, new))
            elif new > scale:
                w.append_event(t, None, "scale_growth", new, "loss scale %g -> %g" % (scale, new))
        if skipped:
            w.append_event(t, None, "skipped_step", scale, reason or "optimizer step not taken")
        if coef < 1.0:
            clip = st.clip_max if st.clip_max is not None else self.clip
            w.append_event(t, None, "clipped", norm, "gradient norm %.4g clipped to %g" % (norm, clip))
        return reason

    def eval(self, loss, metric=math.nan, loss_se=math.nan, step=None, examples=None, example_metric=None,
             initial=False):
        """An evaluation after the last step (or after ``step``): its loss, the metric named by
        eval_metric (accuracy in [0, 1]) and the standard error of the loss (sd / sqrt(n) over the
        validation examples; compare builds its noise band from it). ``initial=True``: the
        evaluation of the initial weights, before the first step (step -1: what learning is
        measured against). ``examples``: each validation example's loss (a tensor or sequence,
        the same examples in the same order in every run) and ``example_metric`` its metric (1/0
        correct): the /eval_examples rows that make compare's and tune's noise band paired;
        loss_se is then computed from them when not given. Before the first step() an evaluation
        is of the initial weights (step -1, initial or not), and like every record before it
        waits for the first step: the trace's header (the precision seen from autocast in that
        step's forward pass) is written then."""
        s = -1 if initial or (step is None and self.t == 0) else (step if step is not None else self.t - 1)
        ex = em = None
        if examples is not None:
            ex = [float(v) for v in (examples.detach().double().flatten().cpu().tolist()
                                     if isinstance(examples, torch.Tensor) else examples)]
            if example_metric is not None:
                em = [float(v) for v in (example_metric.detach().double().flatten().cpu().tolist()
                                         if isinstance(example_metric, torch.Tensor) else example_metric)]
            if isinstance(loss_se, float) and math.isnan(loss_se) and len(ex) > 1:
                m = sum(ex) / len(ex)
                loss_se = math.sqrt(sum((v - m) ** 2 for v in ex) / (len(ex) - 1) / len(ex))
        rec = (s, self._loss_value(loss), self._loss_value(metric), self._loss_value(loss_se), ex, em)
        if not self._header:
            self._pending_evals.append(rec)  # written with the header (the first step's autocast and layers)
            return
        self._ensure_header()
        self._write_eval(rec)

    def _write_eval(self, rec):
        s, loss, metric, se, ex, em = rec
        self.writer.append_eval(s, loss, metric, se)
        if ex:
            self.writer.append_eval_examples(s, ex, em)

    def event(self, code, message="", value=math.nan, layer=None):
        """An event at the current step: code one of ampdiag's event names ("note", ...); layer a
        layer name or None. Before the first step() it waits for the header, written at that
        step (as eval())."""
        if layer is not None and not any(L.name == layer for L in self.layers):
            raise ValueError("ampdiag.torch: event: no layer named %r" % (layer,))
        if not self._header:
            self._pending_events.append((code, message, value, layer))
            return
        idx = next((L.index for L in self.layers if L.name == layer), None) if layer is not None else None
        self.writer.append_event(max(self.t - (0 if self._st.started else 1), 0), idx, code, value, message)

    def flush(self):
        """Write every record so far to disk (a kill loses nothing before this). Before the first
        step() there is nothing to write: the header waits for that step."""
        if not self._header:
            return
        self.writer.flush()

    def remove_hooks(self):
        self._disarm()
        _ev.unregister(self)
        for h in self._handles:
            h.remove()
        self._handles = []

    def close(self, status="complete"):
        """Remove the hooks and close the trace with that status (complete, diverged,
        interrupted; running leaves it marked cut off). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._atexit)
        self.remove_hooks()
        _ev.unregister(self)
        try:
            self._ensure_header()
            self._write_peak_memory()
        finally:
            self.writer.close(status)

    def _close_quietly(self, status, exc=None):
        if exc is not None and not self._closed:  # what stopped the run, at the step it stopped in
            try:
                self.event("stop", ("%s: %s" % (type(exc).__name__, exc)).rstrip(": "))
            except (AmpdiagError, OSError):
                pass
        try:
            self.close(status)
        except (AmpdiagError, OSError):
            pass

    def __enter__(self):
        return self

    def __exit__(self, etype, exc, tb):
        if etype is None:
            self.close("complete")
        else:
            self._close_quietly("interrupted", exc)
        return False


def trace(path, model, optimizer=None, scaler=None, **kwargs):
    """A Tracer to use as a context manager: ``with ampdiag.torch.trace(...) as tracer:``; the
    trace is closed complete at the end of the block, interrupted when the block raises."""
    return Tracer(path, model, optimizer, scaler, **kwargs)


from .tune import TuneConfig, tune_config  # noqa: E402  (ampdiag tune -- CMD: docs/pytorch.md)
