/*
 * figures.c - the headline figures of a run (figures.h), each computed here and nowhere else.
 */
#include "analysis/figures.h"
#include "util/sort.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const an_fig_row rows[AN_NFIGS] = {
    [FIG_STEPS] = {"steps", U_COUNT},
    [FIG_LOSS_FIRST] = {"first_training_loss", U_LOSS},
    [FIG_LOSS_LAST] = {"final_training_loss", U_LOSS},
    [FIG_LOSS_MIN] = {"lowest_training_loss", U_LOSS},
    [FIG_LOSS_WINDOW] = {"final_window_training_loss", U_LOSS},
    [FIG_EVAL_LOSS] = {"final_eval_loss", U_LOSS},
    [FIG_EVAL_SE] = {"final_eval_loss_se", U_LOSS},
    [FIG_EVAL_METRIC] = {"final_eval_metric", U_NONE},
    [FIG_SCALE_INIT] = {"initial_loss_scale", U_SCALE},
    [FIG_SCALE_MIN] = {"lowest_loss_scale", U_SCALE},
    [FIG_SCALE_FINAL] = {"final_loss_scale", U_SCALE},
    [FIG_BACKOFFS] = {"scale_backoffs", U_COUNT},
    [FIG_GROWTHS] = {"scale_growths", U_COUNT},
    [FIG_OVERFLOWS_AT_MIN] = {"overflows_at_min_scale", U_COUNT},
    [FIG_SKIPPED] = {"skipped_steps", U_COUNT},
    [FIG_SKIP_SHARE] = {"skipped_step_share", U_SHARE},
    [FIG_SKIPPED_AFTER] = {"skipped_after_calibration", U_COUNT},
    [FIG_NONFINITE_EVENTS] = {"nonfinite_events", U_COUNT},
    [FIG_LOSS_SPIKES] = {"loss_spikes", U_COUNT},
    [FIG_DIVERGENCE] = {"divergence_step", U_STEP},
    [FIG_NONFINITE_ACT] = {"first_nonfinite_activation", U_COUNT},
    [FIG_NONFINITE_WEIGHTS] = {"first_nonfinite_weights", U_STEP},
    [FIG_FP16_HEADROOM] = {"fp16_headroom", U_BINADES},
    [FIG_FP16_ACT_HEADROOM] = {"fp16_activation_headroom", U_BINADES},
    [FIG_FP16_FLUSH] = {"fp16_flush_share", U_SHARE},
    [FIG_FP16_FLUSH_AT_SCALE] = {"fp16_flush_share_at_scale", U_SHARE},
    [FIG_FP16_WGRAD_FLUSH] = {"fp16_weight_gradient_flush_share", U_SHARE},
    [FIG_ZERO_GRAD] = {"zero_weight_gradient_share", U_SHARE},
    [FIG_LOST] = {"lost_update_share", U_SHARE},
    [FIG_LOST_IF_FP16] = {"lost_update_share_if_fp16_weights", U_SHARE},
    [FIG_LOST_IF_BF16] = {"lost_update_share_if_bf16_weights", U_SHARE},
    [FIG_UPDATE_RATIO] = {"update_weight_ratio", U_RATIO},
    [FIG_STEP_TIME] = {"median_step_time_ms", U_MS},
    [FIG_PEAK_MEMORY] = {"peak_memory_bytes", U_BYTES},
};

const an_fig_row *an_fig_row_get(an_figid id)
{
    return (int)id >= 0 && id < AN_NFIGS ? &rows[id] : NULL;
}

static an_figval val(double v) { return (an_figval){v, -1, -1, -1, 0}; }
static an_figval at(double v, int64_t step) { return (an_figval){v, -1, -1, step, 0}; }

/* Losses and evaluations. */
static void loss_figures(const an_run *r, an_figval *f)
{
    f[FIG_STEPS] = val((double)r->nsteps);
    if (r->nsteps) {
        f[FIG_LOSS_FIRST] = at(r->loss_first, r->first_step);
        f[FIG_LOSS_LAST] = at(r->loss_last, r->last_step);
        f[FIG_LOSS_WINDOW] = val(r->tail_mean);
    }
    if (!isnan(r->loss_min))
        f[FIG_LOSS_MIN] = at(r->loss_min, r->loss_min_step);
    const ampdiag_trace_eval *e = an_final_eval(r);
    if (e) {
        f[FIG_EVAL_LOSS] = at(e->loss, e->step);
        f[FIG_EVAL_SE] = at(e->loss_se, e->step);
        f[FIG_EVAL_METRIC] = at(e->metric, e->step);
    }
}

