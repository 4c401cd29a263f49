/*
 * findings.c - what one trace says (findings.h): the run's health (its status, NaN/inf,
 * divergence, the loss scale, skipped steps, its evaluation, the optimizer state), whether it
 * learns, and the tables info prints (totals per kind, headroom least first). The findings
 * about ranges, formats, updates and gradient norms are in findings_range.c.
 */
#include "analysis/findings.h"
#include "analysis/findings_internal.h"
#include "util/sort.h"
#include "analysis/ranks.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t nonfinite(const an_cell *c) { return c->nan + c->posinf + c->neginf; }

/* ------------------------------------------------------------------------------------------
 * The trace itself and the run's health
 * ------------------------------------------------------------------------------------------ */

static void trace_findings(fctx *x)
{
    const an_run *r = x->r;
    an_finding *f;
    if (r->status != AMPDIAG_STATUS_COMPLETE && (f = fadd(x, F_NOT_COMPLETE))) {
        f->v[0] = (double)r->nsteps;
        f->str[0] = r->status_text;
    }
    if (r->cut_off && (f = fadd(x, F_CUT_OFF)))
        f->v[0] = (double)r->nsteps;
    else if (r->status == AMPDIAG_STATUS_INTERRUPTED && (f = fadd(x, F_INTERRUPTED)))
        f->v[0] = (double)r->nsteps;
    if (r->bad_rows && (f = fadd(x, F_BAD_ROWS)))
        f->v[0] = (double)r->bad_rows;
    if (r->hist_rows_read < r->hist_rows && (f = fadd(x, F_HIST_SAMPLED))) {
        f->v[0] = (double)r->hist_rows_read;
        f->v[1] = (double)r->hist_rows;
    }
    /* the writer saw FP16 run without a loss scaler (ampdiag.torch: autocast or FP16 weights
     * with no GradScaler); the event's value is the share of the traced gradient values that
     * were zero (NaN where none was traced) */
    for (size_t i = 0; i < r->nevents; i++)
        if (r->events[i].code == AMPDIAG_EV_NO_LOSS_SCALING) {
            if ((f = fadd(x, F_NO_LOSS_SCALING))) {
                f->v[0] = (double)r->events[i].step;
                f->v[1] = r->events[i].value;
                f->s.from = r->events[i].step;
            }
            break;
        }
}

static void nonfinite_findings(fctx *x)
{
    const an_run *r = x->r;
    an_finding *f;
    if (r->diverged && (f = fadd(x, F_DIVERGED))) {
        f->v[0] = (double)r->divergence_step;
        f->s.from = r->divergence_step;
        f->str[0] = r->divergence_why[0] ? r->divergence_why : NULL;
    }
    if (r->loss_nonfinite && (f = fadd(x, F_LOSS_NONFINITE))) {
        f->v[0] = (double)r->loss_nonfinite;
        f->v[1] = (double)r->first_nonfinite_loss_step;
        f->s.from = r->first_nonfinite_loss_step;
    }
    if (r->fwd_nonfinite_step >= 0 && (f = fadd(x, F_FWD_NONFINITE))) {
        const an_cell *a = &r->layers[r->fwd_nonfinite_layer].cell[AMPDIAG_KIND_ACTIVATION];
        f->s.layer = r->fwd_nonfinite_layer;
        f->s.kind = AMPDIAG_KIND_ACTIVATION;
        f->s.from = r->fwd_nonfinite_step;
        f->v[0] = (double)r->fwd_nonfinite_step;
        f->v[1] = (double)nonfinite(a);
        f->v[2] = a->posinf + a->neginf > 0;
        /* NaN/inf in the forward pass of the very first step, before any update */
        f->v[3] = r->nsteps > 0 && r->fwd_nonfinite_step <= r->first_step;
    }
    const an_figval *w = &r->fig->f[FIG_NONFINITE_WEIGHTS];
    if (!isnan(w->v) && (f = fadd(x, F_NONFINITE_WEIGHTS))) {
        f->s.layer = w->layer;
        f->s.kind = AMPDIAG_KIND_WEIGHT;
        f->v[0] = (double)w->step;
    }
    if (r->first_nonfinite.step >= 0 && (f = fadd(x, F_NONFINITE_EVENT))) {
        f->s.layer = r->first_nonfinite.layer;
        f->v[0] = (double)r->first_nonfinite.step;
        f->v[1] = r->first_nonfinite.code;
        f->v[2] = (double)(r->by_code[AMPDIAG_EV_NAN_FORWARD] + r->by_code[AMPDIAG_EV_INF_FORWARD] +
                           r->by_code[AMPDIAG_EV_NAN_BACKWARD]);
        f->str[0] = r->first_nonfinite.message;
    }
}

