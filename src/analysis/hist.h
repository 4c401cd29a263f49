/*
 * hist.h - exponent histograms: what FP16 would do to the values of a histogram at a loss
 * scale, its quantiles, and histograms of one layer read again from a trace (for the charts).
 */
#ifndef AMPDIAG_ANALYSIS_HIST_H
#define AMPDIAG_ANALYSIS_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/run.h"

/* The fraction of a histogram's non-zero finite values whose magnitude times 2^shift would be
 * flushed to zero in FP16 (|x| * 2^shift <= 2^-25), and would be FP16 subnormals. */
void an_hist_fp16_at_scale(const uint64_t *hist, int shift, double *flushed, double *subnormal,
                           uint64_t *nonzero);
/* The share of the squared norm of a histogram's non-zero finite values (each bin weighed by
 * the square of its centre) that times 2^shift would flush to zero in FP16: the weight of the
 * flushed values in the gradient, where the share of values counts each alike. */
double an_hist_fp16_flushed_norm(const uint64_t *hist, int shift);
/* log2 of the p-quantile (0..1) of the non-zero finite magnitudes (bin lower edge); NaN if
 * none. */
double an_hist_quantile_log2(const uint64_t *hist, double p);

/* Histograms of one layer at given steps, for the charts: out[k * nsteps + j] and have[same]
 * receive the row of kinds[k] at steps[j] (have 0 where none). Reads the trace again. Returns 0
 * or an ampdiag_trace error code (message in err). */
int an_read_hists(const an_run *r, int layer, const int *kinds, size_t nkinds, const int64_t *steps,
                  size_t nsteps, ampdiag_trace_hist *out, int *have, char *err, size_t errlen);

#endif
