/* codec: how well and how fast the .dlt archive stores the f32 tensors of
 * a checkpoint or model file, against plain zstd and the raw size.
 *
 * Sizes: raw; as stored in the given file; written again with each codec
 * at one level (zstd, shuffle-zstd; the writer keeps a tensor raw where a
 * codec does not shrink it); and the order-0 entropy bound of the
 * byte-shuffled planes, sum over tensors and their 4 byte planes of
 * n * H0(plane) bits, which a coder of each plane on its own cannot beat
 * without modelling context.
 * Speeds: through the archive API, single thread, best of REPS: compress is
 * dlt_archive_write_tensor of every f32 tensor into an archive on tmpfs
 * (for shuffle-zstd: the sample that picks each plane's coding, the shuffle
 * with the raw bytes' xxh64, the planes' zstd frames, the record's xxh64,
 * the write), decompress is dlt_archive_read of every one (the record's
 * xxh64, the frames, the unshuffle with the raw bytes' xxh64).  Codec raw
 * is the same path without compression: what the archive itself costs.
 * The same again in memory: the archive written to a stream whose bytes go
 * into a buffer that is already mapped, and read from that buffer, which
 * leaves out what tmpfs costs (taking fresh pages, copying into them; on
 * the Zen 3 VM where this was written, 0.4 ns a byte written, as much as
 * the codec's whole work): the codec's own speed, per core. */
#define _GNU_SOURCE		/* fopencookie */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "cmd/cli.h"
#include "util/util.h"

static const char prog[] = "codec";

static const char usage[] =
	"usage: codec [-r REPS] [-l LEVEL] [--json FILE] ARCHIVE\n"
	"\n"
	"  -r, --reps N        timing repetitions, the best is kept (default 10)\n"
	"  -l, --level N       zstd level of both codecs (default 1)\n"
	"      --json FILE     also write the results as one JSON object to FILE\n"
	"  -h, --help          this text\n";

struct tensor {
	const char *name;
	uint64_t dims[DLT_MAX_DIMS], count, raw, stored;
	int ndim;
	double bound;		/* bytes */
	void *data;
};

struct codec_result {
	int codec;
	uint64_t bytes;
	double compress_s, decompress_s;	/* through tmpfs */
	double compress_mem_s, decompress_mem_s;	/* in memory */
};

/* A stream into a buffer that the bench allocated and touched before the
 * timing, so that writing costs one copy, as into a warm page cache. */
struct sink {
	char *p;
	size_t n, cap;
};

static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
	struct sink *s = cookie;
	if (n > s->cap - s->n)
		return -1;
	memcpy(s->p + s->n, buf, n);
	s->n += n;
	return n;
}

/* Order-0 entropy, in bytes, of the esize byte planes of count elements. */
static double planes_bound(const unsigned char *p, uint64_t count, size_t esize)
{
	double bits = 0;
	for (size_t k = 0; k < esize; k++) {
		uint64_t h[256] = { 0 };
		for (uint64_t i = 0; i < count; i++)
			h[p[i * esize + k]]++;
		for (int v = 0; v < 256; v++)
			if (h[v])
				bits -= (double)h[v] * log2((double)h[v] / (double)count);
	}
	return bits / 8;
}

/* Writes every tensor with codec into path (NULL: into sink) once; *secs:
 * time in dlt_archive_write_tensor. */
