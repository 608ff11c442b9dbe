/* The table of sync points of a job's ranks (dlt_beats_*): the wait of a
 * rank whose peer stalls names the peer.  The ranks are two processes
 * here and their comm a fake one whose waits are the table itself, since
 * NCCL, whose failures the table names, needs two GPUs.  And the launcher
 * of forked ranks (dlt_launch_*), whose ranks here train nothing. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/comm.h"
#include "tap.h"
#include "util/util.h"

/* Every rank at this one's sync point, or the deadline: the wait of a
 * comm that, like NCCL, cannot say whom it waits for. */
static int fake_wait(dlt_comm *c)
{
	double t0 = dlt_now();
	for (;;) {
		int all = 1;
		dlt_beats_alive(c);
		for (int r = 0; r < c->size; r++)
			all &= __atomic_load_n(&c->beats[2 * r], __ATOMIC_RELAXED) >= c->point;
		if (all)
			return 0;
		if (dlt_now() - t0 > c->timeout) {
			strcpy(c->why, "fake: no answer from every rank");
			return -1;
		}
		usleep(1000);
	}
}

/* A collective that never ends (NCCL's, with a peer stopped inside it),
 * the waiting rank alive all along */
static int fake_hang(dlt_comm *c)
{
	double t0 = dlt_now();
	while (dlt_now() - t0 <= c->timeout) {
		dlt_beats_alive(c);
		usleep(1000);
	}
	strcpy(c->why, "fake: no answer from every rank");
	return -1;
}

/* A rank stopped inside the wait (SIGSTOP): it says nothing for 1 s */
static int fake_stopped(dlt_comm *c)
{
	(void)c;
	usleep(1000000);
	return 0;
}

/* A failure that comes at once (NCCL: "remote process exited"). */
static int fake_gone(dlt_comm *c, double *x, int n)
{
	strcpy(c->why, "fake: a peer is gone");
	return -1;
}

static dlt_comm *fake_comm(int rank, int size, int beats)
{
	dlt_comm *c = calloc(1, sizeof(*c));
	c->rank = rank;
	c->size = size;
	c->timeout = 0.3;
	c->sum_wait = fake_wait;
	c->sum_f64 = fake_gone;
	if (beats >= 0 && dlt_beats_attach(c, dup(beats)) != 0) {
		free(c);
		return NULL;
	}
	return c;
}

/* A rank of the launcher: its rank in job and in the protocol's
 * variables, NCCL's pipe from rank 0 (a byte for each other rank) and the
 * table of sync points there; else a status that says what was not. */
static int rank_checks(const dlt_rank_info *job, void *ctx)
{
	const char *id = getenv("DLT_NCCL_ID_FD"), *beats = getenv("DLT_BEATS_FD");
	dlt_rank_info env;
	dlt_comm *c;
	char b = 'x';

	if (dlt_rank_info_get(&env) < 0 || env.rank != job->rank || env.size != 3 ||
	    env.local_rank != job->rank || env.local_size != 3 ||
	    strcmp(env.launcher, "dlt-train") || strcmp(job->comm, "") || !id || !beats)
		return 10;
	for (int i = 1; job->rank == 0 && i < job->size; i++)
		if (write(atoi(id), &b, 1) != 1)
			return 11;
	if (job->rank != 0 && (read(atoi(id), &b, 1) != 1 || b != 'x'))
		return 12;
	if (!(c = fake_comm(job->rank, job->size, atoi(beats))))
		return 13;
	dlt_comm_close(c);
	return 0;
}

/* Rank fail->rank fails, with status 3 or killed by fail->sig; the others
 * would wait for 10 s, unless ended.  sig SIGALRM: every rank dies of the
 * alarm that the launcher forwards. */
struct fail {
	int rank, sig;
};

static int rank_fails(const dlt_rank_info *job, void *ctx)
{
	const struct fail *f = ctx;

	if (f->sig == SIGALRM)
		signal(SIGALRM, SIG_DFL);
	else if (job->rank == f->rank && f->sig)
		raise(f->sig);
	else if (job->rank == f->rank)
		return 3;
	sleep(10);
	return 0;
}

static int child_exits_4(void *ctx)
{
	(void)ctx;
	return 4;
}