static int skips_too_many(const an_run *r)
{
    return r->skipped_after >= an_k(K_SKIP_MIN_COUNT) && r->steps_after > 0 &&
           (double)r->skipped_after / (double)r->steps_after > an_k(K_SKIP_RATE_MAX);
}

static void scale_health_findings(fctx *x)
{
    const an_run *r = x->r;
    an_finding *f;
    if (r->collapsed && (f = fadd(x, F_SCALE_COLLAPSED))) {
        f->v[0] = r->scale_min;
        f->v[1] = (double)r->scale_min_step;
        f->v[2] = r->scaler_min > 0 && r->scale_min <= r->scaler_min;
        f->v[3] = r->scaler_min;
        f->v[4] = (double)r->backoffs;
        f->v[5] = (double)r->skipped;
        f->v[6] = (double)r->nsteps;
        f->s.from = r->scale_min_step;
    }
    if (skips_too_many(r) && (f = fadd(x, F_SKIPS_ABOVE_LIMIT))) {
        f->v[0] = (double)r->skipped_after;
        f->v[1] = (double)r->steps_after;
        f->v[2] = (double)r->calib;
        f->v[3] = (double)r->skipped_after / (double)r->steps_after;
        f->v[4] = (double)r->first_skip_step;
        f->s.from = r->first_skip_step;
        f->str[0] = r->first_skip_reason[0] ? r->first_skip_reason : NULL;
    }
}

/* The validation rows of the batch an evaluation's NaN/inf event names (its rows_from,
 * rows_to), into v[0] (1: named), v[1], v[2] (-1 when it names none). */
static void eval_rows(const an_event_ref *e, double *v)
{
    v[0] = e->rows_from >= 0;
    v[1] = (double)e->rows_from;
    v[2] = (double)e->rows_to;
}

static void eval_findings(fctx *x)
{
    const an_run *r = x->r;
    const ampdiag_trace_eval *last = an_final_eval(r);
    if (!last || isfinite(last->loss))
        return;
    int64_t first = -1;
    for (size_t i = 0; i < r->nevals && first < 0; i++)
        if (!isfinite(r->evals[i].loss) && r->evals[i].step >= 0)
            first = r->evals[i].step;
    an_finding *f = fadd(x, F_EVAL_NONFINITE);
    if (f) {
        f->v[0] = (double)last->step;
        f->v[1] = (double)first;
        f->s.from = first;
    }
    /* ... while the training stayed finite (no non-finite loss, no NaN/inf activation record):
     * the evaluation's forward pass met values the training batches never had */
    if (r->loss_nonfinite || r->fwd_nonfinite_step >= 0 || !(f = fadd(x, F_EVAL_ONLY_NONFINITE)))
        return;
    const an_event_ref *e = &r->eval_forward;
    f->v[0] = (double)first;
    f->s.from = first;
    f->v[1] = e->step >= 0;
    f->v[2] = e->code == AMPDIAG_EV_NAN_FORWARD;
    f->v[3] = 0;
    f->v[4] = f->v[5] = -1;
    if (e->step >= 0) {
        f->s.layer = e->layer;
        f->s.kind = AMPDIAG_KIND_ACTIVATION;
        eval_rows(e, &f->v[3]);
    }
}

/* AdamW with its state in FP16 and an eps FP16 flushes to zero (|eps| <= 2^-25): a zero
 * gradient gives 0/0 = NaN. */
static void adam_eps_finding(fctx *x)
{
    const an_run *r = x->r;
    if (!(strcmp(r->optim_state, "fp16") == 0 && strcmp(r->optimizer, "adamw") == 0 &&
          isfinite(r->adam_eps) && r->adam_eps <= an_k(K_FP16_UNDERFLOW_AT)))
        return;
    an_finding *f = fadd(x, F_ADAM_EPS_ZERO);
    if (!f)
        return;
    int failed = r->diverged || r->loss_nonfinite > 0;
    f->v[0] = r->adam_eps;
    f->v[1] = failed;
    f->v[2] = (double)r->nan_values;
    f->v[3] = failed ? (double)(r->diverged ? r->divergence_step : r->first_nonfinite_loss_step) : -1;
}

