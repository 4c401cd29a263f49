/* tstats_ref.h - slow, obviously correct statistics: the definition the fused kernel must meet. */
#ifndef AMPDIAG_TSTATS_REF_H
#define AMPDIAG_TSTATS_REF_H
#include "ampdiag.h"

/* Fields of ampdiag_tstats computed one value at a time by classifying the result of actually
 * rounding each value (ampdiag_round), sums in long double. */
void tstats_ref(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h);

/* The same fields, as a program without a fused kernel computes them: one pass per field
 * (used by the benchmark as the "separate passes" baseline). */
void tstats_multipass(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h);
#endif
