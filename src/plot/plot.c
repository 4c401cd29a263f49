/*
 * plot.c - gnuplot charts of one or more traces (see plot.h for the list of charts): the table
 * of chart descriptions and the one driver that makes every chart from it (plot_internal.h).
 *
 * Runs keep one colour and label on every chart: the colour follows the precision (fp32 grey,
 * fp16 blue, bf16 vermillion, bf16-pure purple; a second run of the same precision gets a
 * lighter shade), the label is compare's (the precision, with lr / seed / file name where two
 * runs would read the same). A chart's title names what it shows, the runs it draws and their
 * model and data, each run's own.
 */
#include "plot/plot_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef AMPDIAG_PKGDATADIR
#define AMPDIAG_PKGDATADIR ""
#endif
#ifndef AMPDIAG_SRCDIR
#define AMPDIAG_SRCDIR ""
#endif

/* The charts, in the order they are made (plot_result.charts). */
static const chart_def chart_defs[] = {
    {"loss", 1200, 650, EACH_ONE, chart_loss},
    {"loss-scale", 1200, 650, EACH_ONE, chart_loss_scale},
    {"grad-norm", 1200, 650, EACH_ONE, chart_grad_norm},
    {"layer-ranges", 1200, 900, EACH_KIND, chart_layer_ranges},
    {"fp16-heatmap", 1200, 900, EACH_RUN_COLUMN, chart_heatmap},
    {"quant-heatmap", 1200, 900, EACH_RUN_QUANT, chart_quant},
    {"exponent-histogram", 1200, 800, EACH_RUN_LAYER, chart_hist},
    {"ranks", 1200, 1000, EACH_RANKS_RUN, chart_ranks},
};

/* The title: what the chart shows, then its runs (a run's file for a per-run chart) and their
 * model and data. */
static void chart_title(const struct ctx *c, const chart *ch, char *dst, size_t n)
{
    char runs[300], ctxs[600];
    run_list(c, ch->runs.v, ch->runs.n, runs, sizeof runs);
    run_context(c, ch->runs.v, ch->runs.n, ctxs, sizeof ctxs);
    if (ch->run >= 0)
        snprintf(dst, n, "%s: %s run (%s)%s%s", ch->what, runs, c->runs[ch->run].path, *ctxs ? " - " : "", ctxs);
    else
        snprintf(dst, n, "%s: %s%s%s", ch->what, runs, *ctxs ? " - " : "", ctxs);
}

/* One chart of a description: its data and words (the description's make function), then its
 * script. 0 (also when it draws nothing, having said why) or a PLOT_E code. */
static int make_chart(struct ctx *c, const chart_def *d, int run, int sub)
{
    chart ch;
    memset(&ch, 0, sizeof ch);
    ch.run = run;
    ch.sub = sub;
    ch.vars = open_memstream(&ch.vbuf, &ch.vlen);
    if (!ch.vars)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    int rc = d->make(c, &ch);
    if (fclose(ch.vars) != 0 && !rc)
        rc = plot_fail(c, PLOT_ENOMEM, "out of memory");
    if (!rc) {
        char title[1400];
        chart_title(c, &ch, title, sizeof title);
        rc = gp_script(c, d, &ch, title);
    }
    free(ch.vbuf);
    vec_free(&ch.runs);
    return rc == CHART_SKIPPED ? 0 : rc;
}

/* Every instance of a description. */
static int make_charts(struct ctx *c, const chart_def *d)
{
    int rc = 0;
    switch (d->each) {
    case EACH_ONE:
        return make_chart(c, d, -1, -1);
    case EACH_KIND:
        for (int si = 0; si < NSER && !rc; si++)
            rc = make_chart(c, d, -1, si);
        return rc;
    case EACH_RUN_COLUMN:
        for (int i = 0; i < c->nruns && !rc; i++) {
            int cols[AN_CHART_WI];
            size_t n = plot_whatif_columns(c, c->runs[i].a, 0, cols);
            for (size_t k = 0; k < n && !rc; k++)
                rc = make_chart(c, d, i, cols[k]);
        }
        return rc;
    case EACH_RUN_QUANT:
        for (int i = 0; i < c->nruns && !rc; i++) {
            int cols[AN_MAX_WHATIF];
            size_t n = plot_quant_columns(c, c->runs[i].a, cols, AN_MAX_WHATIF);
            for (size_t k = 0; k < n && !rc; k++)
                rc = make_chart(c, d, i, cols[k]);
        }
        return rc;
    case EACH_RUN_LAYER:
        for (int i = 0; i < c->nruns && !rc; i++) {
            if (!c->runs[i].nhsteps)
                plot_note(c, "exponent-histogram: no histograms in '%s'", c->runs[i].path);
            for (size_t k = 0; c->runs[i].nhsteps && k < c->nhsel && !rc; k++)
                rc = make_chart(c, d, i, c->hsel[k]);
        }
        return rc;
    case EACH_RANKS_RUN:
        for (int i = 0; i < c->nruns && !rc; i++)
            if (c->runs[i].a->ranks)
                rc = make_chart(c, d, i, -1);
        return rc;
    }
    return rc;
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

/* The options that can be wrong before anything is read. */
static int check_options(struct ctx *c, const char *const *paths, int n, const char *outdir)
{
    const plot_options *opt = c->opt;
    if (!paths || n < 1)
        return plot_fail(c, PLOT_EINPUT, "no trace to plot");
    if (!outdir || !*outdir)
        return plot_fail(c, PLOT_EINPUT, "no output directory (-o DIR)");
    if (opt->format != PLOT_PNG && opt->format != PLOT_SVG)
        return plot_fail(c, PLOT_EINPUT, "unknown chart format %d (png or svg)", (int)opt->format);
    if (!isnan(opt->clip) && !(opt->clip > 0 && isfinite(opt->clip)))
        return plot_fail(c, PLOT_EINPUT, "--clip: expected a positive number, got %g", opt->clip);
    c->tdir = opt->templates && *opt->templates ? opt->templates : plot_templates_dir();
    if (!has_template(c->tdir))
        return plot_fail(c, PLOT_EIO, "the chart templates are not in '%s' (no loss.gp there); set "
                         "AMPDIAG_PLOTS_DIR to the directory holding ampdiag's plots/*.gp", c->tdir);
    c->runs = calloc((size_t)n, sizeof *c->runs);
    c->an = calloc((size_t)n, sizeof *c->an);
    if (!c->runs || !c->an)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    c->nruns = n;
    return 0;
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
    int rc = check_options(&c, paths, n, outdir);
    if (!rc)
        rc = plot_load(&c, paths, n);
    if (!rc && !(rc = plot_select_layers(&c)))
        rc = plot_make_dirs(&c, outdir);
    for (size_t k = 0; !rc && k < sizeof chart_defs / sizeof chart_defs[0]; k++)
        rc = make_charts(&c, &chart_defs[k]);
    if (!rc)
        rc = plot_write_draw_all(&c);
    if (!rc && opt->draw)
        rc = plot_draw_all(&c);
    plot_free_runs(&c);
    free(c.runs);
    free(c.an);
    free(c.lname);
    free(c.sel);
    free(c.hsel);
    if (res == &local)
        plot_result_free(res);
    return rc;
}
