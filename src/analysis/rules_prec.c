/*
 * rules_prec.c - the precision rules (b)1-(b)5 (docs/recommendations.md): the hardware gate,
 * a baseline that must train, the forward pass against FP16's range, the evidence of FP16 runs,
 * and the loss scale the gradients allow. Each reads findings and adds items (the words are the
 * message table's); the first decisive one against a format rules it out.
 */
#include "analysis/rules.h"

#include <string.h>

/* (b)2 Hardware gate. Reads: --target. Decides: fp16/bf16 supported; without BF16 tensor
 * cores (sm70, sm75) BF16 gets an item and its summary. */
void rule_target_gate(prec_ctx *x)
{
    recommendation *R = x->R;
    R->fp16.supported = rec_target_has_fp16(R->target);
    R->bf16.supported = rec_target_has_bf16(R->target);
    if (!R->bf16.supported)
        rec_summary(&R->bf16, SAY(R, SEC_BF16_AGAINST, R_TARGET_NO_BF16, NULL, -1, R->target));
}

/* ---- (b)0 Valid comparisons only ---- */

/* (b)0 The runs must be comparable. Reads: the comparison's notes (another model, other data,
 * another number of planned steps, another seed where no band over seeds was measured) and each
 * run's validation set (F_VAL_DEGENERATE: one class, or fewer than VAL_MIN_ROWS rows). Decides:
 * undecided, each reason first (SEC_WHY). */
void rule_comparable(prec_ctx *x)
{
    recommendation *R = x->R;
    const an_finding_list *l = &x->c->list;
    for (size_t i = 0; i < x->n; i++) {
        if (i == x->bi)
            continue;
        const an_finding *f;
        if ((f = an_finding_find(l, F_CMP_MODEL, (int)i)))
            x->invalid = SAY0(R, SEC_WHY, R_FIRST_MODEL, f, -1) >= 0;
        if ((f = an_finding_find(l, F_CMP_DATA, (int)i)))
            x->invalid = SAY0(R, SEC_WHY, R_FIRST_DATA, f, -1) >= 0;
        f = an_finding_find(l, F_CMP_STEPS, (int)i);
        if (f && rec_fv(f, "planned") >= 0 && rec_fv(f, "base_planned") >= 0 &&
            rec_fv(f, "planned") != rec_fv(f, "base_planned"))
            x->invalid = SAY0(R, SEC_WHY, R_FIRST_STEPS, f, -1) >= 0;
        if ((f = an_finding_find(l, F_CMP_SEED, (int)i)) && !x->c->band_from_seeds)
            x->invalid = SAY0(R, SEC_WHY, R_FIRST_SEED, f, -1) >= 0;
    }
    /* the validation set: the baseline's, else the first run's that has one degenerate */
    const an_finding *v = rf(x->runs, x->bi, F_VAL_DEGENERATE);
    for (size_t i = 0; i < x->n && !v; i++)
        v = rf(x->runs, i, F_VAL_DEGENERATE);
    if (v)
        x->invalid = SAY0(R, SEC_WHY, R_FIRST_VALIDATION, v, -1) >= 0;
    if (x->invalid)
        x->undecided = 1;
}

int rec_first_layer(const an_run *r)
{
    for (size_t l = 0; l < r->nlayers; l++)
        if (r->layers[l].params > 0)
            return (int)l;
    return -1;
}

/* Trouble that starts at the inputs: in run r, a forward overflow or NaN/inf in the first layer
 * with parameters or the one after it (that reads its output), or its units dying; a cause
 * where r itself fails, is unhealthy or does not learn (rec_inputs_cause). */
static int first_layer_trouble(const an_run *r)
{
    static const an_fid at_first[] = {F_FWD_OVERFLOW, F_ACT_OVERFLOW, F_BF16_OVERFLOW, F_FWD_NONFINITE,
                                      F_DEAD_UNITS};
    int L = rec_first_layer(r);
    if (L < 0)
        return 0;
    for (size_t k = 0; k < NELEM(at_first); k++)
        for (const an_finding *f = NULL; (f = an_finding_next(an_run_findings(r), at_first[k], -1, f));)
            if (f->s.layer >= 0 && f->s.layer <= L + (at_first[k] != F_DEAD_UNITS))
                return 1;
    return 0;
}

