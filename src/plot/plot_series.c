/*
 * plot_series.c - the charts of per-step series (plot_internal.h): loss (training and eval,
 * skipped steps and NaN/inf events marked), loss scale (backoffs and growths marked) and
 * gradient norm (with the clip values). Long runs are drawn from chart columns (below).
 */
#include "plot/plot_internal.h"
#include "util/escape.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void all_runs(const struct ctx *c, chart *ch)
{
    for (int i = 0; i < c->nruns; i++)
        if (vec_push(&ch->runs, i))
            return;
}

/* Centred moving average of the finite values of v (w odd); NaN where the window holds none. */
static int moving_average(const double *v, size_t n, size_t w, double *out)
{
    double *sum = malloc((n + 1) * sizeof *sum);
    size_t *cnt = malloc((n + 1) * sizeof *cnt);
    if (!sum || !cnt) {
        free(sum);
        free(cnt);
        return -1;
    }
    sum[0] = 0;
    cnt[0] = 0;
    for (size_t i = 0; i < n; i++) {
        int fin = isfinite(v[i]);
        sum[i + 1] = sum[i] + (fin ? v[i] : 0);
        cnt[i + 1] = cnt[i] + (size_t)fin;
    }
    size_t h = w / 2;
    for (size_t i = 0; i < n; i++) {
        size_t a = i >= h ? i - h : 0, b = i + h + 1 < n ? i + h + 1 : n;
        size_t k = cnt[b] - cnt[a];
        out[i] = k ? (sum[b] - sum[a]) / (double)k : NAN;
    }
    free(sum);
    free(cnt);
    return 0;
}

static size_t smooth_window(size_t n)
{
    size_t w = n / 50;
    if (w < 3)
        return 1;
    return w | 1;
}

/* ------------------------------------------------------------------------------------------
 * Step series of long runs: chart columns
 *
 * A run of more than SERIES_COLS steps is drawn from columns of equal width (a power of two of
 * steps, at most SERIES_COLS columns from its first step): of each column's rows the series
 * writes the one holding the smallest value, the largest, the first non-finite one and the last,
 * and the marks (skipped steps, events) one per column. A line through them covers the pixels a
 * line through every row covers. Shorter runs are written whole.
 * ------------------------------------------------------------------------------------------ */

static int64_t series_width(const struct run *r)
{
    int64_t w = 1;
    if (r->nsteps <= SERIES_COLS)
        return 1;
    int64_t span = r->steps[r->nsteps - 1].step - r->steps[0].step + 1;
    while (span / w >= SERIES_COLS)
        w *= 2;
    return w;
}

/* The column of a step (steps before the first fall into column 0's left neighbours). */
static int64_t series_column(const struct run *r, int64_t w, int64_t step)
{
    int64_t d = step - (r->nsteps ? r->steps[0].step : 0);
    return d >= 0 ? d / w : -1 - (-1 - d) / w;
}

/* keep[i] = 1 for the rows of v[0..nsteps) a chart writes. */
static void series_keep(const struct run *r, const double *v, char *keep)
{
    size_t n = r->nsteps;
    int64_t w = series_width(r);
    memset(keep, w == 1, n);
    for (size_t i = 0; w > 1 && i < n;) {
        int64_t col = series_column(r, w, r->steps[i].step);
        size_t lo = SIZE_MAX, hi = SIZE_MAX, nf = SIZE_MAX, j = i;
        for (; j < n && series_column(r, w, r->steps[j].step) == col; j++) {
            if (!isfinite(v[j])) {
                if (nf == SIZE_MAX)
                    nf = j;
                continue;
            }
            if (lo == SIZE_MAX || v[j] < v[lo])
                lo = j;
            if (hi == SIZE_MAX || v[j] > v[hi])
                hi = j;
        }
        size_t pick[3] = {lo, hi, nf};
        for (int k = 0; k < 3; k++)
            if (pick[k] != SIZE_MAX)
                keep[pick[k]] = 1;
        keep[j - 1] = 1;
        i = j;
    }
}

/* Marks thinned to one per chart column: 1 when a mark at step should be written, *last being
 * the column of the last one written (INT64_MIN before the first). */
