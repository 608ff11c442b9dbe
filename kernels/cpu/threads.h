#ifndef DLT_CPU_THREADS_H
#define DLT_CPU_THREADS_H
/* Sets the threads of the CPU kernels: OpenMP's and OpenBLAS's. */
void dlt_cpu_set_threads(int n);
#endif