static int write_all(const char *path, struct sink *sink, struct tensor *t, size_t n, int codec,
		     int level, double *secs)
{
	static const cookie_io_functions_t io = { .write = sink_write };
	dlt_archive_writer *w;
	FILE *out = stdout, *fp = NULL;
	double t0;
	int rc;

	if (!path) {
		/* the writer's "-" is stdout, which here is the sink for a while */
		sink->n = 0;
		if (fflush(stdout) != 0 || !(fp = fopencookie(sink, "w", io)))
			return dlt_error_errno(DLT_EIO, "memory stream");
		stdout = fp;
		path = "-";
	}
	rc = dlt_archive_create(&w, path);
	if (rc < 0) {
		if (fp)
			fclose(fp), stdout = out;
		return rc;
	}
	t0 = dlt_now();
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = dlt_archive_write_tensor(w, t[i].name, DLT_F32, t[i].ndim, t[i].dims,
					      t[i].data, codec, level);
	*secs = dlt_now() - t0;
	if (rc < 0)
		dlt_archive_writer_abort(w);
	else
		rc = dlt_archive_writer_close(w);
	if (fp) {
		stdout = out;
		if (fclose(fp) != 0 && rc == 0)
			rc = dlt_error(DLT_EIO, "memory stream: more than %zu bytes", sink->cap);
	}
	return rc;
}

/* Reads every tensor of path (NULL: of sink) once into bufs; *secs: time
 * in dlt_archive_read; *stored: the stored bytes of its tensors. */
static int read_all(const char *path, const struct sink *sink, struct tensor *t, size_t n,
		    void *buf, double *secs, uint64_t *stored)
{
	dlt_archive *a;
	double t0;
	int rc = 0;

	rc = path ? dlt_archive_open(&a, path) :
		    dlt_archive_open_mem(&a, sink->p, sink->n, "memory stream");
	if (rc < 0)
		return rc;
	*stored = 0;
	t0 = dlt_now();
	for (size_t i = 0; i < n && rc == 0; i++) {
		const dlt_tensor_info *ti = dlt_archive_find(a, t[i].name);
		if (!ti)
			rc = dlt_error(DLT_EFAIL, "%s: tensor '%s' missing", path, t[i].name);
		else if ((rc = dlt_archive_read(a, ti, buf, t[i].raw)) == 0)
			*stored += ti->stored_size;
	}
	*secs = dlt_now() - t0;
	dlt_archive_close(a);
	return rc;
}

static void keep_least(double *best, double s)
{
	*best = s < *best ? s : *best;
}

/* tmpfs and memory in turn, so that both see the same load */
static int measure(struct codec_result *r, const char *tmp, struct sink *sink, struct tensor *t,
		   size_t n, int level, int reps, void *buf)
{
	uint64_t bytes;
	int rc;
	r->compress_s = r->decompress_s = r->compress_mem_s = r->decompress_mem_s = INFINITY;
	for (int i = 0; i < reps; i++) {
		double s;
		if ((rc = write_all(tmp, NULL, t, n, r->codec, level, &s)) < 0)
			return rc;
		keep_least(&r->compress_s, s);
		if ((rc = read_all(tmp, NULL, t, n, buf, &s, &r->bytes)) < 0)
			return rc;
		keep_least(&r->decompress_s, s);
		if ((rc = write_all(NULL, sink, t, n, r->codec, level, &s)) < 0)
			return rc;
		keep_least(&r->compress_mem_s, s);
		if ((rc = read_all(NULL, sink, t, n, buf, &s, &bytes)) < 0)
			return rc;
		keep_least(&r->decompress_mem_s, s);
	}
	return 0;
}

static double mbps(uint64_t bytes, double s)
{
	return s > 0 ? bytes / s / 1e6 : 0;
}

