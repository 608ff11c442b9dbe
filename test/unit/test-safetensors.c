/* safetensors: f16/bf16 conversion, writer-reader round trips, and hostile
 * files, which must all get DLT_EINPUT with a one-line message naming the
 * file, and nothing worse.
 *
 * With arguments it is the fixture maker of test/t3000-ckpt.sh instead:
 *   test-safetensors --write-ckpt PATH VARIANT
 * writes a checkpoint with optimiser state (train/ckpt.h) of known values;
 * VARIANT a is the base, b has other names and shapes and 0.b[3] one
 * larger, plus1 and plus05 have every 0.b one or a half larger. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "ckpt/safetensors.h"
#include "kernels/common/math.h"
#include "tap.h"
#include "util/util.h"

static const char *tpath(const char *name)
{
	static char buf[4][512];
	static int k;
	char *p = buf[k++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", tap_tmpdir(), name);
	return p;
}

/* The fixture checkpoint */

static const char fixture_meta[] =
	"{\"kind\":\"checkpoint\",\"format\":1,\"step\":120,\"epoch\":3,\"batch\":5,"
	"\"epochs\":4,\"config\":\"model:\\n  - dense: 8\\n\","
	"\"input\":{\"shape\":[4,1,1],\"num_classes\":3,\"scale\":1,\"mean\":[0],\"std\":[1]},"
	"\"loss_scale\":1,\"time\":12.5,"
	"\"best\":{\"metric\":\"val.acc\",\"value\":0.875,\"step\":100},"
	"\"metrics\":["
	"{\"event\":\"train\",\"epoch\":1,\"step\":50,\"loss\":0.75,\"acc\":0.5,\"lr\":0.01},"
	"{\"event\":\"eval\",\"split\":\"val\",\"epoch\":1,\"step\":50,\"loss\":0.625,\"acc\":0.75},"
	"{\"event\":\"train\",\"epoch\":3,\"step\":120,\"loss\":0.25,\"acc\":0.875,\"lr\":0.005},"
	"{\"event\":\"eval\",\"split\":\"val\",\"epoch\":2,\"step\":100,\"loss\":0.375,\"acc\":0.875},"
	"{\"event\":\"eval\",\"split\":\"test\",\"epoch\":2,\"step\":100,\"loss\":0.5,\"acc\":0.8125}"
	"]}";

struct ftensor {
	const char *name;
	int ndim;
	uint64_t dims[2];
};

static int write_tensor(dlt_archive_writer *w, const char *name, int ndim, const uint64_t *dims,
			const char *variant)
{
	uint64_t n = 1;
	float *v;
	int rc;

	for (int i = 0; i < ndim; i++)
		n *= dims[i];
	if (!(v = calloc(n + 1, sizeof(*v))))
		return DLT_ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		/* a few distinct values, so the big one compresses */
		if (strcmp(name, "0.w") == 0)
			v[i] = (float)((int)(i % 7) - 3) * 0.125f;
		else if (strcmp(name, "0.b") == 0)
			v[i] = i * 0.5f;
		else if (strcmp(name, "1.gamma") == 0)
			v[i] = 1;
		else if (strcmp(name, "1.running_var") == 0)
			v[i] = 1.0f + i;
		else if (strncmp(name, "optim.v/", 8) == 0)
			v[i] = 1.0f / (1 + i);
		else
			v[i] = (float)((i * 37) % 11) / 16 - 0.25f;
	}
	if (strcmp(name, "0.b") == 0) {
		if (strcmp(variant, "b") == 0)
			v[3] += 1;
		for (uint64_t i = 0; i < n; i++)
			v[i] += strcmp(variant, "plus1") == 0 ? 1.0f :
				strcmp(variant, "plus05") == 0 ? 0.5f : 0.0f;
	}
	rc = dlt_archive_write_tensor(w, name, DLT_F32, ndim, dims, v, DLT_SHUFFLE_ZSTD, 1);
	free(v);
	return rc;
}

