/*
 * rules_lr.c - the learning-rate rules (d) (docs/recommendations.md): they run in order until
 * one settles the learning rate, each reading findings of the baseline (and of the other runs)
 * and adding items; the last one states the advice in one line. The decision: WHAT_LR, observed
 * where a measurement says how far, a hypothesis where a heuristic step does.
 */
#include "analysis/rules.h"

#include <string.h>

typedef struct lr_ctx {
    const an_run *runs;
    size_t n;
    const an_comparison *c;
    recommendation *R;
    const an_run *base;
    size_t bi;
    double ratio;       /* the baseline's median update/weight ratio, else its steps' median */
    const an_run *pure; /* the last run storing weights in 16 bits with a ratio below 2^-8 */
    size_t pure_i;
    rec_conf conf;      /* of the lr decision: a hypothesis where a heuristic settles it */
} lr_ctx;

/* A run's final metric: its last eval loss (inf when not finite), else its final-window mean. */
static double final_metric(const an_run *r)
{
    const ampdiag_trace_eval *e = an_final_eval(r);
    if (e && isfinite(e->loss))
        return e->loss;
    if (e)
        return INFINITY;
    return r->tail_mean;
}

/* The distinct finite learning rates of the runs, in order (at most max). */
static size_t distinct_lrs(const an_run *runs, size_t n, double *lrs, size_t max)
{
    size_t nlr = 0;
    for (size_t i = 0; i < n && nlr < max; i++) {
        int seen = 0;
        for (size_t j = 0; j < nlr; j++)
            seen |= lr_eq(lrs[j], runs[i].lr);
        if (!seen && isfinite(runs[i].lr))
            lrs[nlr++] = runs[i].lr;
    }
    return nlr;
}

/* One learning rate of a sweep: the runs of the baseline's precision at lr. Adds an item (the
 * step a run fails from, else the best final metric); *m = that metric, *fails = runs that
 * fail. Returns 0 when no such run. Item figures: lr, step or metric, eval. */
static int lr_sweep_point(lr_ctx *x, double lr, double *m, int *fails)
{
    const an_run *base = x->base;
    int cnt = 0, eval = 0;
    int64_t div = -1;
    *m = INFINITY;
    *fails = 0;
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (!lr_eq(r->lr, lr) || r->prec != base->prec || strcmp(r->precision, base->precision))
            continue;
        cnt++;
        if (run_failed(r)) {
            (*fails)++;
            div = rec_fail_step(r);
        } else if (final_metric(r) < *m) {
            *m = final_metric(r);
            eval = an_final_eval(r) != NULL;
        }
    }
    if (!cnt)
        return 0;
    if (*fails)
        SAY(x->R, SEC_LR, R_LR_SWEEP_FAILS, NULL, (int)x->bi, lr, (double)div);
    else
        SAY(x->R, SEC_LR, R_LR_SWEEP_POINT, NULL, (int)x->bi, lr, *m, eval);
    return 1;
}

/* (d)1 A sweep over learning rates. Reads: runs of the baseline's precision at two or more
 * learning rates. Decides: LR_PICK, the lr with the lowest final metric among those where no
 * run fails (measured). */
static int lr_rule_sweep(lr_ctx *x)
{
    recommendation *R = x->R;
    double lrs[64];
    size_t max = (size_t)an_k(K_LR_SWEEP_MAX) < NELEM(lrs) ? (size_t)an_k(K_LR_SWEEP_MAX) : NELEM(lrs);
    size_t nlr = distinct_lrs(x->runs, x->n, lrs, max);
    if (nlr <= 1)
        return 0;
    double best = INFINITY, best_lr = NAN;
    for (size_t j = 0; j < nlr; j++) {
        double m;
        int fails;
        if (lr_sweep_point(x, lrs[j], &m, &fails) && !fails && m < best) {
            best = m;
            best_lr = lrs[j];
        }
    }
    if (isnan(best_lr))
        return 0;
    R->lr = LR_PICK;
    R->lr_suggested = best_lr;
    R->lr_factor = isfinite(x->base->lr) && x->base->lr > 0 ? best_lr / x->base->lr : NAN;
    SAY(R, SEC_LR_LINE, R_LR_PICK, NULL, (int)x->bi, best_lr, best, an_final_eval(x->base) != NULL);
    return 1;
}