/* ------------------------------------------------------------------------------------------
 * Learning
 * ------------------------------------------------------------------------------------------ */

static int failed(const an_run *r) { return r->diverged || r->loss_nonfinite > 0; }

double an_paired_se(const double *a, const double *b, size_t n, int winsorized, double *mean)
{
    if (n < 2)
        return NAN;
    double *d = malloc(n * sizeof *d);
    if (!d)
        return NAN;
    for (size_t i = 0; i < n; i++) {
        d[i] = b[i] - a[i];
        if (!isfinite(d[i])) {
            free(d);
            return NAN;
        }
    }
    sort_doubles(d, n);
    size_t k = winsorized ? (size_t)(an_k(K_PAIRED_WINSOR) * (double)n) : 0;
    if (2 * k + 2 > n)
        k = 0;
    double m = 0, ss = 0;
    for (size_t i = 0; i < n; i++) {
        double v = d[i < k ? k : i >= n - k ? n - k - 1 : i];
        m += v;
    }
    m /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double v = d[i < k ? k : i >= n - k ? n - k - 1 : i] - m;
        ss += v * v;
    }
    free(d);
    if (mean)
        *mean = m;
    return sqrt(ss / (double)(n - 1)) / sqrt((double)n);
}

/* Learning measured against the run's start: its final evaluation against its initial one
 * (step -1), paired over the validation examples where the trace has them (the band: LEARN_SE
 * standard errors of the per-example differences), else unpaired (LEARN_SE x the root of the
 * sum of the two standard errors' squares); with an accuracy, above chance (the validation
 * set's majority share, else 1 / classes) by more than LEARN_SE binomial standard errors over
 * the predictions it counts (data_val_targets: a token set's every target, else the rows).
 * F_LEARNS or F_DOES_NOT_LEARN; none without both evaluations. */
static void measured_learning(fctx *x)
{
    const an_run *r = x->r;
    const ampdiag_trace_eval *e0 = an_initial_eval(r), *e1 = an_final_eval(r);
    if (!e0 || !e1)
        return;
    double k = an_k(K_LEARN_SE), band = NAN, change = e1->loss - e0->loss, test = change;
    size_t n = 0;
    int paired = 0;
    if (r->nex0 >= 2 && r->nex0 == r->nex1 && r->ex1_step == e1->step) {
        /* winsorized: one example whose initial loss is huge (an input in raw units) neither makes
         * nor hides the decrease */
        double wm;
        double se = an_paired_se(r->ex0_loss, r->ex1_loss, r->nex0, 1, &wm);
        if (isfinite(se)) {
            n = r->nex0;
            band = k * se;
            test = wm;
            paired = 1;
        }
    }
    if (!paired) {
        if (isfinite(e0->loss_se) && isfinite(e1->loss_se))
            band = k * sqrt(e0->loss_se * e0->loss_se + e1->loss_se * e1->loss_se);
        else
            band = an_k(K_NOISE_BAND_MIN) * fabs(e0->loss);
        n = r->nex1;
    }
    int loss_ok = isfinite(e0->loss) && isfinite(e1->loss) && isfinite(band) && change < 0 && test < -band;
    double acc = NAN, chance = NAN, acc_band = NAN;
    int acc_ok = 1;
    if (strcmp(r->eval_metric, "accuracy") == 0 && !isnan(e1->metric)) {
        acc = e1->metric;
        chance = isfinite(r->data_val_chance) ? r->data_val_chance
                 : r->data_classes > 0        ? 1.0 / (double)r->data_classes
                                              : NAN;
        /* over the predictions the accuracy counts (a token set: every target of every row) */
        double rows = r->data_val_targets > 0 ? (double)r->data_val_targets
                      : r->data_val_rows > 0  ? (double)r->data_val_rows
                                              : (double)r->nex1;
        if (isfinite(chance) && rows > 0) {
            acc_band = k * sqrt(fmax(chance * (1 - chance), 1e-12) / rows);
            acc_ok = acc > chance + acc_band;
        }
    }
    an_finding *f = fadd(x, loss_ok && acc_ok ? F_LEARNS : F_DOES_NOT_LEARN);
    if (!f)
        return;
    const double v[12] = {e0->loss, e1->loss, change, band, paired, (double)n, acc, chance, acc_band,
                          loss_ok, acc_ok, (double)e1->step};
    memcpy(f->v, v, sizeof v);
    f->s.from = -1;
    f->s.to = e1->step;
}

