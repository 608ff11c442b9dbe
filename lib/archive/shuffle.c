/* shuffle: the byte shuffle of shuffle-zstd and its inverse, each fused
 * with the xxh64 of the raw bytes, and xxh64 itself.
 *
 * Plane k holds the k-th byte of every element, so that the slowly
 * changing high bytes of floats lie together.  Every byte a checkpoint
 * stores goes through here, and the archive needs the xxh64 of the raw
 * bytes anyway: one pass that shuffles with vector instructions while the
 * hash's four lanes run on the integer multipliers costs about what the
 * hash alone costs, where two passes cost the sum.  So f32 (4 bytes) and
 * f16/bf16 (2 bytes) have AVX2 paths, chosen once from cpuid (one binary
 * for every x86-64 machine); every other case, and a machine without
 * AVX2, takes the plain loops, which the tests compare the fast paths with.
 *
 * xxh64 is written out here because a library call cannot be fused into a
 * loop; the tests check it against libxxhash, which the rest of dlt uses.
 * It also serves the record checksums (ar_hash): it is a third faster than
 * libxxhash 0.8's XXH64 on the Zen 3 this was measured on. */
#include <pthread.h>
#include <string.h>

#include "archive/format.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- xxh64 (the spec: github.com/Cyan4973/xxHash, doc/xxhash_spec.md) ---- */

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t xround(uint64_t acc, uint64_t in)
{
	return rotl(acc + in * P2, 31) * P1;
}

/* The four lanes over the whole 32-byte stripes of n bytes; returns the
 * bytes taken. */
static inline size_t stripes(uint64_t *v, const unsigned char *p, size_t n)
{
	uint64_t v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3];
	size_t i;
	for (i = 0; i + 32 <= n; i += 32) {
		v0 = xround(v0, ar_get64(p + i));
		v1 = xround(v1, ar_get64(p + i + 8));
		v2 = xround(v2, ar_get64(p + i + 16));
		v3 = xround(v3, ar_get64(p + i + 24));
	}
	v[0] = v0, v[1] = v1, v[2] = v2, v[3] = v3;
	return i;
}

static inline void lanes_init(uint64_t *v)
{
	v[0] = P1 + P2, v[1] = P2, v[2] = 0, v[3] = -P1;	/* seed 0 */
}

static inline uint64_t merge(uint64_t h, uint64_t v)
{
	return (h ^ xround(0, v)) * P1 + P4;
}

/* The hash of total bytes whose stripes went into v and whose last
 * total % 32 bytes are at p. */
static uint64_t finish(const uint64_t *v, uint64_t total, const unsigned char *p)
{
	size_t n = total % 32;
	uint64_t h;

	if (total >= 32) {
		h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
		for (int j = 0; j < 4; j++)
			h = merge(h, v[j]);
	} else {
		h = P5;
	}
	h += total;
	for (; n >= 8; p += 8, n -= 8)
		h = rotl(h ^ xround(0, ar_get64(p)), 27) * P1 + P4;
	if (n >= 4) {
		h = rotl(h ^ (uint64_t)ar_get32(p) * P1, 23) * P2 + P3;
		p += 4, n -= 4;
	}
	for (; n; p++, n--)
		h = rotl(h ^ *p * P5, 11) * P1;
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	return h ^ h >> 32;
}

uint64_t ar_xxh64(const void *p, size_t n)
{
	uint64_t v[4];
	size_t i;
	lanes_init(v);
	i = stripes(v, p, n);
	return finish(v, n, (const unsigned char *)p + i);
}

void ar_xxh64_init(ar_xxh64_state *h)
{
	lanes_init(h->v);
	h->total = 0;
	h->nbuf = 0;
}

void ar_xxh64_update(ar_xxh64_state *h, const void *data, size_t n)
{
	const unsigned char *p = data;
	if (n == 0)		/* data may be NULL then */
		return;
	h->total += n;
	if (h->nbuf) {
		size_t take = 32 - h->nbuf < n ? 32 - h->nbuf : n;
		memcpy(h->buf + h->nbuf, p, take);
		h->nbuf += take;
		p += take, n -= take;
		if (h->nbuf < 32)
			return;
		stripes(h->v, h->buf, 32);
		h->nbuf = 0;
	}
	p += stripes(h->v, p, n);
	h->nbuf = h->total % 32;
	memcpy(h->buf, p, h->nbuf);
}

uint64_t ar_xxh64_final(const ar_xxh64_state *h)
{
	return finish(h->v, h->total, h->buf);
}

