#include <cblas.h>
#include <omp.h>

#include "threads.h"

void dlt_cpu_set_threads(int n)
{
	omp_set_num_threads(n);
	/* OpenBLAS keeps its own count even in its OpenMP build */
	openblas_set_num_threads(n);
}