static int mark_due(const struct run *r, int64_t step, int64_t *last)
{
    int64_t w = series_width(r);
    if (w == 1)
        return 1;
    int64_t col = series_column(r, w, step);
    if (*last != INT64_MIN && col == *last)
        return 0;
    *last = col;
    return 1;
}

/* Write one block "step value smoothed" for a per-step series of r (which: 0 loss, 1 gradient
 * norm): every row, or those of the chart columns. */
static int write_series_block(FILE *f, const struct run *r, int which, size_t w)
{
    double *v = malloc((r->nsteps ? r->nsteps : 1) * sizeof *v);
    double *s = malloc((r->nsteps ? r->nsteps : 1) * sizeof *s);
    if (!v || !s) {
        free(v);
        free(s);
        return -1;
    }
    for (size_t i = 0; i < r->nsteps; i++)
        v[i] = which == 0 ? r->steps[i].loss : r->steps[i].grad_norm;
    if (which == 1)
        for (size_t i = 0; i < r->nsteps; i++)
            if (!(v[i] > 0))
                v[i] = NAN; /* log axis */
    char *keep = malloc(r->nsteps ? r->nsteps : 1);
    if (!keep || (w > 1 && moving_average(v, r->nsteps, w, s))) {
        free(v);
        free(s);
        free(keep);
        return -1;
    }
    series_keep(r, v, keep);
    for (size_t i = 0; i < r->nsteps; i++) {
        if (!keep[i])
            continue;
        fprintf(f, "%" PRId64 " ", r->steps[i].step);
        put_num(f, v[i]);
        fputc(' ', f);
        put_num(f, w > 1 ? s[i] : v[i]);
        fputc('\n', f);
    }
    if (!r->nsteps)
        fputs("NaN NaN NaN\n", f);
    fputs("\n\n", f);
    free(v);
    free(s);
    free(keep);
    return 0;
}

static int is_nonfinite_event(int code)
{
    return code == AMPDIAG_EV_NAN_FORWARD || code == AMPDIAG_EV_INF_FORWARD ||
           code == AMPDIAG_EV_NAN_BACKWARD || code == AMPDIAG_EV_INF_BACKWARD;
}

/* One block "step scale" of a run (the chart columns' rows of a long one); lo and hi take the
 * range of the valid scales. */
static int write_scale_block(struct ctx *c, FILE *f, const struct run *r, double *lo, double *hi)
{
    double *v = malloc((r->nsteps ? r->nsteps : 1) * sizeof *v);
    char *keep = malloc(r->nsteps ? r->nsteps : 1);
    if (!v || !keep) {
        free(v);
        free(keep);
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < r->nsteps; k++) {
        v[k] = r->steps[k].loss_scale;
        if (!(v[k] > 0) || !isfinite(v[k]))
            v[k] = NAN;
        else {
            *lo = fmin(*lo, v[k]);
            *hi = fmax(*hi, v[k]);
        }
    }
    series_keep(r, v, keep);
    for (size_t k = 0; k < r->nsteps; k++) {
        if (!keep[k])
            continue;
        fprintf(f, "%" PRId64 " ", r->steps[k].step);
        put_num(f, v[k]);
        fputc('\n', f);
    }
    if (!r->nsteps)
        fputs("NaN NaN\n", f);
    fputs("\n\n", f);
    free(v);
    free(keep);
    return 0;
}


/* ------------------------------------------------------------------------------------------
 * loss
 * ------------------------------------------------------------------------------------------ */

struct loss_axis {
    double ymin, ymax, ytop, lo, hi;
    int logy;
    size_t w; /* smoothing window */
};

/* The y axis of the loss chart: a log scale when the loss spans decades (a few zero losses, of
 * saturated logits, then left out of the chart rather than flattening the rest). */
