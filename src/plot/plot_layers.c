/*
 * plot_layers.c - the per-layer charts (plot_internal.h): the range of each drawn kind per
 * layer (small multiples, the shown formats' limits as bands), and per run and shown what-if
 * column the heatmaps of what that format would do to each layer and step.
 *
 * A heatmap's cells are the chart columns of the loader (analysis/columns.h): the largest
 * fraction of any record in the column; a column no record fell in is not recorded (NaN: drawn
 * grey, never as 0%). The flush-to-zero panels depend on the run:
 *   - a run without loss scaling: the fractions without loss scaling; for gradients, a mark
 *     where every value that flushes would be kept at the loss scale the analysis suggests for
 *     the run (the largest 2^k keeping its largest gradient under FP16_MARGIN_AT);
 *   - a run with a loss scale (not of this format): the fractions at the run's loss scale;
 *   - a run of this very format (an FP16 run's FP16 column): its values are in the format
 *     already, so nothing would flush; the panel shows instead the increase of its share of
 *     exact zeros over an FP32 run of the same model and data drawn with it, at the same step
 *     (else its own share of zeros, saying that the values that flushed are among them).
 */
#include "plot/plot_internal.h"
#include "analysis/findings.h"
#include "util/escape.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * layer-ranges-KIND
 * ------------------------------------------------------------------------------------------ */

/* The magnitude range a log2 axis must show: the data and FP16's limits. */
static void magnitude_axis(double lo, double hi, double *ymin, double *ymax, double *ytic)
{
    if (!(lo <= hi)) {
        lo = 1e-3;
        hi = 1;
    }
    double elo = floor(log2(fmin(lo, 0x1p-26))) - 1;
    double ehi = ceil(log2(fmax(hi, 0x1p18))) + 1;
    int k = tic_binades(ehi - elo, 9);
    elo = floor(elo / k) * k;
    ehi = ceil(ehi / k) * k;
    *ymin = ldexp(1, (int)elo);
    *ymax = ldexp(1, (int)ehi);
    *ytic = ldexp(1, k);
}

/* The distinct records (one per step) a range chart draws of a column, in step order: those
 * holding the column's extremes of absmax, absmin_nz and the inf/NaN fraction, and the last. */
static size_t column_points(const an_column *col, const an_point **out)
{
    static const int drawn[] = {AN_ROLE_ABSMAX_HI, AN_ROLE_ABSMAX_LO, AN_ROLE_ABSMIN_HI,
                                AN_ROLE_ABSMIN_LO, AN_ROLE_NONFINITE, AN_ROLE_LAST};
    size_t n = 0;
    for (size_t d = 0; d < sizeof drawn / sizeof drawn[0]; d++) {
        const an_point *p = &col->role[drawn[d]];
        size_t j = 0;
        while (j < n && out[j]->step != p->step)
            j++;
        if (j < n)
            continue;
        for (j = n++; j > 0 && out[j - 1]->step > p->step; j--)
            out[j] = out[j - 1];
        out[j] = p;
    }
    return n;
}

struct ranges {
    int panel[MAX_PANELS + 1];
    size_t np, avail;
    double lo, hi;
    size_t nnonfinite;
    int scaled_grads;
};

/* The panels: selected layers with records of kind si in some run; avail: layers with any. */
static void range_panels(const struct ctx *c, int si, struct ranges *g)
{
    g->np = g->avail = 0;
    for (size_t i = 0; i < c->nsel && g->np < MAX_PANELS; i++) {
        int any = 0;
        for (int r = 0; r < c->nruns; r++)
            any |= c->runs[r].ts[(size_t)c->sel[i] * NSER + (size_t)si].n > 0;
        if (any)
            g->panel[g->np++] = c->sel[i];
    }
    for (size_t u = 0; u < c->nunion; u++) {
        int any = 0;
        for (int r = 0; r < c->nruns; r++)
            any |= c->runs[r].ts[u * NSER + (size_t)si].n > 0;
        g->avail += any;
    }
}

