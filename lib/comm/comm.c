#define _GNU_SOURCE	/* memfd_create */
/* The ranks of a job from its launcher's environment, the comm's opening
 * (from the shared object of its kind), and the gradient buckets. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm.h"
#include "kernels/kernels.h"
#include "util/util.h"

/* A launcher's variable: -1 when absent, DLT_EINPUT when not a count. */
static int env_int(const char *name, long long min)
{
	const char *s = getenv(name);
	long long v;
	if (!s || !*s)
		return -1;
	if (dlt_parse_i64(s, min, 1 << 20, &v, name) < 0)
		return DLT_EINPUT;
	return (int)v;
}

/* SLURM_STEP_TASKS_PER_NODE is "2", "2(x3)" or "3,2": the tasks of this
 * step on the first nodes, which is as near as the variables get to
 * this node's count when the nodes are not all alike. */
static int slurm_local_size(void)
{
	const char *s = getenv("SLURM_STEP_TASKS_PER_NODE");
	int n = s ? atoi(s) : 0;
	return n > 0 ? n : 1;
}

void dlt_batch_job_get(dlt_batch_job *j)
{
	const char *id = getenv("SLURM_JOB_ID"), *array = getenv("SLURM_ARRAY_JOB_ID"),
		   *task = getenv("SLURM_ARRAY_TASK_ID");
	int n = env_int("SLURM_RESTART_COUNT", 0);

	memset(j, 0, sizeof(*j));
	/* a task of an array is known by its array's id and index, as
	 * squeue shows it; its own SLURM_JOB_ID is another number */
	if (array && *array && task && *task)
		snprintf(j->id, sizeof(j->id), "%.30s_%.30s", array, task);
	else if (id)
		snprintf(j->id, sizeof(j->id), "%.60s", id);
	j->restarts = n > 0 ? n : 0;
}

int dlt_rank_info_get(dlt_rank_info *r)
{
	static const struct {
		const char *launcher, *size, *rank, *local_rank, *local_size;
	} kinds[] = {
		/* dlt-train --gpus N sets these for its children */
		{ "dlt-train", "DLT_WORLD_SIZE", "DLT_RANK", "DLT_LOCAL_RANK", "DLT_LOCAL_SIZE" },
		/* mpirun before srun: mpirun may run inside a Slurm allocation */
		{ "mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
		  "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE" },
		/* the step's variables, which a batch script's own shell has not */
		{ "srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID", NULL },
	};
	static const char *const comms[] = { "nccl", "mpi" };
	const char *comm = getenv("DLT_COMM");

	memset(r, 0, sizeof(*r));
	r->size = r->local_size = 1;
	r->launcher = "";
	r->comm = "";
	for (size_t i = 0; comm && *comm && i < sizeof(comms) / sizeof(comms[0]); i++)
		if (!strcmp(comm, comms[i]))
			r->comm = comms[i];
	if (comm && *comm && !*r->comm)
		return dlt_error(DLT_EINPUT, "DLT_COMM: '%s' is not nccl or mpi", comm);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		int size = env_int(kinds[i].size, 1), rank, local, local_size;
		if (size == DLT_EINPUT)
			return size;
		if (size < 0)
			continue;
		rank = env_int(kinds[i].rank, 0);
		local = env_int(kinds[i].local_rank, 0);
		local_size = kinds[i].local_size ? env_int(kinds[i].local_size, 1)
						 : slurm_local_size();
		if (rank == DLT_EINPUT || local == DLT_EINPUT || local_size == DLT_EINPUT)
			return DLT_EINPUT;
		if (rank < 0 || rank >= size)
			return dlt_error(DLT_EINPUT, "%s: rank %d of a job of %d ranks",
					 kinds[i].rank, rank, size);
		r->size = size;
		r->rank = rank;
		r->local_rank = local < 0 ? 0 : local;
		r->local_size = local_size < 1 ? 1 : local_size;
		r->launcher = kinds[i].launcher;
		return 0;
	}
	return 0;
}

