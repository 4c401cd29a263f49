/* tstats_ref.h - slow, obviously correct statistics: the definition the fused kernel must meet. */
#ifndef AMPDIAG_TSTATS_REF_H
#define AMPDIAG_TSTATS_REF_H
#include "ampdiag.h"

/* Fields of ampdiag_tstats computed one value at a time by classifying the result of actually
 * rounding each value to every row of the format table (its round function), sums in long
 * double. */
void tstats_ref(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h);

/* The same fields, as a program without a fused kernel computes them: one pass per field, the
 * what-if counts from the thresholds of the format table (used by the benchmark as the
 * "separate passes" baseline: TSTATS_MULTIPASS_LOOPS loops). */
#define TSTATS_MULTIPASS_LOOPS (12 + 3 * AMPDIAG_NFORMATS)
void tstats_multipass(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h);
#endif