static int write_fixture(const char *path, const char *variant)
{
	static const struct ftensor a[] = {
		{ "0.w", 2, { 64, 32 } }, { "0.b", 1, { 8 } }, { "1.gamma", 1, { 8 } },
		{ "1.beta", 1, { 8 } }, { "1.running_mean", 1, { 8 } },
		{ "1.running_var", 1, { 8 } }, { "3.w", 2, { 3, 8 } }, { "3.b", 1, { 3 } },
		{ NULL, 0, { 0 } },
	};
	static const char *const params[] = { "0.w", "0.b", "1.gamma", "1.beta", "3.w", "3.b" };
	int b = strcmp(variant, "b") == 0;
	dlt_archive_writer *w;
	int rc = dlt_archive_create(&w, path);

	if (rc < 0)
		return rc;
	DLT_TRY(dlt_archive_write_meta(w, fixture_meta));
	for (const struct ftensor *t = a; t->name; t++) {
		uint64_t dims[2] = { t->dims[0], t->dims[1] };
		int ndim = t->ndim;
		if (b && strcmp(t->name, "1.beta") == 0)
			continue;
		if (b && strcmp(t->name, "3.b") == 0) {
			dims[0] = 1;
			dims[1] = 3;
			ndim = 2;
		}
		DLT_TRY(write_tensor(w, t->name, ndim, dims, variant));
	}
	if (b) {
		uint64_t d = 2;
		DLT_TRY(write_tensor(w, "4.w", 1, &d, variant));
	}
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < sizeof(params) / sizeof(*params); i++) {
			char name[64];
			const struct ftensor *t = a;
			if (b && strcmp(params[i], "1.beta") == 0)
				continue;
			while (strcmp(t->name, params[i]))
				t++;
			snprintf(name, sizeof(name), "optim.%c/%s", "mv"[k], params[i]);
			DLT_TRY(write_tensor(w, name, t->ndim, t->dims, variant));
		}
	return dlt_archive_writer_close(w);
fail:
	dlt_archive_writer_abort(w);
	return rc;
}

/* f16 and bf16 */

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static void test_half(void)
{
	static const struct { uint16_t h; float f; } f16[] = {
		{ 0x0000, 0.0f }, { 0x3c00, 1.0f }, { 0xc000, -2.0f }, { 0x3555, 0.333251953125f },
		{ 0x7bff, 65504.0f }, { 0x0400, 6.103515625e-05f }, { 0x0001, 5.9604644775390625e-08f },
		{ 0x03ff, 6.097555160522461e-05f }, { 0x7c00, INFINITY }, { 0xfc00, -INFINITY },
	};
	int good = 1;

	for (size_t i = 0; i < sizeof(f16) / sizeof(*f16); i++)
		good &= dlt_widen16(f16[i].h, DLT_PREC_F16) == f16[i].f;
	ok(good, "f16: ones, a third, the largest, the smallest normal and subnormal, infinities");
	ok(bits(dlt_widen16(0x8000, DLT_PREC_F16)) == 0x80000000u, "f16: -0 keeps its sign");
	ok(isnan(dlt_widen16(0x7e00, DLT_PREC_F16)) && isnan(dlt_widen16(0xfc01, DLT_PREC_F16)), "f16: NaNs stay NaN");
#ifdef __FLT16_MAX__
	good = 1;
	for (uint32_t h = 0; h < 65536; h++) {
		_Float16 x;
		uint16_t u = h;
		float want, got = dlt_widen16(u, DLT_PREC_F16);
		memcpy(&x, &u, 2);
		want = (float)x;
		good &= isnan(want) ? isnan(got) : bits(got) == bits(want);
	}
	ok(good, "f16: all 65536 values as the compiler's _Float16 converts them");
#endif
	good = 1;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = dlt_widen16((uint16_t)h, DLT_PREC_BF16);
		good &= bits(f) == h << 16;
	}
	ok(good, "bf16: all 65536 values are the top half of the float");
	ok(dlt_widen16(0x3f80, DLT_PREC_BF16) == 1.0f && dlt_widen16(0xc0a0, DLT_PREC_BF16) == -5.0f, "bf16: 1, -5");
}

