/*
 * findings_internal.h - what findings.c and findings_range.c share: the computation's context
 * and its parts. Not for use outside them.
 */
#ifndef AMPDIAG_ANALYSIS_FINDINGS_INTERNAL_H
#define AMPDIAG_ANALYSIS_FINDINGS_INTERNAL_H

#include "analysis/figures.h"
#include "analysis/findings.h"

typedef struct fctx {
    const an_run *r;
    an_findings *F;
    int index;   /* the run's index: the findings' subject */
    int oom;
} fctx;

/* A new finding about the run (NULL and x->oom set when out of memory). */
an_finding *fadd(fctx *x, an_fid id);

/* findings_range.c */
void an_range_findings(fctx *x);   /* forward overflow and headroom, BF16 range, the loss scale */
void an_update_findings(fctx *x);  /* lost updates, in the run's weights and with BF16 weights */
void an_clip_findings(fctx *x);    /* the gradient norms: the clip value and its notes */
void an_whatif_findings(fctx *x);  /* what the other what-if columns would do (FP8, ...) */

/* recipe.c: every recipe the trace counted: the tensors it would hurt (the worst
 * AN_RECIPE_HURT_TOP), the per-layer plan and its summary */
#define AN_RECIPE_HURT_TOP 8
void an_recipe_findings(fctx *x);

#endif
