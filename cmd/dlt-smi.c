/* dlt-smi: the GPUs of this machine (through NVML) and the training jobs
 * on them (from their run directories), once or every few seconds, as a
 * table for a person or CSV / JSON Lines for a log. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "smi/nvml.h"
#include "smi/smi.h"

static const char prog[] = "dlt-smi";

static const char usage[] =
	"usage: dlt-smi [-i GPU[,GPU...]] [-q FIELD[,FIELD...]] [-f FORMAT] [-l SEC] [-c COUNT] [--runs DIR]\n"
	"       dlt-smi jobs [-f FORMAT] [-l SEC] [-c COUNT] [--runs DIR]\n"
	"\n"
	"  -i, --id GPU,...       only these GPUs (NVML indices)\n"
	"  -q, --query FIELD,...  only these GPU fields (see dlt-smi(1)): index, name,\n"
	"                         pci.bus_id, utilization.gpu, utilization.memory,\n"
	"                         memory.used, memory.total, power.draw, power.limit,\n"
	"                         temperature.gpu, clocks.sm, clocks.mem, fan.speed,\n"
	"                         pstate, clocks_throttle_reasons.active, ecc.errors\n"
	"  -f, --format FORMAT    table (default), csv or json (JSON Lines)\n"
	"  -l, --loop SEC         a sample every SEC seconds, until interrupted\n"
	"  -c, --count COUNT      stop after COUNT samples (every second without -l)\n"
	"      --runs DIR         the run directories of the jobs (default $DLT_RUNS,\n"
	"                         else runs)\n"
	"  -h, --help             this text\n"
	"      --version          the version\n"
	"\n"
	"jobs shows only the training jobs, and needs no GPU.\n";

enum { OPT_RUNS = 256, OPT_VERSION };

static const struct option longopts[] = {
	{ "id", required_argument, NULL, 'i' },
	{ "query", required_argument, NULL, 'q' },
	{ "format", required_argument, NULL, 'f' },
	{ "loop", required_argument, NULL, 'l' },
	{ "count", required_argument, NULL, 'c' },
	{ "runs", required_argument, NULL, OPT_RUNS },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* ---- GPU fields ----------------------------------------------------------- */

enum { F_INDEX, F_NAME, F_BUS, F_UTIL, F_UTILMEM, F_MEMUSED, F_MEMTOTAL, F_POWER,
       F_POWERLIMIT, F_TEMP, F_CLOCKSM, F_CLOCKMEM, F_FAN, F_PSTATE, F_THROTTLE, F_ECC,
       NFIELDS };

static const struct field {
	const char *name;	/* CSV header, JSON key, --query name */
	const char *label;	/* table header */
	int string;		/* a JSON string, not a number */
	int query;		/* the NVML query that gives it, DLT_GPU_Q_*; -1 none */
} fields[NFIELDS] = {
	{ "index", "GPU", 0, -1 },
	{ "name", "NAME", 1, DLT_GPU_Q_NAME },
	{ "pci.bus_id", "BUS-ID", 1, DLT_GPU_Q_PCI },
	{ "utilization.gpu", "UTIL%", 0, DLT_GPU_Q_UTIL },
	{ "utilization.memory", "MUTIL%", 0, DLT_GPU_Q_UTIL },
	{ "memory.used", "MEM-MiB", 0, DLT_GPU_Q_MEM },
	{ "memory.total", "TOTAL-MiB", 0, DLT_GPU_Q_MEM },
	{ "power.draw", "POWER-W", 0, DLT_GPU_Q_POWER },
	{ "power.limit", "LIMIT-W", 0, DLT_GPU_Q_POWER_LIMIT },
	{ "temperature.gpu", "TEMP-C", 0, DLT_GPU_Q_TEMP },
	{ "clocks.sm", "SM-MHz", 0, DLT_GPU_Q_CLOCK_SM },
	{ "clocks.mem", "MEM-MHz", 0, DLT_GPU_Q_CLOCK_MEM },
	{ "fan.speed", "FAN%", 0, DLT_GPU_Q_FAN },
	{ "pstate", "PSTATE", 1, DLT_GPU_Q_PSTATE },
	{ "clocks_throttle_reasons.active", "THROTTLE", 1, DLT_GPU_Q_THROTTLE },
	{ "ecc.errors", "ECC", 0, DLT_GPU_Q_ECC },
};