const an_finding *rec_inputs_cause(const an_run *runs, size_t n, size_t bi)
{
    const an_finding *in = an_run_finding(&runs[bi], F_INPUT_SCALE);
    for (size_t i = 0; i < n && !in; i++)
        in = an_run_finding(&runs[i], F_INPUT_SCALE);
    if (!in)
        return NULL;
    if (run_failed(&runs[bi]) || an_run_learns(&runs[bi]) == 0)
        return in;
    /* trouble in a run that is in trouble: a what-if about a format no run given failed in (FP16
     * overflow predicted from an FP32 or bf16-pure trace whose runs are healthy) names the inputs,
     * it is no reason to change a run that works (the lr it needs moves with the inputs' scale) */
    for (size_t i = 0; i < n; i++)
        if (first_layer_trouble(&runs[i]) &&
            (run_failed(&runs[i]) || an_run_unhealthy(&runs[i]) || an_run_learns(&runs[i]) == 0))
            return in;
    return NULL;
}

/* The inputs as a cause. Reads: F_INPUT_SCALE (inputs far from unit scale) of the runs, with
 * trouble that starts in the first layer (rec_inputs_cause). Decides: the inputs are named first
 * (SEC_WHY) and standardising them is the first remedy (rule_remedies: --standardize on). */
void rule_inputs(prec_ctx *x)
{
    const an_finding *f = rec_inputs_cause(x->runs, x->n, x->bi);
    if (!f) {
        /* far from unit scale without trouble yet: named, not a remedy (a run that works stays
         * as it is) */
        const an_finding *in = rf(x->runs, x->bi, F_INPUT_SCALE);
        if (in)
            SAY0(x->R, SEC_WARN, R_INPUTS_WARN, in, -1);
        return;
    }
    x->inputs_cause = 1;
    SAY0(x->R, SEC_WHY, R_INPUTS_FIRST, f, -1);
}

/* The likely causes of a baseline that fails or does not learn, each a finding of its history
 * (SEC_WHY): the lr too high, too low (or its steps too small), units dead, the inputs. */
void rec_baseline_causes(prec_ctx *x)
{
    const an_run *b = x->base;
    recommendation *R = x->R;
    const an_finding *f;
    if (x->inputs_cause)
        return; /* the inputs, named first (rule_inputs): the history of a run on them says little */
    if ((f = rf(x->runs, x->bi, F_LR_TOO_HIGH)))
        SAY0(R, SEC_WHY, R_CAUSE_LR_HIGH, f, -1);
    else if ((f = rf(x->runs, x->bi, F_LR_TOO_LOW)))
        SAY0(R, SEC_WHY, R_CAUSE_LR_LOW, f, -1);
    else if ((f = rf(x->runs, x->bi, F_STEPS_TOO_SMALL)))
        SAY0(R, SEC_WHY, R_CAUSE_STEPS_SMALL, f, -1);
    else if ((f = rf(x->runs, x->bi, F_DEAD_UNITS)))
        SAY0(R, SEC_WHY, R_CAUSE_DEAD, f, -1);
    if (!x->inputs_cause && (f = an_run_finding(b, F_INPUT_SCALE)))
        SAY0(R, SEC_WHY, R_CAUSE_INPUTS, f, -1);
}

/* (b)1 The baseline must train. Reads: the FP32 baseline's divergence and non-finite loss (and
 * AdamW eps in FP16 state, the format cause); without an FP32 baseline, every run's. Decides:
 * undecided, with the reason first. */
