#!/usr/bin/python3
"""The PyTorch peer of make bench: trains the model of bench/mlp.yaml or
bench/cnn.yaml as dlt-train does and prints one JSON line of measurements.

Same as dlt-train: PyTorch's default init, Adam 1e-3 with the per-step
cosine decay of dlt's schedule: cosine (lr = 1e-3 * (1 + cos(pi*s/S)) / 2
for update s of S), batch 128 with the last batch of an epoch smaller, a
new shuffle every epoch, inputs scaled to [0, 1] then normalised with one
mean and std (population) of the training images, as dlt-prep computes
them.  The images stay u8 in memory and a batch is normalised when it is
taken, as dlt's loader does.

Measured:
  train_sps     samples/s of the training steps after the first --warmup
                steps (batch gather, normalise, forward, loss, backward,
                Adam); evaluation excluded
  infer_sps     samples/s of evaluating the test set under torch.no_grad
                at batch --eval-batch (forward, loss, accuracy), timed on
                the evaluation after the last epoch
  startup       seconds from the process start to the first training step:
                the start is BENCH_T0 (time.monotonic() of the driver just
                before it spawned us) or else /proc/self/stat's starttime
  test_acc      after the last epoch
Standard library and torch only (no torchvision, no numpy)."""

import argparse
import gzip
import json
import math
import os
import resource
import struct
import sys
import time

import torch
from torch import nn


def process_start():
    """Monotonic seconds at which this process started."""
    t0 = os.environ.get("BENCH_T0")
    if t0:
        return float(t0)
    # starttime: clock ticks after boot, field 22 (the 20th after the
    # parenthesised name, which may hold spaces)
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    boot_now = time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic() - (boot_now - ticks / os.sysconf("SC_CLK_TCK"))