/* ---- plain loops ---- */

static void shuffle_ref(unsigned char *dst, const unsigned char *src, size_t count, size_t esize,
			size_t from)
{
	for (size_t k = 0; k < esize; k++)
		for (size_t i = from; i < count; i++)
			dst[k * count + i] = src[i * esize + k];
}

static void unshuffle_ref(unsigned char *dst, const unsigned char *const *planes, size_t count,
			  size_t esize, size_t from)
{
	for (size_t k = 0; k < esize; k++) {
		const unsigned char *p = planes[k];
		for (size_t i = from; i < count; i++)
			dst[i * esize + k] = p[i];
	}
}

void ar_shuffle_ref(unsigned char *dst, const unsigned char *src, size_t count, size_t esize)
{
	shuffle_ref(dst, src, count, esize, 0);
}

void ar_unshuffle_ref(unsigned char *dst, const unsigned char *const *planes, size_t count,
		      size_t esize)
{
	unshuffle_ref(dst, planes, count, esize, 0);
}

/* ---- AVX2: 32 elements a step, hashing their raw bytes as it goes ---- */

#if defined(__x86_64__)
__attribute__((target("avx2")))
static uint64_t shuffle4_avx2(unsigned char *dst, const unsigned char *src, size_t count)
{
	/* in each 128-bit lane, byte k of its 4 elements to dword k */
	const __m256i gather = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
						0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	/* then qword k: byte k of the register's 8 elements */
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	unsigned char *d0 = dst, *d1 = dst + count, *d2 = dst + 2 * count, *d3 = dst + 3 * count;
	uint64_t v[4];
	size_t i;

	lanes_init(v);
	for (i = 0; i + 32 <= count; i += 32) {
		const unsigned char *s = src + 4 * i;
		__m256i a = _mm256_loadu_si256((const __m256i *)s);
		__m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));
		__m256i c = _mm256_loadu_si256((const __m256i *)(s + 64));
		__m256i d = _mm256_loadu_si256((const __m256i *)(s + 96));
		stripes(v, s, 128);
		a = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(a, gather), perm);
		b = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(b, gather), perm);
		c = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(c, gather), perm);
		d = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(d, gather), perm);
		/* a 4x4 transpose of qwords */
		__m256i t0 = _mm256_unpacklo_epi64(a, b), t1 = _mm256_unpackhi_epi64(a, b);
		__m256i t2 = _mm256_unpacklo_epi64(c, d), t3 = _mm256_unpackhi_epi64(c, d);
		_mm256_storeu_si256((__m256i *)(d0 + i), _mm256_permute2x128_si256(t0, t2, 0x20));
		_mm256_storeu_si256((__m256i *)(d1 + i), _mm256_permute2x128_si256(t1, t3, 0x20));
		_mm256_storeu_si256((__m256i *)(d2 + i), _mm256_permute2x128_si256(t0, t2, 0x31));
		_mm256_storeu_si256((__m256i *)(d3 + i), _mm256_permute2x128_si256(t1, t3, 0x31));
	}
	shuffle_ref(dst, src, count, 4, i);
	i = 4 * i + stripes(v, src + 4 * i, 4 * (count - i));
	return finish(v, 4 * count, src + i);
}

__attribute__((target("avx2")))
static uint64_t unshuffle4_avx2(unsigned char *dst, const unsigned char *const *planes,
				size_t count)
{
	const unsigned char *p0 = planes[0], *p1 = planes[1], *p2 = planes[2], *p3 = planes[3];
	uint64_t v[4];
	size_t i;

	lanes_init(v);
	for (i = 0; i + 32 <= count; i += 32) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(p0 + i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(p1 + i));
		__m256i c = _mm256_loadu_si256((const __m256i *)(p2 + i));
		__m256i d = _mm256_loadu_si256((const __m256i *)(p3 + i));
		__m256i ab0 = _mm256_unpacklo_epi8(a, b), ab1 = _mm256_unpackhi_epi8(a, b);
		__m256i cd0 = _mm256_unpacklo_epi8(c, d), cd1 = _mm256_unpackhi_epi8(c, d);
		/* elements 0-3 | 16-19, 4-7 | 20-23, 8-11 | 24-27, 12-15 | 28-31 */
		__m256i r0 = _mm256_unpacklo_epi16(ab0, cd0), r1 = _mm256_unpackhi_epi16(ab0, cd0);
		__m256i r2 = _mm256_unpacklo_epi16(ab1, cd1), r3 = _mm256_unpackhi_epi16(ab1, cd1);
		unsigned char *o = dst + 4 * i;
		_mm256_storeu_si256((__m256i *)o, _mm256_permute2x128_si256(r0, r1, 0x20));
		_mm256_storeu_si256((__m256i *)(o + 32), _mm256_permute2x128_si256(r2, r3, 0x20));
		_mm256_storeu_si256((__m256i *)(o + 64), _mm256_permute2x128_si256(r0, r1, 0x31));
		_mm256_storeu_si256((__m256i *)(o + 96), _mm256_permute2x128_si256(r2, r3, 0x31));
		stripes(v, o, 128);
	}
	unshuffle_ref(dst, planes, count, 4, i);
	i = 4 * i + stripes(v, dst + 4 * i, 4 * (count - i));
	return finish(v, 4 * count, dst + i);
}

