"""Tracing under torch.distributed: one trace per rank (docs/pytorch.md, "Distributed training").

The tracer (ampdiag.torch.Tracer) asks this module, once, whether the process is one rank of a
distributed run (``attach``). Where it is, each rank writes its own trace:

* the path gets the rank: ``run.h5`` -> ``run.rank0.h5``, ``run.rank1.h5``, ...; a path holding
  ``{rank}`` gets the rank there instead (``runs/{rank}/run.h5``);
* the trace's root attributes say which rank it is and how the run was distributed
  (traces/FORMAT.md, "Distributed runs"): ``rank``, ``world_size``, ``dist_backend``,
  ``grad_reduce_dtype`` (the format the gradients were reduced in) and ``sharding``
  (``replicated``: DistributedDataParallel, every rank holds every weight and the all-reduced
  gradients; ``sharded``: FSDP2's fully_shard, every rank holds a shard of each weight, of its
  gradient and of its update; ``hybrid``: FSDP2 over a 2-D mesh (HSDP); ``none``: no wrapper
  was seen, each rank's records are its own model's);
* the records describe what the rank holds: weights, weight gradients and updates are the
  rank's local tensors (``DTensor.to_local()`` under FSDP2: its shard), and the weight gradients
  are read after the gradient reduction (the all-reduce of DDP, the reduce-scatter of FSDP2),
  as the optimizer sees them. Activations and their gradients are the rank's own (its part of
  the batch), as are the loss and the skip decisions of its GradScaler.

Nothing here runs a collective: a rank that traces while another does not cannot hang, and a
trace is written even where only some ranks make a tracer.
"""
import os

import torch

__all__ = ["Rank", "attach", "rank_path", "local"]

try:  # torch 2.5+: torch.distributed.tensor; 2.1-2.4: torch.distributed._tensor
    from torch.distributed.tensor import DTensor as _DTensor
except ImportError:  # pragma: no cover - depends on the torch build
    try:
        from torch.distributed._tensor import DTensor as _DTensor
    except ImportError:
        _DTensor = None

_FMT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}


def local(t):
    """The part of t this process holds: a DTensor's local shard, any other tensor itself."""
    if _DTensor is not None and isinstance(t, _DTensor):
        return t.to_local()
    return t


def rank_path(path, rank, world_size):
    """The trace path of one rank: ``{rank}`` in path replaced by the rank; else, with more than
    one rank, ``.rankN`` before the extension (``run.h5`` -> ``run.rank0.h5``)."""
    p = os.fspath(path)
    if "{rank}" in p:
        return p.replace("{rank}", str(int(rank)))
    if world_size <= 1:
        return p
    head, tail = os.path.split(p)
    root, ext = os.path.splitext(tail)
    if not root:  # ".h5": no stem to put the rank after
        root, ext = tail, ""
    return os.path.join(head, "%s.rank%d%s" % (root, int(rank), ext))


def _ddp_class():
    try:
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel
    except ImportError:  # pragma: no cover
        return None


def _fsdp_module_class():
    try:
        from torch.distributed.fsdp import FSDPModule
        return FSDPModule
    except ImportError:  # torch before 2.6 (FSDP2 under _composable)
        try:
            from torch.distributed._composable.fsdp import FSDPModule
            return FSDPModule
        except ImportError:
            return None


def _group():
    """(rank, world size, backend name or "") from the default process group, else from the
    launcher's environment (torchrun, Slurm's srun through torchrun) when the group is not made
    yet; None for a single process."""
    d = torch.distributed
    if d.is_available() and d.is_initialized():
        try:
            backend = str(d.get_backend())
        except (RuntimeError, ValueError):
            backend = ""
        return d.get_rank(), d.get_world_size(), backend
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    if world > 1 and 0 <= rank < world:
        return rank, world, ""
    return None


def _ddp_reduce_dtype(ddp, params):
    """The format DDP reduces gradients in: a compression hook's (fp16/bf16_compress_hook and
    their wrappers), DDP's mixed precision's reduce_dtype, else the gradients' (the parameters')
    dtype."""
    for hook, _state in getattr(ddp, "_comm_hooks", None) or []:
        name = getattr(hook, "__qualname__", "") or getattr(hook, "__name__", "")
        if "bf16" in name:
            return "bf16"
        if "fp16" in name:
            return "fp16"
    mp = getattr(ddp, "mixed_precision", None)
    rd = getattr(mp, "reduce_dtype", None) if mp is not None else None
    if rd in _FMT:
        return _FMT[rd]
    return _FMT.get(params[0].dtype, str(params[0].dtype)) if params else ""


