#!/usr/bin/env python3
"""test_evidence.py - the PyTorch users' failures the tracer must catch (issue 28), each on a
small model in an own loop on the CPU, with the values checked against what this test computes
itself: FP16 autocast without a GradScaler (warned and recorded), a GradScaler in use that the
tracer was not given (found: its scale, the unscaled gradient norm, its skipped steps), an
optimizer that did not step (a skipped step), step() without a loss (an error, not a NaN event),
the configured learning rate and the one of every step under a scheduler, clip_grad_norm_'s max
norm, the loss as a layer, the attention scores' range (an option), parameterless pass-through
leaves left out, and torch.compile (no recompiles from the hooks, no `_orig_mod.` in names, the
same records as eager). Prints TAP.

usage: test_evidence.py AMPDIAG WORKDIR   (python/ on PYTHONPATH, AMPDIAG_LIB set or a built tree)
"""
import logging
import math
import os
import subprocess
import sys
import warnings

import h5py
import torch

from common import Tap

import ampdiag.torch

AMPDIAG, WORK = sys.argv[1], sys.argv[2]
TAP = Tap()
ok = TAP.ok
F = torch.nn.functional


def path(name):
    return os.path.join(WORK, name)


def read(p):
    with h5py.File(p, "r", swmr=True) as f:
        names = [n.decode() for n in f["layers"]["name"]]
        kmap = {v: k for k, v in h5py.check_enum_dtype(f["tensors"].dtype["kind"]).items()}
        cmap = {v: k for k, v in h5py.check_enum_dtype(f["events"].dtype["code"]).items()}
        tens = {}
        for r in f["tensors"][:]:
            tens[(int(r["step"]), names[r["layer"]], kmap[r["kind"]])] = r
        events = [(int(e["step"]), cmap.get(e["code"], "?"), float(e["value"]), e["message"].decode(),
                   names[e["layer"]] if e["layer"] >= 0 else None) for e in f["events"][:]]
        return {"names": names, "ops": [o.decode() for o in f["layers"]["op"]],
                "compute": [c.decode() for c in f["layers"]["compute"]], "tensors": tens,
                "steps": f["steps"][:], "events": events,
                "attrs": {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}}


def codes(t, code):
    return [e for e in t["events"] if e[1] == code]


def info_ok(p):
    return subprocess.run([AMPDIAG, "info", p], capture_output=True).returncode == 0


class Net(torch.nn.Module):
    """Two linear layers with a ReLU: the smallest model with a hidden layer."""

    def __init__(self, d=16, h=32, c=4):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, h)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(h, c)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def data(i, n=32, d=16, c=4):
    g = torch.Generator().manual_seed(100 + i)
    x = torch.randn(n, d, generator=g)
    return x, (x[:, :c].argmax(1))


def caught(fn):
    """fn() with warnings recorded: (its result, [AmpdiagWarning messages])."""
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        r = fn()
    return r, [str(w.message) for w in ws if issubclass(w.category, getattr(ampdiag.torch, "AmpdiagWarning", Warning))
               and "ampdiag" in str(w.message)]


# ---------------------------------------------------------------------- FP16 without a scaler


def test_fp16_without_scaler():
    def run(name, dtype, scaler):
        torch.manual_seed(0)
        m = Net()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        with ampdiag.torch.trace(path(name), m, opt, scaler, overwrite=True, trace_every=1) as tr:
            for i in range(3):
                x, y = data(i)
                with torch.autocast("cpu", dtype=dtype):
                    loss = F.cross_entropy(m(x), y) * 1e-4  # small gradients: FP16 flushes many to zero
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss.backward()
                    opt.step()
                opt.zero_grad()
                tr.step(loss)
    _, warned = caught(lambda: run("fp16-noscaler.h5", torch.float16, None))
    t = read(path("fp16-noscaler.h5"))
    ev = codes(t, "no_loss_scaling")
    wg = [r for (s, n, k), r in t["tensors"].items() if s == 0 and k == "weight_grad"]
    share = sum(int(r["n_zero"]) for r in wg) / max(1, sum(int(r["count"]) for r in wg))
    ok(len(ev) == 1 and ev[0][0] == 0 and abs(ev[0][2] - share) < 1e-12 and "GradScaler" in ev[0][3]
       and any("GradScaler" in w for w in warned) and t["attrs"]["precision"] == "fp16" and info_ok(path("fp16-noscaler.h5")),
       "FP16 autocast without a GradScaler: warned (%s) and recorded once, a no_loss_scaling event at step 0 with the "
       "share of zero weight gradients (%.3f; the trace's step-0 records: %.3f): %s"
       % (warned[:1], ev[0][2] if ev else math.nan, share, ev[:1]))
    _, warned2 = caught(lambda: run("fp16-scaler.h5", torch.float16, torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)))
    _, warned3 = caught(lambda: run("bf16-noscaler.h5", torch.bfloat16, None))
    ok(not codes(read(path("fp16-scaler.h5")), "no_loss_scaling") and not codes(read(path("bf16-noscaler.h5")),
                                                                               "no_loss_scaling")
       and not warned2 and not warned3,
       "... and neither for FP16 with a GradScaler given nor for BF16 without one")


