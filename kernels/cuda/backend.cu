/* The CUDA backend: one device per process, its state made once by
 * dlt_backend_cuda_abi_open (the one symbol libdlt-cuda.so exports, which
 * kernels/cuda_open.c looks up), the table's memory entries, and the
 * table.  The kernels are in the other files of this directory.
 *
 * Nothing here prints or exits: a failure to start is NULL with the
 * driver's reason; a failure later is kept as the first error (cu.error),
 * the entries after it go on (their results are then meaningless, as a
 * dead CUDA context makes them anyway) and softmax_xent's loss is NaN
 * from then on, so that the metrics show it. */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/internal.h"

cu_state cu;
static dlt_backend table;
static int ready;

static void record(const char *what, const char *why)
{
	if (!cu.error[0])
		snprintf(cu.error, sizeof(cu.error), "%s: %s", what, why);
}

int cu_check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 1;
	record(what, cudaGetErrorString(e));
	return 0;
}

int cu_check_blas(cublasStatus_t s, const char *what)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return 1;
	record(what, cublasGetStatusString(s));
	return 0;
}

int cu_check_dnn(cudnnStatus_t s, const char *what)
{
	if (s == CUDNN_STATUS_SUCCESS)
		return 1;
	record(what, cudnnGetErrorString(s));
	return 0;
}

int cu_launched(const char *what)
{
	return cu_check(cudaGetLastError(), what);
}

/* cudaMalloc is synchronous; the zeroing is made so before the memory is
 * handed out, whatever stream uses it next. */
static void *cu_alloc(size_t bytes)
{
	void *p;
	if (cudaMalloc(&p, bytes) != cudaSuccess) {
		cudaGetLastError();	/* out of memory is the caller's to report */
		return NULL;
	}
	if (!cu_check(cudaMemsetAsync(p, 0, bytes, cu.stream), "alloc") ||
	    !cu_check(cudaStreamSynchronize(cu.stream), "alloc")) {
		cudaFree(p);
		return NULL;
	}
	return p;
}

static void cu_free(void *p)
{
	if (p)
		cu_check(cudaFree(p), "free");
}

static void cu_upload(void *dst, const void *src, size_t bytes)
{
	if (!bytes)
		return;
	cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu.stream), "upload");
	cu_check(cudaStreamSynchronize(cu.stream), "upload");
}

static void *cu_host_alloc(size_t bytes)
{
	void *p = NULL;
	if (!cu_check(cudaMallocHost(&p, bytes ? bytes : 1), "pinned alloc"))
		return NULL;
	memset(p, 0, bytes);
	return p;
}

static void cu_host_free(void *p)
{
	if (p)
		cu_check(cudaFreeHost(p), "pinned free");
}

/* On the copy stream, so it runs beside the kernels queued before it;
 * the step's stream waits for it before the kernels queued after.  It
 * waits itself for the work queued before the previous upload, which may
 * read the input buffer this one writes (a pipeline's first stage takes
 * micro-batches by turns in two, with no wait between); in a plain loop
 * that work, the step before, is done by then and costs no wait. */
static void cu_upload_async(void *dst, const void *src, size_t bytes)
{
	if (!bytes)
		return;
	cu_check(cudaStreamWaitEvent(cu.copy, cu.called, 0), "upload");
	cu_check(cudaEventRecord(cu.called, cu.stream), "upload");
	cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu.copy), "upload");
	cu_check(cudaEventRecord(cu.copied, cu.copy), "upload");
	cu_check(cudaStreamWaitEvent(cu.stream, cu.copied, 0), "upload");
}

static void cu_download(void *dst, const void *src, size_t bytes)
{
	if (!bytes)
		return;
	cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu.stream), "download");
	cu_check(cudaStreamSynchronize(cu.stream), "download");
}

static void cu_copy(void *dst, const void *src, size_t bytes)
{
	if (bytes && dst != src)
		cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu.stream),
			 "copy");
}

static void cu_zero(void *p, size_t bytes)
{
	if (bytes)
		cu_check(cudaMemsetAsync(p, 0, bytes, cu.stream), "zero");
}

static const char *cu_error(void)
{
	return cu.error[0] ? cu.error : NULL;
}

static void fill_table(void)
{
	table.name = "cuda";
	table.host = 0;
	table.alloc = cu_alloc;
	table.free = cu_free;
	table.upload = cu_upload;
	table.download = cu_download;
	table.copy = cu_copy;
	table.zero = cu_zero;
	table.host_alloc = cu_host_alloc;
	table.host_free = cu_host_free;
	table.upload_async = cu_upload_async;
	table.error = cu_error;
	table.gemm = cu_gemm;
	table.bias_act = cu_bias_act;
	table.act_forward = cu_act_forward;
	table.act_backward = cu_act_backward;
	table.bias_grad = cu_bias_grad;
	table.softmax_xent = cu_softmax_xent;
	table.pointwise_loss = cu_pointwise_loss;
	table.dropout = cu_dropout;
	table.mul = cu_mul;
	table.adam = cu_adam;
	table.sgd = cu_sgd;
	table.conv_workspace = cu_conv_workspace;
	table.conv_forward = cu_conv_forward;
	table.conv_backward = cu_conv_backward;
	table.maxpool_forward = cu_maxpool_forward;
	table.maxpool_backward = cu_maxpool_backward;
	table.avgpool_forward = cu_avgpool_forward;
	table.avgpool_backward = cu_avgpool_backward;
	table.batchnorm_train = cu_batchnorm_train;
	table.batchnorm_eval = cu_batchnorm_eval;
	table.batchnorm_backward = cu_batchnorm_backward;
	table.add = cu_add;
	table.scale = cu_scale;
	table.round = cu_round;
	table.narrow = cu_narrow;
	table.widen = cu_widen;
	table.nonfinite = cu_nonfinite;
	table.sum_squares = cu_sum_squares;
	table.layernorm_forward = cu_layernorm_forward;
	table.layernorm_backward = cu_layernorm_backward;
	table.embedding_forward = cu_embedding_forward;
	table.embedding_backward = cu_embedding_backward;
	table.positional_forward = cu_positional_forward;
	table.positional_backward = cu_positional_backward;
	table.attention_forward = cu_attention_forward;
	table.attention_backward = cu_attention_backward;
	table.attention_decode = cu_attention_decode;
}

