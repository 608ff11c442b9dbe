/* Two batch buffers: the thread fills one while the step reads the other. */
#include <stdlib.h>
#include <string.h>

#include "kernels/common/math.h"
#include "train.h"

/* Augmentation draws from its own Philox streams of the seed: one per
 * (epoch, sample position), so any batch can be replayed alone. */
#define STREAM_AUG(epoch, pos) ((0x4147ull << 48) | ((uint64_t)(epoch) << 32) | (uint64_t)(pos))

/* The value a zero pixel has after normalisation (and rounding, as the
 * normalised samples are): what the padding of a crop shows, as PyTorch
 * pads before normalising. */
static float zero_pixel(const dlt_normalise *d, size_t j)
{
	return dlt_round_prec(-d->mean[j % d->n_stats] * d->inv_std[j % d->n_stats], d->round);
}

/* A random crop of the image padded by crop pixels on each side, then a
 * flip with probability 1/2, in place (through scratch). */
static void augment(const dlt_loader *l, float *img, size_t pos)
{
	const dlt_normalise *d = &l->norm;
	const int C = l->shape.c, H = l->shape.h, W = l->shape.w, pad = l->aug.crop;
	dlt_rng r;
	int dy = 0, dx = 0, flip = 0;

	dlt_rng_init(&r, l->aug.seed, STREAM_AUG(l->aug.epoch, pos));
	if (pad) {
		dy = (int)dlt_rng_below(&r, 2 * pad + 1) - pad;
		dx = (int)dlt_rng_below(&r, 2 * pad + 1) - pad;
	}
	if (l->aug.flip)
		flip = dlt_rng_u32(&r) & 1;
	if (!dy && !dx && !flip)
		return;
	memcpy(l->scratch, img, (size_t)C * H * W * sizeof(float));
	for (int c = 0; c < C; c++)
		for (int y = 0; y < H; y++)
			for (int x = 0; x < W; x++) {
				size_t j = ((size_t)c * H + y) * W + x;
				int sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
				img[j] = sy >= 0 && sy < H && sx >= 0 && sx < W
					 ? l->scratch[((size_t)c * H + sy) * W + sx]
					 : zero_pixel(d, j);
			}
}