void rule_baseline_trains(prec_ctx *x)
{
    const an_run *base = x->base;
    recommendation *R = x->R;
    if (baseline_fails(x)) {
        x->undecided = 1;
        if (failed_by_format(base))
            /* cause before remedy: the format, not the lr */
            SAY0(R, SEC_WHY, R_BASELINE_ADAM_EPS, rf(x->runs, x->bi, F_ADAM_EPS_ZERO), -1);
        else if (has(base, F_DIVERGED))
            SAY0(R, SEC_WHY, R_BASELINE_DIVERGES, rf(x->runs, x->bi, F_DIVERGED), -1);
        else
            SAY0(R, SEC_WHY, R_BASELINE_LOSS_NONFINITE, rf(x->runs, x->bi, F_LOSS_NONFINITE), -1);
        if (!failed_by_format(base))
            rec_baseline_causes(x);
    } else if (!x->have_fp32 && rec_every_run_fails(x->runs, x->n)) {
        x->undecided = 1;
        SAY0(R, SEC_WHY, R_EVERY_RUN_FAILS, NULL, -1);
    }
}

/* The run whose ranges stand for FP32's: the FP32 baseline, else an FP32 run, else a BF16
 * (or bf16-pure) run at the baseline's lr; none when that run failed (its ranges after
 * divergence say nothing about the formats) or there is none. Returns its index or -1. */
static long forward_source(const prec_ctx *x)
{
    long src = x->have_fp32 ? (long)x->bi : -1;
    for (size_t i = 0; i < x->n && src < 0; i++)
        if (is_prec(&x->runs[i], PREC_FP32) && lr_eq(x->runs[i].lr, x->base->lr))
            src = (long)i;
    for (size_t i = 0; i < x->n && src < 0; i++)
        if ((is_prec(&x->runs[i], PREC_BF16) || is_prec(&x->runs[i], PREC_BF16_PURE)) &&
            lr_eq(x->runs[i].lr, x->base->lr))
            src = (long)i;
    if (src >= 0 && run_failed(&x->runs[src]))
        src = -1;
    return src;
}

/* The FP32 islands for overflowing layers: each one and the layer after it (which reads the
 * value), loss layers left out; their names and parameters go to x->islands/island_params. */
static void islands_from_hits(prec_ctx *x)
{
    const an_run *src = x->fwd_src;
    char *mark = calloc(src->nlayers ? src->nlayers : 1, 1);
    if (!mark)
        return;
    for (const an_finding *h = NULL; (h = an_finding_next(an_run_findings(src), F_FWD_OVERFLOW, -1, h));) {
        mark[h->s.layer] = 1;
        size_t nx = (size_t)h->s.layer + 1;
        if (nx < src->nlayers && !src->layers[nx].fp32_op)
            mark[nx] = 1;
        if (x->nisland_why < REC_MAX_BECAUSE)
            x->island_why[x->nisland_why++] = h;
    }
    for (size_t l = 0; l < src->nlayers; l++)
        if (mark[l]) {
            rec_append_name(x->islands, sizeof x->islands, src->layers[l].name);
            x->island_params += src->layers[l].params;
        }
    free(mark);
}

/* (b)3 Forward overflow => not FP16. Reads: forward_source's F_FWD_OVERFLOW findings (16-bit
 * layers reaching FP16_OVERFLOW_AT). Decides: FP16 decisively ruled out (loss scaling only
 * scales the backward pass) and names the FP32 islands. */
void rule_forward_overflow(prec_ctx *x)
{
    long src = forward_source(x);
    x->fwd_src = src >= 0 ? &x->runs[src] : NULL;
    x->fwd_i = src >= 0 ? (size_t)src : 0;
    if (!x->fwd_src)
        return;
    const an_finding *h0 = rf(x->runs, x->fwd_i, F_FWD_OVERFLOW);
    if (!h0)
        return;
    x->fp16_fwd = 1;
    x->R->fp16.decisive = 1;
    rec_summary(&x->R->fp16, SAY0(x->R, SEC_FP16_AGAINST, R_FP16_FWD_OVERFLOW, h0, -1));
    islands_from_hits(x);
}

/* (b)8 Forward headroom. Reads: forward_source's F_FWD_HEADROOM_LOW findings, when there is no
 * forward overflow. Decides nothing: a warning for each 16-bit layer at or above
 * FP16_MARGIN_AT (less than one binade below FP16's largest value). */
void rule_forward_headroom(prec_ctx *x)
{
    if (!x->fwd_src || x->fp16_fwd)
        return;
    for (const an_finding *h = NULL;
         (h = an_finding_next(an_run_findings(x->fwd_src), F_FWD_HEADROOM_LOW, -1, h));)
        SAY0(x->R, SEC_WARN, R_FP16_HEADROOM, h, -1);
}

