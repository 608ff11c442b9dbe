/* comm: what data parallelism needs of the ranks of a job, behind one
 * interface with two implementations:
 *
 *   MPI   CPU ranks (Open MPI's MPI_Iallreduce), in libdlt-mpi.so;
 *   NCCL  GPU ranks (its ring/tree all-reduce), in libdlt-cuda.so,
 *
 * both opened only by jobs of several ranks, so that a one-process run
 * never pays their start-up.  The ranks come from the launcher's
 * environment: mpirun (OMPI_COMM_WORLD_*), srun (SLURM_*), or
 * dlt_launch_ranks below (dlt-train --gpus N: DLT_RANK, ...).
 *
 * Every wait has a deadline: a rank that died or stalls ends the others'
 * waits with an error instead of a hang, and the caller ends the job
 * (dlt_comm_abort). */
#ifndef DLT_COMM_H
#define DLT_COMM_H

#include <stddef.h>
#include <time.h>

/* Where a process stands in its job, from the launcher's environment. */
typedef struct dlt_rank_info {
	int rank, size;			/* 0 and 1 outside a job of several ranks */
	int local_rank, local_size;	/* on this machine */
	const char *launcher;		/* "mpirun", "srun", "dlt-train", "" */
	/* DLT_COMM: "nccl" or "mpi" opens that comm whatever the ranks,
	 * even for one (the whole bucket path then runs on one GPU or
	 * core, the sums of one rank being its own values); "" opens the
	 * device's comm for several ranks only */
	const char *comm;
} dlt_rank_info;

/* DLT_EINPUT when a launcher's variables contradict each other, or
 * DLT_COMM is neither nccl nor mpi. */
int dlt_rank_info_get(dlt_rank_info *r);
/* Whether a job of these ranks sums through a comm: several ranks, or
 * DLT_COMM asked for one. */
int dlt_comm_wanted(const dlt_rank_info *r);

/* The Slurm job around this process (sbatch's script, srun's tasks): its
 * id, "" outside one and "JOBID_TASK" for a task of a job array, and
 * SLURM_RESTART_COUNT, how often Slurm has requeued it. */
typedef struct dlt_batch_job {
	char id[64];
	int restarts;
} dlt_batch_job;
void dlt_batch_job_get(dlt_batch_job *j);

/* What a shared object fills (DLT_COMM_ABI: the version of this struct).
 * Entries return 0 or -1 with the reason in why.  Buffers are in the
 * memory of the ranks' backend: the host's for MPI, the GPU's for NCCL,
 * except sum_f64's, which are always the host's.
 *
 * The collectives of ZeRO (reduce_scatter, all_gather, gather) work on a
 * buffer cut into one piece a rank: counts[j] floats for rank j, one
 * after the other, some of them possibly 0.  Like sum_begin they are
 * begun now and done at sum_wait, which waits for every begun one, and
 * each takes at most 2^31 - 1 floats a piece (dlt_comm_reduce_scatter
 * and the others below cut larger ones into several). */
