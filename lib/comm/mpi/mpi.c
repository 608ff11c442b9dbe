/* dlt's comm over MPI (lib/comm/comm.h), for CPU ranks: libdlt-mpi.so,
 * the one file built with mpicc, opened by jobs of several ranks only.
 *
 * Sums are MPI_Iallreduce, so that backward goes on while they run; the
 * waits poll MPI_Testall against the comm's deadline instead of blocking
 * in MPI_Wait, which would hang for good on a rank that stalls.  ZeRO's
 * collectives are their non-blocking kinds too: the reduce-scatter in
 * rank order an MPI_Ialltoallv of the pieces into scratch memory, added
 * up when it is done. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "comm/comm.h"

/* Requests in flight at most: the buckets of one step and their pieces */
#define MAX_REQ 512
/* Heartbeats a rank may have in flight: the ranks move in lockstep, so
 * none is more than a sync point ahead of another */
#define MAX_BEATS 4

/* A wait that times out names the rank that stalls: at every sync point
 * (the waits of sum_wait, sum_f64 and broadcast, which every rank reaches
 * in the same order) each rank tells rank 0 the number of the point, and
 * rank 0 tells every rank, on a communicator of their own.  Rank 0 then
 * sees who is behind; the others see whether rank 0 is.  A rank can stop
 * after it told its point, inside the wait, where a large sum still needs
 * its part: so a rank that waits tells its point again every beat_every()
 * seconds, and a peer not heard from in stale_after() seconds stalls too. */
/* What a collective leaves to do when its request is done: its count
 * and displacement arrays to free (MPI reads them until then), and for a
 * reduce-scatter, parts pieces of n floats in scratch to add up into out
 * in rank order (one part: a copy). */
typedef struct pending {
	int *arrays;
	float *out;
	size_t at, n;		/* the pieces: scratch + at */
	int parts;
} pending;

typedef struct mpi_state {
	MPI_Request req[MAX_REQ];
	int n_req;
	pending pend[MAX_REQ];
	int n_pend;
	float *scratch;		/* the pieces received, for pending's sums */
	size_t scratch_cap, scratch_used;
	int inited;		/* MPI_Init was ours, so MPI_Finalize is */
	/* the ranks': MPI_COMM_WORLD, or a group of them (split) */
	MPI_Comm world;
	MPI_Comm hb;
	long long point;	/* the sync points this rank reached */
	long long *seen;	/* rank 0: each rank's last point; others: [0] rank 0's */
	long long *inbox;	/* a posted receive per peer */
	MPI_Comm agree;		/* agree()'s */
	long long ops;		/* the collectives begun */
	long long *ops_all;	/* agree()'s every rank's (kind, size, number) */
	double *heard;		/* when each peer's last beat was read */
	double beat_at;		/* when this rank last told its point */
	MPI_Request *recv;
	long long beat[MAX_BEATS];
	MPI_Request *beat_req;	/* MAX_BEATS slots of a send per peer */
} mpi_state;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double beat_every(const dlt_comm *c)
{
	return c->timeout / 20;
}

static double stale_after(const dlt_comm *c)
{
	return c->timeout / 4;
}

static int fail(dlt_comm *c, const char *what, int err)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;
	MPI_Error_string(err, msg, &len);
	snprintf(c->why, sizeof(c->why), "%s: %.*s", what, len, msg);
	return -1;
}

/* The peers of this rank's heartbeats: all others for rank 0, else rank 0. */
static int peers(const dlt_comm *c)
{
	return c->rank == 0 ? c->size - 1 : 1;
}

static int peer(const dlt_comm *c, int i)
{
	return c->rank == 0 ? i + 1 : 0;
}

/* This rank reached sync point st->point: tell the peers.  A beat whose
 * slot is still being sent from MAX_BEATS points ago is left out: that
 * only makes the name less sure. */
static void beat(dlt_comm *c)
{
	mpi_state *st = c->impl;
	int k = (int)(st->point % MAX_BEATS), n = peers(c), done = 1;
	MPI_Request *req = st->beat_req + (size_t)k * n;

	MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
	if (!done)
		return;
	st->beat_at = now();
	st->beat[k] = st->point;	/* one buffer for the peers: sends only read it */
	for (int i = 0; i < n; i++)
		MPI_Isend(&st->beat[k], 1, MPI_LONG_LONG, peer(c, i), 0, st->hb, &req[i]);
}

