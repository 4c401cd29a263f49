#!/usr/bin/env python3
"""bench_evidence.py - what two of the tracer's options cost on the CPU (docs/pytorch.md, "Costs").

  attention   a GPT-shaped model whose blocks call F.scaled_dot_product_attention (d 256, 4 heads,
              4 blocks, context 128, batch 16): the CPU time of a training step untraced, traced
              every step, and traced every step with attention_scores=True (the logits computed
              again from q and k, float32, and their statistics). Interleaved rounds; the median
              of the rounds' mean step times (process CPU time, every thread, and wall time).
  compile     the first steps of a torch.compile'd torchvision resnet18 (else a small CNN) traced
              every 2nd step: the time of each of the first steps and the number of frames
              dynamo compiled. One measurement per process (compiled code is cached in it); run it
              with the package to measure on PYTHONPATH (an older checkout's python/ for
              "before").

usage: python bench_evidence.py attention [--steps 10] [--rounds 5] [--threads 1]
       python bench_evidence.py compile [--backend inductor|aot_eager] [--steps 4] [--threads 1] [--no-trace]
(python/ on PYTHONPATH, or this file's package next to it; libampdiag found as ampdiag._lib says)
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

if not any(os.path.isdir(os.path.join(p, "ampdiag")) for p in sys.path if p):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ampdiag.torch  # noqa: E402

F = torch.nn.functional


class Block(torch.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.out = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (z.reshape(B, T, self.h, D // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, D))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, vocab=512, d=256, h=4, n=4, ctx=128):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.zeros(ctx, d))
        self.blocks = torch.nn.Sequential(*[Block(d, h) for _ in range(n)])
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, idx):
        return self.head(self.ln(self.blocks(self.emb(idx) + self.pos[:idx.shape[1]])))


def attention(args):
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(0, 512, (args.batch, 129), generator=g)
    tmp = tempfile.mkdtemp()

    def steps(tracer):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(args.steps):
            loss = F.cross_entropy(model(tok[:, :-1]).reshape(-1, 512), tok[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if tracer is not None:
                tracer.step(loss)
        return (time.process_time() - c0) / args.steps * 1e3, (time.perf_counter() - w0) / args.steps * 1e3

    modes = {"plain": None, "traced/1": {}, "traced/1 + attention_scores": {"attention_scores": True}}
    res = {m: [] for m in modes}
    steps(None)  # warm-up
    for r in range(args.rounds):
        for m, kw in modes.items():
            tr = None
            if kw is not None:
                tr = ampdiag.torch.Tracer(os.path.join(tmp, "a.h5"), model, opt, overwrite=True, trace_every=1,
                                          hist_every=0, **kw)
            res[m].append(steps(tr))
            if tr is not None:
                tr.close()
    base = statistics.median(c for c, _ in res["plain"])
    print("attention: GPT d 256, 4 heads, 4 blocks, context 128, batch %d, %d threads; %d rounds of %d steps"
          % (args.batch, torch.get_num_threads(), args.rounds, args.steps))
    print("%-30s %12s %12s %10s" % ("mode", "CPU ms/step", "wall ms/step", "CPU vs plain"))
    for m in modes:
        c = statistics.median(x for x, _ in res[m])
        w = statistics.median(x for _, x in res[m])
        print("%-30s %12.1f %12.1f %+9.1f%%" % (m, c, w, 100 * (c / base - 1)))
    t1 = statistics.median(c for c, _ in res["traced/1"])
    ta = statistics.median(c for c, _ in res["traced/1 + attention_scores"])
    print("attention_scores adds %.1f ms CPU a traced step (%+.1f%% of the traced step)" % (ta - t1, 100 * (ta / t1 - 1)))


def compile_first_steps(args):
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    try:
        import torchvision
        model, name = torchvision.models.resnet18(num_classes=10), "torchvision resnet18"
    except ImportError:
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                                    torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                                    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))
        name = "a small CNN"
    compiled = torch.compile(model, backend=args.backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 3, 32, 32, generator=g), torch.randint(0, 10, (8,), generator=g)
    times = []
    tr = None
    if not args.no_trace:
        tr = ampdiag.torch.Tracer(os.path.join(tempfile.mkdtemp(), "c.h5"), model, opt, overwrite=True, trace_every=2)
    if True:
        for _ in range(args.steps):
            c0, w0 = time.process_time(), time.perf_counter()
            loss = F.cross_entropy(compiled(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if tr is not None:
                tr.step(loss)
            times.append((time.perf_counter() - w0, time.process_time() - c0))
    if tr is not None:
        tr.close()
    print("compile: %s, batch 8, backend %s, %s" % (name, args.backend, "untraced" if tr is None else
                                                    "traced every 2nd step by " + os.path.dirname(ampdiag.__file__)))
    print("  step times (wall s / CPU s): %s" % ", ".join("%.2f/%.2f" % t for t in times))
    print("  frames dynamo compiled: %d" % counters["frames"]["total"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["attention", "compile"])
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--no-trace", action="store_true", help="compile: the same steps without a tracer")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.what == "attention":
        args.steps = args.steps or 10
        attention(args)
    else:
        args.steps = args.steps or 4
        compile_first_steps(args)


if __name__ == "__main__":
    main()
