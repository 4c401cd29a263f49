/*
 * fp8.h - what-if counts of FP8 under Transformer Engine's delayed scaling, for every traced
 * tensor of a run: each (layer, kind) keeps a history of the amax of its last traced steps, the
 * scale of a step comes from the history before it (ampdiag_delayed_scale: max / amax_max /
 * 2^margin, the previous scale kept while the history holds no finite non-zero amax, 1 at
 * first, as TE starts), and the step's own amax enters the history after its count.
 *
 * Both FP8 formats are counted for the four kinds TE casts (activations, weights and their
 * gradients; not updates: the optimizer does not run in FP8), so that a reader can apply either
 * recipe (TE's HYBRID: E4M3 forward, E5M2 gradients; or E4M3 everywhere).
 *
 * A format's pass over the values is left out where the tensor's statistics settle its counts
 * (every count 0), and the history's maximum is kept as it slides; AMPDIAG_TRACE_PLAIN=1 in the
 * environment counts everything by a pass and reads each history whole (tests/t_trace_fused.c
 * checks that the records agree).
 *
 * One (layer, kind) is counted by one thread at a time, in step order (the tracer's jobs of one
 * kind run in step order); different ones may be counted concurrently.
 */
#ifndef AMPDIAG_TRAIN_FP8_H
#define AMPDIAG_TRAIN_FP8_H

#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "backend/backend.h"

#include <stddef.h>
#include <stdint.h>

#define FP8_NFORMATS 2 /* E4M3, E5M2 */
#define FP8_NKINDS 4   /* activation, activation_grad, weight, weight_grad */
#define FP8_DEFAULT_HISTORY 1024 /* TE's DelayedScaling amax_history_len (since TE 1.0) */

extern const ampdiag_format fp8_formats[FP8_NFORMATS];

/* One tensor's delayed-scaling counts at one step. */
typedef struct fp8_counts {
    int have;                                          /* 0: not counted */
    float scale[FP8_NFORMATS];
    uint64_t c[FP8_NFORMATS][AMPDIAG_WHATIF_NCLASSES]; /* AMPDIAG_WHATIF_* */
} fp8_counts;

typedef struct fp8_delayed fp8_delayed;

/* history: steps of amax kept (>= 1); margin: the scale is divided by 2^margin. NULL when out of
 * memory. */
fp8_delayed *fp8_delayed_create(int nlayers, int history, int margin);
void fp8_delayed_free(fp8_delayed *d);

/* Count x[0..n) (layer, kind; kind < AMPDIAG_KIND_UPDATE) of statistics s under the scale the
 * history gives, then enter this step's amax (NaN when s has NaNs, inf when it has infs, as
 * TE's amax would be). out->have is 0 (and the history untouched) where the backend cannot
 * count. */
void fp8_delayed_count(fp8_delayed *d, const backend *bk, int layer, ampdiag_tensor_kind kind,
                       const float *x, size_t n, const ampdiag_tstats *s, fp8_counts *out);

/* One tensor of fp8_delayed_count_many: as fp8_delayed_count's arguments. */
typedef struct fp8_job {
    int layer;
    ampdiag_tensor_kind kind;
    const float *x;
    size_t n;
    const ampdiag_tstats *s;
    fp8_counts *out;
} fp8_job;

/* fp8_delayed_count of k tensors (each (layer, kind) at most once): where the backend counts
 * many tensors at once (count_at_least_many), every threshold their statistics do not settle
 * is counted in one call, which a device waits for once; else one by one. The counts are the
 * same either way. */
void fp8_delayed_count_many(fp8_delayed *d, const backend *bk, size_t k, const fp8_job *jobs);

/* The statistics of x[0..n) into s (and h when not NULL: bk->tstats) and its delayed-scaling
 * counts into out (fp8_delayed_count; d may be NULL: out->have 0), in one pass where the backend
 * has tstats_ge (the scales come from the history, so their thresholds are known before the
 * pass; the statistics kernel counts only those inside each block's range), else in two. The
 * same records either way (AMPDIAG_TRACE_PLAIN takes the two passes and counts every format
 * whole). */
void fp8_stats(fp8_delayed *d, const backend *bk, int layer, ampdiag_tensor_kind kind, const float *x,
               size_t n, ampdiag_tstats *s, ampdiag_hist *h, fp8_counts *out);

#endif
