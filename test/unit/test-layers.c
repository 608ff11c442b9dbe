/* The convolutional layers' kernels: the reference's gradients against
 * central finite differences of its forward, the max pool that does a
 * ReLU's backward against the ReLU's backward of the plain one, and the
 * values PyTorch's definitions give by hand, on the CPU backend and the
 * reference.  The fast kernels against the reference on many shapes and
 * threads are rows of the op table (ops.c), which test-kernels runs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "tap.h"
#include "vec.h"
#include "kernels/kernels.h"
#include "kernels/common/math.h"
#include "util/util.h"

/* The same bits */
static int same(const void *a, const void *b, size_t bytes)
{
	return !memcmp(a, b, bytes);
}

/* --- convolution --- */

/* The shapes whose gradients are differenced (small enough) */
typedef struct conv_case {
	int n, c, h, w, k, kh, kw, sh, sw, ph, pw, dh, dw, groups;
} conv_case;

static const conv_case convs[] = {
	/* n  c   h   w   k kh kw sh sw ph pw dh dw  g */
	{ 2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1 },
	{ 1, 2, 8, 6, 3, 3, 3, 2, 2, 0, 0, 1, 1, 1 },
	{ 3, 4, 9, 7, 4, 3, 5, 1, 2, 2, 1, 1, 1, 2 },
	{ 2, 4, 9, 9, 8, 3, 3, 1, 1, 2, 2, 2, 2, 4 },
	{ 2, 6, 7, 5, 6, 3, 3, 2, 1, 1, 1, 1, 2, 6 },
	{ 5, 6, 6, 6, 12, 3, 3, 1, 1, 1, 1, 1, 1, 6 },
	{ 3, 5, 6, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1 },
	{ 2, 4, 5, 7, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2 },
	{ 2, 4, 9, 8, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1 },
	{ 2, 3, 5, 5, 2, 5, 5, 1, 1, 2, 2, 1, 1, 1 },
	{ 1, 2, 4, 4, 3, 3, 3, 3, 3, 0, 0, 1, 1, 1 },
	{ 3, 2, 5, 6, 3, 3, 3, 2, 2, 3, 2, 1, 1, 1 },
	{ 7, 3, 6, 5, 4, 2, 2, 1, 1, 0, 1, 1, 1, 1 },
	{ 2, 3, 6, 7, 4, 3, 3, 1, 1, 0, 1, 1, 1, 1 },
	{ 2, 2, 4, 5, 3, 3, 3, 1, 1, 3, 1, 1, 1, 1 },
	{ 1, 2, 1, 9, 2, 1, 3, 1, 1, 0, 1, 1, 1, 1 },
};

static dlt_conv conv_shape(const conv_case *cc)
{
	dlt_conv s = {
		.n = cc->n, .c = cc->c, .h = cc->h, .w = cc->w, .k = cc->k,
		.kh = cc->kh, .kw = cc->kw, .sh = cc->sh, .sw = cc->sw, .ph = cc->ph,
		.pw = cc->pw, .dh = cc->dh, .dw = cc->dw, .groups = cc->groups,
	};
	s.oh = (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1) / s.sh + 1;
	s.ow = (s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1) / s.sw + 1;
	return s;
}

typedef struct conv_io {
	size_t nx, nw, ny;
	float *x, *w, *b, *dy;	/* inputs */
	float *y, *dx, *dw, *db;	/* outputs */
} conv_io;

static void conv_sizes(const dlt_conv *s, conv_io *io)
{
	io->nx = (size_t)s->n * s->c * s->h * s->w;
	io->nw = (size_t)s->k * (s->c / s->groups) * s->kh * s->kw;
	io->ny = (size_t)s->n * s->k * s->oh * s->ow;
}

static void conv_outputs(const dlt_conv *s, conv_io *io)
{
	io->y = nanv(io->ny);
	io->dx = nanv(io->nx);
	io->dw = nanv(io->nw);
	io->db = nanv(s->k);
}

static void conv_free_outputs(conv_io *io)
{
	free(io->y);
	free(io->dx);
	free(io->dw);
	free(io->db);
}

/* --- pooling --- */

typedef struct pool_io {
	float *y, *dx, *ay, *adx;	/* max: y, dx; average: ay, adx */
	int32_t *arg;
} pool_io;