#define DLT_COMM_ABI 5
typedef struct dlt_comm {
	const char *name;		/* "mpi", "nccl" */
	int rank, size;
	double timeout;			/* seconds any wait may take */
	/* x[0..n) summed over the ranks in place, begun now; the result is
	 * there after sum_wait */
	int (*sum_begin)(struct dlt_comm *c, float *x, size_t n);
	/* lets begun sums move on while the caller computes (MPI) */
	int (*progress)(struct dlt_comm *c);
	/* every begun sum and collective done */
	int (*sum_wait)(struct dlt_comm *c);
	/* small sums of host values (metrics, flags), blocking */
	int (*sum_f64)(struct dlt_comm *c, double *x, int n);
	/* rank 0's bytes to every rank */
	int (*broadcast)(struct dlt_comm *c, void *p, size_t bytes);
	/* In place: this rank's piece of x becomes the sum of every rank's
	 * piece of that place; the other pieces stay as they were.  ordered:
	 * the pieces are moved as they are (an all-to-all) and added up here
	 * in rank order, ((x0 + x1) + x2) + ..., so that the bits depend on
	 * the values alone, not on the library's algorithm or the timing;
	 * else the library's reduce-scatter, which sums on the way. */
	int (*reduce_scatter)(struct dlt_comm *c, float *x, const size_t *counts, int ordered);
	/* In place: piece j of x, rank j's, to every rank's x. */
	int (*all_gather)(struct dlt_comm *c, float *x, const size_t *counts);
	/* mine, this rank's counts[rank] floats, to root's all at the place
	 * of its piece (all: root's only; mine may be that place on root) */
	int (*gather)(struct dlt_comm *c, const float *mine, float *all, const size_t *counts,
		      int root);
	/* A pipeline's point to point (NULL where the comm has none): n
	 * floats of x to rank to, begun now and done by the next sum_wait
	 * (x stays as it is until then); n floats from rank from into x,
	 * done when it returns.  What one rank sends another arrives in the
	 * order it was sent.  p2p_open, which every rank calls once and
	 * together before its first send or recv (NULL: nothing to open),
	 * opens what they need: NCCL runs a communicator's calls one after
	 * the other in the order each rank made them, so that a send would
	 * wait behind a receive queued before it, on ranks that reach their
	 * sends and receives at different times (a pipeline's stages) */
	int (*p2p_open)(struct dlt_comm *c);
	int (*send)(struct dlt_comm *c, const float *x, size_t n, int to);
	int (*recv)(struct dlt_comm *c, float *x, size_t n, int from);
	/* The ranks of this color, ordered by key, as a comm of their own in
	 * out (its rank and size set, the entries filled; NULL where the
	 * comm has no groups): every rank calls it */
	int (*split)(struct dlt_comm *c, int color, int key, struct dlt_comm *out);
	/* ends every rank of the job at once */
	void (*abort)(struct dlt_comm *c, int status);
	void (*close)(struct dlt_comm *c);
	char why[512];
	void *impl;
	/* the sync points of every rank, when the ranks share a table of
	 * them (dlt_beats_attach); this rank's own count */
	long long *beats;
	long long point;
	/* the bytes this rank has sent, counted by dlt_comm_* as the
	 * bandwidth-optimal algorithm of each op sends them: a sum of n
	 * values 2 n (N - 1) / N, a reduce-scatter every piece but its own,
	 * an all-gather every piece but the next rank's (a ring's), a gather
	 * its piece; the model's values only (not
	 * sum_f64's metrics and flags, nor the broadcast that starts a run).
	 * The library's own algorithm may send more: this is the volume the
	 * parallel scheme asks for. */
	unsigned long long sent;
} dlt_comm;

/* The comm of a job of ranks r (dlt_comm_wanted) on device (-1: CPU
 * ranks, MPI; else NCCL on that GPU), with timeout seconds for any wait.
 * DLT_EINPUT when r->comm names the other device's comm; DLT_EFAIL with
 * the reason when it cannot be opened. */
int dlt_comm_open(dlt_comm **c, const dlt_rank_info *r, int device, double timeout);
void dlt_comm_close(dlt_comm *c);
/* The GPU of a rank whose config says device: one per rank on a machine,
 * by local rank, or the only one the launcher let it see. */
int dlt_rank_device(const dlt_rank_info *r, int device);

/* The entries, with their failures as dlt_error's (DLT_EFAIL). */
int dlt_comm_sum_begin(dlt_comm *c, float *x, size_t n);
int dlt_comm_progress(dlt_comm *c);
int dlt_comm_sum_wait(dlt_comm *c);
int dlt_comm_sum_f64(dlt_comm *c, double *x, int n);
int dlt_comm_broadcast(dlt_comm *c, void *p, size_t bytes);
int dlt_comm_p2p_open(dlt_comm *c);
int dlt_comm_send(dlt_comm *c, const float *x, size_t n, int to);
int dlt_comm_recv(dlt_comm *c, float *x, size_t n, int from);
/* A group of c's ranks (split), closed with dlt_comm_close before c */
int dlt_comm_split(dlt_comm *c, int color, int key, dlt_comm **out);
void dlt_comm_abort(dlt_comm *c, int status);