/* ---- (b)4 FP16 run evidence: checks of one FP16 run (index i) at the baseline's lr; each
 * returns 1 when it found a problem (the run is then "bad": FP16 is decisively ruled out) ---- */

/* NaN/inf in an activation record (first layer in forward order). Without FP32 evidence of a
 * forward overflow (and a baseline that trains), that layer becomes the (partial) FP32 island.
 * Item figures: above (the forward overflow above), cannot_fix (inf: loss scaling cannot). */
static int fp16_check_forward(prec_ctx *x, size_t i)
{
    const an_finding *f = rf(x->runs, i, F_FWD_NONFINITE);
    if (!f)
        return 0;
    int inf = rec_fv(f, "inf") != 0;
    int item = SAY(x->R, SEC_FP16_AGAINST, R_FP16_FWD_NONFINITE, f, -1, x->fp16_fwd,
                   !x->fp16_fwd && inf && !x->undecided);
    if (!x->fp16_fwd && !x->undecided) {
        /* no FP32 evidence: the FP16 run is the evidence, and it only shows the first layer to
         * overflow (the ones after it see inf) */
        const an_layer *L = &x->runs[i].layers[f->s.layer];
        x->fp16_fwd = 1;
        x->islands_partial = 1;
        rec_append_name(x->islands, sizeof x->islands, L->name);
        x->island_params += L->params;
        if (x->nisland_why < REC_MAX_BECAUSE)
            x->island_why[x->nisland_why++] = f;
    }
    rec_summary(&x->R->fp16, item);
    return 1;
}

/* The loss scale collapsed (to <= 1, or skips at the scaler's minimum). */
static int fp16_check_collapse(prec_ctx *x, size_t i)
{
    const an_finding *f = rf(x->runs, i, F_SCALE_COLLAPSED);
    if (!f)
        return 0;
    rec_summary(&x->R->fp16, SAY0(x->R, SEC_FP16_AGAINST, R_FP16_COLLAPSE, f, -1));
    return 1;
}

/* Skipped steps after calibration: more than SKIP_RATE_MAX, at least SKIP_MIN_COUNT. */
static int fp16_check_skips(prec_ctx *x, size_t i)
{
    const an_finding *f = rf(x->runs, i, F_SKIPS_ABOVE_LIMIT);
    if (!f)
        return 0;
    rec_summary(&x->R->fp16, SAY0(x->R, SEC_FP16_AGAINST, R_FP16_SKIPS, f, -1));
    return 1;
}

/* A non-finite loss, unless the FP32 baseline fails too. Item figure: have_fp32. */
static int fp16_check_loss(prec_ctx *x, size_t i)
{
    const an_finding *f = rf(x->runs, i, F_LOSS_NONFINITE);
    if (!f || baseline_fails(x))
        return 0;
    rec_summary(&x->R->fp16, SAY(x->R, SEC_FP16_AGAINST, R_FP16_LOSS_NONFINITE, f, -1, x->have_fp32));
    return 1;
}

/* Divergence, unless the FP32 baseline fails too. Item figure: have_fp32. */
static int fp16_check_divergence(prec_ctx *x, size_t i)
{
    const an_finding *f = rf(x->runs, i, F_DIVERGED);
    if (!f || baseline_fails(x))
        return 0;
    rec_summary(&x->R->fp16, SAY(x->R, SEC_FP16_AGAINST, R_FP16_DIVERGES, f, -1, x->have_fp32));
    return 1;
}

/* A 16-bit run whose evaluation alone is not finite (F_EVAL_ONLY_NONFINITE) where the
 * baseline's evaluation is finite: the validation data reaches beyond the format's range in the
 * forward pass (values the training batches never had; loss scaling scales the backward pass
 * only). The format is ruled out for this data, and the cause is named first (SEC_WHY). Item
 * figures: the format, the baseline's eval loss. */