/* 1: the run learns, 0: it does not, measured (F_LEARNS, F_DOES_NOT_LEARN) where it could be,
 * else judged from the training loss (its final window below LEARNED_FRACTION of its first). */
static int learned(fctx *x)
{
    const an_run *r = x->r;
    if (an_finding_find(&x->F->list, F_LEARNS, -1))
        return 1;
    if (an_finding_find(&x->F->list, F_DOES_NOT_LEARN, -1))
        return 0;
    return isfinite(r->tail_mean) && isfinite(r->loss_first) &&
           r->tail_mean < an_k(K_LEARNED_FRACTION) * r->loss_first;
}

static int measured(fctx *x)
{
    return an_finding_find(&x->F->list, F_LEARNS, -1) || an_finding_find(&x->F->list, F_DOES_NOT_LEARN, -1);
}

/* The share of a cell's values that were live (not exactly 0) at its first record and are 0 at
 * its last: (last zero share - first) / (1 - first), NaN without two records. */
static double died_share(const an_cell *c)
{
    if (c->records < 2 || !c->first_count || !c->last_count)
        return NAN;
    double z0 = (double)c->first_zero / (double)c->first_count, z1 = (double)c->last_zero / (double)c->last_count;
    return z0 < 1 ? (z1 - z0) / (1 - z0) : NAN;
}

/* The layer whose weight gradients died most (died_share), into *layer (-1: none); the share. */
static double most_died(const an_run *r, int *layer)
{
    double best = NAN;
    *layer = -1;
    for (size_t l = 0; l < r->nlayers; l++) {
        double d = died_share(&r->layers[l].cell[AMPDIAG_KIND_WEIGHT_GRAD]);
        if (isfinite(d) && (isnan(best) || d > best)) {
            best = d;
            *layer = (int)l;
        }
    }
    return best;
}

/* Dead units: a layer's weight gradients that were live at its first record are mostly exactly
 * 0 at its last (at least DIED_SHARE of them) while the training loss stays above DEAD_LOSS_SHARE
 * of its first: ReLUs pushed below zero for every example (a model that fits its data has
 * exactly-zero gradients too, with its loss near 0). Returns 1 when found. */
static int dead_units(fctx *x)
{
    const an_run *r = x->r;
    int layer;
    double died = most_died(r, &layer);
    if (failed(r) || !(died >= an_k(K_DIED_SHARE)) ||
        !(r->tail_mean > an_k(K_DEAD_LOSS_SHARE) * r->loss_first))
        return 0;
    const an_cell *g = &r->layers[layer].cell[AMPDIAG_KIND_WEIGHT_GRAD];
    an_finding *f = fadd(x, F_DEAD_UNITS);
    if (f) {
        f->s.layer = layer;
        f->s.kind = AMPDIAG_KIND_WEIGHT_GRAD;
        f->v[0] = (double)g->last_zero / (double)g->last_count;
        f->v[1] = (double)g->first_zero / (double)g->first_count;
        f->v[2] = r->tail_mean;
        f->v[3] = r->loss_first;
        f->v[4] = died;
    }
    return 1;
}

/* The early steps: the first EARLY_SHARE of the run's steps, at least EARLY_MIN. */
static size_t early_steps(const an_run *r)
{
    size_t w = (size_t)(an_k(K_EARLY_SHARE) * (double)r->nsteps);
    size_t lo = (size_t)an_k(K_EARLY_MIN);
    w = w < lo ? lo : w;
    return w < r->nsteps ? w : r->nsteps;
}

/* The lr from the whole history. Too high (F_LR_TOO_HIGH): an FP32 run that diverges or whose
 * loss goes non-finite (a 16-bit run's failure may be its format's); an early explosion (a
 * training loss in the early steps above LOSS_RISE x the first, or not finite) in a run that does
 * not learn; or units dying after large early updates (dead units, with an early update/weight
 * ratio above RATIO_EARLY_HIGH). Too low (F_LR_TOO_LOW): no units died, the gradients live, and
 * the update/weight ratio small throughout (its 90th percentile over the steps below RATIO_LOW),
 * in a run that does not learn, or learns slowly (its final window above LEARNED_FRACTION of its
 * first loss). */