/* Whether field f of g is missing because its query failed (not because
 * the GPU does not have it: that is n/a). */
static int field_failed(const dlt_gpu *g, int f)
{
	return fields[f].query >= 0 && DLT_GPU_FAILED(g, fields[f].query);
}

/* A number as people write it: no trailing zeros, at most 3 decimals. */
static const char *fmt_num(double v, char *buf, size_t size)
{
	char *p;

	snprintf(buf, size, "%.3f", v);
	if ((p = strchr(buf, '.'))) {
		char *end = buf + strlen(buf);
		while (end > p && (end[-1] == '0' || end[-1] == '.'))
			if (*--end == '.') {
				*end = 0;
				break;
			} else {
				*end = 0;
			}
	}
	return buf;
}

/* The text of field f of g, NULL for n/a (or a failed query). */
static const char *field_text(const dlt_gpu *g, int f, char *buf, size_t size)
{
	double v;

	switch (f) {
	case F_INDEX: snprintf(buf, size, "%u", g->index); return buf;
	case F_NAME: return strcmp(g->name, "n/a") ? g->name : NULL;
	case F_BUS: return strcmp(g->bus_id, "n/a") ? g->bus_id : NULL;
	case F_PSTATE:
		if (g->pstate < 0)
			return NULL;
		snprintf(buf, size, "P%d", g->pstate);
		return buf;
	case F_THROTTLE:
		if (!g->have_throttle)
			return NULL;
		snprintf(buf, size, "0x%llx", (unsigned long long)g->throttle);
		return buf;
	case F_UTIL: v = g->util_gpu; break;
	case F_UTILMEM: v = g->util_mem; break;
	case F_MEMUSED: v = g->mem_used; break;
	case F_MEMTOTAL: v = g->mem_total; break;
	case F_POWER: v = g->power; break;
	case F_POWERLIMIT: v = g->power_limit; break;
	case F_TEMP: v = g->temp; break;
	case F_CLOCKSM: v = g->clock_sm; break;
	case F_CLOCKMEM: v = g->clock_mem; break;
	case F_FAN: v = g->fan; break;
	case F_ECC: v = g->ecc; break;
	default: return NULL;
	}
	return v < 0 ? NULL : fmt_num(v, buf, size);
}

/* ---- arguments ------------------------------------------------------------ */

struct args {
	int jobs_only;
	int format;		/* CLI_* */
	double loop;		/* seconds; 0 once */
	long long count;	/* 0: no end */
	const char *runs;
	int runs_given;
	int q[NFIELDS], nq;
	int ids[64], nids;
	int help, version;
};

/* The one subcommand, for cli_command_find: main runs it (a->jobs_only) as
 * it runs no command, the GPUs and the jobs */
static const cli_command commands[] = {
	{ "jobs", NULL, 0, 0, 0, 0, NULL },
	{ NULL, NULL, 0, 0, 0, 0, NULL },
};
static const cli_program program = { .name = prog, .usage = usage, .commands = commands };

