/*
 * compare.c - runs compared with a baseline (compare.h): labels, layers matched by name, what
 * differs between the runs' configurations, the loss gap of each run and the noise band it is
 * judged against, and the layers whose activations deviate most.
 */
#include "analysis/compare.h"
#include "analysis/load_internal.h"
#include "util/sort.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * Comparison
 * ------------------------------------------------------------------------------------------ */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

void an_label_runs(an_run *runs, size_t n)
{
    int lr_differs = 0, seed_differs = 0;
    for (size_t i = 1; i < n; i++) {
        if (!(runs[i].lr == runs[0].lr) && !(isnan(runs[i].lr) && isnan(runs[0].lr)))
            lr_differs = 1;
        if (runs[i].seed != runs[0].seed)
            seed_differs = 1;
    }
    for (size_t i = 0; i < n; i++) {
        an_run *r = &runs[i];
        int len = snprintf(r->label, sizeof r->label, "%s", r->precision[0] ? r->precision : "?");
        if (lr_differs && len > 0 && (size_t)len < sizeof r->label)
            len += snprintf(r->label + len, sizeof r->label - (size_t)len, " lr %g", r->lr);
        if (seed_differs && len > 0 && (size_t)len < sizeof r->label)
            snprintf(r->label + len, sizeof r->label - (size_t)len, " seed %" PRId64, r->seed);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (i != j && strcmp(runs[i].label, runs[j].label) == 0) {
                for (size_t k = 0; k < n; k++)
                    if (strcmp(runs[k].label, runs[i].label) == 0 && k != i)
                        snprintf(runs[k].label, sizeof runs[k].label, "%s", base_name(runs[k].path));
                snprintf(runs[i].label, sizeof runs[i].label, "%s", base_name(runs[i].path));
            }
}

/* Mean of the finite training losses with step in (from, to]. */
static double mean_loss(const an_run *r, int64_t from, int64_t to, size_t *nfin, size_t *ntot)
{
    size_t i = an_step_lower_bound(r, from + 1);
    double s = 0;
    size_t k = 0, t = 0;
    for (; i < r->nsteps && r->st_step[i] <= to; i++) {
        t++;
        if (isfinite(r->st_loss[i])) {
            s += r->st_loss[i];
            k++;
        }
    }
    if (nfin)
        *nfin = k;
    if (ntot)
        *ntot = t;
    if (t && k < t)
        return INFINITY;
    return k ? s / (double)k : NAN;
}

/* The metric of a run for the gap: eval loss at `eval_step` (if >= 0) or the training-loss mean
 * over (from, to]. */
static double metric_of(const an_run *r, int eval, int64_t eval_step, int64_t from, int64_t to)
{
    if (eval) {
        for (size_t i = 0; i < r->nevals; i++)
            if (r->evals[i].step == eval_step)
                return isfinite(r->evals[i].loss) ? r->evals[i].loss : INFINITY;
        return NAN;
    }
    return mean_loss(r, from, to, NULL, NULL);
}

static int64_t last_common_eval(const an_run *a, const an_run *b)
{
    for (size_t i = a->nevals; i-- > 0;)
        for (size_t j = b->nevals; j-- > 0;)
            if (a->evals[i].step == b->evals[j].step)
                return a->evals[i].step;
    return -1;
}

static int cmp_dev(const void *a, const void *b)
{
    const an_layer_dev *x = a, *y = b;
    if (x->rel > y->rel) return -1;
    if (x->rel < y->rel) return 1;
    return x->layer - y->layer;
}

static int same_config_but_seed(const an_run *a, const an_run *b)
{
    return a->prec == b->prec && strcmp(a->precision, b->precision) == 0 && strcmp(a->model, b->model) == 0 &&
           strcmp(a->data, b->data) == 0 && strcmp(a->optimizer, b->optimizer) == 0 &&
           (a->lr == b->lr || (isnan(a->lr) && isnan(b->lr))) && a->batch == b->batch &&
           a->seed != b->seed;
}

/* c->layer_map: each run's layers matched to the baseline's by name (-1: none), with a note
 * for a run whose layers do not all match. 0, or -1 when out of memory. */
static int match_layers(an_run *runs, size_t n, size_t base, an_comparison *c)
{
    const an_run *b = &runs[base];
    for (size_t i = 0; i < n; i++) {
        an_run *r = &runs[i];
        c->layer_map[i] = malloc((r->nlayers ? r->nlayers : 1) * sizeof(int));
        if (!c->layer_map[i])
            return -1;
        size_t matched = 0;
        for (size_t l = 0; l < r->nlayers; l++) {
            c->layer_map[i][l] = -1;
            for (size_t m = 0; m < b->nlayers; m++)
                if (strcmp(r->layers[l].name, b->layers[m].name) == 0) {
                    c->layer_map[i][l] = (int)m;
                    matched++;
                    break;
                }
        }
        if (i != base && (matched < r->nlayers || matched < b->nlayers))
            strlist_addf(&c->notes,
                         "%s: %zu of its %zu layers match the baseline's %zu by name; the others are "
                         "reported but not compared",
                         r->label, matched, r->nlayers, b->nlayers);
    }
    return 0;
}

/* A layer that one run's autocast kept in FP32 is an FP32 op in every run of the comparison:
 * the FP32 baseline cannot record what autocast would do, and its range rules must not predict
 * 16-bit overflow in a layer that never runs in 16 bits. */
static void share_fp32_ops(an_run *runs, size_t n, size_t base, const an_comparison *c)
{
    an_run *b = &runs[base];
    for (size_t i = 0; i < n; i++)
        for (size_t l = 0; l < runs[i].nlayers; l++)
            if (runs[i].layers[l].fp32_op && c->layer_map[i][l] >= 0)
                b->layers[c->layer_map[i][l]].fp32_op = 1;
    for (size_t i = 0; i < n; i++)
        for (size_t l = 0; l < runs[i].nlayers; l++)
            if (c->layer_map[i][l] >= 0 && b->layers[c->layer_map[i][l]].fp32_op)
                runs[i].layers[l].fp32_op = 1;
}

/* A note on a run that did not finish: cut off (still 'running') or interrupted. */
static void note_status(an_comparison *c, const an_run *r)
{
    if (r->cut_off)
        strlist_addf(&c->notes,
                     "%s: cut off (status still 'running'): %zu steps up to its last flush",
                     r->label, r->nsteps);
    else if (r->status == AMPDIAG_STATUS_INTERRUPTED)
        strlist_addf(&c->notes, "%s: interrupted after %zu steps", r->label, r->nsteps);
}

/* A note for each way run r's configuration differs from the baseline b's, saying what it
 * means for the comparison. */
static void note_config(an_comparison *c, const an_run *r, const an_run *b)
{
    if (strcmp(r->model, b->model))
        strlist_addf(&c->notes,
                     "%s: model '%s' differs from the baseline's '%s': layers are matched by name "
                     "and the loss gap mixes model and precision",
                     r->label, r->model, b->model);
    if (strcmp(r->data, b->data))
        strlist_addf(&c->notes,
                     "%s: data '%s' differs from the baseline's '%s': losses are not comparable",
                     r->label, r->data, b->data);
    if (r->seed != b->seed)
        strlist_addf(&c->notes,
                     "%s: seed %" PRId64 " differs from the baseline's %" PRId64
                     ": the gap includes seed-to-seed noise",
                     r->label, r->seed, b->seed);
    if (r->nsteps != b->nsteps)
        strlist_addf(&c->notes,
                     "%s: %zu steps recorded, the baseline %zu: curves are compared over the "
                     "steps both have",
                     r->label, r->nsteps, b->nsteps);
    if (!(r->lr == b->lr) && !(isnan(r->lr) && isnan(b->lr)))
        strlist_addf(&c->notes,
                     "%s: lr %g differs from the baseline's %g: its gap measures the learning "
                     "rate as well as the precision",
                     r->label, r->lr, b->lr);
    if (strcmp(r->optimizer, b->optimizer))
        strlist_addf(&c->notes, "%s: optimizer %s differs from the baseline's %s", r->label,
                     r->optimizer, b->optimizer);
    if (r->batch != b->batch)
        strlist_addf(&c->notes, "%s: batch %" PRId64 " differs from the baseline's %" PRId64,
                     r->label, r->batch, b->batch);
}

/* Comparability: a note on each run that did not finish, on each difference from the
 * baseline's configuration, and on a baseline that is not an FP32 trace. */
static void note_differences(const an_run *runs, size_t n, size_t base, an_comparison *c)
{
    const an_run *b = &runs[base];
    for (size_t i = 0; i < n; i++) {
        note_status(c, &runs[i]);
        if (i != base)
            note_config(c, &runs[i], b);
    }
    if (!c->baseline_is_fp32) {
        int any_fp32 = 0;
        for (size_t i = 0; i < n; i++)
            any_fp32 |= runs[i].prec == PREC_FP32;
        if (any_fp32)
            strlist_addf(&c->notes, "the baseline is %s (%s), not an FP32 trace: gaps are measured "
                         "against it", b->label, b->path);
        else
            strlist_addf(&c->notes,
                         "no FP32 trace given: the baseline is %s (%s); gaps are measured against it",
                         b->label, b->path);
    }
}

/* The curves' gap: of 10 segments of the steps both runs have (span steps from `first`), the
 * one where run r's mean loss is furthest from the baseline b's (relative), into g. */
static void curve_gap(an_gap *g, const an_run *b, const an_run *r, int64_t first, int64_t span)
{
    double worst = 0;
    int have_seg = 0;
    for (int s = 0; s < 10 && span >= 10; s++) {
        int64_t from = first - 1 + span * s / 10, to = first - 1 + span * (s + 1) / 10;
        double mb = mean_loss(b, from, to, NULL, NULL), mr = mean_loss(r, from, to, NULL, NULL);
        if (!isfinite(mb) || isnan(mr) || mb == 0)
            continue;
        double rel = isinf(mr) ? INFINITY : (mr - mb) / fabs(mb);
        if (!have_seg || fabs(rel) > fabs(worst)) {
            worst = rel;
            g->curve_max_from = from + 1;
            g->curve_max_to = to;
        }
        have_seg = 1;
    }
    if (have_seg)
        g->curve_max_rel = worst;
}

/* Run r's loss gap to the baseline b (g left unknown for the baseline itself, is_base, or a
 * run without steps): the metric is the final eval loss at a step both have in the final
 * window, else the training loss's mean over that window; then the curves' gap. */
static void loss_gap(an_gap *g, const an_run *b, const an_run *r, int is_base)
{
    g->rel = g->base = g->value = g->curve_max_rel = NAN;
    g->step = -1;
    g->curve_max_from = g->curve_max_to = -1;
    if (is_base || b->nsteps == 0 || r->nsteps == 0)
        return;
    int64_t es = last_common_eval(b, r);
    int64_t lend = r->last_step < b->last_step ? r->last_step : b->last_step;
    int64_t first = b->first_step > r->first_step ? b->first_step : r->first_step;
    int64_t span = lend - first + 1;
    int64_t w = span / 10 < 10 ? 10 : span / 10;
    if (es >= 0 && es >= lend - w) {
        g->eval = 1;
        g->step = es;
    } else {
        g->eval = 0;
        g->step = lend;
    }
    g->base = metric_of(b, g->eval, g->step, lend - w, lend);
    g->value = metric_of(r, g->eval, g->step, lend - w, lend);
    g->have = !isnan(g->base) && !isnan(g->value);
    if (g->have)
        g->rel = isinf(g->value) ? INFINITY
                 : isinf(g->base) ? -INFINITY
                                  : (g->value - g->base) / fabs(g->base);
    curve_gap(g, b, r, first, span);
}

/* The noise band: 2 sigma over runs of the baseline's configuration with other seeds (their
 * final eval loss, or final-window training loss if one has no evaluation), else max(1 %,
 * 2 * standard error of the baseline's final eval loss over its validation examples), else (a
 * trace without that standard error) max(1 %, 2 * standard error of the baseline's final-window
 * training loss). */
static void noise_band(const an_run *runs, size_t n, size_t base, an_comparison *c)
{
    const an_run *b = &runs[base];
    if (isfinite(b->tail_mean) && b->tail_mean != 0 && b->tail_w > 1)
        c->tail_noise_rel = 2 * b->tail_sd / sqrt((double)b->tail_w) / fabs(b->tail_mean);
    double vals[64];
    size_t k = 0;
    int use_eval = 1;
    for (size_t i = 0; i < n && k < 64; i++)
        if (i == base || same_config_but_seed(&runs[i], b))
            if (runs[i].nevals == 0)
                use_eval = 0;
    for (size_t i = 0; i < n && k < 64; i++) {
        if (i != base && !same_config_but_seed(&runs[i], b))
            continue;
        const an_run *r = &runs[i];
        double v = use_eval ? r->evals[r->nevals - 1].loss : r->tail_mean;
        if (isfinite(v))
            vals[k++] = v;
    }
    if (k >= 2) {
        double m = 0, ss = 0;
        for (size_t i = 0; i < k; i++)
            m += vals[i];
        m /= (double)k;
        for (size_t i = 0; i < k; i++)
            ss += (vals[i] - m) * (vals[i] - m);
        c->band = 2 * sqrt(ss / (double)(k - 1)) / fabs(m);
        c->band_from_seeds = 1;
        c->band_seeds = k;
    } else if (b->nevals && isfinite(b->evals[b->nevals - 1].loss_se) &&
               isfinite(b->evals[b->nevals - 1].loss) && b->evals[b->nevals - 1].loss != 0) {
        /* the noise of the quantity judged: the baseline's eval loss, 2 standard errors of its
         * mean over the validation examples */
        const ampdiag_trace_eval *e = &b->evals[b->nevals - 1];
        c->band = fmax(0.01, 2 * e->loss_se / fabs(e->loss));
        c->band_from_eval = 1;
    } else {
        c->band = isfinite(c->tail_noise_rel) ? fmax(0.01, c->tail_noise_rel) : 0.01;
    }
}

/* The median, over the steps both series have, of |x - y| / y where y > 0, into *med, and
 * the number of such steps into *k (*med untouched when there is none). 0, or -1 when out of
 * memory. */
static int rms_deviation(const an_series *x, const an_series *y, size_t *k, double *med)
{
    double *rel = malloc((x->n < y->n ? x->n : y->n) * sizeof *rel + sizeof *rel);
    if (!rel)
        return -1;
    size_t p = 0, q = 0, nk = 0;
    while (p < x->n && q < y->n) {
        const an_sample *a = &x->v[p], *b = &y->v[q];
        if (a->step < b->step)
            p++;
        else if (a->step > b->step)
            q++;
        else {
            if (b->v > 0)
                rel[nk++] = fabs(a->v - b->v) / b->v;
            p++;
            q++;
        }
    }
    if (nk)
        *med = median_doubles(rel, nk);
    *k = nk;
    free(rel);
    return 0;
}

/* c->dev[i]: run i's layers (those matched) by the median deviation of their activation rms
 * from the baseline's at common steps, largest first. 0, or -1 when out of memory. */
static int layer_deviation(an_run *runs, size_t i, size_t base, an_comparison *c)
{
    const an_run *r = &runs[i], *b = &runs[base];
    c->dev[i] = calloc(r->nlayers ? r->nlayers : 1, sizeof **c->dev);
    if (!c->dev[i])
        return -1;
    size_t nd = 0;
    for (size_t l = 0; l < r->nlayers; l++) {
        int m = c->layer_map[i][l];
        if (m < 0)
            continue;
        size_t k;
        double med = NAN;
        if (rms_deviation(&r->layers[l].act_rms, &b->layers[m].act_rms, &k, &med))
            return -1;
        if (k) {
            c->dev[i][nd].layer = (int)l;
            c->dev[i][nd].n = k;
            c->dev[i][nd].rel = med;
            nd++;
        }
    }
    qsort(c->dev[i], nd, sizeof **c->dev, cmp_dev);
    c->ndev[i] = nd;
    return 0;
}

int an_compare(an_run *runs, size_t n, size_t base, an_comparison *c)
{
    memset(c, 0, sizeof *c);
    c->nruns = n;
    c->baseline = base;
    c->band = NAN;
    c->tail_noise_rel = NAN;
    an_run *b = &runs[base];
    c->baseline_is_fp32 = b->prec == PREC_FP32;
    an_label_runs(runs, n);
    c->gap = calloc(n, sizeof *c->gap);
    c->dev = calloc(n, sizeof *c->dev);
    c->ndev = calloc(n, sizeof *c->ndev);
    c->layer_map = calloc(n, sizeof *c->layer_map);
    if (!c->gap || !c->dev || !c->ndev || !c->layer_map)
        return -1;
    if (match_layers(runs, n, base, c))
        return -1;
    share_fp32_ops(runs, n, base, c);
    note_differences(runs, n, base, c);
    for (size_t i = 0; i < n; i++)
        loss_gap(&c->gap[i], b, &runs[i], i == base);
    noise_band(runs, n, base, c);
    for (size_t i = 0; i < n; i++)
        if (i != base && layer_deviation(runs, i, base, c))
            return -1;
    return c->notes.oom ? -1 : 0;
}

void an_comparison_free(an_comparison *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nruns; i++) {
        if (c->dev)
            free(c->dev[i]);
        if (c->layer_map)
            free(c->layer_map[i]);
    }
    free(c->gap);
    free(c->dev);
    free(c->ndev);
    free(c->layer_map);
    strlist_free(&c->notes);
    memset(c, 0, sizeof *c);
}
