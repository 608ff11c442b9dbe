#!/bin/sh
# The kernel table (test-kernels) with DLT_GEMM naming dlt's f32 kernel,
# which runs bf16 on the converted path: where the CPU has bf16 dot
# products, the default run takes a bf16 3x3 convolution through im2col
# and those, and this run keeps Winograd's (on rounded copies) tested
# there too.  The program prints its own TAP.
. "$(dirname "$0")/lib.sh"
if grep -q avx512f /proc/cpuinfo; then
	DLT_GEMM=dlt-avx512 exec "$BUILD/test/test-kernels"
fi
DLT_GEMM=dlt-avx2 exec "$BUILD/test/test-kernels"