static int parse_opt(struct args *a, int c, char **argv)
{
	char item[64];
	long long v;

	switch (c) {
	case 'i':
		for (const char *s = optarg; *s || a->nids == 0;) {
			cli_next_item(&s, ",", item, sizeof(item));
			if (a->nids == 64)
				return cli_usage(prog, "-i: at most 64 GPUs");
			if (dlt_parse_i64(item, 0, 4095, &v, "-i") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			a->ids[a->nids++] = (int)v;
		}
		return 0;
	case 'q':
		a->nq = 0;
		for (const char *s = optarg; *s || a->nq == 0;) {
			int f;
			cli_next_item(&s, ",", item, sizeof(item));
			for (f = 0; f < NFIELDS && strcmp(fields[f].name, item); f++)
				;
			if (f == NFIELDS)
				return cli_usage(prog, "--query: unknown field '%s' (see dlt-smi -h)",
						 item);
			if (a->nq == NFIELDS)
				return cli_usage(prog, "--query: at most %d fields", NFIELDS);
			a->q[a->nq++] = f;
		}
		return 0;
	case 'f': return cli_format(prog, optarg, &a->format);
	case 'l':
		if (dlt_parse_f64(optarg, &a->loop, "-l") < 0)
			return cli_usage(prog, "%s", dlt_errmsg());
		if (!(a->loop >= 0.01 && a->loop <= 86400))
			return cli_usage(prog, "-l: %s is not a number of seconds from 0.01 to 86400",
					 optarg);
		return 0;
	case 'c':
		if (dlt_parse_i64(optarg, 1, 1000000000, &a->count, "-c") < 0)
			return cli_usage(prog, "%s", dlt_errmsg());
		return 0;
	case OPT_RUNS: a->runs = optarg; a->runs_given = 1; return 0;
	case 'h': a->help = 1; return 0;
	case OPT_VERSION: a->version = 1; return 0;
	default: return cli_bad_option(prog, c, argv, longopts);
	}
}

static int parse_args(struct args *a, int argc, char **argv)
{
	const cli_command *cmd;
	int c, rc;

	if ((rc = cli_command_find(&program, &cmd, &argc, &argv)) != 0)
		return rc;
	a->jobs_only = cmd != NULL;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":i:q:f:l:c:h", longopts, NULL)) != -1) {
		if ((rc = parse_opt(a, c, argv)) != 0)
			return rc;
		if (a->help || a->version)
			return 0;
	}
	if (optind < argc)
		return cli_usage(prog, "unexpected operand '%s'", argv[optind]);
	if (a->jobs_only && (a->nq || a->nids))
		return cli_usage(prog, "jobs takes no %s", a->nq ? "--query" : "-i");
	if (!a->nq)
		for (a->nq = 0; a->nq < NFIELDS; a->nq++)
			a->q[a->nq] = a->nq;
	if (a->count && !a->loop)
		a->loop = 1;
	if (!a->runs_given) {
		const char *env = getenv("DLT_RUNS");
		a->runs = env && *env ? env : "runs";
	}
	return 0;
}

/* ---- one sample ------------------------------------------------------------ */

struct sample {
	double time;
	dlt_smi_host host;
	int have_host;
	dlt_gpu *gpus;
	size_t ngpus;
	dlt_smi_job *jobs;
	size_t njobs;
};

static void sample_free(struct sample *s)
{
	for (size_t i = 0; i < s->ngpus; i++)
		dlt_gpu_free(&s->gpus[i]);
	free(s->gpus);
	dlt_smi_jobs_free(s->jobs, s->njobs);
	memset(s, 0, sizeof(*s));
}

static int take_sample(struct sample *s, const struct args *a, dlt_nvml *nv)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->time = dlt_wall();
	s->have_host = dlt_smi_host_read(&s->host) == 0;
	if (nv) {
		size_t want = a->nids ? (size_t)a->nids : dlt_nvml_count(nv);
		if (want && !(s->gpus = dlt_calloc(want, sizeof(*s->gpus))))
			return DLT_ENOMEM;
		for (size_t i = 0; i < want; i++) {
			unsigned idx = a->nids ? (unsigned)a->ids[i] : (unsigned)i;
			DLT_TRY(dlt_nvml_sample(nv, idx, &s->gpus[i]));
			s->ngpus++;
		}
	}
	if (a->jobs_only || a->format != CLI_CSV)
		DLT_TRY(dlt_smi_jobs(a->runs, !a->runs_given, &s->jobs, &s->njobs));
	return 0;
fail:
	sample_free(s);
	return rc;
}