static void pool_run(const dlt_backend *be, const dlt_pool *s, const float *x,
		     const float *dy, pool_io *out)
{
	size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->c * s->oh * s->ow;
	out->y = nanv(ny);
	out->ay = nanv(ny);
	out->dx = nanv(nx);
	out->adx = nanv(nx);
	out->arg = malloc(ny * sizeof(int32_t) + 1);
	be->maxpool_forward(s, x, out->y, out->arg);
	be->maxpool_backward(s, dy, out->arg, out->dx);
	be->avgpool_forward(s, x, out->ay);
	be->avgpool_backward(s, dy, out->adx);
}

static void pool_free(pool_io *p)
{
	free(p->y);
	free(p->dx);
	free(p->ay);
	free(p->adx);
	free(p->arg);
}

/* The pool that does a ReLU's backward gives the ReLU's backward of the
 * plain pool's dx, over the ReLU's output (a third of it 0, and the first
 * plane all 0, for windows of zeros): the model's conv, ReLU, max pool
 * with one pass fewer. */
static void test_pool_relu(const pool_case *pc)
{
	const dlt_backend *ref = dlt_backend_ref();
	dlt_pool s = ops_pool_shape(pc), r = s;
	size_t nx = (size_t)s.n * s.c * s.h * s.w, ny = (size_t)s.n * s.c * s.oh * s.ow;
	float *x = randv(nx, -0.5f, 1), *dy = randv(ny, -1, 1);
	pool_io plain, fused;
	size_t none = 0;
	int ok_dx = 1;

	for (size_t i = 0; i < nx; i++)
		x[i] = i < (size_t)s.h * s.w ? 0.0f : dlt_relu(x[i]);
	r.relu = 1;
	pool_run(ref, &s, x, dy, &plain);
	pool_run(ref, &r, x, dy, &fused);
	for (size_t i = 0; i < nx; i++)
		ok_dx &= dlt_relu_backward(x[i], plain.dx[i]) == fused.dx[i];
	for (size_t o = 0; o < ny; o++)
		none += fused.arg[o] == -1;
	ok(same(plain.y, fused.y, ny * 4) && ok_dx && none > 0,
	   "maxpool k%dx%d s%d p%d after a ReLU: dx = the ReLU's backward of the plain "
	   "pool's (%zu windows of no gradient)", pc->kh, pc->kw, pc->sh, pc->ph, none);
	free(x);
	free(dy);
	pool_free(&plain);
	pool_free(&fused);
}

/* --- the reference's gradients against finite differences --- */

/* The loss sum(r * y) of a forward pass, in double */
typedef double (*loss_fn)(void *ctx);

static double project(const float *y, const float *r, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)r[i] * y[i];
	return s;
}

/* Worst |numeric - analytic| over v, relative to the largest analytic value */
static double fd_error(loss_fn loss, void *ctx, float *v, const float *ana, size_t n,
		       float eps)
{
	double worst = 0.0, scale = 1e-3;
	for (size_t i = 0; i < n; i++)
		scale = fmax(scale, fabs(ana[i]));
	for (size_t i = 0; i < n; i++) {
		float old = v[i], hi = old + eps, lo = old - eps;
		double lp, lm;
		v[i] = hi;
		lp = loss(ctx);
		v[i] = lo;
		lm = loss(ctx);
		v[i] = old;
		worst = fmax(worst, fabs((lp - lm) / ((double)hi - lo) - ana[i]) / scale);
	}
	return worst;
}

typedef struct conv_fd {
	dlt_conv s;
	float *x, *w, *b, *y, *r;
} conv_fd;

static double conv_loss(void *ctx)
{
	conv_fd *f = ctx;
	dlt_backend_ref()->conv_forward(DLT_PREC_F32, &f->s, f->x, f->w, f->b, f->y, DLT_ACT_NONE, 0, NULL);
	return project(f->y, f->r, (size_t)f->s.n * f->s.k * f->s.oh * f->s.ow);
}

static void test_conv_grad(const conv_case *cc)
{
	conv_fd f = { .s = conv_shape(cc) };
	conv_io io;
	double e;
	conv_sizes(&f.s, &io);
	f.x = randv(io.nx, -1, 1);
	f.w = randv(io.nw, -1, 1);
	f.b = randv(f.s.k, -1, 1);
	f.r = randv(io.ny, -1, 1);
	f.y = nanv(io.ny);
	conv_outputs(&f.s, &io);
	dlt_backend_ref()->conv_backward(DLT_PREC_F32, &f.s, f.x, f.w, f.r, io.dx, io.dw, io.db, NULL);
	e = fmax(fd_error(conv_loss, &f, f.x, io.dx, io.nx, 1e-2f),
		 fmax(fd_error(conv_loss, &f, f.w, io.dw, io.nw, 1e-2f),
		      fd_error(conv_loss, &f, f.b, io.db, f.s.k, 1e-2f)));
	if (!ok(e < 1e-3, "ref conv %dx%d s%d p%d d%d g%d: gradients = finite differences",
		cc->kh, cc->kw, cc->sh, cc->ph, cc->dh, cc->groups))
		diag("worst error %g of the largest gradient", e);
	free(f.x);
	free(f.w);
	free(f.b);
	free(f.r);
	free(f.y);
	conv_free_outputs(&io);
}

