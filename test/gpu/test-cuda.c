/* The CUDA backend: every row of the op table (test/unit/ops.c: each
 * entry against the reference backend on random inputs of many shapes,
 * uploaded, run on the GPU, downloaded and compared; its CUDA column of
 * tolerances says why they are what they are), then what only a GPU has
 * to show: the table and one device per process, memory, values known by
 * hand (TF32 must not creep into f32), cuBLAS's same bits twice, a
 * one-rank NCCL comm's groups and point to point, timings, and last a
 * failed entry that makes the loss NaN.  Without a CUDA device
 * it lists the rows it would run and skips (TAP's 1..0).  test-cuda
 * --probe only says whether there is one: exit 0, or 1 with the reason on
 * stdout.  test-cuda --conv (or DLT_TEST_CUDA=conv) runs only the
 * convolution rows and tests and the failure test (which says whether
 * any entry failed before it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vec.h"
#include "ops.h"
#include "comm/comm.h"
#include "kernels/kernels.h"
#include "util/util.h"

static const dlt_backend *gpu;
static const char *const prec_name[] = { "f32", "bf16", "f16" };

/* A device copy of n floats (or ints) of host memory */
static void *up(const void *h, size_t bytes)
{
	void *d = gpu->alloc(bytes + 4);
	if (d && bytes)
		gpu->upload(d, h, bytes);
	return d;
}

static float *upf(const float *h, size_t n)
{
	return up(h, n * sizeof(float));
}

/* Device memory full of NaN: an output the kernel forgets shows */
static float *dev_nan(size_t n)
{
	float *h = nanv(n), *d = upf(h, n);
	free(h);
	return d;
}

/* The device's n floats, into new host memory; frees the device copy */
static float *down(float *d, size_t n)
{
	float *h = malloc(n * sizeof(float) + 4);
	gpu->download(h, d, n * sizeof(float));
	gpu->free(d);
	return h;
}

/* --- memory, known values, the device's choice --- */

static void test_memory(void)
{
	size_t n = 100003;
	float *h = randv(n, -1, 1), *back = nanv(n), *z = malloc(n * 4);
	float *a = gpu->alloc(n * 4), *b = gpu->alloc(n * 4);
	int zeroed;
	gpu->download(back, a, n * 4);
	memset(z, 0, n * 4);
	zeroed = !memcmp(back, z, n * 4);
	ok(a && b && zeroed, "cuda alloc returns zeroed memory");
	gpu->upload(a, h, n * 4);
	gpu->copy(b, a, n * 4);
	gpu->zero(a + 10, 100 * 4);
	gpu->download(back, b, n * 4);
	ok(!memcmp(back, h, n * 4), "cuda upload, copy and download keep every bit");
	gpu->download(back, a, n * 4);
	memset(h + 10, 0, 100 * 4);
	ok(!memcmp(back, h, n * 4), "cuda zero clears only its range");
	ok(gpu->alloc((size_t)1 << 50) == NULL, "cuda alloc of a petabyte is NULL");
	gpu->free(a);
	gpu->free(b);
	gpu->free(NULL);
	free(h);
	free(back);
	free(z);
}

