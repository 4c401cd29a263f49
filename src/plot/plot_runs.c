/*
 * plot_runs.c - the runs a plot draws (plot_internal.h): the traces loaded through the analysis
 * (chart columns of the drawn kinds kept), their layers' union, labels, colours and file tags,
 * the layers the per-layer charts draw, the what-if columns the charts show, and the words
 * that name the runs in titles: each run's own model and data.
 */
#include "plot/plot_internal.h"
#include "analysis/compare.h"
#include "util/escape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const int plot_ser_kind[NSER] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT_GRAD};
const char *const plot_ser_words[NSER] = {"activations", "activation gradients", "weight gradients"};

const char *kind_name(int kind)
{
    const char *s = ampdiag_kind_name(kind);
    return s ? s : "?";
}

int union_layer(const struct ctx *c, const char *name)
{
    for (size_t i = 0; i < c->nunion; i++)
        if (strcmp(c->lname[i], name) == 0)
            return (int)i;
    return -1;
}

/* Every trace read (several at once: an_load_args, a distributed run's ranks as one run),
 * keeping the chart columns, into c->an[0..c->nruns) (each in a state an_free accepts) and the
 * runs' paths (the arguments). 0, or the error of the first that failed. */
static int load_all(struct ctx *c, const char *const *paths, int n)
{
    an_options ao = {.warmup = -1, .quiet = 0,
                     .keep_points = 1u << AMPDIAG_KIND_ACTIVATION |
                                    1u << AMPDIAG_KIND_ACTIVATION_GRAD |
                                    1u << AMPDIAG_KIND_WEIGHT_GRAD,
                     .no_rms_series = 1};
    char err[1024] = "";
    an_inputs in;
    int rc = an_load_args(paths, (size_t)n, &ao, c->opt->alone ? AN_ARGS_ALONE : 0, &in, err, sizeof err);
    c->nruns = (int)in.n;
    for (size_t i = 0; !rc && i < in.n; i++) {
        c->an[i] = in.runs[i];
        memset(&in.runs[i], 0, sizeof in.runs[i]);
        c->runs[i].path = in.names[i];
    }
    an_inputs_free(&in);
    if (rc == AMPDIAG_TRACE_ENOMEM)
        return plot_fail(c, PLOT_ENOMEM, "%s", err);
    if (rc)
        return plot_fail(c, ampdiag_trace_err_is_io(rc) ? PLOT_EIO : PLOT_EINPUT, "%s", err);
    return 0;
}

/* A loaded run's figures into r, its layers into the union. */
static int load_run(struct ctx *c, struct run *r, an_run *a)
{
    r->a = a;
    r->precision = a->precision[0] ? a->precision : "unknown";
    r->clip = isfinite(a->clip) && a->clip > 0 ? a->clip : 0;
    r->scaled = a->scaled && !a->grads_unscaled;
    r->layers = a->layers;
    r->nlayers = a->nlayers;
    r->steps = a->steps;
    r->nsteps = a->nsteps;
    r->events = a->events;
    r->nevents = a->nevents;
    r->evals = a->evals;
    r->nevals = a->nevals;
    r->hsteps = a->hist_steps.v;
    r->nhsteps = a->hist_steps.n;
    /* layers into the union */
    r->lmap = malloc((r->nlayers ? r->nlayers : 1) * sizeof *r->lmap);
    if (!r->lmap)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    for (size_t i = 0; i < r->nlayers; i++) {
        int u = union_layer(c, r->layers[i].name);
        if (u < 0) {
            void *q = realloc(c->lname, (c->nunion + 1) * sizeof *c->lname);
            if (!q)
                return plot_fail(c, PLOT_ENOMEM, "out of memory");
            c->lname = q;
            snprintf(c->lname[c->nunion], sizeof c->lname[0], "%s", r->layers[i].name);
            u = (int)c->nunion++;
        }
        r->lmap[i] = u;
    }
    return 0;
}