__attribute__((target("avx2")))
static uint64_t shuffle2_avx2(unsigned char *dst, const unsigned char *src, size_t count)
{
	/* in each lane, the low bytes of its 8 elements, then the high ones */
	const __m256i gather = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
						0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
	unsigned char *d0 = dst, *d1 = dst + count;
	uint64_t v[4];
	size_t i;

	lanes_init(v);
	for (i = 0; i + 32 <= count; i += 32) {
		const unsigned char *s = src + 2 * i;
		__m256i a = _mm256_loadu_si256((const __m256i *)s);
		__m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));
		stripes(v, s, 64);
		/* low 128 bits: low bytes of the register's 16 elements */
		a = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a, gather), 0xd8);
		b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b, gather), 0xd8);
		_mm256_storeu_si256((__m256i *)(d0 + i), _mm256_permute2x128_si256(a, b, 0x20));
		_mm256_storeu_si256((__m256i *)(d1 + i), _mm256_permute2x128_si256(a, b, 0x31));
	}
	shuffle_ref(dst, src, count, 2, i);
	i = 2 * i + stripes(v, src + 2 * i, 2 * (count - i));
	return finish(v, 2 * count, src + i);
}

__attribute__((target("avx2")))
static uint64_t unshuffle2_avx2(unsigned char *dst, const unsigned char *const *planes,
				size_t count)
{
	const unsigned char *p0 = planes[0], *p1 = planes[1];
	uint64_t v[4];
	size_t i;

	lanes_init(v);
	for (i = 0; i + 32 <= count; i += 32) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(p0 + i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(p1 + i));
		/* elements 0-7 | 16-23 and 8-15 | 24-31 */
		__m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
		unsigned char *o = dst + 2 * i;
		_mm256_storeu_si256((__m256i *)o, _mm256_permute2x128_si256(lo, hi, 0x20));
		_mm256_storeu_si256((__m256i *)(o + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
		stripes(v, o, 64);
	}
	unshuffle_ref(dst, planes, count, 2, i);
	i = 2 * i + stripes(v, dst + 2 * i, 2 * (count - i));
	return finish(v, 2 * count, dst + i);
}
#endif

/* ---- which one runs ---- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int use_avx2;

static void init(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	use_avx2 = !!__builtin_cpu_supports("avx2");
#endif
}

int ar_shuffle_simd(void)
{
	pthread_once(&once, init);
	return use_avx2;
}

uint64_t ar_shuffle(unsigned char *dst, const unsigned char *src, size_t count, size_t esize)
{
#if defined(__x86_64__)
	if (esize == 4 && ar_shuffle_simd())
		return shuffle4_avx2(dst, src, count);
	if (esize == 2 && ar_shuffle_simd())
		return shuffle2_avx2(dst, src, count);
#endif
	if (esize == 1)
		memcpy(dst, src, count);
	else
		shuffle_ref(dst, src, count, esize, 0);
	return ar_xxh64(src, count * esize);
}

uint64_t ar_unshuffle(unsigned char *dst, const unsigned char *const *planes, size_t count,
		      size_t esize)
{
#if defined(__x86_64__)
	if (esize == 4 && ar_shuffle_simd())
		return unshuffle4_avx2(dst, planes, count);
	if (esize == 2 && ar_shuffle_simd())
		return unshuffle2_avx2(dst, planes, count);
#endif
	if (esize == 1)
		memcpy(dst, planes[0], count);
	else
		unshuffle_ref(dst, planes, count, esize, 0);
	return ar_xxh64(dst, count * esize);
}
