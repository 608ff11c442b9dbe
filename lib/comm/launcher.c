/* The launcher of a job's ranks on this machine: GPU ranks forked here,
 * each told its rank and NCCL's rendezvous in the variables that
 * dlt_rank_info_get and dlt_comm_open read (comm.c, the other half of the
 * protocol), or CPU ranks started by mpirun; and the table of the
 * children, to which the launcher's signals are forwarded.
 *
 * Like the rest of the library this never prints and never exits, except
 * in a child it forked, which _exit()s with its main's return value (not
 * exit(): the parent's atexit handlers and stdio buffers are not the
 * child's to run). */
#define _GNU_SOURCE	/* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/comm.h"
#include "kernels/kernels.h"
#include "util/util.h"

/* A slot is 0 once its child is reaped, so that a signal forwarded later
 * never reaches another process given the same pid. */
static pid_t children[DLT_LAUNCH_MAX];
static volatile sig_atomic_t n_children;

void dlt_launch_forward_signal(int sig)
{
	for (int i = 0; i < n_children; i++)
		if (children[i] > 0)
			kill(children[i], sig);
}

/* A child in slot i of the table.  stdio's buffers are flushed first, or
 * the child would write what the parent had buffered a second time; the
 * child starts with an empty table, its parent's children not being its
 * own. */
static pid_t start_child(int i)
{
	pid_t pid;

	fflush(NULL);
	if ((pid = fork()) == 0) {
		n_children = 0;
	} else if (pid > 0) {
		children[i] = pid;
		if (n_children <= i)
			n_children = i + 1;
	}
	return pid;
}

/* The one child of the table, waited for through the forwarded signals. */
static void reap(pid_t pid, int *ws)
{
	while (waitpid(pid, ws, 0) < 0 && errno == EINTR)
		;
	children[0] = 0;
	n_children = 0;
}

/* st for child r (a rank, or 0) that ended with wait status ws: 0 when it
 * exited 0, else the error that says how it failed, who being its name
 * and then what the launcher does about it. */
static int ended(dlt_launch_status *st, int r, int ws, const char *who, const char *then)
{
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
		st->exit = 0;
		return 0;
	}
	st->rank = r;
	if (WIFSIGNALED(ws)) {
		st->signal = WTERMSIG(ws);
		st->exit = 128 + st->signal;	/* a shell's status for it */
		return dlt_error(DLT_EFAIL, "%s died of signal %d (%s)%s", who, st->signal,
				 strsignal(st->signal), then);
	}
	st->exit = WEXITSTATUS(ws);
	return dlt_error(DLT_EFAIL, "%s exited with status %d%s", who, st->exit, then);
}

static int check_ranks(int n)
{
	if (n < 1 || n > DLT_LAUNCH_MAX)
		return dlt_error(DLT_EINPUT, "%d ranks: a job has 1 to %d", n, DLT_LAUNCH_MAX);
	return 0;
}

int dlt_launch_child(int (*child_main)(void *ctx), void *ctx, dlt_launch_status *st)
{
	pid_t pid;
	int ws;

	*st = (dlt_launch_status){ .exit = 1, .rank = -1 };
	if ((pid = start_child(0)) < 0)
		return dlt_error_errno(DLT_EFAIL, "fork");
	if (pid == 0)
		_exit(child_main(ctx));
	reap(pid, &ws);
	return ended(st, 0, ws, "the child process", "");
}

/* The probe's child.  CUDA, once started, does not survive a fork: the
 * ranks forked after the probe would find it broken, so it starts in a
 * child that ends with it. */
struct probe {
	int device, fd;
};

static int probe_main(void *ctx)
{
	const struct probe *p = ctx;
	char why[256];

	if (dlt_backend_cuda(p->device, why, sizeof(why)))
		return 0;
	/* under PIPE_BUF bytes: in the pipe whole, read after the child ends */
	if (write(p->fd, why, strlen(why)) < 0)
		return 2;
	return 1;
}

int dlt_launch_probe_gpus(int n)
{
	struct probe p = { .device = n - 1 };
	char why[256];
	dlt_launch_status st;
	ssize_t len = 0;
	int fds[2], rc;

	DLT_TRY_RC(check_ranks(n));
	if (pipe(fds) != 0)
		return dlt_error_errno(DLT_EFAIL, "pipe");
	p.fd = fds[1];
	rc = dlt_launch_child(probe_main, &p, &st);
	close(fds[1]);
	if (rc < 0 && st.rank == 0)	/* ended: the pipe holds what it wrote */
		len = read(fds[0], why, sizeof(why) - 1);
	close(fds[0]);
	if (rc == 0 || st.rank < 0)
		return rc;
	if (len <= 0)	/* the probe crashed, or its pipe failed */
		return dlt_error_prefix(DLT_EFAIL, "no CUDA device %d", n - 1);
	why[len] = '\0';
	return dlt_error(DLT_EFAIL, "no CUDA device %d: %s", n - 1, why);
}

/* In rank r's child: the variables of the protocol, then the rank's main.
 * The pipe carries NCCL's id from rank 0, which writes it once for each
 * other rank, to the others, which read it. */
