"""bench_torch.py - ampdiag's training step against the same model in PyTorch eager, both on one
thread of the CPU: forward, backward and an AdamW step (PyTorch's fused AdamW where this PyTorch
has it on the CPU, else foreach), same shapes and batch.

ampdiag's step is timed as bench_run.sh times it: `ampdiag run` of STEPS steps less a 1-step
run (start-up, data, trace), tracing off (--trace-every 0), everything on the training thread
(--trace-threads 0, OPENBLAS_NUM_THREADS=1), pinned to one core (taskset -c CORE where taskset
exists). PyTorch's step is timed in this process after torch.set_num_threads(1) and a warm-up,
over the same number of steps. Both are measured in CPU time of the thread doing the work
(ampdiag: user + system of the child; PyTorch: time.thread_time), which a shared machine
disturbs less than wall time; wall time is printed too. Rounds interleave the cases and the
two programs; each figure is the median over the rounds, with min-max.

Models: the mlp preset (32 -> 256 -> 256 -> 256 -> 10, batch 64), a width-2048 mlp (a model
file: 32 -> 2048 -> 2048 -> 2048 -> 10, batch 64) and the transformer preset (vocab 64, ctx 32,
d_model 64, 2 layers, 4 heads, d_ff 256, GELU tanh form, PyTorch's scaled_dot_product_attention
with is_causal) at batch 8 and 64; fp32 against PyTorch, and ampdiag's emulated fp16 and bf16
against its own fp32.

Usage: python bench/bench_torch.py [AMPDIAG [ROUNDS]] (default ./ampdiag 5; bench/bench_torch.sh
finds the Python). BENCH_STEPS_SCALE=X scales the steps per run, BENCH_CASES=mlp/64,... picks
cases, BENCH_CORE=N the core. Prints a Markdown table. Exits 77 (skip) without torch.
"""
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("bench_torch.py: PyTorch is not installed: skipped")
    sys.exit(77)

WIDE_SPEC = """# the mlp preset at width 2048
input 32
linear fc1 2048
relu
linear fc2 2048
relu
linear fc3 2048
relu
linear fc4 10
loss softmax_ce
"""

# name, ampdiag --model, batch, steps per timed run, PyTorch builder arguments
CASES = [
    ("mlp", "mlp", 64, 2000, ("mlp", 256)),
    ("mlp-2048", "@wide", 64, 60, ("mlp", 2048)),
    ("transformer", "transformer", 8, 300, ("transformer",)),
    ("transformer", "transformer", 64, 60, ("transformer",)),
]
PRECISIONS = ("fp32", "fp16", "bf16")


class MLP(torch.nn.Module):
    def __init__(self, width, d=32, classes=10):
        super().__init__()
        dims = [d, width, width, width, classes]
        self.fc = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x):
        for i, fc in enumerate(self.fc):
            x = fc(x)
            if i + 1 < len(self.fc):
                x = F.relu(x)
        return x


