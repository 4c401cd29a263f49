/*
 * plot_gp.c - gnuplot's files (plot_internal.h): the output files, numbers and strings as a
 * script reads them (escaped for their context: util/escape.h), a chart's script (its common
 * variables, the runs' colours and titles, the chart's own variables, its template), and the
 * axes and format bands the charts share.
 */
#include "plot/plot_internal.h"
#include "util/escape.h"
#include "util/path.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int plot_fail(struct ctx *c, int rc, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

void plot_note(struct ctx *c, const char *fmt, ...)
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

/* Smallest k in 1, 2, 4, ... with span / k <= maxtics. */
int tic_binades(double span, int maxtics)
{
    int k = 1;
    while (span / k > maxtics && k < 1024)
        k *= 2;
    return k;
}

int out_open(struct ctx *c, struct out *o, const char *name, const char *mode)
{
    if (snprintf(o->path, sizeof o->path, "%s/%s", c->outdir, name) >= (int)sizeof o->path)
        return plot_fail(c, PLOT_EINPUT, "output path too long: '%s/%s'", c->outdir, name);
    char why[160];
    (void)mode; /* every output is written, binary or not: replaced only where a regular file */
    o->f = path_fopen_output(o->path, why, sizeof why);
    if (!o->f)
        return plot_fail(c, PLOT_EIO, "cannot create '%s': %s", o->path, why);
    return 0;
}

int out_close(struct ctx *c, struct out *o)
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
        return plot_fail(c, PLOT_EIO, "cannot write '%s': %s", o->path, strerror(e ? e : EIO));
    return 0;
}

/* Abandon a file after an earlier error (the error already set wins). */
void out_abort(struct out *o)
{
    if (o->f && fclose(o->f) != 0) {
        /* nothing to add: the caller is already failing */
    }
    o->f = NULL;
}

void put_num(FILE *f, double v)
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

void gp_var_str(FILE *f, const char *name, const char *value, int text)
{
    fprintf(f, "%s = ", name);
    if (text)
        gp_text(f, value);
    else
        gp_quote(f, value);
    fputc('\n', f);
}

void gp_var_num(FILE *f, const char *name, double v)
{
    fprintf(f, "%s = ", name);
    put_num(f, v);
    fputc('\n', f);
}

/* array NAME[n] = [...]. gnuplot needs at least one element, and parses the options of a
 * `plot for [i=1:0]` element even though it draws none: an empty array gets one valid
 * placeholder (a colour for a colour array, 1 for numbers). */
void gp_array_str(FILE *f, const char *name, const char *const *v, size_t n, int text)
{
    fprintf(f, "array %s[%zu] = [", name, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputs(", ", f);
        if (text == GP_TIC_LABEL) { /* a tic label is also a format: escape.h, SINK_GP_TIC */
            fputc('\'', f);
            str_fputs(v[i], SINK_GP_TIC, f);
            fputc('\'', f);
        } else if (text) {
            gp_text(f, v[i]);
        } else {
            gp_quote(f, v[i]);
        }
    }
    if (!n)
        fputs(strstr(name, "color") ? "'#000000'" : "''", f);
    fputs("]\n", f);
}

void gp_array_num(FILE *f, const char *name, const double *v, size_t n)
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

