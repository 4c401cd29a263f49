/*
 * rules_bf16.c - the precision rules (b)6-(b)8 (docs/recommendations.md): the evidence of BF16
 * and bf16-pure runs, BF16's range, BF16 weights without FP32 master copies, AdamW's eps in
 * FP16 state, and which formats stay viable (with the FP32 islands FP16 would need).
 */
#include "analysis/rules.h"

#include <string.h>

/* ---- (b)6 BF16 run evidence: checks of one BF16 or bf16-pure run (index i) at the
 * baseline's lr ---- */

/* Observed beats predicted: a bf16-pure run (not the baseline) at the baseline's lr that completed
 * healthy, learns (measured against its start) and whose loss gap to the baseline is not outside
 * the noise band (within it, or better): its gap finding, else NULL. */
static const an_finding *pure_run_ok(const prec_ctx *x, size_t i)
{
    const an_run *r = &x->runs[i];
    const an_finding *g = an_finding_find(&x->c->list, F_CMP_GAP, (int)i);
    int ok = i != x->bi && x->have_fp32 && !run_failed(r) && !an_run_unhealthy(r) && an_run_learns(r) == 1 &&
             an_run_learns(x->base) == 1 && g && rec_fv(g, "outside") == 0;
    return ok ? g : NULL;
}

/* (b)6(i) A bf16-pure run (weights stored in BF16, no FP32 master copy) that lost more than
 * LOST_MAX of some layer's non-zero updates, or whose median update/weight ratio is below
 * BF16_UNIT_ROUNDOFF: keep FP32 master weights; unless the run is healthy all the same
 * (pure_run_ok: evidence for keeping it as run, pure_ok, which verdict_bf16 may conclude). */
static void bf16_check_master_weights(prec_ctx *x, size_t i, int pure)
{
    const an_finding *lu = rf(x->runs, i, F_LOST_UPDATES);
    if (!pure || !lu)
        return;
    int lost_bad = lu->s.layer >= 0 && rec_fv(lu, "worst") > an_k(K_LOST_MAX);
    if (!(lost_bad || rec_fv(lu, "ratio") < an_k(K_BF16_UNIT_ROUNDOFF)))
        return;
    const an_finding *g = pure_run_ok(x, i);
    if (g) { /* the lost updates did not cost this run */
        x->pure_ok = 1;
        SAY(x->R, SEC_BF16_FOR, R_BF16_PURE_KEPT, lu, -1, rec_fv(g, "value"), rec_fv(g, "base"), rec_fv(g, "eval"));
        return;
    }
    x->R->master_weights = 1;
    SAY0(x->R, SEC_BF16_AGAINST, R_BF16_MASTER_WEIGHTS, lu, -1);
    rec_decision *d = rec_decide(x->R, WHAT_MASTER_WEIGHTS, CONF_OBSERVED);
    if (d) {
        snprintf(d->to, sizeof d->to, "fp32");
        rec_because(d, lu);
    }
}

/* (b)6(ii) A BF16 run that diverges or has a non-finite loss where the FP32 baseline trains:
 * BF16 ruled out (a bf16-pure run only gets the item). Item figures: diverged, from. */
static void bf16_check_failed(prec_ctx *x, size_t i, int pure)
{
    const an_run *r = &x->runs[i];
    if (!run_failed(r) || baseline_fails(x))
        return;
    const an_finding *f = rf(x->runs, i, F_DIVERGED);
    if (!f)
        f = rf(x->runs, i, F_LOSS_NONFINITE);
    int item = SAY(x->R, SEC_BF16_AGAINST, R_BF16_FAILS, f, -1, has(r, F_DIVERGED),
                   (double)rec_fail_step(r));
    if (!pure) {
        x->bf16_bad = 1;
        rec_summary(&x->R->bf16, item);
    }
}

/* A BF16 run whose evaluation alone is not finite where the baseline's is (rec_eval_cause):
 * BF16 ruled out for this data (a bf16-pure run only gets the item). */
static void bf16_check_eval(prec_ctx *x, size_t i, int pure)
{
    if (rec_eval_cause(x, i, &x->R->bf16, SEC_BF16_AGAINST, AMPDIAG_BF16) && !pure)
        x->bf16_bad = 1;
}

/* (b)6(iii) The loss gap of a BF16 run that trains: above the noise band it fails
 * (bf16_gap_bad; for bf16-pure, the lost updates above explain it); within, evidence. Item
 * figures: bf16 (1), pure. */
static void bf16_check_gap(prec_ctx *x, size_t i, int pure)
{
    const an_finding *g = an_finding_find(&x->c->list, F_CMP_GAP, (int)i);
    if (!g || i == x->bi || run_failed(&x->runs[i]))
        return;
    if (rec_fv(g, "outside") != 0) {
        int item = SAY(x->R, SEC_BF16_AGAINST, R_GAP_OUTSIDE, g, -1, 1, pure);
        if (!pure) {
            x->bf16_gap_bad = 1;
            rec_summary(&x->R->bf16, item);
        }
    } else {
        SAY0(x->R, SEC_BF16_FOR, R_GAP_WITHIN, g, -1);
    }
}