typedef struct pool_fd {
	dlt_pool s;
	float *x, *y, *r;
	int32_t *arg;
} pool_fd;

static double maxpool_loss(void *ctx)
{
	pool_fd *f = ctx;
	dlt_backend_ref()->maxpool_forward(&f->s, f->x, f->y, f->arg);
	return project(f->y, f->r, (size_t)f->s.n * f->s.c * f->s.oh * f->s.ow);
}

static double avgpool_loss(void *ctx)
{
	pool_fd *f = ctx;
	dlt_backend_ref()->avgpool_forward(&f->s, f->x, f->y);
	return project(f->y, f->r, (size_t)f->s.n * f->s.c * f->s.oh * f->s.ow);
}

static void test_pool_grad(const pool_case *pc)
{
	pool_fd f = { .s = ops_pool_shape(pc) };
	size_t nx = (size_t)f.s.n * f.s.c * f.s.h * f.s.w;
	size_t ny = (size_t)f.s.n * f.s.c * f.s.oh * f.s.ow;
	float *dx = nanv(nx);
	uint32_t *perm = malloc(nx * sizeof(uint32_t));
	double e;
	/* distinct values 0.01 apart: no difference moves a maximum */
	dlt_rng_permute(&rng, perm, nx);
	f.x = nanv(nx);
	for (size_t i = 0; i < nx; i++)
		f.x[i] = 0.01f * perm[i] - 1.0f;
	f.y = nanv(ny);
	f.r = randv(ny, -1, 1);
	f.arg = malloc(ny * sizeof(int32_t));
	maxpool_loss(&f);
	dlt_backend_ref()->maxpool_backward(&f.s, f.r, f.arg, dx);
	e = fd_error(maxpool_loss, &f, f.x, dx, nx, 1e-3f);
	if (!ok(e < 1e-3, "ref maxpool %dx%d s%d p%d: gradient = finite differences", pc->kh,
		pc->kw, pc->sh, pc->ph))
		diag("worst error %g of the largest gradient", e);
	dlt_backend_ref()->avgpool_backward(&f.s, f.r, dx);
	e = fd_error(avgpool_loss, &f, f.x, dx, nx, 0.1f);	/* linear: a wide step */
	if (!ok(e < 1e-3, "ref avgpool %dx%d s%d p%d: gradient = finite differences", pc->kh,
		pc->kw, pc->sh, pc->ph))
		diag("worst error %g of the largest gradient", e);
	free(dx);
	free(perm);
	free(f.x);
	free(f.y);
	free(f.r);
	free(f.arg);
}

typedef struct bn_fd {
	int n, c, hw;
	float *x, *g, *b, *y, *r, *mean, *invstd, *rm, *rv;
} bn_fd;

static double bn_loss(void *ctx)
{
	bn_fd *f = ctx;
	dlt_backend_ref()->batchnorm_train(f->n, f->c, f->hw, f->x, f->g, f->b, f->y, f->mean,
					   f->invstd, f->rm, f->rv, 0.1f, 1e-5f);
	return project(f->y, f->r, (size_t)f->n * f->c * f->hw);
}

