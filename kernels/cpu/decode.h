/* Generation's kernels on the CPU: attention over a KV cache, fast
 * (decode.c) and as a plain reference (ref_decode.c), for the backend
 * table's attention_decode (kernels.h). */
#ifndef DLT_CPU_DECODE_H
#define DLT_CPU_DECODE_H

void dlt_cpu_attention_decode(const float *qkv, float *out, int q0, int n, int C, int H);
void dlt_ref_attention_decode(const float *qkv, float *out, int q0, int n, int C, int H);

#endif