/* The GPUs the process pid is on, as "0,2"; "" for none. */
static void job_gpus(const struct sample *s, long long pid, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = 0;
	for (size_t i = 0; i < s->ngpus && pid > 0; i++)
		for (int k = 0; k < s->gpus[i].nprocs; k++)
			if (s->gpus[i].procs[k].pid == pid && len + 12 < size) {
				len += (size_t)snprintf(buf + len, size - len, "%s%u", len ? "," : "",
							s->gpus[i].index);
				break;
			}
}

static const char *fmt_eta(double eta, char *buf, size_t size)
{
	long long t;

	if (isnan(eta))
		return NULL;
	/* a stalled run's estimate may be anything: at most a million hours,
	 * and converted only once it fits */
	t = eta < 3.6e9 ? (long long)(eta + 0.5) : 3600000000LL;
	if (t >= 3600)
		snprintf(buf, size, "%lldh%02lldm", t / 3600, t / 60 % 60);
	else
		snprintf(buf, size, "%lldm%02llds", t / 60, t % 60);
	return buf;
}

/* ---- table ----------------------------------------------------------------- */

struct style {
	const char *bold, *red, *green, *off;
};

/* A cell of the table: the value, n/a, or ERR! (as nvidia-smi shows a
 * query that failed; the ERROR column says why). */
static const char *table_text(const dlt_gpu *g, int f, char *buf, size_t size)
{
	const char *v;

	if (field_failed(g, f))
		return "ERR!";
	v = field_text(g, f, buf, size);
	return v ? v : "n/a";
}

/* The printf width of column k: numbers right-aligned, strings left, and
 * no padding after the last column unless more follows. */
static int col_width(const struct args *a, int k, const int *w, int more)
{
	if (!fields[a->q[k]].string)
		return w[k];
	return k == a->nq - 1 && !more ? 0 : -w[k];
}