/* The heartbeats that came: seen[] and heard[] up to date. */
static void read_beats(dlt_comm *c)
{
	mpi_state *st = c->impl;
	for (int i = 0; i < peers(c); i++) {
		int done = 0;
		while (MPI_Test(&st->recv[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
			st->heard[i] = now();
			if (st->inbox[i] > st->seen[i])
				st->seen[i] = st->inbox[i];
			MPI_Irecv(&st->inbox[i], 1, MPI_LONG_LONG, peer(c, i), 0, st->hb,
				  &st->recv[i]);
		}
	}
}

/* Why a wait timed out, with the ranks behind this one's sync point or
 * silent in it. */
static void name_stalled(dlt_comm *c, const char *what)
{
	mpi_state *st = c->impl;
	char who[256] = "";
	size_t len = 0;
	int n = 0;

	read_beats(c);
	for (int i = 0; i < peers(c) && len < sizeof(who) - 16; i++)
		if (st->seen[i] < st->point || now() - st->heard[i] > stale_after(c)) {
			len += (size_t)snprintf(who + len, sizeof(who) - len, "%s%d",
						n ? ", " : "", peer(c, i));
			n++;
		}
	if (n)
		snprintf(c->why, sizeof(c->why), "%s: no answer from rank%s %s in %g s "
			 "(it died or stalls)", what, n > 1 ? "s" : "", who, c->timeout);
	else
		snprintf(c->why, sizeof(c->why), "%s: no answer from every rank in %g s "
			 "(a rank died or stalls)", what, c->timeout);
}

/* Every request of reqs done, or the deadline passed: the ranks that
 * have not joined died or stall.  Polls, at first busily (spins times),
 * then every 100 us, which leaves the cores to the ranks that are still
 * computing, and beats while it waits.  The ranks after 0 wait a little
 * longer, so that rank 0, which can name the rank that stalls, is the
 * one that ends the job. */
static int wait_reqs(dlt_comm *c, int n, MPI_Request *reqs, const char *what, long spins)
{
	mpi_state *st = c->impl;
	double t0 = now(), limit = c->timeout + (c->rank ? 2 + c->timeout / 10 : 0);
	for (long spin = 0;; spin++) {
		int done = 0, err = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
		if (err != MPI_SUCCESS)
			return fail(c, what, err);
		if (done)
			return 0;
		if (now() - t0 > limit) {
			name_stalled(c, what);
			return -1;
		}
		if (spin > spins) {
			struct timespec t = { 0, 100000 };
			nanosleep(&t, NULL);
			if (now() - st->beat_at > beat_every(c)) {
				read_beats(c);
				beat(c);
			}
		}
	}
}

static int wait_all(dlt_comm *c, const char *what)
{
	mpi_state *st = c->impl;
	if (wait_reqs(c, st->n_req, st->req, what, 1000) != 0)
		return -1;
	st->n_req = 0;
	return 0;
}

/* Before each collective the ranks agree on what it is: its kind, its
 * size and its number since the start, gathered from every rank on a
 * communicator of their own.  A rank that took another path (a micro-
 * batch more, a step skipped alone) would pair its collective with
 * another one of the others, which MPI does not survive (a read of the
 * wrong size, a crash); this names it instead. */
enum { OP_SUM = 1, OP_METRICS, OP_BROADCAST, OP_SCATTER, OP_GATHER_ALL, OP_GATHER };

static const char *op_name(long long kind)
{
	static const char *const names[] = { "?", "a gradient sum", "a metrics sum",
					     "a broadcast", "a reduce-scatter", "an all-gather",
					     "a gather" };
	return kind >= OP_SUM && kind <= OP_GATHER ? names[kind] : names[0];
}

static int agree(dlt_comm *c, int kind, long long n, const char *what)
{
	mpi_state *st = c->impl;
	long long mine[3] = { kind, n, ++st->ops };
	const long long *ops = st->ops_all, *best = ops;
	MPI_Request r;
	int most = 0, err = MPI_Iallgather(mine, 3, MPI_LONG_LONG, st->ops_all, 3, MPI_LONG_LONG,
				 st->agree, &r);
	if (err != MPI_SUCCESS)
		return fail(c, what, err);
	/* busy longer than for a sum: the ranks reach it within a few
	 * microseconds of each other, and a sleep of 100 us each time cost
	 * the CNN 5 % at 2 ranks */
	if (wait_reqs(c, 1, &r, what, 100000) != 0)
		return -1;
	/* the collective most ranks make (ties: the lowest rank's, rank 0's
	 * at 2 ranks) is the job's; the first rank that makes another is
	 * named, by every rank alike */
	for (int j = 0; j < c->size; j++) {
		int same = 0;
		for (int k = 0; k < c->size; k++)
			same += !memcmp(ops + 3 * j, ops + 3 * k, 3 * sizeof(*ops));
		if (same > most) {
			most = same;
			best = ops + 3 * j;
		}
	}
	for (int j = 0; j < c->size; j++) {
		const long long *o = ops + 3 * j;
		if (!memcmp(o, best, 3 * sizeof(*o)))
			continue;
		snprintf(c->why, sizeof(c->why), "%s: rank %d makes another collective: its "
			 "number %lld is %s of %lld values, the other ranks' %s of %lld (it "
			 "took another path: a micro-batch more, a step of its own?)",
			 what, j, o[2], op_name(o[0]), o[1], op_name(best[0]), best[1]);
		return -1;
	}
	return 0;
}

/* The requests done: the pending sums added up, their memory free. */
static void done_all(dlt_comm *c)
{
	mpi_state *st = c->impl;
	st->n_req = 0;
	for (int i = 0; i < st->n_pend; i++) {
		pending *p = &st->pend[i];
		const float *in = st->scratch + p->at;
		if (p->out && p->n) {	/* a rank with no piece may have no scratch */
			memcpy(p->out, in, p->n * sizeof(float));
			for (int j = 1; j < p->parts; j++)
				for (size_t k = 0; k < p->n; k++)
					p->out[k] += in[(size_t)j * p->n + k];
		}
		free(p->arrays);
	}
	st->n_pend = 0;
	st->scratch_used = 0;
}

/* Every request done, the deadline kept: what a collective does when
 * there is no room for its own */
static int wait_done(dlt_comm *c, const char *what)
{
	if (wait_all(c, what) != 0)
		return -1;
	done_all(c);
	return 0;
}

/* Room for one more request */
static int room(dlt_comm *c, const char *what)
{
	mpi_state *st = c->impl;
	return st->n_req < MAX_REQ && st->n_pend < MAX_REQ ? 0 : wait_done(c, what);
}

/* n floats of scratch for a collective begun now: after the ones in
 * flight have ended when there is not room enough */
static float *scratch(dlt_comm *c, size_t n, size_t *at, const char *what)
{
	mpi_state *st = c->impl;
	static float none;	/* a rank with no piece here receives nothing */
	if (!n) {
		*at = st->scratch_used;
		return &none;
	}
	if (st->scratch_cap - st->scratch_used < n) {
		if (st->n_req && wait_done(c, what) != 0)
			return NULL;
		if (st->scratch_cap < n) {
			float *p = realloc(st->scratch, n * sizeof(float));
			if (!p) {
				snprintf(c->why, sizeof(c->why), "%s: out of memory for %zu floats",
					 what, n);
				return NULL;
			}
			st->scratch = p;
			st->scratch_cap = n;
		}
	}
	*at = st->scratch_used;
	st->scratch_used += n;
	return st->scratch + *at;
}

/* The int arrays of a v-collective: counts and displacements, 2 of the
 * size each (free'd when done); NULL when a piece is too large for MPI */
static int *counts_of(dlt_comm *c, const size_t *counts, const char *what)
{
	int *a = malloc(4 * (size_t)c->size * sizeof(int));
	size_t off = 0;
	if (!a) {
		snprintf(c->why, sizeof(c->why), "%s: out of memory", what);
		return NULL;
	}
	for (int j = 0; j < c->size; j++) {
		if (counts[j] > INT_MAX || off > INT_MAX) {
			snprintf(c->why, sizeof(c->why), "%s: a piece beyond 2^31 floats", what);
			free(a);
			return NULL;
		}
		a[j] = (int)counts[j];
		a[c->size + j] = (int)off;
		off += counts[j];
	}
	return a;
}

/* The values of a collective cut into counts */
static long long values(const dlt_comm *c, const size_t *counts)
{
	long long n = 0;
	for (int j = 0; j < c->size; j++)
		n += (long long)counts[j];
	return n;
}

/* A collective begun: its request and what is left to do when it is done */
static void begun(mpi_state *st, int *arrays, float *out, size_t at, size_t n, int parts)
{
	st->n_req++;
	st->pend[st->n_pend++] = (pending){ arrays, out, at, n, parts };
}

static int reduce_scatter(dlt_comm *c, float *x, const size_t *counts, int ordered)
{
	static const char what[] = "gradient reduce-scatter";
	mpi_state *st = c->impl;
	size_t my = counts[c->rank], at = 0, off = 0;
	int *a, err, size = c->size;
	float *in;

	for (int j = 0; j < c->rank; j++)
		off += counts[j];
	if (agree(c, OP_SCATTER, values(c, counts), what) != 0 || room(c, what) != 0 ||
	    !(a = counts_of(c, counts, what)))
		return -1;
	if (my > (size_t)(INT_MAX / (ordered ? size : 1))) {
		free(a);
		snprintf(c->why, sizeof(c->why), "%s: a piece beyond 2^31 floats", what);
		return -1;
	}
	if (!(in = scratch(c, ordered ? my * size : my, &at, what))) {
		free(a);
		return -1;
	}
	if (ordered) {
		/* every rank's piece of this rank's place, in rank order */
		for (int j = 0; j < size; j++) {
			a[2 * size + j] = (int)my;
			a[3 * size + j] = (int)my * j;
		}
		err = MPI_Ialltoallv(x, a, a + size, MPI_FLOAT, in, a + 2 * size, a + 3 * size,
				     MPI_FLOAT, st->world, &st->req[st->n_req]);
	} else {
		err = MPI_Ireduce_scatter(x, in, a, MPI_FLOAT, MPI_SUM, st->world,
					  &st->req[st->n_req]);
	}
	if (err != MPI_SUCCESS) {
		free(a);
		return fail(c, ordered ? "MPI_Ialltoallv" : "MPI_Ireduce_scatter", err);
	}
	begun(st, a, x + off, at, my, ordered ? size : 1);
	return 0;
}

static int all_gather(dlt_comm *c, float *x, const size_t *counts)
{
	static const char what[] = "parameter all-gather";
	mpi_state *st = c->impl;
	int *a, err;

	if (agree(c, OP_GATHER_ALL, values(c, counts), what) != 0 || room(c, what) != 0 ||
	    !(a = counts_of(c, counts, what)))
		return -1;
	err = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, a, a + c->size, MPI_FLOAT,
			      st->world, &st->req[st->n_req]);
	if (err != MPI_SUCCESS) {
		free(a);
		return fail(c, "MPI_Iallgatherv", err);
	}
	begun(st, a, NULL, 0, 0, 0);
	return 0;
}

static int gather(dlt_comm *c, const float *mine, float *all, const size_t *counts, int root)
{
	static const char what[] = "gather";
	mpi_state *st = c->impl;
	int *a, err, me = c->rank;

	if (agree(c, OP_GATHER, values(c, counts), what) != 0 || room(c, what) != 0 ||
	    !(a = counts_of(c, counts, what)))
		return -1;
	err = MPI_Igatherv(me == root && mine == all + a[c->size + me] ? MPI_IN_PLACE : mine,
			   a[me], MPI_FLOAT, all, a, a + c->size, MPI_FLOAT, root,
			   st->world, &st->req[st->n_req]);
	if (err != MPI_SUCCESS) {
		free(a);
		return fail(c, "MPI_Igatherv", err);
	}
	begun(st, a, NULL, 0, 0, 0);
	return 0;
}

static int sum_begin(dlt_comm *c, float *x, size_t n)
{
	mpi_state *st = c->impl;
	if (agree(c, OP_SUM, (long long)n, "gradient sum") != 0)
		return -1;
	while (n > 0) {
		int k = n > INT_MAX ? INT_MAX : (int)n, err;
		if (room(c, "gradient sum") != 0)
			return -1;
		err = MPI_Iallreduce(MPI_IN_PLACE, x, k, MPI_FLOAT, MPI_SUM, st->world,
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
		done_all(c);
	return 0;
}

/* A wait that every rank reaches, in the same order. */
static int sync_point(dlt_comm *c, const char *what)
{
	mpi_state *st = c->impl;
	st->point++;
	beat(c);
	return wait_done(c, what);
}

static int sum_wait(dlt_comm *c)
{
	return sync_point(c, "gradient sum");
}

static int sum_f64(dlt_comm *c, double *x, int n)
{
	mpi_state *st = c->impl;
	int err;
	if (agree(c, OP_METRICS, n, "metrics sum") != 0 || room(c, "metrics sum") != 0)
		return -1;
	err = MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, st->world,
			     &st->req[st->n_req]);
	if (err != MPI_SUCCESS)
		return fail(c, "MPI_Iallreduce", err);
	st->n_req++;
	return sync_point(c, "metrics sum");
}

static int broadcast(dlt_comm *c, void *p, size_t bytes)
{
	mpi_state *st = c->impl;
	char *b = p;
	if (agree(c, OP_BROADCAST, (long long)bytes, "broadcast from rank 0") != 0)
		return -1;
	while (bytes > 0) {
		int k = bytes > INT_MAX ? INT_MAX : (int)bytes, err;
		if (room(c, "broadcast from rank 0") != 0)
			return -1;
		err = MPI_Ibcast(b, k, MPI_BYTE, 0, st->world, &st->req[st->n_req]);
		if (err != MPI_SUCCESS)
			return fail(c, "MPI_Ibcast", err);
		st->n_req++;
		if (sync_point(c, "broadcast from rank 0") != 0)
			return -1;
		b += k;
		bytes -= (size_t)k;
	}
	return 0;
}

/* A pipeline's messages: tag 1 of the world, apart from the beats' own
 * communicator; MPI keeps their order between two ranks */
enum { TAG_PIPE = 1 };

static int send(dlt_comm *c, const float *x, size_t n, int to)
{
	mpi_state *st = c->impl;
	while (n > 0) {
		int k = n > INT_MAX ? INT_MAX : (int)n, err;
		if (room(c, "pipeline send") != 0)
			return -1;
		err = MPI_Isend(x, k, MPI_FLOAT, to, TAG_PIPE, st->world, &st->req[st->n_req]);
		if (err != MPI_SUCCESS)
			return fail(c, "MPI_Isend", err);
		st->n_req++;
		x += k;
		n -= (size_t)k;
	}
	return 0;
}

static int recv(dlt_comm *c, float *x, size_t n, int from)
{
	mpi_state *st = c->impl;
	while (n > 0) {
		int k = n > INT_MAX ? INT_MAX : (int)n;
		MPI_Request r;
		int err = MPI_Irecv(x, k, MPI_FLOAT, from, TAG_PIPE, st->world, &r);
		if (err != MPI_SUCCESS)
			return fail(c, "MPI_Irecv", err);
		if (wait_reqs(c, 1, &r, "pipeline receive", 1000) != 0)
			return -1;
		x += k;
		n -= (size_t)k;
	}
	return 0;
}

static int open_on(dlt_comm *c, MPI_Comm world);

/* The ranks of c's color, ordered by key, as out: a communicator split
 * from c's, with sync points and agreement of its own */
static int split(dlt_comm *c, int color, int key, dlt_comm *out)
{
	mpi_state *st = c->impl;
	MPI_Comm group;
	int err = MPI_Comm_split(st->world, color, key, &group);
	if (err != MPI_SUCCESS)
		return fail(c, "MPI_Comm_split", err);
	MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN);
	MPI_Comm_rank(group, &out->rank);
	MPI_Comm_size(group, &out->size);
	out->timeout = c->timeout;
	if (open_on(out, group) != 0) {
		snprintf(c->why, sizeof(c->why), "%s", out->why);
		if (!out->impl)
			MPI_Comm_free(&group);
		return -1;
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
	/* the job ended together: the beats still posted are nobody's */
	for (int i = 0; st->recv && i < peers(c); i++) {
		if (st->recv[i] == MPI_REQUEST_NULL)
			continue;
		MPI_Cancel(&st->recv[i]);
		MPI_Wait(&st->recv[i], MPI_STATUS_IGNORE);
	}
	if (st->beat_req)
		MPI_Waitall(MAX_BEATS * peers(c), st->beat_req, MPI_STATUSES_IGNORE);
	if (st->hb != MPI_COMM_NULL)
		MPI_Comm_free(&st->hb);
	if (st->agree != MPI_COMM_NULL)
		MPI_Comm_free(&st->agree);
	if (st->world != MPI_COMM_WORLD && st->world != MPI_COMM_NULL)
		MPI_Comm_free(&st->world);
	if (st->inited)
		MPI_Finalize();
	free(st->seen);
	free(st->inbox);
	free(st->heard);
	free(st->ops_all);
	free(st->recv);
	free(st->beat_req);
	for (int i = 0; i < st->n_pend; i++)
		free(st->pend[i].arrays);
	free(st->scratch);
	free(st);
}

__attribute__((visibility("default"))) int dlt_comm_mpi_open(dlt_comm *c, int abi)
{
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
	if (open_on(c, MPI_COMM_WORLD) != 0) {
		if (!inited)
			MPI_Finalize();
		return -1;
	}
	((mpi_state *)c->impl)->inited = !inited;
	return 0;
}

/* The state of a comm over world, c's rank and size its own */
static int open_on(dlt_comm *c, MPI_Comm world)
{
	mpi_state *st;
	int err, n;

	if (!(st = calloc(1, sizeof(*st)))) {
		snprintf(c->why, sizeof(c->why), "out of memory");
		return -1;
	}
	st->world = world;
	st->hb = st->agree = MPI_COMM_NULL;
	c->name = "mpi";
	c->impl = st;
	n = peers(c);
	st->seen = calloc(n, sizeof(*st->seen));
	st->inbox = calloc(n, sizeof(*st->inbox));
	st->heard = calloc(n, sizeof(*st->heard));
	st->ops_all = calloc(3 * (size_t)c->size, sizeof(*st->ops_all));
	st->recv = malloc(n * sizeof(*st->recv));
	st->beat_req = malloc((size_t)n * MAX_BEATS * sizeof(*st->beat_req));
	for (int i = 0; st->recv && i < n; i++)
		st->recv[i] = MPI_REQUEST_NULL;
	for (int i = 0; st->beat_req && i < n * MAX_BEATS; i++)
		st->beat_req[i] = MPI_REQUEST_NULL;
	if (!st->seen || !st->inbox || !st->heard || !st->ops_all || !st->recv || !st->beat_req) {
		snprintf(c->why, sizeof(c->why), "out of memory");
		close_comm(c);
		return -1;
	}
	if ((err = MPI_Comm_dup(world, &st->hb)) != MPI_SUCCESS ||
	    (err = MPI_Comm_dup(world, &st->agree)) != MPI_SUCCESS) {
		fail(c, "MPI_Comm_dup", err);
		close_comm(c);
		return -1;
	}
	for (int i = 0; i < n; i++)
		MPI_Irecv(&st->inbox[i], 1, MPI_LONG_LONG, peer(c, i), 0, st->hb, &st->recv[i]);
	c->sum_begin = sum_begin;
	c->progress = progress;
	c->sum_wait = sum_wait;
	c->sum_f64 = sum_f64;
	c->broadcast = broadcast;
	c->reduce_scatter = reduce_scatter;
	c->all_gather = all_gather;
	c->gather = gather;
	c->send = send;
	c->recv = recv;
	c->split = split;
	c->abort = abort_job;
	c->close = close_comm;
	return 0;
}
