/*
 * steps.c - the loader's pass over /steps and /events (load_internal.h): loss, loss scale and
 * skipped steps, the final window, the scaler's events, the events by code, divergence and
 * loss spikes (the live run's detectors of src/monitor/, replayed), the gradient-norm
 * statistics of the clip rule, the update ratio of the steps.
 */
#include "analysis/evidence.h"
#include "analysis/load_internal.h"
#include "monitor/monitor.h"
#include "util/sort.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* First index in the run's (sorted) step table whose step is not below `step`. */
size_t an_step_lower_bound(const an_run *r, int64_t step)
{
    size_t lo = 0, hi = r->nsteps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->st_step[mid] < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Index of a step in the run's step table, or -1. */
long an_step_index(const an_run *r, int64_t step)
{
    if (r->nsteps == 0)
        return -1;
    int64_t off = step - r->st_step[0];
    if (off >= 0 && (uint64_t)off < r->nsteps && r->st_step[off] == step)
        return (long)off;
    size_t lo = an_step_lower_bound(r, step);
    return lo < r->nsteps && r->st_step[lo] == step ? (long)lo : -1;
}

/* The loss scale a step ran with; a step missing from /steps takes the last one before it. */
double an_scale_at(const an_run *r, int64_t step)
{
    long i = an_step_index(r, step);
    if (i < 0) {
        size_t lb = an_step_lower_bound(r, step);
        i = lb > 0 ? (long)lb - 1 : -1;
    }
    double s = i >= 0 ? r->steps[i].loss_scale : 1.0;
    if (r->grads_unscaled)
        return 1.0;
    return isfinite(s) && s > 0 ? s : 1.0;
}

/* The scaler's actions as its events record them: each scale_backoff event is one non-finite
 * step the scaler answered (a backoff when its value, the new scale, is below the scale the
 * step ran with; an overflow at the minimum scale otherwise), each scale_growth one growth.
 * The minimum includes the scale the last backoff left, after the last step record. Traces
 * without scale events keep the counts read off the step records (summarise_steps). */
void an_scale_from_events(an_run *r)
{
    const an_step *st = r->steps;
    size_t n = r->nsteps;
    const ampdiag_trace_event *ev = r->events;
    size_t nev = r->nevents;
    size_t nb = 0, ng = 0, at_min = 0;
    double smin = r->scale_min, sfinal = r->scale_final;
    int64_t smin_step = r->scale_min_step;
    int any = 0;
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].code != AMPDIAG_EV_SCALE_BACKOFF && ev[i].code != AMPDIAG_EV_SCALE_GROWTH)
            continue;
        any = 1;
        long k = an_step_index(r, ev[i].step);
        double ran = k >= 0 ? st[k].loss_scale : NAN;
        double v = ev[i].value;
        if (ev[i].code == AMPDIAG_EV_SCALE_GROWTH) {
            ng++;
        } else if (isnan(ran) || v < ran) {
            nb++;
        } else {
            at_min++;
        }
        if (!isnan(v) && (isnan(smin) || v < smin)) {
            smin = v;
            smin_step = ev[i].step;
        }
        if (n && ev[i].step >= st[n - 1].step && !isnan(v))
            sfinal = v;
    }
    if (!any)
        return;
    r->backoffs = nb;
    r->growths = ng;
    r->overflows_at_min = at_min;
    r->scale_min = smin;
    r->scale_min_step = smin_step;
    r->scale_final = sfinal;
}

/* The final window: the last 10% of the steps (at least 10), its finite losses' mean and
 * standard deviation; the mean is infinite where a loss in it is not finite (diverged). */
static void final_window(an_run *r)
{
    const an_step *st = r->steps;
    size_t n = r->nsteps;
    size_t wmin = (size_t)an_k(K_FINAL_WINDOW_MIN), w = (size_t)((double)n * an_k(K_FINAL_WINDOW_SHARE));
    if (w < wmin)
        w = wmin;
    if (w > n)
        w = n;
    r->tail_w = w;
    double sum = 0, ss = 0;
    size_t k = 0;
    for (size_t i = n - w; i < n; i++)
        if (isfinite(st[i].loss)) {
            sum += st[i].loss;
            k++;
        }
    if (k) {
        r->tail_mean = sum / (double)k;
        for (size_t i = n - w; i < n; i++)
            if (isfinite(st[i].loss))
                ss += (st[i].loss - r->tail_mean) * (st[i].loss - r->tail_mean);
        r->tail_sd = k > 1 ? sqrt(ss / (double)(k - 1)) : 0;
    }
    if (k < w)
        r->tail_mean = INFINITY; /* a non-finite loss at the end: diverged */
}