static void test_known_values(void)
{
	/* 1 + 2^-12 times 1, 64 times: 64 + 2^-6 in f32 (every partial sum
	 * exact), 64 in TF32 (10 bits: 1 + 2^-12 is 1) */
	int n = 64;
	float *a = malloc(n * n * 4), *one = malloc(n * n * 4), *c;
	float *ga, *gb, *gc;
	/* 1 + 2^-10 is a float, not a bf16 (rounds to 1) nor, with 2^-12
	 * more, an fp16 (rounds to 1 + 2^-10); 1 + 2^-8 is a bf16 tie (to
	 * even: 1), 1 + 3 2^-8 the other way (1 + 2^-6) */
	float x[4] = { 1.0f + 0x1p-10f + 0x1p-12f, 3.0f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f };
	float y[2] = { 1.0f, 0.0f }, r[5];
	for (int i = 0; i < n * n; i++) {
		a[i] = 1.0f + 0x1p-12f;
		one[i] = 1.0f;
	}
	ga = upf(a, n * n);
	gb = upf(one, n * n);
	gc = dev_nan(n * n);
	gpu->gemm(DLT_PREC_F32, 0, 0, n, n, n, 1.0f, ga, n, gb, n, 0.0f, gc, n);
	c = down(gc, n * n);
	ok(c[0] == 64.0f + 0x1p-6f && c[n * n - 1] == c[0],
	   "cuda gemm f32 keeps the bits TF32 drops (%a)", c[0]);
	free(c);
	gpu->free(ga);
	ga = upf(x, 4);
	gb = upf(y, 2);
	gc = dev_nan(5);
	gpu->gemm(DLT_PREC_F32, 0, 0, 1, 1, 2, 1.0f, ga, 2, gb, 1, 0.0f, gc, 1);
	gpu->gemm(DLT_PREC_BF16, 0, 0, 1, 1, 2, 1.0f, ga, 2, gb, 1, 0.0f, gc + 1, 1);
	gpu->gemm(DLT_PREC_F16, 0, 0, 1, 1, 2, 1.0f, ga, 2, gb, 1, 0.0f, gc + 2, 1);
	gpu->gemm(DLT_PREC_BF16, 0, 0, 1, 1, 1, 1.0f, ga + 2, 1, gb, 1, 0.0f, gc + 3, 1);
	gpu->gemm(DLT_PREC_BF16, 0, 0, 1, 1, 1, 1.0f, ga + 3, 1, gb, 1, 0.0f, gc + 4, 1);
	gpu->download(r, gc, sizeof(r));
	ok(r[0] == x[0] && r[1] == 1.0f && r[2] == 1.0f + 0x1p-10f && r[3] == 1.0f &&
	   r[4] == 1.0f + 0x1p-6f, "cuda gemm rounds its inputs to bf16 and fp16, ties to even "
	   "(%a %a %a %a %a)", r[0], r[1], r[2], r[3], r[4]);
	gpu->free(ga);
	gpu->free(gb);
	gpu->free(gc);
	free(a);
	free(one);
	{
		float logits[3] = { 1000.0f, 0.0f, -1000.0f }, dl[3];
		int32_t lab = 1;
		float *gl = upf(logits, 3), *gdl = dev_nan(3);
		int32_t *glab = up(&lab, 4);
		double loss;
		int hits;
		gpu->softmax_xent(gl, glab, 1, 3, gdl, &loss, &hits);
		gpu->download(dl, gdl, sizeof(dl));
		ok(fabs(loss - 1000.0) < 1e-9 && dl[0] == 1.0f && dl[1] == -1.0f && dl[2] == 0.0f &&
		   hits == 0, "cuda softmax_xent of logits 1000, 0, -1000 at 1");
		lab = 7;
		gpu->upload(glab, &lab, 4);
		gpu->softmax_xent(gl, glab, 1, 3, gdl, &loss, &hits);
		ok(isnan(loss), "cuda softmax_xent: a label out of range gives a NaN loss");
		gpu->free(gl);
		gpu->free(gdl);
		gpu->free(glab);
	}
}

/* cuBLAS, on one stream with our workspace, sums in the same order
 * every time */
static void test_gemm_repeat(void)
{
	int M = 513, N = 385, K = 1001;
	float *a = randv((size_t)M * K, -1, 1), *b = randv((size_t)K * N, -1, 1);
	float *ga = upf(a, (size_t)M * K), *gb = upf(b, (size_t)K * N);
	for (int prec = DLT_PREC_F32; prec <= DLT_PREC_F16; prec++) {
		float *c1 = dev_nan((size_t)M * N), *c2 = dev_nan((size_t)M * N), *h1, *h2;
		gpu->gemm(prec, 0, 0, M, N, K, 1.0f, ga, K, gb, N, 0.0f, c1, N);
		gpu->gemm(prec, 0, 0, M, N, K, 1.0f, ga, K, gb, N, 0.0f, c2, N);
		h1 = down(c1, (size_t)M * N);
		h2 = down(c2, (size_t)M * N);
		ok(!memcmp(h1, h2, (size_t)M * N * 4), "cuda gemm %s %dx%dx%d: the same bits twice",
		   prec_name[prec], M, N, K);
		free(h1);
		free(h2);
	}
	gpu->free(ga);
	gpu->free(gb);
	free(a);
	free(b);
}

/* x = 1 + 2^-12 everywhere, w = 1: every output sums 144 of them, 144
 * (1 + 2^-12) in f32 by products and sums (exactly, every partial sum a
 * float) and near it by any algorithm (Winograd, FFT); TF32 (10 bits)
 * makes 1 + 2^-12 1 and the sum 144. */
