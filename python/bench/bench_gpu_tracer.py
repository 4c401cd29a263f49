#!/usr/bin/env python3
"""bench_gpu_tracer.py - what the PyTorch tracer costs a training step on a GPU.

Models (random init, synthetic data, nothing downloaded): torchvision's resnet18 (batch 32,
3x224x224, 1000 classes; a small stand-in of the same shape where torchvision is missing) and a
small BERT (transformers' BertForSequenceClassification, hidden 256, 4 layers, 4 heads, 128
tokens, batch 32). Precisions: fp32, bf16 autocast, fp16 autocast with a GradScaler. For each,
the same loop is timed in interleaved rounds (median of the rounds' mean step time; each step
ends with torch.cuda.synchronize(), so a step's time is the wall time the user waits):
  plain          no hooks
  traced/N       ampdiag.torch.Tracer(trace_every=N)
  hook           a plain forward hook on every leaf doing abs-max and isfinite of its output
                 (the least a hook-based check does), read back each step

usage: python bench_gpu_tracer.py [--models resnet18,bert] [--precisions fp32,bf16,fp16]
                                  [--steps 20] [--rounds 3] [--every 1,10] [--device cuda]
(python/ on PYTHONPATH, libampdiag found as ampdiag._lib says)
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ampdiag.torch  # noqa: E402


def resnet18():
    try:
        import torchvision
        m = torchvision.models.resnet18(weights=None)
        name = "torchvision resnet18"
    except ImportError:
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 7, 2, 3), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 1000))
        name = "stand-in cnn (torchvision missing)"
    shape = (32, 3, 224, 224)

    def batch(g, dev):
        return (torch.randn(*shape, generator=g).to(dev),), torch.randint(0, 1000, (shape[0],), generator=g).to(dev)

    return name, m, batch, lambda out: out


def bert():
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=8192, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=1024, max_position_embeddings=256, num_labels=2)
    m = BertForSequenceClassification(cfg)

    def batch(g, dev):
        ids = torch.randint(0, cfg.vocab_size, (32, 128), generator=g).to(dev)
        return (ids,), torch.randint(0, 2, (32,), generator=g).to(dev)

    return "transformers BERT (256 hidden, 4 layers)", m, batch, lambda out: out.logits


MODELS = {"resnet18": resnet18, "bert": bert}


def plain_hooks(model):
    found = []

    def hook(module, inputs, output):
        o = output if torch.is_tensor(output) else getattr(output, "logits", None)
        if o is not None and o.is_floating_point():
            found.append(torch.stack([o.detach().abs().amax().float(), torch.isfinite(o).all().float()]))

    hs = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
    return hs, found


def run(kind, every, make, precision, steps, dev, tmp):
    torch.manual_seed(0)
    _, model, batch, logits = make()
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(dev.type) if precision == "fp16" else None
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    g = torch.Generator().manual_seed(1)
    data = [batch(g, dev) for _ in range(2)]
    tracer, hooks, found = None, [], []
    if kind == "traced":
        tracer = ampdiag.torch.Tracer(os.path.join(tmp, "gpu.h5"), model, opt, scaler, overwrite=True,
                                      trace_every=every, hist_every=50)
    elif kind == "hook":
        hooks, found = plain_hooks(model)
    times = []
    for t in range(steps + 3):
        sync()
        t0 = time.perf_counter()
        x, y = data[t % 2]
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(logits(model(*x)), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        if tracer is not None:
            tracer.step(loss)
        else:
            if found:
                torch.stack(found).cpu()
                found.clear()
            loss.item()
        sync()
        if t >= 3:
            times.append(time.perf_counter() - t0)
    if tracer is not None:
        tracer.close()
    for h in hooks:
        h.remove()
    return sum(times) / len(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18,bert")
    ap.add_argument("--precisions", default="fp32,bf16,fp16")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--every", default="1,10")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu_tracer: no CUDA device: nothing measured")
        return 0
    kinds = [("plain", 0)] + [("traced", int(e)) for e in a.every.split(",")] + [("hook", 0)]
    print("torch %s on %s; %d steps x %d rounds, median of the rounds' mean step (wall, synchronised)"
          % (torch.__version__, torch.cuda.get_device_name(dev) if dev.type == "cuda" else "the CPU", a.steps,
             a.rounds))
    print("| model | precision | plain ms | " + " | ".join(
        ("traced every %d" % k[1]) if k[0] == "traced" else k[0] for k in kinds[1:]) + " |")
    print("|---|---|---|" + "---|" * (len(kinds) - 1))
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            try:
                label = MODELS[name]()[0]
            except ImportError as e:
                print("| %s | - | not measured: %s |" % (name, e))
                continue
            for prec in a.precisions.split(","):
                res = {k: [] for k in kinds}
                for _ in range(a.rounds):
                    for k in kinds:
                        res[k].append(run(k[0], k[1], MODELS[name], prec, a.steps, dev, tmp))
                base = statistics.median(res[("plain", 0)])
                cells = []
                for k in kinds[1:]:
                    m = statistics.median(res[k])
                    cells.append("%.2f (%+.1f%%)" % (m * 1e3, 100 * (m / base - 1)))
                print("| %s | %s | %.2f | %s |" % (label, prec, base * 1e3, " | ".join(cells)))
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