/* One block "step absmax absmin_nz nonfinite" of a (layer, run). */
static void range_block(FILE *f, const struct run *run, const struct tser *ts, struct ranges *g)
{
    for (size_t k = 0; k < ts->n; k++) {
        const an_point *pt[AN_NROLES];
        size_t nk = column_points(&ts->c[k], pt);
        for (size_t j = 0; j < nk; j++) {
            fprintf(f, "%" PRId64 " ", pt[j]->step);
            put_num(f, pt[j]->absmax);
            fputc(' ', f);
            put_num(f, pt[j]->absmin_nz);
            fputc(' ', f);
            put_num(f, pt[j]->nonfinite);
            fputc('\n', f);
            g->nnonfinite += pt[j]->nonfinite > 0;
            if (isfinite(pt[j]->absmax))
                g->hi = fmax(g->hi, pt[j]->absmax);
            if (isfinite(pt[j]->absmin_nz))
                g->lo = fmin(g->lo, pt[j]->absmin_nz);
            else if (isfinite(pt[j]->absmax))
                g->lo = fmin(g->lo, pt[j]->absmax);
        }
    }
    if (!ts->n)
        fputs("NaN NaN NaN NaN\n", f);
    fputs("\n\n", f);
    (void)run;
}

static int range_data(struct ctx *c, int si, const char *dname, struct ranges *g)
{
    struct out d = {0};
    int rc = out_open(c, &d, dname, "w");
    if (rc)
        return rc;
    int kind = plot_ser_kind[si];
    fprintf(d.f, "# %s per layer and run (index = (panel - 1) * nruns + run - 1): step absmax "
                 "absmin_nz (smallest non-zero |x|) nonfinite (fraction of inf/NaN values; "
                 "absmax and absmin_nz are of the finite values)\n", kind_name(kind));
    g->lo = INFINITY, g->hi = -INFINITY;
    for (size_t p = 0; p < g->np; p++)
        for (int r = 0; r < c->nruns; r++) {
            const struct run *run = &c->runs[r];
            const struct tser *ts = &run->ts[(size_t)g->panel[p] * NSER + (size_t)si];
            fprintf_text(d.f, "# layer %s, run %d: %s\n", c->lname[g->panel[p]], r + 1, run->label);
            range_block(d.f, run, ts, g);
            g->scaled_grads |= ts->n && run->scaled && kind != AMPDIAG_KIND_ACTIVATION;
        }
    return out_close(c, &d);
}