/* (d)2a A baseline that fails by a format cause (Adam eps in FP16 state): no lr advice, the
 * format first. Decides LR_UNKNOWN and stops the lr rules. */
static int lr_rule_format_first(lr_ctx *x)
{
    if (!failed_by_format(x->base))
        return 0;
    x->R->lr = LR_UNKNOWN;
    SAY0(x->R, SEC_LR, R_LR_ADAM_FIRST, rf(x->runs, x->bi, F_ADAM_EPS_ZERO), -1);
    SAY0(x->R, SEC_LR_LINE, R_LR_FORMAT_FIRST_LINE, NULL, -1);
    return 1;
}

/* (d)2a' Inputs far from unit scale with trouble that starts in the first layer
 * (rec_inputs_cause): cause before remedy, the inputs first; the history of a run on such inputs
 * says little about its lr. Decides LR_KEEP until they are standardised. */
static int lr_rule_inputs_first(lr_ctx *x)
{
    const an_finding *f = rec_inputs_cause(x->runs, x->n, x->bi);
    if (!f)
        return 0;
    x->R->lr = LR_KEEP;
    SAY0(x->R, SEC_LR, R_LR_INPUTS_FIRST, f, -1);
    SAY(x->R, SEC_LR_LINE, R_LR_KEEP, NULL, (int)x->bi, x->base->lr);
    return 1;
}

/* Index in r->steps of step (or the last before it); -1 when none. */
static long lr_step_index(const an_run *r, int64_t step)
{
    long k = -1;
    for (size_t i = 0; i < r->nsteps && r->steps[i].step <= step; i++)
        k = (long)i;
    return k;
}

/* A schedule that was still warming up when the baseline broke: below the lr it had reached.
 * Item figures: the step, the lr there, the factor. */
static void lr_divergence_warmup(lr_ctx *x)
{
    recommendation *R = x->R;
    const an_run *base = x->base;
    int64_t at = rec_fail_step(base);
    long k = at >= 0 ? lr_step_index(base, at) : -1;
    double lr_step = an_k(K_LR_STEP);
    if (k >= 0 && isfinite(base->steps[k].lr) && base->steps[k].lr > 0 &&
        base->steps[k].lr * lr_step < base->lr * R->lr_factor) {
        R->lr_factor = base->steps[k].lr * lr_step / base->lr;
        SAY(R, SEC_LR, R_LR_WARMUP_AT, NULL, (int)x->bi, (double)at, base->steps[k].lr, R->lr_factor);
    }
}

/* (d)2 Divergence that is not the format's: the FP32 baseline fails, or every run does.
 * Decides: LR_LOWER by max(LR_DIVERGE_MIN, min(LR_STEP, RATIO_TARGET / r)) when the ratio r is
 * above RATIO_HIGH, else by LR_STEP with a longer warm-up (a heuristic: a hypothesis); lists
 * each failing run. Item figures: diverged, step (a failing run); the factor. */
static int lr_rule_divergence(lr_ctx *x)
{
    recommendation *R = x->R;
    double r = x->ratio;
    if (!((x->c->baseline_is_fp32 && run_failed(x->base)) || rec_every_run_fails(x->runs, x->n)))
        return 0;
    for (size_t i = 0; i < x->n; i++)
        if (run_failed(&x->runs[i]))
            SAY(R, SEC_LR, R_LR_FAILS, NULL, (int)i, has(&x->runs[i], F_DIVERGED),
                (double)rec_fail_step(&x->runs[i]));
    R->lr = LR_LOWER;
    if (isfinite(r) && r > an_k(K_RATIO_HIGH)) {
        /* below where the instability began, by as much as the ratio says: not capped at 10x */
        R->lr_factor = fmax(an_k(K_LR_DIVERGE_MIN), fmin(an_k(K_LR_STEP), an_k(K_RATIO_TARGET) / r));
        SAY(R, SEC_LR, R_LR_DIVERGE_RATIO, rf(x->runs, x->bi, F_UPDATE_RATIO), -1, R->lr_factor);
    } else {
        R->lr_factor = an_k(K_LR_STEP);
        SAY0(R, SEC_LR, R_LR_DIVERGE_STEP, NULL, (int)x->bi);
        x->conf = CONF_HYPOTHESIS;
        rec_decision *d = rec_decide(R, WHAT_WARMUP, CONF_HYPOTHESIS);
        if (d)
            snprintf(d->to, sizeof d->to, "longer");
    }
    lr_divergence_warmup(x);
    R->lr_suggested = x->base->lr * R->lr_factor;
    SAY(R, SEC_LR_LINE, R_LR_LOWER_DIVERGES, NULL, (int)x->bi, R->lr_suggested, R->lr_factor,
        x->c->baseline_is_fp32);
    return 1;
}

