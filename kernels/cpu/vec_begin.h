/* The W-lane vectors (gcc vector extensions) of a header that a kernel
 * file includes once per instruction set (each_isa.h), with W (lanes)
 * and SFX (its functions' suffix) and the target set: attention_simd.h and
 * decode_simd.h include this first and vec_end.h last.  No include guard:
 * each inclusion names them for its W. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

typedef float FN(vf_) __attribute__((vector_size(W * 4)));
typedef float FN(vu_) __attribute__((vector_size(W * 4), aligned(4)));
#define VT FN(vf_)
#define VU FN(vu_)
#define LD(p) (*(const VU *)(p))
#define ST(p, v) (*(VU *)(p) = (v))
#define UNROLL _Pragma("GCC unroll 16")
#if W == 16
#define SPLAT(x) ((VT)_mm512_set1_ps(x))
#define VMAX(a, b) ((VT)_mm512_max_ps((__m512)(a), (__m512)(b)))
#else
#define SPLAT(x) ((VT)_mm256_set1_ps(x))
#define VMAX(a, b) ((VT)_mm256_max_ps((__m256)(a), (__m256)(b)))
#endif