int rec_eval_cause(prec_ctx *x, size_t i, rec_format *f, rec_sec against, ampdiag_format fmt)
{
    const an_run *r = &x->runs[i];
    const an_finding *e = rf(x->runs, i, F_EVAL_ONLY_NONFINITE);
    const ampdiag_trace_eval *bev = an_final_eval(x->base);
    if (r == x->base || !e || has(x->base, F_EVAL_NONFINITE) || !bev)
        return 0;
    double be = bev->loss;
    int item = SAY(x->R, against, R_EVAL_OVERFLOW, e, -1, fmt, be);
    if (!x->eval_run)
        SAY(x->R, SEC_WHY, R_EVAL_FIRST, e, -1, fmt, be);
    rec_summary(f, item);
    f->decisive = 1;
    if (!x->eval_run) {
        x->eval_run = r;
        x->eval_i = i;
    }
    return 1;
}

/* The evaluation alone is not finite (rec_eval_cause). */
static int fp16_check_eval(prec_ctx *x, size_t i)
{
    return rec_eval_cause(x, i, &x->R->fp16, SEC_FP16_AGAINST, AMPDIAG_FP16);
}

typedef int (*fp16_run_check)(prec_ctx *, size_t);
static const fp16_run_check fp16_run_checks[] = {
    fp16_check_forward, fp16_check_collapse, fp16_check_skips, fp16_check_loss,
    fp16_check_divergence, fp16_check_eval,
};

/* A clean FP16 run: evidence that FP16 works, with its skips and loss scale. */
static void fp16_note_clean(prec_ctx *x, size_t i)
{
    const an_run *r = &x->runs[i];
    if (r->scaled)
        SAY(x->R, SEC_FP16_FOR, R_FP16_CLEAN, NULL, (int)i, an_fig(r, FIG_SKIPPED).v,
            an_fig(r, FIG_SKIPPED_AFTER).v, an_fig(r, FIG_SCALE_INIT).v, an_fig(r, FIG_SCALE_FINAL).v);
    else
        SAY0(x->R, SEC_FP16_FOR, R_FP16_CLEAN_UNSCALED, NULL, (int)i);
}

/* The loss gap of a clean FP16 run (the comparison's F_CMP_GAP): above the noise band it rules
 * FP16 out decisively; within it, evidence that FP16 works. Item figures: bf16 (0), pure (0). */
static void fp16_check_gap(prec_ctx *x, size_t i)
{
    const an_finding *g = an_finding_find(&x->c->list, F_CMP_GAP, (int)i);
    if (!g || !isfinite(rec_fv(g, "rel")))
        return;
    if (rec_fv(g, "outside") != 0) {
        rec_summary(&x->R->fp16, SAY(x->R, SEC_FP16_AGAINST, R_GAP_OUTSIDE, g, -1, 0, 0));
        x->R->fp16.decisive = 1;
    } else {
        SAY0(x->R, SEC_FP16_FOR, R_GAP_WITHIN, g, -1);
    }
}

/* An FP16 run without a loss scaler (F_NO_LOSS_SCALING): whatever else it shows, it is no
 * evidence that FP16 works (its small gradients flushed to zero), and FP16 needs loss scaling.
 * Not decisive against FP16 itself: with a scaler it may work. 1 when it applies. */
static int fp16_check_scaler(prec_ctx *x, size_t i)
{
    const an_finding *f = rf(x->runs, i, F_NO_LOSS_SCALING);
    if (!f)
        return 0;
    rec_summary(&x->R->fp16, SAY0(x->R, SEC_FP16_AGAINST, R_FP16_NO_SCALER, f, -1));
    return 1;
}

/* One FP16 run at the baseline's lr: the checks, else the clean run's evidence and its gap. */
static void fp16_run(prec_ctx *x, size_t i)
{
    const an_run *r = &x->runs[i];
    rec_format *f16 = &x->R->fp16;
    f16->observed = 1;
    int bad = 0;
    for (size_t k = 0; k < NELEM(fp16_run_checks); k++)
        bad |= fp16_run_checks[k](x, i);
    if (bad)
        f16->decisive = 1;
    int unscaled = !bad && fp16_check_scaler(x, i);
    if (!bad && !unscaled)
        fp16_note_clean(x, i);
    if (!r->scaled && strcmp(r->loss_scale_mode, "none") == 0)
        f16->needs_scaling |= 2; /* ran without scaling: say what scaling would change */
    if (bad || unscaled)
        return;
    int before = f16->decisive;
    fp16_check_gap(x, i);
    if (!f16->decisive && !before && !x->fp16_healthy)
        x->fp16_healthy = r;
    const an_finding *g = an_finding_find(&x->c->list, F_CMP_GAP, (int)i);
    if (r->fp32_layers[0] && !x->fp16_islanded && !(g && rec_fv(g, "outside") != 0))
        x->fp16_islanded = r;
}