/* A BF16 (autocast) run that trains with no NaN/inf and no skipped step: evidence. */
static void bf16_note_clean(prec_ctx *x, size_t i, int pure)
{
    const an_run *r = &x->runs[i];
    if (!pure && !run_failed(r) && !has(r, F_FWD_NONFINITE) && r->skipped == 0)
        SAY0(x->R, SEC_BF16_FOR, R_BF16_CLEAN, NULL, (int)i);
}

typedef void (*bf16_run_check)(prec_ctx *, size_t, int);
static const bf16_run_check bf16_run_checks[] = {
    bf16_check_master_weights, bf16_check_failed, bf16_check_eval, bf16_check_gap, bf16_note_clean,
};

/* (b)6(i)-(iii) BF16 run evidence. Reads: each bf16 and bf16-pure run at the baseline's lr.
 * Decides: bf16 observed (a bf16 autocast run), then bf16_run_checks[]. */
void rule_bf16_runs(prec_ctx *x)
{
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        int pure = is_prec(r, PREC_BF16_PURE);
        if ((!is_prec(r, PREC_BF16) && !pure) || !lr_eq(r->lr, x->base->lr))
            continue;
        if (!pure)
            x->R->bf16.observed = 1;
        for (size_t k = 0; k < NELEM(bf16_run_checks); k++)
            bf16_run_checks[k](x, i, pure);
    }
}

/* (b)6(iv) BF16 range (what-if). Reads: forward_source's F_BF16_OVERFLOW (a value reaching
 * BF16_OVERFLOW_AT). Decides: BF16 ruled out (bf16_bad) unless the verdict is undecided; with
 * no BF16 run and nothing beyond the range, evidence (predicted). */
void rule_bf16_range(prec_ctx *x)
{
    rec_format *b16 = &x->R->bf16;
    if (!x->fwd_src)
        return;
    const an_finding *h = rf(x->runs, x->fwd_i, F_BF16_OVERFLOW);
    if (h && !x->undecided) {
        x->bf16_bad = 1;
        rec_summary(b16, SAY0(x->R, SEC_BF16_AGAINST, R_BF16_RANGE, h, -1));
    } else if (!b16->observed && !h) {
        SAY0(x->R, SEC_BF16_FOR, R_BF16_RANGE_OK, NULL, (int)x->fwd_i);
    }
}

/* The run whose F_LOST_IF_BF16 the BF16-weights what-if reads: forward_source when it has one,
 * else the first run at the baseline's lr that does and trains; -1 when none. */
static long lost_if_source(const prec_ctx *x)
{
    if (x->fwd_src && has(x->fwd_src, F_LOST_IF_BF16))
        return (long)x->fwd_i;
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (has(r, F_LOST_IF_BF16) && !run_failed(r) && lr_eq(r->lr, x->base->lr))
            return (long)i;
    }
    return -1;
}

/* (b)6(v) BF16 weights without FP32 master weights (what-if). Reads: lost_if_source's
 * F_LOST_IF_BF16 (else forward_source's median update/weight ratio against BF16_UNIT_ROUNDOFF,
 * when no BF16 run was given). Decides nothing: evidence only (BF16 autocast keeps FP32 master
 * weights); above LOST_MAX in the worst layer it says not to use bf16-pure. Item figure: bad. */
void rule_bf16_weights_whatif(prec_ctx *x)
{
    long src = lost_if_source(x);
    rec_format *b16 = &x->R->bf16;
    if (src < 0) {
        const an_finding *lu = x->fwd_src ? rf(x->runs, x->fwd_i, F_LOST_UPDATES) : NULL;
        if (lu && !b16->observed && rec_fv(lu, "ratio") < an_k(K_BF16_UNIT_ROUNDOFF))
            SAY0(x->R, SEC_BF16_FOR, R_BF16_RATIO_WHATIF, lu, -1);
        return;
    }
    const an_finding *li = rf(x->runs, (size_t)src, F_LOST_IF_BF16);
    if (rec_fv(li, "all") == 0)
        SAY0(x->R, SEC_BF16_FOR, R_BF16_LOST_NONE, li, -1);
    else
        SAY(x->R, SEC_BF16_FOR, R_BF16_LOST_WHATIF, li, -1,
            rec_fv(li, "worst") > an_k(K_LOST_MAX) && !x->pure_ok); /* (an observed run outweighs it) */
}

/* (b)8 Adam eps in FP16 optimizer state. Reads: each run's F_ADAM_EPS_ZERO. Decides nothing: a
 * warning (zero-gradient steps give 0/0). */