static void *loader_main(void *arg)
{
	dlt_loader *l = arg;
	pthread_mutex_lock(&l->mu);
	for (;;) {
		size_t b, first;
		int slot, count, total;
		while (!l->quit && (l->next_fill >= l->n_batches || l->full[l->next_fill % 2]))
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->quit)
			break;
		b = l->next_fill;
		slot = (int)(b % 2);
		total = (int)(b + 1 < l->n_batches ? (size_t)l->batch : l->n - b * l->batch);
		/* this rank's slice of the batch: the slices of all ranks are
		 * the batch that one process would take */
		first = b * l->batch + (size_t)total * l->rank / l->ranks;
		count = (int)(b * l->batch + (size_t)total * (l->rank + 1) / l->ranks - first);
		l->filling = 1;
		pthread_mutex_unlock(&l->mu);
		/* gather, then the transforms: normalise (and round), augment */
		if (l->src->t_dtype)
			l->src->gather(l->src, l->order + first, count, l->raw, l->y[slot]);
		else
			l->src->gather(l->src, l->order + first, count, l->raw, NULL);
		for (int i = 0; !l->src->t_dtype && i < count; i++)
			((int32_t *)l->y[slot])[i] = -1;
		dlt_normalise_samples(l->norm_on ? &l->norm : NULL, l->src, l->raw, count,
				      l->x[slot]);
		dlt_normalise_targets(l->norm_on ? &l->norm : NULL, l->src, l->y[slot], count);
		for (int i = 0; l->augment && i < count; i++)
			augment(l, l->x[slot] + (size_t)i * l->features,
				l->aug.first + first + (size_t)i);
		pthread_mutex_lock(&l->mu);
		l->count[slot] = count;
		l->total[slot] = total;
		l->full[slot] = 1;
		l->filling = 0;
		l->next_fill++;
		pthread_cond_broadcast(&l->cv);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static void free_buffers(dlt_loader *l)
{
	for (int i = 0; i < 2; i++) {
		if (l->x[i])
			l->be->host_free(l->x[i]);
		free(l->y[i]);
	}
	free(l->raw);
	free(l->scratch);
}

int dlt_loader_start(dlt_loader *l, const dlt_source *src, const dlt_normalise *norm,
		     int batch, int rank, int ranks, const dlt_backend *be)
{
	int mine = (batch + ranks - 1) / ranks;
	size_t nx, nraw, ny;
	memset(l, 0, sizeof(*l));
	l->src = src;
	if (norm) {
		l->norm = *norm;
		l->norm_on = 1;
	}
	l->shape = dlt_source_shape(src);
	l->features = dlt_source_features(src);
	l->be = be;
	l->batch = batch;
	l->rank = rank;
	l->ranks = ranks;
	if (!dlt_mul_ok((size_t)mine, l->features * sizeof(float), &nx) ||
	    !dlt_mul_ok((size_t)mine, dlt_source_sample_bytes(src), &nraw) ||
	    !dlt_mul_ok((size_t)mine, dlt_source_target_bytes(src), &ny))
		return dlt_error(DLT_ENOMEM, "batch of %d samples is too large", batch);
	if (!(l->scratch = dlt_malloc(l->features * sizeof(float))) ||
	    !(l->raw = dlt_malloc(nraw ? nraw : 1))) {
		free_buffers(l);
		return DLT_ENOMEM;
	}
	for (int i = 0; i < 2; i++) {
		l->x[i] = be->host_alloc(nx);
		l->y[i] = dlt_malloc_aligned(ny);
		if (!l->x[i] || !l->y[i]) {
			free_buffers(l);
			return dlt_error(DLT_ENOMEM, "out of memory for two batches of %zu bytes",
					 nx);
		}
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	if (pthread_create(&l->thread, NULL, loader_main, l) != 0) {
		free_buffers(l);
		return dlt_error(DLT_EFAIL, "cannot start the loader thread");
	}
	return 0;
}

void dlt_loader_pass(dlt_loader *l, const uint32_t *order, size_t n, const dlt_augment *aug)
{
	pthread_mutex_lock(&l->mu);
	/* what the previous pass left buffered is dropped, but a batch being
	 * filled must land first, or it would land in the new pass */
	while (l->filling)
		pthread_cond_wait(&l->cv, &l->mu);
	l->order = order;
	l->n = n;
	l->augment = aug && (aug->crop || aug->flip);
	if (aug)
		l->aug = *aug;
	l->n_batches = (n + l->batch - 1) / l->batch;
	l->next_fill = l->next_take = 0;
	l->full[0] = l->full[1] = 0;
	l->holding = 0;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

int dlt_loader_next(dlt_loader *l, float **x, void **y, int *mine)
{
	int slot, total;
	pthread_mutex_lock(&l->mu);
	if (l->holding) {	/* the step is done with the previous batch */
		l->full[(l->next_take - 1) % 2] = 0;
		l->holding = 0;
		pthread_cond_broadcast(&l->cv);
	}
	if (l->next_take >= l->n_batches) {
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	slot = (int)(l->next_take % 2);
	while (!l->full[slot])
		pthread_cond_wait(&l->cv, &l->mu);
	*mine = l->count[slot];
	total = l->total[slot];
	l->next_take++;
	l->holding = 1;
	pthread_mutex_unlock(&l->mu);
	*x = l->x[slot];
	*y = l->y[slot];
	return total;
}

int dlt_loader_rounds(const dlt_loader *l)
{
	return l->norm_on && l->norm.round != DLT_PREC_F32;
}

void dlt_loader_stop(dlt_loader *l)
{
	pthread_mutex_lock(&l->mu);
	l->quit = 1;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thread, NULL);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free_buffers(l);
}
