/* util: RNG streams, numbers, JSON, atomic files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <omp.h>

#include "tap.h"
#include "util/util.h"

/* Philox's known answers are in test-kernels; here the host streams. */
static void test_rng(void)
{
	dlt_rng a, b;
	uint32_t idx[100];
	int seen[100] = { 0 }, perm_ok = 1, same = 1;

	dlt_rng_init(&a, 42, 7);
	dlt_rng_init(&b, 42, 7);
	for (int i = 0; i < 1000; i++)
		same &= dlt_rng_u32(&a) == dlt_rng_u32(&b);
	ok(same, "same seed and stream give the same numbers");
	dlt_rng_init(&b, 42, 8);
	ok(dlt_rng_u32(&a) != dlt_rng_u32(&b), "another stream differs");

	dlt_rng_permute(&a, idx, 100);
	for (int i = 0; i < 100; i++) {
		if (idx[i] >= 100 || seen[idx[i]]++)
			perm_ok = 0;
	}
	ok(perm_ok, "permute gives a permutation");
	{
		double sum = 0;
		for (int i = 0; i < 100000; i++)
			sum += dlt_rng_uniform(&a);
		ok_near(sum / 100000, 0.5, 0.01, "uniform has mean 1/2");
	}
}

/* dlt_rng_normals against Box-Muller in double from dlt_rng's numbers;
 * its moments; the same bits on 1 and 2 threads, and for a tail */
static void test_normals(void)
{
	size_t n = 1000003;
	float *p = malloc(n * sizeof(float)), *q = malloc(n * sizeof(float));
	double worst = 0.0, sum = 0.0, sq = 0.0;
	dlt_rng r;
	int threads = omp_get_max_threads();
	dlt_rng_init(&r, 5, 9);
	omp_set_num_threads(1);
	dlt_rng_normals(p, n, 0.5f, 5, 9);
	omp_set_num_threads(2);
	dlt_rng_normals(q, n, 0.5f, 5, 9);
	omp_set_num_threads(threads);
	for (size_t i = 0; i < n; i += 2) {
		double u1 = 1.0 - dlt_rng_uniform(&r), u2 = dlt_rng_uniform(&r);
		double rad = 0.5 * sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
		worst = fmax(worst, fabs(p[i] - rad * cos(a)));
		if (i + 1 < n)
			worst = fmax(worst, fabs(p[i + 1] - rad * sin(a)));
	}
	for (size_t i = 0; i < n; i++) {
		sum += p[i];
		sq += (double)p[i] * p[i];
	}
	ok(worst < 2e-6, "normals: Box-Muller's in double to %.2g", worst);
	ok(fabs(sum / n) < 0.002 && fabs(sqrt(sq / n) - 0.5) < 0.002,
	   "normals: mean %.4f, std %.4f of N(0, 0.25)", sum / n, sqrt(sq / n));
	ok(!memcmp(p, q, n * sizeof(float)), "normals: the same bits on 1 and 2 threads");
	dlt_rng_normals(q, 7, 0.5f, 5, 9);
	ok(!memcmp(p, q, 7 * sizeof(float)), "normals: the first 7 of the same stream");
	free(p);
	free(q);
}

static void test_grow(void)
{
	int *a = NULL, all = 1;
	size_t cap = 0;
	for (int i = 0; i < 1000; i++) {
		if (dlt_grow(&a, &cap, (size_t)i + 1, sizeof(*a)) < 0)
			break;
		a[i] = i;
	}
	for (int i = 0; i < 1000; i++)
		all &= a[i] == i;
	ok(all && cap >= 1000 && cap < 2048, "grow to 1000 ints keeps them (capacity %zu)", cap);
	ok_rc(dlt_grow(&a, &cap, SIZE_MAX / 2, sizeof(*a)), DLT_ENOMEM, "an overflowing size");
	ok(a[999] == 999, "a failed grow keeps the array");
	free(a);
}

static void test_parse(void)
{
	long long v;
	double d;
	ok_rc(dlt_parse_i64("42", 0, 100, &v, "n"), 0, "parse 42");
	ok(v == 42, "value 42");
	ok_rc(dlt_parse_i64("abc", 0, 100, &v, "--gpus"), DLT_EINPUT, "abc is not an integer");
	ok_msg("--gpus: expected an integer, got 'abc'", "message names the option and value");
	ok_rc(dlt_parse_i64("-1", 0, 100, &v, "--gpus"), DLT_EINPUT, "-1 below range");
	ok_msg("out of range", "range message");
	ok_rc(dlt_parse_i64("12x", 0, 100, &v, "n"), DLT_EINPUT, "trailing garbage");
	ok_rc(dlt_parse_i64("", 0, 100, &v, "n"), DLT_EINPUT, "empty string");
	ok_rc(dlt_parse_f64("1e-3", &d, "lr"), 0, "parse 1e-3");
	ok(d == 1e-3, "value 1e-3");
	ok_rc(dlt_parse_f64("nan", &d, "lr"), DLT_EINPUT, "nan refused");
	ok_rc(dlt_parse_f64("1e999", &d, "lr"), DLT_EINPUT, "overflow refused");
}