/* The loss scale, skipped steps, events, spikes, divergence. */
static void stability_figures(const an_run *r, an_figval *f)
{
    if (r->nsteps && r->scaled) {
        f[FIG_SCALE_INIT] = at(r->scale_init, r->first_step);
        f[FIG_SCALE_MIN] = at(r->scale_min, r->scale_min_step);
        f[FIG_SCALE_FINAL] = at(r->scale_final, r->last_step);
    }
    f[FIG_BACKOFFS] = val((double)r->backoffs);
    f[FIG_GROWTHS] = val((double)r->growths);
    f[FIG_OVERFLOWS_AT_MIN] = val((double)r->overflows_at_min);
    f[FIG_SKIPPED] = at((double)r->skipped, r->skipped ? r->first_skip_step : -1);
    f[FIG_SKIP_SHARE] = val(r->nsteps ? (double)r->skipped / (double)r->nsteps : NAN);
    f[FIG_SKIPPED_AFTER] = val((double)r->skipped_after);
    size_t ne = r->by_code[AMPDIAG_EV_NAN_FORWARD] + r->by_code[AMPDIAG_EV_INF_FORWARD] +
                r->by_code[AMPDIAG_EV_NAN_BACKWARD] + r->by_code[AMPDIAG_EV_INF_BACKWARD];
    f[FIG_NONFINITE_EVENTS] = val((double)ne);
    if (r->fwd_nonfinite_step >= 0) {
        f[FIG_NONFINITE_EVENTS].layer = r->fwd_nonfinite_layer;
        f[FIG_NONFINITE_EVENTS].kind = AMPDIAG_KIND_ACTIVATION;
        f[FIG_NONFINITE_EVENTS].step = r->fwd_nonfinite_step;
    } else if (r->first_nonfinite.step >= 0) {
        f[FIG_NONFINITE_EVENTS].layer = r->first_nonfinite.layer;
        f[FIG_NONFINITE_EVENTS].step = r->first_nonfinite.step;
    }
    f[FIG_LOSS_SPIKES] = at((double)r->loss_spikes, r->n_spike_listed ? r->spike_steps[0] : -1);
    if (r->diverged)
        f[FIG_DIVERGENCE] = at((double)r->divergence_step, r->divergence_step);
}

static uint64_t nonfinite(const an_cell *c) { return c->nan + c->posinf + c->neginf; }

/* The first NaN/inf activation record and the first non-finite weights. */
static void nonfinite_figures(const an_run *r, an_figval *f)
{
    if (r->fwd_nonfinite_layer >= 0 && (size_t)r->fwd_nonfinite_layer < r->nlayers) {
        const an_cell *a = &r->layers[r->fwd_nonfinite_layer].cell[AMPDIAG_KIND_ACTIVATION];
        f[FIG_NONFINITE_ACT] = (an_figval){(double)nonfinite(a), r->fwd_nonfinite_layer,
                                           AMPDIAG_KIND_ACTIVATION, r->fwd_nonfinite_step, 0};
    }
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_cell *w = &r->layers[l].cell[AMPDIAG_KIND_WEIGHT];
        an_figval *g = &f[FIG_NONFINITE_WEIGHTS];
        if (nonfinite(w) && (isnan(g->v) || w->first_nonfinite_step < g->step))
            *g = (an_figval){(double)w->first_nonfinite_step, (int)l, AMPDIAG_KIND_WEIGHT,
                             w->first_nonfinite_step, 0};
    }
}

/* Least FP16 overflow headroom over the activations and weights of layers run in 16 bits: an
 * FP16 run's layer that held inf has overflowed (-inf, the first such); else
 * log2(65504 / absmax). */
static void headroom_figure(const an_run *r, an_figval *f)
{
    an_figval *h = &f[FIG_FP16_HEADROOM];
    int inf = 0;
    for (size_t l = 0; l < r->nlayers && !inf; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op)
            continue;
        for (int k = AMPDIAG_KIND_ACTIVATION; k <= AMPDIAG_KIND_WEIGHT && !inf; k += 2) {
            const an_cell *c = &L->cell[k];
            if (!c->records)
                continue;
            if (r->prec == PREC_FP16 && !L->island && c->posinf + c->neginf) {
                *h = (an_figval){-INFINITY, (int)l, k, c->first_nonfinite_step, 0};
                inf = 1;
            } else if (c->absmax > 0) {
                double b = log2(an_k(K_FP16_MAX) / c->absmax);
                if (isnan(h->v) || b < h->v)
                    *h = (an_figval){b, (int)l, k, c->absmax_step, 0};
            }
        }
    }
    an_figval *a = &f[FIG_FP16_ACT_HEADROOM];
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_cell *c = &r->layers[l].cell[AMPDIAG_KIND_ACTIVATION];
        if (c->absmax > 0 && !r->layers[l].fp32_op) {
            double b = log2(an_k(K_FP16_MAX) / c->absmax);
            if (isnan(a->v) || b < a->v)
                *a = (an_figval){b, (int)l, AMPDIAG_KIND_ACTIVATION, c->absmax_step, 0};
        }
    }
}

/* The FP16 flush share of the gradients of the layers run in 16 bits, from the what-if counts
 * of the values as the run held them: without loss scaling for an unscaled run, at its loss
 * scale for a scaled one (the other not known from the counts). An FP16 run held them in FP16
 * already: neither applies. */
