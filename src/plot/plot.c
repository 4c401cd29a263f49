/*
 * plot.c - gnuplot charts of one or more traces (see plot.h for the list of charts).
 *
 * The work is in three parts: load what the charts need from each trace (steps, events, evals,
 * per-layer tensor ranges and FP16 counts of three tensor kinds, histogram steps), write per
 * chart its data files and a script (generated variables + the template plots/NAME.gp), then
 * run gnuplot on every script, a few at a time, each with its stderr in NAME.log (removed when
 * empty: anything gnuplot says is a warning the caller hears about).
 *
 * Runs keep one colour and label on every chart: the colour follows the precision (fp32 grey,
 * fp16 blue, bf16 vermillion, bf16-pure purple; a second run of the same precision gets a
 * lighter shade), the label is the precision, or precision + file name where two runs share one.
 */
#include "plot/plot.h"
#include "analysis/columns.h"
#include "analysis/compare.h"
#include "analysis/hist.h"
#include "analysis/load.h"
#include "util/escape.h"

#include "ampdiag.h"
#include "ampdiag_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef AMPDIAG_PKGDATADIR
#define AMPDIAG_PKGDATADIR ""
#endif
#ifndef AMPDIAG_SRCDIR
#define AMPDIAG_SRCDIR ""
#endif

#define MAX_PANELS 12     /* small multiples per layer-ranges chart */
#define MAX_HIST_STEPS 6  /* histograms overlaid per panel */
#define HEAT_MAX_COLS 1200/* heatmap columns (steps are merged, keeping the largest fraction) */
#define SERIES_COLS 2048  /* chart columns of a per-step series (loss, gradient norm, loss scale) */
#define SINGLE_W 1200     /* chart sizes in pixels */
#define SINGLE_H 650
#define MULTI_W 1200
#define MULTI_H 900
#define HIST_W 1200
#define HIST_H 800

/* The tensor kinds drawn per layer. */
#define NSER 3
static const int ser_kind[NSER] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_ACTIVATION_GRAD,
                                   AMPDIAG_KIND_WEIGHT_GRAD};
static const char *const ser_words[NSER] = {"activations", "activation gradients",
                                            "weight gradients"};

struct tser {
    const an_column *c; /* the loader's chart columns of one (layer, kind) */
    size_t n;
    uint64_t count, under, over;
    double absmax, absmin_nz; /* over the trace: -1 / +inf while none */
};

struct run {
    const an_run *a;   /* the trace, through the analysis loader (points of the drawn kinds kept) */
    const char *path;
    const char *precision;
    const char *label; /* shown on charts: the same label compare's report gives the run */
    char tag[64];      /* in file names */
    char color[8];     /* #rrggbb */
    double clip;       /* the run's own clip value, 0 = off */
    int scaled;        /* gradient records are loss-scaled: some loss scale other than 1 */
    const an_layer *layers;
    size_t nlayers;
    int *lmap;         /* run layer index -> union index */
    const an_step *steps;
    size_t nsteps;
    const ampdiag_trace_event *events;
    size_t nevents;
    const ampdiag_trace_eval *evals;
    size_t nevals;
    struct tser *ts;   /* [nunion * NSER] */
    const int64_t *hsteps; /* distinct histogram steps, ascending */
    size_t nhsteps;
};

struct ctx {
    const plot_options *opt;
    const char *outdir;
    const char *tdir;
    const char *ext;
    plot_result *res;
    char *err;
    size_t errlen;
    struct run *runs;
    an_run *an;        /* [nruns], loaded by the analysis */
    int nruns;
    char (*lname)[AMPDIAG_TRACE_NAME_LEN]; /* union of the runs' layer names */
    size_t nunion;
    int64_t xmin, xmax;
    int *sel;          /* union layers on the layer-ranges charts */
    size_t nsel;
    int sel_auto;      /* chosen by headroom (not --layers) and fewer than all */
    int *hsel;         /* union layers of the histogram charts */
    size_t nhsel;
    int *all;          /* 0, 1, ..., nruns - 1 */
};

/* ------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------ */

__attribute__((format(printf, 3, 4)))
static int fail(struct ctx *c, int rc, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

__attribute__((format(printf, 2, 3)))
static void note(struct ctx *c, const char *fmt, ...)
{
    if (!c->res)
        return;
    size_t len = strlen(c->res->notes);
    if (len + 3 >= sizeof c->res->notes)
        return;
    if (len) {
        memcpy(c->res->notes + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->res->notes + len, sizeof c->res->notes - len, fmt, ap);
    va_end(ap);
}

static int64_t gcd64(int64_t a, int64_t b)
{
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Smallest k in 1, 2, 4, ... with span / k <= maxtics. */
static int tic_binades(double span, int maxtics)
{
    int k = 1;
    while (span / k > maxtics && k < 1024)
        k *= 2;
    return k;
}

static const char *kind_name(int kind)
{
    const char *s = ampdiag_kind_name(kind);
    return s ? s : "?";
}

/* ------------------------------------------------------------------------------------------
 * Output files
 * ------------------------------------------------------------------------------------------ */

struct out {
    FILE *f;
    char path[PATH_MAX];
};

static int out_open(struct ctx *c, struct out *o, const char *name, const char *mode)
{
    if (snprintf(o->path, sizeof o->path, "%s/%s", c->outdir, name) >= (int)sizeof o->path)
        return fail(c, PLOT_EINPUT, "output path too long: '%s/%s'", c->outdir, name);
    o->f = fopen(o->path, mode);
    if (!o->f)
        return fail(c, PLOT_EIO, "cannot create '%s': %s", o->path, strerror(errno));
    return 0;
}

static int out_close(struct ctx *c, struct out *o)
{
    if (!o->f)
        return 0;
    int bad = ferror(o->f);
    int e = errno;
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (bad)
        return fail(c, PLOT_EIO, "cannot write '%s': %s", o->path, strerror(e ? e : EIO));
    return 0;
}

/* Abandon a file after an earlier error (the error already set wins). */
static void out_abort(struct out *o)
{
    if (o->f && fclose(o->f) != 0) {
        /* nothing to add: the caller is already failing */
    }
    o->f = NULL;
}

static void put_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("NaN", f);
}

/* A gnuplot single-quoted string: '' for a quote, controls as \xNN (util/escape.h); nothing
 * in it is substituted (backquotes, @ macros) and no newline can end it. */
static void gp_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    str_fputs(s, SINK_GP, f);
    fputc('\'', f);
}

/* The same for text shown with `enhanced` on: characters that markup would eat are escaped. */
static void gp_text(FILE *f, const char *s)
{
    fputc('\'', f);
    str_fputs(s, SINK_GP_ENH, f);
    fputc('\'', f);
}

/* A comment line of a script: "# " and the text escaped, never ending in a backslash (which
 * would make gnuplot read the next line as more of the comment). */
static void gp_comment(FILE *f, const char *text)
{
    size_t n = strlen(text);
    fputs("# ", f);
    str_fputs(text, SINK_TEXT, f);
    fputs(n && text[n - 1] == '\\' ? " \n" : "\n", f);
}

static void gp_var_str(FILE *f, const char *name, const char *value, int text)
{
    fprintf(f, "%s = ", name);
    if (text)
        gp_text(f, value);
    else
        gp_quote(f, value);
    fputc('\n', f);
}

static void gp_var_num(FILE *f, const char *name, double v)
{
    fprintf(f, "%s = ", name);
    put_num(f, v);
    fputc('\n', f);
}

/* array NAME[n] = [...]. gnuplot needs at least one element, and parses the options of a
 * `plot for [i=1:0]` element even though it draws none: an empty array gets one valid
 * placeholder (a colour for a colour array, 1 for numbers). */
static void gp_array_str(FILE *f, const char *name, const char *const *v, size_t n, int text)
{
    fprintf(f, "array %s[%zu] = [", name, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputs(", ", f);
        if (text)
            gp_text(f, v[i]);
        else
            gp_quote(f, v[i]);
    }
    if (!n)
        fputs(strstr(name, "color") ? "'#000000'" : "''", f);
    fputs("]\n", f);
}

static void gp_array_num(FILE *f, const char *name, const double *v, size_t n)
{
    fprintf(f, "array %s[%zu] = [", name, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputs(", ", f);
        put_num(f, v[i]);
    }
    if (!n)
        fputs("1", f);
    fputs("]\n", f);
}

/* The runs' titles and colours (run_title, run_color, run_color_light) for runs idx[0..n). */
static int gp_runs(struct ctx *c, FILE *f, const int *idx, size_t n)
{
    const char **t = calloc(n ? n : 1, sizeof *t);
    const char **col = calloc(n ? n : 1, sizeof *col);
    char (*light)[12] = calloc(n ? n : 1, sizeof *light);
    if (!t || !col || !light) {
        free(t);
        free(col);
        free(light);
        return fail(c, PLOT_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const struct run *r = &c->runs[idx[i]];
        t[i] = r->label;
        col[i] = r->color;
        snprintf(light[i], sizeof light[i], "#b8%s", r->color + 1); /* 72% transparent */
    }
    fprintf(f, "nruns = %zu\n", n);
    gp_array_str(f, "run_title", t, n, 1);
    gp_array_str(f, "run_color", col, n, 0);
    for (size_t i = 0; i < n; i++)
        t[i] = light[i];
    gp_array_str(f, "run_color_light", t, n, 0);
    free(t);
    free(col);
    free(light);
    return 0;
}

/* Start a chart: register it, open its script and write the common variables. The chart's
 * file is NAME.EXT, its script NAME.gp. */
static int script_begin(struct ctx *c, struct out *o, const char *name, int w, int h,
                        const char *title, const char *subtitle, const char *desc)
{
    if (c->res) {
        plot_result *res = c->res;
        plot_chart *ch = realloc(res->charts, (res->n + 1) * sizeof *ch);
        if (!ch)
            return fail(c, PLOT_ENOMEM, "out of memory");
        res->charts = ch;
        ch = &res->charts[res->n++];
        memset(ch, 0, sizeof *ch);
        snprintf(ch->file, sizeof ch->file, "%s.%s", name, c->ext);
        snprintf(ch->script, sizeof ch->script, "%s.gp", name);
        snprintf(ch->desc, sizeof ch->desc, "%s", desc);
        ch->width = w;
        ch->height = h;
    }
    char script[200], file[200], head[800]; /* head: file and a description of < 512 bytes */
    snprintf(script, sizeof script, "%s.gp", name);
    snprintf(file, sizeof file, "%s.%s", name, c->ext);
    int rc = out_open(c, o, script, "w");
    if (rc)
        return rc;
    FILE *f = o->f;
    snprintf(head, sizeof head, "%s: %s", file, desc);
    gp_comment(f, head);
    fprintf(f, "# Written by ampdiag %s (ampdiag plot). Redraw with: cd THIS_DIRECTORY && gnuplot %s\n",
            ampdiag_version(), script);
    fprintf(f, "# The chart's variables come first, then the template; restyle by editing the\n"
               "# template (plots/*.gp where ampdiag is installed) or this copy.\n");
    gp_var_str(f, "outfile", file, 0);
    gp_var_str(f, "term", c->ext, 0);
    fprintf(f, "width = %d\nheight = %d\n", w, h);
    gp_var_str(f, "chart_title", title, 1);
    gp_var_str(f, "chart_subtitle", subtitle, 1);
    return 0;
}

/* Finish a chart script: append the template and close it. */
static int script_end(struct ctx *c, struct out *o, const char *tname)
{
    char tpath[PATH_MAX];
    if (snprintf(tpath, sizeof tpath, "%s/%s.gp", c->tdir, tname) >= (int)sizeof tpath) {
        out_abort(o);
        return fail(c, PLOT_EIO, "template path too long: '%s/%s.gp'", c->tdir, tname);
    }
    FILE *t = fopen(tpath, "r");
    if (!t) {
        int e = errno;
        out_abort(o);
        return fail(c, PLOT_EIO, "cannot read the chart template '%s': %s (set AMPDIAG_PLOTS_DIR "
                    "to the directory holding ampdiag's plots/*.gp)", tpath, strerror(e));
    }
    fputc('\n', o->f);
    fprintf_text(o->f, "# ---------------------------------------------------------------- template %s\n",
                 tpath);
    char buf[8192];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, t)) > 0)
        if (fwrite(buf, 1, k, o->f) != k)
            break;
    int bad = ferror(t);
    int e = errno;
    if (fclose(t) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        out_abort(o);
        return fail(c, PLOT_EIO, "cannot read the chart template '%s': %s", tpath, strerror(e));
    }
    return out_close(c, o);
}

