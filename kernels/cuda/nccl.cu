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
 * ncclBroadcast, one a rank.  A pipeline's point to point runs on two
 * communicators of its own, each with its stream (lanes): traffic to
 * higher ranks on one, to lower ranks on the other, so that each carries
 * messages one way along the stages and no send waits behind a receive
 * that waits for it. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

#include "comm/comm.h"
#include "kernels/cuda/internal.h"

/* A direction of point to point: its communicator and stream, and an
 * event of that stream */
typedef struct nccl_lane {
	ncclComm_t comm;
	cudaStream_t stream;
	cudaEvent_t done;
} nccl_lane;

/* Sends to this rank waiting for its receive (NCCL pairs them only in
 * one group): a one-rank job's pipeline test, not a pipeline's traffic */
#define SELF_SENDS 8

typedef struct nccl_state {
	ncclComm_t comm;
	cudaStream_t stream;
	cudaEvent_t grads, summed;
	double *f64;		/* sum_f64's values on the device */
	int f64_cap;
	float *scratch;		/* an ordered reduce-scatter's pieces */
	size_t scratch_cap;
	/* p2p_open's: to higher ranks (and from lower ones), then the
	 * other way */
	nccl_lane lanes[2];
	int p2p;
	struct {
		const float *x;
		size_t n;
	} self[SELF_SENDS];
	int n_self;
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

/* Every communicator of the state, ended at once: a failed or late one
 * leaves the others waiting for it */
static void abort_all(nccl_state *st)
{
	if (st->comm)
		ncclCommAbort(st->comm);
	st->comm = NULL;
	for (int i = 0; i < 2; i++) {
		if (st->lanes[i].comm)
			ncclCommAbort(st->lanes[i].comm);
		st->lanes[i].comm = NULL;
	}
}

/* The state of the communicators' last calls: an error of any, else
 * ncclInProgress while any has not taken its call yet */
static ncclResult_t comms_state(nccl_state *st)
{
	ncclComm_t all[3] = { st->comm, st->lanes[0].comm, st->lanes[1].comm };
	ncclResult_t state = ncclSuccess;
	for (int i = 0; i < 3; i++) {
		ncclResult_t r;
		if (!all[i])
			continue;
		if (ncclCommGetAsyncError(all[i], &r) != ncclSuccess)
			return ncclInternalError;
		if (r != ncclSuccess && r != ncclInProgress)
			return r;
		if (r == ncclInProgress)
			state = r;
	}
	return state;
}

/* Waits until NCCL has taken the last call (a non-blocking comm returns
 * ncclInProgress while it has not) and ev, if any, has happened. */
static int wait_for(dlt_comm *c, cudaEvent_t ev, const char *what)
{
	nccl_state *st = (nccl_state *)c->impl;
	double t0 = now();
	for (;;) {
		ncclResult_t async = comms_state(st);
		cudaError_t e = cudaSuccess;
		if (async != ncclSuccess && async != ncclInProgress) {
			abort_all(st);
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
			abort_all(st);
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

/* stream (the comm's or a lane's) after what the step's stream has done
 * so far */
static int after_step_on(dlt_comm *c, cudaStream_t stream, const char *what)
{
	nccl_state *st = (nccl_state *)c->impl;
	if (!cu_check(cudaEventRecord(st->grads, cu.stream), "cudaEventRecord") ||
	    !cu_check(cudaStreamWaitEvent(stream, st->grads, 0), "cudaStreamWaitEvent"))
		return fail(c, what, cu.error);
	return 0;
}

static int after_step(dlt_comm *c, const char *what)
{
	return after_step_on(c, ((nccl_state *)c->impl)->stream, what);
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

/* What stream has begun done, with ev, and the step's stream ordered
 * after it. */
static int finish_on(dlt_comm *c, cudaStream_t stream, cudaEvent_t ev, const char *what)
{
	if (!cu_check(cudaEventRecord(ev, stream), "cudaEventRecord"))
		return fail(c, what, cu.error);
	if (wait_for(c, ev, what) != 0)
		return -1;
	if (!cu_check(cudaStreamWaitEvent(cu.stream, ev, 0), "cudaStreamWaitEvent"))
		return fail(c, what, cu.error);
	return 0;
}

/* The sums done, and the step's stream ordered after them. */
static int finish(dlt_comm *c, const char *what)
{
	nccl_state *st = (nccl_state *)c->impl;
	return finish_on(c, st->stream, st->summed, what);
}

/* The sums done, and the sends */
static int sum_wait(dlt_comm *c)
{
	nccl_state *st = (nccl_state *)c->impl;
	for (int i = 0; st->p2p && i < 2; i++)
		if (finish_on(c, st->lanes[i].stream, st->lanes[i].done, "pipeline send") != 0)
			return -1;
	if (st->n_self)
		return fail(c, "pipeline send", "a send to this rank was not received");
	return finish(c, "gradient sum");
}

/* The lane of traffic with rank peer: lanes[0] sends to higher ranks and
 * receives from lower ones */
static nccl_lane *lane_with(dlt_comm *c, int peer, int sending)
{
	return &((nccl_state *)c->impl)->lanes[(peer > c->rank) == sending ? 0 : 1];
}

/* The ranks of c's communicator of this color, ordered by key, as *out:
 * a non-blocking split leaves *out NULL until it is done and c's
 * communicator in progress until then, so the wait is on c */
static int comm_split(dlt_comm *c, int color, int key, ncclComm_t *out)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	if (issued(c, ncclCommSplit(((nccl_state *)c->impl)->comm, color, key, out, &cfg),
		   "ncclCommSplit") != 0)
		return -1;
	return *out ? 0 : fail(c, "ncclCommSplit", "no communicator made");
}

static int p2p_open(dlt_comm *c)
{
	nccl_state *st = (nccl_state *)c->impl;
	if (st->p2p)
		return 0;
	for (int i = 0; i < 2; i++) {
		nccl_lane *l = &st->lanes[i];
		if (!cu_check(cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking),
			      "cudaStreamCreate") ||
		    !cu_check(cudaEventCreateWithFlags(&l->done, cudaEventDisableTiming), "event"))
			return fail(c, "point to point", cu.error);
		/* the same ranks, in the same order */
		if (comm_split(c, 0, c->rank, &l->comm) != 0)
			return -1;
	}
	st->p2p = 1;
	return 0;
}

static int send(dlt_comm *c, const float *x, size_t n, int to)
{
	static const char what[] = "pipeline send";
	nccl_state *st = (nccl_state *)c->impl;
	nccl_lane *l = lane_with(c, to, 1);

	if (!st->p2p)
		return fail(c, what, "the comm's point to point is not open (p2p_open)");
	if (to == c->rank) {
		if (st->n_self == SELF_SENDS)
			return fail(c, what, "too many sends to this rank before its receive");
		st->self[st->n_self].x = x;
		st->self[st->n_self++].n = n;
		return 0;
	}
	if (after_step_on(c, l->stream, what) != 0)
		return -1;
	return issued(c, ncclSend(x, n, ncclFloat, to, l->comm, l->stream), "ncclSend");
}

/* The first send to this rank, received into x in one group with it */
static int recv_self(dlt_comm *c, float *x, size_t n)
{
	static const char what[] = "pipeline receive from this rank";
	nccl_state *st = (nccl_state *)c->impl;
	ncclResult_t r;

	if (!st->n_self || st->self[0].n != n)
		return fail(c, what, st->n_self ? "not the size of the send" : "nothing sent");
	if (after_step(c, what) != 0)
		return -1;
	ncclGroupStart();
	r = ncclSend(st->self[0].x, n, ncclFloat, c->rank, st->comm, st->stream);
	if (ok(r))
		r = ncclRecv(x, n, ncclFloat, c->rank, st->comm, st->stream);
	if (group_end(c, r, "ncclSend/ncclRecv") != 0)
		return -1;
	memmove(st->self, st->self + 1, --st->n_self * sizeof(st->self[0]));
	return finish(c, what);
}

static int recv(dlt_comm *c, float *x, size_t n, int from)
{
	static const char what[] = "pipeline receive";
	nccl_state *st = (nccl_state *)c->impl;
	nccl_lane *l = lane_with(c, from, 0);

	if (!st->p2p)
		return fail(c, what, "the comm's point to point is not open (p2p_open)");
	if (from == c->rank)
		return recv_self(c, x, n);
	/* x may still be read by the step's stream */
	if (after_step_on(c, l->stream, what) != 0 ||
	    issued(c, ncclRecv(x, n, ncclFloat, from, l->comm, l->stream), "ncclRecv") != 0)
		return -1;
	return finish_on(c, l->stream, l->done, what);
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

/* NCCL has no job-wide abort: this rank's communicators go, its peers
 * time out or see them gone, and the launcher ends the job when this
 * process exits. */
static void abort_job(dlt_comm *c, int status)
{
	abort_all((nccl_state *)c->impl);
}

static void close_comm(dlt_comm *c)
{
	nccl_state *st = (nccl_state *)c->impl;
	ncclComm_t all[3] = { st->comm, st->lanes[0].comm, st->lanes[1].comm };
	int any = 0, finalized;
	for (int i = 0; i < 3; i++)
		if (all[i]) {
			ncclCommFinalize(all[i]);
			any = 1;
		}
	finalized = !any || wait_for(c, NULL, "ncclCommFinalize") == 0;
	for (int i = 0; i < 3 && finalized; i++)
		if (all[i])
			ncclCommDestroy(all[i]);
	for (int i = 0; i < 2; i++) {
		if (st->lanes[i].done)
			cudaEventDestroy(st->lanes[i].done);
		if (st->lanes[i].stream)
			cudaStreamDestroy(st->lanes[i].stream);
	}
	cudaFree(st->f64);
	cudaFree(st->scratch);
	cudaEventDestroy(st->grads);
	cudaEventDestroy(st->summed);
	cudaStreamDestroy(st->stream);
	free(st);
}

/* The state of a comm of c's size and rank, its communicator not yet
 * made; -1 with the reason in c->why */
static int state_new(dlt_comm *c)
{
	nccl_state *st;
	if (!(st = (nccl_state *)calloc(1, sizeof(*st))))
		return fail(c, "NCCL", "out of memory");
	c->impl = st;
	if (!cu_check(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking),
		      "cudaStreamCreate") ||
	    !cu_check(cudaEventCreateWithFlags(&st->grads, cudaEventDisableTiming), "event") ||
	    !cu_check(cudaEventCreateWithFlags(&st->summed, cudaEventDisableTiming), "event") ||
	    !cu_check(cudaMalloc(&st->f64, 64 * sizeof(double)), "cudaMalloc")) {
		close_comm(c);
		c->impl = NULL;
		return fail(c, "NCCL", cu.error);
	}
	st->f64_cap = 64;	/* the step's metrics: sum_f64 allocates no more */
	return 0;
}

/* A comm whose communicator failed to start: closed, with why kept */
static int failed_start(dlt_comm *c)
{
	char why[sizeof(c->why)];
	memcpy(why, c->why, sizeof(why));
	close_comm(c);
	c->impl = NULL;
	memcpy(c->why, why, sizeof(why));
	return -1;
}

static int split(dlt_comm *c, int color, int key, dlt_comm *out);

static void set_entries(dlt_comm *c)
{
	c->name = "nccl";
	c->sum_begin = sum_begin;
	c->progress = progress;
	c->sum_wait = sum_wait;
	c->sum_f64 = sum_f64;
	c->broadcast = broadcast;
	c->reduce_scatter = reduce_scatter;
	c->all_gather = all_gather;
	c->gather = gather;
	c->p2p_open = p2p_open;
	c->send = send;
	c->recv = recv;
	c->split = split;
	c->abort = abort_job;
	c->close = close_comm;
}

static int split(dlt_comm *c, int color, int key, dlt_comm *out)
{
	nccl_state *g;

	out->timeout = c->timeout;
	if (state_new(out) != 0) {
		memcpy(c->why, out->why, sizeof(c->why));
		return -1;
	}
	g = (nccl_state *)out->impl;
	if (comm_split(c, color, key, &g->comm) != 0) {
		failed_start(out);
		return -1;
	}
	if (wait_for(out, NULL, "ncclCommSplit") != 0 ||
	    ncclCommUserRank(g->comm, &out->rank) != ncclSuccess ||
	    ncclCommCount(g->comm, &out->size) != ncclSuccess) {
		if (!out->why[0])
			fail(out, "ncclCommSplit", "the group's rank and size unknown");
		failed_start(out);
		memcpy(c->why, out->why, sizeof(c->why));
		return -1;
	}
	set_entries(out);
	return 0;
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
	if (state_new(c) != 0)
		return -1;
	st = (nccl_state *)c->impl;
	memcpy(&u, id, sizeof(u));
	cfg.blocking = 0;
	if (issued(c, ncclCommInitRankConfig(&st->comm, c->size, u, c->rank, &cfg),
		   "ncclCommInitRank") != 0)
		return failed_start(c);
	set_entries(c);
	return 0;
}