typedef int mpi_open_fn(dlt_comm *c, int abi);
typedef int nccl_open_fn(dlt_comm *c, int abi, int device, const unsigned char *id);
typedef int nccl_id_fn(unsigned char *id, char *why, size_t n);

static const char mpi_so[] = "libdlt-mpi.so", cuda_so[] = "libdlt-cuda.so";

static dlt_comm *new_comm(const dlt_rank_info *r, double timeout)
{
	dlt_comm *c = dlt_calloc(1, sizeof(*c));
	if (c) {
		c->rank = r->rank;
		c->size = r->size;
		c->timeout = timeout;
	}
	return c;
}

static int open_mpi(dlt_comm **out, const dlt_rank_info *r, double timeout)
{
	char why[512];
	void *lib = dlt_plugin_open(mpi_so, "DLT_MPI_LIB", DLT_MPI ? NULL :
				    "dlt was built without MPI (no mpicc)", why, sizeof(why));
	mpi_open_fn *open_comm;
	dlt_comm *c;

	*out = NULL;
	if (!lib || !(open_comm = (mpi_open_fn *)dlt_plugin_sym(lib, mpi_so, "dlt_comm_mpi_open",
								 why, sizeof(why))))
		return dlt_error(DLT_EFAIL, "rank %d of %d: %s", r->rank, r->size, why);
	if (!(c = new_comm(r, timeout)))
		return DLT_ENOMEM;
	if (open_comm(c, DLT_COMM_ABI) != 0) {
		int rc = dlt_error(DLT_EFAIL, "rank %d of %d: %s", r->rank, r->size, c->why);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Reads or writes all of n bytes on a pipe, waiting at most timeout s. */
static int pipe_io(int fd, unsigned char *p, size_t n, int writing, double timeout)
{
	double t0 = dlt_now();
	while (n > 0) {
		struct pollfd pf = { fd, writing ? POLLOUT : POLLIN, 0 };
		ssize_t k;
		if (poll(&pf, 1, 100) < 0 && errno != EINTR)
			return -1;
		if (dlt_now() - t0 > timeout)
			return -1;
		if (!(pf.revents & (writing ? POLLOUT : POLLIN | POLLHUP)))
			continue;
		k = writing ? write(fd, p, n) : read(fd, p, n);
		if (k <= 0 && !(k < 0 && errno == EINTR))
			return -1;
		if (k > 0) {
			p += k;
			n -= (size_t)k;
		}
	}
	return 0;
}

/* NCCL's unique id, made by rank 0: through the pipe of dlt-train --gpus
 * when there is one (rank 0 writes a copy for each other rank; a write
 * of under PIPE_BUF bytes is whole, so each reader gets one), else
 * through MPI, which mpirun and srun jobs have. */
static int nccl_id(void *lib, const dlt_rank_info *r, double timeout, unsigned char *id)
{
	char why[512];
	int fd = env_int("DLT_NCCL_ID_FD", 0), rc = 0;
	nccl_id_fn *make_id;
	dlt_comm *mpi = NULL;

	if (fd == DLT_EINPUT)
		return fd;
	if (r->rank == 0) {
		if (!(make_id = (nccl_id_fn *)dlt_plugin_sym(lib, cuda_so, "dlt_comm_nccl_id", why,
							      sizeof(why))) ||
		    make_id(id, why, sizeof(why)) != 0) {
			if (fd >= 0)
				close(fd);
			return dlt_error(DLT_EFAIL, "rank 0: %s", why);
		}
	}
	/* one rank (DLT_COMM=nccl) keeps its own: no MPI to pass it on */
	if (r->size == 1) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	if (fd >= 0) {
		for (int i = 1; r->rank == 0 && i < r->size && rc == 0; i++)
			rc = pipe_io(fd, id, DLT_NCCL_ID_BYTES, 1, timeout);
		if (r->rank != 0)
			rc = pipe_io(fd, id, DLT_NCCL_ID_BYTES, 0, timeout);
		close(fd);
		return rc ? dlt_error(DLT_EFAIL, "rank %d: NCCL's id not passed on in %g s",
				      r->rank, timeout) : 0;
	}
	DLT_TRY(open_mpi(&mpi, r, timeout));
	rc = dlt_comm_broadcast(mpi, id, DLT_NCCL_ID_BYTES);
	dlt_comm_close(mpi);
fail:
	return rc;
}

static int open_nccl(dlt_comm **out, const dlt_rank_info *r, int device, double timeout)
{
	char why[512];
	unsigned char id[DLT_NCCL_ID_BYTES] = { 0 };
	void *lib = dlt_cuda_lib(why, sizeof(why));
	nccl_open_fn *open_comm;
	dlt_comm *c;
	int rc, fd;

	*out = NULL;
	if (!lib || !(open_comm = (nccl_open_fn *)dlt_plugin_sym(lib, cuda_so,
			"dlt_comm_nccl_open", why, sizeof(why))))
		return dlt_error(DLT_EFAIL, "rank %d of %d: %s", r->rank, r->size, why);
	/* NCCL works on the device the backend made current */
	if (!dlt_backend_cuda(device, why, sizeof(why)))
		return dlt_error(DLT_EFAIL, "rank %d: no CUDA device: %s", r->rank, why);
	DLT_TRY(nccl_id(lib, r, timeout, id));
	if (!(c = new_comm(r, timeout)))
		return DLT_ENOMEM;
	if ((fd = env_int("DLT_BEATS_FD", 0)) == DLT_EINPUT ||
	    (fd >= 0 && (rc = dlt_beats_attach(c, fd)) < 0)) {
		dlt_comm_close(c);
		return fd == DLT_EINPUT ? fd : rc;
	}
	if (open_comm(c, DLT_COMM_ABI, device, id) != 0) {
		rc = dlt_error(DLT_EFAIL, "rank %d of %d: %s", r->rank, r->size, c->why);
		dlt_comm_close(c);
		return rc;
	}
	*out = c;
	return 0;
fail:
	return rc;
}

int dlt_comm_wanted(const dlt_rank_info *r)
{
	return r->size > 1 || (r->comm && *r->comm);
}

int dlt_comm_open(dlt_comm **out, const dlt_rank_info *r, int device, double timeout)
{
	const char *want = device < 0 ? "mpi" : "nccl";
	*out = NULL;
	if (r->comm && *r->comm && strcmp(r->comm, want))
		return dlt_error(DLT_EINPUT, "DLT_COMM=%s: the run trains on %s, whose comm is "
				 "%s", r->comm, device < 0 ? "the CPU" : "a GPU", want);
	return device < 0 ? open_mpi(out, r, timeout) : open_nccl(out, r, device, timeout);
}

int dlt_rank_device(const dlt_rank_info *r, int device)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	if (device < 0 || r->size == 1)
		return device;
	/* a launcher that gave each rank a GPU of its own (srun --gpus-per-task)
	 * shows it the one device */
	if (v && *v && !strchr(v, ','))
		return 0;
	return r->local_rank;
}

/* Also the half-made comm of a failed open, whose close is not set yet. */
void dlt_comm_close(dlt_comm *c)
{
	if (c) {
		if (c->close)
			c->close(c);
		if (c->beats)
			munmap(c->beats, 2 * (size_t)c->size * sizeof(*c->beats));
		free(c);
	}
}

int dlt_beats_create(int size)
{
	int fd = memfd_create("dlt-beats", 0), rc;
	if (fd < 0)
		return dlt_error_errno(DLT_EFAIL, "memfd_create");
	/* a new file's bytes are zeros: no rank has reached a sync point */
	if (ftruncate(fd, 2 * (off_t)size * (off_t)sizeof(long long)) != 0) {
		rc = dlt_error_errno(DLT_EFAIL, "ftruncate");
		close(fd);
		return rc;
	}
	return fd;
}

int dlt_beats_attach(dlt_comm *c, int fd)
{
	size_t bytes = 2 * (size_t)c->size * sizeof(*c->beats);
	struct stat st;
	void *p;
	int rc = 0;

	if (fstat(fd, &st) != 0 || st.st_size != (off_t)bytes)
		rc = dlt_error(DLT_EINPUT, "DLT_BEATS_FD %d: not a table of %d ranks", fd, c->size);
	else if ((p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
		rc = dlt_error_errno(DLT_EFAIL, "DLT_BEATS_FD %d: mmap", fd);
	else
		c->beats = p;
	close(fd);
	return rc;
}

static int failed(dlt_comm *c)
{
	return dlt_error(DLT_EFAIL, "%s", c->why);
}

/* Sync points: the table, if any, learns that this rank reached one. */
static double reach(dlt_comm *c)
{
	c->point++;
	if (c->beats)
		__atomic_store_n(&c->beats[2 * c->rank], c->point, __ATOMIC_RELAXED);
	dlt_beats_alive(c);
	return dlt_now();
}

/* Ranks of the table that the wait of this rank's sync point blames:
 * those that have not reached it (stale 0), or those that reached it and
 * have not said they are alive in timeout / 4 (stale 1), in who */
static int blamed(dlt_comm *c, int stale, char *who, size_t size)
{
	size_t len = 0;
	int n = 0;
	long long now = dlt_beats_ms();
	for (int r = 0; c->beats && r < c->size && len < size - 16; r++) {
		long long point = __atomic_load_n(&c->beats[2 * r], __ATOMIC_RELAXED);
		long long alive = __atomic_load_n(&c->beats[2 * r + 1], __ATOMIC_RELAXED);
		if (stale ? r != c->rank && point >= c->point &&
				    (double)(now - alive) > c->timeout * 250
			  : point < c->point) {
			len += (size_t)snprintf(who + len, size - len, "%s%d", n ? ", " : "", r);
			n++;
		}
	}
	return n;
}

/* A sync point's wait failed: when the table shows ranks that have not
 * reached it, they are the ones to name; after the deadline, else those
 * silent inside it. */
static int failed_at(dlt_comm *c, const char *what, double t0)
{
	char who[256] = "";
	int n = blamed(c, 0, who, sizeof(who));

	if (!n && dlt_now() - t0 >= c->timeout)
		n = blamed(c, 1, who, sizeof(who));
	if (n && dlt_now() - t0 >= c->timeout)
		return dlt_error(DLT_EFAIL, "%s: no answer from rank%s %s in %g s "
				 "(it died or stalls)", what, n > 1 ? "s" : "", who, c->timeout);
	if (n)
		return dlt_error(DLT_EFAIL, "%s (rank%s %s had not come to the %s)", c->why,
				 n > 1 ? "s" : "", who, what);
	return failed(c);
}

/* 2 x (N - 1) / N of x bytes: an all-reduce's */
static unsigned long long reduced(const dlt_comm *c, size_t x)
{
	return 2ull * x * (unsigned long long)(c->size - 1) / (unsigned long long)c->size;
}

int dlt_comm_sum_begin(dlt_comm *c, float *x, size_t n)
{
	c->sent += reduced(c, n * sizeof(float));
	return c->sum_begin(c, x, n) ? failed(c) : 0;
}

int dlt_comm_progress(dlt_comm *c)
{
	return c->progress(c) ? failed(c) : 0;
}

int dlt_comm_sum_wait(dlt_comm *c)
{
	double t0 = reach(c);
	return c->sum_wait(c) ? failed_at(c, "gradient sum", t0) : 0;
}

int dlt_comm_sum_f64(dlt_comm *c, double *x, int n)
{
	double t0 = reach(c);
	return c->sum_f64(c, x, n) ? failed_at(c, "metrics sum", t0) : 0;
}

int dlt_comm_broadcast(dlt_comm *c, void *p, size_t bytes)
{
	double t0 = reach(c);
	return c->broadcast(c, p, bytes) ? failed_at(c, "broadcast from rank 0", t0) : 0;
}

int dlt_comm_p2p_open(dlt_comm *c)
{
	if (!c->send)
		return dlt_error(DLT_EFAIL, "%s has no point to point", c->name);
	return c->p2p_open && c->p2p_open(c) ? failed(c) : 0;
}

int dlt_comm_send(dlt_comm *c, const float *x, size_t n, int to)
{
	if (!c->send)
		return dlt_error(DLT_EFAIL, "%s has no point to point", c->name);
	c->sent += n * sizeof(float);
	return c->send(c, x, n, to) ? failed(c) : 0;
}

int dlt_comm_recv(dlt_comm *c, float *x, size_t n, int from)
{
	if (!c->recv)
		return dlt_error(DLT_EFAIL, "%s has no point to point", c->name);
	return c->recv(c, x, n, from) ? failed(c) : 0;
}

int dlt_comm_split(dlt_comm *c, int color, int key, dlt_comm **out)
{
	dlt_comm *g;
	*out = NULL;
	if (!c->split)
		return dlt_error(DLT_EFAIL, "%s has no groups of ranks", c->name);
	if (!(g = dlt_calloc(1, sizeof(*g))))
		return DLT_ENOMEM;
	if (c->split(c, color, key, g) != 0) {
		free(g);
		return failed(c);
	}
	*out = g;
	return 0;
}

void dlt_comm_abort(dlt_comm *c, int status)
{
	c->abort(c, status);
}

void dlt_comm_ranges(const dlt_comm *c, size_t n, size_t *ranges)
{
	size_t q = n / (size_t)c->size, rem = n % (size_t)c->size;
	for (int r = 0; r <= c->size; r++)
		ranges[r] = q * (size_t)r + ((size_t)r < rem ? (size_t)r : rem);
}

/* The pieces of [a, b) of a block cut by ranges: counts[r] floats of
 * rank r's range, one after the other. */
static void pieces(const dlt_comm *c, const size_t *ranges, size_t a, size_t b, size_t *counts)
{
	for (int r = 0; r < c->size; r++) {
		size_t lo = ranges[r] > a ? ranges[r] : a, hi = ranges[r + 1] < b ? ranges[r + 1] : b;
		counts[r] = hi > lo ? hi - lo : 0;
	}
}

/* A collective's pieces: at most 2^31 - 1 floats each, which MPI's int
 * counts take; an op of at most chunk floats has pieces of at most that */
static size_t op_chunk(size_t chunk)
{
	return chunk && chunk < (1u << 30) ? chunk : 1u << 30;
}

enum { OP_SCATTER, OP_SCATTER_ORDERED, OP_GATHER_ALL };

static int ranged(dlt_comm *c, int op, float *block, const size_t *ranges, size_t a, size_t b,
		  size_t chunk)
{
	size_t *counts = dlt_malloc((size_t)c->size * sizeof(*counts));
	int rc = 0;

	if (!counts)
		return DLT_ENOMEM;
	chunk = op_chunk(chunk);
	for (size_t s = a; s < b && rc == 0; s += chunk) {
		size_t e = b - s > chunk ? s + chunk : b;
		pieces(c, ranges, s, e, counts);
		/* a ring's: a reduce-scatter passes on every piece but the one it
		 * ends with, its own; an all-gather every piece but the one the
		 * next rank holds */
		c->sent += (e - s - counts[op == OP_GATHER_ALL ? (c->rank + 1) % c->size : c->rank]) *
			   sizeof(float);
		if (op == OP_GATHER_ALL ? c->all_gather(c, block + s, counts)
					: c->reduce_scatter(c, block + s, counts, op == OP_SCATTER_ORDERED))
			rc = failed(c);
	}
	free(counts);
	return rc;
}

int dlt_comm_reduce_scatter(dlt_comm *c, float *block, const size_t *ranges, size_t a, size_t b,
			    size_t chunk, int ordered)
{
	return ranged(c, ordered ? OP_SCATTER_ORDERED : OP_SCATTER, block, ranges, a, b, chunk);
}

int dlt_comm_all_gather(dlt_comm *c, float *block, const size_t *ranges, size_t a, size_t b,
			size_t chunk)
{
	return ranged(c, OP_GATHER_ALL, block, ranges, a, b, chunk);
}

int dlt_comm_gather(dlt_comm *c, const float *mine, float *all, const size_t *ranges,
		    size_t chunk, int root)
{
	size_t *counts = dlt_malloc((size_t)c->size * sizeof(*counts)), lo = ranges[c->rank];
	int rc = 0;

	if (!counts)
		return DLT_ENOMEM;
	chunk = op_chunk(chunk);
	for (size_t s = 0; s < ranges[c->size] && rc == 0; s += chunk) {
		size_t e = ranges[c->size] - s > chunk ? s + chunk : ranges[c->size];
		/* this rank's part of [s, e) starts at s or at its range */
		size_t at = s > lo ? s - lo : 0;
		pieces(c, ranges, s, e, counts);
		c->sent += c->rank == root ? 0 : counts[c->rank] * sizeof(float);
		if (c->gather(c, counts[c->rank] ? mine + at : mine, c->rank == root ? all + s : NULL,
			      counts, root))
			rc = failed(c);
	}
	free(counts);
	return rc;
}

void dlt_buckets_init(dlt_buckets *b, dlt_comm *c, float *g, size_t n, size_t bucket_bytes)
{
	memset(b, 0, sizeof(*b));
	b->c = c;
	b->g = g;
	b->n = n;
	b->bucket = bucket_bytes / sizeof(float) ? bucket_bytes / sizeof(float) : 1;
	b->begun = b->flight = n;
}

void dlt_buckets_scatter(dlt_buckets *b, const size_t *ranges, int during_backward)
{
	b->ranges = ranges;
	b->at_finish = !during_backward;
}

void dlt_buckets_at_finish(dlt_buckets *b)
{
	b->at_finish = 1;
}

/* g[off..begun) is final: its sum begins.  A reduce-scatter in rank
 * order receives every rank's piece of this rank's range before it adds
 * them up: in collectives of bucket / ranks floats, whose pieces take a
 * bucket's memory at most (the comm waits for those in flight when it
 * has no more room). */
static int bucket_begin(dlt_buckets *b, size_t off)
{
	size_t chunk = b->bucket / (size_t)b->c->size;
	if (b->ranges)
		return dlt_comm_reduce_scatter(b->c, b->g, b->ranges, off, b->begun,
					       chunk ? chunk : 1, 1);
	return dlt_comm_sum_begin(b->c, b->g + off, b->begun - off);
}

void dlt_buckets_on_done(dlt_buckets *b, void (*done)(void *ctx, size_t a, size_t b),
			 void *ctx)
{
	b->done = done;
	b->done_ctx = ctx;
}

void dlt_buckets_reset(dlt_buckets *b)
{
	b->begun = b->flight = b->n;
	b->err = 0;
}

/* Waits for what is in flight and reports it done */
static int settle(dlt_buckets *b)
{
	int rc = dlt_comm_sum_wait(b->c);
	if (rc == 0 && b->done && b->begun < b->flight)
		b->done(b->done_ctx, b->begun, b->flight);
	b->flight = b->begun;
	return rc;
}

void dlt_buckets_ready(dlt_buckets *b, size_t off)
{
	if (b->err)
		return;
	if (off < b->begun && b->begun - off >= b->bucket && !b->at_finish) {
		if (b->done && b->begun < b->flight)
			b->err = settle(b);
		if (!b->err)
			b->err = bucket_begin(b, off);
		b->begun = off;
	} else {
		b->err = dlt_comm_progress(b->c);
	}
}

int dlt_buckets_finish(dlt_buckets *b)
{
	if (!b->err && b->begun > 0) {
		b->err = bucket_begin(b, 0);
		b->begun = 0;
	}
	if (!b->err)
		b->err = settle(b);
	return b->err;
}