void an_summarise_steps(an_run *r, const an_options *o)
{
    const an_step *st = r->steps;
    size_t n = r->nsteps;
    r->first_skip_step = -1;
    r->first_nonfinite_loss_step = -1;
    r->loss_min = NAN;
    r->loss_first = r->loss_last = NAN;
    r->scale_init = r->scale_min = r->scale_final = NAN;
    r->tail_mean = r->tail_sd = NAN;
    r->step_ratio_median = NAN;
    if (n == 0)
        return;
    r->first_step = st[0].step;
    r->last_step = st[n - 1].step;
    r->loss_first = st[0].loss;
    r->loss_last = st[n - 1].loss;
    r->scale_init = st[0].loss_scale;
    r->scale_final = st[n - 1].loss_scale;
    r->scale_min = st[0].loss_scale;
    r->scale_min_step = st[0].step;
    size_t wmax = (size_t)an_k(K_WARMUP_MAX), share = (size_t)((double)n * an_k(K_WARMUP_SHARE));
    long warm = o && o->warmup >= 0 ? o->warmup : (long)(share < wmax ? share : wmax);
    r->calib = (size_t)warm;
    int skipped_at_min = 0;
    for (size_t i = 0; i < n; i++) {
        const an_step *s = &st[i];
        if (isfinite(s->loss)) {
            if (isnan(r->loss_min) || s->loss < r->loss_min) {
                r->loss_min = s->loss;
                r->loss_min_step = s->step;
            }
        } else {
            if (r->loss_nonfinite++ == 0)
                r->first_nonfinite_loss_step = s->step;
        }
        double ls = s->loss_scale;
        if (!isnan(ls) && ls != 1.0)
            r->scaled = 1;
        if (ls < r->scale_min) {
            r->scale_min = ls;
            r->scale_min_step = s->step;
        }
        if (i > 0 && ls < st[i - 1].loss_scale)
            r->backoffs++;
        if (i > 0 && ls > st[i - 1].loss_scale)
            r->growths++;
        int at_min = r->scaler_min > 0 && ls <= r->scaler_min;
        r->steps_at_min += at_min;
        int after = (uint64_t)(s->step - r->first_step) >= (uint64_t)warm;
        r->steps_after += after;
        if (s->skipped) {
            if (r->skipped++ == 0)
                r->first_skip_step = s->step; /* (its reason: read_steps) */
            r->skipped_after += after;
            skipped_at_min |= at_min;
        }
    }
    /* a backoff after the last step record shows in the scaler's next value: count the final
     * recorded scale as reached */
    r->collapsed = (r->backoffs > 0 || r->skipped > 0) && r->scaled &&
                   (r->scale_min <= 1.0 || skipped_at_min);
    if (r->scale_min <= 1.0 && r->scaled && r->backoffs == 0 && r->scale_init > 1.0)
        r->collapsed = 1;

    final_window(r);
}

/* Loss spikes and divergence: the live run's detectors (src/monitor/) replayed over /steps. */
static void find_spikes(an_run *r, const an_step *st, size_t n, int64_t *spike_at,
                        size_t *nspike_at, size_t cap)
{
    mon_spike sp;
    mon_spike_init(&sp);
    *nspike_at = 0;
    for (size_t i = 0; i < n; i++) {
        if (!mon_spike_push(&sp, st[i].loss))
            continue;
        if (r->n_spike_listed < sizeof r->spike_steps / sizeof r->spike_steps[0])
            r->spike_steps[r->n_spike_listed++] = st[i].step;
        if (*nspike_at < cap)
            spike_at[(*nspike_at)++] = st[i].step;
        r->loss_spikes++;
    }
}

