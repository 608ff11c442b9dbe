#!/usr/bin/env python3
"""A dlt GPT in PyTorch: the same weights must give dlt's logits, loss and
gradients (test/t2610-gpt-torch.sh runs it).

  gpt-torch.py [--heads H] MODEL.safetensors DUMP
      MODEL.safetensors: a dlt GPT exported by `dlt-ckpt export -f
      safetensors`; DUMP: what `test-gpt-torch --dump` wrote for the same
      weights (ids.npy, targets.npy, logits.npy, loss, grad/NAME.npy).
      Builds GPT-2 (nanoGPT's modules: pre-LN blocks, learned positions,
      causal attention with a fused qkv projection, an MLP with GELU tanh,
      a final layernorm, a head tied to the token embedding without a
      bias) from the tensors, in float64, runs it on the ids and compares
      the logits (max |dlt - torch|), the loss (mean per-token cross-
      entropy) and each parameter's gradient (||dlt - torch|| / ||torch||).
      Prints the measurements; exits 1 when one is past its tolerance
      (--logits-tol, --loss-tol, --grad-tol), 2 for bad input.
      The heads, the layernorms' eps and the GELU come from the config in
      the file's __metadata__ (the resolved config of the model file),
      which must be the GPT above: causal attention, GELU tanh.

dlt's names and layouts, as the model's config flattens it (lib/nn/nn.c):
each layer has the index of its place in the flattened config (a residual
block counts, then its layers) or its name:, and its params are INDEX.w,
INDEX.b (dense, layernorm), INDEX.qkv.w, INDEX.qkv.b, INDEX.proj.w,
INDEX.proj.b (attention).  A dense weight is [out, in], as nn.Linear's;
attention's qkv.w is [3C, C], the rows of q, then k, then v, head h's
features at h*C/H in each, as nanoGPT's c_attn; the embedding is [V, C]
and the positions [max, C].  The export holds them in the model's order,
which is the order of the header here.
"""
import argparse
import json
import math
import os
import re
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def bad(msg):
    print('gpt-torch.py: ' + msg, file=sys.stderr)
    sys.exit(2)


def load_safetensors(path):
    """Its tensors in the order of the header, as float64 tensors"""
    with open(path, 'rb') as f:
        blob = f.read()
    if len(blob) < 8:
        bad('%s: too short' % path)
    (n,) = struct.unpack('<Q', blob[:8])
    header = json.loads(blob[8:8 + n].decode('utf-8'))   # keeps the file's order
    meta = header.pop('__metadata__', {})
    data = blob[8 + n:]
    out = []
    for name, t in header.items():
        if t['dtype'] != 'F32':
            bad('%s: tensor %r is %s, not F32' % (path, name, t['dtype']))
        a, b = t['data_offsets']
        arr = np.frombuffer(data[a:b], dtype='<f4').reshape(t['shape'])
        out.append((name, torch.from_numpy(arr.astype(np.float64))))
    return out, meta


class Block(nn.Module):
    def __init__(self, C, H, F_, eps):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C, eps=eps)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=eps)
        self.c_fc = nn.Linear(C, F_)
        self.mlp_proj = nn.Linear(F_, C)

    def attn(self, x):
        B, T, C = x.shape
        H, D = self.H, C // self.H
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, H, D).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float('-inf')).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn_proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate='tanh'))


class GPT(nn.Module):
    def __init__(self, V, P, C, H, F_, L, eps):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(P, C)
        self.h = nn.ModuleList(Block(C, H, F_, eps) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=eps)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight          # tied, as GPT-2's

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))
        return logits, loss


def from_config(meta):
    """heads and layernorm eps of the resolved config the export carries"""
    cfg = meta.get('config', '')
    heads = set(int(h) for h in re.findall(r'attention: \{heads: (\d+)', cfg))
    eps = set(float(e) for e in re.findall(r'layernorm: \{eps: ([-+0-9.e]+)\}', cfg))
    if not heads or len(heads) != 1:
        bad('the config in the metadata has attention of %s heads' % (sorted(heads) or 'no'))
    if len(eps) != 1:
        bad('the config in the metadata has layernorms of eps %s' % sorted(eps))
    if re.search(r'causal: false', cfg):
        bad('the config in the metadata has attention without the causal mask')
    gelus = re.findall(r'gelu: \{approximate: (\w+)\}', cfg)
    if not gelus or set(gelus) != {'tanh'}:
        bad('the config in the metadata has GELUs %s, this GPT GELU tanh' % gelus)
    return heads.pop(), eps.pop()