def _fsdp_info(model):
    """(sharding, reduce dtype) of an FSDP2 model: from the first fully_shard'ed module with
    parameters, its MixedPrecisionPolicy: reduce_dtype, else param_dtype (FSDP2 reduces in the
    unsharded gradients' dtype), else the parameters' dtype."""
    cls = _fsdp_module_class()
    if cls is None:
        return None
    for m in model.modules():
        if not isinstance(m, cls):
            continue
        try:
            state = m._get_fsdp_state()
        except AttributeError:
            continue
        pg = getattr(state, "_fsdp_param_group", None)
        if pg is None:
            continue
        kind = type(getattr(pg, "mesh_info", None)).__name__
        sharding = "hybrid" if kind.startswith("HSDP") else "sharded"
        mp = getattr(state, "_mp_policy", None) or getattr(pg, "mp_policy", None)
        dt = None
        if mp is not None:
            dt = mp.reduce_dtype or mp.param_dtype
        if dt is None:
            fps = getattr(pg, "fsdp_params", None) or []
            dt = getattr(fps[0], "reduce_dtype", None) or getattr(fps[0], "param_dtype", None) if fps else None
        if dt is None:
            p = next(iter(m.parameters(recurse=False)), None)
            dt = p.dtype if p is not None else None
        return sharding, _FMT.get(dt, str(dt) if dt is not None else "")
    return None


class Rank:
    """This process's place in a distributed run, as the tracer records it."""

    def __init__(self, rank, world_size, backend, module, wrapper):
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.backend = backend
        self.module = module      # the module whose layers are traced (DDP's .module unwrapped)
        self.wrapper = wrapper    # the DistributedDataParallel around it, or None

    def path(self, path):
        return rank_path(path, self.rank, self.world_size)

    def attrs(self):
        """The root attributes (traces/FORMAT.md, "Distributed runs"), read when the header is
        written: after the first forward pass, when FSDP2 has set itself up."""
        backend = self.backend
        if not backend:  # the group was made after the tracer
            g = _group()
            backend = g[2] if g else ""
        params = [p for p in self.module.parameters() if p.requires_grad]
        fsdp = _fsdp_info(self.module)
        ddp = _ddp_class()
        if fsdp is not None:
            sharding, reduce_dtype = fsdp
        elif self.wrapper is not None and ddp is not None and isinstance(self.wrapper, ddp):
            sharding, reduce_dtype = "replicated", _ddp_reduce_dtype(self.wrapper, params)
        else:
            sharding, reduce_dtype = "none", ""
        return {"rank": self.rank, "world_size": self.world_size, "dist_backend": backend or "",
                "grad_reduce_dtype": reduce_dtype, "sharding": sharding}

    def write(self, writer):
        """The attributes into a trace being written (an ampdiag._lib.TraceWriter)."""
        a = self.attrs()
        writer.set_rank(a["rank"], a["world_size"], a["dist_backend"], a["grad_reduce_dtype"], a["sharding"])

    def deferred(self, fn):
        """A callback for the end of a backward pass that runs fn after the callbacks queued so
        far: DDP queues the end of its all-reduce (finalize_backward, which waits for the
        buckets and copies them into .grad) when its last bucket is ready, after the tracer
        queued its own; run once more from the queue, fn reads the reduced gradients."""
        def later():
            torch.autograd.Variable._execution_engine.queue_callback(fn)
        return later


def attach(model, wrapper=None):
    """A Rank for a process of a distributed run (torch.distributed initialized, or launched
    with RANK and WORLD_SIZE > 1), None otherwise. model: the module given to the tracer (a
    DistributedDataParallel is unwrapped: its .module is traced, itself kept as the wrapper);
    wrapper: the DDP module around model when model is the inner one (Lightning, Hugging Face)."""
    ddp = _ddp_class()
    module = model
    if ddp is not None and isinstance(model, ddp):
        module, wrapper = model.module, model
    g = _group()
    if g is None:
        return None
    return Rank(g[0], g[1], g[2], module, wrapper)