static void flush_figure(const an_run *r, an_figval *f)
{
    an_figval *g = &f[r->scaled ? FIG_FP16_FLUSH_AT_SCALE : FIG_FP16_FLUSH];
    if (r->prec == PREC_FP16) {
        f[FIG_FP16_FLUSH].na = f[FIG_FP16_FLUSH_AT_SCALE].na = 1;
        return;
    }
    if (!r->scaled)
        f[FIG_FP16_FLUSH_AT_SCALE].na = 1;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op)
            continue;
        for (int k = AMPDIAG_KIND_ACTIVATION_GRAD; k <= AMPDIAG_KIND_WEIGHT_GRAD; k += 2) {
            const an_cell *c = &L->cell[k];
            uint64_t z = an_cell_nonzero(c);
            if (!z)
                continue;
            double s = (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW] / (double)z;
            if (isnan(g->v) || s > g->v)
                *g = (an_figval){s, (int)l, k, -1, 0};
        }
    }
}

/* Updates: lost shares, the update/weight ratio; zero weight gradients. */
static void update_figures(const an_run *r, an_figval *f)
{
    double unz = r->update_nonzero ? (double)r->update_nonzero : NAN;
    f[FIG_LOST] = val((double)r->lost / unz);
    f[FIG_LOST_IF_FP16] = val(r->lost_if_fields ? (double)r->lost_if[0] / unz : NAN);
    f[FIG_LOST_IF_BF16] = val(r->lost_if_fields ? (double)r->lost_if[1] / unz : NAN);
    f[FIG_UPDATE_RATIO] = val(isfinite(r->ratio_median) ? r->ratio_median : r->step_ratio_median);
    f[FIG_UPDATE_RATIO].kind = isfinite(r->ratio_median) ? AMPDIAG_KIND_UPDATE : -1;
    an_figval *z = &f[FIG_ZERO_GRAD], *w = &f[FIG_FP16_WGRAD_FLUSH];
    *z = *w = val(0);
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_cell *g = &r->layers[l].cell[AMPDIAG_KIND_WEIGHT_GRAD];
        uint64_t finite = g->count - nonfinite(g), nz = finite - g->zero;
        if (finite > 0 && (double)g->zero / (double)finite > z->v)
            *z = (an_figval){(double)g->zero / (double)finite, (int)l, AMPDIAG_KIND_WEIGHT_GRAD, -1, 0};
        double fu = (double)g->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW];
        if (nz > 0 && fu / (double)nz > w->v)
            *w = (an_figval){fu / (double)nz, (int)l, AMPDIAG_KIND_WEIGHT_GRAD, -1, 0};
    }
}

/* The median step time: of the steps' wall_ms that were recorded (finite, > 0; a writer that
 * does not time its steps writes 0 or NaN). Returns 0, or -1 when out of memory. */
static int time_figure(const an_run *r, an_figval *f)
{
    if (!r->nsteps)
        return 0;
    double *t = malloc(r->nsteps * sizeof *t);
    if (!t)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        if (isfinite(r->steps[i].wall_ms) && r->steps[i].wall_ms > 0)
            t[n++] = r->steps[i].wall_ms;
    if (n)
        f[FIG_STEP_TIME] = val(median_doubles(t, n));
    free(t);
    return 0;
}

int an_figures_of(an_run *r)
{
    an_figures *F = r->fig = malloc(sizeof *r->fig);
    if (!F)
        return -1;
    for (int i = 0; i < AN_NFIGS; i++)
        F->f[i] = val(NAN);
    if (r->peak_memory > 0 && isfinite(r->peak_memory))
        F->f[FIG_PEAK_MEMORY] = val(r->peak_memory);
    loss_figures(r, F->f);
    stability_figures(r, F->f);
    nonfinite_figures(r, F->f);
    headroom_figure(r, F->f);
    flush_figure(r, F->f);
    update_figures(r, F->f);
    if (time_figure(r, F->f)) {
        an_figures_free(r);
        return -1;
    }
    return 0;
}

void an_figures_free(an_run *r)
{
    free(r->fig);
    r->fig = NULL;
}

an_figval an_fig(const an_run *r, an_figid id)
{
    if (!r->fig || (int)id < 0 || id >= AN_NFIGS)
        return val(NAN);
    return r->fig->f[id];
}

void an_cell_figs_of(const an_run *r, const an_cell *c, int col, an_cell_figs *o)
{
    memset(o, 0, sizeof *o);
    const an_whatif_col *w = col >= 0 && col < r->nwcol ? &r->wcol[col] : NULL;
    o->values = an_cell_whatif(c, col, &o->overflow, &o->underflow, &o->subnormal);
    double nv = o->values ? (double)o->values : NAN;
    uint64_t nz = an_cell_nonzero(c);
    o->overflow_share = (double)o->overflow / nv;
    o->underflow_share = (double)o->underflow / nv;
    o->subnormal_share = (double)o->subnormal / nv;
    o->underflow_nonzero_share = nz ? (double)o->underflow / (double)nz : NAN;
    o->lost_share = nz ? (double)c->lost / (double)nz : NAN;
    o->over_headroom = w && c->absmax > 0 ? log2(w->max_finite / c->absmax) : NAN;
    o->under_headroom = w && isfinite(c->absmin_nz) ? log2(c->absmin_nz / w->min_normal) : NAN;
}