/* (d)6 Format-caused failures. Reads: runs that fail while the baseline trains. Decides
 * nothing: says to fix the precision first (from the first step's forward pass, or "while the
 * baseline trains"). Item figures: diverged, step. */
static int lr_rule_format_caused(lr_ctx *x)
{
    if (an_run_learns(x->base) != 1)
        return 0; /* a baseline that does not learn shows nothing to blame a format for */
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (!run_failed(r))
            continue;
        SAY(x->R, SEC_LR, rec_failed_from_start(r) ? R_LR_FORMAT_START : R_LR_FORMAT_CAUSED, NULL,
            (int)i, has(r, F_DIVERGED), (double)rec_fail_step(r));
    }
    return 0;
}

/* (d)2b The lr too high, from the baseline's whole history (F_LR_TOO_HIGH of a baseline that did
 * not fail: an early explosion in a run that does not learn, or units dying after large early
 * updates). Decides: LR_LOWER x LR_HIGH_FACTOR (observed: the history shows the direction; how far
 * is ampdiag tune's to measure), never "raise" (the tiny update/weight ratio of dead units is zero
 * gradients, not a small lr). */
static int lr_rule_too_high(lr_ctx *x)
{
    recommendation *R = x->R;
    const an_finding *hi = rf(x->runs, x->bi, F_LR_TOO_HIGH);
    if (!hi)
        return 0;
    R->lr = LR_LOWER;
    R->lr_factor = an_k(K_LR_HIGH_FACTOR);
    R->lr_suggested = x->base->lr * R->lr_factor;
    SAY0(R, SEC_LR, R_LR_HIGH, hi, -1);
    SAY(R, SEC_LR_LINE, R_LR_LOWER_HIGH, NULL, (int)x->bi, R->lr_suggested, R->lr_factor);
    return 1;
}

/* No update/weight ratio in the baseline: LR_UNKNOWN. */
static int lr_rule_no_ratio(lr_ctx *x)
{
    if (isfinite(x->ratio))
        return 0;
    x->R->lr = LR_UNKNOWN;
    SAY0(x->R, SEC_LR_LINE, R_LR_NO_RATIO, NULL, (int)x->bi);
    return 1;
}

/* (d)3a Steps too small (F_STEPS_TOO_SMALL of the baseline: it neither learns nor fails, no
 * dead units, its ratio r below RATIO_TARGET). Decides: LR_RAISE x min(LR_RAISE_MAX,
 * RATIO_TARGET / r); for a baseline that learns nothing at all x min(LR_RAISE_FLAT_MAX,
 * RATIO_TARGET / r): its weights are still where they started, so r grows in proportion to the
 * lr and RATIO_TARGET / r is a measurement, not a step in the dark. Not with a run storing
 * weights in 16 bits below 2^-8 (lr_rule_master_weights). Does not settle; lr_rule_ratio leaves
 * the lr it set. Item figures: the cap, the factor, the lost share above LOST_MAX (else NaN). */
static int lr_rule_too_low(lr_ctx *x)
{
    recommendation *R = x->R;
    const an_finding *low = rf(x->runs, x->bi, F_LR_TOO_LOW);
    if (!x->pure && low) {
        /* live gradients, a small ratio throughout: as far as the ratio says, at most LR_RAISE_MAX
         * (a run that learns nothing: its weights are where they started, so the ratio grows in
         * proportion to the lr, at most LR_RAISE_FLAT_MAX) */
        double cap = rec_fv(low, "learns") != 0 ? an_k(K_LR_RAISE_MAX) : an_k(K_LR_RAISE_FLAT_MAX);
        R->lr = LR_RAISE;
        R->lr_factor = fmin(cap, an_k(K_RATIO_TARGET) / rec_fv(low, "ratio_p90"));
        SAY(R, SEC_LR, R_LR_LOW, low, -1, R->lr_factor, cap);
        return 0;
    }
    const an_finding *small = rf(x->runs, x->bi, F_STEPS_TOO_SMALL);
    if (x->pure || !small)
        return 0;
    double cap = rec_fv(small, "flat") != 0 ? an_k(K_LR_RAISE_FLAT_MAX) : an_k(K_LR_RAISE_MAX);
    double lost = rec_fv(small, "lost_share");
    R->lr = LR_RAISE;
    R->lr_factor = fmin(cap, an_k(K_RATIO_TARGET) / x->ratio);
    SAY(R, SEC_LR, R_LR_TOO_LOW, small, -1, cap, R->lr_factor, lost > an_k(K_LOST_MAX) ? lost : NAN);
    return 0;
}

