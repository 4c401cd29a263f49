/*
 * rules_verdict.c - the precision verdict (b)7: candidates in order of preference, the first
 * whose condition holds concludes; then the island warning (b)8, baseline sanity and causes
 * ranked; and the table of every precision rule in the order they run (rec_precision_rules),
 * with the decisions they come to.
 */
#include "analysis/rules.h"

#include <string.h>

static int flat_cause(const an_run *b);

/* The baseline does not train (rule_baseline_trains): undecided, fix the lr (or the optimizer
 * state's format) first. */
static int verdict_undecided_applies(const prec_ctx *x) { return x->undecided; }
static void verdict_undecided(prec_ctx *x)
{
    recommendation *R = x->R;
    R->precision = REC_UNDECIDED;
    rec_mid m = x->invalid                   ? R_V_UNDECIDED_INVALID
                : x->baseline_flat             ? R_V_UNDECIDED_FLAT
                : x->baseline_falling          ? R_V_UNDECIDED_FALLING
                : !x->have_fp32                ? R_V_UNDECIDED_ALL
                : failed_by_format(x->base)    ? R_V_UNDECIDED_ADAM
                                               : R_V_UNDECIDED_LR;
    int cause = x->inputs_cause ? 0 : flat_cause(x->base);
    SAY(R, SEC_VERDICT, m, NULL, (int)x->bi, x->inputs_cause, cause == 2, cause == 1);
}

/* BF16 viable: bf16 (no scaler to tune, no skipped steps, FP32's exponent range); with FP32
 * master weights when a bf16-pure run lost updates; predicted when no bf16 run was given. Item
 * figures: predicted from the FP32 trace, predicted with no trace to read. */
/* Observed beats predicted: an FP16 run that was run and is healthy, within the noise band and
 * learning, where BF16 is only predicted, keeps fp16 (what a run did decides; a preference for
 * a format nobody ran is no reason to change one that works). */
static int fp16_observed_ok(const prec_ctx *x)
{
    const rec_format *f16 = &x->R->fp16;
    return f16->viable && x->fp16_healthy && !x->fp16_healthy->fp32_layers[0] && !x->R->bf16.observed &&
           !an_run_unhealthy(x->fp16_healthy) && an_run_learns(x->fp16_healthy) == 1;
}

static int verdict_bf16_applies(const prec_ctx *x) { return x->R->bf16.viable && !fp16_observed_ok(x); }
static void verdict_bf16(prec_ctx *x)
{
    recommendation *R = x->R;
    const rec_format *f16 = &R->fp16, *b16 = &R->bf16;
    R->precision = REC_BF16;
    rec_mid why = f16->viable      ? R_WHY_BOTH
                  : !f16->supported ? R_WHY_BF16_NO_FP16_TARGET
                  : b16->observed   ? R_WHY_BF16_FP16_OUT
                                    : R_WHY_BF16_PREDICTED;
    SAY0(R, SEC_WHY, why, NULL, -1);
    if (x->pure_ok && !R->master_weights && !b16->observed) { /* the bf16-pure run given, as run */
        R->keep_pure = 1;
        R->predicted = 0;
        SAY0(R, SEC_VERDICT, R_V_BF16_PURE, NULL, -1);
        return;
    }
    R->predicted = !b16->observed;
    SAY(R, SEC_VERDICT, R->master_weights ? R_V_BF16_MASTER : R_V_BF16, NULL, -1,
        R->predicted && x->fwd_src, R->predicted && !x->fwd_src);
}

/* FP16 viable: fp16 + dynamic loss scaling with initial scale 2^k (SCALE_INIT_LOG2 without
 * gradients), naming what flushes without scaling when a run showed it. Item figures: log2,
 * without (a layer flushes without scaling), its share, layer and kind, predicted, unscaled run. */
static int verdict_fp16_applies(const prec_ctx *x) { return x->R->fp16.viable; }
static void verdict_fp16(prec_ctx *x)
{
    recommendation *R = x->R;
    const rec_format *f16 = &R->fp16;
    R->precision = REC_FP16;
    if (R->bf16.viable)
        SAY(R, SEC_WHY, R_WHY_FP16_OBSERVED, NULL, (int)(x->fp16_healthy - x->runs));
    else
        SAY(R, SEC_WHY, R_WHY_FP16, NULL, -1, !R->bf16.supported);
    R->predicted = !f16->observed;
    const an_finding *fu = rf(x->runs, R->scale_run, F_FLUSH_UNSCALED);
    int without = (f16->needs_scaling & 1) && fu;
    SAY(R, SEC_VERDICT, R_V_FP16, NULL, (int)R->scale_run,
        R->scale ? rec_fv(R->scale, "log2") : an_k(K_SCALE_INIT_LOG2), without,
        without ? rec_fv(fu, "share") : NAN, without ? fu->s.layer : -1, without ? fu->s.kind : -1,
        R->predicted, (f16->needs_scaling & 2) != 0);
}

