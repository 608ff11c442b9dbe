/* dlt_rng_normals' blocks (rng.c), included once per instruction set
 * with SFX its name and the target's pragma around it.  Each multiply-
 * add is an explicit fmaf and nothing else is contracted (rng.c), so
 * every version rounds alike: an FMA instruction where the target has
 * one, libm's exact fmaf where not. */
#define NAME_(f, sfx) f##_##sfx
#define NAME2(f, sfx) NAME_(f, sfx)
#define NAME(f) NAME2(f, SFX)

/* log(x) for x in (0, 1]: x = 2^e m, m in [sqrt(1/2), sqrt(2)), and
 * Cephes' logf polynomial of m - 1 (within 2 ulp) */
static inline __attribute__((always_inline)) float NAME(log_unit)(float x)
{
	uint32_t bits;
	float m, z, y, e, low;
	memcpy(&bits, &x, sizeof(bits));
	e = (float)((int32_t)(bits >> 23) - 126);
	bits = (bits & 0x007fffffu) | 0x3f000000u;	/* m in [0.5, 1) */
	memcpy(&m, &bits, sizeof(m));
	/* 1 where m < sqrt(1/2), from the bits: no compare, which a loop
	 * with calls (fmaf's on AVX2) would keep as a branch */
	low = (float)((bits - 0x3f3504f3u) >> 31);
	e -= low;
	m = m * (1.0f + low) - 1.0f;	/* exact: 2 m - 1 or m - 1 */
	z = m * m;
	y = 7.0376836292e-2f;
	y = fmaf(y, m, -1.1514610310e-1f);
	y = fmaf(y, m, 1.1676998740e-1f);
	y = fmaf(y, m, -1.2420140846e-1f);
	y = fmaf(y, m, 1.4249322787e-1f);
	y = fmaf(y, m, -1.6668057665e-1f);
	y = fmaf(y, m, 2.0000714765e-1f);
	y = fmaf(y, m, -2.4999993993e-1f);
	y = fmaf(y, m, 3.3333331174e-1f);
	y = y * m * z;
	y = fmaf(e, -2.12194440e-4f, y);
	y = fmaf(z, -0.5f, y);
	return fmaf(e, 0.693359375f, m + y);
}

/* sin and cos of 2 pi u, u in [0, 1): the quarter turn q and the angle
 * a in [0, pi/2) within it, their Taylor polynomials (to a^11 and a^12:
 * within 6e-8), turned by q */
static inline __attribute__((always_inline)) void NAME(sincos_turn)(float u, float *s, float *c)
{
	int q = (int)(u * 4.0f);
	float a = (u * 4.0f - (float)q) * 1.57079632679489662f, z = a * a;
	float ps = -1.0f / 39916800.0f, pc = 1.0f / 479001600.0f, sn, cs;
	uint32_t bs, bc, swap;
	ps = fmaf(ps, z, 1.0f / 362880.0f);
	ps = fmaf(ps, z, -1.0f / 5040.0f);
	ps = fmaf(ps, z, 1.0f / 120.0f);
	ps = fmaf(ps, z, -1.0f / 6.0f);
	sn = fmaf(ps * z, a, a);
	pc = fmaf(pc, z, -1.0f / 3628800.0f);
	pc = fmaf(pc, z, 1.0f / 40320.0f);
	pc = fmaf(pc, z, -1.0f / 720.0f);
	pc = fmaf(pc, z, 1.0f / 24.0f);
	pc = fmaf(pc, z, -0.5f);
	cs = fmaf(pc, z, 1.0f);
	/* swapped in odd quarters and negated in two, by their bits (no
	 * branch: as in log_unit) */
	memcpy(&bs, &sn, sizeof(bs));
	memcpy(&bc, &cs, sizeof(bc));
	swap = (bs ^ bc) & (0u - ((uint32_t)q & 1u));
	bs = (bs ^ swap) ^ (((uint32_t)q & 2u) << 30);
	bc = (bc ^ swap) ^ (((uint32_t)q + 1u) & 2u) << 30;
	memcpy(s, &bs, sizeof(bs));
	memcpy(c, &bc, sizeof(bc));
}

/* A pair of normals from two numbers */
static inline __attribute__((always_inline)) void NAME(normal_pair)(uint32_t x1, uint32_t x2,
								 float std, float *p)
{
	float u1 = 1.0f - (float)(x1 >> 8) * (1.0f / 16777216.0f);
	float u2 = (float)(x2 >> 8) * (1.0f / 16777216.0f);
	float rad = std * sqrtf(-2.0f * NAME(log_unit)(u1)), s, c;
	NAME(sincos_turn)(u2, &s, &c);
	p[0] = rad * c;
	p[1] = rad * s;
}

/* Block b of the stream: its two pairs of normals into p[0..4) */
static inline __attribute__((always_inline)) void NAME(normals_block)(float *p, float std,
								   uint64_t seed,
								   uint64_t stream, uint64_t b)
{
	uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
	uint64_t ctr = (stream << 32) + b;
	uint32_t x[4] = { (uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0 };
	dlt_philox4x32_10(x, key);
	NAME(normal_pair)(x[0], x[1], std, p);
	NAME(normal_pair)(x[2], x[3], std, p + 2);
}

/* blocks b0 .. b0 + nb - 1 into p */
static void NAME(normals_run)(float *p, float std, uint64_t seed, uint64_t stream, uint64_t b0,
			      uint64_t nb)
{
	#pragma omp simd
	for (uint64_t b = 0; b < nb; b++)
		NAME(normals_block)(p + 4 * b, std, seed, stream, b0 + b);
}

#undef NAME
#undef NAME2
#undef NAME_