void rule_adam_eps(prec_ctx *x)
{
    for (size_t i = 0; i < x->n; i++) {
        const an_finding *a = rf(x->runs, i, F_ADAM_EPS_ZERO);
        if (a)
            SAY0(x->R, SEC_WARN, R_ADAM_EPS_WARN, a, -1);
    }
}

/* The islands as structured evidence: their names, parameter and GEMM-FLOP shares, and whether
 * the forward pass stays finite with them: an island's output that feeds a layer run in 16 bits
 * is rounded there as a GEMM operand, so it must stay below FP16_OVERFLOW_AT (F_ACT_OVERFLOW of
 * the run the islands were read from). Item figure: the next layer. */
static void islands_describe(prec_ctx *x)
{
    recommendation *R = x->R;
    R->islands_param_share = R->islands_flop_share = NAN;
    R->islands_forward_finite = -1;
    const an_run *src = x->fwd_src;
    if (!x->islands[0] || !src)
        return;
    snprintf(R->islands, sizeof R->islands, "%s", x->islands);
    uint64_t lin = 0, lin_isl = 0;
    for (size_t l = 0; l < src->nlayers; l++)
        if (strcmp(src->layers[l].op, "linear") == 0) {
            lin += src->layers[l].params;
            lin_isl += rec_in_list(x->islands, src->layers[l].name) ? src->layers[l].params : 0;
        }
    int finite = 1;
    for (const an_finding *a = NULL; (a = an_finding_next(an_run_findings(src), F_ACT_OVERFLOW, -1, a));) {
        size_t l = (size_t)a->s.layer;
        if (rec_in_list(x->islands, src->layers[l].name) && l + 1 < src->nlayers &&
            !src->layers[l + 1].fp32_op && !rec_in_list(x->islands, src->layers[l + 1].name)) {
            finite = 0;
            SAY(R, SEC_FP16_AGAINST, R_ISLANDS_NOT_FINITE, a, -1, (double)(l + 1));
        }
    }
    R->islands_param_share = x->share;
    R->islands_flop_share = lin ? (double)lin_isl / (double)lin : NAN;
    R->islands_forward_finite = finite;
}

/* (b)7 Viability. Reads: what the rules above found. Decides: fp16/bf16 viable (supported,
 * not ruled out, not undecided); the islands' share of the parameters (of forward_source,
 * else the baseline); islands_ok: the forward overflow is the only thing against FP16 (no
 * gradient-range disqualifier), its islands are complete (from an FP32/BF16 trace) and hold
 * at most ISLAND_SHARE_MAX of the parameters. */
void rule_viability(prec_ctx *x)
{
    rec_format *f16 = &x->R->fp16, *b16 = &x->R->bf16;
    const an_run *base = x->base;
    f16->viable = f16->supported && !f16->decisive && !x->undecided;
    b16->viable = b16->supported && !x->bf16_bad && !x->bf16_gap_bad && !x->undecided;
    x->share = base->params ? (double)x->island_params / (double)base->params : 1;
    if (x->fwd_src && x->fwd_src->params)
        x->share = (double)x->island_params / (double)x->fwd_src->params;
    int other_fp16 = x->R->scale && x->range_decisive;
    islands_describe(x);
    x->islands_ok = x->fp16_fwd && !x->islands_partial && !other_fp16 && x->islands[0] &&
                    x->share <= an_k(K_ISLAND_SHARE_MAX) && f16->supported &&
                    x->R->islands_forward_finite == 1;
}

/* (b)7 A verdict never contradicts its own table: a 16-bit run of the baseline's lr that is not
 * healthy (it did not complete, its loss, forward pass or evaluation went non-finite, it skipped
 * past the limit, or it does not learn where the baseline does: an_run_unhealthy) rules its
 * format out, whatever the other evidence says; an item names it where nothing did. An FP16 run
 * unhealthy only for having no loss scaler says nothing against FP16 with one. */
void rule_table_agrees(prec_ctx *x)
{
    if (an_run_unhealthy(x->base))
        return; /* a baseline that is not healthy either shows nothing against the format */
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (i == x->bi || !lr_eq(r->lr, x->base->lr))
            continue;
        rec_format *f = is_prec(r, PREC_FP16) ? &x->R->fp16 : is_prec(r, PREC_BF16) ? &x->R->bf16 : NULL;
        const an_finding *bad = an_run_unhealthy(r);
        if (!f || !bad || !f->viable)
            continue;
        if (bad->id == F_DOES_NOT_LEARN && an_run_learns(x->base) != 1)
            continue;
        /* FP16 run without a loss scaler: no evidence about the format either way (with one it may
         * work; rule_fp16_runs names it and never counts it as a clean run) */
        if (bad->id == F_NO_LOSS_SCALING)
            continue;
        f->viable = 0;
        f->decisive = 1;
        rec_summary(f, SAY0(x->R, f == &x->R->fp16 ? SEC_FP16_AGAINST : SEC_BF16_AGAINST, R_NONE, bad,
                            -1));
        if (f == &x->R->bf16)
            x->bf16_bad = 1;
    }
}