/* (b)4 FP16 run evidence => not FP16. Reads: each FP16 run at the baseline's lr. Decides:
 * fp16 observed; decisive when any fp16_run_checks[] check fires (forward NaN/inf, collapsed
 * scale, skips above SKIP_RATE_MAX after calibration, non-finite loss or divergence where FP32
 * trains, an evaluation that alone overflows) or a clean run's loss gap exceeds the noise band;
 * needs_scaling bit 2 for a run without loss scaling. A run whose NaN comes from AdamW's eps in
 * FP16 state is no evidence about FP16 autocast (cause before remedy). */
void rule_fp16_runs(prec_ctx *x)
{
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (!is_prec(r, PREC_FP16) || !lr_eq(r->lr, x->base->lr))
            continue;
        const an_finding *a = rf(x->runs, i, F_ADAM_EPS_ZERO);
        if (a && (run_failed(r) || r->nan_values)) {
            SAY0(x->R, SEC_FP16_AGAINST, R_FP16_ADAM_EPS, a, -1);
            continue;
        }
        fp16_run(x, i);
    }
}

/* ---- (b)5 gradient range: checks of the loss scale measurement (F_LOSS_SCALE of the run sr
 * and its F_FLUSH_AT_SCALE, F_GRAD_SPAN, F_FLUSH_UNSCALED, F_SUBNORMAL_AT_SCALE) ---- */

/* Some layer loses >= FLUSH_MAX of its non-zero gradients even at the suggested scale: FP16
 * decisively ruled out, unless an FP16 run was run and is healthy (observed beats predicted) or
 * the flushed values carry less than FLUSH_NORM_MAX of the gradient's squared norm. */
static void scale_check_flush(prec_ctx *x, size_t sr)
{
    const an_finding *S = x->R->scale, *fl = rf(x->runs, sr, F_FLUSH_AT_SCALE);
    if (!(fl && rec_fv(fl, "share") >= an_k(K_FLUSH_MAX)))
        return;
    double norm = rec_fv(fl, "norm_share");
    if (x->fp16_healthy || (!isnan(norm) && norm < an_k(K_FLUSH_NORM_MAX))) {
        SAY(x->R, SEC_WARN, R_FLUSH_PREDICTED, fl, -1, x->fp16_healthy != NULL);
        return;
    }
    rec_summary(&x->R->fp16, SAY(x->R, SEC_FP16_AGAINST, R_FLUSH_DECISIVE, fl, -1, rec_fv(S, "max_grad"),
                                 S->s.layer, S->s.kind, rec_fv(S, "step")));
    x->R->fp16.decisive = 1;
    x->range_decisive = 1;
}

/* The gradients span more than FP16_SPAN_LOG2 (max / 1st percentile): FP16 decisively ruled
 * out, unless an FP16 run was run and is healthy, or the values that flush are harmless. */
static void scale_check_span(prec_ctx *x, size_t sr)
{
    const an_finding *sp = rf(x->runs, sr, F_GRAD_SPAN), *fl = rf(x->runs, sr, F_FLUSH_AT_SCALE);
    if (!(sp && rec_fv(sp, "wide") > 0))
        return;
    double norm = rec_fv(fl, "norm_share");
    int harmless = !fl || rec_fv(fl, "share") < an_k(K_FLUSH_MAX) ||
                   (!isnan(norm) && norm < an_k(K_FLUSH_NORM_MAX));
    if (x->fp16_healthy) {
        SAY(x->R, SEC_WARN, R_SPAN_HEALTHY_RUN, sp, -1, (double)(x->fp16_healthy - x->runs));
    } else if (harmless) {
        SAY(x->R, SEC_WARN, R_SPAN_HARMLESS, sp, -1, isnan(norm) ? 0 : norm);
    } else {
        rec_summary(&x->R->fp16, SAY0(x->R, SEC_FP16_AGAINST, R_SPAN_DECISIVE, sp, -1));
        x->R->fp16.decisive = 1;
        x->range_decisive = 1;
    }
}