def mapping(tensors):
    """[(dlt name, torch name)] in the model's order, and the shape of the
    GPT: V, P, C, F, L.  Walks the tensors as the flattened config makes
    them; anything else is bad input naming the tensor."""
    it = list(tensors)
    pos = [0]

    def take(role, shape):
        if pos[0] >= len(it):
            bad('the tensors end where a %s is expected' % role)
        name, t = it[pos[0]]
        pos[0] += 1
        if not name.endswith('.' + role):
            bad('tensor %r: expected a %s' % (name, role))
        if list(t.shape) != list(shape):
            bad('tensor %r is %s, expected %s' % (name, list(t.shape), list(shape)))
        return name

    if len(it) < 2 or it[0][1].dim() != 2:
        bad('the first tensor is not an embedding [V, C]')
    V, C = it[0][1].shape
    P = it[1][1].shape[0]
    F_ = None
    pairs = [(take('w', [V, C]), 'wte.weight'), (take('w', [P, C]), 'wpe.weight')]
    L = 0
    while pos[0] < len(it):
        if pos[0] + 2 == len(it):             # the final layernorm
            pairs += [(take('w', [C]), 'ln_f.weight'), (take('b', [C]), 'ln_f.bias')]
            break
        p = 'h.%d.' % L
        if F_ is None and pos[0] + 8 < len(it):
            F_ = it[pos[0] + 8][1].shape[0]
        pairs += [(take('w', [C]), p + 'ln_1.weight'), (take('b', [C]), p + 'ln_1.bias'),
                  (take('qkv.w', [3 * C, C]), p + 'c_attn.weight'),
                  (take('qkv.b', [3 * C]), p + 'c_attn.bias'),
                  (take('proj.w', [C, C]), p + 'attn_proj.weight'),
                  (take('proj.b', [C]), p + 'attn_proj.bias'),
                  (take('w', [C]), p + 'ln_2.weight'), (take('b', [C]), p + 'ln_2.bias'),
                  (take('w', [F_, C]), p + 'c_fc.weight'), (take('b', [F_]), p + 'c_fc.bias'),
                  (take('w', [C, F_]), p + 'mlp_proj.weight'),
                  (take('b', [C]), p + 'mlp_proj.bias')]
        L += 1
    # index-named layers must come in the order of their indices
    idx = [int(m.group(1)) for m in (re.match(r'(\d+)\.', d) for d, _ in pairs) if m]
    if idx != sorted(idx):
        bad('the tensors are not in the order of the model: %s' % [d for d, _ in pairs])
    return pairs, (V, P, C, F_ or 4 * C, L)


def load_npy(dump, name):
    path = os.path.join(dump, name + '.npy')
    if not os.path.exists(path):
        bad('%s: no such file' % path)
    return np.load(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--heads', type=int, help='instead of the config\'s')
    ap.add_argument('--logits-tol', type=float, default=1e-4)
    ap.add_argument('--loss-tol', type=float, default=1e-5)
    ap.add_argument('--grad-tol', type=float, default=1e-4)
    ap.add_argument('model')
    ap.add_argument('dump')
    a = ap.parse_args()

    tensors, meta = load_safetensors(a.model)
    heads, eps = from_config(meta)
    a.heads = a.heads or heads
    a.eps = eps
    pairs, (V, P, C, F_, L) = mapping(tensors)
    if C % a.heads:
        bad('%d heads do not divide %d features' % (a.heads, C))
    torch.manual_seed(0)
    model = GPT(V, P, C, a.heads, F_, L, a.eps).double()
    params = dict(model.named_parameters())
    params['lm_head.weight'] = model.lm_head.weight
    values = dict(tensors)
    with torch.no_grad():
        for d, t in pairs:
            params[t].copy_(values[d])

    ids = torch.from_numpy(load_npy(a.dump, 'ids').astype(np.int64))
    targets = torch.from_numpy(load_npy(a.dump, 'targets').astype(np.int64))
    want_logits = torch.from_numpy(load_npy(a.dump, 'logits').astype(np.float64))
    with open(os.path.join(a.dump, 'loss')) as f:
        want_loss = float(f.read())
    B, T = ids.shape
    if T > P:
        bad('%d positions, the model has %d' % (T, P))

    logits, loss = model(ids, targets)
    loss.backward()
    # the rounding of float32 itself: the same model in float32 against float64
    m32 = GPT(V, P, C, a.heads, F_, L, a.eps)
    m32.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    with torch.no_grad():
        logits32, loss32 = m32(ids, targets)

    fails = []
    d_logits = (want_logits - logits.detach()).abs().max().item()
    d_logits32 = (logits32.double() - logits.detach()).abs().max().item()
    print('shape: B %d T %d V %d C %d heads %d blocks %d mlp %d eps %g'
          % (B, T, V, C, a.heads, L, F_, a.eps))
    print('logits: max |dlt - torch| %.3g (torch float32: %.3g), max |logit| %.3g'
          % (d_logits, d_logits32, logits.detach().abs().max().item()))
    if not d_logits <= a.logits_tol:
        fails.append('logits differ by %.3g > %g' % (d_logits, a.logits_tol))
    d_loss = abs(want_loss - loss.item())
    print('loss: dlt %.9f torch %.9f |diff| %.3g (torch float32: %.3g)'
          % (want_loss, loss.item(), d_loss, abs(loss32.item() - loss.item())))
    if not d_loss <= a.loss_tol:
        fails.append('the loss differs by %.3g > %g' % (d_loss, a.loss_tol))
    worst = (0.0, '')
    for d, t in pairs:
        want = params[t].grad
        got = torch.from_numpy(load_npy(a.dump, 'grad/' + d).astype(np.float64))
        if list(got.shape) != list(want.shape):
            bad('grad/%s.npy is %s, the parameter %s' % (d, list(got.shape), list(want.shape)))
        norm = want.norm().item()
        rel = (got - want).norm().item() / norm if norm > 0 else (got - want).norm().item()
        print('grad %-14s %-20s rel L2 %.3g max abs %.3g |g| %.3g'
              % (d, t, rel, (got - want).abs().max().item(), norm))
        worst = max(worst, (rel, d))
        if not rel <= a.grad_tol:
            fails.append('the gradient of %s (%s) differs by %.3g relative > %g'
                         % (d, t, rel, a.grad_tol))
    print('grads: worst rel L2 %.3g (%s)' % worst)
    for f in fails:
        print('gpt-torch.py: ' + f, file=sys.stderr)
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