/* The drawn kinds' points per union layer; after every run's layers are known. */
static int load_tensors(struct ctx *c, struct run *r)
{
    r->ts = calloc((c->nunion ? c->nunion : 1) * NSER, sizeof *r->ts);
    if (!r->ts)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    for (size_t i = 0; i < c->nunion * NSER; i++) {
        r->ts[i].absmax = -1;
        r->ts[i].absmin_nz = INFINITY;
    }
    for (size_t l = 0; l < r->nlayers; l++)
        for (int s = 0; s < NSER; s++) {
            struct tser *ts = &r->ts[(size_t)r->lmap[l] * NSER + (size_t)s];
            const an_cell *cell = &r->layers[l].cell[plot_ser_kind[s]];
            ts->p = &r->layers[l].pts[plot_ser_kind[s]];
            ts->c = ts->p->v;
            ts->n = ts->p->n;
            ts->count = cell->count;
            ts->under = cell->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW];
            ts->over = cell->wi[AN_WI_FP16][AMPDIAG_WHATIF_OVERFLOW];
            ts->absmax = cell->absmax > 0 && isfinite(cell->absmax) ? cell->absmax : -1;
            ts->absmin_nz = cell->absmin_nz;
        }
    if (r->a->rec_step_min < c->xmin) c->xmin = r->a->rec_step_min;
    if (r->a->rec_step_max > c->xmax) c->xmax = r->a->rec_step_max;
    return 0;
}

static void free_run(struct run *r)
{
    free(r->lmap);
    free(r->ts);
}

/* Labels, file tags and colours. */
static void name_runs(struct ctx *c)
{
    static const struct {
        const char *precision;
        const char *shades[3];
    } palette[] = {
        {"fp32", {"#3c3c3c", "#8c8c8c", "#000000"}},
        {"fp16", {"#0072b2", "#56b4e9", "#003f63"}},
        {"bf16", {"#d55e00", "#e69f00", "#8c3d00"}},
        {"bf16-pure", {"#a0509a", "#cc79a7", "#5e2d5a"}},
    };
    static const char *const other[] = {"#009e73", "#6a8a00", "#00786f", "#b8860b", "#7f3f98"};
    int nother = 0;
    for (int i = 0; i < c->nruns; i++) {
        struct run *r = &c->runs[i];
        int same_before = 0;
        for (int j = 0; j < i; j++)
            same_before += strcmp(c->runs[j].precision, r->precision) == 0;
        r->label = r->a->label;
        const char *col = NULL;
        for (size_t p = 0; p < sizeof palette / sizeof palette[0]; p++)
            if (strcmp(palette[p].precision, r->precision) == 0 && same_before < 3)
                col = palette[p].shades[same_before];
        if (!col)
            col = other[nother++ % (int)(sizeof other / sizeof other[0])];
        snprintf(r->color, sizeof r->color, "%s", col);
    }
    /* unique tags */
    for (int i = 0; i < c->nruns; i++) {
        struct run *r = &c->runs[i];
        str_file_part(r->tag, sizeof r->tag, r->label);
        for (int j = 0; j < i; j++)
            if (strcmp(c->runs[j].tag, r->tag) == 0) {
                char t[64];
                snprintf(t, sizeof t, "%.50s-%d", r->tag, i + 1);
                snprintf(r->tag, sizeof r->tag, "%s", t);
                break;
            }
    }
}

/* "fp32, fp16 and bf16" */
void run_list(const struct ctx *c, const int *idx, size_t n, char *dst, size_t len)
{
    dst[0] = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(dst);
        snprintf(dst + k, len - k, "%s%s", i == 0 ? "" : (i + 1 == n ? " and " : ", "),
                 c->runs[idx[i]].label);
    }
}


const an_step *find_step(const struct run *r, int64_t step)
{
    size_t lo = 0, hi = r->nsteps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->steps[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < r->nsteps && r->steps[lo].step == step)
        return &r->steps[lo];
    for (size_t i = 0; i < r->nsteps; i++) /* steps out of order: look everywhere */
        if (r->steps[i].step == step)
            return &r->steps[i];
    return NULL;
}

/* Union layer u in a file name: its name reduced to [A-Za-z0-9._-], with "-N" (N = u + 1)
 * added when a layer charted before it reduces to the same ("a|b" and "a b"). */
