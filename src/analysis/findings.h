/*
 * findings.h - what one trace says, computed once from the loaded run (an_load calls
 * an_findings_of) for every renderer: the run summary printed by `ampdiag run`, `ampdiag info`
 * (text and JSON) and the per-run figures of `ampdiag compare`. A renderer prints these; it
 * does not count again.
 */
#ifndef AMPDIAG_FINDINGS_H
#define AMPDIAG_FINDINGS_H

#include "analysis/run.h"

/* Headroom of one (layer, kind) in binades (factors of 2), for FP16 [0] and BF16 [1]:
 *   over  = log2(max_finite / absmax)        (negative: beyond the format's range)
 *   under = log2(absmin_nz / min_normal)     (negative: subnormal, then zero) */
typedef struct an_headroom {
    int layer, kind;
    double absmax, absmin_nz;          /* over the trace, as held */
    int64_t absmax_step, absmin_step;
    double over[2], under[2];
} an_headroom;

/* A tensor (layer x kind) that casting to FP8 would hurt: at least AN_FP8_MIN_FRACTION of its
 * values would overflow or flush to zero (src/analysis/fp8.c). */
#define AN_FP8_MIN_FRACTION 1e-3
#define AN_FP8_TOP 5
typedef enum an_fp8_reason {
    AN_FP8_RANGE = 0, /* its dynamic range (over the trace) is wider than the format's */
    AN_FP8_ABOVE,     /* unscaled: values above the format's largest value */
    AN_FP8_BELOW,     /* unscaled: values below half its smallest subnormal */
    AN_FP8_AMAX,      /* delayed: values grew past max / scale (the scale from earlier amax) */
    AN_FP8_HISTORY,   /* delayed: values too far below the history's largest amax */
    AN_FP8_MARGIN     /* delayed: a negative margin puts the history's amax beyond the format */
} an_fp8_reason;
typedef struct an_fp8_hurt {
    int layer, kind;
    int format;               /* AMPDIAG_E4M3 or AMPDIAG_E5M2 */
    int scaling;              /* AMPDIAG_SCALING_NONE or _DELAYED */
    uint64_t values, overflow, underflow;
    double overflow_fraction, underflow_fraction;
    double absmax, absmin_nz; /* the tensor's range over the trace, as held */
    an_fp8_reason reason;
} an_fp8_hurt;
typedef struct an_fp8_findings {
    int unscaled, delayed;    /* the trace has those counts */
    int history, margin;      /* the delayed scaling's (trace attributes; -1 when not recorded) */
    /* unscaled, per format (0 E4M3, 1 E5M2), any kind: up to 3, largest share first */
    an_fp8_hurt hurt_unscaled[2][3];
    int n_unscaled[2];
    /* Transformer Engine's default recipe (delayed scaling, HYBRID: E4M3 for activations and
     * weights, E5M2 for their gradients): the tensors it would hurt, largest share first */
    an_fp8_hurt hurt[AN_FP8_TOP];
    int nhurt;
    size_t nhurt_all;         /* how many tensors it would hurt in all */
} an_fp8_findings;

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

    an_fp8_findings fp8;        /* what FP8 would do (fp8.c) */

    const ampdiag_trace_eval *last_eval; /* NULL when none */
    int eval_is_accuracy;       /* the metric is an accuracy: print it as a percentage */
} an_findings;

/* Compute into run->find (allocated here). Returns 0 or -1 (out of memory); the run is always
 * left for an_findings_free (an_free calls it). */
int an_findings_of(an_run *r);
void an_findings_free(an_run *r);

#endif
