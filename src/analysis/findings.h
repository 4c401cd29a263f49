/*
 * findings.h - what one trace says (evidence.h: typed findings), computed once from the loaded
 * run (an_load calls an_findings_of) and again when a comparison decides which layers run in
 * FP32 (an_compare calls an_findings_refresh): the run summary printed by `ampdiag run`,
 * `ampdiag info`, and compare's per-run evidence print these; they do not count again.
 */
#ifndef AMPDIAG_FINDINGS_H
#define AMPDIAG_FINDINGS_H

#include "analysis/evidence.h"
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

/* Why a what-if format would hurt a tensor (F_WHATIF_HURT's "reason"). */
typedef enum an_hurt_reason {
    AN_HURT_RANGE = 0, /* its dynamic range (over the trace) is wider than the format's */
    AN_HURT_ABOVE,     /* unscaled: values above the format's largest value */
    AN_HURT_BELOW,     /* unscaled: values below half its smallest subnormal */
    AN_HURT_AMAX,      /* delayed: values grew past max / scale (the scale from earlier amax) */
    AN_HURT_HISTORY,   /* delayed: values too far below the history's largest amax */
    AN_HURT_MARGIN     /* delayed: a negative margin puts the history's amax beyond the format */
} an_hurt_reason;

#define AN_HURT_TOP 5        /* tensors of the FP8 recipe's list */
#define AN_HURT_TOP_COLUMN 3 /* tensors per unscaled what-if column */

typedef struct an_findings {
    an_finding_list list;         /* the typed findings of the trace (evidence.h) */

    /* totals per tensor kind over all layers, and over everything (info's what-if table) */
    an_cell kind[AMPDIAG_NKINDS];
    an_cell all;

    /* every (layer, kind) with finite non-zero values, least headroom first:
     * by_headroom[format 0 fp16 / 1 bf16][side 0 overflow / 1 underflow] (info's tables) */
    an_headroom *by_headroom[2][2];
    size_t nheadroom;

    size_t recipe_hurt_all;       /* tensors the FP8 recipe would hurt, all of them */
    int recipe;                   /* the trace has delayed-scaling FP8 counts (the recipe) */

    const ampdiag_trace_eval *last_eval; /* NULL when none */
    int eval_is_accuracy;         /* the metric is an accuracy: print it as a percentage */
} an_findings;

/* Compute into run->find (allocated here), the run's index in the runs compared being `index`
 * (0 for a trace alone). Returns 0 or -1 (out of memory); the run is always left for
 * an_findings_free (an_free calls it). */
int an_findings_of(an_run *r, int index);
/* Again, with the run's index in a comparison and the layers it decided run in FP32. */
int an_findings_refresh(an_run *r, int index);
void an_findings_free(an_run *r);
/* r was moved (copied by value) from `was`: the findings that quote the run's own text (its
 * status, skip reason, ... held inside the run) point into the copy again. Call it after every
 * such move, before `was` is freed or reused. */
void an_run_moved(an_run *r, const an_run *was);

/* The run's findings (empty list without them). */
const an_finding_list *an_run_findings(const an_run *r);
/* The first finding of id of the run, or NULL. */
const an_finding *an_run_finding(const an_run *r, an_fid id);

/* The one definition of a healthy run (tune's verification, compare's evidence): complete,
 * no NaN/inf in its loss, forward pass or last evaluation, skipped steps within the limit
 * (F_SKIPS_ABOVE_LIMIT), and learning where that was measured (not F_DOES_NOT_LEARN). Returns
 * the first finding that makes the run unhealthy, or NULL. */
const an_finding *an_run_unhealthy(const an_run *r);

/* The standard error of the mean of the per-example differences b[i] - a[i] over n >= 2 examples,
 * and that mean into *mean (may be NULL); winsorized: the differences clamped to the ones
 * PAIRED_WINSOR of them in from each end first. NaN when some difference is not finite or n < 2
 * (or out of memory). */
double an_paired_se(const double *a, const double *b, size_t n, int winsorized, double *mean);

/* 1 when the run learns, 0 when it does not, -1 when nothing says: measured against its start
 * (F_LEARNS, F_DOES_NOT_LEARN), else judged from its training loss (F_LEARNS_NOTHING: 0). */
int an_run_learns(const an_run *r);

/* The delayed-scaling recipe's format for a kind: E4M3 for activations and weights, E5M2 for
 * gradients (Transformer Engine's HYBRID). */
ampdiag_format an_recipe_format(int kind);

#endif