# ---------------------------------------------------------------------- a scaler not given


def test_hidden_scaler():
    """The loop scales with a GradScaler the tracer does not know; step 3's gradients overflow, so
    the scaler skips it and backs off."""
    torch.manual_seed(0)
    m = Net()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12, growth_interval=1000)
    want_norm, want_scale, want_skip = [], [], []
    def loop():
        with ampdiag.torch.trace(path("hidden-scaler.h5"), m, opt, overwrite=True, trace_every=2) as tr:
            for i in range(6):
                x, y = data(i)
                with torch.autocast("cpu", dtype=torch.float16):
                    loss = F.cross_entropy(m(x), y)
                want_scale.append(scaler.get_scale())
                scaler.scale(loss * (1e30 if i == 3 else 1.0)).backward()  # step 3: FP16 gradients overflow
                scaler.unscale_(opt)
                gs = [p.grad for p in m.parameters()]
                want_norm.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.double())
                                                                             for g in gs]))))
                before = m.fc2.bias.detach().clone()
                scaler.step(opt)
                scaler.update()
                want_skip.append(int(torch.equal(before, m.fc2.bias.detach())))
                opt.zero_grad()
                tr.step(loss)
    _, warned = caught(loop)
    t = read(path("hidden-scaler.h5"))
    st = t["steps"]
    ev = codes(t, "hidden_scaler")
    ok(len(ev) >= 1 and ev[0][0] == 0 and ev[0][2] == 4096.0 and any("GradScaler" in w for w in warned),
       "a GradScaler the tracer was not given is found at step 0 (a hidden_scaler event, scale %s; warned: %s)"
       % (ev[0][2] if ev else None, warned[:1]))
    ok(list(st["loss_scale"]) == want_scale,
       "... the steps' loss_scale is the scaler's: %s (want %s)" % (list(st["loss_scale"]), want_scale))
    fin = [i for i in range(6) if math.isfinite(want_norm[i])]
    ok(all(abs(st["grad_norm"][i] - want_norm[i]) <= 1e-5 * want_norm[i] for i in fin) and math.isinf(st["grad_norm"][3]),
       "... grad_norm is the unscaled norm (%s; want %s)" % (["%.4g" % v for v in st["grad_norm"]],
                                                           ["%.4g" % v for v in want_norm]))
    ok(list(st["skipped"]) == want_skip and want_skip == [0, 0, 0, 1, 0, 0] and codes(t, "skipped_step")
       and t["attrs"]["loss_scale"] == "dynamic",
       "... its skipped step is counted (skipped %s, want %s), loss_scale attribute %s"
       % (list(st["skipped"]), want_skip, t["attrs"].get("loss_scale")))


def test_optimizer_not_stepped():
    """No scaler: the loop leaves out optimizer.step() at step 2 (as its own skip logic would)."""
    torch.manual_seed(0)
    m = Net()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with ampdiag.torch.trace(path("nostep.h5"), m, opt, overwrite=True, trace_every=0) as tr:
        for i in range(4):
            x, y = data(i)
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            if i != 2:
                opt.step()
            opt.zero_grad()
            tr.step(loss)
    t = read(path("nostep.h5"))
    ok(list(t["steps"]["skipped"]) == [0, 0, 1, 0] and [e[0] for e in codes(t, "skipped_step")] == [2],
       "an optimizer that did not step counts as a skipped step (skipped %s)" % list(t["steps"]["skipped"]))