void layer_file_part(const struct ctx *c, int u, char *dst, size_t n)
{
    str_file_part(dst, n, c->lname[u]);
    for (size_t k = 0; k < c->nhsel && c->hsel[k] != u; k++) {
        char other[AMPDIAG_TRACE_NAME_LEN];
        if (strcmp(str_file_part(other, sizeof other, c->lname[c->hsel[k]]), dst) == 0) {
            size_t len = strlen(dst);
            snprintf(dst + len, n - len, "-%d", u + 1);
            return;
        }
    }
}

/* Least FP16 headroom (binades, either side) of a layer over the runs and drawn kinds. */
static double layer_headroom(const struct ctx *c, size_t u)
{
    const ampdiag_format_info *f = ampdiag_format_get(AMPDIAG_FP16);
    double best = INFINITY;
    for (int r = 0; r < c->nruns; r++)
        for (int si = 0; si < NSER; si++) {
            const struct tser *ts = &c->runs[r].ts[u * NSER + (size_t)si];
            if (ts->absmax > 0)
                best = fmin(best, log2((double)f->max_finite / ts->absmax));
            if (isfinite(ts->absmin_nz))
                best = fmin(best, log2(ts->absmin_nz / (double)f->min_normal));
        }
    return best;
}

/* The layers --layers names, for both per-layer charts. */
static int layers_asked(struct ctx *c)
{
    for (size_t i = 0; i < c->opt->nlayers; i++) {
        int u = union_layer(c, c->opt->layers[i]);
        if (u < 0) {
            char known[512] = "";
            for (size_t k = 0; k < c->nunion && strlen(known) + 80 < sizeof known; k++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                         k ? ", " : "", c->lname[k]);
            return plot_fail(c, PLOT_EINPUT, "--layers: no layer '%s' in %s (layers: %s)",
                        c->opt->layers[i], c->nruns > 1 ? "any of the traces" : c->runs[0].path,
                        known);
        }
        int dup = 0;
        for (size_t k = 0; k < c->nsel; k++)
            if (c->sel[k] == u)
                dup = 1;
        if (!dup) {
            c->sel[c->nsel++] = u;
            c->hsel[c->nhsel++] = u;
        }
    }
    if (c->nsel > MAX_PANELS)
        plot_note(c, "layer-ranges: only the first %d of the %zu layers asked for are drawn",
             MAX_PANELS, c->nsel);
    return 0;
}

/* The histograms' layer: the one with parameters whose gradients underflow most in FP16 (then
 * the smallest non-zero gradient, then the first). */
static void select_hist_layer(struct ctx *c)
{
    int best = -1;
    double bscore = -1, bmin = INFINITY;
    for (size_t u = 0; u < c->nunion; u++) {
        int has_w = 0;
        double score = 0, mn = INFINITY;
        for (int r = 0; r < c->nruns; r++) {
            const struct tser *wg = &c->runs[r].ts[u * NSER + 2];
            const struct tser *ag = &c->runs[r].ts[u * NSER + 1];
            if (wg->n)
                has_w = 1;
            if (wg->count)
                score += (double)wg->under / (double)wg->count;
            if (ag->count)
                score += (double)ag->under / (double)ag->count;
            mn = fmin(mn, fmin(wg->absmin_nz, ag->absmin_nz));
        }
        if (!has_w)
            continue;
        if (best < 0 || score > bscore || (score == bscore && mn < bmin)) {
            best = (int)u;
            bscore = score;
            bmin = mn;
        }
    }
    if (best >= 0)
        c->hsel[c->nhsel++] = best;
}

