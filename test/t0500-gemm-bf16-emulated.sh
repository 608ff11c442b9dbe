#!/bin/sh
# The bf16 GEMM's vdpbf16ps kernel (kernels/cpu/gemm_bf16.c), which runs
# only on CPUs with AVX512_BF16, run on an emulated Sapphire Rapids
# (test/emu/x86-run.py, Bochs) against the portable micro-kernel: so it is
# tested on every machine, not only where test-gemm finds the instruction.
# The program (test/emu/gemm-bf16.c) prints its own TAP.
. "$(dirname "$0")/lib.sh"
python3 "$ROOT/test/emu/x86-run.py" "$BUILD/test/emu/gemm-bf16" "$BUILD/test/emu/libc23.so"