/* ------------------------------------------------------------------------------------------
 * Loading the traces
 * ------------------------------------------------------------------------------------------ */

static int union_layer(struct ctx *c, const char *name)
{
    for (size_t i = 0; i < c->nunion; i++)
        if (strcmp(c->lname[i], name) == 0)
            return (int)i;
    return -1;
}

/* Every trace read (several at once: an_load_many), keeping the chart columns; c->an[0..n)
 * are then all in a state an_free accepts. 0, or the error of the first that failed. */
static int load_all(struct ctx *c, const char *const *paths, int n)
{
    an_options ao = {.warmup = -1, .quiet = 0,
                     .keep_points = 1u << AMPDIAG_KIND_ACTIVATION |
                                    1u << AMPDIAG_KIND_ACTIVATION_GRAD |
                                    1u << AMPDIAG_KIND_WEIGHT_GRAD,
                     .no_rms_series = 1};
    char err[1024] = "";
    int rc = 0;
    an_load_many(paths, (size_t)n, &ao, c->an, &rc, err, sizeof err);
    if (rc == AMPDIAG_TRACE_ENOMEM)
        return fail(c, PLOT_ENOMEM, "%s", err);
    if (rc)
        return fail(c, ampdiag_trace_err_is_io(rc) ? PLOT_EIO : PLOT_EINPUT, "%s", err);
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
        return fail(c, PLOT_ENOMEM, "out of memory");
    for (size_t i = 0; i < r->nlayers; i++) {
        int u = union_layer(c, r->layers[i].name);
        if (u < 0) {
            void *q = realloc(c->lname, (c->nunion + 1) * sizeof *c->lname);
            if (!q)
                return fail(c, PLOT_ENOMEM, "out of memory");
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
        return fail(c, PLOT_ENOMEM, "out of memory");
    for (size_t i = 0; i < c->nunion * NSER; i++) {
        r->ts[i].absmax = -1;
        r->ts[i].absmin_nz = INFINITY;
    }
    for (size_t l = 0; l < r->nlayers; l++)
        for (int s = 0; s < NSER; s++) {
            struct tser *ts = &r->ts[(size_t)r->lmap[l] * NSER + (size_t)s];
            const an_cell *cell = &r->layers[l].cell[ser_kind[s]];
            ts->c = r->layers[l].pts[ser_kind[s]].v;
            ts->n = r->layers[l].pts[ser_kind[s]].n;
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
        int dup = 0, same_before = 0;
        for (int j = 0; j < c->nruns; j++)
            if (j != i && strcmp(c->runs[j].precision, r->precision) == 0) {
                dup = 1;
                if (j < i)
                    same_before++;
            }
        (void)dup;
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
static void run_list(const struct ctx *c, const int *idx, size_t n, char *dst, size_t len)
{
    dst[0] = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(dst);
        snprintf(dst + k, len - k, "%s%s", i == 0 ? "" : (i + 1 == n ? " and " : ", "),
                 c->runs[idx[i]].label);
    }
}

/* "mlp on synthetic:blobs", from the first run. */
static void run_context(const struct ctx *c, char *dst, size_t len)
{
    const char *model = c->runs[0].a->model;
    const char *data = c->runs[0].a->data;
    snprintf(dst, len, "%.100s%s%.120s", model, *model && *data ? " on " : "", data);
}

static const an_step *find_step(const struct run *r, int64_t step)
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

/* ------------------------------------------------------------------------------------------
 * loss
 * ------------------------------------------------------------------------------------------ */

static int is_nonfinite_event(int code)
{
    return code == AMPDIAG_EV_NAN_FORWARD || code == AMPDIAG_EV_INF_FORWARD ||
           code == AMPDIAG_EV_NAN_BACKWARD || code == AMPDIAG_EV_INF_BACKWARD;
}

static int chart_loss(struct ctx *c)
{
    int rc;
    struct out d = {0}, e = {0}, m = {0}, s = {0};
    double lo = INFINITY, hi = -INFINITY, lopos = INFINITY;
    size_t nmax = 0, nskip = 0, nnan = 0, nfin = 0, nonpos = 0;
    for (int i = 0; i < c->nruns; i++) {
        const struct run *r = &c->runs[i];
        if (r->nsteps > nmax)
            nmax = r->nsteps;
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
    if (!(lo <= hi)) {
        lo = lopos = 0.1;
        hi = 10;
    }
    /* a log scale when the loss spans decades; a few zero losses (saturated logits) are then
     * left out of the chart rather than flattening the rest */
    int logy = lopos < INFINITY && hi / lopos > 20 && (double)nonpos <= 0.05 * (double)nfin;
    if (logy)
        lo = lopos;
    double ymin, ymax, ytop;
    if (logy) {
        ymin = lo / 1.25;
        ymax = hi * 1.6;
        ytop = hi * 1.3;
    } else {
        double span = hi - lo > 0 ? hi - lo : fmax(fabs(hi), 1) * 0.1;
        ymin = lo - 0.05 * span;
        ymax = hi + 0.15 * span;
        ytop = hi + 0.1 * span;
    }
    size_t w = smooth_window(nmax);

    if ((rc = out_open(c, &d, "loss.dat", "w")) || (rc = out_open(c, &e, "loss-eval.dat", "w")) ||
        (rc = out_open(c, &m, "loss-marks.dat", "w")))
        goto fail;
    fprintf(d.f, "# training loss per run (index = run - 1): step loss centred_mean_of_%zu_steps\n", w);
    fprintf(e.f, "# eval loss per run (index = run - 1): step loss metric\n");
    fprintf(m.f, "# markers per run: index 2(run-1) skipped steps, 2(run-1)+1 NaN/inf events; "
                 "step y (y = the loss, or the top of the chart where it is not finite)\n");
    int *has_eval = calloc((size_t)c->nruns, sizeof *has_eval);
    if (!has_eval) {
        rc = fail(c, PLOT_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < c->nruns; i++) {
        const struct run *r = &c->runs[i];
        fprintf_text(d.f, "# run %d: %s (%s)\n", i + 1, r->label, r->path);
        if (write_series_block(d.f, r, 0, w)) {
            free(has_eval);
            rc = fail(c, PLOT_ENOMEM, "out of memory");
            goto fail;
        }
        fprintf_text(e.f, "# run %d: %s\n", i + 1, r->label);
        for (size_t k = 0; k < r->nevals; k++) {
            fprintf(e.f, "%" PRId64 " ", r->evals[k].step);
            put_num(e.f, r->evals[k].loss);
            fputc(' ', e.f);
            put_num(e.f, r->evals[k].metric);
            fputc('\n', e.f);
            if (isfinite(r->evals[k].loss))
                has_eval[i] = 1;
        }
        if (!r->nevals)
            fputs("NaN NaN NaN\n", e.f);
        fputs("\n\n", e.f);
        /* skipped steps */
        fprintf_text(m.f, "# run %d: %s, skipped steps\n", i + 1, r->label);
        size_t k0 = 0, rows = 0;
        int64_t lastcol = INT64_MIN;
        for (size_t k = 0; k < r->nsteps; k++)
            if (r->steps[k].skipped) {
                k0++;
                if (!mark_due(r, r->steps[k].step, &lastcol))
                    continue;
                double y = isfinite(r->steps[k].loss) ? r->steps[k].loss : ytop;
                fprintf(m.f, "%" PRId64 " ", r->steps[k].step);
                put_num(m.f, y);
                fputc('\n', m.f);
                rows++;
            }
        if (!rows)
            fputs("NaN NaN\n", m.f);
        nskip += k0;
        fputs("\n\n", m.f);
        fprintf_text(m.f, "# run %d: %s, NaN/inf in forward or backward\n", i + 1, r->label);
        k0 = rows = 0;
        lastcol = INT64_MIN;
        int64_t last = INT64_MIN;
        for (size_t k = 0; k < r->nevents; k++) {
            const ampdiag_trace_event *ev = &r->events[k];
            if (!is_nonfinite_event(ev->code) || (k0 && ev->step == last))
                continue;
            last = ev->step;
            k0++;
            if (!mark_due(r, ev->step, &lastcol))
                continue;
            const an_step *st = find_step(r, ev->step);
            double y = st && isfinite(st->loss) ? st->loss : ytop;
            fprintf(m.f, "%" PRId64 " ", ev->step);
            put_num(m.f, y);
            fputc('\n', m.f);
            rows++;
        }
        if (!rows)
            fputs("NaN NaN\n", m.f);
        nnan += k0;
        fputs("\n\n", m.f);
    }
    if ((rc = out_close(c, &d)) || (rc = out_close(c, &e)) || (rc = out_close(c, &m))) {
        free(has_eval);
        goto fail;
    }

    const int *idx = c->all;
    char runs[200], ctxs[256], title[800], sub[512], desc[512];
    run_list(c, idx, (size_t)c->nruns, runs, sizeof runs);
    run_context(c, ctxs, sizeof ctxs);
    snprintf(title, sizeof title, "Training loss: %s%s%s", runs, *ctxs ? " - " : "", ctxs);
    if (w > 1)
        snprintf(sub, sizeof sub, "thin: every step; thick: centred mean over %zu steps; "
                 "dashed with dots: eval loss", w);
    else
        snprintf(sub, sizeof sub, "every step; dashed with dots: eval loss");
    snprintf(desc, sizeof desc, "training and eval loss of %s against step; skipped steps (%zu) "
             "and NaN/inf events (%zu) marked", runs, nskip, nnan);
    if ((rc = script_begin(c, &s, "loss", SINGLE_W, SINGLE_H, title, sub, desc))) {
        free(has_eval);
        goto fail;
    }
    rc = gp_runs(c, s.f, idx, (size_t)c->nruns);
    double *he = malloc((size_t)c->nruns * sizeof *he);
    if (!rc && !he)
        rc = fail(c, PLOT_ENOMEM, "out of memory");
    if (!rc) {
        for (int i = 0; i < c->nruns; i++)
            he[i] = has_eval[i];
        gp_array_num(s.f, "has_eval", he, (size_t)c->nruns);
        fprintf(s.f, "xmin = %" PRId64 "\nxmax = %" PRId64 "\n", c->xmin, c->xmax);
        gp_var_num(s.f, "ymin", ymin);
        gp_var_num(s.f, "ymax", ymax);
        fprintf(s.f, "logy = %d\nsmooth_w = %zu\nnskip = %zu\nnnonfinite = %zu\n", logy, w,
                nskip, nnan);
    }
    free(he);
    free(has_eval);
    if (rc)
        goto fail;
    return script_end(c, &s, "loss");
fail:
    out_abort(&d);
    out_abort(&e);
    out_abort(&m);
    out_abort(&s);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * loss-scale
 * ------------------------------------------------------------------------------------------ */

/* One block "step scale" of a run (the chart columns' rows of a long one); lo and hi take the
 * range of the valid scales. */
static int write_scale_block(struct ctx *c, FILE *f, const struct run *r, double *lo, double *hi)
{
    double *v = malloc((r->nsteps ? r->nsteps : 1) * sizeof *v);
    char *keep = malloc(r->nsteps ? r->nsteps : 1);
    if (!v || !keep) {
        free(v);
        free(keep);
        return fail(c, PLOT_ENOMEM, "out of memory");
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

static int chart_loss_scale(struct ctx *c)
{
    int *idx = malloc((size_t)c->nruns * sizeof *idx);
    if (!idx)
        return fail(c, PLOT_ENOMEM, "out of memory");
    size_t n = 0;
    for (int i = 0; i < c->nruns; i++)
        if (c->runs[i].scaled)
            idx[n++] = i;
    if (!n) {
        free(idx);
        note(c, "loss-scale: no run used a loss scale");
        return 0;
    }
    int rc;
    struct out d = {0}, m = {0}, s = {0};
    double lo = INFINITY, hi = -INFINITY;
    size_t nback = 0, ngrow = 0;
    if ((rc = out_open(c, &d, "loss-scale.dat", "w")) ||
        (rc = out_open(c, &m, "loss-scale-marks.dat", "w")))
        goto fail;
    fprintf(d.f, "# loss scale per run (index = run - 1): step scale\n");
    fprintf(m.f, "# per run: index 2(run-1) backoffs, 2(run-1)+1 growths; step scale_at_that_step\n");
    for (size_t j = 0; j < n; j++) {
        const struct run *r = &c->runs[idx[j]];
        fprintf_text(d.f, "# run %zu: %s (%s)\n", j + 1, r->label, r->path);
        if ((rc = write_scale_block(c, d.f, r, &lo, &hi)))
            goto fail;
        int have_events = 0;
        for (size_t k = 0; k < r->nevents; k++)
            if (r->events[k].code == AMPDIAG_EV_SCALE_BACKOFF ||
                r->events[k].code == AMPDIAG_EV_SCALE_GROWTH)
                have_events = 1;
        for (int g = 0; g < 2; g++) {
            int code = g ? AMPDIAG_EV_SCALE_GROWTH : AMPDIAG_EV_SCALE_BACKOFF;
            fprintf_text(m.f, "# run %zu: %s, %s\n", j + 1, r->label, g ? "growths" : "backoffs");
            size_t cnt = 0;
            int64_t lastcol = INT64_MIN;
            if (have_events) {
                for (size_t k = 0; k < r->nevents; k++) {
                    if (r->events[k].code != code)
                        continue;
                    const an_step *st = find_step(r, r->events[k].step);
                    double y = st ? st->loss_scale : NAN;
                    if (!(y > 0) || !isfinite(y))
                        continue;
                    /* an overflow at the minimum scale changes nothing: not a backoff (the
                     * analysis counts the same way) */
                    if (!g && !(r->events[k].value < y))
                        continue;
                    if (!mark_due(r, r->events[k].step, &lastcol))
                        continue;
                    fprintf(m.f, "%" PRId64 " ", r->events[k].step);
                    put_num(m.f, y);
                    fputc('\n', m.f);
                    cnt++;
                }
            } else {
                for (size_t k = 0; k + 1 < r->nsteps; k++) {
                    double a = r->steps[k].loss_scale, b = r->steps[k + 1].loss_scale;
                    if (!(a > 0) || !(b > 0) || !isfinite(a) || !isfinite(b) ||
                        (g ? !(b > a) : !(b < a)) || !mark_due(r, r->steps[k].step, &lastcol))
                        continue;
                    fprintf(m.f, "%" PRId64 " ", r->steps[k].step);
                    put_num(m.f, a);
                    fputc('\n', m.f);
                    cnt++;
                }
            }
            if (!cnt)
                fputs("NaN NaN\n", m.f);
            fputs("\n\n", m.f);
        }
        /* the counts of the findings: the same in run, info and compare */
        nback += r->a->backoffs;
        ngrow += r->a->growths;
    }
    if ((rc = out_close(c, &d)) || (rc = out_close(c, &m)))
        goto fail;
    if (!(lo <= hi))
        lo = hi = 1;
    /* y range: whole binades around the data, ticks every k binades */
    double elo = floor(log2(lo)) - 1, ehi = ceil(log2(hi)) + 1;
    int k = tic_binades(ehi - elo, 10);
    elo = floor(elo / k) * k;
    ehi = ceil(ehi / k) * k;
    char runs[200], ctxs[256], title[800], sub[512], desc[512];
    run_list(c, idx, n, runs, sizeof runs);
    run_context(c, ctxs, sizeof ctxs);
    snprintf(title, sizeof title, "Loss scale: %s%s%s", runs, *ctxs ? " - " : "", ctxs);
    char unscaled[200] = "";
    if (n < (size_t)c->nruns) {
        int *un = malloc((size_t)c->nruns * sizeof *un);
        size_t nu = 0;
        if (!un) {
            rc = fail(c, PLOT_ENOMEM, "out of memory");
            goto fail;
        }
        for (int i = 0; i < c->nruns; i++)
            if (!c->runs[i].scaled)
                un[nu++] = i;
        char list[160];
        run_list(c, un, nu, list, sizeof list);
        snprintf(unscaled, sizeof unscaled, "; %s: no loss scaling", list);
        free(un);
    }
    snprintf(sub, sizeof sub, "the factor the loss is multiplied by before the backward pass; "
             "%zu backoff%s, %zu growth%s%s", nback, nback == 1 ? "" : "s", ngrow,
             ngrow == 1 ? "" : "s", unscaled);
    snprintf(desc, sizeof desc, "loss scale (log2) of %s against step; backoffs (%zu) and "
             "growths (%zu) marked", runs, nback, ngrow);
    if ((rc = script_begin(c, &s, "loss-scale", SINGLE_W, SINGLE_H, title, sub, desc)) ||
        (rc = gp_runs(c, s.f, idx, n)))
        goto fail;
    fprintf(s.f, "xmin = %" PRId64 "\nxmax = %" PRId64 "\n", c->xmin, c->xmax);
    fprintf(s.f, "ymin = 2.0**%d\nymax = 2.0**%d\nytic = 2.0**%d\n", (int)elo, (int)ehi, k);
    fprintf(s.f, "nbackoff = %zu\nngrowth = %zu\n", nback, ngrow);
    free(idx);
    return script_end(c, &s, "loss-scale");
fail:
    free(idx);
    out_abort(&d);
    out_abort(&m);
    out_abort(&s);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * grad-norm
 * ------------------------------------------------------------------------------------------ */

static int chart_grad_norm(struct ctx *c)
{
    int rc;
    struct out d = {0}, l = {0}, s = {0};
    double lo = INFINITY, hi = -INFINITY;
    size_t nmax = 0;
    for (int i = 0; i < c->nruns; i++) {
        const struct run *r = &c->runs[i];
        if (r->nsteps > nmax)
            nmax = r->nsteps;
        for (size_t k = 0; k < r->nsteps; k++) {
            double v = r->steps[k].grad_norm;
            if (isfinite(v) && v > 0) {
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
        }
    }
    size_t w = smooth_window(nmax);
    /* clip lines: the one asked for, then the runs' own (merged when equal) */
    double clipv[16];
    char clipt[16][160];
    char clipc[16][8];
    int clipdt[16];
    size_t nclip = 0;
    if (isfinite(c->opt->clip) && c->opt->clip > 0) {
        clipv[nclip] = c->opt->clip;
        if (c->opt->clip_label)
            snprintf(clipt[nclip], sizeof clipt[0], "%s", c->opt->clip_label);
        else
            snprintf(clipt[nclip], sizeof clipt[0], "clip value %.4g", c->opt->clip);
        snprintf(clipc[nclip], sizeof clipc[0], "#000000");
        clipdt[nclip++] = 2;
    }
    for (int i = 0; i < c->nruns && nclip < 16; i++) {
        const struct run *r = &c->runs[i];
        if (!(r->clip > 0))
            continue;
        int all_same = 1;
        for (int j = 0; j < c->nruns; j++)
            if (c->runs[j].clip != r->clip)
                all_same = 0;
        if (all_same && c->nruns > 1) {
            if (i > 0)
                continue;
            snprintf(clipt[nclip], sizeof clipt[0], "clip used by the runs: %.4g", r->clip);
            snprintf(clipc[nclip], sizeof clipc[0], "#666666");
        } else {
            snprintf(clipt[nclip], sizeof clipt[0], "clip used by %s: %.4g", r->label, r->clip);
            snprintf(clipc[nclip], sizeof clipc[0], "%s", r->color);
        }
        clipv[nclip] = r->clip;
        clipdt[nclip++] = 3;
    }
    for (size_t i = 0; i < nclip; i++) {
        lo = fmin(lo, clipv[i]);
        hi = fmax(hi, clipv[i]);
    }
    if (!(lo <= hi)) {
        lo = 0.1;
        hi = 10;
    }
    int logy = hi / lo > 20;
    double ymin = logy ? lo / 1.5 : 0, ymax = logy ? hi * 1.8 : hi * 1.15 + 1e-30;

    if ((rc = out_open(c, &d, "grad-norm.dat", "w")) ||
        (rc = out_open(c, &l, "grad-norm-clip.dat", "w")))
        goto fail;
    fprintf(d.f, "# global gradient L2 norm (unscaled, before clipping) per run (index = run - 1): "
                 "step norm centred_mean_of_%zu_steps\n", w);
    for (int i = 0; i < c->nruns; i++) {
        fprintf_text(d.f, "# run %d: %s (%s)\n", i + 1, c->runs[i].label, c->runs[i].path);
        if (write_series_block(d.f, &c->runs[i], 1, w)) {
            rc = fail(c, PLOT_ENOMEM, "out of memory");
            goto fail;
        }
    }
    fprintf(l.f, "# clip values (index = line - 1): step value\n");
    for (size_t i = 0; i < nclip; i++) {
        fprintf_text(l.f, "# %s\n", clipt[i]);
        fprintf(l.f, "%" PRId64 " %.9g\n%" PRId64 " %.9g\n\n\n", c->xmin, clipv[i], c->xmax, clipv[i]);
    }
    if (!nclip)
        fputs("NaN NaN\n", l.f);
    if ((rc = out_close(c, &d)) || (rc = out_close(c, &l)))
        goto fail;

    const int *idx = c->all;
    char runs[200], ctxs[256], title[800], sub[256], desc[512];
    run_list(c, idx, (size_t)c->nruns, runs, sizeof runs);
    run_context(c, ctxs, sizeof ctxs);
    snprintf(title, sizeof title, "Gradient norm: %s%s%s", runs, *ctxs ? " - " : "", ctxs);
    if (w > 1)
        snprintf(sub, sizeof sub, "global L2 norm of the unscaled gradients before clipping; "
                 "thin: every step, thick: centred mean over %zu steps", w);
    else
        snprintf(sub, sizeof sub, "global L2 norm of the unscaled gradients before clipping");
    snprintf(desc, sizeof desc, "gradient norm (unscaled, before clipping) of %s against step%s",
             runs, nclip ? ", with the clip value drawn" : "");
    if ((rc = script_begin(c, &s, "grad-norm", SINGLE_W, SINGLE_H, title, sub, desc)) ||
        (rc = gp_runs(c, s.f, idx, (size_t)c->nruns)))
        goto fail;
    fprintf(s.f, "xmin = %" PRId64 "\nxmax = %" PRId64 "\n", c->xmin, c->xmax);
    gp_var_num(s.f, "ymin", ymin);
    gp_var_num(s.f, "ymax", ymax);
    fprintf(s.f, "logy = %d\nnclip = %zu\n", logy, nclip);
    const char *ct[16], *cc[16];
    double cd[16];
    for (size_t i = 0; i < nclip; i++) {
        ct[i] = clipt[i];
        cc[i] = clipc[i];
        cd[i] = clipdt[i];
    }
    gp_array_str(s.f, "clip_title", ct, nclip, 1);
    gp_array_str(s.f, "clip_color", cc, nclip, 0);
    gp_array_num(s.f, "clip_dt", cd, nclip);
    return script_end(c, &s, "grad-norm");
fail:
    out_abort(&d);
    out_abort(&l);
    out_abort(&s);
    return rc;
}

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

static void gp_limits(FILE *f)
{
    const ampdiag_format_info *h = ampdiag_format_get(AMPDIAG_FP16);
    const ampdiag_format_info *b = ampdiag_format_get(AMPDIAG_BF16);
    fprintf(f, "fp16_max = %.9g\nfp16_min_normal = %.9g\nfp16_min_subnormal = %.9g\n",
            (double)h->max_finite, (double)h->min_normal, (double)h->min_subnormal);
    fprintf(f, "bf16_max = %.9g\nbf16_min_normal = %.9g\nbf16_min_subnormal = %.9g\n",
            (double)b->max_finite, (double)b->min_normal, (double)b->min_subnormal);
}

/* The distinct records (one per step) a range chart draws of a column, in step order: those
 * holding the column's extremes of absmax, absmin_nz and the inf/NaN fraction, and the last
 * (the FP16 fractions are the heatmap's). */
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

static void write_range_row(FILE *f, const an_point *p)
{
    fprintf(f, "%" PRId64 " ", p->step);
    put_num(f, p->absmax);
    fputc(' ', f);
    put_num(f, p->absmin_nz);
    fputc(' ', f);
    put_num(f, p->nonfinite);
    fputc('\n', f);
}

static int chart_layer_ranges(struct ctx *c, int si)
{
    int kind = ser_kind[si];
    /* panels: selected layers with records of this kind in some run */
    int panel[MAX_PANELS + 1];
    size_t np = 0;
    for (size_t i = 0; i < c->nsel && np < MAX_PANELS; i++) {
        int u = c->sel[i], any = 0;
        for (int r = 0; r < c->nruns; r++)
            if (c->runs[r].ts[(size_t)u * NSER + (size_t)si].n)
                any = 1;
        if (any)
            panel[np++] = u;
    }
    if (!np) {
        note(c, "layer-ranges-%s: no %s recorded", kind_name(kind), ser_words[si]);
        return 0;
    }
    size_t avail = 0; /* layers holding this kind at all */
    for (size_t u = 0; u < c->nunion; u++)
        for (int r = 0; r < c->nruns; r++)
            if (c->runs[r].ts[u * NSER + (size_t)si].n) {
                avail++;
                break;
            }
    char name[96];
    snprintf(name, sizeof name, "layer-ranges-%s", kind_name(kind));
    char dname[128];
    snprintf(dname, sizeof dname, "%s.dat", name);
    int rc;
    struct out d = {0}, s = {0};
    double lo = INFINITY, hi = -INFINITY;
    int scaled_grads = 0;
    size_t nnonfinite = 0;
    if ((rc = out_open(c, &d, dname, "w")))
        return rc;
    fprintf(d.f, "# %s per layer and run (index = (panel - 1) * nruns + run - 1): step absmax "
                 "absmin_nz (smallest non-zero |x|) nonfinite (fraction of inf/NaN values; "
                 "absmax and absmin_nz are of the finite values)\n", kind_name(kind));
    for (size_t p = 0; p < np; p++)
        for (int r = 0; r < c->nruns; r++) {
            const struct run *run = &c->runs[r];
            const struct tser *ts = &run->ts[(size_t)panel[p] * NSER + (size_t)si];
            fprintf_text(d.f, "# layer %s, run %d: %s\n", c->lname[panel[p]], r + 1, run->label);
            for (size_t k = 0; k < ts->n; k++) {
                const an_point *pt[AN_NROLES];
                size_t nk = column_points(&ts->c[k], pt);
                for (size_t j = 0; j < nk; j++) {
                    write_range_row(d.f, pt[j]);
                    if (pt[j]->nonfinite > 0)
                        nnonfinite++;
                    if (isfinite(pt[j]->absmax))
                        hi = fmax(hi, pt[j]->absmax);
                    if (isfinite(pt[j]->absmin_nz))
                        lo = fmin(lo, pt[j]->absmin_nz);
                    else if (isfinite(pt[j]->absmax))
                        lo = fmin(lo, pt[j]->absmax);
                }
            }
            if (!ts->n)
                fputs("NaN NaN NaN NaN\n", d.f);
            fputs("\n\n", d.f);
            if (ts->n && run->scaled && kind != AMPDIAG_KIND_ACTIVATION)
                scaled_grads = 1;
        }
    if ((rc = out_close(c, &d)))
        goto fail;
    double ymin, ymax, ytic;
    magnitude_axis(lo, hi, &ymin, &ymax, &ytic);

    const int *idx = c->all;
    char runs[200], ctxs[256], title[800], sub[512], desc[512];
    run_list(c, idx, (size_t)c->nruns, runs, sizeof runs);
    run_context(c, ctxs, sizeof ctxs);
    snprintf(title, sizeof title, "Range of %s per layer: %s%s%s", ser_words[si], runs,
             *ctxs ? " - " : "", ctxs);
    char shown[160] = "";
    if (np < avail)
        snprintf(shown, sizeof shown, "; %zu of %zu layers%s (choose with --layers)", np, avail,
                 c->sel_auto ? ", those with the least FP16 headroom" : "");
    snprintf(sub, sizeof sub, "thick: largest |x|, thin: smallest non-zero |x|, as held in "
             "the run%s%s", scaled_grads ? " (loss-scaled runs: gradients times the loss scale)"
             : "", shown);
    snprintf(desc, sizeof desc, "per layer (%zu panels): largest and smallest non-zero |x| of %s "
             "against step for %s, FP16/BF16 limits as bands", np, ser_words[si], runs);
    if ((rc = script_begin(c, &s, name, MULTI_W, MULTI_H, title, sub, desc)) ||
        (rc = gp_runs(c, s.f, idx, (size_t)c->nruns)))
        goto fail;
    gp_var_str(s.f, "datafile", dname, 0);
    fprintf(s.f, "npanels = %zu\n", np);
    const char *pt[MAX_PANELS];
    for (size_t p = 0; p < np; p++)
        pt[p] = c->lname[panel[p]];
    gp_array_str(s.f, "panel_title", pt, np, 1);
    fprintf(s.f, "xmin = %" PRId64 "\nxmax = %" PRId64 "\n", c->xmin, c->xmax);
    gp_var_num(s.f, "ymin", ymin);
    gp_var_num(s.f, "ymax", ymax);
    gp_var_num(s.f, "ytic", ytic);
    fprintf(s.f, "nnonfinite = %zu\n", nnonfinite);
    gp_limits(s.f);
    return script_end(c, &s, "layer-ranges");
fail:
    out_abort(&d);
    out_abort(&s);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * fp16-heatmap-RUN
 * ------------------------------------------------------------------------------------------ */

static int write_f32(struct ctx *c, const char *name, const float *v, size_t n)
{
    struct out o = {0};
    int rc = out_open(c, &o, name, "wb");
    if (rc)
        return rc;
    if (n && fwrite(v, sizeof *v, n, o.f) != n) {
        int e = errno;
        out_abort(&o);
        return fail(c, PLOT_EIO, "cannot write '%s/%s': %s", c->outdir, name, strerror(e));
    }
    return out_close(c, &o);
}

static int chart_heatmap(struct ctx *c, const struct run *r)
{
    /* columns: the recorded steps (stride = their gcd), merged to at most HEAT_MAX_COLS */
    int64_t smin = INT64_MAX, smax = INT64_MIN, stride = 0;
    for (size_t i = 0; i < c->nunion * NSER; i++)
        for (size_t k = 0; k < r->ts[i].n; k++) {
            int64_t st = an_column_start(r->a, &r->ts[i].c[k]);
            if (st < smin) smin = st;
            if (st > smax) smax = st;
        }
    if (smin > smax) {
        note(c, "fp16-heatmap-%s: no tensor records in '%s'", r->tag, r->path);
        return 0;
    }
    for (size_t i = 0; i < c->nunion * NSER; i++)
        for (size_t k = 0; k < r->ts[i].n; k++)
            stride = gcd64(stride, an_column_start(r->a, &r->ts[i].c[k]) - smin);
    if (stride <= 0)
        stride = 1;
    int64_t ncols0 = (smax - smin) / stride + 1;
    int64_t merge = (ncols0 + HEAT_MAX_COLS - 1) / HEAT_MAX_COLS;
    size_t ncols = (size_t)((ncols0 + merge - 1) / merge);
    int64_t dx = stride * merge;

    /* rows per kind: layers (in union order) this run recorded that kind for */
    int rc = 0;
    size_t nrows[NSER], first[NSER], total = 0;
    int *rows = malloc((c->nunion ? c->nunion : 1) * NSER * sizeof *rows);
    float *m = NULL;
    const char **rname = NULL;
    struct out s = {0};
    if (!rows)
        return fail(c, PLOT_ENOMEM, "out of memory");
    for (int si = 0; si < NSER; si++) {
        first[si] = total;
        nrows[si] = 0;
        for (size_t u = 0; u < c->nunion; u++)
            if (r->ts[u * NSER + (size_t)si].n) {
                rows[total++] = (int)u;
                nrows[si]++;
            }
    }
    size_t maxrows = 0;
    for (int si = 0; si < NSER; si++)
        if (nrows[si] > maxrows)
            maxrows = nrows[si];
    m = malloc(ncols * (maxrows ? maxrows : 1) * sizeof *m);
    rname = malloc((total ? total : 1) * sizeof *rname);
    if (!m || !rname) {
        rc = fail(c, PLOT_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < total; i++)
        rname[i] = c->lname[rows[i]];

    /* panels: (kind, underflow|overflow), kinds that have rows */
    const char *pfile[2 * NSER], *ptitle[2 * NSER];
    char pf[2 * NSER][160], ptt[2 * NSER][160];
    double pfirst[2 * NSER], pnrows[2 * NSER], pover[2 * NSER];
    size_t npanel = 0;
    double maxfrac[2] = {0, 0};
    for (int si = 0; si < NSER; si++) {
        if (!nrows[si])
            continue;
        for (int ov = 0; ov < 2; ov++) {
            snprintf(pf[npanel], sizeof pf[0], "fp16-heatmap-%s-%s-%s.bin", r->tag,
                     kind_name(ser_kind[si]), ov ? "overflow" : "underflow");
            for (size_t i = 0; i < ncols * nrows[si]; i++)
                m[i] = NAN;
            double peak = 0;
            for (size_t j = 0; j < nrows[si]; j++) {
                const struct tser *ts = &r->ts[(size_t)rows[first[si] + j] * NSER + (size_t)si];
                for (size_t k = 0; k < ts->n; k++) {
                    const an_column *cl = &ts->c[k];
                    float v = ov ? cl->role[AN_ROLE_OVER].over : cl->role[AN_ROLE_UNDER].under;
                    if (isnan(v))
                        continue;
                    size_t col = (size_t)((an_column_start(r->a, cl) - smin) / dx);
                    float *cell = &m[j * ncols + col];
                    if (isnan(*cell) || v > *cell)
                        *cell = v;
                    if (v > peak)
                        peak = v;
                }
            }
            if (peak > maxfrac[ov])
                maxfrac[ov] = peak;
            if ((rc = write_f32(c, pf[npanel], m, ncols * nrows[si])))
                goto done;
            if (peak > 0)
                snprintf(ptt[npanel], sizeof ptt[0], "%s: %s (peak %.3g%%)", ser_words[si],
                         ov ? "overflow in FP16 or inf/NaN" : "would underflow in FP16", 100 * peak);
            else
                snprintf(ptt[npanel], sizeof ptt[0], "%s: %s (none)", ser_words[si],
                         ov ? "overflow in FP16 or inf/NaN" : "would underflow in FP16");
            pfile[npanel] = pf[npanel];
            ptitle[npanel] = ptt[npanel];
            pfirst[npanel] = (double)first[si];
            pnrows[npanel] = (double)nrows[si];
            pover[npanel] = ov;
            npanel++;
        }
    }
    char name[128], ctxs[256], title[800], sub[512], desc[512];
    snprintf(name, sizeof name, "fp16-heatmap-%s", r->tag);
    run_context(c, ctxs, sizeof ctxs);
    snprintf(title, sizeof title, "FP16 underflow and overflow per layer: %s run (%s)%s%s",
             r->label, r->path, *ctxs ? " - " : "", ctxs);
    int is16 = r->a->prec == PREC_FP16;
    snprintf(sub, sizeof sub, "fraction that would round to 0 (underflow) or to inf (overflow) "
             "in FP16%s%s; grey: not recorded%s",
             is16 ? "; an FP16 run holds FP16 values: underflowed ones are zeros" : "",
             r->scaled ? "; gradients times the loss scale" : "",
             merge > 1 || r->a->env_width > 1 ? "; a column: the most of several steps" : "");
    snprintf(desc, sizeof desc, "layer x step heatmaps of the fraction of %s's activations and "
             "gradients that would underflow / overflow in FP16 (peak %.3g%% / %.3g%%)", r->label,
             100 * maxfrac[0], 100 * maxfrac[1]);
    if ((rc = script_begin(c, &s, name, MULTI_W, MULTI_H, title, sub, desc)))
        goto done;
    fprintf(s.f, "npanels = %zu\nncols = %zu\n", npanel, ncols);
    fprintf(s.f, "x0 = %" PRId64 "\ndx = %" PRId64 "\n", smin, dx);
    fprintf(s.f, "xmin = %.1f\nxmax = %.1f\n", (double)smin - 0.5 * (double)dx,
            (double)smin + ((double)ncols - 0.5) * (double)dx);
    gp_array_str(s.f, "panel_file", pfile, npanel, 0);
    gp_array_str(s.f, "panel_title", ptitle, npanel, 1);
    gp_array_num(s.f, "panel_first", pfirst, npanel);
    gp_array_num(s.f, "panel_rows", pnrows, npanel);
    gp_array_num(s.f, "panel_overflow", pover, npanel);
    gp_array_str(s.f, "row_name", rname, total, 1);
    fprintf(s.f, "row_font = %d\nrow_every = %zu\n", maxrows > 16 ? 7 : 9,
            maxrows > 30 ? (maxrows + 29) / 30 : 1);
    rc = script_end(c, &s, "fp16-heatmap");
done:
    out_abort(&s);
    free(rows);
    free(m);
    free(rname);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * exponent-histogram-RUN-LAYER
 * ------------------------------------------------------------------------------------------ */

/* The histogram steps to draw: the nearest recorded one to each asked for, or up to 4 spread
 * over the run. */
static size_t pick_hist_steps(const struct ctx *c, const struct run *r, int64_t *out)
{
    size_t n = 0;
    if (!r->nhsteps)
        return 0;
    if (c->opt->hist_steps && c->opt->nhist_steps) {
        for (size_t i = 0; i < c->opt->nhist_steps && n < MAX_HIST_STEPS; i++) {
            int64_t want = c->opt->hist_steps[i];
            size_t best = 0;
            for (size_t k = 1; k < r->nhsteps; k++)
                if (llabs(r->hsteps[k] - want) < llabs(r->hsteps[best] - want))
                    best = k;
            int dup = 0;
            for (size_t j = 0; j < n; j++)
                if (out[j] == r->hsteps[best])
                    dup = 1;
            if (!dup)
                out[n++] = r->hsteps[best];
        }
        /* ascending */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && out[j - 1] > out[j]; j--) {
                int64_t t = out[j];
                out[j] = out[j - 1];
                out[j - 1] = t;
            }
        return n;
    }
    size_t want = r->nhsteps < 4 ? r->nhsteps : 4;
    for (size_t i = 0; i < want; i++) {
        size_t k = want > 1 ? (size_t)llround((double)i * (double)(r->nhsteps - 1) /
                                              (double)(want - 1)) : 0;
        if (!n || out[n - 1] != r->hsteps[k])
            out[n++] = r->hsteps[k];
    }
    return n;
}

/* Union layer u in a file name: its name reduced to [A-Za-z0-9._-], with "-N" (N = u + 1)
 * added when a layer charted before it reduces to the same ("a|b" and "a b"). */
static void layer_file_part(const struct ctx *c, int u, char *dst, size_t n)
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

static int chart_hist(struct ctx *c, const struct run *r, int u)
{
    int layer = -1; /* index in this run */
    for (size_t i = 0; i < r->nlayers; i++)
        if (r->lmap[i] == u)
            layer = (int)i;
    if (layer < 0 || !r->nhsteps)
        return 0;
    int64_t steps[MAX_HIST_STEPS];
    size_t ns = pick_hist_steps(c, r, steps);
    static const int hk[2] = {AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT_GRAD};
    /* hist[panel][step] */
    ampdiag_trace_hist *h = calloc(2 * MAX_HIST_STEPS, sizeof *h);
    int have[2][MAX_HIST_STEPS];
    memset(have, 0, sizeof have);
    if (!h)
        return fail(c, PLOT_ENOMEM, "out of memory");
    int rc = 0;
    struct out d = {0}, s = {0};
    {
        ampdiag_trace_hist got[2 * MAX_HIST_STEPS];
        int gh[2 * MAX_HIST_STEPS];
        char err[512] = "";
        if ((rc = an_read_hists(r->a, layer, hk, 2, steps, ns, got, gh, err, sizeof err))) {
            rc = fail(c, rc == AMPDIAG_TRACE_ENOMEM ? PLOT_ENOMEM
                         : ampdiag_trace_err_is_io(rc) ? PLOT_EIO : PLOT_EINPUT, "%s", err);
            goto done;
        }
        for (int p = 0; p < 2; p++)
            for (size_t k = 0; k < ns; k++)
                if (gh[(size_t)p * ns + k]) {
                    h[(size_t)p * MAX_HIST_STEPS + k] = got[(size_t)p * ns + k];
                    have[p][k] = 1;
                }
    }
    int panels[2];
    size_t np = 0;
    for (int p = 0; p < 2; p++)
        for (size_t k = 0; k < ns; k++)
            if (have[p][k]) {
                panels[np++] = p;
                break;
            }
    if (!np)
        goto done; /* no gradient histograms of this layer */

    char name[200], dname[220];
    snprintf(name, sizeof name, "exponent-histogram-%s-", r->tag);
    layer_file_part(c, u, name + strlen(name), sizeof name - strlen(name));
    snprintf(dname, sizeof dname, "%s.dat", name);
    if ((rc = out_open(c, &d, dname, "w")))
        goto done;
    fprintf_text(d.f, "# log2 exponent histograms of %s in %s (%s): index ((panel - 1) * nsteps + "
                      "step_number - 1) * 2 + {0: as held, 1: unscaled}; columns: x = e + 0.5 (bin "
                      "centre, |x| in [2^e, 2^(e+1))), fraction of the tensor's values (0: empty bin)\n",
                 c->lname[u], r->label, r->path);
    double xlo = -26, xhi = 17, ymin = 1;
    const char *stitle[2 * MAX_HIST_STEPS];
    char stt[2 * MAX_HIST_STEPS][128];
    double shift[MAX_HIST_STEPS];
    int any_scaled = 0;
    for (size_t k = 0; k < ns; k++) {
        const an_step *st = find_step(r, steps[k]);
        double sc = st ? st->loss_scale : 1;
        shift[k] = r->scaled && isfinite(sc) && sc > 0 && sc != 1 ? log2(sc) : 0;
        if (shift[k] != 0)
            any_scaled = 1;
    }
    for (size_t pi = 0; pi < np; pi++) {
        int p = panels[pi];
        for (size_t k = 0; k < ns; k++) {
            const ampdiag_trace_hist *hh = &h[(size_t)p * MAX_HIST_STEPS + k];
            uint64_t total = 0;
            for (int b = 0; b < AMPDIAG_HIST_BINS; b++)
                total += hh->bin[b];
            for (int sh = 0; sh < 2; sh++) {
                fprintf(d.f, "# %s, step %" PRId64 ", %s\n", kind_name(hk[p]), steps[k],
                        sh ? "unscaled (divided by the loss scale)" : "as held");
                size_t rows = 0;
                /* every bin from one below the first non-empty one to one above the last,
                 * empty ones as 0, so that the steps drop where nothing is */
                int b0 = AMPDIAG_HIST_NEXP, b1 = -1;
                for (int b = 0; b < AMPDIAG_HIST_NEXP; b++)
                    if (hh->bin[b]) {
                        if (b < b0)
                            b0 = b;
                        b1 = b;
                    }
                if (have[p][k] && total && b1 >= 0 && (sh == 0 || shift[k] != 0))
                    for (int b = b0 - 1; b <= b1 + 1; b++) {
                        double x = (double)(b + AMPDIAG_HIST_EMIN) + 0.5 - (sh ? shift[k] : 0);
                        double fr = b >= 0 && b < AMPDIAG_HIST_NEXP
                                        ? (double)hh->bin[b] / (double)total : 0;
                        fprintf(d.f, "%.6g %.9g\n", x, fr);
                        if (fr > 0) {
                            xlo = fmin(xlo, x - 2.5);
                            xhi = fmax(xhi, x + 2.5);
                            ymin = fmin(ymin, fr);
                        }
                        rows++;
                    }
                if (!rows)
                    fputs("NaN NaN\n", d.f);
                fputs("\n\n", d.f);
            }
            double zero = total ? (double)hh->bin[AMPDIAG_HIST_ZERO] / (double)total : 0;
            uint64_t nf = hh->bin[AMPDIAG_HIST_POSINF] + hh->bin[AMPDIAG_HIST_NEGINF] +
                          hh->bin[AMPDIAG_HIST_NAN];
            if (!have[p][k])
                snprintf(stt[pi * MAX_HIST_STEPS + k], sizeof stt[0], "step %" PRId64
                         ": not recorded", steps[k]);
            else
                snprintf(stt[pi * MAX_HIST_STEPS + k], sizeof stt[0], "step %" PRId64
                         " (zeros %.2g%%, inf/NaN %.2g%%)", steps[k], 100 * zero,
                         total ? 100 * (double)nf / (double)total : 0);
        }
    }
    if ((rc = out_close(c, &d)))
        goto done;
    size_t nt = 0;
    for (size_t pi = 0; pi < np; pi++)
        for (size_t k = 0; k < ns; k++)
            stitle[nt++] = stt[pi * MAX_HIST_STEPS + k];

    char ctxs[256], title[800], sub[512], desc[512];
    run_context(c, ctxs, sizeof ctxs);
    snprintf(title, sizeof title, "Exponent histograms of %s's gradients: %s run (%s)%s%s",
             c->lname[u], r->label, r->path, *ctxs ? " - " : "", ctxs);
    int same_shift = 1;
    for (size_t k = 1; k < ns; k++)
        if (shift[k] != shift[0])
            same_shift = 0;
    if (any_scaled && same_shift)
        snprintf(sub, sizeof sub, "solid: as held in the run (times the loss scale, %.6g = 2^%g), "
                 "dashed: unscaled; shaded: what FP16 and BF16 represent", exp2(shift[0]),
                 shift[0]);
    else if (any_scaled)
        snprintf(sub, sizeof sub, "solid: as held in the run (times the loss scale of that step), "
                 "dashed: unscaled; shaded: what FP16 and BF16 represent");
    else
        snprintf(sub, sizeof sub, "shaded: the exponents FP16 and BF16 represent (normal and "
                 "subnormal)");
    snprintf(desc, sizeof desc, "log2 exponent histograms of layer %s's gradients in %s at "
             "%zu steps, FP16/BF16 windows shaded%s", c->lname[u], r->label, ns,
             any_scaled ? ", as held (loss-scaled) and unscaled" : "");
    if ((rc = script_begin(c, &s, name, HIST_W, HIST_H, title, sub, desc)))
        goto done;
    gp_var_str(s.f, "datafile", dname, 0);
    fprintf(s.f, "npanels = %zu\nnsteps = %zu\nscaled = %d\n", np, ns, any_scaled);
    const char *ptitle[2];
    for (size_t pi = 0; pi < np; pi++)
        ptitle[pi] = panels[pi] == 0 ? "activation gradients" : "weight gradients";
    gp_array_str(s.f, "panel_title", ptitle, np, 1);
    gp_array_str(s.f, "step_title", stitle, nt, 1);
    gp_array_num(s.f, "step_shift", shift, ns);
    gp_var_num(s.f, "xmin", floor(xlo));
    gp_var_num(s.f, "xmax", ceil(xhi));
    double ylo = pow(10, floor(log10(ymin)) - 0.3);
    gp_var_num(s.f, "ymin", ylo);
    gp_var_num(s.f, "ymax", 2.0);
    fprintf(s.f, "fp16_emin = -14\nfp16_emax = 15\nfp16_esub = -24\n"
                 "bf16_emin = -126\nbf16_emax = 127\nbf16_esub = -133\n");
    rc = script_end(c, &s, "exponent-histogram");
done:
    out_abort(&d);
    out_abort(&s);
    free(h);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * Layer choice
 * ------------------------------------------------------------------------------------------ */

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

static int select_layers(struct ctx *c)
{
    c->sel = malloc((c->nunion ? c->nunion : 1) * sizeof *c->sel);
    c->hsel = malloc((c->nunion ? c->nunion : 1) * sizeof *c->hsel);
    if (!c->sel || !c->hsel)
        return fail(c, PLOT_ENOMEM, "out of memory");
    if (c->opt->layers && c->opt->nlayers) {
        for (size_t i = 0; i < c->opt->nlayers; i++) {
            int u = union_layer(c, c->opt->layers[i]);
            if (u < 0) {
                char known[512] = "";
                for (size_t k = 0; k < c->nunion && strlen(known) + 80 < sizeof known; k++)
                    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                             k ? ", " : "", c->lname[k]);
                return fail(c, PLOT_EINPUT, "--layers: no layer '%s' in %s (layers: %s)",
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
            note(c, "layer-ranges: only the first %d of the %zu layers asked for are drawn",
                 MAX_PANELS, c->nsel);
        return 0;
    }
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
            return fail(c, PLOT_ENOMEM, "out of memory");
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
    /* histograms: the layer with parameters whose gradients underflow most in FP16 (then the
     * smallest non-zero gradient, then the first) */
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
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Output directory, draw-all.sh, running gnuplot
 * ------------------------------------------------------------------------------------------ */

static int make_dirs(struct ctx *c, const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return fail(c, PLOT_EINPUT, "output directory name too long: '%s'", dir);
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = 0;
    for (char *s = p + 1; ; s++) {
        int end = *s == 0;
        if (*s == '/' || end) {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return fail(c, PLOT_EIO, "cannot create the output directory '%s': %s", p,
                            strerror(errno));
            if (!end)
                *s = '/';
        }
        if (end)
            break;
    }
    struct stat st;
    if (stat(p, &st) != 0)
        return fail(c, PLOT_EIO, "cannot use the output directory '%s': %s", p, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return fail(c, PLOT_EINPUT, "-o '%s' exists and is not a directory", p);
    if (access(p, W_OK) != 0)
        return fail(c, PLOT_EIO, "cannot write in the output directory '%s': %s", p,
                    strerror(errno));
    return 0;
}

static int write_draw_all(struct ctx *c)
{
    struct out o = {0};
    int rc = out_open(c, &o, "draw-all.sh", "w");
    if (rc)
        return rc;
    fprintf(o.f, "#!/bin/sh\n# Redraw every chart of this directory (written by ampdiag %s).\n"
                 "cd \"$(dirname \"$0\")\" || exit 1\nstatus=0\n", ampdiag_version());
    for (size_t i = 0; c->res && i < c->res->n; i++)
        fprintf(o.f, "gnuplot %s || status=1\n", c->res->charts[i].script);
    fprintf(o.f, "exit $status\n");
    rc = out_close(c, &o);
    if (!rc && chmod(o.path, 0755) != 0)
        return fail(c, PLOT_EIO, "cannot make '%s' executable: %s", o.path, strerror(errno));
    return rc;
}

struct job {
    pid_t pid;
    size_t chart;
    char log[PATH_MAX];
};

/* Start gnuplot on one chart's script, in the output directory, stderr into NAME.log. */
static int job_start(struct ctx *c, struct job *j, size_t chart, int *missing)
{
    plot_chart *ch = &c->res->charts[chart];
    const char *prog = c->opt->gnuplot && *c->opt->gnuplot ? c->opt->gnuplot : "gnuplot";
    char stem[160];
    snprintf(stem, sizeof stem, "%s", ch->script);
    char *dot = strrchr(stem, '.');
    if (dot)
        *dot = 0;
    snprintf(j->log, sizeof j->log, "%s/%s.log", c->outdir, stem);
    /* gnuplot runs `cd` first so that the script's relative file names work (a directory whose
     * name holds a control character is not found: escaped, it cannot end the command) */
    size_t cl = STR_ESCAPED_SIZE(strlen(c->outdir)) + 8;
    char *cdcmd = malloc(cl);
    if (!cdcmd)
        return fail(c, PLOT_ENOMEM, "out of memory");
    memcpy(cdcmd, "cd '", 4);
    str_escape(cdcmd + 4, cl - 5, c->outdir, SINK_GP);
    strcat(cdcmd, "'");
    char *argv[] = {(char *)prog, (char *)"-d", (char *)"-e", cdcmd, ch->script, NULL};
    posix_spawn_file_actions_t fa;
    int e = posix_spawn_file_actions_init(&fa);
    if (e) {
        free(cdcmd);
        return fail(c, PLOT_ENOMEM, "cannot run gnuplot: %s", strerror(e));
    }
    if ((e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) ||
        (e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)) ||
        (e = posix_spawn_file_actions_addopen(&fa, 2, j->log, O_WRONLY | O_CREAT | O_TRUNC, 0644))) {
        posix_spawn_file_actions_destroy(&fa);
        free(cdcmd);
        return fail(c, PLOT_ENOMEM, "cannot run gnuplot: %s", strerror(e));
    }
    e = posix_spawnp(&j->pid, prog, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(cdcmd);
    j->chart = chart;
    if (e) {
        j->pid = -1;
        if (unlink(j->log) != 0 && errno != ENOENT) {
            /* the log is only a by-product */
        }
        if (e == ENOENT || e == EACCES || e == ENOTDIR) {
            *missing = 1;
            snprintf(ch->message, sizeof ch->message, "cannot run %s: %s", prog, strerror(e));
            return 0;
        }
        snprintf(ch->message, sizeof ch->message, "cannot run %s: %s", prog, strerror(e));
        return fail(c, PLOT_EGNUPLOT, "cannot run %s for %s: %s", prog, ch->script, strerror(e));
    }
    return 0;
}

/* Wait for a job; fill in its chart's outcome. Returns 1 when gnuplot was not found. */
static int job_finish(struct ctx *c, struct job *j)
{
    plot_chart *ch = &c->res->charts[j->chart];
    int status = 0;
    pid_t w;
    do
        w = waitpid(j->pid, &status, 0);
    while (w < 0 && errno == EINTR);
    j->pid = -1;
    if (w < 0) {
        snprintf(ch->message, sizeof ch->message, "lost track of gnuplot: %s", strerror(errno));
        return 0;
    }
    /* the first line of what gnuplot said */
    FILE *f = fopen(j->log, "r");
    long size = 0;
    if (f) {
        char line[256] = "";
        if (fseek(f, 0, SEEK_END) == 0)
            size = ftell(f);
        rewind(f);
        while (size > 0 && fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = 0;
            const char *t = line;
            while (*t == ' ' || *t == '\t' || *t == '^')
                t++;
            if (*t) {
                snprintf(ch->message, sizeof ch->message, "%s", t);
                /* gnuplot echoes the failing line, then a line with '^', then the message:
                 * prefer a line that says "warning" or names the script */
                if (strstr(t, "warning") || strstr(t, ch->script))
                    break;
            }
        }
        if (fclose(f) != 0) {
            /* read-only: nothing was lost */
        }
    }
    if (size == 0 && unlink(j->log) != 0 && errno != ENOENT) {
        /* an empty log left behind is harmless */
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && size == 0) {
        snprintf(ch->message, sizeof ch->message, "gnuplot could not be run");
        return 1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (!ch->message[0])
            snprintf(ch->message, sizeof ch->message, "gnuplot %s %d",
                     WIFEXITED(status) ? "exited with status" : "was killed by signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 0;
    }
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", c->outdir, ch->file);
    if (stat(path, &st) != 0 || st.st_size == 0) {
        snprintf(ch->message, sizeof ch->message, "gnuplot exited 0 but wrote no %s", ch->file);
        return 0;
    }
    ch->drawn = 1;
    ch->warned = size > 0;
    return 0;
}

/* 1 when prog (a path, or a name looked up on PATH as execvp does) is an executable file. */
static int program_exists(const char *prog)
{
    if (strchr(prog, '/'))
        return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/bin:/usr/bin";
    size_t plen = strlen(prog);
    for (const char *p = path;;) {
        const char *e = strchr(p, ':');
        size_t dlen = e ? (size_t)(e - p) : strlen(p);
        char f[PATH_MAX];
        if (dlen + plen + 2 <= sizeof f) {
            if (dlen)
                memcpy(f, p, dlen);
            else
                f[dlen++] = '.'; /* an empty PATH entry is the current directory */
            f[dlen] = '/';
            memcpy(f + dlen + 1, prog, plen + 1);
            struct stat st;
            if (stat(f, &st) == 0 && S_ISREG(st.st_mode) && access(f, X_OK) == 0)
                return 1;
        }
        if (!e)
            return 0;
        p = e + 1;
    }
}

static int draw_all(struct ctx *c)
{
    size_t n = c->res->n;
    if (!n)
        return 0;
    const char *prog = c->opt->gnuplot && *c->opt->gnuplot ? c->opt->gnuplot : "gnuplot";
    if (!program_exists(prog)) {
        c->res->gnuplot_missing = 1;
        for (size_t i = 0; i < n; i++)
            snprintf(c->res->charts[i].message, sizeof c->res->charts[i].message,
                     "%s not found", prog);
        return fail(c, PLOT_ENOGNUPLOT, "%s was not found (install gnuplot, e.g. apt-get install "
                    "gnuplot-nox); the data and scripts are in '%s': run draw-all.sh there where "
                    "gnuplot is installed", prog, c->outdir);
    }
    long jobs = c->opt->jobs > 0 ? c->opt->jobs : sysconf(_SC_NPROCESSORS_ONLN);
    if (jobs < 1)
        jobs = 1;
    if (jobs > 16)
        jobs = 16;
    struct job *job = calloc(n, sizeof *job);
    if (!job)
        return fail(c, PLOT_ENOMEM, "out of memory");
    int missing = 0, rc = 0;
    size_t head = 0, next = 0; /* charts [head, next) are started and not yet waited for */
    while (head < n) {
        while (next < n && next - head < (size_t)jobs && !missing && !rc) {
            job[next].pid = -1;
            rc = job_start(c, &job[next], next, &missing);
            next++;
        }
        if (head == next)
            break;
        if (job[head].pid >= 0 && job_finish(c, &job[head]))
            missing = 1;
        head++;
    }
    free(job);
    if (rc)
        return rc;
    if (missing) {
        c->res->gnuplot_missing = 1;
        return fail(c, PLOT_ENOGNUPLOT, "%s was not found (install gnuplot, e.g. apt-get install "
                    "gnuplot-nox); the data and scripts are in '%s': run draw-all.sh there where "
                    "gnuplot is installed", prog, c->outdir);
    }
    for (size_t i = 0; i < n; i++) {
        const plot_chart *ch = &c->res->charts[i];
        if (!ch->drawn)
            return fail(c, PLOT_EGNUPLOT, "gnuplot failed on '%s/%s': %s", c->outdir, ch->script,
                        ch->message[0] ? ch->message : "no output");
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Public functions
 * ------------------------------------------------------------------------------------------ */

void plot_options_init(plot_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->format = PLOT_PNG;
    opt->clip = NAN;
    opt->draw = 1;
}

void plot_result_free(plot_result *res)
{
    if (!res)
        return;
    free(res->charts);
    res->charts = NULL;
    res->n = 0;
}

int plot_exit_status(int rc)
{
    switch (rc) {
    case PLOT_OK:
        return 0;
    case PLOT_EINPUT:
        return 2;
    default:
        return 3;
    }
}

static int has_template(const char *dir)
{
    char p[PATH_MAX];
    if (!dir || !*dir || snprintf(p, sizeof p, "%s/loss.gp", dir) >= (int)sizeof p)
        return 0;
    return access(p, R_OK) == 0;
}

const char *plot_templates_dir(void)
{
    const char *env = getenv("AMPDIAG_PLOTS_DIR");
    if (env && *env)
        return env;
    static const char installed[] = AMPDIAG_PKGDATADIR "/plots";
    static const char source[] = AMPDIAG_SRCDIR "/plots";
    if (AMPDIAG_PKGDATADIR[0] && has_template(installed))
        return installed;
    if (AMPDIAG_SRCDIR[0] && has_template(source))
        return source;
    return AMPDIAG_PKGDATADIR[0] ? installed : "plots";
}

int plot_traces(const char *const *paths, int n, const char *outdir, const plot_options *opt,
                plot_result *res, char *err, size_t errlen)
{
    plot_options dflt;
    if (!opt) {
        plot_options_init(&dflt);
        opt = &dflt;
    }
    if (err && errlen)
        err[0] = 0;
    plot_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.opt = opt;
    c.outdir = outdir;
    c.res = res;
    c.err = err;
    c.errlen = errlen;
    c.ext = opt->format == PLOT_SVG ? "svg" : "png";
    c.xmin = INT64_MAX;
    c.xmax = INT64_MIN;
    int rc = 0;
    if (!paths || n < 1) {
        rc = fail(&c, PLOT_EINPUT, "no trace to plot");
        goto out;
    }
    if (!outdir || !*outdir) {
        rc = fail(&c, PLOT_EINPUT, "no output directory (-o DIR)");
        goto out;
    }
    if (opt->format != PLOT_PNG && opt->format != PLOT_SVG) {
        rc = fail(&c, PLOT_EINPUT, "unknown chart format %d (png or svg)", (int)opt->format);
        goto out;
    }
    if (!isnan(opt->clip) && !(opt->clip > 0 && isfinite(opt->clip))) {
        rc = fail(&c, PLOT_EINPUT, "--clip: expected a positive number, got %g", opt->clip);
        goto out;
    }
    c.tdir = opt->templates && *opt->templates ? opt->templates : plot_templates_dir();
    if (!has_template(c.tdir)) {
        rc = fail(&c, PLOT_EIO, "the chart templates are not in '%s' (no loss.gp there); set "
                  "AMPDIAG_PLOTS_DIR to the directory holding ampdiag's plots/*.gp", c.tdir);
        goto out;
    }
    c.runs = calloc((size_t)n, sizeof *c.runs);
    c.an = calloc((size_t)n, sizeof *c.an);
    if (!c.runs || !c.an) {
        rc = fail(&c, PLOT_ENOMEM, "out of memory");
        goto out;
    }
    c.nruns = n;
    c.all = malloc((size_t)n * sizeof *c.all);
    if (!c.all) {
        rc = fail(&c, PLOT_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = load_all(&c, paths, n)))
        goto out;
    for (int i = 0; i < n; i++) {
        c.all[i] = i;
        c.runs[i].path = paths[i];
        if ((rc = load_run(&c, &c.runs[i], &c.an[i])))
            goto out;
        for (size_t k = 0; k < c.runs[i].nsteps; k++) {
            int64_t s = c.runs[i].steps[k].step;
            if (s < c.xmin) c.xmin = s;
            if (s > c.xmax) c.xmax = s;
        }
    }
    for (int i = 0; i < n; i++)
        if ((rc = load_tensors(&c, &c.runs[i])))
            goto out;
    if (c.xmin > c.xmax) {
        if (n == 1)
            rc = fail(&c, PLOT_EINPUT, "nothing to plot: '%s' holds no step records", paths[0]);
        else
            rc = fail(&c, PLOT_EINPUT, "nothing to plot: the traces hold no step records");
        goto out;
    }
    if (c.xmax == c.xmin)
        c.xmax = c.xmin + 1;
    an_label_runs(c.an, (size_t)n);
    name_runs(&c);
    if ((rc = select_layers(&c)) || (rc = make_dirs(&c, outdir)))
        goto out;

    if ((rc = chart_loss(&c)) || (rc = chart_loss_scale(&c)) || (rc = chart_grad_norm(&c)))
        goto out;
    for (int si = 0; si < NSER; si++)
        if ((rc = chart_layer_ranges(&c, si)))
            goto out;
    for (int i = 0; i < n; i++)
        if ((rc = chart_heatmap(&c, &c.runs[i])))
            goto out;
    for (int i = 0; i < n; i++) {
        if (!c.runs[i].nhsteps) {
            note(&c, "exponent-histogram: no histograms in '%s'", paths[i]);
            continue;
        }
        for (size_t k = 0; k < c.nhsel; k++)
            if ((rc = chart_hist(&c, &c.runs[i], c.hsel[k])))
                goto out;
    }
    if ((rc = write_draw_all(&c)))
        goto out;
    if (opt->draw)
        rc = draw_all(&c);
out:
    if (c.runs)
        for (int i = 0; i < c.nruns; i++)
            free_run(&c.runs[i]);
    if (c.an)
        for (int i = 0; i < c.nruns; i++)
            an_free(&c.an[i]);
    free(c.runs);
    free(c.an);
    free(c.all);
    free(c.lname);
    free(c.sel);
    free(c.hsel);
    if (res == &local)
        plot_result_free(res);
    return rc;
}