static int write_json(const char *path, const char *archive, int level, int reps,
		      const struct tensor *t, size_t n, size_t n_all, uint64_t raw,
		      uint64_t stored, double bound, const struct codec_result *res, int nres)
{
	dlt_json j;
	FILE *fp;
	int rc;

	dlt_json_begin(&j);
	dlt_json_str(&j, "archive", archive);
	dlt_json_int(&j, "tensors", (long long)n_all);
	dlt_json_int(&j, "f32_tensors", (long long)n);
	dlt_json_int(&j, "level", level);
	dlt_json_int(&j, "reps", reps);
	dlt_json_int(&j, "raw_bytes", (long long)raw);
	dlt_json_int(&j, "stored_bytes", (long long)stored);
	dlt_json_num(&j, "entropy_bound_bytes", bound);
	dlt_json_num(&j, "stored_over_bound", stored / bound);
	for (int i = 0; i < nres; i++) {
		const struct codec_result *r = &res[i];
		char key[32];
		snprintf(key, sizeof(key), "%s", dlt_codec_name(r->codec));
		if (r->codec == DLT_SHUFFLE_ZSTD)
			snprintf(key, sizeof(key), "shuffle_zstd");
		dlt_json_object_begin(&j, key);
		dlt_json_int(&j, "bytes", (long long)r->bytes);
		dlt_json_num(&j, "over_raw", (double)r->bytes / raw);
		dlt_json_num(&j, "over_bound", r->bytes / bound);
		dlt_json_num(&j, "compress_mbps", mbps(raw, r->compress_s));
		dlt_json_num(&j, "decompress_mbps", mbps(raw, r->decompress_s));
		dlt_json_num(&j, "compress_mem_mbps", mbps(raw, r->compress_mem_s));
		dlt_json_num(&j, "decompress_mem_mbps", mbps(raw, r->decompress_mem_s));
		dlt_json_end(&j);
	}
	dlt_json_array_begin(&j, "per_tensor");
	for (size_t i = 0; i < n; i++) {
		dlt_json_object_begin(&j, NULL);
		dlt_json_str(&j, "name", t[i].name);
		dlt_json_int(&j, "count", (long long)t[i].count);
		dlt_json_int(&j, "stored", (long long)t[i].stored);
		dlt_json_num(&j, "bound", t[i].bound);
		dlt_json_end(&j);
	}
	dlt_json_array_end(&j);
	dlt_json_end(&j);
	if ((rc = dlt_json_ok(&j)) < 0) {
		dlt_json_free(&j);
		return rc;
	}
	if (!(fp = fopen(path, "w")) || fprintf(fp, "%s\n", j.buf.data) < 0 || fclose(fp) != 0)
		rc = dlt_error_errno(DLT_EIO, "%s", path);
	dlt_json_free(&j);
	return rc;
}

