#!/usr/bin/env python3
"""dist_train.py - data-parallel training on the CPU with gloo, traced one trace per rank by
ampdiag.torch (python/ampdiag/dist.py); run by tests/pytorch/test_dist.py under
``python -m torch.distributed.run --nproc_per_node 2``.

usage: dist_train.py WORKDIR SCENARIO...

Scenarios (each writes WORKDIR/NAME.rankR.h5 on every rank R):
  ddp      DistributedDataParallel, AdamW, 6 steps, every step traced
  fsdp     FSDP2 (fully_shard on each Linear and on the model), the same model, data and steps
  poison   DDP with a GradScaler: rank 1's batch of step 3 holds a NaN
  perturb  DDP: rank 1's replica of fc1.weight is moved by 1e-3 before step 2 (DDP does not
           resynchronise parameters after construction)
  stop     DDP, trace flushed every step: rank 1 raises before step 3 (its trace is closed
           interrupted), rank 0 blocks in step 3's all-reduce and is stopped by the launcher
  lightning  Lightning's Trainer (strategy="ddp" on the process group made here) with
           ampdiag.lightning.AmpdiagCallback, 6 steps (WORKDIR/lightning.skip where Lightning is
           not installed)
  accelerate  Accelerate's Accelerator (DDP) with the tracer given the unwrapped model and the
           prepared one as wrapper (WORKDIR/accelerate.skip without Accelerate)
Every rank of every scenario starts from the same weights (seed 0) and takes its own batches
(seeded by step and rank), so the DDP and FSDP2 runs are the same training.
"""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ampdiag.torch  # noqa: E402

STEPS = 6


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(4, 8, generator=g), torch.randint(0, 4, (4,), generator=g)


def net():
    torch.manual_seed(0)
    return Net()


def train(work, name, rank, wrap="ddp", scaler=None, poison=None, perturb=None, stop=None, flush_every=100):
    m = net()
    if wrap == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(m)
        traced = model
    else:
        from torch.distributed.fsdp import fully_shard
        fully_shard(m.fc1)
        fully_shard(m.fc2)
        fully_shard(m)
        model = traced = m
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with ampdiag.torch.trace(os.path.join(work, name + ".h5"), traced, opt, scaler, trace_every=1, hist_every=0,
                             steps=STEPS, overwrite=True, flush_every=flush_every,
                             attrs={"model": "dist-mlp", "data": "random", "seed": 0}) as tracer:
        for t in range(STEPS):
            if stop is not None and t == stop and rank == 1:
                raise RuntimeError("rank 1 stops before step %d (test)" % t)
            if perturb is not None and t == perturb and rank == 1:
                with torch.no_grad():
                    m.fc1.weight.add_(1e-3)
            x, y = batch(t, rank)
            if poison is not None and t == poison and rank == 1:
                x[0, 0] = float("nan")
            loss = torch.nn.functional.cross_entropy(model(x), y)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            opt.zero_grad(set_to_none=True)
            tracer.step(loss)
    dist.barrier()


def lightning_run(work, rank):
    try:
        import lightning as L
    except ImportError:
        open(os.path.join(work, "lightning.skip"), "w").close()
        return
    from ampdiag.lightning import AmpdiagCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = net()

        def forward(self, x):
            return self.net(x)

        def training_step(self, b, i):
            return torch.nn.functional.cross_entropy(self(b[0]), b[1])

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    class Batches(torch.utils.data.Dataset):  # each rank its own batches, as in the other runs
        def __len__(self):
            return STEPS

        def __getitem__(self, t):
            return batch(t, rank)

    loader = torch.utils.data.DataLoader(Batches(), batch_size=None)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=STEPS, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        use_distributed_sampler=False,
                        callbacks=[AmpdiagCallback(os.path.join(work, "lightning.h5"), trace_every=1, hist_every=0,
                                                   overwrite=True)])
    trainer.fit(Module(), loader)


def accelerate_run(work, rank):
    try:
        from accelerate import Accelerator
    except ImportError:
        open(os.path.join(work, "accelerate.skip"), "w").close()
        return
    acc = Accelerator(cpu=True)
    model = net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt = acc.prepare(model, opt)
    with ampdiag.torch.trace(os.path.join(work, "accelerate.h5"), acc.unwrap_model(model), opt, acc.scaler,
                             wrapper=model, trace_every=1, hist_every=0, steps=STEPS, overwrite=True) as tracer:
        for t in range(STEPS):
            x, y = batch(t, rank)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            tracer.step(loss)


def main():
    work, scenarios = sys.argv[1], sys.argv[2:]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for s in scenarios:
        if s == "ddp":
            train(work, "ddp", rank)
        elif s == "fsdp":
            train(work, "fsdp", rank, wrap="fsdp")
        elif s == "poison":
            train(work, "poison", rank, scaler=torch.amp.GradScaler("cpu"), poison=3)
        elif s == "perturb":
            train(work, "perturb", rank, perturb=2)
        elif s == "stop":
            train(work, "stop", rank, stop=3, flush_every=1)
        elif s == "lightning":
            lightning_run(work, rank)
        elif s == "accelerate":
            accelerate_run(work, rank)
        else:
            raise SystemExit("dist_train.py: unknown scenario %r" % s)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
