/* dlt's comm over MPI (lib/comm/comm.h), for CPU ranks: libdlt-mpi.so,
 * the one file built with mpicc, opened by jobs of several ranks only.
 *
 * Sums are MPI_Iallreduce, so that backward goes on while they run; the
 * waits poll MPI_Testall against the comm's deadline instead of blocking
 * in MPI_Wait, which would hang for good on a rank that stalls. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "comm/comm.h"

/* Requests in flight at most: the buckets of one step and their pieces */
#define MAX_REQ 512

typedef struct mpi_state {
	MPI_Request req[MAX_REQ];
	int n_req;
	int inited;		/* MPI_Init was ours, so MPI_Finalize is */
} mpi_state;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int fail(dlt_comm *c, const char *what, int err)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;
	MPI_Error_string(err, msg, &len);
	snprintf(c->why, sizeof(c->why), "%s: %.*s", what, len, msg);
	return -1;
}

/* Every request done, or the deadline passed: the ranks that have not
 * joined died or stall.  Polls, at first busily, then every 100 us,
 * which leaves the cores to the ranks that are still computing. */
static int wait_all(dlt_comm *c, const char *what)
{
	mpi_state *st = c->impl;
	double t0 = now();
	for (long spin = 0;; spin++) {
		int done = 0, err = MPI_Testall(st->n_req, st->req, &done, MPI_STATUSES_IGNORE);
		if (err != MPI_SUCCESS)
			return fail(c, what, err);
		if (done) {
			st->n_req = 0;
			return 0;
		}
		if (now() - t0 > c->timeout) {
			snprintf(c->why, sizeof(c->why), "%s: no answer from every rank in %g s "
				 "(a rank died or stalls)", what, c->timeout);
			return -1;
		}
		if (spin > 1000) {
			struct timespec t = { 0, 100000 };
			nanosleep(&t, NULL);
		}
	}
}

static int sum_begin(dlt_comm *c, float *x, size_t n)
{
	mpi_state *st = c->impl;
	while (n > 0) {
		int k = n > INT_MAX ? INT_MAX : (int)n, err;
		if (st->n_req == MAX_REQ && wait_all(c, "gradient sum") != 0)
			return -1;
		err = MPI_Iallreduce(MPI_IN_PLACE, x, k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
				     &st->req[st->n_req]);
		if (err != MPI_SUCCESS)
			return fail(c, "MPI_Iallreduce", err);
		st->n_req++;
		x += k;
		n -= (size_t)k;
	}
	return 0;
}

static int progress(dlt_comm *c)
{
	mpi_state *st = c->impl;
	int done = 0, err;
	if (!st->n_req)
		return 0;
	err = MPI_Testall(st->n_req, st->req, &done, MPI_STATUSES_IGNORE);
	if (err != MPI_SUCCESS)
		return fail(c, "MPI_Testall", err);
	if (done)
		st->n_req = 0;
	return 0;
}

static int sum_wait(dlt_comm *c)
{
	return wait_all(c, "gradient sum");
}

static int sum_f64(dlt_comm *c, double *x, int n)
{
	mpi_state *st = c->impl;
	int err = MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
				 &st->req[st->n_req]);
	if (err != MPI_SUCCESS)
		return fail(c, "MPI_Iallreduce", err);
	st->n_req++;
	return wait_all(c, "metrics sum");
}

static int broadcast(dlt_comm *c, void *p, size_t bytes)
{
	mpi_state *st = c->impl;
	char *b = p;
	while (bytes > 0) {
		int k = bytes > INT_MAX ? INT_MAX : (int)bytes;
		int err = MPI_Ibcast(b, k, MPI_BYTE, 0, MPI_COMM_WORLD, &st->req[st->n_req]);
		if (err != MPI_SUCCESS)
			return fail(c, "MPI_Ibcast", err);
		st->n_req++;
		if (wait_all(c, "broadcast from rank 0") != 0)
			return -1;
		b += k;
		bytes -= (size_t)k;
	}
	return 0;
}

static void abort_job(dlt_comm *c, int status)
{
	MPI_Abort(MPI_COMM_WORLD, status);
}

static void close_comm(dlt_comm *c)
{
	mpi_state *st = c->impl;
	if (st->inited)
		MPI_Finalize();
	free(st);
}

__attribute__((visibility("default"))) int dlt_comm_mpi_open(dlt_comm *c, int abi)
{
	mpi_state *st;
	int inited = 0, provided, rank, size, err;

	if (abi != DLT_COMM_ABI) {
		snprintf(c->why, sizeof(c->why), "libdlt-mpi.so is of another dlt (ABI %d, not %d)",
			 DLT_COMM_ABI, abi);
		return -1;
	}
	MPI_Initialized(&inited);
	/* only the training thread calls MPI */
	if (!inited && (err = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)))
		return fail(c, "MPI_Init_thread", err);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank != c->rank || size != c->size) {
		snprintf(c->why, sizeof(c->why), "MPI says rank %d of %d, the launcher's "
			 "environment rank %d of %d", rank, size, c->rank, c->size);
		if (!inited)
			MPI_Finalize();
		return -1;
	}
	if (!(st = calloc(1, sizeof(*st)))) {
		snprintf(c->why, sizeof(c->why), "out of memory");
		return -1;
	}
	st->inited = !inited;
	c->name = "mpi";
	c->impl = st;
	c->sum_begin = sum_begin;
	c->progress = progress;
	c->sum_wait = sum_wait;
	c->sum_f64 = sum_f64;
	c->broadcast = broadcast;
	c->abort = abort_job;
	c->close = close_comm;
	return 0;
}