static const char *tmp_dir(void)
{
	const char *d = getenv("TMPDIR");
	if (access("/dev/shm", W_OK) == 0)
		return "/dev/shm";
	return d && *d ? d : "/tmp";
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reps", required_argument, NULL, 'r' },
		{ "level", required_argument, NULL, 'l' },
		{ "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct codec_result res[] = { { .codec = DLT_RAW }, { .codec = DLT_ZSTD },
				      { .codec = DLT_SHUFFLE_ZSTD } };
	const int nres = sizeof(res) / sizeof(res[0]);
	const char *json = NULL, *path;
	long long reps = 10, level = 1;
	struct tensor *t = NULL;
	size_t n = 0, n_all = 0, maxraw = 0;
	uint64_t raw = 0, stored = 0;
	double bound = 0;
	dlt_archive *a = NULL;
	void *buf = NULL;
	struct sink sink = { 0 };
	char tmp[4096];
	int opt, rc = 0;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":r:l:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			if (dlt_parse_i64(optarg, 1, 1000000, &reps, "--reps") < 0)
				return cli_usage(prog, "%s", dlt_errmsg());
			break;
		case 'l':
			if (dlt_parse_i64(optarg, -7, 22, &level, "--level") < 0 || level == 0)
				return cli_usage(prog, "--level: a zstd level, -7 to 22 but not 0");
			break;
		case 'j': json = optarg; break;
		case 'h': return cli_help(usage);
		default: return cli_bad_option(prog, opt, argv, longopts);
		}
	}
	if (optind + 1 != argc)
		return cli_usage(prog, "give one archive (see -h)");
	path = argv[optind];

	if ((rc = dlt_archive_open(&a, path)) < 0)
		return cli_fail(prog, rc);
	n_all = dlt_archive_count(a);
	if (!(t = dlt_calloc(n_all ? n_all : 1, sizeof(*t)))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < n_all; i++) {
		const dlt_tensor_info *ti = dlt_archive_tensor(a, i);
		struct tensor *x = &t[n];
		if (ti->dtype != DLT_F32)
			continue;
		x->name = ti->name;
		x->ndim = ti->ndim;
		memcpy(x->dims, ti->dims, sizeof(x->dims));
		x->count = ti->count;
		x->raw = ti->raw_size;
		x->stored = ti->stored_size;
		if (!(x->data = dlt_malloc(x->raw))) {
			rc = DLT_ENOMEM;
			goto fail;
		}
		if ((rc = dlt_archive_read(a, ti, x->data, x->raw)) < 0)
			goto fail;
		x->bound = planes_bound(x->data, x->count, 4);
		raw += x->raw;
		stored += x->stored;
		bound += x->bound;
		if (x->raw > maxraw)
			maxraw = x->raw;
		n++;
	}
	if (n == 0) {
		rc = dlt_error(DLT_EINPUT, "%s: no f32 tensors", path);
		goto fail;
	}
	if (!(buf = dlt_malloc(maxraw))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	/* a raw archive's size and then some, touched now */
	sink.cap = raw + raw / 8 + (n_all + 1) * (1 << 12);
	if (!(sink.p = dlt_malloc(sink.cap))) {
		rc = DLT_ENOMEM;
		goto fail;
	}
	memset(sink.p, 0, sink.cap);
	snprintf(tmp, sizeof(tmp), "%s/dlt-bench-codec-%ld.dlt", tmp_dir(), (long)getpid());
	for (int i = 0; i < nres && rc == 0; i++)
		rc = measure(&res[i], tmp, &sink, t, n, (int)level, (int)reps, buf);
	unlink(tmp);
	if (rc < 0)
		goto fail;

	printf("codec: %s: %zu f32 tensors of %zu, %.3f MB raw, zstd level %lld, best of %lld, "
	       "1 thread\n", path, n, n_all, raw / 1e6, level, reps);
	printf("  %-22s %12s %9s %9s %21s %21s\n", "", "", "", "",
	       "MB/s via tmpfs", "MB/s in memory");
	printf("  %-22s %12s %9s %9s %10s %10s %10s %10s\n", "", "bytes", "/raw", "/bound",
	       "compress", "decompress", "compress", "decompress");
	printf("  %-22s %12llu %9.4f %9.4f\n", "as stored in the file",
	       (unsigned long long)stored, (double)stored / raw, stored / bound);
	printf("  %-22s %12.0f %9.4f %9.4f\n", "entropy bound (planes)", bound, bound / raw, 1.0);
	for (int i = 0; i < nres; i++)
		printf("  %-22s %12llu %9.4f %9.4f %10.0f %10.0f %10.0f %10.0f\n",
		       dlt_codec_name(res[i].codec), (unsigned long long)res[i].bytes,
		       (double)res[i].bytes / raw, res[i].bytes / bound,
		       mbps(raw, res[i].compress_s), mbps(raw, res[i].decompress_s),
		       mbps(raw, res[i].compress_mem_s), mbps(raw, res[i].decompress_mem_s));
	printf("  shuffle-zstd / zstd: size %.4f, compress speed %.2f, decompress speed %.2f\n",
	       (double)res[2].bytes / res[1].bytes, res[1].compress_s / res[2].compress_s,
	       res[1].decompress_s / res[2].decompress_s);
	if (json)
		rc = write_json(json, path, (int)level, (int)reps, t, n, n_all, raw, stored, bound,
				res, nres);
fail:
	for (size_t i = 0; t && i < n_all; i++)
		free(t[i].data);
	free(t);
	free(buf);
	free(sink.p);
	if (a)
		dlt_archive_close(a);
	return rc < 0 ? cli_fail(prog, rc) : 0;
}