/* islands_ok (rule_viability): fp16 + dynamic loss scaling with the FP32 islands, predicted
 * (confirm with a --fp32-layers run) unless a healthy fp16 run with these islands was given.
 * Item figures: log2, share, seen, the run seen. */
static int verdict_fp16_islands_applies(const prec_ctx *x) { return x->islands_ok; }
static void verdict_fp16_islands(prec_ctx *x)
{
    recommendation *R = x->R;
    R->precision = REC_FP16;
    SAY(R, SEC_WHY, R_WHY_FP16_ISLANDS, NULL, -1, x->share, !R->bf16.supported);
    /* an fp16 run with exactly these islands that is healthy confirms them */
    const an_run *h = x->fp16_islanded;
    int seen = h && strcmp(h->fp32_layers, x->islands) == 0;
    R->predicted = !seen;
    snprintf(R->fp32_layers, sizeof R->fp32_layers, "%s", x->islands);
    SAY(R, SEC_VERDICT, R_V_FP16_ISLANDS, NULL, -1,
        R->scale ? rec_fv(R->scale, "log2") : an_k(K_SCALE_INIT_LOG2), x->share, seen,
        seen ? (double)(h - x->runs) : -1);
}

/* (b)6(iii) BF16 supported and ruled out only by its loss gap: bf16 with FP32 layers, the (up
 * to DEV_ISLAND_LAYERS) layers of the first bf16 run whose activations deviate by at least
 * DEV_ISLAND from the baseline (F_CMP_DEVIATION); with none, fp32. */
static int verdict_bf16_islands_applies(const prec_ctx *x)
{
    return x->R->bf16.supported && !x->bf16_bad && x->bf16_gap_bad;
}
static void verdict_bf16_islands(prec_ctx *x)
{
    recommendation *R = x->R;
    char dl[256] = "";
    for (size_t i = 0; i < x->n; i++) {
        const an_finding *top = an_finding_find(&x->c->list, F_CMP_DEVIATION, (int)i);
        if (!is_prec(&x->runs[i], PREC_BF16) || !top)
            continue;
        for (const an_finding *d = NULL; (d = an_finding_next(&x->c->list, F_CMP_DEVIATION, (int)i, d));)
            if (rec_fv(d, "rank") <= an_k(K_DEV_ISLAND_LAYERS) && rec_fv(d, "rel") >= an_k(K_DEV_ISLAND))
                rec_append_name(dl, sizeof dl, x->runs[i].layers[d->s.layer].name);
        if (dl[0])
            SAY0(R, SEC_WHY, R_WHY_BF16_DEVIATION, top, -1);
        break;
    }
    if (dl[0]) {
        R->precision = REC_BF16;
        R->predicted = 1;
        snprintf(R->fp32_layers, sizeof R->fp32_layers, "%s", dl);
        SAY0(R, SEC_VERDICT, R_V_BF16_ISLANDS, NULL, -1);
    } else {
        R->precision = REC_FP32;
        SAY0(R, SEC_VERDICT, R_V_FP32_BF16_MISSES, NULL, -1);
    }
}

/* Otherwise fp32, saying why (no BF16 on the target, the islands FP16 would need). Item
 * figures: the target, the islands' share. */
static int verdict_fp32_applies(const prec_ctx *x) { (void)x; return 1; }
static void verdict_fp32(prec_ctx *x)
{
    recommendation *R = x->R;
    R->precision = REC_FP32;
    rec_mid m = R->bf16.supported                              ? R_V_FP32
                : x->fp16_fwd && x->islands[0] && x->islands_partial ? R_V_FP32_NO_BF16_PARTIAL
                : x->fp16_fwd && x->islands[0]                        ? R_V_FP32_NO_BF16_ISLANDS
                                                                      : R_V_FP32_NO_BF16;
    SAY(R, SEC_VERDICT, m, NULL, -1, R->target, x->share);
}

typedef struct verdict_rule {
    int (*applies)(const prec_ctx *);
    void (*conclude)(prec_ctx *);
} verdict_rule;

static const verdict_rule verdict_rules[] = {
    {verdict_undecided_applies, verdict_undecided},
    {verdict_bf16_applies, verdict_bf16},
    {verdict_fp16_applies, verdict_fp16},
    {verdict_fp16_islands_applies, verdict_fp16_islands},
    {verdict_bf16_islands_applies, verdict_bf16_islands},
    {verdict_fp32_applies, verdict_fp32},
};

/* (b)7 The verdict: the first of verdict_rules[] that applies. */
static void rule_verdict(prec_ctx *x)
{
    for (size_t k = 0; k < NELEM(verdict_rules); k++)
        if (verdict_rules[k].applies(x)) {
            verdict_rules[k].conclude(x);
            return;
        }
}

