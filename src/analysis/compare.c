/*
 * compare.c - runs compared with a baseline (compare.h): labels, layers matched by name, what
 * differs between the runs' configurations, the loss gap of each run and the noise band it is
 * judged against, and the layers whose activations deviate most.
 */
#include "analysis/compare.h"
#include "analysis/findings.h"
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
            if (a->evals[i].step == b->evals[j].step && a->evals[i].step >= 0)
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

/* A finding of the comparison about run i (judged against run j, or -1). NULL (c->oom set) when
 * out of memory. */
static an_finding *note(an_comparison *c, an_fid id, size_t i, long j)
{
    an_finding *f = an_finding_add(&c->list, id, (int)i);
    if (!f)
        c->oom = 1;
    else
        f->s.run2 = (int32_t)j;
    return f;
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
        an_finding *f;
        if (i != base && (matched < r->nlayers || matched < b->nlayers) &&
            (f = note(c, F_CMP_LAYERS, i, base))) {
            f->v[0] = (double)matched;
            f->v[1] = (double)r->nlayers;
            f->v[2] = (double)b->nlayers;
        }
    }
    return c->oom ? -1 : 0;
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

/* A run that did not finish: cut off (still 'running') or interrupted. */
static void note_status(an_comparison *c, const an_run *r, size_t i)
{
    an_finding *f = NULL;
    if (r->cut_off)
        f = note(c, F_CMP_CUT_OFF, i, -1);
    else if (r->status == AMPDIAG_STATUS_INTERRUPTED)
        f = note(c, F_CMP_INTERRUPTED, i, -1);
    if (f)
        f->v[0] = (double)r->nsteps;
}

/* Two figures of a finding (NULL: nothing). */
static void two(an_finding *f, double a, double b)
{
    if (f) {
        f->v[0] = a;
        f->v[1] = b;
    }
}

/* Two strings of a finding. */
static void two_str(an_finding *f, const char *a, const char *b)
{
    if (f) {
        f->str[0] = a;
        f->str[1] = b;
    }
}

/* Each way run r's configuration differs from the baseline b's (the words say what it means for
 * the comparison). */
static void note_config(an_comparison *c, const an_run *r, size_t i, const an_run *b, size_t bi)
{
    if (strcmp(r->model, b->model))
        two_str(note(c, F_CMP_MODEL, i, bi), r->model, b->model);
    if (strcmp(r->data, b->data))
        two_str(note(c, F_CMP_DATA, i, bi), r->data, b->data);
    if (r->seed != b->seed)
        two(note(c, F_CMP_SEED, i, bi), (double)r->seed, (double)b->seed);
    if (r->nsteps != b->nsteps || r->steps_planned != b->steps_planned) {
        an_finding *f = note(c, F_CMP_STEPS, i, bi);
        two(f, (double)r->nsteps, (double)b->nsteps);
        if (f) {
            f->v[2] = (double)r->steps_planned;
            f->v[3] = (double)b->steps_planned;
        }
    }
    if (!(r->lr == b->lr) && !(isnan(r->lr) && isnan(b->lr)))
        two(note(c, F_CMP_LR, i, bi), r->lr, b->lr);
    if (strcmp(r->optimizer, b->optimizer))
        two_str(note(c, F_CMP_OPTIMIZER, i, bi), r->optimizer, b->optimizer);
    if (r->batch != b->batch)
        two(note(c, F_CMP_BATCH, i, bi), (double)r->batch, (double)b->batch);
}

/* Comparability: each run that did not finish, each difference from the baseline's
 * configuration, and a baseline that is not an FP32 trace. */
static void note_differences(const an_run *runs, size_t n, size_t base, an_comparison *c)
{
    const an_run *b = &runs[base];
    for (size_t i = 0; i < n; i++) {
        note_status(c, &runs[i], i);
        if (i != base)
            note_config(c, &runs[i], i, b, base);
    }
    if (!c->baseline_is_fp32) {
        int any_fp32 = 0;
        for (size_t i = 0; i < n; i++)
            any_fp32 |= runs[i].prec == PREC_FP32;
        an_finding *f = note(c, any_fp32 ? F_CMP_BASELINE_NOT_FP32 : F_CMP_NO_FP32, base, -1);
        if (f)
            f->str[0] = b->path;
    }
}

/* The curves' gap: of 10 segments of the steps both runs have (span steps from `first`), the
 * one where run r's mean loss is furthest from the baseline b's (relative), into g. */