static void lr_history(fctx *x, int dead)
{
    const an_run *r = x->r;
    if (r->nsteps < 2)
        return;
    size_t w = early_steps(r);
    double first = r->steps[0].loss, peak = -INFINITY, ratio = NAN;
    int64_t peak_step = -1, ratio_step = -1;
    int nonfinite_early = 0;
    for (size_t i = 0; i < w; i++) {
        const an_step *st = &r->steps[i];
        if (!isfinite(st->loss))
            nonfinite_early = 1;
        else if (st->loss > peak) {
            peak = st->loss;
            peak_step = st->step;
        }
        if (isfinite(st->update_ratio) && !st->skipped && (isnan(ratio) || st->update_ratio > ratio)) {
            ratio = st->update_ratio;
            ratio_step = st->step;
        }
    }
    int layer;
    double died = most_died(r, &layer);
    int learns = learned(x);
    int fp32_failed = failed(r) && r->prec == PREC_FP32;
    /* an FP16 run's explosion is its format's first (overflow); the precision rules judge it */
    int explosion = r->prec != PREC_FP16 &&
                    (nonfinite_early || (isfinite(first) && first > 0 && peak > an_k(K_LOSS_RISE) * first));
    int sticks = explosion && !learns && !failed(r);
    int large_early = ratio > an_k(K_RATIO_EARLY_HIGH);
    if (fp32_failed || (explosion && !learns) || (dead && large_early)) {
        an_finding *f = fadd(x, F_LR_TOO_HIGH);
        if (!f)
            return;
        const double v[11] = {fp32_failed, fp32_failed ? (double)(r->diverged ? r->divergence_step
                                                                             : r->first_nonfinite_loss_step)
                                                        : NAN,
                              explosion, isfinite(peak) ? peak : NAN, (double)peak_step, first,
                              dead ? died : NAN, ratio, (double)ratio_step, sticks, (double)w};
        memcpy(f->v, v, sizeof v);
        f->s.layer = dead ? layer : -1;
        f->s.kind = dead ? AMPDIAG_KIND_WEIGHT_GRAD : -1;
        f->s.from = r->first_step;
        f->s.to = r->steps[w - 1].step;
        return;
    }
    if (dead || failed(r) || r->nsteps < 2 * w)
        return;
    /* too low: the ratio of every step, its 90th percentile */
    double *q = malloc(r->nsteps * sizeof *q);
    size_t nq = 0;
    if (!q) {
        x->oom = 1;
        return;
    }
    for (size_t i = 0; i < r->nsteps; i++)
        if (isfinite(r->steps[i].update_ratio) && !r->steps[i].skipped)
            q[nq++] = r->steps[i].update_ratio;
    double p90 = NAN;
    if (nq >= 2) {
        sort_doubles(q, nq);
        p90 = q[(size_t)(0.9 * (double)(nq - 1))];
    }
    free(q);
    int slow = !learns || !(r->tail_mean < an_k(K_LEARNED_FRACTION) * r->loss_first);
    /* flat: it learns nothing at all (measured, or its training loss not below FLAT_FRACTION) */
    int flat = measured(x) ? !learns : !(r->tail_mean < an_k(K_FLAT_FRACTION) * r->loss_first);
    if (isfinite(p90) && p90 > 0 && p90 < an_k(K_RATIO_LOW) && slow) {
        an_finding *f = fadd(x, F_LR_TOO_LOW);
        if (f) {
            f->v[0] = p90;
            f->v[1] = r->fig->f[FIG_UPDATE_RATIO].v;
            f->v[2] = !flat;
            f->v[3] = r->tail_mean;
            f->v[4] = r->loss_first;
            f->v[5] = r->fig->f[FIG_ZERO_GRAD].v;
        }
    }
}

/* The mean and the variance of the mean of the finite training losses of steps [a, b) not
 * skipped; NaN mean when none. */
