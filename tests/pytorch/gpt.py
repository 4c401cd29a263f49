"""gpt.py - ampdiag's transformer preset (`ampdiag run --model transformer`, src/model/model.c
build_transformer, the CPU backend's kernels) in PyTorch, module for module, for
xcheck_transformer.py.

Every layer of ampdiag's model is one leaf module here, named as ampdiag names it, so the two
traces' /layers map 1:1 by name:

    embed             Embed: wte [V, C] and wpe [T, C]; out = wte[token] + wpe[position]
    hN.ln1, hN.ln2    LayerNorm(C), eps 1e-5, biased variance
    hN.attn.qkv       Linear(C, 3C)
    hN.attn.sdpa      Attention: causal multi-head attention of q, k, v = qkv split in three
                      (heads of C / n_head columns), scores scaled by 1/sqrt(head size)
    hN.attn.proj      Linear(C, C)
    hN.res1, hN.res2  Residual: a + b
    hN.mlp.fc         Linear(C, 4C)
    hN.mlp.gelu       GELU with the tanh approximation (the backend's formula)
    hN.mlp.proj       Linear(4C, C)
    ln_f              LayerNorm(C)
    lm_head           Linear(C, V, bias=False) (its own weights: not tied to wte)
    loss              Loss: softmax cross-entropy of each of the B*T positions (the model
                      returns these; the training loss is their mean)

The data is an HDF5 file with /tokens [N, T+1] (and /tokens_val), which `ampdiag run --data`
reads as inputs (the first T tokens of a row) and next-token targets (the last T); with
`--shuffle off` the batches are B consecutive rows, wrapping at the end (mlp.batches).
"""
import math

import h5py
import numpy as np
import torch

F = torch.nn.functional

# the preset's shape (src/model/model_spec.c transformer_defaults)
VOCAB, CTX, D_MODEL, N_LAYER, N_HEAD = 64, 32, 64, 2, 4


class Embed(torch.nn.Module):
    def __init__(self, vocab, ctx, c):
        super().__init__()
        self.wte = torch.nn.Parameter(torch.empty(vocab, c))
        self.wpe = torch.nn.Parameter(torch.empty(ctx, c))

    def forward(self, tokens):
        return F.embedding(tokens, self.wte) + self.wpe[:tokens.shape[1]]


class Attention(torch.nn.Module):
    def __init__(self, n_head):
        super().__init__()
        self.n_head = n_head

    def forward(self, qkv):
        B, T, C3 = qkv.shape
        C = C3 // 3
        hs = C // self.n_head
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in qkv.split(C, dim=2))
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.ones(T, T, dtype=torch.bool, device=qkv.device).triu(1)
        p = torch.softmax(s.masked_fill(mask, -math.inf), dim=-1)
        return (p @ v).transpose(1, 2).reshape(B, T, C)


class Residual(torch.nn.Module):
    def forward(self, a, b):
        return a + b


class Loss(torch.nn.Module):
    def forward(self, logits, targets):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")


def _sub(**mods):
    m = torch.nn.Module()
    for name, mod in mods.items():
        m.add_module(name, mod)
    return m


class Block(torch.nn.Module):
    def __init__(self, c, n_head):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(c)
        self.attn = _sub(qkv=torch.nn.Linear(c, 3 * c), sdpa=Attention(n_head), proj=torch.nn.Linear(c, c))
        self.res1 = Residual()
        self.ln2 = torch.nn.LayerNorm(c)
        self.mlp = _sub(fc=torch.nn.Linear(c, 4 * c), gelu=torch.nn.GELU(approximate="tanh"),
                        proj=torch.nn.Linear(4 * c, c))
        self.res2 = Residual()

    def forward(self, x):
        a = self.attn.proj(self.attn.sdpa(self.attn.qkv(self.ln1(x))))
        x = self.res1(x, a)
        m = self.mlp.proj(self.mlp.gelu(self.mlp.fc(self.ln2(x))))
        return self.res2(x, m)


class GPT(torch.nn.Module):
    """forward(tokens [B, T], targets [B, T]) -> the B*T losses."""

    def __init__(self, vocab=VOCAB, ctx=CTX, c=D_MODEL, n_layer=N_LAYER, n_head=N_HEAD):
        super().__init__()
        self.embed = Embed(vocab, ctx, c)
        for i in range(n_layer):
            self.add_module("h%d" % i, Block(c, n_head))
        self.n_layer = n_layer
        self.ln_f = torch.nn.LayerNorm(c)
        self.lm_head = torch.nn.Linear(c, vocab, bias=False)
        self.loss = Loss()
        self._init(n_layer)

    def _init(self, n_layer):
        """GPT-2's initialisation, as ampdiag's: N(0, 0.02), the residual projections / sqrt(2
        n_layer), biases 0, layer norms 1 and 0."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif ".ln" in name or name.startswith("ln_f"):
                    p.fill_(1.0)
                else:
                    sd = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                    p.normal_(0.0, sd)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for i in range(self.n_layer):
            x = getattr(self, "h%d" % i)(x)
        return self.loss(self.lm_head(self.ln_f(x)), targets)


def make_tokens(path, n=256, n_val=32, seed=11):
    """Sequences of CTX + 1 tokens over VOCAB symbols from a random sparse Markov chain (every
    symbol reachable, so that the data's vocabulary is VOCAB): n training rows, n_val held out."""
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, VOCAB, (VOCAB, 4))
    nxt[:, 0] = (np.arange(VOCAB) + 1) % VOCAB

    def rows(k):
        out = np.empty((k, CTX + 1), dtype=np.int32)
        out[:, 0] = rng.integers(0, VOCAB, k)
        for t in range(1, CTX + 1):
            out[:, t] = nxt[out[:, t - 1], rng.integers(0, 4, k)]
        return out

    tok, val = rows(n), rows(n_val)
    tok[0, :] = np.arange(CTX + 1) % VOCAB + (VOCAB - CTX - 1)  # the largest symbol occurs
    with h5py.File(path, "w") as f:
        f["tokens"], f["tokens_val"] = tok, val
    return tok