class Block(torch.nn.Module):
    def __init__(self, c, heads, ff):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(c), torch.nn.LayerNorm(c)
        self.qkv, self.proj = torch.nn.Linear(c, 3 * c), torch.nn.Linear(c, c)
        self.fc, self.fc_proj = torch.nn.Linear(c, ff), torch.nn.Linear(ff, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, vocab=64, ctx=32, c=64, layers=2, heads=4, ff=256):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, c), torch.nn.Embedding(ctx, c)
        self.blocks = torch.nn.ModuleList(Block(c, heads, ff) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(c)
        self.head = torch.nn.Linear(c, vocab, bias=False)

    def forward(self, tok):
        x = self.wte(tok) + self.wpe(torch.arange(tok.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def adamw(params):
    """PyTorch's fastest AdamW on the CPU: fused where this version has it, else foreach."""
    try:
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0, fused=True)
        return opt, "fused"
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0, foreach=True), "foreach"


def torch_case(spec, batch):
    """A step function for the model and its optimizer's kind."""
    g = torch.Generator().manual_seed(1)
    if spec[0] == "mlp":
        model = MLP(spec[1])
        x = torch.randn(batch, 32, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
    else:
        model = GPT()
        x = torch.randint(0, 64, (batch, 32), generator=g)
        y = torch.randint(0, 64, (batch, 32), generator=g)
    opt, kind = adamw(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        opt.step()

    return step, kind


def time_torch(step, steps):
    """(CPU seconds, wall seconds) per step."""
    for _ in range(3):
        step()
    c0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(steps):
        step()
    return (time.thread_time() - c0) / steps, (time.perf_counter() - w0) / steps


def run_ampdiag(cmd, steps, work):
    """(CPU seconds, wall seconds) of one `ampdiag run` of `steps` steps."""
    out = os.path.join(work, "r.h5")
    args = cmd + ["--steps", str(steps), "-o", out]
    r0 = os.times()
    w0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    w = time.perf_counter() - w0
    r1 = os.times()
    return (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system), w


def time_ampdiag(base, model, precision, batch, steps, work):
    """(CPU seconds, wall seconds) per step: `steps` steps less a 1-step run."""
    cmd = base + ["run", "--model", model, "--precision", precision, "--batch", str(batch),
                  "--trace-every", "0", "--trace-threads", "0", "--hist-every", "0",
                  "--eval-every", "0", "--progress", "none", "--overwrite"]
    c1, w1 = run_ampdiag(cmd, 1, work)
    cn, wn = run_ampdiag(cmd, steps + 1, work)
    return max(cn - c1, 0.0) / steps, max(wn - w1, 0.0) / steps


def fmt(xs):
    """median (min-max) of per-step seconds, in ms"""
    ms = [1e3 * x for x in xs]
    return "%.3f (%.3f-%.3f)" % (statistics.median(ms), min(ms), max(ms))


def main():
    ampdiag = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "./ampdiag")
    arg = sys.argv[2] if len(sys.argv) > 2 else "5"
    rounds = int(arg) if arg.isdigit() else 0
    if not os.access(ampdiag, os.X_OK) or rounds < 1:
        print("usage: bench_torch.py [AMPDIAG [ROUNDS]]: %s is not an executable, or ROUNDS < 1"
              % ampdiag, file=sys.stderr)
        sys.exit(2)
    scale = float(os.environ.get("BENCH_STEPS_SCALE", "1"))
    only = os.environ.get("BENCH_CASES")  # e.g. "transformer/64,mlp/64"
    torch.set_num_threads(1)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    base = [ampdiag]
    core = os.environ.get("BENCH_CORE", "0")
    if shutil.which("taskset"):
        base = ["taskset", "-c", core, ampdiag]
        os.sched_setaffinity(0, {int(core)})
    cases = [c for c in CASES if not only or "%s/%d" % (c[0], c[2]) in only.split(",")]
    work = tempfile.mkdtemp(prefix="bench_torch.")
    try:
        wide = os.path.join(work, "mlp2048.txt")
        with open(wide, "w") as f:
            f.write(WIDE_SPEC)
        steps_of = {c: max(int(c[3] * scale), 2) for c in cases}
        fns = {}
        for c in cases:
            fns[c] = torch_case(c[4], c[2])
        res = {(c, k): [] for c in cases for k in ("torch", "torch_wall") + PRECISIONS + ("fp32_wall",)}
        for _ in range(rounds):
            for c in cases:
                n = steps_of[c]
                cpu, wall = time_torch(fns[c][0], n)
                res[(c, "torch")].append(cpu)
                res[(c, "torch_wall")].append(wall)
                model = wide if c[1] == "@wide" else c[1]
                for p in PRECISIONS:
                    cpu, wall = time_ampdiag(base, model, p, c[2], n, work)
                    res[(c, p)].append(cpu)
                    if p == "fp32":
                        res[(c, "fp32_wall")].append(wall)
        report(cases, fns, res, rounds)
        report_gemms(gemm_rates())
    finally:
        shutil.rmtree(work, ignore_errors=True)


# The GEMMs of a step, as (M, N, K, transpose A, transpose B): the transformer's linear layers at
# batch 64 (2048 rows: qkv, fc, proj forward; the qkv layer's dW and dX) and the width-2048 mlp's
# (forward, dW, dX).
GEMMS = [(2048, 192, 64, 0, 1), (2048, 256, 64, 0, 1), (2048, 64, 256, 0, 1), (192, 64, 2048, 1, 0),
         (2048, 64, 192, 0, 0), (64, 2048, 2048, 0, 1), (2048, 2048, 64, 1, 0), (64, 2048, 2048, 0, 0)]


FALLBACK_CORES = ("Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge", "Atom")
CORENAME = ("import ctypes; b = ctypes.CDLL('libopenblas.so.0'); "
            "b.openblas_get_corename.restype = ctypes.c_char_p; print(b.openblas_get_corename().decode())")


def blas_core_as_ampdiag():
    """The OPENBLAS_CORETYPE ampdiag's CPU backend chooses (backend_cpu.c, blas_pick_kernels):
    None where OpenBLAS's own detection stands (or OPENBLAS_CORETYPE is set)."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return None
    r = subprocess.run([sys.executable, "-c", CORENAME], capture_output=True, text=True)
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if r.returncode != 0 or r.stdout.strip() not in FALLBACK_CORES or not {"avx2", "fma"} <= flags:
        return None
    return "SkylakeX" if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags else "Haswell"


def gemm_rates(seconds=0.3):
    """GFLOP/s of each GEMM shape on one thread: the CBLAS library ampdiag links
    (libopenblas.so.0, loaded here with the kernels ampdiag chooses) and torch.mm, median of 3
    interleaved timings each; None where OpenBLAS cannot be loaded."""
    core = blas_core_as_ampdiag()
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
    try:
        blas = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return None
    blas.cblas_sgemm.restype = None
    if hasattr(blas, "openblas_set_num_threads"):
        blas.openblas_set_num_threads(1)
    f, i, p = ctypes.c_float, ctypes.c_int, ctypes.c_void_p
    blas.cblas_sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
    rows = []
    for m, n, k, ta, tb in GEMMS:
        a = torch.randn((k, m) if ta else (m, k))
        b = torch.randn((n, k) if tb else (k, n))
        c = torch.empty(m, n)
        oa, ob = (a.t() if ta else a), (b.t() if tb else b)

        def ob_call():
            blas.cblas_sgemm(101, 112 if ta else 111, 112 if tb else 111, m, n, k, 1.0,
                             a.data_ptr(), a.shape[1], b.data_ptr(), b.shape[1], 0.0,
                             c.data_ptr(), n)

        def th_call():
            torch.mm(oa, ob, out=c)

        rates = {"ob": [], "th": []}
        for _ in range(3):
            for key, fn in (("ob", ob_call), ("th", th_call)):
                fn()
                count, t0 = 0, time.perf_counter()
                while time.perf_counter() - t0 < seconds / 3:
                    fn()
                    count += 1
                rates[key].append(2.0 * m * n * k * count / (time.perf_counter() - t0) * 1e-9)
        rows.append(((m, n, k, ta, tb), statistics.median(rates["ob"]), statistics.median(rates["th"])))
    return rows


def report_gemms(rows):
    if rows is None:
        print("\n(libopenblas.so.0 could not be loaded: no GEMM table)")
        return
    print()
    print("| GEMM M x N x K (op) | OpenBLAS (%s) GFLOP/s | torch.mm GFLOP/s |"
          % (os.environ.get("OPENBLAS_CORETYPE") or "its own choice"))
    print("|---|---|---|")
    for (m, n, k, ta, tb), ob, th in rows:
        print("| %d x %d x %d (%s%s) | %.1f | %.1f |" % (m, n, k, "t" if ta else "n", "t" if tb else "n",
                                                     ob, th))


def ratio(a, b):
    return statistics.median(x / y for x, y in zip(a, b) if y > 0)


def report(cases, fns, res, rounds):
    print("| model | batch | PyTorch ms/step | ampdiag fp32 ms/step | speed vs PyTorch |"
          " fp32 wall ms (PyTorch / ampdiag) | ampdiag fp16 / fp32 | bf16 / fp32 |")
    print("|---|---|---|---|---|---|---|---|")
    for c in cases:
        t, a = res[(c, "torch")], res[(c, "fp32")]
        print("| %s | %d | %s | %s | %.2fx | %.3f / %.3f | %.2fx | %.2fx |" % (
            c[0] if c[0] != "mlp-2048" else "mlp (width 2048)", c[2], fmt(t), fmt(a),
            ratio(t, a), 1e3 * statistics.median(res[(c, "torch_wall")]),
            1e3 * statistics.median(res[(c, "fp32_wall")]),
            ratio(res[(c, "fp16")], a), ratio(res[(c, "bf16")], a)))
    kinds = sorted({fns[c][1] for c in cases})
    print()
    print("(CPU time per step of forward + backward + AdamW (PyTorch: %s), one thread, median"
          " (min-max) of %d interleaved rounds; speed = PyTorch's time / ampdiag's, > 1: ampdiag"
          " faster; PyTorch %s; %s)" % ("/".join(kinds), rounds, torch.__version__, cpu_name()))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    main()
