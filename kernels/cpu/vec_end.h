/* Takes back vec_begin.h's names, for the next instruction set's
 * inclusion. */
#undef VMAX
#undef SPLAT
#undef UNROLL
#undef ST
#undef LD
#undef VU
#undef VT
#undef FN
#undef CAT
#undef CAT_