/* Round trips */

static unsigned char *slurp(const char *path, size_t *n)
{
	char *d;
	if (dlt_read_file(path, 0, &d, n) < 0)
		return NULL;
	return (unsigned char *)d;
}

static void test_round_trip(void)
{
	static const uint64_t d0[] = { 0 }, d1[] = { 3 }, d2[] = { 2, 3 }, d3[] = { 0, 5 };
	static const uint64_t d4[] = { 2, 2, 2 };
	float f[6] = { 1, -2, 3.5f, 0, -0.0f, 1e-30f };
	uint16_t h[3] = { 0x3c00, 0xc000, 0x3555 }, bh[8] = { 0x3f80, 0xc0a0 };
	int64_t l[6] = { -1, 0, 1, INT64_MAX, INT64_MIN, 42 };
	unsigned char u[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	dlt_st_entry e[] = {
		{ "weight/a", DLT_ST_F32, 2, d2 }, { "half", DLT_ST_F16, 1, d1 },
		{ "empty", DLT_ST_F32, 2, d3 }, { "scalar", DLT_ST_BF16, 0, d0 },
		{ "long", DLT_ST_I64, 2, d2 }, { "bytes", DLT_ST_U8, 3, d4 },
		{ "zero", DLT_ST_F32, 1, d0 }, { "caf\xc3\xa9", DLT_ST_F32, 1, d0 },
	};
	const void *data[] = { f, h, f, bh, l, u, f, f };
	const size_t sizes[] = { 24, 6, 0, 2, 48, 8, 0, 0 };
	const char *meta[] = { "format", "dlt", "config", "a: 1\nb: \"two\"\n", "empty", "" };
	const size_t ne = sizeof(e) / sizeof(*e);
	const char *path = tpath("rt.safetensors");
	dlt_safetensors_writer *w;
	dlt_safetensors *st = NULL;
	unsigned char *bytes;
	size_t n;
	uint64_t hlen;
	int rc, good;

	rc = dlt_safetensors_create(&w, path, e, ne, meta, 3);
	for (size_t i = 0; i < ne && rc == 0; i++)
		rc = dlt_safetensors_write_data(w, data[i], sizes[i]);
	if (rc == 0)
		rc = dlt_safetensors_writer_close(w);
	else
		dlt_safetensors_writer_abort(w);
	ok_rc(rc, 0, "write: eight tensors of five dtypes, scalar and empty ones, metadata");
	bytes = slurp(path, &n);
	memcpy(&hlen, bytes, 8);
	ok(hlen % 8 == 0 && bytes[8] == '{' &&
	   (bytes[8 + hlen - 1] == ' ' || bytes[8 + hlen - 1] == '}'), "the header is JSON padded with spaces to 8 bytes");
	ok(n == 8 + hlen + 24 + 6 + 2 + 48 + 8, "data follows it, nothing more (%zu bytes)", n);
	ok(memmem(bytes + 8, hlen, "\"__metadata__\":{\"format\":\"dlt\"", 30) == bytes + 9,
	   "__metadata__ first");
	ok(memmem(bytes + 8, hlen, "\"weight/a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
		  "\"data_offsets\":[0,24]}", 61) != NULL, "a tensor's entry as safetensors has it");
	ok_rc(dlt_safetensors_open(&st, path), 0, "read it back");
	if (!st) {
		free(bytes);
		return;
	}
	ok(dlt_safetensors_count(st) == ne, "eight tensors");
	good = 1;
	for (size_t i = 0; i < ne; i++) {
		const dlt_st_tensor *t = dlt_safetensors_find(st, e[i].name);
		good &= t && t->dtype == e[i].dtype && t->ndim == e[i].ndim &&
			t->end - t->begin == sizes[i] &&
			memcmp(dlt_safetensors_data(st, t), data[i], sizes[i]) == 0;
		for (int k = 0; t && k < t->ndim; k++)
			good &= t->dims[k] == e[i].dims[k];
	}
	ok(good, "every name, dtype, shape and byte as written");
	good = 1;
	for (size_t i = 1; i < ne; i++)
		good &= dlt_safetensors_tensor(st, i - 1)->end == dlt_safetensors_tensor(st, i)->begin;
	ok(good && dlt_safetensors_tensor(st, 0)->begin == 0, "tensors in the order of their data");
	ok(dlt_safetensors_meta_count(st) == 3 &&
	   strcmp(dlt_safetensors_meta_get(st, "config"), meta[3]) == 0 &&
	   strcmp(dlt_safetensors_meta_key(st, 2), "empty") == 0 &&
	   strcmp(dlt_safetensors_meta_value(st, 2), "") == 0, "metadata as written, in order");
	{
		const dlt_st_tensor *t = dlt_safetensors_find(st, "half");
		float out[3];
		ok_rc(dlt_safetensors_read_f32(st, t, out, 3), 0, "read_f32 of F16");
		ok(out[0] == 1 && out[1] == -2 && out[2] == 0.333251953125f, "exact values");
		t = dlt_safetensors_find(st, "scalar");
		ok(t->count == 1 && dlt_safetensors_read_f32(st, t, out, 1) == 0 && out[0] == 1,
		   "read_f32 of a BF16 scalar");
		t = dlt_safetensors_find(st, "long");
		ok_rc(dlt_safetensors_read_f32(st, t, out, 3), DLT_EINPUT, "read_f32 of I64 refused");
		ok_msg("tensor 'long' is I64, not a float type", "and says so");
	}
	ok(dlt_safetensors_find(st, "nosuch") == NULL, "find of a missing name");
	dlt_safetensors_close(st);
	ok_rc(dlt_safetensors_open_mem(&st, bytes, n, "mem"), 0, "the same from memory");
	dlt_safetensors_close(st);
	free(bytes);

	/* the writer refuses what the reader would */
	{
		dlt_st_entry dup[] = { { "a", DLT_ST_F32, 1, d1 }, { "a", DLT_ST_F32, 1, d1 } };
		dlt_st_entry res[] = { { "__metadata__", DLT_ST_F32, 1, d1 } };
		dlt_st_entry utf[] = { { "a\xff", DLT_ST_F32, 1, d1 } };
		dlt_st_entry unk[] = { { "a", 99, 1, d1 } };
		const char *path2 = tpath("refused.safetensors");
		ok_rc(dlt_safetensors_create(&w, path2, dup, 2, NULL, 0), DLT_EINPUT,
		      "writer: a name twice");
		ok_msg("tensor 'a': named twice", "names it");
		ok_rc(dlt_safetensors_create(&w, path2, res, 1, NULL, 0), DLT_EINPUT,
		      "writer: the name __metadata__");
		ok_rc(dlt_safetensors_create(&w, path2, utf, 1, NULL, 0), DLT_EINPUT,
		      "writer: a name that is not UTF-8");
		ok_rc(dlt_safetensors_create(&w, path2, unk, 1, NULL, 0), DLT_EINPUT,
		      "writer: an unknown dtype");
		rc = dlt_safetensors_create(&w, path2, e, 2, NULL, 0);
		ok(rc == 0 && dlt_safetensors_write_data(w, f, 20) == DLT_EFAIL,
		   "writer: data of the wrong size");
		if (rc == 0)
			dlt_safetensors_writer_abort(w);
		rc = dlt_safetensors_create(&w, path2, e, 2, NULL, 0);
		if (rc == 0)
			rc = dlt_safetensors_write_data(w, f, 24);
		ok(rc == 0 && dlt_safetensors_writer_close(w) == DLT_EFAIL,
		   "writer: close before every tensor is written fails");
		ok(access(path2, F_OK) != 0, "and leaves no file");
	}
}

/* Hostile files */

/* u64 N (or the given one), hl bytes of header, then data_len bytes. */
static unsigned char *mkfile_n(const char *header, size_t hl, uint64_t n_override,
			       size_t data_len, size_t *n)
{
	uint64_t hlen = n_override ? n_override : hl;
	unsigned char *p = calloc(8 + hl + data_len + 1, 1);
	memcpy(p, &hlen, 8);
	memcpy(p + 8, header, hl);
	*n = 8 + hl + data_len;
	return p;
}

static unsigned char *mkfile(const char *header, uint64_t n_override, size_t data_len,
			     size_t *n)
{
	return mkfile_n(header, strlen(header), n_override, data_len, n);
}

static void hostile_n(const char *what, const char *header, size_t hl, uint64_t n_override,
		      size_t data_len, const char *msg)
{
	size_t n;
	unsigned char *p = mkfile_n(header, hl, n_override, data_len, &n);
	dlt_safetensors *st = NULL;
	int rc = dlt_safetensors_open_mem(&st, p, n, "evil.st");

	if (ok_rc(rc, DLT_EINPUT, "%s: refused", what)) {
		const char *m = dlt_errmsg();
		ok(strncmp(m, "evil.st: safetensors: ", 22) == 0 && !strchr(m, '\n') &&
		   strstr(m, msg), "%s: one line, '%s'", what, msg);
		if (!strstr(m, msg))
			diag("message: %s", m);
	}
	dlt_safetensors_close(st);
	free(p);
}

static void hostile(const char *what, const char *header, uint64_t n_override, size_t data_len,
		    const char *msg)
{
	hostile_n(what, header, strlen(header), n_override, data_len, msg);
}

#define E(dtype, shape, b, e) "{\"dtype\":\"" dtype "\",\"shape\":" shape \
	",\"data_offsets\":[" #b "," #e "]}"

static void test_hostile(void)
{
	dlt_safetensors *st;
	size_t n;
	unsigned char *p;

	ok_rc(dlt_safetensors_open_mem(&st, "", 0, "evil.st"), DLT_EINPUT, "empty file");
	ok_msg("evil.st: safetensors: empty file", "says so");
	ok_rc(dlt_safetensors_open_mem(&st, "\x02\0\0\0\0\0\0", 7, "evil.st"), DLT_EINPUT,
	      "7 bytes");
	ok_msg("truncated", "says truncated");
	hostile("header length over 100 MB", "{}", 100000001, 0, "header length 100000001 is over");
	hostile("header length 2^64-1", "{}", UINT64_MAX, 0, "is over the limit");
	hostile("header longer than the file", "{}", 1000, 10, "header length 1000, but the file has 12");
	hostile("a header of 1 byte", "{}", 1, 1, "not a JSON object");
	hostile("a JSON array", "[1, 2]  ", 0, 0, "the header is not a JSON object");
	hostile("a JSON string", "\"{}\"", 0, 0, "not a JSON object");
	hostile("broken JSON", "{\"a\": ", 0, 0, "header: offset 6");
	hostile("trailing characters", "{}  x", 0, 0, "trailing");
	hostile_n("a NUL in the header", "{}\0 ", 4, 0, 0, "trailing");
	hostile("bad UTF-8", "{\"\xc3\x28\": 1}", 0, 0, "not UTF-8");
	hostile("an entry that is no object", "{\"a\": 1}", 0, 0, "tensor 'a': not an object");
	hostile("no dtype", "{\"a\": {\"shape\": [], \"data_offsets\": [0, 4]}}", 0, 4, "no 'dtype'");
	hostile("no shape", "{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 0, 4,
		"no 'shape'");
	hostile("no data_offsets", "{\"a\": {\"dtype\": \"F32\", \"shape\": []}}", 0, 4,
		"no 'data_offsets'");
	hostile("an unknown key", "{\"a\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4],"
		" \"x\": 1}}", 0, 4, "tensor 'a': unknown key 'x'");
	hostile("a key twice", "{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [],"
		" \"data_offsets\": [0, 4]}}", 0, 4, "two 'dtype' keys");
	hostile("an unknown dtype", "{\"a\": " E("F33", "[1]", 0, 4) "}", 0, 4,
		"tensor 'a': unknown dtype 'F33'");
	hostile("a dtype that is no string", "{\"a\": {\"dtype\": 4, \"shape\": [1],"
		" \"data_offsets\": [0, 4]}}", 0, 4, "dtype is not a string");
	hostile("a shape that is no list", "{\"a\": " E("F32", "4", 0, 4) "}", 0, 4,
		"shape is not a list");
	hostile("a negative dimension", "{\"a\": " E("F32", "[-1]", 0, 4) "}", 0, 4,
		"dimension 0 is not an integer");
	hostile("a fractional dimension", "{\"a\": " E("F32", "[1, 1.5]", 0, 4) "}", 0, 4,
		"dimension 1 is not an integer");
	hostile("a dimension of 2^53", "{\"a\": " E("F32", "[9007199254740992]", 0, 4) "}", 0, 4,
		"dimension 0 is not an integer");
	hostile("dimensions whose product overflows", "{\"a\": "
		E("F32", "[4294967296, 4294967296, 2]", 0, 4) "}", 0, 4,
		"shape [4294967296, 4294967296, 2] is too large");
	hostile("a product whose bytes overflow", "{\"a\": "
		E("F32", "[2147483648, 2147483648, 2]", 0, 4) "}", 0, 4, "is too large");
	hostile("a zero dimension beside a huge one (fine) but offsets wrong",
		"{\"a\": " E("F32", "[0, 4294967296]", 0, 4) "}", 0, 4, "hold 4 bytes, but F32");
	hostile("data_offsets of one number", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1],"
		" \"data_offsets\": [0]}}", 0, 4, "data_offsets is not a list of two integers");
	hostile("data_offsets negative", "{\"a\": " E("F32", "[1]", -4, 0) "}", 0, 4,
		"data_offsets is not a list of two integers");
	hostile("data_offsets backwards", "{\"a\": " E("F32", "[1]", 4, 0) "}", 0, 4,
		"data_offsets [4, 0] outside the data area of 4 bytes");
	hostile("data_offsets past the end", "{\"a\": " E("F32", "[2]", 0, 8) "}", 0, 4,
		"data_offsets [0, 8] outside the data area of 4 bytes");
	hostile("data_offsets far past the end", "{\"a\": "
		E("F32", "[1]", 18446744073709551612, 18446744073709551616) "}", 0, 4,
		"data_offsets is not a list of two integers");
	hostile("a size that does not match", "{\"a\": " E("F32", "[3]", 0, 8) "}", 0, 8,
		"tensor 'a': data_offsets [0, 8] hold 8 bytes, but F32 [3] is 12");
	hostile("overlapping tensors", "{\"a\": " E("F32", "[2]", 0, 8) ", \"b\": "
		E("F32", "[2]", 4, 12) "}", 0, 12, "tensor 'b': data overlaps tensor 'a'");
	hostile("the same bytes twice", "{\"a\": " E("F32", "[2]", 0, 8) ", \"b\": "
		E("F32", "[2]", 0, 8) "}", 0, 8, "data overlaps");
	hostile("a gap between tensors", "{\"a\": " E("F32", "[2]", 0, 8) ", \"b\": "
		E("F32", "[2]", 12, 20) "}", 0, 20, "bytes 8 to 12 of the data area belong to no tensor");
	hostile("bytes after the last tensor", "{\"a\": " E("F32", "[2]", 0, 8) "}", 0, 12,
		"bytes 8 to 12 of the data area belong to no tensor");
	hostile("data and no tensors", "{}", 0, 4, "bytes 0 to 4");
	hostile("a name twice", "{\"a\": " E("F32", "[1]", 0, 4) ", \"a\": " E("F32", "[1]", 4, 8) "}",
		0, 8, "tensor 'a': named twice");
	hostile("__metadata__ no object", "{\"__metadata__\": [1]}", 0, 0,
		"__metadata__ is not an object");
	hostile("__metadata__ value no string", "{\"__metadata__\": {\"step\": 3}}", 0, 0,
		"__metadata__: the value of 'step' is not a string");
	hostile("__metadata__ twice", "{\"__metadata__\": {}, \"__metadata__\": {}}", 0, 0,
		"two __metadata__");
	hostile("a name with a newline", "{\"a\\nb\": " E("F33", "[1]", 0, 4) "}", 0, 4,
		"tensor 'a?b': unknown dtype");

	p = mkfile("{\"z\": " E("F32", "[0]", 0, 0) ", \"a\": " E("F32", "[1]", 0, 4) ", \"e\": "
		   E("U8", "[0, 3]", 4, 4) ", \"__metadata__\": {}}", 0, 4, &n);
	ok_rc(dlt_safetensors_open_mem(&st, p, n, "ok.st"), 0,
	      "empty tensors may sit at any boundary, metadata anywhere");
	if (st)
		ok(dlt_safetensors_count(st) == 3 && strcmp(dlt_safetensors_tensor(st, 0)->name, "z") == 0,
		   "three tensors, the empty one first");
	dlt_safetensors_close(st);
	free(p);
	p = mkfile("{}      ", 0, 0, &n);
	ok_rc(dlt_safetensors_open_mem(&st, p, n, "ok.st"), 0, "no tensors at all, padded header");
	dlt_safetensors_close(st);
	free(p);
}