/* Without scaling (a run that ran unscaled), some layer flushes >= FLUSH_MAX: FP16 needs loss
 * scaling (needs_scaling bit 1), not a disqualifier. Item figures: log2 (the suggested scale),
 * worst (a layer flushes at it), its layer, kind and share. */
static void scale_check_unscaled(prec_ctx *x, size_t sr)
{
    const an_finding *S = x->R->scale, *fu = rf(x->runs, sr, F_FLUSH_UNSCALED);
    const an_finding *fl = rf(x->runs, sr, F_FLUSH_AT_SCALE);
    if (!(fu && rec_fv(fu, "share") >= an_k(K_FLUSH_MAX)))
        return;
    x->R->fp16.needs_scaling |= 1;
    SAY(x->R, SEC_FP16_AGAINST, R_NEEDS_SCALING, fu, -1, rec_fv(S, "log2"), fl != NULL,
        fl ? fl->s.layer : -1, fl ? fl->s.kind : -1, fl ? rec_fv(fl, "share") : 0);
}

/* Below FLUSH_MAX at the suggested scale: evidence for FP16 and that scale. Item figures (with
 * a flushing layer): its layer, kind and share. */
static void scale_note_good(prec_ctx *x, size_t sr)
{
    const an_finding *S = x->R->scale, *fl = rf(x->runs, sr, F_FLUSH_AT_SCALE);
    if (fl && rec_fv(fl, "share") >= an_k(K_FLUSH_MAX))
        return;
    if (fl)
        SAY(x->R, SEC_FP16_FOR, R_SCALE_GOOD, S, -1, fl->s.layer, fl->s.kind, rec_fv(fl, "share"));
    else
        SAY0(x->R, SEC_FP16_FOR, R_SCALE_GOOD_NONE, S, -1);
}

/* More than SUBNORMAL_WARN of a layer's gradients are FP16 subnormals at the scale: a warning
 * (hardware flushing FP16 subnormals would lose them). */
static void scale_warn_subnormal(prec_ctx *x, size_t sr)
{
    const an_finding *sub = rf(x->runs, sr, F_SUBNORMAL_AT_SCALE);
    if (sub && rec_fv(sub, "share") > an_k(K_SUBNORMAL_WARN))
        SAY0(x->R, SEC_WARN, R_SUBNORMAL, sub, -1);
}

typedef void (*scale_check)(prec_ctx *, size_t);
static const scale_check scale_checks[] = {
    scale_check_flush, scale_check_span, scale_check_unscaled, scale_note_good, scale_warn_subnormal,
};

/* (b)5 Gradient range => the loss scale, or not FP16. Reads: the gradients of the FP32
 * baseline (without one, the first BF16 run that trains; else the baseline): its F_LOSS_SCALE
 * (S = 2^k, the largest with max |g| * S <= FP16_MARGIN_AT), then scale_checks[]. */
void rule_gradient_range(prec_ctx *x)
{
    size_t sref = x->bi;
    if (!x->have_fp32) {
        for (size_t i = 0; i < x->n; i++)
            if ((is_prec(&x->runs[i], PREC_BF16) || is_prec(&x->runs[i], PREC_BF16_PURE)) &&
                !run_failed(&x->runs[i])) {
                sref = i;
                break;
            }
    }
    x->R->scale = rf(x->runs, sref, F_LOSS_SCALE);
    x->R->scale_run = sref;
    if (!x->R->scale)
        return;
    const an_finding *fl = rf(x->runs, sref, F_FLUSH_AT_SCALE);
    SAY(x->R, SEC_SCALE, R_SCALE_LINE, x->R->scale, -1, fl ? rec_fv(fl, "share") : 0);
    for (size_t k = 0; k < NELEM(scale_checks); k++)
        scale_checks[k](x, sref);
}
