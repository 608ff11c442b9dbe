/* dlt's comm over NCCL (lib/comm/comm.h), for GPU ranks, one per process
 * on the device the backend made current.
 *
 * The communicator is non-blocking (NCCL_CONFIG blocking = 0), so that
 * every wait -- for its start, for a sum -- polls against the comm's
 * deadline and a rank that died or stalls ends in ncclCommAbort with a
 * message instead of a hang.  Sums run on a stream of their own, after
 * an event of the step's stream: a bucket's all-reduce runs on the GPU
 * while backward computes the layers before it.  ZeRO's collectives run
 * there too: the reduce-scatter in rank order as grouped ncclSend and
 * ncclRecv of the pieces into scratch memory and a kernel that adds them
 * up in rank order; pieces of one size go through ncclReduceScatter and
 * ncclAllGather, uneven ones through grouped ncclReduce and
 * ncclBroadcast, one a rank. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

#include "comm/comm.h"
#include "kernels/cuda/internal.h"

typedef struct nccl_state {
	ncclComm_t comm;
	cudaStream_t stream;
	cudaEvent_t grads, summed;
	double *f64;		/* sum_f64's values on the device */
	int f64_cap;
	float *scratch;		/* an ordered reduce-scatter's pieces */
	size_t scratch_cap;
} nccl_state;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int fail(dlt_comm *c, const char *what, const char *why)
{
	snprintf(c->why, sizeof(c->why), "%s: %s", what, why);
	return -1;
}

/* Waits until NCCL has taken the last call (a non-blocking comm returns
 * ncclInProgress while it has not) and ev, if any, has happened. */
static int wait_for(dlt_comm *c, cudaEvent_t ev, const char *what)
{
	nccl_state *st = (nccl_state *)c->impl;
	double t0 = now();
	for (;;) {
		ncclResult_t async;
		cudaError_t e = cudaSuccess;
		if (ncclCommGetAsyncError(st->comm, &async) != ncclSuccess)
			return fail(c, what, "ncclCommGetAsyncError failed");
		if (async != ncclSuccess && async != ncclInProgress) {
			ncclCommAbort(st->comm);
			st->comm = NULL;
			return fail(c, what, ncclGetErrorString(async));
		}
		if (async == ncclSuccess && (!ev || (e = cudaEventQuery(ev)) == cudaSuccess))
			return 0;
		if (e != cudaSuccess && e != cudaErrorNotReady)
			return fail(c, what, cudaGetErrorString(e));
		dlt_beats_alive(c);
		if (now() - t0 > c->timeout) {
			snprintf(c->why, sizeof(c->why), "%s: no answer from every rank in %g s "
				 "(a rank died or stalls)", what, c->timeout);
			ncclCommAbort(st->comm);
			st->comm = NULL;
			return -1;
		}
		struct timespec t = { 0, 50000 };
		nanosleep(&t, NULL);
	}
}

static int issued(dlt_comm *c, ncclResult_t r, const char *what)
{
	if (r != ncclSuccess && r != ncclInProgress)
		return fail(c, what, ncclGetErrorString(r));
	return wait_for(c, NULL, what);
}

static int sum_begin(dlt_comm *c, float *x, size_t n)
{
	nccl_state *st = (nccl_state *)c->impl;
	if (!cu_check(cudaEventRecord(st->grads, cu.stream), "cudaEventRecord") ||
	    !cu_check(cudaStreamWaitEvent(st->stream, st->grads, 0), "cudaStreamWaitEvent"))
		return fail(c, "gradient sum", cu.error);
	return issued(c, ncclAllReduce(x, x, n, ncclFloat, ncclSum, st->comm, st->stream),
		      "ncclAllReduce");
}

static int progress(dlt_comm *c)
{
	return 0;
}