static void test_conv_exact(void)
{
	dlt_conv s = { .n = 2, .c = 16, .h = 8, .w = 8, .k = 32, .oh = 6, .ow = 6, .kh = 3,
		       .kw = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1 };
	size_t nx = 2 * 16 * 64, nw = 32 * 16 * 9, ny = 2 * 32 * 36;
	float *x = malloc(nx * 4), *w = malloc(nw * 4), *y;
	float *gx, *gw, *gy = dev_nan(ny), *work = gpu->alloc(gpu->conv_workspace(DLT_PREC_F32, &s) * 4);
	double want = 144.0 * (1.0 + 0x1p-12), worst = 0.0;
	for (size_t i = 0; i < nx; i++)
		x[i] = 1.0f + 0x1p-12f;
	for (size_t i = 0; i < nw; i++)
		w[i] = 1.0f;
	gx = upf(x, nx);
	gw = upf(w, nw);
	gpu->conv_forward(DLT_PREC_F32, &s, gx, gw, NULL, gy, DLT_ACT_NONE, 0.0f, work);
	y = down(gy, ny);
	for (size_t i = 0; i < ny; i++)
		worst = fmax(worst, fabs(y[i] - want));
	ok(worst < 144.0 * 0x1p-14, "cuda conv f32 keeps the bits TF32 drops (%a, want %a)",
	   y[0], want);
	gpu->free(gx);
	gpu->free(gw);
	gpu->free(work);
	free(x);
	free(w);
	free(y);
}

/* --- timings (information, not tests) --- */

/* Seconds per call of fn(arg), after a warm-up; downloading a float of
 * out waits for the stream. */
static double gpu_time(void (*fn)(void *), void *arg, const float *out, int reps)
{
	float sync;
	double t0;
	fn(arg);
	gpu->download(&sync, out, 4);
	t0 = dlt_now();
	for (int i = 0; i < reps; i++)
		fn(arg);
	gpu->download(&sync, out, 4);
	return (dlt_now() - t0) / reps;
}

typedef struct gemm_job {
	float *c, *a, *b;
	int n, prec;
} gemm_job;

static void run_gemm(void *p)
{
	gemm_job *j = p;
	gpu->gemm(j->prec, 0, 1, j->n, j->n, j->n, 1.0f, j->a, j->n, j->b, j->n, 0.0f, j->c, j->n);
}

typedef struct conv_job {
	float *y, *x, *w, *b, *dy, *dx, *dw, *db, *work;
	dlt_conv s;
	int prec;
} conv_job;

static void run_conv(void *p)
{
	conv_job *j = p;
	gpu->conv_forward(j->prec, &j->s, j->x, j->w, j->b, j->y, DLT_ACT_RELU, 0.0f, j->work);
	gpu->conv_backward(j->prec, &j->s, j->x, j->w, j->dy, j->dx, j->dw, j->db, j->work);
}