static void curve_gap(an_gap *g, const an_run *b, const an_run *r, int64_t first, int64_t span)
{
    double worst = 0;
    int have_seg = 0;
    int64_t nseg = (int64_t)an_k(K_CURVE_SEGMENTS);
    for (int64_t s = 0; s < nseg && span >= nseg; s++) {
        int64_t from = first - 1 + span * s / nseg, to = first - 1 + span * (s + 1) / nseg;
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
    int64_t wmin = (int64_t)an_k(K_FINAL_WINDOW_MIN);
    int64_t w = (int64_t)((double)span * an_k(K_FINAL_WINDOW_SHARE));
    if (w < wmin)
        w = wmin;
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

/* The paired band of run r against the baseline b at the evaluation of step `step`: both hold
 * that evaluation's examples, as many, all finite: NOISE_SE standard errors of their per-example
 * differences, relative to |base|, into g (paired, examples, paired_band). */
static void paired_band(an_gap *g, const an_run *b, const an_run *r)
{
    g->paired_band = NAN;
    if (!g->have || !g->eval || b->nex1 < 2 || b->nex1 != r->nex1 || b->ex1_step != g->step ||
        r->ex1_step != g->step || !isfinite(g->base) || g->base == 0)
        return;
    double se = an_paired_se(b->ex1_loss, r->ex1_loss, b->nex1, 0, NULL);
    if (!isfinite(se))
        return;
    g->paired = 1;
    g->examples = b->nex1;
    g->paired_band = an_k(K_NOISE_SE) * se / fabs(g->base);
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
        c->tail_noise_rel = an_k(K_NOISE_SE) * b->tail_sd / sqrt((double)b->tail_w) / fabs(b->tail_mean);
    double vals[64];
    size_t k = 0;
    int use_eval = 1;
    for (size_t i = 0; i < n && k < 64; i++)
        if (i == base || same_config_but_seed(&runs[i], b))
            if (!an_final_eval(&runs[i]))
                use_eval = 0;
    for (size_t i = 0; i < n && k < 64; i++) {
        if (i != base && !same_config_but_seed(&runs[i], b))
            continue;
        const an_run *r = &runs[i];
        double v = use_eval ? an_final_eval(r)->loss : r->tail_mean;
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
        c->band = an_k(K_NOISE_SE) * sqrt(ss / (double)(k - 1)) / fabs(m);
        c->band_from_seeds = 1;
        c->band_seeds = k;
    } else if (an_final_eval(b) && isfinite(an_final_eval(b)->loss_se) && isfinite(an_final_eval(b)->loss) &&
               an_final_eval(b)->loss != 0) {
        /* the noise of the quantity judged: the baseline's eval loss, 2 standard errors of its
         * mean over the validation examples */
        const ampdiag_trace_eval *e = an_final_eval(b);
        c->band = fmax(an_k(K_NOISE_BAND_MIN), an_k(K_NOISE_SE) * e->loss_se / fabs(e->loss));
        c->band_from_eval = 1;
    } else {
        double lo = an_k(K_NOISE_BAND_MIN);
        c->band = isfinite(c->tail_noise_rel) ? fmax(lo, c->tail_noise_rel) : lo;
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

/* Each run's loss gap as a finding (F_CMP_GAP), judged against the noise band. */
static void gap_findings(an_comparison *c)
{
    for (size_t i = 0; i < c->nruns; i++) {
        const an_gap *g = &c->gap[i];
        an_finding *f;
        if (!g->have || !(f = note(c, F_CMP_GAP, i, (long)c->baseline)))
            continue;
        const double v[13] = {g->eval, (double)g->step, g->base, g->value, g->rel, g->band,
                              g->rel > g->band, g->curve_max_rel, (double)g->curve_max_from,
                              (double)g->curve_max_to, g->paired, (double)g->examples, g->paired_band};
        memcpy(f->v, v, sizeof v);
        f->s.from = f->s.to = g->step;
    }
}

/* The layers whose activations deviate most from the baseline's, up to DEV_ISLAND_LAYERS of
 * each run, as findings (F_CMP_DEVIATION, rank 1 the most). */
static void deviation_findings(an_comparison *c)
{
    for (size_t i = 0; i < c->nruns; i++)
        for (size_t k = 0; c->dev && c->dev[i] && k < c->ndev[i] && k < an_k(K_DEV_ISLAND_LAYERS); k++) {
            an_finding *f = note(c, F_CMP_DEVIATION, i, (long)c->baseline);
            if (!f)
                return;
            f->s.layer = c->dev[i][k].layer;
            f->s.kind = AMPDIAG_KIND_ACTIVATION;
            f->v[0] = c->dev[i][k].rel;
            f->v[1] = (double)c->dev[i][k].n;
            f->v[2] = (double)(k + 1);
        }
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
    /* the runs' findings again: their index in the comparison, and the FP32 ops shared */
    for (size_t i = 0; i < n; i++)
        if (an_findings_refresh(&runs[i], (int)i))
            return -1;
    note_differences(runs, n, base, c);
    for (size_t i = 0; i < n; i++)
        loss_gap(&c->gap[i], b, &runs[i], i == base);
    noise_band(runs, n, base, c);
    for (size_t i = 0; i < n; i++) {
        an_gap *g = &c->gap[i];
        g->band = c->band;
        if (i == base)
            continue;
        paired_band(g, b, &runs[i]);
        if (g->paired)
            g->band = fmax(an_k(K_NOISE_BAND_MIN), c->band_from_seeds ? fmax(c->band, g->paired_band) : g->paired_band);
    }
    for (size_t i = 0; i < n; i++)
        if (i != base && layer_deviation(runs, i, base, c))
            return -1;
    gap_findings(c);
    deviation_findings(c);
    return c->oom ? -1 : 0;
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
    vec_free(&c->list);
    memset(c, 0, sizeof *c);
}