/* (d)3 Otherwise, and (d)5 loss spikes. Decides: a baseline that learns (measured against its
 * start, or its training loss below LEARNED_FRACTION of its first) and that no finding of its
 * history says is too high or too low: LR_KEEP, whatever its update/weight ratio r (the
 * RATIO_LOW..RATIO_HIGH band is a rule of thumb a run that learns outweighs). A baseline that
 * does not learn: r > RATIO_HIGH: LR_LOWER x max(LR_LOWER_MIN, RATIO_TARGET / r); r < RATIO_LOW:
 * LR_RAISE x min(LR_RAISE_MAX, RATIO_TARGET / r); else LR_KEEP. More than SPIKE_RATE_MAX loss
 * spikes (at least SPIKE_MIN_COUNT) are a heuristic: an untested hypothesis (a lower lr or a longer
 * warm-up, WHAT_WARMUP) that ampdiag tune tests; they never change the lr here. Item figure: the
 * factor (keep: above RATIO_HIGH, the final-window and first losses). */
static int lr_rule_ratio(lr_ctx *x)
{
    recommendation *R = x->R;
    const an_run *base = x->base;
    double r = x->ratio;
    const an_finding *q = rf(x->runs, x->bi, F_UPDATE_RATIO), *sp = rf(x->runs, x->bi, F_LOSS_SPIKES);
    int spiky = sp && rec_fv(sp, "above") != 0;
    int learns = an_run_learns(base) == 1 && !run_failed(base);
    if (spiky) {
        SAY0(R, SEC_LR, R_LR_SPIKES, sp, -1);
        rec_decision *d = rec_decide(R, WHAT_WARMUP, CONF_HYPOTHESIS);
        if (d) {
            snprintf(d->to, sizeof d->to, "longer");
            rec_because(d, sp);
        }
    }
    const an_finding *fall = rf(x->runs, x->bi, F_STILL_FALLING);
    if (R->lr != LR_UNKNOWN)
        return 0; /* lr_rule_too_low decided */
    if (fall && learns && !x->c->lr_measured) { /* likely too low, by an amount one run does not measure: left to tune */
        SAY0(R, SEC_LR, R_LR_STILL_FALLING, fall, -1);
        return 0;
    }
    if (learns) {
        R->lr = LR_KEEP;
        SAY(R, SEC_LR, R_LR_KEEP_HEALTHY, q, -1, r > an_k(K_RATIO_HIGH), base->tail_mean, base->loss_first,
            r < an_k(K_RATIO_LOW));
    } else if (r > an_k(K_RATIO_HIGH)) {
        R->lr = LR_LOWER;
        R->lr_factor = fmax(an_k(K_LR_LOWER_MIN), an_k(K_RATIO_TARGET) / r);
        SAY(R, SEC_LR, R_LR_RATIO_HIGH, q, -1, R->lr_factor);
    } else if (r < an_k(K_RATIO_LOW) && !x->pure) {
        R->lr = LR_RAISE;
        R->lr_factor = fmin(an_k(K_LR_RAISE_MAX), an_k(K_RATIO_TARGET) / r);
        SAY(R, SEC_LR, R_LR_RATIO_LOW, q, -1, R->lr_factor);
    } else {
        R->lr = LR_KEEP;
        SAY(R, SEC_LR, R_LR_KEEP_BAND, q, -1, (double)base->loss_spikes);
    }
    return 0;
}