/* ZeRO's ranges: a block of n floats cut into c->size contiguous ranges,
 * rank r's [ranges[r], ranges[r + 1]), which differ by one float at most
 * (the first n % size ranks have the one more): any n and any rank count,
 * some ranges empty when n < size.  ranges has size + 1 entries. */
void dlt_comm_ranges(const dlt_comm *c, size_t n, size_t *ranges);
/* The collectives over [a, b) of such a block, cut into collectives of at
 * most chunk floats, begun now and done at dlt_comm_sum_wait:
 * reduce_scatter leaves in each rank's part of [a, b) the sum of every
 * rank's (ordered: in rank order, bit for bit the same however [a, b) is
 * cut); all_gather sends each rank's part to every rank; gather sends
 * mine, this rank's whole range, to root's all (the block). */
int dlt_comm_reduce_scatter(dlt_comm *c, float *block, const size_t *ranges, size_t a, size_t b,
			    size_t chunk, int ordered);
int dlt_comm_all_gather(dlt_comm *c, float *block, const size_t *ranges, size_t a, size_t b,
			size_t chunk);
int dlt_comm_gather(dlt_comm *c, const float *mine, float *all, const size_t *ranges,
		    size_t chunk, int root);

/* The sync points (the waits of sum_wait, sum_f64 and broadcast, which
 * every rank reaches in the same order) that each rank of a job on one
 * machine reached, in memory the ranks share, so that a rank whose wait
 * failed names the ranks behind it.  NCCL cannot say which rank it waits
 * for; MPI's comm asks with messages of its own and needs no table.
 * dlt_launch_ranks makes the table and passes it in DLT_BEATS_FD, which
 * dlt_comm_open attaches.  create returns the table's fd or a DLT_E*.
 * Two numbers a rank: the last sync point it reached, beats[2 r], and
 * when it last said it was alive, beats[2 r + 1] (CLOCK_MONOTONIC ms):
 * at the point and while it waits there (dlt_beats_alive, from the
 * comm's wait loop), so that a rank stopped inside a wait it had reached
 * is named too. */
int dlt_beats_create(int size);
int dlt_beats_attach(dlt_comm *c, int fd);

static inline long long dlt_beats_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static inline void dlt_beats_alive(dlt_comm *c)
{
	if (c->beats)
		__atomic_store_n(&c->beats[2 * c->rank + 1], dlt_beats_ms(), __ATOMIC_RELAXED);
}

/* NCCL's unique id of a job that dlt_launch_ranks started: made by its
 * rank 0 and read by the others from the pipe in DLT_NCCL_ID_FD. */
#define DLT_NCCL_ID_BYTES 128

/* Gradients in buckets: backward reports, layer by layer, from which
 * offset of the gradient block on every gradient is final (they become
 * final from the end of the block down), and a bucket's sum begins as
 * soon as bucket floats are final, while backward goes on with the
 * layers before. */
typedef struct dlt_buckets {
	dlt_comm *c;
	float *g;		/* the gradient block */
	size_t n;		/* its floats */
	size_t bucket;		/* floats a sum begins with, at least */
	size_t begun;		/* g[begun..n) is being summed */
	int err;		/* the first failure, 0 while none */
	/* ZeRO (dlt_buckets_scatter): the ranks' ranges of g; the buckets
	 * are then reduce-scattered in rank order instead of summed */
	const size_t *ranges;
	int at_finish;		/* sums begin at finish, not during backward */
	/* dlt_buckets_on_done's, and g[begun..flight), begun and not yet
	 * reported done */
	void (*done)(void *ctx, size_t a, size_t b);
	void *done_ctx;
	size_t flight;
} dlt_buckets;

void dlt_buckets_init(dlt_buckets *b, dlt_comm *c, float *g, size_t n, size_t bucket_bytes);
/* Each rank's range of g (dlt_comm_ranges) gets the sum of every rank's
 * gradients there, added in rank order, and the rest of g is left as it
 * was: during backward, bucket by bucket (ZeRO 2), or when all of g is
 * final (ZeRO 0 and 1). */