static double window_mean(const an_run *r, size_t a, size_t b, double *var_mean)
{
    double sum = 0, sq = 0;
    size_t n = 0;
    for (size_t i = a; i < b && i < r->nsteps; i++)
        if (!r->steps[i].skipped && isfinite(r->steps[i].loss)) {
            sum += r->steps[i].loss;
            sq += r->steps[i].loss * r->steps[i].loss;
            n++;
        }
    if (n < 2) {
        *var_mean = NAN;
        return NAN;
    }
    double m = sum / (double)n, var = fmax(0, (sq - (double)n * m * m) / (double)(n - 1));
    *var_mean = var / (double)n;
    return m;
}

/* Still falling (F_STILL_FALLING): a run that learns and did not fail, whose training loss fell
 * over its second half at STILL_FALLING of its mean rate or more. The rates are of window means
 * (windows of the early steps' size: at the start, around the middle, at the end): the second
 * half's 2 (half - last) against the whole run's (first - last); the second half's decrease
 * must be beyond LEARN_SE standard errors of the two window means. A converging run slows down;
 * one whose steps are too small (a low lr, or too few steps) keeps its pace to the end. */
static void still_falling(fctx *x)
{
    const an_run *r = x->r;
    size_t w = early_steps(r), n = r->nsteps;
    if (n < 4 * w || w < 2 || failed(r) || learned(x) != 1)
        return;
    double v0, vh, ve;
    double m0 = window_mean(r, 0, w, &v0), mh = window_mean(r, n / 2 - w / 2, n / 2 - w / 2 + w, &vh),
           me = window_mean(r, n - w, n, &ve);
    if (!(isfinite(m0) && isfinite(mh) && isfinite(me)) || !(m0 > me))
        return;
    double share = 2 * (mh - me) / (m0 - me);
    if (!(share >= an_k(K_STILL_FALLING)) || !(mh - me > an_k(K_LEARN_SE) * sqrt(vh + ve)))
        return;
    an_finding *f = fadd(x, F_STILL_FALLING);
    if (!f)
        return;
    const double v[6] = {share, m0, mh, me, (double)w, (double)n};
    memcpy(f->v, v, sizeof v);
    f->s.from = r->first_step;
    f->s.to = r->steps[n - 1].step;
}

/* The data as the run saw it: a degenerate validation set (one class where there are more, or
 * fewer than VAL_MIN_ROWS rows), and inputs far from unit scale (a feature's standard deviation
 * above INPUT_SCALE_FAR, or a root mean square below its inverse). */
static void data_findings(fctx *x)
{
    const an_run *r = x->r;
    an_finding *f;
    int one = r->data_classes > 1 && r->data_val_classes == 1;
    int few = r->data_val_rows >= 0 && r->data_val_rows < an_k(K_VAL_MIN_ROWS);
    if ((one || few) && (f = fadd(x, F_VAL_DEGENERATE))) {
        const double v[7] = {(double)r->data_val_rows, (double)r->data_classes, (double)r->data_val_classes,
                             r->data_val_chance, one, few, r->data_labels_sorted == 1};
        memcpy(f->v, v, sizeof v);
    }
    double far = an_k(K_INPUT_SCALE_FAR);
    int large = r->input_std_max > far, small = r->input_rms < 1 / far && r->input_rms >= 0;
    if ((large || small) && (f = fadd(x, F_INPUT_SCALE))) {
        const double v[5] = {r->input_rms, r->input_std_max, r->input_std_min,
                             fmax(fabs(r->input_min), fabs(r->input_max)), large};
        memcpy(f->v, v, sizeof v);
    }
}