static void print_table(const struct sample *s, const struct args *a, int nvml,
			const struct style *c)
{
	char buf[64], when[32];
	time_t t = (time_t)s->time;
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("%s%s%s", c->bold, when, c->off);
	if (s->have_host)
		printf("  load %.2f %.2f %.2f (%d cpus)  memory %.0f/%.0f MiB used\n", s->host.load1,
		       s->host.load5, s->host.load15, s->host.cpus,
		       s->host.mem_total - s->host.mem_avail, s->host.mem_total);
	else
		printf("\n");
	if (nvml) {
		/* widths: the longest of the header and the values; an ERROR
		 * column only when a GPU has an error */
		int w[NFIELDS], errors = 0;
		for (size_t i = 0; i < s->ngpus; i++)
			errors |= s->gpus[i].error[0] != 0;
		for (int k = 0; k < a->nq; k++) {
			int f = a->q[k];
			w[k] = (int)strlen(fields[f].label);
			for (size_t i = 0; i < s->ngpus; i++) {
				const char *v = table_text(&s->gpus[i], f, buf, sizeof(buf));
				if ((int)strlen(v) > w[k])
					w[k] = (int)strlen(v);
			}
		}
		printf("\n%s", c->bold);
		printf("%-3s", "GPU");
		for (int k = 0; k < a->nq; k++)
			if (a->q[k] != F_INDEX)
				printf("  %*s", col_width(a, k, w, errors), fields[a->q[k]].label);
		if (errors)
			printf("  ERROR");
		printf("%s\n", c->off);
		for (size_t i = 0; i < s->ngpus; i++) {
			const dlt_gpu *g = &s->gpus[i];
			printf("%-3u", g->index);
			for (int k = 0; k < a->nq; k++)
				if (a->q[k] != F_INDEX)
					printf("  %*s", col_width(a, k, w, g->error[0] != 0),
					       table_text(g, a->q[k], buf, sizeof(buf)));
			if (g->error[0])
				printf("  %s%s%s", c->red, g->error, c->off);
			printf("\n");
		}
		int any = 0;
		for (size_t i = 0; i < s->ngpus; i++)
			for (int k = 0; k < s->gpus[i].nprocs; k++) {
				const dlt_gpu_proc *p = &s->gpus[i].procs[k];
				if (!any++)
					printf("\n%s%-3s  %8s  %-20s  %9s%s\n", c->bold, "GPU", "PID",
					       "PROCESS", "MEM-MiB", c->off);
				printf("%-3u  %8lld  %-20s  %9s\n", s->gpus[i].index, p->pid,
				       p->name[0] ? p->name : "?",
				       p->mem_mib < 0 ? "n/a" : fmt_num(p->mem_mib, buf, sizeof(buf)));
			}
	}
	if (s->njobs) {
		int slurm = 0;
		for (size_t i = 0; i < s->njobs; i++)
			slurm |= s->jobs[i].slurm_job[0] != 0;
		/* GPUS padded only when the Slurm columns follow */
		printf("\n%s%-20s  %-7s  %7s  %8s  %9s  %9s  %-16s  %8s  %-*s%s%s\n", c->bold, "JOB",
		       "STATUS", "EPOCH", "STEP", "SAMPLES/S", "LOSS", "METRIC", "ETA", slurm ? 8 : 0,
		       "GPUS", slurm ? "  SLURM       NODE" : "", c->off);
		for (size_t i = 0; i < s->njobs; i++) {
			const dlt_smi_job *j = &s->jobs[i];
			char ep[32], sps[32], loss[32], met[64], eta[32], gpus[64];
			const char *col = strcmp(j->status, "running") == 0 ? c->green :
				strcmp(j->status, "dead") == 0 || strcmp(j->status, "failed") == 0 ?
				c->red : "";
			if (j->epochs)
				snprintf(ep, sizeof(ep), "%lld/%lld", j->epoch, j->epochs);
			else
				snprintf(ep, sizeof(ep), "%lld", j->epoch);
			if (j->metric[0])
				snprintf(met, sizeof(met), "%s=%.4g", j->metric, j->metric_value);
			else
				snprintf(met, sizeof(met), "n/a");
			job_gpus(s, j->pid, gpus, sizeof(gpus));
			printf("%-20s  %s%-7s%s  %7s  %8lld  %9s  %9s  %-16s  %8s  %-*s", j->name, col,
			       j->status, *col ? c->off : "", ep, j->step,
			       isnan(j->samples_per_s) ? "n/a" :
			       (snprintf(sps, sizeof(sps), "%.1f", j->samples_per_s), sps),
			       isnan(j->loss) ? "n/a" : (snprintf(loss, sizeof(loss), "%.4g", j->loss), loss),
			       met, fmt_eta(j->eta, eta, sizeof(eta)) ? eta : "n/a", slurm ? 8 : 0,
			       gpus[0] ? gpus : "-");
			if (slurm)
				printf("  %-10s  %s", j->slurm_job[0] ? j->slurm_job : "-",
				       j->slurm_job[0] && j->node[0] ? j->node : "-");
			putchar('\n');
		}
	}
}

/* ---- CSV ------------------------------------------------------------------- */