/* The comm's stream after what the step's stream has done so far */
static int after_step(dlt_comm *c, const char *what)
{
	nccl_state *st = (nccl_state *)c->impl;
	if (!cu_check(cudaEventRecord(st->grads, cu.stream), "cudaEventRecord") ||
	    !cu_check(cudaStreamWaitEvent(st->stream, st->grads, 0), "cudaStreamWaitEvent"))
		return fail(c, what, cu.error);
	return 0;
}

static int ok(ncclResult_t r)
{
	return r == ncclSuccess || r == ncclInProgress;
}

/* Ends a group whose first failing call, if any, returned first */
static int group_end(dlt_comm *c, ncclResult_t first, const char *what)
{
	ncclResult_t r = ncclGroupEnd();
	if (!ok(first))
		return fail(c, what, ncclGetErrorString(first));
	return issued(c, r, what);
}

/* Where this rank's piece starts; whether the pieces are of one size */
static size_t piece_at(const dlt_comm *c, const size_t *counts, int *equal)
{
	size_t at = 0;
	*equal = 1;
	for (int j = 0; j < c->size; j++) {
		if (j < c->rank)
			at += counts[j];
		*equal &= counts[j] == counts[0];
	}
	return at;
}

/* out[k] = in[k] + in[n + k] + ... + in[(parts - 1) n + k], added in that
 * order: the ranks' pieces in rank order */
__global__ void add_parts(float *out, const float *in, size_t n, int parts)
{
	GRID_STRIDE(k, n) {
		float s = in[k];
		for (int j = 1; j < parts; j++)
			s += in[(size_t)j * n + k];
		out[k] = s;
	}
}

static int finish(dlt_comm *c, const char *what);

static int reduce_scatter(dlt_comm *c, float *x, const size_t *counts, int ordered)
{
	static const char what[] = "gradient reduce-scatter";
	nccl_state *st = (nccl_state *)c->impl;
	int equal, size = c->size;
	size_t at = piece_at(c, counts, &equal), my = counts[c->rank], off = 0;
	ncclResult_t r = ncclSuccess;

	if (after_step(c, what) != 0)
		return -1;
	if (!ordered && equal)	/* in place: this rank's piece is x + rank * my */
		return issued(c, ncclReduceScatter(x, x + at, my, ncclFloat, ncclSum, st->comm,
						   st->stream), "ncclReduceScatter");
	if (!ordered) {
		ncclGroupStart();
		for (int j = 0; j < size; off += counts[j], j++)
			if (counts[j] && ok(r))
				r = ncclReduce(x + off, x + off, counts[j], ncclFloat, ncclSum, j,
					       st->comm, st->stream);
		return group_end(c, r, "ncclReduce");
	}
	if (my * size > st->scratch_cap) {
		/* the collectives in flight may read the old scratch */
		if (finish(c, what) != 0)
			return -1;
		cudaFree(st->scratch);
		st->scratch = NULL;
		st->scratch_cap = 0;
		if (!cu_check(cudaMalloc(&st->scratch, my * size * sizeof(float)), "cudaMalloc"))
			return fail(c, what, cu.error);
		st->scratch_cap = my * size;
	}
	/* later pieces reuse the scratch after this one's sum: one stream */
	ncclGroupStart();
	for (int j = 0; j < size; off += counts[j], j++) {
		if (counts[j] && ok(r))
			r = ncclSend(x + off, counts[j], ncclFloat, j, st->comm, st->stream);
		if (my && ok(r))
			r = ncclRecv(st->scratch + (size_t)j * my, my, ncclFloat, j, st->comm,
				     st->stream);
	}
	if (group_end(c, r, "ncclSend/ncclRecv") != 0)
		return -1;
	if (my) {
		add_parts<<<cu_blocks(my), CU_THREADS, 0, st->stream>>>(x + at, st->scratch, my,
									 size);
		if (!cu_launched("add_parts"))
			return fail(c, what, cu.error);
	}
	return 0;
}