static void learning_findings(fctx *x)
{
    const an_run *r = x->r;
    an_finding *f;
    measured_learning(x);
    int is_measured = measured(x);
    int flat = !failed(r) && !(isfinite(r->tail_mean) && isfinite(r->loss_first) &&
                               r->tail_mean < an_k(K_FLAT_FRACTION) * r->loss_first);
    /* judged from the training loss only where the evaluations could not measure it */
    if (!is_measured && !learned(x) && (f = fadd(x, F_NOT_LEARNING))) {
        f->v[0] = r->tail_mean;
        f->v[1] = r->loss_first;
    }
    if (!is_measured && flat && (f = fadd(x, F_LEARNS_NOTHING))) {
        f->v[0] = r->tail_mean;
        f->v[1] = r->loss_first;
        f->v[2] = an_final_eval(r) && strcmp(r->eval_metric, "accuracy") == 0;
    }
    int dead = dead_units(x);
    double q = r->fig->f[FIG_UPDATE_RATIO].v;
    size_t nl = 0;
    for (size_t l = 0; l < r->nlayers; l++)
        nl += r->layers[l].ratio_n > 0;
    if (isfinite(q) && (f = fadd(x, F_UPDATE_RATIO))) {
        f->v[0] = q;
        f->v[1] = (double)nl;
    }
    /* steps too small to learn: no learning, no failure, no dead units, the ratio below target */
    if (!learned(x) && !failed(r) && !dead && isfinite(q) && q < an_k(K_RATIO_TARGET) &&
        (f = fadd(x, F_STEPS_TOO_SMALL))) {
        f->v[0] = q;
        f->v[1] = r->fig->f[FIG_LOST].v;
        f->v[2] = r->tail_mean;
        f->v[3] = r->loss_first;
        f->v[4] = flat;
    }
    lr_history(x, dead);
    still_falling(x);
    if (r->loss_spikes && (f = fadd(x, F_LOSS_SPIKES))) {
        double n = (double)r->nsteps;
        f->v[0] = (double)r->loss_spikes;
        f->v[1] = n;
        f->v[2] = (double)r->spike_steps[0];
        f->v[3] = r->loss_spikes >= an_k(K_SPIKE_MIN_COUNT) && n > 0 &&
                  (double)r->loss_spikes / n > an_k(K_SPIKE_RATE_MAX);
        f->s.from = r->spike_steps[0];
    }
}

/* ------------------------------------------------------------------------------------------
 * Info's tables: totals per kind, headroom least first
 * ------------------------------------------------------------------------------------------ */

static int cmp_tie(const an_headroom *x, const an_headroom *y)
{
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return x->kind < y->kind ? -1 : x->kind > y->kind;
}

#define CMP_BY(field, f)                                                                           \
    static int cmp_##field##f(const void *a, const void *b)                                        \
    {                                                                                              \
        const an_headroom *x = a, *y = b;                                                          \
        if (x->field[f] != y->field[f])                                                            \
            return x->field[f] < y->field[f] ? -1 : 1;                                             \
        return cmp_tie(x, y);                                                                      \
    }
CMP_BY(over, 0)
CMP_BY(over, 1)
CMP_BY(under, 0)
CMP_BY(under, 1)

static int headroom_tables(const an_run *r, an_findings *f)
{
    size_t ncell = (r->nlayers ? r->nlayers : 1) * AMPDIAG_NKINDS;
    for (int fm = 0; fm < 2; fm++)
        for (int side = 0; side < 2; side++)
            if (!(f->by_headroom[fm][side] = malloc(ncell * sizeof(an_headroom))))
                return -1;
    const an_whatif_col *col[2] = {&r->wcol[AN_WI_FP16], &r->wcol[AN_WI_BF16]};
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            const an_cell *c = &r->layers[l].cell[k];
            if (c->records == 0 || !(c->absmax > 0) || isinf(c->absmin_nz))
                continue;
            an_headroom h = {(int)l, k, c->absmax, c->absmin_nz, c->absmax_step, c->absmin_step,
                             {0, 0}, {0, 0}};
            for (int fm = 0; fm < 2; fm++) {
                h.over[fm] = log2((float)col[fm]->max_finite / c->absmax);
                h.under[fm] = log2(c->absmin_nz / (float)col[fm]->min_normal);
            }
            for (int fm = 0; fm < 2; fm++)
                for (int side = 0; side < 2; side++)
                    f->by_headroom[fm][side][f->nheadroom] = h;
            f->nheadroom++;
        }
    qsort(f->by_headroom[0][0], f->nheadroom, sizeof(an_headroom), cmp_over0);
    qsort(f->by_headroom[1][0], f->nheadroom, sizeof(an_headroom), cmp_over1);
    qsort(f->by_headroom[0][1], f->nheadroom, sizeof(an_headroom), cmp_under0);
    qsort(f->by_headroom[1][1], f->nheadroom, sizeof(an_headroom), cmp_under1);
    return 0;
}

static void kind_totals(const an_run *r, an_findings *f)
{
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        an_cell_init(&f->kind[k]);
    an_cell_init(&f->all);
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++)
            an_cell_merge(&f->kind[k], &r->layers[l].cell[k]);
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        an_cell_merge(&f->all, &f->kind[k]);
}