/* A divergence event the writer recorded decides; a trace without one (another writer, or a
 * run cut off) diverged when its last steps form a streak of the live rule's length, or any
 * streak when its status says diverged. */
void an_find_divergence(an_run *r)
{
    const an_step *st = r->steps;
    size_t n = r->nsteps;
    const ampdiag_trace_event *ev = r->events;
    size_t nev = r->nevents;
    r->divergence_step = -1;
    for (size_t i = 0; i < nev; i++)
        if (ev[i].code == AMPDIAG_EV_DIVERGENCE) {
            r->diverged = 1;
            r->divergence_step = ev[i].step;
            snprintf(r->divergence_why, sizeof r->divergence_why, "%s", ev[i].message);
            return;
        }
    if (n == 0)
        return;
    mon_diverge d;
    mon_diverge_init(&d);
    int dynamic = strcmp(r->loss_scale_mode, "dynamic") == 0;
    int is_static = strncmp(r->loss_scale_mode, "static", 6) == 0;
    long streak = 0;
    int why = 0;
    for (size_t i = 0; i < n; i++) {
        int at_floor = mon_scale_at_floor(dynamic, is_static, st[i].loss_scale, r->scaler_min);
        streak = mon_diverge_push(&d, st[i].step, st[i].loss, st[i].skipped != 0, at_floor, &why);
    }
    if (streak >= MON_DIVERGE_PATIENCE || (streak > 0 && r->status == AMPDIAG_STATUS_DIVERGED)) {
        r->diverged = 1;
        r->divergence_step = why ? d.floor_since : d.since;
        snprintf(r->divergence_why, sizeof r->divergence_why, "%s",
                 why ? "steps skipped in a row with the loss scale at its floor"
                     : "loss non-finite or exploded");
    } else if (r->status == AMPDIAG_STATUS_DIVERGED) {
        r->diverged = 1;
        r->divergence_step = st[n - 1].step;
    }
}

/* The first gradient-norm spike (>= 10x the rolling median of the last norms, once 20 are
 * known) followed by a loss spike within 100 steps, into c; the history h of finite norms so
 * far. */
static void norm_spike(an_clip *c, const mon_window *h, const an_step *s, double g,
                       const int64_t *spikes, size_t nspikes)
{
    if (h->n < 20 || c->norm_spike_step >= 0)
        return;
    double med = mon_window_median(h);
    if (med > 0 && g >= 10 * med)
        for (size_t j = 0; j < nspikes; j++)
            if (spikes[j] >= s->step && spikes[j] <= s->step + 100) {
                c->norm_spike_step = s->step;
                c->norm_spike_loss_step = spikes[j];
                c->norm_spike_ratio = g / med;
                return;
            }
}

/* A step's norm counts for the clip value: finite, not skipped, after the warm-up. */
static int norm_counts(const an_run *r, const an_step *s)
{
    return !s->skipped && isfinite(s->grad_norm) &&
           (uint64_t)(s->step - r->first_step) >= (uint64_t)r->calib;
}

/* The medians of the first and last 10% of the k norms v, the median, P99, P10, MAD and the
 * clip value of them, into c. 0 or -1 (out of memory). */
static int norm_stats(an_clip *c, const double *v, size_t k)
{
    size_t t = k / 10 ? k / 10 : 1;
    double *tmp = malloc((t > k ? t : k) * sizeof *tmp);
    if (!tmp)
        return -1;
    memcpy(tmp, v, t * sizeof *tmp);
    c->median_first = median_doubles(tmp, t);
    memcpy(tmp, v + k - t, t * sizeof *tmp);
    c->median_last = median_doubles(tmp, t);
    memcpy(tmp, v, k * sizeof *tmp);
    sort_doubles(tmp, k);
    c->median = quantile_sorted(tmp, k, 0.5);
    c->p99 = quantile_sorted(tmp, k, 0.99);
    c->p10 = quantile_sorted(tmp, k, 0.10);
    for (size_t i = 0; i < k; i++)
        tmp[i] = fabs(tmp[i] - c->median);
    c->mad = median_doubles(tmp, k);
    free(tmp);
    c->robust = c->median + 3 * 1.4826 * c->mad;
    c->value = fmax(c->p99, c->robust);
    return 0;
}