static void test_bn_grad(int n, int c, int hw)
{
	bn_fd f = { .n = n, .c = c, .hw = hw };
	size_t nx = (size_t)n * c * hw;
	float *dx = nanv(nx), *dg = nanv(c), *db = nanv(c);
	double e;
	f.x = randv(nx, -1, 1);
	f.g = randv(c, 0.5f, 1.5f);
	f.b = randv(c, -1, 1);
	f.r = randv(nx, -1, 1);
	f.y = nanv(nx);
	f.mean = nanv(c);
	f.invstd = nanv(c);
	f.rm = randv(c, 0, 1);
	f.rv = randv(c, 0, 1);
	bn_loss(&f);
	dlt_backend_ref()->batchnorm_backward(n, c, hw, f.x, f.r, f.g, f.mean, f.invstd, dx, dg,
					      db);
	e = fmax(fd_error(bn_loss, &f, f.x, dx, nx, 1e-2f),
		 fmax(fd_error(bn_loss, &f, f.g, dg, c, 1e-2f),
		      fd_error(bn_loss, &f, f.b, db, c, 1e-2f)));
	if (!ok(e < 2e-3, "ref batchnorm n%d c%d hw%d: gradients = finite differences", n, c,
		hw))
		diag("worst error %g of the largest gradient", e);
	free(dx);
	free(dg);
	free(db);
	free(f.x);
	free(f.g);
	free(f.b);
	free(f.r);
	free(f.y);
	free(f.mean);
	free(f.invstd);
	free(f.rm);
	free(f.rv);
}

/* --- PyTorch's definitions, worked out by hand --- */

static void test_conv_values(const dlt_backend *be)
{
	float x[25], ones[9], y[9], w2[2] = { 1, 1 }, x2[8], y2[8];
	float want[9] = { 12, 21, 16, 27, 45, 33, 24, 39, 28 };
	dlt_conv s = { .n = 1, .c = 1, .h = 3, .w = 3, .k = 1, .oh = 3, .ow = 3, .kh = 3,
		       .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1,
		       .groups = 1 };
	float *work = nanv(be->conv_workspace(DLT_PREC_F32, &s) + 64);
	for (int i = 0; i < 25; i++)
		x[i] = i + 1;
	for (int i = 0; i < 9; i++)
		ones[i] = 1;
	be->conv_forward(DLT_PREC_F32, &s, x, ones, NULL, y, DLT_ACT_NONE, 0, work);
	ok(same(y, want, sizeof(want)), "%s conv: 3x3 ones over 1..9, padding 1", be->name);
	/* dilation 2 on 5x5 reads rows and columns 0, 2, 4: 1+3+5+11+13+15+21+23+25 */
	s.h = s.w = 5;
	s.oh = s.ow = 1;
	s.ph = s.pw = 0;
	s.dh = s.dw = 2;
	be->conv_forward(DLT_PREC_F32, &s, x, ones, NULL, y, DLT_ACT_NONE, 0, work);
	ok(y[0] == 117, "%s conv: dilation 2", be->name);
	/* stride 2, padding 1 on 5x5: outputs at input rows and columns 0, 2, 4 */
	s.oh = s.ow = 3;
	s.ph = s.pw = 1;
	s.sh = s.sw = 2;
	s.dh = s.dw = 1;
	be->conv_forward(DLT_PREC_F32, &s, x, ones, NULL, y, DLT_ACT_NONE, 0, work);
	ok(y[0] == 1 + 2 + 6 + 7 && y[4] == 7 + 8 + 9 + 12 + 13 + 14 + 17 + 18 + 19,
	   "%s conv: stride 2", be->name);
	/* two groups of one channel: each output sees its own channel only */
	s = (dlt_conv){ .n = 1, .c = 2, .h = 2, .w = 2, .k = 2, .oh = 2, .ow = 2, .kh = 1,
			.kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 2 };
	for (int i = 0; i < 8; i++)
		x2[i] = i < 4 ? 1 : 2;
	be->conv_forward(DLT_PREC_F32, &s, x2, w2, NULL, y2, DLT_ACT_RELU, 0, work);
	ok(y2[0] == 1 && y2[7] == 2, "%s conv: groups", be->name);
	free(work);
}

static void test_pool_values(const dlt_backend *be)
{
	float x[9], y[9], dy[9], dx[9];
	int32_t arg[9];
	dlt_pool s = { .n = 1, .c = 1, .h = 3, .w = 3, .oh = 3, .ow = 3, .kh = 3, .kw = 3,
		       .sh = 1, .sw = 1, .ph = 1, .pw = 1 };
	for (int i = 0; i < 9; i++) {
		x[i] = 1;
		dy[i] = 9;
	}
	be->avgpool_forward(&s, x, y);
	ok(y[0] == 4.0f / 9 && y[1] == 6.0f / 9 && y[4] == 1, "%s avgpool counts the padding",
	   be->name);
	be->avgpool_backward(&s, dy, dx);
	ok(dx[0] == 4 && dx[1] == 6 && dx[4] == 9, "%s avgpool backward divides by 9",
	   be->name);
	for (int i = 0; i < 9; i++)
		x[i] = -5;
	be->maxpool_forward(&s, x, y, arg);
	ok(y[0] == -5 && arg[0] == 0 && arg[4] == 0 && arg[8] == 4,
	   "%s maxpool: the first of equal maxima, never the padding", be->name);
	x[2] = NAN;
	be->maxpool_forward(&s, x, y, arg);
	ok(isnan(y[1]) && arg[1] == 2 && y[3] == -5, "%s maxpool: a NaN wins", be->name);
	s.kh = s.kw = 3;
	s.ph = s.pw = 0;
	s.oh = s.ow = 1;
	for (int i = 0; i < 9; i++)
		x[i] = i;
	be->avgpool_forward(&s, x, y);
	ok(y[0] == 4, "%s global average pooling", be->name);
}