/* (d)4 Precision interplay. Reads: a run storing weights in 16 bits whose median ratio is
 * below BF16_UNIT_ROUNDOFF. Decides: the lr is not raised to beat the rounding; LR_KEEP_MASTER
 * (x1, use FP32 master weights) unless the lr is to be lowered; not where the run is kept as run
 * (keep_pure: it learns within the noise band of FP32). */
static int lr_rule_master_weights(lr_ctx *x)
{
    recommendation *R = x->R;
    if (!x->pure || R->keep_pure || !(R->lr == LR_RAISE || x->ratio < an_k(K_BF16_UNIT_ROUNDOFF)))
        return 0; /* (kept as run: its lost updates did not cost it, rules_bf16.c) */
    SAY0(R, SEC_LR, R_LR_MASTER, rf(x->runs, x->pure_i, F_LOST_UPDATES), -1);
    if (R->lr != LR_LOWER) {
        R->lr = LR_KEEP_MASTER;
        R->lr_factor = 1;
    }
    return 0;
}

/* The suggested lr and its one-line summary from the verdict above. Item figures: the lr (keep)
 * or the suggested lr and the factor. */
static int lr_rule_line(lr_ctx *x)
{
    recommendation *R = x->R;
    double lr = x->base->lr;
    R->lr_suggested = lr * R->lr_factor;
    switch (R->lr) {
    case LR_KEEP: SAY(R, SEC_LR_LINE, R_LR_KEEP, NULL, (int)x->bi, lr); break;
    case LR_KEEP_MASTER: SAY(R, SEC_LR_LINE, R_LR_KEEP_MASTER, NULL, (int)x->bi, lr); break;
    case LR_LOWER: SAY(R, SEC_LR_LINE, R_LR_LOWER, NULL, (int)x->bi, R->lr_suggested, R->lr_factor); break;
    case LR_RAISE:
        SAY(R, SEC_LR_LINE, rf(x->runs, x->bi, F_LR_TOO_LOW) ? R_LR_RAISE_LOW : R_LR_RAISE, NULL, (int)x->bi,
            R->lr_suggested, R->lr_factor);
        break;
    default:
        if (rf(x->runs, x->bi, F_STILL_FALLING) && !x->c->lr_measured)
            SAY0(R, SEC_LR_LINE, R_LR_UNSETTLED, NULL, (int)x->bi);
        break;
    }
    return 1;
}

typedef int (*lr_rule)(lr_ctx *);
static const lr_rule lr_rules[] = {
    lr_rule_sweep, lr_rule_format_first, lr_rule_inputs_first, lr_rule_divergence, lr_rule_format_caused, lr_rule_too_high,
    lr_rule_no_ratio, lr_rule_too_low, lr_rule_ratio, lr_rule_master_weights, lr_rule_line,
};

/* The lr decision: what the rules settled, with the findings of their items. */
static void lr_decision(lr_ctx *x, size_t first_item)
{
    recommendation *R = x->R;
    if (R->lr == LR_UNKNOWN)
        return;
    rec_decision *d = rec_decide(R, WHAT_LR, x->conf);
    if (!d)
        return;
    snprintf(d->to, sizeof d->to, "%s", rec_lr_name(R->lr));
    d->value = R->lr_suggested;
    for (size_t i = first_item; i < R->items.n; i++)
        if (R->items.v[i].f && (R->items.v[i].sec == SEC_LR || R->items.v[i].sec == SEC_LR_LINE))
            rec_because(d, R->items.v[i].f);
}

void rec_lr_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R)
{
    lr_ctx x = {runs, n, c, R, &runs[c->baseline], c->baseline, NAN, NULL, 0, CONF_OBSERVED};
    const an_run *base = x.base;
    size_t first = R->items.n;
    R->lr_current = base->lr;
    R->lr_factor = 1;
    R->lr_suggested = base->lr;
    x.ratio = rec_fv(rf(runs, x.bi, F_UPDATE_RATIO), "ratio");
    for (size_t i = 0; i < n; i++) {
        const an_finding *lu = rf(runs, i, F_LOST_UPDATES);
        if (runs[i].weights_16bit && rec_fv(lu, "ratio") < an_k(K_BF16_UNIT_ROUNDOFF)) {
            x.pure = &runs[i];
            x.pure_i = i;
        }
    }
    for (size_t k = 0; k < NELEM(lr_rules); k++)
        if (lr_rules[k](&x))
            break;
    lr_decision(&x, first);
}
