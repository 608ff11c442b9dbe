#!/usr/bin/python3
"""The PyTorch peer of bench/gpt: a GPT as dlt-train builds it from
examples/gpt.yaml, trained or generating, one JSON line of measurements.

The model is GPT-2's architecture as dlt's layers make it: a token
embedding and learned positions (added), L pre-LN blocks (x + attn(ln(x)),
x + mlp(ln(x))), multi-head causal self-attention with one QKV projection
and an output projection (biases on both), an MLP of width 4C with GELU's
tanh form, a final layernorm (eps 1e-5 everywhere) and a head tied to the
token embedding, without bias.  Attention is
F.scaled_dot_product_attention(is_causal=True) where the version has it
(PyTorch 2), else the masked softmax written out.  GPT-2's init: weights
N(0, 0.02), the projections that end a residual branch (attention's
output, the MLP's second) N(0, 0.02 / sqrt(2 L)), biases 0, layernorms 1
and 0.

Training (as dlt-train with train.steps, train.context, train.batch):
the training tokens are one in-memory tensor; each step takes batch
random windows of T + 1 tokens (starts uniform in [0, n - T - 1], from a
torch.Generator seeded with --seed), the mean per-token cross-entropy,
AdamW (betas 0.9, 0.999, eps 1e-8) with weight decay on the tensors of 2
or more dimensions only (the embeddings and every matrix; dlt's decay:
matrices), clip_grad_norm_ to --clip, and a LambdaLR with dlt's schedule:
lr (s + 1) / warmup for update s < warmup, then a cosine from lr to 0 over
the remaining steps.  Validation (--val): the fixed windows of dlt's
evaluation, window i starting at token i T (mod n - T) of the validation
stream, eval_batches x batch of them (at most (n - 1) / T), the mean loss
over their tokens, every --eval-every steps and at the end.

On a GPU (--device cuda) the model, the tokens and the optimizer live
there (AdamW fused), --amp bf16|fp16 runs the forward and the loss under
torch.autocast (fp16 with a GradScaler), --compile wraps the model in
torch.compile, and each timing window ends with torch.cuda.synchronize.

Generation (--generate N): N tokens after a prompt with a KV cache (keys
and values of the positions before kept per layer, so each new token
costs one position), sampled from the softmax at temperature 1, batch
--gen-batch; past the context the window slides and the cache is
computed again for each token, as dlt-infer does.  Random weights: the
speed does not depend on them.

Measured:
  train_tps     tokens/s of the training steps that end after --warmup
                steps, in windows of --log-every steps as dlt-train's
                train records (taking the batch, forward, loss, backward,
                clipping, AdamW)
  startup       seconds from the process start (BENCH_T0 of the driver,
                else /proc/self/stat) to the first training step
  val_loss      the validation loss after the last step
  gen_tps       generated tokens/s (all rows of the batch) from the first
                new token to the last, the prompt's pass excluded
Standard library and torch only."""

import argparse
import json
import math
import os
import resource
import sys
import time

import torch
from torch import nn
from torch.nn import functional as F


def process_start():
    """Monotonic seconds at which this process started."""
    t0 = os.environ.get("BENCH_T0")
    if t0:
        return float(t0)
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    boot_now = time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic() - (boot_now - ticks / os.sysconf("SC_CLK_TCK"))


SDPA = hasattr(F, "scaled_dot_product_attention")


