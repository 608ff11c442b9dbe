/* Host memory and the layers of convolutional networks on the CPU: convolution, pooling,
 * batch normalisation and the residual add, each fast (conv.c, pool.c,
 * norm.c: OpenMP, GEMM) and as a plain reference (ref_layers.c).  The
 * semantics are those of the backend table's entries (kernels.h), which
 * these fill in. */
#ifndef DLT_CPU_LAYERS_H
#define DLT_CPU_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* host.c: the table's memory entries for both */
void *dlt_host_alloc(size_t bytes);
void dlt_host_free(void *p);
void dlt_host_copy(void *dst, const void *src, size_t bytes);
void dlt_host_zero(void *p, size_t bytes);

/* y = x rounded to prec (y may be x), on the backend's threads: the
 * table's round, and the convolutions' rounded copies */
void dlt_cpu_round(const float *x, float *y, size_t n, int prec);

size_t dlt_cpu_conv_workspace(int prec, const dlt_conv *s);
void dlt_cpu_conv_forward(int prec, const dlt_conv *s, const float *x, const float *w,
			  const float *b, float *y, int act, float slope, float *work);
void dlt_cpu_conv_backward(int prec, const dlt_conv *s, const float *x, const float *w,
			   const float *dy, float *dx, float *dw, float *db, float *work);
int dlt_cpu_conv_pool_fuses(int prec, const dlt_conv *s, const dlt_pool *p);
void dlt_cpu_conv_pool_forward(int prec, const dlt_conv *s, const dlt_pool *p, const float *x,
			       const float *w, const float *b, int act, float slope, float *y,
			       int32_t *arg, float *work);
void dlt_cpu_conv_pool_backward(int prec, const dlt_conv *s, const dlt_pool *p, const float *x,
				const float *dy, const int32_t *arg, float *dw, float *db,
				float *work);
void dlt_cpu_maxpool_forward(const dlt_pool *s, const float *x, float *y, int32_t *arg);
void dlt_cpu_maxpool_backward(const dlt_pool *s, const float *dy, const int32_t *arg,
			      float *dx);
/* One [h, w] plane of max pooling, forward and backward (dx: the whole
 * plane, written) */
void dlt_cpu_maxpool_plane(const dlt_pool *s, const float *in, float *y, int32_t *arg);
void dlt_cpu_maxpool_back_plane(const dlt_pool *s, const float *dy, const int32_t *arg,
				float *dx);
void dlt_cpu_avgpool_forward(const dlt_pool *s, const float *x, float *y);
void dlt_cpu_avgpool_backward(const dlt_pool *s, const float *dy, float *dx);
void dlt_cpu_batchnorm_train(int n, int c, int hw, const float *x, const float *gamma,
			     const float *beta, float *y, float *mean, float *invstd,
			     float *run_mean, float *run_var, float momentum, float eps);
void dlt_cpu_batchnorm_eval(int n, int c, int hw, const float *x, const float *gamma,
			    const float *beta, const float *run_mean, const float *run_var,
			    float eps, float *y);
void dlt_cpu_batchnorm_backward(int n, int c, int hw, const float *x, const float *dy,
				const float *gamma, const float *mean, const float *invstd,
				float *dx, float *dgamma, float *dbeta);
void dlt_cpu_add(const float *a, const float *b, float *y, size_t n);

size_t dlt_ref_conv_workspace(int prec, const dlt_conv *s);
void dlt_ref_conv_forward(int prec, const dlt_conv *s, const float *x, const float *w,
			  const float *b, float *y, int act, float slope, float *work);
void dlt_ref_conv_backward(int prec, const dlt_conv *s, const float *x, const float *w,
			   const float *dy, float *dx, float *dw, float *db, float *work);
void dlt_ref_maxpool_forward(const dlt_pool *s, const float *x, float *y, int32_t *arg);
void dlt_ref_maxpool_backward(const dlt_pool *s, const float *dy, const int32_t *arg,
			      float *dx);
void dlt_ref_avgpool_forward(const dlt_pool *s, const float *x, float *y);
void dlt_ref_avgpool_backward(const dlt_pool *s, const float *dy, float *dx);
void dlt_ref_batchnorm_train(int n, int c, int hw, const float *x, const float *gamma,
			     const float *beta, float *y, float *mean, float *invstd,
			     float *run_mean, float *run_var, float momentum, float eps);
void dlt_ref_batchnorm_eval(int n, int c, int hw, const float *x, const float *gamma,
			    const float *beta, const float *run_mean, const float *run_var,
			    float eps, float *y);
void dlt_ref_batchnorm_backward(int n, int c, int hw, const float *x, const float *dy,
				const float *gamma, const float *mean, const float *invstd,
				float *dx, float *dgamma, float *dbeta);
void dlt_ref_add(const float *a, const float *b, float *y, size_t n);

#endif