void dlt_buckets_scatter(dlt_buckets *b, const size_t *ranges, int during_backward);
/* The sums begin only when all of g is final (at finish): a step of
 * several micro-batches, whose backward passes each see part of it. */
void dlt_buckets_at_finish(dlt_buckets *b);
/* Has the buckets call done(ctx, a, b) once the collectives over g[a, b)
 * are over, so that ZeRO 2 and 3 let the other ranks' parts go: a
 * bucket's collectives are then waited for before the next bucket's
 * begin, so that only one bucket's parts are in flight at a time. */
void dlt_buckets_on_done(dlt_buckets *b, void (*done)(void *ctx, size_t a, size_t b),
			 void *ctx);
/* Starts a step: nothing is summed yet. */
void dlt_buckets_reset(dlt_buckets *b);
/* g[off..n) is final. */
void dlt_buckets_ready(dlt_buckets *b, size_t off);
/* All of g is final: sums what is left and waits for every sum. */
int dlt_buckets_finish(dlt_buckets *b);

/* The launcher of a job's ranks on this machine (dlt-train --gpus and
 * --ranks), in launch.c: the other half of the protocol of DLT_RANK,
 * DLT_NCCL_ID_FD and DLT_BEATS_FD above.  The functions fork, and only a
 * forked child exits (_exit, with its main's return value); the library
 * prints nothing here either, a failure being the caller's to say.
 *
 * The children are kept in one table a process, so that the launcher's
 * signals reach them: a caller installs dlt_launch_forward_signal as the
 * handler of the signals that ask a job to stop or checkpoint. */
#define DLT_LAUNCH_MAX 4096	/* ranks a job of this machine may have */

/* How a job ended. */
typedef struct dlt_launch_status {
	/* its exit status: 0, the first failed child's own, or 128 + the
	 * signal that killed it (as a shell says it); 1 when it could not
	 * be started */
	int exit;
	/* the first child that failed: its rank (0 for the one child of
	 * dlt_launch_child and dlt_launch_mpirun); -1 when none did, or none
	 * was started */
	int rank;
	int signal;		/* the signal that killed it, 0 when it exited */
	int exec_errno;		/* why mpirun could not be run, 0 when it ran */
} dlt_launch_status;

/* Each of these returns 0 when every child exited 0, else the error that
 * says why not, with st saying how the job ended. */

/* child_main(ctx) in a child process, waited for. */
int dlt_launch_child(int (*child_main)(void *ctx), void *ctx, dlt_launch_status *st);
/* Whether this machine has n GPUs, asked in a child, since CUDA started
 * in the launcher would not survive the fork of its ranks: DLT_EFAIL with
 * "no CUDA device N: why" when it has not. */
int dlt_launch_probe_gpus(int n);
/* n ranks of this machine, each a child process that runs
 * rank_main(job, ctx) with job its rank, and DLT_COMM's comm (NULL: none);
 * DLT_RANK, DLT_LOCAL_RANK, DLT_WORLD_SIZE and DLT_LOCAL_SIZE tell it the
 * same, DLT_NCCL_ID_FD the pipe of NCCL's id and DLT_BEATS_FD the table
 * of sync points (dlt_beats_create).  The first rank that fails ends the
 * others: "rank R died of signal S (NAME); ending the job", or "rank R
 * exited with status E; ending the job", a rank's own failure being
 * something it has said itself. */
int dlt_launch_ranks(int n, const char *comm, int (*rank_main)(const dlt_rank_info *job,
							       void *ctx),
		     void *ctx, dlt_launch_status *st);
/* n CPU ranks of this machine: mpirun -np n of argv (a program and its
 * options, NULL-terminated), which gives each rank its rank and MPI, and
 * names a rank that dies and ends the others itself.  st->exec_errno
 * when mpirun could not be run (it is not installed). */
int dlt_launch_mpirun(int n, char *const argv[], dlt_launch_status *st);
/* A signal handler: sig to every child of the table. */
void dlt_launch_forward_signal(int sig);

#endif