def read_idx(path, limit=None):
    """An IDX file (or its .gz) as (dims, bytes), at most limit items."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        if magic >> 8 != 0x08:
            sys.exit(f"torch_train: {path}: not a u8 IDX file")
        ndim = magic & 0xFF
        dims = list(struct.unpack(">" + "I" * ndim, f.read(4 * ndim)))
        if limit is not None and limit < dims[0]:
            dims[0] = limit
        n = math.prod(dims)
        data = f.read(n)
    if len(data) != n:
        sys.exit(f"torch_train: {path}: truncated")
    return dims, data


def load(datadir, split, limit=None):
    dims, x = read_idx(os.path.join(datadir, f"{split}-images-idx3-ubyte"), limit)
    _, y = read_idx(os.path.join(datadir, f"{split}-labels-idx1-ubyte"), limit)
    x = torch.frombuffer(bytearray(x), dtype=torch.uint8).view(dims[0], 1, dims[1], dims[2])
    y = torch.frombuffer(bytearray(y), dtype=torch.uint8).long()
    return x, y


def stats(x):
    """One mean and population std of the pixels scaled to [0, 1], from a
    histogram in float64 as dlt-prep does."""
    h = torch.bincount(x.reshape(-1), minlength=256).double()
    v = torch.arange(256, dtype=torch.float64)
    n = h.sum()
    mean = (h * v).sum() / n
    var = (h * (v - mean) ** 2).sum() / n
    return float(mean / 255), float(var.sqrt() / 255)


def build(name):
    if name == "mlp":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 256), nn.ReLU(),
            nn.Linear(256, 128), nn.ReLU(),
            nn.Linear(128, 10))
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
            nn.Linear(128, 10))
    sys.exit(f"torch_train: unknown model '{name}'")


def evaluate(model, x, y, batch, mean, std, lossf, dev):
    model.eval()
    loss_sum, correct = 0.0, 0
    t0 = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(x), batch):
            xb = ((x[i:i + batch].float() * (1 / 255) - mean) / std).to(dev)
            yb = y[i:i + batch].to(dev)
            out = model(xb)
            loss_sum += float(lossf(out, yb)) * len(yb)
            correct += int((out.argmax(1) == yb).sum())
    dt = time.perf_counter() - t0
    model.train()
    return loss_sum / len(x), correct / len(x), len(x) / dt


def steady_sps(windows, warmup):
    """Samples/s of the windows that end after the warm-up steps."""
    ws = [w for w in windows if w[2] > warmup]
    t = sum(w[1] for w in ws)
    return sum(w[0] for w in ws) / t if t > 0 else None


def main():
    t_start = process_start()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, choices=["mlp", "cnn"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--eval-batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-limit", type=int, default=None,
                    help="train on the first N training samples only")
    ap.add_argument("--warmup", type=int, default=0,
                    help="steps left out of train_sps")
    ap.add_argument("--log-every", type=int, default=None,
                    help="steps of a timing window (default: --warmup, else 100)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                    help="directory of the IDX files (plain or .gz)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                    help="autocast to bf16 or fp16 (with GradScaler), as dlt's precision")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()

    if a.log_every is None:
        a.log_every = a.warmup or 100
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    x_train, y_train = load(a.data, "train", a.train_limit)
    x_test, y_test = load(a.data, "t10k")
    mean, std = stats(x_train)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    model = build(a.model).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = torch.amp.GradScaler(enabled=a.precision == "fp16") if cuda else None
    n = len(x_train)
    spe = (n + a.batch - 1) // a.batch
    total = spe * a.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s / total, 1.0))))
    lossf = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(a.seed)

    step = 0
    startup = None
    t_train = 0.0          # every training step, evaluation excluded
    windows = []           # [samples, seconds, step] as dlt's train records see them
    res = {}
    for epoch in range(1, a.epochs + 1):
        perm = torch.randperm(n, generator=gen)
        if startup is None:
            startup = time.monotonic() - t_start
        t_ep = w_t0 = time.perf_counter()
        w_n = 0
        for i in range(0, n, a.batch):
            idx = perm[i:i + a.batch]
            # the batch is gathered and normalised on the host and copied
            # over, as dlt's loader does
            xb = ((x_train[idx].float() * (1 / 255) - mean) / std).to(dev, non_blocking=True)
            yb = y_train[idx].to(dev, non_blocking=True)
            with torch.autocast(dev.type, dtype=half, enabled=half is not None):
                loss = lossf(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            if scaler is not None and scaler.is_enabled():
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            sched.step()
            step += 1
            w_n += len(idx)
            # a window ends where dlt-train writes a train record: every
            # --log-every steps and at the end of an epoch
            if step % a.log_every == 0 or i + a.batch >= n:
                if cuda:
                    torch.cuda.synchronize()
                now = time.perf_counter()
                windows.append([w_n, now - w_t0, step])
                w_t0, w_n = now, 0
        t_end = time.perf_counter()
        t_train += t_end - t_ep
        if epoch == a.epochs or a.verbose:
            test_loss, test_acc, infer_sps = evaluate(
                model, x_test, y_test, a.eval_batch, mean, std, lossf, dev)
            res.update(test_loss=test_loss, test_acc=test_acc, infer_sps=infer_sps)
            if a.verbose:
                print(f"torch_train: epoch {epoch}/{a.epochs}: test acc {test_acc:.4f}, "
                      f"{n / (t_end - t_ep):.0f} train samples/s", file=sys.stderr)

    out = {
        "peer": "torch", "torch": torch.__version__, "model": a.model,
        "device": a.device, "precision": a.precision,
        "threads": a.threads, "epochs": a.epochs, "batch": a.batch,
        "eval_batch": a.eval_batch, "train_samples": n, "steps": step,
        "warmup_steps": a.warmup,
        "train_sps": steady_sps(windows, a.warmup),
        "train_time": t_train, "train_sps_all": n * a.epochs / t_train,
        "infer_sps": res["infer_sps"], "test_loss": res["test_loss"],
        "test_acc": res["test_acc"], "startup": startup,
        "mean": mean, "std": std, "windows": windows,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
