#!/usr/bin/python3
"""Files for llm.c's trainers, train_gpt2.c of bench/gpt and train_gpt2.cu
of bench/gpu: a model checkpoint of random weights of a GPT's shape, and
token files.

    llmc_init.py model OUT --context T --layers L --heads H --width C [--vocab V] [--seed S]
                           [--bf16]
    llmc_init.py tokens OUT FILE...

model: the header of llm.c's gpt2_build_from_checkpoint (256 int32: magic
20240326, version 3, max_seq_len, vocab_size, num_layers, num_heads,
channels, padded_vocab_size; the rest 0), then the parameters as float32
in its order: wte (Vp, C), wpe (maxT, C), ln1w, ln1b (L, C), qkvw (L, 3C,
C), qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C), ln2w, ln2b (L, C),
fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw,
lnfb (C).  GPT-2's init: matrices N(0, 0.02), the residual projections
N(0, 0.02 / sqrt(2 L)), biases 0, layernorm gains 1.  The values do not
matter to a timing; the shapes do.  The vocabulary is not padded (Vp = V):
train_gpt2.cu pads GPT-2's 50257 to a multiple of 128 for its kernels, and
our 256 is one already.  --bf16 writes what train_gpt2.cu's default build
(PRECISION=BF16) loads: version 5, every parameter (the layernorms too)
as bfloat16, the upper half of the float32 value (truncated, not rounded:
the values do not matter).

tokens: llm.c's data file (256 int32: magic 20240520, version 1, the
token count; then the tokens as uint16): the bytes of the FILEs one after
another, which are the ids of dlt-prep text's byte tokenizer.

Standard library only."""

import argparse
import array
import math
import random
import struct
import sys


def normal(rng, n, std):
    """n float32 values ~ N(0, std): Box-Muller, two a draw"""
    out = array.array("f", bytes(4 * n))
    two_pi = 2 * math.pi
    for i in range(0, n - 1, 2):
        r = std * math.sqrt(-2.0 * math.log(1.0 - rng.random()))
        a = two_pi * rng.random()
        out[i] = r * math.cos(a)
        out[i + 1] = r * math.sin(a)
    if n % 2:
        out[n - 1] = rng.gauss(0.0, std)
    return out


def little(v):
    """array v in little-endian order, the files' order"""
    if sys.byteorder != "little":
        v.byteswap()
    return v


def to_bf16(v):
    """float32 array v as little-endian bfloat16 bytes: the upper 16 bits
    of each value"""
    halves = array.array("H", v.tobytes())
    return little(halves[1::2] if sys.byteorder == "little" else halves[0::2]).tobytes()


def write_model(a):
    T, V, L, H, C = a.context, a.vocab, a.layers, a.heads, a.width
    if C % H:
        sys.exit(f"llmc_init: --width {C} is not a multiple of --heads {H}")
    rng = random.Random(a.seed)
    std, proj = 0.02, 0.02 / math.sqrt(2 * L)
    header = [20240326, 5 if a.bf16 else 3, T, V, L, H, C, V] + [0] * 248
    # (count, kind): kind a std, "one" or "zero"
    tensors = [
        (V * C, std), (T * C, std),
        (L * C, "one"), (L * C, "zero"),
        (L * 3 * C * C, std), (L * 3 * C, "zero"),
        (L * C * C, proj), (L * C, "zero"),
        (L * C, "one"), (L * C, "zero"),
        (L * 4 * C * C, std), (L * 4 * C, "zero"),
        (L * C * 4 * C, proj), (L * C, "zero"),
        (C, "one"), (C, "zero"),
    ]
    with open(a.out + ".tmp", "wb") as f:
        f.write(struct.pack("<256i", *header))
        for n, kind in tensors:
            if kind == "zero":
                f.write(bytes((2 if a.bf16 else 4) * n))
                continue
            v = array.array("f", [1.0]) * n if kind == "one" else normal(rng, n, kind)
            f.write(to_bf16(v) if a.bf16 else little(v).tobytes())
    import os
    os.replace(a.out + ".tmp", a.out)
    print(f"llmc_init: {a.out}: {sum(n for n, _ in tensors)} parameters", file=sys.stderr)


def write_tokens(a):
    data = b"".join(open(p, "rb").read() for p in a.files)
    if len(data) >= 2 ** 31:
        sys.exit("llmc_init: more than 2^31 tokens")
    toks = array.array("H", iter(data))	# a byte is its id
    if sys.byteorder != "little":
        toks.byteswap()
    import os
    with open(a.out + ".tmp", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(data), *([0] * 253)))
        f.write(toks.tobytes())
    os.replace(a.out + ".tmp", a.out)


def main():
    ap = argparse.ArgumentParser(prog="llmc_init.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model", help="a checkpoint of random weights")
    m.add_argument("out")
    m.add_argument("--context", type=int, required=True)
    m.add_argument("--layers", type=int, required=True)
    m.add_argument("--heads", type=int, required=True)
    m.add_argument("--width", type=int, required=True)
    m.add_argument("--vocab", type=int, default=256)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--bf16", action="store_true",
                   help="version 5, bfloat16 parameters (train_gpt2.cu's default build)")
    t = sub.add_parser("tokens", help="a token file of the bytes of FILEs")
    t.add_argument("out")
    t.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.cmd == "model":
        for k in ("context", "layers", "heads", "width", "vocab"):
            if getattr(a, k) < 1:
                ap.error(f"--{k}: at least 1")
        write_model(a)
    else:
        write_tokens(a)


if __name__ == "__main__":
    main()