/* (b)8 Island warning (not when undecided). Decides nothing: names the FP32 islands that would
 * let FP16 run when the verdict is not fp16 (or only the first overflowing layer, known from an
 * FP16 run), and says "no rescue" above ISLAND_SHARE_MAX of the parameters. Item figures:
 * share, too large. */
static void rule_island_warning(prec_ctx *x)
{
    recommendation *R = x->R;
    if (x->undecided || !x->fp16_fwd || !x->islands[0] || !R->fp16.supported)
        return;
    if (x->islands_partial)
        SAY0(R, SEC_WARN, R_ISLANDS_PARTIAL, NULL, -1);
    else if (R->precision != REC_FP16)
        SAY(R, SEC_WARN, R_ISLANDS_OFFER, NULL, -1, x->share, x->share > an_k(K_ISLAND_SHARE_MAX));
}

/* Why a baseline that does not learn does not learn, when its findings say: steps too small or
 * the lr too low (1) or dead units or the lr too high (2); 0 otherwise. */
static int flat_cause(const an_run *b)
{
    return has(b, F_LR_TOO_HIGH) || has(b, F_DEAD_UNITS)         ? 2
           : has(b, F_LR_TOO_LOW) || has(b, F_STEPS_TOO_SMALL) ? 1
                                                               : 0;
}

/* (b)1 Baseline sanity: a baseline that trains without failing but does not learn (measured
 * against its start: F_DOES_NOT_LEARN; a trace without an initial evaluation: its training loss
 * stays above FLAT_FRACTION of its first, F_LEARNS_NOTHING) holds nothing to compare the 16-bit
 * runs against: undecided, and the likely causes from its history named (baseline_causes).
 * Item figures (F_LEARNS_NOTHING's words): the cause (steps too small, dead units), the ratio,
 * the lost share above LOST_MAX (NaN: below), the dead layer, an accuracy was evaluated. */
static void rule_baseline_sanity(prec_ctx *x)
{
    const an_run *b = x->base;
    if (run_failed(b))
        return; /* rule_baseline_trains said it */
    const an_finding *no = rf(x->runs, x->bi, F_DOES_NOT_LEARN);
    const an_finding *flat = rf(x->runs, x->bi, F_LEARNS_NOTHING);
    if (!no && !flat)
        return;
    x->baseline_flat = 1;
    x->undecided = 1;
    if (no) {
        SAY0(x->R, SEC_WHY, R_FIRST_NO_LEARNING, no, -1);
    } else {
        const an_finding *small = rf(x->runs, x->bi, F_STEPS_TOO_SMALL), *dead = rf(x->runs, x->bi, F_DEAD_UNITS);
        double lost = rec_fv(small, "lost_share");
        SAY(x->R, SEC_WHY, R_FIRST_NOT_LEARNING, flat, -1, flat_cause(b) == 1, flat_cause(b) == 2,
            rec_fv(small, "ratio"), lost > an_k(K_LOST_MAX) ? lost : NAN, dead ? dead->s.layer : -1,
            an_final_eval(b) && strcmp(b->eval_metric, "accuracy") == 0);
    }
    rec_baseline_causes(x);
}

/* (b)7 Baseline trained to its best: an FP32 baseline that learns but whose training loss still
 * falls at the end at STILL_FALLING of its mean rate (F_STILL_FALLING) is limited by its lr or its
 * length, not its precision: where the formats show nothing to change (no format ruled out, no
 * master weights, no FP32 islands, no forward overflow), no single-shot advice makes it better
 * (the lr it needs is measured, not read off one run): undecided, run tune. Where a format finding
 * names a change, that change holds at any lr and the verdict gives it; the lr line says the lr
 * is not settled either way. Not for tune's yardstick, whose lr was measured. */
static void rule_baseline_falling(prec_ctx *x)
{
    const recommendation *R = x->R;
    if (x->undecided || !x->have_fp32 || run_failed(x->base) || x->c->lr_measured)
        return;
    if (R->fp16.decisive || R->bf16.decisive || x->bf16_bad || x->bf16_gap_bad || R->master_weights ||
        x->fp16_fwd || x->islands[0])
        return;
    const an_finding *f = rf(x->runs, x->bi, F_STILL_FALLING);
    if (!f)
        return;
    x->baseline_falling = 1;
    x->undecided = 1;
    SAY0(x->R, SEC_WHY, R_FIRST_STILL_FALLING, f, -1);
}

/* Causes ranked: a baseline that does not learn, an evaluation that alone overflows, and a run
 * that failed by a format cause no lr or island fixes (AdamW eps 0 in FP16 state) are named in
 * the verdict line itself, with the remedy, unless the baseline's failure already made the
 * latter the verdict. */
