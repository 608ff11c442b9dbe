/* The local launcher: each trial a child process of the searcher. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "search/search.h"

/* In the child, between fork and exec: only async-signal-safe calls,
 * and the one message a failed exec leaves goes to the trial's log. */
static void exec_trial(const dlt_trial_cmd *cmd, pid_t parent)
{
	int fd = open(cmd->log, O_WRONLY | O_CREAT | O_APPEND, 0666);
	int in = open("/dev/null", O_RDONLY);

	/* a trial ends with its searcher rather than train on unwatched;
	 * a searcher that died before prctl took effect is caught by getppid */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(128 + SIGTERM);
	if (fd < 0 || in < 0)
		_exit(127);
	dup2(in, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (cmd->gpus)
		setenv("CUDA_VISIBLE_DEVICES", cmd->gpus, 1);
	execvp(cmd->argv[0], cmd->argv);
	dprintf(2, "dlt-search: %s: %s\n", cmd->argv[0], strerror(errno));
	_exit(127);
}

static int local_start(void *ctx, const dlt_trial_cmd *cmd, long long *id)
{
	pid_t parent = getpid(), pid;

	(void)ctx;
	fflush(NULL);
	if ((pid = fork()) < 0)
		return dlt_error_errno(DLT_EIO, "fork");
	if (pid == 0)
		exec_trial(cmd, parent);
	*id = pid;
	return 0;
}

static int local_poll(void *ctx, double timeout, long long *id, int *status)
{
	double end = dlt_now() + timeout;
	int st;

	(void)ctx;
	for (;;) {
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid > 0) {
			*id = pid;
			*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			return 1;
		}
		if (pid < 0 && errno == ECHILD)
			return 0;
		if (pid < 0 && errno != EINTR)
			return dlt_error_errno(DLT_EIO, "waitpid");
		if (dlt_now() >= end)
			return 0;
		dlt_sleep(0.01);
	}
}

static int local_stop(void *ctx, long long id)
{
	(void)ctx;
	if (kill((pid_t)id, SIGTERM) < 0 && errno != ESRCH)
		return dlt_error_errno(DLT_EIO, "kill %lld", id);
	return 0;
}

void dlt_launcher_local(dlt_launcher *l)
{
	*l = (dlt_launcher){ .name = "local", .start = local_start, .poll = local_poll,
			     .stop = local_stop };
}

void dlt_launcher_close(dlt_launcher *l)
{
	if (l->close)
		l->close(l->ctx);
	l->ctx = NULL;
}