# ---------------------------------------------------------------------- step() without a loss


def test_step_without_loss():
    torch.manual_seed(0)
    m = Net()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    tr = ampdiag.torch.Tracer(path("noloss.h5"), m, opt, overwrite=True)
    x, y = data(0)
    F.cross_entropy(m(x), y).backward()
    opt.step()
    err = None
    try:
        tr.step()
    except (ValueError, TypeError) as e:
        err = str(e)
    tr.close()
    t = read(path("noloss.h5"))
    nan = [e for e in t["events"] if e[1] in ("nan_forward", "inf_forward")]
    ok(err is not None and "loss" in err and "tracer.step(loss)" in err and not nan and len(t["steps"]) == 0,
       "step() without a loss, where the model's output holds none, raises (%r) and writes no NaN event (events: %s)"
       % (err, t["events"][:1]))


# ---------------------------------------------------------------------- lr and clip


def test_lr_and_clip():
    torch.manual_seed(0)
    m = Net()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - 0.25 * s)
    used, norms = [], []
    with ampdiag.torch.trace(path("lrclip.h5"), m, opt, overwrite=True, trace_every=0) as tr:
        for i in range(4):
            x, y = data(i)
            loss = F.cross_entropy(m(x), y) * 50  # large gradients: the clip acts
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)))
            used.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
            opt.zero_grad()
            tr.step(loss)
    t = read(path("lrclip.h5"))
    st = t["steps"]
    ok(t["attrs"]["lr"] == 1e-3 and list(st["lr"]) == used,
       "the configured lr is the root attribute (%s, want 0.001) and each step records the lr it used (%s)"
       % (t["attrs"]["lr"], list(st["lr"])))
    coef = [min(1.0, 0.5 / (n + 1e-6)) for n in norms]
    ok(t["attrs"]["clip"] == 0.5 and all(abs(a - b) < 1e-9 for a, b in zip(st["clip_coef"], coef)) and
       len(codes(t, "clipped")) == sum(c < 1 for c in coef) > 0,
       "clip_grad_norm_(params, 0.5) in the loop: attribute clip %s, clip_coef %s (want %s), %d clipped events"
       % (t["attrs"]["clip"], ["%.4g" % c for c in st["clip_coef"]], ["%.4g" % c for c in coef],
          len(codes(t, "clipped"))))


# ---------------------------------------------------------------------- the loss as a layer


def test_loss_layer():
    torch.manual_seed(0)
    m = Net()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    with ampdiag.torch.trace(path("loss-layer.h5"), m, opt, scaler, overwrite=True, trace_every=1) as tr:
        x, y = data(0)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(m(x), y)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            per = F.cross_entropy(m(x), y, reduction="none").float()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        tr.step(loss)
    t = read(path("loss-layer.h5"))
    a = t["tensors"].get((0, "loss", "activation"))
    g = t["tensors"].get((0, "loss", "activation_grad"))
    i = t["names"].index("loss") if "loss" in t["names"] else -1
    ok(a is not None and g is not None and t["ops"][i] == "cross_entropy" and int(a["count"]) == 32 and
       abs(float(a["max"]) - float(per.max())) <= 1e-5 * float(per.max()) and
       abs(float(a["mean"]) - loss.item()) <= 1e-5 and int(g["count"]) == 1 and float(g["max"]) == 256.0,
       "the loss is a layer (loss, op cross_entropy): its 32 per-example losses (max %s, want %.6g; mean %s, the loss "
       "%.6g) and its gradient, the loss scale (%s)" % (a["max"] if a is not None else None, float(per.max()),
                                                         a["mean"] if a is not None else None, loss.item(),
                                                         g["max"] if g is not None else None))


# ---------------------------------------------------------------------- attention scores