static void rule_cause_first(prec_ctx *x)
{
    if (x->eval_run)
        SAY(x->R, SEC_VERDICT, R_V_FIRST_EVAL, rf(x->runs, x->eval_i, F_EVAL_ONLY_NONFINITE), -1,
            is_prec(x->eval_run, PREC_FP16) ? AMPDIAG_FP16 : AMPDIAG_BF16);
    if (failed_by_format(x->base))
        return;
    for (size_t i = 0; i < x->n; i++) {
        const an_finding *a = rf(x->runs, i, F_ADAM_EPS_ZERO);
        if (a && (run_failed(&x->runs[i]) || x->runs[i].nan_values)) {
            SAY0(x->R, SEC_VERDICT, R_V_FIRST_ADAM, a, -1);
            return;
        }
    }
}

/* The decisions the precision rules came to: the precision (observed when the chosen format
 * was run, a hypothesis when predicted from another), with the findings of the reasons, of its
 * evidence and of the other formats' first problems; and the FP32 layers. */
static void precision_decisions(prec_ctx *x)
{
    recommendation *R = x->R;
    rec_decision *d = rec_decide(R, WHAT_PRECISION, R->predicted ? CONF_HYPOTHESIS : CONF_OBSERVED);
    if (!d)
        return;
    snprintf(d->to, sizeof d->to, "%s", R->keep_pure ? "bf16-pure" : rec_precision_name(R->precision));
    rec_sec own = R->precision == REC_FP16 ? SEC_FP16_FOR : R->precision == REC_BF16 ? SEC_BF16_FOR
                                                                                     : REC_NSECS;
    for (size_t i = 0; i < R->items.n; i++) {
        const rec_item *it = &R->items.v[i];
        if (it->f && (it->sec == SEC_WHY || it->sec == own))
            rec_because(d, it->f);
    }
    const rec_format *other[2] = {&R->fp16, &R->bf16};
    for (int k = 0; k < 2; k++)
        if (other[k]->summary >= 0 && R->items.v[other[k]->summary].f)
            rec_because(d, R->items.v[other[k]->summary].f);
    if (!R->fp32_layers[0] || R->precision == REC_UNDECIDED || R->precision == REC_FP32)
        return;
    int confirmed = R->precision == REC_FP16 && !R->predicted;
    rec_decision *l = rec_decide(R, WHAT_FP32_LAYERS, confirmed ? CONF_OBSERVED : CONF_HYPOTHESIS);
    if (!l)
        return;
    snprintf(l->to, sizeof l->to, "%s", R->fp32_layers);
    if (R->precision == REC_FP16)
        for (size_t i = 0; i < x->nisland_why; i++)
            rec_because(l, x->island_why[i]);
    else
        for (const an_finding *dv = NULL; (dv = an_finding_next(&x->c->list, F_CMP_DEVIATION, -1, dv));)
            if (rec_fv(dv, "rel") >= an_k(K_DEV_ISLAND) && rec_fv(dv, "rank") <= an_k(K_DEV_ISLAND_LAYERS))
                rec_because(l, dv);
}

typedef void (*prec_rule)(prec_ctx *);

/* The precision rules (b), in the order they run; each reads what the ones before found. */
static const prec_rule precision_rules[] = {
    rule_target_gate,         /* (b)2 */
    rule_comparable,          /* (b)0: other model, data, steps or seeds; a degenerate validation set */
    rule_inputs,              /* (b)0: inputs far from unit scale, trouble in the first layer */
    rule_baseline_trains,     /* (b)1 */
    rule_baseline_sanity,     /* (b)1: a baseline that does not learn */
    rule_forward_overflow,    /* (b)3 */
    rule_forward_headroom,    /* (b)8 */
    rule_fp16_runs,           /* (b)4 */
    rule_gradient_range,      /* (b)5 */
    rule_bf16_runs,           /* (b)6 (i)-(iii) */
    rule_bf16_range,          /* (b)6 (iv) */
    rule_bf16_weights_whatif, /* (b)6 (v) */
    rule_adam_eps,            /* (b)8 */
    rule_viability,           /* (b)7 */
    rule_table_agrees,        /* (b)7: a format whose run failed is never viable */
    rule_baseline_falling,    /* (b)7: a baseline still falling, nothing in the formats to change */
    rule_verdict,             /* (b)7 */
    rule_island_warning,      /* (b)8 */
    rule_cause_first,         /* causes ranked: a format cause names itself in the verdict */
    precision_decisions,
};

void rec_precision_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R)
{
    prec_ctx x;
    memset(&x, 0, sizeof x);
    x.runs = runs;
    x.n = n;
    x.c = c;
    x.R = R;
    x.bi = c->baseline;
    x.base = &runs[c->baseline];
    x.have_fp32 = c->baseline_is_fp32;
    for (size_t k = 0; k < NELEM(precision_rules); k++)
        precision_rules[k](&x);
}