/* PyTorch's BatchNorm2d: batch statistics normalise (biased variance); the
 * running ones move by momentum, the variance's unbiased; eval uses them. */
static void test_bn_values(const dlt_backend *be)
{
	int n = 3, c = 2, hw = 5, m = n * hw;
	size_t nx = (size_t)n * c * hw;
	float *x = randv(nx, 2, 4), *y = nanv(nx), *ey = nanv(nx);
	float g[2] = { 1, 2 }, b[2] = { 0, -1 }, rm[2] = { 0.5f, 0 }, rv[2] = { 1, 3 };
	float mean[2], invstd[2];
	int good_stats = 1, good_y = 1, good_eval = 1;
	be->batchnorm_train(n, c, hw, x, g, b, y, mean, invstd, rm, rv, 0.1f, 1e-5f);
	be->batchnorm_eval(n, c, hw, x, g, b, rm, rv, 1e-5f, ey);
	for (int ch = 0; ch < c; ch++) {
		double s = 0, sq = 0, ys = 0, ysq = 0, mu, var;
		double rm0 = ch ? 0 : 0.5, rv0 = ch ? 3 : 1;
		for (int i = 0; i < n; i++)
			for (int j = 0; j < hw; j++)
				s += x[((size_t)i * c + ch) * hw + j];
		mu = s / m;
		for (int i = 0; i < n; i++) {
			for (int j = 0; j < hw; j++) {
				size_t e = ((size_t)i * c + ch) * hw + j;
				sq += (x[e] - mu) * (x[e] - mu);
				ys += (y[e] - b[ch]) / g[ch];
				ysq += (y[e] - b[ch]) / g[ch] * ((y[e] - b[ch]) / g[ch]);
			}
		}
		var = sq / m;
		good_stats &= fabs(rm[ch] - (0.9 * rm0 + 0.1 * mu)) < 1e-6 &&
			      fabs(rv[ch] - (0.9 * rv0 + 0.1 * sq / (m - 1))) < 1e-6 &&
			      fabs(invstd[ch] - 1 / sqrt(var + 1e-5)) < 1e-5 * invstd[ch];
		good_y &= fabs(ys / m) < 1e-5 && fabs(ysq / m - var / (var + 1e-5)) < 1e-5;
		for (int i = 0; i < n; i++) {
			for (int j = 0; j < hw; j++) {
				size_t e = ((size_t)i * c + ch) * hw + j;
				double want = (x[e] - rm[ch]) / sqrt(rv[ch] + 1e-5) * g[ch] + b[ch];
				good_eval &= fabs(ey[e] - want) < 1e-5 * (1 + fabs(want));
			}
		}
	}
	ok(good_stats, "%s batchnorm: running mean and unbiased variance move by momentum",
	   be->name);
	ok(good_y, "%s batchnorm: training output has the batch's mean 0 and variance 1",
	   be->name);
	ok(good_eval, "%s batchnorm: eval normalises with the running statistics", be->name);
	free(x);
	free(y);
	free(ey);
}

int main(void)
{
	const dlt_backend *backends[] = { dlt_backend_cpu(), dlt_backend_ref() };
	dlt_rng_init(&rng, 4321, 0);
	for (size_t i = 0; i < ops_n_pools; i++)
		test_pool_relu(&ops_pools[i]);
	for (size_t i = 0; i < sizeof(convs) / sizeof(convs[0]); i++)
		test_conv_grad(&convs[i]);
	for (size_t i = 1; i < ops_n_pools; i++)
		test_pool_grad(&ops_pools[i]);
	test_bn_grad(3, 2, 5);
	test_bn_grad(4, 3, 1);
	for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
		test_conv_values(backends[b]);
		test_pool_values(backends[b]);
		test_bn_values(backends[b]);
	}
	return done_testing();
}