int chart_layer_ranges(struct ctx *c, chart *ch)
{
    int si = ch->sub, kind = plot_ser_kind[si];
    struct ranges g;
    memset(&g, 0, sizeof g);
    range_panels(c, si, &g);
    if (!g.np) {
        plot_note(c, "layer-ranges-%s: no %s recorded", kind_name(kind), plot_ser_words[si]);
        return CHART_SKIPPED;
    }
    char dname[160];
    snprintf(ch->name, sizeof ch->name, "layer-ranges-%s", kind_name(kind));
    snprintf(dname, sizeof dname, "%s.dat", ch->name);
    int rc = range_data(c, si, dname, &g);
    if (rc)
        return rc;
    double ymin, ymax, ytic;
    magnitude_axis(g.lo, g.hi, &ymin, &ymax, &ytic);
    for (int i = 0; i < c->nruns; i++)
        if (vec_push(&ch->runs, i))
            return plot_fail(c, PLOT_ENOMEM, "out of memory");
    char runs[300], shown[160] = "";
    run_list(c, ch->runs.v, ch->runs.n, runs, sizeof runs);
    if (g.np < g.avail)
        snprintf(shown, sizeof shown, "; %zu of %zu layers%s (choose with --layers)", g.np, g.avail,
                 c->sel_auto ? ", those with the least FP16 headroom" : "");
    snprintf(ch->what, sizeof ch->what, "Range of %s per layer", plot_ser_words[si]);
    snprintf(ch->subtitle, sizeof ch->subtitle, "thick: largest |x|, thin: smallest non-zero |x|, as held in "
             "the run%s%s", g.scaled_grads ? " (loss-scaled runs: gradients times the loss scale)" : "", shown);
    snprintf(ch->desc, sizeof ch->desc, "per layer (%zu panels): largest and smallest non-zero |x| of %s "
             "against step for %s, the formats' limits as bands", g.np, plot_ser_words[si], runs);
    FILE *f = ch->vars;
    gp_var_str(f, "datafile", dname, 0);
    fprintf(f, "npanels = %zu\n", g.np);
    const char *pt[MAX_PANELS];
    for (size_t p = 0; p < g.np; p++)
        pt[p] = c->lname[g.panel[p]];
    gp_array_str(f, "panel_title", pt, g.np, 1);
    fprintf(f, "xmin = %" PRId64 "\nxmax = %" PRId64 "\n", c->xmin, c->xmax);
    gp_var_num(f, "ymin", ymin);
    gp_var_num(f, "ymax", ymax);
    gp_var_num(f, "ytic", ytic);
    fprintf(f, "nnonfinite = %zu\n", g.nnonfinite);
    int cols[AN_CHART_WI];
    size_t nc = plot_whatif_columns(c, c->runs[0].a, 1, cols);
    gp_format_bands(f, c->runs[0].a, cols, nc, ymin, ymax);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * FORMAT-heatmap-RUN
 * ------------------------------------------------------------------------------------------ */

struct heat {
    const struct run *r;
    int col;                 /* the what-if column */
    int own;                 /* the run's own format: zeros instead of flushes */
    const struct run *base;  /* an FP32 run to compare zeros with (own), or NULL */
    double keep_scale;       /* a loss scale whose kept cells are marked (unscaled runs), or 0 */
    int64_t smin, dx;
    size_t ncols, merge;
    size_t nrows[NSER], first[NSER], total, maxrows;
    int *rows;               /* union layers, kind by kind */
    float *m;
    double peak[3];          /* under / over / zeros */
    size_t nmarks;
    char fmt[48];            /* the format's name in capitals */
};

/* The columns: the recorded steps (stride = their gcd), merged to at most HEAT_MAX_COLS. 0, or
 * CHART_SKIPPED without records. */
static int heat_grid(struct ctx *c, struct heat *h)
{
    const struct run *r = h->r;
    int64_t smin = INT64_MAX, smax = INT64_MIN, stride = 0;
    for (size_t i = 0; i < c->nunion * NSER; i++)
        for (size_t k = 0; k < r->ts[i].n; k++) {
            int64_t st = an_column_start(r->a, &r->ts[i].c[k]);
            smin = st < smin ? st : smin;
            smax = st > smax ? st : smax;
        }
    if (smin > smax)
        return CHART_SKIPPED;
    for (size_t i = 0; i < c->nunion * NSER; i++)
        for (size_t k = 0; k < r->ts[i].n; k++) {
            int64_t a = an_column_start(r->a, &r->ts[i].c[k]) - smin, b = stride;
            while (b) {
                int64_t t = a % b;
                a = b;
                b = t;
            }
            stride = a < 0 ? -a : a;
        }
    if (stride <= 0)
        stride = 1;
    int64_t ncols0 = (smax - smin) / stride + 1;
    int64_t merge = (ncols0 + HEAT_MAX_COLS - 1) / HEAT_MAX_COLS;
    h->smin = smin;
    h->ncols = (size_t)((ncols0 + merge - 1) / merge);
    h->merge = (size_t)merge;
    h->dx = stride * merge;
    return 0;
}

/* Rows per kind: the layers (in union order) this run recorded that kind for. */
static int heat_rows(struct ctx *c, struct heat *h)
{
    h->rows = malloc((c->nunion ? c->nunion : 1) * NSER * sizeof *h->rows);
    if (!h->rows)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    h->total = h->maxrows = 0;
    for (int si = 0; si < NSER; si++) {
        h->first[si] = h->total;
        h->nrows[si] = 0;
        for (size_t u = 0; u < c->nunion; u++)
            if (h->r->ts[u * NSER + (size_t)si].n) {
                h->rows[h->total++] = (int)u;
                h->nrows[si]++;
            }
        h->maxrows = h->nrows[si] > h->maxrows ? h->nrows[si] : h->maxrows;
    }
    h->m = malloc(h->ncols * (h->maxrows ? h->maxrows : 1) * sizeof *h->m);
    return h->m ? 0 : plot_fail(c, PLOT_ENOMEM, "out of memory");
}

/* The chart column of a run's (layer, kind) series holding step, or NULL. */
static const an_column *column_at(const struct run *r, const struct tser *ts, int64_t step)
{
    size_t lo = 0, hi = ts->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (an_column_start(r->a, &ts->c[mid]) + r->a->env_width <= step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ts->n && an_column_start(r->a, &ts->c[lo]) <= step ? &ts->c[lo] : NULL;
}

/* A cell's value: side 0 flush to zero (or, own, the zeros' increase over the base run), 1
 * overflow or inf/NaN. NaN when not recorded. */
static float heat_value(const struct heat *h, const struct tser *bts, const an_column *cl, int side)
{
    if (side == 1) {
        float o = cl->over[h->col], nf = cl->role[AN_ROLE_NONFINITE].nonfinite;
        return isnan(o) ? nf : isnan(nf) || o > nf ? o : nf;
    }
    if (!h->own)
        return cl->under[h->col];
    if (!h->base)
        return cl->zero;
    const an_column *b = bts ? column_at(h->base, bts, an_column_start(h->r->a, cl)) : NULL;
    if (!b || isnan(b->zero) || isnan(cl->zero))
        return NAN;
    return cl->zero > b->zero ? cl->zero - b->zero : 0;
}

/* The base run's series of union layer u, kind si (NULL when it has none). */
static const struct tser *base_series(const struct heat *h, int u, int si)
{
    if (!h->base)
        return NULL;
    const struct tser *t = &h->base->ts[(size_t)u * NSER + (size_t)si];
    return t->n ? t : NULL;
}

/* One panel's matrix (kind si, side) into FILE.bin; its peak. */
static int heat_panel(struct ctx *c, struct heat *h, int si, int side, const char *file, double *peak)
{
    size_t nr = h->nrows[si];
    for (size_t i = 0; i < h->ncols * nr; i++)
        h->m[i] = NAN;
    *peak = 0;
    for (size_t j = 0; j < nr; j++) {
        int u = h->rows[h->first[si] + j];
        const struct tser *ts = &h->r->ts[(size_t)u * NSER + (size_t)si], *bts = base_series(h, u, si);
        for (size_t k = 0; k < ts->n; k++) {
            const an_column *cl = &ts->c[k];
            float v = heat_value(h, bts, cl, side);
            if (isnan(v))
                continue;
            float *cell = &h->m[j * h->ncols + (size_t)((an_column_start(h->r->a, cl) - h->smin) / h->dx)];
            if (isnan(*cell) || v > *cell)
                *cell = v;
            *peak = v > *peak ? v : *peak;
        }
    }
    return write_f32(c, file, h->m, h->ncols * nr);
}

/* The marks of a gradient panel: cells where values flush without scaling and every one would
 * be kept at h->keep_scale (the column's smallest non-zero |x| times it stays above the flush
 * threshold). One block "step row" per panel into f. */
static void heat_marks(FILE *f, struct heat *h, int si, double flush)
{
    size_t rows = 0;
    int grad = plot_ser_kind[si] != AMPDIAG_KIND_ACTIVATION;
    for (size_t j = 0; grad && h->keep_scale > 0 && j < h->nrows[si]; j++) {
        const struct tser *ts = &h->r->ts[(size_t)h->rows[h->first[si] + j] * NSER + (size_t)si];
        int64_t lastcol = -1;
        for (size_t k = 0; k < ts->n; k++) {
            const an_column *cl = &ts->c[k];
            float u = cl->under[h->col], mn = cl->role[AN_ROLE_ABSMIN_LO].absmin_nz;
            int64_t col = (an_column_start(h->r->a, cl) - h->smin) / h->dx;
            if (!(u > 0) || !((double)mn * h->keep_scale > flush) || col == lastcol)
                continue;
            fprintf(f, "%" PRId64 " %zu\n", h->smin + col * h->dx, j);
            lastcol = col;
            rows++;
        }
    }
    h->nmarks += rows;
    if (!rows)
        fputs("NaN NaN\n", f);
    fputs("\n\n", f);
}

struct heat_panels {
    const char *file[2 * NSER], *title[2 * NSER];
    char f[2 * NSER][200], t[2 * NSER][200];
    double first[2 * NSER], rows[2 * NSER], side[2 * NSER];
    size_t n;
};

/* A panel's title: what its cells are, and their peak. */
static void panel_title(const struct heat *h, int si, int side, double peak, char *dst, size_t n)
{
    char what[160];
    if (side == 1)
        snprintf(what, sizeof what, "overflow in %s or inf/NaN", h->fmt);
    else if (h->own && h->base)
        snprintf(what, sizeof what, "more exact zeros than %s", h->base->label);
    else if (h->own)
        snprintf(what, sizeof what, "share of exact zeros");
    else if (h->r->scaled && plot_ser_kind[si] != AMPDIAG_KIND_ACTIVATION)
        snprintf(what, sizeof what, "would flush to zero in %s at the run's loss scale", h->fmt);
    else
        snprintf(what, sizeof what, "would flush to zero in %s%s", h->fmt,
                 plot_ser_kind[si] != AMPDIAG_KIND_ACTIVATION ? " without loss scaling" : "");
    if (peak > 0)
        snprintf(dst, n, "%s: %s (peak %.3g%%)", plot_ser_words[si], what, 100 * peak);
    else
        snprintf(dst, n, "%s: %s (none)", plot_ser_words[si], what);
}

/* Every panel's matrix (NAME-KIND-SIDE.bin) and the marks file (NAME-kept.dat). */
static int heat_data(struct ctx *c, struct heat *h, const char *name, struct heat_panels *P)
{
    struct out mk = {0};
    char marks[260];
    snprintf(marks, sizeof marks, "%s-kept.dat", name);
    int rc = out_open(c, &mk, marks, "w");
    if (rc)
        return rc;
    fprintf(mk.f, "# per panel (index = panel - 1): step row of the cells where every value that flushes "
                  "would be kept at a loss scale of %g\n", h->keep_scale);
    double flush = h->r->a->wcol[h->col].min_subnormal / 2;
    for (int si = 0; si < NSER && !rc; si++)
        for (int side = 0; side < 2 && h->nrows[si] && !rc; side++) {
            size_t p = P->n++;
            double peak;
            snprintf(P->f[p], sizeof P->f[0], "%s-%s-%s.bin", name, kind_name(plot_ser_kind[si]),
                     side ? "overflow" : h->own ? "zeros" : "underflow");
            rc = heat_panel(c, h, si, side, P->f[p], &peak);
            int k = side ? 1 : h->own ? 2 : 0;
            h->peak[k] = peak > h->peak[k] ? peak : h->peak[k];
            k += k == 2 && !h->base; /* 3: its own zeros, no FP32 run to compare with */
            panel_title(h, si, side, peak, P->t[p], sizeof P->t[0]);
            P->file[p] = P->f[p], P->title[p] = P->t[p];
            P->first[p] = (double)h->first[si], P->rows[p] = (double)h->nrows[si];
            P->side[p] = k;
            if (side || h->own) {
                fputs("NaN NaN\n\n\n", mk.f);
            } else {
                heat_marks(mk.f, h, si, flush);
            }
        }
    if (rc) {
        out_abort(&mk);
        return rc;
    }
    return out_close(c, &mk);
}

/* The heatmap's run and column: the format's name, whether it is the run's own, the FP32 run to
 * compare zeros with, the loss scale whose kept cells are marked. */
static void heat_setup(struct ctx *c, struct heat *h, int run, int col)
{
    memset(h, 0, sizeof *h);
    h->r = &c->runs[run];
    h->col = col;
    const an_whatif_col *w = &h->r->a->wcol[col];
    size_t k = 0;
    for (; w->name[k] && k + 1 < sizeof h->fmt; k++)
        h->fmt[k] = (char)(w->name[k] >= 'a' && w->name[k] <= 'z' ? w->name[k] - 'a' + 'A' : w->name[k]);
    h->fmt[k] = 0;
    h->own = an_whatif_own(h->r->a, col);
    for (int i = 0; h->own && i < c->nruns && !h->base; i++) /* of the same model and data */
        if (c->runs[i].a->prec == PREC_FP32 && strcmp(c->runs[i].a->model, h->r->a->model) == 0 &&
            strcmp(c->runs[i].a->data, h->r->a->data) == 0)
            h->base = &c->runs[i];
    const an_finding *s = an_run_finding(h->r->a, F_LOSS_SCALE);
    if (!h->own && !h->r->scaled && s)
        h->keep_scale = ldexp(1.0, (int)s->v[an_finding_fig(F_LOSS_SCALE, "log2")]);
}

/* The chart's words. */
static void heat_words(const struct ctx *c, const struct heat *h, chart *ch)
{
    const struct run *r = h->r;
    char kept[200] = "";
    if (h->keep_scale > 0 && h->nmarks)
        snprintf(kept, sizeof kept, "; white dots: every gradient that flushes there would be kept at loss scale 2^%g "
                 "(the largest keeping the run's largest gradient under %g)", log2(h->keep_scale),
                 an_k(K_FP16_MARGIN_AT));
    snprintf(ch->what, sizeof ch->what, "%s flush to zero and overflow per layer", h->fmt);
    if (h->own && h->base)
        snprintf(ch->subtitle, sizeof ch->subtitle, "the run holds %s values, so nothing would flush (what did "
                 "became zeros): left, how much its share of exact zeros exceeds %s's at the same step; grey: not "
                 "recorded%s", h->fmt, h->base->label,
                 h->merge > 1 || r->a->env_width > 1 ? "; a column: the most of several steps" : "");
    else if (h->own)
        snprintf(ch->subtitle, sizeof ch->subtitle, "the run holds %s values, so nothing would flush (what did "
                 "became zeros): left, its share of exact zeros, true zeros among them (draw it with an FP32 run of "
                 "its model and data to see the increase); grey: not recorded", h->fmt);
    else
        snprintf(ch->subtitle, sizeof ch->subtitle, "fraction that would round to 0 or to inf in %s%s%s; grey: not "
                 "recorded%s", h->fmt, r->scaled ? "; gradients as held (times the loss scale)" :
                 "; without loss scaling", kept, h->merge > 1 || r->a->env_width > 1 ?
                 "; a column: the most of several steps" : "");
    snprintf(ch->desc, sizeof ch->desc, "layer x step heatmaps of %s's activations and gradients in %s: %s "
             "(peak %.3g%%), overflow (peak %.3g%%)", r->label, h->fmt,
             h->own ? (h->base ? "increase of exact zeros" : "exact zeros") : "flush to zero",
             100 * h->peak[h->own ? 2 : 0], 100 * h->peak[1]);
    (void)c;
}

int chart_heatmap(struct ctx *c, chart *ch)
{
    struct heat h;
    heat_setup(c, &h, ch->run, ch->sub);
    const struct run *r = h.r;
    char part[64];
    str_file_part(part, sizeof part, r->a->wcol[ch->sub].name);
    snprintf(ch->name, sizeof ch->name, "%s-heatmap-%s", part, r->tag);
    if (heat_grid(c, &h)) {
        plot_note(c, "%s: no tensor records in '%s'", ch->name, r->path);
        return CHART_SKIPPED;
    }
    struct heat_panels P;
    memset(&P, 0, sizeof P);
    int rc = heat_rows(c, &h);
    if (!rc)
        rc = heat_data(c, &h, ch->name, &P);
    if (!rc && vec_push(&ch->runs, ch->run))
        rc = plot_fail(c, PLOT_ENOMEM, "out of memory");
    if (!rc) {
        heat_words(c, &h, ch);
        FILE *f = ch->vars;
        char marks[260];
        snprintf(marks, sizeof marks, "%s-kept.dat", ch->name);
        fprintf(f, "npanels = %zu\nncols = %zu\n", P.n, h.ncols);
        fprintf(f, "x0 = %" PRId64 "\ndx = %" PRId64 "\n", h.smin, h.dx);
        fprintf(f, "xmin = %.1f\nxmax = %.1f\n", (double)h.smin - 0.5 * (double)h.dx,
                (double)h.smin + ((double)h.ncols - 0.5) * (double)h.dx);
        gp_array_str(f, "panel_file", P.file, P.n, 0);
        gp_array_str(f, "panel_title", P.title, P.n, 1);
        gp_array_num(f, "panel_first", P.first, P.n);
        gp_array_num(f, "panel_rows", P.rows, P.n);
        gp_array_num(f, "panel_kind", P.side, P.n);
        gp_var_str(f, "marks_file", marks, 0);
        fprintf(f, "nmarks = %zu\n", h.nmarks);
        const char **rname = malloc((h.total ? h.total : 1) * sizeof *rname);
        if (!rname)
            rc = plot_fail(c, PLOT_ENOMEM, "out of memory");
        for (size_t i = 0; rname && i < h.total; i++)
            rname[i] = c->lname[h.rows[i]];
        if (rname)
            gp_array_str(f, "row_name", rname, h.total, GP_TIC_LABEL);
        free(rname);
        fprintf(f, "row_font = %d\nrow_every = %zu\n", h.maxrows > 16 ? 7 : 9,
                h.maxrows > 30 ? (h.maxrows + 29) / 30 : 1);
    }
    free(h.rows);
    free(h.m);
    return rc;
}
