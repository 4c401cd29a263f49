/*
 * plot_quant.c - quant-heatmap-COLUMN-RUN: what a block-scaled (or per-tensor-scaled) scheme
 * would do to each layer at each traced step, for a /quant column `--quant` chooses (its name,
 * or a recipe: its columns): a panel per tensor kind, layers down, steps across, the SQNR in dB
 * (`--quant-metric sqnr`, the default: dark is a large error) or the share of values flushed to
 * zero (`--quant-metric flush`). The /quant rows are read again (an_read_quant); a step without
 * a row is missing (NaN, drawn grey); a column of merged steps keeps the worst of them.
 */
#include "plot/plot_internal.h"
#include "analysis/quant.h"
#include "analysis/recipe.h"
#include "util/escape.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The kinds of the panels. */
static const int qkinds[] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT,
                             AMPDIAG_KIND_WEIGHT_GRAD};
#define NQK (sizeof qkinds / sizeof qkinds[0])

/* name is one of the comma-separated items of list (case-insensitive). */
static int listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, ",");
        if (k == len && strncasecmp(p, name, len) == 0)
            return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

/* --quant names /quant column col of r: "all", its name, or a recipe that reads it. */
static int quant_named(const an_run *r, int col, const char *list)
{
    if (!list || !an_whatif_is_quant(r, col))
        return 0;
    if (listed(list, "all") || listed(list, r->wcol[col].name))
        return 1;
    for (int rc = 0; rc < AN_NRECIPES; rc++) {
        if (!listed(list, an_recipe_name(rc)))
            continue;
        for (size_t k = 0; k < NQK; k++) {
            int cols[AN_MAX_WHATIF], fb;
            size_t n = an_recipe_columns(r, rc, qkinds[k], cols, &fb);
            for (size_t i = 0; i < n; i++)
                if (cols[i] == col)
                    return 1;
        }
    }
    return 0;
}

size_t plot_quant_columns(const struct ctx *c, const an_run *r, int *out, size_t max)
{
    size_t n = 0;
    for (int col = 0; col < r->nwcol && n < max; col++)
        if (quant_named(r, col, c->opt->quant))
            out[n++] = col;
    return n;
}

struct qheat {
    const struct run *r;
    int col, flush;        /* the column; 1: the flush share, 0: SQNR */
    an_qpoint *p;
    size_t np;
    int64_t smin, dx;
    size_t ncols;
    int *rows;             /* union layers, kind by kind */
    size_t nrows[NQK], first[NQK], total, maxrows;
    float *m;
    double lo, hi;         /* the values drawn (finite ones) */
};

/* The grid: the steps of the rows (stride their gcd), merged to at most HEAT_MAX_COLS. */
static void qgrid(struct qheat *h)
{
    int64_t smin = INT64_MAX, smax = INT64_MIN, stride = 0;
    for (size_t i = 0; i < h->np; i++) {
        smin = h->p[i].step < smin ? h->p[i].step : smin;
        smax = h->p[i].step > smax ? h->p[i].step : smax;
    }
    for (size_t i = 0; i < h->np; i++) {
        int64_t a = h->p[i].step - smin, b = stride;
        while (b) {
            int64_t t = a % b;
            a = b;
            b = t;
        }
        stride = a < 0 ? -a : a;
    }
    if (stride <= 0)
        stride = 1;
    int64_t ncols0 = (smax - smin) / stride + 1, merge = (ncols0 + HEAT_MAX_COLS - 1) / HEAT_MAX_COLS;
    h->smin = smin;
    h->dx = stride * merge;
    h->ncols = (size_t)((ncols0 + merge - 1) / merge);
}

/* Rows per kind: the union layers with a row of that kind. 0 or a PLOT_E code. */
static int qrows(struct ctx *c, struct qheat *h)
{
    char *has = calloc((c->nunion ? c->nunion : 1) * NQK, 1);
    h->rows = malloc((c->nunion ? c->nunion : 1) * NQK * sizeof *h->rows);
    if (!has || !h->rows) {
        free(has);
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < h->np; i++)
        for (size_t k = 0; k < NQK; k++)
            if (h->p[i].kind == qkinds[k])
                has[(size_t)h->r->lmap[h->p[i].layer] * NQK + k] = 1;
    for (size_t k = 0; k < NQK; k++) {
        h->first[k] = h->total;
        for (size_t u = 0; u < c->nunion; u++)
            if (has[u * NQK + k])
                h->rows[h->total++] = (int)u;
        h->nrows[k] = h->total - h->first[k];
        h->maxrows = h->nrows[k] > h->maxrows ? h->nrows[k] : h->maxrows;
    }
    free(has);
    h->m = malloc(h->ncols * (h->maxrows ? h->maxrows : 1) * sizeof *h->m);
    return h->m ? 0 : plot_fail(c, PLOT_ENOMEM, "out of memory");
}

/* One panel's matrix (kind index k) into file: the worst value of each cell. */
static int qpanel(struct ctx *c, struct qheat *h, size_t k, const char *file)
{
    size_t nr = h->nrows[k];
    for (size_t i = 0; i < h->ncols * nr; i++)
        h->m[i] = NAN;
    for (size_t i = 0; i < h->np; i++) {
        const an_qpoint *q = &h->p[i];
        if (q->kind != qkinds[k])
            continue;
        size_t j = 0;
        int u = h->r->lmap[q->layer];
        while (j < nr && h->rows[h->first[k] + j] != u)
            j++;
        float v = h->flush ? q->flush : q->sqnr_db;
        if (j == nr || isnan(v))
            continue;
        if (!h->flush && isinf(v))
            v = 99; /* no error at all: drawn as the top of the scale */
        float *cell = &h->m[j * h->ncols + (size_t)((q->step - h->smin) / h->dx)];
        if (isnan(*cell) || (h->flush ? v > *cell : v < *cell))
            *cell = v;
        h->lo = fmin(h->lo, v);
        h->hi = fmax(h->hi, v);
    }
    return write_f32(c, file, h->m, h->ncols * nr);
}