/* The same work on the CPU backend, once, for the ratio */
static double cpu_gemm_time(int n)
{
	const dlt_backend *cpu = dlt_backend_cpu();
	float *a = randv((size_t)n * n, -1, 1), *b = randv((size_t)n * n, -1, 1);
	float *c = malloc((size_t)n * n * 4);
	double t0 = dlt_now();
	cpu->gemm(DLT_PREC_F32, 0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
	t0 = dlt_now() - t0;
	free(a);
	free(b);
	free(c);
	return t0;
}

static double cpu_conv_time(const dlt_conv *s)
{
	const dlt_backend *cpu = dlt_backend_cpu();
	size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * s->oh * s->ow;
	size_t nw = (size_t)s->k * s->c * s->kh * s->kw;
	float *x = randv(nx, -1, 1), *w = randv(nw, -1, 1), *b = randv(s->k, -1, 1);
	float *dy = randv(ny, -1, 1), *y = malloc(ny * 4), *dx = malloc(nx * 4);
	float *dw = malloc(nw * 4), *db = malloc(s->k * 4);
	float *work = malloc(cpu->conv_workspace(DLT_PREC_F32, s) * 4 + 4);
	double t0 = dlt_now();
	cpu->conv_forward(DLT_PREC_F32, s, x, w, b, y, DLT_ACT_RELU, 0.0f, work);
	cpu->conv_backward(DLT_PREC_F32, s, x, w, dy, dx, dw, db, work);
	t0 = dlt_now() - t0;
	free(x);
	free(w);
	free(b);
	free(dy);
	free(y);
	free(dx);
	free(dw);
	free(db);
	free(work);
	return t0;
}

static void timings(void)
{
	int n = 4096;
	gemm_job g = { gpu->alloc((size_t)n * n * 4), gpu->alloc((size_t)n * n * 4),
		       gpu->alloc((size_t)n * n * 4), n, 0 };
	conv_job c = { 0 };
	dlt_conv s = { .n = 128, .c = 32, .h = 14, .w = 14, .k = 64, .oh = 14, .ow = 14, .kh = 3,
		       .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1,
		       .groups = 1 };
	double flop = 2.0 * n * n * n, t, cpu = cpu_gemm_time(n);
	for (g.prec = DLT_PREC_F32; g.prec <= DLT_PREC_F16; g.prec++) {
		t = gpu_time(run_gemm, &g, g.c, 10);
		diag("timing: gemm %s %dx%dx%d: %.3f ms, %.1f TFLOP/s, %.0fx the CPU backend's f32",
		     prec_name[g.prec], n, n, n, t * 1e3, flop / t / 1e12, cpu / t);
	}
	gpu->free(g.a);
	gpu->free(g.b);
	gpu->free(g.c);
	c.s = s;
	c.y = gpu->alloc((size_t)128 * 64 * 196 * 4);
	c.x = gpu->alloc((size_t)128 * 32 * 196 * 4);
	c.dx = gpu->alloc((size_t)128 * 32 * 196 * 4);
	c.dy = gpu->alloc((size_t)128 * 64 * 196 * 4);
	c.w = gpu->alloc(64 * 32 * 9 * 4);
	c.dw = gpu->alloc(64 * 32 * 9 * 4);
	c.b = gpu->alloc(64 * 4);
	c.db = gpu->alloc(64 * 4);
	c.work = gpu->alloc(gpu->conv_workspace(DLT_PREC_BF16, &s) * 4);
	flop = 3 * 2.0 * 128 * 64 * 196 * 32 * 9;
	cpu = cpu_conv_time(&s);
	for (c.prec = DLT_PREC_F32; c.prec <= DLT_PREC_BF16; c.prec++) {
		t = gpu_time(run_conv, &c, c.dx, 20);
		diag("timing: conv %s n128 32->64 14x14 3x3, forward + backward: %.3f ms, "
		     "%.1f TFLOP/s, %.0fx the CPU backend's f32", prec_name[c.prec], t * 1e3,
		     flop / t / 1e12, cpu / t);
	}
	gpu->free(c.y);
	gpu->free(c.x);
	gpu->free(c.dx);
	gpu->free(c.dy);
	gpu->free(c.w);
	gpu->free(c.dw);
	gpu->free(c.b);
	gpu->free(c.db);
	gpu->free(c.work);
}

/* Last, since it leaves the backend failed: an entry that fails (a
 * convolution whose output shape is wrong) makes the losses NaN. */
/* A one-rank NCCL comm's group (split) and point to point (to itself):
 * what a pipeline's stages and replicas use, which one GPU can run only
 * this way (NCCL puts one rank on a GPU, a pipeline a stage a rank) */
static void test_nccl_one_rank(void)
{
	dlt_rank_info r = { .rank = 0, .size = 1, .local_rank = 0, .local_size = 1,
			    .launcher = "", .comm = "nccl" };
	enum { N = 1000 };
	float h[N], back[N], *x, *y;
	dlt_comm *c = NULL, *g = NULL;

	for (int i = 0; i < N; i++)
		h[i] = (float)i * 0.25f - 7.0f;
	if (!ok(dlt_comm_open(&c, &r, 0, 60) == 0, "DLT_COMM=nccl: a 1-rank NCCL comm (%s)",
		c ? c->name : dlt_errmsg()))
		return;
	x = upf(h, N);
	y = gpu->alloc(N * sizeof(float));
	ok(dlt_comm_split(c, 0, 0, &g) == 0 && g->rank == 0 && g->size == 1 &&
	   !strcmp(g->name, "nccl"), "split: a group of one NCCL rank, rank 0 (%s)",
	   g ? "" : dlt_errmsg());
	if (g) {
		ok(dlt_comm_sum_begin(g, x, N) == 0 && dlt_comm_sum_wait(g) == 0,
		   "the group sums (%s)", dlt_errmsg());
		gpu->download(back, x, sizeof(back));
		ok(!memcmp(back, h, sizeof(h)), "the sum over one rank is its own values");
	}
	ok(dlt_comm_p2p_open(c) == 0, "p2p_open: the lanes of point to point (%s)", dlt_errmsg());
	ok(dlt_comm_send(c, x, 600, 0) == 0 && dlt_comm_send(c, x + 600, N - 600, 0) == 0 &&
	   dlt_comm_recv(c, y, 600, 0) == 0 && dlt_comm_recv(c, y + 600, N - 600, 0) == 0 &&
	   dlt_comm_sum_wait(c) == 0, "two sends to itself, received in their order (%s)",
	   dlt_errmsg());
	gpu->download(back, y, sizeof(back));
	ok(!memcmp(back, h, sizeof(h)), "what it received is what it sent");
	ok(dlt_comm_send(c, x, 10, 0) == 0 && dlt_comm_recv(c, y, 11, 0) < 0 &&
	   strstr(dlt_errmsg(), "not the size of the send"),
	   "a receive of another size than the send fails: %s", dlt_errmsg());
	dlt_comm_close(g);
	dlt_comm_close(c);
	gpu->free(x);
	gpu->free(y);
}

static void test_failure_shows(void)
{
	dlt_conv s = { .n = 1, .c = 1, .h = 4, .w = 4, .k = 1, .oh = 9, .ow = 9, .kh = 1,
		       .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1 };
	float zeros[16] = { 0 }, *x = upf(zeros, 16), *w = upf(zeros, 1), *y = upf(zeros, 16);
	float *work;
	int32_t lab = 0, *glab = up(&lab, 4);
	double loss;
	int hits;
	/* a failure before this one makes the loss NaN: say which */
	ok(!gpu->error(), "cuda: no entry failed before the failure test (%s)",
	   gpu->error() ? gpu->error() : "none did");
	gpu->softmax_xent(x, glab, 1, 4, y, &loss, &hits);
	ok(fabs(loss - log(4.0)) < 1e-6, "cuda softmax_xent of 4 zeros: log 4 (%.17g)", loss);
	work = gpu->alloc(gpu->conv_workspace(DLT_PREC_F32, &s) * 4 + 4);
	gpu->conv_forward(DLT_PREC_F32, &s, x, w, NULL, y, DLT_ACT_NONE, 0.0f, work);
	gpu->softmax_xent(x, glab, 1, 4, y, &loss, &hits);
	ok(isnan(loss), "cuda: after a failed entry (a conv of a wrong shape) the loss is NaN");
	gpu->free(x);
	gpu->free(w);
	gpu->free(y);
	gpu->free(work);
	gpu->free(glab);
}

int main(int argc, char **argv)
{
	char why[256] = "", why_bad[256] = "";
	const dlt_backend *bad = dlt_backend_cuda(999, why_bad, sizeof(why_bad));
	const dlt_backend *other;
	const char *only = getenv("DLT_TEST_CUDA");
	int conv = (argc > 1 && !strcmp(argv[1], "--conv")) || (only && !strcmp(only, "conv"));
	gpu = dlt_backend_cuda(0, why, sizeof(why));
	if (argc > 1 && !strcmp(argv[1], "--probe")) {
		if (!gpu)
			printf("no CUDA device: %s\n", why);
		return !gpu;
	}
	if (!gpu) {
		diag("the op table's rows a CUDA device would run%s:", conv ? " (--conv)" : "");
		ops_list(OPS_CUDA, conv ? "conv" : NULL);
		printf("1..0 # SKIP no CUDA device: %s\n", why);
		return 0;
	}
	dlt_rng_init(&rng, 4321, 0);
	if (conv) {
		test_conv_exact();
		ops_run(gpu, OPS_CUDA, "conv");
		test_failure_shows();
		return done_testing();
	}
	ok(!bad && why_bad[0], "dlt_backend_cuda(999) is NULL with a reason (%s)", why_bad);
	ok(dlt_backend_cuda(0, why, sizeof(why)) == gpu, "dlt_backend_cuda(0) again: the same table");
	other = dlt_backend_cuda(1, why, sizeof(why));
	ok(!other && strstr(why, "already uses CUDA device 0"),
	   "one device per process: another one is NULL (%s)", why);
	ok(!gpu->host && !strcmp(gpu->name, "cuda"), "the table says device memory, 'cuda'");
	test_memory();
	test_known_values();
	ops_run(gpu, OPS_CUDA, NULL);
	test_gemm_repeat();
	test_conv_exact();
	test_nccl_one_rank();
	if (!getenv("DLT_TEST_NO_TIMINGS"))
		timings();
	test_failure_shows();
	return done_testing();
}
