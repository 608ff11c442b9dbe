/* Includes the header DLT_EACH_ISA names (a string) twice: for AVX-512,
 * with W 16 and SFX avx512, and for AVX2 with FMA, with W 8 and SFX avx2,
 * each under its instruction set's target: gcc's target pragma, or
 * clang's attribute on every function there (make fuzz builds with clang,
 * which ignores the GCC pragma and then refuses the intrinsics).  The
 * caller picks a version by cpuid.  No include guard: a file includes it
 * once for each such header. */

#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
#define W 16
#define SFX avx512
#include DLT_EACH_ISA
#undef SFX
#undef W
#ifdef __clang__
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#define W 8
#define SFX avx2
#include DLT_EACH_ISA
#undef SFX
#undef W
#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