/* Every byte of a valid file flipped, and every length of it: a clean
 * refusal or a valid file, never a crash (ASan builds check the rest). */
static void test_mutations(void)
{
	static const uint64_t d[] = { 2, 2 };
	dlt_st_entry e[] = { { "w", DLT_ST_F32, 2, d }, { "h", DLT_ST_F16, 2, d } };
	const char *meta[] = { "format", "dlt" }, *path = tpath("m.safetensors");
	float f[4] = { 1, 2, 3, 4 };
	uint16_t h[4] = { 0x3c00, 0, 0, 0 };
	dlt_safetensors_writer *w;
	dlt_safetensors *st;
	unsigned char *bytes;
	size_t n, refused = 0, accepted = 0, bad = 0;

	if (dlt_safetensors_create(&w, path, e, 2, meta, 1) < 0 ||
	    dlt_safetensors_write_data(w, f, 16) < 0 || dlt_safetensors_write_data(w, h, 8) < 0 ||
	    dlt_safetensors_writer_close(w) < 0 || !(bytes = slurp(path, &n))) {
		ok(0, "mutations: write the file: %s", dlt_errmsg());
		return;
	}
	for (size_t i = 0; i < n; i++)
		for (int bit = 0; bit < 8; bit++) {
			int rc;
			bytes[i] ^= 1 << bit;
			rc = dlt_safetensors_open_mem(&st, bytes, n, "x");
			if (rc == 0)
				accepted++;
			else if (rc == DLT_EINPUT && !strchr(dlt_errmsg(), '\n'))
				refused++;
			else
				bad++;
			dlt_safetensors_close(st);
			bytes[i] ^= 1 << bit;
		}
	for (size_t len = 0; len < n; len++) {
		int rc = dlt_safetensors_open_mem(&st, bytes, len, "x");
		bad += rc != DLT_EINPUT;
		dlt_safetensors_close(st);
	}
	ok(bad == 0, "every bit of a %zu-byte file flipped, every truncation: %zu refused, "
	   "%zu still valid, %zu otherwise", n, refused, accepted, bad);
	free(bytes);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--write-ckpt") == 0) {
		int rc = write_fixture(argv[2], argv[3]);
		if (rc < 0)
			fprintf(stderr, "test-safetensors: %s\n", dlt_errmsg());
		return rc < 0;
	}
	test_half();
	test_round_trip();
	test_hostile();
	test_mutations();
	return done_testing();
}