static void release(void)
{
	if (cu.dnn)
		cudnnDestroy(cu.dnn);
	if (cu.blas)
		cublasDestroy(cu.blas);
	cudaFree(cu.blas_work);
	cudaFree(cu.partial);
	cudaFree(cu.count);
	cudaFree(cu.half);
	cudaFree(cu.colsum);
	cudaFree(cu.attn);
	cudaFreeHost(cu.host);
	if (cu.copied)
		cudaEventDestroy(cu.copied);
	if (cu.called)
		cudaEventDestroy(cu.called);
	if (cu.copy)
		cudaStreamDestroy(cu.copy);
	if (cu.stream)
		cudaStreamDestroy(cu.stream);
	memset(&cu, 0, sizeof(cu));
}

/* cuBLAS wants 32 MiB of workspace on Hopper to pick its best kernels */
#define BLAS_WORK (32u << 20)

/* Handles, stream and scratch; why gets the first failure's reason. */
static int start(int device, char *why, size_t n)
{
	cudaError_t e;
	cublasStatus_t bs;
	cudnnStatus_t ds;
	int count = 0;
	const char *what = "";

	cu.device = device;
	if ((e = cudaGetDeviceCount(&count)) != cudaSuccess)
		goto cuda_fail;
	if (device < 0 || device >= count) {
		snprintf(why, n, "%s (device %d of %d)", cudaGetErrorString(cudaErrorInvalidDevice),
			 device, count);
		return 0;
	}
	what = "cudaSetDevice";
	if ((e = cudaSetDevice(device)) != cudaSuccess ||
	    (e = cudaFree(0)) != cudaSuccess)
		goto cuda_fail;
	what = "scratch";
	if ((e = cudaStreamCreateWithFlags(&cu.stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&cu.copy, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&cu.copied, cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&cu.called, cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaMalloc(&cu.blas_work, BLAS_WORK)) != cudaSuccess ||
	    (e = cudaMalloc(&cu.partial, CU_MAX_PARTIALS * sizeof(double))) != cudaSuccess ||
	    (e = cudaMalloc(&cu.count, CU_MAX_PARTIALS * sizeof(unsigned long long))) != cudaSuccess ||
	    (e = cudaMalloc(&cu.half, (size_t)CU_HALF_SCRATCH * 2)) != cudaSuccess ||
	    (e = cudaMalloc(&cu.colsum, CU_COLSUM * sizeof(double))) != cudaSuccess ||
	    (e = cudaMallocHost(&cu.host, 64)) != cudaSuccess)
		goto cuda_fail;
	/* cuBLAS: default math (no TF32), our stream, our workspace (set
	 * after the stream: setting a stream resets it) */
	if ((bs = cublasCreate(&cu.blas)) != CUBLAS_STATUS_SUCCESS ||
	    (bs = cublasSetMathMode(cu.blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS ||
	    (bs = cublasSetStream(cu.blas, cu.stream)) != CUBLAS_STATUS_SUCCESS ||
	    (bs = cublasSetWorkspace(cu.blas, cu.blas_work, BLAS_WORK)) != CUBLAS_STATUS_SUCCESS) {
		snprintf(why, n, "cuBLAS: %s", cublasGetStatusString(bs));
		return 0;
	}
	if ((ds = cudnnCreate(&cu.dnn)) != CUDNN_STATUS_SUCCESS ||
	    (ds = cudnnSetStream(cu.dnn, cu.stream)) != CUDNN_STATUS_SUCCESS) {
		snprintf(why, n, "cuDNN: %s", cudnnGetErrorString(ds));
		return 0;
	}
	return 1;
cuda_fail:
	/* the runtime says "insufficient" of a driver that is not there */
	if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&count) == cudaSuccess &&
	    !count)
		snprintf(why, n, "no CUDA driver is installed");
	else
		snprintf(why, n, "%s%s%s", what, *what ? ": " : "", cudaGetErrorString(e));
	cudaGetLastError();
	return 0;
}

extern "C" __attribute__((visibility("default"))) const dlt_backend *
dlt_backend_cuda_abi_open(int abi, int device, char *why, size_t n)
{
	if (abi != DLT_BACKEND_ABI) {
		snprintf(why, n, "libdlt-cuda.so is of another dlt (backend ABI %d, not %d)",
			 DLT_BACKEND_ABI, abi);
		return NULL;
	}
	if (ready) {
		if (device == cu.device)
			return &table;
		snprintf(why, n, "this process already uses CUDA device %d", cu.device);
		return NULL;
	}
	if (!start(device, why, n)) {
		release();
		return NULL;
	}
	fill_table();
	ready = 1;
	return &table;
}