class Attn(torch.nn.Module):
    def __init__(self, d=16, h=2):
        super().__init__()
        self.h = h
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (z.reshape(B, T, self.h, D // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))


class Blocks(torch.nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.emb = torch.nn.Linear(4, d)
        self.attn = Attn(d)
        self.mha = torch.nn.MultiheadAttention(d, 4, batch_first=True)
        self.head = torch.nn.Linear(d, 3)

    def forward(self, x):
        h = self.emb(x) * 8.0  # large logits
        h = h + self.attn(h)
        h = h + self.mha(h, h, h)[0]
        return self.head(h).mean(1)


def ref_scores(m, x):
    """The largest logits |q k^T * scale| of the model's two attentions, computed here."""
    with torch.no_grad():
        h = m.emb(x) * 8.0
        B, T, D = h.shape
        q, k, _ = m.attn.qkv(h).split(D, dim=2)
        q, k = (z.reshape(B, T, 2, D // 2).transpose(1, 2) for z in (q, k))
        s1 = (q @ k.transpose(-2, -1)) / math.sqrt(D // 2)
        h = h + m.attn(h)
        E = m.mha.embed_dim
        q = F.linear(h, m.mha.in_proj_weight[:E], m.mha.in_proj_bias[:E]).reshape(B, T, 4, E // 4).transpose(1, 2)
        k = F.linear(h, m.mha.in_proj_weight[E:2 * E], m.mha.in_proj_bias[E:2 * E]).reshape(B, T, 4, E // 4).transpose(1, 2)
        s2 = (q @ k.transpose(-2, -1)) / math.sqrt(E // 4)
    return s1, s2


def test_attention_scores():
    def run(name, on):
        torch.manual_seed(0)
        m = Blocks()
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(7)
        x = torch.randn(4, 6, 4, generator=g)
        s = ref_scores(m, x)
        kw = {"attention_scores": True} if on else {}
        with ampdiag.torch.trace(path(name), m, opt, overwrite=True, trace_every=1, **kw) as tr:
            F.cross_entropy(m(x), torch.tensor([0, 1, 2, 0])).backward()
            opt.step()
            tr.step(torch.tensor(0.0))
        return read(path(name)), s
    try:
        t, (s1, s2) = run("attn-on.h5", True)
    except TypeError as e:
        ok(False, "the attention_scores option: %s" % e)
        return
    r1 = t["tensors"].get((0, "attn.scores", "activation"))
    r2 = t["tensors"].get((0, "mha.scores", "activation"))
    good = r1 is not None and r2 is not None
    if good:
        good = int(r1["count"]) == s1.numel() and int(r2["count"]) == s2.numel() and \
            abs(float(r1["absmax"]) - float(s1.abs().max())) <= 1e-5 * float(s1.abs().max()) and \
            abs(float(r2["absmax"]) - float(s2.abs().max())) <= 1e-5 * float(s2.abs().max()) and \
            abs(float(r1["max"]) - float(s1.max())) <= 1e-5 * abs(float(s1.max()))
    i = t["names"].index("attn.scores") if "attn.scores" in t["names"] else -1
    ok(good and t["ops"][i] == "attention_scores" and t["compute"][i] == "fp32",
       "attention_scores=True: the logits of the SDPA call (attn.scores: %d values, max |logit| %s, want %.6g) and of "
       "nn.MultiheadAttention (mha.scores: max |logit| %s, want %.6g), as layers of op attention_scores"
       % (s1.numel(), r1["absmax"] if r1 is not None else None, float(s1.abs().max()),
          r2["absmax"] if r2 is not None else None, float(s2.abs().max())))
    t0, _ = run("attn-off.h5", False)
    ok(not any(n.endswith(".scores") for n in t0["names"]), "... and without the option, no scores layers")
    from ampdiag import _evidence
    g = torch.Generator().manual_seed(9)
    q, k = torch.randn(2, 4, 5, 8, generator=g), torch.randn(2, 2, 7, 8, generator=g)
    want = q @ k.repeat_interleave(2, dim=1).transpose(-2, -1) * 0.25
    got = torch.cat([c.reshape(-1) for c in _evidence.attention_scores_sdpa(q, k, (None, 0.0, False, 0.25, True), {})])
    got2 = torch.cat([c.reshape(-1) for c in _evidence.attention_scores_sdpa(q[:, :2], k, (), {})])
    want2 = q[:, :2] @ k.transpose(-2, -1) / math.sqrt(8)
    ok(torch.allclose(got, want.reshape(-1), rtol=1e-6, atol=1e-6) and
       torch.allclose(got2, want2.reshape(-1), rtol=1e-6, atol=1e-6),
       "SDPA's logits as its arguments say: scale and enable_gqa given by position (2 key heads for 4 query heads), "
       "and the default scale 1/sqrt(E)")


# ---------------------------------------------------------------------- pass-through leaves


def test_pass_through():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Identity(),
                            torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.PReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(8, 4), torch.nn.LogSoftmax(dim=1))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def run(name, **kw):
        with ampdiag.torch.trace(path(name), m, opt, overwrite=True, **kw) as tr:
            x = torch.randn(4, 8)
            out = m(x)
            F.nll_loss(out, torch.tensor([0, 1, 2, 3])).backward()
            opt.step()
            opt.zero_grad()
            tr.step(out.sum())
        return read(path(name))
    t = run("pass.h5")
    model_layers = [n for n in t["names"] if n != "loss"]
    left = t["attrs"].get("layers_left_out", "")
    notes = [e for e in codes(t, "note") if "pass-through" in e[3]]
    ok(model_layers == ["0", "4", "6", "8", "9"] and all(w in left for w in ("1", "2", "3", "5", "7")) and
       len(notes) == 1 and "5 " in notes[0][3],
       "parameterless pass-through leaves (ReLU, Dropout, Identity, GELU, Flatten) are left out by default, PReLU "
       "and LogSoftmax kept: layers %s; named in one line (attribute layers_left_out %r; note %r)"
       % (model_layers, left, notes[0][3] if notes else None))
    t2 = run("pass-all.h5", layers="leaves")
    ok([n for n in t2["names"] if n != "loss"] == [str(i) for i in range(10)], "layers='leaves' keeps them all")


# ---------------------------------------------------------------------- torch.compile


class Deep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(10)])
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.body(x))


def test_compile():
    import torch._dynamo
    from torch._dynamo.utils import counters
    compiles = [0]

    def backend(gm, example_inputs):  # no code generation: dynamo's own work only
        compiles[0] += 1
        return gm.forward

    msgs = []

    class H(logging.Handler):
        def emit(self, record):
            msgs.append(record.getMessage())

    h = H()
    logging.getLogger("torch._dynamo").addHandler(h)

    def run(name, compiled):
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        m = Deep()
        if compiled:
            m.body = torch.compile(m.body, backend=backend)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        frames = []
        with ampdiag.torch.trace(path(name), m, opt, overwrite=True, trace_every=2) as tr:
            for i in range(8):
                g = torch.Generator().manual_seed(i)
                x = torch.randn(4, 8, generator=g)
                loss = F.cross_entropy(m(x), torch.tensor([0, 1, 0, 1]))
                loss.backward()
                opt.step()
                opt.zero_grad()
                tr.step(loss)
                frames.append(counters["frames"]["total"])
        return read(path(name)), frames
    try:
        te, _ = run("eager.h5", False)
        tc, frames = run("compiled.h5", True)
    finally:
        logging.getLogger("torch._dynamo").removeHandler(h)
    limit = [x for x in msgs if "recompile_limit" in x or "cache_size_limit" in x]
    ok(not limit and frames[-1] == frames[1],
       "torch.compile on a 10-layer body, traced every 2nd step: no recompiles after the first two steps (frames "
       "compiled after each step %s) and no recompile-limit warning (%s)" % (frames, limit[:1]))
    ok(tc["names"] == te["names"] and not any("_orig_mod" in n for n in tc["names"]),
       "... layer names as in the eager run, without _orig_mod. (%s)" % tc["names"][:3])
    same = sorted(te["tensors"]) == sorted(tc["tensors"]) and all(
        all(te["tensors"][k][f] == tc["tensors"][k][f] for f in ("count", "n_zero", "max", "min", "rms"))
        for k in te["tensors"])
    ok(same, "... and the same records as the eager run (%d records)" % len(te["tensors"]))


def main():
    torch.set_num_threads(1)
    for t in (test_fp16_without_scaler, test_hidden_scaler, test_optimizer_not_stepped, test_step_without_loss,
              test_lr_and_clip, test_loss_layer, test_attention_scores, test_pass_through, test_compile):
        try:
            t()
        except Exception as e:  # a failure of one scenario is a failed test, not a crash of the rest
            import traceback
            traceback.print_exc(file=sys.stdout)
            ok(False, "%s raised %s: %s" % (t.__name__, type(e).__name__, e))
    return TAP.plan()


if __name__ == "__main__":
    sys.exit(main())
