/*
 * findings.h - what one trace says, computed once from the loaded run (analyze.h) for every
 * renderer: the run summary printed by `ampdiag run`, `ampdiag info` (text and JSON) and the
 * per-run figures of `ampdiag compare`. A renderer prints these; it does not count again.
 */
#ifndef AMPDIAG_FINDINGS_H
#define AMPDIAG_FINDINGS_H

#include "analysis/analyze.h"

/* Headroom of one (layer, kind) in binades (factors of 2), for FP16 [0] and BF16 [1]:
 *   over  = log2(max_finite / absmax)        (negative: beyond the format's range)
 *   under = log2(absmin_nz / min_normal)     (negative: subnormal, then zero) */
typedef struct an_headroom {
    int layer, kind;
    double absmax, absmin_nz;          /* over the trace, as held */
    int64_t absmax_step, absmin_step;
    double over[2], under[2];
} an_headroom;

typedef struct an_findings {
    /* totals per tensor kind over all layers, and over everything */
    an_cell kind[AMPDIAG_NKINDS];
    an_cell all;

    /* every (layer, kind) with finite non-zero values, least headroom first:
     * by_headroom[format 0 fp16 / 1 bf16][side 0 overflow / 1 underflow] */
    an_headroom *by_headroom[2][2];
    size_t nheadroom;

    /* the run summary's one-line findings (layer -1 when none) */
    int act_headroom_layer;     /* least FP16 overflow headroom among activations of ops run in
                                   the run's format (the loss is kept in FP32) */
    double act_headroom;        /* binades: log2(65504 / absmax) there */
    int zero_grad_layer;        /* largest share of weight-gradient values exactly 0 */
    double zero_grad_fraction;  /* of the finite values */
    int flush_layer;            /* largest share of non-zero weight gradients (as held) that FP16
                                   flushes to zero */
    double flush_fraction;
    int nonfinite_act_layer;    /* first layer in forward order whose activations held NaN/inf */
    uint64_t nonfinite_act_count;
    int64_t nonfinite_act_step;
    int nonfinite_weight_layer; /* first layer whose recorded weights held NaN/inf */
    int64_t nonfinite_weight_step;

    /* updates: shares of the finite non-zero update values (NaN when none recorded) */
    uint64_t update_nonzero;
    double lost_fraction;       /* rounded away in the run's own weight storage */
    double lost_if_fp16, lost_if_bf16; /* would round away with 16-bit weights (NaN: not recorded) */

    const ampdiag_trace_eval *last_eval; /* NULL when none */
    int eval_is_accuracy;       /* the metric is an accuracy: print it as a percentage */
} an_findings;

/* Compute. Returns 0 or -1 (out of memory); f is always left for an_findings_free. */
int an_findings_of(const an_run *r, an_findings *f);
void an_findings_free(an_findings *f);

#endif