class Attention(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)

    def heads(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        return [t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v)]

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.heads(x)
        if SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def step(self, x, cache, pos):
        """x [B, n, C] at positions pos..pos+n-1; cache (k, v) [B, H, Tmax, D]
        holds the positions before"""
        B, n, C = x.shape
        q, k, v = self.heads(x)
        kc, vc = cache
        kc[:, :, pos:pos + n] = k
        vc[:, :, pos:pos + n] = v
        k, v = kc[:, :, :pos + n], vc[:, :, :pos + n]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
        if n > 1:	# the prompt: causal among its own positions
            mask = torch.ones(n, pos + n, dtype=torch.bool).triu(pos + 1)
            att = att.masked_fill(mask, float("-inf"))
        y = att.softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, n, C))


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = Attention(C, H)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc = nn.Linear(C, 4 * C)
        self.fc_proj = nn.Linear(4 * C, C)
        self.gelu = nn.GELU(approximate="tanh")

    def mlp(self, x):
        return self.fc_proj(self.gelu(self.fc(x)))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))

    def step(self, x, cache, pos):
        x = x + self.attn.step(self.ln1(x), cache, pos)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, V, T, L, H, C):
        super().__init__()
        self.T = T
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        # GPT-2's init
        proj_std = 0.02 / math.sqrt(2 * L)
        for name, p in self.named_parameters():
            if p.dim() == 1 and name.endswith("weight"):	# layernorm gains
                nn.init.ones_(p)
            elif p.dim() == 1:
                nn.init.zeros_(p)
            elif name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, proj_std)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def logits(self, x):
        # the head is the token embedding's matrix, no bias
        return F.linear(self.ln_f(x), self.wte.weight)

    def forward(self, idx):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.logits(x)

    def step(self, idx, caches, pos):
        n = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(pos, pos + n, device=idx.device))
        for b, c in zip(self.blocks, caches):
            x = b.step(x, c, pos)
        return self.logits(x[:, -1])


def lr_lambda(warmup, total):
    """dlt_lr_at of dlt's schedule: cosine with warmup, min_lr 0"""
    def f(s):
        if s < warmup:
            return (s + 1) / warmup
        span = total - warmup
        t = min((s - warmup) / span, 1.0) if span > 0 else 1.0
        return 0.5 * (1.0 + math.cos(math.pi * t))
    return f


def read_tokens(path, device):
    """a file of byte tokens (u8 ids, dlt-prep text's byte tokenizer)"""
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).to(device)


def sync(device):
    """waits for the GPU's queued work, so that a window's time is its work's"""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.no_grad()
def evaluate(model, val, T, n_eval, batch):
    model.eval()
    n = len(val)
    n_eval = min(n_eval, (n - 1) // T)
    span = n - T
    starts = torch.tensor([(i * T) % span for i in range(n_eval)], device=val.device)
    offs = torch.arange(T + 1, device=val.device)
    total, count = 0.0, 0
    for i in range(0, n_eval, batch):
        w = val[starts[i:i + batch, None] + offs].long()
        logits = model(w[:, :-1])
        total += float(F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                       w[:, 1:].reshape(-1), reduction="sum"))
        count += w[:, 1:].numel()
    model.train()
    return total / count


