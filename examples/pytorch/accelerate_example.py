#!/usr/bin/env python3
"""accelerate_example.py - tracing a training loop prepared by Hugging Face Accelerate.

    pip install ./python accelerate
    python examples/pytorch/accelerate_example.py --mixed-precision bf16 -o accel-bf16.h5
    ampdiag info accel-bf16.h5

Accelerate wraps the model and the optimizer and, with --mixed-precision fp16, owns the
GradScaler. Give the tracer the unwrapped model (the one whose modules are the layers), the
prepared optimizer (the tracer unwraps AcceleratedOptimizer and hooks the torch optimizer inside,
whose step GradScaler skips on overflow) and accelerator.scaler (None without fp16). Under
`accelerate launch` with several processes, pass the prepared model as wrapper: each rank then
writes its own trace (accel-bf16.rank0.h5, ...; docs/pytorch.md, "Distributed training").
"""
import argparse
import os
import sys

import torch
from accelerate import Accelerator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ampdiag.torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mixed-precision", default="bf16", choices=["no", "fp16", "bf16"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("-o", "--out", default="accelerate.h5")
    args = ap.parse_args()
    acc = Accelerator(mixed_precision=args.mixed_precision)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.GELU(), torch.nn.LayerNorm(128),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(2048, 32)
    y = (x[:, :10].argmax(1) + (x[:, 10] > 1).long()) % 10
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=True)
    model, opt, loader = acc.prepare(model, opt, loader)
    # wrapper: the prepared model (DistributedDataParallel under `accelerate launch`): one trace per rank
    with ampdiag.torch.trace(args.out, acc.unwrap_model(model), opt, acc.scaler, wrapper=model, overwrite=True,
                             trace_every=10,
                             steps=args.steps, attrs={"model": "mlp-layernorm", "data": "random"}) as tracer:
        t = 0
        while t < args.steps:
            for xb, yb in loader:
                with acc.autocast():
                    loss = torch.nn.functional.cross_entropy(model(xb), yb)
                acc.backward(loss)
                opt.step()
                opt.zero_grad()
                tracer.step(loss)
                t += 1
                if t == args.steps:
                    break
    print("traced %d steps (%s) into %s" % (args.steps, args.mixed_precision, args.out))


if __name__ == "__main__":
    main()