int write_f32(struct ctx *c, const char *name, const float *v, size_t n)
{
    struct out o = {0};
    int rc = out_open(c, &o, name, "wb");
    if (rc)
        return rc;
    if (n && fwrite(v, sizeof *v, n, o.f) != n) {
        int e = errno;
        out_abort(&o);
        return plot_fail(c, PLOT_EIO, "cannot write '%s/%s': %s", c->outdir, name, strerror(e));
    }
    return out_close(c, &o);
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
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
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

/* Text as an array of lines of at most width characters (broken between words), for a heading
 * that must fit the chart: NAME[1..COUNT]. */
static void gp_lines(FILE *f, const char *name, const char *count, const char *text, size_t width)
{
    const char *line[4];
    char buf[4][400];
    size_t n = 0;
    const char *p = text;
    while (*p && n < 4) {
        size_t len = strlen(p), take = len;
        if (len > width && n < 3) {
            take = width;
            while (take > 0 && p[take] != ' ')
                take--;
            if (take == 0)
                take = width;
        }
        snprintf(buf[n], sizeof buf[n], "%.*s", (int)(take < sizeof buf[n] ? take : sizeof buf[n] - 1), p);
        line[n] = buf[n];
        n++;
        p += take;
        while (*p == ' ')
            p++;
    }
    fprintf(f, "%s = %zu\n", count, n);
    gp_array_str(f, name, line, n, 1);
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
            return plot_fail(c, PLOT_ENOMEM, "out of memory");
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
    gp_lines(f, "title_line", "ntitle", title, 150);
    gp_lines(f, "sub_line", "nsub", subtitle, 190);
    /* the heading: the title's lines, then the subtitle's, smaller */
    fputs("chart_head = ''\ndo for [i=1:ntitle] { chart_head = chart_head.(i > 1 ? \"\\n\" : '').title_line[i] }\n"
          "do for [i=1:nsub] { chart_head = chart_head.\"\\n{/*0.85 \".sub_line[i].'}' }\n"
          "head_lines = ntitle + nsub\n", f);
    return 0;
}

/* Finish a chart script: append the template and close it. */
static int script_end(struct ctx *c, struct out *o, const char *tname)
{
    char tpath[PATH_MAX];
    if (snprintf(tpath, sizeof tpath, "%s/%s.gp", c->tdir, tname) >= (int)sizeof tpath) {
        out_abort(o);
        return plot_fail(c, PLOT_EIO, "template path too long: '%s/%s.gp'", c->tdir, tname);
    }
    FILE *t = fopen(tpath, "r");
    if (!t) {
        int e = errno;
        out_abort(o);
        return plot_fail(c, PLOT_EIO, "cannot read the chart template '%s': %s (set AMPDIAG_PLOTS_DIR "
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
        return plot_fail(c, PLOT_EIO, "cannot read the chart template '%s': %s", tpath, strerror(e));
    }
    return out_close(c, o);
}

int gp_script(struct ctx *c, const chart_def *d, chart *ch, const char *title)
{
    struct out s = {0};
    int rc = script_begin(c, &s, ch->name, d->w, d->h, title, ch->subtitle, ch->desc);
    if (rc)
        return rc;
    if ((rc = gp_runs(c, s.f, ch->runs.v, ch->runs.n))) {
        out_abort(&s);
        return rc;
    }
    if (ch->vlen && fwrite(ch->vbuf, 1, ch->vlen, s.f) != ch->vlen) {
        int e = errno;
        out_abort(&s);
        return plot_fail(c, PLOT_EIO, "cannot write '%s': %s", s.path, strerror(e ? e : EIO));
    }
    return script_end(c, &s, d->tmpl);
}

/* ------------------------------------------------------------------------------------------
 * Axes
 * ------------------------------------------------------------------------------------------ */

/* One tic of a log10 axis, as "'label' value". */
static void log_tic(FILE *f, double v, int *first)
{
    fprintf(f, "%s'%g' %.17g", *first ? "" : ", ", v, v);
    *first = 0;
}

void gp_log10_tics(FILE *f, double lo, double hi)
{
    if (!(lo > 0) || !(hi >= lo) || !isfinite(hi)) {
        lo = 0.1;
        hi = 10;
    }
    int e0 = (int)floor(log10(lo)), e1 = (int)ceil(log10(hi));
    int decades = e1 - e0 > 0 ? e1 - e0 : 1;
    int step = (decades + MAX_LOG_LABELS - 1) / MAX_LOG_LABELS; /* decades between labels */
    static const double few[] = {1, 2, 5}, some[] = {1, 3};
    const double *mult = decades <= 2 ? few : decades <= 4 ? some : NULL;
    size_t nm = decades <= 2 ? 3 : decades <= 4 ? 2 : 1;
    fputs("ytics_spec = \"(", f);
    int first = 1;
    for (int e = (int)(floor((double)e0 / step) * step); e <= e1; e += step)
        for (size_t k = 0; k < nm; k++) {
            double v = (mult ? mult[k] : 1) * pow(10, e);
            if (v >= lo / 1.0001 && v <= hi * 1.0001)
                log_tic(f, v, &first);
        }
    if (first) /* nothing inside: the ends */
        log_tic(f, lo, &first), log_tic(f, hi, &first);
    fputs(")\"\n", f);
    fprintf(f, "mytics_n = %d\n", step > 1 ? 1 : decades <= 4 ? 10 : 10);
}

/* ------------------------------------------------------------------------------------------
 * Format bands
 * ------------------------------------------------------------------------------------------ */

struct bands {
    double lo[MAX_BANDS], hi[MAX_BANDS], alpha[MAX_BANDS], kalpha[MAX_BANDS];
    const char *color[MAX_BANDS], *kcolor[MAX_BANDS];
    char ktitle[MAX_BANDS][160];
    size_t n, nk;
};

/* A format's colours (out of range, subnormal): FP16 red / orange, BF16 purple / lilac, then
 * others. */
static void band_colors(const an_whatif_col *w, size_t i, const char **out, const char **sub)
{
    static const char *const pal[][2] = {{"#d62728", "#ff9f1c"}, {"#7b3294", "#c2a5cf"},
                                         {"#1b7837", "#a6dba0"}, {"#01665e", "#80cdc1"},
                                         {"#8c510a", "#dfc27d"}, {"#4d4d4d", "#bababa"}};
    size_t k = w->lib_format == AMPDIAG_FP16 ? 0 : w->lib_format == AMPDIAG_BF16 ? 1 : 2 + i % 4;
    *out = pal[k][0];
    *sub = pal[k][1];
}

static void band_add(struct bands *b, double lo, double hi, double ymin, double ymax, const char *col,
                     double alpha, int *shown)
{
    lo = fmax(lo, ymin);
    hi = fmin(hi, ymax);
    *shown = lo < hi;
    if (!*shown || b->n >= MAX_BANDS)
        return;
    b->lo[b->n] = lo;
    b->hi[b->n] = hi;
    b->color[b->n] = col;
    b->alpha[b->n++] = alpha;
}

static void band_key(struct bands *b, const char *col, double alpha, const char *title)
{
    if (b->nk >= MAX_BANDS)
        return;
    b->kcolor[b->nk] = col;
    b->kalpha[b->nk] = alpha;
    snprintf(b->ktitle[b->nk++], sizeof b->ktitle[0], "%s", title);
}

/* One format's bands and the legend entries of those drawn. */
static void format_bands(struct bands *b, const an_whatif_col *w, size_t i, double ymin, double ymax)
{
    const char *out, *sub;
    band_colors(w, i, &out, &sub);
    char name[64], t[160];
    size_t k = 0;
    for (; w->format[k] && k + 1 < sizeof name; k++)
        name[k] = (char)(w->format[k] >= 'a' && w->format[k] <= 'z' ? w->format[k] - 'a' + 'A' : w->format[k]);
    name[k] = 0;
    double flush = w->min_subnormal / 2; /* |x| <= this rounds to 0 */
    int over, low, subn;
    band_add(b, w->max_finite, INFINITY, ymin, ymax, out, 0.16, &over);
    band_add(b, 0, flush, ymin, ymax, out, 0.10, &low);
    band_add(b, flush, w->min_normal, ymin, ymax, sub, 0.2, &subn);
    if (over && low)
        snprintf(t, sizeof t, "%s: > %.6g or <= 2^%g (inf or 0)", name, w->max_finite, log2(flush));
    else if (over)
        snprintf(t, sizeof t, "%s: > %.6g (inf)", name, w->max_finite);
    else if (low)
        snprintf(t, sizeof t, "%s: <= 2^%g (rounds to 0)", name, log2(flush));
    if (over || low)
        band_key(b, out, 0.3, t);
    if (subn) {
        snprintf(t, sizeof t, "%s subnormal: 2^%g..2^%g", name, log2(w->min_subnormal), log2(w->min_normal));
        band_key(b, sub, 0.35, t);
    }
}

void gp_format_bands(FILE *f, const an_run *r, const int *cols, size_t ncols, double ymin, double ymax)
{
    struct bands b;
    memset(&b, 0, sizeof b);
    for (size_t i = 0; i < ncols; i++) {
        int dup = 0; /* a format once, whatever its scalings */
        for (size_t j = 0; j < i; j++)
            dup |= cols[j] >= 0 && cols[j] < r->nwcol && strcmp(r->wcol[cols[j]].format, r->wcol[cols[i]].format) == 0;
        if (!dup && cols[i] >= 0 && cols[i] < r->nwcol)
            format_bands(&b, &r->wcol[cols[i]], i, ymin, ymax);
    }
    const char *kt[MAX_BANDS];
    for (size_t i = 0; i < b.nk; i++)
        kt[i] = b.ktitle[i];
    fprintf(f, "band_n = %zu\nbkey_n = %zu\n", b.n, b.nk);
    gp_array_num(f, "band_lo", b.lo, b.n);
    gp_array_num(f, "band_hi", b.hi, b.n);
    gp_array_str(f, "band_color", b.color, b.n, 0);
    gp_array_num(f, "band_alpha", b.alpha, b.n);
    gp_array_str(f, "bkey_color", b.kcolor, b.nk, 0);
    gp_array_num(f, "bkey_alpha", b.kalpha, b.nk);
    gp_array_str(f, "bkey_title", kt, b.nk, 1);
}