static void print_csv(const struct sample *s, const struct args *a, int header)
{
	char buf[64], when[32];

	snprintf(when, sizeof(when), "%.3f", s->time);
	if (a->jobs_only) {
		if (header)
			printf("time,job,status,epoch,epochs,step,samples_per_s,loss,metric,"
			       "metric_value,eta_s,gpus,slurm_job,node\n");
		for (size_t i = 0; i < s->njobs; i++) {
			const dlt_smi_job *j = &s->jobs[i];
			char gpus[64];
			printf("%s,", when);
			cli_csv_field(stdout, j->name);
			printf(",%s,%lld,%lld,%lld,", j->status, j->epoch, j->epochs, j->step);
			printf("%s,", isnan(j->samples_per_s) ? "n/a" : fmt_num(j->samples_per_s, buf, sizeof(buf)));
			if (isnan(j->loss))
				printf("n/a,");
			else
				printf("%.9g,", j->loss);
			if (j->metric[0])
				printf("%s,%.9g,", j->metric, j->metric_value);
			else
				printf("n/a,n/a,");
			printf("%s,", isnan(j->eta) ? "n/a" : fmt_num(round(j->eta), buf, sizeof(buf)));
			job_gpus(s, j->pid, gpus, sizeof(gpus));
			for (char *p = gpus; *p; p++)
				if (*p == ',')
					*p = ' ';
			printf("%s,", gpus);
			cli_csv_field(stdout, j->slurm_job);
			putchar(',');
			cli_csv_field(stdout, j->node);
			putchar('\n');
		}
		return;
	}
	if (header) {
		printf("time");
		for (int k = 0; k < a->nq; k++)
			printf(",%s", fields[a->q[k]].name);
		printf(",error\n");
	}
	for (size_t i = 0; i < s->ngpus; i++) {
		const dlt_gpu *g = &s->gpus[i];
		printf("%s", when);
		/* empty where the query failed, n/a where unsupported */
		for (int k = 0; k < a->nq; k++) {
			const char *v = field_failed(g, a->q[k]) ? "" :
				field_text(g, a->q[k], buf, sizeof(buf));
			putchar(',');
			cli_csv_field(stdout, v ? v : "n/a");
		}
		putchar(',');
		cli_csv_field(stdout, g->error);
		putchar('\n');
	}
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_jobs(dlt_json *j, const struct sample *s)
{
	char buf[64];

	dlt_json_array_begin(j, "jobs");
	for (size_t i = 0; i < s->njobs; i++) {
		const dlt_smi_job *b = &s->jobs[i];
		char gpus[64];
		dlt_json_object_begin(j, NULL);
		dlt_json_str(j, "name", b->name);
		dlt_json_str(j, "status", b->status);
		dlt_json_int(j, "pid", b->pid);
		dlt_json_int(j, "epoch", b->epoch);
		dlt_json_int(j, "epochs", b->epochs);
		dlt_json_int(j, "step", b->step);
		dlt_json_num(j, "samples_per_s", b->samples_per_s);
		dlt_json_num(j, "loss", b->loss);
		if (b->metric[0])
			dlt_json_num(j, b->metric, b->metric_value);
		if (isnan(b->eta))
			dlt_json_raw(j, "eta_s", "null");
		else
			dlt_json_raw(j, "eta_s", fmt_num(round(b->eta), buf, sizeof(buf)));
		job_gpus(s, b->pid, gpus, sizeof(gpus));
		dlt_json_array_begin(j, "gpus");
		for (const char *p = gpus; *p;) {
			char one[16];
			cli_next_item(&p, ",", one, sizeof(one));
			dlt_json_raw(j, NULL, one);
		}
		dlt_json_array_end(j);
		if (b->slurm_job[0]) {
			dlt_json_str(j, "slurm_job", b->slurm_job);
			dlt_json_str(j, "node", b->node);
		}
		dlt_json_end(j);
	}
	dlt_json_array_end(j);
}

static int print_json(const struct sample *s, const struct args *a, int nvml)
{
	char buf[64];
	dlt_json j;
	int rc;

	dlt_json_begin(&j);
	dlt_json_raw(&j, "time", fmt_num(s->time, buf, sizeof(buf)));
	if (s->have_host) {
		dlt_json_object_begin(&j, "host");
		dlt_json_num(&j, "load1", s->host.load1);
		dlt_json_num(&j, "load5", s->host.load5);
		dlt_json_num(&j, "load15", s->host.load15);
		dlt_json_int(&j, "cpus", s->host.cpus);
		dlt_json_raw(&j, "memory.used", fmt_num(s->host.mem_total - s->host.mem_avail,
							  buf, sizeof(buf)));
		dlt_json_raw(&j, "memory.total", fmt_num(s->host.mem_total, buf, sizeof(buf)));
		dlt_json_end(&j);
	}
	if (nvml) {
		dlt_json_array_begin(&j, "gpus");
		for (size_t i = 0; i < s->ngpus; i++) {
			const dlt_gpu *g = &s->gpus[i];
			dlt_json_object_begin(&j, NULL);
			dlt_json_int(&j, "index", g->index);
			/* the fields that answered (null: unsupported); those
			 * whose query failed are left out, and error says why */
			for (int k = 0; k < a->nq; k++) {
				int f = a->q[k];
				const char *v = field_text(g, f, buf, sizeof(buf));
				if (f == F_INDEX || field_failed(g, f))
					continue;
				if (!v)
					dlt_json_raw(&j, fields[f].name, "null");
				else if (fields[f].string)
					dlt_json_str(&j, fields[f].name, v);
				else
					dlt_json_raw(&j, fields[f].name, v);
			}
			if (!DLT_GPU_FAILED(g, DLT_GPU_Q_PROCS)) {
				dlt_json_array_begin(&j, "processes");
				for (int k = 0; k < g->nprocs; k++) {
					const dlt_gpu_proc *p = &g->procs[k];
					dlt_json_object_begin(&j, NULL);
					dlt_json_int(&j, "pid", p->pid);
					dlt_json_str(&j, "name", p->name);
					dlt_json_raw(&j, "memory.used", p->mem_mib < 0 ? "null" :
						     fmt_num(p->mem_mib, buf, sizeof(buf)));
					dlt_json_end(&j);
				}
				dlt_json_array_end(&j);
			}
			if (g->error[0])
				dlt_json_str(&j, "error", g->error);
			dlt_json_end(&j);
		}
		dlt_json_array_end(&j);
	}
	json_jobs(&j, s);
	dlt_json_end(&j);
	if ((rc = dlt_json_ok(&j)) == 0)
		printf("%.*s\n", (int)j.buf.len, j.buf.data);
	dlt_json_free(&j);
	return rc;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	struct args a = { 0 };
	struct style plain = { "", "", "", "" }, colour = { "\033[1m", "\033[31m", "\033[32m",
		"\033[0m" };
	const struct style *c = &plain;
	dlt_nvml *nv = NULL;
	const char *lib = getenv("DLT_NVML_LIBRARY");
	int rc, tty = isatty(STDOUT_FILENO);
	double start;

	if ((rc = parse_args(&a, argc, argv)) != 0)
		return rc;
	if (a.help)
		return cli_help(usage);
	if (a.version)
		return cli_version(prog);
	if (tty && a.format == CLI_TABLE)
		c = &colour;
	if ((rc = dlt_nvml_open(&nv, lib)) < 0 && !a.jobs_only) {
		if (a.format == CLI_TABLE) {
			struct sample s = { .time = dlt_wall() };
			s.have_host = dlt_smi_host_read(&s.host) == 0;
			print_table(&s, &a, 0, c);
			fflush(stdout);
		}
		return cli_fail(prog, rc);
	}
	for (int i = 0; nv && i < a.nids; i++)
		if ((unsigned)a.ids[i] >= dlt_nvml_count(nv)) {
			unsigned n = dlt_nvml_count(nv);
			dlt_nvml_close(nv);
			return cli_usage(prog, "-i: no GPU %d (this machine has %u)", a.ids[i], n);
		}
	start = dlt_now();
	rc = 0;
	for (long long n = 0; !a.count || n < a.count; n++) {
		struct sample s;
		if (n) {
			double wait = start + (double)n * a.loop - dlt_now();
			if (wait > 0)
				dlt_sleep(wait);
		}
		if ((rc = take_sample(&s, &a, nv)) < 0)
			break;
		if (a.format == CLI_TABLE) {
			if (tty && a.loop)
				fputs("\033[H\033[2J", stdout);
			else if (n)
				putchar('\n');
			print_table(&s, &a, nv && !a.jobs_only, c);
		} else if (a.format == CLI_CSV) {
			print_csv(&s, &a, n == 0);
		} else {
			rc = print_json(&s, &a, nv && !a.jobs_only);
		}
		sample_free(&s);
		if (rc < 0 || fflush(stdout) != 0 || ferror(stdout))
			break;
		if (!a.loop)
			break;
	}
	dlt_nvml_close(nv);
	if (rc < 0)
		return cli_fail(prog, rc);
	if (ferror(stdout))
		return cli_usage(prog, "standard output: write error") - 1;
	return 0;
}