/* ------------------------------------------------------------------------------------------ */

an_finding *fadd(fctx *x, an_fid id)
{
    an_finding *f = an_finding_add(&x->F->list, id, x->index);
    if (!f)
        x->oom = 1;
    return f;
}

static void free_tables(an_findings *f)
{
    for (int fm = 0; fm < 2; fm++)
        for (int side = 0; side < 2; side++) {
            free(f->by_headroom[fm][side]);
            f->by_headroom[fm][side] = NULL;
        }
    f->nheadroom = 0;
    vec_free(&f->list);
}

/* A run read from its ranks' traces: what the ranks side by side showed, first (ranks.h). */
static void rank_findings(fctx *x)
{
    const an_ranks *R = x->r->ranks;
    for (size_t i = 0; R && i < R->list.n; i++) {
        an_finding *f = fadd(x, R->list.v[i].id);
        if (f) {
            *f = R->list.v[i];
            f->s.run = x->index;
        }
    }
}

/* The findings of r (its figures computed first) into r->find, emptied first. */
static int compute(an_run *r, int index)
{
    an_findings *F = r->find;
    free_tables(F);
    fctx x = {r, F, index, 0};
    rank_findings(&x);
    kind_totals(r, F);
    F->last_eval = an_final_eval(r);
    F->eval_is_accuracy = strcmp(r->eval_metric, "accuracy") == 0;
    trace_findings(&x);
    nonfinite_findings(&x);
    scale_health_findings(&x);
    eval_findings(&x);
    adam_eps_finding(&x);
    learning_findings(&x);
    data_findings(&x);
    an_range_findings(&x);
    an_update_findings(&x);
    an_clip_findings(&x);
    an_whatif_findings(&x);
    an_recipe_findings(&x);
    return x.oom || headroom_tables(r, F) ? -1 : 0;
}

int an_findings_of(an_run *r, int index)
{
    if (!r->fig && an_figures_of(r))
        return -1;
    if (!r->find && !(r->find = calloc(1, sizeof *r->find)))
        return -1;
    return compute(r, index);
}

int an_findings_refresh(an_run *r, int index)
{
    an_figures_free(r);
    return an_findings_of(r, index);
}

void an_findings_free(an_run *r)
{
    if (r->find) {
        free_tables(r->find);
        free(r->find);
        r->find = NULL;
    }
    an_figures_free(r);
}

void an_run_moved(an_run *r, const an_run *was)
{
    if (!r->find)
        return;
    uintptr_t lo = (uintptr_t)was, hi = lo + sizeof *was, to = (uintptr_t)r;
    an_finding_list *l = &r->find->list;
    for (size_t i = 0; i < l->n; i++)
        for (int k = 0; k < AN_MAXSTR; k++) {
            uintptr_t s = (uintptr_t)l->v[i].str[k];
            if (s >= lo && s < hi)
                l->v[i].str[k] = (const char *)(to + (s - lo));
        }
}

const an_finding_list *an_run_findings(const an_run *r)
{
    static const an_finding_list none = {0};
    return r->find ? &r->find->list : &none;
}

const an_finding *an_run_finding(const an_run *r, an_fid id)
{
    return an_finding_find(an_run_findings(r), id, -1);
}

const an_finding *an_run_unhealthy(const an_run *r)
{
    static const an_fid order[] = {F_NOT_COMPLETE, F_LOSS_NONFINITE, F_FWD_NONFINITE,
                                   F_EVAL_NONFINITE, F_SKIPS_ABOVE_LIMIT, F_NO_LOSS_SCALING, F_DOES_NOT_LEARN};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const an_finding *f = an_run_finding(r, order[i]);
        if (f)
            return f;
    }
    return NULL;
}

int an_run_learns(const an_run *r)
{
    if (an_run_finding(r, F_LEARNS))
        return 1;
    if (an_run_finding(r, F_DOES_NOT_LEARN) || an_run_finding(r, F_LEARNS_NOTHING) ||
        an_run_finding(r, F_DIVERGED) || an_run_finding(r, F_LOSS_NONFINITE))
        return 0;
    return an_run_finding(r, F_NOT_LEARNING) ? -1 : 1;
}