static int clip_stats(an_run *r, const int64_t *spikes, size_t nspikes)
{
    const an_step *st = r->steps;
    size_t n = r->nsteps;
    an_clip *c = &r->gn;
    c->median = c->mad = c->p99 = c->p10 = c->robust = c->value = NAN;
    c->median_first = c->median_last = NAN;
    c->norm_spike_step = c->norm_spike_loss_step = -1;
    c->warmup = r->calib;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return -1;
    size_t k = 0;
    mon_window w;
    mon_window_init(&w);
    for (size_t i = 0; i < n; i++) {
        c->actually_clipped += st[i].clip_coef < 1.0 && !st[i].skipped;
        double g = st[i].grad_norm;
        if (st[i].skipped || !isfinite(g))
            continue;
        norm_spike(c, &w, &st[i], g, spikes, nspikes);
        mon_window_push(&w, g);
        if (norm_counts(r, &st[i]))
            v[k++] = g;
    }
    c->n = k;
    int rc = k ? norm_stats(c, v, k) : 0;
    free(v);
    /* the steps over the value, in time order */
    for (size_t i = 0; !rc && k && i < n; i++)
        if (norm_counts(r, &st[i]) && st[i].grad_norm > c->value) {
            if (c->n_over_listed < sizeof c->over_steps / sizeof c->over_steps[0])
                c->over_steps[c->n_over_listed++] = st[i].step;
            c->n_over++;
        }
    return rc;
}

/* The events counted by code (unknown codes apart), and the first non-finite event, the first
 * non-finite forward event and the first of an evaluation's forward pass (the earliest step;
 * the first recorded at that step). */
void an_scan_events(an_run *r)
{
    const ampdiag_trace_event *ev = r->events;
    size_t nev = r->nevents;
    for (size_t i = 0; i < nev; i++) {
        int c = ev[i].code;
        if (c < 0 || c >= AMPDIAG_NEVENT_CODES) {
            r->unknown_events++;
            continue;
        }
        r->by_code[c]++;
        int nonfin = c == AMPDIAG_EV_NAN_FORWARD || c == AMPDIAG_EV_INF_FORWARD ||
                     c == AMPDIAG_EV_NAN_BACKWARD || c == AMPDIAG_EV_INF_BACKWARD;
        int fwd = c == AMPDIAG_EV_NAN_FORWARD || c == AMPDIAG_EV_INF_FORWARD;
        int eval = fwd && ev[i].phase == AMPDIAG_PHASE_EVAL;
        an_event_ref *targets[3] = {nonfin ? &r->first_nonfinite : NULL, fwd ? &r->first_forward : NULL,
                                    eval ? &r->eval_forward : NULL};
        for (int j = 0; j < 3; j++) {
            an_event_ref *e = targets[j];
            if (!e || (e->step >= 0 && e->step <= ev[i].step))
                continue;
            e->step = ev[i].step;
            e->layer = ev[i].layer;
            e->code = c;
            e->value = ev[i].value;
            e->rows_from = ev[i].rows_from;
            e->rows_to = ev[i].rows_to;
            snprintf(e->message, sizeof e->message, "%s", ev[i].message);
        }
    }
}

/* The loss spikes (at most 4096), then the clip statistics, which leave them out. 0 or
 * AMPDIAG_TRACE_ENOMEM (message in L->err). */
int an_spikes_and_clip(an_run *r)
{
    enum { MAXSPIKES = 4096 };
    int64_t *spikes = malloc(MAXSPIKES * sizeof *spikes);
    if (!spikes)
        return -1;
    size_t nspikes = 0;
    find_spikes(r, r->steps, r->nsteps, spikes, &nspikes, MAXSPIKES);
    int e = clip_stats(r, spikes, nspikes);
    free(spikes);
    return e;
}

int an_step_ratio_median(an_run *r)
{
    double *tmp = malloc((r->nsteps ? r->nsteps : 1) * sizeof *tmp);
    if (!tmp)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        if (isfinite(r->steps[i].update_ratio))
            tmp[k++] = r->steps[i].update_ratio;
    r->step_ratio_median = median_doubles(tmp, k);
    free(tmp);
    return 0;
}