static void test_launch(void)
{
	dlt_launch_status st;
	struct fail f = { 1, 0 };
	char *path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
	char *argv[] = { "dlt-train", NULL };
	double t0;

	ok_rc(dlt_launch_ranks(3, NULL, rank_checks, NULL, &st), 0, "3 ranks, each told its rank");
	ok(st.exit == 0 && st.rank == -1 && st.signal == 0, "the job's status 0, no rank failed");

	t0 = dlt_now();
	ok_rc(dlt_launch_ranks(3, "", rank_fails, &f, &st), DLT_EFAIL, "rank 1 exits with 3");
	ok(st.exit == 3 && st.rank == 1 && st.signal == 0, "the job's status is rank 1's: %d",
	   st.exit);
	ok(strcmp(dlt_errmsg(), "rank 1 exited with status 3; ending the job") == 0, "says so: %s",
	   dlt_errmsg());
	ok(dlt_now() - t0 < 5, "the other ranks ended at once");

	f = (struct fail){ 2, SIGKILL };
	ok_rc(dlt_launch_ranks(3, "", rank_fails, &f, &st), DLT_EFAIL, "rank 2 killed");
	ok(st.exit == 128 + SIGKILL && st.rank == 2 && st.signal == SIGKILL,
	   "the job's status 128 + 9: %d", st.exit);
	ok(strcmp(dlt_errmsg(), "rank 2 died of signal 9 (Killed); ending the job") == 0,
	   "says so: %s", dlt_errmsg());

	/* the launcher's handler reaches every rank */
	f = (struct fail){ -1, SIGALRM };
	signal(SIGALRM, dlt_launch_forward_signal);
	alarm(1);
	ok_rc(dlt_launch_ranks(2, "", rank_fails, &f, &st), DLT_EFAIL, "a forwarded SIGALRM");
	ok(st.signal == SIGALRM && st.exit == 128 + SIGALRM, "ends the job: %s", dlt_errmsg());
	signal(SIGALRM, SIG_DFL);

	ok_rc(dlt_launch_ranks(0, "", rank_fails, &f, &st), DLT_EINPUT, "0 ranks");
	ok(st.exit == 1 && st.rank == -1, "no job: status 1, no rank");

	ok_rc(dlt_launch_child(child_exits_4, NULL, &st), DLT_EFAIL, "a child that exits with 4");
	ok(st.exit == 4 && st.rank == 0 && st.signal == 0, "its status: %d", st.exit);

	setenv("PATH", "/nonexistent", 1);
	ok_rc(dlt_launch_mpirun(2, argv, &st), DLT_EFAIL, "no mpirun on PATH");
	ok(st.exec_errno == ENOENT && st.exit == 1 && st.rank == -1, "the exec's errno, status 1");
	ok(strcmp(dlt_errmsg(), "mpirun: No such file or directory") == 0, "says so: %s",
	   dlt_errmsg());
	if (path)
		setenv("PATH", path, 1);
	free(path);
}

int main(void)
{
	int fd = dlt_beats_create(2), st;
	dlt_comm *c;
	double x = 1;
	pid_t pid;

	ok(fd >= 0, "a table of 2 ranks");
	fflush(NULL);
	if ((pid = fork()) == 0) {	/* rank 1: two sync points, then gone */
		dlt_comm *peer = fake_comm(1, 2, fd);
		_exit(!peer || dlt_comm_sum_wait(peer) || dlt_comm_sum_wait(peer));
	}
	c = fake_comm(0, 2, fd);
	ok(c && c->beats, "rank 0 attaches the table");
	ok_rc(dlt_comm_sum_wait(c), 0, "sync point 1 with rank 1");
	ok_rc(dlt_comm_sum_wait(c), 0, "sync point 2 with rank 1");
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1 reached both");
	ok_rc(dlt_comm_sum_wait(c), DLT_EFAIL, "sync point 3: rank 1 never comes");
	ok(strcmp(dlt_errmsg(), "gradient sum: no answer from rank 1 in 0.3 s "
		  "(it died or stalls)") == 0, "the timeout names rank 1: %s", dlt_errmsg());
	ok(c->beats[0] == 3 && c->beats[2] == 2, "the table: rank 0 at 3, rank 1 at 2");
	ok_rc(dlt_comm_sum_f64(c, &x, 1), DLT_EFAIL, "a failure before the deadline");
	ok(strcmp(dlt_errmsg(), "fake: a peer is gone (rank 1 had not come to the "
		  "metrics sum)") == 0, "keeps the reason and names rank 1: %s", dlt_errmsg());
	dlt_comm_close(c);

	ok(!fake_comm(0, 3, fd), "a table of 2 ranks for a job of 3");
	ok_msg("not a table of 3 ranks", "says so");
	close(fd);

	/* both reach the point and wait in it, rank 1 stopped there: named
	 * by its silence; alive and waiting too, nobody is */
	for (int stopped = 1; stopped >= 0; stopped--) {
		fd = dlt_beats_create(2);
		fflush(NULL);
		if ((pid = fork()) == 0) {
			dlt_comm *peer = fake_comm(1, 2, fd);
			peer->sum_wait = stopped ? fake_stopped : fake_hang;
			peer->timeout = 1.0;	/* outlives rank 0's wait */
			_exit(!peer || dlt_comm_sum_wait(peer) != (stopped ? 0 : DLT_EFAIL));
		}
		c = fake_comm(0, 2, fd);
		c->sum_wait = fake_hang;
		usleep(100000);	/* rank 1 at the point first */
		ok_rc(dlt_comm_sum_wait(c), DLT_EFAIL, "%s: the wait times out",
		      stopped ? "stopped" : "alive");
		ok(strcmp(dlt_errmsg(), stopped ? "gradient sum: no answer from rank 1 in 0.3 s "
				  "(it died or stalls)" : "fake: no answer from every rank") == 0,
		   "rank 1 %s inside the sum: %s", stopped ? "stopped" : "waiting", dlt_errmsg());
		waitpid(pid, &st, 0);
		dlt_comm_close(c);
		close(fd);
	}
	fd = dlt_beats_create(2);

	c = fake_comm(0, 2, -1);
	ok_rc(dlt_comm_sum_f64(c, &x, 1), DLT_EFAIL, "without a table");
	ok(strcmp(dlt_errmsg(), "fake: a peer is gone") == 0, "the reason alone: %s",
	   dlt_errmsg());
	dlt_comm_close(c);
	close(fd);

	test_launch();
	return done_testing();
}