static int all_gather(dlt_comm *c, float *x, const size_t *counts)
{
	static const char what[] = "parameter all-gather";
	nccl_state *st = (nccl_state *)c->impl;
	int equal;
	size_t at = piece_at(c, counts, &equal), off = 0;
	ncclResult_t r = ncclSuccess;

	if (after_step(c, what) != 0)
		return -1;
	if (equal)	/* in place: this rank's piece is x + rank * count */
		return issued(c, ncclAllGather(x + at, x, counts[c->rank], ncclFloat, st->comm,
					       st->stream), "ncclAllGather");
	ncclGroupStart();
	for (int j = 0; j < c->size; off += counts[j], j++)
		if (counts[j] && ok(r))
			r = ncclBroadcast(x + off, x + off, counts[j], ncclFloat, j, st->comm,
					  st->stream);
	return group_end(c, r, "ncclBroadcast");
}

static int gather(dlt_comm *c, const float *mine, float *all, const size_t *counts, int root)
{
	static const char what[] = "gather";
	nccl_state *st = (nccl_state *)c->impl;
	int equal;
	size_t at = piece_at(c, counts, &equal), off = 0;
	ncclResult_t r = ncclSuccess;

	if (after_step(c, what) != 0)
		return -1;
	if (c->rank == root && counts[root] && mine != all + at &&
	    !cu_check(cudaMemcpyAsync(all + at, mine, counts[root] * sizeof(float),
				      cudaMemcpyDeviceToDevice, st->stream), "cudaMemcpyAsync"))
		return fail(c, what, cu.error);
	ncclGroupStart();
	for (int j = 0; j < c->size; off += counts[j], j++) {
		if (c->rank == root && j != root && counts[j] && ok(r))
			r = ncclRecv(all + off, counts[j], ncclFloat, j, st->comm, st->stream);
		if (c->rank != root && j == c->rank && counts[j] && ok(r))
			r = ncclSend(mine, counts[j], ncclFloat, root, st->comm, st->stream);
	}
	return group_end(c, r, "ncclSend/ncclRecv");
}

/* The sums done, and the step's stream ordered after them. */
static int finish(dlt_comm *c, const char *what)
{
	nccl_state *st = (nccl_state *)c->impl;
	if (!cu_check(cudaEventRecord(st->summed, st->stream), "cudaEventRecord"))
		return fail(c, what, cu.error);
	if (wait_for(c, st->summed, what) != 0)
		return -1;
	if (!cu_check(cudaStreamWaitEvent(cu.stream, st->summed, 0), "cudaStreamWaitEvent"))
		return fail(c, what, cu.error);
	return 0;
}

static int sum_wait(dlt_comm *c)
{
	return finish(c, "gradient sum");
}

static int sum_f64(dlt_comm *c, double *x, int n)
{
	nccl_state *st = (nccl_state *)c->impl;
	size_t bytes = (size_t)n * sizeof(double);
	if (n > st->f64_cap) {
		cudaFree(st->f64);
		st->f64 = NULL;
		if (!cu_check(cudaMalloc(&st->f64, bytes), "cudaMalloc"))
			return fail(c, "metrics sum", cu.error);
		st->f64_cap = n;
	}
	if (!cu_check(cudaMemcpyAsync(st->f64, x, bytes, cudaMemcpyHostToDevice, st->stream),
		      "cudaMemcpyAsync"))
		return fail(c, "metrics sum", cu.error);
	if (issued(c, ncclAllReduce(st->f64, st->f64, n, ncclDouble, ncclSum, st->comm,
				    st->stream), "ncclAllReduce") != 0)
		return -1;
	if (!cu_check(cudaMemcpyAsync(x, st->f64, bytes, cudaMemcpyDeviceToHost, st->stream),
		      "cudaMemcpyAsync"))
		return fail(c, "metrics sum", cu.error);
	return finish(c, "metrics sum");
}

