#!/usr/bin/env python3
"""bench_overhead.py - what tracing costs a PyTorch training step on the CPU.

For each model, the same training loop is timed (interleaved rounds, median of the rounds'
mean step times; the CPU time of the process, every thread of it, and the wall-clock time):
  plain          no hooks
  traced/N       ampdiag.torch.Tracer with trace_every=N (step records every step, tensor records
                 every N-th step; histograms every 50th)
  budget/P       ampdiag.torch.Tracer with trace_budget=P (tensor records as a budget of P% of
                 the step's time allows, the tracer measuring what they cost)
  hf-debug       a plain forward hook on every module doing what Hugging Face's
                 DebugUnderflowOverflow does at every step (NaN/inf check and abs min/max of
                 every input, output and weight, formatted into a frame)
  transformers   transformers.debug_utils.DebugUnderflowOverflow itself, when installed

usage: python bench_overhead.py [--models cnn,mlp,resnet18] [--steps 40] [--rounds 5] [--threads 1]
                                [--every 1,10,50] [--budget 5] [--no-hooks] [--out DIR]
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


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c)
        self.relu1 = torch.nn.ReLU(inplace=True)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(c)
        self.relu2 = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu2(x + self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))


def cnn():
    """A small ResNet for 32x32 RGB images (ResNet-8 shaped, 32-64 channels): 25 leaf modules."""
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1, bias=False), torch.nn.BatchNorm2d(32),
                            torch.nn.ReLU(inplace=True), Block(32), torch.nn.Conv2d(32, 64, 3, stride=2, padding=1),
                            Block(64), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))
    return m, (32, 3, 32, 32), 10


def resnet18():
    """torchvision's resnet18 (random init, 11.7M parameters) on 64x64 RGB images, batch 32."""
    import torchvision
    return torchvision.models.resnet18(num_classes=10), (32, 3, 64, 64), 10


def mlp():
    """ampdiag's default mlp: 32 -> 256 -> 256 -> 256 -> 10 with ReLU, batch 64: a step of about a
    millisecond, where per-call costs show most."""
    m = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    return m, (64, 32), 10


MODELS = {"cnn": cnn, "mlp": mlp, "resnet18": resnet18}


def hf_debug_hooks(model):
    """What DebugUnderflowOverflow does per forward call of each module: for the weights, the
    inputs and the outputs, abs min and max formatted into the frame, and a NaN/inf check."""
    frames = []

    def check(var, ctx):
        if var is None or not torch.is_tensor(var) or not var.is_floating_point():
            return False
        v = var.detach()
        frames.append("%8.2e %8.2e %s" % (v.abs().min(), v.abs().max(), ctx))
        return bool(torch.isnan(var).any()) or bool(torch.isinf(var).any())

    def hook(module, inputs, output):
        frames.clear()
        for name, p in module.named_parameters(recurse=False):
            check(p, name)
        for i, x in enumerate(inputs):
            check(x, "input[%d]" % i)
        outs = output if isinstance(output, (tuple, list)) else (output,)
        for i, x in enumerate(outs):
            check(x, "output[%d]" % i)

    return [m.register_forward_hook(hook) for m in model.modules()]


def run(kind, make, steps, every, tmp):
    torch.manual_seed(0)
    model, shape, k = make()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(*shape, generator=g) for _ in range(4)]
    ys = [torch.randint(0, k, (shape[0],), generator=g) for _ in range(4)]
    tracer, handles, dbg = None, [], None
    if kind == "traced":
        tracer = ampdiag.torch.Tracer(os.path.join(tmp, "bench.h5"), model, opt, overwrite=True, trace_every=every,
                                      hist_every=50)
    elif kind == "budget":
        tracer = ampdiag.torch.Tracer(os.path.join(tmp, "bench.h5"), model, opt, overwrite=True, trace_budget=every,
                                      hist_every=50)
    elif kind == "hf-debug":
        handles = hf_debug_hooks(model)
    elif kind == "transformers":
        from transformers.debug_utils import DebugUnderflowOverflow
        dbg = DebugUnderflowOverflow(model)
    times, cpu = [], []
    for t in range(steps + 5):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = torch.nn.functional.cross_entropy(model(xs[t % 4]), ys[t % 4])
        loss.backward()
        opt.step()
        opt.zero_grad()
        if tracer is not None:
            tracer.step(loss)
        else:
            loss.item()
        if t >= 5:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    if tracer is not None:
        tracer.close()
    for h in handles:
        h.remove()
    if dbg is not None:
        for h in getattr(dbg, "hooks", []) or []:
            h.remove()
    return sum(cpu) / len(cpu), sum(times) / len(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="cnn,mlp")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--every", default="1,10,50")
    ap.add_argument("--budget", default="", help="trace_budget values (percent), e.g. 5")
    ap.add_argument("--no-hooks", action="store_true", help="leave out hf-debug and transformers")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    try:
        import transformers.debug_utils  # noqa: F401
        have_tf = True
    except ImportError:
        have_tf = False
    kinds = [("plain", 0)] + [("traced", int(e)) for e in a.every.split(",") if e] + \
        [("budget", float(b)) for b in a.budget.split(",") if b] + ([] if a.no_hooks else [("hf-debug", 0)])
    if have_tf and not a.no_hooks:
        kinds.append(("transformers", 0))
    print("torch %s, %d thread(s), %d steps x %d rounds, median of the rounds" % (torch.__version__, a.threads,
                                                                                 a.steps, a.rounds))
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            res = {k: [] for k in kinds}
            for _ in range(a.rounds):
                for k in kinds:
                    res[k].append(run(k[0], MODELS[name], a.steps, k[1], tmp))
            base = [statistics.median(r[j] for r in res[("plain", 0)]) for j in (0, 1)]
            print("\n%s: plain step %.3f ms CPU, %.3f ms wall" % (name, base[0] * 1e3, base[1] * 1e3))
            print("  %-24s %10s %8s %10s %8s" % ("", "CPU ms", "", "wall ms", ""))
            for k in kinds[1:]:
                m = [statistics.median(r[j] for r in res[k]) for j in (0, 1)]
                label = ("traced, trace_every=%d" % k[1] if k[0] == "traced" else
                         "traced, trace_budget=%g" % k[1] if k[0] == "budget" else k[0])
                print("  %-24s %10.3f %+7.1f%% %10.3f %+7.1f%%" % (label, m[0] * 1e3, 100 * (m[0] / base[0] - 1),
                                                                 m[1] * 1e3, 100 * (m[1] / base[1] - 1)))


if __name__ == "__main__":
    main()