static void loss_axis_of(const struct ctx *c, struct loss_axis *a)
{
    double lo = INFINITY, hi = -INFINITY, lopos = INFINITY;
    size_t nmax = 0, nfin = 0, nonpos = 0;
    for (int i = 0; i < c->nruns; i++) {
        const struct run *r = &c->runs[i];
        nmax = r->nsteps > nmax ? r->nsteps : nmax;
        for (size_t k = 0; k < r->nsteps + r->nevals; k++) {
            double v = k < r->nsteps ? r->steps[k].loss : r->evals[k - r->nsteps].loss;
            if (!isfinite(v))
                continue;
            lo = fmin(lo, v);
            hi = fmax(hi, v);
            nfin++;
            if (v > 0)
                lopos = fmin(lopos, v);
            else
                nonpos++;
        }
    }
    if (!(lo <= hi))
        lo = lopos = 0.1, hi = 10;
    a->logy = lopos < INFINITY && hi / lopos > 20 && (double)nonpos <= 0.05 * (double)nfin;
    if (a->logy) {
        a->lo = lopos;
        a->ymin = lopos / 1.25, a->ymax = hi * 1.6, a->ytop = hi * 1.3;
    } else {
        double span = hi - lo > 0 ? hi - lo : fmax(fabs(hi), 1) * 0.1;
        a->lo = lo;
        a->ymin = lo - 0.05 * span, a->ymax = hi + 0.15 * span, a->ytop = hi + 0.1 * span;
    }
    a->hi = hi;
    a->w = smooth_window(nmax);
}

/* One block of marks "step y": run r's skipped steps, or its first NaN/inf event of each step
 * (y = the loss there, or the top of the chart where it is not finite). Returns the marks in
 * all (before thinning to a column each). */
static size_t loss_marks(FILE *f, const struct run *r, int nonfinite, double ytop)
{
    size_t all = 0, rows = 0;
    int64_t lastcol = INT64_MIN, last = INT64_MIN;
    size_t n = nonfinite ? r->nevents : r->nsteps;
    for (size_t k = 0; k < n; k++) {
        int64_t step;
        if (nonfinite) {
            const ampdiag_trace_event *ev = &r->events[k];
            if (!is_nonfinite_event(ev->code) || (all && ev->step == last))
                continue;
            step = last = ev->step;
        } else {
            if (!r->steps[k].skipped)
                continue;
            step = r->steps[k].step;
        }
        all++;
        if (!mark_due(r, step, &lastcol))
            continue;
        const an_step *st = nonfinite ? find_step(r, step) : &r->steps[k];
        fprintf(f, "%" PRId64 " ", step);
        put_num(f, st && isfinite(st->loss) ? st->loss : ytop);
        fputc('\n', f);
        rows++;
    }
    if (!rows)
        fputs("NaN NaN\n", f);
    fputs("\n\n", f);
    return all;
}

/* One block "step loss metric" of run r's evaluations; 1 when one is finite. */
static int eval_block(FILE *f, const struct run *r)
{
    int any = 0;
    for (size_t k = 0; k < r->nevals; k++) {
        fprintf(f, "%" PRId64 " ", r->evals[k].step);
        put_num(f, r->evals[k].loss);
        fputc(' ', f);
        put_num(f, r->evals[k].metric);
        fputc('\n', f);
        any |= isfinite(r->evals[k].loss);
    }
    if (!r->nevals)
        fputs("NaN NaN NaN\n", f);
    fputs("\n\n", f);
    return any;
}

/* loss.dat, loss-eval.dat, loss-marks.dat; has_eval[i], and the marks in all. */
static int loss_data(struct ctx *c, const struct loss_axis *a, double *has_eval, size_t *nskip, size_t *nnan)
{
    struct out d = {0}, e = {0}, m = {0};
    int rc;
    if ((rc = out_open(c, &d, "loss.dat", "w")) || (rc = out_open(c, &e, "loss-eval.dat", "w")) ||
        (rc = out_open(c, &m, "loss-marks.dat", "w")))
        goto fail;
    fprintf(d.f, "# training loss per run (index = run - 1): step loss centred_mean_of_%zu_steps\n", a->w);
    fprintf(e.f, "# eval loss per run (index = run - 1): step loss metric\n");
    fprintf(m.f, "# markers per run: index 2(run-1) skipped steps, 2(run-1)+1 NaN/inf events; "
                 "step y (y = the loss, or the top of the chart where it is not finite)\n");
    for (int i = 0; i < c->nruns; i++) {
        const struct run *r = &c->runs[i];
        fprintf_text(d.f, "# run %d: %s (%s)\n", i + 1, r->label, r->path);
        if (write_series_block(d.f, r, 0, a->w)) {
            rc = plot_fail(c, PLOT_ENOMEM, "out of memory");
            goto fail;
        }
        fprintf_text(e.f, "# run %d: %s\n", i + 1, r->label);
        has_eval[i] = eval_block(e.f, r);
        fprintf_text(m.f, "# run %d: %s, skipped steps\n", i + 1, r->label);
        *nskip += loss_marks(m.f, r, 0, a->ytop);
        fprintf_text(m.f, "# run %d: %s, NaN/inf in forward or backward\n", i + 1, r->label);
        *nnan += loss_marks(m.f, r, 1, a->ytop);
    }
    if ((rc = out_close(c, &d)) || (rc = out_close(c, &e)) || (rc = out_close(c, &m)))
        goto fail;
    return 0;
fail:
    out_abort(&d);
    out_abort(&e);
    out_abort(&m);
    return rc;
}

