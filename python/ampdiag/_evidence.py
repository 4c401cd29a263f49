"""What the PyTorch tracer needs beyond hooks on the model and the optimizer (ampdiag.torch).

* Names and layers: ``torch.compile``'s ``_orig_mod.`` taken out of module names, and which
  leaves are parameterless pass-through modules (Identity, Dropout, elementwise activations,
  Flatten) that the tracer leaves out by default.
* Wrappers of a few torch functions, installed while a tracer is open and shared by every open
  tracer: ``torch.nn.utils.clip_grad_norm_`` (its max norm and the total norm it measured),
  the loss functions of ``torch.nn.functional`` (the loss as a layer) and
  ``torch.nn.functional.scaled_dot_product_attention`` (the attention scores' range). Inside a
  ``torch.compile`` graph each wrapper is the function it wraps and nothing else.
* Attention scores (the logits q k^T * scale before the mask and the softmax) computed again from
  the query and key of an SDPA call or of an ``nn.MultiheadAttention``.
* Loss scalers the tracer was not given: the GradScalers alive in the process.
"""
import gc
import math
import sys
import weakref

import torch

__all__ = ["clean_name", "is_pass_through", "nocompile", "compiling", "register", "unregister",
           "module_calling", "attention_scores_sdpa", "attention_scores_mha", "live_scalers",
           "accuracy_counts"]

# ---------------------------------------------------------------------- torch.compile


def compiling():
    """Whether dynamo is tracing the caller (a constant True inside a compiled graph)."""
    f = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(f()) if f is not None else False


def nocompile(fn):
    """fn kept out of torch.compile graphs: dynamo calls it as Python (a graph break) instead of
    tracing into it and guarding on the tracer's state, which changes every step (the guards
    failing are what recompiled graphs over and over)."""
    dis = getattr(getattr(torch, "compiler", None), "disable", None)
    return dis(fn) if dis is not None else fn


def clean_name(name):
    """A module name without the ``_orig_mod`` segments torch.compile adds
    (``encoder._orig_mod.layer.0`` -> ``encoder.layer.0``), so that compiled and eager runs line
    up by name."""
    parts = [p for p in name.split(".") if p != "_orig_mod"]
    return ".".join(parts)


# ---------------------------------------------------------------------- pass-through leaves

_PASS_MODULES = ("torch.nn.modules.activation", "torch.nn.modules.dropout", "transformers.activations")
_KEEP = {"Softmax", "Softmin", "LogSoftmax", "Softmax2d", "MultiheadAttention", "GLU",
         "NonDynamicallyQuantizableLinear"}
_PASS_CLASSES = {"Identity", "Flatten", "Unflatten"}


def is_pass_through(module):
    """A parameterless module that passes values through elementwise (activations, dropout,
    Identity, Flatten): its output says little the next layer's input does not. Softmax and its
    kin are kept (autocast runs them in FP32 and their range matters)."""
    if any(True for _ in module.parameters(recurse=False)) or any(True for _ in module.children()):
        return False
    cls = type(module)
    if cls.__name__ in _KEEP:
        return False
    if cls.__name__ in _PASS_CLASSES and cls.__module__.startswith("torch.nn"):
        return True
    return cls.__module__.startswith(_PASS_MODULES)


# ---------------------------------------------------------------------- wrapped torch functions

_tracers = weakref.WeakSet()
_saved = []  # (owner module, attribute, original, wrapper)