static int run_rank(int r, int n, const char *comm, const int fds[2], int beats,
		    int (*rank_main)(const dlt_rank_info *job, void *ctx), void *ctx)
{
	dlt_rank_info job = { .rank = r, .size = n, .local_rank = r, .local_size = n,
			      .launcher = "dlt-train", .comm = comm ? comm : "" };
	char rank[16], size[16], id[16], table[16];

	close(fds[r == 0 ? 0 : 1]);
	snprintf(rank, sizeof(rank), "%d", r);
	snprintf(size, sizeof(size), "%d", n);
	snprintf(id, sizeof(id), "%d", fds[r == 0 ? 1 : 0]);
	snprintf(table, sizeof(table), "%d", beats);
	setenv("DLT_RANK", rank, 1);
	setenv("DLT_LOCAL_RANK", rank, 1);
	setenv("DLT_WORLD_SIZE", size, 1);
	setenv("DLT_LOCAL_SIZE", size, 1);
	setenv("DLT_NCCL_ID_FD", id, 1);
	setenv("DLT_BEATS_FD", table, 1);
	return rank_main(&job, ctx);
}

int dlt_launch_ranks(int n, const char *comm, int (*rank_main)(const dlt_rank_info *job,
							       void *ctx),
		     void *ctx, dlt_launch_status *st)
{
	int fds[2], beats, rc = 0, started = 0, left, failed;

	*st = (dlt_launch_status){ .exit = 1, .rank = -1 };
	DLT_TRY_RC(check_ranks(n));
	if ((beats = dlt_beats_create(n)) < 0)
		return beats;
	if (pipe(fds) != 0) {
		rc = dlt_error_errno(DLT_EFAIL, "pipe");
		close(beats);
		return rc;
	}
	for (; started < n; started++) {
		pid_t pid = start_child(started);
		if (pid < 0) {
			rc = dlt_error_errno(DLT_EFAIL, "fork");
			dlt_launch_forward_signal(SIGKILL);
			break;
		}
		if (pid == 0)
			_exit(run_rank(started, n, comm, fds, beats, rank_main, ctx));
	}
	close(fds[0]);
	close(fds[1]);
	close(beats);
	/* the first rank that fails ends the others at once: they would
	 * only wait for it until their comm's timeout */
	for (left = started, failed = rc < 0; left > 0;) {
		int ws, r;
		pid_t pid = wait(&ws);
		char who[32];

		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (r = 0; r < started && children[r] != pid; r++)
			;
		if (r == started)
			continue;
		children[r] = 0;
		left--;
		if (failed || (WIFEXITED(ws) && WEXITSTATUS(ws) == 0))
			continue;
		failed = 1;
		snprintf(who, sizeof(who), "rank %d", r);
		rc = ended(st, r, ws, who, "; ending the job");
		dlt_launch_forward_signal(SIGKILL);
	}
	n_children = 0;
	if (!failed)
		st->exit = 0;
	return rc;
}

int dlt_launch_mpirun(int n, char *const argv[], dlt_launch_status *st)
{
	static const char *const mpirun[] = { "mpirun", "-np", NULL, "--oversubscribe",
					      "--bind-to", "none" };
	const size_t k = sizeof(mpirun) / sizeof(mpirun[0]);
	char np[16], **v;
	size_t argc = 0;
	int fds[2], ws, err = 0, rc;
	ssize_t got;
	pid_t pid;

	*st = (dlt_launch_status){ .exit = 1, .rank = -1 };
	DLT_TRY_RC(check_ranks(n));
	while (argv[argc])
		argc++;
	if (!(v = dlt_calloc(k + argc + 1, sizeof(*v))))
		return DLT_ENOMEM;
	memcpy(v, mpirun, sizeof(mpirun));
	snprintf(np, sizeof(np), "%d", n);
	v[2] = np;
	memcpy(v + k, argv, argc * sizeof(*v));
	/* close-on-exec: what the child writes in it is the errno of an exec
	 * that failed, and an exec that worked leaves it empty */
	if (pipe2(fds, O_CLOEXEC) != 0) {
		rc = dlt_error_errno(DLT_EFAIL, "pipe");
		free(v);
		return rc;
	}
	if ((pid = start_child(0)) == 0) {
		/* mpirun refuses root unless told; containers and CI run as root */
		setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
		setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
		execvp(v[0], v);
		err = errno;
		_exit(write(fds[1], &err, sizeof(err)) == sizeof(err) ? 1 : 2);
	}
	rc = pid < 0 ? dlt_error_errno(DLT_EFAIL, "fork") : 0;
	free(v);
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return rc;
	}
	while ((got = read(fds[0], &err, sizeof(err))) < 0 && errno == EINTR)
		;
	close(fds[0]);
	reap(pid, &ws);
	if (got == sizeof(err)) {
		st->exec_errno = err;
		errno = err;
		return dlt_error_errno(DLT_EFAIL, "mpirun");
	}
	return ended(st, 0, ws, "mpirun", "");
}
