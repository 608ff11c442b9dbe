#!/bin/sh
# The CPU GEMM's AVX-512 kernels (f32 and fp16 in kernels/cpu/gemm.c,
# vdpbf16ps in gemm_bf16.c), which run only on CPUs with AVX-512 and
# AVX512_BF16, run on an emulated Sapphire Rapids (test/emu/x86-run.py,
# Bochs) against the kernels that test-gemm checks everywhere: so they are
# tested on every machine, not only where test-gemm finds the
# instructions.  The program (test/emu/gemm.c) prints its own TAP.
. "$(dirname "$0")/lib.sh"
python3 "$ROOT/test/emu/x86-run.py" "$BUILD/test/emu/gemm" "$BUILD/test/emu/libc23.so"