/* The chart's words. */
static void qwords(const struct qheat *h, chart *ch)
{
    const an_whatif_col *w = &h->r->a->wcol[h->col];
    snprintf(ch->what, sizeof ch->what, "%s per layer under %s", h->flush ? "Values flushed to zero" : "SQNR", w->name);
    snprintf(ch->subtitle, sizeof ch->subtitle, "%s; on normal values it gives %.1f dB and flushes %.3g%%; grey: "
             "not recorded%s", h->flush ? "share of each tensor's values that decode as zero" :
             "signal to quantisation noise, 10 log10(sum x^2 / sum (x - q(x))^2), dark: a large error",
             w->ref_sqnr_db, 100 * w->ref_flush, h->dx > 1 ? "; a column: the worst of its steps" : "");
    snprintf(ch->desc, sizeof ch->desc, "layer x step heatmaps of %s's %s under %s (%.3g .. %.3g%s)", h->r->label,
             h->flush ? "flush share" : "SQNR", w->name, h->flush ? 100 * h->lo : h->lo,
             h->flush ? 100 * h->hi : h->hi, h->flush ? "%" : " dB");
}

/* The variables of the template beyond the words. */
static int qvars(struct ctx *c, const struct qheat *h, chart *ch, const char *const *file, const char *const *title,
                 const double *first, const double *rows, size_t np)
{
    FILE *f = ch->vars;
    fprintf(f, "npanels = %zu\nncols = %zu\nmetric = %d\n", np, h->ncols, h->flush);
    fprintf(f, "x0 = %" PRId64 "\ndx = %" PRId64 "\n", h->smin, h->dx);
    fprintf(f, "xmin = %.1f\nxmax = %.1f\n", (double)h->smin - 0.5 * (double)h->dx,
            (double)h->smin + ((double)h->ncols - 0.5) * (double)h->dx);
    gp_var_num(f, "cbmin", h->flush ? 1e-6 : floor(fmin(h->lo, h->r->a->wcol[h->col].ref_sqnr_db) - 1));
    gp_var_num(f, "cbmax", h->flush ? 1 : ceil(fmax(h->hi, h->r->a->wcol[h->col].ref_sqnr_db) + 1));
    gp_array_str(f, "panel_file", file, np, 0);
    gp_array_str(f, "panel_title", title, np, 1);
    gp_array_num(f, "panel_first", first, np);
    gp_array_num(f, "panel_rows", rows, np);
    const char **rname = malloc((h->total ? h->total : 1) * sizeof *rname);
    if (!rname)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    for (size_t i = 0; i < h->total; i++)
        rname[i] = c->lname[h->rows[i]];
    gp_array_str(f, "row_name", rname, h->total, GP_TIC_LABEL);
    free(rname);
    fprintf(f, "row_font = %d\nrow_every = %zu\n", h->maxrows > 16 ? 7 : 9,
            h->maxrows > 30 ? (h->maxrows + 29) / 30 : 1);
    return 0;
}

/* Every panel's data, then the variables. */
static int qcharts(struct ctx *c, struct qheat *h, chart *ch)
{
    const char *file[NQK], *title[NQK];
    char fb[NQK][200], tb[NQK][200];
    double first[NQK], rows[NQK];
    size_t np = 0;
    int rc = 0;
    h->lo = INFINITY;
    h->hi = -INFINITY;
    for (size_t k = 0; k < NQK && !rc; k++) {
        if (!h->nrows[k])
            continue;
        snprintf(fb[np], sizeof fb[0], "%s-%s.bin", ch->name, kind_name(qkinds[k]));
        snprintf(tb[np], sizeof tb[0], "%s", kind_name(qkinds[k]));
        rc = qpanel(c, h, k, fb[np]);
        file[np] = fb[np];
        title[np] = tb[np];
        first[np] = (double)h->first[k];
        rows[np] = (double)h->nrows[k];
        np++;
    }
    if (!rc && vec_push(&ch->runs, ch->run))
        rc = plot_fail(c, PLOT_ENOMEM, "out of memory");
    if (!rc) {
        qwords(h, ch);
        rc = qvars(c, h, ch, file, title, first, rows, np);
    }
    return rc;
}

int chart_quant(struct ctx *c, chart *ch)
{
    struct qheat h;
    memset(&h, 0, sizeof h);
    h.r = &c->runs[ch->run];
    h.col = ch->sub;
    h.flush = c->opt->quant_flush;
    char part[48];
    str_file_part(part, sizeof part, h.r->a->wcol[h.col].name);
    snprintf(ch->name, sizeof ch->name, "quant-heatmap-%.47s-%.63s", part, h.r->tag);
    char err[512];
    if (an_read_quant(h.r->a, h.col, &h.p, &h.np, err, sizeof err))
        return plot_fail(c, PLOT_EIO, "%s", err);
    int rc = 0;
    if (!h.np) {
        plot_note(c, "%s: no /quant rows in '%s'", ch->name, h.r->path);
        rc = CHART_SKIPPED;
    } else {
        qgrid(&h);
        rc = qrows(c, &h);
        if (!rc)
            rc = qcharts(c, &h, ch);
    }
    free(h.p);
    free(h.rows);
    free(h.m);
    return rc;
}