def train(a, model, t_start):
    dev = torch.device(a.device)
    data = read_tokens(a.train, dev)
    val = read_tokens(a.val, dev) if a.val else None
    T, B = a.context, a.batch
    if len(data) < T + 2:
        sys.exit(f"torch_gpt: {a.train}: {len(data)} tokens, fewer than a window")
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            **({"fused": True} if dev.type == "cuda" else {}))
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.amp)
    scaler = torch.amp.GradScaler(dev.type) if a.amp == "fp16" else None
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(a.lr_warmup, a.steps))
    gen = torch.Generator().manual_seed(a.seed)
    offs = torch.arange(T + 1, device=dev)
    span = len(data) - T
    windows, evals = [], []
    startup = None
    w_t0, w_n = time.perf_counter(), 0
    loss = None
    for step in range(1, a.steps + 1):
        if startup is None:
            startup = time.monotonic() - t_start
            sync(dev)
            w_t0 = time.perf_counter()
        starts = torch.randint(0, span, (B,), generator=gen).to(dev)
        w = data[starts[:, None] + offs].long()
        with torch.autocast(dev.type, dtype=amp, enabled=amp is not None):
            logits = model(w[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(),
                                   w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        else:
            loss.backward()
        if a.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        sched.step()
        w_n += B * T
        if step % a.log_every == 0 or step == a.steps:
            sync(dev)
            now = time.perf_counter()
            windows.append([w_n, now - w_t0, step])
            w_n = 0
            if a.verbose:
                print(f"torch_gpt: step {step}: loss {float(loss):.4f}", file=sys.stderr)
        if val is not None and a.eval_every and step % a.eval_every == 0 and step < a.steps:
            evals.append([step, evaluate(model, val, T, a.eval_batches * B, B)])
            if a.verbose:
                print(f"torch_gpt: step {step}: val loss {evals[-1][1]:.4f}", file=sys.stderr)
        if step % a.log_every == 0 or step == a.steps:
            w_t0 = time.perf_counter()
    out = {"startup": startup, "windows": windows, "train_loss": float(loss.detach())}
    ws = [w for w in windows if w[2] > a.warmup]
    t = sum(w[1] for w in ws)
    out["train_tps"] = sum(w[0] for w in ws) / t if t > 0 else None
    if val is not None:
        evals.append([a.steps, evaluate(model, val, T, a.eval_batches * B, B)])
        out["val_loss"] = evals[-1][1]
        out["evals"] = evals
    return out


@torch.no_grad()
def generate(a, model):
    model.eval()
    L, C, H = len(model.blocks), model.wte.weight.size(1), model.blocks[0].attn.H
    B, T = a.gen_batch, model.T
    gen = torch.Generator().manual_seed(a.seed)
    prompt = torch.tensor([list(a.prompt.encode())] * B, dtype=torch.long)
    caches = [(torch.zeros(B, H, T, C // H), torch.zeros(B, H, T, C // H)) for _ in range(L)]
    seq = prompt
    n_p = seq.size(1)
    if n_p > T:
        seq = seq[:, -T:]
    t_first = t_last = None
    logits = model.step(seq, caches, 0)
    pos = seq.size(1)
    for i in range(a.generate):
        probs = logits.softmax(-1)
        tok = torch.multinomial(probs, 1, generator=gen)
        now = time.perf_counter()
        if t_first is None:
            t_first = now
        t_last = now
        seq = torch.cat([seq, tok], 1)
        if i + 1 == a.generate:
            break
        if pos < T:	# one position more in the cache
            logits = model.step(tok, caches, pos)
            pos += 1
        else:		# past the context: the window slides, the cache anew
            seq = seq[:, -T:]
            logits = model.step(seq, caches, 0)
    n = a.generate - 1
    return {"gen_tps": B * n / (t_last - t_first) if n > 0 and t_last > t_first else None,
            "gen_tokens": a.generate, "gen_batch": B, "prompt_tokens": n_p}


def main():
    t_start = process_start()
    ap = argparse.ArgumentParser(prog="torch_gpt.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--lr-warmup", type=int, default=50, help="warmup steps of the schedule")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--train", help="training tokens: a file of byte ids")
    ap.add_argument("--val", help="validation tokens: a file of byte ids")
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=0, help="steps left out of train_tps")
    ap.add_argument("--log-every", type=int, default=None,
                    help="steps of a timing window (default --warmup, else 50)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N] (training)")
    ap.add_argument("--amp", choices=("none", "bf16", "fp16"), default="none",
                    help="torch.autocast's 16-bit type (training)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--generate", type=int, default=0, help="tokens to generate (no training)")
    ap.add_argument("--gen-batch", type=int, default=1)
    ap.add_argument("--prompt", default="\n")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if a.log_every is None:
        a.log_every = a.warmup or 50
    if not a.generate and not a.train:
        ap.error("--train FILE or --generate N")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = GPT(a.vocab, a.context, a.layers, a.heads, a.width)
    if not a.generate:
        model = model.to(a.device)
    out = {"peer": "torch", "torch": torch.__version__, "sdpa": SDPA,
           "python": sys.version.split()[0], "threads": a.threads, "seed": a.seed,
           "params": sum(p.numel() for p in model.parameters())}
    if a.generate:
        out.update(generate(a, model))
    else:
        out.update(train(a, torch.compile(model) if a.compile else model, t_start))
    out["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