static int broadcast(dlt_comm *c, void *p, size_t bytes)
{
	nccl_state *st = (nccl_state *)c->impl;
	if (!cu_check(cudaEventRecord(st->grads, cu.stream), "cudaEventRecord") ||
	    !cu_check(cudaStreamWaitEvent(st->stream, st->grads, 0), "cudaStreamWaitEvent"))
		return fail(c, "broadcast", cu.error);
	if (issued(c, ncclBroadcast(p, p, bytes, ncclUint8, 0, st->comm, st->stream),
		   "ncclBroadcast") != 0)
		return -1;
	return finish(c, "broadcast from rank 0");
}

/* NCCL has no job-wide abort: this rank's communicator goes, its peers
 * time out or see it gone, and the launcher ends the job when this
 * process exits. */
static void abort_job(dlt_comm *c, int status)
{
	nccl_state *st = (nccl_state *)c->impl;
	if (st->comm)
		ncclCommAbort(st->comm);
	st->comm = NULL;
}

static void close_comm(dlt_comm *c)
{
	nccl_state *st = (nccl_state *)c->impl;
	if (st->comm) {
		ncclCommFinalize(st->comm);
		if (wait_for(c, NULL, "ncclCommFinalize") == 0)
			ncclCommDestroy(st->comm);
	}
	cudaFree(st->f64);
	cudaFree(st->scratch);
	cudaEventDestroy(st->grads);
	cudaEventDestroy(st->summed);
	cudaStreamDestroy(st->stream);
	free(st);
}

extern "C" __attribute__((visibility("default"))) int
dlt_comm_nccl_id(unsigned char *id, char *why, size_t n)
{
	ncclUniqueId u;
	ncclResult_t r = ncclGetUniqueId(&u);
	static_assert(sizeof(u) == DLT_NCCL_ID_BYTES, "NCCL's unique id size");
	if (r != ncclSuccess) {
		snprintf(why, n, "ncclGetUniqueId: %s", ncclGetErrorString(r));
		return -1;
	}
	memcpy(id, &u, sizeof(u));
	return 0;
}

extern "C" __attribute__((visibility("default"))) int
dlt_comm_nccl_open(dlt_comm *c, int abi, int device, const unsigned char *id)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId u;
	nccl_state *st;

	if (abi != DLT_COMM_ABI)
		return fail(c, "libdlt-cuda.so", "of another dlt (comm ABI differs)");
	if (device != cu.device)
		return fail(c, "NCCL", "not the backend's device");
	if (!(st = (nccl_state *)calloc(1, sizeof(*st))))
		return fail(c, "NCCL", "out of memory");
	c->impl = st;
	if (!cu_check(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking),
		      "cudaStreamCreate") ||
	    !cu_check(cudaEventCreateWithFlags(&st->grads, cudaEventDisableTiming), "event") ||
	    !cu_check(cudaEventCreateWithFlags(&st->summed, cudaEventDisableTiming), "event") ||
	    !cu_check(cudaMalloc(&st->f64, 64 * sizeof(double)), "cudaMalloc")) {
		close_comm(c);
		return fail(c, "NCCL", cu.error);
	}
	st->f64_cap = 64;	/* the step's metrics: sum_f64 allocates no more */
	memcpy(&u, id, sizeof(u));
	cfg.blocking = 0;
	if (issued(c, ncclCommInitRankConfig(&st->comm, c->size, u, c->rank, &cfg),
		   "ncclCommInitRank") != 0) {
		char why[sizeof(c->why)];
		memcpy(why, c->why, sizeof(why));
		close_comm(c);
		memcpy(c->why, why, sizeof(why));
		return -1;
	}
	c->name = "nccl";
	c->sum_begin = sum_begin;
	c->progress = progress;
	c->sum_wait = sum_wait;
	c->sum_f64 = sum_f64;
	c->broadcast = broadcast;
	c->reduce_scatter = reduce_scatter;
	c->all_gather = all_gather;
	c->gather = gather;
	c->abort = abort_job;
	c->close = close_comm;
	return 0;
}