int plot_select_layers(struct ctx *c)
{
    c->sel = malloc((c->nunion ? c->nunion : 1) * sizeof *c->sel);
    c->hsel = malloc((c->nunion ? c->nunion : 1) * sizeof *c->hsel);
    if (!c->sel || !c->hsel)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    if (c->opt->layers && c->opt->nlayers)
        return layers_asked(c);
    /* layer ranges: every layer, or the MAX_PANELS with the least FP16 headroom */
    if (c->nunion <= MAX_PANELS) {
        for (size_t u = 0; u < c->nunion; u++)
            c->sel[c->nsel++] = (int)u;
    } else {
        double *hr = malloc(c->nunion * sizeof *hr);
        char *taken = calloc(c->nunion, 1);
        if (!hr || !taken) {
            free(hr);
            free(taken);
            return plot_fail(c, PLOT_ENOMEM, "out of memory");
        }
        for (size_t u = 0; u < c->nunion; u++)
            hr[u] = layer_headroom(c, u);
        for (int k = 0; k < MAX_PANELS; k++) {
            size_t best = SIZE_MAX;
            for (size_t u = 0; u < c->nunion; u++)
                if (!taken[u] && (best == SIZE_MAX || hr[u] < hr[best]))
                    best = u;
            taken[best] = 1;
        }
        for (size_t u = 0; u < c->nunion; u++)
            if (taken[u])
                c->sel[c->nsel++] = (int)u;
        c->sel_auto = 1;
        free(hr);
        free(taken);
    }
    select_hist_layer(c);
    return 0;
}


/* "mlp on synthetic:blobs" of one run. */
static void context_of(const struct run *r, char *dst, size_t len)
{
    const char *model = r->a->model, *data = r->a->data;
    snprintf(dst, len, "%.100s%s%.120s", model, *model && *data ? " on " : "", data);
}

void run_context(const struct ctx *c, const int *idx, size_t n, char *dst, size_t len)
{
    char first[240], one[240];
    dst[0] = 0;
    if (!n)
        return;
    context_of(&c->runs[idx[0]], first, sizeof first);
    int same = 1;
    for (size_t i = 1; i < n && same; i++) {
        context_of(&c->runs[idx[i]], one, sizeof one);
        same = strcmp(one, first) == 0;
    }
    if (same) {
        snprintf(dst, len, "%s", first);
        return;
    }
    for (size_t i = 0; i < n; i++) { /* each run's own, named */
        size_t k = strlen(dst);
        context_of(&c->runs[idx[i]], one, sizeof one);
        snprintf(dst + k, len - k, "%s%s: %s", i ? "; " : "", c->runs[idx[i]].label, *one ? one : "?");
    }
}

size_t plot_whatif_columns(const struct ctx *c, const an_run *r, int with_bf16, int *out)
{
    size_t n = 0;
    for (int col = 0; col < r->nwcol && col < AN_CHART_WI; col++) {
        if (col == AN_WI_FP16 || (with_bf16 && col == AN_WI_BF16) || (with_bf16 && an_whatif_own(r, col)) ||
            an_whatif_named(r, col, c->opt->whatif))
            out[n++] = col;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------------ */

int plot_load(struct ctx *c, const char *const *paths, int n)
{
    int rc = load_all(c, paths, n);
    n = c->nruns;
    for (int i = 0; !rc && i < n; i++) {
        if ((rc = load_run(c, &c->runs[i], &c->an[i])))
            break;
        for (size_t k = 0; k < c->runs[i].nsteps; k++) {
            int64_t s = c->runs[i].steps[k].step;
            if (s < c->xmin) c->xmin = s;
            if (s > c->xmax) c->xmax = s;
        }
    }
    for (int i = 0; !rc && i < n; i++)
        rc = load_tensors(c, &c->runs[i]);
    if (rc)
        return rc;
    if (c->xmin > c->xmax) {
        if (n == 1)
            return plot_fail(c, PLOT_EINPUT, "nothing to plot: '%s' holds no step records", paths[0]);
        return plot_fail(c, PLOT_EINPUT, "nothing to plot: the traces hold no step records");
    }
    if (c->xmax == c->xmin)
        c->xmax = c->xmin + 1;
    an_label_runs(c->an, (size_t)n);
    name_runs(c);
    return 0;
}

void plot_free_runs(struct ctx *c)
{
    if (c->runs)
        for (int i = 0; i < c->nruns; i++)
            free_run(&c->runs[i]);
    if (c->an)
        for (int i = 0; i < c->nruns; i++)
            an_free(&c->an[i]);
}