LOSS_FUNCTIONS = ("cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                  "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div")


def _clip_wrapper(orig):
    def clip_grad_norm_(parameters, max_norm, *args, **kwargs):
        if compiling() or not _tracers:
            return orig(parameters, max_norm, *args, **kwargs)
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        parameters = list(parameters)
        total = orig(parameters, max_norm, *args, **kwargs)
        norm_type = kwargs.get("norm_type", args[0] if args else 2.0)
        for tr in list(_tracers):
            tr._on_clip(parameters, max_norm, norm_type, total)
        return total
    clip_grad_norm_.__wrapped__ = orig
    clip_grad_norm_.__doc__ = orig.__doc__
    return clip_grad_norm_


def _loss_wrapper(name, orig):
    def loss(input, target, *args, **kwargs):
        out = orig(input, target, *args, **kwargs)
        if compiling() or not _tracers:
            return out
        for tr in list(_tracers):
            tr._on_loss(name, orig, input, target, args, kwargs, out)
        return out
    loss.__name__ = name
    loss.__wrapped__ = orig
    loss.__doc__ = orig.__doc__
    return loss


def _sdpa_wrapper(orig):
    def scaled_dot_product_attention(query, key, value, *args, **kwargs):
        if not compiling() and _tracers:
            for tr in list(_tracers):
                tr._on_sdpa(query, key, args, kwargs)
        return orig(query, key, value, *args, **kwargs)
    scaled_dot_product_attention.__wrapped__ = orig
    scaled_dot_product_attention.__doc__ = orig.__doc__
    return scaled_dot_product_attention


def _install():
    F = torch.nn.functional
    plan = []
    clip = getattr(torch.nn.utils, "clip_grad_norm_", None)
    if clip is not None:
        w = _clip_wrapper(clip)
        plan.append((torch.nn.utils, "clip_grad_norm_", clip, w))
        cg = getattr(torch.nn.utils, "clip_grad", None)
        if cg is not None and getattr(cg, "clip_grad_norm_", None) is clip:
            plan.append((cg, "clip_grad_norm_", clip, w))
    for name in LOSS_FUNCTIONS:
        f = getattr(F, name, None)
        if f is not None:
            plan.append((F, name, f, _loss_wrapper(name, f)))
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is not None:
        plan.append((F, "scaled_dot_product_attention", sdpa, _sdpa_wrapper(sdpa)))
    for owner, attr, orig, w in plan:
        setattr(owner, attr, w)
        _saved.append((owner, attr, orig, w))


def _uninstall():
    while _saved:
        owner, attr, orig, w = _saved.pop()
        if getattr(owner, attr, None) is w:  # else someone wrapped it after us: ours stays, idle
            setattr(owner, attr, orig)


def register(tracer):
    """Route the wrapped functions' calls to this tracer (installing the wrappers for the first)."""
    if not _saved:
        _install()
    _tracers.add(tracer)


def unregister(tracer):
    _tracers.discard(tracer)
    if not _tracers:
        _uninstall()


def module_calling(names, depth=12):
    """The innermost module among ``names`` (id(module) -> name) whose forward is on the caller's
    stack: the module that called the wrapped function; (None, None) when none is."""
    f = sys._getframe(2)
    while f is not None and depth > 0:
        m = f.f_locals.get("self") if "self" in f.f_code.co_varnames else None
        if m is not None and id(m) in names:
            return m, names[id(m)]
        f = f.f_back
        depth -= 1
    return None, None


# ---------------------------------------------------------------------- attention scores

_CHUNK = 1 << 24  # score values computed at once (64 MB of float32)


def _scores(q, k, scale):
    """Yield the attention logits (q k^T * scale, float32) in chunks along the leading dimensions:
    q [..., L, E], k [..., S, E] with the same leading dimensions."""
    q = q.detach().float()
    k = k.detach().float()
    lead = q.shape[:-2]
    L, S = q.shape[-2], k.shape[-2]
    q = q.reshape(-1, L, q.shape[-1])
    k = k.reshape(-1, S, k.shape[-1])
    step = max(1, _CHUNK // max(1, L * S))
    for i in range(0, q.shape[0], step):
        yield torch.matmul(q[i:i + step], k[i:i + step].transpose(-2, -1)).mul_(scale)
    del lead


def attention_scores_sdpa(query, key, args, kwargs):
    """The logits of an F.scaled_dot_product_attention call, in chunks (float32); args are the
    call's positional arguments after value (attn_mask, dropout_p, is_causal, scale, enable_gqa)."""
    scale = kwargs.get("scale", args[3] if len(args) > 3 else None)
    gqa = kwargs.get("enable_gqa", args[4] if len(args) > 4 else False)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        if not gqa and key.shape[-3] != 1:
            return iter(())
        key = key.repeat_interleave(query.shape[-3] // key.shape[-3], dim=-3)
    if key.shape[:-2] != query.shape[:-2]:
        try:
            key = key.expand(*query.shape[:-2], *key.shape[-2:])
        except RuntimeError:
            return iter(())
    return _scores(query, key, float(scale))


def attention_scores_mha(m, args, kwargs):
    """The logits of an nn.MultiheadAttention call, from its inputs and in-projection (the
    projections computed again as the module computes them, under the same autocast)."""
    names = ("query", "key", "value")
    vals = list(args[:3]) + [kwargs.get(n) for n in names[len(args):3]]
    query, key = vals[0], vals[1]
    if query is None or key is None or query.dim() != 3:
        return iter(())
    if not m.batch_first:
        query, key = query.transpose(0, 1), key.transpose(0, 1)
    E, H = m.embed_dim, m.num_heads
    d = E // H
    if m._qkv_same_embed_dim:
        wq, wk = m.in_proj_weight[:E], m.in_proj_weight[E:2 * E]
    else:
        wq, wk = m.q_proj_weight, m.k_proj_weight
    bq = bk = None
    if m.in_proj_bias is not None:
        bq, bk = m.in_proj_bias[:E], m.in_proj_bias[E:2 * E]
    with torch.no_grad():
        q = torch.nn.functional.linear(query, wq, bq)
        k = torch.nn.functional.linear(key, wk, bk)
    B, L, S = q.shape[0], q.shape[1], k.shape[1]
    q = q.reshape(B, L, H, d).transpose(1, 2)
    k = k.reshape(B, S, H, d).transpose(1, 2)
    return _scores(q, k, 1.0 / math.sqrt(d))


# ---------------------------------------------------------------------- loss scalers


def live_scalers():
    """The enabled torch GradScalers alive in this process (torch.amp.GradScaler and subclasses:
    torch.cuda.amp.GradScaler, ShardedGradScaler)."""
    classes = tuple(c for c in (getattr(getattr(torch, "amp", None), "GradScaler", None),
                                getattr(getattr(torch.cuda, "amp", None), "GradScaler", None)) if c is not None)
    if not classes:
        return []
    out = []
    for o in gc.get_objects():
        try:
            if isinstance(o, classes) and o.is_enabled():
                out.append(o)
        except ReferenceError:
            continue
    return out


# ---------------------------------------------------------------------- accuracy


def accuracy_counts(logits, labels, causal=False, ignore_index=-100):
    """(correct, counted) of argmax(logits) against integer labels: a classifier's [N, C] against
    [N], a token classifier's [..., T, C] against [..., T]; ``causal`` compares the prediction at
    t with the label at t + 1 (as causal language models shift them). (0, 0) when the shapes are
    not of those kinds."""
    if not isinstance(logits, torch.Tensor) or not isinstance(labels, torch.Tensor):
        return 0, 0
    if labels.is_floating_point() or logits.dim() != labels.dim() + 1 or logits.shape[:-1] != labels.shape:
        return 0, 0
    with torch.no_grad():
        pred = logits.argmax(-1)
        if causal:
            pred, labels = pred[..., :-1], labels[..., 1:]
        keep = labels != ignore_index
        return int((pred.eq(labels) & keep).sum()), int(keep.sum())