static void test_json(void)
{
	dlt_json j;
	dlt_jval v;
	const dlt_jval *x;
	const char *bad[] = { "", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "\"abc", "tru",
			      "{\"a\":1} x", "[\"\\q\"]", "01x" };
	char deep[600];

	dlt_json_begin(&j);
	dlt_json_str(&j, "name", "a \"quoted\"\n\tname");
	dlt_json_int(&j, "n", -5);
	dlt_json_num(&j, "lr", 0.1);
	dlt_json_f32(&j, "loss", 0.3f);
	dlt_json_num(&j, "inf", 1.0 / 0.0);
	dlt_json_array_begin(&j, "dims");
	dlt_json_int(&j, NULL, 1);
	dlt_json_int(&j, NULL, 28);
	dlt_json_array_end(&j);
	dlt_json_object_begin(&j, "sub");
	dlt_json_bool(&j, "t", 1);
	dlt_json_end(&j);
	dlt_json_end(&j);
	ok_rc(dlt_json_ok(&j), 0, "writer ok");
	ok(strcmp(j.buf.data, "{\"name\":\"a \\\"quoted\\\"\\n\\tname\",\"n\":-5,\"lr\":0.1,"
		   "\"loss\":0.3,\"inf\":null,\"dims\":[1,28],\"sub\":{\"t\":true}}") == 0,
	   "writer output: %s", j.buf.data);
	ok_rc(dlt_json_parse(j.buf.data, j.buf.len, &v), 0, "parse it back");
	x = dlt_jval_get(&v, "name");
	ok(x && x->type == DLT_JSTR && strcmp(x->str, "a \"quoted\"\n\tname") == 0, "string round trip");
	x = dlt_jval_get(&v, "lr");
	ok(x && x->type == DLT_JNUM && x->num == 0.1, "double round trip exactly");
	x = dlt_jval_get(&v, "loss");
	ok(x && (float)x->num == 0.3f, "float round trip exactly");
	x = dlt_jval_get(&v, "dims");
	ok(x && x->type == DLT_JARR && x->n == 2 && x->items[1].num == 28, "array");
	x = dlt_jval_get(dlt_jval_get(&v, "sub"), "t");
	ok(x && x->type == DLT_JBOOL && x->num == 1, "nested object");
	ok(dlt_jval_get(&v, "missing") == NULL, "absent key");
	dlt_jval_free(&v);
	dlt_json_free(&j);

	ok_rc(dlt_json_parse("\"\\u00e9\\ud83d\\ude00\"", 20, &v), 0, "unicode escapes");
	ok(strcmp(v.str, "\xc3\xa9\xf0\x9f\x98\x80") == 0, "decoded to UTF-8");
	dlt_jval_free(&v);

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ok_rc(dlt_json_parse(bad[i], strlen(bad[i]), &v), DLT_EINPUT, "bad json '%s'", bad[i]);
	memset(deep, '[', sizeof(deep));
	ok_rc(dlt_json_parse(deep, sizeof(deep), &v), DLT_EINPUT, "600 nested arrays refused");
	ok_msg("nested too deeply", "depth message");
}

static void test_files(void)
{
	char path[512], *data;
	size_t len;
	dlt_ofile f;
	struct stat st;

	snprintf(path, sizeof(path), "%s/out.txt", tap_tmpdir());
	ok_rc(dlt_write_file_atomic(path, "hello\n", 6), 0, "atomic write");
	ok_rc(dlt_read_file(path, 0, &data, &len), 0, "read back");
	ok(len == 6 && memcmp(data, "hello\n", 6) == 0, "same bytes");
	free(data);

	ok_rc(dlt_ofile_open(&f, path), 0, "open over an existing file");
	fputs("half", f.fp);
	dlt_ofile_abort(&f);
	ok_rc(dlt_read_file(path, 0, &data, &len), 0, "abort keeps the old file");
	ok(len == 6, "old contents intact");
	free(data);

	ok_rc(dlt_read_file("/dev/zero", 1 << 20, &data, &len), DLT_EINPUT, "an endless file is cut");
	ok_msg("/dev/zero: larger than 1048576 bytes", "says so");

	snprintf(path, sizeof(path), "%s/no/such/dir/out.txt", tap_tmpdir());
	ok_rc(dlt_ofile_open(&f, path), DLT_EINPUT, "missing directory");
	ok_msg("No such file or directory", "says why");
	ok_rc(dlt_read_file("/nonexistent/file", 0, &data, &len), DLT_EINPUT, "missing file");
	ok_msg("/nonexistent/file: No such file or directory", "names the file");

	snprintf(path, sizeof(path), "%s/a/b/c", tap_tmpdir());
	ok_rc(dlt_mkdir_p(path), 0, "mkdir -p");
	ok(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "directory exists");
	ok_rc(dlt_mkdir_p(path), 0, "mkdir -p twice");
}

int main(void)
{
	test_rng();
	test_normals();
	test_grow();
	test_parse();
	test_json();
	test_files();
	return done_testing();
}