int chart_loss(struct ctx *c, chart *ch)
{
    struct loss_axis a;
    loss_axis_of(c, &a);
    size_t nskip = 0, nnan = 0;
    double *he = calloc((size_t)c->nruns, sizeof *he);
    if (!he)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    int rc = loss_data(c, &a, he, &nskip, &nnan);
    if (!rc) {
        all_runs(c, ch);
        char runs[300];
        run_list(c, ch->runs.v, ch->runs.n, runs, sizeof runs);
        snprintf(ch->name, sizeof ch->name, "loss");
        snprintf(ch->what, sizeof ch->what, "Training loss");
        if (a.w > 1)
            snprintf(ch->subtitle, sizeof ch->subtitle, "thin: every step; thick: centred mean over %zu steps; "
                     "dashed with dots: eval loss", a.w);
        else
            snprintf(ch->subtitle, sizeof ch->subtitle, "every step; dashed with dots: eval loss");
        snprintf(ch->desc, sizeof ch->desc, "training and eval loss of %s against step; skipped steps (%zu) "
                 "and NaN/inf events (%zu) marked", runs, nskip, nnan);
        gp_array_num(ch->vars, "has_eval", he, (size_t)c->nruns);
        fprintf(ch->vars, "xmin = %" PRId64 "\nxmax = %" PRId64 "\n", c->xmin, c->xmax);
        gp_var_num(ch->vars, "ymin", a.ymin);
        gp_var_num(ch->vars, "ymax", a.ymax);
        fprintf(ch->vars, "logy = %d\nsmooth_w = %zu\nnskip = %zu\nnnonfinite = %zu\n", a.logy, a.w, nskip, nnan);
        if (a.logy)
            gp_log10_tics(ch->vars, a.ymin, a.ymax);
    }
    free(he);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * loss-scale
 * ------------------------------------------------------------------------------------------ */

/* One block of marks "step scale" of run r: its backoffs (g 0) or growths (g 1), from its
 * scale events, else from the changes of its step records. */
static void scale_marks(FILE *f, const struct run *r, int g)
{
    int code = g ? AMPDIAG_EV_SCALE_GROWTH : AMPDIAG_EV_SCALE_BACKOFF, have_events = 0;
    for (size_t k = 0; k < r->nevents; k++)
        have_events |= r->events[k].code == AMPDIAG_EV_SCALE_BACKOFF || r->events[k].code == AMPDIAG_EV_SCALE_GROWTH;
    size_t cnt = 0;
    int64_t lastcol = INT64_MIN;
    for (size_t k = 0; have_events && k < r->nevents; k++) {
        if (r->events[k].code != code)
            continue;
        const an_step *st = find_step(r, r->events[k].step);
        double y = st ? st->loss_scale : NAN;
        /* an overflow at the minimum scale changes nothing: not a backoff (as the analysis counts) */
        if (!(y > 0) || !isfinite(y) || (!g && !(r->events[k].value < y)) ||
            !mark_due(r, r->events[k].step, &lastcol))
            continue;
        fprintf(f, "%" PRId64 " %.9g\n", r->events[k].step, y);
        cnt++;
    }
    for (size_t k = 0; !have_events && k + 1 < r->nsteps; k++) {
        double a = r->steps[k].loss_scale, b = r->steps[k + 1].loss_scale;
        if (!(a > 0) || !(b > 0) || !isfinite(a) || !isfinite(b) || (g ? !(b > a) : !(b < a)) ||
            !mark_due(r, r->steps[k].step, &lastcol))
            continue;
        fprintf(f, "%" PRId64 " %.9g\n", r->steps[k].step, a);
        cnt++;
    }
    if (!cnt)
        fputs("NaN NaN\n", f);
    fputs("\n\n", f);
}

static int scale_data(struct ctx *c, const chart *ch, double *lo, double *hi)
{
    struct out d = {0}, m = {0};
    int rc;
    if ((rc = out_open(c, &d, "loss-scale.dat", "w")) || (rc = out_open(c, &m, "loss-scale-marks.dat", "w")))
        goto fail;
    fprintf(d.f, "# loss scale per run (index = run - 1): step scale\n");
    fprintf(m.f, "# per run: index 2(run-1) backoffs, 2(run-1)+1 growths; step scale_at_that_step\n");
    for (size_t j = 0; j < ch->runs.n; j++) {
        const struct run *r = &c->runs[ch->runs.v[j]];
        fprintf_text(d.f, "# run %zu: %s (%s)\n", j + 1, r->label, r->path);
        if ((rc = write_scale_block(c, d.f, r, lo, hi)))
            goto fail;
        for (int g = 0; g < 2; g++) {
            fprintf_text(m.f, "# run %zu: %s, %s\n", j + 1, r->label, g ? "growths" : "backoffs");
            scale_marks(m.f, r, g);
        }
    }
    if ((rc = out_close(c, &d)) || (rc = out_close(c, &m)))
        goto fail;
    return 0;
fail:
    out_abort(&d);
    out_abort(&m);
    return rc;
}

int chart_loss_scale(struct ctx *c, chart *ch)
{
    int un[64];
    size_t nu = 0, nback = 0, ngrow = 0;
    for (int i = 0; i < c->nruns; i++) {
        if (c->runs[i].scaled && vec_push(&ch->runs, i))
            return plot_fail(c, PLOT_ENOMEM, "out of memory");
        if (!c->runs[i].scaled && nu < 64)
            un[nu++] = i;
    }
    if (!ch->runs.n) {
        plot_note(c, "loss-scale: no run used a loss scale");
        return CHART_SKIPPED;
    }
    double lo = INFINITY, hi = -INFINITY;
    int rc = scale_data(c, ch, &lo, &hi);
    if (rc)
        return rc;
    for (size_t j = 0; j < ch->runs.n; j++) { /* the counts of the findings: as run, info, compare */
        nback += c->runs[ch->runs.v[j]].a->backoffs;
        ngrow += c->runs[ch->runs.v[j]].a->growths;
    }
    if (!(lo <= hi))
        lo = hi = 1;
    /* y range: whole binades around the data, ticks every k binades */
    double elo = floor(log2(lo)) - 1, ehi = ceil(log2(hi)) + 1;
    int k = tic_binades(ehi - elo, 10);
    elo = floor(elo / k) * k;
    ehi = ceil(ehi / k) * k;
    char runs[300], list[300], unscaled[340] = "";
    run_list(c, ch->runs.v, ch->runs.n, runs, sizeof runs);
    run_list(c, un, nu, list, sizeof list);
    if (nu)
        snprintf(unscaled, sizeof unscaled, "; %s: no loss scaling", list);
    snprintf(ch->name, sizeof ch->name, "loss-scale");
    snprintf(ch->what, sizeof ch->what, "Loss scale");
    snprintf(ch->subtitle, sizeof ch->subtitle, "the factor the loss is multiplied by before the backward "
             "pass; %zu backoff%s, %zu growth%s%s", nback, nback == 1 ? "" : "s", ngrow, ngrow == 1 ? "" : "s",
             unscaled);
    snprintf(ch->desc, sizeof ch->desc, "loss scale (log2) of %s against step; backoffs (%zu) and growths "
             "(%zu) marked", runs, nback, ngrow);
    fprintf(ch->vars, "xmin = %" PRId64 "\nxmax = %" PRId64 "\n", c->xmin, c->xmax);
    fprintf(ch->vars, "ymin = 2.0**%d\nymax = 2.0**%d\nytic = 2.0**%d\n", (int)elo, (int)ehi, k);
    fprintf(ch->vars, "nbackoff = %zu\nngrowth = %zu\n", nback, ngrow);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * grad-norm
 * ------------------------------------------------------------------------------------------ */

struct clips {
    double v[16], dt[16];
    char t[16][160], col[16][8];
    size_t n;
};

/* The clip lines: the one asked for, then the runs' own (merged when they are all equal). */
static void clip_lines(const struct ctx *c, struct clips *k)
{
    k->n = 0;
    if (isfinite(c->opt->clip) && c->opt->clip > 0) {
        k->v[0] = c->opt->clip;
        if (c->opt->clip_label)
            snprintf(k->t[0], sizeof k->t[0], "%s", c->opt->clip_label);
        else
            snprintf(k->t[0], sizeof k->t[0], "clip value %.4g", c->opt->clip);
        snprintf(k->col[0], sizeof k->col[0], "#000000");
        k->dt[k->n++] = 2;
    }
    for (int i = 0; i < c->nruns && k->n < 16; i++) {
        const struct run *r = &c->runs[i];
        if (!(r->clip > 0))
            continue;
        int all_same = 1;
        for (int j = 0; j < c->nruns; j++)
            all_same &= c->runs[j].clip == r->clip;
        if (all_same && c->nruns > 1 && i > 0)
            continue;
        if (all_same && c->nruns > 1) {
            snprintf(k->t[k->n], sizeof k->t[0], "clip used by the runs: %.4g", r->clip);
            snprintf(k->col[k->n], sizeof k->col[0], "#666666");
        } else {
            snprintf(k->t[k->n], sizeof k->t[0], "clip used by %s: %.4g", r->label, r->clip);
            snprintf(k->col[k->n], sizeof k->col[0], "%s", r->color);
        }
        k->v[k->n] = r->clip;
        k->dt[k->n++] = 3;
    }
}

static int norm_data(struct ctx *c, const struct clips *k, size_t w)
{
    struct out d = {0}, l = {0};
    int rc;
    if ((rc = out_open(c, &d, "grad-norm.dat", "w")) || (rc = out_open(c, &l, "grad-norm-clip.dat", "w")))
        goto fail;
    fprintf(d.f, "# global gradient L2 norm (unscaled, before clipping) per run (index = run - 1): "
                 "step norm centred_mean_of_%zu_steps\n", w);
    for (int i = 0; i < c->nruns; i++) {
        fprintf_text(d.f, "# run %d: %s (%s)\n", i + 1, c->runs[i].label, c->runs[i].path);
        if (write_series_block(d.f, &c->runs[i], 1, w)) {
            rc = plot_fail(c, PLOT_ENOMEM, "out of memory");
            goto fail;
        }
    }
    fprintf(l.f, "# clip values (index = line - 1): step value\n");
    for (size_t i = 0; i < k->n; i++) {
        fprintf_text(l.f, "# %s\n", k->t[i]);
        fprintf(l.f, "%" PRId64 " %.9g\n%" PRId64 " %.9g\n\n\n", c->xmin, k->v[i], c->xmax, k->v[i]);
    }
    if (!k->n)
        fputs("NaN NaN\n", l.f);
    if ((rc = out_close(c, &d)) || (rc = out_close(c, &l)))
        goto fail;
    return 0;
fail:
    out_abort(&d);
    out_abort(&l);
    return rc;
}

int chart_grad_norm(struct ctx *c, chart *ch)
{
    double lo = INFINITY, hi = -INFINITY;
    size_t nmax = 0;
    for (int i = 0; i < c->nruns; i++) {
        const struct run *r = &c->runs[i];
        nmax = r->nsteps > nmax ? r->nsteps : nmax;
        for (size_t k = 0; k < r->nsteps; k++)
            if (isfinite(r->steps[k].grad_norm) && r->steps[k].grad_norm > 0) {
                lo = fmin(lo, r->steps[k].grad_norm);
                hi = fmax(hi, r->steps[k].grad_norm);
            }
    }
    struct clips k;
    clip_lines(c, &k);
    for (size_t i = 0; i < k.n; i++)
        lo = fmin(lo, k.v[i]), hi = fmax(hi, k.v[i]);
    if (!(lo <= hi))
        lo = 0.1, hi = 10;
    int logy = hi / lo > 20;
    double ymin = logy ? lo / 1.5 : 0, ymax = logy ? hi * 1.8 : hi * 1.15 + 1e-30;
    size_t w = smooth_window(nmax);
    int rc = norm_data(c, &k, w);
    if (rc)
        return rc;
    all_runs(c, ch);
    char runs[300];
    run_list(c, ch->runs.v, ch->runs.n, runs, sizeof runs);
    snprintf(ch->name, sizeof ch->name, "grad-norm");
    snprintf(ch->what, sizeof ch->what, "Gradient norm");
    snprintf(ch->subtitle, sizeof ch->subtitle, "global L2 norm of the unscaled gradients before clipping%s", "");
    if (w > 1)
        snprintf(ch->subtitle + strlen(ch->subtitle), sizeof ch->subtitle - strlen(ch->subtitle),
                 "; thin: every step, thick: centred mean over %zu steps", w);
    snprintf(ch->desc, sizeof ch->desc, "gradient norm (unscaled, before clipping) of %s against step%s", runs,
             k.n ? ", with the clip value drawn" : "");
    fprintf(ch->vars, "xmin = %" PRId64 "\nxmax = %" PRId64 "\n", c->xmin, c->xmax);
    gp_var_num(ch->vars, "ymin", ymin);
    gp_var_num(ch->vars, "ymax", ymax);
    fprintf(ch->vars, "logy = %d\nnclip = %zu\n", logy, k.n);
    if (logy)
        gp_log10_tics(ch->vars, ymin, ymax);
    const char *ct[16], *cc[16];
    for (size_t i = 0; i < k.n; i++)
        ct[i] = k.t[i], cc[i] = k.col[i];
    gp_array_str(ch->vars, "clip_title", ct, k.n, 1);
    gp_array_str(ch->vars, "clip_color", cc, k.n, 0);
    gp_array_num(ch->vars, "clip_dt", k.dt, k.n);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * ranks: one line per rank of a run read from its ranks' traces
 * ------------------------------------------------------------------------------------------ */

enum { RANK_PANELS = 3 };

static double rank_value(const an_step *s, int p)
{
    double v = p == 0 ? s->loss : p == 1 ? s->grad_norm : s->loss_scale;
    return isfinite(v) && (p == 0 || v > 0) ? v : NAN;
}

/* The data: per panel (loss, gradient norm, loss scale), per rank, "step value" (the chart
 * columns' rows of a long run); lo and hi take each panel's range. */
static int ranks_data(struct ctx *c, const an_ranks *R, const char *name, int npanels, double *lo, double *hi)
{
    struct out d = {0};
    int rc = out_open(c, &d, name, "w");
    if (rc)
        return rc;
    fprintf(d.f, "# per panel (loss, gradient norm, loss scale), per rank: index panel * %zu + rank_index; "
                 "step value\n", R->n);
    for (int p = 0; p < npanels && !rc; p++)
        for (size_t k = 0; k < R->n && !rc; k++) {
            const an_run *x = &R->rank[k].run;
            struct run tmp;
            memset(&tmp, 0, sizeof tmp);
            tmp.steps = x->steps;
            tmp.nsteps = x->nsteps;
            double *v = malloc((x->nsteps + 1) * sizeof *v);
            char *keep = malloc(x->nsteps + 1);
            if (!v || !keep) {
                free(v);
                free(keep);
                rc = plot_fail(c, PLOT_ENOMEM, "out of memory");
                break;
            }
            for (size_t i = 0; i < x->nsteps; i++) {
                v[i] = rank_value(&x->steps[i], p);
                lo[p] = fmin(lo[p], v[i]);
                hi[p] = fmax(hi[p], v[i]);
            }
            series_keep(&tmp, v, keep);
            fprintf_text(d.f, "# rank %" PRId64 " (%s)\n", R->rank[k].rank, x->path);
            for (size_t i = 0; i < x->nsteps; i++)
                if (keep[i]) {
                    fprintf(d.f, "%" PRId64 " ", x->steps[i].step);
                    put_num(d.f, v[i]);
                    fputc('\n', d.f);
                }
            fputs(x->nsteps ? "\n\n" : "NaN NaN\n\n\n", d.f);
            free(v);
            free(keep);
        }
    if (rc || (rc = out_close(c, &d)))
        out_abort(&d);
    return rc;
}

/* The panels' titles, scales and ranges. */
static void ranks_panels(FILE *f, int npanels, const double *lo, const double *hi)
{
    static const char *const titles[RANK_PANELS] = {"training loss", "gradient norm (unscaled, before clipping)",
                                                    "loss scale"};
    double pmin[RANK_PANELS], pmax[RANK_PANELS], plog[RANK_PANELS];
    for (int p = 0; p < npanels; p++) {
        double a = lo[p] <= hi[p] ? lo[p] : 0.1, b = lo[p] <= hi[p] ? hi[p] : 10;
        plog[p] = p == 2 ? 2 : p == 1 && a > 0 && b / a > 20 ? 10 : 0;
        if (plog[p] == 2)
            pmin[p] = exp2(floor(log2(a)) - 1), pmax[p] = exp2(ceil(log2(b)) + 1);
        else if (plog[p] == 10)
            pmin[p] = a / 1.5, pmax[p] = b * 1.8;
        else {
            double span = b - a > 0 ? b - a : fmax(fabs(b), 1) * 0.1;
            pmin[p] = p == 1 ? fmax(0, a - 0.1 * span) : a - 0.1 * span;
            pmax[p] = b + 0.1 * span;
        }
    }
    gp_array_str(f, "panel_title", titles, (size_t)npanels, 1);
    gp_array_num(f, "panel_log", plog, (size_t)npanels);
    gp_array_num(f, "panel_min", pmin, (size_t)npanels);
    gp_array_num(f, "panel_max", pmax, (size_t)npanels);
}

int chart_ranks(struct ctx *c, chart *ch)
{
    static const char *const palette[8] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                           "#e69f00", "#56b4e9", "#7f7f7f", "#000000"};
    const struct run *run = &c->runs[ch->run];
    const an_ranks *R = run->a->ranks;
    int scaled = 0;
    for (size_t k = 0; k < R->n; k++)
        scaled |= R->rank[k].run.scaled && !R->rank[k].run.grads_unscaled;
    int npanels = scaled ? 3 : 2;
    double lo[RANK_PANELS] = {INFINITY, INFINITY, INFINITY}, hi[RANK_PANELS] = {-INFINITY, -INFINITY, -INFINITY};
    char dname[180];
    snprintf(ch->name, sizeof ch->name, "ranks-%s", run->tag);
    snprintf(dname, sizeof dname, "%s.dat", ch->name);
    int rc = ranks_data(c, R, dname, npanels, lo, hi);
    if (rc)
        return rc;
    if (vec_push(&ch->runs, ch->run))
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    snprintf(ch->what, sizeof ch->what, "Ranks");
    snprintf(ch->subtitle, sizeof ch->subtitle, "%zu of %" PRId64 " ranks (%s), one line each: the training "
             "loss, the gradient norm%s as each rank recorded them", R->n, R->world_size, R->sharding_name,
             scaled ? " and the loss scale" : "");
    snprintf(ch->desc, sizeof ch->desc, "%s's %zu ranks, one line each: training loss, gradient norm%s "
             "against step", run->label, R->n, scaled ? ", loss scale" : "");
    const char *titles[64], *colors[64];
    char tbuf[64][24];
    size_t nt = R->n < 64 ? R->n : 64;
    for (size_t k = 0; k < nt; k++) {
        snprintf(tbuf[k], sizeof tbuf[k], "rank %" PRId64, R->rank[k].rank);
        titles[k] = tbuf[k];
        colors[k] = palette[k % 8];
    }
    gp_var_str(ch->vars, "datafile", dname, 0);
    fprintf(ch->vars, "nranks = %zu\nnpanels = %d\nkey = %d\n", nt, npanels, R->n <= 16);
    fprintf(ch->vars, "xmin = %" PRId64 "\nxmax = %" PRId64 "\n", c->xmin, c->xmax);
    gp_array_str(ch->vars, "rank_title", titles, nt, 1);
    gp_array_str(ch->vars, "rank_color", colors, nt, 0);
    ranks_panels(ch->vars, npanels, lo, hi);
    return 0;
}
